//! Decoding what the watchers receive, down to the three things the
//! accounting needs (event type, revision, send stamp):
//!
//! - watchd's JSON-lines watch events and ConfigMap JSON values from etcd:
//!   scanned in one pass by [`super::jsonscan`], which picks out `type`,
//!   `metadata.resourceVersion` and the stamp without decoding the object
//!   (the serde decoding it replaced is kept in the tests as their oracle);
//! - watchd's protobuf watch frames (`WatchEvent{1: type, 2: RawExtension{1:
//!   raw}}`, raw being `k8s\0` + `runtime.Unknown`) and ConfigMap protobuf
//!   values from etcd: the fields are walked on the wire, nothing is rendered
//!   as JSON;
//! - the events of watchd's own gRPC API (decoded by tonic and prost): type
//!   and revision are typed fields, the stamp is read from the object's
//!   bytes as from a stored value.

use std::time::{SystemTime, UNIX_EPOCH};

use super::jsonscan::{scan_line, scan_object};
use watchd::api::grpc::pb;
use watchd::codec::envelope::{parse as parse_envelope, MAGIC};
use watchd::codec::wire::{fields, Val as WireValue, WireError};

/// The data key the writer stamps with its send time (unix nanoseconds).
pub const STAMP_KEY: &str = "sentUnixNanos";
/// The annotation that carries the send time on objects without `data`
/// (the pods of the node-scoped scenario).
pub const STAMP_ANNOTATION: &str = "loadtest.watchd.dev/sent-unix-nanos";

/// What one watch event carries for the accounting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR` (watchd), or `PUT`
    /// / `DELETE` (etcd).
    pub kind: String,
    /// The object's revision (`metadata.resourceVersion` or `mod_revision`).
    pub revision: Option<i64>,
    /// The writer's send stamp, unix nanoseconds.
    pub sent_ns: Option<u64>,
    /// For `ERROR` events, what the server said (the JSON line, or the
    /// protobuf Status's code, reason and message).
    pub detail: Option<String>,
}

/// Decodes one watchd watch line (`{"type":..,"object":{..}}`): a scan for
/// the type, `metadata.resourceVersion` and the stamp; the object is not
/// decoded. An `ERROR` line's detail is the whole line.
pub fn parse_watch_line(line: &[u8]) -> Result<Received, String> {
    let scanned = scan_line(line).map_err(|e| {
        let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
        format!("bad watch event ({e}): {shown}")
    })?;
    let kind = scanned.kind.as_deref().unwrap_or_default();
    let detail = (kind == "ERROR").then(|| String::from_utf8_lossy(line).into_owned());
    Ok(Received {
        kind: kind.to_string(),
        revision: scanned.revision(),
        sent_ns: scanned.sent_ns(),
        detail,
    })
}

/// The send stamp of a ConfigMap value as etcd stores it: JSON, or
/// Kubernetes protobuf (`k8s\0` + `runtime.Unknown`).
pub fn parse_object_stamp(value: &[u8]) -> Result<Option<u64>, String> {
    if value.starts_with(MAGIC) {
        let env = parse_envelope(value).map_err(|e| format!("bad protobuf envelope: {e}"))?;
        return Ok(protobuf_object(env.raw)?.sent_ns);
    }
    let scanned = scan_object(value).map_err(|e| format!("bad object JSON: {e}"))?;
    Ok(scanned.sent_ns())
}

/// What the accounting reads of a protobuf object.
#[derive(Debug, Default, PartialEq, Eq)]
struct ProtobufObject {
    revision: Option<i64>,
    sent_ns: Option<u64>,
}

fn bad_object(e: WireError) -> String {
    format!("bad protobuf object: {e}")
}

fn wire_str(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok()
}

/// The value of a map entry message `{1: key, 2: value}` if its key is `want`.
fn map_entry<'a>(entry: &'a [u8], want: &str) -> Result<Option<&'a [u8]>, String> {
    let (mut key, mut value) = (None, None);
    for f in fields(entry) {
        match f.map_err(bad_object)? {
            (1, WireValue::Bytes(k)) => key = Some(k),
            (2, WireValue::Bytes(v)) => value = Some(v),
            _ => {}
        }
    }
    Ok(if key == Some(want.as_bytes()) {
        value
    } else {
        None
    })
}

/// `metadata.resourceVersion` and the send stamp of an object's protobuf
/// message (the envelope's `raw`): field 1 is ObjectMeta, whose field 6 is
/// resourceVersion and field 12 the annotations (map entries {1: key, 2:
/// value}, the [`STAMP_ANNOTATION`] stamp of pods); a ConfigMap's field 2
/// is `data`, a map of the same shape holding [`STAMP_KEY`], which wins.
/// Other fields, and other objects' fields with the same numbers as long as
/// they are not messages, are skipped.
fn protobuf_object(raw: &[u8]) -> Result<ProtobufObject, String> {
    fn number<T: std::str::FromStr>(v: &[u8]) -> Option<T> {
        wire_str(v).and_then(|s| s.parse().ok())
    }
    let mut out = ProtobufObject::default();
    let mut annotated = None;
    for field in fields(raw) {
        match field.map_err(bad_object)? {
            (1, WireValue::Bytes(meta)) => {
                for f in fields(meta) {
                    match f.map_err(bad_object)? {
                        (6, WireValue::Bytes(rv)) => out.revision = number(rv),
                        (12, WireValue::Bytes(entry)) => {
                            if let Some(v) = map_entry(entry, STAMP_ANNOTATION)? {
                                annotated = number(v);
                            }
                        }
                        _ => {}
                    }
                }
            }
            (2, WireValue::Bytes(entry)) => {
                if let Some(v) = map_entry(entry, STAMP_KEY)? {
                    out.sent_ns = number(v);
                }
            }
            _ => {}
        }
    }
    out.sent_ns = out.sent_ns.or(annotated);
    Ok(out)
}

/// A v1 Status as text: `<code> <reason>: <message>` (fields 6, 4, 3).
fn status_text(raw: &[u8]) -> String {
    let (mut code, mut reason, mut message) = (0u64, "", "");
    for f in fields(raw) {
        match f {
            Ok((6, WireValue::Varint(c))) => code = c,
            Ok((4, WireValue::Bytes(r))) => reason = wire_str(r).unwrap_or("?"),
            Ok((3, WireValue::Bytes(m))) => message = wire_str(m).unwrap_or("?"),
            Ok(_) => {}
            Err(e) => return format!("unreadable Status ({e})"),
        }
    }
    format!("{code} {reason}: {message}")
}

/// Decodes one frame of a protobuf watch stream (without its length
/// prefix): `WatchEvent{1: type, 2: RawExtension{1: raw}}`, raw being the
/// enveloped object (a v1 Status for `ERROR`; for `BOOKMARK`, the kind with
/// only `metadata.resourceVersion`).
pub fn parse_watch_frame(frame: &[u8]) -> Result<Received, String> {
    let bad = |what: &str| format!("bad protobuf watch event ({what}, {} bytes)", frame.len());
    let (mut kind, mut object) = (None, None);
    for field in fields(frame) {
        match field.map_err(|e| bad(&e.to_string()))? {
            (1, WireValue::Bytes(t)) => kind = Some(wire_str(t).ok_or_else(|| bad("type"))?),
            (2, WireValue::Bytes(ext)) => {
                for f in fields(ext) {
                    if let (1, WireValue::Bytes(raw)) = f.map_err(|e| bad(&e.to_string()))? {
                        object = Some(raw);
                    }
                }
            }
            _ => {}
        }
    }
    let kind = kind
        .filter(|k| !k.is_empty())
        .ok_or_else(|| bad("no type"))?;
    let object = object.ok_or_else(|| bad("no object"))?;
    let env = parse_envelope(object).map_err(|e| bad(&format!("object envelope: {e}")))?;
    if kind == "ERROR" {
        return Ok(Received {
            kind: kind.to_string(),
            revision: None,
            sent_ns: None,
            detail: Some(format!("ERROR {} {}", env.kind, status_text(env.raw))),
        });
    }
    let obj = protobuf_object(env.raw)?;
    Ok(Received {
        kind: kind.to_string(),
        revision: obj.revision,
        sent_ns: obj.sent_ns,
        detail: None,
    })
}

/// Decodes one event of watchd's gRPC `Watch` stream: the type, the
/// revision from the object's typed metadata (`metadata.resource_version`,
/// which must agree with the event's own `resource_version`), and the send
/// stamp from the object's bytes (`raw`: Kubernetes JSON, or Kubernetes
/// protobuf, read as [`parse_object_stamp`] reads a stored value). `want` is
/// the encoding asked for: an object in another is an error, as a wrong
/// Content-Type is for the HTTP watchers. A BOOKMARK's revision is the
/// event's; an ERROR's detail is its Status JSON.
pub fn parse_grpc_event(ev: &pb::WatchEvent, want: pb::Encoding) -> Result<Received, String> {
    let t = pb::EventType::try_from(ev.r#type)
        .map_err(|_| format!("gRPC watch event of unknown type {}", ev.r#type))?;
    let kind = t.as_str_name().to_string();
    let event_rv = (ev.resource_version != 0).then_some(ev.resource_version);
    match t {
        pb::EventType::Error => Ok(Received {
            kind,
            revision: None,
            sent_ns: None,
            detail: Some(format!("ERROR {}", String::from_utf8_lossy(&ev.status))),
        }),
        pb::EventType::Bookmark => Ok(Received {
            kind,
            revision: event_rv,
            sent_ns: None,
            detail: None,
        }),
        pb::EventType::Added | pb::EventType::Modified | pb::EventType::Deleted => {
            let at = ev.resource_version;
            let obj = ev
                .object
                .as_ref()
                .ok_or_else(|| format!("gRPC {kind} event at {at} without an object"))?;
            let meta_rv = obj
                .metadata
                .as_ref()
                .map(|m| m.resource_version)
                .filter(|rv| *rv != 0);
            if let (Some(e), Some(m)) = (event_rv, meta_rv) {
                if e != m {
                    return Err(format!(
                        "gRPC {kind} event at revision {e} carries an object at {m}"
                    ));
                }
            }
            if obj.encoding != want as i32 {
                return Err(format!(
                    "gRPC {kind} event at {at}: asked for {} objects, got encoding {}",
                    want.as_str_name(),
                    obj.encoding
                ));
            }
            let sent_ns = parse_object_stamp(&obj.raw)?;
            Ok(Received {
                kind,
                revision: meta_rv.or(event_rv),
                sent_ns,
                detail: None,
            })
        }
    }
}

/// Unix time now, in nanoseconds.
pub fn now_unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Delivery latency in microseconds of an event stamped `sent_ns` and
/// received at `now_ns` (0 if the clocks disagree).
pub fn latency_us(sent_ns: u64, now_ns: u64) -> u64 {
    now_ns.saturating_sub(sent_ns) / 1_000
}

/// The serde decoding the scan replaced, kept as the tests' oracle.
#[cfg(test)]
pub(crate) mod oracle {
    use std::borrow::Cow;

    use serde::Deserialize;

    use super::Received;

    #[derive(Deserialize)]
    struct WatchLine<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        object: Object<'a>,
    }

    #[derive(Deserialize)]
    struct Object<'a> {
        #[serde(borrow, default)]
        metadata: Option<Metadata<'a>>,
        #[serde(borrow, default)]
        data: Option<Data<'a>>,
    }

    #[derive(Deserialize)]
    struct Metadata<'a> {
        #[serde(rename = "resourceVersion", borrow, default)]
        resource_version: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        annotations: Option<Annotations<'a>>,
    }

    #[derive(Deserialize)]
    struct Annotations<'a> {
        #[serde(rename = "loadtest.watchd.dev/sent-unix-nanos", borrow, default)]
        sent: Option<Cow<'a, str>>,
    }

    #[derive(Deserialize)]
    struct Data<'a> {
        #[serde(rename = "sentUnixNanos", borrow, default)]
        sent: Option<Cow<'a, str>>,
    }

    fn object_stamp(obj: Object<'_>) -> (Option<i64>, Option<u64>) {
        let (revision, annotated) = match obj.metadata {
            Some(m) => (
                m.resource_version.and_then(|rv| rv.parse().ok()),
                m.annotations
                    .and_then(|a| a.sent)
                    .and_then(|s| s.parse().ok()),
            ),
            None => (None, None),
        };
        let stamp = obj.data.and_then(|d| d.sent).and_then(|s| s.parse().ok());
        (revision, stamp.or(annotated))
    }

    /// A watch line decoded by serde, as before the scan.
    pub fn parse_watch_line(line: &[u8]) -> Result<Received, String> {
        let ev: WatchLine<'_> =
            serde_json::from_slice(line).map_err(|e| format!("bad watch event ({e})"))?;
        let (revision, sent_ns) = object_stamp(ev.object);
        let detail = (ev.kind == "ERROR").then(|| String::from_utf8_lossy(line).into_owned());
        Ok(Received {
            kind: ev.kind.into_owned(),
            revision,
            sent_ns,
            detail,
        })
    }

    /// A stored JSON value's (revision, stamp) decoded by serde.
    pub fn parse_object(value: &[u8]) -> Result<(Option<i64>, Option<u64>), String> {
        let obj: Object<'_> =
            serde_json::from_slice(value).map_err(|e| format!("bad object JSON: {e}"))?;
        Ok(object_stamp(obj))
    }
}

#[cfg(test)]
#[path = "event_tests.rs"]
mod tests;
