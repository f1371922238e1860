//! MCP resumable-stream messages, any JSON: every reader must refuse or accept without
//! panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relaysim::protocol::resumable::messages::{StreamCreate, StreamRef};

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        if let Ok(create) = StreamCreate::from_params(&value) {
            // What was read writes back to something readable.
            let again = StreamCreate::from_params(&create.to_params()).expect("round trip");
            assert_eq!(again.stream_id, create.stream_id);
        }
        let _ = StreamRef::from_params(&value);
    }
});
