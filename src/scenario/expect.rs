//! Expectations: the `[expect]` table, checked when the scenario is read (every metric,
//! quantile and workload it names exists) and after a run (which assertions do not hold).

use super::diagnostic::{closest, Ctx};
use super::spec::{parse_share, Bound, ExpectSpec, Rate};
use super::Scenario;
use crate::stats::{Report, METRICS};
use std::time::Duration;

/// Records every problem of the `[expect]` table.
pub(super) fn validate(ctx: &Ctx, expect: &ExpectSpec, workloads: &[String]) {
    for metric_key in expect.latency.keys() {
        let valid = metric_key
            .rsplit_once('.')
            .is_some_and(|(m, q)| METRICS.contains(&m) && quantile(q).is_some());
        if !valid {
            let candidates: Vec<String> = METRICS
                .iter()
                .flat_map(|m| ["p50", "p90", "p99", "p999", "max"].map(|q| format!("{m}.{q}")))
                .collect();
            ctx.record(ctx.at(
                None,
                &format!("expect.latency.{metric_key}"),
                format!(
                    "not a metric and quantile; metrics: {}; quantiles: p50, p90, p99, p999, max",
                    METRICS.join(", ")
                ),
                closest(metric_key, candidates.iter().map(String::as_str)),
            ));
        }
    }
    let names: Vec<&str> = workloads.iter().map(String::as_str).collect();
    // Expectations name cause families; an implementation's words after ": " never match.
    let words = |key: &str, value: &str| {
        value.contains(": ").then(|| {
            ctx.at(
                None,
                key,
                format!(
                    "{value:?} includes an implementation's own words; expectations name the \
                     cause family alone (the part before \": \")"
                ),
                None,
            )
        })
    };
    for cause in expect.failures.keys() {
        if let Some(e) = words(&format!("expect.failures.{cause}"), cause) {
            ctx.record(e);
        }
    }
    let unknown_workload = |key: &str, workload: &str| {
        (!names.contains(&workload)).then(|| {
            ctx.at(
                None,
                key,
                format!(
                    "no workload is named {workload:?}; workloads: {}",
                    names.join(", ")
                ),
                closest(workload, names.iter().copied()),
            )
        })
    };
    let not_an_outcome = |key: &str, outcome: &str| {
        if let Some(e) = words(key, outcome) {
            return Some(e);
        }
        (!is_outcome(outcome)).then(|| {
            ctx.at(
                None,
                key,
                format!(
                    "{outcome:?} is not an outcome: use \"completed\", \"failed\" or \"failed:<cause>\""
                ),
                None,
            )
        })
    };
    for (workload, outcome) in &expect.outcomes {
        let key = format!("expect.outcomes.{workload}");
        for e in [
            unknown_workload(&key, workload),
            not_an_outcome(&key, outcome),
        ]
        .into_iter()
        .flatten()
        {
            ctx.record(e);
        }
    }
    for (workload, rates) in &expect.rates {
        if let Some(e) = unknown_workload(&format!("expect.rates.{workload}"), workload) {
            ctx.record(e);
        }
        for (outcome, rate) in rates {
            let key = format!("expect.rates.{workload}.{outcome}");
            if let Some(e) = not_an_outcome(&key, outcome) {
                ctx.record(e);
            }
            let shares: Vec<&String> = match rate {
                Rate::Exact(share) => vec![share],
                Rate::Range { min, max } => {
                    if min.is_none() && max.is_none() {
                        ctx.record(ctx.at(
                            None,
                            &key,
                            "a range needs `min`, `max` or both".into(),
                            None,
                        ));
                    }
                    min.iter().chain(max.iter()).collect()
                }
            };
            for share in shares {
                if let Err(why) = parse_share(share) {
                    ctx.record(ctx.at(None, &key, why, None));
                }
            }
        }
    }
    if let Some(r) = expect.min_completion_ratio {
        if !(0.0..=1.0).contains(&r) {
            ctx.record(ctx.at(
                None,
                "expect.min_completion_ratio",
                "must be between 0 and 1".into(),
                None,
            ));
        }
    }
}

/// What an engine observes, for the expectations it can check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observes {
    /// Everything: the des world.
    Everything,
    /// Calls, and the counters of the relays it serves itself (which count at the relay, not
    /// at the peers as des does), not the relays' deliveries one by one: the turmoil engine,
    /// and the live engine serving every relay.
    RelayCounters,
    /// Calls only: a live run against a relay given by URL, which nothing counts.
    CallsOnly,
}

impl Scenario {
    /// The expectations that do not hold, each said in one sentence (empty when all hold).
    pub fn check(&self, report: &Report) -> Vec<String> {
        self.check_observed(report, Observes::Everything)
    }

    /// As [`Scenario::check`], for an engine that observes less than the des world does:
    /// expectations on what it does not observe (relay-side latencies `relay_*`, counters) are
    /// left out rather than failed for lack of samples.
    pub fn check_observed(&self, report: &Report, observes: Observes) -> Vec<String> {
        let relay_events = observes == Observes::Everything;
        let e = &self.expect;
        let mut failed = Vec::new();
        if let Some(min) = e.min_completion_ratio {
            let got = report.completion_ratio();
            if got + 1e-12 < min {
                failed.push(format!(
                    "completion ratio {got:.3} is below the expected {min}"
                ));
            }
        }
        // A program peer's host that found something wrong makes the run untrustworthy.
        for (seed, error) in report.program_errors() {
            failed.push(format!("seed {seed}: the program host reported: {error}"));
        }
        let max_violations = e.max_integrity_violations.unwrap_or(0);
        if report.integrity_violations() > max_violations {
            failed.push(format!(
                "{} integrity violations, at most {max_violations} expected",
                report.integrity_violations()
            ));
        }
        for (key, limit) in &e.latency {
            let Some((metric, q)) = key.rsplit_once('.') else {
                continue;
            };
            if !relay_events && metric.starts_with("relay_") {
                continue;
            }
            let value = report
                .latency(metric)
                .and_then(|row| quantile(q).map(|f| f(&row)));
            match value {
                Some(us) if Duration::from_micros(us) > limit.0 => failed.push(format!(
                    "{key} is {}, above the expected {}",
                    crate::stats::output::human_us(us),
                    crate::stats::output::human_us(
                        u64::try_from(limit.0.as_micros()).unwrap_or(u64::MAX)
                    )
                )),
                Some(_) => {}
                None => failed.push(format!("{key}: no samples of {metric} were recorded")),
            }
        }
        let failures = report.failures();
        for (cause, bound) in &e.failures {
            let n = failures.get(cause).copied().unwrap_or(0);
            if let Some(why) = violates(n, bound) {
                failed.push(format!("failures of cause {cause:?}: {n}, {why}"));
            }
        }
        for (workload, expected) in &e.outcomes {
            let Some(index) = self.workloads.iter().position(|w| &w.name == workload) else {
                continue; // checked when the scenario was read
            };
            let runs = report
                .runs
                .iter()
                .filter(|r| e.seed.is_none_or(|s| s == r.seed));
            for run in runs {
                for item in run.items.iter().filter(|i| i.workload == index) {
                    if !outcome_matches(&item.outcome, expected) {
                        failed.push(format!(
                            "seed {}, workload {workload:?} call {} (client {}): {}, expected {expected}",
                            run.seed,
                            item.call,
                            self.client_name(item.client),
                            outcome_text(&item.outcome),
                        ));
                    }
                }
            }
        }
        for (workload, rates) in &e.rates {
            let Some(index) = self.workloads.iter().position(|w| &w.name == workload) else {
                continue;
            };
            let calls: Vec<(u64, &crate::stats::Item)> = report
                .runs
                .iter()
                .flat_map(|r| r.items.iter().map(move |i| (r.seed, i)))
                .filter(|(_, i)| i.workload == index)
                .collect();
            let total = calls.len() as u64;
            for (expected, rate) in rates {
                let mut seeds: Vec<u64> = calls
                    .iter()
                    .filter(|(_, i)| outcome_matches(&i.outcome, expected))
                    .map(|(seed, _)| *seed)
                    .collect();
                let n = seeds.len() as u64;
                seeds.dedup();
                let held = |why: String| {
                    let seen = if seeds.is_empty() {
                        String::new()
                    } else {
                        format!(" (seeds {})", crate::stats::output::seed_ranges(&seeds))
                    };
                    format!(
                        "workload {workload:?}: {n} of {total} calls ended {expected}{seen}, {why}"
                    )
                };
                // Shares compare by cross-multiplying: n/total against a/b, exactly.
                let share = |text: &String| parse_share(text).unwrap_or((0, 1));
                match rate {
                    Rate::Exact(text) => {
                        let (a, b) = share(text);
                        // Over a number of calls that is no multiple of b, see `unchecked`.
                        let checked = total.is_multiple_of(b);
                        if checked
                            && u128::from(n) * u128::from(b) != u128::from(total) * u128::from(a)
                        {
                            failed.push(held(format!("expected {text}")));
                        }
                    }
                    Rate::Range { min, max } => {
                        if let Some(text) = min {
                            let (a, b) = share(text);
                            if u128::from(n) * u128::from(b) < u128::from(total) * u128::from(a) {
                                failed.push(held(format!("expected at least {text}")));
                            }
                        }
                        if let Some(text) = max {
                            let (a, b) = share(text);
                            if u128::from(n) * u128::from(b) > u128::from(total) * u128::from(a) {
                                failed.push(held(format!("expected at most {text}")));
                            }
                        }
                    }
                }
            }
        }
        let counters = report.counters();
        let counted = e
            .counters
            .iter()
            .filter(|_| observes == Observes::Everything);
        for (name, bound) in counted {
            let n = counters.get(name).copied().unwrap_or(0);
            if let Some(why) = violates(n, bound) {
                failed.push(format!("counter {name:?}: {n}, {why}"));
            }
        }
        failed
    }
}

/// `"completed"`, `"failed"` or `"failed:<cause>"`.
fn is_outcome(outcome: &str) -> bool {
    outcome == "completed"
        || outcome == "failed"
        || outcome
            .strip_prefix("failed:")
            .is_some_and(|c| !c.is_empty())
}

/// Whether a call's outcome is the expected one: a cause family, or `failed` for any cause.
fn outcome_matches(got: &crate::stats::Outcome, expected: &str) -> bool {
    match got {
        crate::stats::Outcome::Completed => expected == "completed",
        crate::stats::Outcome::Failed(cause) => {
            expected == "failed"
                || expected
                    .strip_prefix("failed:")
                    .is_some_and(|want| crate::stats::family(cause) == want)
        }
    }
}

fn outcome_text(got: &crate::stats::Outcome) -> String {
    match got {
        crate::stats::Outcome::Completed => "completed".to_owned(),
        crate::stats::Outcome::Failed(c) => format!("failed:{c}"),
    }
}

impl Scenario {
    /// The expectations these runs could not check, each said in one sentence: `outcomes`
    /// pinned to a seed that was not run, an exact share over a number of calls that is no
    /// multiple of its denominator. They neither hold nor fail.
    pub fn unchecked(&self, report: &Report) -> Vec<String> {
        self.unchecked_observed(report, Observes::Everything)
    }

    /// As [`Scenario::unchecked`], for an engine that may not observe relay events: the
    /// latency bounds on relay-side metrics and the counter bounds that
    /// [`Scenario::check_observed`] leaves out are listed here, not passed in silence.
    pub fn unchecked_observed(&self, report: &Report, observes: Observes) -> Vec<String> {
        let e = &self.expect;
        let mut out = Vec::new();
        if observes != Observes::Everything {
            for key in e.latency.keys().filter(|k| k.starts_with("relay_")) {
                out.push(format!(
                    "latency.{key}: this engine does not observe the relays' deliveries"
                ));
            }
        }
        for name in e.counters.keys() {
            match observes {
                Observes::Everything => {}
                // A des counter is what the peers saw (an `events_accepted` is an OK that came
                // back); the relays' own counts mean something else, so they are not compared.
                Observes::RelayCounters => out.push(format!(
                    "counters.{name}: this engine's counters are the relays' own, not what the \
                     peers saw as in des"
                )),
                Observes::CallsOnly => out.push(format!(
                    "counters.{name}: relays given by URL are not counted"
                )),
            }
        }
        if let Some(seed) = e.seed {
            if !e.outcomes.is_empty() && !report.runs.iter().any(|r| r.seed == seed) {
                out.push(format!(
                    "outcomes are those of seed {seed}, which was not run (add --seed {seed} --runs 1)"
                ));
            }
        }
        for (workload, rates) in &e.rates {
            let Some(index) = self.workloads.iter().position(|w| &w.name == workload) else {
                continue;
            };
            let total = report.items().filter(|i| i.workload == index).count() as u64;
            for (outcome, rate) in rates {
                if let Rate::Exact(text) = rate {
                    let b = parse_share(text).map_or(1, |(_, b)| b);
                    if !total.is_multiple_of(b) {
                        out.push(format!(
                            "rates.{workload}.{outcome} = {text:?} needs a multiple of {b} calls; \
                             these runs made {total}"
                        ));
                    }
                }
            }
        }
        out
    }
}

type QuantileFn = fn(&crate::stats::LatencyRow) -> u64;

fn quantile(q: &str) -> Option<QuantileFn> {
    Some(match q {
        "p50" => |r| r.p50,
        "p90" => |r| r.p90,
        "p99" => |r| r.p99,
        "p999" => |r| r.p999,
        "max" => |r| r.max,
        _ => return None,
    })
}

fn violates(n: u64, bound: &Bound) -> Option<String> {
    match *bound {
        Bound::Exact(want) if n != want => Some(format!("expected exactly {want}")),
        Bound::Range { min: Some(min), .. } if n < min => Some(format!("expected at least {min}")),
        Bound::Range { max: Some(max), .. } if n > max => Some(format!("expected at most {max}")),
        _ => None,
    }
}
