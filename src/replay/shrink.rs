//! Shrinking a failing trace to the few disturbances that cause its failure (delta debugging,
//! Zeller's ddmin).
//!
//! A disturbance is one thing the network, a relay or a publisher did that a clean run would
//! not have done: a lost message, a duplicated one, a message held more than twice its relay's
//! median delay, a message a concurrent relay intake or publish pipeline let a later one
//! overtake, or an outage. Removing a disturbance replaces that message's plan with a single
//! copy at the median delay (an intake or publish decision: in order), or suppresses the
//! outage. Every other link decision
//! stays as recorded, so each candidate run differs from the trace only where asked; messages
//! the trace never saw (a candidate run can last longer than the failing one) are undisturbed
//! too, so no fresh random disturbance can stand in for a removed one.

use super::{plans_of, scenario_of, NamedPlans, ReplayError};
use crate::trace::{EventsMode, Line, ShrinkInfo, Trace};
use std::collections::BTreeMap;
use std::time::Duration;

/// One disturbance in a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disturbance {
    /// A message on a link was lost, duplicated or held back.
    Link {
        /// (relay, peer, way) names.
        link: (String, String, String),
        /// Its number on the link.
        seq: usize,
        /// `drop`, `duplicate`, `delay` or `overtaken`.
        what: &'static str,
    },
    /// An outage.
    Outage {
        /// Its number in the run.
        index: u64,
    },
    /// A delivery in a live recording (see [`super::shrink_live`]).
    Delivery {
        /// The receiving peer.
        peer: String,
        /// The event's id.
        id: String,
        /// `duplicate`, `reordered` or `missing`.
        what: &'static str,
        /// When it arrived (a missing one: when it was published), µs.
        t: u64,
    },
}

/// Why a trace cannot be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    /// The trace cannot be replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The trace records no failure with the cause asked for.
    #[error("the trace records no failure with cause {0:?}; causes recorded: {1}")]
    NoSuchFailure(String, String),
    /// Every call in the trace completed.
    #[error("every call in this trace completed: there is no failure to shrink")]
    NothingFailed,
    /// A live recording's deliveries, fed to relaysim's receivers, fail nowhere.
    #[error("a live recording shrinks by inject replay, and none of the {0} transfers and streams its deliveries carry fails when fed to relaysim's receivers: there is no failure to shrink (`relaysim replay TRACE --mode inject` shows them)")]
    NothingInjectedFailed(usize),
    /// Replaying with every disturbance does not fail the same way.
    #[error("replaying the trace does not reproduce the failure {0:?}")]
    DoesNotReproduce(String),
}

/// What shrinking produced.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// Disturbances in the trace.
    pub before: usize,
    /// Disturbances kept.
    pub kept: Vec<Disturbance>,
    /// Candidate runs tried.
    pub runs: usize,
    /// The failure cause preserved.
    pub cause: String,
    /// The shrunk trace.
    pub text: String,
}

/// Shrinks `trace` while a call still fails with `cause` (default: the first recorded cause),
/// trying at most `max_runs` candidate runs.
pub fn shrink(
    trace: &Trace,
    cause: Option<&str>,
    max_runs: usize,
    hosts: &super::Hosts,
) -> Result<Shrunk, ShrinkError> {
    if matches!(&trace.lines[0], Line::Header { driver, .. } if driver == "live") {
        return super::shrink_live::shrink(trace, cause, max_runs);
    }
    let scenario = scenario_of(trace, hosts)?;
    let causes: Vec<String> = trace
        .outcomes()
        .iter()
        .filter_map(|o| o.outcome.strip_prefix("failed:").map(str::to_owned))
        .collect();
    if causes.is_empty() {
        return Err(ShrinkError::NothingFailed);
    }
    let cause = pick_cause(cause, &causes)?;
    let (_, seed, events, suppressed) = trace.header();
    let recorded = plans_of(trace);
    // Whole microseconds, as traces record delays, so a shrunk trace replays exactly.
    let clean = |link: &(String, String, String)| -> Duration {
        let median = scenario
            .relay_profile(&link.0)
            .map(|p| {
                if link.2 == "up" {
                    p.impairments.peer_to_relay.delay.median()
                } else {
                    p.impairments.relay_to_peer.delay.median()
                }
            })
            .unwrap_or_default();
        Duration::from_micros(median.as_micros() as u64)
    };
    let mut all = Vec::new();
    // Intake and publish decisions per stream: (seq, when made, when done).
    let mut decisions: BTreeMap<(String, String, String), Vec<(usize, u64)>> = BTreeMap::new();
    for line in &trace.lines {
        match line {
            Line::Link {
                t,
                relay,
                peer,
                way,
                seq,
                delays_us,
                ..
            } if is_decision(way) => {
                if let Some(d) = delays_us.first() {
                    decisions
                        .entry((relay.clone(), peer.clone(), way.clone()))
                        .or_default()
                        .push((*seq as usize, t + d));
                }
            }
            Line::Link {
                relay,
                peer,
                way,
                seq,
                event,
                delays_us,
                ..
            } => {
                let link = (relay.clone(), peer.clone(), way.clone());
                let c = clean(&link);
                let what = match delays_us.as_slice() {
                    [] if *event => Some("drop"),
                    [_, _, ..] => Some("duplicate"),
                    [d] if Duration::from_micros(*d) > c * 2 + Duration::from_millis(1) => {
                        Some("delay")
                    }
                    _ => None,
                };
                if let Some(what) = what {
                    all.push(Disturbance::Link {
                        link,
                        seq: *seq as usize,
                        what,
                    });
                }
            }
            Line::Outage {
                index,
                suppressed: false,
                ..
            } => all.push(Disturbance::Outage { index: *index }),
            _ => {}
        }
    }
    // A decision is a disturbance when a later one on the same stream finished first.
    for (stream, done) in decisions {
        let mut earliest_later = u64::MAX;
        let mut overtaken = Vec::new();
        for (seq, at) in done.iter().rev() {
            if *at > earliest_later {
                overtaken.push(*seq);
            }
            earliest_later = earliest_later.min(*at);
        }
        for seq in overtaken.into_iter().rev() {
            all.push(Disturbance::Link {
                link: stream.clone(),
                seq,
                what: "overtaken",
            });
        }
    }
    let config = |kept: &[usize]| -> (NamedPlans, Vec<u64>) {
        let mut plans = recorded.clone();
        let mut off: Vec<u64> = suppressed.to_vec();
        for (i, d) in all.iter().enumerate() {
            if kept.contains(&i) {
                continue;
            }
            match d {
                Disturbance::Link { link, seq, .. } => {
                    let undisturbed = if is_decision(&link.2) {
                        Vec::new()
                    } else {
                        vec![clean(link)]
                    };
                    if let Some(plan) = plans.get_mut(link).and_then(|l| l.get_mut(*seq)) {
                        *plan = undisturbed;
                    }
                }
                Disturbance::Outage { index } => off.push(*index),
                // Only live recordings have these; this list is a des trace's.
                Disturbance::Delivery { .. } => {}
            }
        }
        off.sort_unstable();
        off.dedup();
        (plans, off)
    };
    let mut runs = 0;
    let mut fails = |kept: &[usize]| -> bool {
        runs += 1;
        let (plans, off) = config(kept);
        let (report, _) = super::rerun(&scenario, seed, &plans, &off, true, EventsMode::Ids, None);
        report
            .items
            .iter()
            .any(|i| i.outcome.family() == Some(crate::stats::family(&cause)))
    };
    let kept = minimal(all.len(), &mut fails, max_runs, &cause)?;
    let (plans, off) = config(&kept);
    let info = ShrinkInfo {
        disturbances_before: all.len(),
        disturbances_after: kept.len(),
        cause: cause.clone(),
    };
    let (_, text) = super::rerun(&scenario, seed, &plans, &off, true, events, Some(info));
    Ok(Shrunk {
        before: all.len(),
        kept: kept.iter().map(|&i| all[i].clone()).collect(),
        runs,
        cause,
        text,
    })
}

/// The cause family to keep: `asked`'s when some recorded cause is of its family, else the
/// first recorded one's. `recorded` is not empty.
pub(super) fn pick_cause(asked: Option<&str>, recorded: &[String]) -> Result<String, ShrinkError> {
    // Causes are matched by family: an implementation's own words may follow it.
    let family = crate::stats::family;
    match asked {
        Some(c) if recorded.iter().any(|x| family(x) == family(c)) => Ok(family(c).to_owned()),
        Some(c) => Err(ShrinkError::NoSuchFailure(
            c.to_owned(),
            recorded.join(", "),
        )),
        None => Ok(family(&recorded[0]).to_owned()),
    }
}

/// Whether a `link` line's `way` is a relay intake or publish decision rather than a link.
fn is_decision(way: &str) -> bool {
    way == "intake" || way == "publish"
}

/// The disturbances (of `count`, by index) to keep: an error when the failure does not
/// reproduce with all of them, none when it persists with none, else ddmin's 1-minimal set.
pub(super) fn minimal(
    count: usize,
    fails: &mut impl FnMut(&[usize]) -> bool,
    max_runs: usize,
    cause: &str,
) -> Result<Vec<usize>, ShrinkError> {
    let everything: Vec<usize> = (0..count).collect();
    if !fails(&everything) {
        return Err(ShrinkError::DoesNotReproduce(cause.to_owned()));
    }
    if fails(&[]) {
        return Ok(Vec::new());
    }
    Ok(ddmin(everything, fails, max_runs))
}

/// Zeller's ddmin: a 1-minimal subset of `items` on which `fails` still holds (as far as
/// `max_runs` allows).
pub fn ddmin(
    mut items: Vec<usize>,
    fails: &mut impl FnMut(&[usize]) -> bool,
    max_runs: usize,
) -> Vec<usize> {
    let mut n = 2usize;
    let mut tried = 0usize;
    while items.len() >= 2 && tried < max_runs {
        let size = items.len().div_ceil(n);
        let chunks: Vec<Vec<usize>> = items.chunks(size).map(<[usize]>::to_vec).collect();
        let mut reduced = false;
        for chunk in &chunks {
            if tried >= max_runs {
                break;
            }
            tried += 1;
            if fails(chunk) {
                items = chunk.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && chunks.len() > 2 {
            for i in 0..chunks.len() {
                if tried >= max_runs {
                    break;
                }
                let complement: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                tried += 1;
                if fails(&complement) {
                    items = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= items.len() {
                break;
            }
            n = (n * 2).min(items.len());
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::ddmin;

    #[test]
    fn ddmin_finds_the_two_elements_that_matter() {
        let mut runs = 0;
        let mut fails = |s: &[usize]| {
            runs += 1;
            s.contains(&13) && s.contains(&71)
        };
        let kept = ddmin((0..100).collect(), &mut fails, 10_000);
        assert_eq!(kept, vec![13, 71]);
        assert!(runs < 200, "{runs} runs");
    }

    #[test]
    fn ddmin_stops_at_its_run_budget() {
        let mut fails = |s: &[usize]| s.len() > 3;
        let kept = ddmin((0..1000).collect(), &mut fails, 5);
        assert!(kept.len() > 3);
    }
}
