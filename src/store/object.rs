//! One cached object revision: its encoded bytes and what selectors need, nothing decoded.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwapOption;
use once_cell::race::OnceBox;

use bytes::Bytes;

use super::rendered::RENDERED;
use crate::codec::convert;
use crate::codec::protobuf::{self, StoredProtobuf};
use crate::codec::{json, Decoded, Json, LabelsRef, Packed, StorageFormat};
use crate::Revision;

/// An object as the cache holds it: encoded once per format, shared by every list and
/// watcher.
///
/// A JSON-stored object has its JSON from ingestion, and encodes its protobuf on the
/// first protobuf read (as kube-apiserver serves JSON-stored built-ins as protobuf). A
/// protobuf-stored one keeps its stored bytes (resourceVersion set) and renders its JSON
/// on first use, once: watchers and lists that ask only for protobuf never pay for JSON.
///
/// Every byte of it is paid per object (88 bytes, 112 with its `Arc` in glibc's heap):
/// what readers derive (JSON rendered under the budget among it) is in a box allocated
/// on first use, the key, labels and field values share one buffer, and the resource's
/// field names are the store's, passed by whoever reads a field.
#[derive(Debug)]
pub struct CachedObject {
    /// The `resourceVersion` it is served with (its etcd mod_revision, or the delete
    /// revision for the last state of a deleted object).
    pub revision: Revision,
    /// Where the name starts in the key (0: cluster-scoped).
    name_at: u32,
    /// How many of `strings` after the key are labels (a key and a value each).
    label_strings: u32,
    /// The bytes as ingested: counted in `cached_bytes`.
    body: Body,
    /// The object key (`namespace/name` or `name`), then what selectors read: the labels
    /// (key, value, ... sorted by key), then the values of the resource's selectable
    /// fields in its order. A converted Event reads its core object's (its own is empty;
    /// one re-indexed without converting keeps a buffer that nothing reads).
    strings: Packed,
    /// What readers derive on first use, allocated only when one asks: most cached
    /// objects are never read one by one.
    derived: OnceBox<Derived>,
}

/// What ingestion made of the stored value, resourceVersion set: one of the two forms
/// (both only for the rare protobuf kind newer than watchd's schema).
#[derive(Debug, Clone)]
enum Body {
    /// A JSON-stored object (and kinds without a schema).
    Json(Json),
    /// A protobuf-stored object; its JSON is rendered on a JSON read.
    Protobuf(StoredProtobuf),
    /// A protobuf kind newer than the schema: the stored value, and the JSON of its
    /// metadata alone (what is known of it).
    Both(Box<(StoredProtobuf, Json)>),
    /// A core/v1 Event served as events.k8s.io/v1: the core resource's object (a
    /// protobuf-stored one), whose bytes are converted on each read
    /// (`codec::convert::event_v1`) and whose labels and field values are this one's.
    /// kube-apiserver stores both under one key, so one copy serves both.
    EventV1(ObjectRef),
}

impl Body {
    fn new(json: Option<Json>, stored: Option<StoredProtobuf>) -> Body {
        match (json, stored) {
            (Some(j), None) => Body::Json(j),
            (None, Some(pb)) => Body::Protobuf(pb),
            (Some(j), Some(pb)) => Body::Both(Box::new((pb, j))),
            // Decoding always yields one form; an object without one serves `{}`.
            (None, None) => Body::Json(Json {
                bytes: Bytes::from_static(b"{}"),
                rv_span: Default::default(),
            }),
        }
    }

    fn json(&self) -> Option<&Json> {
        match self {
            Body::Json(j) => Some(j),
            Body::Both(b) => Some(&b.1),
            Body::Protobuf(_) | Body::EventV1(_) => None,
        }
    }

    /// The protobuf bytes held, as held (a converted Event's are the core Event's, whose
    /// `metadata` is the same message).
    fn stored(&self) -> Option<&StoredProtobuf> {
        match self {
            Body::Protobuf(pb) => Some(pb),
            Body::EventV1(core) => core.body.stored(),
            Body::Both(b) => Some(&b.0),
            Body::Json(_) => None,
        }
    }

    /// The protobuf value served: as held, or converted now.
    fn served(&self) -> Option<Cow<'_, StoredProtobuf>> {
        match self {
            Body::EventV1(core) => match core.body.stored().map(convert::event_v1) {
                None => None,
                Some(Ok(pb)) => Some(Cow::Owned(pb)),
                // The core object's bytes were read field by field when they were cached.
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "cached core Event does not convert");
                    None
                }
            },
            _ => self.stored().map(Cow::Borrowed),
        }
    }
}

/// An object's forms derived on first use, each kept once made. What a JSON reader of a
/// protobuf-stored object derives is here (24 bytes: every object a full JSON list reads
/// gets one); what other readers derive is in a second box, allocated on their first use.
#[derive(Debug, Default)]
struct Derived {
    /// A protobuf-stored object's JSON, rendered on a JSON read and kept under the
    /// rendered-JSON budget (`store::rendered`), which may take it back.
    rendered: ArcSwapOption<Json>,
    /// Read since the budget's clock last passed it (its second chance).
    recently_read: AtomicBool,
    /// The rest.
    more: OnceBox<MoreDerived>,
}

impl Derived {
    fn more(&self) -> &MoreDerived {
        self.more.get_or_init(Box::default)
    }
}

/// What metadata readers, gRPC readers and protobuf readers of a JSON-stored object
/// derive.
#[derive(Debug, Default)]
struct MoreDerived {
    /// The `metadata` JSON for PartialObjectMetadata readers, found once: a slice of the
    /// JSON (shared, no copy), or, for a protobuf-stored object whose JSON is not rendered,
    /// `metadata` rendered alone (`true`: a copy of its own, counted as rendered bytes).
    metadata: OnceLock<(Bytes, bool)>,
    /// The metadata fields typed API clients route on, read once from `metadata`.
    facts: OnceLock<MetaFacts>,
    /// A JSON-stored object's protobuf value, encoded on the first protobuf read; None
    /// inside if it cannot be encoded (a custom resource, or JSON its kind's schema does
    /// not read).
    encoded: OnceLock<Option<StoredProtobuf>>,
}

/// A shared cached object.
pub type ObjectRef = Arc<CachedObject>;

/// Metadata fields beyond those selectors use, for APIs that send metadata as fields
/// (the gRPC API); read from `metadata` on first use and kept.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct MetaFacts {
    /// `metadata.uid`.
    #[serde(default)]
    pub uid: Box<str>,
    /// `metadata.generation` (0 when unset).
    #[serde(default)]
    pub generation: i64,
    /// Whether `metadata.deletionTimestamp` is set.
    #[serde(default, rename = "deletionTimestamp", deserialize_with = "is_set")]
    pub deleting: bool,
}

fn is_set<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let v: Option<serde::de::IgnoredAny> = serde::Deserialize::deserialize(d)?;
    Ok(v.is_some())
}

impl CachedObject {
    /// Builds a cached object from the decoded value (its key first among its strings,
    /// its field values those of the resource's selectable fields, in order).
    pub fn new(revision: Revision, decoded: Decoded) -> Self {
        let name_at = decoded.selectors.key().find('/').map_or(0, |i| i + 1) as u32;
        CachedObject {
            revision,
            name_at,
            label_strings: decoded.selectors.label_strings,
            body: Body::new(decoded.json, decoded.protobuf),
            strings: decoded.selectors.strings,
            derived: OnceBox::new(),
        }
    }

    /// The same key at `revision` over another body, with `strings` (the key first) of
    /// which `label_strings` after the key are labels.
    fn with_body(
        &self,
        revision: Revision,
        body: Body,
        (strings, label_strings): (Packed, u32),
    ) -> CachedObject {
        CachedObject {
            revision,
            name_at: self.name_at,
            label_strings,
            body,
            strings,
            derived: OnceBox::new(),
        }
    }

    /// Its key, labels and field values and how many of them after the key are labels:
    /// its own, or a converted Event's core object's.
    #[inline]
    fn selector_strings(&self) -> (&Packed, usize) {
        match &self.body {
            Body::EventV1(core) => core.selector_strings(),
            _ => (&self.strings, self.label_strings as usize),
        }
    }

    /// The labels.
    pub fn labels(&self) -> LabelsRef<'_> {
        let (strings, labels) = self.selector_strings();
        LabelsRef::new(strings, labels)
    }

    /// How many selectable field values it holds.
    fn field_count(&self) -> usize {
        let (strings, labels) = self.selector_strings();
        strings.len().saturating_sub(1 + labels)
    }

    /// Its key, labels and field values, as a copy of its own.
    fn own_selectors(&self) -> (Packed, u32) {
        let (strings, labels) = self.selector_strings();
        (strings.clone(), labels as u32)
    }

    /// How it was stored: protobuf when its body holds the stored protobuf value.
    pub fn format(&self) -> StorageFormat {
        match self.body {
            Body::Json(_) => StorageFormat::Json,
            Body::Protobuf(_) | Body::Both(_) | Body::EventV1(_) => StorageFormat::Protobuf,
        }
    }

    /// `core`, a core/v1 Event cached from a protobuf value, as the object of the
    /// events.k8s.io/v1 resource, which has `fields` selectable fields: its bytes, key,
    /// labels and field values are `core`'s, nothing decoded, copied or converted now. The
    /// field values are the core ones: the events.k8s.io fields are the same fields under
    /// their new names, in the same order (`store::ingest`'s tests compare every field's
    /// value with a full decode for events.k8s.io/v1). None when `core`
    /// is anything else (then the value is decoded for the resource as any other).
    pub fn event_v1_of(core: &ObjectRef, fields: usize) -> Option<CachedObject> {
        let Body::Protobuf(pb) = &core.body else {
            return None;
        };
        if !convert::is_core_event(pb) || fields != core.field_count() {
            return None;
        }
        Some(core.with_body(
            core.revision,
            Body::EventV1(core.clone()),
            (Packed::default(), 0),
        ))
    }

    fn derived(&self) -> &Derived {
        self.derived.get_or_init(Box::default)
    }

    /// The object as Kubernetes protobuf (magic, envelope, resourceVersion set): the
    /// stored bytes, or for a JSON-stored object its JSON encoded on the first call and
    /// kept. None for objects without a protobuf form (custom resources, JSON the kind's
    /// schema cannot read).
    pub fn protobuf(&self) -> Option<Cow<'_, StoredProtobuf>> {
        if let Body::Protobuf(_) | Body::Both(_) | Body::EventV1(_) = self.body {
            return self.body.served();
        }
        self.derived()
            .more()
            .encoded
            .get_or_init(|| {
                let rv = self.revision.to_resource_version();
                match crate::codec::encode_protobuf(&self.json_unkept().bytes, &rv) {
                    Ok(pb) => {
                        metrics::counter!("watchd_json_protobuf_encodes_total").increment(1);
                        metrics::gauge!("watchd_encoded_protobuf_bytes")
                            .increment(pb.value.len() as f64);
                        Some(pb)
                    }
                    Err(e) => {
                        metrics::counter!("watchd_json_protobuf_encode_failures_total")
                            .increment(1);
                        tracing::debug!(key = %self.key(), error = %e, "no protobuf form");
                        None
                    }
                }
            })
            .as_ref()
            .map(Cow::Borrowed)
    }

    /// Whether [`CachedObject::protobuf`] gives a value, without converting a core Event
    /// served as events.k8s.io/v1 to find out.
    pub fn has_protobuf(&self) -> bool {
        matches!(self.body, Body::EventV1(_)) || self.protobuf().is_some()
    }

    /// The length of the protobuf value's `raw` (what a list item embeds), without
    /// converting a core Event served as events.k8s.io/v1; None without a protobuf form.
    pub fn protobuf_raw_len(&self) -> Option<usize> {
        match &self.body {
            Body::EventV1(core) => core
                .body
                .stored()
                .and_then(|pb| convert::event_v1_raw_len(pb).ok()),
            _ => self.protobuf().map(|pb| pb.raw().len()),
        }
    }

    /// Compact single-line JSON with `metadata.resourceVersion` = `revision`: as ingested,
    /// or rendered from the stored protobuf on first use and kept while the rendered-JSON
    /// budget allows (`store::rendered`).
    pub fn json(self: &Arc<Self>) -> Bytes {
        self.json_with_span().bytes
    }

    fn json_with_span(self: &Arc<Self>) -> Json {
        if let Some(j) = self.at_hand() {
            return j;
        }
        let json = self.render();
        let fresh = Arc::new(json.clone());
        let len = json.bytes.len();
        let before = self
            .derived()
            .rendered
            .compare_and_swap(&None::<Arc<Json>>, Some(fresh));
        match &*before {
            // Another reader rendered it first: share that one.
            Some(theirs) => Json::clone(theirs),
            None => {
                RENDERED.kept(self, len);
                json
            }
        }
    }

    /// The kept rendering, marked as read.
    fn kept_rendering(&self) -> Option<Json> {
        let derived = self.derived.get()?;
        let j = derived.rendered.load_full()?;
        // Written only when it changes: many readers share the cache line.
        if !derived.recently_read.load(Ordering::Relaxed) {
            derived.recently_read.store(true, Ordering::Relaxed);
        }
        Some(Json::clone(&j))
    }

    /// The JSON as [`CachedObject::json`] gives it, for a caller without the object's
    /// `Arc`: a rendering made here is not kept.
    fn json_unkept(&self) -> Json {
        self.at_hand().unwrap_or_else(|| self.render())
    }

    /// The JSON without rendering: as ingested, or the kept rendering (marked as read).
    fn at_hand(&self) -> Option<Json> {
        match self.body.json() {
            Some(j) => Some(j.clone()),
            None => self.kept_rendering(),
        }
    }

    fn render(&self) -> Json {
        metrics::counter!("watchd_protobuf_json_renders_total").increment(1);
        match self.body.served() {
            Some(pb) => crate::codec::render_json(&pb, self.revision),
            None => Json {
                bytes: Bytes::from_static(b"{}"),
                rv_span: Default::default(),
            },
        }
    }

    /// For the budget: whether it was read since the last call.
    pub(super) fn take_recently_read(&self) -> bool {
        self.derived
            .get()
            .is_some_and(|d| d.recently_read.swap(false, Ordering::Relaxed))
    }

    /// For the budget: drops the kept rendering; whether there was one.
    pub(super) fn give_up_rendering(&self) -> bool {
        match self.derived.get().and_then(|d| d.rendered.swap(None)) {
            Some(j) => {
                RENDERED.released(j.bytes.len());
                true
            }
            None => false,
        }
    }

    /// Whether the JSON is at hand without rendering (ingested, or rendered and kept).
    pub fn json_ready(&self) -> bool {
        self.body.json().is_some()
            || self
                .derived
                .get()
                .is_some_and(|d| d.rendered.load().is_some())
    }

    /// The object key: `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> &str {
        self.selector_strings().0.get(0).unwrap_or_default()
    }

    /// The key's bytes, unchecked: what the snapshot's tree compares (as `str` compares).
    #[inline]
    pub(super) fn key_bytes(&self) -> &[u8] {
        self.selector_strings().0.first_bytes()
    }

    /// The namespace, if namespaced.
    pub fn namespace(&self) -> Option<&str> {
        let at = self.name_at as usize;
        (at > 0).then(|| self.key().get(..at - 1)).flatten()
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.key().get(self.name_at as usize..).unwrap_or_default()
    }

    /// The same object served at another resourceVersion (a DELETED event's last state).
    /// Costs one copy of each encoding present; JSON not yet rendered stays lazy.
    pub fn at_revision(&self, revision: Revision) -> CachedObject {
        let rv = revision.to_resource_version();
        let protobuf = self.body.served().map(|pb| {
            // The bytes were rewritten once already, so they rewrite again.
            protobuf::with_resource_version(&pb.value, &rv).unwrap_or_else(|_| pb.into_owned())
        });
        let json = match (self.body.json(), &protobuf) {
            // Not rendered yet: the new state renders its own on first use.
            (None, Some(_)) => None,
            (j, _) => {
                let j = j.cloned().unwrap_or_else(|| self.json_unkept());
                let (bytes, rv_span) = json::replace_resource_version(&j.bytes, j.rv_span, &rv);
                Some(Json {
                    bytes: Bytes::from(bytes),
                    rv_span,
                })
            }
        };
        // A JSON-stored object's protobuf is encoded again, lazily, from the new JSON.
        self.with_body(revision, Body::new(json, protobuf), self.own_selectors())
    }

    /// The same object for a resource whose selectable fields changed: field values are
    /// read again from the stored bytes (absent or unreadable ones take their defaults).
    pub fn reindexed(&self, specs: &[crate::codec::FieldSpec]) -> CachedObject {
        // An events.k8s.io Event's bytes are converted here: once, for its values and
        // its body.
        let served = self.body.served();
        let values = match &served {
            Some(pb) => protobuf_field_values(pb, specs),
            None => crate::codec::extract::extract(
                &self.json_unkept().bytes,
                &crate::codec::FieldSpec::paths(specs),
            )
            .ok()
            .map(|e| crate::codec::extract::selectable_values(specs, e.fields)),
        };
        let values = values.unwrap_or_else(|| specs.iter().map(|f| f.default.as_str()).collect());
        let (strings, label_strings) = self.selector_strings();
        let strings: Packed = strings
            .iter()
            .take(1 + label_strings)
            .chain(values.iter())
            .collect();
        let selectors = (strings, label_strings as u32);
        let body = match (&self.body, served) {
            // Its own fields now, so its own bytes too: converted once (an Event that
            // does not convert stays the core object's view).
            (Body::EventV1(_), Some(pb)) => Body::Protobuf(pb.into_owned()),
            (body, _) => body.clone(),
        };
        self.with_body(self.revision, body, selectors)
    }

    /// Bytes this object keeps alive as ingested, for the cache-size metric. Constant for
    /// the object's life (the snapshot adds it on insert and subtracts it on removal), so
    /// JSON rendered later is left out: `watchd_rendered_json_bytes` has it.
    /// A converted core Event counts none of its bytes: the core object holds them.
    pub fn cached_bytes(&self) -> usize {
        let own = match &self.body {
            Body::EventV1(_) => None,
            body => body.stored(),
        };
        self.body.json().map_or(0, |j| j.bytes.len())
            + own.map_or(0, |p| p.value.len())
            + self.strings.heap_bytes()
            + std::mem::size_of::<Self>()
    }

    /// The object's `metadata` JSON, found once and shared by every PartialObjectMetadata
    /// reader: a slice of the object's JSON (no copy); or, for a protobuf-stored object
    /// whose JSON is not rendered, `metadata` alone rendered once (a metadata informer
    /// never pays for whole objects); `{}` if absent.
    pub fn metadata_json(&self) -> Bytes {
        let (meta, _) = self.derived().more().metadata.get_or_init(|| {
            match (self.body.json(), self.body.stored()) {
                (None, Some(pb)) => {
                    let rv = self.revision.to_resource_version();
                    let meta = crate::codec::envelope::parse(&pb.value)
                        .map_err(crate::codec::pbjson::TranscodeError::from)
                        .and_then(|e| {
                            crate::codec::pbjson::render_metadata(e.api_version, e.kind, e.raw, &rv)
                        })
                        .map(|r| Bytes::from(r.json));
                    match meta {
                        Ok(meta) => {
                            metrics::counter!("watchd_protobuf_metadata_renders_total")
                                .increment(1);
                            metrics::gauge!("watchd_rendered_json_bytes")
                                .increment(meta.len() as f64);
                            (meta, true)
                        }
                        Err(_) => (self.metadata_of_json(), false),
                    }
                }
                _ => (self.metadata_of_json(), false),
            }
        });
        meta.clone()
    }

    /// uid, generation and whether a deletion is under way, read on first use: from the
    /// stored protobuf's ObjectMeta while no JSON is rendered (rendering nothing), else
    /// from the JSON's `metadata` (defaults for metadata that does not read).
    pub fn facts(&self) -> &MetaFacts {
        self.derived().more().facts.get_or_init(|| {
            let from_wire = match (self.body.json(), self.body.stored()) {
                (None, Some(pb)) => crate::codec::envelope::parse(&pb.value)
                    .ok()
                    .and_then(|e| protobuf::read_object_meta(e.raw).ok())
                    .map(|m| MetaFacts {
                        uid: m.uid.into(),
                        generation: m.generation,
                        deleting: m.deleting,
                    }),
                _ => None,
            };
            from_wire.unwrap_or_else(|| {
                serde_json::from_slice(&self.metadata_json()).unwrap_or_default()
            })
        })
    }

    fn metadata_of_json(&self) -> Bytes {
        let json = self.json_unkept().bytes;
        match json::top_level_member(&json, b"metadata") {
            Some(r) => json.slice(r),
            None => Bytes::from_static(b"{}"),
        }
    }

    /// The value of a field usable in field selectors, `names` the resource's selectable
    /// fields (its store's `field_names`).
    pub fn field(&self, names: &[String], field: &str) -> Option<&str> {
        match field {
            "metadata.name" => Some(self.name()),
            "metadata.namespace" => Some(self.namespace().unwrap_or_default()),
            _ => {
                let i = names.iter().position(|n| n == field)?;
                let (strings, labels) = self.selector_strings();
                strings.get(1 + labels + i)
            }
        }
    }
}

impl Drop for CachedObject {
    fn drop(&mut self) {
        self.give_up_rendering();
        let Some(derived) = self.derived.get().and_then(|d| d.more.get()) else {
            return;
        };
        if let Some((m, true)) = derived.metadata.get() {
            metrics::gauge!("watchd_rendered_json_bytes").decrement(m.len() as f64);
        }
        if let Some(Some(pb)) = derived.encoded.get() {
            metrics::gauge!("watchd_encoded_protobuf_bytes").decrement(pb.value.len() as f64);
        }
    }
}

/// Selectable field values of a protobuf object, read from the wire; None if unreadable.
fn protobuf_field_values(pb: &StoredProtobuf, specs: &[crate::codec::FieldSpec]) -> Option<Packed> {
    let env = crate::codec::envelope::parse(&pb.value).ok()?;
    crate::codec::protobuf_selectable_values(env.api_version, env.kind, env.raw, specs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    #[test]
    fn namespace_and_name_come_from_the_key() {
        let value = br#"{"metadata":{"name":"a"}}"#;
        let d = decode("ns1/a", value, Revision(3), &[]).unwrap();
        let o = CachedObject::new(Revision(3), d);
        assert_eq!((o.namespace(), o.name()), (Some("ns1"), "a"));
        assert_eq!(o.key(), "ns1/a");
        let d = decode("node-1", value, Revision(3), &[]).unwrap();
        let c = CachedObject::new(Revision(3), d);
        assert_eq!((c.namespace(), c.name()), (None, "node-1"));
        assert_eq!(c.field(&[], "metadata.namespace"), Some(""));
    }

    #[test]
    fn facts_read_uid_generation_and_deletion_from_either_storage() {
        let facts = |json: &str| {
            let d = decode("ns/a", json.as_bytes(), Revision(3), &[]).unwrap();
            CachedObject::new(Revision(3), d).facts().clone()
        };
        let f = facts(
            r#"{"metadata":{"name":"a","uid":"u-1","generation":7,"deletionTimestamp":"2026-01-01T00:00:00Z"}}"#,
        );
        assert_eq!((&*f.uid, f.generation, f.deleting), ("u-1", 7, true));
        let f = facts(r#"{"metadata":{"name":"a","deletionTimestamp":null}}"#);
        assert_eq!(f, MetaFacts::default(), "null is not set");
        let f = facts(r#"{"metadata":{"name":"a","uid":["not a string"]}}"#);
        assert_eq!(f, MetaFacts::default(), "odd metadata reads as defaults");
        // A protobuf-stored object: read from `metadata` rendered alone.
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u-2", "generation": 2,
                "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        let value = crate::codec::pbjson::encode_stored(&pod).unwrap();
        let d = decode("ns/a", &value, Revision(3), &[]).unwrap();
        let o = CachedObject::new(Revision(3), d);
        let f = o.facts().clone();
        assert_eq!((&*f.uid, f.generation, f.deleting), ("u-2", 2, true));
        assert!(!o.json_ready(), "facts do not render the object");
        // The same facts as the rendered JSON's metadata.
        let rendered: MetaFacts = serde_json::from_slice(&o.metadata_json()).unwrap();
        assert_eq!(rendered, f);
    }

    #[test]
    fn protobuf_json_is_rendered_on_first_use_and_not_in_cached_bytes() {
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "ns1"}, "spec": {"nodeName": "n"}});
        let value = crate::codec::pbjson::encode_stored(&pod).unwrap();
        let d = decode("ns1/a", &value, Revision(3), &[]).unwrap();
        let o = Arc::new(CachedObject::new(Revision(3), d));
        assert!(!o.json_ready());
        let before = o.cached_bytes();
        let v: serde_json::Value = serde_json::from_slice(&o.json()).unwrap();
        assert!(o.json_ready());
        assert_eq!(v["metadata"]["resourceVersion"], "3");
        assert_eq!(v["spec"]["nodeName"], "n");
        assert_eq!(
            o.cached_bytes(),
            before,
            "the snapshot's accounting must not drift"
        );
        // The deleted state renders its own (under the budget), and its protobuf carries
        // the RV.
        let gone = Arc::new(o.at_revision(Revision(9)));
        assert!(!gone.json_ready());
        let v: serde_json::Value = serde_json::from_slice(&gone.json()).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "9");
        let pb = gone.protobuf().unwrap();
        let env = crate::codec::envelope::parse(&pb.value).unwrap();
        let meta = crate::codec::wire::last_bytes(env.raw, 1).unwrap();
        assert_eq!(crate::codec::wire::last_bytes(meta, 6), Some(&b"9"[..]));
        // PartialObjectMetadata of an unrendered object renders `metadata` alone, the
        // same bytes as the slice of the whole rendering.
        let d = decode("ns1/a", &value, Revision(4), &[]).unwrap();
        let fresh = Arc::new(CachedObject::new(Revision(4), d));
        let meta = fresh.metadata_json();
        assert!(
            !fresh.json_ready(),
            "metadata alone does not render the object"
        );
        let v: serde_json::Value = serde_json::from_slice(&meta).unwrap();
        assert_eq!(v["name"], "a");
        assert_eq!(v["resourceVersion"], "4");
        fresh.json();
        assert_eq!(fresh.metadata_json(), meta);
        // An unrendered object's deleted state stays unrendered.
        let d = decode("ns1/a", &value, Revision(4), &[]).unwrap();
        let o = CachedObject::new(Revision(4), d);
        assert!(!o.at_revision(Revision(10)).json_ready());
    }

    #[test]
    fn deleted_state_is_served_at_the_delete_revision() {
        let d = decode("ns1/a", br#"{"metadata":{"name":"a"}}"#, Revision(3), &[]).unwrap();
        let o = CachedObject::new(Revision(3), d);
        let gone = Arc::new(o.at_revision(Revision(1000)));
        let v: serde_json::Value = serde_json::from_slice(&gone.json()).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "1000");
        assert_eq!(gone.revision, Revision(1000));
    }

    #[test]
    fn a_cached_object_holds_no_more_than_its_parts() {
        // Every byte here is paid by each of the cache's objects (100 000 objects: 8.8 MB):
        // what readers derive is in one box allocated on first use, the stored form is one
        // of two, and the key, labels and field values share one allocation. 88 bytes and
        // the Arc's 16 fill glibc's 112-byte chunk (one more word would take 128).
        assert!(std::mem::size_of::<CachedObject>() <= 88);
        // A full JSON list gives every object it reads the box of what JSON readers
        // derive: 24 bytes, a 32-byte chunk; the rest is in a box of its own.
        assert_eq!(std::mem::size_of::<Derived>(), 24);
        let d = decode(
            "ns/a",
            br#"{"metadata":{"name":"a","labels":{"b":"2","a":"1"}}}"#,
            Revision(3),
            &[],
        )
        .unwrap();
        let o = CachedObject::new(Revision(3), d);
        assert_eq!(
            o.labels().iter().collect::<Vec<_>>(),
            [("a", "1"), ("b", "2")]
        );
        assert_eq!(o.labels().get("b"), Some("2"));
        assert_eq!(o.field(&[], "metadata.name"), Some("a"));
        assert!(o.derived.get().is_none(), "nothing derived before a read");
        assert_eq!(o.facts(), &MetaFacts::default());
        assert!(o.derived.get().is_some());
    }
}
