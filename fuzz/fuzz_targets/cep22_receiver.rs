//! CEP-22 frames, any bytes: each line is a JSON-RPC message fed to a receiver (its first
//! byte moves the clock); the receiver must never panic, whatever arrives in whatever order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relaysim::protocol::jsonrpc::Message;
use relaysim::protocol::oversized::{OversizedReceiver, ReceiverConfig, TransferFrame};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut receiver: OversizedReceiver<String> = OversizedReceiver::new(ReceiverConfig::default());
    let mut now = Duration::ZERO;
    for line in text.lines() {
        now += Duration::from_millis(u64::from(line.bytes().next().unwrap_or(0)) * 50);
        if let Some(Ok(params)) = Message::parse(line).ok().and_then(|m| m.progress_params()) {
            if let Ok(frame) = TransferFrame::from_params(&params) {
                receiver.handle_frame(&"peer".to_owned(), frame, now);
            }
        }
        while let Some(t) = receiver.poll_timeout().filter(|t| *t <= now) {
            receiver.handle_timeout(t);
        }
        while receiver.poll_transmit().is_some() {}
        while receiver.poll_event().is_some() {}
    }
    receiver.handle_timeout(now + Duration::from_secs(3600));
    while receiver.poll_event().is_some() {}
});
