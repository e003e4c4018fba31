//! Ingestion's CPU per event, without etcd: `Ingestor::apply` of protobuf pod updates
//! (as kube-apiserver stores pods) into a cache of 50 000 pods with the daemon's default
//! history sizes, measured as the applying thread's own CPU time (so other processes on
//! a busy machine do not count), one event per revision and 100 per revision (an etcd
//! transaction of 100 puts).
//!
//! Run: `cargo run --release --example ingest_cpu [ROUNDS]`. Each round applies 20 000
//! events of each shape; the least CPU per event over the rounds is printed, with the
//! same for `codec::decode` of the values alone (what any cache pays). S6 of the load
//! generator measures the same path end to end through etcd.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::json;
use watchd::codec;
use watchd::config;
use watchd::registry::builtin;
use watchd::store::ingest::{Ingestor, KvChange};
use watchd::store::{Cache, StoreConfig};
use watchd::Revision;

/// Counts heap allocations, to report allocations per event beside the CPU.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PODS: usize = 50_000;
const EVENTS: usize = 20_000;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn pod(i: usize, generation: usize) -> (Vec<u8>, Vec<u8>) {
    let (ns, name) = (format!("ns-{:03}", i % 100), format!("web-{i:06}"));
    let value = json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": ns, "generateName": "web-",
            "uid": format!("4b1e0c7a-{i:08}-4d3e-9f6a-1c2b3a4d5e6f"),
            "creationTimestamp": "2026-11-27T10:00:00Z",
            "labels": {"app": "web", "tier": "frontend", "pod-template-hash": "7d9f8b6c5"},
            "annotations": {"generation": generation.to_string()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-7d9f8b6c5", "uid": "9a8b7c6d-0000-4d3e-9f6a-1c2b3a4d5e6f",
                "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "nodeName": format!("node-{:04}", i % 1000),
            "serviceAccountName": "default", "schedulerName": "default-scheduler",
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "web", "image": "registry.k8s.io/nginx:1.27",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "env": [{"name": "MODE", "value": "production"}],
                "imagePullPolicy": "IfNotPresent"}]
        },
        "status": {
            "phase": "Running", "podIP": format!("10.{}.{}.{}", i / 65536 % 256, i / 256 % 256, i % 256),
            "hostIP": "192.168.0.1", "startTime": "2026-11-27T10:00:01Z",
            "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-11-27T10:00:05Z"}]
        }
    });
    let stored = codec::pbjson::encode_stored(&value).expect("the pod encodes as protobuf");
    (format!("/registry/pods/{ns}/{name}").into_bytes(), stored)
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let cache = Cache::new(
        "/registry",
        StoreConfig {
            history_window: config::DEFAULT_HISTORY_WINDOW,
            max_events: config::DEFAULT_HISTORY_MAX_EVENTS,
            snapshot_ring: config::DEFAULT_SNAPSHOT_RING,
            dispatch: watchd::dispatch::Dispatch::inline(),
            index_fields: Default::default(),
        },
    );
    let kvs: Vec<(Vec<u8>, Vec<u8>, Revision)> = (0..PODS)
        .map(|i| {
            let (k, v) = pod(i, 1);
            (k, v, Revision(i as i64 + 1))
        })
        .collect();
    println!("pod: {} bytes stored", kvs[0].1.len());
    let mut ingestor = Ingestor::new(Arc::clone(&cache));
    ingestor.load_epoch(Revision(PODS as i64), kvs);
    // As the sources do once loaded: from here on every revision keeps its snapshot.
    cache.set_synced(true);
    // Updated values, spread over the cache as a busy cluster's are.
    let updates: Vec<(Vec<u8>, Vec<u8>)> = (0..4096).map(|j| pod(j * 12 % PODS, 2)).collect();
    let fields = builtin::builtin_resources()
        .into_iter()
        .find(|r| r.resource == "pods")
        .expect("pods are built in")
        .fields;
    let mut revision = cache.progress().applied();
    let mut next = 0usize;
    let mut batch = |n: usize| -> Vec<KvChange> {
        revision = revision.next();
        (0..n)
            .map(|_| {
                let (k, v) = &updates[next % updates.len()];
                next += 1;
                KvChange {
                    key: k.clone(),
                    value: Some(v.clone()),
                    revision,
                    prev_value: None,
                    prev_revision: Revision::ZERO,
                }
            })
            .collect()
    };
    // Fill the event log: the steady state evicts the oldest event on each append.
    for _ in 0..config::DEFAULT_HISTORY_MAX_EVENTS / 100 {
        ingestor.apply(batch(100));
    }
    let (mut best1, mut best100, mut best_decode) = (f64::MAX, f64::MAX, f64::MAX);
    for round in 0..rounds {
        let batches: Vec<Vec<KvChange>> = (0..EVENTS).map(|_| batch(1)).collect();
        let (t, a) = (thread_cpu_ns(), ALLOCATIONS.load(Ordering::Relaxed));
        for b in batches {
            ingestor.apply(b);
        }
        let one = (thread_cpu_ns() - t) as f64 / EVENTS as f64 / 1000.0;
        let one_allocs = (ALLOCATIONS.load(Ordering::Relaxed) - a) as f64 / EVENTS as f64;
        let batches: Vec<Vec<KvChange>> = (0..EVENTS / 100).map(|_| batch(100)).collect();
        let (t, a) = (thread_cpu_ns(), ALLOCATIONS.load(Ordering::Relaxed));
        for b in batches {
            ingestor.apply(b);
        }
        let hundred = (thread_cpu_ns() - t) as f64 / EVENTS as f64 / 1000.0;
        let hundred_allocs = (ALLOCATIONS.load(Ordering::Relaxed) - a) as f64 / EVENTS as f64;
        let (t, a) = (thread_cpu_ns(), ALLOCATIONS.load(Ordering::Relaxed));
        for (_, v) in updates.iter().cycle().take(EVENTS) {
            black_box(
                codec::decode("ns/pod", black_box(v), Revision(7), &fields).expect("decodes"),
            );
        }
        let decode = (thread_cpu_ns() - t) as f64 / EVENTS as f64 / 1000.0;
        let decode_allocs = (ALLOCATIONS.load(Ordering::Relaxed) - a) as f64 / EVENTS as f64;
        println!(
            "round {round}: CPU-µs per event: 1 per revision {one:.2}, 100 per revision {hundred:.2}, decode alone {decode:.2}; \
             allocations per event: {one_allocs:.1}, {hundred_allocs:.1}, {decode_allocs:.1}"
        );
        best1 = best1.min(one);
        best100 = best100.min(hundred);
        best_decode = best_decode.min(decode);
    }
    println!(
        "best: 1 per revision {best1:.2} µs ({:.0} events per CPU-second), 100 per revision {best100:.2} µs ({:.0}/s), decode alone {best_decode:.2} µs",
        1e6 / best1,
        1e6 / best100
    );
}
