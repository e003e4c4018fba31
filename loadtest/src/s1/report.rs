//! The S1 result (written as JSON) and its human-readable tables: one run,
//! or watchd beside etcd with the ratio (several sides: [`super::compare`]).

use serde::{Deserialize, Serialize};

use super::compare::Ratio;
use super::writer::WriteStats;
use crate::stats::{Accounting, Histogram};

/// Delivery latency figures, milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Events with a send stamp.
    pub samples: u64,
    /// Median.
    pub p50: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
    /// The distribution: `[latency ms, share of events at or below it]` at
    /// the quantiles of [`crate::stats::CDF_QUANTILES`] (for the plots).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdf: Vec<[f64; 2]>,
}

impl Latency {
    /// The figures of a histogram of microseconds.
    pub fn from_histogram(h: &Histogram) -> Self {
        let to_ms = |us: Option<u64>| us.map(|u| u as f64 / 1000.0);
        let n = h.count();
        Self {
            samples: n,
            p50: to_ms(h.percentile(0.50)),
            p99: to_ms(h.percentile(0.99)),
            max: to_ms((n > 0).then(|| h.max())),
            mean: (n > 0).then(|| h.mean() / 1000.0),
            cdf: h
                .cdf()
                .into_iter()
                .map(|(q, us)| [us as f64 / 1000.0, q])
                .collect(),
        }
    }
}

/// CPU and memory of one process over the measured window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProcFigures {
    /// What it is (`watchd`, `etcd`, `generator`).
    pub process: String,
    /// Its PID, when known.
    pub pid: Option<u32>,
    /// CPU seconds (user + system) used in the window.
    pub cpu_s: Option<f64>,
    /// Of which in user space.
    #[serde(default)]
    pub user_s: Option<f64>,
    /// CPU seconds per million deliveries.
    pub cpu_s_per_million: Option<f64>,
    /// Average cores used in the window.
    pub cores: Option<f64>,
    /// Peak resident set size (VmHWM), bytes.
    pub peak_rss_bytes: Option<u64>,
}

impl ProcFigures {
    /// The user-space share of the CPU used (0..=1).
    pub fn user_share(&self) -> Option<f64> {
        let (user, all) = self.user_s.zip(self.cpu_s)?;
        (all > 0.0).then(|| user / all)
    }
}

/// How the watch streams were carried.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Multiplexing {
    /// `http1`, `http2` (watchd or another HTTP target), `grpc-watchd`
    /// (watchd's own gRPC API) or `grpc` (etcd direct).
    pub protocol: String,
    /// Connections the watch streams were spread over.
    pub connections: usize,
    /// The most watch streams on one connection (1 for HTTP/1.1).
    pub streams_per_connection: usize,
    /// Whether the connections were TLS.
    pub tls: bool,
}

impl std::fmt::Display for Multiplexing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match (self.protocol.as_str(), self.tls) {
            ("http1", false) => "HTTP/1.1",
            ("http1", true) => "HTTP/1.1 over TLS",
            ("http2", false) => "HTTP/2 (h2c)",
            ("http2", true) => "HTTP/2 over TLS",
            ("grpc", _) => "etcd gRPC",
            ("grpc-watchd", false) => "watchd gRPC (h2c)",
            ("grpc-watchd", true) => "watchd gRPC over TLS",
            ("informer", _) => "informer (HTTP/2 over TLS, protobuf)",
            (other, _) => other,
        };
        let s = |n: usize| if n == 1 { "" } else { "s" };
        write!(
            f,
            "{name}, {} connection{} x {} stream{}",
            self.connections,
            s(self.connections),
            if self.streams_per_connection > 1 {
                format!("<={}", self.streams_per_connection)
            } else {
                self.streams_per_connection.to_string()
            },
            s(self.streams_per_connection)
        )
    }
}

/// The tokio worker threads of the generator and of the watchd a run
/// started, so that results of machines of different sizes are told apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokioWorkers {
    /// This generator's runtime's worker threads.
    pub generator: usize,
    /// The watchd the run started: `TOKIO_WORKER_THREADS` when this process
    /// has it (watchd inherits it), else the CPUs available to it, which is
    /// what tokio starts (watchd builds its runtime with tokio's defaults
    /// and neither logs the count nor has a flag for it). `None` when the
    /// run started no watchd.
    pub watchd: Option<usize>,
    /// How the watchd figure is known (`TOKIO_WORKER_THREADS`, or `tokio
    /// default (available CPUs)`).
    pub watchd_source: Option<String>,
}

impl TokioWorkers {
    /// The generator's workers now, and watchd's if the run started one.
    pub fn now(started_watchd: bool) -> Self {
        let (watchd, source) = if started_watchd {
            let (n, source) = crate::procstat::default_tokio_workers();
            (Some(n), Some(source.to_string()))
        } else {
            (None, None)
        };
        Self {
            generator: crate::procstat::tokio_workers(),
            watchd,
            watchd_source: source,
        }
    }

    /// `tokio workers: generator 2, watchd 2 (tokio default (available CPUs))`.
    pub fn text(&self) -> String {
        let mut s = format!("tokio workers: generator {}", self.generator);
        if let Some(w) = self.watchd {
            s.push_str(&format!(
                ", watchd {w} ({})",
                self.watchd_source.as_deref().unwrap_or("?")
            ));
        }
        s
    }
}

/// The tokio workers of a set of runs, for a table's heading: those of the
/// first run that started a watchd, else of the first run (`None` without
/// runs).
pub fn workers_line<'a>(runs: impl IntoIterator<Item = &'a S1Result>) -> Option<String> {
    let runs: Vec<&S1Result> = runs.into_iter().collect();
    runs.iter()
        .find(|r| r.machine.tokio_workers.watchd.is_some())
        .or(runs.first())
        .map(|r| r.machine.tokio_workers.text())
}

/// The machine during the window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    /// Online CPUs.
    pub cpus: usize,
    /// Busy share of all CPUs in the window (0..=1).
    pub busy_share: Option<f64>,
    /// 1-minute load average before the run.
    pub loadavg_1m_start: Option<f64>,
    /// Tokio worker threads of the generator and of the watchd started.
    pub tokio_workers: TokioWorkers,
}

/// One S1 run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct S1Result {
    /// Always `s1`.
    pub scenario: String,
    /// `watchd` or `etcd`.
    pub target: String,
    /// Watch streams.
    pub watchers: usize,
    /// Requested write rate.
    pub writes_per_sec: f64,
    /// Requested write phase, seconds.
    pub duration_s: f64,
    /// Approximate size of each value as JSON (`--object-bytes`).
    pub object_bytes: usize,
    /// How the values are stored in etcd: `json` or `protobuf`.
    pub storage: String,
    /// Size of each stored value in that format, bytes.
    pub stored_bytes: usize,
    /// What the watchd watchers asked for (`json` or `protobuf`); `None` for
    /// etcd direct, whose watchers receive the values as stored.
    pub accept: Option<String>,
    /// Protocol, connections, streams per connection, TLS.
    #[serde(flatten)]
    pub multiplexing: Multiplexing,
    /// Extra arguments of the watchd the run started (`--watchd-arg`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watchd_args: Vec<String>,
    /// Namespaces the objects are spread over.
    pub namespaces: usize,
    /// Distinct objects rewritten round-robin.
    pub objects: usize,
    /// Revision the watches start after.
    pub base_revision: i64,
    /// What the writer did.
    pub writes: WriteStats,
    /// watchers × acknowledged writes.
    pub expected_deliveries: u64,
    /// Seconds from the first write until every watcher had the last write
    /// (or the drain timeout).
    pub window_s: f64,
    /// Deliveries per second of the window.
    pub delivered_per_sec: f64,
    /// Whether every watcher received the last write before the drain timeout.
    pub caught_up: bool,
    /// Seconds from the writer's last acknowledgement until every watcher
    /// had the last write (or the drain timeout): the lag left at the end.
    pub drain_s: f64,
    /// Delivery latency.
    pub latency_ms: Latency,
    /// Missed, duplicate, reordered and unexpected events over all watchers.
    #[serde(flatten)]
    pub accounting: Accounting,
    /// Watchers whose stream ended early.
    pub watchers_failed: usize,
    /// The first such failure.
    pub first_watcher_error: Option<String>,
    /// `ERROR` watch events received.
    pub error_events: u64,
    /// The server the watchers talk to.
    pub server: ProcFigures,
    /// etcd behind watchd (`target = watchd` only).
    pub backing_etcd: Option<ProcFigures>,
    /// This load generator.
    pub generator: ProcFigures,
    /// The machine.
    pub machine: Machine,
}

impl S1Result {
    /// Whether every event arrived exactly once, in order, and nothing failed.
    pub fn is_clean(&self) -> bool {
        let a = &self.accounting;
        a.missed == 0
            && a.duplicates == 0
            && a.out_of_order == 0
            && a.unexpected == 0
            && self.watchers_failed == 0
            && self.error_events == 0
            && self.writes.failed == 0
    }
}

/// One figure of a run: label, value, and whether lower is better.
pub struct Figure {
    /// Label with unit.
    pub label: &'static str,
    /// Value, when measured.
    pub value: Option<f64>,
}

fn mib(b: Option<u64>) -> Option<f64> {
    b.map(|b| b as f64 / (1024.0 * 1024.0))
}

/// CPU per million deliveries of every server process: watchd plus the
/// etcd behind it, or etcd alone (which also serves the writes).
pub fn all_servers_per_million(r: &S1Result) -> Option<f64> {
    let own = r.server.cpu_s_per_million?;
    match &r.backing_etcd {
        None => Some(own),
        Some(etcd) => etcd.cpu_s_per_million.map(|e| own + e),
    }
}

/// The figures shown in the tables, in order.
pub fn figures(r: &S1Result) -> Vec<Figure> {
    let f = |label, value| Figure { label, value };
    vec![
        f("writes acknowledged /s", Some(r.writes.achieved_per_sec)),
        f("delivered /s", Some(r.delivered_per_sec)),
        f("deliveries", Some(r.accounting.delivered as f64)),
        f("latency p50 (ms)", r.latency_ms.p50),
        f("latency p99 (ms)", r.latency_ms.p99),
        f("latency max (ms)", r.latency_ms.max),
        f("missed", Some(r.accounting.missed as f64)),
        f("duplicates", Some(r.accounting.duplicates as f64)),
        f("out of order", Some(r.accounting.out_of_order as f64)),
        f("watchers failed", Some(r.watchers_failed as f64)),
        f("server CPU-s / 1M deliveries", r.server.cpu_s_per_million),
        f(
            "generator CPU-s / 1M deliveries",
            r.generator.cpu_s_per_million,
        ),
        f(
            "server user share (%)",
            r.server.user_share().map(|u| u * 100.0),
        ),
        f("server cores used", r.server.cores),
        f("server peak RSS (MiB)", mib(r.server.peak_rss_bytes)),
        f(
            "backing etcd CPU-s / 1M deliv.",
            r.backing_etcd.as_ref().and_then(|e| e.cpu_s_per_million),
        ),
        f("all servers CPU-s / 1M deliv.", all_servers_per_million(r)),
        f("generator cores used", r.generator.cores),
        f("machine busy (%)", r.machine.busy_share.map(|b| b * 100.0)),
    ]
}

/// A number for a table: 3 significant figures, thousands unsplit.
pub fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if v.is_nan() => "-".to_string(),
        Some(0.0) => "0".to_string(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// The table of one run.
pub fn single_table(r: &S1Result) -> String {
    let mut out = format!(
        "S1 broadcast: target={} storage={} accept={} watchers={} writes/s={} duration={}s object≈{}B JSON, {}B stored ({} cpus, load {} at start)\n  transport: {}\n  {}\n",
        r.target,
        r.storage,
        r.accept.as_deref().unwrap_or("-"),
        r.watchers,
        r.writes_per_sec,
        r.duration_s,
        r.object_bytes,
        r.stored_bytes,
        r.machine.cpus,
        fmt_num(r.machine.loadavg_1m_start),
        r.multiplexing,
        r.machine.tokio_workers.text()
    );
    for fig in figures(r) {
        out.push_str(&format!("  {:<34} {:>12}\n", fig.label, fmt_num(fig.value)));
    }
    if let Some(e) = &r.first_watcher_error {
        out.push_str(&format!("  first watcher error: {e}\n"));
    }
    if r.writes.abandoned > 0 {
        out.push_str(&format!(
            "  WARNING: {} of {} scheduled writes never sent: the server throttled the writer\n",
            r.writes.abandoned, r.writes.planned
        ));
    }
    if !r.caught_up {
        out.push_str("  WARNING: not every watcher caught up before the drain timeout\n");
    }
    out
}

/// One compared figure: medians over the runs and watchd/etcd.
#[derive(Clone, Debug, Serialize)]
pub struct Compared {
    /// Label with unit.
    pub figure: String,
    /// Median for etcd direct.
    pub etcd: Option<f64>,
    /// Median for watchd.
    pub watchd: Option<f64>,
    /// watchd / etcd.
    pub ratio: Option<f64>,
}

/// Medians of each figure over `etcd` and `watchd` runs, with the ratio
/// watchd/etcd (two sides of [`super::compare::rows`]).
pub fn compare(etcd: &[S1Result], watchd: &[S1Result]) -> Vec<Compared> {
    let sides = [etcd, watchd];
    let ratio = Ratio {
        label: "watchd/etcd".into(),
        numerator: 1,
        denominator: 0,
    };
    super::compare::rows(&sides, std::slice::from_ref(&ratio))
        .into_iter()
        .map(|r| Compared {
            figure: r.figure,
            etcd: r.medians[0],
            watchd: r.medians[1],
            ratio: r.ratios[0],
        })
        .collect()
}

/// The side-by-side table.
pub fn compare_table(title: &str, rows: &[Compared]) -> String {
    let mut out = format!(
        "{title}\n  {:<34} {:>12} {:>12} {:>14}\n",
        "figure", "etcd direct", "watchd", "watchd/etcd"
    );
    for r in rows {
        out.push_str(&format!(
            "  {:<34} {:>12} {:>12} {:>14}\n",
            r.figure,
            fmt_num(r.etcd),
            fmt_num(r.watchd),
            r.ratio.map_or("-".to_string(), |x| format!("{x:.3}x"))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn run(target: &str, p99: f64, cpu: f64) -> S1Result {
        S1Result {
            scenario: "s1".into(),
            target: target.into(),
            storage: "json".into(),
            accept: (target == "watchd").then(|| "json".into()),
            watchers: 5,
            latency_ms: Latency {
                samples: 100,
                p50: Some(1.0),
                p99: Some(p99),
                max: Some(p99 * 2.0),
                mean: Some(1.5),
                cdf: Vec::new(),
            },
            server: ProcFigures {
                process: target.into(),
                cpu_s_per_million: Some(cpu),
                ..ProcFigures::default()
            },
            accounting: Accounting {
                delivered: 100,
                ..Accounting::default()
            },
            ..S1Result::default()
        }
    }

    #[test]
    fn json_shape_is_flat_and_complete() {
        let v = serde_json::to_value(run("watchd", 4.0, 2.0)).unwrap();
        for key in [
            "scenario",
            "target",
            "watchers",
            "writes_per_sec",
            "duration_s",
            "object_bytes",
            "storage",
            "stored_bytes",
            "accept",
            "writes",
            "expected_deliveries",
            "delivered",
            "delivered_per_sec",
            "window_s",
            "caught_up",
            "latency_ms",
            "missed",
            "duplicates",
            "out_of_order",
            "unexpected",
            "watchers_failed",
            "server",
            "backing_etcd",
            "generator",
            "machine",
        ] {
            assert!(v.get(key).is_some(), "missing {key} in {v}");
        }
        assert_eq!(v["latency_ms"]["p99"], 4.0);
        assert_eq!(v["server"]["cpu_s_per_million"], 2.0);
        assert!(
            v["writes"].get("revisions").is_none(),
            "revisions stay out of the JSON"
        );
        assert!(v["writes"].get("achieved_per_sec").is_some());
        assert!(run("etcd", 1.0, 1.0).is_clean());
        let mut w = run("watchd", 1.0, 2.0);
        assert_eq!(all_servers_per_million(&w), Some(2.0));
        w.backing_etcd = Some(ProcFigures {
            cpu_s_per_million: Some(0.5),
            ..ProcFigures::default()
        });
        assert_eq!(all_servers_per_million(&w), Some(2.5));
    }

    #[test]
    fn storage_and_accept_are_reported() {
        let mut w = run("watchd", 4.0, 2.0);
        w.storage = "protobuf".into();
        w.accept = Some("protobuf".into());
        w.object_bytes = 1024;
        w.stored_bytes = 980;
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["storage"], "protobuf");
        assert_eq!(v["accept"], "protobuf");
        assert_eq!(v["stored_bytes"], 980);
        let table = single_table(&w);
        assert!(
            table.contains("storage=protobuf accept=protobuf")
                && table.contains("1024B JSON, 980B stored"),
            "{table}"
        );
        // etcd direct has no Accept: null in JSON, "-" in the table.
        let mut e = run("etcd", 4.0, 2.0);
        e.storage = "protobuf".into();
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            (&v["storage"], &v["accept"]),
            (&"protobuf".into(), &Value::Null)
        );
        assert!(single_table(&e).contains("storage=protobuf accept=- "));
    }

    #[test]
    fn each_transport_has_its_own_label() {
        let m = |protocol: &str, connections, streams, tls| Multiplexing {
            protocol: protocol.into(),
            connections,
            streams_per_connection: streams,
            tls,
        };
        for (mux, want) in [
            (
                m("http1", 3, 1, false),
                "HTTP/1.1, 3 connections x 1 stream",
            ),
            (
                m("http2", 1, 5, true),
                "HTTP/2 over TLS, 1 connection x <=5 streams",
            ),
            (
                m("grpc", 2, 50, false),
                "etcd gRPC, 2 connections x <=50 streams",
            ),
            (
                m("grpc-watchd", 10, 100, false),
                "watchd gRPC (h2c), 10 connections x <=100 streams",
            ),
            (
                m("grpc-watchd", 1, 1, true),
                "watchd gRPC over TLS, 1 connection x 1 stream",
            ),
        ] {
            assert_eq!(mux.to_string(), want);
        }
        // The JSON says which gRPC: watchd's is not etcd's.
        let mut w = run("watchd", 4.0, 2.0);
        w.multiplexing = m("grpc-watchd", 1, 5, false);
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(
            (&v["target"], &v["protocol"]),
            (&"watchd".into(), &"grpc-watchd".into())
        );
        assert!(
            single_table(&w).contains("transport: watchd gRPC (h2c), 1 connection x <=5 streams")
        );
    }

    #[test]
    fn comparison_takes_medians_and_ratios() {
        let etcd = [
            run("etcd", 10.0, 20.0),
            run("etcd", 30.0, 22.0),
            run("etcd", 20.0, 18.0),
        ];
        let watchd = [
            run("watchd", 2.0, 4.0),
            run("watchd", 4.0, 5.0),
            run("watchd", 3.0, 3.0),
        ];
        let rows = compare(&etcd, &watchd);
        let p99 = rows
            .iter()
            .find(|r| r.figure == "latency p99 (ms)")
            .unwrap();
        assert_eq!((p99.etcd, p99.watchd), (Some(20.0), Some(3.0)));
        assert!((p99.ratio.unwrap() - 0.15).abs() < 1e-12);
        let cpu = rows
            .iter()
            .find(|r| r.figure == "server CPU-s / 1M deliveries")
            .unwrap();
        assert!((cpu.ratio.unwrap() - 0.2).abs() < 1e-12);
        let missed = rows.iter().find(|r| r.figure == "missed").unwrap();
        assert_eq!(missed.ratio, None, "no ratio against zero");
        let table = compare_table("t", &rows);
        assert!(table.contains("0.150x"), "{table}");
        assert!(compare(&[], &[]).is_empty());
        assert_eq!(fmt_num(Some(1234.5)), "1234");
        assert_eq!(fmt_num(Some(0.01234)), "0.012");
        assert_eq!(fmt_num(None), "-");
    }
}
