//! The envelope of Kubernetes protobuf: the four bytes `k8s\0`, then a `runtime.Unknown`
//! {1: typeMeta{1: apiVersion, 2: kind}, 2: raw (the object's own message),
//! 3: contentEncoding, 4: contentType}. kube-apiserver writes it around every built-in
//! object it stores in etcd and around every object and list it serves as protobuf.
//!
//! The one parser and the one writer of it: what ingestion accepts is what rendering
//! reads, and what the frontends write is what ingestion would accept.

use super::wire::{self, put_len, put_len_header, Reader, Val, WireError};

/// The four bytes that start every protobuf value kube-apiserver writes.
pub const MAGIC: &[u8] = b"k8s\x00";

/// The media type of Kubernetes protobuf, the only `contentType` an envelope may name
/// besides the empty one.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A parsed envelope; every part borrows the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Envelope<'a> {
    /// `typeMeta.apiVersion`, e.g. `v1` or `apps/v1`.
    pub api_version: &'a str,
    /// `typeMeta.kind`, e.g. `Pod`.
    pub kind: &'a str,
    /// The object's protobuf bytes.
    pub raw: &'a [u8],
    /// `contentEncoding` (empty: none).
    pub content_encoding: &'a str,
    /// `contentType` (empty: protobuf).
    pub content_type: &'a str,
}

impl Envelope<'_> {
    /// Whether `raw` is plain Kubernetes protobuf (no other content type, no encoding):
    /// the only envelopes kube-apiserver writes for built-in objects.
    pub fn is_plain_protobuf(&self) -> bool {
        self.content_encoding.is_empty()
            && (self.content_type.is_empty() || self.content_type == PROTOBUF)
    }
}

/// Parses a value that starts with [`MAGIC`]. For a singular field repeated on the wire
/// the last occurrence wins, as protobuf decoders read it.
pub fn parse(value: &[u8]) -> Result<Envelope<'_>, WireError> {
    let body = value.strip_prefix(MAGIC).ok_or(WireError::NoMagic)?;
    let mut env = Envelope::default();
    let mut r = Reader::new(body);
    while !r.done() {
        match r.field()? {
            (1, Val::Bytes(type_meta)) => {
                let mut t = Reader::new(type_meta);
                while !t.done() {
                    match t.field()? {
                        (1, Val::Bytes(v)) => env.api_version = wire::utf8(v)?,
                        (2, Val::Bytes(v)) => env.kind = wire::utf8(v)?,
                        _ => {}
                    }
                }
            }
            (2, Val::Bytes(v)) => env.raw = v,
            (3, Val::Bytes(v)) => env.content_encoding = wire::utf8(v)?,
            (4, Val::Bytes(v)) => env.content_type = wire::utf8(v)?,
            _ => {}
        }
    }
    Ok(env)
}

/// `k8s\0` + Unknown{typeMeta{apiVersion, kind}, 2: <tag and length of raw>}: the head of
/// an envelope whose `raw_len` bytes of raw follow separately, then [`TAIL`].
pub fn head(api_version: &str, kind: &str, raw_len: usize) -> Vec<u8> {
    let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
    put_len(&mut type_meta, 1, api_version.as_bytes());
    put_len(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(type_meta.len() + 24);
    out.extend_from_slice(MAGIC);
    put_len(&mut out, 1, &type_meta);
    put_len_header(&mut out, 2, raw_len);
    out
}

/// What ends an envelope after `raw`: contentEncoding and contentType, empty, written (as
/// kube-apiserver writes them).
pub const TAIL: &[u8] = b"\x1a\x00\x22\x00";

/// A whole envelope around `raw`.
pub fn write(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = head(api_version, kind, raw.len());
    out.reserve(raw.len() + TAIL.len());
    out.extend_from_slice(raw);
    out.extend_from_slice(TAIL);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_envelopes_parse_back() {
        let env = write("apps/v1", "Deployment", b"\x0a\x00");
        let mut split = head("apps/v1", "Deployment", 2);
        split.extend_from_slice(b"\x0a\x00");
        split.extend_from_slice(TAIL);
        assert_eq!(env, split);
        let p = parse(&env).unwrap();
        assert_eq!(
            (p.api_version, p.kind, p.raw),
            ("apps/v1", "Deployment", &b"\x0a\x00"[..])
        );
        assert!(p.is_plain_protobuf());
    }

    #[test]
    fn bad_envelopes_are_errors() {
        assert_eq!(parse(b"nope"), Err(WireError::NoMagic));
        assert_eq!(parse(b"k8s\x00\x0a\xff"), Err(WireError::Truncated));
        assert_eq!(parse(b"k8s\x00\x0b"), Err(WireError::WireType(3)));
        // Field number 0 (found by fuzzing: a lenient parser accepted what rendering refused).
        assert_eq!(parse(b"k8s\x00\x00\x00"), Err(WireError::FieldNumber));
        assert_eq!(parse(b"k8s\x00\x0a\x03\x0a\x01\xff"), Err(WireError::Utf8));
        let mut gz = MAGIC.to_vec();
        put_len(&mut gz, 3, b"gzip");
        assert!(!parse(&gz).unwrap().is_plain_protobuf());
        let mut json = MAGIC.to_vec();
        put_len(&mut json, 4, b"application/json");
        assert!(!parse(&json).unwrap().is_plain_protobuf());
    }
}
