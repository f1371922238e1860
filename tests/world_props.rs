//! Property test of the whole stack: any workload through any relay schedule → every delivery
//! intact (or a typed failure), never corruption, never a panic; and with no loss and reordering
//! within the readers' bounds (delays up to a lognormal of median 100 ms and sigma 0.5 plus a 150 ms
//! hold-back, at one chunk per 20 ms, stay under the 64-chunk CEP-41 reorder buffer; heavier
//! tails overflow it, which is a policy failure, not corruption), everything completes.

use proptest::prelude::*;
use relaysim::scenario::Scenario;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One generated relay schedule and workload.
struct Params {
    profile: &'static str,
    median_ms: u64,
    sigma: f64,
    reorder: f64,
    duplicate: f64,
    loss: f64,
    bytes: u64,
    chunks: u64,
    content: &'static str,
}

fn scenario(p: &Params) -> Scenario {
    let Params {
        profile,
        median_ms,
        sigma,
        reorder,
        duplicate,
        loss,
        bytes,
        chunks,
        content,
    } = p;
    let text = format!(
        r#"
        duration = "10m"
        [policy]
        max_request_timeout = "10m"
        [[relays]]
        name = "r"
        profile = "{profile}"
        [relays.down]
        delay = {{ dist = "lognormal", median = "{median_ms}ms", sigma = {sigma} }}
        reorder = {reorder}
        reorder_delay = "150ms"
        duplicate = {duplicate}
        loss = {loss}
        [relays.up]
        delay = {{ dist = "uniform", min = "0ms", max = "{median_ms}ms" }}
        [[servers]]
        name = "s"
        relays = ["r"]
        [[clients]]
        name = "c"
        relays = ["r"]
        stateless = true
        [[workloads]]
        kind = "download"
        bytes = {bytes}
        content = "{content}"
        [[workloads]]
        kind = "upload"
        bytes = {bytes}
        content = "{content}"
        [[workloads]]
        kind = "stream"
        chunks = {chunks}
        interval = "20ms"
        [[workloads]]
        kind = "request"
        count = 3
        "#
    );
    Scenario::from_toml_str(&text, "generated.toml").expect("a valid generated scenario")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]

    #[test]
    fn any_relay_schedule_never_corrupts_and_without_loss_everything_completes(
        profile in prop_oneof![Just("ideal"), Just("strfry"), Just("khatru"), Just("nostr-rs-relay")],
        median_ms in 1u64..100,
        sigma in 0.0f64..0.5,
        reorder in 0.0f64..0.3,
        duplicate in 0.0f64..0.2,
        lossy in any::<bool>(),
        bytes in 1_000u64..400_000,
        chunks in 0u64..120,
        content in prop_oneof![Just("ascii"), Just("escape-heavy"), Just("utf8"), Just("random")],
        seed in any::<u64>(),
    ) {
        let loss = if lossy { 0.05 } else { 0.0 };
        let s = scenario(&Params { profile, median_ms, sigma, reorder, duplicate, loss, bytes, chunks, content });
        let report = s.run_seeds(seed, 1, |_| {});
        prop_assert_eq!(report.integrity_violations(), 0);
        if !lossy {
            prop_assert_eq!(report.completion_ratio(), 1.0, "failures: {:?}", report.failures());
        }
        for item in report.items() {
            if let relaysim::stats::Outcome::Failed(cause) = &item.outcome {
                prop_assert!(!cause.is_empty());
            }
        }
    }
}

/// A resumable client's connection drops `drops` times (start and length in seconds, each
/// well within `resumeInterval.max` of 300 s) during a 200-chunk stream through a relay that
/// keeps no ephemeral events and reorders: the stream still completes, and every chunk is read
/// exactly once and in order (the collector counts a missing, repeated or out-of-order chunk
/// as an integrity violation).
fn resumable_scenario(profile: &str, drops: &[(u64, u64)], median_ms: u64) -> Scenario {
    let outages: String = drops
        .iter()
        .map(|(at, len)| {
            format!(
                "[[relays.outages]]\nat = \"{at}s\"\nduration = \"{len}s\"\nkind = \"connection-drop\"\npeer = \"c\"\n"
            )
        })
        .collect();
    let text = format!(
        r#"
        duration = "15m"
        [[relays]]
        name = "r"
        profile = "{profile}"
        [relays.down]
        delay = {{ dist = "lognormal", median = "{median_ms}ms", sigma = 0.5 }}
        {outages}
        [[servers]]
        name = "s"
        relays = ["r"]
        [[clients]]
        name = "c"
        relays = ["r"]
        resumable_streams = true
        [[workloads]]
        kind = "stream"
        chunks = 200
        interval = "500ms"
        "#
    );
    Scenario::from_toml_str(&text, "generated.toml").expect("a valid generated scenario")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(32), ..ProptestConfig::default() })]

    #[test]
    fn any_disconnect_schedule_within_max_delivers_every_chunk_once_in_order(
        profile in prop_oneof![Just("khatru"), Just("nostr-rs-relay"), Just("strfry")],
        drops in proptest::collection::vec((1u64..100, 1u64..150), 1..4),
        median_ms in 1u64..150,
        seed in any::<u64>(),
    ) {
        let s = resumable_scenario(profile, &drops, median_ms);
        let report = s.run_seeds(seed, 1, |_| {});
        prop_assert_eq!(report.integrity_violations(), 0);
        prop_assert_eq!(report.completion_ratio(), 1.0, "failures: {:?}", report.failures());
        let chunks: Vec<_> = report.items().filter_map(|i| i.chunks).collect();
        prop_assert_eq!(chunks, vec![(200, 200)]);
    }
}
