//! Scenario S1, broadcast: W watchers all watching every ConfigMap while a
//! writer updates ConfigMaps in etcd at E writes/s.
//!
//! A run: start (or reach) etcd and, for the watchd target, watchd; prefill
//! the objects; open the W watches after revision `base`; write for
//! `duration`; wait until every watcher has the last write (bounded by
//! `drain_timeout`); stop the watchers and check each one's tally against the
//! writer's revisions. CPU and memory are read from `/proc` at the first
//! write and when the drain ends, so setup costs are not counted.

pub mod artifacts;
pub mod compare;
pub mod config;
pub mod event;
pub mod floor_side;
pub mod informer;
pub mod jsonscan;
pub mod protocol;
pub mod report;
pub mod saturate;
pub mod watch;
pub mod writer;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;

use crate::endpoint::{Endpoint, Protocol};
use crate::grpc;
use crate::launch::{self, Etcd, Watchd};
use crate::procstat;
use crate::progress::{schedule_lag_s, Reading, Ticker};
use crate::stats::Accounting;
use crate::transport;
pub use config::{S1Config, Target, MAX_STREAMS_PER_CONNECTION};
pub use protocol::{WatchApi, WatchProtocol, GRPC_WATCHD, INFORMER};
use report::{Latency, Machine, ProcFigures, S1Result, TokioWorkers};
use watch::Source;

/// The servers of one run; dropping it kills those this run started.
struct Servers {
    etcd_endpoints: Vec<String>,
    etcd: Option<Etcd>,
    watchd: Option<Watchd>,
    endpoint: Option<Arc<Endpoint>>,
    /// The PKI and token of an informer run's watchd (removed after it).
    _informer: Option<informer::Credentials>,
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
    let mut credentials = None;
    let (watchd, endpoint) = match (cfg.target, &cfg.target_url) {
        (Target::Etcd, _) => (None, None),
        (Target::Watchd, Some(url)) => {
            let endpoint = Endpoint::new(url, &cfg.tls, cfg.token.as_ref())?;
            (None, Some(Arc::new(endpoint)))
        }
        (Target::Watchd, None) if cfg.informer => {
            let (w, creds) = informer::start_watchd(
                &cfg.watchd_bin,
                &etcd_endpoints[0],
                &cfg.temp_root,
                &cfg.prefix,
                &cfg.watchd_args,
            )
            .await?;
            credentials = Some(creds);
            let endpoint = w.endpoint.clone();
            (Some(w), Some(endpoint))
        }
        (Target::Watchd, None) => {
            let w = launch::start_watchd_with(
                &cfg.watchd_bin,
                &etcd_endpoints[0],
                &cfg.temp_root,
                &launch::WatchdOptions {
                    args: cfg.watchd_args.clone(),
                    ..Default::default()
                },
            )
            .await?;
            let endpoint = w.endpoint.clone();
            (Some(w), Some(endpoint))
        }
    };
    Ok(Servers {
        etcd_endpoints,
        etcd,
        watchd,
        endpoint,
        _informer: credentials,
    })
}

/// (user, system) CPU seconds of a process.
type UserSystem = Option<(f64, f64)>;

/// CPU readings at one instant.
#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    server: UserSystem,
    etcd: UserSystem,
    own: UserSystem,
    machine: Option<procstat::MachineTicks>,
}

fn sample(server: Option<u32>, etcd: Option<u32>) -> Sample {
    Sample {
        at: Instant::now(),
        server: server.and_then(procstat::cpu_user_system),
        etcd: etcd.and_then(procstat::cpu_user_system),
        own: procstat::cpu_user_system(std::process::id()),
        machine: procstat::machine_ticks(),
    }
}

fn figures(
    process: &str,
    pid: Option<u32>,
    before: UserSystem,
    after: UserSystem,
    window_s: f64,
    deliveries: u64,
) -> ProcFigures {
    let used = before.zip(after).map(|(a, b)| {
        let user = (b.0 - a.0).max(0.0);
        (user, user + (b.1 - a.1).max(0.0))
    });
    let cpu_s = used.map(|u| u.1);
    ProcFigures {
        process: process.to_string(),
        pid,
        cpu_s,
        user_s: used.map(|u| u.0),
        cpu_s_per_million: cpu_s
            .filter(|_| deliveries > 0)
            .map(|c| c / (deliveries as f64 / 1e6)),
        cores: cpu_s.map(|c| c / window_s.max(1e-9)),
        peak_rss_bytes: pid.and_then(procstat::peak_rss_bytes),
    }
}

/// CPU-seconds per million deliveries of the server and of this generator
/// since the write phase began, for the progress line (`None` before any
/// delivery or without a reading).
pub fn cpu_note(
    server_s: Option<f64>,
    generator_s: Option<f64>,
    deliveries: u64,
) -> Option<String> {
    if deliveries == 0 {
        return None;
    }
    let per_m = |c: Option<f64>| report::fmt_num(c.map(|c| c * 1e6 / deliveries as f64));
    Some(format!(
        "CPU-s/1M so far: server {}, generator {}",
        per_m(server_s),
        per_m(generator_s)
    ))
}

/// The progress line of a run's write phase: deliveries, how far the
/// slowest watcher is behind the writer's schedule (its revisions are
/// consecutive after `base`), the revisions skipped so far, and the CPU the
/// server and this generator spent per delivery since `start`.
fn progress_ticker(
    cfg: &S1Config,
    shared: &Arc<watch::Shared>,
    base: i64,
    server_pid: Option<u32>,
    start: Sample,
) -> Ticker {
    let shared = shared.clone();
    let rate = cfg.writes_per_sec;
    let planned = (rate * cfg.duration.as_secs_f64()).round().max(1.0) as u64;
    let started = Instant::now();
    let label = format!("s1 {} {}", cfg.target.name(), cfg.multiplexing().protocol);
    Ticker::spawn(label, move || {
        let slowest = (shared.min_seen() - base).max(0) as u64;
        let delivered = shared.latency.count() + shared.unstamped.load(Ordering::Relaxed);
        let used = |before: UserSystem, now: UserSystem| {
            before
                .zip(now)
                .map(|(a, b)| (b.0 + b.1 - a.0 - a.1).max(0.0))
        };
        let server = used(start.server, server_pid.and_then(procstat::cpu_user_system));
        let own = used(start.own, procstat::cpu_user_system(std::process::id()));
        Reading {
            delivered,
            lag_s: schedule_lag_s(started.elapsed(), rate, planned, slowest),
            lost: shared.gaps.load(Ordering::Relaxed),
            note: cpu_note(server, own, delivered),
        }
    })
}

/// The list revision the HTTP target serves now (a consistent list of
/// configmaps, over the protocol the watchers speak).
async fn list_revision(endpoint: &Arc<Endpoint>, protocol: Protocol) -> Result<i64, String> {
    let (status, body) = transport::get_once(
        endpoint,
        protocol,
        "/api/v1/configmaps",
        Duration::from_secs(10),
    )
    .await?;
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

/// The revision of a consistent gRPC List of configmaps on watchd's gRPC
/// API at `addr` (its own connection, closed after).
async fn grpc_list_revision(addr: SocketAddr) -> Result<i64, String> {
    let timeout = Duration::from_secs(10);
    let mut client = grpc::client(grpc::connect(addr, timeout).await?);
    grpc::list_revision(&mut client, timeout).await
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
    let multiplexing = cfg.multiplexing();
    let (source, base, server_pid) = match cfg.target {
        Target::Etcd => (
            Source::Etcd {
                endpoints: servers.etcd_endpoints.clone(),
                connections: multiplexing.connections,
                prefix: format!("{}/configmaps/", cfg.prefix.trim_end_matches('/')),
            },
            prefilled,
            etcd_pid.or(cfg.server_pid),
        ),
        Target::Watchd => {
            // The watchers start at what their API lists now, which must
            // include the prefill.
            let (source, rv, listed) = match cfg.api {
                WatchApi::Grpc => {
                    let addr = servers.watchd.as_ref().map(|w| w.grpc_addr).ok_or(
                        "no gRPC address: the gRPC watchers need the watchd this run starts",
                    )?;
                    let rv = grpc_list_revision(addr).await?;
                    let source = Source::Grpc {
                        addr,
                        accept: cfg.accept,
                        streams_per_connection: cfg.streams_per_connection,
                    };
                    (source, rv, "watchd's gRPC List was")
                }
                WatchApi::Http => {
                    let endpoint = servers.endpoint.clone().ok_or("no HTTP target")?;
                    let rv = list_revision(&endpoint, cfg.protocol).await?;
                    let source = Source::Http {
                        endpoint,
                        accept: cfg.accept,
                        protocol: cfg.protocol,
                        streams_per_connection: cfg.streams_per_connection,
                    };
                    (source, rv, "watchd listed")
                }
            };
            if rv < prefilled {
                return Err(format!(
                    "{listed} at {rv}, before the prefill ({prefilled})"
                ));
            }
            let pid = servers.watchd.as_ref().map(|w| w.proc.pid());
            (source, rv, pid.or(cfg.server_pid))
        }
    };
    let watchers = watch::open(&source, cfg.watchers, base).await?;
    tracing::info!(
        target = cfg.target.name(),
        storage = cfg.storage.name(),
        protocol = %multiplexing,
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
    let ticker = progress_ticker(cfg, &watchers.shared, base, server_pid, start);
    let writes = writer::run(&client, slots, cfg.writes_per_sec, cfg.duration).await;
    let last = writes.revisions.last().copied().unwrap_or(base);
    let written_at = Instant::now();
    let drain_deadline = written_at + cfg.drain_timeout;
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
    drop(ticker);
    let drain_s = end.at.duration_since(written_at).as_secs_f64();
    let window_s = end.at.duration_since(start.at).as_secs_f64();
    let latency_ms = Latency::from_histogram(&watchers.shared.latency);
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
        multiplexing,
        watchd_args: cfg.watchd_args.clone(),
        namespaces: namespaces.len(),
        objects: cfg.objects,
        base_revision: base,
        expected_deliveries: writes.ok * cfg.watchers as u64,
        window_s,
        delivered_per_sec: delivered as f64 / window_s.max(1e-9),
        caught_up,
        drain_s,
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
            tokio_workers: TokioWorkers::now(servers.watchd.is_some()),
        },
        writes,
    };
    drop(servers);
    tracing::info!(
        target = %result.target,
        protocol = %result.multiplexing.protocol,
        delivered = result.accounting.delivered,
        server_cpu_s_per_1m = %report::fmt_num(result.server.cpu_s_per_million),
        generator_cpu_s_per_1m = %report::fmt_num(result.generator.cpu_s_per_million),
        "s1 run done"
    );
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_note_gives_server_and_generator_cpu_per_million() {
        assert_eq!(
            cpu_note(Some(0.5), Some(0.25), 100_000).as_deref(),
            Some("CPU-s/1M so far: server 5.00, generator 2.50")
        );
        assert_eq!(
            cpu_note(None, Some(0.01), 1_000_000).as_deref(),
            Some("CPU-s/1M so far: server -, generator 0.010")
        );
        assert_eq!(cpu_note(Some(1.0), Some(1.0), 0), None);
    }
}
