//! NIP-01 client frames, any bytes: each line goes through the live server's parser into a
//! strfry-like relay model with two connections; the relay must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relaysim::nip01::wire::to_model;
use relaysim::relay::{Relay, RelayProfile};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut relay = Relay::new(RelayProfile::strfry());
    relay.connect(1, "10.0.0.1");
    relay.connect(2, "10.0.0.2");
    let mut now = Duration::ZERO;
    for (i, line) in text.lines().enumerate() {
        now += Duration::from_millis(10);
        if let Some(message) = to_model(line) {
            relay.handle_client_message(1 + (i as u64 % 2), message, now);
        }
        relay.handle_timeout(now);
        while relay.poll_transmit().is_some() {}
        while relay.poll_dropped().is_some() {}
    }
});
