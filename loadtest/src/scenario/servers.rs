//! The servers of a scenario run: an etcd and a watchd, each started for
//! the run (through [`crate::launch`]: temp dir, free loopback ports,
//! killed by PID when dropped) or given by the caller (endpoint and PID),
//! and the readings taken from them (CPU, memory, open-files limits).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;

use crate::endpoint::{Endpoint, Protocol};
use crate::launch::{self, Etcd, Watchd, WatchdOptions};
use crate::procstat;
use crate::tls::TlsOptions;
use crate::transport;

/// Where the servers come from.
#[derive(Clone, Debug)]
pub struct ServerSetup {
    /// Use this etcd instead of starting one.
    pub etcd_servers: Option<Vec<String>>,
    /// PID of the given etcd (for its CPU and memory).
    pub etcd_pid: Option<u32>,
    /// Use this watchd (`http://127.0.0.1:PORT`) instead of starting one.
    pub watchd_url: Option<String>,
    /// PID of the given watchd.
    pub watchd_pid: Option<u32>,
    /// The watchd binary to start.
    pub watchd_bin: PathBuf,
    /// More `watchd serve` flags.
    pub watchd_args: Vec<String>,
    /// More etcd flags (`--quota-backend-bytes=...`).
    pub etcd_args: Vec<String>,
    /// Where temp data dirs go.
    pub temp_root: PathBuf,
}

impl Default for ServerSetup {
    fn default() -> Self {
        Self {
            etcd_servers: None,
            etcd_pid: None,
            watchd_url: None,
            watchd_pid: None,
            watchd_bin: launch::default_watchd_bin(),
            watchd_args: Vec::new(),
            etcd_args: Vec::new(),
            temp_root: std::env::temp_dir(),
        }
    }
}

impl ServerSetup {
    /// Whether this run starts its own watchd (so it can restart it).
    pub fn starts_watchd(&self) -> bool {
        self.watchd_url.is_none()
    }

    /// Whether this run starts its own etcd (so it is empty at the start).
    pub fn starts_etcd(&self) -> bool {
        self.etcd_servers.is_none()
    }
}

/// The running (or given) servers; dropping it kills those it started.
pub struct Servers {
    /// etcd client URLs.
    pub etcd_endpoints: Vec<String>,
    /// The etcd this run started.
    pub etcd: Option<Etcd>,
    /// The watchd this run started (after [`Servers::start_watchd`]).
    pub watchd: Option<Watchd>,
    /// watchd's HTTP API (after [`Servers::start_watchd`]).
    pub endpoint: Option<Arc<Endpoint>>,
    /// PID of etcd, started or given.
    pub etcd_pid: Option<u32>,
    /// PID of watchd, started or given.
    pub watchd_pid: Option<u32>,
    /// How long the last [`Servers::start_watchd`] took until `/readyz`.
    pub watchd_ready_after: Option<Duration>,
}

impl Servers {
    /// Starts (or reaches) etcd; watchd is started later.
    pub async fn etcd(setup: &ServerSetup) -> Result<Self, String> {
        let (etcd, etcd_endpoints, etcd_pid) = match &setup.etcd_servers {
            Some(eps) => (None, eps.clone(), setup.etcd_pid),
            None => {
                let e = launch::start_etcd_with(&setup.temp_root, &setup.etcd_args).await?;
                let eps = vec![e.endpoint.clone()];
                let pid = e.proc.pid();
                (Some(e), eps, Some(pid))
            }
        };
        Ok(Self {
            etcd_endpoints,
            etcd,
            watchd: None,
            endpoint: None,
            etcd_pid,
            watchd_pid: None,
            watchd_ready_after: None,
        })
    }

    /// Starts (or reaches) etcd, then watchd.
    pub async fn both(setup: &ServerSetup) -> Result<Self, String> {
        let mut s = Self::etcd(setup).await?;
        s.start_watchd(setup).await?;
        Ok(s)
    }

    /// Starts watchd against this etcd and waits until it is ready (or, if
    /// given, checks that it answers `/readyz`); a watchd this run started
    /// before is stopped first.
    pub async fn start_watchd(&mut self, setup: &ServerSetup) -> Result<(), String> {
        self.watchd = None;
        let t = Instant::now();
        match &setup.watchd_url {
            Some(url) => {
                let endpoint = Arc::new(Endpoint::new(url, &TlsOptions::default(), None)?);
                let (status, _) = transport::get_once(
                    &endpoint,
                    Protocol::Http1,
                    "/readyz",
                    Duration::from_secs(5),
                )
                .await?;
                if status != 200 {
                    return Err(format!("{url}/readyz answered {status}"));
                }
                self.endpoint = Some(endpoint);
                self.watchd_pid = setup.watchd_pid;
            }
            None => {
                let opts = WatchdOptions {
                    args: setup.watchd_args.clone(),
                    ..WatchdOptions::default()
                };
                // A port taken before watchd binds it is retried there.
                let w = launch::start_watchd_with(
                    &setup.watchd_bin,
                    &self.etcd_endpoints[0],
                    &setup.temp_root,
                    &opts,
                )
                .await?;
                self.endpoint = Some(w.endpoint.clone());
                self.watchd_pid = Some(w.proc.pid());
                self.watchd = Some(w);
            }
        }
        self.watchd_ready_after = Some(t.elapsed());
        Ok(())
    }

    /// Stops the watchd this run started (a given one is left alone).
    pub fn stop_watchd(&mut self) {
        if self.watchd.take().is_some() {
            self.endpoint = None;
            self.watchd_pid = None;
        }
    }

    /// watchd's endpoint; an error before [`Servers::start_watchd`].
    pub fn watchd_endpoint(&self) -> Result<Arc<Endpoint>, String> {
        self.endpoint
            .clone()
            .ok_or_else(|| "watchd is not running".to_string())
    }

    /// A client of this etcd.
    pub async fn etcd_client(&self) -> Result<Client, String> {
        Client::connect(&self.etcd_endpoints, Some(launch::etcd_options()))
            .await
            .map_err(|e| format!("etcd connect: {e}"))
    }
}

/// CPU seconds of a set of processes at one instant.
#[derive(Clone, Copy, Debug)]
pub struct CpuMark {
    at: Instant,
    watchd: Option<f64>,
    etcd: Option<f64>,
    own: Option<f64>,
}

/// CPU seconds used between two marks, per process, and the window's length.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct CpuUse {
    /// Window length, seconds.
    pub window_s: f64,
    /// watchd CPU seconds.
    pub watchd_s: Option<f64>,
    /// etcd CPU seconds.
    pub etcd_s: Option<f64>,
    /// This load generator's CPU seconds.
    pub generator_s: Option<f64>,
}

impl CpuMark {
    /// Reads the CPU of `watchd`, `etcd` and this process now.
    pub fn now(watchd: Option<u32>, etcd: Option<u32>) -> Self {
        Self {
            at: Instant::now(),
            watchd: watchd.and_then(procstat::cpu_seconds),
            etcd: etcd.and_then(procstat::cpu_seconds),
            own: procstat::own_cpu_seconds(),
        }
    }

    /// What was used from `self` to `later`.
    pub fn until(&self, later: &CpuMark) -> CpuUse {
        let d = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (b - a).max(0.0));
        CpuUse {
            window_s: later.at.duration_since(self.at).as_secs_f64(),
            watchd_s: d(self.watchd, later.watchd),
            etcd_s: d(self.etcd, later.etcd),
            generator_s: d(self.own, later.own),
        }
    }
}

/// The soft open-files limit of `pid` from its `/proc/<pid>/limits` text.
pub fn parse_open_files_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..]
        .split_ascii_whitespace()
        .next()?;
    soft.parse().ok()
}

/// The soft open-files limit of `pid` (`None`: unreadable or unlimited).
pub fn open_files_limit(pid: u32) -> Option<u64> {
    parse_open_files_limit(&std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?)
}

/// Descriptors `pid` has open now.
pub fn open_files(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// Whether `more` further descriptors fit in `pid`'s limit, keeping
/// `margin` spare: `Err` says how many are open, the limit and the need.
pub fn check_fits(what: &str, pid: u32, more: u64, margin: u64) -> Result<(), String> {
    let (Some(limit), Some(open)) = (open_files_limit(pid), open_files(pid)) else {
        return Ok(());
    };
    if open + more + margin > limit {
        return Err(format!(
            "{what} (pid {pid}) has {open} files open and may open {limit}: {more} more \
             (+{margin} spare) do not fit"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_files_limit_is_read_from_proc() {
        let text = "Limit                     Soft Limit           Hard Limit           Units\n\
                    Max cpu time              unlimited            unlimited            seconds\n\
                    Max open files            20000                20000                files\n";
        assert_eq!(parse_open_files_limit(text), Some(20000));
        assert_eq!(
            parse_open_files_limit("Max open files unlimited unlimited files"),
            None
        );
        let me = std::process::id();
        assert!(open_files_limit(me).is_some());
        assert!(open_files(me).unwrap() >= 3);
        assert!(check_fits("me", me, 1, 0).is_ok());
        let e = check_fits("me", me, u64::MAX / 4, 0).unwrap_err();
        assert!(e.contains("do not fit"), "{e}");
    }

    #[test]
    fn cpu_marks_subtract() {
        let me = std::process::id();
        let a = CpuMark::now(Some(me), None);
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = CpuMark::now(Some(me), None);
        let u = a.until(&b);
        assert!(u.watchd_s.unwrap() >= 0.0 && u.generator_s.is_some());
        assert!(u.etcd_s.is_none());
        assert!(u.window_s > 0.0);
    }
}
