//! Writing Kubernetes protobuf at the wire level: field writers, and setting an object's
//! `metadata.resourceVersion` without decoding it (only ObjectMeta and the lengths that
//! enclose it are rebuilt; every other byte is copied as stored).

use std::ops::Range;

use bytes::Bytes;

use super::protobuf::{WireError, MAGIC};

/// Wire type of varints.
pub const WIRE_VARINT: u8 = 0;
/// Wire type of length-delimited fields.
pub const WIRE_LEN: u8 = 2;

/// Writes a varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes a field tag.
pub fn put_tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// The bytes a varint of `v` takes.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Writes the tag and length of a length-delimited field whose `len` bytes of value
/// follow elsewhere (a separate segment).
pub fn put_len_header(out: &mut Vec<u8>, field: u32, len: usize) {
    put_tag(out, field, WIRE_LEN);
    put_varint(out, len as u64);
}

/// The bytes a length-delimited field with a value of `len` bytes takes.
pub fn len_field_size(field: u32, len: usize) -> usize {
    varint_len((u64::from(field) << 3) | u64::from(WIRE_LEN)) + varint_len(len as u64) + len
}

/// Writes a length-delimited field.
pub fn put_len(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    put_tag(out, field, WIRE_LEN);
    put_varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// Writes a varint field.
pub fn put_uint(out: &mut Vec<u8>, field: u32, value: u64) {
    put_tag(out, field, WIRE_VARINT);
    put_varint(out, value);
}

/// One field of a message as byte offsets: the whole field and, for length-delimited
/// fields, the value.
struct Span {
    number: u32,
    wire: u8,
    field: std::ops::Range<usize>,
    value: std::ops::Range<usize>,
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let mut value = 0u64;
    for shift in 0..10 {
        let byte = *buf.get(*pos).ok_or(WireError::Truncated)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << (7 * shift);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(WireError::Varint)
}

/// The top-level fields of a message, in wire order.
fn spans(buf: &[u8]) -> Result<Vec<Span>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let start = pos;
        let tag = read_varint(buf, &mut pos)?;
        let wire = (tag & 7) as u8;
        let value_start;
        match wire {
            0 => {
                value_start = pos;
                read_varint(buf, &mut pos)?;
            }
            1 => {
                value_start = pos;
                pos += 8;
            }
            2 => {
                let len = usize::try_from(read_varint(buf, &mut pos)?)
                    .map_err(|_| WireError::Truncated)?;
                value_start = pos;
                pos = pos.checked_add(len).ok_or(WireError::Truncated)?;
            }
            5 => {
                value_start = pos;
                pos += 4;
            }
            other => return Err(WireError::WireType(other)),
        }
        if pos > buf.len() {
            return Err(WireError::Truncated);
        }
        out.push(Span {
            number: (tag >> 3) as u32,
            wire,
            field: start..pos,
            value: value_start..pos,
        });
    }
    Ok(out)
}

/// ObjectMeta with field 6 (resourceVersion) set to `rv`, in field order.
fn rewrite_meta(meta: &[u8], rv: &str) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(meta.len() + rv.len() + 2);
    let mut written = false;
    for s in spans(meta)? {
        if s.number == 6 {
            continue;
        }
        if s.number > 6 && !written {
            put_len(&mut out, 6, rv.as_bytes());
            written = true;
        }
        out.extend_from_slice(&meta[s.field]);
    }
    if !written {
        put_len(&mut out, 6, rv.as_bytes());
    }
    Ok(out)
}

/// An object's own message (`raw`) with ObjectMeta (field 1) rewritten.
pub fn rewrite_raw(raw: &[u8], rv: &str) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(raw.len() + rv.len() + 8);
    let mut seen = false;
    for s in spans(raw)? {
        if s.number == 1 && s.wire == WIRE_LEN && !seen {
            put_len(&mut out, 1, &rewrite_meta(&raw[s.value], rv)?);
            seen = true;
        } else {
            out.extend_from_slice(&raw[s.field]);
        }
    }
    if !seen {
        let mut with_meta = Vec::with_capacity(out.len() + rv.len() + 4);
        put_len(&mut with_meta, 1, &rewrite_meta(&[], rv)?);
        with_meta.extend_from_slice(&out);
        out = with_meta;
    }
    Ok(out)
}

/// A stored protobuf value (magic and envelope) with the object's resourceVersion set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredProtobuf {
    /// The whole value: what a get returns.
    pub value: Bytes,
    /// Where the object's own message (the envelope's `raw`) is in `value`: what a list
    /// item and a watch event embed.
    pub raw: Range<usize>,
}

impl StoredProtobuf {
    /// The object's own message.
    pub fn raw(&self) -> Bytes {
        self.value.slice(self.raw.clone())
    }
}

/// The stored value `stored` with the object's resourceVersion set to `rv`; the
/// envelope's other fields are kept as stored.
pub fn with_resource_version(stored: &[u8], rv: &str) -> Result<StoredProtobuf, WireError> {
    let body = stored.strip_prefix(MAGIC).ok_or(WireError::NoMagic)?;
    let mut out = Vec::with_capacity(stored.len() + rv.len() + 8);
    out.extend_from_slice(MAGIC);
    let mut raw_at = None;
    for s in spans(body)? {
        if s.number == 2 && s.wire == WIRE_LEN {
            let raw = rewrite_raw(&body[s.value], rv)?;
            put_len(&mut out, 2, &raw);
            raw_at = Some(out.len() - raw.len()..out.len());
        } else {
            out.extend_from_slice(&body[s.field]);
        }
    }
    // An envelope without `raw` (an empty object): a raw of just the metadata, appended.
    let raw = match raw_at {
        Some(r) => r,
        None => {
            let raw = rewrite_raw(&[], rv)?;
            put_len(&mut out, 2, &raw);
            out.len() - raw.len()..out.len()
        }
    };
    Ok(StoredProtobuf {
        value: Bytes::from(out),
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::protobuf::parse_envelope;

    use crate::codec::protobuf::first_bytes_field as field;

    #[test]
    fn resource_version_is_replaced_inserted_and_lengths_grow() {
        // ObjectMeta{1: "a", 6: "1", 11: label}, then a spec field 2.
        let mut meta = Vec::new();
        put_len(&mut meta, 1, b"a");
        put_len(&mut meta, 6, b"1");
        put_len(&mut meta, 11, b"\x0a\x01k\x12\x01v");
        let mut raw = Vec::new();
        put_len(&mut raw, 1, &meta);
        put_len(&mut raw, 2, &[0x55; 200]);
        let long = "9".repeat(130);
        let out = rewrite_raw(&raw, &long).unwrap();
        let m = field(&out, 1).unwrap();
        assert_eq!(field(m, 6), Some(long.as_bytes()));
        assert_eq!(field(m, 1), Some(&b"a"[..]));
        assert_eq!(field(m, 11), Some(&b"\x0a\x01k\x12\x01v"[..]));
        assert_eq!(field(&out, 2), Some(&[0x55; 200][..]));

        // No resourceVersion and no metadata at all.
        let mut bare = Vec::new();
        put_len(&mut bare, 2, b"x");
        let out = rewrite_raw(&bare, "7").unwrap();
        assert_eq!(field(field(&out, 1).unwrap(), 6), Some(&b"7"[..]));
        assert_eq!(field(&out, 2), Some(&b"x"[..]));
    }

    #[test]
    fn sizes_match_what_is_written() {
        for len in [0usize, 1, 127, 128, 16_383, 16_384, 3_000_000] {
            let mut v = Vec::new();
            put_varint(&mut v, len as u64);
            assert_eq!(varint_len(len as u64), v.len(), "{len}");
            for field in [1u32, 2, 15, 16, 300] {
                let mut f = Vec::new();
                put_len_header(&mut f, field, len);
                assert_eq!(len_field_size(field, len), f.len() + len, "{field} {len}");
            }
        }
    }

    #[test]
    fn stored_values_keep_their_envelope_and_locate_raw() {
        let mut meta = Vec::new();
        put_len(&mut meta, 1, b"a");
        let mut raw = Vec::new();
        put_len(&mut raw, 1, &meta);
        let mut type_meta = Vec::new();
        put_len(&mut type_meta, 1, b"v1");
        put_len(&mut type_meta, 2, b"ConfigMap");
        let mut stored = MAGIC.to_vec();
        put_len(&mut stored, 1, &type_meta);
        put_len(&mut stored, 2, &raw);
        put_len(&mut stored, 4, b"");
        let out = with_resource_version(&stored, "42").unwrap();
        let env = parse_envelope(&out.value).unwrap();
        assert_eq!(
            (env.api_version, env.kind, env.content_type),
            ("v1", "ConfigMap", "")
        );
        assert_eq!(env.raw, &out.raw()[..]);
        assert_eq!(field(field(env.raw, 1).unwrap(), 6), Some(&b"42"[..]));
        assert_eq!(field(field(env.raw, 1).unwrap(), 1), Some(&b"a"[..]));
        assert_eq!(with_resource_version(b"{}", "1"), Err(WireError::NoMagic));
    }
}
