//! Kubernetes protobuf on the wire, for built-in objects stored as protobuf: the stored
//! bytes with `metadata.resourceVersion` rewritten at the wire level (only ObjectMeta and
//! the lengths enclosing it are rebuilt; nothing else is decoded), `<Kind>List` bodies and
//! length-prefixed `WatchEvent` frames.
//!
//! The rewritten bytes are computed once, at ingestion (see [`crate::codec::pbwire`]): a
//! get sends them as they are, a list and a watch frame embed their `raw` slice; a watch
//! frame is built once per event and type and shared by every watcher through
//! [`WatchEvent::protobuf_frame`].

use bytes::Bytes;

use super::body::{Body, BufList};
use crate::api::read::ListPage;
use crate::api::status::ApiError;
use crate::api::watch::WatchEncoder;
use crate::codec::pbwire::{put_len, put_uint};
use crate::codec::protobuf::MAGIC;
use crate::registry::ResourceInfo;
use crate::store::{CachedObject, EventType, ObjectRef, WatchEvent};
use crate::Revision;

/// The media type of protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of protobuf watch streams.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether an object can be served as protobuf: stored as an unencoded protobuf envelope.
pub fn capable(obj: &CachedObject) -> bool {
    // Ingestion accepted only plain-protobuf envelopes, so holding the bytes is enough.
    obj.protobuf.is_some()
}

fn not_protobuf(obj: &CachedObject) -> ApiError {
    ApiError::Internal(format!(
        "object {} is not stored as protobuf and cannot be served as {CONTENT_TYPE}",
        obj.key()
    ))
}

/// The stored value (magic, envelope) with the object's resourceVersion.
pub fn enveloped(obj: &CachedObject) -> Result<Bytes, ApiError> {
    Ok(obj
        .protobuf
        .as_ref()
        .ok_or_else(|| not_protobuf(obj))?
        .value
        .clone())
}

/// `k8s\0` + Unknown{typeMeta{apiVersion, kind}, raw, contentEncoding: "", contentType: ""}
/// (the empty strings are written, as kube-apiserver writes them).
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
    put_len(&mut type_meta, 1, api_version.as_bytes());
    put_len(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(raw.len() + type_meta.len() + 16);
    out.extend_from_slice(MAGIC);
    put_len(&mut out, 1, &type_meta);
    put_len(&mut out, 2, raw);
    put_len(&mut out, 3, &[]);
    put_len(&mut out, 4, &[]);
    out
}

/// A get: the object as stored, with its resourceVersion.
pub fn object_body(obj: &CachedObject) -> Result<Body, ApiError> {
    Ok(Body::full(enveloped(obj)?))
}

/// A list: the envelope around `<Kind>List{1: ListMeta, 2: items}`.
pub fn list_body(info: &ResourceInfo, page: &ListPage) -> Result<Body, ApiError> {
    let mut list_meta = Vec::new();
    put_len(
        &mut list_meta,
        2,
        page.revision.to_resource_version().as_bytes(),
    );
    if let Some(token) = &page.continue_token {
        put_len(&mut list_meta, 3, token.as_bytes());
    }
    if let Some(n) = page.remaining_item_count {
        put_uint(&mut list_meta, 4, n as u64);
    }
    let mut raw = Vec::new();
    put_len(&mut raw, 1, &list_meta);
    for obj in &page.items {
        let pb = obj.protobuf.as_ref().ok_or_else(|| not_protobuf(obj))?;
        put_len(&mut raw, 2, &pb.value[pb.raw.clone()]);
    }
    Ok(Body::full(envelope(
        &info.api_version(),
        &info.list_kind(),
        &raw,
    )))
}

/// One watch frame: 4-byte big-endian length, then `WatchEvent{1: type, 2: {1: raw}}`.
fn watch_frame(event_type: &str, object: &[u8]) -> Bytes {
    let mut ext = Vec::with_capacity(object.len() + 6);
    put_len(&mut ext, 1, object);
    let mut ev = Vec::with_capacity(ext.len() + event_type.len() + 12);
    put_len(&mut ev, 1, event_type.as_bytes());
    put_len(&mut ev, 2, &ext);
    let mut out = Vec::with_capacity(ev.len() + 4);
    out.extend_from_slice(&(ev.len() as u32).to_be_bytes());
    out.extend_from_slice(&ev);
    Bytes::from(out)
}

/// The enveloped `v1` Status of an error.
pub fn status(err: &ApiError) -> Vec<u8> {
    let mut raw = Vec::new();
    put_len(&mut raw, 1, &[]);
    put_len(&mut raw, 2, b"Failure");
    put_len(&mut raw, 3, err.message().as_bytes());
    put_len(&mut raw, 4, err.reason().as_bytes());
    put_uint(&mut raw, 6, u64::from(err.code()));
    envelope("v1", "Status", &raw)
}

/// The ERROR watch frame of an error.
pub fn error_frame(err: &ApiError) -> Bytes {
    watch_frame("ERROR", &status(err))
}

/// The BOOKMARK watch frame: the resource's kind with only metadata.resourceVersion (and
/// the initial-events-end annotation that ends a streaming list).
pub fn bookmark_frame(info: &ResourceInfo, rv: Revision, initial_events_end: bool) -> Bytes {
    let mut meta = Vec::new();
    put_len(&mut meta, 6, rv.to_resource_version().as_bytes());
    if initial_events_end {
        let mut entry = Vec::new();
        put_len(&mut entry, 1, b"k8s.io/initial-events-end");
        put_len(&mut entry, 2, b"true");
        put_len(&mut meta, 12, &entry);
    }
    let mut raw = Vec::new();
    put_len(&mut raw, 1, &meta);
    watch_frame("BOOKMARK", &envelope(&info.api_version(), &info.kind, &raw))
}

fn event_frame(t: EventType, obj: &CachedObject) -> Result<Bytes, ApiError> {
    Ok(watch_frame(t.as_str(), &enveloped(obj)?))
}

/// Watch events as length-prefixed protobuf `WatchEvent`s, one body frame per poll.
#[derive(Default)]
pub struct ProtobufFrames {
    frame: BufList,
    items: usize,
}

impl ProtobufFrames {
    fn push(&mut self, b: Bytes) {
        self.frame.push(b);
        self.items += 1;
    }
}

impl WatchEncoder for ProtobufFrames {
    type Frame = BufList;

    fn event(&mut self, t: EventType, ev: &WatchEvent) {
        if ev.object_for(t).is_none() {
            return;
        }
        match ev.protobuf_frame(t, |t, obj| event_frame(t, obj).ok()) {
            Some(f) => self.push(f),
            None => {
                // An object stored as JSON (or unreadable) among protobuf ones: the client
                // must re-list, asking for JSON.
                let obj = ev.object_for(t).cloned();
                let err = obj.map_or_else(
                    || ApiError::Internal("watch event without an object".into()),
                    |o| not_protobuf(&o),
                );
                self.push(error_frame(&err));
            }
        }
    }

    fn initial(&mut self, obj: &ObjectRef) {
        match event_frame(EventType::Added, obj) {
            Ok(f) => self.push(f),
            Err(e) => self.push(error_frame(&e)),
        }
    }

    fn bookmark(&mut self, info: &ResourceInfo, rv: Revision, initial_events_end: bool) {
        self.push(bookmark_frame(info, rv, initial_events_end));
    }

    fn error(&mut self, err: &ApiError) {
        self.push(error_frame(err));
    }

    fn pending(&self) -> usize {
        self.items
    }

    fn take(&mut self) -> BufList {
        self.items = 0;
        std::mem::take(&mut self.frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::protobuf::parse_envelope;

    use crate::codec::protobuf::first_bytes_field as field;

    #[test]
    fn watch_frames_are_length_prefixed() {
        let f = error_frame(&ApiError::Expired("gone".into()));
        let len = u32::from_be_bytes(f[..4].try_into().unwrap()) as usize;
        assert_eq!(len, f.len() - 4);
        let ev = &f[4..];
        assert_eq!(field(ev, 1), Some(&b"ERROR"[..]));
        let raw = field(field(ev, 2).unwrap(), 1).unwrap();
        let env = parse_envelope(raw).unwrap();
        assert_eq!((env.api_version, env.kind), ("v1", "Status"));
        assert_eq!(field(env.raw, 4), Some(&b"Expired"[..]));
        assert_eq!(field(env.raw, 3), Some(&b"gone"[..]));
    }

    #[test]
    fn status_transcodes_as_its_json() {
        let err = ApiError::Expired("too old".into());
        let env_bytes = status(&err);
        let env = parse_envelope(&env_bytes).unwrap();
        let json = crate::codec::pbjson::render(env.api_version, env.kind, env.raw, None).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json.json).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["status"], "Failure");
        assert_eq!(v["message"], err.message());
        assert_eq!(v["reason"], "Expired");
        assert_eq!(v["code"], 410);
    }
}
