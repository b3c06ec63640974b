//! Figures as PNG or SVG files: a small, generic layer over `plotters`.
//!
//! A [`Figure`] is a title and a grid of [`Panel`]s; a panel holds [`Series`] (lines, dashed lines
//! or points, each optionally with a shaded band) on linear or logarithmic y axes. [`render`]
//! writes it as PNG or SVG by the file's extension. Text is drawn with DejaVu Sans embedded in the
//! binary (`assets/fonts/`), so PNGs render on machines without system fonts.
//!
//! Non-finite points (and, on log axes, non-positive values) are skipped: a line is broken there.
//! Empty series still get a legend entry; a panel without any finite point is drawn with unit axes.
//!
//! `pandora plot` uses this module for a study's figure; the experiment harness uses it for regret
//! curves (median with a quartile band, mean ± 2 s.e.).

// Parts of the API (dashed lines, legend positions, fixed colors) serve the experiment harness.
#![allow(dead_code)]

use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// A solid line through the points.
    #[default]
    Line,
    /// A dashed line through the points.
    Dashed,
    /// A marker at every point.
    Points,
}

/// Where a panel's legend goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Legend {
    /// Upper right corner.
    #[default]
    UpperRight,
    /// Upper left corner.
    UpperLeft,
    /// Lower right corner.
    LowerRight,
    /// Lower left corner.
    LowerLeft,
    /// No legend.
    Hidden,
}

/// One named data series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Abscissae.
    pub x: Vec<f64>,
    /// Ordinates (same length as `x`).
    pub y: Vec<f64>,
    /// A shaded band `(lower, upper)` around the series (same length as `x`).
    pub band: Option<(Vec<f64>, Vec<f64>)>,
    /// Line or points.
    pub style: Style,
    /// Palette index (series with the same index share a color); default: the series' position
    /// in its panel.
    pub color: Option<usize>,
}

impl Series {
    /// A solid line.
    pub fn line(name: impl Into<String>, x: Vec<f64>, y: Vec<f64>) -> Self {
        Self {
            name: name.into(),
            x,
            y,
            ..Self::default()
        }
    }

    /// Markers at the points.
    pub fn points(name: impl Into<String>, x: Vec<f64>, y: Vec<f64>) -> Self {
        Self {
            style: Style::Points,
            ..Self::line(name, x, y)
        }
    }

    /// The same series with a shaded band `(lower, upper)`.
    pub fn with_band(mut self, lower: Vec<f64>, upper: Vec<f64>) -> Self {
        self.band = Some((lower, upper));
        self
    }

    /// The same series drawn in palette color `index`.
    pub fn with_color(mut self, index: usize) -> Self {
        self.color = Some(index);
        self
    }

    /// The same series drawn with `style`.
    pub fn with_style(mut self, style: Style) -> Self {
        self.style = style;
        self
    }
}

/// One chart: axes, labels and series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Panel {
    /// Caption above the chart.
    pub title: String,
    /// X-axis label.
    pub x_label: String,
    /// Y-axis label.
    pub y_label: String,
    /// Logarithmic y axis (non-positive values are skipped).
    pub log_y: bool,
    /// The data.
    pub series: Vec<Series>,
    /// Legend position.
    pub legend: Legend,
}

/// A titled grid of panels (at most three per row).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figure {
    /// Title above all panels (empty: none).
    pub title: String,
    /// The panels, left to right, then top to bottom.
    pub panels: Vec<Panel>,
}

/// Pixel size of one panel.
const PANEL_W: u32 = 640;
const PANEL_H: u32 = 480;
const FONT: &str = "sans-serif";
static FONT_BYTES: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// Colors of the matplotlib "tab10" palette, which stay distinguishable for most readers.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn register_font() -> Result<()> {
    static REGISTER: Once = Once::new();
    let mut ok = true;
    REGISTER.call_once(|| {
        ok = plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok();
    });
    if ok {
        Ok(())
    } else {
        bail!("the embedded font could not be loaded")
    }
}

/// Writes `fig` to `path`: PNG for `.png`, SVG for `.svg` (case-insensitive).
pub fn render(fig: &Figure, path: &Path) -> Result<()> {
    register_font()?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    for (p, panel) in fig.panels.iter().enumerate() {
        for s in &panel.series {
            check_lengths(p, s)?;
        }
    }
    let n = fig.panels.len().max(1) as u32;
    let cols = n.min(3);
    let rows = n.div_ceil(cols);
    let title_h = if fig.title.is_empty() { 0 } else { 40 };
    let size = (cols * PANEL_W, rows * PANEL_H + title_h);
    match ext.as_deref() {
        Some("png") => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            draw(&root, fig, (rows as usize, cols as usize))?;
            root.present()
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Some("svg") => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            draw(&root, fig, (rows as usize, cols as usize))?;
            root.present()
                .with_context(|| format!("writing {}", path.display()))?;
        }
        _ => bail!(
            "{}: unsupported figure format (use a .png or .svg file name)",
            path.display()
        ),
    }
    // The backends report some I/O errors only on drop; check the file exists.
    let meta = std::fs::metadata(path).with_context(|| format!("writing {}", path.display()))?;
    if meta.len() == 0 {
        bail!("writing {}: the file is empty", path.display());
    }
    Ok(())
}

fn check_lengths(panel: usize, s: &Series) -> Result<()> {
    if s.x.len() != s.y.len() {
        bail!(
            "panel {panel}, series '{}': {} x values but {} y values",
            s.name,
            s.x.len(),
            s.y.len()
        );
    }
    if let Some((lo, hi)) = &s.band
        && (lo.len() != s.x.len() || hi.len() != s.x.len())
    {
        bail!(
            "panel {panel}, series '{}': the band needs {} lower and upper values",
            s.name,
            s.x.len()
        );
    }
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
    grid: (usize, usize),
) -> Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing the figure: {e}");
    root.fill(&WHITE).map_err(err)?;
    let area = if fig.title.is_empty() {
        root.clone()
    } else {
        root.titled(&fig.title, (FONT, 26)).map_err(err)?
    };
    let cells = area.split_evenly(grid);
    for (panel, cell) in fig.panels.iter().zip(&cells) {
        draw_panel(cell, panel).map_err(err)?;
    }
    Ok(())
}

/// Maps an ordinate to the plotted coordinate (log10 on log axes); `None` if it cannot be shown.
fn map_y(log_y: bool, y: f64) -> Option<f64> {
    if !y.is_finite() {
        None
    } else if log_y {
        (y > 0.0).then(|| y.log10())
    } else {
        Some(y)
    }
}

/// Maximal runs of consecutive drawable points.
fn segments(log_y: bool, x: &[f64], y: &[f64]) -> Vec<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for (&a, &b) in x.iter().zip(y) {
        match map_y(log_y, b) {
            Some(b) if a.is_finite() => cur.push((a, b)),
            _ => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Band polygons: runs where x, lower and upper are all drawable.
fn band_polygons(log_y: bool, x: &[f64], lo: &[f64], hi: &[f64]) -> Vec<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut cur: Vec<(f64, f64, f64)> = Vec::new();
    let flush = |cur: &mut Vec<(f64, f64, f64)>, out: &mut Vec<Vec<(f64, f64)>>| {
        if cur.len() >= 2 {
            let mut poly: Vec<(f64, f64)> = cur.iter().map(|&(a, _, h)| (a, h)).collect();
            poly.extend(cur.iter().rev().map(|&(a, l, _)| (a, l)));
            out.push(poly);
        }
        cur.clear();
    };
    for ((&a, &l), &h) in x.iter().zip(lo).zip(hi) {
        match (map_y(log_y, l), map_y(log_y, h)) {
            (Some(l), Some(h)) if a.is_finite() => cur.push((a, l, h)),
            _ => flush(&mut cur, &mut out),
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// A range around `lo..hi` with a little margin (a unit range if nothing is finite).
fn padded(lo: f64, hi: f64, margin: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    if hi - lo <= f64::EPSILON * lo.abs().max(hi.abs()).max(1e-300) {
        let w = if lo == 0.0 { 1.0 } else { 0.05 * lo.abs() };
        return (lo - w, hi + w);
    }
    let w = hi - lo;
    (lo - margin * w, hi + margin * w)
}

fn format_tick(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if (1e-3..1e5).contains(&a) {
        let s = format!("{v:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    } else {
        format!("{v:.2e}")
    }
}

/// `v` rounded to 3 significant digits in scientific notation ("3.16e4") and the decimal exponent
/// after rounding (0.99999 gives "1.00e0" and 0, not −1). Shared by the tick labels and the
/// markdown tables of the experiment summaries.
pub fn sci3(v: f64) -> (String, i32) {
    let sci = format!("{v:.2e}");
    let exp = sci
        .rsplit_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    (sci, exp)
}

/// A tick of a logarithmic axis: the ticks sit at powers of 10 that are not round numbers
/// (10^4.5 = 31622.77), so they are shown to 3 significant digits ("3.16e4" → "31600", "63.1").
fn format_log_tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let (sci, exp) = sci3(v);
    if !(-3..5).contains(&exp) {
        return sci;
    }
    // The value rounded to 3 significant digits, printed without spurious digits.
    let rounded: f64 = sci.parse().unwrap_or(v);
    format_tick(rounded)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let log_y = panel.log_y;
    let (mut x0, mut x1, mut y0, mut y1) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    let mut widen = |pts: &[(f64, f64)]| {
        for &(a, b) in pts {
            x0 = x0.min(a);
            x1 = x1.max(a);
            y0 = y0.min(b);
            y1 = y1.max(b);
        }
    };
    for s in &panel.series {
        for seg in segments(log_y, &s.x, &s.y) {
            widen(&seg);
        }
        if let Some((lo, hi)) = &s.band {
            for poly in band_polygons(log_y, &s.x, lo, hi) {
                widen(&poly);
            }
        }
    }
    let (x0, x1) = padded(x0, x1, 0.02);
    let (y0, y1) = padded(y0, y1, 0.05);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let y_fmt = |v: &f64| {
        if log_y {
            format_log_tick(10f64.powf(*v))
        } else {
            format_tick(*v)
        }
    };
    let x_fmt = |v: &f64| format_tick(*v);
    chart
        .configure_mesh()
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(210, 210, 210))
        .draw()?;
    // Bands first, so that lines stay on top.
    for (k, s) in panel.series.iter().enumerate() {
        let color = PALETTE[s.color.unwrap_or(k) % PALETTE.len()];
        if let Some((lo, hi)) = &s.band {
            chart.draw_series(
                band_polygons(log_y, &s.x, lo, hi)
                    .into_iter()
                    .map(|poly| Polygon::new(poly, color.mix(0.2).filled())),
            )?;
        }
    }
    for (k, s) in panel.series.iter().enumerate() {
        let color = PALETTE[s.color.unwrap_or(k) % PALETTE.len()];
        let segs = segments(log_y, &s.x, &s.y);
        let anno = match s.style {
            Style::Line => chart.draw_series(
                segs.into_iter()
                    .map(|seg| PathElement::new(seg, color.stroke_width(2))),
            )?,
            Style::Dashed => chart.draw_series(
                segs.into_iter()
                    .map(|seg| DashedPathElement::new(seg, 8, 5, color.stroke_width(2))),
            )?,
            Style::Points => chart.draw_series(
                segs.into_iter()
                    .flatten()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )?,
        };
        if panel.legend != Legend::Hidden && !s.name.is_empty() {
            let style = s.style;
            anno.label(s.name.as_str()).legend(
                move |(x, y)| -> DynElement<'static, DB, (i32, i32)> {
                    match style {
                        Style::Points => Circle::new((x + 10, y), 4, color.filled()).into_dyn(),
                        Style::Dashed => DashedPathElement::new(
                            vec![(x, y), (x + 20, y)],
                            5,
                            3,
                            color.stroke_width(2),
                        )
                        .into_dyn(),
                        Style::Line => {
                            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                                .into_dyn()
                        }
                    }
                },
            );
        }
    }
    let named = panel.series.iter().any(|s| !s.name.is_empty());
    if panel.legend != Legend::Hidden && named {
        let pos = match panel.legend {
            Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
            Legend::LowerRight => SeriesLabelPosition::LowerRight,
            Legend::LowerLeft => SeriesLabelPosition::LowerLeft,
            _ => SeriesLabelPosition::UpperRight,
        };
        chart
            .configure_series_labels()
            .position(pos)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regret_figure() -> Figure {
        let x: Vec<f64> = (0..50).map(|k| k as f64 * 2.0).collect();
        let med: Vec<f64> = x.iter().map(|v| 10.0 * (-v / 30.0).exp()).collect();
        let lo: Vec<f64> = med.iter().map(|m| m * 0.5).collect();
        let hi: Vec<f64> = med.iter().map(|m| m * 2.0).collect();
        let mut with_nan = med.clone();
        with_nan[10] = f64::NAN;
        with_nan[11] = f64::INFINITY;
        with_nan[12] = 0.0; // not drawable on a log axis
        Figure {
            title: "Regret".into(),
            panels: vec![
                Panel {
                    title: "log y".into(),
                    x_label: "cumulative cost".into(),
                    y_label: "regret".into(),
                    log_y: true,
                    series: vec![
                        Series::line("PBGI median", x.clone(), med.clone())
                            .with_band(lo.clone(), hi.clone()),
                        Series::line("PBGI mean", x.clone(), with_nan)
                            .with_style(Style::Dashed)
                            .with_color(0),
                        Series::points("EI", x.clone(), hi.clone()),
                        Series::line("empty", vec![], vec![]),
                    ],
                    legend: Legend::UpperRight,
                },
                Panel {
                    title: "nothing finite".into(),
                    x_label: "x".into(),
                    y_label: "y".into(),
                    log_y: false,
                    series: vec![Series::line("nan", vec![1.0], vec![f64::NAN])],
                    legend: Legend::LowerLeft,
                },
                Panel::default(),
            ],
        }
    }

    #[test]
    fn png_and_svg_are_written_with_valid_headers() {
        let dir = tempfile::tempdir().unwrap();
        let fig = regret_figure();
        let png = dir.path().join("f.png");
        render(&fig, &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height of three panels in one row plus the title.
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        assert_eq!((w, h), (3 * PANEL_W, PANEL_H + 40));
        let svg = dir.path().join("f.SVG");
        render(&fig, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.trim_start().starts_with("<svg"), "{}", &text[..100]);
        assert!(text.trim_end().ends_with("</svg>"));
        for name in [
            "PBGI median",
            "PBGI mean",
            "EI",
            "empty",
            "Regret",
            "cumulative cost",
        ] {
            assert!(text.contains(name), "missing {name}");
        }
        // No NaN coordinates leak into the drawing.
        assert!(!text.contains("NaN") && !text.contains("inf"));
    }

    #[test]
    fn bad_input_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let fig = regret_figure();
        let e = render(&fig, &dir.path().join("f.pdf")).unwrap_err();
        assert!(e.to_string().contains(".png or .svg"), "{e}");
        let bad = Figure {
            title: String::new(),
            panels: vec![Panel {
                series: vec![Series::line("s", vec![1.0, 2.0], vec![1.0])],
                ..Panel::default()
            }],
        };
        let e = render(&bad, &dir.path().join("f.png")).unwrap_err();
        assert!(e.to_string().contains("2 x values but 1 y values"), "{e}");
        let e = render(&fig, &dir.path().join("no/such/dir/f.svg")).unwrap_err();
        assert!(e.to_string().contains("f.svg"), "{e}");
    }

    #[test]
    fn segments_break_at_undrawable_points() {
        let x = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [1.0, f64::NAN, 2.0, 3.0, -1.0, 4.0];
        assert_eq!(
            segments(false, &x, &y),
            vec![
                vec![(0.0, 1.0)],
                vec![(2.0, 2.0), (3.0, 3.0), (4.0, -1.0), (5.0, 4.0)]
            ]
        );
        let s = segments(true, &x, &y);
        assert_eq!(s.len(), 3);
        assert_eq!(s[1], vec![(2.0, 2f64.log10()), (3.0, 3f64.log10())]);
        let polys = band_polygons(false, &x[..3], &[0.0, 0.0, f64::NAN], &[1.0, 2.0, 3.0]);
        assert_eq!(
            polys,
            vec![vec![(0.0, 1.0), (1.0, 2.0), (1.0, 0.0), (0.0, 0.0)]]
        );
        assert_eq!(padded(f64::INFINITY, f64::NEG_INFINITY, 0.1), (0.0, 1.0));
        assert_eq!(padded(2.0, 2.0, 0.1), (1.9, 2.1));
        assert_eq!(format_tick(0.25), "0.25");
        assert_eq!(format_tick(1e-6), "1.00e-6");
        // Log-axis ticks: 3 significant digits.
        let cases = [
            (10f64.powf(4.5), "31600"),
            (10f64.powf(1.8), "63.1"),
            (10f64.powf(0.5), "3.16"),
            (10f64.powf(-1.5), "0.0316"),
            (10f64.powf(5.5), "3.16e5"),
            (10f64.powf(-3.5), "3.16e-4"),
            (100.0, "100"),
            (0.999999, "1"),
        ];
        for (v, s) in cases {
            assert_eq!(format_log_tick(v), s, "{v}");
        }
    }
}
