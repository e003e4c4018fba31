//! Cached objects as the gRPC API's `Object`: metadata as fields, and the object in the
//! encoding the client asked for, sent from the cache's bytes.

use bytes::Bytes;

use super::pb;
use crate::store::object::ObjectRef;
use crate::store::CachedObject;

/// The encoding a request asks for (unknown values read as JSON, proto3's default).
pub fn encoding(value: i32) -> pb::Encoding {
    pb::Encoding::try_from(value).unwrap_or(pb::Encoding::Json)
}

/// The object's bytes in `encoding`: Kubernetes protobuf where the object has a
/// protobuf form (else its JSON), or its JSON. Either is the cache's shared bytes.
fn raw(obj: &ObjectRef, encoding: pb::Encoding) -> (pb::Encoding, Bytes) {
    if encoding == pb::Encoding::Protobuf {
        if let Some(pb) = obj.protobuf() {
            return (pb::Encoding::Protobuf, pb.value.clone());
        }
    }
    (pb::Encoding::Json, obj.json())
}

/// The typed metadata of a cached object.
pub fn meta(obj: &CachedObject) -> pb::ObjectMeta {
    let facts = obj.facts();
    pb::ObjectMeta {
        namespace: obj.namespace().unwrap_or_default().to_string(),
        name: obj.name().to_string(),
        uid: facts.uid.to_string(),
        resource_version: obj.revision.0,
        labels: obj
            .labels()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        generation: facts.generation,
        deleting: facts.deleting,
    }
}

/// A cached object as sent: its metadata and its bytes in `encoding`.
pub fn object(obj: &ObjectRef, encoding: pb::Encoding) -> pb::Object {
    let (encoding, raw) = raw(obj, encoding);
    pb::Object {
        metadata: Some(meta(obj)),
        encoding: encoding as i32,
        raw,
    }
}

/// What an object adds to a message: its bytes and metadata, with their framing and
/// the item or event around it (counted generously: an estimate for message bounds, not
/// an exact size).
pub fn size(obj: &ObjectRef, encoding: pb::Encoding) -> usize {
    let labels: usize = obj
        .labels()
        .iter()
        .map(|(k, v)| k.len() + v.len() + 8)
        .sum();
    raw(obj, encoding).1.len() + obj.key().len() + obj.facts().uid.len() + labels + 64
}

/// [`size`] in `encoding`, as a page bound's measure.
pub fn sizer(encoding: pb::Encoding) -> fn(&ObjectRef) -> usize {
    match encoding {
        pb::Encoding::Json => |o| size(o, pb::Encoding::Json),
        pb::Encoding::Protobuf => |o| size(o, pb::Encoding::Protobuf),
    }
}
