//! Dispatch shards: wake passes run here, off ingestion, one thread per shard.
//!
//! A watcher's wake-up may do the delivery itself (a plain HTTP/1.1 watch steps its
//! cursor and writes its frame from its waker, `api::http::direct`), so a pass over a
//! set of watchers costs a write per watcher. Run by ingestion itself, that would hold
//! the next etcd response until every watcher was written: under a load the writes
//! cannot keep up with, events would queue in etcd's stream one at a time and every
//! pass would still write one event per watcher. Here ingestion only queues the set
//! (once per shard: a set already queued there is not queued again) and goes on
//! appending events; a pass that starts late finds several events in the log, and
//! each watcher's step takes them all into one frame — under overload the writes batch
//! themselves, and the cost per delivery falls as the load grows.
//!
//! **Shards.** A connection is given a shard when it is accepted (round robin; gRPC
//! calls by their peer's port), and every watch served on it subscribes in that shard
//! ([`in_shard`]), so all streams of one HTTP/2 connection are woken by one thread and
//! the passes of different shards run in parallel, each writing only its own sockets.
//! One thread per core by default (`--dispatch-threads`), at most 64.
//!
//! **Queues.** Each shard has an unbounded `crossbeam` channel of sets: ingestion's
//! send never blocks and never waits for a shard, a shard thread sleeps in `recv` and
//! takes everything queued at once (`try_iter`). A set's per-shard `queued` flag keeps
//! a set in a queue at most once, so a queue holds at most one entry per set and shard,
//! however fast events come. The flag is cleared before the pass starts, so an event
//! appended during the pass queues the set again (the pass may already have written
//! it; then the next pass finds nothing new). Pass counters are `CachePadded`, one per
//! shard, so shards never share a cache line when they count.
//!
//! Without shards ([`Dispatch::inline`]: unit tests and benches that measure a pass
//! itself) the caller wakes the set on its own thread.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use crossbeam_utils::CachePadded;

use super::WaiterSet;

/// Most shards: a set's occupied shards are one 64-bit mask.
pub const MAX_SHARDS: usize = 64;

/// Where wake passes run: on shard threads, or inline on the caller.
#[derive(Clone, Default)]
pub struct Dispatch(Option<Arc<Shards>>);

struct Shards {
    queues: Box<[Sender<Arc<WaiterSet>>]>,
    passes: Arc<[CachePadded<AtomicU64>]>,
}

impl std::fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("Dispatch(inline)"),
            Some(s) => write!(f, "Dispatch({} shards)", s.queues.len()),
        }
    }
}

impl Dispatch {
    /// Passes run on the thread that wakes.
    pub fn inline() -> Dispatch {
        Dispatch(None)
    }

    /// Starts `threads` shard threads (clamped to 1..=[`MAX_SHARDS`]). They end once
    /// every handle of this dispatch (and so every wake index using it) is dropped.
    pub fn start(threads: usize) -> std::io::Result<Dispatch> {
        let n = threads.clamp(1, MAX_SHARDS);
        let passes: Arc<[CachePadded<AtomicU64>]> = (0..n)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect();
        let mut queues = Vec::with_capacity(n);
        for shard in 0..n {
            let (tx, rx) = crossbeam_channel::unbounded();
            let passes = passes.clone();
            std::thread::Builder::new()
                .name(format!("watchd-dispatch-{shard}"))
                .spawn(move || run(shard, &rx, &passes[shard]))?;
            queues.push(tx);
        }
        Ok(Dispatch(Some(Arc::new(Shards {
            queues: queues.into_boxed_slice(),
            passes,
        }))))
    }

    /// The number of shards (1 inline).
    pub fn shards(&self) -> usize {
        self.0.as_ref().map_or(1, |s| s.queues.len())
    }

    /// Passes run so far, per shard (empty inline).
    pub fn passes(&self) -> Vec<u64> {
        self.0.as_ref().map_or_else(Vec::new, |s| {
            s.passes.iter().map(|p| p.load(Ordering::Relaxed)).collect()
        })
    }

    /// The shard of a connection given `hint`.
    pub(super) fn shard_of(&self, hint: usize) -> usize {
        hint % self.shards()
    }

    /// Queues `set`'s pass on `shard`; false inline (the caller wakes it).
    pub(super) fn submit(&self, set: &Arc<WaiterSet>, shard: usize) -> bool {
        let Some(shards) = &self.0 else {
            return false;
        };
        let (Some(queue), Some(queued)) = (shards.queues.get(shard), set.queued.get(shard)) else {
            return false;
        };
        if queued.swap(true, Ordering::AcqRel) {
            return true;
        }
        // Unbounded: never blocks. It fails only once the shard's thread is gone (it
        // never returns while this handle lives), and then the caller wakes the set.
        if queue.send(set.clone()).is_err() {
            queued.store(false, Ordering::Release);
            return false;
        }
        true
    }
}

fn run(shard: usize, queue: &Receiver<Arc<WaiterSet>>, passes: &CachePadded<AtomicU64>) {
    let counter = metrics::counter!("watchd_dispatch_passes_total", "shard" => shard.to_string());
    while let Ok(first) = queue.recv() {
        let mut n = 0;
        for set in std::iter::once(first).chain(queue.try_iter()) {
            if let Some(queued) = set.queued.get(shard) {
                queued.store(false, Ordering::Release);
            }
            set.wake_shard(shard);
            n += 1;
        }
        passes.fetch_add(n, Ordering::Relaxed);
        counter.increment(n);
    }
}

tokio::task_local! {
    /// The dispatch shard hint of the connection a request is served on.
    static SHARD_HINT: usize;
}

/// Runs `f` (a request's handling) as served on a connection with shard `hint`: watches
/// it starts subscribe in that shard.
pub async fn in_shard<F: Future>(hint: usize, f: F) -> F::Output {
    SHARD_HINT.scope(hint, f).await
}

/// A shard hint for a connection known only by its peer's address (gRPC): its port,
/// which differs between a client's connections.
pub fn shard_hint_of(peer: Option<SocketAddr>) -> usize {
    peer.map_or_else(next_hint, |p| usize::from(p.port()))
}

/// The next connection's hint, round robin.
pub fn next_hint() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The hint of the connection being served, or the next round robin one outside any.
pub(super) fn current_hint() -> usize {
    SHARD_HINT.try_with(|h| *h).unwrap_or_else(|_| next_hint())
}

#[cfg(test)]
mod tests {
    use super::super::{WakeIndex, WakeKey};
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;
    use std::task::{Wake, Waker};
    use std::time::{Duration, Instant};

    /// A waker that records the thread that woke it.
    #[derive(Default)]
    struct Threads(Mutex<Vec<String>>);

    impl Wake for Threads {
        fn wake(self: Arc<Self>) {
            let name = std::thread::current().name().unwrap_or("").to_string();
            self.0.lock().unwrap().push(name);
        }
    }

    fn woken_on(t: &Threads) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while t.0.lock().unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        t.0.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_watcher_is_woken_on_its_connections_shard_and_only_there() {
        let dispatch = Dispatch::start(4).unwrap();
        let idx = Arc::new(WakeIndex::new(dispatch.clone()));
        // Connections with hints 1 and 6 (shards 1 and 2); two watchers on the first.
        let a = in_shard(1, async { idx.subscribe(None) }).await;
        let b = in_shard(1, async { idx.subscribe(None) }).await;
        let c = in_shard(6, async { idx.subscribe(None) }).await;
        let wakers: Vec<Arc<Threads>> = [&a, &b, &c]
            .iter()
            .map(|h| {
                let t = Arc::new(Threads::default());
                h.waiter().arm(&Waker::from(t.clone()));
                t
            })
            .collect();
        idx.wake(&HashSet::<WakeKey>::new());
        let on: Vec<Vec<String>> = wakers.iter().map(|t| woken_on(t)).collect();
        assert_eq!(
            on,
            [
                vec!["watchd-dispatch-1".to_string()],
                vec!["watchd-dispatch-1".to_string()],
                vec!["watchd-dispatch-2".to_string()],
            ]
        );
        // One pass on each occupied shard, none on the others.
        let deadline = Instant::now() + Duration::from_secs(10);
        while dispatch.passes() != [0, 1, 1, 0] && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(dispatch.passes(), [0, 1, 1, 0]);
    }

    #[test]
    fn inline_dispatch_wakes_on_the_caller() {
        let idx = Arc::new(WakeIndex::default());
        let h = idx.subscribe(None);
        let t = Arc::new(Threads::default());
        h.waiter().arm(&Waker::from(t.clone()));
        idx.wake_all();
        let me = std::thread::current().name().unwrap_or("").to_string();
        assert_eq!(*t.0.lock().unwrap(), [me]);
        assert!(Dispatch::inline().passes().is_empty());
    }

    #[test]
    fn a_set_is_queued_once_per_shard_until_its_pass_starts() {
        let set = Arc::new(WaiterSet::new(2));
        // A dispatch whose shard threads never run: its queues only fill.
        let (tx0, rx0) = crossbeam_channel::unbounded();
        let (tx1, rx1) = crossbeam_channel::unbounded();
        let d = Dispatch(Some(Arc::new(Shards {
            queues: vec![tx0, tx1].into_boxed_slice(),
            passes: (0..2)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        })));
        for _ in 0..100 {
            assert!(d.submit(&set, 1));
        }
        assert_eq!((rx0.len(), rx1.len()), (0, 1));
        // The pass clears the flag before it wakes: the next event queues it again.
        set.queued[1].store(false, Ordering::Release);
        assert!(d.submit(&set, 1));
        assert_eq!(rx1.len(), 2);
        // A shard the set does not know is refused, for the caller to wake it.
        assert!(!d.submit(&set, 7));
    }

    #[test]
    fn shard_counts_are_clamped_and_hints_are_reduced() {
        let d = Dispatch::start(0).unwrap();
        assert_eq!(d.shards(), 1);
        assert_eq!(d.shard_of(5), 0);
        let d = Dispatch::start(1000).unwrap();
        assert_eq!(d.shards(), MAX_SHARDS);
        assert_eq!(d.shard_of(MAX_SHARDS + 3), 3);
        let peer: SocketAddr = "127.0.0.1:40007".parse().unwrap();
        assert_eq!(shard_hint_of(Some(peer)), 40007);
    }
}
