//! `s1-saturate`: at one W, raise the write rate step by step until each
//! side stops holding it, and report the highest rate each held with nothing
//! lost, with CPU per delivery at every step (watchd's should fall as load
//! grows: past saturation it sends several events per write).
//!
//! A step **holds** when all of these are true ([`verdict`]):
//! 1. nothing lost: zero missed, duplicate, reordered or unexpected events,
//!    no failed watcher, no failed write;
//! 2. the writer kept its schedule: no write abandoned and at least 95 % of
//!    the rate acknowledged — a server that slows its own writer (etcd
//!    direct) does not hold the rate; for the floor, the sender's ticks;
//! 3. lag does not grow: every watcher had the last write within `max_lag`
//!    of the writer's last acknowledgement (a backlog growing through the
//!    step would end far behind; one still behind when the drain timeout
//!    ends is reported so, not as lost); for the floor, its last tick
//!    started within `max_lag` of its schedule;
//! 4. p99 delivery latency is bounded: at most `max_p99_ms`.
//!
//! Each step is a fresh run (a fresh etcd, watchd and watchers); in each
//! step the sides run in turn, every other step in reverse order. A side
//! stops after `past_saturation` more steps once a step did not hold.

use serde::Serialize;

use super::artifacts::{latency_panel, side_color};
use super::floor_side::SideRun;
use super::report::{fmt_num, workers_line, Latency, Multiplexing, S1Result};
use crate::plot::{Panel, Series};

/// What a step must satisfy to hold.
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    /// Longest lag at the end of a step, seconds.
    pub max_lag_s: f64,
    /// Largest p99 delivery latency, ms.
    pub max_p99_ms: f64,
    /// Least share of the rate the writer must have acknowledged.
    pub min_write_share: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_lag_s: 1.0,
            max_p99_ms: 1000.0,
            min_write_share: 0.95,
        }
    }
}

/// `Ok` when run `r` at `rate` held, otherwise the first reason it did not.
pub fn verdict(r: &S1Result, rate: f64, lim: &Limits) -> Result<(), String> {
    let a = &r.accounting;
    if !r.caught_up {
        // What has not arrived yet counts as missed: say it is late first.
        return Err(format!(
            "still behind when the drain ended ({} deliveries not received {:.1} s after the last write)",
            a.missed, r.drain_s
        ));
    }
    if a.missed > 0 {
        return Err(format!("lost {} deliveries", a.missed));
    }
    if r.watchers_failed > 0 {
        return Err(format!("{} watchers failed", r.watchers_failed));
    }
    if a.duplicates + a.out_of_order + a.unexpected > 0 || r.error_events > 0 {
        return Err("duplicate, reordered, unexpected or ERROR events".into());
    }
    if r.writes.failed > 0 {
        return Err(format!("{} writes failed", r.writes.failed));
    }
    let achieved = r.writes.achieved_per_sec;
    if r.writes.abandoned > 0 || achieved < lim.min_write_share * rate {
        return Err(format!(
            "writes fell behind: {achieved:.1}/s of {rate}/s, {} abandoned",
            r.writes.abandoned
        ));
    }
    if r.drain_s > lim.max_lag_s {
        return Err(format!(
            "lag at the end {:.2} s > {} s",
            r.drain_s, lim.max_lag_s
        ));
    }
    match r.latency_ms.p99 {
        Some(p99) if p99 <= lim.max_p99_ms => Ok(()),
        Some(p99) => Err(format!("p99 {p99:.0} ms > {} ms", lim.max_p99_ms)),
        None => Err("no delivery latency measured".into()),
    }
}

/// Rates from `start`, each `factor` times the last, up to `max` (at most
/// [`MAX_STEPS`]).
pub fn ladder(start: f64, factor: f64, max: f64) -> Result<Vec<f64>, String> {
    if !(start > 0.0 && factor > 1.0 && max >= start) {
        return Err("--start-rate > 0, --rate-factor > 1 and --max-rate >= --start-rate".into());
    }
    let mut v = Vec::new();
    let mut r = start;
    while r <= max * (1.0 + 1e-9) && v.len() < MAX_STEPS {
        v.push((r * 1000.0).round() / 1000.0);
        r *= factor;
    }
    Ok(v)
}

/// The most steps a ladder may have.
pub const MAX_STEPS: usize = 16;

/// One step of one side.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// Writes (events per watcher) per second asked for.
    pub rate: f64,
    /// Whether it held (see the module documentation).
    pub held: bool,
    /// Why not.
    pub why_not: Option<String>,
    /// The run (default when it could not run at all).
    pub result: S1Result,
}

/// Every step of one side.
#[derive(Clone, Debug, Serialize)]
pub struct SideSteps {
    /// Column heading (`floor`, `etcd direct`, `watchd http2`).
    pub name: String,
    /// Short name (`floor`, `etcd`, `http1`, `http2`).
    pub short: String,
    /// How its streams are carried.
    pub multiplexing: Multiplexing,
    /// In the order run.
    pub steps: Vec<Step>,
    /// The highest rate held.
    pub highest_held: Option<f64>,
}

/// A saturation run.
#[derive(Clone, Debug, Serialize)]
pub struct SaturateResult {
    /// Always `s1-saturate`.
    pub scenario: String,
    /// Watchers.
    pub watchers: usize,
    /// Length of each step's write phase, seconds.
    pub step_s: f64,
    /// What a step must satisfy to hold.
    pub limits: Limits,
    /// The sides.
    pub sides: Vec<SideSteps>,
}

/// One side to saturate.
#[derive(Clone, Debug)]
pub struct SideSpec {
    /// Heading.
    pub name: String,
    /// Short name.
    pub short: String,
    /// Its run, at any rate (the rate is set per step).
    pub run: SideRun,
}

/// Runs the ladder on every side (see the module documentation).
pub async fn run(
    specs: &[SideSpec],
    rates: &[f64],
    limits: &Limits,
    past_saturation: usize,
    watchers: usize,
    step_s: f64,
) -> SaturateResult {
    let mut sides: Vec<SideSteps> = specs
        .iter()
        .map(|s| SideSteps {
            name: s.name.clone(),
            short: s.short.clone(),
            multiplexing: s.run.multiplexing(),
            steps: Vec::new(),
            highest_held: None,
        })
        .collect();
    let mut failures = vec![0usize; specs.len()];
    for (i, &rate) in rates.iter().enumerate().take(MAX_STEPS) {
        let mut order: Vec<usize> = (0..specs.len())
            .filter(|&k| failures[k] <= past_saturation)
            .collect();
        if order.is_empty() {
            break;
        }
        if i % 2 == 1 {
            order.reverse();
        }
        for k in order {
            tracing::info!(side = %specs[k].name, rate, watchers, "saturation step");
            let (result, held) = match specs[k].run.at_rate(rate).run().await {
                Ok(r) => {
                    let v = verdict(&r, rate, limits);
                    (r, v)
                }
                Err(e) => (S1Result::default(), Err(e)),
            };
            let s = &mut sides[k];
            if held.is_ok() {
                s.highest_held = Some(s.highest_held.map_or(rate, |h: f64| h.max(rate)));
            } else {
                failures[k] += 1;
            }
            tracing::info!(side = %s.name, rate, held = held.is_ok(), why_not = ?held.as_ref().err(), "step done");
            s.steps.push(Step {
                rate,
                held: held.is_ok(),
                why_not: held.err(),
                result,
            });
        }
    }
    SaturateResult {
        scenario: "s1-saturate".into(),
        watchers,
        step_s,
        limits: limits.clone(),
        sides,
    }
}

/// A step's figures for the tables: label and value.
fn step_cells(s: &Step, w: usize) -> [String; 10] {
    let r = &s.result;
    let n = |v: Option<f64>| fmt_num(v);
    [
        fmt_num(Some(s.rate)),
        fmt_num(Some(s.rate * w as f64)),
        if s.held { "yes".into() } else { "no".into() },
        n(Some(r.delivered_per_sec)),
        n(r.server.cpu_s_per_million),
        n(r.generator.cpu_s_per_million),
        n(r.server.user_share().map(|u| u * 100.0)),
        n(r.latency_ms.p50),
        n(r.latency_ms.p99),
        n(Some(r.drain_s)),
    ]
}

const HEADERS: [&str; 10] = [
    "writes/s",
    "offered/s",
    "held",
    "delivered/s",
    "CPU-s / 1M",
    "gen CPU / 1M",
    "user %",
    "p50 ms",
    "p99 ms",
    "lag at end s",
];

/// The heading of a saturation result.
pub fn title(r: &SaturateResult) -> String {
    format!(
        "S1 saturation: {} watchers, {} s per step; held = nothing lost, writes on schedule, lag at end <= {} s, p99 <= {} ms",
        r.watchers, r.step_s, r.limits.max_lag_s, r.limits.max_p99_ms
    )
}

/// The highest rate each side held, one line each.
pub fn summary(r: &SaturateResult) -> Vec<String> {
    r.sides
        .iter()
        .map(|s| match s.highest_held {
            Some(h) => format!(
                "{}: held up to {h} writes/s ({} deliveries/s), 0 lost",
                s.name,
                fmt_num(Some(h * r.watchers as f64))
            ),
            None => format!("{}: held no step", s.name),
        })
        .collect()
}

/// The tokio workers of the steps run.
fn workers(r: &SaturateResult) -> Option<String> {
    workers_line(
        r.sides
            .iter()
            .flat_map(|s| s.steps.iter().map(|st| &st.result)),
    )
}

/// The text table: each side's steps, then the summary.
pub fn table(r: &SaturateResult) -> String {
    let mut out = format!("{}\n", title(r));
    if let Some(w) = workers(r) {
        out.push_str(&format!("  {w}\n"));
    }
    for s in &r.sides {
        out.push_str(&format!("  {} ({})\n   ", s.name, s.multiplexing));
        for h in HEADERS {
            out.push_str(&format!(" {h:>12}"));
        }
        out.push('\n');
        for st in &s.steps {
            out.push_str("   ");
            for c in step_cells(st, r.watchers) {
                out.push_str(&format!(" {c:>12}"));
            }
            if let Some(w) = &st.why_not {
                out.push_str(&format!("  ({w})"));
            }
            out.push('\n');
        }
    }
    for l in summary(r) {
        out.push_str(&format!("  {l}\n"));
    }
    out
}

/// The Markdown: one table per side, then the summary.
pub fn markdown(r: &SaturateResult) -> String {
    let mut out = format!("### {}\n\n", title(r));
    if let Some(w) = workers(r) {
        out.push_str(&format!("{w}\n\n"));
    }
    for s in &r.sides {
        out.push_str(&format!("#### {} ({})\n\n|", s.name, s.multiplexing));
        for h in HEADERS {
            out.push_str(&format!(" {h} |"));
        }
        out.push_str(" why not |\n|");
        out.push_str(&"---|".repeat(HEADERS.len() + 1));
        out.push('\n');
        for st in &s.steps {
            out.push('|');
            for c in step_cells(st, r.watchers) {
                out.push_str(&format!(" {c} |"));
            }
            out.push_str(&format!(" {} |\n", st.why_not.as_deref().unwrap_or("")));
        }
        out.push('\n');
    }
    for l in summary(r) {
        out.push_str(&format!("- {l}\n"));
    }
    out
}

/// The panels: each side's latency CDF at its highest held step (else its
/// first), CPU per delivery against the write rate (crosses: not held), and
/// p99 against the rate.
pub fn panels(r: &SaturateResult) -> Vec<Panel> {
    let shown: Vec<(String, &Latency)> = r
        .sides
        .iter()
        .filter_map(|s| {
            let st = s.steps.iter().rfind(|st| st.held).or(s.steps.first())?;
            Some((s.name.clone(), &st.result.latency_ms))
        })
        .collect();
    let mut lat = latency_panel(&shown);
    lat.title = "delivery latency at the highest step held (CDF)".into();
    let by_rate = |title: &str, y: &str, log_y, f: &dyn Fn(&S1Result) -> Option<f64>| {
        let mut series = Vec::new();
        for s in &r.sides {
            let color = side_color(&s.short);
            let pts = |held: Option<bool>| -> Vec<(f64, f64)> {
                s.steps
                    .iter()
                    .filter(|st| held.is_none_or(|h| st.held == h))
                    .filter_map(|st| f(&st.result).map(|v| (st.rate, v)))
                    .collect()
            };
            series.push(Series {
                name: s.name.clone(),
                points: pts(None),
                color,
                line: true,
                ..Series::default()
            });
            let missed = pts(Some(false));
            if !missed.is_empty() {
                series.push(Series {
                    name: format!("{} not held", s.name),
                    points: missed,
                    color,
                    cross: true,
                    ..Series::default()
                });
            }
        }
        Panel {
            title: title.into(),
            x_label: "writes per second (log)".into(),
            y_label: y.into(),
            log_x: true,
            log_y,
            series,
        }
    };
    vec![
        lat,
        by_rate(
            "server CPU per delivery",
            "CPU-s / 1M deliveries",
            false,
            &|x| x.server.cpu_s_per_million,
        ),
        by_rate("p99 delivery latency", "p99, ms (log)", true, &|x| {
            x.latency_ms.p99
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s1::report::ProcFigures;
    use crate::s1::writer::WriteStats;
    use crate::stats::Accounting;

    fn good(rate: f64) -> S1Result {
        S1Result {
            watchers: 10,
            caught_up: true,
            drain_s: 0.01,
            writes: WriteStats {
                planned: 100,
                ok: 100,
                achieved_per_sec: rate * 0.99,
                ..WriteStats::default()
            },
            latency_ms: Latency {
                p99: Some(20.0),
                ..Latency::default()
            },
            server: ProcFigures {
                cpu_s_per_million: Some(8.0 / rate),
                ..ProcFigures::default()
            },
            accounting: Accounting {
                delivered: 1000,
                ..Accounting::default()
            },
            ..S1Result::default()
        }
    }

    #[test]
    fn a_step_holds_only_when_nothing_is_lost_late_or_slow() {
        let lim = Limits::default();
        assert_eq!(verdict(&good(100.0), 100.0, &lim), Ok(()));
        let bad = |f: &dyn Fn(&mut S1Result)| {
            let mut r = good(100.0);
            f(&mut r);
            verdict(&r, 100.0, &lim).unwrap_err()
        };
        assert!(bad(&|r| r.accounting.missed = 3).contains("lost 3"));
        assert!(bad(&|r| r.watchers_failed = 1).contains("watchers failed"));
        assert!(bad(&|r| r.accounting.duplicates = 1).contains("duplicate"));
        assert!(bad(&|r| r.writes.achieved_per_sec = 90.0).contains("90.0/s of 100/s"));
        assert!(bad(&|r| r.writes.abandoned = 2).contains("2 abandoned"));
        assert!(bad(&|r| r.drain_s = 3.5).contains("lag at the end 3.50 s"));
        let behind = bad(&|r| {
            r.caught_up = false;
            r.accounting.missed = 40;
        });
        assert!(
            behind.contains("still behind") && behind.contains("40 deliveries"),
            "{behind}"
        );
        assert!(bad(&|r| r.latency_ms.p99 = Some(1500.0)).contains("p99 1500 ms"));
        assert!(bad(&|r| r.latency_ms.p99 = None).contains("no delivery latency"));
    }

    #[test]
    fn ladders_are_geometric_and_bounded() {
        assert_eq!(ladder(10.0, 2.0, 80.0).unwrap(), [10.0, 20.0, 40.0, 80.0]);
        assert_eq!(ladder(10.0, 1.5, 40.0).unwrap(), [10.0, 15.0, 22.5, 33.75]);
        assert_eq!(ladder(1.0, 1.01, 1e9).unwrap().len(), MAX_STEPS);
        assert!(ladder(0.0, 2.0, 10.0).is_err());
        assert!(ladder(10.0, 1.0, 100.0).is_err());
        assert!(ladder(10.0, 2.0, 5.0).is_err());
    }

    #[test]
    fn tables_and_panels_show_every_step() {
        let step = |rate: f64, held: bool| Step {
            rate,
            held,
            why_not: (!held).then(|| "p99 2000 ms > 1000 ms".to_string()),
            result: good(rate),
        };
        let side = |name: &str, short: &str, steps| SideSteps {
            name: name.into(),
            short: short.into(),
            multiplexing: Multiplexing::default(),
            steps,
            highest_held: Some(20.0),
        };
        let r = SaturateResult {
            scenario: "s1-saturate".into(),
            watchers: 10,
            step_s: 10.0,
            limits: Limits::default(),
            sides: vec![
                side("floor", "floor", vec![step(10.0, true), step(20.0, true)]),
                side(
                    "watchd http2",
                    "http2",
                    vec![step(10.0, true), step(20.0, true), step(40.0, false)],
                ),
            ],
        };
        let t = table(&r);
        assert!(
            t.contains("watchd http2: held up to 20 writes/s (200 deliveries/s), 0 lost"),
            "{t}"
        );
        assert!(t.contains("(p99 2000 ms > 1000 ms)"), "{t}");
        let md = markdown(&r);
        assert!(md.contains("| 40.0 | 400 | no |"), "{md}");
        let p = panels(&r);
        assert_eq!(p.len(), 3);
        let cpu = &p[1];
        assert_eq!(cpu.series.len(), 3, "two lines and the not-held crosses");
        assert_eq!(cpu.series[2].points, [(40.0, 0.2)]);
        assert!(cpu.series[2].cross && cpu.series[2].color == 3);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["sides"][1]["steps"][2]["held"], false);
        assert_eq!(v["limits"]["max_lag_s"], 1.0);
    }
}
