//! Trace files, any bytes: the reader refuses with a line number or reads; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(trace) = relaysim::Trace::parse(text, "fuzz.jsonl") {
            let _ = trace.header();
            let _ = relaysim::replay::traffic::traffic(&trace);
        }
    }
});
