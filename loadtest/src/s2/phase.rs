//! One S2 phase: a fresh etcd (and watchd) holding the pods, the watchers
//! opened after revision *base*, the updates written at a fixed rate, the
//! drain until every watcher has the last update meant for it, and the
//! accounting of each watcher against exactly the updates it should get.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{KeyField, S2Config};
use crate::endpoint::Protocol;
use crate::objects::Rng;
use crate::s1::report::Latency;
use crate::s1::watch::{self, Outcome, Source, Watchers};
use crate::s1::writer::{self, WriteStats};
use crate::scenario::fill::{fill, FillCounters};
use crate::scenario::pods::{namespace_name, stamped_pod_with, StampedValue};
use crate::scenario::progress::{Progress, RssSampler};
use crate::scenario::report::latency_ms;
use crate::scenario::servers::{check_fits, CpuMark, CpuUse, Servers};
use crate::stats::Accounting;
use crate::transport;

/// One group of watchers (node-scoped, or all pods) and what it received.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Group {
    /// Watchers in the group.
    pub watchers: usize,
    /// Deliveries the updates called for (each watcher × its updates).
    pub expected: u64,
    /// Missed, duplicate, reordered and unexpected events.
    #[serde(flatten)]
    pub accounting: Accounting,
    /// Delivery latency.
    pub latency_ms: Latency,
    /// Watchers whose stream ended early.
    pub failed: usize,
    /// The first such failure.
    pub first_error: Option<String>,
}

/// What one phase measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Phase {
    /// `watchd W=5000`, `watchd W=50`, `etcd direct`.
    pub label: String,
    /// Nodes the pods are spread over (one node-scoped watcher each).
    pub nodes: usize,
    /// The node-scoped watchers (watchd only).
    pub node: Group,
    /// The watchers of every pod (etcd direct: every watcher).
    pub all: Group,
    /// What the writer did.
    pub writes: WriteStats,
    /// Whether every watcher had its last update before the drain timeout.
    pub caught_up: bool,
    /// CPU over the window (first write until the drain ended).
    pub cpu: CpuUse,
    /// Server CPU microseconds per update written (watchd, or etcd direct).
    pub server_cpu_us_per_event: Option<f64>,
    /// Server CPU microseconds per delivery.
    pub server_cpu_us_per_delivery: Option<f64>,
    /// Peak RSS of the server during the window, bytes.
    pub server_peak_rss_bytes: u64,
    /// Bytes of one stored pod.
    pub pod_bytes: usize,
}

impl Phase {
    /// Whether nothing was lost, repeated, misrouted or failed.
    pub fn is_clean(&self) -> bool {
        [&self.node, &self.all].iter().all(|g| {
            let a = &g.accounting;
            a.missed + a.duplicates + a.out_of_order + a.unexpected == 0 && g.failed == 0
        }) && self.writes.failed == 0
            && self.caught_up
    }
}

/// The pods of a phase: pod `i` is on node `i % nodes`, in namespace
/// `i % namespaces`, all stored with a zero stamp.
fn pods(cfg: &S2Config, nodes: usize, node_names: &[String]) -> Result<Vec<StampedValue>, String> {
    let mut rng = Rng::new(11);
    (0..cfg.pods)
        .map(|i| {
            let ns = namespace_name(i % cfg.namespaces);
            let key = &node_names[i % nodes];
            // Keyed by service account: the pods spread over as many nodes, the
            // watchers' key is the account.
            let edit = |p: &mut serde_json::Value| match cfg.key_field {
                KeyField::ServiceAccountName => {
                    p["spec"]["serviceAccountName"] = key.as_str().into();
                    p["spec"]["serviceAccount"] = key.as_str().into();
                }
                KeyField::Shard => {
                    let uid = super::uid_in_shard(&format!("pod-{i}"), i % nodes, nodes);
                    p["metadata"]["uid"] = uid.into();
                }
                KeyField::NodeName => {}
            };
            stamped_pod_with(
                &cfg.prefix,
                i,
                &ns,
                key,
                cfg.storage,
                cfg.pod_bytes,
                &mut rng,
                edit,
            )
        })
        .collect()
}

/// The revision a consistent list of pods is served at.
async fn list_revision(servers: &Servers) -> Result<i64, String> {
    let endpoint = servers.watchd_endpoint()?;
    let (status, body) = transport::get_once(
        &endpoint,
        Protocol::Http1,
        "/api/v1/pods?limit=1",
        Duration::from_secs(10),
    )
    .await?;
    if status != 200 {
        return Err(format!(
            "list pods: {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("list pods: {e}"))?;
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "list pods: no metadata.resourceVersion".to_string())
}

/// Checks one group of outcomes, watcher `i` against `expected(i)`.
fn account<'a>(
    count: usize,
    outcomes: &[Outcome],
    expected: impl Fn(usize) -> &'a [i64],
    latency: Latency,
) -> Group {
    let mut g = Group {
        watchers: count,
        latency_ms: latency,
        ..Group::default()
    };
    let mut seen = HashSet::new();
    for o in outcomes {
        seen.insert(o.index);
        let want = expected(o.index);
        g.expected += want.len() as u64;
        g.accounting.add(&o.tally.check(want));
        if let Some(e) = &o.error {
            g.failed += 1;
            g.first_error.get_or_insert_with(|| e.clone());
        }
    }
    // A watcher that never reported lost everything meant for it.
    for i in (0..count).filter(|i| !seen.contains(i)) {
        g.failed += 1;
        g.expected += expected(i).len() as u64;
        g.accounting.missed += expected(i).len() as u64;
    }
    g
}

/// Whether every watcher of `w` has reached its `last(i)`.
fn caught_up(w: &Watchers, last: impl Fn(usize) -> i64) -> bool {
    w.shared
        .last_seen
        .iter()
        .enumerate()
        .all(|(i, a)| a.load(std::sync::atomic::Ordering::Relaxed) >= last(i))
}

/// Runs one phase against watchd with `nodes` node-scoped watchers (and the
/// configured all-pods watchers), or against etcd direct with
/// `cfg.etcd_watchers` watchers of the pods prefix when `etcd` is set.
pub async fn run(cfg: &S2Config, nodes: usize, etcd: bool, label: &str) -> Result<Phase, String> {
    let tag = label.replace([' ', '='], "").to_lowercase();
    let node_names: Vec<String> = (0..nodes).map(|i| format!("{tag}-node-{i}")).collect();
    let mut servers = Servers::etcd(&cfg.setup).await?;
    let client = servers.etcd_client().await?;
    let slots = pods(cfg, nodes, &node_names)?;
    let pod_bytes = slots.first().map_or(0, StampedValue::len);
    let items = slots.iter().map(|s| (s.key.clone(), s.with_stamp(0)));
    let filled = fill(&client, items, 100, 8, Arc::new(FillCounters::default())).await?;
    let (source, base, node_count, all_count, server_pid) = if etcd {
        let source = Source::Etcd {
            endpoints: servers.etcd_endpoints.clone(),
            connections: cfg.etcd_connections(),
            prefix: format!("{}/pods/", cfg.prefix.trim_end_matches('/')),
        };
        (
            source,
            filled.last_revision,
            0,
            cfg.etcd_watchers,
            servers.etcd_pid,
        )
    } else {
        let mut setup = cfg.setup.clone();
        setup.watchd_args.extend(cfg.key_field.watchd_arg());
        servers.start_watchd(&setup).await?;
        let base = list_revision(&servers).await?;
        let source = Source::Http {
            endpoint: servers.watchd_endpoint()?,
            accept: cfg.accept,
            protocol: cfg.protocol,
            streams_per_connection: cfg.streams_per_connection,
        };
        (source, base, nodes, cfg.all_watchers, servers.watchd_pid)
    };
    if cfg.protocol == Protocol::Http1 && !etcd {
        let sockets = (node_count + all_count) as u64;
        check_fits("watchd-loadtest", std::process::id(), sockets, 200)?;
        if let Some(pid) = server_pid {
            check_fits("watchd", pid, sockets, 200)?;
        }
    }
    tracing::info!(label, nodes, base, pods = cfg.pods, "opening watchers");
    let node_w = if node_count > 0 {
        Some(
            watch::open_paths(&source, node_count, base, |i| {
                format!(
                    "/api/v1/pods?watch=1&{}",
                    cfg.key_field.query(i, node_count, &node_names[i])
                )
            })
            .await?,
        )
    } else {
        None
    };
    let all_w =
        watch::open_paths(&source, all_count, base, |_| "/api/v1/pods?watch=1".into()).await?;
    tracing::info!(
        label,
        watchers = node_count + all_count,
        "watchers open; writing"
    );
    let sampler = server_pid.map(|pid| RssSampler::start(pid, Duration::from_millis(200)));
    let start = CpuMark::now(servers.watchd_pid.filter(|_| !etcd), servers.etcd_pid);
    let progress = {
        let all = all_w.shared.clone();
        let node = node_w.as_ref().map(|w| w.shared.clone());
        let label = label.to_string();
        Progress::every_second(format!("s2 {label}"), move || {
            let n = node.as_ref().map_or(0, |s| s.latency.count());
            format!(
                "deliveries: {n} to node watchers, {} to all-pods watchers; p99 so far {:.1} ms",
                all.latency.count(),
                all.latency.percentile(0.99).unwrap_or(0) as f64 / 1000.0
            )
        })
    };
    let writes = writer::run(&client, slots, cfg.updates_per_sec, cfg.duration).await;
    // The revisions each node's watcher must receive.
    let mut per_node: Vec<Vec<i64>> = vec![Vec::new(); nodes];
    for &(slot, rev) in &writes.slot_revisions {
        per_node[slot % nodes].push(rev);
    }
    let last_all = writes.revisions.last().copied().unwrap_or(base);
    let node_last = |i: usize| per_node[i].last().copied().unwrap_or(base);
    let deadline = Instant::now() + cfg.drain_timeout;
    let done = loop {
        let node_ok = node_w.as_ref().is_none_or(|w| caught_up(w, node_last));
        if node_ok && caught_up(&all_w, |_| last_all) {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let end = CpuMark::now(servers.watchd_pid.filter(|_| !etcd), servers.etcd_pid);
    drop(progress);
    let cpu = start.until(&end);
    let server_peak_rss_bytes = match (sampler, server_pid) {
        (Some(s), Some(pid)) => s.stop(pid),
        _ => 0,
    };
    let node = match node_w {
        Some(w) => {
            let lat = latency_ms(&w.shared.latency);
            let outcomes = w.stop(Duration::from_secs(10)).await;
            account(node_count, &outcomes, |i| &per_node[i], lat)
        }
        None => Group::default(),
    };
    let lat = latency_ms(&all_w.shared.latency);
    let outcomes = all_w.stop(Duration::from_secs(10)).await;
    let all = account(all_count, &outcomes, |_| &writes.revisions, lat);
    let server_cpu = if etcd { cpu.etcd_s } else { cpu.watchd_s };
    let deliveries = node.accounting.delivered + all.accounting.delivered;
    let per = |n: u64| server_cpu.filter(|_| n > 0).map(|c| c * 1e6 / n as f64);
    let phase = Phase {
        label: label.to_string(),
        nodes,
        server_cpu_us_per_event: per(writes.ok),
        server_cpu_us_per_delivery: per(deliveries),
        node,
        all,
        writes,
        caught_up: done,
        cpu,
        server_peak_rss_bytes,
        pod_bytes,
    };
    servers.stop_watchd();
    drop(servers);
    Ok(phase)
}
