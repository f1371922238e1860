//! Frames built for a 64 KiB relay limit never exceed it once enveloped in a real, signed
//! kind-25910 event (nostr crate, deterministic keys and signatures).

use relaysim::nip01::Identity;
use relaysim::peer::event::ContextVmEvents;
use relaysim::peer::event::SignedEventEnvelope;
use relaysim::protocol::envelope::Envelope;
use relaysim::protocol::jsonrpc::{Message, RequestId};
use relaysim::protocol::oversized::{OversizedSender, SenderConfig};
use std::time::Duration;

const LIMIT: usize = 64 * 1024;
const CREATED_AT: u64 = 1_700_000_000;

fn frames_within_limit(body: String) {
    let server = Identity::derive(42, "server");
    let client = Identity::derive(42, "client");
    let request = client.contextvm_event(&server.public_key(), None, CREATED_AT, "{}".into());
    let envelope =
        SignedEventEnvelope::measure(&server, &client.public_key(), Some(&request.id), CREATED_AT);
    let payload = Message::Response {
        id: RequestId::Number(1),
        result: serde_json::json!({ "content": [{ "type": "text", "text": body }] }),
    }
    .to_json();
    let config = SenderConfig {
        budget: LIMIT,
        ..SenderConfig::default()
    };
    let mut sender =
        OversizedSender::new(RequestId::String("t".into()), payload, config, &envelope).unwrap();
    let mut count = 0;
    let mut largest = 0;
    while let Some(frame) = sender.poll_transmit(Duration::ZERO) {
        let text = frame.to_json();
        let event = server.contextvm_event(
            &client.public_key(),
            Some(&request.id),
            CREATED_AT + count,
            text.clone(),
        );
        let size = event.as_json().len();
        assert_eq!(
            size,
            envelope.published_size(&text),
            "the envelope model is exact"
        );
        assert!(size <= LIMIT, "frame {count} publishes as {size} bytes");
        event.verify().expect("a valid signed event");
        largest = largest.max(size);
        count += 1;
    }
    assert!(count > 10);
    // Chunks are packed: within the 19 bytes reserved for the widest progress value and one
    // character of at most 7 wire bytes.
    assert!(largest > LIMIT - 32, "largest frame only {largest} bytes");
}

#[test]
fn escape_heavy_frames_fit_a_64_kib_relay_limit() {
    frames_within_limit("\"\\".repeat(300_000));
}

#[test]
fn multibyte_frames_fit_a_64_kib_relay_limit() {
    frames_within_limit("é€😀\u{1}".repeat(100_000));
}
