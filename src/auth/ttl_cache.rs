//! A bounded map whose entries expire: the webhooks' decision caches. kube-apiserver keeps
//! the same (an LRU of 8192 entries with an expiry per entry); here, when the map is
//! full, expired entries go first and then those closest to expiring, which is what an
//! LRU of same-TTL entries evicts too.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries kept at most (kube-apiserver's webhook caches hold 8192).
pub const CAPACITY: usize = 8192;

/// A map from `K` to `V` whose entries live for the TTL they were inserted with.
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    /// An empty cache of at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// The value of `key`, if present and not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key) {
            Some((v, expires)) if *expires > now => Some(v.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `key` until `now + ttl`; a zero TTL keeps nothing.
    pub fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (_, expires)| *expires > now);
            // Still full: drop the tenth closest to expiring, so that a full cache does
            // not pay for a scan on every insert.
            if entries.len() >= self.capacity {
                let mut by_expiry: Vec<(Instant, K)> =
                    entries.iter().map(|(k, (_, e))| (*e, k.clone())).collect();
                by_expiry.sort_by_key(|(e, _)| *e);
                for (_, k) in by_expiry.into_iter().take(self.capacity / 10 + 1) {
                    entries.remove(&k);
                }
            }
        }
        entries.insert(key, (value, now + ttl));
    }

    /// Entries held (expired ones included until they are looked at or evicted).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_their_ttl_and_a_zero_ttl_keeps_nothing() {
        let c = TtlCache::new(10);
        let t0 = Instant::now();
        c.insert("a", 1, Duration::from_secs(5), t0);
        c.insert("b", 2, Duration::ZERO, t0);
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(4)), Some(1));
        assert_eq!(c.get(&"b", t0), None);
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(5)), None);
        assert!(c.is_empty(), "an expired entry looked at is gone");
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_those_closest_to_expiring() {
        let c = TtlCache::new(4);
        let t0 = Instant::now();
        for (i, k) in ["a", "b", "c", "d"].into_iter().enumerate() {
            c.insert(k, i, Duration::from_secs(10 + i as u64), t0);
        }
        c.insert("e", 4, Duration::from_secs(100), t0);
        assert_eq!(c.len(), 4);
        assert_eq!(c.get(&"a", t0), None, "closest to expiring went first");
        assert_eq!(c.get(&"e", t0), Some(4));
        let later = t0 + Duration::from_secs(12);
        c.insert("f", 5, Duration::from_secs(100), later);
        // b (11 s) and c (12 s) had expired and went; d and e stay.
        assert_eq!(c.get(&"d", later), Some(3));
        assert_eq!(c.get(&"f", later), Some(5));
        assert_eq!(c.len(), 3);
    }
}
