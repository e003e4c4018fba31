//! The tests' own Kubernetes protobuf, independent of the code under test.
//!
//! Scenarios write built-in objects as kube-apiserver stores them: `k8s\0`, then a
//! `runtime.Unknown` envelope around the object's protobuf message. Nothing here uses
//! watchd's codec. The messages are the `k8s-pb` types (prost, generated from the upstream
//! `.proto` files), filled from a test's JSON by hand-written readers that refuse any
//! member they do not know, so a field is never silently left out of the bytes. The checks
//! of what watchd serves are independent too:
//!
//! - [`assert_protobuf_as_written`]: a served protobuf object, decoded with `k8s-pb`, is
//!   exactly the message written, with its `resourceVersion`.
//! - [`assert_json_as_written`]: a served JSON object of a protobuf-stored object is a
//!   valid object of its kind to `k8s-openapi` (serde types generated from the upstream
//!   OpenAPI), and equals the JSON written, with its `resourceVersion`, except for zero
//!   values. Decoding protobuf and writing Go's JSON adds zero values where a Go field has
//!   no `omitempty` (a container's `"resources":{}`) and drops those where it has;
//!   `tests/pbjson_fixtures.rs` checks those rules against upstream's own renderings.
//!
//! The readers write only the members an object has. Go writes every non-pointer field,
//! zero or not; such bytes come from the upstream fixtures.

use std::collections::BTreeMap;

use k8s_pb::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

const MAGIC: &[u8] = b"k8s\0";

/// Whether kube-apiserver stores objects of `api_version` as protobuf: the built-in groups
/// (the core group, groups without a dot, and `*.k8s.io`), except those of the
/// aggregated-in servers, whose storage codec is JSON (CustomResourceDefinitions,
/// APIServices). Custom resources are JSON.
pub fn stored_as_protobuf(api_version: &str) -> bool {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let built_in = !group.contains('.') || group.ends_with(".k8s.io");
    built_in && !matches!(group, "apiextensions.k8s.io" | "apiregistration.k8s.io")
}

/// The bytes kube-apiserver stores for `object`. Panics for a kind or a member the readers
/// here do not know (add it below).
pub fn encode(object: &Value) -> Vec<u8> {
    let (api_version, kind) = type_meta(object);
    let raw = dispatch(&api_version, &kind, Encode(object))
        .unwrap_or_else(|| panic!("{}", unknown_kind(&api_version, &kind)));
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version),
            kind: Some(kind),
        }),
        raw: Some(raw),
        // Go writes its non-pointer strings even when empty.
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut bytes = MAGIC.to_vec();
    unknown.encode(&mut bytes).expect("a Vec grows");
    bytes
}

/// The message of an enveloped object (`k8s\0`, `runtime.Unknown`) as `P`, with the
/// envelope's (apiVersion, kind).
pub fn decode<P: Message + Default>(enveloped: &[u8]) -> ((String, String), P) {
    let (type_meta, raw) = envelope(enveloped);
    (type_meta, decode_exactly(&raw))
}

/// `raw` decoded as `P`, which must encode back to `raw`: prost skips the fields a
/// message does not declare, so a served object with a field too many (or a field under
/// a wrong number) would decode to the expected message; encoding it again drops that
/// field, and the bytes differ. Fields out of order differ too: prost writes fields in
/// field-number order, as Go's generated marshallers do.
///
/// One difference is expected, and only it is allowed ([`same_wire`]): Go's marshallers
/// write both the key (1) and the value (2) of every map entry, an empty string, empty
/// message or zero included (`12 00`), where prost leaves out a key or value equal to its
/// default. Every other field is proto2 `optional` in `k8s-pb`, so prost keeps a zero it
/// decoded (`Some("")`) and writes it back as Go did. Bytes written by prost (this
/// module's [`encode`]) re-encode exactly; Go's (the upstream fixtures) differ only so.
fn decode_exactly<P: Message + Default>(raw: &[u8]) -> P {
    let message =
        P::decode(raw).unwrap_or_else(|e| panic!("not a {}: {e}", std::any::type_name::<P>()));
    let again = message.encode_to_vec();
    if let Err(e) = same_wire(raw, &again, "", 0) {
        let at = again.iter().zip(raw).take_while(|(a, b)| a == b).count();
        let around = |b: &[u8]| b[at.saturating_sub(16)..b.len().min(at + 32)].to_vec();
        panic!(
            "the served {} is not the bytes of the message it decodes to ({e}): a field the \
             type does not declare, or fields out of order; they differ from byte {at} \
             (served {} bytes, re-encoded {})\nserved     ..{:02x?}\nre-encoded ..{:02x?}",
            std::any::type_name::<P>(),
            raw.len(),
            again.len(),
            around(raw),
            around(&again),
        );
    }
    message
}

/// Whether `served` and `again` (its re-encoding by prost) are the same fields, in the
/// same order, with the same values, except map entries from which prost left out a zero
/// key or value: at any depth, a message of exactly field 1 then field 2 in `served` may
/// lack, in `again`, those of them whose value is zero (an empty length-delimited value or
/// a varint 0). Length-delimited values that differ are compared as messages (their
/// lengths differ when something inside does). `path` names the field for the message.
fn same_wire(served: &[u8], again: &[u8], path: &str, depth: usize) -> Result<(), String> {
    if served == again {
        return Ok(());
    }
    let at = |path: &str| {
        if path.is_empty() {
            "the object".to_string()
        } else {
            format!("field {path}")
        }
    };
    if depth > 64 {
        return Err(format!("{} nests too deep", at(path)));
    }
    let (Some(ours), Some(theirs)) = (wire_fields(served), wire_fields(again)) else {
        return Err(format!("{} differs and is not a message", at(path)));
    };
    let numbers: Vec<u64> = ours.iter().map(|f| f.0 >> 3).collect();
    let kept: Vec<&(u64, &[u8])> = if numbers == [1, 2] && theirs.len() < ours.len() {
        // A map entry: prost leaves out a zero key or value.
        ours.iter()
            .filter(|(tag, v)| !is_zero_value(*tag, v))
            .collect()
    } else {
        ours.iter().collect()
    };
    if kept.len() != theirs.len() {
        return Err(format!(
            "{} has fields {numbers:?} served, {:?} re-encoded",
            at(path),
            theirs.iter().map(|f| f.0 >> 3).collect::<Vec<_>>()
        ));
    }
    for ((tag, ours), (their_tag, theirs)) in kept.into_iter().zip(&theirs) {
        let inner = if path.is_empty() {
            (tag >> 3).to_string()
        } else {
            format!("{path}.{}", tag >> 3)
        };
        if tag != their_tag {
            return Err(format!(
                "{} is field {} served, {} re-encoded",
                at(&inner),
                tag >> 3,
                their_tag >> 3
            ));
        }
        if tag & 7 == 2 {
            same_wire(ours, theirs, &inner, depth + 1)?;
        } else if ours != theirs {
            return Err(format!("{} differs", at(&inner)));
        }
    }
    Ok(())
}

/// Whether a field's value (as [`wire_fields`] returns it) is zero: an empty
/// length-delimited value, or a varint 0.
fn is_zero_value(tag: u64, v: &[u8]) -> bool {
    match tag & 7 {
        0 => v == [0],
        2 => v.is_empty(),
        _ => false,
    }
}

/// The fields of a message: (tag, value), the value without its length prefix for a
/// length-delimited field, the varint's bytes for a varint. `None` if `b` is not a
/// message (a bad tag or wire type, or a field running past the end).
fn wire_fields(mut b: &[u8]) -> Option<Vec<(u64, &[u8])>> {
    fn varint(b: &mut &[u8]) -> Option<(u64, usize)> {
        let mut v = 0u64;
        for (i, &byte) in b.iter().enumerate().take(10) {
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                *b = &b[i + 1..];
                return Some((v, i + 1));
            }
        }
        None
    }
    let mut out = Vec::new();
    // Each pass consumes at least one byte, so this ends.
    while !b.is_empty() {
        let (tag, _) = varint(&mut b)?;
        if tag >> 3 == 0 {
            return None;
        }
        let value = match tag & 7 {
            0 => {
                let start = b;
                let (_, n) = varint(&mut b)?;
                &start[..n]
            }
            1 | 5 => {
                let n = if tag & 7 == 1 { 8 } else { 4 };
                let (v, rest) = (b.get(..n)?, &b[n.min(b.len())..]);
                b = rest;
                v
            }
            2 => {
                let (len, _) = varint(&mut b)?;
                let len = usize::try_from(len).ok()?;
                let v = b.get(..len)?;
                b = &b[len..];
                v
            }
            _ => return None,
        };
        out.push((tag, value));
    }
    Some(out)
}

/// The (apiVersion, kind) and the raw message of an enveloped object.
pub fn envelope(enveloped: &[u8]) -> ((String, String), Vec<u8>) {
    let body = enveloped
        .strip_prefix(MAGIC)
        .unwrap_or_else(|| panic!("no k8s\\0 magic: {enveloped:?}"));
    let unknown = Unknown::decode(body).unwrap_or_else(|e| panic!("not a runtime.Unknown: {e}"));
    let tm = unknown.type_meta.unwrap_or_default();
    let type_meta = (
        tm.api_version.unwrap_or_default(),
        tm.kind.unwrap_or_default(),
    );
    (type_meta, unknown.raw.unwrap_or_default())
}

/// Asserts that `served` (a protobuf object as watchd serves it: `k8s\0`, the envelope
/// and the message) is `written`, stored at revision `rv`, exactly.
pub fn assert_protobuf_as_written(served: &[u8], written: &Value, rv: i64) {
    let (api_version, kind) = type_meta(written);
    let (served_type, raw) = envelope(served);
    assert_eq!(served_type, (api_version.clone(), kind.clone()), "typeMeta");
    dispatch(
        &api_version,
        &kind,
        SameMessage {
            raw: &raw,
            written,
            rv,
        },
    )
    .unwrap_or_else(|| panic!("{}", unknown_kind(&api_version, &kind)));
}

/// Asserts that `served` (JSON watchd rendered from protobuf) is a valid object of its kind
/// and `written`, stored at revision `rv`, except for zero values (see the module's
/// documentation).
pub fn assert_json_as_written(served: &Value, written: &Value, rv: i64) {
    let (api_version, kind) = type_meta(written);
    // A kind the table below lacks is a failure, never a skipped check.
    match dispatch(&api_version, &kind, OpenApi(served)) {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            panic!("served {api_version} {kind} is not one to k8s-openapi ({e}): {served}")
        }
        None => panic!("{}", unknown_kind(&api_version, &kind)),
    }
    let mut expected = written.clone();
    expected["metadata"]["resourceVersion"] = json!(rv.to_string());
    let (got, want) = (without_zeros(served), without_zeros(&expected));
    assert_eq!(
        got, want,
        "served (left) is not the object written (right), zero values aside\nserved: {served}"
    );
}

/// `value` without the members whose value is zero (`null`, `false`, `0`, `""`, `{}`, `[]`,
/// or an object of only such members). Array elements are kept: their positions matter.
pub fn without_zeros(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), without_zeros(v)))
                .filter(|(_, v)| !is_zero(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_zeros).collect()),
        other => other.clone(),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

fn type_meta(object: &Value) -> (String, String) {
    let s = |k: &str| match object.get(k) {
        Some(Value::String(s)) => s.clone(),
        _ => panic!("test object without a string {k:?}: {object}"),
    };
    (s("apiVersion"), s("kind"))
}

fn unknown_kind(api_version: &str, kind: &str) -> String {
    format!(
        "{api_version} {kind} is not known to the tests' protobuf encoder; \
         add it to tests/support/kubepb.rs"
    )
}

/// A top-level kind: a `k8s-pb` message with an ObjectMeta.
trait Kind:
    Message + Default + PartialEq + std::fmt::Debug + k8s_pb::Metadata<Ty = ObjectMeta>
{
}
impl<T> Kind for T where
    T: Message + Default + PartialEq + std::fmt::Debug + k8s_pb::Metadata<Ty = ObjectMeta>
{
}

/// What to do with a kind's `k8s-pb` type `P`, its reader and its `k8s-openapi` type `O`.
trait Visit {
    type Out;
    fn visit<P: Kind, O: DeserializeOwned>(self, read: fn(&mut Fields) -> P) -> Self::Out;
}

/// Reads the whole object (`apiVersion` and `kind` are the envelope's).
fn read_object<P>(object: &Value, read: fn(&mut Fields) -> P) -> P {
    read_fields(object, "", |f| {
        f.get("apiVersion");
        f.get("kind");
        read(f)
    })
}

struct Encode<'a>(&'a Value);
impl Visit for Encode<'_> {
    type Out = Vec<u8>;
    fn visit<P: Kind, O: DeserializeOwned>(self, read: fn(&mut Fields) -> P) -> Vec<u8> {
        read_object(self.0, read).encode_to_vec()
    }
}

struct SameMessage<'a> {
    raw: &'a [u8],
    written: &'a Value,
    rv: i64,
}
impl Visit for SameMessage<'_> {
    type Out = ();
    fn visit<P: Kind, O: DeserializeOwned>(self, read: fn(&mut Fields) -> P) {
        let served: P = decode_exactly(self.raw);
        let mut want = read_object(self.written, read);
        let meta = want
            .metadata_mut()
            .expect("objects are written with metadata");
        meta.resource_version = Some(self.rv.to_string());
        assert!(served == want, "served {served:#?}\nwritten {want:#?}");
    }
}

struct OpenApi<'a>(&'a Value);
impl Visit for OpenApi<'_> {
    type Out = Result<(), serde_json::Error>;
    fn visit<P: Kind, O: DeserializeOwned>(self, _: fn(&mut Fields) -> P) -> Self::Out {
        O::deserialize(self.0).map(drop)
    }
}

/// The kinds the tests store, each with its `k8s-pb` type, its `k8s-openapi` type and the
/// reader of its members other than `apiVersion` and `kind` (none given: `metadata` only).
macro_rules! kinds {
    ($($pb:ty, $openapi:ty $(=> $read:expr)?;)*) => {
        fn dispatch<V: Visit>(api_version: &str, kind: &str, visit: V) -> Option<V::Out> {
            use k8s_pb::Resource;
            $(
                if api_version == <$pb>::API_VERSION && kind == <$pb>::KIND {
                    return Some(visit.visit::<$pb, $openapi>(kinds!(@read $pb $(, $read)?)));
                }
            )*
            None
        }
    };
    (@read $pb:ty, $read:expr) => { $read };
    (@read $pb:ty) => {
        |f| {
            let mut object = <$pb>::default();
            object.metadata = f.message("metadata", object_meta);
            object
        }
    };
}

use k8s_openapi::api as oa;
use k8s_pb::api as pb;

kinds! {
    pb::core::v1::ConfigMap, oa::core::v1::ConfigMap => |f| pb::core::v1::ConfigMap {
        metadata: f.message("metadata", object_meta),
        data: f.strings("data"),
        immutable: f.bool("immutable"),
        ..Default::default()
    };
    pb::core::v1::Secret, oa::core::v1::Secret => |f| pb::core::v1::Secret {
        metadata: f.message("metadata", object_meta),
        data: f.bytes("data"),
        r#type: f.string("type"),
        immutable: f.bool("immutable"),
        ..Default::default()
    };
    pb::core::v1::ServiceAccount, oa::core::v1::ServiceAccount;
    pb::core::v1::Namespace, oa::core::v1::Namespace => |f| pb::core::v1::Namespace {
        metadata: f.message("metadata", object_meta),
        status: f.message("status", |f| pb::core::v1::NamespaceStatus {
            phase: f.string("phase"),
            ..Default::default()
        }),
        ..Default::default()
    };
    pb::core::v1::Pod, oa::core::v1::Pod => |f| pb::core::v1::Pod {
        metadata: f.message("metadata", object_meta),
        spec: f.message("spec", pod_spec),
        status: f.message("status", pod_status),
    };
    pb::core::v1::Node, oa::core::v1::Node => |f| pb::core::v1::Node {
        metadata: f.message("metadata", object_meta),
        spec: f.message("spec", |f| pb::core::v1::NodeSpec {
            pod_cidr: f.string("podCIDR"),
            unschedulable: f.bool("unschedulable"),
            ..Default::default()
        }),
        status: f.message("status", |f| pb::core::v1::NodeStatus {
            conditions: f.list("conditions", |f| pb::core::v1::NodeCondition {
                r#type: f.string("type"),
                status: f.string("status"),
                reason: f.string("reason"),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    pb::core::v1::Event, oa::core::v1::Event => |f| pb::core::v1::Event {
        metadata: f.message("metadata", object_meta),
        involved_object: f.message("involvedObject", object_reference),
        reason: f.string("reason"),
        message: f.string("message"),
        source: f.message("source", |f| pb::core::v1::EventSource {
            component: f.string("component"),
            host: f.string("host"),
        }),
        r#type: f.string("type"),
        ..Default::default()
    };
    pb::core::v1::Service, oa::core::v1::Service;
    pb::core::v1::Endpoints, oa::core::v1::Endpoints;
    pb::core::v1::ReplicationController, oa::core::v1::ReplicationController;
    pb::apps::v1::Deployment, oa::apps::v1::Deployment => |f| pb::apps::v1::Deployment {
        metadata: f.message("metadata", object_meta),
        spec: f.message("spec", |f| pb::apps::v1::DeploymentSpec {
            replicas: f.i32("replicas"),
            ..Default::default()
        }),
        ..Default::default()
    };
    pb::coordination::v1::Lease, oa::coordination::v1::Lease;
    pb::rbac::v1::Role, oa::rbac::v1::Role;
    pb::rbac::v1::ClusterRole, oa::rbac::v1::ClusterRole;
    pb::networking::v1::Ingress, oa::networking::v1::Ingress;
}

fn object_meta(f: &mut Fields) -> ObjectMeta {
    ObjectMeta {
        name: f.string("name"),
        generate_name: f.string("generateName"),
        namespace: f.string("namespace"),
        uid: f.string("uid"),
        resource_version: f.string("resourceVersion"),
        generation: f.i64("generation"),
        creation_timestamp: f.time("creationTimestamp"),
        deletion_timestamp: f.time("deletionTimestamp"),
        deletion_grace_period_seconds: f.i64("deletionGracePeriodSeconds"),
        labels: f.strings("labels"),
        annotations: f.strings("annotations"),
        finalizers: f.list_of_strings("finalizers"),
        ..Default::default()
    }
}

fn object_reference(f: &mut Fields) -> pb::core::v1::ObjectReference {
    pb::core::v1::ObjectReference {
        kind: f.string("kind"),
        namespace: f.string("namespace"),
        name: f.string("name"),
        uid: f.string("uid"),
        api_version: f.string("apiVersion"),
        resource_version: f.string("resourceVersion"),
        field_path: f.string("fieldPath"),
    }
}

fn pod_spec(f: &mut Fields) -> pb::core::v1::PodSpec {
    pb::core::v1::PodSpec {
        containers: f.list("containers", |f| pb::core::v1::Container {
            name: f.string("name"),
            image: f.string("image"),
            ..Default::default()
        }),
        restart_policy: f.string("restartPolicy"),
        node_name: f.string("nodeName"),
        scheduler_name: f.string("schedulerName"),
        service_account_name: f.string("serviceAccountName"),
        ..Default::default()
    }
}

fn pod_status(f: &mut Fields) -> pb::core::v1::PodStatus {
    pb::core::v1::PodStatus {
        phase: f.string("phase"),
        pod_ip: f.string("podIP"),
        container_statuses: f.list("containerStatuses", |f| pb::core::v1::ContainerStatus {
            name: f.string("name"),
            ready: f.bool("ready"),
            restart_count: f.i32("restartCount"),
            state: f.message("state", |f| pb::core::v1::ContainerState {
                waiting: f.message("waiting", |f| pb::core::v1::ContainerStateWaiting {
                    reason: f.string("reason"),
                    message: f.string("message"),
                }),
                running: f.message("running", |f| pb::core::v1::ContainerStateRunning {
                    started_at: f.time("startedAt"),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The members of one JSON object, read by name; [`read_fields`] refuses the object if a
/// member was not read. A `null` member reads as absent, as Go's JSON decoder reads it.
struct Fields<'a> {
    path: String,
    map: &'a Map<String, Value>,
    read: Vec<&'static str>,
}

fn read_fields<T>(value: &Value, path: &str, read: impl FnOnce(&mut Fields) -> T) -> T {
    let at = if path.is_empty() { "the object" } else { path };
    let map = value
        .as_object()
        .unwrap_or_else(|| panic!("{at} is not an object: {value}"));
    let mut fields = Fields {
        path: path.to_string(),
        map,
        read: Vec::new(),
    };
    let out = read(&mut fields);
    let unread: Vec<&String> = map
        .keys()
        .filter(|k| !fields.read.contains(&k.as_str()))
        .collect();
    assert!(
        unread.is_empty(),
        "the tests' protobuf encoder does not know the members {unread:?} of {at}; \
         add it to tests/support/kubepb.rs"
    );
    out
}

impl Fields<'_> {
    fn get(&mut self, key: &'static str) -> Option<&Value> {
        self.read.push(key);
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn wrong(&self, key: &str, want: &str) -> ! {
        let path = self.path_of(key);
        panic!("{path} is not {want}: {:?}", self.map.get(key))
    }

    fn string(&mut self, key: &'static str) -> Option<String> {
        let v = self.get(key)?;
        match v.as_str() {
            Some(s) => Some(s.to_string()),
            None => self.wrong(key, "a string"),
        }
    }

    fn bool(&mut self, key: &'static str) -> Option<bool> {
        let v = self.get(key)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => self.wrong(key, "a boolean"),
        }
    }

    fn i64(&mut self, key: &'static str) -> Option<i64> {
        let v = self.get(key)?;
        match v.as_i64() {
            Some(n) => Some(n),
            None => self.wrong(key, "an integer"),
        }
    }

    fn i32(&mut self, key: &'static str) -> Option<i32> {
        let n = self.i64(key)?;
        match i32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => self.wrong(key, "a 32-bit integer"),
        }
    }

    /// An RFC 3339 time, as metav1.Time writes it.
    fn time(&mut self, key: &'static str) -> Option<Time> {
        let s = self.string(key)?;
        let t: k8s_openapi::jiff::Timestamp = s
            .parse()
            .unwrap_or_else(|e| panic!("{} is not a time ({e}): {s}", self.path_of(key)));
        Some(Time {
            seconds: Some(t.as_second()),
            nanos: Some(t.subsec_nanosecond()),
        })
    }

    fn strings(&mut self, key: &'static str) -> BTreeMap<String, String> {
        let path = self.path_of(key);
        let Some(v) = self.get(key) else {
            return BTreeMap::new();
        };
        let map = v
            .as_object()
            .unwrap_or_else(|| panic!("{path} is not an object: {v}"));
        map.iter()
            .map(|(k, v)| match v.as_str() {
                Some(s) => (k.clone(), s.to_string()),
                None => panic!("{path}.{k} is not a string: {v}"),
            })
            .collect()
    }

    /// A map of base64 strings, as Go writes `[]byte` values.
    fn bytes(&mut self, key: &'static str) -> BTreeMap<String, Vec<u8>> {
        use base64::Engine;
        let path = self.path_of(key);
        self.strings(key)
            .into_iter()
            .map(|(k, v)| {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(&v)
                    .unwrap_or_else(|e| panic!("{path}.{k} is not base64 ({e}): {v}"));
                (k, bytes)
            })
            .collect()
    }

    fn message<T>(&mut self, key: &'static str, read: impl FnOnce(&mut Fields) -> T) -> Option<T> {
        let path = self.path_of(key);
        let v = self.get(key)?;
        Some(read_fields(v, &path, read))
    }

    fn list<T>(&mut self, key: &'static str, read: impl Fn(&mut Fields) -> T) -> Vec<T> {
        let path = self.path_of(key);
        let Some(v) = self.get(key) else {
            return Vec::new();
        };
        let items = v
            .as_array()
            .unwrap_or_else(|| panic!("{path} is not an array: {v}"));
        items
            .iter()
            .enumerate()
            .map(|(i, item)| read_fields(item, &format!("{path}[{i}]"), &read))
            .collect()
    }

    fn list_of_strings(&mut self, key: &'static str) -> Vec<String> {
        let path = self.path_of(key);
        let Some(v) = self.get(key) else {
            return Vec::new();
        };
        let items = v
            .as_array()
            .unwrap_or_else(|| panic!("{path} is not an array: {v}"));
        items
            .iter()
            .map(|s| match s.as_str() {
                Some(s) => s.to_string(),
                None => panic!("{path} has a non-string: {s}"),
            })
            .collect()
    }
}
