//! etcd leases for objects with a time to live, shared the way
//! kube-apiserver's lease manager (`storage/etcd3/lease_manager.go`) shares
//! them: one lease serves every write for a while, so a busy cluster does
//! not grant a lease per Event.
//!
//! A lease is granted for `ttl` plus a reuse window (5 % of `ttl`, at most
//! 60 s) and reused while it still outlives a fresh `ttl` from now by no more
//! than that window, for at most 1000 objects. Every object therefore lives
//! between `ttl` and `ttl` + window.

use std::time::{Duration, Instant};

use super::Store;

/// kube-apiserver's `defaultLeaseReuseDurationSeconds`.
const MAX_REUSE: Duration = Duration::from_secs(60);
/// kube-apiserver's `leaseReuseDurationPercent`.
const REUSE_PERCENT: u32 = 5;
/// kube-apiserver's `defaultLeaseMaxObjectCount`.
const MAX_OBJECTS: u32 = 1000;

/// The lease current writes attach to, for one TTL.
#[derive(Debug)]
pub struct TtlLeases {
    ttl: Duration,
    current: Option<Granted>,
}

#[derive(Clone, Copy, Debug)]
struct Granted {
    id: i64,
    expires: Instant,
    attached: u32,
}

impl TtlLeases {
    /// Leases for objects living `ttl` (whole seconds, at least 1).
    pub fn new(ttl: Duration) -> Self {
        let ttl = Duration::from_secs(ttl.as_secs().max(1));
        Self { ttl, current: None }
    }

    /// How much longer than `ttl` a lease is granted for, and reused.
    pub fn reuse_window(&self) -> Duration {
        (self.ttl * REUSE_PERCENT / 100).min(MAX_REUSE)
    }

    /// The TTL, in seconds, a new lease is granted with.
    pub fn granted_ttl(&self) -> i64 {
        let secs = (self.ttl + self.reuse_window()).as_secs();
        i64::try_from(secs).unwrap_or(i64::MAX)
    }

    /// The lease to attach one more object to at `now`, if the current one
    /// can take it.
    fn reusable(&mut self, now: Instant) -> Option<i64> {
        let (ttl, window) = (self.ttl, self.reuse_window());
        let g = self.current.as_mut()?;
        let valid = now + ttl < g.expires;
        let sufficient = now + ttl + window >= g.expires;
        if valid && sufficient && g.attached < MAX_OBJECTS {
            g.attached += 1;
            return Some(g.id);
        }
        None
    }

    /// The lease to attach the next object to: the current one while it
    /// fits, else a new one granted from `store`.
    pub async fn lease(&mut self, store: &mut Store) -> i64 {
        if let Some(id) = self.reusable(Instant::now()) {
            return id;
        }
        let granted_at = Instant::now();
        let id = store.grant_lease(self.granted_ttl()).await;
        self.adopt(id, granted_at);
        id
    }

    fn adopt(&mut self, id: i64, granted_at: Instant) {
        self.current = Some(Granted {
            id,
            expires: granted_at + self.ttl + self.reuse_window(),
            attached: 1,
        });
    }

    /// Forgets the current lease (etcd lost it: it was wiped or restarted
    /// without its data), so the next object gets a new one.
    pub fn reset(&mut self) {
        self.current = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_follow_kube_apiserver() {
        let hour = TtlLeases::new(Duration::from_secs(3600));
        assert_eq!(hour.reuse_window(), Duration::from_secs(60));
        assert_eq!(hour.granted_ttl(), 3660);
        let short = TtlLeases::new(Duration::from_secs(100));
        assert_eq!(short.reuse_window(), Duration::from_secs(5));
        assert_eq!(short.granted_ttl(), 105);
        assert_eq!(TtlLeases::new(Duration::from_millis(10)).granted_ttl(), 1);
    }

    #[test]
    fn a_lease_is_reused_within_its_window_only() {
        let mut leases = TtlLeases::new(Duration::from_secs(100));
        let t0 = Instant::now();
        assert_eq!(leases.reusable(t0), None, "nothing granted yet");
        leases.adopt(7, t0);
        assert_eq!(leases.reusable(t0 + Duration::from_secs(4)), Some(7));
        assert_eq!(
            leases.reusable(t0 + Duration::from_secs(5)),
            None,
            "too short"
        );
        leases.adopt(8, t0);
        for _ in 1..MAX_OBJECTS {
            assert_eq!(leases.reusable(t0), Some(8));
        }
        assert_eq!(leases.reusable(t0), None, "full");
        leases.reset();
        assert_eq!(leases.reusable(t0), None);
    }
}
