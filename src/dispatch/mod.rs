//! Who wants an event: watchers are cursors into a resource's event log, and this index
//! decides which of them to wake when events arrive.
//!
//! A watcher of one namespace waits on that namespace's notifier, found by hash lookup;
//! all other watchers wait on the resource-wide one. An event in namespace `ns` wakes the
//! resource-wide waiters and `ns`'s waiters only, so watchers of other namespaces cost
//! nothing. Waking is batched: one wake per namespace per applied etcd response.

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::Notify;

/// The wake-up index of one resource.
#[derive(Default)]
pub struct WakeIndex {
    everything: Arc<Notify>,
    by_namespace: DashMap<Box<str>, Arc<Notify>>,
}

/// What a watcher waits on. Dropping it forgets an unused namespace entry.
pub struct WakeHandle {
    index: Arc<WakeIndex>,
    namespace: Option<Box<str>>,
    notify: Arc<Notify>,
}

impl WakeIndex {
    /// Registers a watcher of `namespace` (None: every namespace or a cluster-scoped resource).
    pub fn subscribe(self: &Arc<Self>, namespace: Option<&str>) -> WakeHandle {
        let notify = match namespace {
            None => self.everything.clone(),
            Some(ns) => self
                .by_namespace
                .entry(Box::from(ns))
                .or_insert_with(|| Arc::new(Notify::new()))
                .clone(),
        };
        WakeHandle {
            index: self.clone(),
            namespace: namespace.map(Box::from),
            notify,
        }
    }

    /// Wakes the watchers that may want events in these namespaces (None for
    /// cluster-scoped objects), plus every resource-wide watcher.
    pub fn wake<'n>(&self, namespaces: impl IntoIterator<Item = &'n str>) {
        self.everything.notify_waiters();
        for ns in namespaces {
            if let Some(n) = self.by_namespace.get(ns) {
                n.notify_waiters();
            }
        }
    }

    /// Wakes every watcher (the epoch ended, or the daemon is stopping).
    pub fn wake_all(&self) {
        self.everything.notify_waiters();
        for n in self.by_namespace.iter() {
            n.notify_waiters();
        }
    }

    /// Number of namespaces with a registered watcher.
    pub fn namespaces_watched(&self) -> usize {
        self.by_namespace.len()
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
        if let Some(ns) = self.namespace.take() {
            // Two references left: ours and the map's.
            self.index.by_namespace.remove_if(&ns, |_, n| {
                Arc::strong_count(n) <= 2 && Arc::ptr_eq(n, &self.notify)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn namespace_watchers_wake_only_for_their_namespace() {
        let idx = Arc::new(WakeIndex::default());
        let a = idx.subscribe(Some("a"));
        let b = idx.subscribe(Some("b"));
        let all = idx.subscribe(None);
        let na = a.notify().notified();
        let nb = b.notify().notified();
        let nall = all.notify().notified();
        tokio::pin!(na, nb, nall);
        na.as_mut().enable();
        nb.as_mut().enable();
        nall.as_mut().enable();
        idx.wake(["a"]);
        let short = Duration::from_millis(20);
        assert!(tokio::time::timeout(short, na).await.is_ok());
        assert!(tokio::time::timeout(short, nall).await.is_ok());
        assert!(tokio::time::timeout(short, nb).await.is_err());
    }

    #[test]
    fn unused_namespace_entries_are_forgotten() {
        let idx = Arc::new(WakeIndex::default());
        let h1 = idx.subscribe(Some("a"));
        let h2 = idx.subscribe(Some("a"));
        assert_eq!(idx.namespaces_watched(), 1);
        drop(h1);
        assert_eq!(idx.namespaces_watched(), 1);
        drop(h2);
        assert_eq!(idx.namespaces_watched(), 0);
    }
}
