//! Watch events as gRPC messages.

use super::objects;
use super::pb;
use crate::api::status::ApiError;
use crate::api::watch::WatchEncoder;
use crate::registry::ResourceInfo;
use crate::store::{EventType, ObjectRef, WatchEvent};
use crate::Revision;

/// Watch events as gRPC messages: one message per poll, objects as shared bytes, a
/// message closed once it holds `budget` bytes (half the largest message, so that one
/// more object of any usual size still fits).
pub struct GrpcEvents {
    events: Vec<pb::WatchEvent>,
    /// The events' objects plus their framing, counted as they are added.
    bytes: usize,
    budget: usize,
    encoding: pb::Encoding,
    /// The selection the next events belong to (WatchMany).
    pub selection: u32,
}

/// What an event adds to a message besides its object (type, revision, framing).
const EVENT_OVERHEAD: usize = 16;

/// The gRPC event type of a change.
pub fn event_type(t: EventType) -> pb::EventType {
    match t {
        EventType::Added => pb::EventType::Added,
        EventType::Modified => pb::EventType::Modified,
        EventType::Deleted => pb::EventType::Deleted,
    }
}

impl GrpcEvents {
    /// Messages of at most about `max_message_bytes`, objects in `encoding`.
    pub fn new(max_message_bytes: usize, encoding: pb::Encoding) -> GrpcEvents {
        GrpcEvents {
            events: Vec::new(),
            bytes: 0,
            budget: max_message_bytes / 2,
            encoding,
            selection: 0,
        }
    }

    /// A message holding only the ERROR event of `err`.
    pub fn error_message(err: &ApiError) -> Vec<pb::WatchEvent> {
        let mut enc = GrpcEvents::new(super::DEFAULT_MAX_MESSAGE_BYTES, pb::Encoding::Json);
        enc.error(err);
        enc.take_events()
    }

    /// An ADDED, MODIFIED or DELETED event of `obj`.
    pub fn push_object(&mut self, t: pb::EventType, obj: &ObjectRef) {
        self.bytes += objects::size(obj, self.encoding) + EVENT_OVERHEAD;
        self.events.push(pb::WatchEvent {
            r#type: t as i32,
            resource_version: obj.revision.0,
            object: Some(objects::object(obj, self.encoding)),
            selection: self.selection,
            ..Default::default()
        });
    }

    /// A BOOKMARK at `rv`.
    pub fn push_bookmark(&mut self, rv: Revision, initial_events_end: bool) {
        self.bytes += EVENT_OVERHEAD;
        self.events.push(pb::WatchEvent {
            r#type: pb::EventType::Bookmark as i32,
            resource_version: rv.0,
            initial_events_end,
            ..Default::default()
        });
    }

    /// The events since the last take.
    pub fn take_events(&mut self) -> Vec<pb::WatchEvent> {
        self.bytes = 0;
        std::mem::take(&mut self.events)
    }
}

impl WatchEncoder for GrpcEvents {
    type Frame = pb::WatchResponse;

    fn event(&mut self, t: EventType, ev: &WatchEvent) {
        if let Some(obj) = ev.object_for(t) {
            self.push_object(event_type(t), obj);
        }
    }

    fn initial(&mut self, obj: &ObjectRef) {
        self.push_object(pb::EventType::Added, obj);
    }

    fn bookmark(&mut self, _info: &ResourceInfo, rv: Revision, initial_events_end: bool) {
        self.push_bookmark(rv, initial_events_end);
    }

    fn error(&mut self, err: &ApiError) {
        let status = serde_json::to_vec(&err.to_status()).unwrap_or_default();
        self.bytes += status.len() + EVENT_OVERHEAD;
        self.events.push(pb::WatchEvent {
            r#type: pb::EventType::Error as i32,
            status: status.into(),
            ..Default::default()
        });
    }

    fn pending(&self) -> usize {
        self.events.len()
    }

    fn pending_bytes(&self) -> usize {
        self.bytes
    }

    fn full(&self) -> bool {
        !self.events.is_empty() && self.bytes >= self.budget
    }

    fn take(&mut self) -> pb::WatchResponse {
        pb::WatchResponse {
            events: self.take_events(),
        }
    }
}
