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

use super::{interval, PlotSpec, Row};
use crate::chart::{TickedAxis, PALETTE};
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

/// How an x axis's values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum XKind {
    /// Plain numbers.
    Number,
    /// Sizes in bytes (`"64KiB"`).
    Bytes,
    /// Durations (`"30s"`), as seconds.
    Seconds,
}

impl XKind {
    fn of(text: &str) -> XKind {
        if text.parse::<f64>().is_ok() {
            XKind::Number
        } else if crate::scenario::spec::parse_size(text).is_ok() {
            XKind::Bytes
        } else {
            XKind::Seconds
        }
    }

    fn format(self, v: f64) -> String {
        match self {
            XKind::Number => trim_number(v),
            XKind::Bytes => human_bytes(v),
            XKind::Seconds => human_seconds(v),
        }
    }
}

/// How a y column's values are shown.
#[derive(Debug, Clone, Copy, PartialEq)]
enum YUnit {
    /// A fraction shown in percent.
    Percent,
    /// Milliseconds, shown divided by `divisor` with `name`.
    Duration { divisor: f64, name: &'static str },
    /// A plain count.
    Count,
}

impl YUnit {
    fn of(column: &str, largest: f64) -> YUnit {
        if column == "completion_ratio" || column == "failure_rate" {
            YUnit::Percent
        } else if column.ends_with("_ms") {
            if largest < 10_000.0 {
                YUnit::Duration {
                    divisor: 1.0,
                    name: "ms",
                }
            } else if largest < 600_000.0 {
                YUnit::Duration {
                    divisor: 1000.0,
                    name: "s",
                }
            } else {
                YUnit::Duration {
                    divisor: 60_000.0,
                    name: "min",
                }
            }
        } else {
            YUnit::Count
        }
    }

    fn scale(self, v: f64) -> f64 {
        match self {
            YUnit::Percent => v * 100.0,
            YUnit::Duration { divisor, .. } => v / divisor,
            YUnit::Count => v,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            YUnit::Percent => "%",
            YUnit::Duration { name, .. } => name,
            YUnit::Count => "",
        }
    }
}

/// A column's name in words, for the y axis.
fn column_words(column: &str) -> String {
    let words = match column {
        "completion_ratio" => "calls completed",
        "failure_rate" => "calls failed",
        "events_per_call" => "events published per call",
        "bytes_per_call" => "bytes published per call",
        "relay_rejections" => "events the relay refused",
        "runs" => "runs",
        "calls" => "calls",
        _ => "",
    };
    if !words.is_empty() {
        return words.to_owned();
    }
    // transfer_completion_p99_ms -> "transfer completion, p99"
    let stem = column.trim_end_matches("_ms");
    match stem.rsplit_once('_') {
        Some((what, p)) if p.starts_with('p') => format!("{}, {p}", what.replace('_', " ")),
        _ => stem.replace('_', " "),
    }
}

fn trim_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A tick's duration: `250 ms`, `15 s`, `2 min`.
fn human_seconds(v: f64) -> String {
    if v < 1.0 {
        format!("{} ms", trim_number((v * 1000.0 * 100.0).round() / 100.0))
    } else if v < 120.0 {
        format!("{} s", trim_number((v * 100.0).round() / 100.0))
    } else {
        format!("{} min", trim_number((v / 60.0 * 100.0).round() / 100.0))
    }
}

fn human_bytes(v: f64) -> String {
    const UNITS: [(&str, f64); 3] = [
        ("GiB", 1024.0 * 1024.0 * 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("KiB", 1024.0),
    ];
    for (name, size) in UNITS {
        if v >= size {
            return format!("{} {name}", trim_number((v / size * 100.0).round() / 100.0));
        }
    }
    format!("{} B", trim_number(v))
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

/// Everything about a plot's axes, decided once for both backends.
struct Layout {
    title: String,
    subtitle: String,
    x_label: String,
    y_label: String,
    legend_title: String,
    x_kind: XKind,
    x_log: bool,
    y_unit: YUnit,
    y_log: bool,
    /// The plotted ranges, in drawn (possibly log10) coordinates.
    x_range: (f64, f64),
    y_range: (f64, f64),
    x_ticks: Vec<f64>,
    y_ticks: Vec<f64>,
    /// The horizontal distance between series drawn at one x.
    dodge: f64,
}

impl Layout {
    fn new(plot: &PlotSpec, data: &[Series], x_kind: XKind, seeds: f64) -> Layout {
        let points = || data.iter().flat_map(|s| s.points.iter());
        let mut xs: Vec<f64> = points().map(|p| p.x).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let (x_min, x_max) = (
            xs.first().copied().unwrap_or(0.0),
            xs.last().copied().unwrap_or(1.0),
        );
        let x_log = x_min > 0.0 && x_max / x_min >= 10.0;
        let tx = |x: f64| if x_log { x.log10() } else { x };
        let (a, b) = (tx(x_min), tx(x_max));
        let pad = if b > a { (b - a) * 0.06 } else { 0.5 };
        let x_range = (a - pad, b + pad);
        let x_ticks = xs.iter().map(|x| tx(*x)).collect();

        let ys = || {
            points().flat_map(|p| {
                p.y.into_iter()
                    .chain(p.interval.into_iter().flat_map(|(lo, hi)| [lo, hi]))
            })
        };
        let y_max = ys().fold(0.0f64, f64::max);
        let y_unit = YUnit::of(&plot.y, y_max);
        let y_min_pos = ys().filter(|y| *y > 0.0).fold(f64::INFINITY, f64::min);
        let all_positive = ys().all(|y| y > 0.0);
        let y_log = y_unit != YUnit::Percent
            && all_positive
            && y_min_pos.is_finite()
            && y_max / y_min_pos >= 100.0;
        let (y_range, y_ticks) = if y_log {
            let lo = y_unit.scale(y_min_pos).log10().floor();
            let hi = y_unit.scale(y_max).log10().ceil().max(lo + 1.0);
            let mut ticks = Vec::new();
            let mut decade = lo;
            while decade <= hi {
                for m in [1.0, 2.0, 5.0] {
                    let t = decade + f64::log10(m);
                    if t <= hi + 1e-9 {
                        ticks.push(t);
                    }
                }
                decade += 1.0;
            }
            // Room on top for the crosses of failed cells.
            ((lo, hi + (hi - lo) * 0.08), ticks)
        } else {
            let top = match y_unit {
                YUnit::Percent => 100.0,
                _ => nice_ceiling(y_unit.scale(y_max).max(1e-9)),
            };
            let step = nice_step(top / 5.0);
            let ticks = (0..)
                .map(|i| i as f64 * step)
                .take_while(|t| *t <= top + step * 1e-6)
                .collect();
            ((0.0, top * 1.08), ticks)
        };
        let series_count = data.len().max(1) as f64;
        let dodge = (x_range.1 - x_range.0) * 0.012 * if series_count > 1.0 { 1.0 } else { 0.0 };
        let unit = y_unit.suffix();
        let y_words = plot
            .y_label
            .clone()
            .unwrap_or_else(|| column_words(&plot.y));
        let y_label = if unit.is_empty() || plot.y_label.is_some() {
            y_words
        } else {
            format!("{y_words} ({unit})")
        };
        let x_label = plot.x_label.clone().unwrap_or_else(|| match x_kind {
            XKind::Number => plot.x.clone(),
            XKind::Bytes => format!("{} (bytes)", plot.x),
            XKind::Seconds => plot.x.clone(),
        });
        let x_label = if x_log {
            format!("{x_label}, log scale")
        } else {
            x_label
        };
        let y_label = if y_log {
            format!("{y_label}, log scale")
        } else {
            y_label
        };
        let interval_kind = match y_unit {
            YUnit::Percent => "Wilson score interval over the cell's calls",
            _ if plot.y.ends_with("_ms") => "order-statistic interval of the percentile",
            _ => "no interval for this column",
        };
        Layout {
            title: plot
                .title
                .clone()
                .unwrap_or_else(|| format!("{} vs {}", column_words(&plot.y), plot.x)),
            subtitle: format!(
                "each point: {} seed{} per cell; bars: 95% {interval_kind}; × on top: no value (no such call completed)",
                seeds as u64,
                if seeds as u64 == 1 { "" } else { "s" }
            ),
            x_label,
            y_label,
            legend_title: plot
                .series_label
                .clone()
                .or_else(|| plot.series.clone())
                .unwrap_or_default(),
            x_kind,
            x_log,
            y_unit,
            y_log,
            x_range,
            y_range,
            x_ticks,
            y_ticks,
            dodge,
        }
    }

    fn x_of(&self, x: f64, series: usize, count: usize) -> f64 {
        let x = if self.x_log { x.log10() } else { x };
        x + (series as f64 - (count as f64 - 1.0) / 2.0) * self.dodge
    }

    fn y_of(&self, y: f64) -> f64 {
        let v = self.y_unit.scale(y);
        if self.y_log {
            v.max(f64::MIN_POSITIVE).log10()
        } else {
            v
        }
    }

    fn x_text(&self, drawn: f64) -> String {
        let x = if self.x_log { 10f64.powf(drawn) } else { drawn };
        // Ticks sit on the sweep's own values; undo the rounding a log and a power bring.
        let x = if (x - x.round()).abs() < 1e-6 * x.abs().max(1.0) {
            x.round()
        } else {
            x
        };
        self.x_kind.format(x)
    }

    fn y_text(&self, drawn: f64) -> String {
        let v = if self.y_log { 10f64.powf(drawn) } else { drawn };
        let v = (v * 1000.0).round() / 1000.0;
        format!("{}{}", trim_number(v), self.y_unit.suffix())
    }
}

/// The smallest 1, 2 or 5 × 10^k at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|c| *c >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade)
}

/// A tick step of 1, 2 or 5 × 10^k near `v`.
fn nice_step(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|c| *c >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade)
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
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn row(cell: usize, x: &str, series: &str, y: f64) -> Row {
        let mut values = BTreeMap::new();
        values.insert("failure_rate".to_owned(), y);
        values.insert("failure_rate_lo".to_owned(), (y - 0.1).max(0.0));
        values.insert("failure_rate_hi".to_owned(), (y + 0.1).min(1.0));
        Row {
            cell,
            params: vec![x.into(), series.into()],
            values,
            failures: String::new(),
        }
    }

    fn spec() -> PlotSpec {
        toml::from_str("file = \"f\"\nx = \"idle\"\ny = \"failure_rate\"\nseries = \"probe\"\n")
            .unwrap()
    }

    #[test]
    fn series_come_in_numeric_order_with_their_intervals() {
        let axes = ["idle".to_owned(), "probe".to_owned()];
        let rows = vec![
            row(0, "5s", "10s", 0.3),
            row(1, "5s", "2s", 0.5),
            row(2, "5s", "20s", 0.1),
            row(3, "30s", "2s", 0.0),
        ];
        let s = series(&spec(), &axes, &rows);
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["2s", "10s", "20s"]);
        assert_eq!(s[0].points.len(), 2);
        assert_eq!(s[0].points[0].x, 5.0);
        let (lo, hi) = s[0].points[0].interval.unwrap();
        assert!((lo - 0.4).abs() < 1e-9 && (hi - 0.6).abs() < 1e-9);
    }

    #[test]
    fn a_cell_without_a_value_is_kept_as_a_failure() {
        let axes = ["idle".to_owned(), "probe".to_owned()];
        let mut r = row(0, "5s", "2s", 0.0);
        r.values.insert("failure_rate".into(), f64::NAN);
        let s = series(&spec(), &axes, &[r]);
        assert_eq!(s[0].points.len(), 1);
        assert_eq!(s[0].points[0].y, None);
        assert_eq!(s[0].points[0].interval, None);
    }

    #[test]
    fn axes_go_logarithmic_when_values_span_decades_and_read_in_human_units() {
        let mut p = spec();
        p.y = "transfer_completion_p99_ms".into();
        let data = vec![Series {
            name: "a".into(),
            points: [(4096.0, 150.0), (65536.0, 90_000.0)]
                .iter()
                .map(|&(x, y)| Point {
                    x,
                    y: Some(y),
                    interval: None,
                })
                .collect(),
        }];
        let l = Layout::new(&p, &data, XKind::Bytes, 3.0);
        assert!(l.x_log && l.y_log);
        assert_eq!(l.x_text(l.x_ticks[0]), "4 KiB");
        assert_eq!(l.x_text(l.x_ticks[1]), "64 KiB");
        assert!(l.y_label.contains("(s)"), "{}", l.y_label);
        assert!(l.subtitle.contains("3 seeds"));
        let linear = Layout::new(
            &p,
            &[Series {
                name: "a".into(),
                points: vec![Point {
                    x: 1.0,
                    y: Some(500.0),
                    interval: None,
                }],
            }],
            XKind::Number,
            1.0,
        );
        assert!(!linear.x_log && !linear.y_log);
        assert!(linear.y_label.ends_with("(ms)"));
    }

    #[test]
    fn failure_rates_are_shown_in_percent() {
        let l = Layout::new(&spec(), &[], XKind::Seconds, 20.0);
        assert_eq!(l.y_text(50.0), "50%");
        assert_eq!(l.y_label, "calls failed (%)");
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(230.0), 250.0);
        assert_eq!(nice_step(0.37), 0.5);
        assert_eq!(human_bytes(61440.0), "60 KiB");
        assert_eq!(human_seconds(5.0), "5 s");
        assert_eq!(human_seconds(0.25), "250 ms");
        assert_eq!(human_seconds(120.0), "2 min");
        assert_eq!(human_bytes(10.0 * 1024.0 * 1024.0), "10 MiB");
    }
}
