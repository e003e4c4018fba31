//! The store's write and read paths, with 10 000 pods (100 namespaces × 100) loaded
//! through `Ingestor::load_epoch` into a `Cache` with the daemon's default history sizes.
//!
//! - `store_apply`: `Ingestor::apply` of one single-event revision (an update of an
//!   existing pod), in events per second: decode, snapshot path copy, event-log append,
//!   snapshot-ring trim and wake-up (no watchers), with the event log already full
//!   (steady state: each append evicts the oldest event). Baseline: `codec::decode` of
//!   the same value alone, the floor any cache pays, so the ratio is about the share of
//!   apply's time that is decoding (0.5: apply costs twice the decode).
//! - `store_list_all` / `store_list_namespace`: a list walk over a `Snapshot` (all pods,
//!   and one namespace through `Snapshot::range`) collecting each object's `json.clone()`
//!   (and the `,` separators) into a `BufList`, as `api::http::encode::list_body` does.
//!   Baseline: concatenating the same bytes into one `Vec<u8>` (pre-sized, the most
//!   favourable case for it), what a server that copies objects into its response does.
//!
//! Run: `cargo bench --bench store` (add `-- --quick` for a fast pass). The last lines
//! printed are the ratios baseline ÷ watchd.

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Buf;
use criterion::{Criterion, Throughput};
use watchd::api::http::body::BufList;
use watchd::codec;
use watchd::config;
use watchd::store::ingest::{Ingestor, KvChange};
use watchd::store::{Cache, Snapshot, StoreConfig};
use watchd::Revision;

use common::Pair;

const NAMESPACES: usize = 100;
const PODS_PER_NAMESPACE: usize = 100;
/// The namespace listed alone.
const LISTED_NAMESPACE: &str = "ns-042";
/// Pods updated in turn by the apply benchmark (their values are built beforehand).
const UPDATED_PODS: usize = 1000;

fn names() -> impl Iterator<Item = (String, String)> {
    (0..NAMESPACES).flat_map(|n| {
        (0..PODS_PER_NAMESPACE).map(move |p| (format!("ns-{n:03}"), format!("web-{p:05}")))
    })
}

fn key(ns: &str, name: &str) -> Vec<u8> {
    format!("/registry/pods/{ns}/{name}").into_bytes()
}

/// A cache holding every pod at revisions 1..=10 000, and its ingestor.
fn loaded() -> (Arc<Cache>, Ingestor) {
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
    let kvs: Vec<(Vec<u8>, Vec<u8>, Revision)> = names()
        .enumerate()
        .map(|(i, (ns, name))| {
            (
                key(&ns, &name),
                common::pod(&ns, &name, 1),
                Revision(i as i64 + 1),
            )
        })
        .collect();
    let last = Revision(kvs.len() as i64);
    let mut ingestor = Ingestor::new(cache.clone());
    ingestor.load_epoch(last, kvs);
    // As the sources do once loaded: from here on every revision keeps its snapshot.
    cache.set_synced(true);
    let pods = pods_snapshot(&cache).objects.len();
    assert_eq!(pods, NAMESPACES * PODS_PER_NAMESPACE, "every pod is loaded");
    (cache, ingestor)
}

fn pods_snapshot(cache: &Cache) -> Arc<Snapshot> {
    cache
        .resources()
        .by_dir("pods")
        .next()
        .expect("pods are a built-in resource")
        .snapshot()
}

fn bench_apply(c: &mut Criterion, cache: &Arc<Cache>, ingestor: &mut Ingestor) {
    // Updates of the first UPDATED_PODS pods, taken in turn; each apply is a new revision.
    let updates: Vec<(Vec<u8>, Vec<u8>)> = names()
        .take(UPDATED_PODS)
        .map(|(ns, name)| (key(&ns, &name), common::pod(&ns, &name, 2)))
        .collect();
    let mut next = 0usize;
    let mut revision = cache.progress().applied();
    // Both benchmarks time making the KvChange (copying a 30-byte key and a 2 KiB value,
    // as the etcd client does), so its small cost is on both sides of the ratio: batching
    // inputs outside the timing instead left thousands of cold 2 KiB buffers between
    // iterations and made both sides allocator-bound.
    let mut change = move || {
        let (k, v) = &updates[next % updates.len()];
        next += 1;
        revision = revision.next();
        KvChange {
            key: k.clone(),
            value: Some(v.clone()),
            revision,
            prev_value: None,
            prev_revision: Revision::ZERO,
        }
    };

    // Fill the event log first, so that what is measured is the steady state (each append
    // evicts the oldest event) rather than the log's first-fill page faults.
    for _ in 0..config::DEFAULT_HISTORY_MAX_EVENTS {
        ingestor.apply(vec![change()]);
    }
    let log = cache
        .resources()
        .by_dir("pods")
        .next()
        .map(|s| s.log().len());
    assert_eq!(log, Some(config::DEFAULT_HISTORY_MAX_EVENTS as u64));

    let mut g = c.benchmark_group("store_apply");
    g.throughput(Throughput::Elements(1));
    g.bench_function("ingestor_apply_1_event", |b| {
        b.iter(|| ingestor.apply(vec![black_box(change())]))
    });
    let fields = common::builtin("pods").fields;
    g.bench_function("decode_only_baseline", |b| {
        b.iter(|| {
            let ch = black_box(change());
            let value = ch.value.as_deref().unwrap_or_default();
            codec::decode("ns/pod", value, ch.revision, &fields)
        })
    });
    g.finish();

    // The applies did land: the pods updated last carry their new revision.
    let applied = cache.progress().applied();
    let pods = pods_snapshot(cache);
    assert!(applied > Revision((NAMESPACES * PODS_PER_NAMESPACE) as i64));
    assert_eq!(pods.revision, applied);
    assert_eq!(pods.objects.len(), NAMESPACES * PODS_PER_NAMESPACE);
}

/// What `encode::list_body` does with the objects: shared segments, separated by commas.
fn list_into_buflist(snapshot: &Snapshot, ns: Option<&str>) -> BufList {
    let mut items = BufList::new();
    for (i, obj) in snapshot.range(ns, None).enumerate() {
        if i > 0 {
            items.push_static(b",");
        }
        items.push(obj.json());
    }
    items
}

/// What a server that copies each object into its response buffer does.
fn list_into_vec(snapshot: &Snapshot, ns: Option<&str>, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    for (i, obj) in snapshot.range(ns, None).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&obj.json());
    }
    out
}

fn bench_list(c: &mut Criterion, cache: &Cache) {
    let snapshot = pods_snapshot(cache);
    for (group, ns) in [
        ("store_list_all", None),
        ("store_list_namespace", Some(LISTED_NAMESPACE)),
    ] {
        let bytes = list_into_vec(&snapshot, ns, 0).len();
        assert_eq!(list_into_buflist(&snapshot, ns).remaining(), bytes);
        let objects = snapshot.range(ns, None).count();
        println!("{group}: {objects} objects, {bytes} bytes");

        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function("buflist_json_clone", |b| {
            b.iter(|| list_into_buflist(black_box(&snapshot), black_box(ns)))
        });
        g.bench_function("vec_copy_baseline", |b| {
            b.iter(|| list_into_vec(black_box(&snapshot), black_box(ns), bytes))
        });
        g.finish();
    }
}

fn main() {
    let since = SystemTime::now();
    let mut c = common::criterion();
    let (cache, mut ingestor) = loaded();
    bench_list(&mut c, &cache);
    bench_apply(&mut c, &cache, &mut ingestor);
    c.final_summary();
    common::print_ratios(
        "store",
        since,
        &[
            Pair::new(
                "apply 1-event revision (vs decode alone)",
                "store_apply/ingestor_apply_1_event",
                "store_apply/decode_only_baseline",
            ),
            Pair::new(
                "list 10 000 pods (BufList vs Vec copy)",
                "store_list_all/buflist_json_clone",
                "store_list_all/vec_copy_baseline",
            ),
            Pair::new(
                "list one namespace (BufList vs Vec copy)",
                "store_list_namespace/buflist_json_clone",
                "store_list_namespace/vec_copy_baseline",
            ),
        ],
    );
}
