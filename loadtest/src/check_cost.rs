//! What the consistency check (`--consistency-check-interval`) costs etcd, with 50 000
//! pods of about 2 KiB: the check's own read of them (keys only, pages of 10 000 at one
//! revision) against a full read of them (values, pages of 1 000: what a re-list reads,
//! and what a check that compared values would), each run `reads` times on its own, etcd
//! CPU and time per read; then watchd checking every resource each `interval` over a
//! window, etcd's and watchd's CPU per round against the same window with the check off.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;
use serde_json::json;

use crate::demo::Storage;
use crate::s3::etcd::read_all;
use crate::scenario::fill::{fill, FillCounters};
use crate::scenario::pods::pod_items;
use crate::scenario::prom;
use crate::scenario::report::{Figure, MachineStart, Report};
use crate::scenario::servers::{CpuMark, CpuUse, ServerSetup, Servers};

/// Keys per page of the check's read (watchd's `CONSISTENCY_CHECK_PAGE`).
const CHECK_PAGE: i64 = 10_000;
/// Keys per page of a full read (watchd's `INITIAL_LIST_PAGE`).
const LIST_PAGE: i64 = 1_000;

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct CheckCostConfig {
    /// Pods in etcd.
    pub pods: usize,
    /// Stored size of each pod.
    pub pod_bytes: usize,
    /// Reads of each kind, etcd direct.
    pub reads: usize,
    /// watchd's check interval in the second part.
    pub interval: Duration,
    /// Length of each window of the second part (with and without the check).
    pub window: Duration,
    /// The servers.
    pub setup: ServerSetup,
}

/// One kind of read, run `n` times in a row: per read, the wall time, etcd's CPU and
/// the bytes received.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Reads {
    /// Reads made.
    pub n: usize,
    /// Keys per read.
    pub keys: u64,
    /// Bytes of keys and values received per read.
    pub bytes: u64,
    /// Milliseconds per read (mean).
    pub ms: f64,
    /// etcd CPU milliseconds per read (mean).
    pub etcd_cpu_ms: Option<f64>,
}

async fn reads(
    client: &Client,
    n: usize,
    page: i64,
    keys_only: bool,
    etcd_pid: Option<u32>,
) -> Result<Reads, String> {
    let mark = CpuMark::now(None, etcd_pid);
    let started = Instant::now();
    let (mut keys, mut bytes) = (0, 0);
    for _ in 0..n {
        (keys, bytes) = read_all(client.clone(), "/registry/pods/", page, keys_only).await?;
    }
    let used = mark.until(&CpuMark::now(None, etcd_pid));
    let per = |s: f64| s * 1000.0 / n.max(1) as f64;
    Ok(Reads {
        n,
        keys,
        bytes,
        ms: per(started.elapsed().as_secs_f64()),
        etcd_cpu_ms: used.etcd_s.map(per),
    })
}

/// A window of watchd running: CPU used, and the pods' checks made in it.
async fn window(servers: &Servers, length: Duration) -> Result<(CpuUse, f64, f64), String> {
    let endpoint = servers.watchd_endpoint()?;
    let checks = |s: &[prom::Sample]| {
        prom::sum(
            s,
            "watchd_storage_consistency_checks_total",
            &[("resource", "pods")],
        )
    };
    let before = prom::scrape_endpoint(&endpoint, Duration::from_secs(5)).await?;
    let mark = CpuMark::now(servers.watchd_pid, servers.etcd_pid);
    tokio::time::sleep(length).await;
    let used = mark.until(&CpuMark::now(servers.watchd_pid, servers.etcd_pid));
    let after = prom::scrape_endpoint(&endpoint, Duration::from_secs(5)).await?;
    let round_s = prom::sum(&after, "watchd_storage_consistency_check_seconds", &[]);
    let mismatches = prom::sum(
        &after,
        "watchd_storage_consistency_checks_total",
        &[("result", "mismatch")],
    );
    if mismatches > 0.0 {
        return Err(format!("{mismatches} checks found a mismatch"));
    }
    Ok((used, checks(&after) - checks(&before), round_s))
}

/// Runs the measurement and builds the report.
pub async fn run(cfg: &CheckCostConfig) -> Result<Report, String> {
    if cfg.pods == 0 || cfg.reads == 0 || cfg.interval.is_zero() || cfg.window < cfg.interval {
        return Err("--pods and --reads must be set, and --window at least --interval".into());
    }
    let t = Instant::now();
    let machine = MachineStart::now();
    let mut servers = Servers::etcd(&cfg.setup).await?;
    let client = servers.etcd_client().await?;
    let items = pod_items(cfg.pods, Storage::Protobuf, cfg.pod_bytes, 5)?;
    let filled = fill(
        &client,
        items.into_iter(),
        100,
        8,
        Arc::new(FillCounters::default()),
    )
    .await?;
    tracing::info!(pods = filled.keys, "filled; etcd direct reads");
    let keys_only = reads(&client, cfg.reads, CHECK_PAGE, true, servers.etcd_pid).await?;
    let full = reads(&client, cfg.reads, LIST_PAGE, false, servers.etcd_pid).await?;
    if keys_only.keys != cfg.pods as u64 || full.keys != cfg.pods as u64 {
        return Err(format!(
            "read {} and {} keys, wrote {}",
            keys_only.keys, full.keys, cfg.pods
        ));
    }

    // watchd: a window with the check off, then one with it on.
    let mut off = cfg.setup.clone();
    off.watchd_args
        .push("--consistency-check-interval=0".into());
    servers.start_watchd(&off).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (idle, _, _) = window(&servers, cfg.window).await?;
    let mut on = cfg.setup.clone();
    on.watchd_args.push(format!(
        "--consistency-check-interval={}ms",
        cfg.interval.as_millis()
    ));
    servers.start_watchd(&on).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (checking, rounds, round_s) = window(&servers, cfg.window).await?;
    if rounds < 1.0 {
        return Err("no check of the pods in the window".into());
    }
    let per_round =
        |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (a - b).max(0.0) * 1000.0 / rounds);
    let etcd_round_ms = per_round(checking.etcd_s, idle.etcd_s);
    let watchd_round_ms = per_round(checking.watchd_s, idle.watchd_s);

    let figures = vec![
        Figure::new(
            "etcd CPU per keys-only read of the pods (ms)",
            keys_only.etcd_cpu_ms,
        )
        .against("a full read (values)", full.etcd_cpu_ms),
        Figure::new(
            "time per keys-only read of the pods (ms)",
            Some(keys_only.ms),
        )
        .against("a full read (values)", Some(full.ms)),
        Figure::new(
            "bytes per keys-only read of the pods (MiB)",
            Some(keys_only.bytes as f64 / 1048576.0),
        )
        .against("a full read (values)", Some(full.bytes as f64 / 1048576.0)),
        Figure::new("etcd CPU per check round of watchd (ms)", etcd_round_ms),
        Figure::new("watchd CPU per check round (ms)", watchd_round_ms),
        Figure::new(
            "last check round, every resource (ms)",
            Some(round_s * 1000.0),
        ),
    ];
    let r = Report {
        scenario: "check-cost".into(),
        title: format!(
            "consistency check cost: {} pods of {} bytes, etcd direct x{} each, watchd every {:?} over {:?}",
            cfg.pods, cfg.pod_bytes, cfg.reads, cfg.interval, cfg.window
        ),
        settings: json!({
            "pods": cfg.pods,
            "pod_bytes": cfg.pod_bytes,
            "reads": cfg.reads,
            "interval_ms": cfg.interval.as_millis() as u64,
            "window_s": cfg.window.as_secs_f64(),
        }),
        figures,
        notes: vec![
            "a round checks every resource; with 50 000 pods and nothing else stored, the pods are nearly all of it".into(),
            "per-round CPU: the window with the check on minus the window with it off, over the pods' checks in it".into(),
        ],
        clean: true,
        details: json!({
            "fill": filled,
            "keys_only": keys_only,
            "full": full,
            "window_check_off": idle,
            "window_check_on": checking,
            "rounds": rounds,
        }),
        machine: machine.end(),
        elapsed_s: t.elapsed().as_secs_f64(),
    };
    Ok(r)
}
