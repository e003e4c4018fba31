//! One resource's cache: the current snapshot, the ring of older ones, the event log of
//! the current epoch, and the wake index of its watchers.
//!
//! Only ingestion writes (one task); readers load `Arc`s and never wait on the writer.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::event_log::{EventLog, WatchEvent};
use super::health::{Health, Transition, Unreadable};
use super::object::ObjectRef;
use super::snapshot::{ObjectMap, Snapshot};
use crate::codec::{DecodeSpec, StorageFormat};
use crate::dispatch::{self, Dispatch, WakeIndex, WakeKey};
use crate::registry::ResourceRef;
use crate::Revision;

/// Sizes of the history kept per resource.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How old an event or snapshot may get before it is dropped.
    pub history_window: Duration,
    /// Most events kept.
    pub max_events: usize,
    /// Most snapshots kept.
    pub snapshot_ring: usize,
    /// Where its watchers' wake passes run.
    pub dispatch: Dispatch,
    /// Each resource's indexed field (`--index-field`).
    pub index_fields: crate::registry::index_fields::IndexFields,
}

#[cfg(test)]
impl StoreConfig {
    /// Small history sizes and inline wake passes, for unit tests.
    pub(crate) fn small() -> Self {
        StoreConfig {
            history_window: Duration::from_secs(60),
            max_events: 100,
            snapshot_ring: 4,
            dispatch: Dispatch::inline(),
            index_fields: Default::default(),
        }
    }
}

/// A change to one object, decoded and ready to apply.
pub enum Change {
    /// The object was created or updated.
    Put(ObjectRef),
    /// The object was deleted; `prev` is its last state as the source read it, used when
    /// the cache did not hold it.
    Delete {
        /// The object key.
        key: Arc<str>,
        /// The last state as etcd reported it.
        prev: Option<ObjectRef>,
    },
    /// The object's new value cannot be read: the resource is pending until it can (or
    /// the object is deleted); the cache forgets the object without an event.
    Unreadable {
        /// The object key.
        key: Arc<str>,
        /// What cannot be read, and why.
        value: Unreadable,
    },
}

/// A consistent view for serving a list or starting a watch: a snapshot, the log of the
/// same epoch, and the resourceVersion the view stands for.
pub struct View {
    /// The objects.
    pub snapshot: Arc<Snapshot>,
    /// The event log of the snapshot's epoch.
    pub log: Arc<EventLog>,
    /// The revision the view is valid at (never before `snapshot.revision`).
    pub revision: Revision,
}

/// The cache of one resource.
pub struct ResourceStore {
    /// What this resource is.
    pub info: ResourceRef,
    /// How its etcd values are read (decrypted, converted, fields extracted).
    pub decode: DecodeSpec,
    /// Its watchers' wake-up index.
    pub wake: Arc<WakeIndex>,
    /// Whether it may be served from the cache.
    pub health: Health,
    /// Names of the selectable fields, in the order of every cached object's field values
    /// (readers pass them to `CachedObject::field`).
    pub field_names: Arc<[String]>,
    current: ArcSwap<Snapshot>,
    log: ArcSwap<EventLog>,
    config: StoreConfig,
    /// Writer-only: the kept snapshots, oldest first, for trimming.
    ring: Mutex<VecDeque<(Instant, Arc<Snapshot>)>>,
    /// Its metrics, registered once: a lookup with a label per revision cost more than
    /// the revision's map insert.
    ingested: metrics::Counter,
    objects_gauge: metrics::Gauge,
    bytes_gauge: metrics::Gauge,
    history_events: metrics::Gauge,
    history_oldest: metrics::Gauge,
    /// Per-resource sources: the newest revision of this resource fully applied (the
    /// cache's applied revision stands for every resource otherwise).
    progress: watch::Sender<Revision>,
    /// Per-resource sources: the newest revision a reader waits for.
    wanted: watch::Sender<Revision>,
    /// Whether it was loaded once ([`ResourceStore::loaded_after`]).
    initialized: std::sync::atomic::AtomicBool,
}

impl Drop for ResourceStore {
    fn drop(&mut self) {
        super::rendered::RENDERED.cached_changed(self.current.load().bytes, 0);
    }
}

impl ResourceStore {
    /// An empty store at `revision` of `epoch`.
    pub fn new(
        info: ResourceRef,
        revision: Revision,
        epoch: u64,
        config: StoreConfig,
        decode: DecodeSpec,
    ) -> Self {
        let snapshot = Arc::new(Snapshot::new(
            revision,
            epoch,
            ObjectMap::new(),
            (0, 0),
            None,
        ));
        let metric_name = info.qualified_name();
        let field_names = info.fields.iter().map(|f| f.name.clone()).collect();
        ResourceStore {
            health: Health::new(info.qualified_name()),
            info,
            decode,
            wake: Arc::new(WakeIndex::new(config.dispatch.clone())),
            field_names,
            current: ArcSwap::new(snapshot.clone()),
            log: ArcSwap::new(Arc::new(EventLog::new(
                revision,
                epoch,
                config.max_events,
                config.history_window,
            ))),
            config,
            ring: Mutex::new(VecDeque::from([(Instant::now(), snapshot)])),
            ingested: metrics::counter!("watchd_events_ingested_total", "resource" => metric_name.clone()),
            objects_gauge: metrics::gauge!("watchd_cached_objects", "resource" => metric_name.clone()),
            bytes_gauge: metrics::gauge!("watchd_cached_bytes", "resource" => metric_name.clone()),
            history_events: metrics::gauge!("watchd_history_events", "resource" => metric_name.clone()),
            history_oldest: metrics::gauge!("watchd_history_oldest_revision", "resource" => metric_name),
            progress: watch::channel(revision).0,
            wanted: watch::channel(Revision::ZERO).0,
            initialized: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Records, the first time only, that the resource was loaded `after` the daemon
    /// started (`watchd_resource_init_seconds`).
    pub fn loaded_after(&self, after: Duration) {
        if !self
            .initialized
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            metrics::gauge!("watchd_resource_init_seconds", "resource" => self.info.qualified_name())
                .set(after.as_secs_f64());
        }
    }

    /// The newest revision of this resource fully applied (per-resource sources).
    pub fn progress(&self) -> Revision {
        *self.progress.borrow()
    }

    /// Records that every change of this resource up to `revision` is applied (it never
    /// goes back), and wakes readers waiting for it.
    pub fn set_progress(&self, revision: Revision) {
        self.progress.send_if_modified(|r| {
            let newer = revision > *r;
            if newer {
                *r = revision;
            }
            newer
        });
    }

    /// Follows [`ResourceStore::progress`].
    pub fn subscribe_progress(&self) -> watch::Receiver<Revision> {
        self.progress.subscribe()
    }

    /// Says a reader waits for `revision` of this resource.
    pub fn want(&self, revision: Revision) {
        self.wanted.send_if_modified(|r| {
            let newer = revision > *r;
            if newer {
                *r = revision;
            }
            newer
        });
    }

    /// Follows the newest revision readers wait for (see [`ResourceStore::want`]).
    pub fn subscribe_wanted(&self) -> watch::Receiver<Revision> {
        self.wanted.subscribe()
    }

    /// The newest snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// The current epoch's event log.
    pub fn log(&self) -> Arc<EventLog> {
        self.log.load_full()
    }

    /// A view at the newest state, given the cache's applied revision loaded *before*
    /// this call (so the view's revision is never ahead of what the snapshot holds).
    pub fn view(&self, applied_before: Revision) -> View {
        // A re-list swaps the log, then the snapshot; retry until both are of one epoch.
        loop {
            let log = self.log();
            let snapshot = self.snapshot();
            if log.epoch() != snapshot.epoch {
                std::thread::yield_now();
                continue;
            }
            let revision = applied_before.max(snapshot.revision);
            return View {
                snapshot,
                log,
                revision,
            };
        }
    }

    /// Applies all changes of one etcd revision, adding to `keys` the wake keys of every
    /// state involved (new and previous) so the caller can wake their watchers once.
    /// Returns how the resource's health moved: when it broke, its watchers were ended
    /// (their clients watch again and wait, as kube-apiserver's do); when it healed, the
    /// caller starts a new epoch for it.
    ///
    /// With `kept` false (the cache is not synced yet: reads do not use its snapshots)
    /// the revision's snapshot replaces the ring instead of joining it: replaying history
    /// at start keeps the events for watchers resuming, not a snapshot per revision
    /// replayed, which each held a copy of the paths it changed (with 100 changes per
    /// revision, 170 MB of 290 for 50 000 pods).
    pub fn apply(
        &self,
        revision: Revision,
        changes: Vec<Change>,
        keys: &mut HashSet<WakeKey>,
        kept: bool,
    ) -> Transition {
        let cur = self.snapshot();
        let log = self.log();
        let mut objects = cur.objects.clone();
        let (mut bytes, mut json_objects) = (cur.bytes, cur.json_objects);
        let (mut appended, mut forgotten) = (0usize, 0usize);
        let indexed = self.info.indexed_field();
        let unheld = |p: &ObjectRef, bytes: &mut usize, json_objects: &mut usize| {
            *bytes = bytes.saturating_sub(p.cached_bytes());
            *json_objects =
                json_objects.saturating_sub(usize::from(p.format() == StorageFormat::Json));
        };
        for change in changes {
            let mut event = match change {
                Change::Put(obj) => {
                    self.health.clear(obj.key());
                    bytes += obj.cached_bytes();
                    json_objects += usize::from(obj.format() == StorageFormat::Json);
                    let prev = objects.insert(obj.clone());
                    if let Some(p) = &prev {
                        unheld(p, &mut bytes, &mut json_objects);
                    }
                    WatchEvent::new(revision, Some(obj), prev)
                }
                Change::Delete { key, prev } => {
                    self.health.clear(&key);
                    match objects.remove(&key) {
                        Some(p) => {
                            unheld(&p, &mut bytes, &mut json_objects);
                            WatchEvent::new(revision, None, Some(p))
                        }
                        // Never held: etcd's last state, for the event only.
                        None => match prev {
                            Some(p) => WatchEvent::new(revision, None, Some(p)),
                            None => continue,
                        },
                    }
                }
                Change::Unreadable { key, value } => {
                    if let Some(p) = objects.remove(&key) {
                        unheld(&p, &mut bytes, &mut json_objects);
                        forgotten += 1;
                    }
                    self.health.set(key, value);
                    continue;
                }
            };
            let mut bits = 0;
            for o in event.object.iter().chain(event.prev.iter()) {
                let value = indexed.and_then(|f| o.field(&self.field_names, f));
                bits |= dispatch::keys_of(keys, o.namespace(), o.name(), value);
            }
            event.key_bits = bits;
            log.append(event);
            appended += 1;
        }
        let transition = self.health.publish();
        if transition == Transition::Broke {
            log.terminate();
            self.wake.wake_all();
        }
        if appended + forgotten == 0 {
            return transition;
        }
        self.ingested.increment(appended as u64);
        self.report_history(&log);
        let epoch = cur.epoch;
        let snap = Arc::new(Snapshot::new(
            revision,
            epoch,
            objects,
            (bytes, json_objects),
            kept.then_some(cur),
        ));
        if !kept {
            if let Ok(mut ring) = self.ring.lock() {
                ring.clear();
            }
        }
        self.publish(snap);
        transition
    }

    /// Starts a new epoch at `revision` with these objects: the old epoch's watchers are
    /// ended (their log is closed) and its snapshots forgotten.
    pub fn reset(&self, revision: Revision, epoch: u64, objects: ObjectMap) {
        let bytes = objects.values().map(|o| o.cached_bytes()).sum();
        let json_objects = objects
            .values()
            .filter(|o| o.format() == StorageFormat::Json)
            .count();
        let old_log = self.log();
        self.log.store(Arc::new(EventLog::new(
            revision,
            epoch,
            self.config.max_events,
            self.config.history_window,
        )));
        old_log.close();
        self.history_events.set(0.0);
        self.history_oldest.set(revision.0 as f64);
        let snap = Arc::new(Snapshot::new(
            revision,
            epoch,
            objects,
            (bytes, json_objects),
            None,
        ));
        if let Ok(mut ring) = self.ring.lock() {
            if let Some((_, newest)) = ring.back() {
                newest.forget_older();
            }
            ring.clear();
        }
        self.publish(snap);
        self.progress.send_replace(revision);
        self.wake.wake_all();
    }

    /// Ends every watcher of this store: it is no longer served (its definition changed or
    /// was removed), so their clients must re-list.
    pub fn retire(&self) {
        self.log().close();
        self.wake.wake_all();
    }

    fn publish(&self, snap: Arc<Snapshot>) {
        self.objects_gauge.set(snap.objects.len() as f64);
        self.bytes_gauge.set(snap.bytes as f64);
        let was = self.current.swap(snap.clone());
        super::rendered::RENDERED.cached_changed(was.bytes, snap.bytes);
        let Ok(mut ring) = self.ring.lock() else {
            return;
        };
        let now = Instant::now();
        ring.push_back((now, snap));
        self.prune_ring(&mut ring, now);
    }

    /// Drops the oldest snapshots past the ring's size or the window at `now`, never the
    /// newest; returns how many. A snapshot's age counts from when the next one replaced
    /// it: one that stayed current through a quiet spell longer than the window is still
    /// what a list that began just before the next change reads.
    fn prune_ring(&self, ring: &mut VecDeque<(Instant, Arc<Snapshot>)>, now: Instant) -> usize {
        let limit = now.checked_sub(self.config.history_window);
        let mut dropped = 0;
        while ring.len() > 1 {
            let too_many = ring.len() > self.config.snapshot_ring.max(1);
            let replaced = ring.get(1).map(|(t, _)| *t);
            let too_old = matches!((limit, replaced), (Some(l), Some(t)) if t < l);
            if !(too_many || too_old) {
                break;
            }
            ring.pop_front();
            dropped += 1;
            if let Some((_, oldest)) = ring.front() {
                oldest.forget_older();
            }
        }
        dropped
    }

    /// Sets the history's gauges from `log`.
    fn report_history(&self, log: &EventLog) {
        self.history_events.set(log.len() as f64);
        self.history_oldest.set(log.oldest_revision().0 as f64);
    }

    /// Drops the events and past snapshots older than the history window at `now`,
    /// which a change drops too: a resource that went quiet after a burst keeps them
    /// (and the past states of objects they hold) otherwise. Only its writer calls it,
    /// as it alone appends. Returns how many events and snapshots were dropped.
    pub fn expire(&self, now: Instant) -> (usize, usize) {
        let log = self.log();
        let events = log.expire(now);
        if events > 0 {
            self.report_history(&log);
        }
        let snapshots = match self.ring.lock() {
            Ok(mut ring) => self.prune_ring(&mut ring, now),
            Err(_) => 0,
        };
        (events, snapshots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Cache, StoreConfig};

    fn snapshot(revision: i64) -> Arc<Snapshot> {
        Arc::new(Snapshot::new(
            Revision(revision),
            1,
            ObjectMap::new(),
            (0, 0),
            None,
        ))
    }

    #[test]
    fn a_snapshot_ages_from_when_it_was_replaced_not_when_it_was_made() {
        let cache = Cache::new("/registry", StoreConfig::small());
        let store = cache
            .resources()
            .by_dir("configmaps")
            .next()
            .cloned()
            .unwrap();
        let window = store.config.history_window;
        let t0 = Instant::now();
        // Revision 2 was current for an hour, then revision 3 replaced it.
        let replaced = t0 + Duration::from_secs(3600);
        let mut ring = VecDeque::from([(t0, snapshot(2)), (replaced, snapshot(3))]);
        assert_eq!(
            store.prune_ring(&mut ring, replaced + Duration::from_secs(1)),
            0
        );
        assert_eq!(ring.len(), 2, "revision 2 was current a second ago");
        // A window after it was replaced, it goes; the newest never does.
        let later = replaced + window + Duration::from_secs(1);
        assert_eq!(store.prune_ring(&mut ring, later), 1);
        assert_eq!(ring.len(), 1);
        assert_eq!(ring[0].1.revision, Revision(3));
        assert_eq!(store.prune_ring(&mut ring, later + window * 10), 0);
        assert_eq!(ring.len(), 1);
    }
}
