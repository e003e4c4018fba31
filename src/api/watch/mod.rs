//! A watch: a cursor into one resource's event log, with the request's filter.
//!
//! The session is polled by its connection task as the response body; it is not a queue.
//! Each poll drains what is ready (up to a batch) into one frame, written by the
//! frontend's [`WatchEncoder`]: for HTTP, shared `Bytes` segments sent with one vectored
//! write, each event's frame built once for all watchers.

use std::sync::Arc;
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;
use std::task::{Poll, Waker};

use tokio::time::{Instant, Sleep};

pub mod merged;

pub use crate::dispatch::in_shard;
/// What a frontend needs of dispatch to serve a connection's watches together, so that
/// no frontend imports it: a shard per connection, dealt when it is accepted
/// ([`next_shard`]); its requests served in it ([`in_shard`]), so every watch of the
/// connection is woken by one thread; and the connection's task woken once at the end of
/// a pass that queued its streams' frames ([`AtPassEnd`]).
pub use crate::dispatch::pass::AtPassEnd;
pub use crate::dispatch::shards::next_hint as next_shard;

use super::filter::{wake_key, Filter};
use super::query::{RvParam, WatchQuery};
use super::read::{matches, wait_fresh, ReadContext};
use super::status::ApiError;
use crate::config;
use crate::dispatch::{WakeHandle, WakeKey};
use crate::registry::ResourceInfo;
use crate::store::{
    Cache, EventLog, EventType, ObjectRef, Read, ResourceStore, Snapshot, WatchEvent,
};
use crate::Revision;

/// The wire encodings whose watch frames each event caches, one slot each (below
/// [`crate::store::event_log::FRAME_ENCODINGS`]): a frame is built once per event, type
/// and encoding, by the encoder that first needs it, and shared by every watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameEncoding {
    /// Kubernetes JSON lines (`{"type":...,"object":...}\n`).
    JsonLines = 0,
    /// Kubernetes protobuf (length-prefixed `WatchEvent`).
    KubeProtobuf = 1,
    /// The gRPC API's `WatchEvent`, its object as JSON.
    GrpcJson = 2,
    /// The gRPC API's `WatchEvent`, its object as Kubernetes protobuf where it has one.
    GrpcProtobuf = 3,
}

/// How a frontend writes what a watch sends; one encoder per watch, filled between polls.
pub trait WatchEncoder: Send + 'static {
    /// What one poll yields (one body frame, one stream message).
    type Frame: Send + 'static;
    /// A change from the event log, as event type `t`.
    fn event(&mut self, t: EventType, ev: &WatchEvent);
    /// A synthetic ADDED of the initial state.
    fn initial(&mut self, obj: &ObjectRef);
    /// A BOOKMARK at `rv`; `initial_events_end` marks the end of a streaming list.
    fn bookmark(&mut self, info: &ResourceInfo, rv: Revision, initial_events_end: bool);
    /// The ERROR event that ends a watch.
    fn error(&mut self, err: &ApiError);
    /// Items written since the last `take`.
    fn pending(&self) -> usize;
    /// Bytes written since the last `take` (for the bytes-sent metric).
    fn pending_bytes(&self) -> usize;
    /// Whether the frame being built should be sent before more is added (a frontend
    /// whose messages are bounded in size); at most [`config::WATCH_BATCH_MAX`] events
    /// go in a frame whatever it says.
    fn full(&self) -> bool {
        false
    }
    /// The events that follow are of collection `part` of a merged watch
    /// ([`merged::MergedSession`]); frontends without merged watches ignore it.
    fn set_part(&mut self, _part: u32) {}
    /// The frame of everything written since the last `take`.
    fn take(&mut self) -> Self::Frame;
}

/// Why a watch ended, for `watchd_watchers_ended_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndReason {
    /// Its `timeoutSeconds` (or the default) passed.
    Timeout,
    /// Its cursor fell out of the history window: 410.
    Expired,
    /// The cache re-listed etcd (a new epoch): 410.
    Relist,
    /// Its resource re-initializes (a value went unreadable): the stream just ends.
    Reinitializing,
    /// The client went away, the connection was closed, or a wrapper ended it.
    Closed,
    /// The server is shutting down: ended (as a timeout ends it) within the watch
    /// termination grace period, so the client watches again elsewhere.
    ShuttingDown,
}

impl EndReason {
    fn label(self) -> &'static str {
        match self {
            EndReason::Timeout => "timeout",
            EndReason::Expired => "expired",
            EndReason::Relist => "relist",
            EndReason::Reinitializing => "reinitializing",
            EndReason::Closed => "closed",
            EndReason::ShuttingDown => "shutting_down",
        }
    }
}

/// A watch's metrics: handles looked up once, at the start, and counts added to them
/// about once a second (and when the watch ends) rather than per frame, since a shared
/// counter costs atomic operations every watcher would contend on. The dispatch lag is
/// sampled on the first frame after each flush.
struct WatchMetrics {
    events: metrics::Counter,
    bytes: metrics::Counter,
    bookmarks: metrics::Counter,
    lag: metrics::Histogram,
    unflushed_events: u64,
    unflushed_bytes: u64,
    flushed_at: Instant,
    sample_lag: bool,
}

/// How often a watch adds its counts to the shared metrics.
const METRICS_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

impl WatchMetrics {
    fn new(resource: String) -> Self {
        WatchMetrics {
            events: metrics::counter!("watchd_watch_events_sent_total", "resource" => resource.clone()),
            bytes: metrics::counter!("watchd_watch_bytes_sent_total", "resource" => resource.clone()),
            bookmarks: metrics::counter!("watchd_watch_bookmarks_sent_total", "resource" => resource),
            lag: metrics::histogram!("watchd_watch_dispatch_lag_seconds"),
            unflushed_events: 0,
            unflushed_bytes: 0,
            flushed_at: Instant::now(),
            sample_lag: true,
        }
    }

    /// Counts a frame of `events` items and `bytes` bytes whose oldest event was applied
    /// at `oldest`, as of `now`.
    fn frame(
        &mut self,
        events: usize,
        bytes: usize,
        oldest: Option<std::time::Instant>,
        now: Instant,
    ) {
        self.unflushed_events += events as u64;
        self.unflushed_bytes += bytes as u64;
        if let (true, Some(at)) = (self.sample_lag, oldest) {
            self.lag.record(at.elapsed().as_secs_f64());
            self.sample_lag = false;
        }
        if now.duration_since(self.flushed_at) >= METRICS_FLUSH_INTERVAL {
            self.flush(now);
        }
    }

    fn flush(&mut self, now: Instant) {
        self.events
            .increment(std::mem::take(&mut self.unflushed_events));
        self.bytes
            .increment(std::mem::take(&mut self.unflushed_bytes));
        self.flushed_at = now;
        self.sample_lag = true;
    }
}

/// Synthetic ADDED events still to send from the starting snapshot.
struct InitialEvents {
    snapshot: Arc<Snapshot>,
    next_key: Option<Arc<str>>,
    end_bookmark: bool,
}

/// One open watch.
pub struct WatchSession<E: WatchEncoder> {
    encoder: E,
    cache: Arc<Cache>,
    store: Arc<ResourceStore>,
    log: Arc<EventLog>,
    wake: WakeHandle,
    /// The bit of the key the watcher is found by (all ones without one).
    key_bit: u64,
    cursor: u64,
    after: Revision,
    sent: Revision,
    filter: Filter,
    initial: Option<InitialEvents>,
    allow_bookmarks: bool,
    deadline: Instant,
    /// Its place among the watches ended gradually at shutdown.
    drain_spread: u16,
    next_bookmark: Instant,
    bookmark_interval: Duration,
    batch_window: Duration,
    timer: Pin<Box<Sleep>>,
    done: bool,
    end: EndReason,
    metrics: WatchMetrics,
    /// When the oldest event of the frame being built was applied.
    oldest: Option<std::time::Instant>,
}

/// What one [`WatchSession::step`] gives.
pub enum Step<F> {
    /// A frame to write.
    Frame(F),
    /// Nothing to write now: step again when the waker is woken, or at this instant.
    Idle(Instant),
    /// The watch ended (after its last frame).
    End,
}

/// A watch stepped through a trait object: what a frontend that drives watches itself
/// needs of a session, whatever its encoder.
pub trait SteppedWatch<F>: Send {
    /// [`WatchSession::step`].
    fn step(&mut self, waker: &Waker) -> Step<F>;
    /// The watch as a stream of frames (for frontends that poll bodies).
    fn into_stream(self: Box<Self>) -> Pin<Box<dyn futures_util::Stream<Item = F> + Send>>;
}

impl<E: WatchEncoder> SteppedWatch<E::Frame> for WatchSession<E> {
    fn step(&mut self, waker: &Waker) -> Step<E::Frame> {
        WatchSession::step(self, waker)
    }

    fn into_stream(self: Box<Self>) -> Pin<Box<dyn futures_util::Stream<Item = E::Frame> + Send>> {
        Box::pin(futures_util::stream::unfold(self, |mut s| async move {
            s.next_frame().await.map(|f| (f, s))
        }))
    }
}

/// How a watch starts: a session, or an error to send as the only event.
pub enum WatchStart<E: WatchEncoder> {
    /// Stream events from this session.
    Session(Box<WatchSession<E>>),
    /// Send one ERROR event with this status, then close.
    Error(ApiError),
}

impl<E: WatchEncoder> WatchSession<E> {
    /// Resolves the start revision (the query is already validated) and builds the
    /// session. Errors before the stream starts are returned, to be answered as errors.
    pub async fn start(
        state: &ReadContext,
        store: Arc<ResourceStore>,
        namespace: Option<String>,
        q: WatchQuery,
        encoder: E,
    ) -> Result<WatchStart<E>, ApiError> {
        // kube-apiserver answers every watch of a resource whose cache is not ready 429;
        // after the initial sync, once the watch has waited for the state it starts from.
        let not_ready = || match store.health.readiness() {
            crate::store::Readiness::Ready => Ok(()),
            r => Err(super::read::not_ready(&r)),
        };
        if !state.cache.is_synced() {
            not_ready()?;
        }
        state.memory.admit(crate::memory::Admission::Watch)?;
        let (log, cursor, after, initial) = if q.wants_initial() {
            let applied = wait_fresh(state, &store, q.rv).await?;
            not_ready()?;
            let view = store.view(applied);
            let cursor = match view.log.cursor_after(view.revision) {
                Ok(c) => c,
                Err(old) => {
                    return Ok(WatchStart::Error(ApiError::too_old(
                        view.revision.0,
                        old.oldest.0,
                    )))
                }
            };
            let initial = InitialEvents {
                snapshot: view.snapshot,
                next_key: None,
                end_bookmark: q.send_initial_events == Some(true) && q.allow_bookmarks,
            };
            (view.log, cursor, view.revision, Some(initial))
        } else {
            not_ready()?;
            let from = match q.rv {
                RvParam::At(n) => n,
                _ => state.cache.progress().of(&store),
            };
            let log = store.log();
            match log.cursor_after(from) {
                Ok(c) => (log, c, from, None),
                Err(old) => {
                    metrics::counter!("watchd_watchers_expired_total", "resource" => store.info.qualified_name())
                        .increment(1);
                    return Ok(WatchStart::Error(ApiError::too_old(from.0, old.oldest.0)));
                }
            }
        };
        let now = Instant::now();
        let deadline = now + q.timeout;
        let key = wake_key(&store, namespace.as_deref(), &q.selectors);
        let key_bit = key.as_ref().map_or(u64::MAX, WakeKey::bit);
        let wake = store.wake.subscribe(key);
        metrics::gauge!("watchd_watchers", "resource" => store.info.qualified_name())
            .increment(1.0);
        let metrics = WatchMetrics::new(store.info.qualified_name());
        Ok(WatchStart::Session(Box::new(WatchSession {
            encoder,
            cache: state.cache.clone(),
            store,
            log,
            wake,
            key_bit,
            cursor,
            after,
            sent: after,
            filter: Filter {
                namespace,
                selectors: q.selectors,
            },
            initial,
            allow_bookmarks: q.allow_bookmarks,
            deadline,
            drain_spread: state.cache.drain_spread(),
            next_bookmark: next_bookmark(now, deadline, state.bookmark_interval),
            bookmark_interval: state.bookmark_interval,
            batch_window: state.watch_batch_window,
            timer: Box::pin(tokio::time::sleep_until(deadline)),
            done: false,
            end: EndReason::Closed,
            metrics,
            oldest: None,
        })))
    }

    /// The frame of everything encoded since the last one, counted in the metrics.
    fn take_frame(&mut self, now: Instant) -> E::Frame {
        let (events, bytes) = (self.encoder.pending(), self.encoder.pending_bytes());
        self.metrics.frame(events, bytes, self.oldest.take(), now);
        self.encoder.take()
    }

    /// One step of the watch, without waiting: the initial events' next frame, or what
    /// the log holds ready, or a bookmark that is due. The watcher's wake-up is armed
    /// with `waker` before the log is read, so an event appended after the look wakes
    /// it. [`Step::Idle`] says when to step again if nothing wakes it sooner (the next
    /// bookmark, the end of a batch window, or the watch's deadline).
    ///
    /// The async [`WatchSession::next_frame`] is built on it; a frontend may also step a
    /// watch from the waker itself (`api::http::h1` writes the frame to the socket
    /// there, without waking the connection's task).
    pub fn step(&mut self, waker: &Waker) -> Step<E::Frame> {
        if self.done {
            return Step::End;
        }
        if self.initial.is_some() {
            self.initial_frame();
            return Step::Frame(self.take_frame(Instant::now()));
        }
        let now = Instant::now();
        let deadline = self.cache.watch_ends_at(self.deadline, self.drain_spread);
        if now >= deadline {
            self.done = true;
            self.end = if deadline < self.deadline {
                EndReason::ShuttingDown
            } else {
                EndReason::Timeout
            };
            return Step::End;
        }
        // Only bookmarks need the applied revision; loading it costs a shared lock read.
        let applied = if self.allow_bookmarks {
            self.cache.progress().of(&self.store)
        } else {
            Revision::ZERO
        };
        self.wake.waiter().arm(waker);
        self.drain();
        if self.encoder.pending() > 0 {
            if let Some(until) = self.batch_hold(now) {
                return Step::Idle(until);
            }
            return Step::Frame(self.take_frame(now));
        }
        if self.done {
            return Step::End;
        }
        if self.allow_bookmarks && now >= self.next_bookmark {
            self.next_bookmark = next_bookmark(now, self.deadline, self.bookmark_interval);
            let rv = self.sent.max(applied);
            if rv >= self.after {
                self.sent = rv;
                self.encoder.bookmark(&self.store.info, rv, false);
                self.metrics.bookmarks.increment(1);
                return Step::Frame(self.encoder.take());
            }
        }
        Step::Idle(if self.allow_bookmarks {
            self.next_bookmark.min(deadline)
        } else {
            deadline
        })
    }

    /// The next frame; None when the watch ends.
    pub async fn next_frame(&mut self) -> Option<E::Frame> {
        next_step(self).await
    }

    /// With a batch window, the instant until which the frame being built waits for
    /// more events to join it: fewer, larger writes for up to the window of added
    /// latency. None when it goes now (no window, the window passed, or a full frame).
    fn batch_hold(&self, now: Instant) -> Option<Instant> {
        if self.batch_window.is_zero()
            || self.done
            || self.encoder.pending() >= config::WATCH_BATCH_MAX
        {
            return None;
        }
        let until = Instant::from_std(self.oldest? + self.batch_window).min(self.deadline);
        (until > now).then_some(until)
    }

    /// Encodes ready events, up to a batch; ends the watch if its cursor expired.
    fn drain(&mut self) {
        let mut events = 0;
        while events < config::WATCH_BATCH_MAX && !self.encoder.full() {
            match self.log.read(self.cursor) {
                Read::Event(ev) => {
                    self.cursor += 1;
                    if ev.revision <= self.after {
                        continue;
                    }
                    self.sent = ev.revision;
                    // Neither state can be found by this watcher's key: its filter,
                    // which requires that key, cannot pass either (one bit test).
                    if ev.key_bits & self.key_bit == 0 {
                        continue;
                    }
                    if let Some(t) = self.filter.classify(&ev, &self.store.field_names) {
                        self.encoder.event(t, &ev);
                        self.oldest.get_or_insert(ev.applied_at());
                        events += 1;
                    }
                }
                read => {
                    match end_of_log(&self.log, &read, self.sent) {
                        Some((reason, Some(err))) => self.end_with(err, reason),
                        Some((reason, None)) => {
                            self.done = true;
                            self.end = reason;
                        }
                        None => {}
                    }
                    return;
                }
            }
        }
    }

    fn end_with(&mut self, err: ApiError, reason: EndReason) {
        metrics::counter!("watchd_watchers_expired_total", "resource" => self.store.info.qualified_name())
            .increment(1);
        self.encoder.error(&err);
        self.done = true;
        self.end = reason;
    }

    fn initial_frame(&mut self) {
        let Some(init) = self.initial.as_mut() else {
            return;
        };
        let next = initial_batch(
            &mut self.encoder,
            &init.snapshot,
            (&self.filter, &self.store.field_names),
            init.next_key.as_deref(),
        );
        match next {
            Some(k) => init.next_key = Some(k),
            None => {
                let end = init.end_bookmark;
                self.initial = None;
                if end {
                    self.encoder.bookmark(&self.store.info, self.after, true);
                    self.metrics.bookmarks.increment(1);
                }
            }
        }
    }
}

impl<E: WatchEncoder> Drop for WatchSession<E> {
    fn drop(&mut self) {
        self.metrics.flush(Instant::now());
        let resource = self.store.info.qualified_name();
        metrics::gauge!("watchd_watchers", "resource" => resource.clone()).decrement(1.0);
        metrics::counter!("watchd_watchers_ended_total", "resource" => resource, "reason" => self.end.label())
            .increment(1);
    }
}

/// Why a stream ends whose cursor read `read` (no event) in `log` after sending every
/// event up to `sent`, if it does: quietly while the resource re-initializes (no error),
/// or with a 410 when the log was replaced by a re-list or the cursor fell out of the
/// history kept. None: nothing yet.
fn end_of_log(
    log: &EventLog,
    read: &Read,
    sent: Revision,
) -> Option<(EndReason, Option<ApiError>)> {
    if matches!(read, Read::Expired) {
        let err = ApiError::too_old(sent.0, log.oldest_revision().0);
        return Some((EndReason::Expired, Some(err)));
    }
    if log.is_terminated() {
        return Some((EndReason::Reinitializing, None));
    }
    if log.is_closed() {
        let msg = "the cache was re-listed from its source; re-list and watch again";
        return Some((EndReason::Relist, Some(ApiError::Expired(msg.into()))));
    }
    None
}

/// Gives `encoder` the objects of `snapshot` that `filter` passes, from key `from` on, as
/// initial ADDED events, until its frame holds [`config::WATCH_BATCH_MAX`] events or is
/// full. Returns the key to go on from; None once the snapshot is done.
fn initial_batch<E: WatchEncoder>(
    encoder: &mut E,
    snapshot: &Snapshot,
    (filter, field_names): (&Filter, &[String]),
    from: Option<&str>,
) -> Option<Arc<str>> {
    for obj in snapshot.range(filter.namespace.as_deref(), from) {
        if encoder.pending() >= config::WATCH_BATCH_MAX || encoder.full() {
            return Some(Arc::from(obj.key()));
        }
        if matches(obj, &filter.selectors, field_names) {
            encoder.initial(obj);
        }
    }
    None
}

/// A stream stepped as a watch is: what [`next_step`] needs of it.
trait Stepping {
    /// What a step yields.
    type Frame;
    /// One step, without waiting (as [`WatchSession::step`]).
    fn step_once(&mut self, waker: &Waker) -> Step<Self::Frame>;
    /// Whether a wake came since the step armed its wake-up (registering `waker`).
    fn woken(&self, waker: &Waker) -> bool;
    /// The stream's one timer, re-armed only when the instant to look again moves.
    fn timer(&mut self) -> Pin<&mut Sleep>;
}

/// The next frame of a stepped stream: steps it, and when it is idle waits for its
/// wake-up or its timer. None when it ends.
async fn next_step<S: Stepping>(s: &mut S) -> Option<S::Frame> {
    std::future::poll_fn(|cx| loop {
        match s.step_once(cx.waker()) {
            Step::Frame(f) => return Poll::Ready(Some(f)),
            Step::End => return Poll::Ready(None),
            Step::Idle(at) => {
                if s.timer().deadline() != at {
                    s.timer().reset(at);
                }
                if s.woken(cx.waker()) || s.timer().poll(cx).is_ready() {
                    continue;
                }
                return Poll::Pending;
            }
        }
    })
    .await
}

impl<E: WatchEncoder> Stepping for WatchSession<E> {
    type Frame = E::Frame;

    fn step_once(&mut self, waker: &Waker) -> Step<E::Frame> {
        self.step(waker)
    }

    fn woken(&self, waker: &Waker) -> bool {
        self.wake.waiter().woken(waker)
    }

    fn timer(&mut self) -> Pin<&mut Sleep> {
        self.timer.as_mut()
    }
}

/// About once per `interval`, and once shortly before the watch's timeout.
fn next_bookmark(now: Instant, deadline: Instant, interval: Duration) -> Instant {
    let before_end = deadline
        .checked_sub(config::BOOKMARK_BEFORE_TIMEOUT)
        .unwrap_or(deadline);
    let periodic = now + interval;
    if before_end > now {
        periodic.min(before_end)
    } else {
        periodic.min(deadline + Duration::from_secs(1))
    }
}
