//! Decoding what the watchers receive: watchd's JSON-lines watch events and
//! the ConfigMap JSON values etcd sends, down to the three things the
//! accounting needs (event type, revision, send stamp). Everything else in
//! the object is skipped by serde without being kept.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;

/// The data key the writer stamps with its send time (unix nanoseconds).
pub const STAMP_KEY: &str = "sentUnixNanos";

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
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(rename = "sentUnixNanos", borrow, default)]
    sent: Option<Cow<'a, str>>,
}

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
}

fn stamp(data: Option<Data<'_>>) -> Option<u64> {
    data?.sent?.parse().ok()
}

/// Decodes one watchd watch line (`{"type":..,"object":{..}}`).
pub fn parse_watch_line(line: &[u8]) -> Result<Received, String> {
    let ev: WatchLine<'_> = serde_json::from_slice(line).map_err(|e| {
        let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
        format!("bad watch event ({e}): {shown}")
    })?;
    let revision = ev
        .object
        .metadata
        .and_then(|m| m.resource_version)
        .and_then(|rv| rv.parse().ok());
    Ok(Received {
        kind: ev.kind.into_owned(),
        revision,
        sent_ns: stamp(ev.object.data),
    })
}

/// The send stamp of a ConfigMap JSON value as etcd stores it.
pub fn parse_object_stamp(value: &[u8]) -> Result<Option<u64>, String> {
    let obj: Object<'_> =
        serde_json::from_slice(value).map_err(|e| format!("bad object JSON: {e}"))?;
    Ok(stamp(obj.data))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_lines_decode() {
        let line = br#"{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"n","resourceVersion":"42","labels":{"x":"y"}},"data":{"payload":"xx\"x","sentUnixNanos":"1700000000123456789"}}}"#;
        let r = parse_watch_line(line).unwrap();
        assert_eq!(r.kind, "MODIFIED");
        assert_eq!(r.revision, Some(42));
        assert_eq!(r.sent_ns, Some(1_700_000_000_123_456_789));
        let err = br#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
        let r = parse_watch_line(err).unwrap();
        assert_eq!(
            (r.kind.as_str(), r.revision, r.sent_ns),
            ("ERROR", None, None)
        );
        assert!(parse_watch_line(b"{not json").is_err());
    }

    #[test]
    fn stored_values_decode() {
        let v = br#"{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"sentUnixNanos":"5"}}"#;
        assert_eq!(parse_object_stamp(v), Ok(Some(5)));
        assert_eq!(parse_object_stamp(br#"{"kind":"ConfigMap"}"#), Ok(None));
        assert!(parse_object_stamp(b"k8s\0proto").is_err());
        assert_eq!(latency_us(1_000_000, 3_500_000), 2_500);
        assert_eq!(latency_us(5, 1), 0);
    }
}
