//! The consistency check, as kube-apiserver 1.34's cache inconsistency detector: every
//! `--consistency-check-interval`, each ready resource's cache is compared with etcd at
//! one revision R. The cache side is the resource's view at R (a snapshot, nothing
//! copied); the etcd side a keys-only range of the resource's directory at R, in pages.
//! Both sides are reduced to the (key, mod_revision) of every object, in key order: a
//! digest of each (FNV-1a 64, with the count) and the first key where they differ.
//!
//! A mismatch is logged as an error naming the resource, counted in
//! `watchd_storage_consistency_checks_total{result="mismatch"}`, and answered by a
//! re-list of that resource into a new epoch: the etcd source's ingestion task reads
//! the directory at its applied revision and loads it (`etcd.rs`), and the resource's
//! watchers are ended so that their clients list again.
//!
//! The check never holds ingestion: it reads snapshots, and etcd through its own
//! connection. Its cost on etcd is one keys-only range of each resource per interval
//! (ARCHITECTURE.md states it for 50 000 pods).

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use tokio::sync::{mpsc, watch};

use super::client::{EtcdClient, EtcdConfig};
use super::{failed, SourceError};
use crate::config;
use crate::registry;
use crate::store::health::Readiness;
use crate::store::{Cache, ResourceStore};
use crate::Revision;

/// FNV-1a, 64 bits: the digest of a side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest {
    /// The hash of every (key, mod_revision), in key order.
    pub hash: u64,
    /// How many objects.
    pub count: u64,
}

impl Default for Digest {
    fn default() -> Self {
        Digest {
            hash: crate::selectors::shard::FNV1A64_OFFSET,
            count: 0,
        }
    }
}

impl Digest {
    fn add(&mut self, key: &str, revision: Revision) {
        let h = crate::selectors::shard::fnv1a64_extend(self.hash, key.as_bytes());
        let h = crate::selectors::shard::fnv1a64_extend(h, &[0]);
        self.hash = crate::selectors::shard::fnv1a64_extend(h, &revision.0.to_le_bytes());
        self.count += 1;
    }
}

/// Where the two sides first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// The cache holds an object etcd does not.
    OnlyInCache(String, Revision),
    /// etcd holds an object the cache does not.
    OnlyInEtcd(String, Revision),
    /// Both hold the object, at different revisions.
    Revision {
        /// The object key.
        key: String,
        /// Its mod_revision in the cache.
        cache: Revision,
        /// Its mod_revision in etcd.
        etcd: Revision,
    },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::OnlyInCache(k, r) => {
                write!(f, "{k} (revision {r}) is in the cache, not in etcd")
            }
            Difference::OnlyInEtcd(k, r) => {
                write!(f, "{k} (revision {r}) is in etcd, not in the cache")
            }
            Difference::Revision { key, cache, etcd } => write!(
                f,
                "{key} is at revision {cache} in the cache, {etcd} in etcd"
            ),
        }
    }
}

/// The two sides of one resource, compared as etcd's keys arrive (in key order) against
/// the cache's objects (in the same order): their keys are borrowed, not copied; a key is
/// copied only into the first difference.
pub struct Comparison<K: AsRef<str>, I: Iterator<Item = (K, Revision)>> {
    cached: std::iter::Peekable<I>,
    /// The cache's digest.
    pub cache: Digest,
    /// etcd's digest.
    pub etcd: Digest,
    /// The first difference, if any.
    pub first: Option<Difference>,
}

impl<K: AsRef<str>, I: Iterator<Item = (K, Revision)>> Comparison<K, I> {
    /// Compares against `cached`: the cache's (object key, mod_revision), in key order.
    pub fn new(cached: I) -> Self {
        Comparison {
            cached: cached.peekable(),
            cache: Digest::default(),
            etcd: Digest::default(),
            first: None,
        }
    }

    fn differ(&mut self, d: Difference) {
        if self.first.is_none() {
            self.first = Some(d);
        }
    }

    /// The next object of etcd (keys come in increasing order).
    pub fn etcd(&mut self, key: &str, revision: Revision) {
        self.etcd.add(key, revision);
        while let Some((k, r)) = self.cached.next_if(|(k, _)| k.as_ref() < key) {
            self.cache.add(k.as_ref(), r);
            self.differ(Difference::OnlyInCache(k.as_ref().to_string(), r));
        }
        match self.cached.next_if(|(k, _)| k.as_ref() == key) {
            Some((k, r)) => {
                self.cache.add(k.as_ref(), r);
                if r != revision {
                    self.differ(Difference::Revision {
                        key: k.as_ref().to_string(),
                        cache: r,
                        etcd: revision,
                    });
                }
            }
            None => self.differ(Difference::OnlyInEtcd(key.to_string(), revision)),
        }
    }

    /// Ends the comparison: the cache's objects after etcd's last key. Whether the sides
    /// agree: the same digest (the first difference says where they do not).
    pub fn finish(&mut self) -> bool {
        while let Some((k, r)) = self.cached.next() {
            self.cache.add(k.as_ref(), r);
            self.differ(Difference::OnlyInCache(k.as_ref().to_string(), r));
        }
        self.cache == self.etcd
    }
}

/// The cache's side of an object: its key (borrowed) and mod_revision. A function, not a
/// closure: the future that holds the iterator must be `Send` for any lifetime.
fn cached(object: &crate::store::object::ObjectRef) -> (&str, Revision) {
    (object.key(), object.revision)
}

/// What one check of one resource found.
#[derive(Debug)]
pub struct Checked {
    /// The revision compared at.
    pub revision: Revision,
    /// The cache's digest.
    pub cache: Digest,
    /// etcd's digest.
    pub etcd: Digest,
    /// The first difference; None when the sides agree.
    pub first: Option<Difference>,
}

/// Compares `store`'s cache with etcd at the revision of its current view.
pub async fn check(
    client: &mut EtcdClient,
    cache: &Cache,
    store: &ResourceStore,
) -> Result<Checked, SourceError> {
    let view = store.view(cache.progress().applied());
    let at = view.revision;
    let index = cache.resources();
    let dir = &store.info.etcd_dir;
    let prefix = format!("{}/{dir}/", cache.prefix());
    let end = super::prefix_end(prefix.as_bytes());
    let mut cmp = Comparison::new(view.snapshot.objects.values().map(cached));
    let mut start = prefix.as_bytes().to_vec();
    loop {
        let opts = GetOptions::new()
            .with_range(end.clone())
            .with_keys_only()
            .with_limit(config::CONSISTENCY_CHECK_PAGE)
            .with_revision(at.0);
        let resp = client
            .kv
            .get(start.clone(), Some(opts))
            .await
            .map_err(failed("consistency check"))?;
        let Some(last) = resp.kvs().last() else { break };
        start = last.key().to_vec();
        start.push(0);
        for kv in resp.kvs() {
            // The keys the cache would hold: those ingestion routes to this resource and
            // that name an object of it.
            let Ok(key) = std::str::from_utf8(kv.key()) else {
                continue;
            };
            let Some(route) = registry::route_key(cache.prefix(), key, |d| index.has_dir(d)) else {
                continue;
            };
            if route.etcd_dir != dir.as_str()
                || registry::split_object_key(route.object_key, store.info.namespaced).is_none()
            {
                continue;
            }
            cmp.etcd(route.object_key, Revision(kv.mod_revision()));
        }
        if !resp.more() {
            break;
        }
    }
    let agree = cmp.finish();
    Ok(Checked {
        revision: at,
        cache: cmp.cache,
        etcd: cmp.etcd,
        first: if agree { None } else { cmp.first.take() },
    })
}

/// Runs a check of every ready resource each `interval` until `shutdown` turns true;
/// a resource that differs from etcd is sent (its etcd directory) on `relist`.
pub(super) async fn run(
    config: EtcdConfig,
    cache: Arc<Cache>,
    interval: Duration,
    relist: mpsc::Sender<String>,
    mut shutdown: watch::Receiver<bool>,
) {
    tracing::info!(
        ?interval,
        "consistency check: every resource compared with etcd each --consistency-check-interval"
    );
    let mut client: Option<EtcdClient> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        // Only a cache that follows etcd is compared: before its sync, or while its watch
        // is down, it is behind by design.
        if !cache.is_synced() || !cache.is_watch_live() {
            continue;
        }
        let c = match client.as_mut() {
            Some(c) => c,
            None => match config.connect().await {
                Ok(c) => client.insert(c),
                Err(e) => {
                    tracing::warn!(error = %e, "consistency check: cannot reach etcd; next check at the next interval");
                    continue;
                }
            },
        };
        let round = tokio::select! {
            r = round(c, &cache, &relist) => r,
            _ = shutdown.changed() => return,
        };
        if round.is_err() {
            client = None;
        }
    }
}

/// One check of every ready resource. An etcd error ends the round (the connection is
/// made again for the next).
async fn round(
    client: &mut EtcdClient,
    cache: &Cache,
    relist: &mpsc::Sender<String>,
) -> Result<(), SourceError> {
    let started = Instant::now();
    let index = cache.resources();
    let (mut checked, mut keys) = (0usize, 0u64);
    for store in index.stores() {
        // A resource not ready answers reads from etcd, and its unreadable values are
        // not objects of the cache: nothing to compare.
        if !matches!(store.health.readiness(), Readiness::Ready) {
            continue;
        }
        let resource = store.info.qualified_name();
        let result = check(client, cache, store).await;
        let outcome = match &result {
            Ok(c) if c.first.is_none() => "match",
            Ok(_) => "mismatch",
            Err(_) => "error",
        };
        metrics::counter!("watchd_storage_consistency_checks_total", "resource" => resource.clone(), "result" => outcome)
            .increment(1);
        let found = match result {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(%resource, error = %e, "consistency check: etcd did not answer; the round ends");
                return Err(e);
            }
        };
        checked += 1;
        keys += found.etcd.count;
        let Some(first) = &found.first else {
            continue;
        };
        tracing::error!(
            %resource,
            revision = %found.revision,
            cache_objects = found.cache.count,
            etcd_objects = found.etcd.count,
            cache_digest = format_args!("{:016x}", found.cache.hash),
            etcd_digest = format_args!("{:016x}", found.etcd.hash),
            difference = %first,
            "consistency check: the cache differs from etcd; re-listing the resource (its watchers re-list)"
        );
        if relist.send(store.info.etcd_dir.clone()).await.is_err() {
            return Ok(());
        }
    }
    metrics::gauge!("watchd_storage_consistency_check_seconds")
        .set(started.elapsed().as_secs_f64());
    tracing::debug!(resources = checked, keys, elapsed = ?started.elapsed(), "consistency check done");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(items: &[(&str, i64)]) -> Vec<(Arc<str>, Revision)> {
        items
            .iter()
            .map(|(k, r)| (Arc::from(*k), Revision(*r)))
            .collect()
    }

    fn compare(cache: &[(&str, i64)], etcd: &[(&str, i64)]) -> (bool, Option<Difference>) {
        let mut cmp = Comparison::new(side(cache).into_iter());
        for (k, r) in etcd {
            cmp.etcd(k, Revision(*r));
        }
        let agree = cmp.finish();
        (agree, cmp.first)
    }

    #[test]
    fn equal_sides_agree() {
        let items = [("a/x", 3), ("a/y", 5), ("b/x", 4)];
        assert_eq!(compare(&items, &items), (true, None));
        assert_eq!(compare(&[], &[]), (true, None));
    }

    #[test]
    fn a_missing_object_on_either_side_is_named() {
        let etcd = [("a/x", 3), ("a/y", 5), ("b/x", 4)];
        let (agree, first) = compare(&[("a/x", 3), ("b/x", 4)], &etcd);
        assert!(!agree);
        assert_eq!(
            first,
            Some(Difference::OnlyInEtcd("a/y".into(), Revision(5)))
        );
        let (agree, first) = compare(&etcd, &[("a/x", 3), ("a/y", 5)]);
        assert!(!agree);
        assert_eq!(
            first,
            Some(Difference::OnlyInCache("b/x".into(), Revision(4)))
        );
    }

    #[test]
    fn a_stale_revision_is_named() {
        let (agree, first) = compare(&[("a/x", 3), ("a/y", 4)], &[("a/x", 3), ("a/y", 9)]);
        assert!(!agree);
        assert_eq!(
            first,
            Some(Difference::Revision {
                key: "a/y".into(),
                cache: Revision(4),
                etcd: Revision(9)
            })
        );
    }

    #[test]
    fn the_digest_is_fnv1a_64_of_key_zero_and_little_endian_revision() {
        // Computed independently: FNV-1a 64 of b"a/x\0" then 3u64 little-endian.
        let mut bytes = b"a/x\0".to_vec();
        bytes.extend_from_slice(&3i64.to_le_bytes());
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut d = Digest::default();
        d.add("a/x", Revision(3));
        assert_eq!((d.hash, d.count), (h, 1));
    }
}
