//! A watch over HTTP/2 written from its wake-up: the dispatch pass that wakes the watch
//! steps it and queues its DATA frame on the stream, without waking the stream's task;
//! the connection's task, woken once when the pass ends ([`crate::dispatch::pass`]),
//! writes the frames of every stream the pass reached in one write.
//!
//! Why: through a task per stream, one event to a connection of 100 watch streams costs
//! 100 task wake-ups, 100 polls that each take the connection's lock, and as many chances
//! for the connection to write before the last frame is in. Here it costs 100 steps in
//! one thread and one wake-up of the connection.
//!
//! Flow control is honoured: a pass sends only while the stream has send capacity (its
//! window and the connection's, less what is already queued, within
//! [`crate::config::HTTP2_STREAM_SEND_BUFFER`]), looked at once per
//! [`CAPACITY_LOOK_EVERY`] bytes queued; a stream without keeps its cursor, and its task
//! waits for capacity and takes over until the stream has room again.
//!
//! The task stays for what waits: the timer (bookmarks, the deadline, a batch window),
//! capacity, a reset from the client, and the end of the stream. As in
//! [`super::direct`], the pass only `try_lock`s the state, so it never waits on a stream,
//! and a wake that finds the state taken is remembered ([`H2Watch::missed`]).
//!
//! One subtlety: `h2` wakes a stream's send task (registered to notice a reset) whenever
//! the stream's capacity grows, which the pass's own `reserve_capacity` does. Those wakes
//! would bring back the task wake per event this module removes, so the task registers a
//! [`Probe`] with `h2`: woken by the thread that is stepping its stream (its own doing),
//! it only notes that it must be registered again, which the stepper does; woken by
//! anyone else (the connection task: a reset, a window update) it wakes the task.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use bytes::Buf;
use futures_util::task::AtomicWaker;
use h2::SendStream;
use tokio::time::Instant;

use super::body::BufList;
use crate::api::watch::{Step, SteppedWatch};

/// Bytes a stream queues between looks at its send capacity. A look (asking `h2` for
/// one byte more than is queued, and reading what it granted) costs more than queuing a
/// frame, and its grant wakes the probe; once per 16 KiB, a stream whose reader stopped
/// queues at most this much (and one frame) past its send buffer.
const CAPACITY_LOOK_EVERY: usize = 16 * 1024;

thread_local! {
    /// The probe of the stream this thread is stepping (its address), if any.
    static STEPPING: Cell<usize> = const { Cell::new(0) };
}

/// What the pass and the task share.
struct State {
    /// The watch; None once the task ended it.
    watch: Option<Box<dyn SteppedWatch<BufList>>>,
    send: SendStream<BufList>,
    /// The stream has no send capacity: the task waits for it and steps.
    blocked: bool,
    /// The watch ended: the task ends the stream.
    ended: bool,
    /// Sending failed (the stream was reset or the connection ended): the task leaves.
    failed: bool,
    /// Bytes queued since the stream's capacity was last looked at.
    unlooked: usize,
    /// When the sleeping task's timer fires.
    sleeps_until: Option<Instant>,
    /// A step wants the task's timer sooner.
    rearm: bool,
}

impl State {
    fn needs_task(&self) -> bool {
        self.blocked || self.ended || self.failed || self.rearm
    }
}

/// The task's side of `h2`'s notifications.
#[derive(Default)]
struct Probe {
    task: AtomicWaker,
    /// Woken by its own stepper: `h2` no longer holds it.
    fired: AtomicBool,
}

impl Wake for Probe {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if STEPPING.with(Cell::get) == Arc::as_ptr(self) as usize {
            self.fired.store(true, Ordering::Release);
        } else {
            self.task.wake();
        }
    }
}

/// A watch stream written from its wake-up; its `Waker` is what the watch arms.
pub struct H2Watch {
    state: Mutex<State>,
    /// A wake found the state taken: whoever holds it steps again.
    missed: AtomicBool,
    probe: Arc<Probe>,
    probe_waker: Waker,
}

/// What one step gave.
enum Stepped {
    Sent,
    Idle(Instant),
    Blocked,
    End,
    Failed,
}

impl H2Watch {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Steps the watch once and queues its frame, if the stream has capacity.
    fn step(&self, st: &mut State, waker: &Waker) -> Stepped {
        let Some(watch) = st.watch.as_mut() else {
            return Stepped::End;
        };
        if st.unlooked >= CAPACITY_LOOK_EVERY {
            st.send.reserve_capacity(1);
            if st.send.capacity() == 0 {
                return Stepped::Blocked;
            }
            st.unlooked = 0;
        }
        match watch.step(waker) {
            Step::Idle(at) => Stepped::Idle(at),
            Step::Frame(frame) if frame.remaining() == 0 => Stepped::Sent,
            Step::Frame(frame) => {
                st.unlooked += frame.remaining();
                match st.send.send_data(frame, false) {
                    Ok(()) => Stepped::Sent,
                    Err(_) => Stepped::Failed,
                }
            }
            Step::End => Stepped::End,
        }
    }

    /// Runs `f` as this stream's stepper: the probe's wakes it causes are its own
    /// (see the module's note); the probe is registered again after, if they took it.
    fn stepping<R>(&self, st: &mut State, f: impl FnOnce(&mut State) -> R) -> R {
        let me = Arc::as_ptr(&self.probe) as usize;
        let outer = STEPPING.with(|s| s.replace(me));
        let r = f(st);
        STEPPING.with(|s| s.set(outer));
        if self.probe.fired.swap(false, Ordering::AcqRel) {
            let mut cx = Context::from_waker(&self.probe_waker);
            if st.send.poll_reset(&mut cx).is_ready() {
                st.failed = true;
            }
        }
        r
    }

    /// A wake from the pass: steps and queues the frame unless the task has the stream.
    fn wake_inline(self: &Arc<Self>) {
        super::direct::run_or_hand_over(&self.state, &self.missed, |st| {
            if st.needs_task() {
                return;
            }
            let waker = Waker::from(self.clone());
            match self.stepping(st, |st| self.step(st, &waker)) {
                Stepped::Sent => {}
                Stepped::Idle(at) => {
                    if st.sleeps_until.is_some_and(|t| at < t) {
                        st.rearm = true;
                    }
                }
                Stepped::Blocked => st.blocked = true,
                Stepped::End => st.ended = true,
                Stepped::Failed => st.failed = true,
            }
            if st.needs_task() {
                self.probe.task.wake();
            }
        });
    }
}

impl Wake for H2Watch {
    fn wake(self: Arc<Self>) {
        self.wake_inline();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_inline();
    }
}

/// Ends pass writes whichever way the task leaves: the watch (which holds the waker
/// that points back here) is taken out.
struct EndGuard(Arc<H2Watch>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        let watch = self.0.lock().watch.take();
        // Dropped outside the lock: leaving the wake index takes its set's lock.
        drop(watch);
    }
}

/// Streams `watch` on `send` (its response head sent) until it ends (then the stream's
/// end: the trailers `end` gives, or an empty DATA frame), the client resets the stream
/// or the connection ends.
pub(super) async fn stream(
    send: SendStream<BufList>,
    watch: Box<dyn SteppedWatch<BufList>>,
    end: Option<super::h2_conn::EndTrailers>,
) {
    let probe = Arc::new(Probe::default());
    let w = Arc::new(H2Watch {
        state: Mutex::new(State {
            watch: Some(watch),
            send,
            blocked: false,
            unlooked: CAPACITY_LOOK_EVERY,
            ended: false,
            failed: false,
            sleeps_until: None,
            rearm: false,
        }),
        missed: AtomicBool::new(false),
        probe_waker: Waker::from(probe.clone()),
        probe,
    });
    let _end = EndGuard(w.clone());
    let waker = Waker::from(w.clone());
    let task_frames = metrics::counter!("watchd_http2_watch_task_frames_total");
    let mut timer = Box::pin(tokio::time::sleep_until(Instant::now()));
    loop {
        {
            let mut st = w.lock();
            st.rearm = false;
            st.blocked = false;
            // Steps until the watch idles, the stream is out of capacity, or it ends;
            // the frames it sends are bounded by the stream's capacity.
            let idle = w.stepping(&mut st, |st| loop {
                if st.ended || st.failed {
                    break None;
                }
                match w.step(st, &waker) {
                    Stepped::Sent => task_frames.increment(1),
                    Stepped::Idle(at) => break Some(at),
                    Stepped::Blocked => {
                        st.blocked = true;
                        break None;
                    }
                    Stepped::End => {
                        st.ended = true;
                        break None;
                    }
                    Stepped::Failed => {
                        st.failed = true;
                        break None;
                    }
                }
            });
            if st.failed {
                return;
            }
            if st.ended {
                // The pass leaves an ended stream alone; `_end` takes the watch out.
                let _ = match end {
                    Some(trailers) => st.send.send_trailers(trailers()),
                    None => st.send.send_data(BufList::new(), true),
                };
                return;
            }
            st.sleeps_until = idle;
            if let Some(at) = idle {
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
            }
        }
        if !wait(&w, timer.as_mut()).await {
            return;
        }
    }
}

/// Waits until the pass hands over, a wake was missed, the timer fires (when the watch
/// idles) or capacity comes (when it is blocked); false when the stream was reset or the
/// connection ended.
async fn wait(w: &H2Watch, mut timer: std::pin::Pin<&mut tokio::time::Sleep>) -> bool {
    std::future::poll_fn(|cx| {
        w.probe.task.register(cx.waker());
        let blocked = {
            let mut st = w.lock();
            let mut probe = Context::from_waker(&w.probe_waker);
            if st.failed || st.send.poll_reset(&mut probe).is_ready() {
                return Poll::Ready(false);
            }
            if st.ended || st.rearm {
                return Poll::Ready(true);
            }
            if st.blocked {
                match st.send.poll_capacity(&mut probe) {
                    Poll::Ready(Some(Ok(_))) => return Poll::Ready(true),
                    Poll::Ready(_) => return Poll::Ready(false),
                    Poll::Pending => {}
                }
            }
            st.blocked
        };
        // Checked after the lock is let go: a wake that found it taken set the flag
        // before trying.
        if w.missed.swap(false, Ordering::SeqCst) {
            return Poll::Ready(true);
        }
        if !blocked && timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        Poll::Pending
    })
    .await
}
