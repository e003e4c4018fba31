//! Fan-out of watch events to many watchers, each measured against the design it
//! replaces, in the same run:
//!
//! - `event_fanout`: `EventLog::append` of one event, then every one of N watchers
//!   (N = 1, 100, 1000) reading it through its cursor (`EventLog::read(seq)`), in
//!   deliveries per second. Baseline: a bounded queue per watcher (`tokio::sync::mpsc`,
//!   `try_send` of an `Arc` of the event to each, then `try_recv` from each), how a
//!   server that pushes events into per-watcher channels delivers them.
//! - `json_frame`: N watchers taking the JSON watch frame of one event through
//!   `WatchEvent::json_frame` (built on first use, then a shared `Bytes` clone) and
//!   holding it, versus building the frame N times (prefix + object JSON + suffix, one
//!   allocation and copy per watcher): the encode-once principle.
//! - `wake`: `WakeIndex::wake` of one namespace key among 1000 namespaces that each have
//!   a watcher waiting, versus `WakeIndex::wake_all`; each includes re-arming the woken
//!   waiters, as watchers do after they drain, so both leave the index as they found it.
//!   (The waiters have no task attached: this is the index's cost, not the scheduler's.)
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
use tokio::sync::mpsc;
use watchd::config;
use watchd::dispatch::{WakeHandle, WakeIndex, WakeKey};
use watchd::store::event_log::JSON_FRAME_SUFFIX;
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

/// The frame `WatchEvent::json_frame` builds, built by hand once per watcher.
fn frame_copy(t: EventType, object: &ObjectRef) -> Bytes {
    let prefix = t.json_frame_prefix();
    let mut b = Vec::with_capacity(prefix.len() + object.json().len() + JSON_FRAME_SUFFIX.len());
    b.extend_from_slice(prefix);
    b.extend_from_slice(object.json());
    b.extend_from_slice(JSON_FRAME_SUFFIX);
    Bytes::from(b)
}

fn bench_frames(c: &mut Criterion, object: &ObjectRef) {
    let t = EventType::Modified;
    let sample = WatchEvent::new(Revision(2), Some(object.clone()), Some(object.clone()));
    assert_eq!(sample.json_frame(t), Some(frame_copy(t, object)));

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
                    let frames: Vec<Bytes> = (0..n).filter_map(|_| ev.json_frame(t)).collect();
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

/// A waiter registered on a watcher's notifier, as a watch session waits between drains.
fn armed(h: &WakeHandle) -> Pin<Box<Notified<'_>>> {
    let mut n = Box::pin(h.notify().notified());
    n.as_mut().enable();
    n
}

fn is_woken(n: &mut Pin<Box<Notified<'_>>>) -> bool {
    n.as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_ready()
}

fn bench_wake(c: &mut Criterion) {
    let index = Arc::new(WakeIndex::default());
    let keys: Vec<WakeKey> = (0..NAMESPACES)
        .map(|i| WakeKey::Namespace(Box::from(format!("ns-{i:04}"))))
        .collect();
    let handles: Vec<WakeHandle> = keys
        .iter()
        .map(|k| index.subscribe(Some(k.clone())))
        .collect();
    let mut waiters: Vec<_> = handles.iter().map(armed).collect();
    assert_eq!(index.keys_watched(), NAMESPACES);

    // A targeted wake reaches its namespace's watcher and no other.
    index.wake([&keys[42]]);
    assert!(is_woken(&mut waiters[42]));
    assert!(!is_woken(&mut waiters[43]));
    waiters[42] = armed(&handles[42]);

    let mut g = c.benchmark_group("wake");
    let mut next = 0usize;
    g.bench_function("wake_one_namespace", |b| {
        b.iter(|| {
            let i = next % NAMESPACES;
            next += 1;
            index.wake([black_box(&keys[i])]);
            waiters[i] = armed(&handles[i]);
        })
    });
    g.bench_function("wake_all_baseline", |b| {
        b.iter(|| {
            index.wake_all();
            for (w, h) in waiters.iter_mut().zip(&handles) {
                *w = armed(h);
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
    common::print_ratios("dispatch", since, &pairs);
}
