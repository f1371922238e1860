//! Shrinking live recordings: synthetic traces of one CEP-22 transfer, disturbed on purpose.

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
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"large"}}"#.into(),
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
        completion_ratio: None,
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
