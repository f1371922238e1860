//! A plot's axes, decided once for both backends: units, labels, log or linear, ticks.

use super::{PlotSpec, Series};
use crate::chart::nice_step;

/// How an x axis's values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum XKind {
    /// Plain numbers.
    Number,
    /// Sizes in bytes (`"64KiB"`).
    Bytes,
    /// Durations (`"30s"`), as seconds.
    Seconds,
}

impl XKind {
    pub(super) fn of(text: &str) -> XKind {
        if text.parse::<f64>().is_ok() {
            XKind::Number
        } else if crate::scenario::spec::parse_size(text).is_ok() {
            XKind::Bytes
        } else {
            XKind::Seconds
        }
    }

    pub(super) fn format(self, v: f64) -> String {
        match self {
            XKind::Number => trim_number(v),
            XKind::Bytes => human_bytes(v),
            XKind::Seconds => human_seconds(v),
        }
    }
}

/// How a y column's values are shown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum YUnit {
    /// A fraction shown in percent.
    Percent,
    /// Milliseconds, shown divided by `divisor` with `name`.
    Duration { divisor: f64, name: &'static str },
    /// A plain count.
    Count,
}

impl YUnit {
    pub(super) fn of(column: &str, largest: f64) -> YUnit {
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

    pub(super) fn scale(self, v: f64) -> f64 {
        match self {
            YUnit::Percent => v * 100.0,
            YUnit::Duration { divisor, .. } => v / divisor,
            YUnit::Count => v,
        }
    }

    pub(super) fn suffix(self) -> &'static str {
        match self {
            YUnit::Percent => "%",
            YUnit::Duration { name, .. } => name,
            YUnit::Count => "",
        }
    }
}

/// A column's name in words, for the y axis.
pub(super) fn column_words(column: &str) -> String {
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

pub(super) fn trim_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A tick's duration: `250 ms`, `15 s`, `2 min`.
pub(super) fn human_seconds(v: f64) -> String {
    if v < 1.0 {
        format!("{} ms", trim_number((v * 1000.0 * 100.0).round() / 100.0))
    } else if v < 120.0 {
        format!("{} s", trim_number((v * 100.0).round() / 100.0))
    } else {
        format!("{} min", trim_number((v / 60.0 * 100.0).round() / 100.0))
    }
}

pub(super) fn human_bytes(v: f64) -> String {
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

/// Everything about a plot's axes, decided once for both backends.
pub(super) struct Layout {
    pub(super) title: String,
    pub(super) subtitle: String,
    pub(super) x_label: String,
    pub(super) y_label: String,
    pub(super) legend_title: String,
    pub(super) x_kind: XKind,
    pub(super) x_log: bool,
    pub(super) y_unit: YUnit,
    pub(super) y_log: bool,
    /// The plotted ranges, in drawn (possibly log10) coordinates.
    pub(super) x_range: (f64, f64),
    pub(super) y_range: (f64, f64),
    pub(super) x_ticks: Vec<f64>,
    pub(super) y_ticks: Vec<f64>,
    /// The horizontal distance between series drawn at one x.
    pub(super) dodge: f64,
}

impl Layout {
    pub(super) fn new(plot: &PlotSpec, data: &[Series], x_kind: XKind, seeds: f64) -> Layout {
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

        // The values and the closed ends of their intervals: an open end (0 below, infinity
        // above) is drawn to the chart's edge and does not set the scale.
        let ys = || {
            points().flat_map(|p| {
                p.y.into_iter().chain(
                    p.interval
                        .into_iter()
                        .flat_map(|(lo, hi)| [lo, hi])
                        .filter(|v| v.is_finite() && *v > 0.0),
                )
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
                "each point: {} seed{} per cell; bars: 95% {interval_kind} (to the edge: too few samples to bound it); × on top: no value",
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

    pub(super) fn x_of(&self, x: f64, series: usize, count: usize) -> f64 {
        let x = if self.x_log { x.log10() } else { x };
        x + (series as f64 - (count as f64 - 1.0) / 2.0) * self.dodge
    }

    /// Where `y` is drawn, clamped to the chart (an open interval end reaches its edge).
    pub(super) fn y_of(&self, y: f64) -> f64 {
        let v = self.y_unit.scale(y);
        let drawn = if self.y_log {
            v.max(f64::MIN_POSITIVE).log10()
        } else {
            v
        };
        drawn.clamp(self.y_range.0, self.y_range.1)
    }

    pub(super) fn x_text(&self, drawn: f64) -> String {
        let x = if self.x_log { 10f64.powf(drawn) } else { drawn };
        // Ticks sit on the sweep's own values; undo the rounding a log and a power bring.
        let x = if (x - x.round()).abs() < 1e-6 * x.abs().max(1.0) {
            x.round()
        } else {
            x
        };
        self.x_kind.format(x)
    }

    pub(super) fn y_text(&self, drawn: f64) -> String {
        let v = if self.y_log { 10f64.powf(drawn) } else { drawn };
        let v = (v * 1000.0).round() / 1000.0;
        format!("{}{}", trim_number(v), self.y_unit.suffix())
    }
}

/// The smallest 1, 2 or 5 × 10^k at or above `v`.
pub(super) fn nice_ceiling(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|c| *c >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade)
}
