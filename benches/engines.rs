//! Throughput of the sans-IO engines, in wall-clock terms (benchmarks may read the clock;
//! tests never do). Run with `cargo bench --bench engines`.
//!
//! Reports, for a 10 MiB escape-heavy CEP-22 transfer at a 48,000-byte budget: chunk planning
//! (sender construction) and reassembly (receiver, digest and JSON-RPC validation included) in
//! MB/s of payload; CEP-41 writer → session frames per second; and reading JSON text with
//! `nip01::json_read` beside `serde_json`, on plain, mixed and escape-heavy 1 MiB strings; and
//! writing it with `nip01::json_text` beside `serde_json` on the same strings and on randomly
//! drawn escape-heavy text.
//! Library code on the system allocator, as a library user's program runs it by default.

mod common;

use common::best_of;
use relaysim::nip01::Identity;
use relaysim::peer::event::SignedEventEnvelope;
use relaysim::protocol::jsonrpc::{Message, RequestId};
use relaysim::protocol::open_stream::{
    OpenStreamRegistry, OpenStreamWriter, StreamPolicy, WriterConfig,
};
use relaysim::protocol::oversized::{
    OversizedReceiver, OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig,
};
use std::time::Duration;

fn main() {
    let body: String = "ab\"c\\dé€😀\n"
        .chars()
        .cycle()
        .take(5 * 1024 * 1024)
        .collect();
    let payload = Message::Response {
        id: RequestId::Number(1),
        result: serde_json::json!({ "content": [{ "type": "text", "text": body }] }),
    }
    .to_json();
    let mb = payload.len() as f64 / 1e6;
    let server = Identity::derive(1, "server");
    let client = Identity::derive(1, "client");
    let env = SignedEventEnvelope::measure(&server, &client.public_key(), None, 1_700_000_000);
    let token = RequestId::String("bench".into());
    let config = SenderConfig {
        budget: 48_000,
        ..SenderConfig::default()
    };

    let (plan, sender) = best_of(5, || {
        OversizedSender::new(token.clone(), payload.clone(), config.clone(), &env).unwrap()
    });
    println!(
        "cep22 plan:       {:>8.1} MB/s  ({:.2} MB payload, {} chunks, {:?})",
        mb / plan.as_secs_f64(),
        mb,
        sender.total_chunks(),
        plan
    );

    let mut s = sender;
    let frames: Vec<_> = std::iter::from_fn(|| s.poll_transmit(Duration::ZERO)).collect();
    let (reassemble, ok) = best_of(5, || {
        let mut r = OversizedReceiver::new(ReceiverConfig {
            send_accept: false,
            ..ReceiverConfig::default()
        });
        for f in frames.iter().cloned() {
            r.handle_frame(&0u8, f, Duration::ZERO);
        }
        std::iter::from_fn(|| r.poll_event()).any(|e| matches!(e, ReceiverEvent::Completed { .. }))
    });
    assert!(ok);
    println!(
        "cep22 reassemble: {:>8.1} MB/s  ({reassemble:?})",
        mb / reassemble.as_secs_f64()
    );

    let n = 200_000u64;
    let (stream, _) = best_of(3, || {
        let mut w = OpenStreamWriter::new(token.clone(), WriterConfig::default());
        let mut r = OpenStreamRegistry::new(StreamPolicy {
            send_accept: false,
            ..StreamPolicy::default()
        });
        let now = Duration::ZERO;
        for i in 0..n {
            w.write(format!("token {i}"), now).unwrap();
            while let Some(f) = w.poll_transmit(now) {
                r.handle_frame(&0u8, f, now);
            }
            while r.read(&0u8, &token).is_some() {}
        }
    });
    println!(
        "cep41 stream:     {:>8.0} chunks/s ({n} chunks, {stream:?})",
        n as f64 / stream.as_secs_f64()
    );

    json_read_beside_serde_json();
    json_write_beside_serde_json();
}

/// `nip01::json_read::parse` and `serde_json::from_str` on the same documents: a JSON-RPC
/// result whose text is 1 MiB of plain, mixed or escape-heavy characters.
fn json_read_beside_serde_json() {
    use relaysim::nip01::json_read;
    for (name, alphabet) in [
        ("plain", "abcdefghij klmnopqrstuvwxyz"),
        ("mixed", "ab\"c\\dé€😀\n"),
        ("escape-heavy", "\"\\\"\\a\n\"\"\\a\\"),
    ] {
        let text: String = alphabet.chars().cycle().take(1 << 20).collect();
        let doc = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}})
            .to_string();
        let mb = doc.len() as f64 / 1e6;
        let (ours, a) = best_of(5, || json_read::parse(&doc).unwrap());
        let (theirs, b) = best_of(5, || {
            serde_json::from_str::<serde_json::Value>(&doc).unwrap()
        });
        assert_eq!(a, b);
        println!(
            "json read {name:<13} {:>7.0} MB/s, serde_json {:>7.0} MB/s: {:.2}x",
            mb / ours.as_secs_f64(),
            mb / theirs.as_secs_f64(),
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    }
}

/// `nip01::json_text::to_string` and `serde_json::to_string` on the same values: a JSON-RPC
/// result whose text is 1 MiB of plain, mixed, escape-heavy or randomly drawn escape-heavy
/// characters (where branches on each character's kind cannot be predicted).
fn json_write_beside_serde_json() {
    use rand::{Rng, SeedableRng};
    use relaysim::nip01::json_text;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let drawn: String = (0..1 << 20)
        .map(|_| ['"', '\\', 'a', '\n'][rng.random_range(0..4)])
        .collect();
    for (name, text) in [
        ("plain", cycled("abcdefghij klmnopqrstuvwxyz")),
        ("mixed", cycled("ab\"c\\dé€😀\n")),
        ("escape-heavy", cycled("\"\\\"\\a\n\"\"\\a\\")),
        ("drawn escapes", drawn),
    ] {
        let value = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}});
        let mb = text.len() as f64 / 1e6;
        let (ours, a) = best_of(5, || json_text::to_string(&value));
        let (theirs, b) = best_of(5, || serde_json::to_string(&value).unwrap());
        assert_eq!(a, b);
        println!(
            "json write {name:<13} {:>7.0} MB/s, serde_json {:>7.0} MB/s: {:.2}x",
            mb / ours.as_secs_f64(),
            mb / theirs.as_secs_f64(),
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    }
}

/// 1 MiB of `alphabet`'s characters, over and over.
fn cycled(alphabet: &str) -> String {
    alphabet.chars().cycle().take(1 << 20).collect()
}
