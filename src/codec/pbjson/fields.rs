//! Selectable field values read straight from the protobuf bytes, for field selectors,
//! without rendering the whole object: each path is walked by JSON field name through the
//! schema, and only the leaf is rendered, by the renderer itself. So a value is exactly
//! what a field selector would read from the object's full JSON rendering.
//!
//! Only plain messages are walked through. Values with custom marshalers (Time,
//! IntOrString, apiextensions' `JSON` and `JSONSchemaPropsOr*`, ...) are leaves: as the
//! last segment they read as whatever scalar they render (`additionalProperties: false`
//! reads "false"), and a path going on below one reads nothing, as below a map or a list,
//! even where the JSON rendering has an object there (`items` holding one schema). No
//! resource selects on them; this only keeps every path well-defined.

use super::render::{Ctx, Meta, R};
use super::schema::MSGS;
use super::types::{Field, Kind, Msg, INLINE, MAP, REPEATED};
use crate::codec::wire::{Reader, Val};

/// The field named `name` (its JSON name) of `msg`, looking into inlined (embedded)
/// structs as Go's JSON does; with the message and bytes it is read from.
fn find<'a>(
    msg: &'static Msg,
    buf: &'a [u8],
    name: &str,
    depth: u32,
) -> R<Option<(&'static Msg, &'static Field, &'a [u8])>> {
    if let Some(f) = msg.fields.iter().find(|f| f.name() == name) {
        return Ok(Some((msg, f, buf)));
    }
    if depth > super::MAX_DEPTH {
        return Ok(None);
    }
    for f in msg.fields.iter().filter(|f| f.flags & INLINE != 0) {
        let inner = last_bytes(buf, f)?.unwrap_or(&[]);
        if let Some(found) = find(&MSGS[f.msg as usize], inner, name, depth + 1)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// The last occurrence of a length-delimited field (a singular message wins last).
fn last_bytes<'a>(buf: &'a [u8], f: &Field) -> R<Option<&'a [u8]>> {
    let mut r = Reader::new(buf);
    let mut last = None;
    while !r.done() {
        let (num, wt) = r.tag()?;
        let v = r.value(wt)?;
        if num == u32::from(f.num) {
            if let Val::Bytes(b) = v {
                last = Some(b);
            }
        }
    }
    Ok(last)
}

/// The value at the dot-separated JSON `path` of the object `raw` (of message `root`) as
/// field selectors see it: a string's text, `true`/`false`, a number's digits. None when
/// the rendering omits it, it is `null`, or it is not a scalar.
pub(super) fn value_at(root: &'static Msg, raw: &[u8], path: &str) -> R<Option<String>> {
    let (mut msg, mut buf) = (root, raw);
    let mut segments = path.split('.').peekable();
    while let Some(seg) = segments.next() {
        let Some((owner, f, at)) = find(msg, buf, seg, 0)? else {
            return Ok(None);
        };
        if segments.peek().is_none() {
            return leaf(owner, f, at);
        }
        if f.kind != Kind::Message || f.flags & (REPEATED | MAP) != 0 {
            return Ok(None);
        }
        // An absent struct renders as its zero value: walk on with no bytes.
        buf = last_bytes(at, f)?.unwrap_or(&[]);
        msg = &MSGS[f.msg as usize];
    }
    Ok(None)
}

fn leaf(msg: &'static Msg, f: &'static Field, buf: &[u8]) -> R<Option<String>> {
    let mut ctx = Ctx::new(Vec::with_capacity(64), None);
    ctx.one_field(msg, f, buf, Meta::None)?;
    let out = ctx.out;
    let Some(value) = out.get(f.key.len() - 1..) else {
        return Ok(None); // omitted
    };
    Ok(match serde_json::from_slice::<serde_json::Value>(value) {
        Ok(serde_json::Value::String(s)) => Some(s),
        Ok(serde_json::Value::Bool(b)) => Some(b.to_string()),
        // Formatted as the JSON-side extraction formats them (`codec::extract`).
        Ok(serde_json::Value::Number(n)) => Some(match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (None, Some(i), _) => i.to_string(),
            (None, None, Some(f)) => f.to_string(),
            (None, None, None) => n.to_string(),
        }),
        _ => None,
    })
}
