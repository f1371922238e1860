//! Sweep plots (plotters): one line per series value, `y` against a numeric `x`, written as SVG
//! and PNG.

use super::{PlotSpec, Row};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// A parameter value as a number: plain numbers, sizes (`"64KiB"`) and durations (`"30s"`, in
/// seconds).
pub fn numeric(text: &str) -> Option<f64> {
    text.parse::<f64>()
        .ok()
        .or_else(|| {
            crate::scenario::spec::parse_size(text)
                .ok()
                .map(|b| b as f64)
        })
        .or_else(|| {
            humantime::parse_duration(text)
                .ok()
                .map(|d| d.as_secs_f64())
        })
}

fn matches_filter(plot: &PlotSpec, axes: &[String], row: &Row) -> bool {
    plot.filter.iter().all(|(axis, want)| {
        let want = match want {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        axes.iter()
            .position(|a| a == axis)
            .is_some_and(|i| row.params[i] == want)
    })
}

/// The (x, y) points of each series.
pub fn series(plot: &PlotSpec, axes: &[String], rows: &[Row]) -> BTreeMap<String, Vec<(f64, f64)>> {
    let xi = axes.iter().position(|a| *a == plot.x);
    let si = plot
        .series
        .as_ref()
        .and_then(|s| axes.iter().position(|a| a == s));
    let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for row in rows.iter().filter(|r| matches_filter(plot, axes, r)) {
        let Some(x) = xi.and_then(|i| numeric(&row.params[i])) else {
            continue;
        };
        let Some(y) = row.values.get(&plot.y).copied().filter(|v| !v.is_nan()) else {
            continue;
        };
        let name = si.map_or_else(|| plot.y.clone(), |i| row.params[i].clone());
        out.entry(name).or_default().push((x, y));
    }
    for points in out.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Draws `plot` into `dir/<file>.svg` and `dir/<file>.png`.
pub fn draw(plot: &PlotSpec, axes: &[String], rows: &[Row], dir: &Path) -> Result<(), String> {
    let data = series(plot, axes, rows);
    let svg = dir.join(format!("{}.svg", plot.file));
    let png = dir.join(format!("{}.png", plot.file));
    render(
        plot,
        &data,
        SVGBackend::new(&svg, (900, 560)).into_drawing_area(),
    )?;
    render(
        plot,
        &data,
        BitMapBackend::new(&png, (900, 560)).into_drawing_area(),
    )?;
    Ok(())
}

fn render<DB: DrawingBackend>(
    plot: &PlotSpec,
    data: &BTreeMap<String, Vec<(f64, f64)>>,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let points = data.values().flatten();
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for (x, y) in points {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y1 = y1.max(*y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x0 == x1 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
    let title = plot
        .title
        .clone()
        .unwrap_or_else(|| format!("{} vs {}", plot.y, plot.x));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(plot.x.as_str())
        .y_desc(plot.y.as_str())
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in data.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
