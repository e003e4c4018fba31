//! A watch of several collections in one stream, in etcd's revision order, from one
//! starting revision (the gRPC API's WatchMany), written through a frontend's
//! [`WatchEncoder`] as a single watch is.
//!
//! Each collection keeps its own cursor into its resource's event log; a frame takes,
//! revision by revision, the lowest revision any cursor holds, and only revisions every
//! resource has applied (`Progress::of_all`, the same for all with etcd as the source:
//! ingestion appends a revision's events to every log before it raises the applied
//! revision). So no resource can still add an event below one already sent, and every
//! event of one etcd revision goes in the same frame. The initial state is each
//! collection's kept snapshot at one revision.

use std::pin::Pin;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use super::{end_of_log, initial_batch, next_step, Step, SteppedWatch, Stepping, WatchEncoder};
use crate::api::filter::{wake_key, Filter};
use crate::api::query::{RvParam, Selectors, WatchQuery};
use crate::api::read::{not_ready, wait_fresh_all, ReadContext};
use crate::api::status::ApiError;
use crate::config;
use crate::dispatch::{WakeHandle, WakeKey};
use crate::store::{Cache, EventLog, Read, Readiness, ResourceStore, Snapshot};
use crate::Revision;

/// One collection to watch: a resource, a namespace or all, and the selectors.
pub struct Collection {
    pub store: Arc<ResourceStore>,
    pub namespace: Option<String>,
    pub selectors: Selectors,
}

/// How soon to look again when a resource has events past what every resource applied
/// (with an upstream source, the others catch up without waking this stream).
const HELD_RECHECK: Duration = Duration::from_millis(20);

/// One collection of the stream.
struct Part {
    store: Arc<ResourceStore>,
    log: Arc<EventLog>,
    wake: WakeHandle,
    /// The bit of the key the part is found by (all ones without one).
    key_bit: u64,
    cursor: u64,
    filter: Filter,
}

/// Synthetic ADDED events of the starting state still to send.
struct Initial {
    snapshots: Vec<Arc<Snapshot>>,
    part: usize,
    next_key: Option<Arc<str>>,
}

/// A watch of several collections.
pub struct MergedSession<E: WatchEncoder> {
    cache: Arc<Cache>,
    parts: Vec<Part>,
    encoder: E,
    /// The revision the stream starts after.
    after: Revision,
    /// Every event up to this revision was sent.
    sent: Revision,
    /// The revision the lagging resources were last asked to reach.
    wanted: Revision,
    initial: Option<Initial>,
    allow_bookmarks: bool,
    deadline: Instant,
    /// Its place among the watches ended gradually at shutdown.
    drain_spread: u16,
    next_bookmark: Instant,
    bookmark_interval: Duration,
    timer: Pin<Box<Sleep>>,
    done: bool,
    events: metrics::Counter,
}

/// Whether every resource is ready (loaded, no value unreadable): as a watch of one that
/// is not, the call is answered 429.
fn ready(collections: &[Collection]) -> Result<(), ApiError> {
    for c in collections {
        match c.store.health.readiness() {
            Readiness::Ready => {}
            r => return Err(not_ready(&r)),
        }
    }
    Ok(())
}

impl<E: WatchEncoder> MergedSession<E> {
    /// Resolves the start revision of a watch of `collections` (`q` validated; they are
    /// not empty) and builds the session. The outer error is answered as the request's
    /// error; the inner one is sent as the stream's only (ERROR) event, as a watch that
    /// cannot start from its revision is answered.
    pub async fn start(
        read: &ReadContext,
        collections: Vec<Collection>,
        q: &WatchQuery,
        encoder: E,
    ) -> Result<Result<MergedSession<E>, ApiError>, ApiError> {
        read.memory.admit(crate::memory::Admission::Watch)?;
        ready(&collections)?;
        let wants_initial = q.wants_initial();
        let applied_by_all = || {
            read.cache
                .progress()
                .of_all(collections.iter().map(|c| &*c.store))
        };
        let mut parts = Vec::with_capacity(collections.len());
        let mut snapshots = Vec::new();
        let after = if wants_initial {
            let stores: Vec<_> = collections.iter().map(|c| c.store.clone()).collect();
            wait_fresh_all(read, &stores, q.rv).await?;
            ready(&collections)?;
            let at = applied_by_all();
            for c in &collections {
                let view = c.store.view(at);
                let Some(snapshot) = view.snapshot.as_of(at) else {
                    let oldest = view.log.oldest_revision();
                    return Ok(Err(ApiError::too_old(at.0, oldest.0)));
                };
                let cursor = match view.log.cursor_after(at) {
                    Ok(c) => c,
                    Err(old) => return Ok(Err(ApiError::too_old(at.0, old.oldest.0))),
                };
                snapshots.push(snapshot);
                parts.push((view.log, cursor));
            }
            at
        } else {
            let from = match q.rv {
                RvParam::At(n) => n,
                _ => applied_by_all(),
            };
            for c in &collections {
                let log = c.store.log();
                match log.cursor_after(from) {
                    Ok(cursor) => parts.push((log, cursor)),
                    Err(old) => {
                        metrics::counter!("watchd_watchers_expired_total", "resource" => c.store.info.qualified_name())
                            .increment(1);
                        return Ok(Err(ApiError::too_old(from.0, old.oldest.0)));
                    }
                }
            }
            from
        };
        let parts: Vec<Part> = collections
            .into_iter()
            .zip(parts)
            .map(|(c, (log, cursor))| {
                let key = wake_key(&c.store, c.namespace.as_deref(), &c.selectors);
                let key_bit = key.as_ref().map_or(u64::MAX, WakeKey::bit);
                Part {
                    wake: c.store.wake.subscribe(key),
                    store: c.store,
                    log,
                    key_bit,
                    cursor,
                    filter: Filter {
                        namespace: c.namespace,
                        selectors: c.selectors,
                    },
                }
            })
            .collect();
        let now = Instant::now();
        let deadline = now + q.timeout;
        metrics::gauge!("watchd_grpc_watch_many_streams").increment(1.0);
        Ok(Ok(MergedSession {
            cache: read.cache.clone(),
            parts,
            encoder,
            after,
            sent: after,
            wanted: after,
            initial: wants_initial.then(|| Initial {
                snapshots,
                part: 0,
                next_key: None,
            }),
            allow_bookmarks: q.allow_bookmarks,
            deadline,
            drain_spread: read.cache.drain_spread(),
            next_bookmark: now + read.bookmark_interval,
            bookmark_interval: read.bookmark_interval,
            timer: Box::pin(tokio::time::sleep_until(deadline)),
            done: false,
            events: metrics::counter!("watchd_grpc_watch_many_events_sent_total"),
        }))
    }

    /// The revision every part's resource has applied.
    fn applied(&self) -> Revision {
        self.cache
            .progress()
            .of_all(self.parts.iter().map(|p| &*p.store))
    }

    fn take(&mut self) -> E::Frame {
        self.events.increment(self.encoder.pending() as u64);
        self.encoder.take()
    }

    /// With an upstream source, asks the resources behind `rev` to prove they reached it
    /// (their followers' progress probe), once per revision.
    fn want(&mut self, rev: Revision) {
        if rev <= self.wanted {
            return;
        }
        self.wanted = rev;
        self.cache
            .progress()
            .want(self.parts.iter().map(|p| &*p.store), rev);
    }

    /// Encodes the events of revisions up to `applied` in revision order, whole
    /// revisions at a time, up to a message; ends the stream if a cursor expired or a
    /// log was replaced. Returns the lowest revision found past `applied`.
    fn drain(&mut self, applied: Revision) -> Option<Revision> {
        let mut held: Option<Revision> = None;
        let mut count = 0usize;
        let mut last: Option<Revision> = None;
        loop {
            let mut best: Option<(usize, Arc<crate::store::WatchEvent>)> = None;
            for (i, p) in self.parts.iter().enumerate() {
                match p.log.read(p.cursor) {
                    Read::Event(ev) if ev.revision > applied => {
                        held = Some(held.map_or(ev.revision, |h| h.min(ev.revision)));
                    }
                    Read::Event(ev) => {
                        if best.as_ref().is_none_or(|(_, b)| ev.revision < b.revision) {
                            best = Some((i, ev));
                        }
                    }
                    read => match end_of_log(&p.log, &read, self.sent) {
                        // As a watch's: quietly while the resource re-initializes.
                        Some((_, None)) => {
                            self.done = true;
                            return None;
                        }
                        Some((_, Some(err))) => {
                            self.end_with(err);
                            return None;
                        }
                        None => {}
                    },
                }
            }
            let Some((i, ev)) = best else { break };
            // A message ends only between revisions.
            if last.is_some_and(|r| r != ev.revision)
                && (count >= config::WATCH_BATCH_MAX || self.encoder.full())
            {
                break;
            }
            let p = &mut self.parts[i];
            p.cursor += 1;
            if ev.revision <= self.after {
                continue;
            }
            last = Some(ev.revision);
            if ev.key_bits & p.key_bit == 0 {
                continue;
            }
            if let Some(t) = p.filter.classify(&ev, &p.store.field_names) {
                self.encoder.set_part(i as u32);
                self.encoder.event(t, &ev);
                count += 1;
            }
        }
        if let Some(r) = last {
            self.sent = self.sent.max(r);
        }
        held
    }

    /// Ends the stream with `err` alone: events drained so far may stop inside a
    /// revision, and a client told 410 lists again anyway.
    fn end_with(&mut self, err: ApiError) {
        metrics::counter!("watchd_grpc_watch_many_expired_total").increment(1);
        // The events drained so far are dropped.
        let _ = self.encoder.take();
        self.encoder.error(&err);
        self.done = true;
    }

    /// The next frame of the initial state: objects of one part after another, then
    /// the bookmark that ends them.
    fn initial_message(&mut self) {
        let Some(init) = self.initial.as_mut() else {
            return;
        };
        while init.part < self.parts.len() {
            self.encoder.set_part(init.part as u32);
            let next = initial_batch(
                &mut self.encoder,
                &init.snapshots[init.part],
                (
                    &self.parts[init.part].filter,
                    &self.parts[init.part].store.field_names,
                ),
                init.next_key.as_deref(),
            );
            match next {
                Some(k) => {
                    init.next_key = Some(k);
                    return;
                }
                None => {
                    init.part += 1;
                    init.next_key = None;
                }
            }
        }
        self.initial = None;
        self.encoder.set_part(0);
        // Always, bookmarks allowed or not: it names the revision to resume from.
        let info = &self.parts[0].store.info;
        self.encoder.bookmark(info, self.after, true);
    }

    /// The next frame; None when the stream ends.
    pub async fn next_frame(&mut self) -> Option<E::Frame> {
        next_step(self).await
    }
}

impl<E: WatchEncoder> SteppedWatch<E::Frame> for MergedSession<E> {
    fn step(&mut self, waker: &Waker) -> Step<E::Frame> {
        self.step_once(waker)
    }

    fn into_stream(self: Box<Self>) -> Pin<Box<dyn futures_util::Stream<Item = E::Frame> + Send>> {
        Box::pin(futures_util::stream::unfold(self, |mut s| async move {
            s.next_frame().await.map(|m| (m, s))
        }))
    }
}

impl<E: WatchEncoder> Stepping for MergedSession<E> {
    type Frame = E::Frame;

    /// One step, without waiting (as [`super::WatchSession::step`]).
    fn step_once(&mut self, waker: &Waker) -> Step<E::Frame> {
        if self.done {
            return Step::End;
        }
        if self.initial.is_some() {
            self.initial_message();
            return Step::Frame(self.take());
        }
        let now = Instant::now();
        let deadline = self.cache.watch_ends_at(self.deadline, self.drain_spread);
        if now >= deadline {
            self.done = true;
            return Step::End;
        }
        for p in &self.parts {
            p.wake.waiter().arm(waker);
        }
        let applied = self.applied();
        let held = self.drain(applied);
        if self.encoder.pending() > 0 {
            return Step::Frame(self.take());
        }
        if self.done {
            return Step::End;
        }
        if let Some(rev) = held {
            self.want(rev);
        }
        if self.allow_bookmarks && now >= self.next_bookmark {
            self.next_bookmark = now + self.bookmark_interval;
            // Every event up to `applied` was taken above.
            self.sent = self.sent.max(applied);
            self.encoder
                .bookmark(&self.parts[0].store.info, self.sent, false);
            return Step::Frame(self.take());
        }
        let mut at = deadline;
        if self.allow_bookmarks {
            at = at.min(self.next_bookmark);
        }
        if held.is_some() {
            at = at.min(now + HELD_RECHECK);
        }
        Step::Idle(at)
    }

    fn woken(&self, waker: &Waker) -> bool {
        // Each part's waiter registers the waker again, so every one is asked.
        self.parts
            .iter()
            .fold(false, |w, p| p.wake.waiter().woken(waker) | w)
    }

    fn timer(&mut self) -> Pin<&mut Sleep> {
        self.timer.as_mut()
    }
}

impl<E: WatchEncoder> Drop for MergedSession<E> {
    fn drop(&mut self) {
        metrics::gauge!("watchd_grpc_watch_many_streams").decrement(1.0);
    }
}
