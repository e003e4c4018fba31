//! Watch events as gRPC messages.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Waker;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use prost::Message;
use tonic::Status;

use super::objects;
use super::pb;
use crate::api::http::body::BufList;
use crate::api::http::h2_conn::EndTrailers;
use crate::api::status::ApiError;
use crate::api::watch::{FrameEncoding, Step, SteppedWatch, WatchEncoder};
use crate::registry::ResourceInfo;
use crate::store::{EventType, ObjectRef, WatchEvent};
use crate::Revision;

/// Watch events as gRPC messages, framed as gRPC sends them: one message per poll, a
/// message closed once it holds `budget` bytes (half the largest message, so that one
/// more object of any usual size still fits).
///
/// A message is written as bytes, not built as `pb::WatchResponse` for prost: each event
/// from the log is one `events` field whose `WatchEvent` is encoded once per event, type
/// and encoding and shared by every watcher ([`WatchEvent::frame`], as the HTTP API's
/// frames are); only its field header (and a WatchMany's `selection`, appended inside
/// it) is the watcher's own, in one small buffer per message. Initial events,
/// bookmarks and errors are encoded per watcher.
pub struct GrpcEvents {
    /// The message's own bytes: the frame's 5-byte header (filled in at take), field
    /// headers, and the events encoded per watcher.
    own: BytesMut,
    /// The message after the frame header, in order: ranges of `own` and shared events.
    parts: Vec<Part>,
    /// The message's length (after the frame header).
    len: usize,
    events: usize,
    budget: usize,
    encoding: pb::Encoding,
    /// The selection the next events belong to (WatchMany).
    selection: u32,
}

/// A piece of a message.
enum Part {
    Own(std::ops::Range<usize>),
    Shared(Bytes),
}

/// The bytes of a gRPC message's frame before the message: uncompressed, its length.
const GRPC_PREFIX: usize = 5;
/// The key of `WatchResponse.events` (field 1, length-delimited), as of
/// `WatchManyResponse.events`.
const EVENTS_KEY: u8 = 1 << 3 | 2;
/// The key of `WatchEvent.selection` (field 7, varint).
const SELECTION_KEY: u8 = 7 << 3;

/// The gRPC event type of a change.
pub fn event_type(t: EventType) -> pb::EventType {
    match t {
        EventType::Added => pb::EventType::Added,
        EventType::Modified => pb::EventType::Modified,
        EventType::Deleted => pb::EventType::Deleted,
    }
}

/// The slot of an event's cached `WatchEvent` in `encoding` ([`WatchEvent::frame`]).
fn frame_slot(encoding: pb::Encoding) -> usize {
    match encoding {
        pb::Encoding::Json => FrameEncoding::GrpcJson as usize,
        pb::Encoding::Protobuf => FrameEncoding::GrpcProtobuf as usize,
    }
}

/// The `WatchEvent` of a change to `obj`, of type `t`, in `encoding` (selection 0).
fn object_event(t: pb::EventType, obj: &ObjectRef, encoding: pb::Encoding) -> pb::WatchEvent {
    pb::WatchEvent {
        r#type: t as i32,
        resource_version: obj.revision.0,
        object: Some(objects::object(obj, encoding)),
        ..Default::default()
    }
}

/// The ERROR event of `err`.
fn error_event(err: &ApiError) -> pb::WatchEvent {
    let status = serde_json::to_vec(&err.to_status()).unwrap_or_default();
    pb::WatchEvent {
        r#type: pb::EventType::Error as i32,
        status: status.into(),
        ..Default::default()
    }
}

impl GrpcEvents {
    /// Messages of at most about `max_message_bytes`, objects in `encoding`.
    pub fn new(max_message_bytes: usize, encoding: pb::Encoding) -> GrpcEvents {
        GrpcEvents {
            own: BytesMut::new(),
            parts: Vec::new(),
            len: 0,
            events: 0,
            budget: max_message_bytes / 2,
            encoding,
            selection: 0,
        }
    }

    /// A message holding only the ERROR event of `err`.
    pub fn error_message(err: &ApiError) -> Vec<pb::WatchEvent> {
        vec![error_event(err)]
    }

    /// Starts the next field in `own`: the frame's header first in a message.
    fn own_start(&mut self) -> usize {
        if self.own.is_empty() {
            self.own.reserve(64);
            self.own.put_bytes(0, GRPC_PREFIX);
        }
        self.own.len()
    }

    /// Ends what was written to `own` since `from` as a part of the message.
    fn own_end(&mut self, from: usize) {
        let to = self.own.len();
        self.len += to - from;
        match self.parts.last_mut() {
            Some(Part::Own(r)) if r.end == from => r.end = to,
            _ => self.parts.push(Part::Own(from..to)),
        }
    }

    /// Adds an event, `body` its `WatchEvent` without the selection, which is added
    /// inside it when not 0.
    fn push_shared(&mut self, body: Bytes) {
        let selection = (self.selection != 0).then_some(u64::from(self.selection));
        let selection_len = selection.map_or(0, |s| 1 + prost::encoding::encoded_len_varint(s));
        let from = self.own_start();
        self.own.put_u8(EVENTS_KEY);
        prost::encoding::encode_varint((body.len() + selection_len) as u64, &mut self.own);
        self.own_end(from);
        self.len += body.len();
        self.parts.push(Part::Shared(body));
        if let Some(s) = selection {
            let from = self.own_start();
            self.own.put_u8(SELECTION_KEY);
            prost::encoding::encode_varint(s, &mut self.own);
            self.own_end(from);
        }
        self.events += 1;
    }

    /// Adds an event encoded for this message alone.
    fn push_own(&mut self, mut event: pb::WatchEvent) {
        event.selection = self.selection;
        let from = self.own_start();
        self.own.put_u8(EVENTS_KEY);
        // A BytesMut grows as needed: encoding into it cannot fail.
        let _ = event.encode_length_delimited(&mut self.own);
        self.own_end(from);
        self.events += 1;
    }

    /// An ADDED, MODIFIED or DELETED event of `obj`.
    pub fn push_object(&mut self, t: pb::EventType, obj: &ObjectRef) {
        self.push_own(object_event(t, obj, self.encoding));
    }

    /// A BOOKMARK at `rv`.
    pub fn push_bookmark(&mut self, rv: Revision, initial_events_end: bool) {
        self.push_own(pb::WatchEvent {
            r#type: pb::EventType::Bookmark as i32,
            resource_version: rv.0,
            initial_events_end,
            ..Default::default()
        });
    }
}

impl WatchEncoder for GrpcEvents {
    type Frame = BufList;

    fn event(&mut self, t: EventType, ev: &WatchEvent) {
        let encoding = self.encoding;
        let shared = ev.frame(frame_slot(encoding), t, |t, obj| {
            Some(
                object_event(event_type(t), obj, encoding)
                    .encode_to_vec()
                    .into(),
            )
        });
        if let Some(body) = shared {
            self.push_shared(body);
        }
    }

    fn initial(&mut self, obj: &ObjectRef) {
        self.push_object(pb::EventType::Added, obj);
    }

    fn bookmark(&mut self, _info: &ResourceInfo, rv: Revision, initial_events_end: bool) {
        self.push_bookmark(rv, initial_events_end);
    }

    fn error(&mut self, err: &ApiError) {
        self.push_own(error_event(err));
    }

    fn pending(&self) -> usize {
        self.events
    }

    fn pending_bytes(&self) -> usize {
        self.len
    }

    fn full(&self) -> bool {
        self.events > 0 && self.len >= self.budget
    }

    fn set_part(&mut self, part: u32) {
        self.selection = part;
    }

    /// The message, framed (empty when it holds no event).
    fn take(&mut self) -> BufList {
        let mut frame = BufList::new();
        if self.events == 0 {
            self.own.clear();
            self.parts.clear();
            self.len = 0;
            return frame;
        }
        // Below 4 GiB: messages are closed at half the limit, which is below it.
        let len = u32::try_from(self.len).unwrap_or(u32::MAX).to_be_bytes();
        self.own[1..GRPC_PREFIX].copy_from_slice(&len);
        let own = self.own.split().freeze();
        // The frame's header and the first field's header are one segment.
        let mut header = 0..GRPC_PREFIX;
        if let Some(Part::Own(r)) = self.parts.first() {
            if r.start == GRPC_PREFIX {
                header.end = r.end;
                self.parts.remove(0);
            }
        }
        frame.push(own.slice(header));
        for part in self.parts.drain(..) {
            frame.push(match part {
                Part::Own(r) => own.slice(r),
                Part::Shared(b) => b,
            });
        }
        self.len = 0;
        self.events = 0;
        frame
    }
}

/// A message as gRPC frames it on the wire: uncompressed, its length, its bytes.
pub fn framed(message: &impl Message) -> BufList {
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(GRPC_PREFIX + len);
    buf.put_u8(0);
    // At most the message limit, which the caller checked; below 4 GiB in any case.
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // A BytesMut grows as needed: encoding into it cannot fail.
    let _ = message.encode(&mut buf);
    BufList::from(buf.freeze())
}

/// A Watch or WatchMany call's session (its messages framed by [`GrpcEvents`]) for a
/// connection that writes it itself: refuses a message over the limit as tonic's
/// encoder would, ending the call with RESOURCE_EXHAUSTED, and gives the trailers that
/// end the call's stream.
pub struct GrpcFrames {
    inner: Box<dyn SteppedWatch<BufList>>,
    max_message_bytes: usize,
    /// How the call ended, if not OK; read by the trailers.
    status: Arc<Mutex<Option<Status>>>,
}

impl GrpcFrames {
    /// `session`'s frames, and the trailers that end its stream.
    pub fn new(
        session: Box<dyn SteppedWatch<BufList>>,
        max_message_bytes: usize,
    ) -> (Self, EndTrailers) {
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

/// `frame`, or None (the call's `status` set) when its message is over `limit`.
fn within(frame: BufList, limit: usize, status: &Mutex<Option<Status>>) -> Option<BufList> {
    let len = frame.remaining().saturating_sub(GRPC_PREFIX);
    if len > limit {
        *status.lock().unwrap_or_else(|e| e.into_inner()) = Some(Status::resource_exhausted(
            format!("Error, encoded message length too large: found {len} bytes, the limit is: {limit} bytes"),
        ));
        return None;
    }
    Some(frame)
}

impl SteppedWatch<BufList> for GrpcFrames {
    fn step(&mut self, waker: &Waker) -> Step<BufList> {
        match self.inner.step(waker) {
            Step::Frame(f) => match within(f, self.max_message_bytes, &self.status) {
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
                .map(move |f| within(f, limit, &status))
                .take_while(|f| std::future::ready(f.is_some()))
                .filter_map(std::future::ready),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;
    use crate::store::object::CachedObject;

    fn configmap(rev: i64) -> ObjectRef {
        let json = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","uid":"u-1","labels":{"x":"y"}},"data":{"k":"v"}}"#;
        let d = decode("/registry/configmaps/ns/a", json, Revision(rev), &[]).unwrap();
        Arc::new(CachedObject::new(Revision(rev), d))
    }

    /// A frame's message, read by prost after checking the frame's header.
    fn message(mut frame: BufList) -> pb::WatchResponse {
        let bytes = frame.copy_to_bytes(frame.remaining());
        assert_eq!(bytes[0], 0, "uncompressed");
        let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        assert_eq!(len, bytes.len() - 5, "the frame's length is the message's");
        pb::WatchResponse::decode(&bytes[5..]).expect("a WatchResponse")
    }

    fn event(
        t: pb::EventType,
        rv: i64,
        object: Option<pb::Object>,
        selection: u32,
    ) -> pb::WatchEvent {
        pb::WatchEvent {
            r#type: t as i32,
            resource_version: rv,
            object,
            selection,
            ..Default::default()
        }
    }

    #[test]
    fn messages_of_shared_and_own_events_read_as_prost_would_build_them() {
        let obj = configmap(7);
        let ev = WatchEvent::new(Revision(7), Some(obj.clone()), None);
        // Selections of one and two varint bytes, and none (0: not on the wire).
        for selection in [0, 3, 300] {
            for encoding in [pb::Encoding::Json, pb::Encoding::Protobuf] {
                let mut enc = GrpcEvents::new(super::super::DEFAULT_MAX_MESSAGE_BYTES, encoding);
                enc.set_part(selection);
                enc.event(EventType::Added, &ev);
                enc.push_bookmark(Revision(8), false);
                enc.event(EventType::Modified, &ev);
                enc.initial(&obj);
                assert_eq!(enc.pending(), 4);
                let frame = enc.take();
                let object = Some(objects::object(&obj, encoding));
                let want = pb::WatchResponse {
                    events: vec![
                        event(pb::EventType::Added, 7, object.clone(), selection),
                        event(pb::EventType::Bookmark, 8, None, selection),
                        event(pb::EventType::Modified, 7, object.clone(), selection),
                        event(pb::EventType::Added, 7, object, selection),
                    ],
                };
                assert_eq!(message(frame), want, "selection {selection}, {encoding:?}");
                assert_eq!(enc.pending(), 0, "a take empties the encoder");
                assert_eq!(enc.take().remaining(), 0, "no events, no message");
            }
        }
    }

    #[test]
    fn an_events_message_body_is_built_once_and_shared_by_every_watcher() {
        let ev = WatchEvent::new(Revision(7), Some(configmap(7)), None);
        let bodies: Vec<Bytes> = (0..2)
            .map(|_| {
                let mut enc = GrpcEvents::new(1 << 20, pb::Encoding::Json);
                enc.event(EventType::Added, &ev);
                let frame = enc.take();
                frame.into_segments().max_by_key(Bytes::len).unwrap()
            })
            .collect();
        assert_eq!(bodies[0].as_ptr(), bodies[1].as_ptr(), "the same bytes");
    }
}
