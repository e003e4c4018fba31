//! Pods for the scenarios, built by the demo's pod builder
//! ([`crate::objects::pod`]: owned by a ReplicaSet, scheduled, running) and
//! stored as the demo stores them (Kubernetes protobuf, or JSON), padded to
//! a size, with a fixed-width send stamp in the [`STAMP_ANNOTATION`]
//! annotation that is rewritten in the encoded bytes (19 digits in place),
//! so that a write costs a copy, not an encode.

use serde_json::Value;

use crate::demo::Storage;
use crate::objects::{self, key_for, NewPod, Rng, PODS};
pub use crate::s1::event::STAMP_ANNOTATION;
use crate::s1::writer::Stamped;

/// The annotation that pads an object to its size.
pub const PAD_ANNOTATION: &str = "loadtest.watchd.dev/padding";
/// Digits of the stamp (unix nanoseconds have 19 until 2286).
pub const STAMP_DIGITS: usize = 19;
const PLACEHOLDER: &str = "0000000000000000000";

/// An encoded value whose stamp digits can be rewritten in place.
#[derive(Clone, Debug)]
pub struct StampedValue {
    /// The etcd key.
    pub key: String,
    bytes: Vec<u8>,
    at: usize,
}

impl StampedValue {
    /// Finds the one [`STAMP_DIGITS`]-digit zero placeholder in `bytes`.
    pub fn new(key: String, bytes: Vec<u8>) -> Result<Self, String> {
        let p = PLACEHOLDER.as_bytes();
        let mut found = bytes.windows(p.len()).enumerate().filter(|(_, w)| *w == p);
        let at = match (found.next(), found.next()) {
            (Some((at, _)), None) => at,
            (None, _) => return Err(format!("{key}: no stamp placeholder in the value")),
            (Some(_), Some(_)) => {
                return Err(format!("{key}: the stamp placeholder is not unique"))
            }
        };
        Ok(Self { key, bytes, at })
    }

    /// The value with `n` as the stamp (zero-padded to 19 digits).
    pub fn with_stamp(&self, n: u64) -> Vec<u8> {
        let mut v = self.bytes.clone();
        let digits = format!("{n:0STAMP_DIGITS$}");
        v[self.at..self.at + STAMP_DIGITS].copy_from_slice(&digits.as_bytes()[..STAMP_DIGITS]);
        v
    }

    /// Bytes of the value.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the value is empty (never, for a built pod).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl Stamped for StampedValue {
    fn key(&self) -> &str {
        &self.key
    }

    fn stamped(&mut self, sent_ns: u64) -> Result<Vec<u8>, String> {
        Ok(self.with_stamp(sent_ns))
    }
}

/// Encodes `obj` as `storage` says, refusing (not falling back to JSON)
/// a built-in object the protobuf schema rejects: a run must not measure
/// another format than it says.
pub fn encode_strict(obj: &Value, storage: Storage) -> Result<Vec<u8>, String> {
    match storage {
        Storage::Json => Ok(objects::encode(obj)),
        Storage::Protobuf => watchd::codec::pbjson::encode_stored(obj)
            .map_err(|e| format!("cannot encode {} as protobuf: {e}", obj["kind"])),
    }
}

/// Sets annotation `key` to `value`.
pub fn annotate(obj: &mut Value, key: &str, value: &str) {
    let meta = &mut obj["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = Value::Object(Default::default());
    }
    meta["annotations"][key] = Value::String(value.to_string());
}

/// Encodes `obj` padded (with [`PAD_ANNOTATION`]) so that the encoded value
/// is about `target` bytes (never less than without padding).
pub fn encode_padded(obj: &mut Value, storage: Storage, target: usize) -> Result<Vec<u8>, String> {
    let bare = encode_strict(obj, storage)?;
    if bare.len() >= target {
        return Ok(bare);
    }
    // The annotation's own key and framing cost a few dozen bytes; two
    // passes settle the length.
    let mut pad = target - bare.len();
    for _ in 0..2 {
        annotate(obj, PAD_ANNOTATION, &"x".repeat(pad));
        let v = encode_strict(obj, storage)?;
        let over = v.len() as i64 - target as i64;
        if over == 0 || (over < 0 && pad == 0) {
            return Ok(v);
        }
        pad = (pad as i64 - over).max(0) as usize;
    }
    annotate(obj, PAD_ANNOTATION, &"x".repeat(pad));
    encode_strict(obj, storage)
}

/// Name of the `i`-th node: `node-<i>`.
pub fn node_name(i: usize) -> String {
    format!("node-{i}")
}

/// Name of the `i`-th of `count` namespaces: `load-ns-<i>`.
pub fn namespace_name(i: usize) -> String {
    format!("load-ns-{i}")
}

/// Pod `i` of a scenario: `pod-<i>` in namespace `ns`, bound to `node`, of
/// one of the demo's apps, running, with the stamp placeholder annotation.
pub fn pod(i: usize, ns: &str, node: &str, rng: &mut Rng) -> Value {
    let app = ["web", "api", "worker"][i % 3];
    let rs = format!("{app}-5d8f7c9b4");
    let name = format!("{rs}-{i}");
    let labels = [("app", app), ("pod-template-hash", "5d8f7c9b4")];
    let owner = objects::controller_ref(
        "apps/v1",
        "ReplicaSet",
        &rs,
        "0b3c5f0e-1111-4c4c-9d9d-5f5f5f5f5f5f",
    );
    let ip = objects::pod_ip_for(node, rng);
    let mut p = objects::pod(
        &NewPod {
            ns,
            name: &name,
            node,
            labels: &labels,
            owner,
            pod_ip: Some(ip),
        },
        rng,
    );
    annotate(&mut p, STAMP_ANNOTATION, PLACEHOLDER);
    p
}

/// The etcd key of a pod object.
pub fn pod_key(prefix: &str, pod: &Value) -> String {
    let meta = &pod["metadata"];
    key_for(
        prefix,
        PODS,
        meta["namespace"].as_str(),
        meta["name"].as_str().unwrap_or_default(),
    )
}

/// Pod `i` encoded as `storage`, padded to about `bytes`, ready to stamp.
pub fn stamped_pod(
    prefix: &str,
    i: usize,
    ns: &str,
    node: &str,
    storage: Storage,
    bytes: usize,
    rng: &mut Rng,
) -> Result<StampedValue, String> {
    stamped_pod_with(prefix, i, ns, node, storage, bytes, rng, |_| {})
}

/// `n` pods of about `bytes` bytes (0: as built) stored as `storage`, spread over 50
/// namespaces and 500 nodes, as (key, value with a zero stamp), drawn from `seed`: the
/// cache the list and check scenarios load.
pub fn pod_items(
    n: usize,
    storage: Storage,
    bytes: usize,
    seed: u64,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let v = stamped_pod(
                "/registry",
                i,
                &namespace_name(i % 50),
                &node_name(i % 500),
                storage,
                bytes,
                &mut rng,
            )?;
            Ok((v.key.clone(), v.with_stamp(0)))
        })
        .collect()
}

/// [`stamped_pod`], the pod changed by `edit` before it is encoded.
#[allow(clippy::too_many_arguments)]
pub fn stamped_pod_with(
    prefix: &str,
    i: usize,
    ns: &str,
    node: &str,
    storage: Storage,
    bytes: usize,
    rng: &mut Rng,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Result<StampedValue, String> {
    let mut p = pod(i, ns, node, rng);
    edit(&mut p);
    let value = encode_padded(&mut p, storage, bytes)?;
    StampedValue::new(pod_key(prefix, &p), value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s1::event::parse_object_stamp;

    #[test]
    fn pods_are_padded_and_stamped_in_place_in_both_formats() {
        let mut rng = Rng::new(1);
        for storage in [Storage::Protobuf, Storage::Json] {
            for target in [0, 4096, 6000] {
                let v = stamped_pod(
                    "/registry",
                    7,
                    "load-ns-1",
                    "node-3",
                    storage,
                    target,
                    &mut rng,
                )
                .expect("builds");
                assert_eq!(v.key, "/registry/pods/load-ns-1/api-5d8f7c9b4-7");
                if target > 0 {
                    let off = v.len() as i64 - target as i64;
                    assert!(off.abs() <= 8, "{storage:?} {target}: {} bytes", v.len());
                }
                let stamped = v.with_stamp(1_700_000_000_000_000_123);
                assert_eq!(stamped.len(), v.len(), "fixed width");
                assert_eq!(
                    parse_object_stamp(&stamped),
                    Ok(Some(1_700_000_000_000_000_123))
                );
                let back = Storage::decode(&stamped).expect("decodes");
                assert_eq!(back["spec"]["nodeName"], "node-3");
                assert_eq!(back["kind"], "Pod");
            }
        }
    }

    #[test]
    fn watch_lines_of_pods_carry_the_annotation_stamp() {
        let mut rng = Rng::new(2);
        let mut p = pod(1, "ns", "node-1", &mut rng);
        annotate(&mut p, STAMP_ANNOTATION, "1700000000000000042");
        p["metadata"]["resourceVersion"] = "77".into();
        let line = serde_json::json!({"type": "MODIFIED", "object": p}).to_string();
        let r = crate::s1::event::parse_watch_line(line.as_bytes()).expect("decodes");
        assert_eq!(
            (r.revision, r.sent_ns),
            (Some(77), Some(1_700_000_000_000_000_042))
        );
    }

    #[test]
    fn the_placeholder_must_be_unique() {
        let e = StampedValue::new("k".into(), b"no stamp".to_vec()).unwrap_err();
        assert!(e.contains("no stamp placeholder"), "{e}");
        let twice = format!("{PLACEHOLDER}-{PLACEHOLDER}");
        assert!(StampedValue::new("k".into(), twice.into_bytes()).is_err());
        let mut v = StampedValue::new("k".into(), format!("a{PLACEHOLDER}b").into_bytes()).unwrap();
        assert_eq!(v.stamped(42).unwrap(), b"a0000000000000000042b");
        assert_eq!(node_name(3), "node-3");
        assert_eq!(namespace_name(0), "load-ns-0");
    }
}
