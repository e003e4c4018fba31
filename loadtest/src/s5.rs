//! Scenario S5, idle watchers: as many watches as fit, spread over
//! namespaces (`/api/v1/namespaces/<ns>/configmaps?watch=1`), opened and
//! left idle; the figure is the server's RSS per watcher, (RSS with the
//! watchers − RSS before) / watchers.
//!
//! The brief asks for 100 000. The machine's open-files limit (20 000, hard)
//! bounds HTTP/1.1 to a socket per watcher on each side, so the main phase
//! uses HTTP/2 with up to 1 000 streams per connection (watchd's limit:
//! 100 connections for 100 000 watchers); a second phase opens the largest
//! HTTP/1.1 count that fits both processes' limits. The baseline is etcd
//! direct with the same number of idle gRPC watches (1 000 streams per
//! connection). Each phase has fresh servers; "before" is read after one
//! list and one short watch, so lazily built state is already there.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::endpoint::Protocol;
use crate::http::Accept;
use crate::procstat;
use crate::s1::watch::{self, Source};
use crate::s1::writer;
use crate::scenario::progress::{mib, Progress};
use crate::scenario::prom;
use crate::scenario::report::{Figure, MachineStart, Report};
use crate::scenario::servers::{open_files, open_files_limit, ServerSetup, Servers};
use crate::transport;

/// Settings of an S5 run.
#[derive(Clone, Debug)]
pub struct S5Config {
    /// Watchers of the HTTP/2 phase.
    pub watchers: usize,
    /// Streams per HTTP/2 connection (watchd allows 1 000).
    pub streams_per_connection: usize,
    /// Watchers of the HTTP/1.1 phase (0: as many as fit; none if that is 0).
    pub http1_watchers: Option<usize>,
    /// Watchers of the etcd direct phase (0: skip it).
    pub etcd_watchers: usize,
    /// Namespaces the watchers are spread over (one ConfigMap each).
    pub namespaces: usize,
    /// Seconds to wait with the watchers open before reading the RSS.
    pub settle: Duration,
    /// The servers.
    pub setup: ServerSetup,
}

impl Default for S5Config {
    fn default() -> Self {
        Self {
            watchers: 100_000,
            streams_per_connection: 1000,
            http1_watchers: None,
            etcd_watchers: 100_000,
            namespaces: 100,
            settle: Duration::from_secs(3),
            setup: ServerSetup::default(),
        }
    }
}

/// One phase's readings.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Phase {
    /// `watchd http2`, `watchd http1`, `etcd direct`.
    pub label: String,
    /// Watchers opened.
    pub watchers: usize,
    /// Connections they use.
    pub connections: usize,
    /// Server RSS before, bytes.
    pub rss_before: u64,
    /// Server RSS with the watchers open, bytes.
    pub rss_after: u64,
    /// (after − before) / watchers, bytes.
    pub rss_per_watcher: f64,
    /// Watches the server counts (`watchd_watchers`), when it exports it.
    pub server_counted: Option<f64>,
    /// Seconds to open them all.
    pub open_s: f64,
    /// Generator RSS growth per watcher, bytes.
    pub generator_rss_per_watcher: f64,
}

/// The HTTP/1.1 watchers that fit: the smaller spare descriptor count of
/// this process and watchd, less a margin.
pub fn http1_fit(watchd_pid: Option<u32>) -> usize {
    let spare = |pid: u32| {
        open_files_limit(pid)
            .zip(open_files(pid))
            .map(|(l, o)| l.saturating_sub(o))
    };
    let me = spare(std::process::id()).unwrap_or(1024);
    let server = watchd_pid.and_then(spare).unwrap_or(me);
    me.min(server).saturating_sub(500) as usize
}

async fn phase(
    cfg: &S5Config,
    label: &str,
    protocol: Option<Protocol>,
    count: usize,
) -> Result<Phase, String> {
    let mut servers = Servers::etcd(&cfg.setup).await?;
    let client = servers.etcd_client().await?;
    let ns: Vec<String> = (0..cfg.namespaces)
        .map(|i| format!("idle-ns-{i}"))
        .collect();
    let mut slots = writer::slots(
        "/registry",
        &ns,
        cfg.namespaces,
        512,
        crate::demo::Storage::Json,
    )?;
    let base = writer::prefill(&client, &mut slots).await?;
    let (source, pid) = match protocol {
        Some(p) => {
            servers.start_watchd(&cfg.setup).await?;
            let endpoint = servers.watchd_endpoint()?;
            // Warm up: a list and one short watch.
            transport::get_once(
                &endpoint,
                Protocol::Http1,
                "/api/v1/configmaps",
                Duration::from_secs(10),
            )
            .await?;
            let warm = Source::Http {
                endpoint: endpoint.clone(),
                accept: Accept::Json,
                protocol: p,
                streams_per_connection: cfg.streams_per_connection,
            };
            watch::open(&warm, 1, base)
                .await?
                .stop(Duration::from_secs(5))
                .await;
            (warm, servers.watchd_pid)
        }
        None => {
            let source = Source::Etcd {
                endpoints: servers.etcd_endpoints.clone(),
                connections: count.div_ceil(cfg.streams_per_connection),
                prefix: "/registry/configmaps/".into(),
            };
            (source, servers.etcd_pid)
        }
    };
    let pid = pid.ok_or("no server PID: give --watchd-pid / --etcd-pid")?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = procstat::rss_bytes(pid).unwrap_or(0);
    let own_before = procstat::rss_bytes(std::process::id()).unwrap_or(0);
    let t = Instant::now();
    let opening = {
        let label = label.to_string();
        Progress::every_second(format!("s5 {label}"), move || {
            format!(
                "opening {count} watchers, server RSS {:.0} MiB",
                mib(procstat::rss_bytes(pid).unwrap_or(0))
            )
        })
    };
    let n = ns.len();
    let watchers = watch::open_paths(&source, count, base, |i| {
        format!("/api/v1/namespaces/{}/configmaps?watch=1", ns[i % n])
    })
    .await?;
    let open_s = t.elapsed().as_secs_f64();
    drop(opening);
    tokio::time::sleep(cfg.settle).await;
    let rss_after = procstat::rss_bytes(pid).unwrap_or(0);
    let own_after = procstat::rss_bytes(std::process::id()).unwrap_or(0);
    let server_counted = match (&source, &servers.endpoint) {
        (Source::Http { .. }, Some(e)) => prom::scrape_endpoint(e, Duration::from_secs(10))
            .await
            .ok()
            .map(|s| prom::sum(&s, "watchd_watchers", &[])),
        _ => None,
    };
    let connections = match (&source, protocol) {
        (Source::Etcd { connections, .. }, _) => *connections,
        (_, Some(Protocol::Http2)) => count.div_ceil(cfg.streams_per_connection),
        _ => count,
    };
    watchers.stop(Duration::from_secs(30)).await;
    let per = |a: u64, b: u64| (a as f64 - b as f64) / count.max(1) as f64;
    Ok(Phase {
        label: label.into(),
        watchers: count,
        connections,
        rss_before,
        rss_after,
        rss_per_watcher: per(rss_after, rss_before),
        server_counted,
        open_s,
        generator_rss_per_watcher: per(own_after, own_before),
    })
}

/// Runs S5 and builds the report.
pub async fn run(cfg: &S5Config) -> Result<Report, String> {
    if cfg.watchers == 0 || cfg.watchers > 1_000_000 || cfg.namespaces == 0 {
        return Err("--watchers must be 1..=1000000 and --namespaces positive".into());
    }
    if !(1..=1000).contains(&cfg.streams_per_connection) {
        return Err("--streams-per-connection must be 1..=1000 (watchd's limit)".into());
    }
    let t = Instant::now();
    let machine = MachineStart::now();
    let h2 = phase(cfg, "watchd http2", Some(Protocol::Http2), cfg.watchers).await?;
    let fit = http1_fit(cfg.setup.watchd_pid);
    let h1_count = cfg.http1_watchers.unwrap_or(fit);
    let h1 = if h1_count > 0 {
        Some(phase(cfg, "watchd http1", Some(Protocol::Http1), h1_count).await?)
    } else {
        None
    };
    let etcd = if cfg.etcd_watchers > 0 {
        Some(phase(cfg, "etcd direct", None, cfg.etcd_watchers).await?)
    } else {
        None
    };
    let per_kib = |p: &Phase| Some(p.rss_per_watcher / 1024.0);
    let mut figures = vec![Figure::new(
        format!("watchd RSS per idle watcher, HTTP/2, {} (KiB)", h2.watchers),
        per_kib(&h2),
    )
    .target("< 4 KiB", Some(h2.rss_per_watcher < 4096.0))];
    if let Some(e) = &etcd {
        let last = figures
            .pop()
            .map(|f| f.against(format!("etcd direct x{}", e.watchers), per_kib(e)));
        figures.extend(last);
    }
    figures.push(
        Figure::new(
            "watchd RSS with the HTTP/2 watchers (MiB)",
            Some(mib(h2.rss_after)),
        )
        .against("before", Some(mib(h2.rss_before))),
    );
    figures.push(Figure::new(
        "watches watchd counts (watchd_watchers)",
        h2.server_counted,
    ));
    figures.push(Figure::new(
        "seconds to open the HTTP/2 watchers",
        Some(h2.open_s),
    ));
    if let Some(h1) = &h1 {
        figures.push(
            Figure::new(
                format!(
                    "watchd RSS per idle watcher, HTTP/1.1, {} (KiB)",
                    h1.watchers
                ),
                per_kib(h1),
            )
            .target("< 4 KiB", Some(h1.rss_per_watcher < 4096.0)),
        );
        figures.push(Figure::new(
            "seconds to open the HTTP/1.1 watchers",
            Some(h1.open_s),
        ));
    }
    if let Some(e) = &etcd {
        figures.push(
            Figure::new("etcd RSS with its watchers (MiB)", Some(mib(e.rss_after)))
                .against("before", Some(mib(e.rss_before))),
        );
    }
    figures.push(Figure::new(
        "generator RSS per watcher, HTTP/2 (KiB)",
        Some(h2.generator_rss_per_watcher / 1024.0),
    ));
    let notes = vec![
        format!(
            "open-files limit: 20 000 per process (hard), so HTTP/1.1 (a socket per watcher on each side) is limited to {} here; the HTTP/2 phase multiplexes {} watchers over {} connections",
            fit, h2.watchers, h2.connections
        ),
        format!("watchers spread over {} namespaces, each watching its namespace's ConfigMaps; RSS is VmRSS after {} s with them open", cfg.namespaces, cfg.settle.as_secs()),
    ];
    let clean = h2.server_counted.is_none_or(|c| c as usize >= h2.watchers);
    Ok(Report {
        scenario: "s5".into(),
        title: format!(
            "S5 idle watchers: {} over HTTP/2, {} over HTTP/1.1",
            h2.watchers,
            h1.as_ref().map_or(0, |p| p.watchers)
        ),
        settings: json!({
            "watchers": cfg.watchers,
            "streams_per_connection": cfg.streams_per_connection,
            "http1_watchers": h1.as_ref().map(|p| p.watchers),
            "etcd_watchers": cfg.etcd_watchers,
            "namespaces": cfg.namespaces,
            "settle_s": cfg.settle.as_secs_f64(),
        }),
        figures,
        notes,
        clean,
        details: json!({ "http2": h2, "http1": h1, "etcd": etcd }),
        machine: machine.end(),
        elapsed_s: t.elapsed().as_secs_f64(),
    })
}
