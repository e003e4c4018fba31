//! The PNG of a scenario result (S2 … S7): every figure that has a baseline, as its
//! ratio to that baseline on a log axis, one marker per figure (named in the legend),
//! with the baseline's line at 1 — the table's ratios at a glance. Drawn when a result
//! is written, and again from a written JSON by `watchd-loadtest plot`.

use std::path::Path;

use serde_json::Value;

use crate::plot::{self, Panel, Series};

/// The panel of `(figure name, ratio)` pairs, under `title`.
pub fn ratio_panel(title: &str, ratios: &[(String, f64)]) -> Panel {
    let mut series: Vec<Series> = ratios
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| r.is_finite() && *r > 0.0)
        .map(|(i, (name, r))| Series {
            name: format!("{name}: {r:.3}x"),
            points: vec![(i as f64 + 1.0, *r)],
            color: i,
            line: false,
            cross: false,
        })
        .collect();
    series.push(Series {
        name: "baseline (ratio 1)".into(),
        points: vec![(0.5, 1.0), (ratios.len() as f64 + 0.5, 1.0)],
        color: 0,
        line: true,
        cross: false,
    });
    Panel {
        title: title.to_string(),
        x_label: "figure (see legend)".into(),
        y_label: "value / baseline".into(),
        log_x: false,
        log_y: true,
        series,
    }
}

/// The `(name, ratio)` of every figure of a result's JSON that has one.
pub fn ratios_of(result: &Value) -> Vec<(String, f64)> {
    result["figures"]
        .as_array()
        .map(|figures| {
            figures
                .iter()
                .filter_map(|f| Some((f["name"].as_str()?.to_string(), f["ratio"].as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Draws the PNG of the result JSON at `json` beside it (`x.json` → `x.png`).
pub fn draw_from_json(json: &Path) -> Result<std::path::PathBuf, String> {
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))?;
    let title = v["title"]
        .as_str()
        .or_else(|| v["scenario"].as_str())
        .unwrap_or("result");
    let ratios = ratios_of(&v);
    if ratios.is_empty() {
        return Err(format!(
            "{}: no figure with a baseline to draw",
            json.display()
        ));
    }
    let png = plot::beside(json, "png");
    plot::write_png(&png, title, &[ratio_panel("against the baseline", &ratios)])?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_with_ratios_become_markers_beside_the_baseline_line() {
        let v = serde_json::json!({"figures": [
            {"name": "CPU / event", "ratio": 1.2},
            {"name": "no baseline", "ratio": null},
            {"name": "RSS", "ratio": 0.5},
        ]});
        let ratios = ratios_of(&v);
        assert_eq!(ratios, [("CPU / event".into(), 1.2), ("RSS".into(), 0.5)]);
        let p = ratio_panel("t", &ratios);
        assert_eq!(p.series.len(), 3);
        assert_eq!(p.series[0].points, [(1.0, 1.2)]);
        assert!(p.series[0].name.contains("1.200x"));
        assert_eq!(p.series[2].points, [(0.5, 1.0), (2.5, 1.0)]);
        assert!(p.log_y);
    }
}
