//! Sweep plots (plotters), written as SVG and PNG: `y` against a numeric `x`, one series per
//! value of another axis, each point with its 95 % interval.
//!
//! What a reviewer expects of them, and how each is met:
//! - series in numeric order, and a legend titled with the series axis;
//! - axis labels in words and units (`y_label`/`x_label` override them); durations in ms, s or
//!   min as their size asks, rates in percent, sizes in KiB/MiB;
//! - ticks at the sweep's own x values, on a log axis when they span a decade or more, so
//!   uneven values are spread evenly; a log y axis when positive values span two decades;
//! - an error bar on every point (Wilson for rates, order statistics for percentiles);
//! - a distinct colour (Okabe–Ito, safe for colour-blind readers) and marker per series, and
//!   series drawn slightly apart so none hides another;
//! - cells without a value (no call of that kind completed) drawn as a cross on the top edge,
//!   not left out.

mod layout;

use super::{interval, PlotSpec, Row};
use crate::chart::{TickedAxis, PALETTE};
use layout::{Layout, XKind};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::cmp::Ordering;
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

/// One cell on a plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The x value (sizes in bytes, durations in seconds).
    pub x: f64,
    /// The y value; `None` when the cell has none (no call of that kind completed).
    pub y: Option<f64>,
    /// The 95 % interval of `y`, when the column has one.
    pub interval: Option<(f64, f64)>,
}

/// One line of a plot: a value of the series axis and its points by x.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The series axis's value (or the column's name without a series axis).
    pub name: String,
    /// Its cells, by x.
    pub points: Vec<Point>,
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

/// Orders parameter values numerically where they are numbers, sizes or durations (so
/// `2s, 5s, 10s, 20s`, not string order), as text otherwise.
fn by_value(a: &str, b: &str) -> Ordering {
    match (numeric(a), numeric(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The series of `plot`, in the series axis's numeric order, each point with its interval.
pub fn series(plot: &PlotSpec, axes: &[String], rows: &[Row]) -> Vec<Series> {
    let xi = axes.iter().position(|a| *a == plot.x);
    let si = plot
        .series
        .as_ref()
        .and_then(|s| axes.iter().position(|a| a == s));
    let mut out: Vec<Series> = Vec::new();
    for row in rows.iter().filter(|r| matches_filter(plot, axes, r)) {
        let Some(x) = xi.and_then(|i| numeric(&row.params[i])) else {
            continue;
        };
        let y = row.values.get(&plot.y).copied().filter(|v| !v.is_nan());
        let (lo, hi) = interval(row, &plot.y);
        let interval = (y.is_some() && !lo.is_nan() && !hi.is_nan()).then_some((lo, hi));
        let name = si.map_or_else(|| plot.y.clone(), |i| row.params[i].clone());
        let point = Point { x, y, interval };
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(point),
            None => out.push(Series {
                name,
                points: vec![point],
            }),
        }
    }
    out.sort_by(|a, b| by_value(&a.name, &b.name));
    for s in &mut out {
        s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    out
}

/// Draws `plot` into `dir/<file>.svg` and `dir/<file>.png`.
pub fn draw(plot: &PlotSpec, axes: &[String], rows: &[Row], dir: &Path) -> Result<(), String> {
    let data = series(plot, axes, rows);
    let x_kind = rows
        .iter()
        .find_map(|r| {
            axes.iter()
                .position(|a| *a == plot.x)
                .map(|i| XKind::of(&r.params[i]))
        })
        .unwrap_or(XKind::Number);
    let seeds = rows
        .iter()
        .find_map(|r| r.values.get("runs").copied())
        .unwrap_or(0.0);
    let layout = Layout::new(plot, &data, x_kind, seeds);
    let svg = dir.join(format!("{}.svg", plot.file));
    let png = dir.join(format!("{}.png", plot.file));
    render(
        &layout,
        &data,
        SVGBackend::new(&svg, (1000, 600)).into_drawing_area(),
    )?;
    render(
        &layout,
        &data,
        BitMapBackend::new(&png, (1000, 600)).into_drawing_area(),
    )?;
    Ok(())
}

fn render<DB: DrawingBackend>(
    layout: &Layout,
    data: &[Series],
    root: DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let (width, _) = root.dim_in_pixel();
    let root = root
        .titled(&layout.title, ("sans-serif", 20))
        .map_err(err)?;
    root.draw(&Text::new(
        layout.subtitle.clone(),
        (12, 0),
        ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90)),
    ))
    .map_err(err)?;
    let legend_width = if data.len() > 1 || !layout.legend_title.is_empty() {
        190
    } else {
        0
    };
    let (plot_area, legend_area) = root.split_horizontally(width - legend_width);
    let mut chart = ChartBuilder::on(&plot_area)
        .margin_top(24)
        .margin_right(16)
        .margin_left(8)
        .margin_bottom(6)
        .x_label_area_size(52)
        .y_label_area_size(78)
        .build_cartesian_2d(
            TickedAxis {
                lo: layout.x_range.0,
                hi: layout.x_range.1,
                ticks: layout.x_ticks.clone(),
            },
            TickedAxis {
                lo: layout.y_range.0,
                hi: layout.y_range.1,
                ticks: layout.y_ticks.clone(),
            },
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(layout.x_label.as_str())
        .y_desc(layout.y_label.as_str())
        .x_label_formatter(&|x| layout.x_text(*x))
        .y_label_formatter(&|y| layout.y_text(*y))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()
        .map_err(err)?;
    let count = data.len();
    let top = layout.y_range.1 - (layout.y_range.1 - layout.y_range.0) * 0.03;
    for (i, s) in data.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let line: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| p.y.map(|y| (layout.x_of(p.x, i, count), layout.y_of(y))))
            .collect();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(err)?;
        for p in &s.points {
            let x = layout.x_of(p.x, i, count);
            match p.y {
                Some(y) => {
                    if let Some((lo, hi)) = p.interval {
                        chart
                            .draw_series(std::iter::once(ErrorBar::new_vertical(
                                x,
                                layout.y_of(lo),
                                layout.y_of(y),
                                layout.y_of(hi),
                                color.stroke_width(1),
                                8,
                            )))
                            .map_err(err)?;
                    }
                    // The marker of series i: circle, triangle, square, diamond, cross, in turn.
                    let at = EmptyElement::at((x, layout.y_of(y)));
                    let style = color.filled();
                    match i % 5 {
                        0 => chart.draw_series(std::iter::once(at + Circle::new((0, 0), 5, style))),
                        1 => chart.draw_series(std::iter::once(
                            at + TriangleMarker::new((0, 0), 6, style),
                        )),
                        2 => chart.draw_series(std::iter::once(
                            at + Rectangle::new([(-4, -4), (4, 4)], style),
                        )),
                        3 => chart.draw_series(std::iter::once(
                            at + Polygon::new(vec![(0, -6), (6, 0), (0, 6), (-6, 0)], style),
                        )),
                        _ => chart.draw_series(std::iter::once(
                            at + Cross::new((0, 0), 5, color.stroke_width(2)),
                        )),
                    }
                    .map_err(err)?;
                }
                None => {
                    chart
                        .draw_series(std::iter::once(
                            EmptyElement::at((x, top))
                                + Cross::new((0, 0), 7, color.stroke_width(3)),
                        ))
                        .map_err(err)?;
                }
            }
        }
    }
    if legend_width > 0 {
        draw_legend(layout, data, &legend_area).map_err(err)?;
    }
    plot_area.present().map_err(err)?;
    Ok(())
}

fn draw_legend<DB: DrawingBackend>(
    layout: &Layout,
    data: &[Series],
    area: &DrawingArea<DB, Shift>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let title = if layout.legend_title.is_empty() {
        "series".to_owned()
    } else {
        layout.legend_title.clone()
    };
    area.draw(&Text::new(
        title,
        (8, 40),
        ("sans-serif", 15).into_font().style(FontStyle::Bold),
    ))?;
    for (i, s) in data.iter().enumerate() {
        let y = 68 + 24 * i as i32;
        let color = PALETTE[i % PALETTE.len()];
        area.draw(&PathElement::new(
            vec![(10, y), (40, y)],
            color.stroke_width(2),
        ))?;
        match i % 5 {
            0 => area.draw(&Circle::new((25, y), 5, color.filled())),
            1 => area.draw(&TriangleMarker::new((25, y), 6, color.filled())),
            2 => area.draw(&Rectangle::new([(21, y - 4), (29, y + 4)], color.filled())),
            3 => area.draw(&Polygon::new(
                vec![(25, y - 6), (31, y), (25, y + 6), (19, y)],
                color.filled(),
            )),
            _ => area.draw(&Cross::new((25, y), 5, color.stroke_width(2))),
        }?;
        area.draw(&Text::new(s.name.clone(), (48, y - 8), ("sans-serif", 14)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
