//! Scenario files, any bytes: validation refuses with places or builds a scenario whose plan
//! can be made; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(scenario) = relaysim::Scenario::from_toml_str(text, "fuzz.toml") {
            let _ = scenario.plan(1);
        }
    }
});
