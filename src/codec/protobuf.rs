//! Kubernetes protobuf as kube-apiserver stores built-in objects: the `k8s\0` magic, then
//! a `runtime.Unknown` {1: typeMeta{1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding,
//! 4: contentType}, whose `raw` is the object with `metadata` (ObjectMeta) as field 1.
//!
//! This module reads the envelope and the ObjectMeta fields the cache needs (identity,
//! labels, annotations, timestamps). Rendering the whole object as JSON is the job of the
//! full transcoder; until then an object is served as its metadata alone.

use std::collections::BTreeMap;

/// The four bytes that start every protobuf value kube-apiserver writes.
pub const MAGIC: &[u8] = b"k8s\x00";

/// Why a protobuf value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The bytes end inside a field.
    #[error("truncated protobuf")]
    Truncated,
    /// A varint longer than 10 bytes.
    #[error("malformed varint")]
    Varint,
    /// Groups (wire types 3/4) or an unknown wire type.
    #[error("unsupported wire type {0}")]
    WireType(u8),
    /// A string field that is not UTF-8.
    #[error("string field is not UTF-8")]
    Utf8,
    /// No `k8s\0` magic.
    #[error("missing k8s protobuf magic")]
    NoMagic,
    /// Field number 0 or out of range.
    #[error("invalid protobuf field number")]
    FieldNumber,
}

/// A protobuf field value as it sits on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: bytes, strings and nested messages.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// Iterates the fields of one protobuf message: (field number, value).
pub struct FieldReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> FieldReader<'a> {
    /// Reads the fields of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        FieldReader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in 0..10 {
            let byte = *self.buf.get(self.pos).ok_or(WireError::Truncated)?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * shift);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::Varint)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        let out = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    fn next_field(&mut self) -> Result<(u32, WireValue<'a>), WireError> {
        let tag = self.varint()?;
        let number = (tag >> 3) as u32;
        let value = match (tag & 7) as u8 {
            0 => WireValue::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                WireValue::Fixed64(u64::from_le_bytes(
                    b.try_into().map_err(|_| WireError::Truncated)?,
                ))
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| WireError::Truncated)?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => {
                let b = self.take(4)?;
                WireValue::Fixed32(u32::from_le_bytes(
                    b.try_into().map_err(|_| WireError::Truncated)?,
                ))
            }
            other => return Err(WireError::WireType(other)),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for FieldReader<'a> {
    type Item = Result<(u32, WireValue<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let item = self.next_field();
        if item.is_err() {
            self.pos = self.buf.len();
        }
        Some(item)
    }
}

fn utf8(b: &[u8]) -> Result<&str, WireError> {
    std::str::from_utf8(b).map_err(|_| WireError::Utf8)
}

/// The first length-delimited field `n` of `msg` (for tests that read what was written).
#[cfg(test)]
pub(crate) fn first_bytes_field(msg: &[u8], n: u32) -> Option<&[u8]> {
    FieldReader::new(msg).find_map(|f| match f.ok()? {
        (k, WireValue::Bytes(b)) if k == n => Some(b),
        _ => None,
    })
}

/// The `runtime.Unknown` envelope of a stored object (one parser for all of watchd, the
/// transcoder's, so what ingestion accepts is what rendering reads).
pub use super::pbjson::Envelope;

/// Reads the envelope of a value that starts with [`MAGIC`].
pub fn parse_envelope(value: &[u8]) -> Result<Envelope<'_>, WireError> {
    use super::pbjson::TranscodeError as T;
    super::pbjson::parse_envelope(value).map_err(|e| match e {
        T::Truncated => WireError::Truncated,
        T::Varint => WireError::Varint,
        T::WireType(w) => WireError::WireType(w),
        T::NoMagic => WireError::NoMagic,
        T::Invalid(_) => WireError::Utf8,
        _ => WireError::FieldNumber,
    })
}

/// A `metav1.Time`: seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub seconds: i64,
    /// Nanoseconds within the second.
    pub nanos: i32,
}

/// The ObjectMeta fields the cache reads from protobuf objects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectMetaView<'a> {
    /// `name` (1).
    pub name: &'a str,
    /// `generateName` (2).
    pub generate_name: &'a str,
    /// `namespace` (3).
    pub namespace: &'a str,
    /// `uid` (5).
    pub uid: &'a str,
    /// `generation` (7).
    pub generation: i64,
    /// `creationTimestamp` (8).
    pub creation_timestamp: Option<Timestamp>,
    /// `deletionTimestamp` (9).
    pub deletion_timestamp: Option<Timestamp>,
    /// `labels` (11).
    pub labels: BTreeMap<&'a str, &'a str>,
    /// `annotations` (12).
    pub annotations: BTreeMap<&'a str, &'a str>,
    /// `finalizers` (14).
    pub finalizers: Vec<&'a str>,
}

fn read_timestamp(b: &[u8]) -> Result<Timestamp, WireError> {
    let mut t = Timestamp::default();
    for f in FieldReader::new(b) {
        match f? {
            (1, WireValue::Varint(v)) => t.seconds = v as i64,
            (2, WireValue::Varint(v)) => t.nanos = v as i32,
            _ => {}
        }
    }
    Ok(t)
}

fn timestamp(b: &[u8]) -> Result<Option<Timestamp>, WireError> {
    if b.is_empty() {
        return Ok(None);
    }
    read_timestamp(b).map(Some)
}

fn read_map_entry(b: &[u8]) -> Result<(&str, &str), WireError> {
    let (mut k, mut v) = ("", "");
    for f in FieldReader::new(b) {
        match f? {
            (1, WireValue::Bytes(x)) => k = utf8(x)?,
            (2, WireValue::Bytes(x)) => v = utf8(x)?,
            _ => {}
        }
    }
    Ok((k, v))
}

/// Reads ObjectMeta (field 1) of an object's protobuf bytes; fields it does not know are
/// skipped, so newer Kubernetes versions decode too.
pub fn read_object_meta(raw: &[u8]) -> Result<ObjectMetaView<'_>, WireError> {
    let mut meta_bytes: &[u8] = &[];
    for f in FieldReader::new(raw) {
        if let (1, WireValue::Bytes(b)) = f? {
            meta_bytes = b;
        }
    }
    let mut m = ObjectMetaView::default();
    for f in FieldReader::new(meta_bytes) {
        match f? {
            (1, WireValue::Bytes(v)) => m.name = utf8(v)?,
            (2, WireValue::Bytes(v)) => m.generate_name = utf8(v)?,
            (3, WireValue::Bytes(v)) => m.namespace = utf8(v)?,
            (5, WireValue::Bytes(v)) => m.uid = utf8(v)?,
            (7, WireValue::Varint(v)) => m.generation = v as i64,
            // An empty Timestamp is Go's zero time: unset, as the renderer reads it.
            (8, WireValue::Bytes(v)) => m.creation_timestamp = timestamp(v)?,
            (9, WireValue::Bytes(v)) => m.deletion_timestamp = timestamp(v)?,
            (11, WireValue::Bytes(v)) => {
                let (k, val) = read_map_entry(v)?;
                m.labels.insert(k, val);
            }
            (12, WireValue::Bytes(v)) => {
                let (k, val) = read_map_entry(v)?;
                m.annotations.insert(k, val);
            }
            (14, WireValue::Bytes(v)) => m.finalizers.push(utf8(v)?),
            _ => {}
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn bytes_field(n: u32, b: &[u8], out: &mut Vec<u8>) {
        varint(u64::from(n << 3 | 2), out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    pub(crate) fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        bytes_field(1, api_version.as_bytes(), &mut tm);
        bytes_field(2, kind.as_bytes(), &mut tm);
        let mut out = MAGIC.to_vec();
        bytes_field(1, &tm, &mut out);
        bytes_field(2, raw, &mut out);
        out
    }

    #[test]
    fn envelope_and_object_meta_are_read() {
        let mut meta = Vec::new();
        bytes_field(1, b"web-1", &mut meta);
        bytes_field(3, b"default", &mut meta);
        let mut label = Vec::new();
        bytes_field(1, b"app", &mut label);
        bytes_field(2, b"web", &mut label);
        bytes_field(11, &label, &mut meta);
        let mut ts = Vec::new();
        varint(1 << 3, &mut ts); // field 1, varint
        varint(1_199_149_261, &mut ts);
        bytes_field(8, &ts, &mut meta);
        let mut obj = Vec::new();
        bytes_field(1, &meta, &mut obj);
        bytes_field(2, b"\x0a\x00", &mut obj); // spec
        let value = envelope("v1", "Pod", &obj);
        let env = parse_envelope(&value).unwrap();
        assert_eq!((env.api_version, env.kind), ("v1", "Pod"));
        let m = read_object_meta(env.raw).unwrap();
        assert_eq!((m.name, m.namespace), ("web-1", "default"));
        assert_eq!(m.labels.get("app"), Some(&"web"));
        assert_eq!(
            crate::codec::civil::format_rfc3339(m.creation_timestamp.unwrap().seconds),
            "2008-01-01T01:01:01Z"
        );
    }

    #[test]
    fn truncated_and_garbage_values_are_errors_not_panics() {
        let value = envelope("v1", "Pod", b"\x0a\x05ab");
        let env = parse_envelope(&value).unwrap();
        assert_eq!(read_object_meta(env.raw), Err(WireError::Truncated));
        assert_eq!(
            parse_envelope(b"k8s\x00\x0a\xff"),
            Err(WireError::Truncated)
        );
        assert_eq!(parse_envelope(b"k8s\x00\x0b"), Err(WireError::WireType(3)));
        assert_eq!(parse_envelope(b"nope"), Err(WireError::NoMagic));
        // Field number 0 (found by fuzzing: a lenient parser accepted what rendering refused).
        assert_eq!(
            parse_envelope(b"k8s\x00\x00\x00"),
            Err(WireError::FieldNumber)
        );
        let mut seed = 0x9e37_79b9_u32;
        for n in 0..2000 {
            let mut v = MAGIC.to_vec();
            for _ in 0..(n % 40) {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                v.push(seed as u8);
            }
            if let Ok(env) = parse_envelope(&v) {
                let _ = read_object_meta(env.raw);
            }
        }
    }
}
