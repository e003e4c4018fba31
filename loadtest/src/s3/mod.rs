//! Scenario S3, list storm: 50 000 pods of about 2 KiB in the cache, then
//! 200 concurrent full lists (`GET /api/v1/pods`), then 200 concurrent
//! streaming lists (`watch=1&sendInitialEvents=true&...`, read until the
//! bookmark with the `k8s.io/initial-events-end` annotation), each as JSON
//! and as protobuf; and, as the baseline, concurrent full reads of the pods
//! prefix from etcd direct (paged): 50 by default, as etcd serves them at
//! under 0.1 GB/s here and 200 would take about 5 minutes on their own.
//!
//! The pods are written into etcd before watchd starts (its initial load),
//! then one list per media type is read and checked (every pod there), which
//! also renders the JSON of the protobuf-stored pods once: that memory is
//! reported apart ("rendered JSON kept"), and the idle RSS is read after it.
//! Each storm reports lists/s, aggregate output GB/s, per-list latency and
//! the peak RSS growth over the RSS just before it, against the cache size
//! (`watchd_cached_bytes`).

pub(crate) mod etcd;
pub mod storm;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::json;

use crate::demo::Storage;
use crate::endpoint::{Endpoint, Protocol};
use crate::http::Accept;
use crate::scenario::fill::{fill, FillCounters};
use crate::scenario::pods::pod_items;
use crate::scenario::progress::{mib, Progress};
use crate::scenario::prom;
use crate::scenario::report::{Figure, MachineStart, Report};
use crate::scenario::servers::{ServerSetup, Servers};
use crate::transport::Conn;
use storm::{Kind, Storm, StormResult};
use watchd::codec::envelope;
use watchd::codec::wire::{fields, Val};

/// Settings of an S3 run.
#[derive(Clone, Debug)]
pub struct S3Config {
    /// Pods in the cache.
    pub pods: usize,
    /// Stored size of each pod.
    pub pod_bytes: usize,
    /// How they are stored.
    pub storage: Storage,
    /// Lists at once in each storm.
    pub concurrency: usize,
    /// Media types, each storm once per type.
    pub accepts: Vec<Accept>,
    /// HTTP/1.1 (a connection per list) or HTTP/2.
    pub protocol: Protocol,
    /// With HTTP/2, lists per connection.
    pub streams_per_connection: usize,
    /// Concurrent etcd direct reads (0: no baseline).
    pub etcd_lists: usize,
    /// Keys per etcd range page.
    pub etcd_page: i64,
    /// Ask for gzip (`Accept-Encoding: gzip`): full lists over 128 KiB and streaming
    /// lists come compressed, as kube-apiserver 1.37 sends them.
    pub gzip: bool,
    /// The servers.
    pub setup: ServerSetup,
}

impl Default for S3Config {
    fn default() -> Self {
        Self {
            pods: 50_000,
            pod_bytes: 2048,
            storage: Storage::Protobuf,
            concurrency: 200,
            accepts: vec![Accept::Json, Accept::Protobuf],
            protocol: Protocol::Http1,
            streams_per_connection: 100,
            etcd_lists: 50,
            etcd_page: 500,
            gzip: false,
            setup: ServerSetup::default(),
        }
    }
}

#[derive(Deserialize)]
struct ListItems {
    items: Vec<IgnoredAny>,
}

/// Items of a list body: JSON `items`, or a protobuf list's field 2.
pub fn count_items(body: &[u8], accept: Accept) -> Result<usize, String> {
    match accept {
        Accept::Json => serde_json::from_slice::<ListItems>(body)
            .map(|l| l.items.len())
            .map_err(|e| format!("list JSON: {e}")),
        Accept::Protobuf => {
            let env = envelope::parse(body).map_err(|e| format!("list envelope: {e}"))?;
            let mut n = 0;
            for f in fields(env.raw) {
                if let (2, Val::Bytes(_)) = f.map_err(|e| format!("list: {e}"))? {
                    n += 1;
                }
            }
            Ok(n)
        }
    }
}

/// One checked list as `accept`: its length in bytes.
async fn reference(endpoint: &Arc<Endpoint>, accept: Accept, pods: usize) -> Result<u64, String> {
    let mut conn = Conn::open(endpoint, Protocol::Http1, Duration::from_secs(10)).await?;
    let resp = conn.get_as("/api/v1/pods", accept).await?;
    let status = resp.status();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .map_err(|e| format!("reference list: {e}"))?
        .to_bytes();
    if status != 200 {
        return Err(format!("reference list: {status}"));
    }
    let n = count_items(&body, accept)?;
    if n != pods {
        return Err(format!(
            "reference list as {}: {n} pods, expected {pods}",
            accept.name()
        ));
    }
    Ok(body.len() as u64)
}

/// Cached bytes and kept rendered JSON bytes from watchd's `/metrics`.
async fn cache_bytes(endpoint: &Arc<Endpoint>) -> (Option<f64>, Option<f64>) {
    match prom::scrape_endpoint(endpoint, Duration::from_secs(5)).await {
        Ok(s) => (
            Some(prom::sum(&s, "watchd_cached_bytes", &[])),
            Some(prom::sum(&s, "watchd_rendered_json_bytes", &[])),
        ),
        Err(_) => (None, None),
    }
}

/// Reads every pod from etcd in pages of `page` keys on one connection;
/// the number of keys (the ingest scenario's etcd-alone timing).
pub async fn read_pods(endpoints: &[String], page: i64) -> Result<u64, String> {
    let client = etcd_client::Client::connect(endpoints, Some(crate::launch::etcd_options()))
        .await
        .map_err(|e| format!("etcd connect: {e}"))?;
    Ok(etcd::read_all(client, "/registry/pods/", page, false)
        .await?
        .0)
}

/// Runs S3 and builds the report.
pub async fn run(cfg: &S3Config) -> Result<Report, String> {
    if cfg.pods == 0 || cfg.concurrency == 0 || cfg.concurrency > 10_000 || cfg.accepts.is_empty() {
        return Err("--pods, --concurrency (1..=10000) and --accept must be set".into());
    }
    let t = Instant::now();
    let machine = MachineStart::now();
    let mut servers = Servers::etcd(&cfg.setup).await?;
    let client = servers.etcd_client().await?;
    let items = pod_items(cfg.pods, cfg.storage, cfg.pod_bytes, 3)?;
    let counters = Arc::new(FillCounters::default());
    let filled = {
        let c = counters.clone();
        let n = cfg.pods;
        let _p = Progress::every_second("s3 fill", move || {
            format!("{} of {n} pods written", c.keys())
        });
        fill(&client, items.into_iter(), 100, 8, counters).await?
    };
    servers.start_watchd(&cfg.setup).await?;
    let endpoint = servers.watchd_endpoint()?;
    let pid = servers.watchd_pid;
    let mut want = Vec::new();
    for &a in &cfg.accepts {
        want.push((a, reference(&endpoint, a, cfg.pods).await?));
    }
    let (cached, rendered) = cache_bytes(&endpoint).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_rss = pid.and_then(crate::procstat::rss_bytes);
    let mut storms = Vec::new();
    for kind in [Kind::List, Kind::Stream] {
        for &(accept, bytes) in &want {
            let s = Storm {
                kind,
                accept,
                concurrency: cfg.concurrency,
                protocol: cfg.protocol,
                streams_per_connection: cfg.streams_per_connection,
                want_bytes: Some(bytes),
                want_events: cfg.pods as u64,
                gzip: cfg.gzip,
            };
            tracing::info!(kind = kind.name(), accept = accept.name(), "storm");
            storms.push(storm::run(&endpoint, &s, pid).await?);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let etcd_storm = if cfg.etcd_lists > 0 {
        servers.stop_watchd();
        tracing::info!(lists = cfg.etcd_lists, "etcd direct storm");
        Some(
            etcd::storm(
                &servers.etcd_endpoints,
                "/registry/pods/",
                cfg.etcd_page,
                cfg.etcd_lists,
                cfg.pods as u64,
                servers.etcd_pid,
            )
            .await?,
        )
    } else {
        None
    };
    let cache = cached
        .filter(|&c| c > 0.0)
        .unwrap_or(filled.value_bytes as f64);
    let mut r = build(cfg, &storms, etcd_storm.as_ref(), cache, rendered, idle_rss);
    r.details = json!({
        "fill": filled,
        "cached_bytes": cached,
        "rendered_json_bytes": rendered,
        "idle_rss_bytes": idle_rss,
        "reference_list_bytes": want.iter().map(|(a, b)| (a.name(), b)).collect::<std::collections::BTreeMap<_, _>>(),
        "storms": storms,
        "etcd": etcd_storm,
    });
    r.machine = machine.end();
    r.elapsed_s = t.elapsed().as_secs_f64();
    Ok(r)
}

fn build(
    cfg: &S3Config,
    storms: &[StormResult],
    etcd: Option<&StormResult>,
    cache: f64,
    rendered: Option<f64>,
    idle_rss: Option<u64>,
) -> Report {
    let mut figures = vec![
        Figure::new(
            "cache size: watchd_cached_bytes (MiB)",
            Some(cache / 1048576.0),
        ),
        Figure::new(
            "rendered JSON kept after one JSON list (MiB)",
            rendered.map(|b| b / 1048576.0),
        ),
        Figure::new("idle watchd RSS (MiB)", idle_rss.map(mib)),
    ];
    let e_name = format!("etcd direct x{}", cfg.etcd_lists);
    let vs_etcd = |f: Figure, v: Option<f64>| match etcd {
        Some(_) => f.against(e_name.clone(), v),
        None => f,
    };
    let mut clean = etcd.is_none_or(|e| e.failed == 0);
    for s in storms {
        clean &= s.failed == 0;
        let what = match s.gzip {
            true => format!("{} {} gzip", s.kind, s.accept),
            false => format!("{} {}", s.kind, s.accept),
        };
        let growth = s.peak_rss_bytes.saturating_sub(s.idle_rss_bytes) as f64;
        let done = (s.lists - s.failed).max(1) as f64;
        figures.extend([
            Figure::new(
                format!("{what}: MiB sent per list"),
                Some(s.bytes as f64 / done / 1048576.0),
            ),
            Figure::new(
                format!("{what}: watchd CPU-ms per list"),
                s.server_cpu_s.map(|c| c * 1000.0 / done),
            ),
            vs_etcd(
                Figure::new(format!("{what}: lists /s"), Some(s.lists_per_sec)),
                etcd.map(|e| e.lists_per_sec),
            ),
            vs_etcd(
                Figure::new(format!("{what}: output GB/s"), Some(s.gb_per_sec)),
                etcd.map(|e| e.gb_per_sec),
            )
            .target(">= 1 GB/s", Some(s.gb_per_sec >= 1.0)),
            vs_etcd(
                Figure::new(format!("{what}: latency p99 (ms)"), s.latency_ms.p99),
                etcd.and_then(|e| e.latency_ms.p99),
            ),
            vs_etcd(
                Figure::new(
                    format!("{what}: peak RSS growth (MiB)"),
                    Some(growth / 1048576.0),
                ),
                etcd.map(|e| e.peak_rss_bytes.saturating_sub(e.idle_rss_bytes) as f64 / 1048576.0),
            ),
            Figure::new(
                format!("{what}: peak RSS growth, % of cache"),
                Some(growth / cache * 100.0),
            )
            .target("< 10 %", Some(growth < cache * 0.1)),
            Figure::new(format!("{what}: failed lists"), Some(s.failed as f64))
                .target("0", Some(s.failed == 0)),
        ]);
        if s.gzip {
            figures.extend([
                Figure::new(
                    format!("{what}: decoded / sent bytes"),
                    Some(s.decoded_bytes as f64 / (s.bytes.max(1)) as f64),
                ),
                Figure::new(format!("{what}: lists gzipped"), Some(s.gzipped as f64)),
            ]);
        }
    }
    let mut notes = vec![format!(
        "{} pods of ~{} B stored as {}, {} concurrent lists per storm over {}; a full list must have the reference list's length, a streaming list all {} pods before its end bookmark",
        cfg.pods, cfg.pod_bytes, cfg.storage.name(), cfg.concurrency, cfg.protocol, cfg.pods
    )];
    if let Some(e) = etcd {
        notes.push(format!(
            "etcd direct: {} concurrent reads of the pods prefix in pages of {} keys (bytes are keys + values), each on its own connection, after watchd was stopped; its RSS growth is etcd's",
            e.lists, cfg.etcd_page
        ));
        if let Some(err) = &e.first_error {
            notes.push(format!("etcd direct failures: {err}"));
        }
    }
    for s in storms.iter().filter(|s| s.failed > 0) {
        notes.push(format!(
            "{} {}: {} failed: {}",
            s.kind,
            s.accept,
            s.failed,
            s.first_error.as_deref().unwrap_or("")
        ));
    }
    Report {
        scenario: "s3".into(),
        title: format!(
            "S3 list storm: {} pods, {} concurrent lists",
            cfg.pods, cfg.concurrency
        ),
        settings: json!({
            "pods": cfg.pods,
            "pod_bytes": cfg.pod_bytes,
            "storage": cfg.storage.name(),
            "concurrency": cfg.concurrency,
            "accepts": cfg.accepts.iter().map(|a| a.name()).collect::<Vec<_>>(),
            "protocol": cfg.protocol.name(),
            "etcd_lists": cfg.etcd_lists,
            "etcd_page": cfg.etcd_page,
        }),
        figures,
        notes,
        clean,
        ..Report::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_are_counted_in_both_media_types() {
        let json = br#"{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[{"a":1},{"b":{"c":[1,2]}},{}]}"#;
        assert_eq!(count_items(json, Accept::Json), Ok(3));
        assert!(count_items(b"{}", Accept::Json).is_err());
        use watchd::codec::wire::put_len;
        let mut raw = Vec::new();
        put_len(&mut raw, 1, b"listmeta");
        for _ in 0..4 {
            put_len(&mut raw, 2, b"pod");
        }
        let mut tm = Vec::new();
        put_len(&mut tm, 1, b"v1");
        put_len(&mut tm, 2, b"PodList");
        let mut body = envelope::MAGIC.to_vec();
        put_len(&mut body, 1, &tm);
        put_len(&mut body, 2, &raw);
        assert_eq!(count_items(&body, Accept::Protobuf), Ok(4));
        assert!(count_items(b"{}", Accept::Protobuf).is_err());
    }
}
