//! Fan-out of watch events to many watchers, each measured against the design it
//! replaces, in the same run:
//!
//! - `event_fanout`: `EventLog::append` of one event, then every one of N watchers
//!   (N = 1, 100, 1000) reading it through its cursor (`EventLog::read(seq)`), in
//!   deliveries per second. Baseline: a bounded queue per watcher (`tokio::sync::mpsc`,
//!   `try_send` of an `Arc` of the event to each, then `try_recv` from each), how a
//!   server that pushes events into per-watcher channels delivers them.
//! - `json_frame`: N watchers taking the JSON watch frame of one event through
//!   `encode::event_chunk` (built on first use, then a shared `Bytes` clone) and
//!   holding it, versus building the frame N times (prefix + object JSON + suffix, one
//!   allocation and copy per watcher): the encode-once principle.
//! - `wake`: `WakeIndex::wake` of one namespace key among 1000 namespaces that each have
//!   a watcher waiting, versus `WakeIndex::wake_all`; each includes re-arming the woken
//!   waiters, as watchers do after they drain, so both leave the index as they found it.
//!   (The waiters have no task attached: this is the index's cost, not the scheduler's.)
//!   And 1000 resource-wide watchers woken at once and re-armed: per-watcher waiters
//!   (an atomic waker each) against the tokio `Notify` they replaced.
//!
//! Run: `cargo bench --bench dispatch` (add `-- --quick` for a fast pass). The last lines
//! printed are the ratios baseline ÷ watchd.

mod common;

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::SystemTime;

use bytes::Bytes;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use tokio::sync::futures::Notified;
use tokio::sync::{mpsc, Notify};
use watchd::api::http::body::unchunked;
use watchd::api::http::encode::{event_chunk, frame_prefix, FRAME_SUFFIX};
use watchd::config;
use watchd::dispatch::{WakeHandle, WakeIndex, WakeKey};
use watchd::store::{EventLog, EventType, ObjectRef, Read, WatchEvent};
use watchd::Revision;

use common::Pair;

const WATCHERS: [usize; 3] = [1, 100, 1000];
const NAMESPACES: usize = 1000;

fn new_log() -> EventLog {
    EventLog::new(
        Revision::ZERO,
        1,
        config::DEFAULT_HISTORY_MAX_EVENTS,
        config::DEFAULT_HISTORY_WINDOW,
    )
}

fn bench_fanout(c: &mut Criterion, object: &ObjectRef) {
    let mut g = c.benchmark_group("event_fanout");
    for n in WATCHERS {
        g.throughput(Throughput::Elements(n as u64));

        let log = new_log();
        let mut cursors = vec![0u64; n];
        let mut revision = Revision::ZERO;
        g.bench_with_input(BenchmarkId::new("event_log_cursors", n), &n, |b, _| {
            b.iter(|| {
                revision = revision.next();
                log.append(WatchEvent::new(revision, Some(object.clone()), None));
                for cursor in cursors.iter_mut() {
                    match log.read(*cursor) {
                        Read::Event(ev) => {
                            black_box(&ev);
                            *cursor += 1;
                        }
                        other => panic!("a cursor at the head must read the event: {other:?}"),
                    }
                }
            })
        });

        let (senders, mut receivers): (Vec<_>, Vec<_>) = (0..n)
            .map(|_| mpsc::channel::<Arc<WatchEvent>>(1024))
            .unzip();
        let mut revision = Revision::ZERO;
        g.bench_with_input(
            BenchmarkId::new("mpsc_per_watcher_baseline", n),
            &n,
            |b, _| {
                b.iter(|| {
                    revision = revision.next();
                    let ev = Arc::new(WatchEvent::new(revision, Some(object.clone()), None));
                    for tx in &senders {
                        tx.try_send(ev.clone()).expect("the queue was drained");
                    }
                    for rx in receivers.iter_mut() {
                        black_box(rx.try_recv().expect("the event was sent"));
                    }
                })
            },
        );
    }
    g.finish();
}

/// The frame inside the chunk `encode::event_chunk` builds, built by hand once per watcher.
fn frame_copy(t: EventType, object: &ObjectRef) -> Bytes {
    let prefix = frame_prefix(t);
    let mut b = Vec::with_capacity(prefix.len() + object.json().len() + FRAME_SUFFIX.len());
    b.extend_from_slice(prefix);
    b.extend_from_slice(&object.json());
    b.extend_from_slice(FRAME_SUFFIX);
    Bytes::from(b)
}

fn bench_frames(c: &mut Criterion, object: &ObjectRef) {
    let t = EventType::Modified;
    let sample = WatchEvent::new(Revision(2), Some(object.clone()), Some(object.clone()));
    assert_eq!(
        event_chunk(&sample, t).map(|c| unchunked(&c)),
        Some(frame_copy(t, object))
    );

    let mut g = c.benchmark_group("json_frame");
    for n in WATCHERS {
        g.throughput(Throughput::Elements(n as u64));
        // A fresh event per iteration (its frame is cached in it); creating it is not timed.
        // The N frames are held together, as N watchers' unsent buffers hold them.
        let event = || WatchEvent::new(Revision(2), Some(object.clone()), Some(object.clone()));
        g.bench_with_input(BenchmarkId::new("encode_once_shared", n), &n, |b, &n| {
            b.iter_batched(
                event,
                |ev| {
                    let frames: Vec<Bytes> = (0..n).filter_map(|_| event_chunk(&ev, t)).collect();
                    black_box(frames);
                },
                BatchSize::SmallInput,
            )
        });
        g.bench_with_input(
            BenchmarkId::new("encode_per_watcher_baseline", n),
            &n,
            |b, &n| {
                b.iter_batched(
                    event,
                    |ev| {
                        let frames: Vec<Bytes> = (0..n)
                            .filter_map(|_| ev.object_for(t).map(|o| frame_copy(t, o)))
                            .collect();
                        black_box(frames);
                    },
                    BatchSize::SmallInput,
                )
            },
        );
    }
    g.finish();
}

/// Arms a watcher's waiter, as a watch session does before it drains.
fn arm(h: &WakeHandle) {
    h.waiter().arm(Waker::noop());
}

fn is_woken(h: &WakeHandle) -> bool {
    h.waiter().woken(Waker::noop())
}

/// A tokio `Notify` waiter, as watch sessions waited before per-watcher waiters.
fn notified(n: &Notify) -> Pin<Box<Notified<'_>>> {
    let mut w = Box::pin(n.notified());
    w.as_mut().enable();
    w
}

fn bench_wake(c: &mut Criterion) {
    let index = Arc::new(WakeIndex::default());
    let keys: Vec<WakeKey> = (0..NAMESPACES)
        .map(|i| WakeKey::namespace(&format!("ns-{i:04}")))
        .collect();
    let handles: Vec<WakeHandle> = keys.iter().map(|k| index.subscribe(Some(*k))).collect();
    handles.iter().for_each(arm);
    assert_eq!(index.keys_watched(), NAMESPACES);

    // A targeted wake reaches its namespace's watcher and no other.
    index.wake([&keys[42]]);
    assert!(is_woken(&handles[42]));
    assert!(!is_woken(&handles[43]));
    arm(&handles[42]);

    let mut g = c.benchmark_group("wake");
    let mut next = 0usize;
    g.bench_function("wake_one_namespace", |b| {
        b.iter(|| {
            let i = next % NAMESPACES;
            next += 1;
            index.wake([black_box(&keys[i])]);
            arm(&handles[i]);
        })
    });
    g.bench_function("wake_all_baseline", |b| {
        b.iter(|| {
            index.wake_all();
            handles.iter().for_each(arm);
        })
    });

    // 1000 watchers of the whole resource: one wake of all, each re-armed after, with
    // per-watcher waiters against the tokio Notify they replace (whose waiters enter a
    // list under the Notify's lock on every arming).
    let all = Arc::new(WakeIndex::default());
    let everyone: Vec<WakeHandle> = (0..NAMESPACES).map(|_| all.subscribe(None)).collect();
    everyone.iter().for_each(arm);
    g.throughput(Throughput::Elements(NAMESPACES as u64));
    g.bench_function("resource_wide_1000", |b| {
        b.iter(|| {
            all.wake(std::iter::empty());
            everyone.iter().for_each(arm);
        })
    });
    let notify = Notify::new();
    let mut waiting: Vec<_> = (0..NAMESPACES).map(|_| notified(&notify)).collect();
    g.bench_function("resource_wide_1000_notify_baseline", |b| {
        b.iter(|| {
            notify.notify_waiters();
            for w in waiting.iter_mut() {
                let mut cx = Context::from_waker(Waker::noop());
                assert!(w.as_mut().poll(&mut cx).is_ready());
                *w = notified(&notify);
            }
        })
    });
    g.finish();
}

fn main() {
    let since = SystemTime::now();
    let mut c = common::criterion();
    let object = common::cached_pod("default", "web-7d9f8b6c5-x2x9q", Revision(1));
    bench_fanout(&mut c, &object);
    bench_frames(&mut c, &object);
    bench_wake(&mut c);
    c.final_summary();

    let mut pairs = Vec::new();
    for n in WATCHERS {
        pairs.push(Pair::new(
            format!("append + read by {n} cursors (vs mpsc)"),
            format!("event_fanout/event_log_cursors/{n}"),
            format!("event_fanout/mpsc_per_watcher_baseline/{n}"),
        ));
    }
    for n in WATCHERS {
        pairs.push(Pair::new(
            format!("json frame for {n} watchers (vs N copies)"),
            format!("json_frame/encode_once_shared/{n}"),
            format!("json_frame/encode_per_watcher_baseline/{n}"),
        ));
    }
    pairs.push(Pair::new(
        "wake 1 of 1000 namespaces (vs wake all)",
        "wake/wake_one_namespace",
        "wake/wake_all_baseline",
    ));
    pairs.push(Pair::new(
        "wake and re-arm 1000 resource-wide watchers (vs tokio Notify)",
        "wake/resource_wide_1000",
        "wake/resource_wide_1000_notify_baseline",
    ));
    common::print_ratios("dispatch", since, &pairs);
}
