//! The budget of rendered JSON (`--rendered-json-bytes`): the JSON of protobuf-stored
//! objects, rendered on their first JSON read and kept for the readers after, is bounded.
//! Past the budget the objects rendered longest ago give theirs up (a second chance for
//! those read since their turn last came: the clock algorithm); a later JSON reader
//! renders it again. While memory is past `--memory-limit`'s soft mark the budget is
//! nothing: every rendering is given up as soon as its reader has it.
//!
//! One budget for the process: an object is rendered wherever a reader asks for it (a
//! list, a watch frame, a get), it outlives its store's epochs, and the memory defended
//! is the process's. Without the flag or a memory limit the budget follows the cache: a
//! share of the bytes of the cached objects (with a floor), so a full JSON list of a
//! protobuf-stored cache does not keep its whole rendering, about three times the
//! stored bytes. Metrics: `watchd_rendered_json_bytes` (kept),
//! `watchd_rendered_json_budget_bytes`, `watchd_rendered_json_evictions_total`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::object::CachedObject;

/// No budget: renderings are kept as long as their object.
pub const UNLIMITED: usize = usize::MAX;

/// The budget follows the cache: [`crate::config::RENDERED_JSON_CACHE_SHARE`] of the
/// bytes of the cached objects, and at least [`crate::config::RENDERED_JSON_MIN_BYTES`].
pub const FOLLOW_CACHE: usize = usize::MAX - 1;

/// The budget; see the module.
pub struct RenderedBudget {
    limit: AtomicUsize,
    pressed: AtomicBool,
    used: AtomicUsize,
    /// Objects holding a rendering: clock order, oldest first.
    queue: Mutex<VecDeque<Weak<CachedObject>>>,
    /// Of the queue's entries, how many hold a rendering (the rest wait to be dropped).
    holding: AtomicUsize,
    /// Bytes of the cached objects, of every resource's current snapshot.
    cached: AtomicUsize,
    /// Bytes of renderings given up since the heap was last trimmed.
    given_up: AtomicUsize,
    /// A trim of the heap is on its way, or cooling down after one.
    trim_pending: AtomicBool,
    /// The budget last exported as `watchd_rendered_json_budget_bytes`.
    reported: AtomicUsize,
    /// Where trims run: renderings are also given up on the dispatch shards' threads,
    /// outside the runtime.
    runtime: OnceLock<tokio::runtime::Handle>,
}

/// The process's budget.
pub static RENDERED: RenderedBudget = RenderedBudget::new();

impl RenderedBudget {
    const fn new() -> Self {
        RenderedBudget {
            limit: AtomicUsize::new(UNLIMITED),
            pressed: AtomicBool::new(false),
            used: AtomicUsize::new(0),
            queue: Mutex::new(VecDeque::new()),
            holding: AtomicUsize::new(0),
            cached: AtomicUsize::new(0),
            given_up: AtomicUsize::new(0),
            trim_pending: AtomicBool::new(false),
            reported: AtomicUsize::new(UNLIMITED),
            runtime: OnceLock::new(),
        }
    }

    /// The runtime that trims the heap after evictions (else the evicting thread's, if
    /// it has one).
    pub fn set_runtime(&self, runtime: tokio::runtime::Handle) {
        let _ = self.runtime.set(runtime);
    }

    /// Sets the budget in bytes ([`UNLIMITED`]: none; [`FOLLOW_CACHE`]: a share of the
    /// cache), giving up renderings past it.
    pub fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Relaxed);
        self.evict();
    }

    /// A resource's cached objects went from `was` to `is` bytes (its snapshot changed,
    /// or the store was dropped: `is` 0).
    pub fn cached_changed(&self, was: usize, is: usize) {
        if is >= was {
            self.cached.fetch_add(is - was, Ordering::Relaxed);
        } else {
            self.cached.fetch_sub(was - is, Ordering::Relaxed);
            // A smaller cache, a smaller budget: give up what is past it now (the
            // ingestion path: nothing more unless past it).
            if self.limit.load(Ordering::Relaxed) == FOLLOW_CACHE
                && self.used() > self.effective_limit()
            {
                self.evict();
            }
        }
    }

    /// The budget in bytes, pressure aside.
    pub fn budget(&self) -> usize {
        match self.limit.load(Ordering::Relaxed) {
            FOLLOW_CACHE => (self.cached.load(Ordering::Relaxed)
                / crate::config::RENDERED_JSON_CACHE_SHARE)
                .max(crate::config::RENDERED_JSON_MIN_BYTES),
            limit => limit,
        }
    }

    /// Memory past (true) or back under (false) its soft mark: the budget is nothing,
    /// then what it was.
    pub fn set_pressed(&self, pressed: bool) {
        self.pressed.store(pressed, Ordering::Relaxed);
        self.evict();
    }

    /// Bytes of rendered JSON kept.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn effective_limit(&self) -> usize {
        if self.pressed.load(Ordering::Relaxed) {
            0
        } else {
            self.budget()
        }
    }

    /// `object` now keeps a rendering of `bytes`.
    pub(super) fn kept(&self, object: &Arc<CachedObject>, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
        self.holding.fetch_add(1, Ordering::Relaxed);
        metrics::gauge!("watchd_rendered_json_bytes").increment(bytes as f64);
        if self.limit.load(Ordering::Relaxed) == UNLIMITED {
            // No budget (and so no memory limit to press it): nothing will be taken back.
            return;
        }
        if let Ok(mut q) = self.queue.lock() {
            q.push_back(Arc::downgrade(object));
            // Entries of objects dropped since (their bytes were released then) go, so
            // the queue stays near the number of renderings kept.
            let holding = self.holding.load(Ordering::Relaxed);
            if q.len() > 1024 && q.len() > holding.saturating_mul(2) {
                q.retain(|w| w.strong_count() > 0);
            }
        }
        self.evict();
    }

    /// A rendering of `bytes` was given up (evicted, or its object dropped).
    pub(super) fn released(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        self.holding.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!("watchd_rendered_json_bytes").decrement(bytes as f64);
    }

    /// Gives up renderings, oldest first, until the bytes kept are within the budget.
    fn evict(&self) {
        let limit = self.effective_limit();
        // Exported when it changes (a budget that follows the cache changes with it).
        let budget = self.budget();
        if budget != UNLIMITED && self.reported.swap(budget, Ordering::Relaxed) != budget {
            metrics::gauge!("watchd_rendered_json_budget_bytes").set(budget as f64);
        }
        if self.used() <= limit {
            return;
        }
        let Ok(mut q) = self.queue.lock() else {
            return;
        };
        let before = self.used();
        // Each entry is looked at most twice (once more after its second chance).
        let mut steps = q.len().saturating_mul(2);
        let mut evicted = 0u64;
        while self.used() > limit && steps > 0 {
            steps -= 1;
            let Some(entry) = q.pop_front() else { break };
            let Some(object) = entry.upgrade() else {
                continue;
            };
            if limit > 0 && object.take_recently_read() {
                q.push_back(entry);
                continue;
            }
            if object.give_up_rendering() {
                evicted += 1;
            }
        }
        drop(q);
        if evicted > 0 {
            metrics::counter!("watchd_rendered_json_evictions_total").increment(evicted);
            self.trim_heap_after(before.saturating_sub(self.used()));
        }
    }

    /// Gives the heap's free pages back soon, as after a budget's worth of renderings
    /// given up: for what else freed much at once (history past its window).
    pub(crate) fn trim_heap_soon(&self) {
        self.trim_heap_after(crate::config::HEAP_TRIM_AFTER_BYTES);
    }

    /// Renderings given up free a few KiB each, between the objects and renderings kept,
    /// and glibc gives back to the system only the top of its heap: after a full JSON
    /// list of a protobuf-stored cache larger than the budget, the resident set stayed
    /// near what keeping every rendering would take. Once enough was given up, the heap's
    /// free pages are given back a moment later (so that one trim follows a whole list),
    /// off the caller's thread, one trim at a time and at most one in
    /// [`HEAP_TRIM_MIN_INTERVAL`](crate::config::HEAP_TRIM_MIN_INTERVAL): a trim locks
    /// each of glibc's arenas in turn, and what it gives back the next list faults in
    /// again.
    fn trim_heap_after(&self, bytes: usize) {
        use crate::config::{HEAP_TRIM_AFTER_BYTES, HEAP_TRIM_DELAY, HEAP_TRIM_MIN_INTERVAL};
        if self.given_up.fetch_add(bytes, Ordering::Relaxed) + bytes < HEAP_TRIM_AFTER_BYTES
            || self.trim_pending.swap(true, Ordering::AcqRel)
        {
            return;
        }
        // The process's budget only (the trim is the process's), within a runtime.
        let runtime = self
            .runtime
            .get()
            .cloned()
            .or_else(|| tokio::runtime::Handle::try_current().ok());
        let runtime = match runtime {
            Some(r) if std::ptr::eq(self, &RENDERED) => r,
            _ => {
                self.trim_pending.store(false, Ordering::Release);
                return;
            }
        };
        // One task trims, then cools down, then trims again if enough was given up
        // meanwhile (the tail of a list), else lets the next eviction start one.
        runtime.spawn(async {
            loop {
                tokio::time::sleep(HEAP_TRIM_DELAY).await;
                RENDERED.given_up.store(0, Ordering::Relaxed);
                let _ = tokio::task::spawn_blocking(super::cache::release_free_heap).await;
                tokio::time::sleep(HEAP_TRIM_MIN_INTERVAL.saturating_sub(HEAP_TRIM_DELAY)).await;
                if RENDERED.given_up.load(Ordering::Relaxed) < HEAP_TRIM_AFTER_BYTES {
                    break;
                }
            }
            RENDERED.trim_pending.store(false, Ordering::Release);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RENDERED_JSON_CACHE_SHARE, RENDERED_JSON_MIN_BYTES};

    #[test]
    fn a_budget_following_the_cache_is_its_share_of_the_cached_bytes_with_a_floor() {
        let b = RenderedBudget::new();
        assert_eq!(b.budget(), UNLIMITED);
        b.set_limit(FOLLOW_CACHE);
        assert_eq!(b.budget(), RENDERED_JSON_MIN_BYTES);
        // Two resources grow past the floor, then one shrinks and the other is dropped.
        let big = RENDERED_JSON_MIN_BYTES * RENDERED_JSON_CACHE_SHARE;
        b.cached_changed(0, big);
        b.cached_changed(0, big);
        assert_eq!(b.budget(), 2 * RENDERED_JSON_MIN_BYTES);
        b.cached_changed(big, big / 2);
        assert_eq!(b.budget(), RENDERED_JSON_MIN_BYTES * 3 / 2);
        b.cached_changed(big, 0);
        assert_eq!(b.budget(), RENDERED_JSON_MIN_BYTES);
        // Under pressure nothing is kept; a fixed budget ignores the cache.
        b.set_pressed(true);
        assert_eq!(b.effective_limit(), 0);
        b.set_pressed(false);
        b.set_limit(4000);
        assert_eq!(b.effective_limit(), 4000);
    }
}
