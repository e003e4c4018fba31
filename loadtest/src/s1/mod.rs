//! Scenario S1, broadcast: W watchers all watching every ConfigMap while a
//! writer updates ConfigMaps in etcd at E writes/s.
//!
//! A run: start (or reach) etcd and, for the watchd target, watchd; prefill
//! the objects; open the W watches after revision `base`; write for
//! `duration`; wait until every watcher has the last write (bounded by
//! `drain_timeout`); stop the watchers and check each one's tally against the
//! writer's revisions. CPU and memory are read from `/proc` at the first
//! write and when the drain ends, so setup costs are not counted.

pub mod event;
pub mod report;
pub mod watch;
pub mod writer;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use etcd_client::Client;

use crate::demo::Storage;
use crate::http::{self, Accept};
use crate::launch::{self, Etcd, Watchd};
use crate::procstat;
use crate::stats::Accounting;
use report::{Latency, Machine, ProcFigures, S1Result};
use watch::Source;

/// Which server the watchers talk to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// HTTP watches on watchd.
    Watchd,
    /// gRPC watches on etcd itself.
    Etcd,
}

impl Target {
    /// The name used in results.
    pub fn name(self) -> &'static str {
        match self {
            Target::Watchd => "watchd",
            Target::Etcd => "etcd",
        }
    }
}

/// Settings of one S1 run.
#[derive(Clone, Debug)]
pub struct S1Config {
    /// Server under test.
    pub target: Target,
    /// Watch streams.
    pub watchers: usize,
    /// Writes per second.
    pub writes_per_sec: f64,
    /// Length of the write phase.
    pub duration: Duration,
    /// Approximate JSON size of each object (also when stored as protobuf).
    pub object_bytes: usize,
    /// How the writer stores the ConfigMaps in etcd (default JSON, unlike
    /// the demo: results stay comparable with the earlier JSON-only ones).
    pub storage: Storage,
    /// What the watchd watchers ask for; protobuf needs protobuf storage
    /// (watchd serves protobuf only for objects stored so). Not used by the
    /// etcd target, whose watchers get the stored values.
    pub accept: Accept,
    /// Namespaces the objects are spread over.
    pub namespace_count: usize,
    /// Distinct objects, rewritten round-robin.
    pub objects: usize,
    /// Use this etcd instead of starting one.
    pub etcd_servers: Option<Vec<String>>,
    /// Use this watchd instead of starting one.
    pub watchd_url: Option<String>,
    /// PID of the external server, for CPU and memory figures.
    pub server_pid: Option<u32>,
    /// The watchd binary to start.
    pub watchd_bin: PathBuf,
    /// gRPC connections the etcd watches are spread over.
    pub etcd_connections: usize,
    /// Longest wait for the watchers to catch up after the last write.
    pub drain_timeout: Duration,
    /// Where temp data dirs go.
    pub temp_root: PathBuf,
    /// etcd key prefix (kube-apiserver's `--etcd-prefix`).
    pub prefix: String,
}

impl S1Config {
    /// Defaults for `target` with `watchers` × `writes_per_sec` for `duration`.
    pub fn new(target: Target, watchers: usize, writes_per_sec: f64, duration: Duration) -> Self {
        Self {
            target,
            watchers,
            writes_per_sec,
            duration,
            object_bytes: 1024,
            storage: Storage::Json,
            accept: Accept::Json,
            namespace_count: 10,
            objects: 100,
            etcd_servers: None,
            watchd_url: None,
            server_pid: None,
            watchd_bin: launch::default_watchd_bin(),
            etcd_connections: 4,
            drain_timeout: Duration::from_secs(15),
            temp_root: std::env::temp_dir(),
            prefix: "/registry".to_string(),
        }
    }

    /// Rejects settings that cannot run.
    pub fn validate(&self) -> Result<(), String> {
        if self.watchers == 0 || self.watchers > 100_000 {
            return Err("--watchers must be 1..=100000".into());
        }
        if !(self.writes_per_sec > 0.0 && self.writes_per_sec <= 100_000.0) {
            return Err("--writes-per-sec must be in (0, 100000]".into());
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(3600) {
            return Err("--duration must be 1..=3600 s".into());
        }
        if self.objects == 0 || self.namespace_count == 0 {
            return Err("--objects and --namespace-count must be positive".into());
        }
        if self.object_bytes > 1 << 20 {
            return Err("--object-bytes must be at most 1 MiB".into());
        }
        if self.accept == Accept::Protobuf {
            if self.target == Target::Etcd {
                return Err(
                    "--accept=protobuf applies to watchd's watch streams only: etcd \
                     watchers receive the values as stored (use --storage=protobuf)"
                        .into(),
                );
            }
            if self.storage != Storage::Protobuf {
                return Err("--accept=protobuf needs --storage=protobuf: watchd serves \
                     protobuf only for objects stored as protobuf"
                    .into());
            }
        }
        Ok(())
    }
}

/// The servers of one run; dropping it kills those this run started.
struct Servers {
    etcd_endpoints: Vec<String>,
    etcd: Option<Etcd>,
    watchd: Option<Watchd>,
    watchd_addr: Option<std::net::SocketAddr>,
}

async fn start_servers(cfg: &S1Config) -> Result<Servers, String> {
    let (etcd, etcd_endpoints) = match &cfg.etcd_servers {
        Some(eps) => (None, eps.clone()),
        None => {
            let e = launch::start_etcd(&cfg.temp_root).await?;
            let eps = vec![e.endpoint.clone()];
            (Some(e), eps)
        }
    };
    let (watchd, watchd_addr) = match (cfg.target, &cfg.watchd_url) {
        (Target::Etcd, _) => (None, None),
        (Target::Watchd, Some(url)) => (None, Some(http::parse_base_url(url)?)),
        (Target::Watchd, None) => {
            let w =
                launch::start_watchd(&cfg.watchd_bin, &etcd_endpoints[0], &cfg.temp_root).await?;
            let addr = w.addr;
            (Some(w), Some(addr))
        }
    };
    Ok(Servers {
        etcd_endpoints,
        etcd,
        watchd,
        watchd_addr,
    })
}

/// CPU readings at one instant.
#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    server: Option<f64>,
    etcd: Option<f64>,
    own: Option<f64>,
    machine: Option<procstat::MachineTicks>,
}

fn sample(server: Option<u32>, etcd: Option<u32>) -> Sample {
    Sample {
        at: Instant::now(),
        server: server.and_then(procstat::cpu_seconds),
        etcd: etcd.and_then(procstat::cpu_seconds),
        own: procstat::own_cpu_seconds(),
        machine: procstat::machine_ticks(),
    }
}

fn figures(
    process: &str,
    pid: Option<u32>,
    before: Option<f64>,
    after: Option<f64>,
    window_s: f64,
    deliveries: u64,
) -> ProcFigures {
    let cpu_s = before.zip(after).map(|(a, b)| (b - a).max(0.0));
    ProcFigures {
        process: process.to_string(),
        pid,
        cpu_s,
        cpu_s_per_million: cpu_s
            .filter(|_| deliveries > 0)
            .map(|c| c / (deliveries as f64 / 1e6)),
        cores: cpu_s.map(|c| c / window_s.max(1e-9)),
        peak_rss_bytes: pid.and_then(procstat::peak_rss_bytes),
    }
}

/// The list revision watchd serves now (a consistent list of configmaps).
async fn watchd_list_revision(addr: std::net::SocketAddr) -> Result<i64, String> {
    let (status, body) =
        http::get_once(addr, "/api/v1/configmaps", Duration::from_secs(10)).await?;
    if status != 200 {
        return Err(format!(
            "list configmaps: {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("list configmaps: {e}"))?;
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "list configmaps: no metadata.resourceVersion".to_string())
}

/// Runs S1 once.
pub async fn run(cfg: &S1Config) -> Result<S1Result, String> {
    cfg.validate()?;
    let loadavg = procstat::loadavg_1m();
    let servers = start_servers(cfg).await?;
    let client = Client::connect(&servers.etcd_endpoints, Some(launch::etcd_options()))
        .await
        .map_err(|e| format!("etcd connect: {e}"))?;
    let namespaces = writer::namespace_names(cfg.namespace_count);
    let mut slots = writer::slots(
        &cfg.prefix,
        &namespaces,
        cfg.objects,
        cfg.object_bytes,
        cfg.storage,
    )?;
    let stored_bytes = slots
        .first_mut()
        .map_or(Ok(0), |s| s.stamped(0).map(|v| v.len()))?;
    let prefilled = writer::prefill(&client, &mut slots).await?;
    let etcd_pid = servers.etcd.as_ref().map(|e| e.proc.pid());
    let (source, base, server_pid) = match cfg.target {
        Target::Etcd => (
            Source::Etcd {
                endpoints: servers.etcd_endpoints.clone(),
                connections: cfg.etcd_connections,
                prefix: format!("{}/configmaps/", cfg.prefix.trim_end_matches('/')),
            },
            prefilled,
            etcd_pid.or(cfg.server_pid),
        ),
        Target::Watchd => {
            let addr = servers.watchd_addr.ok_or("no watchd address")?;
            let rv = watchd_list_revision(addr).await?;
            if rv < prefilled {
                return Err(format!(
                    "watchd listed at {rv}, before the prefill ({prefilled})"
                ));
            }
            let pid = servers.watchd.as_ref().map(|w| w.proc.pid());
            (
                Source::Watchd {
                    addr,
                    accept: cfg.accept,
                },
                rv,
                pid.or(cfg.server_pid),
            )
        }
    };
    let watchers = watch::open(&source, cfg.watchers, base).await?;
    tracing::info!(
        target = cfg.target.name(),
        storage = cfg.storage.name(),
        watchers = cfg.watchers,
        base,
        "watchers open; writing"
    );
    let backing_pid = if cfg.target == Target::Watchd {
        etcd_pid
    } else {
        None
    };
    let start = sample(server_pid, backing_pid);
    let writes = writer::run(&client, slots, cfg.writes_per_sec, cfg.duration).await;
    let last = writes.revisions.last().copied().unwrap_or(base);
    let drain_deadline = Instant::now() + cfg.drain_timeout;
    let caught_up = loop {
        if watchers.shared.min_seen() >= last {
            break true;
        }
        if Instant::now() >= drain_deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let end = sample(server_pid, backing_pid);
    let window_s = end.at.duration_since(start.at).as_secs_f64();
    let latency = &watchers.shared.latency;
    let to_ms = |us: Option<u64>| us.map(|u| u as f64 / 1000.0);
    let latency_ms = Latency {
        samples: latency.count(),
        p50: to_ms(latency.percentile(0.50)),
        p99: to_ms(latency.percentile(0.99)),
        max: to_ms((latency.count() > 0).then(|| latency.max())),
        mean: (latency.count() > 0).then(|| latency.mean() / 1000.0),
    };
    let outcomes = watchers.stop(Duration::from_secs(10)).await;
    let mut accounting = Accounting::default();
    let mut watchers_failed = cfg.watchers.saturating_sub(outcomes.len());
    let mut first_watcher_error = None;
    let mut error_events = 0;
    for o in &outcomes {
        accounting.add(&o.tally.check(&writes.revisions));
        error_events += o.error_events;
        if let Some(e) = &o.error {
            watchers_failed += 1;
            first_watcher_error.get_or_insert_with(|| e.clone());
        }
    }
    // A watcher that never reported lost every write.
    accounting.missed += (cfg.watchers - outcomes.len()) as u64 * writes.ok;
    let delivered = accounting.delivered;
    let own_pid = std::process::id();
    let result = S1Result {
        scenario: "s1".into(),
        target: cfg.target.name().into(),
        watchers: cfg.watchers,
        writes_per_sec: cfg.writes_per_sec,
        duration_s: cfg.duration.as_secs_f64(),
        object_bytes: cfg.object_bytes,
        storage: cfg.storage.name().into(),
        stored_bytes,
        accept: (cfg.target == Target::Watchd).then(|| cfg.accept.name().into()),
        namespaces: namespaces.len(),
        objects: cfg.objects,
        base_revision: base,
        expected_deliveries: writes.ok * cfg.watchers as u64,
        window_s,
        delivered_per_sec: delivered as f64 / window_s.max(1e-9),
        caught_up,
        latency_ms,
        accounting,
        watchers_failed,
        first_watcher_error,
        error_events,
        server: figures(
            cfg.target.name(),
            server_pid,
            start.server,
            end.server,
            window_s,
            delivered,
        ),
        backing_etcd: backing_pid
            .map(|pid| figures("etcd", Some(pid), start.etcd, end.etcd, window_s, delivered)),
        generator: figures(
            "generator",
            Some(own_pid),
            start.own,
            end.own,
            window_s,
            delivered,
        ),
        machine: Machine {
            cpus: procstat::cpus(),
            busy_share: start
                .machine
                .zip(end.machine)
                .and_then(|(a, b)| procstat::busy_share(a, b)),
            loadavg_1m_start: loadavg,
        },
        writes,
    };
    drop(servers);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_and_accept_combinations_validate() {
        let cfg = |target, storage, accept| {
            let mut c = S1Config::new(target, 1, 1.0, Duration::from_secs(1));
            c.storage = storage;
            c.accept = accept;
            c.validate()
        };
        let new = S1Config::new(Target::Watchd, 1, 1.0, Duration::from_secs(1));
        assert_eq!(
            (new.storage, new.accept),
            (Storage::Json, Accept::Json),
            "JSON by default, as the recorded results"
        );
        for storage in [Storage::Json, Storage::Protobuf] {
            assert!(cfg(Target::Watchd, storage, Accept::Json).is_ok());
            assert!(cfg(Target::Etcd, storage, Accept::Json).is_ok());
        }
        assert!(cfg(Target::Watchd, Storage::Protobuf, Accept::Protobuf).is_ok());
        let e = cfg(Target::Watchd, Storage::Json, Accept::Protobuf).unwrap_err();
        assert!(e.contains("--storage=protobuf"), "{e}");
        let e = cfg(Target::Etcd, Storage::Protobuf, Accept::Protobuf).unwrap_err();
        assert!(e.contains("watchd"), "{e}");
    }
}
