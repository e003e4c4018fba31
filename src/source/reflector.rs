//! The one list → watch → resume loop, as client-go's reflector: a [`Follow`] makes one
//! attempt (a list when there is nothing to resume from, then a watch), the attempt
//! ends with an [`End`], and the loop decides from it alone what comes next: resume at
//! once, list again, give up, or retry after a backoff that doubles up to
//! [`config::RECONNECT_BACKOFF_MAX`]. Two sources implement it: etcd (`etcd.rs`: one
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
    fn retry_now(&self) -> Attempt<'_> {
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
        let end = tokio::select! {
            end = source.attempt(&mut resume) => end,
            _ = shutdown.changed() => End::Shutdown,
        };
        source.lost();
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
        source.retrying(&end, resume, backoff);
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
            _ = source.retry_now() => {}
        }
        backoff = (backoff * 2).min(config::RECONNECT_BACKOFF_MAX);
    }
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
        fn retrying(&mut self, _: &End, _: Option<Revision>, backoff: std::time::Duration) {
            self.log.lock().unwrap().push(format!("retry {backoff:?}"));
        }
        fn not_served(&mut self, code: u16, _: &str) -> bool {
            code == 404
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_end_leads_where_it_should() {
        let log = Arc::new(Mutex::new(Vec::new()));
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
        reflect(
            Script {
                ends,
                log: log.clone(),
            },
            rx,
        )
        .await;
        let ms = |n| format!("retry {:?}", config::RECONNECT_BACKOFF_MIN * n);
        assert_eq!(
            *log.lock().unwrap(),
            [
                "list".to_string(),
                "resume".into(), // Closed: at once
                ms(1),           // Failed: after the first backoff
                "resume".into(),
                ms(2), // doubled
                "resume".into(),
                "relist".into(), // Expired: a list, at once
                "list".into(),
                ms(1), // NotServed 403: retried, the backoff reset by the re-list
                "resume".into(),
                "retry 0ns".into(), // Recheck: at once
                "resume".into(),    // NotServed 404: stops
            ]
        );
    }
}
