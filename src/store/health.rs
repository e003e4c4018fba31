//! Whether a resource's cache may serve: kube-apiserver's watch-cache readiness.
//!
//! A resource is *pending* until the initial list has loaded it, and again while etcd
//! holds a value of it that watchd cannot read (corrupt, or encrypted with a key it was
//! not given). kube-apiserver's watch cache never holds such a value: its initial list
//! fails on it, and it keeps re-listing; so does watchd, in effect. While pending, a
//! resource is served as kube-apiserver 1.34 serves one whose watch cache is not ready
//! (resilient watch cache initialization): watches get 429 with `Retry-After`; gets, and
//! lists with a limit and no selectors, read etcd through the same decoder (so the bad
//! value answers 500 with its key, never a silently shorter list); other lists get 429.
//!
//! The writer (ingestion) keeps the unreadable keys of the current state; readers load
//! the published state without taking a lock the writer waits on.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwapOption;

use crate::codec::DecodeError;
use crate::Revision;

/// A value etcd holds that watchd cannot read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The full etcd key.
    pub etcd_key: String,
    /// Why.
    pub error: DecodeError,
    /// Its mod_revision.
    pub revision: Revision,
}

impl Unreadable {
    /// What reading it fails with, as kube-apiserver words a storage read error: the key,
    /// then the transformer's or the decoder's error.
    pub fn storage_error(&self) -> String {
        match &self.error {
            DecodeError::Decrypt(e) => {
                format!("unable to transform key {:?}: {e}", self.etcd_key)
            }
            e => format!("unable to decode key {:?}: {e}", self.etcd_key),
        }
    }
}

/// What readers see.
#[derive(Debug, Clone)]
pub enum Readiness {
    /// The cache serves.
    Ready,
    /// Not ready since `since`; `error` is why (none while the initial list runs).
    Pending {
        /// When the resource last became pending (the `Retry-After` grows with it).
        since: Instant,
        /// Why it is pending, if something failed.
        error: Option<String>,
    },
}

impl Readiness {
    /// kube-apiserver's message for a request the cache cannot answer.
    pub fn message(&self) -> String {
        match self {
            Readiness::Ready => String::new(),
            Readiness::Pending { error: None, .. } => "storage is (re)initializing".into(),
            Readiness::Pending { error: Some(e), .. } => {
                format!("storage is (re)initializing: {e}")
            }
        }
    }

    /// kube-apiserver's `Retry-After` for a pending cache: e^(0.06·seconds pending),
    /// between 1 and 30 seconds.
    pub fn retry_after(&self, now: Instant) -> u64 {
        match self {
            Readiness::Ready => 0,
            Readiness::Pending { since, .. } => {
                let secs = now.saturating_duration_since(*since).as_secs_f64();
                (0.06 * secs).exp().clamp(1.0, 30.0) as u64
            }
        }
    }
}

/// The published state: None while ready.
#[derive(Debug)]
struct Pending {
    since: Instant,
    error: Option<String>,
}

/// A resource's health: the writer's set of unreadable keys, and what readers load.
#[derive(Debug)]
pub struct Health {
    /// Writer-only: object key → the value that cannot be read.
    unreadable: Mutex<imbl::OrdMap<Arc<str>, Unreadable>>,
    /// Loaded by readers; None: ready.
    published: ArcSwapOption<Pending>,
    resource: String,
    /// `watchd_unreadable_objects` of this resource, registered once (published per
    /// revision).
    unreadable_gauge: metrics::Gauge,
}

/// How a batch of changes moved a resource's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// No change.
    Same,
    /// It became pending: an unreadable value appeared.
    Broke,
    /// It became ready: the last unreadable value was replaced or deleted.
    Healed,
}

impl Health {
    /// Pending (not yet listed) since now.
    pub fn new(resource: String) -> Health {
        Health {
            unreadable: Mutex::new(imbl::OrdMap::new()),
            published: ArcSwapOption::from_pointee(Pending {
                since: Instant::now(),
                error: None,
            }),
            unreadable_gauge: metrics::gauge!("watchd_unreadable_objects", "resource" => resource.clone()),
            resource,
        }
    }

    /// What readers see now.
    pub fn readiness(&self) -> Readiness {
        match self.published.load_full() {
            None => Readiness::Ready,
            Some(p) => Readiness::Pending {
                since: p.since,
                error: p.error.clone(),
            },
        }
    }

    /// The unreadable values of the current state, in key order.
    pub fn unreadable(&self) -> Vec<(Arc<str>, Unreadable)> {
        self.lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, imbl::OrdMap<Arc<str>, Unreadable>> {
        self.unreadable.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A list loaded the resource with these unreadable values (a new epoch).
    pub fn loaded(&self, unreadable: imbl::OrdMap<Arc<str>, Unreadable>) {
        *self.lock() = unreadable;
        self.publish();
    }

    /// Records that `key` now holds an unreadable value.
    pub fn set(&self, key: Arc<str>, value: Unreadable) {
        self.lock().insert(key, value);
    }

    /// Whether `key` holds an unreadable value.
    pub fn is_unreadable(&self, key: &str) -> bool {
        self.lock().contains_key(key)
    }

    /// Records that `key` holds a readable value, or none.
    pub fn clear(&self, key: &str) {
        let mut map = self.lock();
        if map.contains_key(key) {
            map.remove(key);
        }
    }

    /// Publishes the state after a batch of `set`/`clear`, and tells how it moved.
    pub fn publish(&self) -> Transition {
        let map = self.lock().clone();
        self.unreadable_gauge.set(map.len() as f64);
        let was_pending = self.published.load().is_some();
        match map.iter().next() {
            None => {
                self.published.store(None);
                if was_pending {
                    Transition::Healed
                } else {
                    Transition::Same
                }
            }
            Some((_, first)) => {
                let since = self
                    .published
                    .load()
                    .as_ref()
                    .map_or_else(Instant::now, |p| p.since);
                let error = format!(
                    "failed to list {}: {}",
                    self.resource,
                    first.storage_error()
                );
                self.published.store(Some(Arc::new(Pending {
                    since,
                    error: Some(error),
                })));
                if was_pending {
                    Transition::Same
                } else {
                    Transition::Broke
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn bad(key: &str) -> Unreadable {
        Unreadable {
            etcd_key: key.into(),
            error: DecodeError::Protobuf("truncated protobuf".into()),
            revision: Revision(3),
        }
    }

    #[test]
    fn pending_until_loaded_then_broken_and_healed_by_its_values() {
        let h = Health::new("secrets".into());
        assert!(matches!(
            h.readiness(),
            Readiness::Pending { error: None, .. }
        ));
        assert_eq!(h.readiness().message(), "storage is (re)initializing");
        h.loaded(imbl::OrdMap::new());
        assert!(matches!(h.readiness(), Readiness::Ready));
        h.set(Arc::from("ns/b"), bad("/registry/secrets/ns/b"));
        h.set(Arc::from("ns/a"), bad("/registry/secrets/ns/a"));
        assert_eq!(h.publish(), Transition::Broke);
        assert_eq!(
            h.readiness().message(),
            "storage is (re)initializing: failed to list secrets: unable to decode key \"/registry/secrets/ns/a\": invalid protobuf: truncated protobuf"
        );
        h.clear("ns/a");
        assert_eq!(h.publish(), Transition::Same);
        h.clear("ns/b");
        assert_eq!(h.publish(), Transition::Healed);
        assert!(h.unreadable().is_empty());
    }

    #[test]
    fn retry_after_grows_like_kube_apiservers() {
        let now = Instant::now();
        let at = |secs: u64| {
            Readiness::Pending {
                since: now,
                error: None,
            }
            .retry_after(now + Duration::from_secs(secs))
        };
        assert_eq!(
            (at(0), at(11), at(12), at(19), at(57), at(3600)),
            (1, 1, 2, 3, 30, 30)
        );
    }
}
