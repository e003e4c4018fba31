//! Scenario S7, cache memory: 100 000 objects of mixed kinds and sizes
//! ([`mix`]) written into etcd, then watchd started on them; the figure is
//! watchd's RSS once ready over the raw etcd value bytes (target ≤ 1.5×),
//! for protobuf storage (as kube-apiserver stores built-in kinds) and for
//! JSON storage, each on a fresh etcd.
//!
//! In the same phase, watchd first runs on the empty etcd, so its own
//! baseline RSS is known ((RSS − empty) / raw is the cache alone). After
//! the reading, every resource is listed once as JSON, which renders and
//! keeps the JSON of protobuf-stored objects: the RSS after that is
//! reported too.

pub mod mix;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::demo::Storage;
use crate::endpoint::Protocol;
use crate::objects::Rng;
use crate::procstat;
use crate::scenario::fill::{fill, FillCounters};
use crate::scenario::pods::encode_strict;
use crate::scenario::progress::{mib, Progress};
use crate::scenario::prom;
use crate::scenario::report::{Figure, MachineStart, Report};
use crate::scenario::servers::{ServerSetup, Servers};
use crate::transport;

/// The collections listed after the reading (one per kind of [`mix::MIX`]).
pub const LISTS: [&str; 10] = [
    "/api/v1/pods",
    "/api/v1/events",
    "/api/v1/configmaps",
    "/api/v1/secrets",
    "/apis/apps/v1/replicasets",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/api/v1/services",
    "/api/v1/serviceaccounts",
    "/apis/coordination.k8s.io/v1/leases",
    "/apis/apps/v1/deployments",
];

/// Settings of an S7 run.
#[derive(Clone, Debug)]
pub struct S7Config {
    /// Objects.
    pub objects: usize,
    /// Storage formats, a phase each.
    pub storages: Vec<Storage>,
    /// Seconds between ready and the reading.
    pub settle: Duration,
    /// The servers (started per phase; given ones are refused).
    pub setup: ServerSetup,
}

impl Default for S7Config {
    fn default() -> Self {
        Self {
            objects: 100_000,
            storages: vec![Storage::Protobuf, Storage::Json],
            settle: Duration::from_secs(2),
            setup: ServerSetup::default(),
        }
    }
}

/// One storage format's readings.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Phase {
    /// `protobuf` or `json`.
    pub storage: String,
    /// Objects written.
    pub objects: u64,
    /// Raw etcd value bytes.
    pub raw_bytes: u64,
    /// watchd RSS on the empty etcd, bytes.
    pub empty_rss: u64,
    /// watchd RSS once ready with the objects, bytes.
    pub rss: u64,
    /// Peak RSS (VmHWM) until then, bytes.
    pub peak_rss: u64,
    /// `watchd_cached_bytes`, summed.
    pub cached_bytes: Option<f64>,
    /// `watchd_cached_objects`, summed (events count twice: core and
    /// events.k8s.io each have an object, the second sharing the first's bytes).
    pub cached_objects: Option<f64>,
    /// Seconds from start to ready.
    pub ready_s: f64,
    /// RSS after one JSON list of every collection, bytes.
    pub rss_after_json_lists: u64,
    /// `watchd_rendered_json_bytes` after those lists.
    pub rendered_json_bytes: Option<f64>,
}

async fn metrics(servers: &Servers) -> Option<Vec<prom::Sample>> {
    let e = servers.endpoint.as_ref()?;
    prom::scrape_endpoint(e, Duration::from_secs(10)).await.ok()
}

async fn phase(cfg: &S7Config, storage: Storage) -> Result<Phase, String> {
    let mut servers = Servers::etcd(&cfg.setup).await?;
    servers.start_watchd(&cfg.setup).await?;
    tokio::time::sleep(cfg.settle).await;
    let empty_rss = servers
        .watchd_pid
        .and_then(procstat::rss_bytes)
        .unwrap_or(0);
    servers.stop_watchd();
    let client = servers.etcd_client().await?;
    let mut rng = Rng::new(7);
    let mut items = Vec::with_capacity(cfg.objects);
    for i in 0..cfg.objects {
        let (key, obj) = mix::object("/registry", i, &mut rng);
        items.push((key, encode_strict(&obj, storage)?));
    }
    let counters = Arc::new(FillCounters::default());
    let filled = {
        let (c, n) = (counters.clone(), cfg.objects);
        let _p = Progress::every_second(format!("s7 {} fill", storage.name()), move || {
            format!("{} of {n} objects written", c.keys())
        });
        fill(&client, items.into_iter(), 100, 8, counters).await?
    };
    servers.start_watchd(&cfg.setup).await?;
    let pid = servers.watchd_pid.ok_or("no watchd PID")?;
    tokio::time::sleep(cfg.settle).await;
    let rss = procstat::rss_bytes(pid).unwrap_or(0);
    let peak_rss = procstat::peak_rss_bytes(pid).unwrap_or(0);
    let m = metrics(&servers).await;
    let endpoint = servers.watchd_endpoint()?;
    for path in LISTS {
        let (status, _) =
            transport::get_once(&endpoint, Protocol::Http1, path, Duration::from_secs(60)).await?;
        if status != 200 {
            return Err(format!("GET {path}: {status}"));
        }
    }
    tokio::time::sleep(cfg.settle).await;
    let after = metrics(&servers).await;
    Ok(Phase {
        storage: storage.name().into(),
        objects: filled.keys,
        raw_bytes: filled.value_bytes,
        empty_rss,
        rss,
        peak_rss,
        cached_bytes: m.as_ref().map(|s| prom::sum(s, "watchd_cached_bytes", &[])),
        cached_objects: m
            .as_ref()
            .map(|s| prom::sum(s, "watchd_cached_objects", &[])),
        ready_s: servers.watchd_ready_after.map_or(0.0, |d| d.as_secs_f64()),
        rss_after_json_lists: procstat::rss_bytes(pid).unwrap_or(0),
        rendered_json_bytes: after
            .as_ref()
            .map(|s| prom::sum(s, "watchd_rendered_json_bytes", &[])),
    })
}

/// Runs S7 and builds the report.
pub async fn run(cfg: &S7Config) -> Result<Report, String> {
    if cfg.objects == 0 || cfg.objects > 2_000_000 || cfg.storages.is_empty() {
        return Err("--objects must be 1..=2000000 and --storage given".into());
    }
    if !cfg.setup.starts_watchd() || !cfg.setup.starts_etcd() {
        return Err("s7 starts its own etcd and watchd per phase (the cache is measured from an empty start)".into());
    }
    let t = Instant::now();
    let machine = MachineStart::now();
    let mut phases = Vec::new();
    for &s in &cfg.storages {
        tracing::info!(storage = s.name(), objects = cfg.objects, "phase");
        phases.push(phase(cfg, s).await?);
    }
    let mut figures = Vec::new();
    for p in &phases {
        let raw = p.raw_bytes.max(1) as f64;
        let ratio = p.rss as f64 / raw;
        let s = &p.storage;
        figures.extend([
            Figure::new(
                format!("{s}: raw etcd value bytes (MiB)"),
                Some(mib(p.raw_bytes)),
            ),
            Figure::new(
                format!("{s}: watchd RSS when ready (MiB)"),
                Some(mib(p.rss)),
            )
            .against("empty cache", Some(mib(p.empty_rss))),
            Figure::new(format!("{s}: RSS / raw bytes"), Some(ratio))
                .target("<= 1.5", Some(ratio <= 1.5)),
            Figure::new(
                format!("{s}: (RSS - empty RSS) / raw bytes"),
                Some((p.rss as f64 - p.empty_rss as f64) / raw),
            ),
            Figure::new(
                format!("{s}: watchd_cached_bytes / raw bytes"),
                p.cached_bytes.map(|c| c / raw),
            ),
            Figure::new(
                format!("{s}: peak RSS during the load / raw bytes"),
                Some(p.peak_rss as f64 / raw),
            ),
            Figure::new(
                format!("{s}: RSS after a JSON list of everything / raw"),
                Some(p.rss_after_json_lists as f64 / raw),
            ),
            Figure::new(format!("{s}: seconds from start to ready"), Some(p.ready_s)),
        ]);
    }
    let notes = vec![
        format!("{} objects: {}", cfg.objects, mix::MIX.iter().map(|(n, _, s)| format!("{s}% {n}")).collect::<Vec<_>>().join(", ")),
        "raw bytes are the etcd values as written (keys excluded); RSS is VmRSS after ready and a settle; core/v1 and events.k8s.io/v1 Events are cached once, events.k8s.io/v1 converted on read".into(),
        "kube-apiserver keeps decoded objects at about 5x their serialized size (the brief's figure, for context only)".into(),
    ];
    Ok(Report {
        scenario: "s7".into(),
        title: format!("S7 cache memory: {} mixed objects", cfg.objects),
        settings: json!({ "objects": cfg.objects, "storages": cfg.storages.iter().map(|s| s.name()).collect::<Vec<_>>(), "settle_s": cfg.settle.as_secs_f64() }),
        figures,
        notes,
        clean: phases.iter().all(|p| p.objects == cfg.objects as u64),
        details: json!({ "phases": phases }),
        machine: machine.end(),
        elapsed_s: t.elapsed().as_secs_f64(),
    })
}
