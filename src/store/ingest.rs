//! The writer side of the cache: routes etcd key-values to resources, decodes them, and
//! applies them revision by revision. Owned by the ingestion task; never shared.
//!
//! One etcd directory may feed several resources (core and events.k8s.io events share
//! `events`): each change is decoded once per resource, into that resource's served
//! version. A value that cannot be decoded or decrypted is never skipped silently: it is
//! counted, logged once per key, and makes its resource pending until it is fixed
//! ([`super::health`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::cache::Cache;
use super::health::{Transition, Unreadable};
use super::object::CachedObject;
use super::resource::{Change, ResourceStore};
use super::snapshot::ObjectMap;
use crate::codec::convert::Conversion;
use crate::codec::DecodeError;
use crate::config;
use crate::dispatch::WakeKey;
use crate::registry::{self, crd};
use crate::Revision;

/// Most keys remembered for "log once per key"; the set is cleared when it fills.
const LOGGED_KEYS_MAX: usize = 100_000;

/// Stores touched by a batch, with the keys to wake in each.
type Touched = Vec<(Arc<ResourceStore>, HashSet<WakeKey>)>;

/// One key-value change read from etcd.
#[derive(Debug, Clone)]
pub struct KvChange {
    /// The full etcd key.
    pub key: Vec<u8>,
    /// The new value; None for a deletion.
    pub value: Option<Vec<u8>>,
    /// The revision of the change (mod_revision; for a deletion, the delete revision).
    pub revision: Revision,
    /// For a deletion of an object the cache never held, its value before, when read
    /// (the etcd source asks for no `prev_kv`; the upstream source sends it).
    pub prev_value: Option<Vec<u8>>,
    /// The mod_revision of `prev_value`.
    pub prev_revision: Revision,
}

/// One change of one resource, from a source with a stream per resource (an upstream API
/// server): the object's key in its store (`namespace/name` or `name`) and its value in
/// the served version, at the object's resourceVersion.
#[derive(Debug, Clone)]
pub struct ObjectChange {
    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub object_key: String,
    /// The new value; None for a deletion.
    pub value: Option<Vec<u8>>,
    /// For a deletion, the object's last state (a DELETED event's object).
    pub prev_value: Option<Vec<u8>>,
    /// The object's resourceVersion (for a deletion, the delete revision).
    pub revision: Revision,
}

/// Applies etcd data to a [`Cache`].
pub struct Ingestor {
    cache: Arc<Cache>,
    logged: HashSet<Vec<u8>>,
}

/// What decoding one value for one resource gave.
enum Decoded {
    Object(Arc<CachedObject>),
    Unreadable(Unreadable),
    /// The key does not have the resource's shape (e.g. a cluster-scoped key with a
    /// namespace): not an object of it.
    NotAnObject,
}

impl Ingestor {
    /// A writer for `cache`.
    pub fn new(cache: Arc<Cache>) -> Self {
        Ingestor {
            cache,
            logged: HashSet::new(),
        }
    }

    /// The cache written to.
    pub fn cache(&self) -> &Arc<Cache> {
        &self.cache
    }

    fn report_unreadable(&mut self, store: &ResourceStore, key: &[u8], err: &DecodeError) {
        let resource = store.info.qualified_name();
        metrics::counter!("watchd_undecodable_values_total", "resource" => resource.clone(), "reason" => err.reason())
            .increment(1);
        if self.logged.len() >= LOGGED_KEYS_MAX {
            self.logged.clear();
        }
        if self.logged.insert(key.to_vec()) {
            tracing::warn!(key = %String::from_utf8_lossy(key), %resource, error = %err,
                "cannot read value; the resource answers reads from etcd (which fail on this key) and watches with 429 until the value is replaced or deleted");
        }
    }

    /// Decodes `value` (at `key`, `revision`) for `store`. `plain` carries the object a
    /// store of the same directory that serves values as stored made of this value, if
    /// one came first ([`ResourceIndex::by_dir`] puts them first): events.k8s.io events
    /// are then the core Events' bytes, converted on read, not a second copy. A store
    /// serving values as stored leaves its object there.
    ///
    /// [`ResourceIndex::by_dir`]: super::cache::ResourceIndex::by_dir
    fn decode(
        &mut self,
        store: &ResourceStore,
        (object_key, key): (&str, &[u8]),
        value: &[u8],
        revision: Revision,
        plain: &mut Option<Arc<CachedObject>>,
    ) -> Decoded {
        if registry::split_object_key(object_key, store.info.namespaced).is_none() {
            return Decoded::NotAnObject;
        }
        let shared = match (&store.decode.convert, plain.as_ref()) {
            (Some(c), Some(core)) if c.conversion == Conversion::EventsV1 => {
                debug_assert!(core.key() == object_key && core.revision == revision);
                CachedObject::event_v1_of(core, store.field_names.len())
            }
            _ => None,
        };
        if let Some(view) = shared {
            return Decoded::Object(Arc::new(view));
        }
        match store.decode.decode((object_key, key), value, revision) {
            Ok(decoded) => {
                let obj = Arc::new(CachedObject::new(revision, decoded));
                if store.decode.convert.is_none() {
                    *plain = Some(obj.clone());
                }
                Decoded::Object(obj)
            }
            Err(e) => {
                self.report_unreadable(store, key, &e);
                Decoded::Unreadable(Unreadable {
                    etcd_key: String::from_utf8_lossy(key).into_owned(),
                    error: e,
                    revision,
                })
            }
        }
    }

    /// Serves the resource a CustomResourceDefinition defines, read from its object as
    /// the CRD resource serves it (stored versions are converted like any other).
    fn register_crd(&mut self, key: &[u8], value: &[u8], revision: Revision) {
        let index = self.cache.resources();
        let Some(crds) = index.by_dir(crd::CRD_DIR).next().cloned() else {
            return;
        };
        let name = std::str::from_utf8(key)
            .ok()
            .and_then(|k| self.crd_name(k))
            .unwrap_or_default();
        let parsed = match crds.decode.decode((name, key), value, revision) {
            Ok(d) => crd::parse_crd(d.json(revision).bytes.as_ref()),
            // The CRD resource itself reports the value as unreadable.
            Err(_) => return,
        };
        match parsed {
            Ok(info) => {
                // An unchanged definition (its schema aside, which `register` takes in
                // place) keeps its store and every watch.
                let same = index.by_dir(&info.etcd_dir).any(|s| *s.info == info);
                if !same && index.has_dir(&info.etcd_dir) {
                    tracing::info!(resource = %info.qualified_name(), version = %info.version, "custom resource definition changed; its watchers re-list");
                } else if !same {
                    tracing::info!(resource = %info.qualified_name(), version = %info.version, "serving custom resource");
                }
                self.cache.register(info, revision);
            }
            Err(e) => {
                metrics::counter!("watchd_undecodable_values_total", "resource" => "customresourcedefinitions.apiextensions.k8s.io", "reason" => "invalid_crd")
                    .increment(1);
                if self.logged.insert(key.to_vec()) {
                    tracing::warn!(key = %String::from_utf8_lossy(key), error = %e, "cannot serve custom resource");
                }
            }
        }
    }

    /// A CRD was deleted: its name is `<plural>.<group>`, so its objects live under
    /// `<group>/<plural>`.
    fn unregister_crd(&mut self, key: &str) {
        let Some(name) = key.rsplit('/').next() else {
            return;
        };
        let Some((plural, group)) = name.split_once('.') else {
            return;
        };
        for old in self.cache.unregister(&format!("{group}/{plural}")) {
            tracing::info!(resource = %old.info.qualified_name(), "custom resource definition deleted; no longer served");
        }
    }

    fn is_crd_key(&self, key: &str) -> bool {
        self.crd_name(key).is_some()
    }

    /// The object key (the name: CRDs are cluster-scoped) of a key under the CRD
    /// directory.
    fn crd_name<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(self.cache.prefix())
            .and_then(|k| k.strip_prefix('/'))
            .and_then(|k| k.strip_prefix(crd::CRD_DIR))
            .and_then(|k| k.strip_prefix('/'))
    }

    /// Serves the resources the CustomResourceDefinitions among `kvs` define, before the
    /// keys are routed (their directories must be known by then).
    fn register_crds(&mut self, kvs: &[(Vec<u8>, Vec<u8>, Revision)]) {
        for (key, value, rev) in kvs {
            if std::str::from_utf8(key).is_ok_and(|k| self.is_crd_key(k)) {
                self.register_crd(key, value, *rev);
            }
        }
    }

    /// Decodes `kvs` into a state for each of `stores`, in their order: its objects and
    /// its unreadable values. Keys of a directory none of them reads are skipped.
    fn decode_states(
        &mut self,
        stores: &[Arc<ResourceStore>],
        kvs: Vec<(Vec<u8>, Vec<u8>, Revision)>,
    ) -> Vec<(ObjectMap, imbl::OrdMap<Arc<str>, Unreadable>)> {
        let index = self.cache.resources();
        let at: HashMap<*const ResourceStore, usize> = stores
            .iter()
            .enumerate()
            .map(|(i, s)| (Arc::as_ptr(s), i))
            .collect();
        let mut states = vec![(ObjectMap::new(), imbl::OrdMap::new()); stores.len()];
        let prefix = self.cache.prefix().to_string();
        for (key, value, rev) in kvs {
            let Ok(key_str) = std::str::from_utf8(&key) else {
                continue;
            };
            let Some(route) = registry::route_key(&prefix, key_str, |d| index.has_dir(d)) else {
                continue;
            };
            let mut plain = None;
            for store in index.by_dir(route.etcd_dir) {
                let Some(&i) = at.get(&Arc::as_ptr(store)) else {
                    continue;
                };
                let (objects, unreadable) = &mut states[i];
                let whose = (route.object_key, &key[..]);
                match self.decode(store, whose, &value, rev, &mut plain) {
                    Decoded::Object(obj) => {
                        objects.insert(obj);
                    }
                    Decoded::Unreadable(u) => {
                        unreadable.insert(Arc::from(route.object_key), u);
                    }
                    Decoded::NotAnObject => {}
                }
            }
        }
        states
    }

    /// Replaces the whole cache with the state at `revision` (a new epoch): the initial
    /// sync, or a re-list after etcd compacted past the resume revision.
    pub fn load_epoch(&mut self, revision: Revision, kvs: Vec<(Vec<u8>, Vec<u8>, Revision)>) {
        self.register_crds(&kvs);
        let index = self.cache.resources();
        let stores = index.stores();
        let epoch = self.load_stores(stores, revision, kvs);
        let age = self.cache.age();
        for store in stores {
            store.loaded_after(age);
        }
        self.cache.progress().reset_applied(revision);
        tracing::info!(%revision, epoch, resources = stores.len(), "cache loaded");
        // A re-list; the first load's heap is given back once the cache is synced.
        if self.cache.is_synced() {
            super::cache::release_free_heap();
        }
    }

    /// Replaces the resources that etcd directory `dir` feeds with its keys at `revision`
    /// (a new epoch: their watchers are ended and re-list); the other resources are
    /// untouched. The re-list the consistency check asks for when a resource differs from
    /// etcd. CRDs read here are served as at any load.
    pub fn load_dir(
        &mut self,
        dir: &str,
        revision: Revision,
        kvs: Vec<(Vec<u8>, Vec<u8>, Revision)>,
    ) {
        self.register_crds(&kvs);
        let stores: Vec<Arc<ResourceStore>> = self.cache.resources().by_dir(dir).cloned().collect();
        let epoch = self.load_stores(&stores, revision, kvs);
        for store in &stores {
            let objects = store.snapshot().objects.len();
            tracing::info!(resource = %store.info.qualified_name(), %revision, epoch, objects, "resource re-listed from etcd");
        }
    }

    /// Loads `stores` with their keys among `kvs` at `revision`, in a new epoch; the
    /// epoch.
    fn load_stores(
        &mut self,
        stores: &[Arc<ResourceStore>],
        revision: Revision,
        kvs: Vec<(Vec<u8>, Vec<u8>, Revision)>,
    ) -> u64 {
        let states = self.decode_states(stores, kvs);
        let epoch = self.cache.next_epoch();
        for (store, (objects, bad)) in stores.iter().zip(states) {
            store.reset(revision, epoch, objects);
            store.health.loaded(bad);
        }
        metrics::gauge!("watchd_epoch").set(epoch as f64);
        epoch
    }

    /// The etcd key an object of `store` would have: what decoding and CRD routing read,
    /// for values that come from elsewhere.
    fn key_of(&self, store: &ResourceStore, object_key: &str) -> String {
        format!(
            "{}/{}/{object_key}",
            self.cache.prefix(),
            store.info.etcd_dir
        )
    }

    /// Replaces one resource's state with `objects` (object key, value, revision) as of
    /// `revision`, in a new epoch (its old watchers are ended and re-list): a per-resource
    /// source's list. Loading the CustomResourceDefinitions also serves the resources
    /// they define and stops serving those whose definition is gone.
    pub fn load_resource(
        &mut self,
        store: &Arc<ResourceStore>,
        revision: Revision,
        objects: Vec<(String, Vec<u8>, Revision)>,
    ) {
        let is_crds = store.info.etcd_dir == crd::CRD_DIR;
        let mut map = ObjectMap::new();
        let mut bad = imbl::OrdMap::new();
        let mut defined = HashSet::new();
        for (object_key, value, rev) in objects {
            let key = self.key_of(store, &object_key).into_bytes();
            if is_crds {
                self.register_crd(&key, &value, rev);
                defined.insert(object_key.clone());
            }
            let whose = (object_key.as_str(), &key[..]);
            match self.decode(store, whose, &value, rev, &mut None) {
                Decoded::Object(obj) => {
                    map.insert(obj);
                }
                Decoded::Unreadable(u) => {
                    bad.insert(Arc::from(object_key.as_str()), u);
                }
                Decoded::NotAnObject => {}
            }
        }
        if is_crds {
            let gone: Vec<String> = self
                .cache
                .resources()
                .stores()
                .iter()
                .filter(|s| s.info.origin == registry::Origin::CustomResource)
                .filter(|s| !defined.contains(&format!("{}.{}", s.info.resource, s.info.group)))
                .map(|s| s.info.etcd_dir.clone())
                .collect();
            for dir in gone {
                for old in self.cache.unregister(&dir) {
                    tracing::info!(resource = %old.info.qualified_name(), "custom resource definition gone; no longer served");
                }
            }
        }
        let epoch = self.cache.next_epoch();
        let count = map.len();
        store.reset(revision, epoch, map);
        store.health.loaded(bad);
        store.loaded_after(self.cache.age());
        self.cache.progress().set_applied(revision);
        tracing::info!(resource = %store.info.qualified_name(), %revision, epoch, objects = count, "resource loaded");
    }

    /// Applies one resource's changes (in revision order), raises its applied revision to
    /// `progress` (at least the last change's), and wakes the watchers they concern.
    pub fn apply_resource(
        &mut self,
        store: &Arc<ResourceStore>,
        changes: Vec<ObjectChange>,
        progress: Revision,
    ) {
        let is_crds = store.info.etcd_dir == crd::CRD_DIR;
        let mut keys = HashSet::new();
        let mut batch: Vec<Change> = Vec::new();
        let mut current = Revision::ZERO;
        for change in changes {
            if change.revision != current {
                self.flush_resource(store, current, &mut batch, &mut keys);
                current = change.revision;
            }
            let key = self.key_of(store, &change.object_key);
            if is_crds {
                match &change.value {
                    Some(v) => self.register_crd(key.as_bytes(), v, change.revision),
                    None => self.unregister_crd(&key),
                }
            }
            let kv = KvChange {
                key: key.into_bytes(),
                value: change.value,
                revision: change.revision,
                prev_revision: change.revision,
                prev_value: change.prev_value,
            };
            if let Some(c) = self.change_for(store, &change.object_key, &kv, &mut None) {
                batch.push(c);
            }
        }
        self.flush_resource(store, current, &mut batch, &mut keys);
        store.set_progress(progress.max(current));
        self.cache.progress().set_applied(progress.max(current));
        if !keys.is_empty() {
            store.wake.wake(&keys);
        }
    }

    fn flush_resource(
        &mut self,
        store: &Arc<ResourceStore>,
        revision: Revision,
        batch: &mut Vec<Change>,
        keys: &mut HashSet<WakeKey>,
    ) {
        if revision == Revision::ZERO || batch.is_empty() {
            return;
        }
        let kept = self.cache.is_synced();
        let moved = store.apply(revision, std::mem::take(batch), keys, kept);
        self.settle(store, revision, moved, "the upstream sent");
        store.set_progress(revision);
    }

    /// Drops what the history of every resource holds past the window at `now`
    /// ([`ResourceStore::expire`]); after a sweep that dropped a burst's worth, the
    /// heap's free pages go back to the system. Returns how many events and snapshots
    /// were dropped.
    pub fn expire_history(&mut self, now: std::time::Instant) -> (usize, usize) {
        let (mut events, mut snapshots) = (0, 0);
        for store in self.cache.resources().stores() {
            let (e, s) = store.expire(now);
            events += e;
            snapshots += s;
        }
        if events + snapshots > 0 {
            metrics::counter!("watchd_history_swept_total", "kind" => "events")
                .increment(events as u64);
            metrics::counter!("watchd_history_swept_total", "kind" => "snapshots")
                .increment(snapshots as u64);
        }
        if events >= config::HISTORY_SWEEP_TRIM_EVENTS
            || snapshots >= config::HISTORY_SWEEP_TRIM_SNAPSHOTS
        {
            tracing::info!(
                events,
                snapshots,
                "history past the window dropped from resources that went quiet"
            );
            super::rendered::RENDERED.trim_heap_soon();
        }
        (events, snapshots)
    }

    /// Whether every resource stored under this etcd key holds its object, or knows its
    /// value unreadable (true when none is stored there): a deletion of an object that
    /// one of them never held needs etcd's last state of it for its DELETED event
    /// ([`KvChange::prev_value`]); an unreadable one would not decode either.
    pub fn holds(&self, key: &[u8]) -> bool {
        let Ok(key) = std::str::from_utf8(key) else {
            return true;
        };
        let index = self.cache.resources();
        let Some(route) = registry::route_key(self.cache.prefix(), key, |d| index.has_dir(d))
        else {
            return true;
        };
        let held = index.by_dir(route.etcd_dir).all(|s| {
            s.snapshot().objects.contains_key(route.object_key)
                || s.health.is_unreadable(route.object_key)
        });
        held
    }

    /// Applies watch changes (in revision order), then wakes the watchers they concern.
    pub fn apply(&mut self, changes: Vec<KvChange>) {
        let mut woken: Touched = Vec::new();
        let mut per_store: Vec<(Arc<ResourceStore>, Vec<Change>)> = Vec::new();
        let mut current = Revision::ZERO;
        for change in changes {
            if change.revision != current {
                self.flush(current, &mut per_store, &mut woken);
                current = change.revision;
            }
            self.route(change, &mut per_store);
        }
        self.flush(current, &mut per_store, &mut woken);
        for (store, keys) in woken {
            store.wake.wake(&keys);
        }
    }

    fn route(&mut self, change: KvChange, per_store: &mut Vec<(Arc<ResourceStore>, Vec<Change>)>) {
        let Ok(key_str) = std::str::from_utf8(&change.key) else {
            return;
        };
        if self.is_crd_key(key_str) {
            match &change.value {
                Some(value) => self.register_crd(&change.key, value, change.revision),
                None => self.unregister_crd(key_str),
            }
        }
        let cache = Arc::clone(&self.cache);
        let index = cache.resources();
        let Some(route) = registry::route_key(cache.prefix(), key_str, |d| index.has_dir(d)) else {
            return;
        };
        let mut plain = None;
        for store in index.by_dir(route.etcd_dir) {
            let Some(c) = self.change_for(store, route.object_key, &change, &mut plain) else {
                continue;
            };
            match per_store.iter_mut().find(|(s, _)| Arc::ptr_eq(s, store)) {
                Some((_, list)) => list.push(c),
                None => per_store.push((store.clone(), vec![c])),
            }
        }
    }

    /// What one etcd change is to one resource (`plain` as [`Ingestor::decode`] takes it).
    fn change_for(
        &mut self,
        store: &ResourceStore,
        object_key: &str,
        change: &KvChange,
        plain: &mut Option<Arc<CachedObject>>,
    ) -> Option<Change> {
        let whose = (object_key, &change.key[..]);
        match &change.value {
            Some(v) => match self.decode(store, whose, v, change.revision, plain) {
                Decoded::Object(o) => Some(Change::Put(o)),
                Decoded::Unreadable(value) => Some(Change::Unreadable {
                    key: Arc::from(object_key),
                    value,
                }),
                Decoded::NotAnObject => None,
            },
            None => {
                // Our own last state wins; the source's is only needed if we never held it.
                let held = store.snapshot().objects.contains_key(object_key);
                let prev = match change.prev_value.as_ref().filter(|_| !held) {
                    Some(v) => {
                        match self.decode(store, whose, v, change.prev_revision, &mut None) {
                            Decoded::Object(o) => Some(o),
                            _ => None,
                        }
                    }
                    None => None,
                };
                Some(Change::Delete {
                    key: Arc::from(object_key),
                    prev,
                })
            }
        }
    }

    fn flush(
        &mut self,
        revision: Revision,
        per_store: &mut Vec<(Arc<ResourceStore>, Vec<Change>)>,
        woken: &mut Touched,
    ) {
        if revision == Revision::ZERO {
            return;
        }
        // Before the cache is synced no read uses a snapshot: keep only the newest.
        let kept = self.cache.is_synced();
        for (store, changes) in per_store.drain(..) {
            let i = match woken.iter().position(|(s, _)| Arc::ptr_eq(s, &store)) {
                Some(i) => i,
                None => {
                    woken.push((store.clone(), HashSet::new()));
                    woken.len() - 1
                }
            };
            let moved = store.apply(revision, changes, &mut woken[i].1, kept);
            self.settle(&store, revision, moved, "etcd holds");
        }
        self.cache.progress().set_applied(revision);
    }

    /// Acts on how a resource's health moved at `revision` (`source` says where the bad
    /// value came from, for the log).
    fn settle(&self, store: &ResourceStore, revision: Revision, moved: Transition, source: &str) {
        match moved {
            Transition::Same => {}
            Transition::Broke => {
                tracing::warn!(resource = %store.info.qualified_name(), %revision,
                    "resource not ready: {source} a value that cannot be read; its watchers were ended")
            }
            Transition::Healed => {
                // Watchers that were ended may resume from before: start a new epoch, so
                // resumes from before the bad value get 410 and re-list.
                let objects = store.snapshot().objects.clone();
                store.reset(revision, self.cache.next_epoch(), objects);
                tracing::info!(resource = %store.info.qualified_name(), %revision,
                    "resource ready again: every value can be read");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::store::StoreConfig;

    fn put(name: &str, revision: i64) -> KvChange {
        KvChange {
            key: format!("/registry/configmaps/ns1/{name}").into_bytes(),
            value: Some(
                format!(r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"ns1"}}}}"#)
                    .into_bytes(),
            ),
            revision: Revision(revision),
            prev_value: None,
            prev_revision: Revision::ZERO,
        }
    }

    fn cache() -> Arc<Cache> {
        Cache::new(
            "/registry",
            StoreConfig {
                history_window: Duration::from_secs(300),
                max_events: 1000,
                snapshot_ring: 100,
                dispatch: crate::dispatch::Dispatch::inline(),
                index_fields: Default::default(),
            },
        )
    }

    fn configmaps(cache: &Cache) -> Arc<ResourceStore> {
        cache
            .resources()
            .by_dir("configmaps")
            .next()
            .cloned()
            .expect("configmaps are built in")
    }

    /// The events.k8s.io/v1 object made from the core one serves what decoding the
    /// stored value for events.k8s.io/v1 gives (the conversion at ingestion that it
    /// replaces), field values included, and keeps no bytes of its own.
    #[test]
    fn events_v1_objects_are_the_core_events_converted_on_read() {
        let cache = cache();
        let mut ingestor = Ingestor::new(cache.clone());
        ingestor.load_epoch(Revision(1), Vec::new());
        let event = |name: &str, component: &str| {
            serde_json::json!({"kind": "Event", "apiVersion": "v1",
                "metadata": {"name": name, "namespace": "ns1", "labels": {"a": "b"}},
                "involvedObject": {"kind": "Pod", "namespace": "ns1", "name": "web",
                    "uid": "u-1", "apiVersion": "v1", "resourceVersion": "7",
                    "fieldPath": "spec.containers{c}"},
                "reason": "Pulled", "message": "pulled", "type": "Warning",
                "source": {"component": component, "host": "n1"},
                "reportingComponent": "kubelet-r", "reportingInstance": "n1"})
        };
        let (a, b) = (event("a", "kubelet-s"), event("b", ""));
        let changes: Vec<KvChange> = [(&a, "a", 5), (&b, "b", 6)]
            .into_iter()
            .map(|(json, name, rev)| KvChange {
                key: format!("/registry/events/ns1/{name}").into_bytes(),
                value: Some(crate::codec::pbjson::encode_stored(json).unwrap()),
                revision: Revision(rev),
                prev_value: None,
                prev_revision: Revision::ZERO,
            })
            .collect();
        ingestor.apply(changes.clone());
        let index = cache.resources();
        let v1 = index.by_api("events.k8s.io", "v1", "events").unwrap();
        let core = index.by_api("", "v1", "events").unwrap();
        for change in &changes {
            let key = String::from_utf8_lossy(&change.key).replace("/registry/events/", "");
            let served = v1.snapshot().objects.get(key.as_str()).cloned().unwrap();
            let decoded = v1
                .decode
                .decode(
                    (&key, &change.key),
                    change.value.as_ref().unwrap(),
                    change.revision,
                )
                .unwrap();
            let want = Arc::new(CachedObject::new(change.revision, decoded));
            assert_eq!(served.protobuf().unwrap(), want.protobuf().unwrap());
            assert!(served.has_protobuf());
            let raw_len = want.protobuf().unwrap().raw().len();
            assert_eq!(served.protobuf_raw_len(), Some(raw_len));
            assert_eq!(served.json(), want.json());
            assert_eq!(served.metadata_json(), want.metadata_json());
            for name in v1.field_names.iter() {
                let names = &v1.field_names;
                assert_eq!(served.field(names, name), want.field(names, name), "{name}");
            }
            assert_eq!(
                served.labels().iter().collect::<Vec<_>>(),
                want.labels().iter().collect::<Vec<_>>()
            );
            // Bytes, labels and field values are the core object's: nothing of its own.
            assert_eq!(served.cached_bytes(), std::mem::size_of::<CachedObject>());
            let theirs = core.snapshot().objects.get(key.as_str()).cloned().unwrap();
            assert_eq!(served.key(), theirs.key());
        }
        let b = v1.snapshot().objects.get("ns1/b").cloned().unwrap();
        assert_eq!(
            b.field(&v1.field_names, "source"),
            Some("kubelet-r"),
            "the fallback field"
        );
        // A deleted event carries its last state, converted, at the delete revision.
        ingestor.apply(vec![KvChange {
            key: b"/registry/events/ns1/a".to_vec(),
            value: None,
            revision: Revision(8),
            prev_value: None,
            prev_revision: Revision::ZERO,
        }]);
        let log = v1.log();
        let crate::store::event_log::Read::Event(gone) = log.read(log.head() - 1) else {
            panic!("the deletion is in the log");
        };
        let last = gone.deleted_view().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&last.json()).unwrap();
        assert_eq!(v["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v["regarding"]["name"], "web");
        assert_eq!(v["metadata"]["resourceVersion"], "8");
    }

    #[test]
    fn a_replay_before_sync_keeps_its_events_but_only_the_newest_snapshot() {
        let cache = cache();
        let mut ingestor = Ingestor::new(cache.clone());
        ingestor.load_epoch(Revision(1), Vec::new());
        let store = configmaps(&cache);
        // Replaying: three revisions of two changes each.
        for r in 2..5 {
            ingestor.apply(vec![put(&format!("a{r}"), r), put(&format!("b{r}"), r)]);
        }
        let snap = store.snapshot();
        assert_eq!((snap.revision, snap.objects.len()), (Revision(4), 6));
        assert!(snap.older().is_none(), "no snapshot kept behind the newest");
        assert!(snap.as_of(Revision(3)).is_none());
        assert_eq!(store.log().len(), 6, "every replayed event is kept");
        // Synced: each revision keeps its snapshot again.
        cache.set_synced(true);
        for r in 5..7 {
            ingestor.apply(vec![put(&format!("c{r}"), r)]);
        }
        let snap = store.snapshot();
        assert_eq!(snap.revision, Revision(6));
        let at5 = snap.as_of(Revision(5)).expect("revision 5 kept");
        assert_eq!((at5.revision, at5.objects.len()), (Revision(5), 7));
        let at4 = snap
            .as_of(Revision(4))
            .expect("the replay's last snapshot kept");
        assert_eq!(at4.objects.len(), 6);
        assert!(at4.older().is_none());
    }

    #[test]
    fn a_sweep_drops_the_history_of_a_resource_that_went_quiet() {
        let cache = cache();
        let mut ingestor = Ingestor::new(cache.clone());
        ingestor.load_epoch(Revision(1), Vec::new());
        cache.set_synced(true);
        let store = configmaps(&cache);
        // A burst, then quiet: an object replaced twice, and another one.
        ingestor.apply(vec![put("a", 2)]);
        ingestor.apply(vec![put("a", 3)]);
        ingestor.apply(vec![put("a", 4), put("b", 4)]);
        let first = store.snapshot().as_of(Revision(2)).expect("kept");
        let replaced = Arc::downgrade(first.objects.get("ns1/a").unwrap());
        drop(first);
        assert_eq!(
            ingestor.expire_history(Instant::now()),
            (0, 0),
            "within the window"
        );
        assert_eq!(store.log().len(), 4);
        // A window later: every event and every snapshot but the newest go, and with
        // them the past states of the objects.
        let later = Instant::now() + Duration::from_secs(301);
        assert_eq!(ingestor.expire_history(later), (4, 3));
        assert!(store.log().is_empty());
        assert_eq!(store.log().oldest_revision(), Revision(4));
        let snap = store.snapshot();
        assert_eq!((snap.revision, snap.objects.len()), (Revision(4), 2));
        assert!(snap.older().is_none());
        assert!(snap.as_of(Revision(3)).is_none());
        assert!(
            replaced.upgrade().is_none(),
            "the first state of a is freed"
        );
        // A watch resumes from the newest revision; a change is logged as before.
        assert!(store.log().cursor_after(Revision(4)).is_ok());
        ingestor.apply(vec![put("c", 5)]);
        assert_eq!(store.log().len(), 1);
    }
}
