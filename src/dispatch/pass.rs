//! Wakes held back to the end of a dispatch pass.
//!
//! A pass wakes the watchers of one or more connections; an HTTP/2 watch stream's wake
//! steps the watch and queues its DATA frame on the connection (`api::http::h2_conn`), which
//! wakes the connection's task to write it. Woken there and then, the task may run on a
//! tokio worker while the pass is still queuing the frames of the connection's other
//! streams, and write them in as many pieces. A connection's task is therefore woken
//! through an [`AtPassEnd`]: inside a pass the wake is recorded, and the task is woken
//! once, when the pass has stepped every watcher it woke, so all the frames one event
//! gave a connection leave in one write by construction, not by the luck of scheduling.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

use futures_util::task::AtomicWaker;

thread_local! {
    /// The wakes held back by the pass running on this thread; None outside a pass.
    static HELD: RefCell<Option<Vec<Arc<AtPassEnd>>>> = const { RefCell::new(None) };
}

/// Runs `f` (a pass: waking watchers) with the wakes of every [`AtPassEnd`] held back
/// until it returns, then wakes them, once each. Nested calls join the outer pass.
pub fn run_pass<R>(f: impl FnOnce() -> R) -> R {
    let outer = HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.is_some() {
            return true;
        }
        *h = Some(Vec::new());
        false
    });
    if outer {
        return f();
    }
    // Wakes are released even if `f` panics (a lost wake would stall a connection).
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            let held = HELD.with(|h| h.borrow_mut().take()).unwrap_or_default();
            for w in held {
                w.queued.store(false, Ordering::Release);
                w.task.wake();
            }
        }
    }
    let _release = Release;
    f()
}

/// A task's waker that, woken inside a pass, wakes the task when the pass ends.
#[derive(Default)]
pub struct AtPassEnd {
    task: AtomicWaker,
    /// Already held by the running pass.
    queued: AtomicBool,
}

impl AtPassEnd {
    /// A waker for the task that will [`register`](Self::register) itself.
    pub fn new() -> Arc<AtPassEnd> {
        Arc::new(AtPassEnd::default())
    }

    /// Makes `waker` (the task's, from its poll) the one woken.
    pub fn register(&self, waker: &Waker) {
        self.task.register(waker);
    }
}

impl Wake for AtPassEnd {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let held = HELD.with(|h| match h.borrow_mut().as_mut() {
            Some(held) => {
                if !self.queued.swap(true, Ordering::AcqRel) {
                    held.push(self.clone());
                }
                true
            }
            None => false,
        });
        if !held {
            self.task.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn wakes_inside_a_pass_reach_the_task_once_when_it_ends() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let task = Waker::from(count.clone());
        let deferred = AtPassEnd::new();
        let waker = Waker::from(deferred.clone());
        deferred.register(&task);
        run_pass(|| {
            for _ in 0..100 {
                waker.wake_by_ref();
                // A nested pass joins the outer one.
                run_pass(|| waker.wake_by_ref());
            }
            assert_eq!(
                count.0.load(Ordering::SeqCst),
                0,
                "held while the pass runs"
            );
        });
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // Outside a pass a wake goes through at once (the task registers again first,
        // as a task does each time it is polled).
        deferred.register(&task);
        waker.wake_by_ref();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        // And a later pass holds it again.
        deferred.register(&task);
        run_pass(|| waker.wake_by_ref());
        assert_eq!(count.0.load(Ordering::SeqCst), 3);
    }
}
