//! Watch messages whose events are encoded once and shared by every stream.
//!
//! `WatchResponse` and `WatchManyResponse` are `repeated WatchEvent events = 1`. A server
//! fills them with [`EncodedEvent`]s: a `WatchEvent` prost encoded once per event, type
//! and encoding (kept by the event itself, as the HTTP frames are), so a delivery is a
//! copy of those bytes into the stream's buffer instead of a message built and encoded
//! per watcher. A client decodes the same bytes into the generated [`pb::WatchEvent`]s of
//! `events`. Both forms encode alike; a message holds one or the other.

use bytes::{Buf, BufMut, Bytes};
use prost::encoding::{self, DecodeContext, WireType};
use prost::{DecodeError, Message};

use super::pb;

/// The field number of `events` in both messages.
const EVENTS: u32 = 1;
/// The field number of `selection` in `WatchEvent`.
const SELECTION: u32 = 7;

/// One `WatchEvent` already encoded, and the WatchMany selection it goes with (0, the
/// default, is not on the wire).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct EncodedEvent {
    bytes: Bytes,
    selection: u32,
}

impl EncodedEvent {
    /// An encoded event (without its selection).
    pub fn new(bytes: Bytes, selection: u32) -> EncodedEvent {
        EncodedEvent { bytes, selection }
    }

    /// Encodes a built event.
    pub fn of(event: &pb::WatchEvent) -> EncodedEvent {
        EncodedEvent {
            bytes: event.encode_to_vec().into(),
            selection: 0,
        }
    }

    /// The encoded event, without its selection.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The `selection` field, if not the default.
    fn selection_len(&self) -> usize {
        match self.selection {
            0 => 0,
            s => encoding::key_len(SELECTION) + encoding::encoded_len_varint(u64::from(s)),
        }
    }

    /// The event's length as a field of the message.
    pub fn encoded_len(&self) -> usize {
        let len = self.bytes.len() + self.selection_len();
        encoding::key_len(EVENTS) + encoding::encoded_len_varint(len as u64) + len
    }

    fn encode(&self, buf: &mut impl BufMut) {
        encoding::encode_key(EVENTS, WireType::LengthDelimited, buf);
        encoding::encode_varint((self.bytes.len() + self.selection_len()) as u64, buf);
        buf.put_slice(&self.bytes);
        if self.selection != 0 {
            encoding::encode_key(SELECTION, WireType::Varint, buf);
            encoding::encode_varint(u64::from(self.selection), buf);
        }
    }
}

/// Defines a watch message: `events` as a client decodes them, `encoded` as a server
/// sends them.
macro_rules! watch_message {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Default)]
        pub struct $name {
            /// The events, as decoded (or built by hand).
            pub events: Vec<pb::WatchEvent>,
            /// The events, encoded once (what the server sends).
            pub encoded: Vec<EncodedEvent>,
        }

        impl $name {
            /// A message of encoded events.
            pub fn encoded(encoded: Vec<EncodedEvent>) -> $name {
                $name {
                    events: Vec::new(),
                    encoded,
                }
            }

            /// How many events it holds.
            pub fn len(&self) -> usize {
                self.events.len() + self.encoded.len()
            }

            /// Whether it holds none.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
        }

        impl Message for $name {
            fn encode_raw(&self, buf: &mut impl BufMut) {
                encoding::message::encode_repeated(EVENTS, &self.events, buf);
                for e in &self.encoded {
                    e.encode(buf);
                }
            }

            fn merge_field(
                &mut self,
                tag: u32,
                wire_type: WireType,
                buf: &mut impl Buf,
                ctx: DecodeContext,
            ) -> Result<(), DecodeError> {
                if tag == EVENTS {
                    encoding::message::merge_repeated(wire_type, &mut self.events, buf, ctx)
                } else {
                    encoding::skip_field(wire_type, tag, buf, ctx)
                }
            }

            fn encoded_len(&self) -> usize {
                encoding::message::encoded_len_repeated(EVENTS, &self.events)
                    + self.encoded.iter().map(EncodedEvent::encoded_len).sum::<usize>()
            }

            fn clear(&mut self) {
                self.events.clear();
                self.encoded.clear();
            }
        }
    };
}

watch_message!(
    /// The events of a Watch ready at once.
    WatchResponse
);
watch_message!(
    /// The events of a WatchMany ready at once, whole revisions.
    WatchManyResponse
);

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t: pb::EventType, rv: i64, selection: u32) -> pb::WatchEvent {
        pb::WatchEvent {
            r#type: t as i32,
            resource_version: rv,
            object: Some(pb::Object {
                metadata: Some(pb::ObjectMeta {
                    name: "a".into(),
                    labels: [("k".to_string(), "v".to_string())].into(),
                    ..Default::default()
                }),
                encoding: pb::Encoding::Json as i32,
                raw: Bytes::from_static(br#"{"kind":"ConfigMap"}"#),
            }),
            selection,
            ..Default::default()
        }
    }

    #[test]
    fn encoded_events_decode_as_the_events_they_were_built_from() {
        let built = vec![
            event(pb::EventType::Added, 5, 0),
            event(pb::EventType::Modified, 6, 3),
            pb::WatchEvent {
                r#type: pb::EventType::Bookmark as i32,
                resource_version: 7,
                initial_events_end: true,
                ..Default::default()
            },
        ];
        let sent = WatchManyResponse::encoded(
            built
                .iter()
                .map(|e| {
                    // Encoded without the selection, which is added as it is sent.
                    let shared = EncodedEvent::of(&pb::WatchEvent {
                        selection: 0,
                        ..e.clone()
                    });
                    EncodedEvent::new(shared.bytes, e.selection)
                })
                .collect(),
        );
        let wire = sent.encode_to_vec();
        assert_eq!(wire.len(), sent.encoded_len());
        let got = WatchManyResponse::decode(wire.as_slice()).unwrap();
        assert_eq!(got.events, built);
        assert!(got.encoded.is_empty());
        // The same bytes as the events encoded field by field.
        assert_eq!(got.encode_to_vec(), wire);
        assert_eq!(got.len(), 3);
    }
}
