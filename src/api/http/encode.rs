//! JSON on the wire: list bodies and watch frames made of the cached objects' shared
//! bytes, so nothing cached is copied per request or per watcher.

use bytes::Bytes;

use super::body::{Body, BufList};
use crate::api::read::ListPage;
use crate::api::status::ApiError;
use crate::api::watch::WatchEncoder;
use crate::registry::ResourceInfo;
use crate::store::event_log::JSON_FRAME_SUFFIX;
use crate::store::{EventType, ObjectRef, WatchEvent};
use crate::Revision;

/// `{"kind":"<Kind>List","apiVersion":...,"metadata":{...},"items":[...]}` with every item
/// a shared segment.
pub fn list_body(info: &ResourceInfo, page: ListPage) -> Body {
    let meta = list_meta(&page);
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
        info.list_kind(),
        info.api_version()
    );
    let mut body = BufList::new();
    body.push(Bytes::from(head));
    for (i, obj) in page.items.iter().enumerate() {
        if i > 0 {
            body.push_static(b",");
        }
        body.push(obj.json.clone());
    }
    body.push_static(b"]}");
    Body::segments(body)
}

/// `{"type":"ERROR","object":<Status>}\n`.
pub fn error_frame(err: &ApiError) -> Bytes {
    let mut b = br#"{"type":"ERROR","object":"#.to_vec();
    b.extend_from_slice(&serde_json::to_vec(&err.to_status()).unwrap_or_default());
    b.extend_from_slice(b"}\n");
    Bytes::from(b)
}

/// The BOOKMARK frame: kind, apiVersion and only `metadata.resourceVersion` (plus the
/// initial-events-end annotation that ends a streaming list).
pub fn bookmark_frame(info: &ResourceInfo, rv: Revision, initial_events_end: bool) -> Bytes {
    let annotations = if initial_events_end {
        ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
    } else {
        ""
    };
    Bytes::from(format!(
        "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{rv}\"{annotations}}}}}}}\n",
        info.kind,
        info.api_version()
    ))
}

/// Watch events as JSON lines, one body frame per poll.
#[derive(Default)]
pub struct JsonLines {
    frame: BufList,
    items: usize,
}

impl WatchEncoder for JsonLines {
    type Frame = BufList;

    fn event(&mut self, t: EventType, ev: &WatchEvent) {
        if let Some(f) = ev.json_frame(t) {
            self.frame.push(f);
            self.items += 1;
        }
    }

    fn initial(&mut self, obj: &ObjectRef) {
        // Three shared segments: nothing is copied for the initial state.
        self.frame.push_static(EventType::Added.json_frame_prefix());
        self.frame.push(obj.json.clone());
        self.frame.push_static(JSON_FRAME_SUFFIX);
        self.items += 1;
    }

    fn bookmark(&mut self, info: &ResourceInfo, rv: Revision, initial_events_end: bool) {
        self.frame
            .push(bookmark_frame(info, rv, initial_events_end));
        self.items += 1;
    }

    fn error(&mut self, err: &ApiError) {
        self.frame.push(error_frame(err));
        self.items += 1;
    }

    fn pending(&self) -> usize {
        self.items
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

/// The ListMeta JSON of a page: resourceVersion, continue, remainingItemCount.
pub fn list_meta(page: &ListPage) -> String {
    let mut meta = format!("{{\"resourceVersion\":\"{}\"", page.revision);
    if let Some(token) = &page.continue_token {
        meta.push_str(&format!(",\"continue\":\"{token}\""));
    }
    if let Some(n) = page.remaining_item_count {
        meta.push_str(&format!(",\"remainingItemCount\":{n}"));
    }
    meta.push('}');
    meta
}

/// A PartialObjectMetadataList of a list page.
pub fn partial_metadata_list_body(version: &str, page: &ListPage) -> Body {
    let mut body = BufList::new();
    body.push(Bytes::from(format!(
        "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/{version}\",\"metadata\":{},\"items\":[",
        list_meta(page)
    )));
    for (i, obj) in page.items.iter().enumerate() {
        if i > 0 {
            body.push_static(b",");
        }
        push_partial_metadata(&mut body, version, obj);
    }
    body.push_static(b"]}");
    Body::segments(body)
}

/// Watch events with PartialObjectMetadata objects (metadata informers).
pub struct MetadataLines {
    version: &'static str,
    frame: BufList,
    items: usize,
}

impl MetadataLines {
    /// An encoder for `meta.k8s.io/<version>`.
    pub fn new(version: &'static str) -> Self {
        MetadataLines {
            version,
            frame: BufList::new(),
            items: 0,
        }
    }

    fn push(&mut self, t: EventType, obj: &ObjectRef) {
        self.frame.push_static(t.json_frame_prefix());
        push_partial_metadata(&mut self.frame, self.version, obj);
        self.frame.push_static(JSON_FRAME_SUFFIX);
        self.items += 1;
    }
}

impl WatchEncoder for MetadataLines {
    type Frame = BufList;

    fn event(&mut self, t: EventType, ev: &WatchEvent) {
        if let Some(obj) = ev.object_for(t) {
            let obj = obj.clone();
            self.push(t, &obj);
        }
    }

    fn initial(&mut self, obj: &ObjectRef) {
        self.push(EventType::Added, obj);
    }

    fn bookmark(&mut self, _info: &ResourceInfo, rv: Revision, initial_events_end: bool) {
        let annotations = if initial_events_end {
            ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
        } else {
            ""
        };
        self.frame.push(Bytes::from(format!(
            "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/{}\",\"metadata\":{{\"resourceVersion\":\"{rv}\"{annotations}}}}}}}\n",
            self.version
        )));
        self.items += 1;
    }

    fn error(&mut self, err: &ApiError) {
        self.frame.push(error_frame(err));
        self.items += 1;
    }

    fn pending(&self) -> usize {
        self.items
    }

    fn take(&mut self) -> BufList {
        self.items = 0;
        std::mem::take(&mut self.frame)
    }
}
