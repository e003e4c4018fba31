//! Turns an etcd value into what the cache keeps: the object's JSON with
//! `metadata.resourceVersion` set, its labels, and the stored bytes where they are needed
//! again (protobuf).
//!
//! Values are never trusted: anything unreadable is a [`DecodeError`], counted and
//! skipped by ingestion.

pub mod civil;
pub mod convert;
pub mod differential;
pub mod encryption;
pub mod envelope;
pub mod extract;
pub mod gojson;
pub mod json;
pub mod packed;
pub mod pbjson;
pub mod protobuf;
pub mod wire;

use std::sync::Arc;

use bytes::Bytes;

use crate::Revision;
use convert::Convert;
use encryption::{DecryptError, ValueTransformer};
pub use extract::FieldSpec;
pub use json::RvSpan;
pub use packed::{Packed, PackedBuilder};

/// How a value was stored in etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFormat {
    /// JSON (custom resources, and clusters configured to store JSON).
    Json,
    /// Kubernetes protobuf in the `k8s\0` envelope (built-in types).
    Protobuf,
}

/// An object's key, its labels (key, value, ... sorted by key) and then the values of
/// its resource's selectable fields, in one buffer: what a cached object keeps of itself
/// besides its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectorValues {
    /// The strings: the object key first.
    pub strings: Packed,
    /// How many of them after the key are labels (a key and a value each).
    pub label_strings: u32,
}

impl SelectorValues {
    /// The object key `key`, the labels of `pairs` (later duplicates win), then the
    /// `fields` strings `push_fields` pushes, built in one buffer.
    pub fn new<K: AsRef<str>, V: AsRef<str>>(
        key: &str,
        pairs: impl IntoIterator<Item = (K, V)>,
        fields: usize,
        push_fields: impl FnOnce(&mut PackedBuilder),
    ) -> Self {
        let mut pairs: Vec<(K, V)> = pairs.into_iter().collect();
        // Stable: of equal keys the later stays later, and is the one kept.
        pairs.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let bytes = key.len()
            + pairs
                .iter()
                .map(|(k, v)| k.as_ref().len() + v.as_ref().len())
                .sum::<usize>();
        let mut b = PackedBuilder::with_capacity(1 + pairs.len() * 2 + fields, bytes);
        b.push(key);
        let mut label_strings = 0;
        for (i, (k, v)) in pairs.iter().enumerate() {
            let next = pairs.get(i + 1).map(|(k, _)| k.as_ref());
            if next == Some(k.as_ref()) {
                continue;
            }
            b.push(k.as_ref());
            b.push(v.as_ref());
            label_strings += 2;
        }
        push_fields(&mut b);
        SelectorValues {
            strings: b.finish(),
            label_strings,
        }
    }

    /// The object key.
    pub fn key(&self) -> &str {
        self.strings.get(0).unwrap_or_default()
    }

    /// The labels.
    pub fn labels(&self) -> LabelsRef<'_> {
        LabelsRef::new(&self.strings, self.label_strings as usize)
    }

    /// The field values, in the resource's order.
    pub fn fields(&self) -> impl Iterator<Item = &str> + '_ {
        self.strings.iter().skip(1 + self.label_strings as usize)
    }
}

/// Labels as the strings of a [`Packed`] after its first (which a cached object shares
/// with its key and its selectable field values): key, value, key, value, ... sorted by
/// key.
#[derive(Debug, Clone, Copy)]
pub struct LabelsRef<'a> {
    strings: &'a Packed,
    pairs: usize,
}

impl<'a> LabelsRef<'a> {
    /// The labels that the `strings` strings of `packed` after its first are.
    pub fn new(packed: &'a Packed, strings: usize) -> Self {
        LabelsRef {
            strings: packed,
            pairs: strings.min(packed.len().saturating_sub(1)) / 2,
        }
    }

    fn key(&self, i: usize) -> &'a str {
        self.strings.get(1 + 2 * i).unwrap_or_default()
    }

    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        let (mut lo, mut hi) = (0, self.pairs);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.strings.get(2 * mid + 2),
            }
        }
        None
    }

    /// The labels, sorted by key.
    pub fn iter(self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        (0..self.pairs).map(move |i| (self.key(i), self.strings.get(2 * i + 2).unwrap_or_default()))
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.pairs
    }

    /// Whether there are no labels.
    pub fn is_empty(&self) -> bool {
        self.pairs == 0
    }
}

/// An object's JSON as served: compact, single-line, `metadata.resourceVersion` set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Json {
    /// The JSON bytes.
    pub bytes: Bytes,
    /// Where the resourceVersion digits are in `bytes`.
    pub rv_span: RvSpan,
}

/// A decoded value, ready to become a cached object.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The storage format it was read from.
    pub format: StorageFormat,
    /// The JSON, when ingestion produced it (JSON-stored values, kinds without a
    /// schema); None for protobuf values, rendered on first use by [`render_json`].
    pub json: Option<Json>,
    /// The object's key, its labels, then the values of the resource's selectable fields
    /// in the resource's order.
    pub selectors: SelectorValues,
    /// The stored protobuf value with the resourceVersion set, for protobuf clients and
    /// for rendering the JSON.
    pub protobuf: Option<protobuf::StoredProtobuf>,
}

impl Decoded {
    /// The JSON, rendering it now if ingestion did not.
    pub fn json(&self, revision: Revision) -> Json {
        match (&self.json, &self.protobuf) {
            (Some(j), _) => j.clone(),
            (None, Some(pb)) => render_json(pb, revision),
            (None, None) => empty_json(),
        }
    }
}

/// Why a value cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Encrypted at rest, and not readable with the keys watchd was given (or none).
    #[error("{0}")]
    Decrypt(DecryptError),
    /// An empty value.
    #[error("empty value")]
    Empty,
    /// Looks like JSON but is not a valid object.
    #[error("invalid JSON object: {0}")]
    Json(String),
    /// Has the protobuf magic but cannot be read.
    #[error("invalid protobuf: {0}")]
    Protobuf(String),
    /// Neither JSON nor Kubernetes protobuf.
    #[error("unknown storage format")]
    UnknownFormat,
}

impl DecodeError {
    /// A short stable label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::Decrypt(e) => e.reason(),
            DecodeError::Empty => "empty",
            DecodeError::Json(_) => "invalid_json",
            DecodeError::Protobuf(_) => "invalid_protobuf",
            DecodeError::UnknownFormat => "unknown_format",
        }
    }
}

/// How one resource's values are read: decrypted, converted to the served version, and
/// their selectable fields extracted.
#[derive(Debug, Clone)]
pub struct DecodeSpec {
    /// The selectable fields, in the resource's order.
    pub fields: Vec<FieldSpec>,
    /// The conversion from the stored version, if the served one differs.
    pub convert: Option<Convert>,
    /// How values of this resource are decrypted (identity when not encrypted).
    pub transformer: Arc<ValueTransformer>,
}

impl DecodeSpec {
    /// Plain values, served as stored, with these fields.
    pub fn plain(fields: Vec<FieldSpec>) -> DecodeSpec {
        DecodeSpec {
            fields,
            convert: None,
            transformer: Arc::new(ValueTransformer::identity()),
        }
    }

    /// Decodes the value of the object `object_key` (`namespace/name` or `name`) stored
    /// at `etcd_key` (the full key, which AES-GCM authenticates) at `revision` (its
    /// mod_revision).
    pub fn decode(
        &self,
        (object_key, etcd_key): (&str, &[u8]),
        value: &[u8],
        revision: Revision,
    ) -> Result<Decoded, DecodeError> {
        decode_with(
            &self.transformer,
            self.convert.as_ref(),
            (object_key, &self.fields),
            (etcd_key, value),
            revision,
        )
    }
}

/// Decodes a plain (not encrypted) etcd value of the object `key` stored at `revision`
/// (its mod_revision), extracting the values of `fields` for field selectors; served as
/// stored.
pub fn decode(
    key: &str,
    value: &[u8],
    revision: Revision,
    fields: &[FieldSpec],
) -> Result<Decoded, DecodeError> {
    let identity = ValueTransformer::identity();
    decode_with(&identity, None, (key, fields), (b"", value), revision)
}

/// The object key and the selectable fields, which a decoder keeps beside the bytes.
type Selecting<'a> = (&'a str, &'a [FieldSpec]);

fn decode_with(
    transformer: &ValueTransformer,
    convert: Option<&Convert>,
    fields: Selecting<'_>,
    (etcd_key, value): (&[u8], &[u8]),
    revision: Revision,
) -> Result<Decoded, DecodeError> {
    let value = transformer
        .read(value, etcd_key)
        .map_err(DecodeError::Decrypt)?;
    if let Some(c) = convert {
        let converted = c.apply(&value).map_err(|e| {
            let what = format!("cannot convert to {}: {e}", c.to);
            if value.starts_with(envelope::MAGIC) {
                DecodeError::Protobuf(what)
            } else {
                DecodeError::Json(what)
            }
        })?;
        if let Some(v) = converted {
            return decode_plain(&v, revision, fields);
        }
    }
    decode_plain(&value, revision, fields)
}

fn decode_plain(
    value: &[u8],
    revision: Revision,
    fields: Selecting<'_>,
) -> Result<Decoded, DecodeError> {
    if value.starts_with(envelope::MAGIC) {
        return decode_protobuf(value, revision, fields);
    }
    match value.iter().find(|c| !c.is_ascii_whitespace()) {
        None => Err(DecodeError::Empty),
        Some(b'{') => decode_json(value, revision, fields),
        Some(_) => Err(DecodeError::UnknownFormat),
    }
}

fn decode_json(
    value: &[u8],
    revision: Revision,
    fields: Selecting<'_>,
) -> Result<Decoded, DecodeError> {
    // Skipped strings are not checked by serde, and JSON must be UTF-8: check it all once.
    std::str::from_utf8(value).map_err(|e| DecodeError::Json(format!("not UTF-8: {e}")))?;
    decode_valid_json(value, revision, fields, false)
}

/// [`decode_json`] of UTF-8 text; `normalized` once it went through serde_json.
fn decode_valid_json(
    value: &[u8],
    revision: Revision,
    (key, fields): Selecting<'_>,
    normalized: bool,
) -> Result<Decoded, DecodeError> {
    // One validating pass that also yields labels and fields; the rest is skipped.
    let head = extract::extract(value, &FieldSpec::paths(fields))
        .map_err(|e| DecodeError::Json(e.to_string()))?;
    if head.irregular && !normalized {
        // Duplicate keys (a JSON reader keeps the last) or escaped ones where the byte
        // scanner looks: read it as any JSON reader does, once, and go on from that
        // (rare: no Kubernetes component writes such JSON).
        let json = |e: serde_json::Error| DecodeError::Json(e.to_string());
        let parsed: serde_json::Value = serde_json::from_slice(value).map_err(json)?;
        let text = serde_json::to_vec(&parsed).map_err(json)?;
        metrics::counter!("watchd_json_values_normalized_total").increment(1);
        return decode_valid_json(&text, revision, (key, fields), true);
    }
    let compacted = json::compact(value);
    let compact = compacted.as_deref().unwrap_or(value);
    let place = json::locate_resource_version(compact)
        .ok_or_else(|| DecodeError::Json("metadata is not an object".into()))?;
    let (rendered, rv_span) =
        json::render_with_resource_version(compact, &place, &revision.to_resource_version());
    Ok(Decoded {
        format: StorageFormat::Json,
        json: Some(Json {
            bytes: Bytes::from(rendered),
            rv_span,
        }),
        selectors: SelectorValues::new(key, head.labels, fields.len(), |b| {
            extract::push_selectable_values(b, fields, head.fields)
        }),
        protobuf: None,
    })
}

/// Reads a protobuf value without rendering it: the envelope, ObjectMeta (labels), one
/// validate-only transcoding pass (so every value that is accepted renders later, and a
/// corrupt one is refused now), and the selectable fields straight from the wire.
fn decode_protobuf(
    value: &[u8],
    revision: Revision,
    (key, fields): Selecting<'_>,
) -> Result<Decoded, DecodeError> {
    let perr = |e: wire::WireError| DecodeError::Protobuf(e.to_string());
    let env = envelope::parse(value).map_err(perr)?;
    if !env.is_plain_protobuf() {
        return Err(DecodeError::Protobuf(format!(
            "unsupported content type {:?} encoding {:?}",
            env.content_type, env.content_encoding
        )));
    }
    if env.kind.is_empty() || env.api_version.is_empty() {
        return Err(DecodeError::Protobuf(
            "envelope without kind or apiVersion".into(),
        ));
    }
    let meta = protobuf::read_object_meta(env.raw).map_err(perr)?;
    let labels = || meta.labels.iter().map(|(k, v)| (*k, *v));
    let stored =
        protobuf::with_resource_version(value, &revision.to_resource_version()).map_err(perr)?;
    let (v, k) = (env.api_version, env.kind);
    let perr = |e: pbjson::TranscodeError| DecodeError::Protobuf(e.to_string());
    match pbjson::validate(v, k, env.raw) {
        // Lists, options and reviews are never stored: there is no metadata to serve.
        Ok(_) if !pbjson::has_object_meta(v, k) => Err(DecodeError::Protobuf(format!(
            "{v} {k} is not a kind with object metadata"
        ))),
        Ok(unknown) => {
            if unknown > 0 {
                metrics::counter!("watchd_protobuf_unknown_fields_total", "kind" => k.to_string())
                    .increment(u64::from(unknown));
            }
            Ok(Decoded {
                format: StorageFormat::Protobuf,
                json: None,
                selectors: {
                    let mut read = Ok(());
                    let s = SelectorValues::new(key, labels(), fields.len(), |b| {
                        read = push_protobuf_selectable_values(b, v, k, env.raw, fields);
                    });
                    read.map_err(perr)?;
                    s
                },
                protobuf: Some(stored),
            })
        }
        // A kind newer than the schema: serve what is known of every object, its metadata.
        Err(pbjson::TranscodeError::UnknownType { .. }) => {
            metrics::counter!("watchd_protobuf_unknown_kinds_total", "kind" => k.to_string())
                .increment(1);
            let r = pbjson::render_metadata_only(v, k, env.raw, &revision.to_resource_version())
                .map_err(perr)?;
            Ok(Decoded {
                format: StorageFormat::Protobuf,
                json: Some(Json {
                    bytes: Bytes::from(r.json),
                    rv_span: r.rv_span,
                }),
                selectors: SelectorValues::new(key, labels(), fields.len(), |b| {
                    fields.iter().for_each(|f| b.push(&f.default))
                }),
                protobuf: Some(stored),
            })
        }
        Err(e) => Err(perr(e)),
    }
}

/// [`extract::selectable_values`] of the protobuf object `raw` (of `kind` in
/// `api_version`), each value read when needed (a fallback only when the path's value is
/// absent or empty), none allocated on its own.
pub(crate) fn protobuf_selectable_values(
    api_version: &str,
    kind: &str,
    raw: &[u8],
    specs: &[FieldSpec],
) -> Result<Packed, pbjson::TranscodeError> {
    let mut out = PackedBuilder::with_capacity(specs.len(), 0);
    push_protobuf_selectable_values(&mut out, api_version, kind, raw, specs)?;
    Ok(out.finish())
}

/// [`protobuf_selectable_values`], pushed onto `out`.
fn push_protobuf_selectable_values(
    out: &mut PackedBuilder,
    api_version: &str,
    kind: &str,
    raw: &[u8],
    specs: &[FieldSpec],
) -> Result<(), pbjson::TranscodeError> {
    let mut reader = pbjson::fields_reader(api_version, kind, raw)?;
    for f in specs {
        let present = match reader.read(&f.path)? {
            Some(p) if !p.is_empty() || f.fallback.is_empty() => {
                out.push(p);
                continue;
            }
            p => p.is_some(),
        };
        match reader.read(&f.fallback)? {
            Some(fb) if !fb.is_empty() => out.push(fb),
            _ if present => out.push(""),
            _ => out.push(&f.default),
        }
    }
    Ok(())
}

/// Renders a protobuf value accepted by [`decode`] as JSON at `revision`. Decoding
/// validated it with the renderer's own pass, so this cannot fail; were it ever to, the
/// object's type and metadata are served and `watchd_protobuf_render_failures_total`
/// counts it.
pub fn render_json(stored: &protobuf::StoredProtobuf, revision: Revision) -> Json {
    let rv = revision.to_resource_version();
    match pbjson::render_stored(&stored.value, Some(&rv)) {
        Ok(mut r) => {
            // The buffer grew by doubling, and `Bytes` keeps a vector's whole capacity:
            // a kept rendering would hold about a third more than the budget counts.
            // Shrinking gives the tail back in place.
            r.json.shrink_to_fit();
            Json {
                bytes: Bytes::from(r.json),
                rv_span: r.rv_span,
            }
        }
        Err(e) => {
            metrics::counter!("watchd_protobuf_render_failures_total").increment(1);
            tracing::error!(error = %e, "protobuf value accepted at ingest failed to render; serving its metadata only");
            envelope::parse(&stored.value)
                .ok()
                .and_then(|env| {
                    pbjson::render_metadata_only(env.api_version, env.kind, env.raw, &rv).ok()
                })
                .map_or_else(empty_json, |r| Json {
                    bytes: Bytes::from(r.json),
                    rv_span: r.rv_span,
                })
        }
    }
}

/// Encodes an object's JSON (as served: `metadata.resourceVersion` = `rv`) as the
/// Kubernetes protobuf kube-apiserver would serve for it: the kind's schema in its
/// apiVersion, members the schema does not know dropped (as Go's decoding drops them),
/// then the envelope. What a protobuf client of a JSON-stored built-in gets.
pub fn encode_protobuf(
    json: &[u8],
    rv: &str,
) -> Result<protobuf::StoredProtobuf, pbjson::TranscodeError> {
    let value: serde_json::Value = serde_json::from_slice(json)
        .map_err(|_| pbjson::TranscodeError::Invalid("object is not JSON"))?;
    let text = |k: &str| {
        value
            .get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let raw = pbjson::encode_json_lossy(api_version, kind, &value)?;
    let stored = envelope::write(api_version, kind, &raw);
    Ok(protobuf::with_resource_version(&stored, rv)?)
}

fn empty_json() -> Json {
    Json {
        bytes: Bytes::from_static(b"{}"),
        rv_span: RvSpan::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_value_gets_mod_revision_as_resource_version() {
        let d = decode(
            "ns/a",
            br#"{"kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"1"}}}"#,
            Revision(17),
            &[],
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&d.json(Revision(17)).bytes).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "17");
        assert_eq!(d.selectors.labels().get("x"), Some("1"));
        assert_eq!(d.format, StorageFormat::Json);
    }

    #[test]
    fn unreadable_values_are_classified() {
        assert!(matches!(
            decode("ns/a", b"k8s:enc:aescbc:v1:key1:xxxx", Revision(1), &[]),
            Err(DecodeError::Decrypt(_))
        ));
        assert_eq!(
            decode("ns/a", b"", Revision(1), &[]).unwrap_err(),
            DecodeError::Empty
        );
        assert_eq!(
            decode("ns/a", b"\x00\x01", Revision(1), &[]).unwrap_err(),
            DecodeError::UnknownFormat
        );
        assert!(matches!(
            decode("ns/a", b"{\"metadata\":", Revision(1), &[]),
            Err(DecodeError::Json(_))
        ));
        assert!(matches!(
            decode("ns/a", b"{\"a\":\"\xbe\xff\"}", Revision(1), &[]),
            Err(DecodeError::Json(_))
        ));
        assert!(matches!(
            decode("ns/a", b"{\"metadata\":null}", Revision(1), &[]),
            Err(DecodeError::Json(_))
        ));
        assert!(matches!(
            decode("ns/a", b"k8s\x00\xff", Revision(1), &[]),
            Err(DecodeError::Protobuf(_))
        ));
        let options = serde_json::json!({"apiVersion": "v1", "kind": "PodPortForwardOptions"});
        assert!(matches!(
            decode(
                "ns/a",
                &pbjson::encode_stored(&options).unwrap(),
                Revision(1),
                &[]
            ),
            Err(DecodeError::Protobuf(_))
        ));
    }

    fn rv_of(json: &Json) -> &[u8] {
        let at = json.rv_span.at as usize;
        &json.bytes[at..at + json.rv_span.len as usize]
    }

    #[test]
    fn protobuf_value_is_validated_now_and_rendered_later() {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "hostNetwork": true, "containers": [{"name": "c"}]},
        });
        let value = pbjson::encode_stored(&pod).unwrap();
        let specs = [
            FieldSpec::simple("spec.nodeName"),
            FieldSpec::new("spec.hostNetwork", "spec.hostNetwork", "false"),
            FieldSpec::simple("status.phase"),
        ];
        let d = decode("ns/a", &value, Revision(5), &specs).unwrap();
        assert_eq!(d.format, StorageFormat::Protobuf);
        assert!(
            d.json.is_none(),
            "JSON is rendered on first use, not at ingest"
        );
        assert_eq!(d.selectors.labels().get("app"), Some("web"));
        let fields: Vec<&str> = d.selectors.fields().collect();
        assert_eq!(fields, ["n1", "true", ""]);
        // The kept value is the stored one with resourceVersion "5" on the wire.
        let pb = d.protobuf.as_ref().unwrap();
        let env = envelope::parse(&pb.value).unwrap();
        assert_eq!(env.raw, &pb.raw()[..]);
        assert_eq!(protobuf::read_object_meta(env.raw).unwrap().name, "web");
        let json = d.json(Revision(5));
        let v: serde_json::Value = serde_json::from_slice(&json.bytes).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "5");
        assert_eq!(v["spec"]["nodeName"], "n1");
        assert_eq!(rv_of(&json), b"5");

        // A corrupt value is refused at ingest, not when first served.
        let mut bad = value.clone();
        let n = bad.len();
        bad[n - 3] = 0xff;
        assert!(matches!(
            decode("ns/a", &bad[..n - 1], Revision(5), &specs),
            Err(DecodeError::Protobuf(_))
        ));
    }

    #[test]
    fn protobuf_value_of_an_unknown_kind_is_served_as_metadata() {
        // ObjectMeta{name, namespace, creationTimestamp: zero (empty)}, then a field 2.
        let raw = b"\x0a\x10\x0a\x03web\x1a\x07default\x42\x00\x12\x00";
        let mut value = envelope::MAGIC.to_vec();
        value.extend_from_slice(b"\x0a\x0d\x0a\x02v1\x12\x07Unknown\x12");
        value.push(raw.len() as u8);
        value.extend_from_slice(raw);
        let d = decode("ns/a", &value, Revision(5), &[FieldSpec::simple("spec.x")]).unwrap();
        assert_eq!(d.format, StorageFormat::Protobuf);
        assert_eq!(d.selectors.fields().next(), Some(""));
        let json = d.json.clone().expect("rendered at ingest");
        let v: serde_json::Value = serde_json::from_slice(&json.bytes).unwrap();
        assert_eq!(v["kind"], "Unknown");
        assert_eq!(v["metadata"]["name"], "web");
        assert_eq!(v["metadata"]["namespace"], "default");
        assert_eq!(v["metadata"]["resourceVersion"], "5");
        // A zero time is omitted, as the schema renderer omits it (not 1970-01-01).
        assert!(v["metadata"].get("creationTimestamp").is_none(), "{v}");
        assert_eq!(rv_of(&json), b"5");
    }

    #[test]
    fn labels_are_sorted_the_last_duplicate_wins_and_every_key_is_found_before_the_fields() {
        let pairs = [
            ("tier", "web"),
            ("app", "a"),
            ("z", ""),
            ("app", "b"),
            ("", "x"),
        ];
        let s = SelectorValues::new("ns/a", pairs, 2, |b| {
            b.push("node-1");
            b.push("");
        });
        let l = s.labels();
        assert_eq!(
            l.iter().collect::<Vec<_>>(),
            vec![("", "x"), ("app", "b"), ("tier", "web"), ("z", "")]
        );
        assert_eq!(l.len(), 4);
        for (k, v) in [("", "x"), ("app", "b"), ("tier", "web"), ("z", "")] {
            assert_eq!(l.get(k), Some(v), "{k}");
        }
        for k in ["ap", "apps", "tie", "zz", " ", "node-1", "ns/a"] {
            assert_eq!(l.get(k), None, "{k}");
        }
        assert_eq!(s.key(), "ns/a");
        assert_eq!(s.fields().collect::<Vec<_>>(), ["node-1", ""]);
        let none = SelectorValues::new("ns/a", Vec::<(&str, &str)>::new(), 0, |_| {});
        assert!(none.labels().is_empty());
        assert_eq!(none.labels().get("app"), None);
        assert_eq!(none.fields().count(), 0);
        // The key alone: the width, the count, its end and its 4 bytes.
        assert_eq!(
            (none.key(), none.strings.heap_bytes()),
            ("ns/a", 1 + 1 + 1 + 4)
        );
        let fields_only =
            SelectorValues::new("ns/a", Vec::<(&str, &str)>::new(), 1, |b| b.push("x"));
        assert!(fields_only.labels().is_empty());
        assert_eq!(fields_only.fields().collect::<Vec<_>>(), ["x"]);
    }
}
