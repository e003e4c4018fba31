//! The one-line-a-second progress of a long run: elapsed time, deliveries
//! per second over the last second, lag (how many seconds of the schedule
//! the slowest receiver is behind), and events lost so far — so a run that
//! falls behind or loses events is seen while it runs, not only in its
//! result.

use std::time::{Duration, Instant};

/// One reading of a run's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Deliveries so far (all receivers).
    pub delivered: u64,
    /// Seconds of the schedule the slowest receiver is behind (≥ 0).
    pub lag_s: f64,
    /// Events lost so far (a live estimate; the result has the exact count).
    pub lost: u64,
    /// Anything else worth a word (`in flight 1200`).
    pub note: Option<String>,
}

/// The progress line of `label` at `elapsed`, `per_sec` deliveries per
/// second over the last interval.
pub fn line(label: &str, elapsed: Duration, per_sec: f64, r: &Reading) -> String {
    let mut s = format!(
        "{label}: {:>5.1} s, {:>9.0} deliveries/s, lag {:.3} s, lost so far {}",
        elapsed.as_secs_f64(),
        per_sec,
        r.lag_s.max(0.0),
        r.lost
    );
    if let Some(n) = &r.note {
        s.push_str(", ");
        s.push_str(n);
    }
    s
}

/// Turns successive readings into per-second rates.
#[derive(Debug)]
pub struct Meter {
    started: Instant,
    last_at: Instant,
    last_delivered: u64,
}

impl Meter {
    /// A meter whose elapsed time counts from `started`.
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            last_at: started,
            last_delivered: 0,
        }
    }

    /// The line for `r` read now.
    pub fn line(&mut self, label: &str, r: &Reading) -> String {
        let now = Instant::now();
        let dt = now.duration_since(self.last_at).as_secs_f64().max(1e-6);
        let per_sec = r.delivered.saturating_sub(self.last_delivered) as f64 / dt;
        self.last_at = now;
        self.last_delivered = r.delivered;
        line(label, now.duration_since(self.started), per_sec, r)
    }
}

/// A task logging a progress line every second until dropped.
#[derive(Debug)]
pub struct Ticker(tokio::task::JoinHandle<()>);

impl Ticker {
    /// Logs `read()`'s counters as a progress line of `label` every second.
    pub fn spawn(label: String, mut read: impl FnMut() -> Reading + Send + 'static) -> Self {
        Self(tokio::spawn(async move {
            let mut meter = Meter::new(Instant::now());
            let mut every = tokio::time::interval(Duration::from_secs(1));
            every.tick().await;
            // Bounded by the run: the ticker is dropped (aborted) when it ends.
            loop {
                every.tick().await;
                tracing::info!("{}", meter.line(&label, &read()));
            }
        }))
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Seconds of a schedule of `rate` events per second, `planned` in all,
/// that a receiver holding `received` of them is behind, `elapsed` after
/// the first was due.
pub fn schedule_lag_s(elapsed: Duration, rate: f64, planned: u64, received: u64) -> f64 {
    if rate <= 0.0 {
        return 0.0;
    }
    let due = ((elapsed.as_secs_f64() * rate).floor() as u64 + 1).min(planned);
    due.saturating_sub(received) as f64 / rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_rate_lag_and_loss() {
        let r = Reading {
            delivered: 5000,
            lag_s: 0.25,
            lost: 3,
            note: Some("in flight 10".into()),
        };
        let l = line("s1 watchd", Duration::from_millis(2500), 1999.6, &r);
        assert_eq!(
            l,
            "s1 watchd:   2.5 s,      2000 deliveries/s, lag 0.250 s, lost so far 3, in flight 10"
        );
        let mut m = Meter::new(Instant::now() - Duration::from_secs(1));
        assert!(m.line("x", &r).contains("lost so far 3"));
    }

    #[test]
    fn schedule_lag_counts_due_events_not_received() {
        let s = Duration::from_secs;
        assert_eq!(schedule_lag_s(s(0), 100.0, 1000, 1), 0.0);
        assert_eq!(schedule_lag_s(s(2), 100.0, 1000, 201), 0.0);
        assert_eq!(schedule_lag_s(s(2), 100.0, 1000, 101), 1.0);
        // Past the end of the schedule only the planned events are due.
        assert_eq!(schedule_lag_s(s(60), 100.0, 1000, 1000), 0.0);
        assert_eq!(schedule_lag_s(s(60), 100.0, 1000, 2000), 0.0);
        assert_eq!(schedule_lag_s(s(1), 0.0, 10, 0), 0.0);
    }
}
