//! Sweep files, any bytes, over the default scenario: refused with a message or built, within
//! the sweep bounds; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relaysim::sweep::{Sweep, SweepSpec};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(spec) = toml::from_str::<SweepSpec>(text) {
            let _ = Sweep::new(
                "fuzz".into(),
                spec,
                relaysim::scenario::DEFAULT_SCENARIO,
                "fuzz.toml",
            );
        }
    }
});
