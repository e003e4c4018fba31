//! What an S1 command writes beside its JSON result: a Markdown table and
//! the panels of its PNG plot — the latency distribution of each side, and
//! CPU per delivery against watchers with the floor and etcd as lines of
//! their own (points of earlier comparisons at other W join the lines).

use std::collections::BTreeMap;

use serde_json::Value;

use super::compare::CompareResult;
use super::protocol::{GRPC_WATCHD, INFORMER};
use super::report::{figures, fmt_num, single_table, workers_line, Latency, S1Result};
use crate::plot::{Panel, Series};

/// The figure the CPU plots and the targets read.
pub const CPU_FIGURE: &str = "server CPU-s / 1M deliveries";

/// The palette index of a side (by short name or heading), the same in
/// every plot: the floor black, etcd red, watchd over HTTP/1.1 blue, over
/// HTTP/2 green, over its gRPC API orange, as an informer purple.
pub fn side_color(side: &str) -> usize {
    if side == "floor" {
        0
    } else if side.starts_with("etcd") {
        1
    } else if side.ends_with("http1") || side == "watchd" {
        2
    } else if side.ends_with("http2") {
        3
    } else if side == GRPC_WATCHD || side == "watchd grpc" {
        4
    } else if side == INFORMER || side == "watchd informer" {
        5
    } else {
        6
    }
}

/// The latency CDF of each named side (log latency axis).
pub fn latency_panel(sides: &[(String, &Latency)]) -> Panel {
    let series = sides
        .iter()
        .map(|(name, l)| Series {
            name: name.clone(),
            points: l.cdf.iter().map(|p| (p[0], p[1])).collect(),
            color: side_color(name),
            line: true,
            ..Series::default()
        })
        .collect();
    Panel {
        title: "delivery latency (CDF)".into(),
        x_label: "latency, ms (log)".into(),
        y_label: "share of deliveries at or below".into(),
        log_x: true,
        series,
        ..Panel::default()
    }
}

/// (side name, short name, W, median CPU-s per 1M deliveries) of every side
/// of a comparison result, read from its JSON form (so earlier result files
/// can be read alike).
pub fn cpu_points(v: &Value) -> Vec<(String, String, f64, f64)> {
    let Some(row) = v["median"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["figure"] == CPU_FIGURE))
    else {
        return Vec::new();
    };
    let sides = v["sides"].as_array().cloned().unwrap_or_default();
    sides
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let w = s["runs"][0]["watchers"].as_f64()?;
            let cpu = row["medians"][i].as_f64()?;
            let name = s["name"].as_str()?.to_string();
            let short = s["short"].as_str().unwrap_or(&name).to_string();
            Some((name, short, w, cpu))
        })
        .collect()
}

/// CPU per delivery against watchers, one line per side, from comparison
/// results (JSON form) at one or several W.
pub fn cpu_vs_watchers_panel(results: &[Value]) -> Panel {
    let mut lines: BTreeMap<(usize, String), Vec<(f64, f64)>> = BTreeMap::new();
    for v in results {
        for (name, short, w, cpu) in cpu_points(v) {
            lines
                .entry((side_color(&short), name))
                .or_default()
                .push((w, cpu));
        }
    }
    let series = lines
        .into_iter()
        .map(|((color, name), mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name,
                points,
                color,
                line: true,
                ..Series::default()
            }
        })
        .collect();
    Panel {
        title: "server CPU per delivery".into(),
        x_label: "watchers (log)".into(),
        y_label: "CPU-s / 1M deliveries".into(),
        log_x: true,
        series,
        ..Panel::default()
    }
}

/// The run of `runs` whose p99 latency is the median one (the one whose
/// distribution is drawn).
pub fn median_run(runs: &[S1Result]) -> Option<&S1Result> {
    let mut v: Vec<&S1Result> = runs.iter().collect();
    v.sort_by(|a, b| {
        let p = |r: &S1Result| r.latency_ms.p99.unwrap_or(f64::INFINITY);
        p(a).total_cmp(&p(b))
    });
    v.get(v.len().saturating_sub(1) / 2).copied()
}

/// The CPU-per-delivery ratios the project's targets are read from, one
/// line each: every side against the floor (watchd HTTP/1.1 ≤ 1.10×, watchd
/// HTTP/2 ≤ 0.25×) and against etcd direct.
pub fn target_lines(c: &CompareResult) -> Vec<String> {
    let Some(row) = c.median.iter().find(|r| r.figure == CPU_FIGURE) else {
        return Vec::new();
    };
    c.ratios
        .iter()
        .zip(&row.ratios)
        .filter_map(|(ratio, value)| {
            let value = (*value)?;
            let target = match ratio.label.as_str() {
                "http1/floor" => " (target <= 1.10x)",
                "http2/floor" => " (target <= 0.25x)",
                "http2/etcd" => " (target <= 0.33x)",
                _ => "",
            };
            Some(format!(
                "CPU per delivery {}: {value:.3}x{target}",
                ratio.label
            ))
        })
        .collect()
}

/// The Markdown of a comparison: each side's transport, the medians and
/// ratios of every figure, and the target lines.
pub fn compare_markdown(c: &CompareResult, title: &str) -> String {
    let mut out = format!("### {title}\n\n");
    if let Some(w) = workers_line(c.sides.iter().flat_map(|s| &s.runs)) {
        out.push_str(&format!("- {w}\n"));
    }
    for s in &c.sides {
        out.push_str(&format!("- {}: {}\n", s.name, s.multiplexing));
    }
    out.push_str("\n| figure |");
    let mut rule = String::from("|---|");
    for s in &c.sides {
        out.push_str(&format!(" {} |", s.name));
        rule.push_str("---|");
    }
    for r in &c.ratios {
        out.push_str(&format!(" {} |", r.label));
        rule.push_str("---|");
    }
    out.push_str(&format!("\n{rule}\n"));
    for row in &c.median {
        out.push_str(&format!("| {} |", row.figure));
        for m in &row.medians {
            out.push_str(&format!(" {} |", fmt_num(*m)));
        }
        for r in &row.ratios {
            out.push_str(&format!(
                " {} |",
                r.map_or("-".into(), |x| format!("{x:.3}x"))
            ));
        }
        out.push('\n');
    }
    out.push('\n');
    for l in target_lines(c) {
        out.push_str(&format!("- {l}\n"));
    }
    out
}

/// The panels of a comparison: each side's latency CDF (its median-p99
/// run), and CPU per delivery against watchers with `earlier` comparison
/// results joining the lines.
pub fn compare_panels(c: &CompareResult, earlier: &[Value]) -> Vec<Panel> {
    let lat: Vec<(String, &Latency)> = c
        .sides
        .iter()
        .filter_map(|s| median_run(&s.runs).map(|r| (s.name.clone(), &r.latency_ms)))
        .collect();
    let mut all: Vec<Value> = earlier.to_vec();
    all.push(serde_json::to_value(c).unwrap_or(Value::Null));
    vec![latency_panel(&lat), cpu_vs_watchers_panel(&all)]
}

/// The Markdown of one S1 run.
pub fn single_markdown(r: &S1Result) -> String {
    let head = single_table(r);
    let title = head.lines().next().unwrap_or("S1");
    let mut out = format!(
        "### {title}\n\n{}\n\n| figure | value |\n|---|---|\n",
        r.machine.tokio_workers.text()
    );
    for f in figures(r) {
        out.push_str(&format!("| {} | {} |\n", f.label, fmt_num(f.value)));
    }
    out
}

/// The panels of one S1 run: its latency CDF, and its server's CPU per
/// delivery (with the backing etcd's and both) at its W.
pub fn single_panels(r: &S1Result) -> Vec<Panel> {
    let w = r.watchers as f64;
    let point = |name: &str, v: Option<f64>, color| Series {
        name: name.into(),
        points: v.map(|v| vec![(w, v)]).unwrap_or_default(),
        color,
        ..Series::default()
    };
    let backing = r.backing_etcd.as_ref().and_then(|e| e.cpu_s_per_million);
    vec![
        latency_panel(&[(r.target.clone(), &r.latency_ms)]),
        Panel {
            title: "CPU per delivery".into(),
            x_label: "watchers (log)".into(),
            y_label: "CPU-s / 1M deliveries".into(),
            log_x: true,
            series: vec![
                point(&r.target, r.server.cpu_s_per_million, side_color(&r.target)),
                point("backing etcd", backing, 1),
                point("all servers", super::report::all_servers_per_million(r), 5),
            ],
            ..Panel::default()
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s1::compare::{baseline_ratios, Side};
    use crate::s1::report::{Multiplexing, ProcFigures};

    fn run(target: &str, w: usize, p99: f64, cpu: f64) -> S1Result {
        S1Result {
            target: target.into(),
            watchers: w,
            latency_ms: Latency {
                p99: Some(p99),
                cdf: vec![[1.0, 0.5], [p99, 0.99]],
                ..Latency::default()
            },
            server: ProcFigures {
                cpu_s_per_million: Some(cpu),
                ..ProcFigures::default()
            },
            ..S1Result::default()
        }
    }

    fn side(name: &str, short: &str, runs: Vec<S1Result>) -> Side {
        Side {
            name: name.into(),
            short: short.into(),
            multiplexing: Multiplexing::default(),
            runs,
        }
    }

    fn compared(w: usize) -> CompareResult {
        let sides = vec![
            side("floor", "floor", vec![run("floor", w, 2.0, 8.0)]),
            side("etcd direct", "etcd", vec![run("etcd", w, 9.0, 12.0)]),
            side("watchd http1", "http1", vec![run("watchd", w, 5.0, 8.8)]),
            side("watchd http2", "http2", vec![run("watchd", w, 4.0, 2.0)]),
        ];
        let shorts: Vec<&str> = sides.iter().map(|s| s.short.as_str()).collect();
        let ratios = baseline_ratios(&shorts);
        CompareResult::with_ratios(sides, ratios)
    }

    #[test]
    fn targets_are_read_against_the_floor_and_etcd() {
        let c = compared(1000);
        let lines = target_lines(&c);
        assert!(
            lines.contains(&"CPU per delivery http1/floor: 1.100x (target <= 1.10x)".into()),
            "{lines:?}"
        );
        assert!(lines.contains(&"CPU per delivery http2/floor: 0.250x (target <= 0.25x)".into()));
        assert!(lines.contains(&"CPU per delivery etcd/floor: 1.500x".into()));
        let md = compare_markdown(&c, "t");
        assert!(
            md.contains(
                "| figure | floor | etcd direct | watchd http1 | watchd http2 | etcd/floor |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| server CPU-s / 1M deliveries | 8.00 | 12.0 | 8.80 | 2.00 | 1.500x |"),
            "{md}"
        );
    }

    #[test]
    fn the_grpc_side_joins_the_markdown_lines_and_plots() {
        let mut c = compared(1000);
        c.sides.push(side(
            "watchd grpc",
            "grpc-watchd",
            vec![run("watchd", 1000, 3.0, 4.0)],
        ));
        let shorts: Vec<&str> = c.sides.iter().map(|s| s.short.as_str()).collect();
        let c = CompareResult::with_ratios(c.sides.clone(), baseline_ratios(&shorts));
        let md = compare_markdown(&c, "t");
        assert!(
            md.contains(
                "| figure | floor | etcd direct | watchd http1 | watchd http2 | watchd grpc | etcd/floor |"
            ),
            "{md}"
        );
        assert!(md.contains(" grpc-watchd/http2 |"), "{md}");
        let lines = target_lines(&c);
        for want in [
            "CPU per delivery grpc-watchd/floor: 0.500x",
            "CPU per delivery grpc-watchd/etcd: 0.333x",
            "CPU per delivery grpc-watchd/http2: 2.000x",
        ] {
            assert!(lines.contains(&want.to_string()), "{want} in {lines:?}");
        }
        let panels = compare_panels(&c, &[]);
        let grpc = panels[1]
            .series
            .iter()
            .find(|s| s.name == "watchd grpc")
            .unwrap();
        assert_eq!((grpc.color, grpc.points.clone()), (4, vec![(1000.0, 4.0)]));
        assert_eq!(panels[0].series.len(), 5);
    }

    #[test]
    fn cpu_lines_join_comparisons_at_several_watcher_counts() {
        let earlier = serde_json::to_value(compared(100)).unwrap();
        let panels = compare_panels(&compared(1000), &[earlier]);
        assert_eq!(panels.len(), 2);
        assert_eq!(panels[0].series.len(), 4);
        assert_eq!(panels[0].series[0].points, [(1.0, 0.5), (2.0, 0.99)]);
        let cpu = &panels[1];
        let floor = cpu.series.iter().find(|s| s.name == "floor").unwrap();
        assert_eq!(floor.points, [(100.0, 8.0), (1000.0, 8.0)]);
        assert_eq!(floor.color, 0);
        let h2 = cpu
            .series
            .iter()
            .find(|s| s.name == "watchd http2")
            .unwrap();
        assert_eq!((h2.color, h2.points.len()), (3, 2));
        assert!(cpu_points(&Value::Null).is_empty());
    }

    #[test]
    fn each_side_keeps_its_colour_by_short_name_or_heading() {
        for (a, b, c) in [
            ("floor", "floor", 0),
            ("etcd", "etcd direct", 1),
            ("http1", "watchd http1", 2),
            ("http2", "watchd http2", 3),
            ("grpc-watchd", "watchd grpc", 4),
        ] {
            assert_eq!((side_color(a), side_color(b)), (c, c));
        }
        assert_eq!(side_color("watchd"), 2);
        assert_eq!(side_color("proxy"), 6);
    }

    #[test]
    fn the_median_run_is_drawn_and_single_runs_have_tables() {
        let runs = [
            run("etcd", 1, 9.0, 1.0),
            run("etcd", 1, 3.0, 1.0),
            run("etcd", 1, 5.0, 1.0),
        ];
        assert_eq!(median_run(&runs).unwrap().latency_ms.p99, Some(5.0));
        assert!(median_run(&[]).is_none());
        let md = single_markdown(&runs[0]);
        assert!(
            md.contains("| server CPU-s / 1M deliveries | 1.00 |"),
            "{md}"
        );
        assert_eq!(single_panels(&runs[0])[1].series[0].points, [(1.0, 1.0)]);
    }
}
