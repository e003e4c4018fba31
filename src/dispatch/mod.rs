//! Who wants an event: watchers are cursors into a resource's event log, and this index
//! decides which of them to wake when events arrive.
//!
//! A watcher subscribes with its most selective [`WakeKey`]: an exact indexed field value
//! (`spec.nodeName=n` for pods), an exact name, or its namespace; watchers with none of
//! these wait on the resource-wide notifier. An event wakes the resource-wide waiters and
//! the waiters of its own keys (those of the new and the previous state, so a pod leaving
//! node `n` still wakes `n`'s watchers for their DELETED). Each key is one hash lookup, so
//! an event costs O(keys + matching watchers), not O(all watchers). Waking is batched:
//! once per key per applied etcd response.

use std::collections::HashSet;
use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::Notify;

/// What a watcher can be found by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WakeKey {
    /// All objects of a namespace.
    Namespace(Box<str>),
    /// Objects with this name (in any namespace).
    Name(Box<str>),
    /// Objects whose indexed field (`ResourceInfo::indexed_field`) has this value.
    Field(Box<str>),
}

/// The wake-up index of one resource.
#[derive(Default)]
pub struct WakeIndex {
    everything: Arc<Notify>,
    by_key: DashMap<WakeKey, Arc<Notify>>,
}

/// What a watcher waits on. Dropping it forgets an unused key.
pub struct WakeHandle {
    index: Arc<WakeIndex>,
    key: Option<WakeKey>,
    notify: Arc<Notify>,
}

impl WakeIndex {
    /// Registers a watcher under `key` (None: the resource-wide notifier).
    pub fn subscribe(self: &Arc<Self>, key: Option<WakeKey>) -> WakeHandle {
        let notify = match &key {
            None => self.everything.clone(),
            Some(k) => self
                .by_key
                .entry(k.clone())
                .or_insert_with(|| Arc::new(Notify::new()))
                .clone(),
        };
        WakeHandle {
            index: self.clone(),
            key,
            notify,
        }
    }

    /// Wakes every resource-wide watcher and the watchers of these keys.
    pub fn wake<'k>(&self, keys: impl IntoIterator<Item = &'k WakeKey>) {
        self.everything.notify_waiters();
        if self.by_key.is_empty() {
            return;
        }
        for k in keys {
            if let Some(n) = self.by_key.get(k) {
                n.notify_waiters();
            }
        }
    }

    /// Wakes every watcher (the epoch ended, or the daemon is stopping).
    pub fn wake_all(&self) {
        self.everything.notify_waiters();
        for n in self.by_key.iter() {
            n.notify_waiters();
        }
    }

    /// Number of keys with a registered watcher.
    pub fn keys_watched(&self) -> usize {
        self.by_key.len()
    }
}

/// Collects the keys an object state can be found by.
pub fn keys_of(
    keys: &mut HashSet<WakeKey>,
    namespace: Option<&str>,
    name: &str,
    indexed_value: Option<&str>,
) {
    if let Some(ns) = namespace {
        keys.insert(WakeKey::Namespace(Box::from(ns)));
    }
    keys.insert(WakeKey::Name(Box::from(name)));
    if let Some(v) = indexed_value {
        keys.insert(WakeKey::Field(Box::from(v)));
    }
}

impl WakeHandle {
    /// The notifier to wait on (enable the `Notified` before checking the log).
    pub fn notify(&self) -> &Notify {
        &self.notify
    }

    /// A shared reference to the notifier, for waiting while the watcher is borrowed.
    pub fn notifier(&self) -> Arc<Notify> {
        self.notify.clone()
    }
}

impl Drop for WakeHandle {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            // Two references left: ours and the map's.
            self.index.by_key.remove_if(&key, |_, n| {
                Arc::strong_count(n) <= 2 && Arc::ptr_eq(n, &self.notify)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ns(s: &str) -> WakeKey {
        WakeKey::Namespace(Box::from(s))
    }

    #[tokio::test]
    async fn keyed_watchers_wake_only_for_their_keys() {
        let idx = Arc::new(WakeIndex::default());
        let a = idx.subscribe(Some(ns("a")));
        let b = idx.subscribe(Some(ns("b")));
        let node = idx.subscribe(Some(WakeKey::Field(Box::from("node-1"))));
        let all = idx.subscribe(None);
        let (na, nb, nn, nall) = (
            a.notify().notified(),
            b.notify().notified(),
            node.notify().notified(),
            all.notify().notified(),
        );
        tokio::pin!(na, nb, nn, nall);
        na.as_mut().enable();
        nb.as_mut().enable();
        nn.as_mut().enable();
        nall.as_mut().enable();
        let mut keys = HashSet::new();
        keys_of(&mut keys, Some("a"), "p1", Some("node-1"));
        idx.wake(&keys);
        let short = Duration::from_millis(20);
        assert!(tokio::time::timeout(short, na).await.is_ok());
        assert!(tokio::time::timeout(short, nn).await.is_ok());
        assert!(tokio::time::timeout(short, nall).await.is_ok());
        assert!(tokio::time::timeout(short, nb).await.is_err());
    }

    #[test]
    fn unused_keys_are_forgotten() {
        let idx = Arc::new(WakeIndex::default());
        let h1 = idx.subscribe(Some(ns("a")));
        let h2 = idx.subscribe(Some(ns("a")));
        assert_eq!(idx.keys_watched(), 1);
        drop(h1);
        assert_eq!(idx.keys_watched(), 1);
        drop(h2);
        assert_eq!(idx.keys_watched(), 0);
    }
}
