//! The `read-latency` scenario: what a consistent list costs over a list
//! served from the cache at once, on an idle cache.
//!
//! Starts etcd and watchd (unless given), fills K ConfigMaps, then makes N
//! rounds of three requests, rotating their order: `GET /api/v1/configmaps`
//! (resourceVersion unset: watchd reads etcd's revision with one
//! linearizable range, then serves from the cache), `GET
//! /api/v1/configmaps?resourceVersion=0` (from the cache at once), both over
//! one keep-alive connection, and, as the reference for what the consistent
//! read must add, the same linearizable count-only etcd range watchd makes,
//! sent from this process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};
use serde::Serialize;

use crate::demo::Storage;
use crate::endpoint::{Endpoint, Protocol};
use crate::http;
use crate::launch;
use crate::procstat;
use crate::s1::writer;
use crate::stats::{median, percentile};
use crate::transport::Conn;

/// Settings of a read-latency run.
#[derive(Clone, Debug)]
pub struct ReadLatencyConfig {
    /// Pairs of lists.
    pub requests: usize,
    /// ConfigMaps in the cache.
    pub objects: usize,
    /// Approximate JSON size of each.
    pub object_bytes: usize,
    /// Unmeasured pairs first.
    pub warmup: usize,
    /// Use this etcd instead of starting one.
    pub etcd_servers: Option<Vec<String>>,
    /// Use this watchd instead of starting one.
    pub watchd_url: Option<String>,
    /// The watchd binary to start.
    pub watchd_bin: PathBuf,
    /// Where temp data dirs go.
    pub temp_root: PathBuf,
}

impl ReadLatencyConfig {
    /// Defaults for `requests` pairs over `objects` ConfigMaps.
    pub fn new(requests: usize, objects: usize) -> Self {
        Self {
            requests,
            objects,
            object_bytes: 1024,
            warmup: 20,
            etcd_servers: None,
            watchd_url: None,
            watchd_bin: launch::default_watchd_bin(),
            temp_root: std::env::temp_dir(),
        }
    }
}

/// Latency figures of one kind of request, milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timing {
    /// What was timed.
    pub what: String,
    /// Requests timed.
    pub samples: usize,
    /// Median.
    pub p50: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
}

impl Timing {
    /// Figures of `samples_ms` (any order).
    pub fn of(what: &str, samples_ms: &[f64]) -> Self {
        let mut v = samples_ms.to_vec();
        v.sort_by(f64::total_cmp);
        Self {
            what: what.to_string(),
            samples: v.len(),
            p50: percentile(&v, 0.5),
            p99: percentile(&v, 0.99),
            mean: (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64),
            max: v.last().copied(),
        }
    }
}

/// The result of a read-latency run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReadLatencyResult {
    /// Always `read-latency`.
    pub scenario: String,
    /// ConfigMaps listed.
    pub objects: usize,
    /// Bytes of one list response.
    pub list_bytes: usize,
    /// `resourceVersion` unset.
    pub consistent: Timing,
    /// `resourceVersion=0`.
    pub cached: Timing,
    /// etcd's linearizable count-only range, timed from here.
    pub etcd_linearizable_range: Timing,
    /// consistent p50 − cached p50, ms.
    pub added_p50_ms: Option<f64>,
    /// consistent p99 − cached p99, ms.
    pub added_p99_ms: Option<f64>,
    /// Median of the per-pair differences, ms.
    pub added_paired_median_ms: Option<f64>,
    /// 1-minute load average before the run.
    pub loadavg_1m_start: Option<f64>,
}

async fn timed_list(conn: &mut Conn, path: &str) -> Result<(f64, usize), String> {
    let t = Instant::now();
    let (status, body) = conn.get_body(path, Duration::from_secs(10)).await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if status != 200 {
        return Err(format!(
            "GET {path}: {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok((ms, body.len()))
}

/// Runs the scenario.
pub async fn run(cfg: &ReadLatencyConfig) -> Result<ReadLatencyResult, String> {
    if cfg.requests == 0 || cfg.requests > 1_000_000 || cfg.objects > 1_000_000 {
        return Err("--requests must be 1..=1000000 and --objects at most 1000000".into());
    }
    let loadavg = procstat::loadavg_1m();
    let etcd = match &cfg.etcd_servers {
        Some(_) => None,
        None => Some(launch::start_etcd(&cfg.temp_root).await?),
    };
    let endpoints = match (&cfg.etcd_servers, &etcd) {
        (Some(eps), _) => eps.clone(),
        (None, Some(e)) => vec![e.endpoint.clone()],
        (None, None) => return Err("no etcd".into()),
    };
    let client = Client::connect(&endpoints, Some(launch::etcd_options()))
        .await
        .map_err(|e| format!("etcd connect: {e}"))?;
    let namespaces = writer::namespace_names(10);
    let mut slots = writer::slots(
        "/registry",
        &namespaces,
        cfg.objects,
        cfg.object_bytes,
        Storage::Json,
    )?;
    writer::prefill(&client, &mut slots).await?;
    let watchd = match &cfg.watchd_url {
        Some(_) => None,
        None => Some(launch::start_watchd(&cfg.watchd_bin, &endpoints[0], &cfg.temp_root).await?),
    };
    let addr = match (&cfg.watchd_url, &watchd) {
        (Some(url), _) => http::parse_base_url(url)?,
        (None, Some(w)) => w.addr,
        (None, None) => return Err("no watchd".into()),
    };
    let endpoint = Arc::new(Endpoint::plain(addr));
    let mut conn = Conn::open(&endpoint, Protocol::Http1, Duration::from_secs(5)).await?;
    let mut kv = client.kv_client();
    let opts = GetOptions::new().with_count_only().with_limit(1);
    let paths = ["/api/v1/configmaps", "/api/v1/configmaps?resourceVersion=0"];
    // samples[0]: consistent, [1]: cached, [2]: etcd range.
    let mut samples: [Vec<f64>; 3] = Default::default();
    let mut diffs = Vec::new();
    let mut list_bytes = 0;
    for i in 0..cfg.warmup + cfg.requests {
        let mut ms = [0.0; 3];
        // Rotate the order so that no kind always follows another.
        for k in 0..3 {
            let which = (i + k) % 3;
            if which == 2 {
                let t = Instant::now();
                tokio::time::timeout(
                    Duration::from_secs(5),
                    kv.get(vec![0u8], Some(opts.clone())),
                )
                .await
                .map_err(|_| "etcd range timed out".to_string())?
                .map_err(|e| format!("etcd range: {e}"))?;
                ms[2] = t.elapsed().as_secs_f64() * 1000.0;
            } else {
                let (t, bytes) = timed_list(&mut conn, paths[which]).await?;
                ms[which] = t;
                list_bytes = list_bytes.max(bytes);
            }
        }
        if i >= cfg.warmup {
            for (s, v) in samples.iter_mut().zip(ms) {
                s.push(v);
            }
            diffs.push(ms[0] - ms[1]);
        }
    }
    drop(watchd);
    drop(etcd);
    let consistent = Timing::of("list, resourceVersion unset (consistent)", &samples[0]);
    let cached = Timing::of("list, resourceVersion=0 (cache)", &samples[1]);
    let sub = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
    Ok(ReadLatencyResult {
        scenario: "read-latency".into(),
        objects: cfg.objects,
        list_bytes,
        added_p50_ms: sub(consistent.p50, cached.p50),
        added_p99_ms: sub(consistent.p99, cached.p99),
        added_paired_median_ms: median(&diffs),
        consistent,
        cached,
        etcd_linearizable_range: Timing::of("etcd linearizable count-only range", &samples[2]),
        loadavg_1m_start: loadavg,
    })
}

/// The human-readable table.
pub fn table(r: &ReadLatencyResult) -> String {
    use crate::s1::report::fmt_num;
    let mut out = format!(
        "read-latency: {} objects, {} bytes per list, {} pairs (load {} at start)\n  {:<44} {:>9} {:>9} {:>9} {:>9}\n",
        r.objects,
        r.list_bytes,
        r.consistent.samples,
        fmt_num(r.loadavg_1m_start),
        "request (ms)",
        "p50",
        "p99",
        "mean",
        "max"
    );
    for t in [&r.consistent, &r.cached, &r.etcd_linearizable_range] {
        out.push_str(&format!(
            "  {:<44} {:>9} {:>9} {:>9} {:>9}\n",
            t.what,
            fmt_num(t.p50),
            fmt_num(t.p99),
            fmt_num(t.mean),
            fmt_num(t.max)
        ));
    }
    out.push_str(&format!(
        "  added by a consistent list: p50 {} ms, p99 {} ms, paired median {} ms\n",
        fmt_num(r.added_p50_ms),
        fmt_num(r.added_p99_ms),
        fmt_num(r.added_paired_median_ms)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_and_table() {
        let t = Timing::of("x", &[3.0, 1.0, 2.0, 4.0]);
        assert_eq!(
            (t.samples, t.p50, t.p99, t.max),
            (4, Some(2.0), Some(4.0), Some(4.0))
        );
        assert_eq!(t.mean, Some(2.5));
        let empty = Timing::of("y", &[]);
        assert_eq!((empty.p50, empty.mean), (None, None));
        let r = ReadLatencyResult {
            consistent: Timing::of("c", &[2.0]),
            cached: Timing::of("r", &[0.5]),
            added_p50_ms: Some(1.5),
            ..ReadLatencyResult::default()
        };
        assert!(table(&r).contains("p50 1.50 ms"), "{}", table(&r));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["consistent"]["p50"], 2.0);
        assert!(v.get("added_paired_median_ms").is_some());
    }
}
