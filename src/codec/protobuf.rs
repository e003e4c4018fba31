//! A stored protobuf object at the wire level, without the transcoder: the ObjectMeta
//! fields ingestion needs (identity and labels), and the object with its
//! `metadata.resourceVersion` set (only ObjectMeta and the lengths that enclose it are
//! rebuilt; every other byte is copied as stored).

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;

use super::envelope::MAGIC;
use super::wire::{self, put_len, spans, Val, WireError, BYTES};

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
        if s.number == 1 && s.wire == BYTES && !seen {
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
    let fields = spans(body)?;
    let is_raw = |s: &wire::Span| s.number == 2 && s.wire == BYTES;
    // `raw` is a bytes field: the last one is the value (earlier ones are dropped). An
    // envelope without it (an empty object) gets a raw of just the metadata.
    let last_raw = fields.iter().rposition(is_raw);
    let new_raw = match last_raw.map(|i| &fields[i]) {
        Some(s) => rewrite_raw(&body[s.value.clone()], rv)?,
        None => rewrite_raw(&[], rv)?,
    };
    // Exactly its size: the cache keeps this buffer as the object's bytes, and `Bytes`
    // takes a vector whose length is its capacity without an allocation of its own.
    let others: usize = fields
        .iter()
        .filter(|s| !is_raw(s))
        .map(|s| s.field.len())
        .sum();
    let mut out = Vec::with_capacity(MAGIC.len() + others + wire::len_field_size(2, new_raw.len()));
    out.extend_from_slice(MAGIC);
    let mut raw_at = None;
    for (i, s) in fields.iter().enumerate() {
        if Some(i) == last_raw {
            put_len(&mut out, 2, &new_raw);
            raw_at = Some(out.len() - new_raw.len()..out.len());
        } else if !is_raw(s) {
            out.extend_from_slice(&body[s.field.clone()]);
        }
    }
    let raw = match raw_at {
        Some(r) => r,
        None => {
            put_len(&mut out, 2, &new_raw);
            out.len() - new_raw.len()..out.len()
        }
    };
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
