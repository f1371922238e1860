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

use super::shrink::{ddmin, pick_cause, Disturbance, ShrinkError, Shrunk};
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
    let everything: Vec<usize> = (0..undos.len()).collect();
    if !fails(&everything) {
        return Err(ShrinkError::DoesNotReproduce(cause));
    }
    let kept = if fails(&[]) {
        Vec::new()
    } else {
        ddmin(everything, &mut fails, max_runs)
    };
    let info = ShrinkInfo {
        disturbances_before: undos.len(),
        disturbances_after: kept.len(),
        cause: cause.clone(),
    };
    let mut text = String::new();
    for line in candidate(trace, &undos, &kept) {
        let line = match line {
            Line::Header {
                format,
                relaysim,
                scenario,
                scenario_hash,
                seed,
                driver,
                events,
                suppressed_outages,
                scenario_toml,
                ..
            } => Line::Header {
                format,
                relaysim,
                scenario,
                scenario_hash,
                seed,
                driver,
                events,
                suppressed_outages,
                shrunk: Some(info.clone()),
                scenario_toml,
            },
            other => other,
        };
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
                    body.push((
                        key,
                        Line::Delivered {
                            t: key.0,
                            relay: relay.clone(),
                            peer: peer.clone(),
                            id: id.clone(),
                            latency_us: latency_us.saturating_sub(old.saturating_sub(key.0)),
                            reordered: false,
                            duplicate: false,
                            via: None,
                        },
                    ));
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
                body.push((
                    key,
                    Line::Delivered {
                        t: key.0,
                        relay: relay.clone(),
                        peer: peer.clone(),
                        id: id.clone(),
                        latency_us: key.0.saturating_sub(*published),
                        reordered: false,
                        duplicate: false,
                        via: None,
                    },
                ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::identity::Identity;
    use crate::protocol::jsonrpc::ProgressToken;
    use crate::protocol::oversized::{Digest, TransferBody, TransferFrame};
    use nostr::prelude::{Event, Tag};

    /// A CEP-22 transfer from `server` to `client` as signed events: start, three chunks, end.
    /// Plus the client's request, so the trace knows the client's key.
    struct Transfer {
        request: Event,
        frames: Vec<Event>,
    }

    fn transfer() -> Transfer {
        let server = Identity::derive(1, "server");
        let client = Identity::derive(1, "client");
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(300)
        );
        let pieces = [&text[..100], &text[100..200], &text[200..]];
        let token = ProgressToken::String("1".into());
        let frame = |progress: u64, body: TransferBody| TransferFrame {
            token: token.clone(),
            progress,
            message: None,
            body,
        };
        let mut bodies = vec![frame(
            1,
            TransferBody::Start {
                completion_mode: Some("render".into()),
                digest: Digest::of(&text),
                total_bytes: text.len() as u64,
                total_chunks: 3,
            },
        )];
        for (i, piece) in pieces.iter().enumerate() {
            bodies.push(frame(
                2 + i as u64,
                TransferBody::Chunk {
                    data: (*piece).to_owned(),
                },
            ));
        }
        bodies.push(frame(5, TransferBody::End));
        let to_client = || vec![Tag::public_key(client.public_key())];
        Transfer {
            request: client.sign(
                25910,
                1,
                vec![Tag::public_key(server.public_key())],
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"large"}}"#
                    .into(),
            ),
            frames: bodies
                .iter()
                .enumerate()
                .map(|(i, f)| server.sign(25910, 2 + i as u64, to_client(), f.to_json()))
                .collect(),
        }
    }

    /// A live trace: the request published at 0, frame i at (i + 1) ms, and `deliveries`
    /// (frame number, reordered, duplicate, time in µs) to the client, all in time order.
    fn trace(deliveries: &[(usize, bool, bool, u64)]) -> Trace {
        let transfer = transfer();
        let mut lines = vec![Line::Header {
            format: crate::trace::FORMAT,
            relaysim: "test".into(),
            scenario: String::new(),
            scenario_hash: String::new(),
            seed: 0,
            driver: "live".into(),
            events: crate::trace::EventsMode::Full,
            suppressed_outages: Vec::new(),
            shrunk: None,
            scenario_toml: String::new(),
        }];
        let published = |t: u64, peer: &str, event: &Event| Line::Published {
            t,
            peer: peer.into(),
            relay: "upstream".into(),
            id: event.id.to_hex(),
            bytes: 0,
            event: Some(serde_json::to_value(event).unwrap()),
        };
        let mut body = vec![published(0, "client", &transfer.request)];
        for (i, frame) in transfer.frames.iter().enumerate() {
            body.push(published(1_000 * (i as u64 + 1), "server", frame));
        }
        for &(frame, reordered, duplicate, t) in deliveries {
            body.push(Line::Delivered {
                t,
                relay: "upstream".into(),
                peer: "client".into(),
                id: transfer.frames[frame].id.to_hex(),
                latency_us: 500,
                reordered,
                duplicate,
                via: None,
            });
        }
        body.sort_by_key(|l| l.time());
        lines.extend(body);
        lines.push(Line::Summary {
            outcomes: Vec::new(),
            integrity_violations: 0,
            completion_ratio: 1.0,
            dropped: 0,
        });
        let text: String = lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect();
        Trace::parse(&text, "test.jsonl").unwrap()
    }

    /// `frames` delivered 0.5 ms after their publication, in order.
    fn in_order(frames: &[usize]) -> Vec<(usize, bool, bool, u64)> {
        frames
            .iter()
            .map(|&f| (f, false, false, 1_000 * (f as u64 + 1) + 500))
            .collect()
    }

    fn injected(trace: &Trace) -> Vec<String> {
        let frames = Frames::of(trace).unwrap();
        inject_lines(&trace.lines, &frames)
            .into_iter()
            .map(|i| i.outcome)
            .collect()
    }

    fn kept(shrunk: &Shrunk) -> Vec<(&'static str, u64)> {
        shrunk
            .kept
            .iter()
            .map(|d| match d {
                Disturbance::Delivery { what, t, .. } => (*what, *t),
                other => panic!("not a delivery: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn an_undisturbed_transfer_completes_and_there_is_nothing_to_shrink() {
        let clean = trace(&in_order(&[0, 1, 2, 3, 4]));
        assert_eq!(injected(&clean), ["completed"]);
        assert!(matches!(
            shrink(&clean, None, 100),
            Err(ShrinkError::NothingInjectedFailed(1))
        ));
    }

    #[test]
    fn a_chunk_overtaken_by_the_end_is_kept_and_a_harmless_duplicate_undone() {
        // start, chunk 0, chunk 0 again, chunk 2, end, then chunk 1 (after the end, made
        // later), past the receiver's 5 s grace after the end.
        let recorded = trace(&[
            (0, false, false, 1_500),
            (1, false, false, 2_500),
            (1, false, true, 2_600),
            (3, false, false, 4_500),
            (4, false, false, 5_500),
            (2, true, false, 6_000_000),
        ]);
        let before = injected(&recorded);
        assert_eq!(before.len(), 1);
        assert!(before[0].starts_with("failed:"), "{before:?}");
        let shrunk = shrink(&recorded, None, 100).unwrap();
        assert_eq!(shrunk.before, 2, "a duplicate and a reordering");
        assert_eq!(kept(&shrunk), [("reordered", 6_000_000)]);
        // The shrunk trace reads back and fails the same way, without the duplicate.
        let again = Trace::parse(&shrunk.text, "shrunk.jsonl").unwrap();
        assert_eq!(injected(&again), before);
        let duplicates = again
            .lines
            .iter()
            .filter(|l| {
                matches!(
                    l,
                    Line::Delivered {
                        duplicate: true,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(duplicates, 0);
        assert!(matches!(
            &again.lines[0],
            Line::Header { shrunk: Some(info), .. } if info.disturbances_after == 1
        ));
        // Undoing the reordering too puts chunk 1 before the end: the transfer completes.
        let undisturbed = candidate(
            &recorded,
            &disturbances(&recorded, &Frames::of(&recorded).unwrap()),
            &[],
        );
        assert_eq!(
            inject_lines(&undisturbed, &Frames::of(&recorded).unwrap())
                .into_iter()
                .map(|i| i.outcome)
                .collect::<Vec<_>>(),
            ["completed"]
        );
    }

    #[test]
    fn a_chunk_that_never_arrived_is_kept_as_missing() {
        let recorded = trace(&in_order(&[0, 1, 3, 4]));
        assert!(injected(&recorded)[0].starts_with("failed:"));
        let shrunk = shrink(&recorded, None, 100).unwrap();
        // Chunk 1 was published at 3 ms.
        assert_eq!(kept(&shrunk), [("missing", 3_000)]);
        let frames = Frames::of(&recorded).unwrap();
        let undos = disturbances(&recorded, &frames);
        let restored = candidate(&recorded, &undos, &[]);
        assert_eq!(inject_lines(&restored, &frames)[0].outcome, "completed");
    }

    /// The ids of the delivered lines, in order.
    fn delivered(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| match l {
                Line::Delivered { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn undone_reorderings_put_frames_back_in_publication_order() {
        // Chunks 2 and then 1 arrive after the end: both move before it, chunk 1 first.
        let recorded = trace(&[
            (0, false, false, 1_500),
            (1, false, false, 2_500),
            (4, false, false, 5_500),
            (3, true, false, 6_000_000),
            (2, true, false, 6_000_100),
        ]);
        let frames = Frames::of(&recorded).unwrap();
        let undos = disturbances(&recorded, &frames);
        assert_eq!(undos.len(), 2);
        let undone = candidate(&recorded, &undos, &[]);
        let ids: Vec<String> = transfer().frames.iter().map(|e| e.id.to_hex()).collect();
        assert_eq!(delivered(&undone), ids);
        // And the times still never go backwards.
        let text: String = undone
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect();
        Trace::parse(&text, "undone.jsonl").unwrap();
    }

    #[test]
    fn a_lone_copy_marked_duplicate_is_not_undone_into_a_loss() {
        // The first copy of chunk 1 is not in the trace (a writer that fell behind drops
        // lines), so its only copy carries the duplicate mark.
        let recorded = trace(&[
            (0, false, false, 1_500),
            (1, false, false, 2_500),
            (2, false, true, 3_500),
            (3, false, false, 4_500),
            (4, false, false, 5_500),
        ]);
        let frames = Frames::of(&recorded).unwrap();
        assert!(disturbances(&recorded, &frames).is_empty());
    }

    #[test]
    fn a_cause_nobody_failed_with_is_refused() {
        let recorded = trace(&in_order(&[0, 1, 3, 4]));
        assert!(matches!(
            shrink(&recorded, Some("stream-sequence"), 100),
            Err(ShrinkError::NoSuchFailure(..))
        ));
    }
}
