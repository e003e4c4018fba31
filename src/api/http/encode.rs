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
    let mut meta = format!("{{\"resourceVersion\":\"{}\"", page.revision);
    if let Some(token) = &page.continue_token {
        meta.push_str(&format!(",\"continue\":\"{token}\""));
    }
    if let Some(n) = page.remaining_item_count {
        meta.push_str(&format!(",\"remainingItemCount\":{n}"));
    }
    meta.push('}');
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
