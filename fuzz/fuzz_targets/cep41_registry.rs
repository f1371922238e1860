//! CEP-41 frames, any bytes: each line is a JSON-RPC message fed to a stream registry (its
//! first byte moves the clock), and every readable chunk is read; nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relaysim::protocol::jsonrpc::Message;
use relaysim::protocol::open_stream::{OpenStreamRegistry, StreamFrame, StreamPolicy};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut registry: OpenStreamRegistry<String> = OpenStreamRegistry::new(StreamPolicy::default());
    let peer = "peer".to_owned();
    let mut now = Duration::ZERO;
    for line in text.lines() {
        now += Duration::from_millis(u64::from(line.bytes().next().unwrap_or(0)) * 50);
        if let Some(Ok(params)) = Message::parse(line).ok().and_then(|m| m.progress_params()) {
            if let Ok(frame) = StreamFrame::from_params(&params) {
                let token = frame.token.clone();
                registry.handle_frame(&peer, frame, now);
                while registry.read(&peer, &token).is_some() {}
            }
        }
        while let Some(t) = registry.poll_timeout().filter(|t| *t <= now) {
            registry.handle_timeout(t);
        }
        while registry.poll_transmit().is_some() {}
        while registry.poll_event().is_some() {}
    }
});
