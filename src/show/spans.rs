//! What a timeline takes from a whole trace: its title, the failing calls' spans, a call's
//! window.

use super::{Lanes, ShowError, Span};
use crate::trace::{Line, Trace};
use std::collections::BTreeMap;

pub(super) fn title(trace: &Trace) -> String {
    match trace.lines.first() {
        Some(Line::Header {
            scenario,
            seed,
            driver,
            shrunk,
            ..
        }) => {
            let name = if scenario.is_empty() {
                "a live recording".to_owned()
            } else {
                format!("{scenario}, seed {seed}")
            };
            let shrunk = shrunk.as_ref().map_or(String::new(), |s| {
                format!(
                    " — shrunk to {} of {} disturbances ({})",
                    s.disturbances_after, s.disturbances_before, s.cause
                )
            });
            format!("{name} ({driver}){shrunk}")
        }
        _ => "trace".to_owned(),
    }
}

/// The calls the summary line says failed, each from its call to its failure report (or the
/// end of the trace).
pub(super) fn failing_calls(trace: &Trace, lanes: &Lanes, end_us: u64) -> Vec<Span> {
    let mut called: BTreeMap<(&str, u64), (u64, &str)> = BTreeMap::new();
    let mut failed_at: BTreeMap<(&str, u64), u64> = BTreeMap::new();
    for line in &trace.lines {
        match line {
            Line::Called {
                t,
                client,
                call,
                tool,
                ..
            } => {
                called.insert((client.as_str(), *call), (*t, tool.as_str()));
            }
            Line::Client {
                t,
                client,
                call,
                event,
            } if super::is_failure(event) => {
                failed_at.entry((client.as_str(), *call)).or_insert(*t);
            }
            _ => {}
        }
    }
    trace
        .outcomes()
        .iter()
        .filter(|o| o.outcome != "completed")
        .filter_map(|o| {
            let lane = lanes.get(&o.client)?;
            let key = (o.client.as_str(), o.call);
            // A `serve` command's calls have no `called` lines: the summary places them.
            let from_us = called
                .get(&key)
                .map(|(t, _)| *t)
                .or(o.started_us)
                .unwrap_or(0);
            let to_us = failed_at
                .get(&key)
                .copied()
                .or(o.ended_us)
                .unwrap_or(end_us)
                .max(from_us);
            Some(Span {
                lane,
                from_us,
                to_us,
                label: format!(
                    "call #{} {} ({}): {}",
                    o.call, o.tool, o.workload, o.outcome
                ),
                why: o.why.clone(),
            })
        })
        .collect()
}

/// A call's lifetime with a margin of a tenth on each side.
pub(super) fn call_window(trace: &Trace, call: u64, end_us: u64) -> Result<(u64, u64), ShowError> {
    let mut first = None;
    let mut last = None;
    for line in &trace.lines {
        let (t, c) = match line {
            Line::Called { t, call, .. }
            | Line::Client { t, call, .. }
            | Line::ChunkWritten { t, call, .. }
            | Line::ChunkRead { t, call, .. } => (*t, *call),
            _ => continue,
        };
        if c == call {
            first.get_or_insert(t);
            last = Some(t);
        }
    }
    let (Some(first), Some(last)) = (first, last) else {
        let mut known: Vec<u64> = trace
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Called { call, .. } => Some(*call),
                _ => None,
            })
            .collect();
        known.sort_unstable();
        known.dedup();
        return Err(ShowError::NoSuchCall {
            call,
            known: if known.is_empty() {
                "none".into()
            } else {
                known
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        });
    };
    let margin = (last - first) / 10 + 1000;
    Ok((
        first.saturating_sub(margin),
        (last + margin).min(end_us.max(last)),
    ))
}
