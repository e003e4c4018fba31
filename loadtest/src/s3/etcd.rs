//! The etcd direct baseline of S3: the same number of concurrent full
//! reads of the pods prefix from etcd, each paged (`limit` keys a range, as
//! kube-apiserver reads etcd in pages; one unpaged 100 MB range per client
//! would need etcd to hold every response whole at once), each on its own
//! gRPC connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};
use tokio::task::JoinSet;

use super::storm::StormResult;
use crate::launch;
use crate::scenario::progress::RssSampler;
use crate::scenario::report::latency_ms;
use crate::scenario::servers::CpuMark;
use crate::stats::Histogram;

/// Largest etcd response accepted by the baseline's client.
const MAX_MESSAGE: usize = 256 << 20;
/// Longest one full read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Reads every key under `prefix` in pages of `page`, at the first page's revision, with
/// values or `keys_only`: (keys, bytes of keys and values received).
pub(crate) async fn read_all(
    client: Client,
    prefix: &str,
    page: i64,
    keys_only: bool,
) -> Result<(u64, u64), String> {
    let mut kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE);
    let end = {
        let mut e = prefix.as_bytes().to_vec();
        if let Some(last) = e.last_mut() {
            *last += 1;
        }
        e
    };
    let mut start = prefix.as_bytes().to_vec();
    let (mut keys, mut bytes) = (0u64, 0u64);
    let mut revision = 0;
    loop {
        let mut opts = GetOptions::new().with_range(end.clone()).with_limit(page);
        if keys_only {
            opts = opts.with_keys_only();
        }
        if revision > 0 {
            opts = opts.with_revision(revision);
        }
        let resp = kv
            .get(start.clone(), Some(opts))
            .await
            .map_err(|e| format!("etcd range: {e}"))?;
        revision = resp.header().map_or(revision, |h| h.revision());
        for kv in resp.kvs() {
            keys += 1;
            bytes += (kv.key().len() + kv.value().len()) as u64;
        }
        match resp.kvs().last() {
            Some(last) if resp.more() => {
                start = last.key().to_vec();
                start.push(0);
            }
            _ => return Ok((keys, bytes)),
        }
    }
}

/// `concurrency` paged reads of `prefix` at once; each must see `want_keys`.
pub async fn storm(
    endpoints: &[String],
    prefix: &str,
    page: i64,
    concurrency: usize,
    want_keys: u64,
    pid: Option<u32>,
) -> Result<StormResult, String> {
    let mut clients = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        clients.push(
            Client::connect(endpoints, Some(launch::etcd_options()))
                .await
                .map_err(|e| format!("etcd connect: {e}"))?,
        );
    }
    let idle = pid.and_then(crate::procstat::rss_bytes).unwrap_or(0);
    let sampler = pid.map(|p| RssSampler::start(p, Duration::from_millis(20)));
    let start = CpuMark::now(None, pid);
    let latency = Arc::new(Histogram::new());
    let t = Instant::now();
    let mut tasks = JoinSet::new();
    for client in clients {
        let (prefix, lat) = (prefix.to_string(), latency.clone());
        tasks.spawn(async move {
            let t = Instant::now();
            let r = tokio::time::timeout(READ_TIMEOUT, read_all(client, &prefix, page, false))
                .await
                .unwrap_or_else(|_| Err(format!("not done after {READ_TIMEOUT:?}")))?;
            lat.record(t.elapsed().as_micros() as u64);
            if r.0 != want_keys {
                return Err(format!("read {} keys, expected {want_keys}", r.0));
            }
            Ok(r.1)
        });
    }
    let mut out = StormResult {
        kind: format!("etcd range, pages of {page}"),
        accept: "etcd protobuf".into(),
        lists: concurrency,
        idle_rss_bytes: idle,
        ..StormResult::default()
    };
    while let Some(r) = tasks.join_next().await {
        match r.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok(b) => out.bytes += b,
            Err(e) => {
                out.failed += 1;
                out.first_error.get_or_insert(e);
            }
        }
    }
    out.wall_s = t.elapsed().as_secs_f64();
    let cpu = start.until(&CpuMark::now(None, pid));
    out.server_cpu_s = cpu.etcd_s;
    out.generator_cpu_s = cpu.generator_s;
    out.peak_rss_bytes = match (sampler, pid) {
        (Some(s), Some(p)) => s.stop(p),
        _ => 0,
    };
    out.lists_per_sec = (out.lists - out.failed) as f64 / out.wall_s.max(1e-9);
    out.gb_per_sec = out.bytes as f64 / 1e9 / out.wall_s.max(1e-9);
    out.latency_ms = latency_ms(&latency);
    Ok(out)
}
