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

/// Reads the values at several dot-separated JSON paths of one object (of message
/// `root`) as field selectors see them: a string's text, `true`/`false`, a number's
/// digits; None when the rendering omits it, it is `null`, or it is not a scalar.
///
/// Paths are usually siblings (`spec.nodeName`, `spec.restartPolicy`, ...): the walk to
/// the message holding a leaf is kept for the next path with the same parent, and one
/// rendering context serves every leaf, so an object costs one walk per parent and no
/// allocation per path beyond its value.
pub struct FieldReader<'a, 'p> {
    root: &'static Msg,
    raw: &'a [u8],
    ctx: Ctx<'a, Vec<u8>>,
    /// The parent path walked last (borrowed from the path read) and where it led
    /// (None: nothing there).
    parent: &'p str,
    at: Option<(&'static Msg, &'a [u8])>,
    /// A value that is not a plain string (an escaped one, a number) is written here.
    scratch: String,
}

impl<'a, 'p> FieldReader<'a, 'p> {
    pub(super) fn new(root: &'static Msg, raw: &'a [u8]) -> Self {
        FieldReader {
            root,
            raw,
            // Field selectors read scalars, which take no slot: none until a value is a
            // message (2.5 KiB a reader otherwise, for every ingested value).
            ctx: Ctx::with_slots(Vec::with_capacity(64), None, 0),
            parent: "",
            at: Some((root, raw)),
            scratch: String::new(),
        }
    }

    /// The value at `path` (see the type); None for an empty path.
    pub fn read(&mut self, path: &'p str) -> Result<Option<&str>, super::TranscodeError> {
        if path.is_empty() {
            return Ok(None);
        }
        self.value_at(path).map_err(|e| *e)
    }

    fn value_at(&mut self, path: &'p str) -> R<Option<&str>> {
        let (parent, name) = path.rsplit_once('.').unwrap_or(("", path));
        if parent != self.parent {
            self.at = walk(self.root, self.raw, parent)?;
            self.parent = parent;
        }
        let Some((msg, buf)) = self.at else {
            return Ok(None);
        };
        let Some((owner, f, at)) = find(msg, buf, name, 0)? else {
            return Ok(None);
        };
        self.ctx.out.clear();
        self.ctx.one_field(owner, f, at, Meta::None)?;
        let Some(value) = self.ctx.out.get(f.key.len() - 1..) else {
            return Ok(None); // omitted
        };
        match value {
            [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') && !inner.contains(&b'"') => {
                return Ok(std::str::from_utf8(inner).ok());
            }
            b"true" | b"false" => return Ok(std::str::from_utf8(value).ok()),
            _ => {}
        }
        self.scratch.clear();
        Ok(scalar_text(value, &mut self.scratch).then_some(self.scratch.as_str()))
    }
}

/// The message at the dot-separated `path` below `root` and its bytes (empty when the
/// wire omits it: an absent struct renders as its zero value); None where the path does
/// not lead to a plain message.
fn walk<'a>(root: &'static Msg, raw: &'a [u8], path: &str) -> R<Option<(&'static Msg, &'a [u8])>> {
    let (mut msg, mut buf) = (root, raw);
    if path.is_empty() {
        return Ok(Some((msg, buf)));
    }
    for seg in path.split('.') {
        let Some((_, f, at)) = find(msg, buf, seg, 0)? else {
            return Ok(None);
        };
        if f.kind != Kind::Message || f.flags & (REPEATED | MAP) != 0 {
            return Ok(None);
        }
        buf = last_bytes(at, f)?.unwrap_or(&[]);
        msg = &MSGS[f.msg as usize];
    }
    Ok(Some((msg, buf)))
}

/// Writes into `out` the text a field selector reads from a rendered JSON value; false
/// for `null`, objects and lists. Integers are read here, anything else through
/// serde_json, as the JSON-side extraction (`codec::extract`) reads it.
fn scalar_text(value: &[u8], out: &mut String) -> bool {
    use std::fmt::Write;
    let integer = match value {
        [b'-', digits @ ..] | digits => !digits.is_empty() && digits.iter().all(u8::is_ascii_digit),
    };
    if integer {
        let text = std::str::from_utf8(value).unwrap_or_default();
        // serde_json's order: u64, then i64.
        if let Ok(u) = text.parse::<u64>() {
            return write!(out, "{u}").is_ok();
        }
        if let Ok(i) = text.parse::<i64>() {
            return write!(out, "{i}").is_ok();
        }
    }
    let text = match serde_json::from_slice::<serde_json::Value>(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(serde_json::Value::Bool(b)) => b.to_string(),
        // Formatted as the JSON-side extraction formats them (`codec::extract`).
        Ok(serde_json::Value::Number(n)) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (None, Some(i), _) => i.to_string(),
            (None, None, Some(f)) => f.to_string(),
            (None, None, None) => n.to_string(),
        },
        _ => return false,
    };
    out.push_str(&text);
    true
}
