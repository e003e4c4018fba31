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
//! ([`in_shard`]), so all streams of one HTTP/2 connection are woken by one pass and a
//! set's waiters are split into independent per-shard passes. There are as many shards
//! as dispatch threads (`--dispatch-threads`, one per core by default, at most 64).
//!
//! **Threads that follow the load.** Shard `s` runs on thread `s % k`, where `k`, the
//! active threads, follows the load: measured on 16 cores, spreading passes over every
//! thread when there is little to do costs 1.6–2× the CPU per delivery of one thread
//! (each event then wakes many threads, and tokio's workers more often), while under
//! overload one thread is the ceiling. So each thread counts the time its passes take,
//! and at most every [`ADJUST_EVERY`] the busy time of the last window decides `k`: it
//! doubles while the active threads are more than [`GROW_ABOVE`] busy on average and
//! halves when they are under [`SHRINK_BELOW`]. A pass may so run on another thread
//! than its shard's last one; nothing depends on which thread runs it (a direct write
//! takes its watch's lock, a task waker is any thread's), only that its set is queued
//! once per shard.
//!
//! **Queues.** Each thread has an unbounded `crossbeam` channel of (set, shard) passes:
//! ingestion's send never blocks and never waits for a thread, a thread sleeps in
//! `recv` and takes everything queued at once (`try_iter`). A set's per-shard `queued`
//! flag keeps a set in the queues at most once per shard, however fast events come. The
//! flag is cleared before the pass starts, so an event appended during the pass queues
//! the set again (the pass may already have written it; then the next pass finds nothing
//! new). Counters are `CachePadded`, one per thread, so threads never share a cache line
//! when they count.
//!
//! Without shards ([`Dispatch::inline`]: unit tests and benches that measure a pass
//! itself) the caller wakes the set on its own thread.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use crossbeam_utils::CachePadded;

use super::WaiterSet;

/// Most shards: a set's occupied shards are one 64-bit mask.
pub const MAX_SHARDS: usize = 64;

/// Most passes a thread takes from its queue before it wakes them and looks at the load.
pub const MAX_BATCH: usize = 1024;

/// How often the active threads are reconsidered (at most; only while passes run).
pub const ADJUST_EVERY: Duration = Duration::from_millis(100);
/// Busy share of the active threads above which their number doubles.
pub const GROW_ABOVE: f64 = 0.7;
/// Busy share of the active threads under which their number halves.
pub const SHRINK_BELOW: f64 = 0.25;

/// Where wake passes run: on dispatch threads, or inline on the caller.
#[derive(Clone, Default)]
pub struct Dispatch(Option<Arc<Shards>>);

/// A pass to run: a set's waiters of one shard.
type Pass = (Arc<WaiterSet>, usize);

struct Shards {
    queues: Box<[Sender<Pass>]>,
    /// Per thread: passes run, and nanoseconds spent running them.
    passes: Box<[CachePadded<AtomicU64>]>,
    busy_ns: Box<[CachePadded<AtomicU64>]>,
    /// Threads passes are dealt to now (1..=threads).
    active: CachePadded<AtomicUsize>,
    /// When `active` was last reconsidered, and the busy total then.
    window: Mutex<(Instant, u64)>,
    /// Whether `active` follows the load (false: every thread, always).
    adaptive: bool,
}

impl std::fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("Dispatch(inline)"),
            Some(s) => write!(f, "Dispatch({} shards)", s.queues.len()),
        }
    }
}

/// The active threads for the next window: `load` is the busy time of the last one in
/// threads (busy seconds per second), `k` the active threads during it, `n` all.
pub fn next_active(k: usize, n: usize, load: f64) -> usize {
    let k = k.clamp(1, n);
    if load > GROW_ABOVE * k as f64 {
        let needed = (load / GROW_ABOVE).ceil() as usize;
        (k * 2).max(needed).min(n)
    } else if load < SHRINK_BELOW * k as f64 && k > 1 {
        (k / 2).max(1)
    } else {
        k
    }
}

impl Dispatch {
    /// Passes run on the thread that wakes.
    pub fn inline() -> Dispatch {
        Dispatch(None)
    }

    /// Starts `threads` dispatch threads (clamped to 1..=[`MAX_SHARDS`]), as many
    /// shards, with one thread active until the load asks for more. They end once every
    /// handle of this dispatch (and so every wake index using it) is dropped.
    pub fn start(threads: usize) -> std::io::Result<Dispatch> {
        Dispatch::spawn(threads, true)
    }

    /// As [`Dispatch::start`], every thread active always (tests that need to know which
    /// thread runs a shard).
    #[cfg(test)]
    pub fn start_fixed(threads: usize) -> std::io::Result<Dispatch> {
        Dispatch::spawn(threads, false)
    }

    fn spawn(threads: usize, adaptive: bool) -> std::io::Result<Dispatch> {
        let n = threads.clamp(1, MAX_SHARDS);
        let counters = || -> Box<[CachePadded<AtomicU64>]> {
            (0..n)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect()
        };
        let mut receivers = Vec::with_capacity(n);
        let mut queues = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = crossbeam_channel::unbounded();
            queues.push(tx);
            receivers.push(rx);
        }
        let shards = Arc::new(Shards {
            queues: queues.into_boxed_slice(),
            passes: counters(),
            busy_ns: counters(),
            active: CachePadded::new(AtomicUsize::new(if adaptive { 1 } else { n })),
            window: Mutex::new((Instant::now(), 0)),
            adaptive,
        });
        metrics::gauge!("watchd_dispatch_threads_active").set(shards.active() as f64);
        for (thread, rx) in receivers.into_iter().enumerate() {
            // The thread holds the counters, not the senders: it ends when they go.
            let shards = Arc::downgrade(&shards);
            std::thread::Builder::new()
                .name(format!("watchd-dispatch-{thread}"))
                .spawn(move || run(thread, &rx, &shards))?;
        }
        Ok(Dispatch(Some(shards)))
    }

    /// The number of shards (1 inline).
    pub fn shards(&self) -> usize {
        self.0.as_ref().map_or(1, |s| s.queues.len())
    }

    /// The threads passes are dealt to now (0 inline).
    pub fn active(&self) -> usize {
        self.0.as_ref().map_or(0, |s| s.active())
    }

    /// Passes run so far, per thread (empty inline).
    pub fn passes(&self) -> Vec<u64> {
        self.0.as_ref().map_or_else(Vec::new, |s| {
            s.passes.iter().map(|p| p.load(Ordering::Relaxed)).collect()
        })
    }

    /// The shard of a connection given `hint`.
    pub(super) fn shard_of(&self, hint: usize) -> usize {
        hint % self.shards()
    }

    /// Queues `set`'s pass of `shard`; false inline (the caller wakes it).
    pub(super) fn submit(&self, set: &Arc<WaiterSet>, shard: usize) -> bool {
        let Some(shards) = &self.0 else {
            return false;
        };
        let Some(queued) = set.queued.get(shard) else {
            return false;
        };
        if queued.swap(true, Ordering::AcqRel) {
            return true;
        }
        let thread = shard % shards.active();
        // Unbounded: never blocks. It fails only once the thread is gone (it never
        // returns while this handle lives), and then the caller wakes the set.
        if shards.queues[thread].send((set.clone(), shard)).is_err() {
            queued.store(false, Ordering::Release);
            return false;
        }
        true
    }
}

impl Shards {
    fn active(&self) -> usize {
        self.active
            .load(Ordering::Relaxed)
            .clamp(1, self.queues.len())
    }

    /// Reconsiders the active threads once per [`ADJUST_EVERY`] (by whichever thread
    /// gets there first), from the busy time of the window that ended.
    fn adjust(&self, now: Instant) {
        if !self.adaptive {
            return;
        }
        let Ok(mut window) = self.window.try_lock() else {
            return;
        };
        let elapsed = now.saturating_duration_since(window.0);
        if elapsed < ADJUST_EVERY {
            return;
        }
        let busy: u64 = self.busy_ns.iter().map(|b| b.load(Ordering::Relaxed)).sum();
        let load = busy.saturating_sub(window.1) as f64 / elapsed.as_nanos() as f64;
        *window = (now, busy);
        let k = self.active();
        let next = next_active(k, self.queues.len(), load);
        if next != k {
            self.active.store(next, Ordering::Relaxed);
            metrics::gauge!("watchd_dispatch_threads_active").set(next as f64);
            tracing::debug!(from = k, to = next, load, "dispatch threads active");
        }
    }
}

fn run(thread: usize, queue: &Receiver<Pass>, shards: &std::sync::Weak<Shards>) {
    let counter = metrics::counter!("watchd_dispatch_passes_total", "thread" => thread.to_string());
    // Watchers woken: with the passes, how well the wake index keeps wakes to the
    // watchers an event may concern.
    let wakes = metrics::counter!("watchd_dispatch_wakes_total", "thread" => thread.to_string());
    let mut batch: Vec<Vec<Arc<super::Waiter>>> = Vec::new();
    while let Ok(first) = queue.recv() {
        let Some(shards) = shards.upgrade() else {
            return;
        };
        let started = Instant::now();
        let n = take_batch(first, queue, &mut batch);
        super::pass::run_pass(|| wake_interleaved(&batch));
        wakes.increment(batch.iter().map(|p| p.len() as u64).sum());
        let now = Instant::now();
        let busy = now.saturating_duration_since(started).as_nanos() as u64;
        shards.busy_ns[thread].fetch_add(busy, Ordering::Relaxed);
        shards.passes[thread].fetch_add(n, Ordering::Relaxed);
        counter.increment(n);
        shards.adjust(now);
    }
}

/// Takes `first` and what else is queued, [`MAX_BATCH`] passes at most (under overload
/// the queue refills as fast as it is read, and a batch that never ended would never let
/// the threads be reconsidered), into `batch`: each pass's waiters, its set's flag
/// cleared. Returns how many.
fn take_batch(
    first: Pass,
    queue: &Receiver<Pass>,
    batch: &mut Vec<Vec<Arc<super::Waiter>>>,
) -> u64 {
    batch.clear();
    let more = queue.try_iter().take(MAX_BATCH - 1);
    for (set, shard) in std::iter::once(first).chain(more) {
        if let Some(queued) = set.queued.get(shard) {
            queued.store(false, Ordering::Release);
        }
        batch.push(set.waiters_of(shard));
    }
    batch.len() as u64
}

/// Wakes the waiters of a batch of passes, one of each pass in turn: a pass may hold the
/// streams of one connection whose streams are tasks (HTTP/1.1 over TLS), and woken one after
/// the other they would be polled at once by every tokio worker and contend for their
/// connection's HTTP/2 state. Interleaved, consecutive wakes concern different
/// connections (measured on 16 cores when HTTP/2 watches were tasks too: 1.8× the CPU
/// per delivery with a connection's streams woken together). HTTP/2 and gRPC watches are
/// stepped here now, and their connections woken at the end of the batch (`super::pass`).
fn wake_interleaved(passes: &[Vec<Arc<super::Waiter>>]) {
    let longest = passes.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        for pass in passes {
            if let Some(w) = pass.get(i) {
                w.wake();
            }
        }
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

    /// A waker that records the thread that woke it, after `work` of busy time.
    #[derive(Default)]
    struct Threads {
        woken_on: Mutex<Vec<String>>,
        work: Duration,
    }

    impl Wake for Threads {
        fn wake(self: Arc<Self>) {
            std::thread::sleep(self.work);
            let name = std::thread::current().name().unwrap_or("").to_string();
            self.woken_on.lock().unwrap().push(name);
        }
    }

    fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "{what}: not within 10 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[tokio::test]
    async fn a_watcher_is_woken_on_its_connections_shard_and_only_there() {
        let dispatch = Dispatch::start_fixed(4).unwrap();
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
        wait_until("every watcher woken", || {
            wakers
                .iter()
                .all(|t| !t.woken_on.lock().unwrap().is_empty())
        });
        let on: Vec<Vec<String>> = wakers
            .iter()
            .map(|t| t.woken_on.lock().unwrap().clone())
            .collect();
        assert_eq!(
            on,
            [
                vec!["watchd-dispatch-1".to_string()],
                vec!["watchd-dispatch-1".to_string()],
                vec!["watchd-dispatch-2".to_string()],
            ]
        );
        // One pass on each occupied shard's thread, none on the others.
        wait_until("the passes counted", || dispatch.passes() == [0, 1, 1, 0]);
    }

    #[test]
    fn inline_dispatch_wakes_on_the_caller() {
        let idx = Arc::new(WakeIndex::default());
        let h = idx.subscribe(None);
        let t = Arc::new(Threads::default());
        h.waiter().arm(&Waker::from(t.clone()));
        idx.wake_all();
        let me = std::thread::current().name().unwrap_or("").to_string();
        assert_eq!(*t.woken_on.lock().unwrap(), [me]);
        assert!(Dispatch::inline().passes().is_empty());
        assert_eq!(Dispatch::inline().active(), 0);
    }

    #[test]
    fn a_set_is_queued_once_per_shard_until_its_pass_starts() {
        let set = Arc::new(WaiterSet::new(2));
        // A dispatch whose threads never run: its queues only fill.
        let (tx0, rx0) = crossbeam_channel::unbounded();
        let (tx1, rx1) = crossbeam_channel::unbounded();
        let counters = || {
            (0..2)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect()
        };
        let d = Dispatch(Some(Arc::new(Shards {
            queues: vec![tx0, tx1].into_boxed_slice(),
            passes: counters(),
            busy_ns: counters(),
            active: CachePadded::new(AtomicUsize::new(2)),
            window: Mutex::new((Instant::now(), 0)),
            adaptive: false,
        })));
        for _ in 0..100 {
            assert!(d.submit(&set, 1));
        }
        assert_eq!((rx0.len(), rx1.len()), (0, 1));
        // The pass clears the flag before it wakes: the next event queues it again.
        set.queued[1].store(false, Ordering::Release);
        assert!(d.submit(&set, 1));
        assert_eq!(rx1.len(), 2);
        // With one thread active, shard 1's pass goes to thread 0.
        d.0.as_ref().unwrap().active.store(1, Ordering::Relaxed);
        set.queued[1].store(false, Ordering::Release);
        assert!(d.submit(&set, 1));
        assert_eq!((rx0.len(), rx1.len()), (1, 2));
        // A shard the set does not know is refused, for the caller to wake it.
        assert!(!d.submit(&set, 7));
    }

    #[test]
    fn active_threads_double_when_busy_and_halve_when_idle() {
        // (active, all, busy threads) -> next
        let cases = [
            ((1, 16, 0.1), 1),
            ((1, 16, 0.69), 1),
            ((1, 16, 0.9), 2),
            ((2, 16, 1.9), 4),
            // A burst that needs more than double gets what it needs.
            ((1, 16, 5.0), 8),
            ((8, 16, 15.0), 16),
            ((16, 16, 15.9), 16),
            ((8, 16, 1.9), 4),
            ((8, 16, 2.1), 8),
            ((2, 16, 0.0), 1),
            ((1, 1, 3.0), 1),
        ];
        for ((k, n, load), want) in cases {
            assert_eq!(next_active(k, n, load), want, "{k} of {n} at {load}");
        }
    }

    /// Rounds of one wake of every watcher (each waker taking `work`), `pause` apart,
    /// until `until` holds (10 s at most).
    fn rounds(
        idx: &Arc<WakeIndex>,
        handles: &[super::super::WakeHandle],
        work: Duration,
        pause: Duration,
        mut until: impl FnMut() -> bool,
        what: &str,
    ) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !until() {
            assert!(Instant::now() < deadline, "{what}: not within 10 s");
            let wakers: Vec<Arc<Threads>> = handles
                .iter()
                .map(|h| {
                    let t = Arc::new(Threads {
                        woken_on: Mutex::default(),
                        work,
                    });
                    h.waiter().arm(&Waker::from(t.clone()));
                    t
                })
                .collect();
            idx.wake_all();
            wait_until("a round woken", || {
                wakers
                    .iter()
                    .all(|t| !t.woken_on.lock().unwrap().is_empty())
            });
            std::thread::sleep(pause);
        }
    }

    #[tokio::test]
    async fn threads_join_under_load_and_leave_when_it_passes() {
        let dispatch = Dispatch::start(4).unwrap();
        assert_eq!(
            dispatch.active(),
            1,
            "one thread until the load asks for more"
        );
        let idx = Arc::new(WakeIndex::new(dispatch.clone()));
        let mut handles = Vec::new();
        for hint in 0..8 {
            handles.push(in_shard(hint, async { idx.subscribe(None) }).await);
        }
        // Passes that keep one thread busy all the time: more are taken on.
        rounds(
            &idx,
            &handles,
            Duration::from_millis(3),
            Duration::ZERO,
            || dispatch.active() > 1,
            "threads taken on under load",
        );
        // Passes that take nothing, a window apart: back to one.
        rounds(
            &idx,
            &handles,
            Duration::ZERO,
            ADJUST_EVERY + Duration::from_millis(20),
            || dispatch.active() == 1,
            "threads let go when idle",
        );
    }

    /// A waker that appends its name to a shared list.
    struct Named(&'static str, Arc<Mutex<Vec<&'static str>>>);

    impl Wake for Named {
        fn wake(self: Arc<Self>) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    #[test]
    fn a_batch_wakes_one_waiter_of_each_pass_in_turn() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let waiter = |name: &'static str| {
            let w = Arc::new(super::super::Waiter::new(0));
            w.arm(&Waker::from(Arc::new(Named(name, order.clone()))));
            w
        };
        let passes = vec![
            vec![waiter("a1"), waiter("a2"), waiter("a3")],
            vec![waiter("b1")],
            vec![waiter("c1"), waiter("c2")],
        ];
        wake_interleaved(&passes);
        assert_eq!(*order.lock().unwrap(), ["a1", "b1", "c1", "a2", "c2", "a3"]);
    }

    #[test]
    fn a_batch_takes_at_most_max_batch_passes_and_clears_their_flags() {
        let set = Arc::new(WaiterSet::new(1));
        let (tx, rx) = crossbeam_channel::unbounded();
        for _ in 0..MAX_BATCH + 500 {
            tx.send((set.clone(), 0)).unwrap();
        }
        set.queued[0].store(true, Ordering::Release);
        let first = rx.recv().unwrap();
        let mut batch = Vec::new();
        assert_eq!(take_batch(first, &rx, &mut batch), MAX_BATCH as u64);
        assert_eq!(batch.len(), MAX_BATCH);
        assert_eq!(rx.len(), 500, "the rest waits for the next batch");
        assert!(!set.queued[0].load(Ordering::Acquire));
    }

    #[test]
    fn shard_counts_are_clamped_and_hints_are_reduced() {
        let d = Dispatch::start(0).unwrap();
        assert_eq!(d.shards(), 1);
        assert_eq!(d.shard_of(5), 0);
        let d = Dispatch::start(1000).unwrap();
        assert_eq!(d.shards(), MAX_SHARDS);
        assert_eq!(d.shard_of(MAX_SHARDS + 3), 3);
    }
}
