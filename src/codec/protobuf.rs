//! A stored protobuf object at the wire level, without the transcoder: the ObjectMeta
//! fields ingestion needs (identity and labels), and the object with its
//! `metadata.resourceVersion` set (only ObjectMeta and the lengths that enclose it are
//! rebuilt; every other byte is copied as stored).

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;

use super::envelope::MAGIC;
use super::wire::{self, put_len, span_iter, Val, WireError, BYTES};

/// The ObjectMeta fields ingestion reads from protobuf objects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectMetaView<'a> {
    /// `name` (1).
    pub name: &'a str,
    /// `namespace` (3).
    pub namespace: &'a str,
    /// `uid` (5).
    pub uid: &'a str,
    /// `generation` (7).
    pub generation: i64,
    /// Whether `deletionTimestamp` (9) is set.
    pub deleting: bool,
    /// `labels` (11).
    pub labels: BTreeMap<&'a str, &'a str>,
}

fn read_map_entry(b: &[u8]) -> Result<(&str, &str), WireError> {
    let (mut k, mut v) = ("", "");
    for f in wire::fields(b) {
        match f? {
            (1, Val::Bytes(x)) => k = wire::utf8(x)?,
            (2, Val::Bytes(x)) => v = wire::utf8(x)?,
            _ => {}
        }
    }
    Ok((k, v))
}

/// Reads ObjectMeta (field 1) of an object's protobuf bytes; fields it does not know are
/// skipped, so newer Kubernetes versions decode too.
pub fn read_object_meta(raw: &[u8]) -> Result<ObjectMetaView<'_>, WireError> {
    let mut meta_bytes: &[u8] = &[];
    for f in wire::fields(raw) {
        if let (1, Val::Bytes(b)) = f? {
            meta_bytes = b;
        }
    }
    let mut m = ObjectMetaView::default();
    for f in wire::fields(meta_bytes) {
        match f? {
            (1, Val::Bytes(v)) => m.name = wire::utf8(v)?,
            (3, Val::Bytes(v)) => m.namespace = wire::utf8(v)?,
            (5, Val::Bytes(v)) => m.uid = wire::utf8(v)?,
            (7, Val::Varint(v)) => m.generation = v as i64,
            (9, Val::Bytes(_)) => m.deleting = true,
            (11, Val::Bytes(v)) => {
                let (k, val) = read_map_entry(v)?;
                m.labels.insert(k, val);
            }
            _ => {}
        }
    }
    Ok(m)
}

/// The length of ObjectMeta `meta` once field 6 (resourceVersion) is `rv`.
fn meta_len(meta: &[u8], rv: &str) -> Result<usize, WireError> {
    let mut len = meta.len() + wire::len_field_size(6, rv.len());
    for s in span_iter(meta) {
        let s = s?;
        if s.number == 6 {
            len -= s.field.len();
        }
    }
    Ok(len)
}

/// Writes ObjectMeta `meta` with field 6 (resourceVersion) set to `rv`, in field order.
fn write_meta(out: &mut Vec<u8>, meta: &[u8], rv: &str) -> Result<(), WireError> {
    let mut written = false;
    for s in span_iter(meta) {
        let s = s?;
        if s.number == 6 {
            continue;
        }
        if s.number > 6 && !written {
            put_len(out, 6, rv.as_bytes());
            written = true;
        }
        out.extend_from_slice(&meta[s.field]);
    }
    if !written {
        put_len(out, 6, rv.as_bytes());
    }
    Ok(())
}

/// How an object's own message (`raw`) is rewritten with its resourceVersion set: its
/// first ObjectMeta (field 1; one holding only the resourceVersion is put first when it
/// has none) and what the two measure after. Measured first so that the whole value is
/// written once into a buffer of exactly its size.
struct RawRewrite {
    /// The ObjectMeta field, if the object has one.
    meta: Option<wire::Span>,
    /// ObjectMeta's new length.
    meta_len: usize,
    /// The message's new length.
    len: usize,
}

impl RawRewrite {
    fn of(raw: &[u8], rv: &str) -> Result<RawRewrite, WireError> {
        let mut meta = None;
        for s in span_iter(raw) {
            let s = s?;
            if s.number == 1 && s.wire == BYTES && meta.is_none() {
                meta = Some(s);
            }
        }
        let (meta_len, len) = match &meta {
            Some(s) => {
                let meta_len = meta_len(&raw[s.value.clone()], rv)?;
                let len = raw.len() - s.field.len() + wire::len_field_size(1, meta_len);
                (meta_len, len)
            }
            None => {
                let meta_len = wire::len_field_size(6, rv.len());
                (meta_len, raw.len() + wire::len_field_size(1, meta_len))
            }
        };
        Ok(RawRewrite {
            meta,
            meta_len,
            len,
        })
    }

    /// Writes the rewritten message (`len` bytes).
    fn write(&self, out: &mut Vec<u8>, raw: &[u8], rv: &str) -> Result<(), WireError> {
        let Some(meta) = &self.meta else {
            wire::put_len_header(out, 1, self.meta_len);
            write_meta(out, &[], rv)?;
            out.extend_from_slice(raw);
            return Ok(());
        };
        out.extend_from_slice(&raw[..meta.field.start]);
        wire::put_len_header(out, 1, self.meta_len);
        write_meta(out, &raw[meta.value.clone()], rv)?;
        out.extend_from_slice(&raw[meta.field.end..]);
        Ok(())
    }
}

/// An object's own message (`raw`) with ObjectMeta (field 1) rewritten.
pub fn rewrite_raw(raw: &[u8], rv: &str) -> Result<Vec<u8>, WireError> {
    let plan = RawRewrite::of(raw, rv)?;
    let mut out = Vec::with_capacity(plan.len);
    plan.write(&mut out, raw, rv)?;
    Ok(out)
}

/// A stored protobuf value (magic and envelope) with the object's resourceVersion set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredProtobuf {
    /// The whole value: what a get returns.
    pub value: Bytes,
    /// Where the object's own message (the envelope's `raw`) is in `value`: what a list
    /// item and a watch event embed. Offsets of 32 bits: etcd's values are far smaller,
    /// and every cached object holds one.
    raw: Range<u32>,
}

impl StoredProtobuf {
    /// The object's own message.
    pub fn raw(&self) -> Bytes {
        self.value
            .slice(self.raw.start as usize..self.raw.end as usize)
    }

    /// An envelope of `api_version` and `kind` around `raw` (resourceVersion already set
    /// in it), written as kube-apiserver writes one.
    pub fn enveloped(api_version: &str, kind: &str, raw: &[u8]) -> Result<Self, WireError> {
        let head = super::envelope::head(api_version, kind, raw.len());
        let offset = |at: usize| u32::try_from(at).map_err(|_| WireError::TooLarge);
        let raw_at = offset(head.len())?..offset(head.len() + raw.len())?;
        let mut value = Vec::with_capacity(head.len() + raw.len() + super::envelope::TAIL.len());
        value.extend_from_slice(&head);
        value.extend_from_slice(raw);
        value.extend_from_slice(super::envelope::TAIL);
        Ok(StoredProtobuf {
            value: Bytes::from(value),
            raw: raw_at,
        })
    }
}

/// The stored value `stored` with the object's resourceVersion set to `rv`; the
/// envelope's other fields are kept as stored.
pub fn with_resource_version(stored: &[u8], rv: &str) -> Result<StoredProtobuf, WireError> {
    let body = stored.strip_prefix(MAGIC).ok_or(WireError::NoMagic)?;
    let is_raw = |s: &wire::Span| s.number == 2 && s.wire == BYTES;
    // `raw` is a bytes field: the last one is the value (earlier ones are dropped). An
    // envelope without it (an empty object) gets a raw of just the metadata, last.
    let (mut last_raw, mut others) = (None, 0);
    for s in span_iter(body) {
        let s = s?;
        if is_raw(&s) {
            last_raw = Some(s);
        } else {
            others += s.field.len();
        }
    }
    let old_raw = last_raw
        .as_ref()
        .map_or(&[][..], |s| &body[s.value.clone()]);
    let plan = RawRewrite::of(old_raw, rv)?;
    // Exactly its size: the cache keeps this buffer as the object's bytes, and `Bytes`
    // takes a vector whose length is its capacity without an allocation of its own.
    let mut out = Vec::with_capacity(MAGIC.len() + others + wire::len_field_size(2, plan.len));
    out.extend_from_slice(MAGIC);
    let write_raw = |out: &mut Vec<u8>| {
        wire::put_len_header(out, 2, plan.len);
        let start = out.len();
        plan.write(out, old_raw, rv).map(|()| start..out.len())
    };
    let mut raw = None;
    for s in span_iter(body) {
        let s = s?;
        if last_raw.as_ref().is_some_and(|r| r.field == s.field) {
            raw = Some(write_raw(&mut out)?);
        } else if !is_raw(&s) {
            out.extend_from_slice(&body[s.field]);
        }
    }
    let raw = match raw {
        Some(r) => r,
        None => write_raw(&mut out)?,
    };
    debug_assert_eq!(out.len(), out.capacity());
    let offset = |at: usize| u32::try_from(at).map_err(|_| WireError::TooLarge);
    let raw = offset(raw.start)?..offset(raw.end)?;
    Ok(StoredProtobuf {
        value: Bytes::from(out),
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::envelope;
    use crate::codec::wire::{last_bytes as field, put_uint};

    #[test]
    fn object_meta_is_read() {
        let mut meta = Vec::new();
        put_len(&mut meta, 1, b"web-1");
        put_len(&mut meta, 3, b"default");
        put_len(&mut meta, 11, b"\x0a\x03app\x12\x03web");
        put_uint(&mut meta, 7, 3);
        let mut obj = Vec::new();
        put_len(&mut obj, 1, &meta);
        put_len(&mut obj, 2, b"\x0a\x00"); // spec
        let value = envelope::write("v1", "Pod", &obj);
        let env = envelope::parse(&value).unwrap();
        let m = read_object_meta(env.raw).unwrap();
        assert_eq!((m.name, m.namespace), ("web-1", "default"));
        assert_eq!(m.labels.get("app"), Some(&"web"));
        assert_eq!(read_object_meta(b"\x0a\x05ab"), Err(WireError::Truncated));
    }

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

        // Two resourceVersions become one, in field order; of two ObjectMetas only the
        // first is rewritten (as before), the second copied as stored; the value is
        // written into a buffer of exactly its size.
        let mut meta = Vec::new();
        put_len(&mut meta, 1, b"a");
        put_len(&mut meta, 6, b"1");
        put_len(&mut meta, 6, b"2");
        put_len(&mut meta, 11, b"\x0a\x01k\x12\x01v");
        let mut raw = Vec::new();
        put_len(&mut raw, 3, b"s");
        put_len(&mut raw, 1, &meta);
        put_len(&mut raw, 1, b"\x0a\x01b");
        let mut want_meta = Vec::new();
        put_len(&mut want_meta, 1, b"a");
        put_len(&mut want_meta, 6, b"77");
        put_len(&mut want_meta, 11, b"\x0a\x01k\x12\x01v");
        let mut want = Vec::new();
        put_len(&mut want, 3, b"s");
        put_len(&mut want, 1, &want_meta);
        put_len(&mut want, 1, b"\x0a\x01b");
        let out = rewrite_raw(&raw, "77").unwrap();
        assert_eq!((&out, out.len()), (&want, out.capacity()));
        let mut stored = MAGIC.to_vec();
        put_len(&mut stored, 2, &raw);
        let value = with_resource_version(&stored, "77").unwrap().value;
        let mut want_value = MAGIC.to_vec();
        put_len(&mut want_value, 2, &want);
        assert_eq!(value, want_value);
        assert_eq!(
            rewrite_raw(&raw[..raw.len() - 1], "7"),
            Err(WireError::Truncated)
        );

        // No resourceVersion and no metadata at all.
        let mut bare = Vec::new();
        put_len(&mut bare, 2, b"x");
        let out = rewrite_raw(&bare, "7").unwrap();
        assert_eq!(field(field(&out, 1).unwrap(), 6), Some(&b"7"[..]));
        assert_eq!(field(&out, 2), Some(&b"x"[..]));
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
        let env = envelope::parse(&out.value).unwrap();
        assert_eq!(
            (env.api_version, env.kind, env.content_type),
            ("v1", "ConfigMap", "")
        );
        assert_eq!(env.raw, &out.raw()[..]);
        assert_eq!(field(field(env.raw, 1).unwrap(), 6), Some(&b"42"[..]));
        assert_eq!(field(field(env.raw, 1).unwrap(), 1), Some(&b"a"[..]));
        assert_eq!(with_resource_version(b"{}", "1"), Err(WireError::NoMagic));

        // `raw` is a bytes field: of two, the last is the object, and only it is kept.
        let mut twice = stored.clone();
        put_len(&mut twice, 2, b"\x0a\x03\x0a\x01b");
        let out = with_resource_version(&twice, "43").unwrap();
        let env = envelope::parse(&out.value).unwrap();
        assert_eq!(field(field(env.raw, 1).unwrap(), 1), Some(&b"b"[..]));
        assert_eq!(field(field(env.raw, 1).unwrap(), 6), Some(&b"43"[..]));
        assert_eq!(env.raw, &out.raw()[..]);
        let raws = wire::spans(&out.value[MAGIC.len()..])
            .unwrap()
            .iter()
            .filter(|s| s.number == 2)
            .count();
        assert_eq!(raws, 1);

        // An envelope without `raw`: one of just the metadata.
        let mut bare = MAGIC.to_vec();
        put_len(&mut bare, 1, b"\x0a\x02v1\x12\x03Pod");
        let out = with_resource_version(&bare, "44").unwrap();
        let env = envelope::parse(&out.value).unwrap();
        assert_eq!(field(field(env.raw, 1).unwrap(), 6), Some(&b"44"[..]));
        assert_eq!(env.raw, &out.raw()[..]);
    }
}
