//! Property tests for the CEP-22 engines: any payload × any relay schedule within the receiver's
//! bounds → the exact message; any schedule at all → the exact message or a typed failure,
//! never a wrong message, never a panic.

use proptest::prelude::*;
use relaysim::protocol::envelope::EscapedContentEnvelope;
use relaysim::protocol::jsonrpc::{Message, RequestId};
use relaysim::protocol::oversized::{
    OversizedReceiver, OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig, TransferBody,
    TransferFrame,
};
use std::time::Duration;

const ENV: EscapedContentEnvelope = EscapedContentEnvelope { overhead: 644 };

/// Payload text in the content classes the simulator uses.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ]{0,3000}",
        proptest::collection::vec(
            prop_oneof![Just('"'), Just('\\'), Just('a'), Just('\n')],
            0..3000
        )
        .prop_map(|v| v.into_iter().collect()),
        proptest::collection::vec(
            prop_oneof![Just('é'), Just('€'), Just('😀'), Just('x')],
            0..2000
        )
        .prop_map(|v| v.into_iter().collect()),
        any::<String>(),
        proptest::collection::vec(any::<char>(), 0..4000).prop_map(|v| v.into_iter().collect()),
    ]
}

fn response(text: &str) -> String {
    Message::Response {
        id: RequestId::Number(7),
        result: serde_json::json!({ "content": [{ "type": "text", "text": text }] }),
    }
    .to_json()
}

/// Runs one transfer. `order(frames)` decides the delivery order of everything after `start`
/// (and after the accept exchange in bootstrap mode). Returns the receiver's final event.
fn transfer(
    payload: &str,
    budget: usize,
    bootstrap: bool,
    config: ReceiverConfig,
    order: impl FnOnce(Vec<TransferFrame>) -> Vec<TransferFrame>,
) -> Option<ReceiverEvent<u8>> {
    let token = RequestId::String("tok".into());
    let sender_config = SenderConfig {
        budget,
        wait_for_accept: bootstrap,
        ..SenderConfig::default()
    };
    let mut sender = OversizedSender::new(token, payload.to_owned(), sender_config, &ENV)
        .expect("budget fits the frames");
    let mut receiver = OversizedReceiver::new(config);
    let now = Duration::ZERO;
    let start = sender.poll_transmit(now).unwrap();
    receiver.handle_frame(&1, start, now);
    while let Some((_, frame)) = receiver.poll_transmit() {
        sender.handle_frame(&frame);
    }
    let rest: Vec<TransferFrame> = std::iter::from_fn(|| sender.poll_transmit(now)).collect();
    for frame in order(rest) {
        receiver.handle_frame(&1, frame, now);
    }
    // Let any grace period or timeout run out.
    while let Some(t) = receiver.poll_timeout() {
        receiver.handle_timeout(t);
    }
    std::iter::from_fn(|| receiver.poll_event())
        .filter(|e| !matches!(e, ReceiverEvent::Started { .. }))
        .last()
}

/// Reorders so that no frame moves more than `window` places, and duplicates some frames.
fn bounded_shuffle(
    frames: Vec<TransferFrame>,
    displacement: &[usize],
    duplicates: &[(usize, usize)],
    window: usize,
) -> Vec<TransferFrame> {
    let mut keyed: Vec<(usize, usize, TransferFrame)> = frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            (
                i + displacement.get(i).copied().unwrap_or(0) % (window + 1),
                i,
                f,
            )
        })
        .collect();
    let extra: Vec<_> = duplicates
        .iter()
        .filter(|(i, _)| *i < keyed.len())
        .map(|&(i, delay)| {
            (
                keyed[i].0 + delay % (window + 1),
                usize::MAX,
                keyed[i].2.clone(),
            )
        })
        .collect();
    keyed.extend(extra);
    keyed.sort_by_key(|(k, i, _)| (*k, *i));
    keyed.into_iter().map(|(_, _, f)| f).collect()
}

fn delivered(event: &Option<ReceiverEvent<u8>>) -> Option<&str> {
    match event {
        Some(ReceiverEvent::Completed { message, .. }) => message.as_deref(),
        _ => None,
    }
}

/// Cases per property: `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

proptest! {
    // PROPTEST_CASES deepens the search; CI fixes PROPTEST_RNG_SEED so its runs repeat.
    #![proptest_config(ProptestConfig { cases: cases(200), ..ProptestConfig::default() })]

    /// Reordering within the window and duplicates: always the exact message.
    #[test]
    fn any_payload_any_bounded_schedule_delivers_exactly(
        body in text(),
        budget in 1_000usize..6_000,
        bootstrap in any::<bool>(),
        send_accept in any::<bool>(),
        displacement in proptest::collection::vec(0usize..1000, 0..200),
        duplicates in proptest::collection::vec((0usize..200, 0usize..1000), 0..20),
    ) {
        let payload = response(&body);
        // A bootstrap sender needs the receiver's accept.
        let send_accept = send_accept || bootstrap;
        let config = ReceiverConfig { send_accept, reorder_window: 16, max_out_of_order_chunks: 16, ..ReceiverConfig::default() };
        // Displacing a frame by up to 8 places keeps every chunk within 16 positions of the
        // first missing one.
        let event = transfer(&payload, budget, bootstrap, config, |f| bounded_shuffle(f, &displacement, &duplicates, 8));
        let got = delivered(&event);
        prop_assert!(got == Some(payload.as_str()), "outcome {:?}", event.map(|e| match e {
            ReceiverEvent::Failed { failure, .. } => failure.to_string(),
            _ => "completed with other bytes".into(),
        }));
    }

    /// Anything at all: drops, far reordering, duplicates, forged chunks. Never a wrong message,
    /// never a panic.
    #[test]
    fn any_schedule_gives_the_exact_message_or_a_typed_failure(
        body in text(),
        budget in 1_000usize..6_000,
        bootstrap in any::<bool>(),
        keys in proptest::collection::vec(any::<u16>(), 0..300),
        drops in proptest::collection::vec(any::<bool>(), 0..300),
        forge in proptest::option::of((0usize..300, "[a-z]{0,5}")),
        window in 0u64..8,
    ) {
        let payload = response(&body);
        let config = ReceiverConfig { send_accept: true, reorder_window: window, max_out_of_order_chunks: window as usize, ..ReceiverConfig::default() };
        let event = transfer(&payload, budget, bootstrap, config, |frames| {
            let mut keyed: Vec<(u16, usize, TransferFrame)> = frames
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !drops.get(*i).copied().unwrap_or(false))
                .map(|(i, mut f)| {
                    if let (Some((at, data)), TransferBody::Chunk { .. }) = (&forge, &f.body) {
                        if *at == i {
                            f.body = TransferBody::Chunk { data: data.clone() };
                        }
                    }
                    (keys.get(i).copied().unwrap_or(0), i, f)
                })
                .collect();
            keyed.sort_by_key(|(k, i, _)| (*k, *i));
            keyed.into_iter().map(|(_, _, f)| f).collect()
        });
        match &event {
            Some(ReceiverEvent::Completed { message, .. }) => prop_assert!(message.as_deref() == Some(payload.as_str())),
            Some(ReceiverEvent::Failed { failure, .. }) => prop_assert!(!failure.cause().is_empty()),
            other => prop_assert!(false, "no outcome: {:?}", other.is_some()),
        }
    }
}

#[test]
fn a_large_escape_heavy_transfer_survives_reordering() {
    let body: String = "\"\\é😀ab\n"
        .chars()
        .cycle()
        .take(2 * 1024 * 1024)
        .collect();
    let payload = response(&body);
    let displacement: Vec<usize> = (0..1000).map(|i| (i * 7919) % 13).collect();
    let event = transfer(&payload, 48_000, true, ReceiverConfig::default(), |f| {
        bounded_shuffle(f, &displacement, &[(3, 5), (10, 2)], 12)
    });
    assert!(delivered(&event) == Some(payload.as_str()));
}
