//! A watch: a cursor into one resource's event log, with the request's filter.
//!
//! The session is polled by its connection task as the response body; it is not a queue.
//! Each poll drains what is ready (up to a batch) into one frame of shared `Bytes`
//! segments, so several events go out in one vectored write, and each event's frame was
//! built once for all watchers.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::body::BufList;
use super::query::{RvParam, Selectors, WatchQuery};
use super::read::{matches, wait_fresh};
use super::status::ApiError;
use super::ApiState;
use crate::config;
use crate::dispatch::WakeHandle;
use crate::store::{Cache, EventLog, EventType, Read, ResourceStore, Snapshot, WatchEvent};
use crate::Revision;

/// Synthetic ADDED events still to send from the starting snapshot.
struct InitialEvents {
    snapshot: Arc<Snapshot>,
    next_key: Option<Arc<str>>,
    end_bookmark: bool,
}

/// One open watch.
pub struct WatchSession {
    cache: Arc<Cache>,
    store: Arc<ResourceStore>,
    log: Arc<EventLog>,
    wake: WakeHandle,
    cursor: u64,
    after: Revision,
    sent: Revision,
    namespace: Option<String>,
    selectors: Selectors,
    initial: Option<InitialEvents>,
    allow_bookmarks: bool,
    deadline: Instant,
    next_bookmark: Instant,
    done: bool,
}

/// How a watch starts: a session, or an error to send as the only event.
pub enum WatchStart {
    /// Stream events from this session.
    Session(Box<WatchSession>),
    /// Send one ERROR event with this status, then close.
    Error(ApiError),
}

impl WatchSession {
    /// Validates nothing (the query already is); resolves the start revision and builds
    /// the session. Errors before the stream starts are returned as HTTP errors.
    pub async fn start(
        state: &ApiState,
        store: Arc<ResourceStore>,
        namespace: Option<String>,
        q: WatchQuery,
    ) -> Result<WatchStart, ApiError> {
        let wants_initial = match (q.send_initial_events, q.rv) {
            (Some(b), _) => b,
            (None, RvParam::Unset | RvParam::Any) => true,
            (None, RvParam::At(_)) => false,
        };
        let (log, cursor, after, initial) = if wants_initial {
            let applied = wait_fresh(state, q.rv).await?;
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
            let from = match q.rv {
                RvParam::At(n) => n,
                _ => state.cache.applied(),
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
        let wake = store.wake.subscribe(namespace.as_deref());
        metrics::gauge!("watchd_watchers", "resource" => store.info.qualified_name())
            .increment(1.0);
        Ok(WatchStart::Session(Box::new(WatchSession {
            cache: state.cache.clone(),
            store,
            log,
            wake,
            cursor,
            after,
            sent: after,
            namespace,
            selectors: q.selectors,
            initial,
            allow_bookmarks: q.allow_bookmarks,
            deadline,
            next_bookmark: first_bookmark(now, deadline),
            done: false,
        })))
    }

    /// The next frame of the body; None when the watch ends.
    pub async fn next_frame(&mut self) -> Option<BufList> {
        if self.done {
            return None;
        }
        if self.initial.is_some() {
            return Some(self.initial_frame());
        }
        loop {
            if Instant::now() >= self.deadline {
                self.done = true;
                return None;
            }
            let applied = self.cache.applied();
            let notify = self.wake.notifier();
            let wake = notify.notified();
            tokio::pin!(wake);
            wake.as_mut().enable();
            let mut out = BufList::new();
            if self.drain(&mut out) || out.segment_count() > 0 {
                return Some(out);
            }
            if self.allow_bookmarks && Instant::now() >= self.next_bookmark {
                self.next_bookmark = next_bookmark(Instant::now(), self.deadline);
                let rv = self.sent.max(applied);
                if rv >= self.after {
                    self.sent = rv;
                    return Some(BufList::from(self.bookmark(rv, false)));
                }
            }
            let wait_until = if self.allow_bookmarks {
                self.next_bookmark.min(self.deadline)
            } else {
                self.deadline
            };
            tokio::select! {
                _ = &mut wake => {}
                _ = tokio::time::sleep_until(wait_until) => {}
            }
        }
    }

    /// Moves ready events into `out`; true if the watch must end after them.
    fn drain(&mut self, out: &mut BufList) -> bool {
        let mut events = 0;
        while events < config::WATCH_BATCH_MAX {
            match self.log.read(self.cursor) {
                Read::Event(ev) => {
                    self.cursor += 1;
                    if ev.revision <= self.after {
                        continue;
                    }
                    self.sent = ev.revision;
                    if let Some(frame) = self.frame_for(&ev) {
                        out.push(frame);
                        events += 1;
                    }
                }
                Read::Pending => {
                    if self.log.is_closed() {
                        return self.end_with(
                            out,
                            ApiError::Expired(
                                "the cache was re-listed from etcd; re-list and watch again".into(),
                            ),
                        );
                    }
                    return false;
                }
                Read::Expired => {
                    let oldest = self.log.oldest_revision();
                    return self.end_with(out, ApiError::too_old(self.sent.0, oldest.0));
                }
            }
        }
        false
    }

    fn end_with(&mut self, out: &mut BufList, err: ApiError) -> bool {
        metrics::counter!("watchd_watchers_expired_total", "resource" => self.store.info.qualified_name()).increment(1);
        out.push(error_frame(&err));
        self.done = true;
        true
    }

    fn passes(&self, obj: &crate::store::CachedObject) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.namespace() == Some(ns))
            && matches(obj, &self.selectors)
    }

    /// The frame this watcher gets for an event: selectors turn an update into ADDED or
    /// DELETED when the object starts or stops matching.
    fn frame_for(&self, ev: &WatchEvent) -> Option<Bytes> {
        let now = ev.object.as_deref().is_some_and(|o| self.passes(o));
        let before = ev.prev.as_deref().is_some_and(|o| self.passes(o));
        let t = match (ev.object.is_some(), now, before) {
            (true, true, true) => EventType::Modified,
            (true, true, false) => EventType::Added,
            (_, false, true) => EventType::Deleted,
            _ => return None,
        };
        ev.json_frame(t)
    }

    fn initial_frame(&mut self) -> BufList {
        let mut out = BufList::new();
        let Some(init) = self.initial.as_mut() else {
            return out;
        };
        let mut sent = 0;
        let mut next = None;
        let snapshot = init.snapshot.clone();
        for obj in snapshot.range(self.namespace.as_deref(), init.next_key.as_deref()) {
            if sent == config::WATCH_BATCH_MAX {
                next = Some(obj.key().clone());
                break;
            }
            if matches(obj, &self.selectors) {
                out.push_static(EventType::Added.json_frame_prefix());
                out.push(obj.json.clone());
                out.push_static(crate::store::event_log::JSON_FRAME_SUFFIX);
                sent += 1;
            }
        }
        match next {
            Some(k) => init.next_key = Some(k),
            None => {
                let end = init.end_bookmark;
                self.initial = None;
                if end {
                    out.push(self.bookmark(self.after, true));
                }
            }
        }
        out
    }

    fn bookmark(&self, rv: Revision, initial_events_end: bool) -> Bytes {
        let annotations = if initial_events_end {
            ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
        } else {
            ""
        };
        Bytes::from(format!(
            "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{rv}\"{annotations}}}}}}}\n",
            self.store.info.kind,
            self.store.info.api_version()
        ))
    }
}

impl Drop for WatchSession {
    fn drop(&mut self) {
        metrics::gauge!("watchd_watchers", "resource" => self.store.info.qualified_name())
            .decrement(1.0);
    }
}

/// `{"type":"ERROR","object":<Status>}\n`.
pub fn error_frame(err: &ApiError) -> Bytes {
    let mut b = br#"{"type":"ERROR","object":"#.to_vec();
    b.extend_from_slice(&serde_json::to_vec(&err.to_status()).unwrap_or_default());
    b.extend_from_slice(b"}\n");
    Bytes::from(b)
}

fn first_bookmark(now: Instant, deadline: Instant) -> Instant {
    next_bookmark(now, deadline)
}

/// About once a minute, and once shortly before the watch's timeout.
fn next_bookmark(now: Instant, deadline: Instant) -> Instant {
    let before_end = deadline
        .checked_sub(config::BOOKMARK_BEFORE_TIMEOUT)
        .unwrap_or(deadline);
    let periodic = now + config::BOOKMARK_INTERVAL;
    if before_end > now {
        periodic.min(before_end)
    } else {
        periodic.min(deadline + Duration::from_secs(1))
    }
}
