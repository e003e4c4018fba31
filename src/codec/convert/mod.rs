//! Serving a resource in another apiVersion than the one kube-apiserver stored it in.
//!
//! kube-apiserver 1.34 writes a few resources in a version it does not serve (or serves
//! them in two versions from one stored form): it decodes the stored version and
//! converts. watchd converts once, at ingest, into the served version's protobuf, which
//! the cache then keeps as if it had been stored so: protobuf readers get it as it is,
//! JSON is rendered from it lazily, in the served version's Go field order. Each
//! conversion is proven against kube-apiserver's conversion functions by tests:
//!
//! - [`Conversion::Relabel`]: the served type is the stored one field for field, under
//!   another apiVersion (resource.k8s.io v1beta2 → v1 in 1.34; `pbjson::same_type`
//!   checks it): only the envelope changes.
//! - [`Conversion::EventsV1`]: a core/v1 Event served as events.k8s.io/v1: every field
//!   has a home under another name and number (`involvedObject` → `regarding`, `message`
//!   → `note`, `source` → `deprecatedSource`, ...), the values unchanged.
//! - [`Conversion::CrdV1`]: a CustomResourceDefinition stored as v1beta1, defaulted and
//!   converted to v1 as kube-apiserver does ([`crd`]).
//!
//! A value stored in any other apiVersion than the one expected is served as stored.

pub mod crd;

use serde_json::Value;

use super::envelope;
use super::pbjson::{self, TranscodeError};
use super::protobuf::StoredProtobuf;
use super::wire::{self, WireError};

/// How a resource's stored values become the served version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// Same type, other apiVersion: only the envelope's apiVersion changes.
    Relabel,
    /// core/v1 Event → events.k8s.io/v1 Event.
    EventsV1,
    /// apiextensions.k8s.io/v1beta1 CustomResourceDefinition → v1.
    CrdV1,
}

/// A resource's conversion: values stored as `from` are served as `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Convert {
    /// The apiVersion kube-apiserver stores, e.g. `resource.k8s.io/v1beta2`.
    pub from: String,
    /// The apiVersion served, e.g. `resource.k8s.io/v1`.
    pub to: String,
    /// The kind (the same in both versions).
    pub kind: String,
    /// How.
    pub conversion: Conversion,
}

/// Why a value could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The stored protobuf does not read.
    #[error("{0}")]
    Wire(#[from] WireError),
    /// The stored JSON, or its re-encoding, failed.
    #[error("{0}")]
    Transcode(#[from] TranscodeError),
    /// The stored JSON is not an object.
    #[error("invalid JSON object: {0}")]
    Json(String),
}

/// core/v1 Event field number → events.k8s.io/v1 Event field number (Go field order of
/// k8s.io/api 1.34; kube-apiserver's conversion maps each field onto the one of the same
/// meaning). Every field of both types is here: the conversion loses nothing.
pub const EVENT_V1_FIELDS: [(u16, u16); 15] = [
    (1, 1),  // metadata
    (2, 8),  // involvedObject → regarding
    (3, 7),  // reason
    (4, 10), // message → note
    (5, 12), // source → deprecatedSource
    (6, 13), // firstTimestamp → deprecatedFirstTimestamp
    (7, 14), // lastTimestamp → deprecatedLastTimestamp
    (8, 15), // count → deprecatedCount
    (9, 11), // type
    (10, 2), // eventTime
    (11, 3), // series
    (12, 6), // action
    (13, 9), // related
    (14, 4), // reportingComponent → reportingController
    (15, 5), // reportingInstance
];

impl Convert {
    /// The stored value in the served version, or None when it is not stored as `from`
    /// (then it is served as stored). A protobuf value stays protobuf; a JSON one becomes
    /// protobuf too (what kube-apiserver decodes from JSON and serves: members the type
    /// does not know are dropped).
    pub fn apply(&self, value: &[u8]) -> Result<Option<Vec<u8>>, ConvertError> {
        if value.starts_with(envelope::MAGIC) {
            let env = envelope::parse(value)?;
            if env.api_version != self.from || env.kind != self.kind {
                return Ok(None);
            }
            return self.convert_raw(env.raw).map(Some);
        }
        let json: Value =
            serde_json::from_slice(value).map_err(|e| ConvertError::Json(e.to_string()))?;
        let stored_as = |k: &str| json.get(k).and_then(Value::as_str);
        if stored_as("apiVersion") != Some(&self.from) || stored_as("kind") != Some(&self.kind) {
            return Ok(None);
        }
        let raw = pbjson::encode_json_lossy(&self.from, &self.kind, &json)?;
        self.convert_raw(&raw).map(Some)
    }

    fn convert_raw(&self, raw: &[u8]) -> Result<Vec<u8>, ConvertError> {
        let raw = match self.conversion {
            Conversion::Relabel => raw.to_vec(),
            Conversion::EventsV1 => renumber(raw, &EVENT_V1_FIELDS)?,
            Conversion::CrdV1 => {
                let stored = pbjson::render(&self.from, &self.kind, raw, None)?;
                let v1beta1: Value = serde_json::from_slice(&stored.json)
                    .map_err(|e| ConvertError::Json(e.to_string()))?;
                pbjson::encode_json_lossy(&self.to, &self.kind, &crd::v1beta1_to_v1(&v1beta1))?
            }
        };
        Ok(envelope::write(&self.to, &self.kind, &raw))
    }
}

/// The served version of a core/v1 Event read as events.k8s.io/v1.
pub const EVENTS_V1: &str = "events.k8s.io/v1";

/// Whether a cached protobuf value is a core/v1 Event: what [`Conversion::EventsV1`]
/// converts (any other value is served as stored).
pub fn is_core_event(stored: &StoredProtobuf) -> bool {
    envelope::parse(&stored.value).is_ok_and(|e| e.api_version == "v1" && e.kind == "Event")
}

/// A core/v1 Event as cached (resourceVersion set) served as events.k8s.io/v1: the same
/// bytes as converting the stored value at ingestion, from the core resource's own copy,
/// so that one copy of each Event is kept for both versions.
pub fn event_v1(stored: &StoredProtobuf) -> Result<StoredProtobuf, WireError> {
    let raw = renumber(&stored.raw(), &EVENT_V1_FIELDS)?;
    StoredProtobuf::enveloped(EVENTS_V1, "Event", &raw)
}

/// The length of [`event_v1`]'s `raw`, without converting: what a protobuf list counts
/// before it writes.
pub fn event_v1_raw_len(stored: &StoredProtobuf) -> Result<usize, WireError> {
    let raw = stored.raw();
    Ok(kept(&raw, &EVENT_V1_FIELDS)?
        .map(|(to, value, wt)| field_len(to, wt, value.len()))
        .sum())
}

/// `raw` with its top-level fields renumbered by `table` (from → to) and written in the
/// new numbers' order, as a protobuf encoder writes them; fields the table does not name
/// (newer Kubernetes) are dropped, as a conversion through Go types drops them.
fn renumber(raw: &[u8], table: &[(u16, u16)]) -> Result<Vec<u8>, WireError> {
    let mut fields: Vec<_> = kept(raw, table)?.collect();
    // Stable: repeated fields keep their order.
    fields.sort_by_key(|(to, _, _)| *to);
    let len = fields
        .iter()
        .map(|(to, v, wt)| field_len(*to, *wt, v.len()))
        .sum();
    let mut out = Vec::with_capacity(len);
    for (to, value, wt) in fields {
        wire::put_tag(&mut out, u32::from(to), wt);
        if wt == wire::BYTES {
            wire::put_varint(&mut out, value.len() as u64);
        }
        out.extend_from_slice(&raw[value]);
    }
    Ok(out)
}

/// The top-level fields of `raw` that `table` maps, in wire order: (new number, where
/// the value is, wire type).
fn kept<'t>(
    raw: &[u8],
    table: &'t [(u16, u16)],
) -> Result<impl Iterator<Item = (u16, std::ops::Range<usize>, u8)> + 't, WireError> {
    Ok(wire::spans(raw)?.into_iter().filter_map(move |s| {
        table
            .iter()
            .find(|(from, _)| u32::from(*from) == s.number)
            .map(|&(_, to)| (to, s.value, s.wire))
    }))
}

/// The bytes a field numbered `to` of wire type `wt` and `len` bytes of value takes.
fn field_len(to: u16, wt: u8, len: usize) -> usize {
    let tag = wire::varint_len((u64::from(to) << 3) | u64::from(wt));
    let prefix = if wt == wire::BYTES {
        wire::varint_len(len as u64)
    } else {
        0
    };
    tag + prefix + len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Convert {
        Convert {
            from: "v1".into(),
            to: "events.k8s.io/v1".into(),
            kind: "Event".into(),
            conversion: Conversion::EventsV1,
        }
    }

    #[test]
    fn every_event_field_maps_onto_a_field_of_the_same_wire_shape() {
        let core = pbjson::field_numbers("v1", "Event");
        let v1 = pbjson::field_numbers("events.k8s.io/v1", "Event");
        let mut from: Vec<u16> = EVENT_V1_FIELDS.iter().map(|(f, _)| *f).collect();
        let mut to: Vec<u16> = EVENT_V1_FIELDS.iter().map(|(_, t)| *t).collect();
        from.sort_unstable();
        to.sort_unstable();
        let (mut core_sorted, mut v1_sorted) = (core.clone(), v1.clone());
        core_sorted.sort_unstable();
        v1_sorted.sort_unstable();
        assert_eq!(from, core_sorted, "every core/v1 Event field, once");
        assert_eq!(to, v1_sorted, "every events.k8s.io/v1 Event field, once");
        for (f, t) in EVENT_V1_FIELDS {
            assert!(
                pbjson::same_field_wire(("v1", "Event", f), ("events.k8s.io/v1", "Event", t)),
                "core field {f} and events field {t} differ on the wire"
            );
        }
    }

    /// kube-apiserver's answer for this core Event read as events.k8s.io/v1, worked out
    /// from its conversion (pkg/apis/events/v1/conversion.go: involvedObject → regarding,
    /// message → note, source → deprecatedSource, firstTimestamp/lastTimestamp/count →
    /// deprecated*, reportingComponent → reportingController; the rest by name) and the
    /// Go JSON of events/v1.Event (field order; `regarding` and `deprecatedSource` are
    /// structs, never omitted; `eventTime` has no omitempty: null; `deprecatedCount` 0 is
    /// omitted; EventSeries fields have no omitempty).
    #[test]
    fn core_event_reads_as_events_v1_as_kube_apiserver_converts_it() {
        let core = serde_json::json!({
            "kind": "Event", "apiVersion": "v1",
            "metadata": {"name": "web.1", "namespace": "default", "uid": "u1",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web",
                               "uid": "p1", "apiVersion": "v1", "resourceVersion": "7",
                               "fieldPath": "spec.containers{c}"},
            "reason": "Pulled", "message": "pulled <image>",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2026-01-01T00:00:01Z", "lastTimestamp": "2026-01-01T00:00:02Z",
            "count": 2, "type": "Normal", "eventTime": null,
            "reportingComponent": "kubelet", "reportingInstance": "node-1"
        });
        let stored = pbjson::encode_stored(&core).unwrap();
        let converted = events().apply(&stored).unwrap().expect("stored as v1");
        let json: Value =
            serde_json::from_slice(&pbjson::render_stored(&converted, None).unwrap().json).unwrap();
        let want = serde_json::json!({
            "kind": "Event", "apiVersion": "events.k8s.io/v1",
            "metadata": {"name": "web.1", "namespace": "default", "uid": "u1",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "eventTime": null,
            "reportingController": "kubelet", "reportingInstance": "node-1",
            "reason": "Pulled",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "web",
                          "uid": "p1", "apiVersion": "v1", "resourceVersion": "7",
                          "fieldPath": "spec.containers{c}"},
            "note": "pulled <image>", "type": "Normal",
            "deprecatedSource": {"component": "kubelet", "host": "node-1"},
            "deprecatedFirstTimestamp": "2026-01-01T00:00:01Z",
            "deprecatedLastTimestamp": "2026-01-01T00:00:02Z",
            "deprecatedCount": 2
        });
        assert_eq!(json, want);
        let text = String::from_utf8(pbjson::render_stored(&converted, None).unwrap().json);
        let keys: Vec<&str> = want
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let text = text.unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\":")).unwrap();
        let mut order: Vec<&str> = keys.clone();
        order.sort_by_key(|k| at(k));
        assert_eq!(
            order,
            [
                "kind",
                "apiVersion",
                "metadata",
                "eventTime",
                "reportingController",
                "reportingInstance",
                "reason",
                "regarding",
                "note",
                "type",
                "deprecatedSource",
                "deprecatedFirstTimestamp",
                "deprecatedLastTimestamp",
                "deprecatedCount"
            ],
            "Go field order of events/v1.Event"
        );
        // The same event stored as JSON converts to the same bytes.
        let from_json = events().apply(&serde_json::to_vec(&core).unwrap()).unwrap();
        assert_eq!(from_json.as_deref(), Some(&converted[..]));
    }

    #[test]
    fn an_empty_event_reads_with_go_zero_values_and_series_keeps_its_zeros() {
        let core = serde_json::json!({"kind": "Event", "apiVersion": "v1",
            "metadata": {"name": "e", "namespace": "ns"},
            "series": {"count": 0, "lastObservedTime": "2026-01-01T00:00:00.000001Z"}});
        let converted = events()
            .apply(&pbjson::encode_stored(&core).unwrap())
            .unwrap()
            .unwrap();
        let json: Value =
            serde_json::from_slice(&pbjson::render_stored(&converted, None).unwrap().json).unwrap();
        assert_eq!(json["regarding"], serde_json::json!({}));
        assert_eq!(json["deprecatedSource"], serde_json::json!({}));
        assert_eq!(json["deprecatedFirstTimestamp"], Value::Null);
        assert!(json.get("deprecatedCount").is_none());
        assert_eq!(
            json["series"],
            serde_json::json!({"count": 0, "lastObservedTime": "2026-01-01T00:00:00.000001Z"})
        );
    }

    /// What the events.k8s.io resource serves from the core resource's cached bytes is,
    /// byte for byte, what converting the stored value at ingestion gave.
    #[test]
    fn a_cached_core_event_converts_as_its_stored_value() {
        let core = serde_json::json!({"kind": "Event", "apiVersion": "v1",
            "metadata": {"name": "web.1", "namespace": "default", "resourceVersion": "3"},
            "involvedObject": {"kind": "Pod", "name": "web"}, "reason": "Pulled",
            "message": "m", "count": 2, "type": "Normal", "reportingComponent": "kubelet",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T00:00:00.000001Z"}});
        let stored = pbjson::encode_stored(&core).unwrap();
        let cached = super::super::protobuf::with_resource_version(&stored, "42").unwrap();
        assert!(is_core_event(&cached));
        let converted = events().apply(&stored).unwrap().unwrap();
        let want = super::super::protobuf::with_resource_version(&converted, "42").unwrap();
        let got = event_v1(&cached).unwrap();
        assert_eq!(got, want);
        assert_eq!(got.raw(), want.raw());
        assert_eq!(event_v1_raw_len(&cached), Ok(got.raw().len()));
        assert!(
            !is_core_event(&got),
            "an events.k8s.io/v1 Event is not converted again"
        );
    }

    #[test]
    fn values_of_other_versions_are_served_as_stored() {
        let other = serde_json::json!({"kind": "Event", "apiVersion": "events.k8s.io/v1",
            "metadata": {"name": "e"}});
        assert_eq!(
            events().apply(&pbjson::encode_stored(&other).unwrap()),
            Ok(None)
        );
        assert_eq!(
            events().apply(&serde_json::to_vec(&other).unwrap()),
            Ok(None)
        );
        assert!(events().apply(b"k8s\x00\x0a\xff").is_err());
        assert!(events().apply(b"{").is_err());
    }

    #[test]
    fn relabel_changes_only_the_envelope() {
        let claim = serde_json::json!({"kind": "ResourceClaim",
            "apiVersion": "resource.k8s.io/v1beta2",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}});
        let stored = pbjson::encode_stored(&claim).unwrap();
        let c = Convert {
            from: "resource.k8s.io/v1beta2".into(),
            to: "resource.k8s.io/v1".into(),
            kind: "ResourceClaim".into(),
            conversion: Conversion::Relabel,
        };
        let out = c.apply(&stored).unwrap().unwrap();
        let (a, b) = (
            envelope::parse(&stored).unwrap(),
            envelope::parse(&out).unwrap(),
        );
        assert_eq!(a.raw, b.raw);
        assert_eq!(b.api_version, "resource.k8s.io/v1");
        let mut want = claim.clone();
        want["apiVersion"] = "resource.k8s.io/v1".into();
        let json: Value =
            serde_json::from_slice(&pbjson::render_stored(&out, None).unwrap().json).unwrap();
        assert_eq!(json["spec"], want["spec"]);
        assert_eq!(json["apiVersion"], want["apiVersion"]);
    }
}
