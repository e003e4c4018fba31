//! The result every scenario from S2 on writes: a list of figures, each
//! beside its baseline (when the brief names one) with the ratio and the
//! target, printed as a table, written as JSON and as a Markdown table of
//! the same figures.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::procstat;
use crate::s1::report::{fmt_num, Latency};
use crate::stats::Histogram;

/// Latency figures (milliseconds) of a histogram of microseconds.
pub fn latency_ms(h: &Histogram) -> Latency {
    Latency::from_histogram(h)
}

/// One figure, with its baseline and target when there is one.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Figure {
    /// What is measured, with its unit (`watchd CPU-µs / event`).
    pub name: String,
    /// The value measured (`None`: could not be measured).
    pub value: Option<f64>,
    /// What the baseline is (`W = 50`, `etcd direct`).
    pub baseline_name: Option<String>,
    /// The baseline's value, measured in the same invocation.
    pub baseline: Option<f64>,
    /// `value / baseline` (`None` without a baseline or against zero).
    pub ratio: Option<f64>,
    /// The brief's target, as text (`ratio <= 1.5`, `< 2 s`).
    pub target: Option<String>,
    /// Whether the target is met (`None`: no target, or not measured).
    pub met: Option<bool>,
}

impl Figure {
    /// A figure without baseline or target.
    pub fn new(name: impl Into<String>, value: Option<f64>) -> Self {
        Self {
            name: name.into(),
            value,
            ..Self::default()
        }
    }

    /// Sets the baseline and computes the ratio.
    pub fn against(mut self, baseline_name: impl Into<String>, baseline: Option<f64>) -> Self {
        self.baseline_name = Some(baseline_name.into());
        self.baseline = baseline;
        self.ratio = ratio(self.value, baseline);
        self
    }

    /// Sets the target text and whether it is met (`None`: not measured).
    pub fn target(mut self, text: impl Into<String>, met: Option<bool>) -> Self {
        self.target = Some(text.into());
        self.met = met;
        self
    }
}

/// `value / baseline` when both are known and the baseline is not zero.
pub fn ratio(value: Option<f64>, baseline: Option<f64>) -> Option<f64> {
    match (value, baseline) {
        (Some(v), Some(b)) if b != 0.0 && v.is_finite() && b.is_finite() => Some(v / b),
        _ => None,
    }
}

/// The machine during a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MachineInfo {
    /// Online CPUs.
    pub cpus: usize,
    /// 1-minute load average when the run started.
    pub loadavg_1m_start: Option<f64>,
    /// Busy share of all CPUs over the whole run (0..=1).
    pub busy_share: Option<f64>,
}

/// Machine readings at the start of a run, to close with [`MachineStart::end`].
#[derive(Clone, Copy, Debug)]
pub struct MachineStart {
    loadavg: Option<f64>,
    ticks: Option<procstat::MachineTicks>,
}

impl MachineStart {
    /// Reads the load average and CPU counters now.
    pub fn now() -> Self {
        Self {
            loadavg: procstat::loadavg_1m(),
            ticks: procstat::machine_ticks(),
        }
    }

    /// The machine figures from the start until now.
    pub fn end(&self) -> MachineInfo {
        MachineInfo {
            cpus: procstat::cpus(),
            loadavg_1m_start: self.loadavg,
            busy_share: self
                .ticks
                .zip(procstat::machine_ticks())
                .and_then(|(a, b)| procstat::busy_share(a, b)),
        }
    }
}

/// The result of one scenario run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// `s2` ... `s7`.
    pub scenario: String,
    /// One line saying what ran.
    pub title: String,
    /// The settings used (the flags, resolved).
    pub settings: Value,
    /// The figures, in the order shown.
    pub figures: Vec<Figure>,
    /// What a reader must know to read the figures (scaling, bounds).
    pub notes: Vec<String>,
    /// Whether nothing was lost, failed or came out wrong.
    pub clean: bool,
    /// The scenario's own measurements in full (per phase).
    pub details: Value,
    /// The machine.
    pub machine: MachineInfo,
    /// Seconds the whole run took, setup included.
    pub elapsed_s: f64,
}

impl Report {
    /// The table printed on the terminal.
    pub fn table(&self) -> String {
        let mut out = format!("{}\n", self.title);
        out.push_str(&format!(
            "  {:<46} {:>12} {:>12} {:>9}  {:<22} {}\n",
            "figure", "value", "baseline", "ratio", "baseline is", "target"
        ));
        for f in &self.figures {
            out.push_str(&format!(
                "  {:<46} {:>12} {:>12} {:>9}  {:<22} {}\n",
                f.name,
                fmt_num(f.value),
                fmt_num(f.baseline),
                fmt_ratio(f.ratio),
                f.baseline_name.as_deref().unwrap_or("-"),
                target_text(f)
            ));
        }
        for n in &self.notes {
            out.push_str(&format!("  note: {n}\n"));
        }
        out.push_str(&format!(
            "  clean: {}; {} cpus, load {} at start, machine {}% busy; {:.0} s in all\n",
            self.clean,
            self.machine.cpus,
            fmt_num(self.machine.loadavg_1m_start),
            fmt_num(self.machine.busy_share.map(|b| b * 100.0)),
            self.elapsed_s
        ));
        out
    }

    /// The same figures as a Markdown table, with the title and notes.
    pub fn markdown(&self) -> String {
        let mut out = format!("### {}\n\n", self.title);
        out.push_str("| figure | value | baseline | ratio | baseline is | target |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for f in &self.figures {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                f.name,
                fmt_num(f.value),
                fmt_num(f.baseline),
                fmt_ratio(f.ratio),
                f.baseline_name.as_deref().unwrap_or("–"),
                target_text(f)
            ));
        }
        out.push('\n');
        for n in &self.notes {
            out.push_str(&format!("- {n}\n"));
        }
        out.push_str(&format!(
            "- clean: {}; {} cpus, load {} at start, machine {} % busy; {:.0} s in all\n",
            self.clean,
            self.machine.cpus,
            fmt_num(self.machine.loadavg_1m_start),
            fmt_num(self.machine.busy_share.map(|b| b * 100.0)),
            self.elapsed_s
        ));
        out
    }

    /// Writes the JSON to `path`, the Markdown beside it (same name, `.md`) and the
    /// PNG of the ratios (`.png`; a missing font is a warning); returns the
    /// Markdown's path.
    pub fn write(&self, path: &Path) -> Result<PathBuf, String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        let md = markdown_path(path);
        std::fs::write(&md, self.markdown()).map_err(|e| format!("{}: {e}", md.display()))?;
        match super::plot::draw_from_json(path) {
            Ok(png) => println!("plot written to {}", png.display()),
            Err(e) => tracing::warn!("{e}"),
        }
        Ok(md)
    }
}

/// `x.json` → `x.md` (a path without extension gets `.md` added).
pub fn markdown_path(json: &Path) -> PathBuf {
    json.with_extension("md")
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("-".to_string(), |x| format!("{x:.3}x"))
}

fn target_text(f: &Figure) -> String {
    match (&f.target, f.met) {
        (None, _) => String::new(),
        (Some(t), Some(true)) => format!("{t} (met)"),
        (Some(t), Some(false)) => format!("{t} (NOT met)"),
        (Some(t), None) => t.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            scenario: "s2".into(),
            title: "S2 node-scoped".into(),
            settings: serde_json::json!({"watchers": 5000}),
            figures: vec![
                Figure::new("watchd CPU-µs / event", Some(30.0))
                    .against("W = 50", Some(20.0))
                    .target("ratio <= 1.5", Some(true)),
                Figure::new("missed", Some(0.0)),
                Figure::new("p99 (ms)", None).against("etcd", Some(0.0)),
            ],
            notes: vec!["scaled".into()],
            clean: true,
            ..Report::default()
        }
    }

    #[test]
    fn ratios_need_both_sides_and_a_nonzero_baseline() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(Some(3.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(2.0)), None);
        assert_eq!(ratio(Some(f64::NAN), Some(2.0)), None);
        let f = Figure::new("x", Some(1.0)).against("b", Some(4.0));
        assert_eq!(f.ratio, Some(0.25));
        assert_eq!(f.baseline_name.as_deref(), Some("b"));
    }

    #[test]
    fn table_markdown_and_json_hold_the_same_figures() {
        let r = report();
        let t = r.table();
        assert!(
            t.contains("1.500x") && t.contains("ratio <= 1.5 (met)"),
            "{t}"
        );
        let md = r.markdown();
        assert!(
            md.contains(
                "| watchd CPU-µs / event | 30.0 | 20.0 | 1.500x | W = 50 | ratio <= 1.5 (met) |"
            ),
            "{md}"
        );
        assert!(md.contains("| missed | 0 | - | - | – |  |"), "{md}");
        assert!(md.contains("- scaled"));
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "scenario",
            "title",
            "settings",
            "figures",
            "notes",
            "clean",
            "details",
            "machine",
            "elapsed_s",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        assert_eq!(v["figures"][0]["ratio"], 1.5);
        assert_eq!(v["figures"][0]["met"], true);
        assert_eq!(v["figures"][2]["ratio"], Value::Null);
        let dir = std::env::temp_dir().join(format!("report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let md_path = r.write(&dir.join("s2.json")).unwrap();
        assert_eq!(md_path, dir.join("s2.md"));
        let back: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("s2.json")).unwrap()).unwrap();
        assert_eq!(back["figures"].as_array().map(Vec::len), Some(3));
        assert_eq!(std::fs::read_to_string(md_path).unwrap(), md);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
