//! The S1 writer: a fixed set of ConfigMaps (kube-apiserver key layout,
//! ~`object_bytes` of compact JSON each) updated round-robin at a fixed rate,
//! each value stamped with its send time in `data.sentUnixNanos`. Values
//! are stored as that JSON or, like kube-apiserver stores built-in kinds, as
//! Kubernetes protobuf (a little smaller: the size is set on the JSON form).
//!
//! Writes are plain etcd puts, issued on schedule even while earlier ones are
//! in flight (up to [`MAX_IN_FLIGHT`]), so a slow etcd shows up as latency
//! rather than as a lower write rate. Every successful put's revision is
//! kept: it is the list each watcher is checked against.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use super::event::{now_unix_nanos, STAMP_KEY};
use crate::demo::Storage;
use crate::objects::{configmap, encode, key_for, Rng, CONFIGMAPS};

/// Most puts in flight at once.
pub const MAX_IN_FLIGHT: usize = 64;
/// How long a single put may take before it counts as failed.
const PUT_TIMEOUT: Duration = Duration::from_secs(10);
/// Stamp digits (unix nanoseconds have 19 digits until 2286).
const STAMP_DIGITS: usize = 19;

/// One object the writer keeps rewriting.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The etcd key.
    pub key: String,
    value: Value,
    storage: Storage,
}

/// What the writer rewrites: a key and a value it can stamp with the send
/// time (S1's ConfigMaps, the node-scoped scenario's pods).
pub trait Stamped: Send {
    /// The etcd key.
    fn key(&self) -> &str;
    /// The value to put now, stamped with `sent_ns` (unix nanoseconds).
    fn stamped(&mut self, sent_ns: u64) -> Result<Vec<u8>, String>;
}

impl Stamped for Slot {
    fn key(&self) -> &str {
        &self.key
    }

    fn stamped(&mut self, sent_ns: u64) -> Result<Vec<u8>, String> {
        Slot::stamped(self, sent_ns)
    }
}

impl Slot {
    /// The value to put now, stamped with `sent_ns`, in the slot's storage
    /// format.
    pub fn stamped(&mut self, sent_ns: u64) -> Result<Vec<u8>, String> {
        self.value["data"][STAMP_KEY] = Value::String(format!("{sent_ns:0STAMP_DIGITS$}"));
        match self.storage {
            Storage::Json => Ok(encode(&self.value)),
            // Not `Storage::encode`, which falls back to JSON: a run must not
            // silently measure another format than it says.
            Storage::Protobuf => watchd::codec::pbjson::encode_stored(&self.value)
                .map_err(|e| format!("{}: cannot encode as protobuf: {e}", self.key)),
        }
    }
}

/// Builds `count` ConfigMaps `load-<i>` spread round-robin over `namespaces`,
/// each padded so that its stamped JSON is about `object_bytes` long, and
/// stored as `storage` (checked here once per slot, so the write phase
/// cannot fail to encode).
pub fn slots(
    prefix: &str,
    namespaces: &[String],
    count: usize,
    object_bytes: usize,
    storage: Storage,
) -> Result<Vec<Slot>, String> {
    let mut rng = Rng::new(7);
    (0..count)
        .map(|i| {
            let ns = &namespaces[i % namespaces.len()];
            let name = format!("load-{i}");
            let zero = "0".repeat(STAMP_DIGITS);
            let labels = [("app", "loadtest"), ("slot", &*i.to_string())];
            let mut value = configmap(
                ns,
                &name,
                &labels,
                &[("payload", ""), (STAMP_KEY, &zero)],
                &mut rng,
            );
            let bare = encode(&value).len();
            let pad = object_bytes.saturating_sub(bare);
            value["data"]["payload"] = Value::String("x".repeat(pad));
            let mut slot = Slot {
                key: key_for(prefix, CONFIGMAPS, Some(ns), &name),
                value,
                storage,
            };
            slot.stamped(0)?;
            Ok(slot)
        })
        .collect()
}

/// Namespace names `load-ns-<i>`.
pub fn namespace_names(count: usize) -> Vec<String> {
    (0..count.max(1)).map(|i| format!("load-ns-{i}")).collect()
}

/// Creates (or overwrites) every slot once, with a zero stamp; returns the
/// etcd revision after the last put.
pub async fn prefill(client: &Client, slots: &mut [Slot]) -> Result<i64, String> {
    let mut rev = 0;
    for slot in slots.iter_mut() {
        let value = slot.stamped(0)?;
        let resp = tokio::time::timeout(
            PUT_TIMEOUT,
            client.clone().put(slot.key.clone(), value, None),
        )
        .await
        .map_err(|_| format!("prefill put {}: timed out", slot.key))?
        .map_err(|e| format!("prefill put {}: {e}", slot.key))?;
        rev = resp.header().map_or(rev, |h| h.revision());
    }
    Ok(rev)
}

/// What the writer did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WriteStats {
    /// Writes scheduled (rate × duration).
    pub planned: u64,
    /// Puts etcd acknowledged.
    pub ok: u64,
    /// Puts that failed or timed out.
    pub failed: u64,
    /// Scheduled writes never sent: etcd was so slow that the schedule was
    /// abandoned 5 s after its end (the server throttled the writer).
    pub abandoned: u64,
    /// Acknowledged puts per second of the write phase.
    pub achieved_per_sec: f64,
    /// Length of the write phase (last acknowledgement), seconds.
    pub elapsed_s: f64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Revisions of the acknowledged puts, ascending.
    #[serde(skip)]
    pub revisions: Vec<i64>,
    /// (slot index, revision) of every acknowledged put, ascending by
    /// revision: who should have seen which write, when watchers filter.
    #[serde(skip)]
    pub slot_revisions: Vec<(usize, i64)>,
}

/// Puts stamped values round-robin over `slots` at `rate` per second for
/// `duration` (the schedule ends after `duration`; puts in flight are
/// awaited, each bounded by a timeout).
pub async fn run<S: Stamped>(
    client: &Client,
    mut slots: Vec<S>,
    rate: f64,
    duration: Duration,
) -> WriteStats {
    let planned = (rate * duration.as_secs_f64()).round().max(1.0) as u64;
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let gate = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut tasks: JoinSet<Result<(usize, i64), String>> = JoinSet::new();
    let started = Instant::now();
    // Past this point the schedule is abandoned (etcd stalled for long).
    let hard_stop = started + duration + Duration::from_secs(5);
    let mut stats = WriteStats {
        planned,
        ..WriteStats::default()
    };
    let mut results = Vec::with_capacity(planned as usize);
    for i in 0..planned {
        ticker.tick().await;
        if Instant::now() > hard_stop {
            break;
        }
        while let Some(done) = tasks.try_join_next() {
            results.push(done);
        }
        let Ok(permit) = gate.clone().acquire_owned().await else {
            break;
        };
        let n = slots.len();
        let idx = (i as usize) % n;
        let slot = &mut slots[idx];
        let key = slot.key().to_string();
        let value = slot.stamped(now_unix_nanos());
        let mut client = client.clone();
        tasks.spawn(async move {
            let value = value?;
            let put = tokio::time::timeout(PUT_TIMEOUT, client.put(key.clone(), value, None)).await;
            drop(permit);
            match put {
                Ok(Ok(resp)) => resp
                    .header()
                    .map(|h| (idx, h.revision()))
                    .ok_or_else(|| format!("put {key}: no header")),
                Ok(Err(e)) => Err(format!("put {key}: {e}")),
                Err(_) => Err(format!("put {key}: timed out after {PUT_TIMEOUT:?}")),
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        results.push(done);
    }
    stats.elapsed_s = started.elapsed().as_secs_f64();
    for r in results {
        match r.map_err(|e| format!("writer task: {e}")).and_then(|r| r) {
            Ok(slot_rev) => stats.slot_revisions.push(slot_rev),
            Err(e) => {
                stats.failed += 1;
                stats.first_error.get_or_insert(e);
            }
        }
    }
    stats.slot_revisions.sort_unstable_by_key(|&(_, rev)| rev);
    stats.revisions = stats.slot_revisions.iter().map(|&(_, rev)| rev).collect();
    stats.ok = stats.revisions.len() as u64;
    stats.abandoned = planned.saturating_sub(stats.ok + stats.failed);
    stats.achieved_per_sec = stats.ok as f64 / stats.elapsed_s.max(1e-9);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s1::event::parse_object_stamp;

    #[test]
    fn slots_are_sized_stamped_and_spread() {
        let ns = namespace_names(3);
        let mut s = slots("/registry", &ns, 5, 1024, Storage::Json).unwrap();
        assert_eq!(s.len(), 5);
        assert_eq!(s[0].key, "/registry/configmaps/load-ns-0/load-0");
        assert_eq!(s[4].key, "/registry/configmaps/load-ns-1/load-4");
        let v = s[1].stamped(1_700_000_000_000_000_001).unwrap();
        assert!((1020..=1030).contains(&v.len()), "{} bytes", v.len());
        assert!(!v.contains(&b'\n'));
        assert_eq!(parse_object_stamp(&v), Ok(Some(1_700_000_000_000_000_001)));
        let zero = s[1].stamped(0).unwrap();
        assert_eq!(zero.len(), v.len(), "stamps are fixed width");
        // Smaller than the bare object: no padding, still valid.
        let mut tiny = slots("/registry", &ns, 1, 10, Storage::Json).unwrap();
        assert_eq!(
            parse_object_stamp(&tiny[0].stamped(9).unwrap()),
            Ok(Some(9))
        );
        assert_eq!(namespace_names(0), ["load-ns-0"]);
    }

    #[test]
    fn protobuf_slots_hold_the_same_object() {
        let ns = namespace_names(3);
        let mut json = slots("/registry", &ns, 2, 1024, Storage::Json).unwrap();
        let mut pb = slots("/registry", &ns, 2, 1024, Storage::Protobuf).unwrap();
        assert_eq!(pb[1].key, json[1].key);
        let v = pb[1].stamped(1_700_000_000_000_000_001).unwrap();
        assert!(v.starts_with(watchd::codec::envelope::MAGIC));
        assert_eq!(parse_object_stamp(&v), Ok(Some(1_700_000_000_000_000_001)));
        // Padding is computed on the JSON form: protobuf drops the JSON syntax.
        let j = json[1].stamped(1_700_000_000_000_000_001).unwrap();
        assert!(
            v.len() < j.len() && v.len() > 900,
            "{} vs {}",
            v.len(),
            j.len()
        );
        assert_eq!(pb[1].stamped(0).unwrap().len(), v.len(), "fixed width");
        let back = Storage::decode(&v).expect("renders back");
        let j: Value = serde_json::from_slice(&j).unwrap();
        assert_eq!(back["data"], j["data"]);
        assert_eq!(back["metadata"]["labels"], j["metadata"]["labels"]);
    }
}
