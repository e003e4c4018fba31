//! The dispatch thread: wake passes run here, off the ingestion thread.
//!
//! A watcher's wake-up may do the delivery itself (a plain HTTP/1.1 watch steps its
//! cursor and writes its frame from its waker, `api::http::direct`), so a pass over a
//! set of watchers costs a write per watcher. Run by ingestion itself, that would hold
//! the next etcd response until every watcher was written: under a load the writes
//! cannot keep up with, events would queue in etcd's stream one at a time and every
//! pass would still write one event per watcher. Here ingestion only queues the set
//! (once: a set already queued is not queued again) and goes on appending events; a
//! pass that starts late finds several events in the log, and each watcher's step takes
//! them all into one frame — under overload the writes batch themselves, and the cost
//! per delivery falls as the load grows.
//!
//! A set's `queued` flag is cleared before its pass starts, so an event appended during
//! the pass queues the set again (the pass may already have written it; then the next
//! pass finds nothing new). Without the thread (tests; [`start`] not called) the caller
//! wakes the set itself.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use super::WaiterSet;

/// Sets waiting for their pass.
struct Queue {
    pending: Mutex<Vec<Arc<WaiterSet>>>,
    ready: Condvar,
}

static QUEUE: OnceLock<Arc<Queue>> = OnceLock::new();

/// Starts the dispatch thread (once per process); false if it cannot be started (then
/// wake passes run on ingestion, as without it).
pub fn start() -> bool {
    if QUEUE.get().is_some() {
        return true;
    }
    let q = Arc::new(Queue {
        pending: Mutex::new(Vec::new()),
        ready: Condvar::new(),
    });
    let worker = q.clone();
    let spawned = std::thread::Builder::new()
        .name("watchd-dispatch".into())
        .spawn(move || run(&worker));
    match spawned {
        // Only a running thread's queue is published: nothing is queued for no one.
        Ok(_) => QUEUE.set(q).is_ok() || QUEUE.get().is_some(),
        Err(e) => {
            tracing::error!(error = %e, "cannot start the dispatch thread; wake passes run on ingestion");
            false
        }
    }
}

/// Whether passes run on the dispatch thread.
pub fn running() -> bool {
    QUEUE.get().is_some()
}

/// Queues `set`'s pass; false without the dispatch thread (the caller wakes it).
pub(super) fn submit(set: &Arc<WaiterSet>) -> bool {
    let Some(q) = QUEUE.get() else {
        return false;
    };
    if set.queued.swap(true, Ordering::AcqRel) {
        return true;
    }
    let mut pending = q.pending.lock().unwrap_or_else(|e| e.into_inner());
    pending.push(set.clone());
    drop(pending);
    q.ready.notify_one();
    true
}

fn run(q: &Queue) {
    let mut batch = Vec::new();
    loop {
        {
            let mut pending = q.pending.lock().unwrap_or_else(|e| e.into_inner());
            while pending.is_empty() {
                pending = q.ready.wait(pending).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::swap(&mut batch, &mut *pending);
        }
        for set in batch.drain(..) {
            set.queued.store(false, Ordering::Release);
            set.wake_now();
        }
    }
}
