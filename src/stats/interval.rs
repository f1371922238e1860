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

/// Sample counts up to this get the exact binomial ranks; larger ones the normal approximation
/// (whose error is then far below one rank).
const EXACT_UP_TO: u64 = 100_000;

/// The ranks `(l, u)` (1-based, `l` may be 0 and `u` may be `n + 1`: unbounded) such that
/// the `q`-quantile lies between the `l`-th and the `u`-th smallest of `n` samples with
/// probability at least 95 %. The count of samples below the quantile is Binomial(n, q); `l`
/// is the largest rank with P(count < l) ≤ 2.5 %, `u` the smallest with P(count ≥ u) ≤ 2.5 %.
pub fn quantile_ranks(n: u64, q: f64) -> (u64, u64) {
    let q = q.clamp(1e-12, 1.0 - 1e-12);
    if n > EXACT_UP_TO {
        let nf = n as f64;
        let spread = Z95 * (nf * q * (1.0 - q)).sqrt();
        let l = (nf * q - spread).floor().max(0.0) as u64;
        let u = ((nf * q + spread).ceil() as u64 + 1).min(n + 1);
        return (l, u);
    }
    // cdf[k] = P(count <= k), by the pmf's recurrence in logs (no underflow at large n).
    let ratio = (q / (1.0 - q)).ln();
    let mut log_pmf = n as f64 * (1.0 - q).ln();
    let mut cdf = Vec::with_capacity(n as usize + 1);
    let mut total = 0.0;
    for k in 0..=n {
        if k > 0 {
            log_pmf += ((n - k + 1) as f64).ln() - (k as f64).ln() + ratio;
        }
        total += log_pmf.exp();
        cdf.push(total.min(1.0));
    }
    // P(count < l) = cdf[l - 1] (0 for l = 0).
    let l = (1..=n)
        .rev()
        .find(|&l| cdf[l as usize - 1] <= 0.025)
        .unwrap_or(0);
    // P(count >= u) = 1 - cdf[u - 1].
    let u = (1..=n)
        .find(|&u| 1.0 - cdf[u as usize - 1] <= 0.025)
        .unwrap_or(n + 1);
    (l, u)
}

/// A 95 % interval for the `q`-quantile of the distribution behind `h`'s samples: the samples
/// at the ranks of [`quantile_ranks`]. Where too few samples lie beyond the quantile to bound
/// it, the end is open: 0 below (these are durations), infinity above — a p99 of three samples
/// is known only to be at least the second largest. `None` without samples.
pub fn quantile_interval(h: &Histogram<u64>, q: f64) -> Option<(f64, f64)> {
    let n = h.len();
    if n == 0 {
        return None;
    }
    let (l, u) = quantile_ranks(n, q);
    // The rank-th smallest sample. hdrhistogram takes ceil(q·n) samples, and (k/n)·n can round
    // to just above k in floating point, which would read the next sample: asking for half a
    // sample less always lands on rank k.
    let at_rank = |rank: u64| {
        if rank >= n {
            h.max()
        } else {
            h.value_at_quantile((rank as f64 - 0.5) / n as f64)
        }
    };
    let lo = if l == 0 { 0.0 } else { at_rank(l) as f64 };
    let hi = if u > n {
        f64::INFINITY
    } else {
        at_rank(u) as f64
    };
    Some((lo, hi))
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

    /// The interval's ends are the samples at the computed ranks, even where (k/n)·n rounds up
    /// in floating point: 41 samples 1..=41, median ranks (14, 28).
    #[test]
    fn interval_ends_are_the_samples_at_the_ranks() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=41u64 {
            h.record(v).unwrap();
        }
        assert_eq!(quantile_ranks(41, 0.5), (14, 28));
        assert_eq!(quantile_interval(&h, 0.5), Some((14.0, 28.0)));
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=25u64 {
            h.record(v).unwrap();
        }
        let (l, u) = quantile_ranks(25, 0.5);
        assert_eq!(quantile_interval(&h, 0.5), Some((l as f64, u as f64)));
    }

    #[test]
    fn quantile_ranks_match_the_binomial_tables() {
        // The median of 20 samples: the 6th to the 15th (Conover, Practical Nonparametric
        // Statistics, table A3: 95.9 % coverage).
        assert_eq!(quantile_ranks(20, 0.5), (6, 15));
        // Too few samples to bound a median (n < 6) or a p99 (n < 368) from above.
        assert_eq!(quantile_ranks(3, 0.5), (0, 4));
        let (l, u) = quantile_ranks(3, 0.99);
        assert_eq!(u, 4, "unbounded above");
        assert!(l >= 1);
        // Large n: the approximation's ranks sit around n·q.
        let (l, u) = quantile_ranks(1_000_000, 0.99);
        assert!(l < 990_000 && u > 990_000 && u - l < 500, "{l}..{u}");
    }

    #[test]
    fn quantile_intervals_hold_the_quantile_and_open_where_the_samples_cannot_bound_it() {
        let mut small = Histogram::<u64>::new(3).unwrap();
        for v in 1..=20u64 {
            small.record(v * 1000).unwrap();
        }
        let (lo, hi) = quantile_interval(&small, 0.5).unwrap();
        assert!(lo <= 10_500.0 && hi >= 10_500.0 && lo < hi, "{lo}..{hi}");
        let mut large = Histogram::<u64>::new(3).unwrap();
        for v in 1..=2000u64 {
            large.record(v * 10).unwrap();
        }
        let (llo, lhi) = quantile_interval(&large, 0.5).unwrap();
        assert!(llo <= 10_005.0 && lhi >= 10_005.0);
        assert!(lhi - llo < hi - lo);
        let mut three = Histogram::<u64>::new(3).unwrap();
        for v in [100u64, 200, 300] {
            three.record(v).unwrap();
        }
        let (lo, hi) = quantile_interval(&three, 0.99).unwrap();
        assert!(lo <= 200.0 && hi.is_infinite(), "{lo}..{hi}");
        assert_eq!(
            quantile_interval(&Histogram::<u64>::new(3).unwrap(), 0.5),
            None
        );
    }
}
