//! `relaysim show`: a trace as a picture. A [`Timeline`] is the trace laid out for drawing —
//! one lane per client, relay and other peer, every publication, delivery, copy, loss,
//! outage and failure as a mark in time, each failing call highlighted — and
//! [`draw`] (feature `plots`) writes it as SVG and PNG.
//!
//! The layout is its own step, without plotters, so what a picture shows is tested on the
//! model rather than on pixels.

pub mod chain;
#[cfg(feature = "plots")]
pub mod draw;
mod spans;
mod words;

use crate::trace::{Line, Trace};
use spans::{call_window, failing_calls, title};
use std::collections::{BTreeMap, BTreeSet};

/// Marks past this many are counted, not drawn: a picture of more is a smear, and the window
/// options (`--from`, `--to`, `--call`) are the way to see a part.
pub const MAX_MARKS: usize = 20_000;

/// What a lane stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneKind {
    /// A client that made calls.
    Client,
    /// A relay.
    Relay,
    /// Any other peer (servers; in live traces, connections that made no call).
    Peer,
}

/// One horizontal lane of the picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// The name, as in the trace.
    pub name: String,
    /// What it is.
    pub kind: LaneKind,
}

/// What a mark shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MarkKind {
    /// A peer sent an event to a relay.
    Published,
    /// An event reached a subscriber, in order.
    Delivered,
    /// A first copy that arrived after a later event of its author.
    Reordered,
    /// A copy of an event the peer already had.
    Duplicate,
    /// A message vanished.
    Lost,
    /// A datagram link made extra copies.
    Copied,
    /// The relay refused an event (`OK false`).
    Rejected,
    /// The relay sent a NOTICE.
    Notice,
    /// A connection went down.
    Disconnected,
    /// A connection came back.
    Connected,
    /// A workload call began.
    Called,
    /// A call ended well.
    Completed,
    /// A call's response or stream ended well, but the call failed (its stream broke, its
    /// result did not match): not drawn as completed.
    Answered,
    /// A call failed.
    Failed,
}

impl MarkKind {
    /// A short word for legends and summaries.
    pub fn word(self) -> &'static str {
        match self {
            MarkKind::Published => "published",
            MarkKind::Delivered => "delivered",
            MarkKind::Reordered => "reordered",
            MarkKind::Duplicate => "duplicate",
            MarkKind::Lost => "lost",
            MarkKind::Copied => "copied",
            MarkKind::Rejected => "rejected",
            MarkKind::Notice => "notice",
            MarkKind::Disconnected => "disconnected",
            MarkKind::Connected => "reconnected",
            MarkKind::Called => "call",
            MarkKind::Completed => "completed",
            MarkKind::Answered => "answered",
            MarkKind::Failed => "failed",
        }
    }
}

/// One mark: at a time on a lane, optionally drawn from another point (a delivery from its
/// relay at publication time, a publication from its author).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// What it shows.
    pub kind: MarkKind,
    /// Where a line to it starts: time (µs) and lane index.
    pub from: Option<(u64, usize)>,
    /// Where it is: time (µs) and lane index.
    pub at: (u64, usize),
    /// Words beside it (failures, outages, mechanisms).
    pub label: Option<String>,
}

/// A stretch of time on a lane: an outage, or a failing call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The lane.
    pub lane: usize,
    /// From (µs).
    pub from_us: u64,
    /// To (µs).
    pub to_us: u64,
    /// What it is.
    pub label: String,
    /// For a failing call: what it awaited and what happened while it was open.
    pub why: Option<String>,
}

/// Which part of a trace to show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// Start (µs); `None`: the trace's first observation.
    pub from_us: Option<u64>,
    /// End (µs); `None`: its last.
    pub to_us: Option<u64>,
    /// Only this call's lifetime (from its `called` line to its last report), with a margin.
    pub call: Option<u64>,
}

/// Why a trace cannot be shown.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShowError {
    /// `--call` names a call the trace does not have.
    #[error("the trace has no call {call} (its calls: {known})")]
    NoSuchCall {
        /// The call asked for.
        call: u64,
        /// The calls it has.
        known: String,
    },
    /// The window holds nothing.
    #[error(
        "nothing happened between {from_us} µs and {to_us} µs (the trace runs to {end_us} µs)"
    )]
    EmptyWindow {
        /// Start.
        from_us: u64,
        /// End.
        to_us: u64,
        /// The trace's last time.
        end_us: u64,
    },
}

/// A trace laid out for drawing.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// A title: scenario, seed, driver, shrinking.
    pub title: String,
    /// The lanes, top to bottom: clients, relays, other peers.
    pub lanes: Vec<Lane>,
    /// The time shown (µs).
    pub from_us: u64,
    /// Its end (µs).
    pub to_us: u64,
    /// Every mark in the window, in trace order (at most [`MAX_MARKS`]).
    pub marks: Vec<Mark>,
    /// Outages that happened (suppressed ones are not shown).
    pub outages: Vec<Span>,
    /// Failing calls, from their call to their failure.
    pub failing_calls: Vec<Span>,
    /// Marks in the window past [`MAX_MARKS`], not drawn.
    pub elided: usize,
    /// Marks in the window by kind (drawn or not).
    pub counts: BTreeMap<MarkKind, usize>,
}

/// Lanes in the order they are drawn, and their indices by name.
struct Lanes {
    lanes: Vec<Lane>,
    index: BTreeMap<String, usize>,
}

impl Lanes {
    fn of(trace: &Trace) -> Lanes {
        let mut clients = Vec::new();
        let mut relays = Vec::new();
        let mut peers = Vec::new();
        let add = |list: &mut Vec<String>, name: &str| {
            if !list.iter().any(|n| n == name) {
                list.push(name.to_owned());
            }
        };
        for line in &trace.lines {
            match line {
                Line::Called { client, .. }
                | Line::Client { client, .. }
                | Line::ChunkRead { client, .. } => add(&mut clients, client),
                _ => {}
            }
        }
        // The calls of a `serve` command are known only from the summary, under the
        // program's own name for its client.
        for o in trace.outcomes() {
            add(&mut clients, &o.client);
        }
        for line in &trace.lines {
            let (relay, peer) = match line {
                Line::Published { relay, peer, .. }
                | Line::Link { relay, peer, .. }
                | Line::Verdict { relay, peer, .. }
                | Line::Notice { relay, peer, .. }
                | Line::Auth { relay, peer, .. }
                | Line::Delivered { relay, peer, .. }
                | Line::Lost { relay, peer, .. }
                | Line::Duplicated { relay, peer, .. }
                | Line::Disconnected { relay, peer, .. }
                | Line::Connected { relay, peer, .. } => (Some(relay), Some(peer)),
                Line::Outage { relay, peer, .. } => (Some(relay), peer.as_ref()),
                _ => (None, None),
            };
            if let Some(relay) = relay.filter(|r| !r.is_empty()) {
                add(&mut relays, relay);
            }
            if let Some(peer) = peer.filter(|p| !p.is_empty() && !clients.contains(*p)) {
                add(&mut peers, peer);
            }
        }
        let lanes: Vec<Lane> = clients
            .into_iter()
            .map(|name| Lane {
                name,
                kind: LaneKind::Client,
            })
            .chain(relays.into_iter().map(|name| Lane {
                name,
                kind: LaneKind::Relay,
            }))
            .chain(peers.into_iter().map(|name| Lane {
                name,
                kind: LaneKind::Peer,
            }))
            .collect();
        // A relay and a peer of one name would share a lane; relays are named apart from
        // peers in every trace relaysim writes, so the first lane of a name wins.
        let mut index = BTreeMap::new();
        for (i, lane) in lanes.iter().enumerate() {
            index.entry(lane.name.clone()).or_insert(i);
        }
        Lanes { lanes, index }
    }

    fn get(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}

/// `1.5 s`, `250 ms`: a time for a label.
fn human(us: u64) -> String {
    crate::stats::output::human_us(us)
}

impl Timeline {
    /// Lays `trace` out, restricted to `window`.
    pub fn new(trace: &Trace, window: Window) -> Result<Timeline, ShowError> {
        let lanes = Lanes::of(trace);
        let end_us = trace.lines.iter().filter_map(Line::time).max().unwrap_or(0);
        let start_us = trace.lines.iter().filter_map(Line::time).min().unwrap_or(0);
        let failing = failing_calls(trace, &lanes, end_us);
        let (from_us, to_us) = match window.call {
            Some(call) => call_window(trace, call, end_us)?,
            None => (
                window.from_us.unwrap_or(start_us),
                window
                    .to_us
                    .unwrap_or(end_us)
                    .max(window.from_us.unwrap_or(0)),
            ),
        };
        let in_window = |t: u64| t >= from_us && t <= to_us;
        let mut marks = Vec::new();
        let mut counts: BTreeMap<MarkKind, usize> = BTreeMap::new();
        let mut elided = 0usize;
        let mut push = |mark: Mark| {
            if !in_window(mark.at.0) {
                return;
            }
            *counts.entry(mark.kind).or_default() += 1;
            if marks.len() < MAX_MARKS {
                marks.push(mark);
            } else {
                elided += 1;
            }
        };
        // When each event left its author for each relay (a delivery's line starts there).
        let mut sent: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        // Calls the trace's summary says failed: their good answers are not completions.
        let failed_calls: BTreeSet<(&str, u64)> = trace
            .outcomes()
            .iter()
            .filter(|o| o.outcome != "completed")
            .map(|o| (o.client.as_str(), o.call))
            .collect();
        let mut outages = Vec::new();
        for line in &trace.lines {
            match line {
                Line::Published {
                    t, peer, relay, id, ..
                } => {
                    sent.entry((relay.as_str(), id.as_str())).or_insert(*t);
                    if let (Some(p), Some(r)) = (lanes.get(peer), lanes.get(relay)) {
                        push(Mark {
                            kind: MarkKind::Published,
                            from: Some((*t, p)),
                            at: (*t, r),
                            label: None,
                        });
                    }
                }
                Line::Delivered {
                    t,
                    relay,
                    peer,
                    id,
                    latency_us,
                    reordered,
                    duplicate,
                    via,
                } => {
                    let (Some(r), Some(p)) = (lanes.get(relay), lanes.get(peer)) else {
                        continue;
                    };
                    let start = sent
                        .get(&(relay.as_str(), id.as_str()))
                        .copied()
                        .unwrap_or_else(|| t.saturating_sub(*latency_us));
                    let kind = if *duplicate {
                        MarkKind::Duplicate
                    } else if *reordered {
                        MarkKind::Reordered
                    } else {
                        MarkKind::Delivered
                    };
                    push(Mark {
                        kind,
                        from: Some((start, r)),
                        at: (*t, p),
                        label: via.clone(),
                    });
                }
                Line::Outage {
                    t,
                    index,
                    relay,
                    peer,
                    kind,
                    duration_us,
                    suppressed: false,
                } => {
                    let lane = peer
                        .as_deref()
                        .and_then(|p| lanes.get(p))
                        .or_else(|| lanes.get(relay));
                    let end = t.saturating_add(*duration_us);
                    if let Some(lane) = lane.filter(|_| end >= from_us && *t <= to_us) {
                        outages.push(Span {
                            lane,
                            from_us: *t,
                            to_us: end,
                            label: format!("outage {index}: {kind} {}", human(*duration_us)),
                            why: None,
                        });
                    }
                }
                other => {
                    if let Some((kind, t, name, label)) = point_mark(other, &failed_calls) {
                        if let Some(lane) = lanes.get(name) {
                            push(Mark {
                                kind,
                                from: None,
                                at: (t, lane),
                                label,
                            });
                        }
                    }
                }
            }
        }
        // A `serve` command's calls, placed by the times it reported: made, then completed or
        // failed (in traces with `called` lines these marks come from the lines).
        let has_called: BTreeSet<(&str, u64)> = trace
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Called { client, call, .. } => Some((client.as_str(), *call)),
                _ => None,
            })
            .collect();
        for o in trace.outcomes() {
            let (Some(started), Some(lane)) = (o.started_us, lanes.get(&o.client)) else {
                continue;
            };
            if has_called.contains(&(o.client.as_str(), o.call)) {
                continue;
            }
            let label = format!("{} #{}", o.tool, o.call);
            push(Mark {
                kind: MarkKind::Called,
                from: None,
                at: (started, lane),
                label: Some(label.clone()),
            });
            if let Some(ended) = o.ended_us {
                let (kind, label) = if o.outcome == "completed" {
                    (MarkKind::Completed, None)
                } else {
                    (MarkKind::Failed, Some(format!("#{} {}", o.call, o.outcome)))
                };
                push(Mark {
                    kind,
                    from: None,
                    at: (ended.max(started), lane),
                    label,
                });
            }
        }
        if marks.is_empty() && outages.is_empty() && (from_us, to_us) != (start_us, end_us) {
            return Err(ShowError::EmptyWindow {
                from_us,
                to_us,
                end_us,
            });
        }
        let failing_calls = failing
            .into_iter()
            .filter(|s| s.to_us >= from_us && s.from_us <= to_us)
            .collect();
        Ok(Timeline {
            title: title(trace),
            lanes: lanes.lanes,
            from_us,
            to_us: to_us.max(from_us + 1),
            marks,
            outages,
            failing_calls,
            elided,
            counts,
        })
    }
}

/// Whether a client's report ends its call in failure.
pub(crate) fn is_failure(event: &str) -> bool {
    event.starts_with("failed:") || event.starts_with("stream-ended:")
}

/// A mark drawn at one point of one lane: its kind, time, lane name and words, for the lines
/// that make one (`None` for the others and for client reports that end nothing).
fn point_mark<'a>(
    line: &'a Line,
    failed_calls: &BTreeSet<(&str, u64)>,
) -> Option<(MarkKind, u64, &'a str, Option<String>)> {
    Some(match line {
        // Lost on the way up: it never reached the relay; down: the peer.
        Line::Lost {
            t,
            relay,
            peer,
            way,
            ..
        } => (
            MarkKind::Lost,
            *t,
            if way == "up" { relay } else { peer },
            None,
        ),
        Line::Duplicated {
            t, peer, copies, ..
        } => (MarkKind::Copied, *t, peer, Some(format!("+{copies}"))),
        Line::Verdict {
            t,
            peer,
            accepted: false,
            message,
            ..
        } => (MarkKind::Rejected, *t, peer, Some(message.clone())),
        Line::Notice { t, peer, .. } => (MarkKind::Notice, *t, peer, None),
        // An AUTH challenge is a message from the relay, drawn as its NOTICEs are.
        Line::Auth { t, peer, .. } => (MarkKind::Notice, *t, peer, Some("AUTH".into())),
        Line::Disconnected {
            t, peer, reason, ..
        } => (MarkKind::Disconnected, *t, peer, Some(reason.clone())),
        Line::Connected { t, peer, .. } => (MarkKind::Connected, *t, peer, None),
        Line::Called {
            t,
            client,
            call,
            tool,
            ..
        } => (
            MarkKind::Called,
            *t,
            client,
            Some(format!("{tool} #{call}")),
        ),
        Line::Client {
            t,
            client,
            call,
            event,
        } if is_failure(event) => (
            MarkKind::Failed,
            *t,
            client,
            Some(format!("#{call} {event}")),
        ),
        Line::Client {
            t,
            client,
            call,
            event,
        } if event == "response-ok" || event == "stream-ended-ok" => {
            if failed_calls.contains(&(client.as_str(), *call)) {
                (
                    MarkKind::Answered,
                    *t,
                    client,
                    Some(format!("#{call} {event}")),
                )
            } else {
                (MarkKind::Completed, *t, client, None)
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
