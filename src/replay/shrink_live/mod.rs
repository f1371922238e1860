//! Shrinking a live recording (from `serve --trace`, `record`, `run --engine live|turmoil`) by
//! inject replay.
//!
//! A live trace records what crossed real sockets, not decisions the simulator could take
//! back, and its peers may be someone else's code (the TypeScript SDK) that cannot be rerun
//! deterministically. What can be rerun is relaysim's receivers: `replay --mode inject` feeds
//! the recorded deliveries to fresh CEP-22 and CEP-41 receivers. The failure kept is one of
//! theirs, and the disturbances are the relay's, on the deliveries of progress frames (the only
//! events those receivers read):
//!
//! - `duplicate`: a copy of an event the peer already had. Undone: the copy is removed.
//! - `reordered`: a first copy that arrived after an event its author made later. Undone: it
//!   arrives just before the first such later event did.
//! - `missing`: an event addressed to a peer (its `p` tag names the key that peer's connection
//!   published with) that the peer never received although it received events before and after
//!   its publication: lost on a link, with a connection, or refused by the relay. Undone: it
//!   arrives the trace's median delivery latency after its publication.
//!
//! ddmin ([`super::shrink::ddmin`]) finds a 1-minimal set of disturbances under which an
//! injected receiver still fails with the cause, and the shrunk trace is the recording with
//! every other disturbance undone, so `replay --mode inject` of it fails the same way.

use super::shrink::{minimal, pick_cause, Disturbance, ShrinkError, Shrunk};
use super::{inject_lines, Frames};
use crate::trace::{Line, ShrinkInfo, Trace};
use std::collections::{BTreeMap, BTreeSet};

/// One undoable disturbance and how to undo it.
struct Undo {
    /// What it is, as reported.
    disturbance: Disturbance,
    /// The edit that undoes it.
    edit: Edit,
}

enum Edit {
    /// Remove line `line` (a duplicate copy).
    Remove { line: usize },
    /// Move line `line` (a reordered first copy) to `to`.
    Move { line: usize, to: Place },
    /// Add a delivery at `to` (in place of line `lost`, the recorded loss, if any).
    Deliver {
        lost: Option<usize>,
        to: Place,
        relay: String,
        peer: String,
        id: String,
        published: u64,
    },
}

/// Where a moved or added delivery goes; `order` is its event's publication order, which
/// orders several deliveries placed at one spot.
#[derive(Clone, Copy)]
enum Place {
    /// Just before line `line`, at its time.
    Before { line: usize, order: usize },
    /// At time `t`, after every recorded line of that time.
    At { t: u64, order: usize },
}

impl Place {
    /// The sort key of a line placed here (see [`candidate`]) and its time.
    fn key(self, trace: &Trace) -> (u64, usize, usize) {
        match self {
            Place::Before { line, order } => (
                trace.lines[line].time().unwrap_or_default(),
                2 * line,
                order,
            ),
            Place::At { t, order } => (t, usize::MAX, order),
        }
    }
}

/// What the trace says about each event: its publication's order, time, relay and author,
/// and the keys it is addressed to.
struct Publication {
    order: usize,
    t: u64,
    relay: String,
    author: String,
    addressed: Vec<String>,
}

/// Shrinks a live trace while an injected receiver still fails with `cause` (default: the
/// first injected failure), trying at most `max_runs` candidates.
pub(super) fn shrink(
    trace: &Trace,
    cause: Option<&str>,
    max_runs: usize,
) -> Result<Shrunk, ShrinkError> {
    let frames = Frames::of(trace)?;
    let injected = inject_lines(&trace.lines, &frames);
    let causes: Vec<String> = injected
        .iter()
        .filter_map(|i| i.outcome.strip_prefix("failed:").map(str::to_owned))
        .collect();
    if causes.is_empty() {
        return Err(ShrinkError::NothingInjectedFailed(injected.len()));
    }
    let cause = pick_cause(cause, &causes)?;
    let undos = disturbances(trace, &frames);
    let mut runs = 0;
    let mut fails = |kept: &[usize]| -> bool {
        runs += 1;
        inject_lines(&candidate(trace, &undos, kept), &frames)
            .iter()
            .any(|i| {
                i.outcome
                    .strip_prefix("failed:")
                    .is_some_and(|c| crate::stats::family(c) == cause)
            })
    };
    let kept = minimal(undos.len(), &mut fails, max_runs, &cause)?;
    let info = ShrinkInfo {
        disturbances_before: undos.len(),
        disturbances_after: kept.len(),
        cause: cause.clone(),
    };
    let mut text = String::new();
    for mut line in candidate(trace, &undos, &kept) {
        if let Line::Header { shrunk, .. } = &mut line {
            *shrunk = Some(info.clone());
        }
        text.push_str(&serde_json::to_string(&line).expect("trace lines serialize"));
        text.push('\n');
    }
    Ok(Shrunk {
        before: undos.len(),
        kept: kept.iter().map(|&i| undos[i].disturbance.clone()).collect(),
        runs,
        cause,
        text,
    })
}

/// The trace's disturbances on progress frames, in trace order.
fn disturbances(trace: &Trace, frames: &Frames) -> Vec<Undo> {
    let publications = publications(trace);
    // The keys each peer (connection name) published with.
    let mut peers_of_key: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for line in &trace.lines {
        if let Line::Published { peer, id, .. } = line {
            if let Some(p) = publications.get(id.as_str()) {
                peers_of_key
                    .entry(p.author.as_str())
                    .or_default()
                    .insert(peer.as_str());
            }
        }
    }
    let mut undos = Vec::new();
    // Per peer: ids received, its first copies as (line, publication), when it received its
    // first and last events, and the latencies of its deliveries.
    let mut received: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut first_copies: BTreeMap<&str, Vec<FirstCopy>> = BTreeMap::new();
    let mut first_and_last: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut latencies: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut losses: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (i, line) in trace.lines.iter().enumerate() {
        if let Line::Lost {
            peer,
            way,
            id: Some(id),
            ..
        } = line
        {
            if way == "down" {
                losses.entry((peer.as_str(), id.as_str())).or_insert(i);
            }
        }
        let Line::Delivered {
            t,
            peer,
            id,
            latency_us,
            reordered,
            ..
        } = line
        else {
            continue;
        };
        latencies
            .entry(peer.as_str())
            .or_default()
            .push(*latency_us);
        let span = first_and_last.entry(peer.as_str()).or_insert((*t, *t));
        span.1 = *t;
        // A copy is a duplicate when the trace holds an earlier one; a `duplicate` mark alone
        // (its first copy may be among lines the writer dropped) is not undone into a loss.
        let first = received
            .entry(peer.as_str())
            .or_default()
            .insert(id.as_str());
        let Some(publication) = publications.get(id.as_str()) else {
            continue;
        };
        let is_frame = frames.by_id.contains_key(id);
        if is_frame && !first {
            undos.push(Undo {
                disturbance: delivery(peer, id, "duplicate", *t),
                edit: Edit::Remove { line: i },
            });
            continue;
        }
        if !first {
            continue;
        }
        let copies = first_copies.entry(peer.as_str()).or_default();
        if is_frame && *reordered {
            if let Some(before) = overtaker(copies, publication, u64::MAX) {
                undos.push(Undo {
                    disturbance: delivery(peer, id, "reordered", *t),
                    edit: Edit::Move {
                        line: i,
                        to: Place::Before {
                            line: before,
                            order: publication.order,
                        },
                    },
                });
            }
        }
        copies.push((i, *t, publication));
    }
    let medians: BTreeMap<&str, u64> = latencies
        .into_iter()
        .map(|(peer, mut l)| {
            l.sort_unstable();
            (peer, l[l.len() / 2])
        })
        .collect();
    // Missing frames, in publication order, each (peer, id) once.
    let mut missing: BTreeSet<(usize, &str, &str)> = BTreeSet::new();
    for (id, publication) in &publications {
        if !frames.by_id.contains_key(*id) {
            continue;
        }
        for key in &publication.addressed {
            for peer in peers_of_key.get(key.as_str()).into_iter().flatten() {
                let alive = first_and_last
                    .get(peer)
                    .is_some_and(|(first, last)| *first <= publication.t && publication.t < *last);
                let got = received.get(peer).is_some_and(|ids| ids.contains(id));
                if alive && !got {
                    missing.insert((publication.order, peer, id));
                }
            }
        }
    }
    for (_, peer, id) in missing {
        let publication = &publications[id];
        // The peer's usual latency after publication, but never after a later event of the
        // same author reached it: undoing a loss must not make a reordering.
        let usual = publication.t + medians.get(peer).copied().unwrap_or(0);
        let copies = first_copies.get(peer).map_or(&[][..], Vec::as_slice);
        let to = match overtaker(copies, publication, usual) {
            Some(line) => Place::Before {
                line,
                order: publication.order,
            },
            None => Place::At {
                t: usual,
                order: publication.order,
            },
        };
        undos.push(Undo {
            disturbance: delivery(peer, id, "missing", publication.t),
            edit: Edit::Deliver {
                lost: losses.get(&(peer, id)).copied(),
                to,
                relay: publication.relay.clone(),
                peer: peer.to_owned(),
                id: (*id).to_owned(),
                published: publication.t,
            },
        });
    }
    undos
}

/// A peer's first copy of an event: its line, arrival time and publication.
type FirstCopy<'a> = (usize, u64, &'a Publication);

/// The line of the first of `copies` (a peer's first copies, in trace order) that is of an
/// event its author made after `publication`'s and arrived before `until`.
fn overtaker(copies: &[FirstCopy], publication: &Publication, until: u64) -> Option<usize> {
    copies
        .iter()
        .find(|(_, t, p)| {
            p.author == publication.author && p.order > publication.order && *t < until
        })
        .map(|(line, _, _)| *line)
}

fn delivery(peer: &str, id: &str, what: &'static str, t: u64) -> Disturbance {
    Disturbance::Delivery {
        peer: peer.to_owned(),
        id: id.to_owned(),
        what,
        t,
    }
}

/// Each published event's first publication.
fn publications(trace: &Trace) -> BTreeMap<&str, Publication> {
    let mut out = BTreeMap::new();
    for line in &trace.lines {
        let Line::Published {
            t,
            relay,
            id,
            event: Some(event),
            ..
        } = line
        else {
            continue;
        };
        if out.contains_key(id.as_str()) {
            continue;
        }
        let author = event["pubkey"].as_str().unwrap_or_default().to_owned();
        let addressed = event["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tag| match tag.as_array().map(Vec::as_slice) {
                Some([name, value, ..]) if name == "p" => value.as_str().map(str::to_owned),
                _ => None,
            })
            .collect();
        let order = out.len();
        out.insert(
            id.as_str(),
            Publication {
                order,
                t: *t,
                relay: relay.clone(),
                author,
                addressed,
            },
        );
    }
    out
}

/// The trace's lines with every disturbance not in `kept` undone.
///
/// Lines are sorted by (time, slot, order): recorded line i keeps slot 2i+1, a line placed
/// before line j takes slot 2j at j's time, one placed at a time goes after every recorded
/// line of that time, and `order` (publication order) orders lines placed at one spot.
/// Recorded times never go backwards, so the recorded lines keep their order.
fn candidate(trace: &Trace, undos: &[Undo], kept: &[usize]) -> Vec<Line> {
    let kept: BTreeSet<usize> = kept.iter().copied().collect();
    let mut removed = BTreeSet::new();
    let mut body: Vec<((u64, usize, usize), Line)> = Vec::new();
    for (k, undo) in undos.iter().enumerate() {
        if kept.contains(&k) {
            continue;
        }
        match &undo.edit {
            Edit::Remove { line } => {
                removed.insert(*line);
            }
            Edit::Move { line, to } => {
                removed.insert(*line);
                if let Line::Delivered {
                    t: old,
                    relay,
                    peer,
                    id,
                    latency_us,
                    ..
                } = &trace.lines[*line]
                {
                    let key = to.key(trace);
                    let latency = latency_us.saturating_sub(old.saturating_sub(key.0));
                    body.push((key, plain_delivery(key.0, relay, peer, id, latency)));
                }
            }
            Edit::Deliver {
                lost,
                to,
                relay,
                peer,
                id,
                published,
            } => {
                removed.extend(*lost);
                let key = to.key(trace);
                let latency = key.0.saturating_sub(*published);
                body.push((key, plain_delivery(key.0, relay, peer, id, latency)));
            }
        }
    }
    let last = trace.lines.len() - 1;
    for (i, line) in trace.lines.iter().enumerate().take(last).skip(1) {
        if !removed.contains(&i) {
            body.push((
                (line.time().unwrap_or_default(), 2 * i + 1, 0),
                line.clone(),
            ));
        }
    }
    body.sort_by_key(|(key, _)| *key);
    let mut lines = Vec::with_capacity(body.len() + 2);
    lines.push(trace.lines[0].clone());
    lines.extend(body.into_iter().map(|(_, line)| line));
    lines.push(trace.lines[last].clone());
    lines
}

/// A delivery of `id` to `peer` at `t`, marked neither reordered nor duplicate: what an undone
/// disturbance leaves.
fn plain_delivery(t: u64, relay: &str, peer: &str, id: &str, latency_us: u64) -> Line {
    Line::Delivered {
        t,
        relay: relay.to_owned(),
        peer: peer.to_owned(),
        id: id.to_owned(),
        latency_us,
        reordered: false,
        duplicate: false,
        via: None,
    }
}

#[cfg(test)]
mod tests;
