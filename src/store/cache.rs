//! All resources' stores, the applied revision, and readiness: what the API reads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::progress::Progress;
use super::resource::{ResourceStore, StoreConfig};
use crate::codec::encryption::{EncryptionConfig, ValueTransformer};
use crate::codec::DecodeSpec;
use crate::registry::{builtin, ResourceInfo};
use crate::Revision;

/// The resources the cache serves, looked up by etcd directory or by API name. One
/// directory may feed several resources (core and events.k8s.io events share `events`),
/// each with its own store of the objects in its served version.
#[derive(Default)]
pub struct ResourceIndex {
    stores: Vec<Arc<ResourceStore>>,
    by_dir: HashMap<String, Vec<usize>>,
    by_api: HashMap<(String, String, String), usize>,
}

impl ResourceIndex {
    fn from_stores(stores: Vec<Arc<ResourceStore>>) -> ResourceIndex {
        let mut by_dir: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_api = HashMap::new();
        for (i, s) in stores.iter().enumerate() {
            by_dir.entry(s.info.etcd_dir.clone()).or_default().push(i);
            let api = (
                s.info.group.clone(),
                s.info.version.clone(),
                s.info.resource.clone(),
            );
            by_api.insert(api, i);
        }
        // Those serving values as stored first: the others may share their objects.
        for feeds in by_dir.values_mut() {
            feeds.sort_by_key(|&i| stores[i].decode.convert.is_some());
        }
        ResourceIndex {
            stores,
            by_dir,
            by_api,
        }
    }

    /// Every store, built-ins first, in discovery order.
    pub fn stores(&self) -> &[Arc<ResourceStore>] {
        &self.stores
    }

    /// Whether any resource is stored under the etcd directory `dir`.
    pub fn has_dir(&self, dir: &str) -> bool {
        self.by_dir.contains_key(dir)
    }

    /// The stores fed by an etcd directory such as `pods` or `services/specs` (empty if
    /// none), those that serve values as stored (no conversion) first.
    pub fn by_dir(&self, dir: &str) -> impl Iterator<Item = &Arc<ResourceStore>> + '_ {
        self.by_dir
            .get(dir)
            .into_iter()
            .flatten()
            .filter_map(|&i| self.stores.get(i))
    }

    /// The store of (group, plural resource) at API `version`.
    pub fn by_api(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<&Arc<ResourceStore>> {
        self.by_api
            .get(&(group.to_string(), version.to_string(), resource.to_string()))
            .and_then(|&i| self.stores.get(i))
    }

    /// The store of the same resource (etcd directory, group and plural) as `info`.
    fn same_resource(&self, info: &ResourceInfo) -> Option<usize> {
        self.stores.iter().position(|s| {
            s.info.etcd_dir == info.etcd_dir
                && s.info.group == info.group
                && s.info.resource == info.resource
        })
    }

    fn without(&self, dir: &str) -> ResourceIndex {
        let stores = self.stores.iter().filter(|s| s.info.etcd_dir != dir);
        ResourceIndex::from_stores(stores.cloned().collect())
    }

    fn with(&self, store: Arc<ResourceStore>) -> ResourceIndex {
        let mut stores = self.stores.clone();
        match self.same_resource(&store.info) {
            Some(i) => stores[i] = store,
            None => stores.push(store),
        }
        ResourceIndex::from_stores(stores)
    }
}

/// The places of watches in a drain at shutdown ([`Cache::watch_ends_at`]).
pub const DRAIN_SPREAD: u16 = 1000;

/// The whole cache.
pub struct Cache {
    prefix: String,
    config: StoreConfig,
    encryption: Option<EncryptionConfig>,
    index: ArcSwap<ResourceIndex>,
    /// How far the source is applied ([`Cache::progress`]).
    progress: Progress,
    /// Whether each resource is fed by its own stream, in its served version (an
    /// upstream API server), rather than from etcd's values.
    per_resource: bool,
    epoch: AtomicU64,
    synced: AtomicBool,
    watch_live: AtomicBool,
    /// The server is shutting down: readiness fails (`/readyz`'s `shutdown` check, gRPC
    /// health) while it goes on serving.
    shutting_down: watch::Sender<bool>,
    /// Synced, the source's watch up, and not shutting down: the one readiness state
    /// that `/readyz` and gRPC health both report ([`Cache::watch_ready`]).
    ready: watch::Sender<bool>,
    /// When open watches began to be ended at shutdown, and over how long
    /// ([`Cache::drain_watches`]).
    watch_drain: std::sync::OnceLock<(tokio::time::Instant, Duration)>,
    /// When the cache was made (the daemon's start).
    created: std::time::Instant,
    /// Raised by the read path when the source's current revision is below the applied
    /// one (see [`Cache::report_source_behind`]).
    source_behind: tokio::sync::Notify,
}

impl Cache {
    /// How often its writer sweeps the history of what the window passed
    /// ([`crate::store::ingest::Ingestor::expire_history`]).
    pub fn history_sweep_interval(&self) -> Duration {
        (self.config.history_window / 2).clamp(
            Duration::from_millis(100),
            crate::config::HISTORY_SWEEP_INTERVAL,
        )
    }

    /// An empty, not-yet-synced cache of every built-in resource under `prefix`, whose
    /// values are not encrypted.
    pub fn new(prefix: &str, config: StoreConfig) -> Arc<Cache> {
        Cache::with_encryption(prefix, config, None)
    }

    /// An empty, not-yet-synced cache of every built-in resource under `prefix`, whose
    /// values are decrypted with `encryption` (kube-apiserver's
    /// `--encryption-provider-config`).
    pub fn with_encryption(
        prefix: &str,
        config: StoreConfig,
        encryption: Option<EncryptionConfig>,
    ) -> Arc<Cache> {
        Cache::build(prefix, config, encryption, false)
    }

    /// An empty, not-yet-synced cache of every built-in resource, fed one resource at a
    /// time by an upstream API server: values arrive as JSON in the served version (no
    /// decryption or conversion), and each resource has its own applied revision.
    pub fn per_resource(prefix: &str, config: StoreConfig) -> Arc<Cache> {
        Cache::build(prefix, config, None, true)
    }

    fn build(
        prefix: &str,
        config: StoreConfig,
        encryption: Option<EncryptionConfig>,
        per_resource: bool,
    ) -> Arc<Cache> {
        let cache = Cache {
            prefix: prefix.trim_end_matches('/').to_string(),
            config,
            encryption,
            index: ArcSwap::from_pointee(ResourceIndex::default()),
            progress: Progress::new(per_resource),
            per_resource,
            epoch: AtomicU64::new(0),
            synced: AtomicBool::new(false),
            watch_live: AtomicBool::new(false),
            shutting_down: watch::Sender::new(false),
            ready: watch::Sender::new(false),
            watch_drain: std::sync::OnceLock::new(),
            source_behind: tokio::sync::Notify::new(),
            created: std::time::Instant::now(),
        };
        for info in builtin::builtin_resources() {
            cache.register(info, Revision::ZERO);
        }
        Arc::new(cache)
    }

    /// How long ago the cache was made (the daemon's start).
    pub fn age(&self) -> Duration {
        self.created.elapsed()
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
    /// its existing store, taking a new published schema in place. Returns the store.
    pub fn register(&self, mut info: ResourceInfo, revision: Revision) -> Arc<ResourceStore> {
        info.indexed_field = self.config.index_fields.field_for(&info);
        let index = self.index.load_full();
        let existing = index
            .same_resource(&info)
            .and_then(|i| index.stores().get(i))
            .cloned();
        if let Some(existing) = &existing {
            if *existing.info == info {
                // Only the published schema may differ: taken in place, so what is
                // served, and every watch, stays.
                if existing.info.schema.replace_with(&info.schema) {
                    tracing::info!(resource = %info.qualified_name(), version = %info.version, "custom resource definition's schema changed");
                }
                return existing.clone();
            }
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let decode = if self.per_resource {
            DecodeSpec::plain(info.fields.clone())
        } else {
            info.decode_spec(self.transformer_of(&info))
        };
        let store = Arc::new(ResourceStore::new(
            Arc::new(info),
            revision,
            epoch,
            self.config.clone(),
            decode,
        ));
        if let Some(old) = &existing {
            let objects = old
                .snapshot()
                .objects
                .values()
                .map(|o| Arc::new(o.reindexed(&store.info.fields)))
                .collect();
            store.reset(revision.max(old.snapshot().revision), epoch, objects);
        }
        if self.epoch() > 0 && !self.per_resource {
            // Added while watching etcd (a new CRD, also while history is replayed after
            // the first list): what it holds is current. (A per-resource source loads it
            // from its own list first.)
            store.health.loaded(imbl::OrdMap::new());
        }
        self.index.store(Arc::new(index.with(store.clone())));
        if let Some(old) = existing {
            old.retire();
        }
        store
    }

    /// How the values of a resource are decrypted: the rule of the group-resource
    /// kube-apiserver stores them as (events.k8s.io events are core `events`).
    fn transformer_of(&self, info: &ResourceInfo) -> Arc<ValueTransformer> {
        let Some(enc) = &self.encryption else {
            return Arc::new(ValueTransformer::identity());
        };
        if info.etcd_dir == "events" {
            return enc.transformer("", "events");
        }
        enc.transformer(&info.group, &info.resource)
    }

    /// Stops serving one resource (an upstream does not serve it); its watchers are
    /// ended.
    pub fn unregister_store(&self, store: &Arc<ResourceStore>) {
        let index = self.index.load_full();
        let stores: Vec<_> = index
            .stores()
            .iter()
            .filter(|s| !Arc::ptr_eq(s, store))
            .cloned()
            .collect();
        self.index
            .store(Arc::new(ResourceIndex::from_stores(stores)));
        store.retire();
    }

    /// Stops serving the resources stored under `etcd_dir` (its CRD was deleted); its
    /// watchers are ended.
    pub fn unregister(&self, etcd_dir: &str) -> Vec<Arc<ResourceStore>> {
        let index = self.index.load_full();
        let old: Vec<_> = index.by_dir(etcd_dir).cloned().collect();
        if !old.is_empty() {
            self.index.store(Arc::new(index.without(etcd_dir)));
        }
        for s in &old {
            s.retire();
        }
        old
    }

    /// How far the source is applied: what readers ask before reading, and ingestion
    /// raises.
    pub fn progress(&self) -> &Progress {
        &self.progress
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
        let was = self.synced.swap(synced, Ordering::AcqRel);
        self.refresh_ready();
        if synced && !was {
            release_free_heap();
        }
    }

    /// Whether the initial sync of every resource finished.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Marks whether the etcd watch is currently established.
    pub fn set_watch_live(&self, live: bool) {
        self.watch_live.store(live, Ordering::Release);
        self.refresh_ready();
    }

    /// Whether the etcd watch is established.
    pub fn is_watch_live(&self) -> bool {
        self.watch_live.load(Ordering::Acquire)
    }

    /// Marks the server as shutting down: from now on it reports itself not ready, so
    /// that load balancers and clients move elsewhere, while it still serves.
    pub fn begin_shutdown(&self) {
        self.shutting_down.send_replace(true);
        self.refresh_ready();
    }

    /// Whether the server is ready: synced, its source's watch up, not shutting down.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Changes of [`Cache::is_ready`], as they happen: what gRPC health reports, so that
    /// it never lags `/readyz`.
    pub fn watch_ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// Recomputes readiness after one of its parts changed. Computed under the channel's
    /// lock, so that two changes at once cannot publish a stale answer.
    fn refresh_ready(&self) {
        self.ready.send_if_modified(|r| {
            let ready = self.is_synced() && self.is_watch_live() && !self.is_shutting_down();
            let changed = *r != ready;
            *r = ready;
            changed
        });
    }

    /// Whether the server is shutting down ([`Cache::begin_shutdown`]).
    pub fn is_shutting_down(&self) -> bool {
        *self.shutting_down.borrow()
    }

    /// Ends every open watch within `grace` from now, spread over it (each at its own
    /// instant: [`Cache::watch_ends_at`]), so that their clients re-watch elsewhere over
    /// that period rather than all at once; watches started from now on end at its end.
    /// Wakes every watcher so that it learns its instant.
    pub fn drain_watches(&self, grace: Duration) {
        if self
            .watch_drain
            .set((tokio::time::Instant::now(), grace))
            .is_ok()
        {
            for store in self.index.load().stores() {
                store.wake.wake_all();
            }
        }
    }

    /// When a watch whose timeout falls at `deadline` and whose place in a drain is
    /// `spread` (0..=[`DRAIN_SPREAD`]; the highest for watches started during it) ends:
    /// its deadline, or sooner its instant once watches are being drained.
    pub fn watch_ends_at(
        &self,
        deadline: tokio::time::Instant,
        spread: u16,
    ) -> tokio::time::Instant {
        let Some((start, grace)) = self.watch_drain.get() else {
            return deadline;
        };
        let part = f64::from(spread.min(DRAIN_SPREAD)) / f64::from(DRAIN_SPREAD);
        deadline.min(*start + grace.mul_f64(part))
    }

    /// A watch's place in a drain ([`Cache::watch_ends_at`]): spread evenly over the
    /// watches in the order they started; the last for one started while draining.
    pub fn drain_spread(&self) -> u16 {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if self.watch_drain.get().is_some() {
            return DRAIN_SPREAD;
        }
        // The golden ratio's fraction: consecutive watches land far apart.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        ((n * 618) % u64::from(DRAIN_SPREAD)) as u16
    }

    /// Tells ingestion that a read found the source's current revision below the applied
    /// one: the source went back in time (restored or replaced), and ingestion should
    /// check it now rather than after its reconnect backoff. Wakes only a waiting
    /// ingestion, so nothing is left over to wake it later; a refused read reports again
    /// on every retry.
    pub fn report_source_behind(&self) {
        self.source_behind.notify_waiters();
    }

    /// Resolves at the next [`Cache::report_source_behind`].
    pub async fn source_behind_reported(&self) {
        self.source_behind.notified().await;
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("prefix", &self.prefix)
            .field("applied", &self.progress.applied())
            .field("epoch", &self.epoch())
            .finish()
    }
}

/// Gives the heap's free pages back to the operating system. Loading leaves them between
/// the objects kept: etcd's responses, values before decoding, the snapshots a replay of
/// history went through were freed, but glibc returns only the top of its heap by itself.
/// Measured (50 000 protobuf pods, 500 revisions of history replayed at start): resident
/// 232 MB before, 163 MB after. Called when the cache is synced, and after a re-list's
/// load.
pub(crate) fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only walks glibc's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
