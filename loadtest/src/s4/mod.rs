//! Scenario S4, reconnect storm: W established watchers of every ConfigMap
//! (10 000 by default, over HTTP/1.1 a socket each on both sides: checked
//! against both processes' open-files limits first) all drop their
//! connections at once and watch again from the last `resourceVersion`
//! each received, while a writer keeps updating ConfigMaps.
//!
//! Figures: the time until every watcher's new watch is open (target
//! < 2 s), the spread of the resume times, the time until every watcher has
//! the last write, the events lost or repeated across the resume (must be
//! 0), and the etcd requests the storm caused (target 0): etcd's own gRPC
//! counters (`grpc_server_started_total` and `grpc_server_msg_received_total`
//! per method, from its `/metrics`) over a window from the storm's start,
//! against a quiet window of the same length just before it; the writer's
//! `Put`s are in both and reported apart.

mod watcher;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::endpoint::Protocol;
use crate::s1::writer;
use crate::scenario::progress::Progress;
use crate::scenario::prom;
use crate::scenario::report::{latency_ms, Figure, MachineStart, Report};
use crate::scenario::servers::{check_fits, ServerSetup, Servers};
use crate::stats::Accounting;
use crate::transport::Conn;
use watcher::{Shared, Watcher, STOP};

/// Settings of an S4 run.
#[derive(Clone, Debug)]
pub struct S4Config {
    /// Watchers.
    pub watchers: usize,
    /// HTTP/1.1 (a connection per watcher) or HTTP/2.
    pub protocol: Protocol,
    /// With HTTP/2, watch streams per connection.
    pub streams_per_connection: usize,
    /// ConfigMaps rewritten by the writer.
    pub objects: usize,
    /// Writes per second, before, during and after the storm.
    pub writes_per_sec: f64,
    /// Length of the quiet window and of the storm window.
    pub window: Duration,
    /// Longest wait for every watcher to resume.
    pub resume_timeout: Duration,
    /// The servers.
    pub setup: ServerSetup,
}

impl Default for S4Config {
    fn default() -> Self {
        Self {
            watchers: 10_000,
            protocol: Protocol::Http1,
            streams_per_connection: 1000,
            objects: 100,
            writes_per_sec: 2.0,
            window: Duration::from_secs(4),
            resume_timeout: Duration::from_secs(30),
            setup: ServerSetup::default(),
        }
    }
}

async fn etcd_counters(endpoint: &str) -> Result<BTreeMap<String, f64>, String> {
    let s = prom::scrape(endpoint, Duration::from_secs(20)).await?;
    let mut out = BTreeMap::new();
    for (m, v) in prom::by_label(&s, "grpc_server_started_total", "grpc_method") {
        out.insert(format!("{m} started"), v);
    }
    for (m, v) in prom::by_label(&s, "grpc_server_msg_received_total", "grpc_method") {
        out.insert(format!("{m} messages received"), v);
    }
    Ok(out)
}

/// Requests in a delta that are not the writer's puts.
fn not_writes(d: &BTreeMap<String, f64>) -> f64 {
    d.iter()
        .filter(|(k, _)| !k.starts_with("Put "))
        .map(|(_, v)| v.max(0.0))
        .sum()
}

async fn h2_connections(servers: &Servers, cfg: &S4Config) -> Result<Vec<Conn>, String> {
    let n = cfg.watchers.div_ceil(cfg.streams_per_connection.max(1));
    let endpoint = servers.watchd_endpoint()?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(Conn::open(&endpoint, Protocol::Http2, watcher::OPEN_TIMEOUT).await?);
    }
    Ok(v)
}

/// Runs S4 and builds the report.
pub async fn run(cfg: &S4Config) -> Result<Report, String> {
    if cfg.watchers == 0 || cfg.watchers > 200_000 || cfg.objects == 0 || cfg.writes_per_sec <= 0.0
    {
        return Err(
            "--watchers (1..=200000), --objects and --writes-per-sec must be positive".into(),
        );
    }
    let t = Instant::now();
    let machine = MachineStart::now();
    let servers = {
        let mut s = Servers::etcd(&cfg.setup).await?;
        s.start_watchd(&cfg.setup).await?;
        s
    };
    if cfg.protocol == Protocol::Http1 {
        let n = cfg.watchers as u64;
        check_fits("watchd-loadtest", std::process::id(), n, 300)?;
        if let Some(pid) = servers.watchd_pid {
            check_fits("watchd", pid, n, 300)?;
        }
    }
    let client = servers.etcd_client().await?;
    let ns = writer::namespace_names(10);
    let mut slots = writer::slots(
        "/registry",
        &ns,
        cfg.objects,
        1024,
        crate::demo::Storage::Json,
    )?;
    let base = writer::prefill(&client, &mut slots).await?;
    let endpoint = servers.watchd_endpoint()?;
    let shared = Arc::new(Shared::new(cfg.watchers, base, 2));
    if cfg.protocol == Protocol::Http2 {
        *shared.h2.lock().map_err(|e| e.to_string())? = h2_connections(&servers, cfg).await?;
    }
    let (gen_tx, gen_rx) = watch::channel(0u32);
    let gate = Arc::new(Semaphore::new(64));
    let mut tasks = JoinSet::new();
    for idx in 0..cfg.watchers {
        tasks.spawn(watcher::run(Watcher {
            idx,
            endpoint: endpoint.clone(),
            protocol: cfg.protocol,
            base,
            shared: shared.clone(),
            generation: gen_rx.clone(),
            gate: gate.clone(),
        }));
    }
    let _progress = {
        let s = shared.clone();
        let n = cfg.watchers;
        Progress::every_second("s4", move || {
            format!(
                "watches open: {} of {n} first, {} of {n} resumed",
                s.opened(0),
                s.opened(1)
            )
        })
    };
    let open_deadline =
        Instant::now() + Duration::from_secs(60) + Duration::from_millis(cfg.watchers as u64);
    while shared.opened(0) < cfg.watchers as u64 {
        if let Some(done) = tasks.try_join_next() {
            let _ = gen_tx.send(STOP);
            let why = match done {
                Ok(o) => o.error.unwrap_or_else(|| "ended".into()),
                Err(e) => e.to_string(),
            };
            return Err(format!("a watcher ended while opening: {why}"));
        }
        if Instant::now() > open_deadline {
            let _ = gen_tx.send(STOP);
            return Err(format!(
                "only {} of {} watchers opened",
                shared.opened(0),
                cfg.watchers
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::info!(
        watchers = cfg.watchers,
        "all watching; writing, then the quiet window"
    );
    let total = cfg.window * 3 + Duration::from_secs(2);
    let writer = {
        let (c, rate) = (client.clone(), cfg.writes_per_sec);
        tokio::spawn(async move { writer::run(&c, slots, rate, total).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let etcd_url = &servers.etcd_endpoints[0];
    let q0 = etcd_counters(etcd_url).await?;
    tokio::time::sleep(cfg.window).await;
    let q1 = etcd_counters(etcd_url).await?;
    // The storm.
    let t0 = Instant::now();
    *shared.storm_start.lock().map_err(|e| e.to_string())? = Some(t0);
    if cfg.protocol == Protocol::Http2 {
        let fresh = h2_connections(&servers, cfg).await?;
        *shared.h2.lock().map_err(|e| e.to_string())? = fresh;
    }
    let _ = gen_tx.send(1);
    let resumed = loop {
        if shared.opened(1) >= cfg.watchers as u64 {
            break Some(t0.elapsed());
        }
        if t0.elapsed() > cfg.resume_timeout {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let window_end = t0 + cfg.window.max(resumed.unwrap_or_default());
    tokio::time::sleep_until(window_end.into()).await;
    let s1 = etcd_counters(etcd_url).await?;
    let storm_window = t0.elapsed();
    let writes = writer.await.map_err(|e| e.to_string())?;
    let last = writes.revisions.last().copied().unwrap_or(base);
    let drain = Instant::now() + Duration::from_secs(20);
    while shared.min_seen() < last && Instant::now() < drain {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let caught_up_after = shared.min_seen() >= last;
    let _ = gen_tx.send(STOP);
    let mut acc = Accounting::default();
    let (mut failed, mut first_error) = (0usize, None);
    let mut reported = 0;
    let collect = async {
        while let Some(r) = tasks.join_next().await {
            reported += 1;
            match r {
                Ok(o) => {
                    acc.add(&o.tally.check(&writes.revisions));
                    if let Some(e) = o.error {
                        failed += 1;
                        first_error.get_or_insert(e);
                    }
                }
                Err(e) => {
                    failed += 1;
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
    };
    if tokio::time::timeout(Duration::from_secs(30), collect)
        .await
        .is_err()
    {
        tasks.abort_all();
    }
    acc.missed += (cfg.watchers - reported.min(cfg.watchers)) as u64 * writes.ok;
    let quiet = prom::delta(&q0, &q1);
    let storm = prom::delta(&q1, &s1);
    let caused = not_writes(&storm)
        - not_writes(&quiet) * storm_window.as_secs_f64() / cfg.window.as_secs_f64();
    let resume = latency_ms(&shared.resume_us);
    let errors = shared
        .error_events
        .load(std::sync::atomic::Ordering::Relaxed);
    let clean = acc.missed + acc.duplicates + acc.out_of_order + acc.unexpected == 0
        && failed == 0
        && errors == 0
        && resumed.is_some()
        && caught_up_after;
    let n = |x: u64| Some(x as f64);
    let secs = resumed.map(|d| d.as_secs_f64());
    let figures = vec![
        Figure::new("time until all resumed (s)", secs).target("< 2 s", secs.map(|s| s < 2.0)),
        Figure::new("resume time p50 (ms)", resume.p50),
        Figure::new("resume time p99 (ms)", resume.p99),
        Figure::new("watchers resumed", n(shared.opened(1))),
        Figure::new(
            "etcd requests in the storm window (not writes)",
            Some(not_writes(&storm)),
        )
        .against("quiet window", Some(not_writes(&quiet))),
        Figure::new("etcd requests caused by the storm", Some(caused.max(0.0)))
            .target("0", Some(caused < 0.5)),
        Figure::new(
            "writer puts in the storm window",
            storm.get("Put started").copied(),
        )
        .against("quiet window", quiet.get("Put started").copied()),
        Figure::new("lost (missed) events", n(acc.missed)).target("0", Some(acc.missed == 0)),
        Figure::new(
            "duplicate or reordered events",
            n(acc.duplicates + acc.out_of_order + acc.unexpected),
        )
        .target(
            "0",
            Some(acc.duplicates + acc.out_of_order + acc.unexpected == 0),
        ),
        Figure::new("ERROR events", n(errors)),
        Figure::new("watchers failed", n(failed as u64)),
    ];
    let mut notes = vec![format!(
        "{} watchers over {} ({}); a writer puts {} ConfigMap updates/s throughout; etcd counters read from its /metrics: a quiet window of {:.1} s, then {:.1} s from the storm's start",
        cfg.watchers,
        cfg.protocol,
        match cfg.protocol {
            Protocol::Http1 => format!("{} sockets per side, open-files limit checked", cfg.watchers),
            Protocol::Http2 => format!("{} connections of up to {} streams, replaced by new ones at the storm", cfg.watchers.div_ceil(cfg.streams_per_connection), cfg.streams_per_connection),
        },
        cfg.writes_per_sec,
        cfg.window.as_secs_f64(),
        storm_window.as_secs_f64()
    )];
    if let Some(e) = &first_error {
        notes.push(format!("first watcher failure: {e}"));
    }
    let r = Report {
        scenario: "s4".into(),
        title: format!(
            "S4 reconnect storm: {} watchers drop and resume at once",
            cfg.watchers
        ),
        settings: json!({
            "watchers": cfg.watchers,
            "protocol": cfg.protocol.name(),
            "streams_per_connection": cfg.streams_per_connection,
            "objects": cfg.objects,
            "writes_per_sec": cfg.writes_per_sec,
            "window_s": cfg.window.as_secs_f64(),
        }),
        figures,
        notes,
        clean,
        details: json!({
            "resumed_after_s": secs,
            "resume_ms": resume,
            "caught_up_after_storm": caught_up_after,
            "etcd_quiet_window": quiet,
            "etcd_storm_window": storm,
            "storm_window_s": storm_window.as_secs_f64(),
            "accounting": acc,
            "writes": writes,
            "first_error": first_error,
        }),
        machine: machine.end(),
        elapsed_s: t.elapsed().as_secs_f64(),
    };
    drop(servers);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_puts_are_not_counted_as_caused() {
        let d: BTreeMap<String, f64> = [
            ("Put started".to_string(), 80.0),
            ("Put messages received".to_string(), 80.0),
            ("Range started".to_string(), 2.0),
            ("Watch messages received".to_string(), 1.0),
            ("Watch started".to_string(), -1.0),
        ]
        .into_iter()
        .collect();
        assert_eq!(not_writes(&d), 3.0);
    }
}
