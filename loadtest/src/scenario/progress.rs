//! The progress line of a long phase, once a second on stderr, and the
//! memory sampler that catches a process's peak RSS during a phase.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::procstat;

/// Longest a progress or sampling task lives, whatever happens to its owner.
pub const MAX_TASK_LIFETIME: Duration = Duration::from_secs(3600);

/// A task printing `[<label> <seconds>s] <line()>` every second until
/// dropped (or [`MAX_TASK_LIFETIME`]).
pub struct Progress {
    task: JoinHandle<()>,
}

impl Progress {
    /// Starts printing; the first line comes after one second.
    pub fn every_second(
        label: impl Into<String>,
        line: impl Fn() -> String + Send + 'static,
    ) -> Self {
        let label = label.into();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            while started.elapsed() < MAX_TASK_LIFETIME {
                tick.tick().await;
                eprintln!("[{label} {:>3}s] {}", started.elapsed().as_secs(), line());
            }
        });
        Self { task }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Samples a process's RSS every `period` and keeps the largest seen, until
/// dropped or [`RssSampler::stop`]ped.
pub struct RssSampler {
    peak: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl RssSampler {
    /// Starts sampling `pid` (one reading at once).
    pub fn start(pid: u32, period: Duration) -> Self {
        let peak = Arc::new(AtomicU64::new(procstat::rss_bytes(pid).unwrap_or(0)));
        let p = peak.clone();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            while started.elapsed() < MAX_TASK_LIFETIME {
                tick.tick().await;
                if let Some(rss) = procstat::rss_bytes(pid) {
                    p.fetch_max(rss, Ordering::Relaxed);
                }
            }
        });
        Self { peak, task }
    }

    /// The largest RSS seen so far, bytes.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Stops sampling (after one last reading) and returns the peak.
    pub fn stop(self, pid: u32) -> u64 {
        if let Some(rss) = procstat::rss_bytes(pid) {
            self.peak.fetch_max(rss, Ordering::Relaxed);
        }
        self.peak()
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bytes as MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sampler_keeps_the_peak_and_progress_stops_when_dropped() {
        let me = std::process::id();
        let s = RssSampler::start(me, Duration::from_millis(5));
        let big = vec![1u8; 32 << 20];
        std::hint::black_box(&big);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let with = s.peak();
        drop(big);
        assert!(with >= 32 << 20, "peak {with}");
        assert!(s.stop(me) >= with);
        let p = Progress::every_second("t", || "x".into());
        drop(p);
        assert!((mib(3 << 20) - 3.0).abs() < 1e-12);
    }
}
