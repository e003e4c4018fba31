//! Lease renewals: each kubelet renews its node's Lease every 10 s (a
//! quarter of its 40 s duration), the leader-elected components theirs
//! likewise — in a real cluster the most frequent write of all. Here every
//! Lease is renewed once per `lease_renew_period`, one at a time on a timer
//! of that period divided by the number of Leases, so the writes are spread
//! evenly rather than bunched, as independent kubelets spread them.

use std::time::Duration;

use super::Demo;
use crate::objects::{lease, now_rfc3339_micros};
use crate::store::Store;

impl Demo<'_> {
    /// Time between two renewals (each of a different Lease), or `None` when
    /// renewals are off or there is nothing to renew.
    pub(super) fn renew_interval(&self) -> Option<Duration> {
        let period = self.cfg.lease_renew_period;
        let n = u32::try_from(self.leases.len()).ok().filter(|&n| n > 0)?;
        (!period.is_zero()).then(|| period / n)
    }

    /// Renews the next Lease in turn: `spec.renewTime` = now.
    pub(super) async fn renew_next_lease(&mut self, store: &mut Store) {
        if self.leases.is_empty() {
            return;
        }
        let key = self.leases[self.next_lease % self.leases.len()].clone();
        self.next_lease = (self.next_lease + 1) % self.leases.len();
        let now = now_rfc3339_micros();
        if self.sync(store, &key, |l| lease::renew(l, &now)).await {
            self.renewals += 1;
        }
    }
}
