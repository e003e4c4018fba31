//! JSON values as kube-apiserver stores them: compacted to one line if needed, and given
//! `metadata.resourceVersion` by splicing bytes, never by re-serializing the object.
//!
//! The scanner here trusts structure only after `serde_json` has validated the value; it
//! still never indexes out of bounds, so a bug shows up as "unreadable", not a panic.

use std::ops::Range;

/// Where `metadata.resourceVersion` goes in a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RvPlace {
    /// Replace this byte range (an existing value, quotes included).
    Replace(Range<usize>),
    /// Insert `"resourceVersion":"N"` right after the `{` of metadata at this offset;
    /// `empty` when metadata is `{}` (no comma needed).
    InMetadata { at: usize, empty: bool },
    /// No metadata object: insert a whole `"metadata":{...}` member after the top `{`.
    NoMetadata { at: usize, empty: bool },
}

/// The byte range of the resourceVersion digits inside a rendered object, so the object
/// can be re-rendered at another revision (a DELETED event) with one splice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RvSpan {
    /// Offset of the first digit.
    pub at: u32,
    /// Number of digits.
    pub len: u32,
}

/// Returns the value with all whitespace outside strings removed, or None if it has no
/// line break (the common case: kube-apiserver writes compact JSON).
///
/// Only line breaks must go — they would split a watch frame in a line-delimited stream —
/// and a valid JSON value can hold a raw `\n` or `\r` only outside strings (inside, they
/// are escaped). So one SIMD scan for those two bytes decides; spaces between tokens are
/// harmless and left alone when there is no line break.
pub fn compact(input: &[u8]) -> Option<Vec<u8>> {
    let is_ws = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    memchr::memchr2(b'\n', b'\r', input)?;
    let mut out = Vec::with_capacity(input.len());
    let mut in_string = false;
    let mut escaped = false;
    for &c in input {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
        } else if c == b'"' {
            in_string = true;
            out.push(c);
        } else if !is_ws(c) {
            out.push(c);
        }
    }
    Some(out)
}

/// JSON's insignificant whitespace.
fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// The first offset from `j` that is not whitespace.
fn skip_ws(b: &[u8], mut j: usize) -> usize {
    while b.get(j).copied().is_some_and(is_ws) {
        j += 1;
    }
    j
}

fn skip_string(b: &[u8], start: usize) -> Option<usize> {
    let mut j = start + 1;
    loop {
        match *b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

fn skip_value(b: &[u8], start: usize) -> Option<usize> {
    match *b.get(start)? {
        b'"' => skip_string(b, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = start;
            loop {
                match *b.get(j)? {
                    b'"' => j = skip_string(b, j)?,
                    b'{' | b'[' => {
                        depth += 1;
                        j += 1;
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        j += 1;
                        if depth == 0 {
                            return Some(j);
                        }
                    }
                    _ => j += 1,
                }
            }
        }
        _ => {
            let len = b
                .get(start..)?
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']'))?;
            // A number, true, false or null ends before any whitespace after it.
            let mut end = start + len;
            while end > start && b.get(end - 1).copied().is_some_and(is_ws) {
                end -= 1;
            }
            Some(end)
        }
    }
}

/// Finds member `name` of the object starting at `obj` (its `{`), whitespace between
/// tokens allowed; returns the value's byte range (the first such member: values with
/// duplicate or escaped keys are normalized before they get here).
fn find_member(b: &[u8], obj: usize, name: &[u8]) -> Option<Option<Range<usize>>> {
    if *b.get(obj)? != b'{' {
        return None;
    }
    let mut j = skip_ws(b, obj + 1);
    if *b.get(j)? == b'}' {
        return Some(None);
    }
    loop {
        if *b.get(j)? != b'"' {
            return None;
        }
        let key_end = skip_string(b, j)?;
        let key = b.get(j + 1..key_end - 1)?;
        let colon = skip_ws(b, key_end);
        if *b.get(colon)? != b':' {
            return None;
        }
        let value = skip_ws(b, colon + 1);
        let value_end = skip_value(b, value)?;
        if key == name {
            return Some(Some(value..value_end));
        }
        let next = skip_ws(b, value_end);
        match *b.get(next)? {
            b',' => j = skip_ws(b, next + 1),
            b'}' => return Some(None),
            _ => return None,
        }
    }
}

/// The byte range of the value of top-level member `name` of a valid JSON object.
pub fn top_level_member(b: &[u8], name: &[u8]) -> Option<Range<usize>> {
    find_member(b, skip_ws(b, 0), name).flatten()
}

/// Locates where `metadata.resourceVersion` goes in a valid JSON object (whitespace
/// between tokens allowed).
pub fn locate_resource_version(b: &[u8]) -> Option<RvPlace> {
    let top = skip_ws(b, 0);
    let empty_object = b.get(skip_ws(b, top + 1)) == Some(&b'}');
    match find_member(b, top, b"metadata")? {
        None => Some(RvPlace::NoMetadata {
            at: top + 1,
            empty: empty_object,
        }),
        Some(meta) if b.get(meta.start) == Some(&b'{') => {
            match find_member(b, meta.start, b"resourceVersion")? {
                Some(rv) => Some(RvPlace::Replace(rv)),
                None => Some(RvPlace::InMetadata {
                    at: meta.start + 1,
                    empty: b.get(skip_ws(b, meta.start + 1)) == Some(&b'}'),
                }),
            }
        }
        // `"metadata":null` or another non-object: not an object kube-apiserver wrote.
        Some(_) => None,
    }
}

/// Renders `b` with `metadata.resourceVersion` = `rv` at `place`.
pub fn render_with_resource_version(b: &[u8], place: &RvPlace, rv: &str) -> (Vec<u8>, RvSpan) {
    let (cut, insert_prefix, insert_suffix): (Range<usize>, &[u8], &[u8]) = match place {
        RvPlace::Replace(range) => (range.clone(), b"\"", b"\""),
        RvPlace::InMetadata { at, empty } => (
            *at..*at,
            b"\"resourceVersion\":\"",
            if *empty { b"\"" } else { b"\"," },
        ),
        RvPlace::NoMetadata { at, empty } => (
            *at..*at,
            b"\"metadata\":{\"resourceVersion\":\"",
            if *empty { b"\"}" } else { b"\"}," },
        ),
    };
    let head = &b[..cut.start.min(b.len())];
    let tail = b.get(cut.end..).unwrap_or_default();
    // Exactly its size: the cache keeps this buffer as the object's bytes, and `Bytes`
    // takes a vector whose length is its capacity without an allocation of its own.
    let len = head.len() + insert_prefix.len() + rv.len() + insert_suffix.len() + tail.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(head);
    out.extend_from_slice(insert_prefix);
    let span = RvSpan {
        at: out.len() as u32,
        len: rv.len() as u32,
    };
    out.extend_from_slice(rv.as_bytes());
    out.extend_from_slice(insert_suffix);
    out.extend_from_slice(tail);
    debug_assert_eq!(out.len(), out.capacity());
    (out, span)
}

/// Re-renders an already rendered object at another resourceVersion with one splice.
pub fn replace_resource_version(rendered: &[u8], span: RvSpan, rv: &str) -> (Vec<u8>, RvSpan) {
    let at = span.at as usize;
    let end = at + span.len as usize;
    let mut out = Vec::with_capacity(rendered.len() + rv.len());
    out.extend_from_slice(rendered.get(..at).unwrap_or_default());
    out.extend_from_slice(rv.as_bytes());
    out.extend_from_slice(rendered.get(end..).unwrap_or_default());
    (
        out,
        RvSpan {
            at: span.at,
            len: rv.len() as u32,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn render(input: &str, rv: &str) -> String {
        let owned;
        let b = match compact(input.as_bytes()) {
            Some(c) => {
                owned = c;
                &owned[..]
            }
            None => input.as_bytes(),
        };
        let place = locate_resource_version(b).expect("locatable");
        let (out, span) = render_with_resource_version(b, &place, rv);
        // Kept as the object's bytes: no spare capacity (and no allocation for `Bytes`).
        assert_eq!(out.len(), out.capacity());
        let s = String::from_utf8(out).unwrap();
        assert_eq!(&s[span.at as usize..(span.at + span.len) as usize], rv);
        s
    }

    fn rv_of(s: &str) -> Value {
        let v: Value = serde_json::from_str(s).unwrap();
        v["metadata"]["resourceVersion"].clone()
    }

    #[test]
    fn resource_version_is_inserted_into_metadata() {
        let s = render(r#"{"kind":"Pod","metadata":{"name":"a"},"spec":{}}"#, "42");
        assert_eq!(
            s,
            r#"{"kind":"Pod","metadata":{"resourceVersion":"42","name":"a"},"spec":{}}"#
        );
    }

    #[test]
    fn existing_resource_version_is_replaced() {
        let s = render(
            r#"{"metadata":{"name":"a","resourceVersion":"7","uid":"u"}}"#,
            "42",
        );
        assert_eq!(rv_of(&s), "42");
        assert_eq!(s.matches("resourceVersion").count(), 1);
    }

    #[test]
    fn empty_and_missing_metadata_get_a_resource_version() {
        assert_eq!(
            render(r#"{"metadata":{}}"#, "5"),
            r#"{"metadata":{"resourceVersion":"5"}}"#
        );
        assert_eq!(
            render(r#"{}"#, "5"),
            r#"{"metadata":{"resourceVersion":"5"}}"#
        );
        assert_eq!(
            render(r#"{"kind":"X"}"#, "5"),
            r#"{"metadata":{"resourceVersion":"5"},"kind":"X"}"#
        );
    }

    #[test]
    fn pretty_json_is_compacted_to_one_line_strings_untouched() {
        let s = render(
            "{\n  \"metadata\": { \"name\": \"a b\" },\n  \"data\": {\"k\": \"x\\\" }\\n y\"}\n}",
            "9",
        );
        assert!(!s.contains('\n'));
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["metadata"]["name"], "a b");
        assert_eq!(v["data"]["k"], "x\" }\n y");
        assert_eq!(rv_of(&s), "9");
    }

    #[test]
    fn keys_that_look_like_metadata_inside_strings_or_nested_are_ignored() {
        let s = render(
            r#"{"spec":{"metadata":{"resourceVersion":"1"}},"note":"\"metadata\":{","metadata":{"name":"n"}}"#,
            "77",
        );
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["spec"]["metadata"]["resourceVersion"], "1");
        assert_eq!(v["metadata"]["resourceVersion"], "77");
    }

    #[test]
    fn one_line_json_is_not_copied_even_with_spaces() {
        assert_eq!(compact(br#"{"a": "b c", "d": 1}"#), None);
        assert_eq!(compact(b"{\"a\":\n1}").as_deref(), Some(&br#"{"a":1}"#[..]));
    }

    #[test]
    fn delete_revision_replaces_digits_in_one_splice() {
        let b = br#"{"metadata":{"name":"a"}}"#;
        let place = locate_resource_version(b).unwrap();
        let (out, span) = render_with_resource_version(b, &place, "9");
        let (again, span2) = replace_resource_version(&out, span, "12345");
        let s = String::from_utf8(again).unwrap();
        assert_eq!(rv_of(&s), "12345");
        assert_eq!(
            &s[span2.at as usize..(span2.at + span2.len) as usize],
            "12345"
        );
    }

    #[test]
    fn top_level_members_are_found_by_name() {
        let b = br#"{"kind":"Pod","spec":{"metadata":{}},"metadata":{"name":"a"}}"#;
        let r = top_level_member(b, b"metadata").unwrap();
        assert_eq!(&b[r], br#"{"name":"a"}"#);
        assert!(top_level_member(b, b"status").is_none());
    }

    #[test]
    fn non_object_metadata_is_not_locatable() {
        assert_eq!(locate_resource_version(br#"{"metadata":null}"#), None);
        assert_eq!(locate_resource_version(br#"[1,2]"#), None);
    }
}
