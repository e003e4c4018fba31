//! Watch events as gRPC messages.

use super::objects;
use super::pb;
use super::wire::{EncodedEvent, WatchResponse};
use crate::api::status::ApiError;
use crate::api::watch::{FrameEncoding, WatchEncoder};
use crate::registry::ResourceInfo;
use crate::store::{EventType, ObjectRef, WatchEvent};
use crate::Revision;

/// Watch events as gRPC messages: one message per poll, each event encoded once for
/// every stream (a change's bytes are kept by the event, as HTTP frames are), a message
/// closed once it holds `budget` bytes (half the largest message, so that one more
/// object of any usual size still fits).
pub struct GrpcEvents {
    events: Vec<EncodedEvent>,
    /// The events' encoded bytes, counted as they are added.
    bytes: usize,
    budget: usize,
    encoding: pb::Encoding,
    /// The selection the next events belong to (WatchMany).
    pub selection: u32,
}

/// The gRPC event type of a change.
pub fn event_type(t: EventType) -> pb::EventType {
    match t {
        EventType::Added => pb::EventType::Added,
        EventType::Modified => pb::EventType::Modified,
        EventType::Deleted => pb::EventType::Deleted,
    }
}

/// A change, or an initial object, as a `WatchEvent` (without its selection).
fn object_event(t: pb::EventType, obj: &ObjectRef, encoding: pb::Encoding) -> pb::WatchEvent {
    pb::WatchEvent {
        r#type: t as i32,
        resource_version: obj.revision.0,
        object: Some(objects::object(obj, encoding)),
        ..Default::default()
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
    pub fn error_message(err: &ApiError) -> Vec<EncodedEvent> {
        let mut enc = GrpcEvents::new(super::DEFAULT_MAX_MESSAGE_BYTES, pb::Encoding::Json);
        enc.error(err);
        enc.take_events()
    }

    fn push(&mut self, bytes: bytes::Bytes) {
        let event = EncodedEvent::new(bytes, self.selection);
        self.bytes += event.encoded_len();
        self.events.push(event);
    }

    /// An initial object as an ADDED event (encoded for this stream alone).
    pub fn push_initial(&mut self, obj: &ObjectRef) {
        let event = object_event(pb::EventType::Added, obj, self.encoding);
        self.push(EncodedEvent::of(&event).into_bytes());
    }

    /// A BOOKMARK at `rv`.
    pub fn push_bookmark(&mut self, rv: Revision, initial_events_end: bool) {
        let event = pb::WatchEvent {
            r#type: pb::EventType::Bookmark as i32,
            resource_version: rv.0,
            initial_events_end,
            ..Default::default()
        };
        self.push(EncodedEvent::of(&event).into_bytes());
    }

    /// The events since the last take.
    pub fn take_events(&mut self) -> Vec<EncodedEvent> {
        self.bytes = 0;
        std::mem::take(&mut self.events)
    }
}

impl WatchEncoder for GrpcEvents {
    type Frame = WatchResponse;

    fn event(&mut self, t: EventType, ev: &WatchEvent) {
        let (slot, encoding) = match self.encoding {
            pb::Encoding::Json => (FrameEncoding::GrpcJson, pb::Encoding::Json),
            pb::Encoding::Protobuf => (FrameEncoding::GrpcProtobuf, pb::Encoding::Protobuf),
        };
        let shared = ev.frame(slot as usize, t, |t, obj| {
            let event = object_event(event_type(t), obj, encoding);
            Some(EncodedEvent::of(&event).into_bytes())
        });
        if let Some(bytes) = shared {
            self.push(bytes);
        }
    }

    fn initial(&mut self, obj: &ObjectRef) {
        self.push_initial(obj);
    }

    fn bookmark(&mut self, _info: &ResourceInfo, rv: Revision, initial_events_end: bool) {
        self.push_bookmark(rv, initial_events_end);
    }

    fn error(&mut self, err: &ApiError) {
        let status = serde_json::to_vec(&err.to_status()).unwrap_or_default();
        let event = pb::WatchEvent {
            r#type: pb::EventType::Error as i32,
            status: status.into(),
            ..Default::default()
        };
        self.push(EncodedEvent::of(&event).into_bytes());
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

    fn take(&mut self) -> WatchResponse {
        WatchResponse::encoded(self.take_events())
    }
}
