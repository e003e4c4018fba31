//! Watch events as gRPC messages.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Waker;

use bytes::BufMut;
use futures_util::StreamExt;
use prost::Message;
use tonic::Status;

use super::objects;
use super::pb;
use crate::api::http::body::BufList;
use crate::api::http::h2_conn::EndTrailers;
use crate::api::status::ApiError;
use crate::api::watch::{Step, SteppedWatch, WatchEncoder};
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

/// A message as gRPC frames it on the wire: uncompressed, its length, its bytes.
pub fn framed(message: &impl Message) -> BufList {
    let len = message.encoded_len();
    let mut buf = bytes::BytesMut::with_capacity(GRPC_PREFIX + len);
    buf.put_u8(0);
    // At most the message limit, which the caller checked; below 4 GiB in any case.
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // A BytesMut grows as needed: encoding into it cannot fail.
    let _ = message.encode(&mut buf);
    BufList::from(buf.freeze())
}

/// The bytes of a gRPC message's frame before the message (RFC: gRPC over HTTP/2).
const GRPC_PREFIX: usize = 5;

/// A Watch or WatchMany call's session as the frames of its response stream, for a
/// connection that writes them itself: what tonic's encoder does for a polled stream,
/// including its refusal of a message over the limit, which ends the call with
/// RESOURCE_EXHAUSTED.
pub struct GrpcFrames<M> {
    inner: Box<dyn SteppedWatch<M>>,
    max_message_bytes: usize,
    /// How the call ended, if not OK; read by the trailers.
    status: Arc<Mutex<Option<Status>>>,
}

impl<M> GrpcFrames<M> {
    /// `session`'s frames, and the trailers that end its stream.
    pub fn new(session: Box<dyn SteppedWatch<M>>, max_message_bytes: usize) -> (Self, EndTrailers) {
        let status = Arc::new(Mutex::new(None));
        let ended = status.clone();
        let end: EndTrailers = Box::new(move || {
            let status = ended
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_else(|| Status::ok(""));
            let mut trailers = http::HeaderMap::new();
            // Fails only for a message that is no header value, which ours never are.
            let _ = status.add_header(&mut trailers);
            trailers
        });
        let frames = GrpcFrames {
            inner: session,
            max_message_bytes,
            status,
        };
        (frames, end)
    }
}

/// `message` framed, or None (the call's `status` set) when it is over `limit`.
fn frame_within(
    message: &impl Message,
    limit: usize,
    status: &Mutex<Option<Status>>,
) -> Option<BufList> {
    let len = message.encoded_len();
    if len > limit {
        *status.lock().unwrap_or_else(|e| e.into_inner()) = Some(Status::resource_exhausted(
            format!("Error, encoded message length too large: found {len} bytes, the limit is: {limit} bytes"),
        ));
        return None;
    }
    Some(framed(message))
}

impl<M: Message + Send + 'static> SteppedWatch<BufList> for GrpcFrames<M> {
    fn step(&mut self, waker: &Waker) -> Step<BufList> {
        match self.inner.step(waker) {
            Step::Frame(m) => match frame_within(&m, self.max_message_bytes, &self.status) {
                Some(frame) => Step::Frame(frame),
                None => Step::End,
            },
            Step::Idle(at) => Step::Idle(at),
            Step::End => Step::End,
        }
    }

    fn into_stream(self: Box<Self>) -> Pin<Box<dyn futures_util::Stream<Item = BufList> + Send>> {
        let GrpcFrames {
            inner,
            max_message_bytes: limit,
            status,
        } = *self;
        Box::pin(
            inner
                .into_stream()
                .map(move |m| frame_within(&m, limit, &status))
                .take_while(|f| std::future::ready(f.is_some()))
                .filter_map(std::future::ready),
        )
    }
}
