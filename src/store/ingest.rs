//! The writer side of the cache: routes etcd key-values to resources, decodes them, and
//! applies them revision by revision. Owned by the ingestion task; never shared.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::cache::Cache;
use super::object::CachedObject;
use super::resource::{Change, ResourceStore};
use super::snapshot::ObjectMap;
use crate::codec::{self, DecodeError};
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
    /// For a deletion, the value before it, if etcd sent it (`prev_kv`).
    pub prev_value: Option<Vec<u8>>,
    /// The mod_revision of `prev_value`.
    pub prev_revision: Revision,
}

/// Applies etcd data to a [`Cache`].
pub struct Ingestor {
    cache: Arc<Cache>,
    logged: HashSet<Vec<u8>>,
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

    fn report_undecodable(&mut self, resource: &str, key: &[u8], err: &DecodeError) {
        metrics::counter!("watchd_undecodable_values_total", "resource" => resource.to_string(), "reason" => err.reason())
            .increment(1);
        if self.logged.len() >= LOGGED_KEYS_MAX {
            self.logged.clear();
        }
        if self.logged.insert(key.to_vec()) {
            tracing::warn!(key = %String::from_utf8_lossy(key), error = %err, "skipping unreadable value");
        }
    }

    fn decode_object(
        &mut self,
        store: &ResourceStore,
        object_key: &str,
        key: &[u8],
        value: &[u8],
        revision: Revision,
    ) -> Option<Arc<CachedObject>> {
        registry::split_object_key(object_key, store.info.namespaced)?;
        match codec::decode(value, revision, &store.info.fields) {
            Ok(decoded) => Some(Arc::new(CachedObject::new(
                Arc::from(object_key),
                revision,
                store.field_names.clone(),
                decoded,
            ))),
            Err(e) => {
                self.report_undecodable(&store.info.qualified_name(), key, &e);
                None
            }
        }
    }

    fn register_crd(&mut self, key: &[u8], value: &[u8], revision: Revision) {
        match crd::parse_crd(value) {
            Ok(info) => {
                let index = self.cache.resources();
                match index.by_dir(&info.etcd_dir) {
                    Some(s) if *s.info == info => {}
                    Some(_) => {
                        tracing::info!(resource = %info.qualified_name(), version = %info.version, "custom resource definition changed; its watchers re-list");
                        self.cache.register(info, revision);
                    }
                    None => {
                        tracing::info!(resource = %info.qualified_name(), version = %info.version, "serving custom resource");
                        self.cache.register(info, revision);
                    }
                }
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
        if let Some(old) = self.cache.unregister(&format!("{group}/{plural}")) {
            tracing::info!(resource = %old.info.qualified_name(), "custom resource definition deleted; no longer served");
        }
    }

    fn is_crd_key(&self, key: &str) -> bool {
        key.strip_prefix(self.cache.prefix())
            .and_then(|k| k.strip_prefix('/'))
            .and_then(|k| k.strip_prefix(crd::CRD_DIR))
            .is_some_and(|k| k.starts_with('/'))
    }

    /// Replaces the whole cache with the state at `revision` (a new epoch): the initial
    /// sync, or a re-list after etcd compacted past the resume revision.
    pub fn load_epoch(&mut self, revision: Revision, kvs: Vec<(Vec<u8>, Vec<u8>, Revision)>) {
        for (key, value, rev) in &kvs {
            if std::str::from_utf8(key).is_ok_and(|k| self.is_crd_key(k)) {
                self.register_crd(key, value, *rev);
            }
        }
        let index = self.cache.resources();
        let mut maps: HashMap<String, ObjectMap> = HashMap::new();
        let prefix = self.cache.prefix().to_string();
        for (key, value, rev) in kvs {
            let Ok(key_str) = std::str::from_utf8(&key) else {
                continue;
            };
            let Some(route) = registry::route_key(&prefix, key_str, |d| index.by_dir(d).is_some())
            else {
                continue;
            };
            let Some(store) = index.by_dir(route.etcd_dir) else {
                continue;
            };
            if let Some(obj) = self.decode_object(store, route.object_key, &key, &value, rev) {
                maps.entry(route.etcd_dir.to_string())
                    .or_default()
                    .insert(obj.key().clone(), obj);
            }
        }
        let epoch = self.cache.next_epoch();
        for store in index.stores() {
            let objects = maps.remove(&store.info.etcd_dir).unwrap_or_default();
            store.reset(revision, epoch, objects);
        }
        self.cache.set_applied(revision);
        metrics::gauge!("watchd_epoch").set(epoch as f64);
        tracing::info!(%revision, epoch, resources = index.stores().len(), "cache loaded");
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
        let index = self.cache.resources();
        let prefix = self.cache.prefix().to_string();
        let Some(route) = registry::route_key(&prefix, key_str, |d| index.by_dir(d).is_some())
        else {
            return;
        };
        let Some(store) = index.by_dir(route.etcd_dir).cloned() else {
            return;
        };
        let object = match &change.value {
            Some(v) => {
                match self.decode_object(&store, route.object_key, &change.key, v, change.revision)
                {
                    Some(o) => Change::Put(o),
                    None => return,
                }
            }
            None => {
                // Our own last state wins; etcd's prev_kv is only needed if we never held it.
                let held = store.snapshot().objects.contains_key(route.object_key);
                let prev = change.prev_value.as_ref().filter(|_| !held).and_then(|v| {
                    self.decode_object(
                        &store,
                        route.object_key,
                        &change.key,
                        v,
                        change.prev_revision,
                    )
                });
                Change::Delete {
                    key: Arc::from(route.object_key),
                    prev,
                }
            }
        };
        match per_store.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &store)) {
            Some((_, list)) => list.push(object),
            None => per_store.push((store, vec![object])),
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
        for (store, changes) in per_store.drain(..) {
            let i = match woken.iter().position(|(s, _)| Arc::ptr_eq(s, &store)) {
                Some(i) => i,
                None => {
                    woken.push((store.clone(), HashSet::new()));
                    woken.len() - 1
                }
            };
            store.apply(revision, changes, &mut woken[i].1);
        }
        self.cache.set_applied(revision);
    }
}
