//! relaysim's CEP-22 and CEP-41 receivers beside the published contextvm-sdk crate's (0.2.2),
//! fed identical frames from their JSON-RPC text: each side parses the text its own way
//! (relaysim as its peers do: a chunk read straight from its text by `chunk_text::read`,
//! any other frame through `Message::parse`; the SDK: `serde_json` into its
//! `JsonRpcNotification`) and runs its receiver. Wall clock, best of several runs; the machine
//! is named in the README's performance section. Run with
//!
//! ```text
//! cargo bench --bench vs_sdk --features contextvm-sdk
//! ```
//!
//! Prints each receiver's throughput and relaysim's as a multiple of the SDK's.
//!
//! Both sides run on the system allocator, as both libraries do in a program that does not
//! choose one (the `relaysim` binary uses mimalloc; under it the SDK's receivers gain more
//! than relaysim's, see the README's performance section).

mod common;

use common::best_of;
use contextvm_sdk::transport::open_stream::{
    OpenStreamRegistry as SdkRegistry, OpenStreamRegistryPolicy,
};
use contextvm_sdk::transport::oversized_transfer::{OversizedTransferReceiver, TransferPolicy};
use contextvm_sdk::JsonRpcNotification;
use futures_util::{FutureExt, StreamExt};
use relaysim::nip01::Identity;
use relaysim::peer::event::SignedEventEnvelope;
use relaysim::protocol::chunk_text::{self, ProgressFrame};
use relaysim::protocol::jsonrpc::{Message, RequestId};
use relaysim::protocol::open_stream::{
    OpenStreamRegistry, OpenStreamWriter, StreamPolicy, WriterConfig,
};
use relaysim::protocol::oversized::{
    OversizedReceiver, OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig,
};
use std::time::{Duration, Instant};

/// A tool result of `bytes` characters cycling through `alphabet`, as JSON-RPC text.
fn payload(alphabet: &str, bytes: usize) -> String {
    let body: String = alphabet.chars().cycle().take(bytes).collect();
    Message::Response {
        id: RequestId::Number(1),
        result: serde_json::json!({ "content": [{ "type": "text", "text": body }] }),
    }
    .to_json()
}

/// The frame texts of one CEP-22 transfer of `payload` at a 48,000-byte budget.
fn transfer_frames(payload: &str) -> Vec<String> {
    let server = Identity::derive(1, "server");
    let client = Identity::derive(1, "client");
    let env = SignedEventEnvelope::measure(&server, &client.public_key(), None, 1_700_000_000);
    let config = SenderConfig {
        budget: 48_000,
        ..SenderConfig::default()
    };
    let token = RequestId::String("bench".into());
    let mut sender = OversizedSender::new(token, payload.to_owned(), config, &env).unwrap();
    std::iter::from_fn(|| sender.poll_transmit(Duration::ZERO))
        .map(|f| f.to_json())
        .collect()
}

/// A frame as relaysim's peers read one: a chunk straight from its text, anything else through
/// the JSON-RPC message.
fn read_frame(text: &str) -> ProgressFrame {
    chunk_text::read(text).unwrap_or_else(|| {
        let params = Message::parse(text).unwrap().into_progress_params();
        ProgressFrame::from_params(&params.unwrap().unwrap()).unwrap()
    })
}

fn relaysim_transfer(frames: &[String]) -> bool {
    let mut r = OversizedReceiver::new(ReceiverConfig {
        send_accept: false,
        ..ReceiverConfig::default()
    });
    for text in frames {
        let frame = match read_frame(text) {
            ProgressFrame::Transfer(frame) => frame,
            ProgressFrame::Stream(_) => unreachable!("a CEP-22 transfer"),
        };
        r.handle_frame(&0u8, frame, Duration::ZERO);
    }
    std::iter::from_fn(|| r.poll_event()).any(|e| matches!(e, ReceiverEvent::Completed { .. }))
}

fn sdk_transfer(frames: &[String]) -> bool {
    let mut r = OversizedTransferReceiver::with_policy(TransferPolicy {
        transfer_timeout_ms: 0,
        ..TransferPolicy::default()
    });
    let mut done = false;
    for text in frames {
        let n: JsonRpcNotification = serde_json::from_str(text).unwrap();
        done |= matches!(r.process_frame(&n), Ok(Some(_)));
    }
    done
}

/// The frame texts of a CEP-41 stream of `n` small chunks.
fn stream_frames(n: u64) -> Vec<String> {
    let token = RequestId::String("bench".into());
    let mut w = OpenStreamWriter::new(token, WriterConfig::default());
    let mut frames = Vec::new();
    for i in 0..n {
        w.write(format!("token {i}"), Duration::ZERO).unwrap();
        while let Some(f) = w.poll_transmit(Duration::ZERO) {
            frames.push(f.to_json());
        }
    }
    frames
}

fn relaysim_stream(frames: &[String]) -> usize {
    let token = RequestId::String("bench".into());
    let mut r = OpenStreamRegistry::new(StreamPolicy {
        send_accept: false,
        ..StreamPolicy::default()
    });
    let mut read = 0;
    for text in frames {
        let frame = match read_frame(text) {
            ProgressFrame::Stream(frame) => frame,
            ProgressFrame::Transfer(_) => unreachable!("a CEP-41 stream"),
        };
        r.handle_frame(&0u8, frame, Duration::ZERO);
        while r.read(&0u8, &token).is_some() {
            read += 1;
        }
    }
    read
}

fn sdk_stream(frames: &[String]) -> usize {
    let mut r = SdkRegistry::with_policy(OpenStreamRegistryPolicy::default());
    let now = Instant::now();
    let mut session = None;
    let mut read = 0;
    for text in frames {
        let n: JsonRpcNotification = serde_json::from_str(text).unwrap();
        let _ = r.process_frame(now, &n).now_or_never();
        let session = session.get_or_insert_with(|| r.get_session("bench").expect("started"));
        while let Some(Some(Ok(_))) = session.next().now_or_never() {
            read += 1;
        }
    }
    read
}

fn report(what: &str, unit: &str, amount: f64, ours: Duration, sdk: Duration) {
    println!(
        "{what:<28} relaysim {:>9.1} {unit}  contextvm-sdk {:>9.1} {unit}  ratio {:.2}x",
        amount / ours.as_secs_f64(),
        amount / sdk.as_secs_f64(),
        sdk.as_secs_f64() / ours.as_secs_f64()
    );
}

fn main() {
    // `cargo bench --bench vs_sdk --features contextvm-sdk -- cep41` runs the rows named so.
    let only = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    for (name, alphabet) in [
        ("cep22 10 MiB mixed", "ab\"c\\dé€😀\n"),
        ("cep22 10 MiB escape-heavy", "\"\\"),
    ] {
        if !name.contains(&only) {
            continue;
        }
        let payload = payload(alphabet, 10 << 20);
        let frames = transfer_frames(&payload);
        let (ours, ok) = best_of(5, || relaysim_transfer(&frames));
        assert!(ok, "relaysim completes the transfer");
        let (sdk, ok) = best_of(5, || sdk_transfer(&frames));
        assert!(ok, "the SDK completes the transfer");
        report(name, "MB/s", payload.len() as f64 / 1e6, ours, sdk);
    }
    if !"cep41".contains(&only) {
        return;
    }
    let n = 100_000;
    let frames = stream_frames(n);
    let (ours, read) = best_of(3, || relaysim_stream(&frames));
    assert_eq!(read as u64, n, "relaysim reads every chunk");
    let (sdk, read) = best_of(3, || sdk_stream(&frames));
    assert_eq!(read as u64, n, "the SDK reads every chunk");
    report("cep41 100k chunks", "k chunks/s", n as f64 / 1e3, ours, sdk);
}
