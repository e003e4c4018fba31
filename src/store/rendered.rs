//! The budget of rendered JSON (`--rendered-json-bytes`): the JSON of protobuf-stored
//! objects, rendered on their first JSON read and kept for the readers after, is bounded.
//! Past the budget the objects rendered longest ago give theirs up (a second chance for
//! those read since their turn last came: the clock algorithm); a later JSON reader
//! renders it again. While memory is past `--memory-limit`'s soft mark the budget is
//! nothing: every rendering is given up as soon as its reader has it.
//!
//! One budget for the process: an object is rendered wherever a reader asks for it (a
//! list, a watch frame, a get), it outlives its store's epochs, and the memory defended
//! is the process's. Without a budget (no flag and no memory limit) renderings are only
//! counted. Metrics: `watchd_rendered_json_bytes` (kept), `watchd_rendered_json_budget_bytes`,
//! `watchd_rendered_json_evictions_total`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::object::CachedObject;

/// No budget: renderings are kept as long as their object.
pub const UNLIMITED: usize = usize::MAX;

/// The budget; see the module.
pub struct RenderedBudget {
    limit: AtomicUsize,
    pressed: AtomicBool,
    used: AtomicUsize,
    /// Objects holding a rendering: clock order, oldest first.
    queue: Mutex<VecDeque<Weak<CachedObject>>>,
    /// Of the queue's entries, how many hold a rendering (the rest wait to be dropped).
    holding: AtomicUsize,
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
        }
    }

    /// Sets the budget in bytes ([`UNLIMITED`]: none), giving up renderings past it.
    pub fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Relaxed);
        if bytes != UNLIMITED {
            metrics::gauge!("watchd_rendered_json_budget_bytes").set(bytes as f64);
        }
        self.evict();
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
            self.limit.load(Ordering::Relaxed)
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
        if self.used() <= limit {
            return;
        }
        let Ok(mut q) = self.queue.lock() else {
            return;
        };
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
        }
    }
}
