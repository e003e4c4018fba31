//! One etcd request for the current revision, shared by every consistent read that asks
//! while it is on its way.
//!
//! A consistent read must see a revision etcd had when the read arrived, so a request
//! cannot take the answer of a call that started before it. It takes the answer of the
//! first call that started after it: a request that finds no call in flight starts one;
//! one that finds a call in flight waits for it to end, then for the next one, which the
//! first of the waiters starts. However many consistent reads arrive at once, etcd sees
//! at most two of these requests in flight per round trip, not one per read (a storm of
//! 2 000 concurrent lists made 2 000 at once, and etcd answered them past the read's
//! deadline). Calls run in their own task, so a read that gives up does not strand the
//! others.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::Revision;

/// What a call gave: the revision, or its error as text (errors are not shared values).
type Answer = Result<Revision, String>;

#[derive(Default)]
struct State {
    /// Calls started so far; the sequence number of the latest.
    started: u64,
    /// Whether a call is on its way.
    in_flight: bool,
    /// The last call that ended: its sequence number and answer.
    last: Option<(u64, Answer)>,
}

/// The shared calls of one source.
#[derive(Default)]
pub struct RevisionFlight {
    state: Mutex<State>,
    ended: Notify,
}

impl RevisionFlight {
    /// A revision etcd had at or after this call, asked with `call` (run in a task of
    /// its own, by this request or by one that arrived after it).
    pub async fn current<F, Fut>(self: &Arc<Self>, call: F) -> Answer
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Answer> + Send + 'static,
    {
        let mut call = Some(call);
        let arrived = self.lock().started;
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered before the state is read: an end after that wakes this request.
            ended.as_mut().enable();
            {
                let mut st = self.lock();
                if let Some((seq, answer)) = &st.last {
                    if *seq > arrived {
                        return answer.clone();
                    }
                }
                if !st.in_flight {
                    if let Some(call) = call.take() {
                        st.in_flight = true;
                        st.started += 1;
                        let seq = st.started;
                        let flight = self.clone();
                        let fut = call();
                        drop(st);
                        tokio::spawn(async move {
                            let answer = fut.await;
                            let mut st = flight.lock();
                            st.in_flight = false;
                            st.last = Some((seq, answer));
                            drop(st);
                            flight.ended.notify_waiters();
                        });
                    }
                }
            }
            ended.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
    use std::time::Duration;

    /// A source whose revision requests bump (a write each must see) and each call
    /// reads when it starts, counting calls; a call takes `delay` to answer.
    struct Source {
        revision: AtomicI64,
        calls: AtomicUsize,
        delay: Duration,
    }

    fn source(revision: i64, delay: Duration) -> Arc<Source> {
        Arc::new(Source {
            revision: AtomicI64::new(revision),
            calls: AtomicUsize::new(0),
            delay,
        })
    }

    fn call(source: &Arc<Source>) -> impl Future<Output = Answer> + Send + 'static {
        source.calls.fetch_add(1, Ordering::SeqCst);
        let at_start = source.revision.load(Ordering::SeqCst);
        let delay = source.delay;
        async move {
            tokio::time::sleep(delay).await;
            Ok(Revision(at_start))
        }
    }

    #[tokio::test]
    async fn concurrent_requests_share_calls_and_none_takes_a_call_older_than_itself() {
        let source = source(100, Duration::from_millis(20));
        let flight = Arc::new(RevisionFlight::default());
        let mut tasks = Vec::new();
        for _ in 0..500 {
            let (flight, source) = (flight.clone(), source.clone());
            tasks.push(tokio::spawn(async move {
                // A write just before the read: the answer must include it, which a
                // call started before it does not.
                let floor = source.revision.fetch_add(1, Ordering::SeqCst) + 1;
                let got = flight.current(|| call(&source)).await.expect("an answer");
                assert!(
                    got.0 >= floor,
                    "{got:?} is older than the request ({floor})"
                );
            }));
        }
        for t in tasks {
            t.await.expect("no request failed");
        }
        let calls = source.calls.load(Ordering::SeqCst);
        assert!(
            (1..=10).contains(&calls),
            "500 concurrent requests made {calls} calls"
        );
    }

    #[tokio::test]
    async fn a_request_that_gives_up_does_not_strand_the_next() {
        let source = source(7, Duration::from_millis(50));
        let flight = Arc::new(RevisionFlight::default());
        let gave_up =
            tokio::time::timeout(Duration::from_millis(5), flight.current(|| call(&source))).await;
        assert!(gave_up.is_err(), "the first request gives up mid-call");
        let next = tokio::time::timeout(Duration::from_secs(5), flight.current(|| call(&source)))
            .await
            .expect("the next request is answered");
        assert_eq!(next, Ok(Revision(7)), "from a call started after it");
        assert_eq!(source.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_error_is_given_to_every_request_that_shared_the_call() {
        let flight = Arc::new(RevisionFlight::default());
        let a = flight.current(|| async { Err::<Revision, _>("etcd is down".to_string()) });
        assert_eq!(a.await, Err("etcd is down".to_string()));
        let b = flight.current(|| async { Ok(Revision(3)) }).await;
        assert_eq!(
            b,
            Ok(Revision(3)),
            "a failed call is not kept for later requests"
        );
    }
}
