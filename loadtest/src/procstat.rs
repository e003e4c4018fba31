//! Process and machine CPU and memory figures from `/proc` (Linux).
//!
//! CPU times in `/proc/<pid>/stat` and `/proc/stat` are in clock ticks of
//! `USER_HZ`, which the Linux ABI fixes at 100 on every architecture this
//! runs on, so no `sysconf` call (and no `libc` dependency) is needed.

use std::fs;

/// Clock ticks per second of `/proc` CPU times (Linux `USER_HZ`).
pub const TICKS_PER_SEC: f64 = 100.0;

/// utime + stime of a process, in seconds, from the text of its
/// `/proc/<pid>/stat` (fields 14 and 15, counted after the `)` that ends the
/// command name, which may itself contain spaces and parentheses).
pub fn parse_stat_cpu(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // After ")": state(3) ppid(4) ... utime(14) stime(15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SEC)
}

/// (utime, stime) of a process, in seconds, from the text of its
/// `/proc/<pid>/stat`.
pub fn parse_stat_user_system(stat: &str) -> Option<(f64, f64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime as f64 / TICKS_PER_SEC, stime as f64 / TICKS_PER_SEC))
}

/// (user, system) CPU seconds (all threads) used so far by `pid`.
pub fn cpu_user_system(pid: u32) -> Option<(f64, f64)> {
    parse_stat_user_system(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU seconds (user + system, all threads) used so far by `pid`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    parse_stat_cpu(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU seconds used so far by this process.
pub fn own_cpu_seconds() -> Option<f64> {
    cpu_seconds(std::process::id())
}

/// A `kB` field (`VmHWM:`, `VmRSS:`) of a `/proc/<pid>/status` text, in bytes.
pub fn parse_status_kb(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Peak resident set size (`VmHWM`) of `pid`, in bytes.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    parse_status_kb(
        &fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        "VmHWM:",
    )
}

/// Current resident set size (`VmRSS`) of `pid`, in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    parse_status_kb(
        &fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        "VmRSS:",
    )
}

/// Machine-wide CPU counters: (busy, total) ticks over all cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineTicks {
    /// Ticks not idle and not waiting for I/O.
    pub busy: u64,
    /// All ticks.
    pub total: u64,
}

/// The aggregate `cpu ` line of a `/proc/stat` text.
pub fn parse_machine_ticks(stat: &str) -> Option<MachineTicks> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_ascii_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is in user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v[4];
    Some(MachineTicks {
        busy: total - idle,
        total,
    })
}

/// Machine-wide CPU counters now.
pub fn machine_ticks() -> Option<MachineTicks> {
    parse_machine_ticks(&fs::read_to_string("/proc/stat").ok()?)
}

/// Busy share of the machine (0..=1, all cores) between two readings.
pub fn busy_share(before: MachineTicks, after: MachineTicks) -> Option<f64> {
    let total = after.total.checked_sub(before.total)?;
    let busy = after.busy.checked_sub(before.busy)?;
    (total > 0).then(|| busy as f64 / total as f64)
}

/// The 1-minute load average.
pub fn loadavg_1m() -> Option<f64> {
    fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Number of online CPUs (as the scheduler sees them).
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The worker threads of the tokio runtime this runs on (0 outside one).
pub fn tokio_workers() -> usize {
    tokio::runtime::Handle::try_current().map_or(0, |h| h.metrics().num_workers())
}

/// How many worker threads a child started now with tokio's default
/// runtime gets, and why: `TOKIO_WORKER_THREADS` (which it inherits) when
/// set to a positive number, else the CPUs available ([`cpus`]: affinity
/// and cgroup quota, which it inherits too).
pub fn default_tokio_workers() -> (usize, &'static str) {
    default_tokio_workers_from(std::env::var("TOKIO_WORKER_THREADS").ok().as_deref())
}

/// [`default_tokio_workers`] given the variable's value.
pub fn default_tokio_workers_from(var: Option<&str>) -> (usize, &'static str) {
    match var.and_then(|v| v.trim().parse::<usize>().ok()) {
        Some(n) if n > 0 => (n, "TOKIO_WORKER_THREADS"),
        _ => (cpus(), "tokio default (available CPUs)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_skips_odd_command_names() {
        let stat = "1234 (we (i) rd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0";
        assert_eq!(parse_stat_cpu(stat), Some(3.0));
        assert_eq!(parse_stat_user_system(stat), Some((2.5, 0.5)));
        assert_eq!(parse_stat_user_system("1 (x) S"), None);
        assert_eq!(parse_stat_cpu("garbage"), None);
    }

    #[test]
    fn status_fields_are_bytes() {
        let status = "Name:\tetcd\nVmHWM:\t   20480 kB\nVmRSS:\t  10240 kB\n";
        assert_eq!(parse_status_kb(status, "VmHWM:"), Some(20 << 20));
        assert_eq!(parse_status_kb(status, "VmRSS:"), Some(10 << 20));
        assert_eq!(parse_status_kb(status, "VmPeak:"), None);
    }

    #[test]
    fn machine_busy_share() {
        let a = parse_machine_ticks("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5").unwrap();
        assert_eq!(
            a,
            MachineTicks {
                busy: 150,
                total: 1000
            }
        );
        let b = MachineTicks {
            busy: 450,
            total: 1400,
        };
        assert_eq!(busy_share(a, b), Some(0.75));
        assert_eq!(busy_share(b, a), None);
    }

    #[test]
    fn tokio_workers_are_counted_or_defaulted() {
        assert_eq!(tokio_workers(), 0, "no runtime in a plain test");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(3)
            .build()
            .unwrap();
        assert_eq!(rt.block_on(async { tokio_workers() }), 3);
        assert_eq!(
            default_tokio_workers_from(Some("5")),
            (5, "TOKIO_WORKER_THREADS")
        );
        for unset in [None, Some("0"), Some("many")] {
            assert_eq!(
                default_tokio_workers_from(unset),
                (cpus(), "tokio default (available CPUs)")
            );
        }
    }

    #[test]
    fn own_process_is_readable() {
        assert!(own_cpu_seconds().is_some());
        assert!(peak_rss_bytes(std::process::id()).unwrap() > 0);
        assert!(rss_bytes(std::process::id()).unwrap() > 0);
        assert!(machine_ticks().is_some());
    }
}
