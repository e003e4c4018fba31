//! The one list → watch → resume loop, as client-go's reflector: a [`Follow`] makes one
//! attempt (a list when there is nothing to resume from, then a watch), the attempt
//! ends with an [`End`], and the loop decides from it alone what comes next: resume at
//! once, list again, give up, or retry after a backoff as client-go's reflector's: from
//! [`config::RECONNECT_BACKOFF_MIN`], doubling up to [`config::RECONNECT_BACKOFF_MAX`],
//! each wait jittered up to twice its length (sources that failed together do not come
//! back together), reset by an attempt that lasted [`config::RECONNECT_BACKOFF_RESET`]. Two sources implement it: etcd (`etcd.rs`: one
//! watch of the whole keyspace) and each resource of an upstream API server
//! (`upstream/`).

use std::future::Future;
use std::pin::Pin;

use tokio::sync::watch;

use super::SourceError;
use crate::config;
use crate::Revision;

/// How an attempt ended: every way either source's list or watch can end.
#[derive(Debug)]
pub enum End {
    /// The watch's time was up: resume from the last revision, at once.
    Closed,
    /// The revision to resume from is gone (410 Expired; etcd compacted past it): list
    /// again, at once. Why, for the log.
    Expired(String),
    /// The source is not the one the cache followed (etcd restored from a backup, or
    /// replaced): list again, at once. Why, for the log.
    Replaced(String),
    /// A read found the source behind the cache while the watch ran: check it now, as a
    /// resume does, without a backoff.
    Recheck,
    /// The source does not serve what is followed to watchd (404, 403, 405): the status
    /// and its message.
    NotServed(u16, String),
    /// The source does not offer streaming lists: list in pages from now on.
    NoStreamingList(SourceError),
    /// A connection or protocol failure: resume after a backoff.
    Failed(SourceError),
    /// The daemon is stopping.
    Shutdown,
}

impl From<SourceError> for End {
    fn from(e: SourceError) -> End {
        End::Failed(e)
    }
}

/// A boxed future of a [`Follow`] (its methods are called through the trait).
pub type Attempt<'a> = Pin<Box<dyn Future<Output = End> + Send + 'a>>;

/// What one source does inside the loop; the loop does the rest.
pub trait Follow: Send {
    /// One attempt: when `resume` is None, a list (loaded into a new epoch) that sets
    /// it; then a watch from it, raising it as changes are applied. Ends how it ended.
    fn attempt<'a>(&'a mut self, resume: &'a mut Option<Revision>) -> Attempt<'a>;

    /// The attempt ended: its stream is down (readiness).
    fn lost(&mut self);

    /// A re-list is about to start, for `end` (Expired or Replaced): logs and counts it.
    fn relisting(&mut self, end: &End, resume: Option<Revision>);

    /// A retry after a failure: logs and counts it.
    fn retrying(&mut self, end: &End, resume: Option<Revision>, backoff: std::time::Duration);

    /// The source does not serve what is followed: true to stop following (it is not
    /// cached), false to retry after a backoff.
    fn not_served(&mut self, _code: u16, _message: &str) -> bool {
        false
    }

    /// The source refused a streaming list: list in pages from now on.
    fn no_streaming_list(&mut self, _why: &SourceError) {}

    /// Resolves when a retry should not wait out its backoff.
    fn retry_now(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::pending())
    }
}

/// Follows `source` until `shutdown` turns true (or it stops being followed).
pub async fn reflect<F: Follow>(mut source: F, mut shutdown: watch::Receiver<bool>) {
    let mut resume: Option<Revision> = None;
    let mut backoff = config::RECONNECT_BACKOFF_MIN;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let started = tokio::time::Instant::now();
        let end = tokio::select! {
            end = source.attempt(&mut resume) => end,
            _ = shutdown.changed() => End::Shutdown,
        };
        source.lost();
        if started.elapsed() >= config::RECONNECT_BACKOFF_RESET {
            backoff = config::RECONNECT_BACKOFF_MIN;
        }
        match &end {
            End::Shutdown => return,
            End::Closed | End::Recheck => {
                backoff = config::RECONNECT_BACKOFF_MIN;
                if matches!(end, End::Recheck) {
                    source.retrying(&end, resume, std::time::Duration::ZERO);
                }
                continue;
            }
            End::Expired(_) | End::Replaced(_) => {
                source.relisting(&end, resume);
                resume = None;
                backoff = config::RECONNECT_BACKOFF_MIN;
                continue;
            }
            End::NoStreamingList(why) => {
                source.no_streaming_list(why);
                continue;
            }
            End::NotServed(code, message) => {
                if source.not_served(*code, message) {
                    return;
                }
            }
            End::Failed(_) => {}
        }
        let wait = jittered(backoff);
        source.retrying(&end, resume, wait);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return,
            _ = source.retry_now() => {}
        }
        backoff = (backoff * 2).min(config::RECONNECT_BACKOFF_MAX);
    }
}

/// `base` and up to as much again, at random (client-go's `wait.Jitter(base, 1.0)`).
fn jittered(base: std::time::Duration) -> std::time::Duration {
    #[cfg(feature = "test-hooks")]
    if let Some(fixed) = super::test_hooks::reconnect_backoff() {
        return fixed;
    }
    use std::hash::BuildHasher;
    // A fresh RandomState is seeded from the OS once per thread, then stepped: enough
    // to spread processes and followers apart.
    let r = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    base + base.mul_f64((r >> 11) as f64 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A scripted source: each attempt pops the next end (setting `resume` when it lists).
    struct Script {
        ends: VecDeque<End>,
        log: Arc<Mutex<Vec<String>>>,
        waits: Arc<Mutex<Vec<std::time::Duration>>>,
    }

    impl Follow for Script {
        fn attempt<'a>(&'a mut self, resume: &'a mut Option<Revision>) -> Attempt<'a> {
            let listed = resume.is_none();
            if listed {
                *resume = Some(Revision(10));
            }
            self.log
                .lock()
                .unwrap()
                .push(if listed { "list" } else { "resume" }.into());
            let end = self.ends.pop_front().unwrap_or(End::Shutdown);
            Box::pin(async move { end })
        }
        fn lost(&mut self) {}
        fn relisting(&mut self, _: &End, _: Option<Revision>) {
            self.log.lock().unwrap().push("relist".into());
        }
        fn retrying(&mut self, end: &End, _: Option<Revision>, wait: std::time::Duration) {
            let now = if matches!(end, End::Recheck) {
                "recheck"
            } else {
                "retry"
            };
            self.log.lock().unwrap().push(now.into());
            self.waits.lock().unwrap().push(wait);
        }
        fn not_served(&mut self, code: u16, _: &str) -> bool {
            code == 404
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_end_leads_where_it_should() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let waits = Arc::new(Mutex::new(Vec::new()));
        let ends = VecDeque::from([
            End::Closed,
            End::Failed(SourceError::WatchEnded),
            End::Failed(SourceError::WatchEnded),
            End::Expired("gone".into()),
            End::NotServed(403, "no".into()),
            End::Recheck,
            End::NotServed(404, "no".into()),
        ]);
        let (_tx, rx) = watch::channel(false);
        let script = Script {
            ends,
            log: log.clone(),
            waits: waits.clone(),
        };
        reflect(script, rx).await;
        assert_eq!(
            *log.lock().unwrap(),
            [
                "list", "resume", // Closed: at once
                "retry", "resume", // Failed: after a backoff
                "retry", "resume", // Failed: after a longer one
                "relist", "list", // Expired: a list, at once
                "retry", "resume", // NotServed 403: retried
                "recheck",
                "resume", // Recheck: at once
                          // NotServed 404: stops
            ]
        );
        // The waits: jittered within [base, 2 × base), the base doubling, reset by the
        // re-list; none for the recheck.
        let min = config::RECONNECT_BACKOFF_MIN;
        let waits = waits.lock().unwrap().clone();
        let within = |w: std::time::Duration, base: std::time::Duration| w >= base && w < base * 2;
        assert!(within(waits[0], min), "{waits:?}");
        assert!(within(waits[1], min * 2), "{waits:?}");
        assert!(within(waits[2], min), "{waits:?}");
        assert_eq!(waits[3], std::time::Duration::ZERO);
    }

    #[test]
    fn jitter_spreads_waits() {
        let base = std::time::Duration::from_secs(1);
        let waits: std::collections::BTreeSet<_> = (0..50).map(|_| jittered(base)).collect();
        assert!(waits.iter().all(|w| *w >= base && *w < base * 2));
        assert!(waits.len() > 40, "{} distinct waits of 50", waits.len());
    }
}
