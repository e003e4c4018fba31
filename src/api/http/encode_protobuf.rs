//! Kubernetes protobuf on the wire, for built-in objects stored as protobuf: the stored
//! bytes with `metadata.resourceVersion` rewritten at the wire level (only ObjectMeta and
//! the lengths enclosing it are rebuilt; nothing else is decoded), `<Kind>List` bodies and
//! length-prefixed `WatchEvent` frames.
//!
//! The rewritten bytes are computed once, at ingestion (see [`crate::codec::protobuf`]): a
//! get sends them as they are, a list and a watch frame embed their `raw` slice; a watch
//! frame is built once per event and type and shared by every watcher through
//! [`WatchEvent::frame`].

use bytes::Bytes;

use super::body::{Body, BufList};
use crate::api::read::ListPage;
use crate::api::status::ApiError;
use crate::api::watch::{FrameEncoding, WatchEncoder};
use crate::codec::envelope;
use crate::codec::wire::{len_field_size, put_len, put_len_header, put_uint};
use crate::registry::ResourceInfo;
use crate::store::{CachedObject, EventType, ObjectRef, WatchEvent};
use crate::Revision;

/// The media type of protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of protobuf watch streams.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether an object can be served as protobuf: a built-in stored as protobuf, or stored
/// as JSON its kind's schema reads (encoded now, once, if not yet).
pub fn capable(obj: &CachedObject) -> bool {
    obj.has_protobuf()
}

fn not_protobuf(obj: &CachedObject) -> ApiError {
    ApiError::Internal(format!(
        "object {} has no protobuf form and cannot be served as {CONTENT_TYPE}",
        obj.key()
    ))
}

/// The stored value (magic, envelope) with the object's resourceVersion.
pub fn enveloped(obj: &CachedObject) -> Result<Bytes, ApiError> {
    Ok(obj
        .protobuf()
        .ok_or_else(|| not_protobuf(obj))?
        .value
        .clone())
}

/// A get: the object as stored, with its resourceVersion.
pub fn object_body(obj: &CachedObject) -> Result<Body, ApiError> {
    Ok(Body::full(enveloped(obj)?))
}

/// A list: the envelope around `<Kind>List{1: ListMeta, 2: items}`. Each item is its
/// cached `raw` slice, sent as its own segment (no copy), after a header of a few bytes.
/// The envelope's length is counted first (one pass over the snapshot: sizes only); the
/// items then stream a batch at a time ([`super::body::list`]). The page is given back
/// when one of its objects has no protobuf form.
pub fn list_body(info: &ResourceInfo, page: ListPage) -> Result<Body, ListPage> {
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
    if let Some(selector) = &page.shard_info {
        // ListMeta.shardInfo (5): ShardInfo{selector (1)}.
        let mut info = Vec::new();
        put_len(&mut info, 1, selector.as_bytes());
        put_len(&mut list_meta, 5, &info);
    }
    let items_len: Option<usize> = page
        .items
        .iter()
        .map(|obj| obj.protobuf_raw_len().map(|n| len_field_size(2, n)))
        .sum();
    let Some(items_len) = items_len else {
        return Err(page);
    };
    let raw_len = len_field_size(1, list_meta.len()) + items_len;
    let mut head = envelope::head(&info.api_version(), &info.list_kind(), raw_len);
    put_len(&mut head, 1, &list_meta);
    Ok(super::body::list(
        Bytes::from(head),
        page.items,
        envelope::TAIL,
        page.meter,
        |out, batch, _| {
            // Every item's field header, in one buffer sliced per item.
            let raws: Vec<Bytes> = batch
                .iter()
                .map(|obj| obj.protobuf().map_or_else(Bytes::new, |pb| pb.raw()))
                .collect();
            let mut headers = Vec::with_capacity(raws.len() * 4);
            let mut ends = Vec::with_capacity(raws.len());
            for raw in &raws {
                put_len_header(&mut headers, 2, raw.len());
                ends.push(headers.len());
            }
            let headers = Bytes::from(headers);
            let mut at = 0;
            for (raw, end) in raws.into_iter().zip(ends) {
                out.push(headers.slice(at..end));
                out.push(raw);
                at = end;
            }
        },
    ))
}

/// A watch frame's 4-byte big-endian length and `WatchEvent{1: type, 2: {1: raw}}` up to
/// the first byte of raw, for an object of `object_len` bytes that follows.
fn frame_head(event_type: &str, object_len: usize) -> Vec<u8> {
    let ext_len = len_field_size(1, object_len);
    let ev_len = len_field_size(1, event_type.len()) + len_field_size(2, ext_len);
    let mut out = Vec::with_capacity(ev_len - object_len + 4);
    out.extend_from_slice(&(ev_len as u32).to_be_bytes());
    put_len(&mut out, 1, event_type.as_bytes());
    put_len_header(&mut out, 2, ext_len);
    put_len_header(&mut out, 1, object_len);
    out
}

/// One watch frame: 4-byte big-endian length, then `WatchEvent{1: type, 2: {1: raw}}`.
fn watch_frame(event_type: &str, object: &[u8]) -> Bytes {
    let mut out = frame_head(event_type, object.len());
    out.extend_from_slice(object);
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
    envelope::write("v1", "Status", &raw)
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
    watch_frame(
        "BOOKMARK",
        &envelope::write(&info.api_version(), &info.kind, &raw),
    )
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
        let encoding = FrameEncoding::KubeProtobuf as usize;
        match ev.frame(encoding, t, |t, obj| event_frame(t, obj).ok()) {
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
        // Per watcher: the frame's head, then the cached object itself (no copy).
        match enveloped(obj) {
            Ok(object) => {
                let head = frame_head(EventType::Added.as_str(), object.len());
                self.frame.push(Bytes::from(head));
                self.push(object);
            }
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

    fn pending_bytes(&self) -> usize {
        bytes::Buf::remaining(&self.frame)
    }

    fn take(&mut self) -> BufList {
        self.items = 0;
        std::mem::take(&mut self.frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::envelope::parse as parse_envelope;
    use crate::codec::wire::last_bytes as field;

    #[test]
    fn frame_heads_precede_the_object_exactly() {
        for len in [0usize, 5, 200, 20_000] {
            let object = vec![0x42; len];
            let mut ext = Vec::new();
            put_len(&mut ext, 1, &object);
            let mut ev = Vec::new();
            put_len(&mut ev, 1, b"ADDED");
            put_len(&mut ev, 2, &ext);
            let mut want = (ev.len() as u32).to_be_bytes().to_vec();
            want.extend_from_slice(&ev);
            let mut got = frame_head("ADDED", len);
            got.extend_from_slice(&object);
            assert_eq!(got, want, "{len}");
            assert_eq!(&watch_frame("ADDED", &object)[..], &want[..]);
        }
    }

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
