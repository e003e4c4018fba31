//! Scenario S6, ingest: 1 000 000 etcd events (protobuf pods: 100 000
//! creates, then updates round-robin) replayed into etcd as fast as it
//! takes them, measured end to end through watchd; then watchd's ingestion
//! alone.
//!
//! 1. **End to end**: watchd runs on an empty etcd; the events are put
//!    `--ops-per-txn` to a transaction (100 by default: etcd on this machine
//!    takes about 2 000 single-put transactions a second, so 1 000 000
//!    kube-apiserver-like writes, one revision each, would take over 8
//!    minutes; `--ops-per-txn=1` is that shape, at fewer events), up to
//!    `--concurrency` in flight. The time runs from the first put until
//!    `watchd_applied_revision` (watchd's `/metrics`) reaches the last put's
//!    revision. This rate is bounded by etcd's writes on this machine; the
//!    figure that says what watchd itself can take is its CPU per event:
//!    events / watchd CPU-seconds is the rate one core of watchd sustains.
//! 2. **Ingestion alone**: a second watchd starts on the filled etcd; its
//!    initial load (paged range, decode, apply every object) until
//!    `/readyz` says ready, timed, and its CPU. The etcd range of the same
//!    pages, read from here, is timed too, so the decode-and-apply part can
//!    be told from etcd's. etcd's history is compacted at its last revision
//!    first, physically (the timing starts once etcd removed it): watchd
//!    replays the history etcd still has when it starts (so that watches from
//!    before a restart resume), which here would be the whole replay again,
//!    through etcd's watch, not a load. kube-apiserver compacts every 5
//!    minutes, so a cluster's etcd keeps minutes of history, not a run's.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::demo::Storage;
use crate::objects::Rng;
use crate::procstat;
use crate::scenario::fill::{fill, FillCounters};
use crate::scenario::pods::{namespace_name, node_name, stamped_pod, StampedValue};
use crate::scenario::progress::{mib, Progress};
use crate::scenario::prom;
use crate::scenario::report::{Figure, MachineStart, Report};
use crate::scenario::servers::{CpuMark, ServerSetup, Servers};

/// Settings of an S6 run.
#[derive(Clone, Debug)]
pub struct S6Config {
    /// etcd events replayed (creates, then updates).
    pub events: usize,
    /// Distinct pods (the creates).
    pub pods: usize,
    /// Puts per transaction (1: one revision per event, as kube-apiserver).
    pub ops_per_txn: usize,
    /// Transactions in flight.
    pub concurrency: usize,
    /// Stored size of a pod (0: as built).
    pub pod_bytes: usize,
    /// How pods are stored.
    pub storage: Storage,
    /// Whether to time the second watchd's initial load.
    pub reload: bool,
    /// The servers.
    pub setup: ServerSetup,
}

impl Default for S6Config {
    fn default() -> Self {
        Self {
            events: 1_000_000,
            pods: 100_000,
            ops_per_txn: 100,
            concurrency: 8,
            pod_bytes: 0,
            storage: Storage::Protobuf,
            reload: true,
            setup: ServerSetup::default(),
        }
    }
}

/// The events: pod `i % pods`, created first, then stamped with a counter.
fn events(pods: &[StampedValue], total: usize) -> impl Iterator<Item = (String, Vec<u8>)> + '_ {
    (0..total).map(move |i| {
        let p = &pods[i % pods.len()];
        (p.key.clone(), p.with_stamp(i as u64))
    })
}

async fn applied_revision(servers: &Servers) -> Option<i64> {
    let endpoint = servers.endpoint.as_ref()?;
    let s = prom::scrape_endpoint(endpoint, Duration::from_secs(5))
        .await
        .ok()?;
    Some(prom::sum(&s, "watchd_applied_revision", &[]) as i64)
}

/// Runs S6 and builds the report.
pub async fn run(cfg: &S6Config) -> Result<Report, String> {
    if cfg.pods == 0 || cfg.events < cfg.pods || cfg.events > 20_000_000 {
        return Err("--events must be at least --pods (>0) and at most 20000000".into());
    }
    let t = Instant::now();
    let machine = MachineStart::now();
    let mut setup = cfg.setup.clone();
    // 1 M pod revisions stay in etcd's history (compacted only before the reload).
    setup
        .etcd_args
        .push("--quota-backend-bytes=8589934592".into());
    let mut servers = Servers::both(&setup).await?;
    let client = servers.etcd_client().await?;
    let mut rng = Rng::new(6);
    let pods: Vec<StampedValue> = (0..cfg.pods)
        .map(|i| {
            stamped_pod(
                "/registry",
                i,
                &namespace_name(i % 100),
                &node_name(i % 1000),
                cfg.storage,
                cfg.pod_bytes,
                &mut rng,
            )
        })
        .collect::<Result<_, _>>()?;
    let pod_bytes = pods[0].len();
    let start_rev = applied_revision(&servers).await.unwrap_or(0);
    let counters = Arc::new(FillCounters::default());
    let watchd_pid = servers.watchd_pid;
    let applied_now = Arc::new(std::sync::atomic::AtomicI64::new(start_rev));
    let poller = {
        let (applied, endpoint) = (applied_now.clone(), servers.watchd_endpoint()?);
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(3600);
            while Instant::now() < deadline {
                if let Ok(s) = prom::scrape_endpoint(&endpoint, Duration::from_secs(5)).await {
                    applied.store(
                        prom::sum(&s, "watchd_applied_revision", &[]) as i64,
                        Ordering::Relaxed,
                    );
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let progress = {
        let (c, a, total) = (counters.clone(), applied_now.clone(), cfg.events);
        Progress::every_second("s6 replay", move || {
            format!(
                "{} of {total} events acknowledged by etcd; watchd applied revision {}; watchd RSS {:.0} MiB",
                c.keys(),
                a.load(Ordering::Relaxed),
                mib(watchd_pid.and_then(procstat::rss_bytes).unwrap_or(0))
            )
        })
    };
    let mark = CpuMark::now(servers.watchd_pid, servers.etcd_pid);
    let t0 = Instant::now();
    let replay = fill(
        &client,
        events(&pods, cfg.events),
        cfg.ops_per_txn,
        cfg.concurrency,
        counters,
    )
    .await?;
    let puts_done = t0.elapsed();
    // watchd fell 27 s behind 300 000 events in a validation run: room for 1 M.
    let deadline = Instant::now() + Duration::from_secs(300);
    while applied_now.load(Ordering::Relaxed) < replay.last_revision && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let applied = applied_now.load(Ordering::Relaxed);
    let e2e = t0.elapsed();
    let cpu = mark.until(&CpuMark::now(servers.watchd_pid, servers.etcd_pid));
    poller.abort();
    drop(progress);
    let caught_up = applied >= replay.last_revision;
    let rss_after_replay = watchd_pid.and_then(procstat::rss_bytes);
    let ev = cfg.events as f64;
    let e2e_rate = ev / e2e.as_secs_f64();
    let per_core = cpu.watchd_s.filter(|&c| c > 0.0).map(|c| ev / c);
    // Ingestion alone.
    let (mut reload_s, mut reload_cpu, mut range_s, mut reload_rss) = (None, None, None, None);
    if cfg.reload && setup.starts_watchd() {
        servers.stop_watchd();
        client
            .clone()
            .compact(
                replay.last_revision,
                Some(etcd_client::CompactionOptions::new().with_physical()),
            )
            .await
            .map_err(|e| format!("compacting etcd before the reload: {e}"))?;
        let t = Instant::now();
        let keys = crate::s3::read_pods(&servers.etcd_endpoints, 1000).await?;
        range_s = Some(t.elapsed().as_secs_f64());
        if keys != cfg.pods as u64 {
            return Err(format!("etcd holds {keys} pods, expected {}", cfg.pods));
        }
        servers.start_watchd(&setup).await?;
        reload_s = servers.watchd_ready_after.map(|d| d.as_secs_f64());
        reload_cpu = servers.watchd_pid.and_then(procstat::cpu_seconds);
        reload_rss = servers.watchd_pid.and_then(procstat::rss_bytes);
    }
    let pods_f = cfg.pods as f64;
    let figures = vec![
        Figure::new("events replayed", Some(ev)),
        Figure::new("end to end: events/s applied by watchd", Some(e2e_rate))
            .against("etcd puts/s acknowledged", Some(replay.keys_per_sec)),
        Figure::new(
            "watchd lag after the last put (s)",
            Some((e2e - puts_done).as_secs_f64()),
        ),
        Figure::new("events per watchd CPU-second (one core)", per_core)
            .target(">= 100 000", per_core.map(|r| r >= 100_000.0)),
        Figure::new("watchd CPU-µs / event", cpu.watchd_s.map(|c| c * 1e6 / ev))
            .against("etcd CPU-µs / event", cpu.etcd_s.map(|c| c * 1e6 / ev)),
        Figure::new(
            "watchd cores used during the replay",
            cpu.watchd_s.map(|c| c / cpu.window_s),
        ),
        Figure::new(
            "watchd RSS after the replay (MiB)",
            rss_after_replay.map(mib),
        ),
        Figure::new(
            format!("ingestion alone: {} pods loaded, objects/s", cfg.pods),
            reload_s.map(|s| pods_f / s),
        )
        .against(
            "etcd paged range alone, objects/s",
            range_s.map(|s| pods_f / s),
        ),
        Figure::new(
            "ingestion alone: objects per watchd CPU-second",
            reload_cpu.filter(|&c| c > 0.0).map(|c| pods_f / c),
        )
        .target(">= 100 000", reload_cpu.map(|c| pods_f / c >= 100_000.0)),
        Figure::new(
            "ingestion alone: watchd RSS when ready (MiB)",
            reload_rss.map(mib),
        ),
    ];
    let mut notes = vec![
        format!(
            "{} events: {} pod creates then updates round-robin, {} B stored ({}), {} put(s) per transaction, {} in flight",
            cfg.events, cfg.pods, pod_bytes, cfg.storage.name(), cfg.ops_per_txn, cfg.concurrency
        ),
        "end to end is bounded by etcd's write rate on this machine (watchd's lag after the last put shows whether it kept up); events per watchd CPU-second is watchd's own bound, measured while etcd and the generator share the two cores".into(),
    ];
    if cfg.reload {
        notes.push(if setup.starts_watchd() {
            "ingestion alone: time from starting a second watchd on the filled etcd, compacted at its last revision first, to /readyz (process start, paged range of 1000 keys, decode and apply of every pod); its CPU is the whole process's until ready".into()
        } else {
            "ingestion alone needs a watchd this run starts (not --watchd-url): skipped".into()
        });
    }
    Ok(Report {
        scenario: "s6".into(),
        title: format!(
            "S6 ingest: {} pod events replayed into etcd, through watchd",
            cfg.events
        ),
        settings: json!({
            "events": cfg.events, "pods": cfg.pods, "ops_per_txn": cfg.ops_per_txn,
            "concurrency": cfg.concurrency, "pod_bytes": pod_bytes, "storage": cfg.storage.name(),
        }),
        figures,
        notes,
        clean: caught_up && replay.keys == cfg.events as u64,
        details: json!({
            "replay": replay, "applied_revision": applied, "caught_up": caught_up,
            "puts_done_s": puts_done.as_secs_f64(), "end_to_end_s": e2e.as_secs_f64(), "cpu": cpu,
            "reload_ready_s": reload_s, "reload_cpu_s": reload_cpu, "etcd_range_s": range_s,
        }),
        machine: machine.end(),
        elapsed_s: t.elapsed().as_secs_f64(),
    })
}
