//! All resources' stores, the applied revision, and readiness: what the API reads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::resource::{ResourceStore, StoreConfig};
use crate::registry::{builtin, ResourceInfo};
use crate::Revision;

/// The resources the cache serves, looked up by etcd directory or by API name.
#[derive(Default)]
pub struct ResourceIndex {
    stores: Vec<Arc<ResourceStore>>,
    by_dir: HashMap<String, usize>,
    by_api: HashMap<(String, String), usize>,
}

impl ResourceIndex {
    /// Every store, built-ins first, in discovery order.
    pub fn stores(&self) -> &[Arc<ResourceStore>] {
        &self.stores
    }

    /// The store of an etcd directory such as `pods` or `services/specs`.
    pub fn by_dir(&self, dir: &str) -> Option<&Arc<ResourceStore>> {
        self.by_dir.get(dir).and_then(|&i| self.stores.get(i))
    }

    /// The store of (group, plural resource) at API `version`.
    pub fn by_api(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<&Arc<ResourceStore>> {
        self.by_api
            .get(&(group.to_string(), resource.to_string()))
            .and_then(|&i| self.stores.get(i))
            .filter(|s| s.info.version == version)
    }

    fn without(&self, dir: &str) -> ResourceIndex {
        let mut next = ResourceIndex::default();
        for s in self.stores.iter().filter(|s| s.info.etcd_dir != dir) {
            next = next.with(s.clone());
        }
        next
    }

    fn with(&self, store: Arc<ResourceStore>) -> ResourceIndex {
        let mut next = ResourceIndex {
            stores: self.stores.clone(),
            by_dir: self.by_dir.clone(),
            by_api: self.by_api.clone(),
        };
        let api = (store.info.group.clone(), store.info.resource.clone());
        let dir = store.info.etcd_dir.clone();
        let i = match next.by_dir.get(&dir) {
            Some(&i) => {
                next.stores[i] = store;
                i
            }
            None => {
                next.stores.push(store);
                next.stores.len() - 1
            }
        };
        next.by_dir.insert(dir, i);
        next.by_api.insert(api, i);
        next
    }
}

/// The whole cache.
pub struct Cache {
    prefix: String,
    config: StoreConfig,
    index: ArcSwap<ResourceIndex>,
    applied: watch::Sender<Revision>,
    epoch: AtomicU64,
    synced: AtomicBool,
    watch_live: AtomicBool,
}

impl Cache {
    /// An empty, not-yet-synced cache of every built-in resource under `prefix`.
    pub fn new(prefix: &str, config: StoreConfig) -> Arc<Cache> {
        let cache = Cache {
            prefix: prefix.trim_end_matches('/').to_string(),
            config,
            index: ArcSwap::from_pointee(ResourceIndex::default()),
            applied: watch::channel(Revision::ZERO).0,
            epoch: AtomicU64::new(0),
            synced: AtomicBool::new(false),
            watch_live: AtomicBool::new(false),
        };
        for info in builtin::builtin_resources() {
            cache.register(info, Revision::ZERO);
        }
        Arc::new(cache)
    }

    /// The etcd key prefix, without a trailing slash.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The resources served now.
    pub fn resources(&self) -> Arc<ResourceIndex> {
        self.index.load_full()
    }

    /// Adds a resource, empty as of `revision`; or, if its definition changed, replaces its
    /// store with one of the new definition holding the same objects as of `revision` (the
    /// old store's watchers are ended, so clients re-list). An unchanged definition keeps
    /// its existing store. Returns the store.
    pub fn register(&self, info: ResourceInfo, revision: Revision) -> Arc<ResourceStore> {
        let index = self.index.load_full();
        let existing = index.by_dir(&info.etcd_dir).cloned();
        if let Some(existing) = &existing {
            if *existing.info == info {
                return existing.clone();
            }
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let store = Arc::new(ResourceStore::new(
            Arc::new(info),
            revision,
            epoch,
            self.config,
        ));
        if let Some(old) = &existing {
            let objects = old
                .snapshot()
                .objects
                .iter()
                .map(|(k, o)| {
                    (
                        k.clone(),
                        Arc::new(o.reindexed(store.field_names.clone(), &store.info.fields)),
                    )
                })
                .collect();
            store.reset(revision.max(old.snapshot().revision), epoch, objects);
        }
        self.index.store(Arc::new(index.with(store.clone())));
        if let Some(old) = existing {
            old.retire();
        }
        store
    }

    /// Stops serving the resource stored under `etcd_dir` (its CRD was deleted); its
    /// watchers are ended.
    pub fn unregister(&self, etcd_dir: &str) -> Option<Arc<ResourceStore>> {
        let index = self.index.load_full();
        let old = index.by_dir(etcd_dir).cloned()?;
        self.index.store(Arc::new(index.without(etcd_dir)));
        old.retire();
        Some(old)
    }

    /// The newest etcd revision fully applied.
    pub fn applied(&self) -> Revision {
        *self.applied.borrow()
    }

    /// Records that every change up to `revision` is applied, and wakes waiting readers.
    pub fn set_applied(&self, revision: Revision) {
        self.applied.send_if_modified(|r| {
            let newer = revision > *r;
            if newer {
                *r = revision;
            }
            newer
        });
        metrics::gauge!("watchd_applied_revision").set(revision.0 as f64);
    }

    /// Waits until `revision` is applied; false if `timeout` passed first.
    pub async fn wait_applied(&self, revision: Revision, timeout: Duration) -> bool {
        let mut rx = self.applied.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|r| *r >= revision))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The current epoch (bumped by each full re-list).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Starts a new epoch and returns its number.
    pub fn next_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Marks the initial sync done (or a re-list in progress).
    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Release);
    }

    /// Whether the initial sync of every resource finished.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Marks whether the etcd watch is currently established.
    pub fn set_watch_live(&self, live: bool) {
        self.watch_live.store(live, Ordering::Release);
    }

    /// Whether the etcd watch is established.
    pub fn is_watch_live(&self) -> bool {
        self.watch_live.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("prefix", &self.prefix)
            .field("applied", &self.applied())
            .field("epoch", &self.epoch())
            .finish()
    }
}
