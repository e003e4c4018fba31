//! Who wants an event: watchers are cursors into a resource's event log, and this index
//! decides which of them to wake when events arrive.
//!
//! A watcher subscribes with its most selective [`WakeKey`]: an exact value of its
//! resource's indexed field (`--index-field`; `spec.nodeName=n` for pods by default), an
//! exact name, or its namespace; watchers with none of
//! these are in the resource-wide set. An event wakes the resource-wide set and the sets
//! of its own keys (those of the new and the previous state, so a pod leaving node `n`
//! still wakes `n`'s watchers for their DELETED). Each key is one hash lookup, so an
//! event costs O(keys + matching watchers), not O(all watchers). Waking is batched: once
//! per key per applied etcd response.
//!
//! Each watcher owns a [`Waiter`]: an atomic waker and a "woken" flag. It registers its
//! waker (a compare-and-swap, no lock) before it looks at the log, and the notifier sets
//! the flag and wakes it after the events are in the log, so no wake-up is lost and the
//! watch path takes no lock shared with other watchers. Only subscribing, leaving and
//! notifying lock a set. The waker may be a task's, or anything else that implements
//! `Wake` (`api::http::direct` writes the watcher's frame to its socket from it), so a
//! pass may cost a write per watcher: passes run on dispatch shards ([`shards`]), not
//! on ingestion. A watcher belongs to the shard of its connection, so a set's waiters
//! are kept per shard and a wake queues one pass per shard that has any.

use std::collections::HashSet;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use dashmap::DashMap;
use futures_util::task::AtomicWaker;

pub mod pass;
pub mod shards;

pub use shards::{in_shard, Dispatch};

/// What a watcher can be found by: a namespace, an exact name, or a value of its
/// resource's indexed field (`ResourceInfo::indexed_field`), kept as a fixed 64-bit hash
/// of which one and its value. An event's keys so cost no allocation and one hash each.
/// Two keys that hash alike wake each other's watchers, whose filters then find nothing
/// for them: a wasted look, never a lost event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WakeKey(u64);

/// One watcher's wake-up: whom to wake, and whether a wake came since it last looked.
pub struct Waiter {
    waker: AtomicWaker,
    woken: AtomicBool,
    /// Its position in its shard's list of its set (moved when another leaves).
    slot: AtomicUsize,
    /// Its dispatch shard: its connection's.
    shard: usize,
}

impl Waiter {
    /// A waiter of dispatch shard `shard`, not armed.
    fn new(shard: usize) -> Waiter {
        Waiter {
            waker: AtomicWaker::new(),
            woken: AtomicBool::new(false),
            slot: AtomicUsize::new(0),
            shard,
        }
    }

    /// Registers `waker` and forgets earlier wakes: call before looking at the log, so
    /// an event appended after the look wakes `waker`.
    pub fn arm(&self, waker: &Waker) {
        self.woken.store(false, Ordering::Release);
        self.waker.register(waker);
    }

    /// Whether a wake came since [`Waiter::arm`]; registers `waker` again (a poll may
    /// come from another task's waker, or spuriously) before answering.
    pub fn woken(&self, waker: &Waker) -> bool {
        self.waker.register(waker);
        self.woken.load(Ordering::Acquire)
    }

    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.waker.wake();
    }
}

/// The waiters of one key (or of the whole resource), by dispatch shard.
struct WaiterSet {
    /// Per shard, its waiters (grown to the highest shard used).
    waiters: Mutex<Vec<Vec<Arc<Waiter>>>>,
    /// Bit `s`: shard `s` has waiters. Read by ingestion without the lock.
    occupied: AtomicU64,
    /// Per shard: its pass is queued and has not started.
    queued: Box<[AtomicBool]>,
}

impl WaiterSet {
    fn new(shards: usize) -> WaiterSet {
        WaiterSet {
            waiters: Mutex::new(Vec::new()),
            occupied: AtomicU64::new(0),
            queued: (0..shards).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Vec<Arc<Waiter>>>> {
        // Nothing panics while holding it; a poisoned set is still a valid list.
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, w: Arc<Waiter>) {
        let mut lists = self.lock();
        if lists.len() <= w.shard {
            lists.resize_with(w.shard + 1, Vec::new);
        }
        let list = &mut lists[w.shard];
        w.slot.store(list.len(), Ordering::Relaxed);
        if list.is_empty() {
            self.occupied.fetch_or(1 << w.shard, Ordering::SeqCst);
        }
        list.push(w);
        // Pairs with the fence in `wake`: either that wake sees this shard's bit, or
        // this watcher's first look at the log (after subscribing) sees its events.
        fence(Ordering::SeqCst);
    }

    /// Removes `w`.
    fn remove(&self, w: &Arc<Waiter>) {
        let mut lists = self.lock();
        if let Some(list) = lists.get_mut(w.shard) {
            let i = w.slot.load(Ordering::Relaxed);
            if list.get(i).is_some_and(|x| Arc::ptr_eq(x, w)) {
                list.swap_remove(i);
                if let Some(moved) = list.get(i) {
                    moved.slot.store(i, Ordering::Relaxed);
                }
                if list.is_empty() {
                    self.occupied.fetch_and(!(1 << w.shard), Ordering::SeqCst);
                }
            }
        }
    }

    /// Whether no shard has a waiter (its occupied mask, kept under the lock).
    fn is_empty(&self) -> bool {
        self.occupied.load(Ordering::SeqCst) == 0
    }

    /// Wakes every waiter: one pass per shard that has any, queued on that shard's
    /// thread ([`shards`]); with inline dispatch, here.
    fn wake(self: &Arc<Self>, dispatch: &Dispatch) {
        // Pairs with the fence in `insert` (the events were appended before this).
        fence(Ordering::SeqCst);
        let mut occupied = self.occupied.load(Ordering::SeqCst);
        while occupied != 0 {
            let shard = occupied.trailing_zeros() as usize;
            occupied &= occupied - 1;
            if !dispatch.submit(self, shard) {
                self.wake_shard(shard);
            }
        }
    }

    /// Wakes the waiters of `shard` now. Cost: one flag store and one waker call each
    /// (a waker already taken by an earlier wake is not called twice), which may be a
    /// delivery.
    fn wake_shard(&self, shard: usize) {
        let waiters = self.waiters_of(shard);
        pass::run_pass(|| {
            for w in &waiters {
                w.wake();
            }
        });
    }

    /// The waiters of `shard`, copied out of the lock, so watchers joining and leaving
    /// (on connection tasks) never wait for a pass.
    fn waiters_of(&self, shard: usize) -> Vec<Arc<Waiter>> {
        self.lock().get(shard).cloned().unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.lock().iter().map(Vec::len).sum()
    }
}

/// The wake-up index of one resource.
pub struct WakeIndex {
    dispatch: Dispatch,
    everything: Arc<WaiterSet>,
    by_key: DashMap<WakeKey, Arc<WaiterSet>>,
}

impl Default for WakeIndex {
    /// An index whose passes run on the caller.
    fn default() -> Self {
        WakeIndex::new(Dispatch::inline())
    }
}

/// A watcher's subscription. Dropping it leaves the set (and forgets an emptied key).
pub struct WakeHandle {
    index: Arc<WakeIndex>,
    key: Option<WakeKey>,
    set: Option<Arc<WaiterSet>>,
    waiter: Arc<Waiter>,
}

impl WakeIndex {
    /// An index whose passes run on `dispatch`'s shards.
    pub fn new(dispatch: Dispatch) -> WakeIndex {
        WakeIndex {
            everything: Arc::new(WaiterSet::new(dispatch.shards())),
            by_key: DashMap::new(),
            dispatch,
        }
    }

    /// Registers a watcher under `key` (None: the resource-wide set), in the dispatch
    /// shard of the connection it is served on ([`in_shard`]).
    pub fn subscribe(self: &Arc<Self>, key: Option<WakeKey>) -> WakeHandle {
        let shard = self.dispatch.shard_of(shards::current_hint());
        let waiter = Arc::new(Waiter::new(shard));
        let set = match &key {
            None => {
                self.everything.insert(waiter.clone());
                None
            }
            Some(k) => {
                // Inserted while the map's shard is locked, so a concurrent last leave
                // cannot drop the set between lookup and insert.
                let entry = self
                    .by_key
                    .entry(*k)
                    .or_insert_with(|| Arc::new(WaiterSet::new(self.dispatch.shards())));
                entry.insert(waiter.clone());
                Some(entry.clone())
            }
        };
        WakeHandle {
            index: self.clone(),
            key,
            set,
            waiter,
        }
    }

    /// Wakes every resource-wide watcher and the watchers of these keys.
    pub fn wake<'k>(&self, keys: impl IntoIterator<Item = &'k WakeKey>) {
        self.everything.wake(&self.dispatch);
        if self.by_key.is_empty() {
            return;
        }
        for k in keys {
            let set = self.by_key.get(k).map(|s| s.clone());
            if let Some(set) = set {
                set.wake(&self.dispatch);
            }
        }
    }

    /// Wakes every watcher (the epoch ended, or the daemon is stopping).
    pub fn wake_all(&self) {
        self.everything.wake(&self.dispatch);
        let sets: Vec<Arc<WaiterSet>> = self.by_key.iter().map(|e| e.clone()).collect();
        for set in sets {
            set.wake(&self.dispatch);
        }
    }

    /// Number of keys with a registered watcher.
    pub fn keys_watched(&self) -> usize {
        self.by_key.len()
    }

    /// Number of watchers registered, keyed or not.
    pub fn watchers(&self) -> usize {
        self.everything.len() + self.by_key.iter().map(|e| e.len()).sum::<usize>()
    }
}

impl WakeKey {
    /// All objects of namespace `ns`.
    pub fn namespace(ns: &str) -> WakeKey {
        WakeKey::of(0, ns)
    }

    /// Objects named `name` (in any namespace).
    pub fn name(name: &str) -> WakeKey {
        WakeKey::of(1, name)
    }

    /// Objects whose indexed field has the value `value`.
    pub fn field(value: &str) -> WakeKey {
        WakeKey::of(2, value)
    }

    fn of(which: u8, value: &str) -> WakeKey {
        use std::hash::Hasher;
        // SipHash with fixed keys: the same in every process, so masks stay comparable.
        let mut h = std::hash::DefaultHasher::new();
        h.write_u8(which);
        h.write(value.as_bytes());
        WakeKey(h.finish())
    }

    /// The key's bit in a [`key_bits`] mask: one of 64.
    pub fn bit(&self) -> u64 {
        1 << (self.0 % 64)
    }
}

/// Collects the keys an object state can be found by, and returns their bits as a
/// 64-bit Bloom mask (the event's `key_bits`): a watcher found by a key whose bit is
/// not in an event's mask cannot want that event, and skips it without evaluating its
/// filter. Watchers of one node read past the events of every other node this way at a
/// bit test each.
pub fn keys_of(
    keys: &mut HashSet<WakeKey>,
    namespace: Option<&str>,
    name: &str,
    indexed_value: Option<&str>,
) -> u64 {
    let mut bits = 0;
    let mut add = |k: WakeKey| {
        bits |= k.bit();
        keys.insert(k);
    };
    if let Some(ns) = namespace {
        add(WakeKey::namespace(ns));
    }
    add(WakeKey::name(name));
    if let Some(v) = indexed_value {
        add(WakeKey::field(v));
    }
    bits
}

impl WakeHandle {
    /// The watcher's waiter.
    pub fn waiter(&self) -> &Arc<Waiter> {
        &self.waiter
    }
}

impl Drop for WakeHandle {
    fn drop(&mut self) {
        match (&self.set, self.key.take()) {
            (Some(set), Some(key)) => {
                set.remove(&self.waiter);
                if set.is_empty() {
                    self.index
                        .by_key
                        .remove_if(&key, |_, s| Arc::ptr_eq(s, set) && s.is_empty());
                }
            }
            _ => {
                self.index.everything.remove(&self.waiter);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    fn ns(s: &str) -> WakeKey {
        WakeKey::namespace(s)
    }

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn armed(h: &WakeHandle) -> Arc<Count> {
        let c = Arc::new(Count::default());
        h.waiter().arm(&Waker::from(c.clone()));
        c
    }

    #[test]
    fn keyed_watchers_wake_only_for_their_keys() {
        let idx = Arc::new(WakeIndex::default());
        let a = idx.subscribe(Some(ns("a")));
        let b = idx.subscribe(Some(ns("b")));
        let node = idx.subscribe(Some(WakeKey::field("node-1")));
        let all = idx.subscribe(None);
        let counts: Vec<_> = [&a, &b, &node, &all].iter().map(|h| armed(h)).collect();
        let mut keys = HashSet::new();
        keys_of(&mut keys, Some("a"), "p1", Some("node-1"));
        idx.wake(&keys);
        let woken: Vec<usize> = counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect();
        assert_eq!(woken, [1, 0, 1, 1]);
        let noop = Waker::noop();
        assert!(a.waiter().woken(noop) && !b.waiter().woken(noop));
        assert_eq!(idx.watchers(), 4);
    }

    #[test]
    fn a_wake_is_delivered_once_per_arming_and_remembered_until_the_next() {
        let idx = Arc::new(WakeIndex::default());
        let h = idx.subscribe(None);
        let c = armed(&h);
        idx.wake(&HashSet::new());
        idx.wake(&HashSet::new());
        // The waker was taken by the first wake; the flag says a wake came.
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert!(h.waiter().woken(Waker::noop()));
        h.waiter().arm(&Waker::from(c.clone()));
        assert!(!h.waiter().woken(&Waker::from(c.clone())));
        idx.wake_all();
        assert_eq!(c.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_event_s_key_bits_hold_every_key_it_can_be_found_by() {
        let bits = keys_of(&mut HashSet::new(), Some("a"), "p1", Some("node-1"));
        for k in [ns("a"), WakeKey::name("p1"), WakeKey::field("node-1")] {
            assert_ne!(bits & k.bit(), 0, "{k:?}");
        }
        assert!(bits.count_ones() <= 3, "one bit per key");
        // A key's bit is the same every time (watchers and ingestion compute it apart).
        assert_eq!(ns("a").bit(), ns("a").bit());
        let others = (0..200)
            .map(|i| WakeKey::field(&format!("node-{i}")))
            .filter(|k| bits & k.bit() == 0)
            .count();
        assert!(
            others > 150,
            "most other keys' bits are not in the mask: {others}"
        );
    }

    #[test]
    fn leaving_keeps_the_others_and_forgets_unused_keys() {
        let idx = Arc::new(WakeIndex::default());
        let h1 = idx.subscribe(Some(ns("a")));
        let h2 = idx.subscribe(Some(ns("a")));
        let h3 = idx.subscribe(Some(ns("a")));
        let c3 = armed(&h3);
        assert_eq!(idx.keys_watched(), 1);
        drop(h1);
        assert_eq!(idx.keys_watched(), 1);
        let mut keys = HashSet::new();
        keys.insert(ns("a"));
        idx.wake(&keys);
        assert_eq!(c3.0.load(Ordering::SeqCst), 1, "h3 moved into h1's slot");
        drop(h2);
        drop(h3);
        assert_eq!(idx.keys_watched(), 0);
        let all = idx.subscribe(None);
        drop(all);
        assert_eq!(idx.watchers(), 0);
    }
}
