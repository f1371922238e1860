//! 95 % confidence intervals for what a sweep cell reports: a proportion (Wilson score interval)
//! and a percentile (distribution-free, from order statistics). A point measured over a few
//! seeds is only as good as its interval, and a recommendation that ignores it presents
//! near-ties as winners.

use hdrhistogram::Histogram;

/// The normal quantile of a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of `successes` out of `trials` (95 %), as fractions in [0, 1].
/// With no trials nothing is known: `(0, 1)`.
pub fn wilson(successes: u64, trials: u64) -> (f64, f64) {
    if trials == 0 {
        return (0.0, 1.0);
    }
    let n = trials as f64;
    let p = successes.min(trials) as f64 / n;
    let z2 = Z95 * Z95;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// A 95 % interval for the `q`-quantile of the distribution behind `h`'s samples: the values at
/// the ranks `n·q ∓ z·√(n·q·(1−q))` (the normal approximation of the binomial count of samples
/// below the quantile), widened outward to whole ranks and clamped to the smallest and largest
/// sample. `None` without samples.
pub fn quantile_interval(h: &Histogram<u64>, q: f64) -> Option<(u64, u64)> {
    let n = h.len();
    if n == 0 {
        return None;
    }
    let nf = n as f64;
    let spread = Z95 * (nf * q * (1.0 - q)).sqrt();
    let lo_rank = ((nf * q - spread).floor() as u64).clamp(1, n);
    let hi_rank = ((nf * q + spread).ceil() as u64 + 1).clamp(1, n);
    let at_rank = |rank: u64| {
        if rank >= n {
            h.max()
        } else {
            h.value_at_quantile(rank as f64 / nf)
        }
    };
    Some((at_rank(lo_rank), at_rank(hi_rank)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_published_values() {
        // Wilson (1927) / Newcombe (1998), table I: 81 of 263 gives 0.2553 to 0.3662.
        let (lo, hi) = wilson(81, 263);
        assert!((lo - 0.2553).abs() < 5e-4, "{lo}");
        assert!((hi - 0.3662).abs() < 5e-4, "{hi}");
        // A rate of 0 or 1 still has an interval of positive width.
        let (lo, hi) = wilson(0, 20);
        assert_eq!(lo, 0.0);
        assert!(hi > 0.15 && hi < 0.17, "{hi}");
        let (lo, hi) = wilson(20, 20);
        assert!(lo > 0.83 && lo < 0.85, "{lo}");
        assert_eq!(hi, 1.0);
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    #[test]
    fn a_30_percent_rate_over_20_trials_is_about_20_points_either_way() {
        let (lo, hi) = wilson(6, 20);
        assert!(0.3 - lo > 0.15 && hi - 0.3 > 0.2, "{lo}..{hi}");
    }

    #[test]
    fn quantile_intervals_hold_the_quantile_and_narrow_with_more_samples() {
        let mut small = Histogram::<u64>::new(3).unwrap();
        for v in 1..=20u64 {
            small.record(v * 1000).unwrap();
        }
        let (lo, hi) = quantile_interval(&small, 0.5).unwrap();
        assert!(lo <= 10_500 && hi >= 10_500 && lo < hi, "{lo}..{hi}");
        let mut large = Histogram::<u64>::new(3).unwrap();
        for v in 1..=2000u64 {
            large.record(v * 10).unwrap();
        }
        let (llo, lhi) = quantile_interval(&large, 0.5).unwrap();
        assert!(llo <= 10_005 && lhi >= 10_005);
        assert!((lhi - llo) as f64 / 20_000.0 < (hi - lo) as f64 / 20_000.0);
        // A p99 of three samples is known only to lie near the top.
        let mut three = Histogram::<u64>::new(3).unwrap();
        for v in [100u64, 200, 300] {
            three.record(v).unwrap();
        }
        let (lo, hi) = quantile_interval(&three, 0.99).unwrap();
        assert!(lo <= 200 && hi == three.max(), "{lo}..{hi}");
        assert_eq!(
            quantile_interval(&Histogram::<u64>::new(3).unwrap(), 0.5),
            None
        );
    }
}
