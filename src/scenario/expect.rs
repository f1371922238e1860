//! Expectations: the `[expect]` table, checked when the scenario is read (every metric,
//! quantile and workload it names exists) and after a run (which assertions do not hold).

use super::diagnostic::{closest, Ctx};
use super::spec::{Bound, ExpectSpec};
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
    for (workload, outcome) in &expect.outcomes {
        if !names.contains(&workload.as_str()) {
            ctx.record(ctx.at(
                None,
                &format!("expect.outcomes.{workload}"),
                format!(
                    "no workload is named {workload:?}; workloads: {}",
                    names.join(", ")
                ),
                closest(workload, names.iter().copied()),
            ));
        }
        if let Some(e) = words(&format!("expect.outcomes.{workload}"), outcome) {
            ctx.record(e);
            continue;
        }
        let valid = outcome == "completed"
            || outcome == "failed"
            || outcome
                .strip_prefix("failed:")
                .is_some_and(|c| !c.is_empty());
        if !valid {
            ctx.record(ctx.at(
                None,
                &format!("expect.outcomes.{workload}"),
                format!(
                    "{outcome:?} is not an outcome: use \"completed\", \"failed\" or \"failed:<cause>\""
                ),
                None,
            ));
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

impl Scenario {
    /// The expectations that do not hold, each said in one sentence (empty when all hold).
    pub fn check(&self, report: &Report) -> Vec<String> {
        self.check_observed(report, true)
    }

    /// As [`Scenario::check`], for an engine that may not observe relay events (the turmoil
    /// engine sees calls, not relays): with `relay_events` false, expectations on relay-side
    /// metrics (`relay_*`) and on counters are left out rather than failed for lack of samples.
    pub fn check_observed(&self, report: &Report, relay_events: bool) -> Vec<String> {
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
            for item in report.items().filter(|i| i.workload == index) {
                let got = match &item.outcome {
                    crate::stats::Outcome::Completed => "completed".to_owned(),
                    crate::stats::Outcome::Failed(c) => format!("failed:{c}"),
                };
                // Expectations name cause families; an implementation's own words may follow.
                let matches = crate::stats::family(&got) == expected.as_str()
                    || (expected == "failed" && got.starts_with("failed:"));
                if !matches {
                    failed.push(format!(
                        "workload {workload:?} call {}: {got}, expected {expected}",
                        item.call
                    ));
                }
            }
        }
        let counters = report.counters();
        let counted = e.counters.iter().filter(|_| relay_events);
        for (name, bound) in counted {
            let n = counters.get(name).copied().unwrap_or(0);
            if let Some(why) = violates(n, bound) {
                failed.push(format!("counter {name:?}: {n}, {why}"));
            }
        }
        failed
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
