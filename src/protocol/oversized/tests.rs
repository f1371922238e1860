//! One test per CEP-22 rule, named after it, plus the reordering choices of the receiver.

use super::*;
use crate::protocol::envelope::EscapedContentEnvelope;
use crate::protocol::jsonrpc::{Message, RequestId};
use std::time::Duration;

const ENV: EscapedContentEnvelope = EscapedContentEnvelope { overhead: 600 };
const T0: Duration = Duration::ZERO;

fn token() -> RequestId {
    RequestId::String("req-123".into())
}

/// A JSON-RPC response whose text is about `n` bytes, with escapes and multi-byte characters.
fn message(n: usize) -> String {
    let text: String = "ab\"c\\dé€😀\n".chars().cycle().take(n).collect();
    Message::Response {
        id: RequestId::Number(1),
        result: serde_json::json!({ "content": [{ "type": "text", "text": text }] }),
    }
    .to_json()
}

fn sender(payload: &str, budget: usize, wait: bool) -> OversizedSender {
    let config = SenderConfig {
        budget,
        wait_for_accept: wait,
        ..SenderConfig::default()
    };
    OversizedSender::new(token(), payload.to_owned(), config, &ENV).unwrap()
}

/// Every frame the sender emits without any answer from the receiver.
fn drain(s: &mut OversizedSender) -> Vec<TransferFrame> {
    std::iter::from_fn(|| s.poll_transmit(T0)).collect()
}

fn receiver(send_accept: bool) -> OversizedReceiver<&'static str> {
    OversizedReceiver::new(ReceiverConfig {
        send_accept,
        ..ReceiverConfig::default()
    })
}

fn events(r: &mut OversizedReceiver<&'static str>) -> Vec<ReceiverEvent<&'static str>> {
    std::iter::from_fn(|| r.poll_event()).collect()
}

fn completed(r: &mut OversizedReceiver<&'static str>) -> Option<String> {
    events(r).into_iter().find_map(|e| match e {
        ReceiverEvent::Completed { message, .. } => message,
        _ => None,
    })
}

/// Asserts the receiver surfaced exactly `payload` (without printing megabytes on failure).
fn assert_delivered(r: &mut OversizedReceiver<&'static str>, payload: &str) {
    let evs = events(r);
    let got = evs.iter().find_map(|e| match e {
        ReceiverEvent::Completed { message, .. } => message.as_ref(),
        _ => None,
    });
    match got {
        Some(m) => assert!(
            m == payload,
            "delivered {} bytes, sent {}",
            m.len(),
            payload.len()
        ),
        None => panic!(
            "nothing delivered; events: {:?}",
            evs.iter().map(short).collect::<Vec<_>>()
        ),
    }
}

fn short(e: &ReceiverEvent<&'static str>) -> String {
    match e {
        ReceiverEvent::Completed { message, .. } => {
            format!(
                "Completed({} bytes)",
                message.as_ref().map_or(0, String::len)
            )
        }
        other => format!("{other:?}"),
    }
}

fn failure(r: &mut OversizedReceiver<&'static str>) -> Option<TransferFailure> {
    events(r).into_iter().find_map(|e| match e {
        ReceiverEvent::Failed { failure, .. } => Some(failure),
        _ => None,
    })
}

fn feed(r: &mut OversizedReceiver<&'static str>, frames: impl IntoIterator<Item = TransferFrame>) {
    for f in frames {
        r.handle_frame(&"alice", f, T0);
    }
}

/// A direct-mode transfer's frames, at least `chunks` chunks.
fn direct_frames(chunks: usize) -> (String, Vec<TransferFrame>) {
    let payload = message(chunks * 900);
    let frames = drain(&mut sender(&payload, 1500, false));
    assert!(frames.len() >= chunks + 2);
    (payload, frames)
}

fn start_fields(f: &TransferFrame) -> (Option<String>, Digest, u64, u64) {
    match &f.body {
        TransferBody::Start {
            completion_mode,
            digest,
            total_bytes,
            total_chunks,
        } => (
            completion_mode.clone(),
            *digest,
            *total_bytes,
            *total_chunks,
        ),
        other => panic!("expected start, got {other:?}"),
    }
}

#[test]
fn sender_must_use_completion_mode_render() {
    let (_, frames) = direct_frames(3);
    assert_eq!(start_fields(&frames[0]).0.as_deref(), Some("render"));
}

#[test]
fn digest_must_be_sha256_of_the_exact_serialized_utf8_string() {
    let (payload, frames) = direct_frames(3);
    let expected = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(payload.as_bytes()))
    };
    assert_eq!(
        start_fields(&frames[0]).1.to_wire(),
        format!("sha256:{expected}")
    );
}

#[test]
fn total_bytes_must_equal_the_utf8_byte_length() {
    let (payload, frames) = direct_frames(3);
    assert_eq!(start_fields(&frames[0]).2, payload.len() as u64);
    assert_ne!(
        payload.len(),
        payload.chars().count(),
        "payload must be multi-byte for this test"
    );
}

#[test]
fn total_chunks_must_equal_the_chunk_frames_sent_before_end() {
    let (_, frames) = direct_frames(5);
    let chunks = frames
        .iter()
        .filter(|f| matches!(f.body, TransferBody::Chunk { .. }))
        .count();
    assert_eq!(start_fields(&frames[0]).3, chunks as u64);
    assert!(matches!(frames.last().unwrap().body, TransferBody::End));
}

#[test]
fn chunks_concatenate_to_the_exact_message_and_never_split_a_character() {
    let (payload, frames) = direct_frames(8);
    let joined: String = frames
        .iter()
        .filter_map(|f| match &f.body {
            TransferBody::Chunk { data } => Some(data.as_str()),
            _ => None,
        })
        .collect();
    // `data` is a `String`, so a split character could not even be represented; equality of
    // the concatenation proves the split points were character boundaries of the payload.
    assert_eq!(joined, payload);
}

#[test]
fn every_frame_publishes_within_the_budget() {
    let payload = message(20_000);
    for budget in [1000, 1200, 4096, 48_000] {
        for f in drain(&mut sender(&payload, budget, false)) {
            assert!(
                ENV.published_size(&f.to_json()) <= budget,
                "budget {budget}"
            );
        }
    }
}

use crate::protocol::envelope::Envelope;

#[test]
fn progress_must_increase_over_every_frame_in_both_modes() {
    let (_, frames) = direct_frames(4);
    assert!(frames
        .windows(2)
        .all(|w| w[1].progress == w[0].progress + 1));

    let payload = message(4000);
    let mut s = sender(&payload, 1500, true);
    let start = s.poll_transmit(T0).unwrap();
    s.handle_frame(&TransferFrame {
        token: token(),
        progress: start.progress + 1,
        message: None,
        body: TransferBody::Accept,
    });
    let rest = drain(&mut s);
    assert_eq!(
        rest[0].progress,
        start.progress + 2,
        "accept holds the position after start"
    );
    assert!(rest.windows(2).all(|w| w[1].progress == w[0].progress + 1));
}

#[test]
fn a_sender_that_must_wait_sends_no_chunk_before_accept() {
    let payload = message(4000);
    let mut s = sender(&payload, 1500, true);
    assert!(matches!(
        s.poll_transmit(T0).unwrap().body,
        TransferBody::Start { .. }
    ));
    assert_eq!(s.poll_transmit(T0), None);
    assert!(matches!(s.state(), SenderState::AwaitingAccept { .. }));
    s.handle_frame(&TransferFrame {
        token: token(),
        progress: 2,
        message: None,
        body: TransferBody::Accept,
    });
    assert!(matches!(
        s.poll_transmit(T0).unwrap().body,
        TransferBody::Chunk { .. }
    ));
}

#[test]
fn a_sender_waiting_for_accept_gives_up_at_its_timeout() {
    let mut s = sender(&message(4000), 1500, true);
    s.poll_transmit(T0);
    let deadline = s.poll_timeout().unwrap();
    s.handle_timeout(deadline - Duration::from_millis(1));
    assert_eq!(s.poll_transmit(T0), None);
    s.handle_timeout(deadline);
    assert!(matches!(
        s.poll_transmit(deadline).unwrap().body,
        TransferBody::Abort { .. }
    ));
    assert_eq!(
        s.state(),
        &SenderState::Failed(SenderFailure::AcceptTimeout)
    );
    assert!(s.is_done());
}

#[test]
fn a_receiver_abort_stops_the_sender() {
    let mut s = sender(&message(4000), 1500, false);
    s.poll_transmit(T0);
    s.handle_frame(&TransferFrame {
        token: token(),
        progress: 9,
        message: None,
        body: TransferBody::Abort {
            reason: Some("no".into()),
        },
    });
    assert_eq!(s.poll_transmit(T0), None);
    assert!(matches!(
        s.state(),
        SenderState::Failed(SenderFailure::AbortedByPeer { .. })
    ));
}

#[test]
fn receiver_completes_a_direct_transfer_with_the_exact_message() {
    let (payload, frames) = direct_frames(6);
    let mut r = receiver(false);
    feed(&mut r, frames);
    assert_delivered(&mut r, &payload);
    assert_eq!(r.active_transfers(), 0);
}

#[test]
fn receiver_must_reassemble_in_progress_order_not_arrival_order() {
    let (payload, mut frames) = direct_frames(6);
    let end = frames.pop().unwrap();
    let start = frames.remove(0);
    frames.reverse();
    let mut r = receiver(false);
    feed(&mut r, std::iter::once(start).chain(frames).chain([end]));
    assert_delivered(&mut r, &payload);
}

#[test]
fn receiver_must_not_surface_partial_payloads() {
    let (_, mut frames) = direct_frames(6);
    frames.pop(); // no end
    let mut r = receiver(false);
    feed(&mut r, frames);
    let evs = events(&mut r);
    assert!(
        evs.iter()
            .all(|e| matches!(e, ReceiverEvent::Started { .. })),
        "{evs:?}"
    );
}

#[test]
fn receiver_must_verify_the_digest_before_surfacing() {
    let (_, mut frames) = direct_frames(3);
    if let TransferBody::Start { digest, .. } = &mut frames[0].body {
        *digest = Digest::of("something else");
    }
    let mut r = receiver(false);
    feed(&mut r, frames);
    assert_eq!(failure(&mut r), Some(TransferFailure::DigestMismatch));
    assert_eq!(completed(&mut r), None);
}

#[test]
fn receiver_must_verify_total_bytes() {
    let (_, mut frames) = direct_frames(3);
    if let TransferBody::Start { total_bytes, .. } = &mut frames[0].body {
        *total_bytes += 1;
    }
    let mut r = receiver(false);
    feed(&mut r, frames);
    assert!(matches!(failure(&mut r), Some(TransferFailure::Totals(_))));
}

#[test]
fn receiver_must_fail_when_chunks_exceed_declared_total_bytes() {
    let (_, mut frames) = direct_frames(3);
    if let TransferBody::Start { total_bytes, .. } = &mut frames[0].body {
        *total_bytes = 10;
    }
    let mut r = receiver(false);
    feed(&mut r, frames);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::Totals("more bytes than totalBytes"))
    );
}

#[test]
fn receiver_must_verify_exactly_total_chunks_were_assembled() {
    let (_, mut frames) = direct_frames(3);
    if let TransferBody::Start { total_chunks, .. } = &mut frames[0].body {
        *total_chunks -= 1;
    }
    let mut r = receiver(false);
    feed(&mut r, frames);
    assert!(matches!(failure(&mut r), Some(TransferFailure::Totals(_))));
}

#[test]
fn receiver_must_reject_unknown_completion_modes() {
    let (_, mut frames) = direct_frames(2);
    if let TransferBody::Start {
        completion_mode, ..
    } = &mut frames[0].body
    {
        *completion_mode = Some("stream".into());
    }
    let mut r = receiver(false);
    r.handle_frame(&"alice", frames[0].clone(), T0);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::UnsupportedCompletionMode(Some(
            "stream".into()
        )))
    );
    let (_, abort) = r.poll_transmit().expect("an abort goes back to the sender");
    assert!(matches!(abort.body, TransferBody::Abort { .. }));
    // Later frames of the refused transfer do not resurrect it.
    assert_eq!(
        r.handle_frame(&"alice", frames[1].clone(), T0),
        FrameVerdict::Ignored("transfer has ended")
    );
}

#[test]
fn receiver_must_evaluate_declared_totals_against_limits_before_committing() {
    let mut r = OversizedReceiver::new(ReceiverConfig {
        max_total_bytes: 1000,
        send_accept: false,
        ..ReceiverConfig::default()
    });
    let (_, frames) = direct_frames(3);
    r.handle_frame(&"alice", frames[0].clone(), T0);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::Policy("totalBytes over the limit"))
    );
    assert_eq!(r.active_transfers(), 0);

    let mut r = OversizedReceiver::new(ReceiverConfig {
        max_total_chunks: 2,
        ..ReceiverConfig::default()
    });
    r.handle_frame(&"alice", frames[0].clone(), T0);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::Policy("totalChunks over the limit"))
    );
}

#[test]
fn receiver_limits_concurrent_transfers() {
    let mut r = OversizedReceiver::new(ReceiverConfig {
        max_concurrent_transfers: 1,
        ..ReceiverConfig::default()
    });
    let (_, frames) = direct_frames(2);
    r.handle_frame(&"alice", frames[0].clone(), T0);
    r.handle_frame(&"bob", frames[0].clone(), T0);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::Policy("too many concurrent transfers"))
    );
    assert_eq!(r.active_transfers(), 1);
}

#[test]
fn receiver_must_track_transfers_by_token_and_sending_peer() {
    let (p1, f1) = direct_frames(3);
    let mut r = receiver(false);
    // Bob uses the same token for a different message; interleave both.
    let other = message(1234);
    let f2 = drain(&mut sender(&other, 1500, false));
    let (mut a, mut b) = (f1.into_iter(), f2.into_iter());
    loop {
        let (x, y) = (a.next(), b.next());
        if x.is_none() && y.is_none() {
            break;
        }
        if let Some(f) = x {
            r.handle_frame(&"alice", f, T0);
        }
        if let Some(f) = y {
            r.handle_frame(&"bob", f, T0);
        }
    }
    let mut done: Vec<(&str, String)> = events(&mut r)
        .into_iter()
        .filter_map(|e| match e {
            ReceiverEvent::Completed {
                peer,
                message: Some(message),
                ..
            } => Some((peer, message)),
            _ => None,
        })
        .collect();
    done.sort();
    assert_eq!(done, vec![("alice", p1), ("bob", other)]);
}

#[test]
fn receiver_must_treat_abort_as_terminal() {
    let (_, mut frames) = direct_frames(3);
    let end = frames.pop().unwrap();
    let mut r = receiver(false);
    r.handle_frame(&"alice", frames[0].clone(), T0);
    r.handle_frame(&"alice", frames[1].clone(), T0);
    let abort = TransferFrame {
        token: token(),
        progress: 3,
        message: None,
        body: TransferBody::Abort { reason: None },
    };
    r.handle_frame(&"alice", abort, T0);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::AbortedByPeer { reason: None })
    );
    for f in frames.into_iter().skip(2).chain([end]) {
        assert_eq!(
            r.handle_frame(&"alice", f, T0),
            FrameVerdict::Ignored("transfer has ended")
        );
    }
    assert!(events(&mut r).is_empty());
    assert_eq!(
        r.poll_transmit(),
        None,
        "no abort is echoed to a sender that aborted"
    );
}

#[test]
fn a_gap_alone_is_not_terminal_before_end() {
    let (payload, frames) = direct_frames(5);
    let mut r = receiver(false);
    // Everything but chunk 1, then wait well past the grace period, then chunk 1 and end.
    let (held, rest): (Vec<_>, Vec<_>) = frames.into_iter().enumerate().partition(|(i, _)| *i == 2);
    let mut rest: Vec<_> = rest.into_iter().map(|(_, f)| f).collect();
    let end = rest.pop().unwrap();
    feed(&mut r, rest);
    r.handle_timeout(Duration::from_secs(60));
    assert_eq!(failure(&mut r), None);
    feed(&mut r, held.into_iter().map(|(_, f)| f).chain([end]));
    assert_delivered(&mut r, &payload);
}

#[test]
fn end_with_unresolved_gaps_must_fail_once_the_grace_period_ends() {
    let (_, mut frames) = direct_frames(5);
    frames.remove(2);
    let mut r = receiver(false);
    feed(&mut r, frames);
    assert_eq!(
        failure(&mut r),
        None,
        "the missing chunk may still be in flight"
    );
    let grace = r.poll_timeout().unwrap();
    assert_eq!(grace, ReceiverConfig::default().end_grace);
    r.handle_timeout(grace);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::GapAtEnd { missing: 1 })
    );
}

#[test]
fn an_end_that_overtakes_chunks_completes_when_they_arrive_within_grace() {
    let (payload, mut frames) = direct_frames(5);
    let end = frames.pop().unwrap();
    let last = frames.pop().unwrap();
    let mut r = receiver(false);
    feed(&mut r, frames.into_iter().chain([end]));
    r.handle_timeout(Duration::from_secs(4));
    feed(&mut r, [last]);
    assert_delivered(&mut r, &payload);
}

#[test]
fn end_after_non_monotonic_ordering_must_fail() {
    let (_, mut frames) = direct_frames(4);
    let end_at = frames[2].progress; // an end numbered below chunks already seen
    frames.pop();
    let mut r = receiver(false);
    feed(&mut r, frames);
    r.handle_frame(
        &"alice",
        TransferFrame {
            token: token(),
            progress: end_at,
            message: None,
            body: TransferBody::End,
        },
        T0,
    );
    assert!(matches!(
        failure(&mut r),
        Some(TransferFailure::Sequence(_))
    ));
}

#[test]
fn end_before_a_valid_sequence_must_fail() {
    // start then immediately end, while totalChunks says chunks were due.
    let (_, frames) = direct_frames(3);
    let mut r = receiver(false);
    r.handle_frame(&"alice", frames[0].clone(), T0);
    r.handle_frame(
        &"alice",
        TransferFrame {
            token: token(),
            progress: frames[0].progress + 1,
            message: None,
            body: TransferBody::End,
        },
        T0,
    );
    assert!(matches!(failure(&mut r), Some(TransferFailure::Totals(_))));
}

#[test]
fn a_transfer_must_begin_with_start_and_frames_that_overtake_it_are_held() {
    let (payload, mut frames) = direct_frames(4);
    let start = frames.remove(0);
    let mut r = receiver(false);
    for f in frames {
        assert_eq!(r.handle_frame(&"alice", f, T0), FrameVerdict::Orphaned);
    }
    assert!(events(&mut r).is_empty());
    r.handle_frame(&"alice", start, T0);
    assert_delivered(&mut r, &payload);
}

#[test]
fn orphans_whose_start_never_comes_expire() {
    let (_, frames) = direct_frames(2);
    let mut r = receiver(false);
    r.handle_frame(&"alice", frames[1].clone(), T0);
    let expiry = r.poll_timeout().unwrap();
    r.handle_timeout(expiry);
    assert_eq!(r.counters().orphans_dropped, 1);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn identical_duplicates_are_ignored() {
    let (payload, frames) = direct_frames(4);
    let mut r = receiver(false);
    let doubled: Vec<_> = frames.iter().flat_map(|f| [f.clone(), f.clone()]).collect();
    let end = doubled.len() - 1;
    for (i, f) in doubled.into_iter().enumerate() {
        if i == end {
            break; // the second end would hit a tombstone, tested elsewhere
        }
        r.handle_frame(&"alice", f, T0);
    }
    assert_delivered(&mut r, &payload);
    assert_eq!(r.counters().duplicates, (frames.len() - 1) as u64);
}

#[test]
fn conflicting_duplicates_fail_the_transfer() {
    let (_, frames) = direct_frames(3);
    let mut r = receiver(false);
    feed(&mut r, frames[..2].iter().cloned());
    let mut forged = frames[1].clone();
    forged.body = TransferBody::Chunk {
        data: "forged".into(),
    };
    r.handle_frame(&"alice", forged, T0);
    assert!(matches!(
        failure(&mut r),
        Some(TransferFailure::Sequence(_))
    ));
}

#[test]
fn a_second_different_start_fails_the_transfer() {
    let (_, frames) = direct_frames(3);
    let mut r = receiver(false);
    r.handle_frame(&"alice", frames[0].clone(), T0);
    let mut other = frames[0].clone();
    if let TransferBody::Start { total_bytes, .. } = &mut other.body {
        *total_bytes += 5;
    }
    r.handle_frame(&"alice", other, T0);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::Sequence(
            "a second start for an active transfer"
        ))
    );
}

#[test]
fn frames_for_a_finished_transfer_never_resurrect_it() {
    let (_, frames) = direct_frames(3);
    let mut r = receiver(false);
    feed(&mut r, frames.clone());
    assert!(completed(&mut r).is_some());
    for f in frames {
        assert_eq!(
            r.handle_frame(&"alice", f, T0),
            FrameVerdict::Ignored("transfer has ended")
        );
    }
    assert_eq!(r.active_transfers(), 0);
    assert!(events(&mut r).is_empty());
}

#[test]
fn the_receivers_accept_takes_a_progress_position_and_is_never_a_gap() {
    let payload = message(5000);
    let mut s = sender(&payload, 1500, true);
    let mut r = receiver(true);
    let start = s.poll_transmit(T0).unwrap();
    r.handle_frame(&"alice", start, T0);
    let (_, accept) = r.poll_transmit().unwrap();
    assert_eq!(accept.body, TransferBody::Accept);
    assert_eq!(accept.progress, 2);
    s.handle_frame(&accept);
    feed(&mut r, drain(&mut s));
    assert_delivered(&mut r, &payload);
}

#[test]
fn a_direct_sender_completes_even_when_the_receiver_sends_accept() {
    // The sender numbers its first chunk right after start, where the receiver put its accept.
    let (payload, mut frames) = direct_frames(5);
    let first_chunk = frames.remove(1);
    let mut r = receiver(true);
    feed(&mut r, frames);
    assert_eq!(completed(&mut r), None, "the first chunk is still missing");
    feed(&mut r, [first_chunk]);
    assert_delivered(&mut r, &payload);
}

#[test]
fn chunks_beyond_the_reorder_window_fail_the_transfer() {
    let mut r = OversizedReceiver::new(ReceiverConfig {
        reorder_window: 2,
        send_accept: false,
        ..ReceiverConfig::default()
    });
    let (_, frames) = direct_frames(6);
    r.handle_frame(&"alice", frames[0].clone(), T0);
    r.handle_frame(&"alice", frames[5].clone(), T0);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::Buffer("chunk beyond the reorder window"))
    );
}

#[test]
fn too_many_waiting_chunks_fail_the_transfer() {
    let mut r = OversizedReceiver::new(ReceiverConfig {
        max_out_of_order_chunks: 2,
        send_accept: false,
        ..ReceiverConfig::default()
    });
    let (_, frames) = direct_frames(6);
    feed(
        &mut r,
        [frames[0].clone(), frames[2].clone(), frames[3].clone()],
    );
    assert_eq!(failure(&mut r), None);
    feed(&mut r, [frames[4].clone()]);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::Buffer("too many out-of-order chunks"))
    );
}

#[test]
fn a_hard_timeout_fails_an_incomplete_transfer() {
    let (_, frames) = direct_frames(3);
    let mut r = receiver(false);
    feed(&mut r, frames[..2].iter().cloned());
    let deadline = r.poll_timeout().unwrap();
    assert_eq!(deadline, ReceiverConfig::default().transfer_timeout);
    r.handle_timeout(deadline);
    assert_eq!(failure(&mut r), Some(TransferFailure::Timeout));
    let (_, abort) = r.poll_transmit().unwrap();
    assert!(matches!(abort.body, TransferBody::Abort { .. }));
}

#[test]
fn a_reassembled_text_that_is_not_json_rpc_fails() {
    let payload = "not json".repeat(300);
    let frames = drain(
        &mut OversizedSender::new(
            token(),
            payload,
            SenderConfig {
                budget: 1500,
                ..Default::default()
            },
            &ENV,
        )
        .unwrap(),
    );
    let mut r = receiver(false);
    feed(&mut r, frames);
    assert!(matches!(
        failure(&mut r),
        Some(TransferFailure::InvalidMessage(_))
    ));
}

#[test]
fn frames_with_out_of_range_numbers_never_panic_and_are_ignored() {
    let (_, frames) = direct_frames(2);
    let mut r = receiver(true);
    let mut huge = frames[0].clone();
    huge.progress = u64::MAX;
    assert_eq!(
        r.handle_frame(&"alice", huge, T0),
        FrameVerdict::Ignored("progress out of range")
    );
    r.handle_frame(&"alice", frames[0].clone(), T0);
    let mut far = frames[1].clone();
    far.progress = u64::MAX - 1;
    r.handle_frame(&"alice", far, T0);
    let mut s = sender(&message(3000), 1500, true);
    s.poll_transmit(T0);
    assert!(!s.handle_frame(&TransferFrame {
        token: token(),
        progress: u64::MAX,
        message: None,
        body: TransferBody::Accept
    }));
    // And the wire form refuses them outright.
    let text = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":9007199254740992,"cvm":{"type":"oversized-transfer","frameType":"end"}}}"#;
    assert!(TransferFrame::from_message(&Message::parse(text).unwrap()).is_err());
}

#[test]
fn a_chunk_numbered_at_or_after_end_fails() {
    let (_, mut frames) = direct_frames(3);
    let end = frames.pop().unwrap();
    let mut r = receiver(false);
    feed(&mut r, frames[..2].iter().cloned().chain([end.clone()]));
    let mut late = frames[2].clone();
    late.progress = end.progress;
    r.handle_frame(&"alice", late, T0);
    assert_eq!(
        failure(&mut r),
        Some(TransferFailure::Sequence("chunk after end"))
    );
}

#[test]
fn the_end_grace_period_restarts_while_missing_chunks_keep_arriving() {
    let (payload, mut frames) = direct_frames(6);
    let end = frames.pop().unwrap();
    let start = frames.remove(0);
    let mut r = receiver(false);
    feed(&mut r, [start, end]);
    // One chunk every 4 s: each is within 5 s of the previous one, though the last arrives
    // long after the first grace period would have ended.
    for (i, f) in frames.into_iter().enumerate() {
        let t = Duration::from_secs(4 * (i as u64 + 1));
        r.handle_timeout(t);
        r.handle_frame(&"alice", f, t);
    }
    assert_delivered(&mut r, &payload);
}

#[test]
fn a_receiver_not_keeping_text_hands_over_the_message_alone() {
    let plain = |text: String| {
        Message::Response {
            id: RequestId::Number(1),
            result: serde_json::json!({ "content": [{ "type": "text", "text": text }] }),
        }
        .to_json()
    };
    // Escapes, a long string with none (its buffer taken from the text) and one with some.
    let long = "abc ".repeat(crate::nip01::json_read::STEAL_FROM / 2);
    for payload in [
        message(3000),
        plain(long.clone()),
        plain(format!("\"{long}")),
    ] {
        let frames = drain(&mut sender(&payload, 48_000, false));
        let mut r = OversizedReceiver::new(ReceiverConfig {
            keep_text: false,
            max_total_chunks: 100_000,
            ..ReceiverConfig::default()
        });
        feed(&mut r, frames);
        let done = events(&mut r).into_iter().find_map(|e| match e {
            ReceiverEvent::Completed {
                message, parsed, ..
            } => Some((message, parsed.map(|p| *p))),
            _ => None,
        });
        // Not assert_eq: a failure would print megabytes.
        assert!(
            done == Some((None, Message::parse(&payload).ok())),
            "{} bytes",
            payload.len()
        );
    }
}

#[test]
fn a_very_large_transfer_read_in_segments_hands_over_its_long_string_apart() {
    use crate::nip01::json_segmented::LONG_STRING;
    // Over 64 MiB declared, with escapes, so the long string is decoded piece by piece.
    let long = "ab\"c\\ é ".repeat((64 << 20) / 10 + 1);
    let payload = Message::Request {
        id: RequestId::Number(4),
        method: "tools/call".into(),
        params: Some(serde_json::json!({ "name": "echo", "arguments": { "text": long } })),
    }
    .to_json();
    assert!(payload.len() as u64 > 64 << 20);
    for long_in_segments in [true, false] {
        let frames = drain(&mut sender(&payload, 1 << 20, false));
        let mut r = OversizedReceiver::new(ReceiverConfig {
            keep_text: false,
            long_in_segments,
            max_total_bytes: 1 << 30,
            ..ReceiverConfig::default()
        });
        feed(&mut r, frames);
        let (parsed, taken) = events(&mut r)
            .into_iter()
            .find_map(|e| match e {
                ReceiverEvent::Completed { parsed, long, .. } => Some((*parsed?, long)),
                _ => None,
            })
            .expect("completed");
        let Message::Request { params, .. } = &parsed else {
            panic!("a request");
        };
        let text = &params.as_ref().unwrap()["arguments"]["text"];
        match taken {
            Some(taken) => {
                assert!(long_in_segments);
                assert_eq!(text, LONG_STRING);
                assert!(taken.segments().count() > 60, "in segments");
                assert!(taken.into_string() == long, "the long string, decoded");
            }
            None => {
                assert!(!long_in_segments);
                assert!(text.as_str() == Some(long.as_str()), "whole in place");
            }
        }
    }
}
