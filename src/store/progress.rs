//! How far the cache has applied its source: one owner, asked with the stores a reader
//! reads, so that no reader knows which source runs.
//!
//! A source feeds the cache in one of two ways. etcd is one watch of the whole keyspace:
//! one applied revision stands for every resource, and a reader of any set of stores
//! waits for that one. An upstream API server is a stream per resource: each store has
//! its own progress ([`ResourceStore::progress`], raised by its follower), a read of
//! several waits for the least of theirs, and a reader waiting for a revision says so
//! ([`Progress::want`]), so that the follower of a quiet resource can prove it reached
//! it (its progress probe). As etcd's `progress_requestor.go` stands between its
//! watchers and the progress notifications they wait for, this stands between readers
//! and the sources' revisions.
//!
//! Ingestion writes it ([`Progress::set_applied`], [`Progress::reset_applied`]; per-resource
//! progress through the store); readers only ask.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::resource::ResourceStore;
use crate::Revision;

/// The cache's progress through its source.
pub struct Progress {
    /// Whether each resource has its own progress (a stream per resource).
    per_resource: bool,
    /// The newest revision fully applied (a stream per resource: the newest any applied).
    applied: watch::Sender<Revision>,
}

impl Progress {
    /// Nothing applied yet; `per_resource` for a source with a stream per resource.
    pub(super) fn new(per_resource: bool) -> Progress {
        Progress {
            per_resource,
            applied: watch::channel(Revision::ZERO).0,
        }
    }

    /// The newest revision the source applied to any resource: with etcd, the revision
    /// every resource stands at. What wakes those who follow all changes (the RBAC index).
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

    /// Sets the applied revision to that of a new epoch, even below the last one: after
    /// etcd was restored from an older backup, its history is the one that counts.
    pub fn reset_applied(&self, revision: Revision) {
        self.applied.send_if_modified(|r| {
            let changed = revision != *r;
            *r = revision;
            changed
        });
        metrics::gauge!("watchd_applied_revision").set(revision.0 as f64);
    }

    /// Waits until [`Progress::applied`] reaches `revision`; false if `timeout` passed.
    pub async fn wait_applied(&self, revision: Revision, timeout: Duration) -> bool {
        let mut rx = self.applied.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|r| *r >= revision))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The newest revision fully applied to `store`: what views, bookmarks and watches
    /// without a resourceVersion start from.
    pub fn of(&self, store: &ResourceStore) -> Revision {
        if self.per_resource {
            store.progress()
        } else {
            self.applied()
        }
    }

    /// The newest revision fully applied to every one of `stores`.
    pub fn of_all<'a>(&self, stores: impl IntoIterator<Item = &'a ResourceStore>) -> Revision {
        if !self.per_resource {
            return self.applied();
        }
        stores
            .into_iter()
            .map(ResourceStore::progress)
            .min()
            .unwrap_or_default()
    }

    /// Waits until `revision` is applied to `store`; false if `timeout` passed first.
    /// The store's source is told the revision is wanted.
    pub async fn wait(&self, store: &ResourceStore, revision: Revision, timeout: Duration) -> bool {
        if !self.per_resource {
            return self.wait_applied(revision, timeout).await;
        }
        if store.progress() >= revision {
            return true;
        }
        store.want(revision);
        let mut rx = store.subscribe_progress();
        tokio::time::timeout(timeout, rx.wait_for(|r| *r >= revision))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Tells the sources of those of `stores` that have not applied `revision` that a
    /// reader waits for it (a watch holding events of a later revision back). Nothing
    /// to tell a single stream, which applies every revision in order.
    pub fn want<'a>(
        &self,
        stores: impl IntoIterator<Item = &'a ResourceStore>,
        revision: Revision,
    ) {
        if !self.per_resource {
            return;
        }
        for store in stores {
            if store.progress() < revision {
                store.want(revision);
            }
        }
    }

    /// Of `stores`, those whose source a consistent read of all of them must ask for its
    /// current revision: the first alone when one stream feeds them all (its answer
    /// covers every resource), each when every resource has its own.
    pub fn to_ask<'s>(&self, stores: &'s [Arc<ResourceStore>]) -> &'s [Arc<ResourceStore>] {
        if self.per_resource {
            stores
        } else {
            stores.get(..1).unwrap_or_default()
        }
    }
}
