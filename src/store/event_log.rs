//! The history window of one resource: an append-only ring of watch events that watchers
//! read through cursors (sequence numbers). One writer appends; readers never lock.
//!
//! A slot holds an `Arc<WatchEvent>` tagged with its sequence number, so a reader that
//! finds a different sequence in a slot knows it was overwritten and its cursor fell out
//! of the window. Slots are allocated a chunk at a time as the log first fills.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use once_cell::race::OnceBox;

use super::object::{CachedObject, ObjectRef};
use crate::Revision;

const CHUNK: usize = 1024;

/// A block of slots, allocated on first use.
type Chunk = OnceLock<Box<[ArcSwapOption<WatchEvent>]>>;

/// The type of a watch event as the Kubernetes API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// The object appeared (or started matching the watcher's selector).
    Added,
    /// The object changed.
    Modified,
    /// The object was deleted (or stopped matching).
    Deleted,
}

impl EventType {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How many wire encodings of watch frames an event can cache: the frontends number
/// theirs below this (`api::watch::FrameEncoding`).
pub const FRAME_ENCODINGS: usize = 4;

/// One change to one object at one revision.
#[derive(Debug)]
pub struct WatchEvent {
    /// Position in the log.
    pub seq: u64,
    /// The etcd revision of the change.
    pub revision: Revision,
    /// The object after the change; None for a deletion.
    pub object: Option<ObjectRef>,
    /// The object before the change (at its own revision); None for a creation.
    pub prev: Option<ObjectRef>,
    /// The wake keys of the object and its previous state, as a Bloom mask
    /// (`dispatch::keys_of`); all ones when not computed (every watcher looks).
    pub key_bits: u64,
    /// When it was applied, in nanoseconds after [`clock_base`] (an `Instant` takes 16
    /// bytes).
    at_nanos: u64,
    /// What watchers derive, allocated only once one asks: the history holds up to
    /// `--history-max-events` events per resource whether anyone watches it or not.
    derived: OnceBox<Derived>,
}

/// What watchers derive from an event: the DELETED view, and the wire frames per
/// encoding and event type, an encoding's slots only once one asks for it (120 bytes an
/// encoding in use, where all would be 480).
#[derive(Default)]
struct Derived {
    deleted_view: OnceLock<ObjectRef>,
    frames: Frames,
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Derived")
            .field("deleted_view", &self.deleted_view.get().is_some())
            .finish_non_exhaustive()
    }
}

/// An event's frames: per encoding, per event type.
type Frames = [OnceLock<Box<[OnceLock<Option<Bytes>>; 3]>>; FRAME_ENCODINGS];

/// The instant event times count from: the first one asked for.
fn clock_base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

impl WatchEvent {
    /// A change at `revision`; `seq` is assigned by the log.
    pub fn new(revision: Revision, object: Option<ObjectRef>, prev: Option<ObjectRef>) -> Self {
        WatchEvent {
            seq: 0,
            revision,
            object,
            prev,
            key_bits: u64::MAX,
            at_nanos: Instant::now()
                .saturating_duration_since(clock_base())
                .as_nanos()
                .try_into()
                .unwrap_or(u64::MAX),
            derived: OnceBox::new(),
        }
    }

    /// When the event was applied to the cache (dispatch lag is measured from here).
    pub fn applied_at(&self) -> Instant {
        clock_base() + Duration::from_nanos(self.at_nanos)
    }

    fn derived(&self) -> &Derived {
        self.derived.get_or_init(Box::default)
    }

    /// The object's state before this change, served at this event's revision: what a
    /// DELETED event carries (for a deletion, or when the object stops matching).
    pub fn deleted_view(&self) -> Option<&ObjectRef> {
        let prev = self.prev.as_ref()?;
        Some(
            self.derived()
                .deleted_view
                .get_or_init(|| Arc::new(CachedObject::at_revision(prev, self.revision))),
        )
    }

    /// The object an event of type `t` carries.
    pub fn object_for(&self, t: EventType) -> Option<&ObjectRef> {
        match t {
            EventType::Deleted => self.deleted_view(),
            EventType::Added | EventType::Modified => self.object.as_ref(),
        }
    }

    /// The wire frame of type `t` in the frontend's `encoding` (below
    /// [`FRAME_ENCODINGS`]), built by `build` once and shared by every watcher; None when
    /// the event has no object of that type or `build` could not encode it. The store
    /// only keeps the bytes: how a frame is made is the frontend's.
    pub fn frame(
        &self,
        encoding: usize,
        t: EventType,
        build: impl FnOnce(EventType, &ObjectRef) -> Option<Bytes>,
    ) -> Option<Bytes> {
        let obj = self.object_for(t)?;
        self.derived()
            .frames
            .get(encoding)?
            .get_or_init(Box::default)[t.index()]
        .get_or_init(|| build(t, obj))
        .clone()
    }
}

/// What a cursor finds at its position.
#[derive(Debug)]
pub enum Read {
    /// The event at the cursor.
    Event(Arc<WatchEvent>),
    /// Nothing yet: the cursor is at the head.
    Pending,
    /// The event was evicted: the cursor fell out of the history window.
    Expired,
}

/// Why a watch cannot start from a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    /// The oldest revision a watch can start from.
    pub oldest: Revision,
}

/// The ring of recent events of one resource, within one epoch.
pub struct EventLog {
    chunks: Box<[Chunk]>,
    capacity: u64,
    window: Duration,
    head: AtomicU64,
    tail: AtomicU64,
    floor: AtomicI64,
    closed: AtomicBool,
    terminated: AtomicBool,
    epoch: u64,
}

impl EventLog {
    /// A log holding at most `max_events` events younger than `window`, starting at
    /// `start` (the epoch's list revision: every event after it is kept).
    pub fn new(start: Revision, epoch: u64, max_events: usize, window: Duration) -> Self {
        let chunks = max_events.div_ceil(CHUNK).max(1);
        EventLog {
            chunks: (0..chunks).map(|_| OnceLock::new()).collect(),
            capacity: (chunks * CHUNK) as u64,
            window,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            floor: AtomicI64::new(start.0),
            closed: AtomicBool::new(false),
            terminated: AtomicBool::new(false),
            epoch,
        }
    }

    fn slot(&self, seq: u64) -> &ArcSwapOption<WatchEvent> {
        let i = (seq % self.capacity) as usize;
        let chunk = self.chunks[i / CHUNK]
            .get_or_init(|| (0..CHUNK).map(|_| ArcSwapOption::empty()).collect());
        &chunk[i % CHUNK]
    }

    fn evict_oldest(&self, clear: bool) {
        let t = self.tail.load(Ordering::Relaxed);
        if let Some(ev) = self.slot(t).load_full() {
            self.floor.store(ev.revision.0, Ordering::Release);
        }
        self.tail.store(t + 1, Ordering::Release);
        if clear {
            self.slot(t).store(None);
        }
    }

    /// Evicts the oldest events applied before `limit` (None: none), up to the head.
    /// Returns how many.
    fn evict_applied_before(&self, limit: Option<Instant>) -> usize {
        let Some(limit) = limit else { return 0 };
        let head = self.head.load(Ordering::Relaxed);
        let mut evicted = 0;
        while self.tail.load(Ordering::Relaxed) < head {
            let t = self.tail.load(Ordering::Relaxed);
            let stale = matches!(self.slot(t).load().as_ref(), Some(ev) if ev.applied_at() < limit);
            if !stale {
                break;
            }
            self.evict_oldest(true);
            evicted += 1;
        }
        evicted
    }

    /// Appends an event (single writer). Evicts what falls out of the window first.
    pub fn append(&self, mut event: WatchEvent) -> Arc<WatchEvent> {
        let seq = self.head.load(Ordering::Relaxed);
        // Full: the slot the event takes holds the oldest one, which it overwrites.
        if self.tail.load(Ordering::Relaxed) + self.capacity <= seq {
            self.evict_oldest(false);
        }
        self.evict_applied_before(event.applied_at().checked_sub(self.window));
        event.seq = seq;
        let event = Arc::new(event);
        self.slot(seq).store(Some(event.clone()));
        self.head.store(seq + 1, Ordering::Release);
        event
    }

    /// Evicts the events older than the window at `now` (single writer, as
    /// [`EventLog::append`], which evicts them too but only when a change comes): a
    /// resource that went quiet after a burst would otherwise keep the burst's events,
    /// and the past states of objects they hold, for as long as it stays quiet. Returns
    /// how many were evicted.
    pub fn expire(&self, now: Instant) -> usize {
        self.evict_applied_before(now.checked_sub(self.window))
    }

    /// The sequence number the next event will get.
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// Reads the event at `seq`.
    pub fn read(&self, seq: u64) -> Read {
        if seq >= self.head() {
            return Read::Pending;
        }
        match self.slot(seq).load_full() {
            Some(ev) if ev.seq == seq => Read::Event(ev),
            _ => Read::Expired,
        }
    }

    /// The cursor from which a watcher sees every event after `revision`.
    pub fn cursor_after(&self, revision: Revision) -> Result<u64, TooOld> {
        // The tail first: the writer raises the floor before the tail, so the floor read
        // after it covers every event before that tail.
        let tail = self.tail.load(Ordering::Acquire);
        let floor = Revision(self.floor.load(Ordering::Acquire));
        if revision < floor {
            return Err(TooOld { oldest: floor });
        }
        let (mut lo, mut hi) = (tail, self.head());
        // First seq in [lo, hi) whose revision is after `revision`.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.read(mid) {
                Read::Event(ev) if ev.revision <= revision => lo = mid + 1,
                Read::Event(_) => hi = mid,
                Read::Pending => hi = mid,
                Read::Expired => return Err(TooOld { oldest: floor }),
            }
        }
        Ok(lo)
    }

    /// The oldest revision a watch can start from.
    pub fn oldest_revision(&self) -> Revision {
        Revision(self.floor.load(Ordering::Acquire))
    }

    /// Number of events held.
    pub fn len(&self) -> u64 {
        self.head() - self.tail.load(Ordering::Acquire)
    }

    /// Whether no events are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends the log's epoch: its watchers must stop and their clients re-list.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Ends the log without an error: its watchers' streams just end, as kube-apiserver
    /// ends them when a resource's cache must re-initialize; clients watch again.
    pub fn terminate(&self) {
        self.terminated.store(true, Ordering::Release);
        self.close();
    }

    /// Whether the log was ended by [`EventLog::terminate`].
    pub fn is_terminated(&self) -> bool {
        self.terminated.load(Ordering::Acquire)
    }

    /// The epoch this log belongs to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether the epoch ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(rev: i64) -> WatchEvent {
        WatchEvent::new(Revision(rev), None, None)
    }

    #[test]
    fn an_event_nobody_watched_is_seven_words() {
        // Every event of the history pays this (with its Arc's two counts): 56 bytes,
        // where an Instant and two inline OnceLocks made it 88 (112 with glibc's
        // rounding of the allocation, now 80).
        assert_eq!(std::mem::size_of::<WatchEvent>(), 56);
        let e = ev(1);
        assert!(e.derived.get().is_none());
        assert!(e.applied_at() <= Instant::now());
    }

    #[test]
    fn cursor_after_finds_first_later_event() {
        let log = EventLog::new(Revision(10), 1, 100, Duration::from_secs(60));
        for r in [11, 12, 12, 15] {
            log.append(ev(r));
        }
        assert_eq!(log.cursor_after(Revision(10)), Ok(0));
        assert_eq!(log.cursor_after(Revision(11)), Ok(1));
        assert_eq!(log.cursor_after(Revision(12)), Ok(3));
        assert_eq!(log.cursor_after(Revision(13)), Ok(3));
        assert_eq!(log.cursor_after(Revision(99)), Ok(4));
        assert_eq!(
            log.cursor_after(Revision(9)),
            Err(TooOld {
                oldest: Revision(10)
            })
        );
    }

    #[test]
    fn capacity_eviction_expires_old_cursors_and_raises_the_floor() {
        let log = EventLog::new(Revision(0), 1, 1, Duration::from_secs(60));
        let cap = log.capacity;
        for r in 1..=(cap as i64 + 5) {
            log.append(ev(r));
        }
        assert!(matches!(log.read(0), Read::Expired));
        assert!(matches!(log.read(5), Read::Event(e) if e.revision == Revision(6)));
        assert_eq!(log.oldest_revision(), Revision(5));
        assert!(log.cursor_after(Revision(4)).is_err());
        assert_eq!(log.cursor_after(Revision(5)), Ok(5));
        assert!(matches!(log.read(cap + 5), Read::Pending));
    }

    #[test]
    fn time_window_evicts_old_events() {
        let log = EventLog::new(Revision(0), 1, 100, Duration::from_millis(0));
        log.append(ev(1));
        std::thread::sleep(Duration::from_millis(2));
        log.append(ev(2));
        assert_eq!(log.len(), 1);
        assert_eq!(log.oldest_revision(), Revision(1));
        assert!(matches!(log.read(0), Read::Expired));
    }

    #[test]
    fn expire_evicts_what_the_window_passed_without_a_new_event() {
        let window = Duration::from_secs(60);
        let log = EventLog::new(Revision(0), 1, 100, window);
        for r in 1..=3 {
            log.append(ev(r));
        }
        // Within the window nothing goes.
        assert_eq!(log.expire(Instant::now()), 0);
        assert_eq!(log.len(), 3);
        // A window later every event is past it: the floor is the last one's revision,
        // from which a watch still resumes; from before it, 410.
        assert_eq!(
            log.expire(Instant::now() + window + Duration::from_secs(1)),
            3
        );
        assert!(log.is_empty());
        assert_eq!(log.oldest_revision(), Revision(3));
        assert_eq!(log.cursor_after(Revision(3)), Ok(3));
        assert!(log.cursor_after(Revision(2)).is_err());
        assert!(matches!(log.read(2), Read::Expired));
        // The log goes on from its head.
        log.append(ev(4));
        assert!(matches!(log.read(3), Read::Event(e) if e.revision == Revision(4)));
        assert_eq!(log.cursor_after(Revision(3)), Ok(3));
    }
}
