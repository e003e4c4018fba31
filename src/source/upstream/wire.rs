//! The upstream's wire: watch lines, the heads of objects and lists read to route and
//! order them, the type meta list items lack, how a refusal ends a read, and a streamed
//! body split into lines.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{End, MAX_BODY};
use crate::registry::ResourceInfo;
use crate::source::SourceError;
use crate::Revision;

#[derive(Deserialize)]
pub(super) struct EventLine<'a> {
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(borrow)]
    pub(super) object: &'a RawValue,
}

#[derive(Deserialize, Default)]
pub(super) struct Meta {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) namespace: String,
    #[serde(default, rename = "resourceVersion")]
    pub(super) resource_version: String,
    #[serde(default)]
    pub(super) annotations: HashMap<String, String>,
    #[serde(default, rename = "continue")]
    pub(super) cont: String,
}

/// What is read of an object (or a Status): enough to route and order it.
#[derive(Deserialize)]
pub(super) struct ObjectHead {
    #[serde(default)]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) metadata: Meta,
    #[serde(default)]
    pub(super) code: u16,
    #[serde(default)]
    pub(super) message: String,
}

#[derive(Deserialize)]
pub(super) struct ListBody {
    #[serde(default)]
    pub(super) metadata: Meta,
    #[serde(default)]
    pub(super) items: Vec<Box<RawValue>>,
}

/// One watch line and the head of its object (the follower and the probe read alike).
pub(super) fn read_event(line: &[u8]) -> Result<(EventLine<'_>, ObjectHead), SourceError> {
    let ev: EventLine =
        serde_json::from_slice(line).map_err(|source| SourceError::Undecodable {
            what: "watch event",
            source,
        })?;
    let head: ObjectHead =
        serde_json::from_str(ev.object.get()).map_err(|source| SourceError::Undecodable {
            what: "watch event object",
            source,
        })?;
    Ok((ev, head))
}

pub(super) fn parse_rv(rv: &str) -> Result<Revision, SourceError> {
    rv.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .map(Revision)
        .ok_or_else(|| SourceError::NotARevision(rv.to_string()))
}

/// The value as the cache keeps it: list items of built-in kinds come without `kind`
/// and `apiVersion`, which the object in etcd (and every watch event) has.
pub(super) fn with_type_meta(object: &str, head: &ObjectHead, info: &ResourceInfo) -> Vec<u8> {
    let object = object.trim();
    if !head.kind.is_empty() || !object.starts_with('{') {
        return object.as_bytes().to_vec();
    }
    let rest = object[1..].trim_start();
    let mut out = Vec::with_capacity(object.len() + 64);
    out.extend_from_slice(b"{\"kind\":");
    out.extend_from_slice(&serde_json::to_vec(&info.kind).unwrap_or_default());
    out.extend_from_slice(b",\"apiVersion\":");
    out.extend_from_slice(&serde_json::to_vec(&info.api_version()).unwrap_or_default());
    if !rest.starts_with('}') {
        out.push(b',');
    }
    out.extend_from_slice(rest.as_bytes());
    out
}

/// The message of a refusal: its Status's, or the start of a body that is no Status.
pub(super) fn status_message(body: &[u8]) -> String {
    serde_json::from_slice::<ObjectHead>(body)
        .map(|h| h.message)
        .unwrap_or_else(|_| String::from_utf8_lossy(&body[..body.len().min(256)]).into_owned())
}

/// How a refusal ends a read, from its status and Status body.
pub(super) fn status_end(status: u16, body: &[u8]) -> End {
    let message = status_message(body);
    match status {
        410 => End::Expired(message),
        403..=405 => End::NotServed(status, message),
        400 | 422 => End::NoStreamingList(SourceError::Refused {
            code: status,
            message,
        }),
        _ => End::Failed(SourceError::Refused {
            code: status,
            message,
        }),
    }
}

pub(super) fn error_end(code: u16, message: String) -> End {
    match code {
        410 => End::Expired(message),
        _ => End::Failed(SourceError::ErrorEvent { code, message }),
    }
}

/// A watch's `timeoutSeconds`: five to ten minutes, spread as client-go spreads them.
pub(super) fn watch_timeout_seconds() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    300 + u64::from(nanos % 300)
}

/// Percent-encodes a query value (continue tokens are URL-safe base64, but may be padded).
pub(super) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Splits a streamed body into lines (watch events are one JSON object per line).
pub(super) struct LineReader {
    pub(super) body: Incoming,
    pub(super) buf: BytesMut,
}

impl LineReader {
    pub(super) fn new(body: Incoming) -> LineReader {
        LineReader {
            body,
            buf: BytesMut::new(),
        }
    }

    /// The complete lines of the next read (at least one), or None at the end.
    pub(super) async fn next_lines(&mut self) -> Result<Option<Vec<Bytes>>, SourceError> {
        loop {
            let mut lines = Vec::new();
            while let Some(i) = memchr::memchr(b'\n', &self.buf) {
                let line = self.buf.split_to(i + 1).freeze();
                let line = line.slice(..i);
                if !line.iter().all(u8::is_ascii_whitespace) {
                    lines.push(line);
                }
            }
            if !lines.is_empty() {
                return Ok(Some(lines));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(SourceError::Stream(e)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                        if self.buf.len() > MAX_BODY {
                            return Err(SourceError::EventTooLarge(MAX_BODY));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtin::find as info;

    fn head(object: &str) -> ObjectHead {
        serde_json::from_str(object).unwrap()
    }

    #[test]
    fn list_items_get_the_type_meta_their_watch_events_have() {
        let pods = info("", "pods");
        let item = r#"{"metadata":{"name":"a","resourceVersion":"5"},"spec":{}}"#;
        let v = with_type_meta(item, &head(item), &pods);
        let parsed: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(parsed["kind"], "Pod");
        assert_eq!(parsed["apiVersion"], "v1");
        assert_eq!(parsed["metadata"]["name"], "a");
        let deployments = info("apps", "deployments");
        let typed = r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d"}}"#;
        assert_eq!(
            with_type_meta(typed, &head(typed), &deployments),
            typed.as_bytes()
        );
        let empty = "{}";
        let v = with_type_meta(empty, &head(empty), &pods);
        assert_eq!(v, br#"{"kind":"Pod","apiVersion":"v1"}"#.to_vec());
    }

    #[test]
    fn refusals_end_reads_as_their_status_says() {
        let status = br#"{"kind":"Status","code":410,"message":"too old"}"#;
        assert!(matches!(status_end(410, status), End::Expired(_)));
        assert!(matches!(
            status_end(404, b"not json"),
            End::NotServed(404, _)
        ));
        assert!(matches!(status_end(403, status), End::NotServed(403, _)));
        assert!(matches!(status_end(422, status), End::NoStreamingList(_)));
        assert!(matches!(
            status_end(500, status),
            End::Failed(SourceError::Refused { code: 500, message }) if message == "too old"
        ));
        assert!(matches!(error_end(410, String::new()), End::Expired(_)));
        assert!(matches!(error_end(500, "x".into()), End::Failed(_)));
    }

    #[test]
    fn resource_versions_must_be_revisions() {
        assert_eq!(parse_rv("42").ok(), Some(Revision(42)));
        for bad in ["", "0", "-3", "abc", "1.5"] {
            assert!(parse_rv(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn continue_tokens_survive_the_query() {
        assert_eq!(percent_encode("eyJ2Ijoi_-=="), "eyJ2Ijoi_-%3D%3D");
    }

    #[test]
    fn watch_timeouts_are_spread_over_five_minutes() {
        for _ in 0..100 {
            let t = watch_timeout_seconds();
            assert!((300..600).contains(&t), "{t}");
        }
    }
}
