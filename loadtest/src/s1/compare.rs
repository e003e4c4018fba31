//! `s1-compare` with several sides: etcd direct and watchd over each
//! protocol asked for (HTTP/1.1, HTTP/2, watchd's gRPC API), each run
//! several times; medians per figure and per side, and ratios of each
//! watchd side against etcd direct and of each later protocol against the
//! first.

use serde::Serialize;

use super::protocol::{GRPC_WATCHD, INFORMER};
use super::report::{figures, fmt_num, workers_line, Figure, Multiplexing, S1Result};
use crate::stats::median;

/// One side of a comparison: what it is, how its streams were carried, and
/// its runs.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    /// Column heading (`etcd direct`, `watchd http2`).
    pub name: String,
    /// Short name used in ratio labels (`etcd`, `http2`).
    pub short: String,
    /// Protocol, connections, streams per connection, TLS.
    #[serde(flatten)]
    pub multiplexing: Multiplexing,
    /// Every run of this side, in the order made.
    pub runs: Vec<S1Result>,
}

/// A ratio between two sides' medians: `numerator / denominator`, indices
/// into the sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ratio {
    /// Label (`http2/etcd`).
    pub label: String,
    /// Side divided.
    pub numerator: usize,
    /// Side divided by.
    pub denominator: usize,
}

/// One figure: its median on every side and every ratio.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Label with unit.
    pub figure: String,
    /// Median per side, in the order of the sides.
    pub medians: Vec<Option<f64>>,
    /// Per ratio, in the order of the ratios (`None` against zero).
    pub ratios: Vec<Option<f64>>,
}

/// Several sides over several runs.
#[derive(Clone, Debug, Serialize)]
pub struct CompareResult {
    /// Always `s1-compare`.
    pub scenario: String,
    /// etcd direct first, then watchd per protocol.
    pub sides: Vec<Side>,
    /// The ratios shown.
    pub ratios: Vec<Ratio>,
    /// Medians per figure with the ratios.
    pub median: Vec<Row>,
}

/// The ratios worth showing when side 0 is the baseline: every other side
/// against it, then every side after the first other one against that
/// (HTTP/2 against HTTP/1.1).
pub fn ratios(shorts: &[&str]) -> Vec<Ratio> {
    let ratio = |n: usize, d: usize| Ratio {
        label: format!("{}/{}", shorts[n], shorts[d]),
        numerator: n,
        denominator: d,
    };
    let mut out: Vec<Ratio> = (1..shorts.len()).map(|n| ratio(n, 0)).collect();
    out.extend((2..shorts.len()).map(|n| ratio(n, 1)));
    out
}

/// The ratios worth showing when the floor and/or etcd direct are among
/// the sides (by short name `floor`, `etcd`): every other side against the
/// floor, then every watchd side against etcd direct, then HTTP/2 against
/// HTTP/1.1, then watchd's gRPC API (`grpc-watchd`) against its HTTP API
/// over HTTP/2 (the same multiplexing), or over HTTP/1.1 without an HTTP/2
/// side, and the informer against the same (`informer/http2`). Without a
/// floor, a gRPC and an informer side this is [`ratios`] of etcd-first
/// sides.
pub fn baseline_ratios(shorts: &[&str]) -> Vec<Ratio> {
    let at = |name: &str| shorts.iter().position(|s| *s == name);
    let ratio = |n: usize, d: usize| Ratio {
        label: format!("{}/{}", shorts[n], shorts[d]),
        numerator: n,
        denominator: d,
    };
    let mut out = Vec::new();
    let floor = at("floor");
    let etcd = at("etcd");
    for d in [floor, etcd].into_iter().flatten() {
        for n in 0..shorts.len() {
            if n != d && Some(n) != floor {
                out.push(ratio(n, d));
            }
        }
    }
    if let (Some(h1), Some(h2)) = (at("http1"), at("http2")) {
        out.push(ratio(h2, h1));
    }
    if let (Some(g), Some(http)) = (at(GRPC_WATCHD), at("http2").or(at("http1"))) {
        out.push(ratio(g, http));
    }
    // The informer against the same HTTP API without TLS, token, RBAC and
    // protobuf: h2c (the same multiplexing), or HTTP/1.1.
    if let (Some(i), Some(http)) = (at(INFORMER), at("http2").or(at("http1"))) {
        out.push(ratio(i, http));
    }
    out
}

/// Medians of every figure over each side's runs, and the ratios.
pub fn rows(sides: &[&[S1Result]], ratios: &[Ratio]) -> Vec<Row> {
    let per_side: Vec<Vec<Vec<Figure>>> = sides
        .iter()
        .map(|runs| runs.iter().map(figures).collect())
        .collect();
    let Some(labels) = per_side.iter().find_map(|runs| runs.first()) else {
        return Vec::new();
    };
    labels
        .iter()
        .enumerate()
        .map(|(i, fig)| {
            let medians: Vec<Option<f64>> = per_side
                .iter()
                .map(|runs| {
                    let v: Vec<f64> = runs.iter().filter_map(|r| r[i].value).collect();
                    median(&v)
                })
                .collect();
            let ratios = ratios
                .iter()
                .map(|r| match (medians[r.numerator], medians[r.denominator]) {
                    (Some(n), Some(d)) if d != 0.0 => Some(n / d),
                    _ => None,
                })
                .collect();
            Row {
                figure: fig.label.to_string(),
                medians,
                ratios,
            }
        })
        .collect()
}

impl CompareResult {
    /// Medians and ratios of `sides` (etcd direct first).
    pub fn new(sides: Vec<Side>) -> Self {
        let shorts: Vec<&str> = sides.iter().map(|s| s.short.as_str()).collect();
        let ratios = ratios(&shorts);
        let runs: Vec<&[S1Result]> = sides.iter().map(|s| s.runs.as_slice()).collect();
        let median = rows(&runs, &ratios);
        Self {
            scenario: "s1-compare".into(),
            sides,
            ratios,
            median,
        }
    }

    /// Medians of `sides` and the `ratios` given.
    pub fn with_ratios(sides: Vec<Side>, ratios: Vec<Ratio>) -> Self {
        let runs: Vec<&[S1Result]> = sides.iter().map(|s| s.runs.as_slice()).collect();
        let median = rows(&runs, &ratios);
        Self {
            scenario: "s1-compare".into(),
            sides,
            ratios,
            median,
        }
    }

    /// Whether every run of every side was clean.
    pub fn is_clean(&self) -> bool {
        self.sides
            .iter()
            .flat_map(|s| &s.runs)
            .all(S1Result::is_clean)
    }

    /// The multiplexing of each side, then the side-by-side table.
    pub fn table(&self, title: &str) -> String {
        let mut out = format!("{title}\n");
        if let Some(w) = workers_line(self.sides.iter().flat_map(|s| &s.runs)) {
            out.push_str(&format!("  {w}\n"));
        }
        let name_w = self
            .sides
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(0)
            .max(14);
        for s in &self.sides {
            out.push_str(&format!("  {:<name_w$} {}\n", s.name, s.multiplexing));
        }
        // Columns at least as wide as their heading (`grpc-watchd/floor`).
        let side_w: Vec<usize> = self.sides.iter().map(|s| s.name.len().max(13)).collect();
        let ratio_w: Vec<usize> = self.ratios.iter().map(|r| r.label.len().max(12)).collect();
        out.push_str(&format!("  {:<34}", "figure"));
        for (s, w) in self.sides.iter().zip(&side_w) {
            out.push_str(&format!(" {:>w$}", s.name));
        }
        for (r, w) in self.ratios.iter().zip(&ratio_w) {
            out.push_str(&format!(" {:>w$}", r.label));
        }
        out.push('\n');
        for row in &self.median {
            out.push_str(&format!("  {:<34}", row.figure));
            for (m, w) in row.medians.iter().zip(&side_w) {
                out.push_str(&format!(" {:>w$}", fmt_num(*m)));
            }
            for (r, w) in row.ratios.iter().zip(&ratio_w) {
                let shown = r.map_or("-".to_string(), |x| format!("{x:.3}x"));
                out.push_str(&format!(" {shown:>w$}"));
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s1::report::{Latency, ProcFigures};
    use crate::stats::Accounting;

    fn run(target: &str, protocol: &str, p99: f64, cpu: f64) -> S1Result {
        S1Result {
            scenario: "s1".into(),
            target: target.into(),
            multiplexing: Multiplexing {
                protocol: protocol.into(),
                connections: 1,
                streams_per_connection: 5,
                tls: false,
            },
            latency_ms: Latency {
                samples: 100,
                p99: Some(p99),
                ..Latency::default()
            },
            server: ProcFigures {
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

    fn side(name: &str, short: &str, protocol: &str, runs: Vec<S1Result>) -> Side {
        Side {
            name: name.into(),
            short: short.into(),
            multiplexing: Multiplexing {
                protocol: protocol.into(),
                connections: 2,
                streams_per_connection: 50,
                tls: protocol == "http2",
            },
            runs,
        }
    }

    #[test]
    fn ratios_are_against_the_baseline_then_the_first_protocol() {
        let labels = |shorts: &[&str]| -> Vec<String> {
            ratios(shorts).into_iter().map(|r| r.label).collect()
        };
        assert_eq!(labels(&["etcd", "http1"]), ["http1/etcd"]);
        assert_eq!(
            labels(&["etcd", "http1", "http2"]),
            ["http1/etcd", "http2/etcd", "http2/http1"]
        );
        assert!(labels(&["etcd"]).is_empty());
    }

    #[test]
    fn baselines_are_the_floor_then_etcd() {
        let labels = |shorts: &[&str]| -> Vec<String> {
            baseline_ratios(shorts)
                .into_iter()
                .map(|r| r.label)
                .collect()
        };
        assert_eq!(
            labels(&["floor", "etcd", "http1", "http2"]),
            [
                "etcd/floor",
                "http1/floor",
                "http2/floor",
                "http1/etcd",
                "http2/etcd",
                "http2/http1"
            ]
        );
        assert_eq!(labels(&["floor", "http2"]), ["http2/floor"]);
        // Without the floor: what `ratios` gives etcd-first sides.
        let old: Vec<String> = ratios(&["etcd", "http1", "http2"])
            .into_iter()
            .map(|r| r.label)
            .collect();
        assert_eq!(labels(&["etcd", "http1", "http2"]), old);
        assert_eq!(labels(&["floor", "etcd"]), ["etcd/floor"]);
        // watchd's gRPC API: against the baselines like any watchd side,
        // then against the HTTP API over HTTP/2 (the same multiplexing).
        assert_eq!(
            labels(&["floor", "etcd", "http1", "http2", "grpc-watchd"]),
            [
                "etcd/floor",
                "http1/floor",
                "http2/floor",
                "grpc-watchd/floor",
                "http1/etcd",
                "http2/etcd",
                "grpc-watchd/etcd",
                "http2/http1",
                "grpc-watchd/http2"
            ]
        );
        assert_eq!(
            labels(&["etcd", "http1", "grpc-watchd"]),
            ["http1/etcd", "grpc-watchd/etcd", "grpc-watchd/http1"]
        );
        assert_eq!(labels(&["floor", "grpc-watchd"]), ["grpc-watchd/floor"]);
        // The informer: against the baselines, then against h2c.
        assert_eq!(
            labels(&["floor", "etcd", "http1", "http2", "informer"]),
            [
                "etcd/floor",
                "http1/floor",
                "http2/floor",
                "informer/floor",
                "http1/etcd",
                "http2/etcd",
                "informer/etcd",
                "http2/http1",
                "informer/http2"
            ]
        );
        assert_eq!(
            labels(&["etcd", "http1", "informer"]),
            ["http1/etcd", "informer/etcd", "informer/http1"]
        );
    }

    #[test]
    fn the_grpc_side_shares_the_table_with_aligned_wide_columns() {
        let sides = vec![
            side("floor", "floor", "tcp", vec![run("floor", "tcp", 1.0, 8.0)]),
            side(
                "etcd direct",
                "etcd",
                "grpc",
                vec![run("etcd", "grpc", 9.0, 12.0)],
            ),
            side(
                "watchd http2",
                "http2",
                "http2",
                vec![run("watchd", "http2", 3.0, 6.0)],
            ),
            side(
                "watchd grpc",
                "grpc-watchd",
                "grpc-watchd",
                vec![run("watchd", "grpc-watchd", 2.0, 4.0)],
            ),
        ];
        let shorts: Vec<&str> = sides.iter().map(|s| s.short.as_str()).collect();
        let ratios = baseline_ratios(&shorts);
        let c = CompareResult::with_ratios(sides, ratios);
        let cpu = c
            .median
            .iter()
            .find(|r| r.figure == "server CPU-s / 1M deliveries")
            .unwrap();
        assert_eq!(cpu.medians, [Some(8.0), Some(12.0), Some(6.0), Some(4.0)]);
        let at = |label: &str| {
            let i = c.ratios.iter().position(|r| r.label == label).unwrap();
            cpu.ratios[i]
        };
        assert_eq!(at("grpc-watchd/floor"), Some(0.5));
        assert_eq!(at("grpc-watchd/etcd"), Some(4.0 / 12.0));
        assert_eq!(at("grpc-watchd/http2"), Some(4.0 / 6.0));
        let table = c.table("t");
        assert!(
            table.contains("watchd grpc    watchd gRPC (h2c), 2 connections x <=50 streams"),
            "{table}"
        );
        // Every line of the table is as long as its heading: the wide
        // ratio labels do not shift the columns.
        assert!(table
            .lines()
            .nth(1)
            .unwrap()
            .contains("tokio workers: generator"));
        let lines: Vec<&str> = table.lines().skip(2 + c.sides.len()).collect();
        let head = lines[0];
        assert!(head.contains(" grpc-watchd/floor"), "{head}");
        assert!(head.ends_with(" grpc-watchd/http2"), "{head}");
        for l in &lines[1..] {
            assert_eq!(l.len(), head.len(), "{l:?}\nvs\n{head:?}");
        }
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["sides"][3]["short"], "grpc-watchd");
        assert_eq!(v["sides"][3]["protocol"], "grpc-watchd");
        assert_eq!(v["sides"][1]["protocol"], "grpc");
    }

    #[test]
    fn the_informer_side_s_long_name_keeps_the_multiplexing_column() {
        let mut informer = side(
            "watchd informer",
            "informer",
            "informer",
            vec![run("watchd", "informer", 2.0, 4.0)],
        );
        informer.multiplexing.tls = true;
        let sides = vec![
            side("floor", "floor", "tcp", vec![run("floor", "tcp", 1.0, 8.0)]),
            informer,
        ];
        let c = CompareResult::with_ratios(sides, baseline_ratios(&["floor", "informer"]));
        let table = c.table("t");
        let col = |name: &str| {
            let line = table
                .lines()
                .find(|l| l.starts_with(&format!("  {name} ")))
                .unwrap();
            line.len() - line[2 + name.len()..].trim_start().len()
        };
        assert_eq!(col("floor"), col("watchd informer"), "{table}");
        assert!(
            table.contains("watchd informer informer (HTTP/2 over TLS, protobuf), 2 connections"),
            "{table}"
        );
        assert_eq!(c.ratios[0].label, "informer/floor");
    }

    #[test]
    fn three_sides_take_medians_and_every_ratio() {
        let etcd = side(
            "etcd direct",
            "etcd",
            "grpc",
            vec![
                run("etcd", "grpc", 10.0, 20.0),
                run("etcd", "grpc", 30.0, 10.0),
                run("etcd", "grpc", 20.0, 40.0),
            ],
        );
        let h1 = side(
            "watchd http1",
            "http1",
            "http1",
            vec![run("watchd", "http1", 4.0, 10.0)],
        );
        let h2 = side(
            "watchd http2",
            "http2",
            "http2",
            vec![
                run("watchd", "http2", 2.0, 4.0),
                run("watchd", "http2", 3.0, 6.0),
                run("watchd", "http2", 3.0, 5.0),
            ],
        );
        let c = CompareResult::new(vec![etcd, h1, h2]);
        let cpu = c
            .median
            .iter()
            .find(|r| r.figure == "server CPU-s / 1M deliveries")
            .unwrap();
        assert_eq!(cpu.medians, [Some(20.0), Some(10.0), Some(5.0)]);
        assert_eq!(cpu.ratios, [Some(0.5), Some(0.25), Some(0.5)]);
        let missed = c.median.iter().find(|r| r.figure == "missed").unwrap();
        assert_eq!(missed.ratios, [None, None, None], "no ratio against zero");
        assert!(c.is_clean());
        let table = c.table("t");
        for want in [
            "etcd direct    etcd gRPC, 2 connections x <=50 streams",
            "watchd http2   HTTP/2 over TLS, 2 connections x <=50 streams",
            "http2/http1",
            "0.250x",
        ] {
            assert!(table.contains(want), "{want:?} in\n{table}");
        }
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["scenario"], "s1-compare");
        assert_eq!(v["sides"][2]["protocol"], "http2");
        assert_eq!(v["sides"][2]["streams_per_connection"], 50);
        assert_eq!(v["sides"][2]["tls"], true);
        assert_eq!(v["sides"][2]["runs"][0]["protocol"], "http2");
        assert_eq!(v["ratios"][2]["label"], "http2/http1");
        assert!(CompareResult::new(Vec::new()).median.is_empty());
    }
}
