//! Per-user limits: open watches and lists in flight. A request over the limit is answered
//! 429 with `Retry-After`; a permit is returned when the watch ends or the list is
//! answered (dropping the [`Permit`]).

use std::sync::Arc;

use dashmap::DashMap;

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Open watches.
    Watch,
    /// Lists being answered.
    List,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Watch => "watch",
            Kind::List => "list",
        }
    }
}

/// The counters, per user.
#[derive(Debug, Default)]
pub struct UserLimits {
    max_watches: usize,
    max_lists: usize,
    watches: DashMap<String, usize>,
    lists: DashMap<String, usize>,
}

/// One counted watch or list; dropping it returns the slot.
#[derive(Debug)]
pub struct Permit {
    limits: Arc<UserLimits>,
    user: String,
    kind: Kind,
}

impl UserLimits {
    /// Limits of `max_watches` open watches and `max_lists` lists in flight per user;
    /// 0 is no limit.
    pub fn new(max_watches: usize, max_lists: usize) -> Arc<UserLimits> {
        // Exported from the start, at zero: an alert on their increase sees the first one.
        for kind in [Kind::Watch, Kind::List] {
            metrics::counter!("watchd_user_limit_rejections_total", "kind" => kind.label())
                .increment(0);
        }
        Arc::new(UserLimits {
            max_watches,
            max_lists,
            ..UserLimits::default()
        })
    }

    fn counters(&self, kind: Kind) -> (&DashMap<String, usize>, usize) {
        match kind {
            Kind::Watch => (&self.watches, self.max_watches),
            Kind::List => (&self.lists, self.max_lists),
        }
    }

    /// A permit for one more `kind` of `user`, or Err(limit) when the user is at it.
    pub fn acquire(self: &Arc<Self>, user: &str, kind: Kind) -> Result<Permit, usize> {
        let (map, max) = self.counters(kind);
        let mut n = map.entry(user.to_string()).or_insert(0);
        if max > 0 && *n >= max {
            metrics::counter!("watchd_user_limit_rejections_total", "kind" => kind.label())
                .increment(1);
            return Err(max);
        }
        *n += 1;
        Ok(Permit {
            limits: self.clone(),
            user: user.to_string(),
            kind,
        })
    }

    /// How many `kind` the user holds now.
    pub fn held(&self, user: &str, kind: Kind) -> usize {
        self.counters(kind).0.get(user).map_or(0, |n| *n)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let (map, _) = self.limits.counters(self.kind);
        map.remove_if_mut(&self.user, |_, n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_are_counted_per_user_and_returned_on_drop() {
        let l = UserLimits::new(2, 0);
        let a1 = l.acquire("alice", Kind::Watch).unwrap();
        let _a2 = l.acquire("alice", Kind::Watch).unwrap();
        assert_eq!(l.acquire("alice", Kind::Watch).unwrap_err(), 2);
        let _b = l.acquire("bob", Kind::Watch).unwrap();
        assert_eq!(l.held("alice", Kind::Watch), 2);
        drop(a1);
        assert_eq!(l.held("alice", Kind::Watch), 1);
        let _a3 = l.acquire("alice", Kind::Watch).unwrap();
        // Lists are unlimited here.
        let lists: Vec<_> = (0..10)
            .map(|_| l.acquire("alice", Kind::List).unwrap())
            .collect();
        assert_eq!(l.held("alice", Kind::List), 10);
        drop(lists);
        assert_eq!(l.held("alice", Kind::List), 0);
        assert!(l.lists.is_empty(), "users without permits are forgotten");
    }
}
