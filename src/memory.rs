//! `--memory-limit`: refuse new full lists and new watches while the process is near its
//! limit, rather than be killed for going past it.
//!
//! A sampler thread reads the resident set (`/proc/self/statm`) every
//! [`SAMPLE_INTERVAL`]. Past the soft mark ([`SOFT_FRACTION`] of the limit) the guard is
//! pressed: [`MemoryGuard::admit`] answers new full lists (HTTP), new watches (HTTP and
//! gRPC `Watch`, `WatchMany`) 429 with `Retry-After` (gRPC: `RESOURCE_EXHAUSTED`), as
//! kube-apiserver's priority and fairness answers an overload. Gets, paginated lists and
//! the watches already open go on: they are what a client retrying must be able to do, and
//! what the cache holds does not grow with them. It is released once the resident set
//! falls [`HYSTERESIS_FRACTION`] of the limit below the mark, so that it does not flap.
//! Meanwhile the rendered-JSON budget (`store::rendered`) is nothing: JSON rendered for a
//! reader is not kept. A log line and `watchd_memory_pressure` say when it acts;
//! `watchd_memory_refusals_total` counts what it refused.
//!
//! The default limit is the cgroup's (`memory.max` of cgroup v2, else v1's
//! `memory.limit_in_bytes`) when one is set; without one and without the flag, nothing is
//! refused.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::api::status::ApiError;

/// How often the resident set is read.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(200);
/// The soft mark, as a fraction of the limit.
pub const SOFT_FRACTION: f64 = 0.85;
/// How far below the mark (a fraction of the limit) the resident set must fall before
/// new lists and watches are admitted again.
pub const HYSTERESIS_FRACTION: f64 = 0.05;

/// The limit, the last reading, and whether the guard is pressed.
#[derive(Debug)]
pub struct MemoryGuard {
    /// The limit in bytes; 0: none.
    limit: u64,
    /// Where refusals start and end.
    soft: u64,
    release: u64,
    /// The last resident-set reading, bytes.
    rss: AtomicU64,
    pressed: AtomicBool,
}

/// What asked to be admitted.
#[derive(Debug, Clone, Copy)]
pub enum Admission {
    /// A list of every object of a collection.
    FullList,
    /// A watch.
    Watch,
}

impl Admission {
    fn label(self) -> &'static str {
        match self {
            Admission::FullList => "list",
            Admission::Watch => "watch",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Admission::FullList => "full lists",
            Admission::Watch => "watches",
        }
    }
}

impl MemoryGuard {
    /// A guard for `limit` bytes (0: none). Nothing is refused until
    /// [`MemoryGuard::start`] has read the resident set.
    pub fn new(limit: u64) -> MemoryGuard {
        let soft = (limit as f64 * SOFT_FRACTION) as u64;
        let release = soft.saturating_sub((limit as f64 * HYSTERESIS_FRACTION) as u64);
        metrics::gauge!("watchd_memory_limit_bytes").set(limit as f64);
        metrics::gauge!("watchd_memory_soft_limit_bytes").set(soft as f64);
        metrics::gauge!("watchd_memory_pressure").set(0.0);
        // Exported from the start, at zero: an alert on their increase sees the first one.
        for what in [Admission::FullList, Admission::Watch] {
            metrics::counter!("watchd_memory_refusals_total", "kind" => what.label()).increment(0);
        }
        MemoryGuard {
            limit,
            soft,
            release,
            rss: AtomicU64::new(0),
            pressed: AtomicBool::new(false),
        }
    }

    /// Starts the sampler thread (not for an unlimited guard): it runs for the life of
    /// the process.
    pub fn start(self: &Arc<Self>) -> std::io::Result<()> {
        if self.limit == 0 {
            return Ok(());
        }
        self.sample();
        let guard = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("watchd-memory".into())
            .spawn(move || loop {
                std::thread::sleep(SAMPLE_INTERVAL);
                match guard.upgrade() {
                    Some(g) => g.sample(),
                    None => return,
                }
            })
            .map(|_| ())
    }

    /// Reads the resident set and presses or releases the guard.
    fn sample(&self) {
        let Some(rss) = resident_bytes() else {
            return;
        };
        self.observe(rss);
    }

    /// Takes a resident-set reading.
    fn observe(&self, rss: u64) {
        self.rss.store(rss, Ordering::Relaxed);
        metrics::gauge!("watchd_memory_resident_bytes").set(rss as f64);
        let pressed = self.pressed.load(Ordering::Relaxed);
        if !pressed && rss >= self.soft {
            self.pressed.store(true, Ordering::Relaxed);
            crate::store::rendered::RENDERED.set_pressed(true);
            metrics::gauge!("watchd_memory_pressure").set(1.0);
            tracing::warn!(
                resident = rss,
                soft_mark = self.soft,
                limit = self.limit,
                "memory past the soft mark: new full lists and new watches are refused (429), and rendered JSON is not kept, until it falls"
            );
        } else if pressed && rss < self.release {
            self.pressed.store(false, Ordering::Relaxed);
            crate::store::rendered::RENDERED.set_pressed(false);
            metrics::gauge!("watchd_memory_pressure").set(0.0);
            tracing::info!(
                resident = rss,
                soft_mark = self.soft,
                limit = self.limit,
                "memory back under the soft mark: full lists and watches admitted again"
            );
        }
    }

    /// Ok unless the guard is pressed; then the 429 to answer `what` with.
    pub fn admit(&self, what: Admission) -> Result<(), ApiError> {
        if !self.pressed.load(Ordering::Relaxed) {
            return Ok(());
        }
        metrics::counter!("watchd_memory_refusals_total", "kind" => what.label()).increment(1);
        Err(ApiError::TooManyRequests {
            message: format!(
                "watchd is past its memory soft mark ({} bytes resident, mark {}, limit {}): new {} are refused until memory falls; retry later",
                self.rss.load(Ordering::Relaxed),
                self.soft,
                self.limit,
                what.plural(),
            ),
            retry_after: 1,
        })
    }
}

/// The process's resident set in bytes, from `/proc/self/statm`.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions; it reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok().filter(|p| *p > 0)?)
}

/// Limits at or above this are "no limit" (cgroup v1 writes a page-rounded `i64::MAX`).
const NO_LIMIT: u64 = 1 << 60;

/// The memory limit of this process's cgroup, if one is set: cgroup v2's `memory.max`,
/// else cgroup v1's `memory.limit_in_bytes`.
pub fn cgroup_limit() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    cgroup_limit_in(&cgroups, |path| std::fs::read_to_string(path).ok())
}

/// [`cgroup_limit`] with `/proc/self/cgroup`'s text and a file reader given.
fn cgroup_limit_in(cgroups: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    let parse = |text: Option<String>| -> Option<u64> {
        let text = text?;
        let text = text.trim();
        if text == "max" {
            return None;
        }
        text.parse().ok().filter(|n| *n > 0 && *n < NO_LIMIT)
    };
    let mut candidates = Vec::new();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_end_matches('/');
        if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/memory.max"));
            candidates.push("/sys/fs/cgroup/memory.max".to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"));
            candidates.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string());
        }
    }
    candidates.into_iter().find_map(|p| parse(read(&p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_v2_v1_and_unlimited_values_are_read() {
        let files = |entries: &'static [(&'static str, &'static str)]| {
            move |path: &str| {
                entries
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, v)| v.to_string())
            }
        };
        let v2 = "0::/kubepods/pod1/c1\n";
        assert_eq!(
            cgroup_limit_in(
                v2,
                files(&[("/sys/fs/cgroup/kubepods/pod1/c1/memory.max", "536870912\n")])
            ),
            Some(512 << 20)
        );
        assert_eq!(
            cgroup_limit_in(
                v2,
                files(&[("/sys/fs/cgroup/kubepods/pod1/c1/memory.max", "max\n")])
            ),
            None
        );
        let v1 = "9:cpu:/\n4:memory:/process_api/abc\n0::/\n";
        assert_eq!(
            cgroup_limit_in(
                v1,
                files(&[(
                    "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes",
                    "9223372036854771712\n"
                )])
            ),
            None,
            "v1's unlimited value"
        );
        assert_eq!(
            cgroup_limit_in(
                v1,
                files(&[(
                    "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes",
                    "1073741824"
                )])
            ),
            Some(1 << 30)
        );
        assert_eq!(cgroup_limit_in(v1, files(&[])), None, "nothing readable");
    }

    #[test]
    fn the_guard_presses_at_the_soft_mark_and_releases_below_it() {
        let g = MemoryGuard::new(1000);
        assert!(g.admit(Admission::Watch).is_ok(), "nothing read yet");
        g.observe(849);
        assert!(g.admit(Admission::FullList).is_ok());
        g.observe(850);
        let e = g.admit(Admission::FullList).unwrap_err();
        assert_eq!((e.code(), e.retry_after()), (429, Some(1)));
        assert!(
            e.message().contains("new full lists are refused"),
            "{}",
            e.message()
        );
        // Still pressed until 5 % of the limit below the mark.
        g.observe(801);
        assert!(g.admit(Admission::Watch).is_err());
        g.observe(799);
        assert!(g.admit(Admission::Watch).is_ok());
        assert!(MemoryGuard::new(0).admit(Admission::Watch).is_ok());
    }

    #[test]
    fn the_resident_set_is_read() {
        let rss = resident_bytes().expect("/proc/self/statm");
        assert!(rss > 1 << 20, "{rss} bytes");
    }
}
