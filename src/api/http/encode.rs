//! JSON on the wire: list bodies and watch frames made of the cached objects' shared
//! bytes, so nothing cached is copied per request or per watcher.

use bytes::Bytes;

use super::body::{comma_separated, Body, BufList};
use crate::api::read::ListPage;
use crate::api::status::ApiError;
use crate::api::watch::{FrameEncoding, WatchEncoder};
use crate::registry::ResourceInfo;
use crate::store::{EventType, ObjectRef, WatchEvent};
use crate::Revision;

/// `{"kind":"<Kind>List","apiVersion":...,"metadata":{...},"items":[...]}` with every item
/// a shared segment, streamed from the snapshot a batch at a time ([`super::body::list`]).
pub fn list_body(info: &ResourceInfo, page: ListPage) -> Body {
    let meta = list_meta(&page);
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
        info.list_kind(),
        info.api_version()
    );
    super::body::list(
        Bytes::from(head),
        page.items,
        b"]}",
        page.meter,
        |out, batch, first| comma_separated(out, batch, first, |out, obj| out.push(obj.json())),
    )
}

/// The bytes that start a JSON watch frame of type `t`, up to the object.
pub fn frame_prefix(t: EventType) -> &'static [u8] {
    match t {
        EventType::Added => b"{\"type\":\"ADDED\",\"object\":",
        EventType::Modified => b"{\"type\":\"MODIFIED\",\"object\":",
        EventType::Deleted => b"{\"type\":\"DELETED\",\"object\":",
    }
}

/// The bytes that end every JSON watch frame.
pub const FRAME_SUFFIX: &[u8] = b"}\n";

/// The JSON watch frame of `ev` as type `t`, framed as one HTTP/1.1 chunk: built on
/// the first call (one copy of the object between prefix and suffix) and shared by
/// every watcher after. The frame itself is a slice of it ([`super::body::unchunked`]).
pub fn event_chunk(ev: &WatchEvent, t: EventType) -> Option<Bytes> {
    ev.frame(FrameEncoding::JsonLines as usize, t, |t, obj| {
        Some(super::body::chunk_of(&[
            frame_prefix(t),
            &obj.json(),
            FRAME_SUFFIX,
        ]))
    })
}

/// `{"type":"ERROR","object":<Status>}\n`.
pub fn error_frame(err: &ApiError) -> Bytes {
    let mut b = br#"{"type":"ERROR","object":"#.to_vec();
    b.extend_from_slice(&serde_json::to_vec(&err.to_status()).unwrap_or_default());
    b.extend_from_slice(b"}\n");
    Bytes::from(b)
}

/// The BOOKMARK frame: the object's kind and apiVersion and only
/// `metadata.resourceVersion` (plus the initial-events-end annotation that ends a
/// streaming list).
fn bookmark_frame(kind: &str, api_version: &str, rv: Revision, initial_events_end: bool) -> Bytes {
    let annotations = if initial_events_end {
        ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
    } else {
        ""
    };
    Bytes::from(format!(
        "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{{\"resourceVersion\":\"{rv}\"{annotations}}}}}}}\n"
    ))
}

/// How a JSON-lines watch writes each object: as stored, as PartialObjectMetadata, or as a
/// one-row Table. The framing and bookkeeping around it is [`JsonLines`]'s, once.
pub trait ObjectView: Send + 'static {
    /// The event's frame, as one HTTP/1.1 chunk, built once and shared by every watcher,
    /// when this view is the object as stored (then nothing is written per watcher).
    fn shared_chunk(&self, _t: EventType, _ev: &WatchEvent) -> Option<Bytes> {
        None
    }

    /// Writes `obj` in this view.
    fn write(&mut self, out: &mut BufList, obj: &ObjectRef);

    /// The kind and apiVersion of a bookmark's object.
    fn bookmark_type(&self, info: &ResourceInfo) -> (String, String) {
        (info.kind.clone(), info.api_version())
    }
}

/// The object as stored: every event's frame is shared, the initial state is three shared
/// segments per object.
#[derive(Default)]
pub struct WholeObject;

impl ObjectView for WholeObject {
    fn shared_chunk(&self, t: EventType, ev: &WatchEvent) -> Option<Bytes> {
        event_chunk(ev, t)
    }

    fn write(&mut self, out: &mut BufList, obj: &ObjectRef) {
        out.push(obj.json());
    }
}

/// PartialObjectMetadata of `meta.k8s.io/<version>` (metadata informers).
pub struct MetadataView(pub &'static str);

impl ObjectView for MetadataView {
    fn write(&mut self, out: &mut BufList, obj: &ObjectRef) {
        push_partial_metadata(out, self.0, obj);
    }

    fn bookmark_type(&self, _info: &ResourceInfo) -> (String, String) {
        (
            "PartialObjectMetadata".into(),
            format!("meta.k8s.io/{}", self.0),
        )
    }
}

/// Watch events as JSON lines, one body frame per poll, objects in view `V`.
pub struct JsonLines<V: ObjectView = WholeObject> {
    view: V,
    frame: BufList,
    items: usize,
}

impl<V: ObjectView> JsonLines<V> {
    /// An encoder writing objects in `view`.
    pub fn new(view: V) -> Self {
        JsonLines {
            view,
            frame: BufList::new(),
            items: 0,
        }
    }

    fn push_object(&mut self, t: EventType, obj: &ObjectRef) {
        self.frame.push_static(frame_prefix(t));
        self.view.write(&mut self.frame, obj);
        self.frame.push_static(FRAME_SUFFIX);
        self.items += 1;
    }
}

impl Default for JsonLines<WholeObject> {
    fn default() -> Self {
        JsonLines::new(WholeObject)
    }
}

impl<V: ObjectView> WatchEncoder for JsonLines<V> {
    type Frame = BufList;

    fn event(&mut self, t: EventType, ev: &WatchEvent) {
        if let Some(c) = self.view.shared_chunk(t, ev) {
            self.frame.push_chunk(c);
            self.items += 1;
        } else if let Some(obj) = ev.object_for(t) {
            let obj = obj.clone();
            self.push_object(t, &obj);
        }
    }

    fn initial(&mut self, obj: &ObjectRef) {
        self.push_object(EventType::Added, obj);
    }

    fn bookmark(&mut self, info: &ResourceInfo, rv: Revision, initial_events_end: bool) {
        let (kind, api_version) = self.view.bookmark_type(info);
        self.frame
            .push(bookmark_frame(&kind, &api_version, rv, initial_events_end));
        self.items += 1;
    }

    fn error(&mut self, err: &ApiError) {
        self.frame.push(error_frame(err));
        self.items += 1;
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

/// `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/<v>","metadata":` … `}` around
/// an object's metadata slice: three shared segments, no copy.
fn push_partial_metadata(out: &mut BufList, version: &str, obj: &ObjectRef) {
    out.push_static(if version == "v1beta1" {
        br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1","metadata":"#
    } else {
        br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#
    });
    out.push(obj.metadata_json());
    out.push_static(b"}");
}

/// One object as PartialObjectMetadata (a get).
pub fn partial_metadata_body(version: &str, obj: &ObjectRef) -> Body {
    let mut b = BufList::new();
    push_partial_metadata(&mut b, version, obj);
    Body::segments(b)
}

/// The ListMeta JSON of a page: resourceVersion, continue, remainingItemCount, shardInfo.
pub fn list_meta(page: &ListPage) -> String {
    let mut meta = format!("{{\"resourceVersion\":\"{}\"", page.revision);
    if let Some(token) = &page.continue_token {
        meta.push_str(&format!(",\"continue\":\"{token}\""));
    }
    if let Some(n) = page.remaining_item_count {
        meta.push_str(&format!(",\"remainingItemCount\":{n}"));
    }
    if let Some(selector) = &page.shard_info {
        let quoted = serde_json::Value::from(selector.as_str()).to_string();
        meta.push_str(&format!(",\"shardInfo\":{{\"selector\":{quoted}}}"));
    }
    meta.push('}');
    meta
}

/// A PartialObjectMetadataList of a list page, streamed like [`list_body`].
pub fn partial_metadata_list_body(version: &'static str, page: ListPage) -> Body {
    let head = format!(
        "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/{version}\",\"metadata\":{},\"items\":[",
        list_meta(&page)
    );
    super::body::list(
        Bytes::from(head),
        page.items,
        b"]}",
        page.meter,
        move |out, batch, first| {
            comma_separated(out, batch, first, |out, obj| {
                push_partial_metadata(out, version, obj)
            })
        },
    )
}
