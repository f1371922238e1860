//! What the pictures relaysim draws share (plotters): a colour-blind-safe palette and an axis
//! whose ticks are exactly the ones asked for.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::style::RGBColor;

/// Okabe & Ito's palette (2008), safe for the common colour-vision deficiencies; yellow left
/// out, as it vanishes on white.
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
];

/// A linear axis from `lo` to `hi` whose ticks are exactly `ticks` (plotters picks its own
/// otherwise; a sweep's ticks belong on its values, a timeline's on its lanes).
#[derive(Debug, Clone)]
pub struct TickedAxis {
    /// The low end.
    pub lo: f64,
    /// The high end.
    pub hi: f64,
    /// Where the ticks go.
    pub ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        if self.hi <= self.lo {
            return (limit.0 + limit.1) / 2;
        }
        let fraction = (v - self.lo) / (self.hi - self.lo);
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// A tick step of 1, 2 or 5 × 10^k at or above `v` (positive).
pub fn nice_step(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|c| *c >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade)
}
