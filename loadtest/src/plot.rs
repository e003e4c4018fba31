//! PNG plots written beside the results: panels of lines and markers, side
//! by side, drawn with plotters' bitmap backend.
//!
//! Text needs a font: plotters' `ab_glyph` renderer, fed a TrueType file
//! read at run time — DejaVu Sans from Debian's `fonts-dejavu-core` (a
//! capability `scripts/install-deps.sh` checks), or the file named by
//! `$WATCHD_LOADTEST_FONT`. No fontconfig, no system library. Without a
//! font the plot is skipped with a warning; the JSON and Markdown results
//! never depend on it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Where the font is looked for (Debian's `fonts-dejavu-core`).
pub const DEJAVU_SANS: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// Environment variable naming another TrueType font file.
pub const FONT_ENV: &str = "WATCHD_LOADTEST_FONT";
/// The family name the font is registered under.
const FAMILY: &str = "sans-serif";
/// Size of one panel, pixels.
const PANEL: (u32, u32) = (720, 540);

/// One line (and/or its markers) on a panel.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Legend.
    pub name: String,
    /// (x, y) points, in the order drawn.
    pub points: Vec<(f64, f64)>,
    /// Index into the palette: series of one side share it.
    pub color: usize,
    /// Join the points with a line (otherwise markers only).
    pub line: bool,
    /// Crosses instead of dots (e.g. steps that were not held).
    pub cross: bool,
}

/// One chart.
#[derive(Clone, Debug, Default)]
pub struct Panel {
    /// Caption.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// What is drawn.
    pub series: Vec<Series>,
}

/// `out` with its extension replaced by `ext` (`s1.json` → `s1.png`).
pub fn beside(out: &Path, ext: &str) -> PathBuf {
    out.with_extension(ext)
}

/// Registers the font once; the error says where it was looked for.
fn font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let path = std::env::var(FONT_ENV).unwrap_or_else(|_| DEJAVU_SANS.to_string());
            let bytes = std::fs::read(&path).map_err(|e| {
                format!(
                    "no font for the plot: {path}: {e} (install fonts-dejavu-core, see \
                     scripts/install-deps.sh, or set {FONT_ENV})"
                )
            })?;
            // Registered for the life of the process, as plotters requires.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
                .map_err(|_| format!("{path} is not a TrueType font"))
        })
        .clone()
}

/// The range of one axis over the points of every series, padded; on a log
/// axis only positive values count.
fn axis_range(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return if log { (0.1, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        return if lo == hi {
            (lo / 2.0, hi * 2.0)
        } else {
            (lo / 1.3, hi * 1.3)
        };
    }
    if from_zero && lo >= 0.0 {
        lo = 0.0;
    }
    let pad = if hi > lo {
        (hi - lo) * 0.05
    } else {
        hi.abs().max(1.0) * 0.5
    };
    (if lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
}

fn colour(i: usize) -> RGBColor {
    const COLOURS: [RGBColor; 8] = [
        RGBColor(0, 0, 0),
        RGBColor(214, 39, 40),
        RGBColor(31, 119, 180),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(23, 190, 207),
    ];
    COLOURS[i % COLOURS.len()]
}

/// An axis tick: whole numbers from 100 up, at most 3 significant digits
/// below (`20000`, `12.5`, `0.25`).
fn tick(v: &f64) -> String {
    let v = *v;
    let s = if v.abs() >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn err(e: impl std::fmt::Display) -> String {
    format!("plot: {e}")
}

/// Draws `p` on `area` with the coordinate ranges `x` and `y`.
fn draw<DB, X, Y>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    p: &Panel,
    x: X,
    y: Y,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .label_style((FAMILY, 14))
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    for s in &p.series {
        let c = colour(s.color);
        let pts = s.points.iter().copied().filter(|&(a, b)| {
            a.is_finite() && b.is_finite() && (!p.log_x || a > 0.0) && (!p.log_y || b > 0.0)
        });
        let pts: Vec<(f64, f64)> = pts.collect();
        if s.line && pts.len() > 1 {
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(err)?;
        }
        // A dense line (a distribution) needs no markers; sparse points do.
        let pts = if s.line && pts.len() > 20 {
            Vec::new()
        } else {
            pts
        };
        let drawn = if s.cross {
            chart.draw_series(pts.iter().map(|&q| Cross::new(q, 5, c.stroke_width(2))))
        } else {
            chart.draw_series(pts.iter().map(|&q| Circle::new(q, 3, c.filled())))
        }
        .map_err(err)?;
        let cross = s.cross;
        drawn.label(s.name.as_str()).legend(move |(lx, ly)| {
            if cross {
                Cross::new((lx + 8, ly), 5, c.stroke_width(2)).into_dyn()
            } else {
                PathElement::new(vec![(lx, ly), (lx + 16, ly)], c.stroke_width(2)).into_dyn()
            }
        });
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(150, 150, 150))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)
}

/// Draws one panel, choosing its coordinate types.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    p: &Panel,
) -> Result<(), String> {
    let xs = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.0));
    let ys = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.1));
    let (x0, x1) = axis_range(xs, p.log_x, false);
    let (y0, y1) = axis_range(ys, p.log_y, true);
    let lin = |a: f64, b: f64| -> RangedCoordf64 { (a..b).into() };
    match (p.log_x, p.log_y) {
        (false, false) => draw(area, p, lin(x0, x1), lin(y0, y1)),
        (true, false) => draw(area, p, (x0..x1).log_scale(), lin(y0, y1)),
        (false, true) => draw(area, p, lin(x0, x1), (y0..y1).log_scale()),
        (true, true) => draw(area, p, (x0..x1).log_scale(), (y0..y1).log_scale()),
    }
}

/// Writes `panels` side by side under `title` as a PNG at `path`.
pub fn write_png(path: &Path, title: &str, panels: &[Panel]) -> Result<(), String> {
    font()?;
    let n = panels.len().max(1) as u32;
    let size = (PANEL.0 * n, PANEL.1 + 40);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FAMILY, 16)).map_err(err)?;
    let areas = root.split_evenly((1, n as usize));
    for (area, p) in areas.iter().zip(panels) {
        panel(area, p)?;
    }
    root.present()
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Writes the Markdown beside `out` and the PNG (a missing font or a plot
/// error is a warning: the results themselves are already written).
pub fn write_beside(
    out: &Path,
    markdown: &str,
    title: &str,
    panels: &[Panel],
) -> Result<(), String> {
    let md = beside(out, "md");
    std::fs::write(&md, markdown).map_err(|e| format!("{}: {e}", md.display()))?;
    println!("table written to {}", md.display());
    let png = beside(out, "png");
    match write_png(&png, title, panels) {
        Ok(()) => println!("plot written to {}", png.display()),
        Err(e) => tracing::warn!("{e}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_pad_and_respect_log_axes() {
        assert_eq!(axis_range([1.0, 3.0].into_iter(), false, true), (0.0, 3.15));
        let (lo, hi) = axis_range([10.0, 1000.0, -1.0, 0.0].into_iter(), true, false);
        assert!((lo - 10.0 / 1.3).abs() < 1e-9 && (hi - 1300.0).abs() < 1e-9);
        assert_eq!(axis_range([5.0].into_iter(), true, false), (2.5, 10.0));
        assert_eq!(axis_range(std::iter::empty(), true, false), (0.1, 10.0));
        assert_eq!(axis_range([f64::NAN].into_iter(), false, true), (0.0, 1.0));
        assert_eq!(beside(Path::new("a/b.json"), "png"), Path::new("a/b.png"));
        let ticks: Vec<String> = [20000.0, 100.0, 12.5, 10.0, 2.0, 0.25, 0.0]
            .iter()
            .map(tick)
            .collect();
        assert_eq!(ticks, ["20000", "100", "12.5", "10", "2", "0.25", "0"]);
    }

    #[test]
    fn a_png_is_written_when_the_font_is_there() {
        if !Path::new(DEJAVU_SANS).is_file() && std::env::var(FONT_ENV).is_err() {
            eprintln!("skipped: no {DEJAVU_SANS} (fonts-dejavu-core)");
            return;
        }
        let dir = std::env::temp_dir().join(format!("plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.png");
        let p = |log_x, log_y| Panel {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x,
            log_y,
            series: vec![
                Series {
                    name: "a".into(),
                    points: vec![(1.0, 2.0), (10.0, 3.0)],
                    line: true,
                    ..Series::default()
                },
                Series {
                    name: "b".into(),
                    points: vec![(5.0, 1.0)],
                    color: 1,
                    cross: true,
                    ..Series::default()
                },
            ],
        };
        let panels = [
            p(false, false),
            p(true, false),
            p(false, true),
            p(true, true),
        ];
        write_png(&path, "test", &panels).expect("drawn");
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
