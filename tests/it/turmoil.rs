//! The live relay server and the async peer driver inside a turmoil simulation: the same code
//! that serves real sockets, on turmoil's simulated TCP with a fixed epoch and a seeded
//! scheduler, so two runs with one seed see the same thing at the same simulated instants. And
//! the `turmoil` engine over the shipped scenarios: its outcomes agree with the des engine's.

use relaysim::live::driver::{PeerDriver, TurmoilTcp};
use relaysim::live::{serve_on, ServeConfig};
use relaysim::nip01::{Identity, EPOCH_SECS};
use relaysim::peer::client::{CallOptions, ClientConfig, ClientEvent, ContextVmClient};
use relaysim::peer::server::{ContextVmServer, ServerConfig};
use relaysim::relay::RelayProfile;
use relaysim::rng::SeededStreams;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const RELAY_URL: &str = "ws://relay:7777";

/// What the client saw, one line per event: simulated time, then the event in short.
fn run(seed: u64) -> Vec<String> {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(120))
        .rng_seed(seed)
        .build();
    sim.host("relay", || async {
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 7777)).await?;
        let _relay = serve_on(
            vec![(listener, SocketAddr::from(([0, 0, 0, 0], 7777)))],
            ServeConfig {
                epoch_secs: Some(EPOCH_SECS),
                ..ServeConfig::new(RelayProfile::strfry())
            },
        )?;
        std::future::pending::<()>().await;
        Ok(())
    });
    sim.host("server", || async {
        let server = ContextVmServer::new(
            Identity::derive(9, "server"),
            vec![RELAY_URL.into()],
            ServerConfig::default(),
            SeededStreams::new(9).stream("server"),
        );
        let mut driver =
            PeerDriver::connect_with(server, vec![RELAY_URL.into()], EPOCH_SECS, TurmoilTcp);
        driver.run_until(|_| false, Duration::from_secs(600)).await;
        Ok(())
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    sim.client("client", async move {
        let client = ContextVmClient::new(
            Identity::derive(9, "client"),
            vec![RELAY_URL.into()],
            ClientConfig::new(Identity::derive(9, "server").public_key()),
        );
        let mut driver =
            PeerDriver::connect_with(client, vec![RELAY_URL.into()], EPOCH_SECS, TurmoilTcp);
        // Let both peers connect and subscribe.
        driver.run_until(|_| false, Duration::from_secs(1)).await;
        let now = driver.now();
        driver.peer_mut().call_tool(
            "large_result",
            json!({ "bytes": 200_000, "content": "escape-heavy" }),
            CallOptions { progress: true },
            now,
        );
        let now = driver.now();
        driver.peer_mut().call_tool_stream(
            "stream",
            json!({ "chunks": 8, "chunk_bytes": 50, "interval_ms": 100 }),
            now,
        );
        let mut responses = 0;
        while responses < 2 {
            let mut got = None;
            let reached = driver
                .run_until(
                    |c| {
                        got = c.poll_event();
                        got.is_some()
                    },
                    Duration::from_secs(30),
                )
                .await;
            assert!(reached, "the client stalled");
            let event = got.expect("an event");
            if matches!(event, ClientEvent::Response { .. }) {
                responses += 1;
            }
            seen.lock()
                .unwrap()
                .push(format!("{:?} {}", driver.now(), short(&event)));
        }
        seen.lock()
            .unwrap()
            .push(format!("stats {:?}", driver.stats()));
        Ok(())
    });
    sim.run().expect("the simulation ran to the end");
    let lines = log.lock().unwrap().clone();
    lines
}

/// An event with long results replaced by their length and digest.
fn short(event: &ClientEvent) -> String {
    match event {
        ClientEvent::Response {
            call,
            response: Ok(v),
        } => {
            let text = v["content"][0]["text"].as_str().unwrap_or_default();
            format!(
                "response call={call} len={} sha256={:x}",
                text.len(),
                Sha256::digest(text.as_bytes())
            )
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn a_transfer_and_a_stream_complete_over_turmoil_tcp() {
    let log = run(1);
    let joined = log.join("\n");
    assert!(joined.contains("Initialized"), "{joined}");
    assert!(
        log.iter()
            .any(|l| l.contains("response call=1 len=200000 ")),
        "the 200 kB result arrived: {joined}"
    );
    assert!(
        joined.contains("StreamEnded") && joined.contains("outcome: Ok(())"),
        "{joined}"
    );
    assert!(joined.contains("drops: 0"), "{joined}");
}

#[test]
fn one_seed_gives_the_same_run_twice() {
    assert_eq!(run(4), run(4));
}

fn outcomes(report: &relaysim::stats::RunReport) -> Vec<(usize, usize, String)> {
    let mut v: Vec<_> = report
        .items
        .iter()
        .map(|i| (i.workload, i.client, format!("{:?}", i.outcome)))
        .collect();
    v.sort();
    v
}

/// Every shipped scenario in `scenarios/`, run once in each engine: the same calls end the same
/// way. None of them is timing-critical enough to flip an outcome between a virtual-time queue
/// and simulated TCP. (`two-relays-one-down` agrees because its second relay makes the outage
/// moot.) The turmoil engine applies no outages, so `scenarios/resumable/`, whose point is a
/// client's connection drop, is left out on purpose.
#[test]
fn the_turmoil_engine_agrees_with_des_on_the_shipped_scenarios() {
    let root = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios"));
    let files = relaysim::scenario::scenario_files(&[root]).unwrap();
    assert!(files.len() >= 9);
    for file in files {
        let scenario = relaysim::scenario::Scenario::from_file(&file).unwrap();
        let des = scenario.run(scenario.seed);
        let turmoil =
            relaysim::turmoil_driver::run_scenario(&scenario, scenario.seed, None).unwrap();
        assert!(!des.items.is_empty(), "{}", file.display());
        assert_eq!(
            outcomes(&des),
            outcomes(&turmoil),
            "{}: des and turmoil disagree",
            file.display()
        );
    }
}

/// The relays' counters reach a turmoil run's report under the des names: on the ideal
/// relay, whose links lose nothing, both engines accept and deliver the same events.
#[test]
fn a_turmoil_run_reports_its_relays_counters_as_des_does() {
    let scenario = relaysim::scenario::Scenario::from_toml_str(
        include_str!("../../scenarios/ideal-baseline.toml"),
        "ideal-baseline.toml",
    )
    .unwrap();
    let des = scenario.run(scenario.seed);
    let turmoil = relaysim::turmoil_driver::run_scenario(&scenario, scenario.seed, None).unwrap();
    for name in ["events_accepted", "delivered"] {
        let (d, t) = (des.counters.get(name), turmoil.counters.get(name));
        assert!(d.is_some_and(|n| *n > 0), "des counts {name}");
        assert_eq!(d, t, "{name}");
    }
    assert_eq!(
        turmoil.counters.get("events_received"),
        des.counters.get("events_published"),
        "every published event reached the ideal relay"
    );
}

/// A failed call's `why` in a turmoil run names the relay's refusals with their words, and
/// peers and relays by their scenario names, as in des; the refusals the peers saw are not
/// counted twice beside the relay's own counters.
#[test]
fn a_turmoil_run_explains_a_failure_with_the_relay_s_refusals_by_name() {
    let scenario = relaysim::scenario::Scenario::from_toml_str(
        include_str!("../../scenarios/damus-rate-cap.toml"),
        "damus-rate-cap.toml",
    )
    .unwrap();
    let run = relaysim::turmoil_driver::run_scenario(&scenario, scenario.seed, None).unwrap();
    let failed: Vec<&str> = run
        .items
        .iter()
        .filter(|i| i.outcome != relaysim::Outcome::Completed)
        .filter_map(|i| i.why.as_deref())
        .collect();
    assert_eq!(failed.len(), 1, "{:?}", run.items);
    let refused = run.counters["rejected.rate-limited"];
    assert!(
        failed[0].contains(&format!(
            "\"rate-limited: you note too much\" (server via damus ×{refused})"
        )),
        "{}",
        failed[0]
    );
}

/// A relay that accepts events without an OK counts its silence (`ok_withheld`): on
/// nostr-rs-relay 0.8, as many as the des world's publishers missed (`ok_missing`).
#[test]
fn a_relay_that_withholds_oks_counts_them_as_the_publishers_miss_them() {
    let scenario = relaysim::scenario::Scenario::from_toml_str(
        include_str!("../../scenarios/nostr-rs-relay-no-ok.toml"),
        "nostr-rs-relay-no-ok.toml",
    )
    .unwrap();
    let des = scenario.run(scenario.seed);
    let turmoil = relaysim::turmoil_driver::run_scenario(&scenario, scenario.seed, None).unwrap();
    let withheld = turmoil.counters.get("ok_withheld").copied();
    assert!(withheld.is_some_and(|n| n > 0), "{:?}", turmoil.counters);
    assert_eq!(withheld, des.counters.get("ok_missing").copied());
    // The peers followed each publication to its OK too, as des peers do.
    assert_eq!(turmoil.counters.get("ok_missing").copied(), withheld);
}

/// A server that waits for each OK before its next frame (the TypeScript SDK's transport) on
/// a relay that sends none never finishes a CEP-22 result in a turmoil run, and the call's
/// `why` says no OK came, as in des.
#[test]
fn a_turmoil_run_names_the_oks_a_waiting_publisher_never_got() {
    let scenario = relaysim::scenario::Scenario::from_toml_str(
        r#"
        name = "no-ok-for-a-waiting-publisher"
        duration = "30s"
        [[relays]]
        name = "rs"
        profile = "nostr-rs-relay"
        [[servers]]
        name = "server"
        relays = ["rs"]
        behaviour = "ts-sdk"
        [[clients]]
        name = "client"
        relays = ["rs"]
        behaviour = "ts-sdk"
        [[workloads]]
        kind = "download"
        bytes = "300KB"
        "#,
        "no-ok.toml",
    )
    .unwrap();
    let des = scenario.run(scenario.seed);
    let turmoil = relaysim::turmoil_driver::run_scenario(&scenario, scenario.seed, None).unwrap();
    for run in [&des, &turmoil] {
        let why = run
            .items
            .iter()
            .find(|i| i.outcome != relaysim::Outcome::Completed)
            .and_then(|i| i.why.as_deref())
            .unwrap_or_else(|| panic!("a failed call with a why: {:?}", run.items));
        assert!(
            why.contains("no OK came for") && why.contains("server via rs"),
            "{why}"
        );
    }
}

#[test]
fn a_turmoil_scenario_run_repeats_exactly_and_its_trace_replays() {
    let scenario = relaysim::scenario::Scenario::from_toml_str(
        include_str!("../../scenarios/stream-reorder-duplicate.toml"),
        "stream-reorder-duplicate.toml",
    )
    .unwrap();
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let (ta, tb) = (
        dir.join(format!("relaysim-turmoil-a-{pid}.jsonl")),
        dir.join(format!("relaysim-turmoil-b-{pid}.jsonl")),
    );
    let a = relaysim::turmoil_driver::run_scenario(&scenario, 3, Some(&ta)).unwrap();
    let b = relaysim::turmoil_driver::run_scenario(&scenario, 3, Some(&tb)).unwrap();
    let (trace_a, trace_b) = (std::fs::read(&ta).unwrap(), std::fs::read(&tb).unwrap());
    let _ = (std::fs::remove_file(&ta), std::fs::remove_file(&tb));
    assert!(
        trace_a.len() > 10_000,
        "a trace of the run: {} bytes",
        trace_a.len()
    );
    assert!(trace_a == trace_b, "one seed, byte-identical traces");
    // The relay-side trace replays: our receivers complete what crossed the relay.
    let trace =
        relaysim::trace::Trace::parse(std::str::from_utf8(&trace_a).unwrap(), "a.jsonl").unwrap();
    let injected = relaysim::replay::inject(&trace).unwrap();
    assert!(!injected.is_empty());
    assert!(
        injected.iter().all(|i| i.outcome == "completed"),
        "{injected:?}"
    );
    // And in schedule mode: the des world reruns the scenario (from the trace's header) with
    // every delivery as the recorded relay made it, and the stream ends as it did.
    let rerun = relaysim::replay::live_schedule::schedule_live(&trace, None).unwrap();
    assert_eq!(rerun.seed, 3);
    assert!(!rerun.recorded.is_empty());
    assert!(
        rerun.same_outcome(),
        "{:?} vs {:?}",
        rerun.recorded,
        rerun.replayed
    );
    assert_eq!(rerun.matched_publications, rerun.replayed_publications);
    assert_eq!(format!("{:?}", a.items), format!("{:?}", b.items));
    let quantiles = |r: &relaysim::stats::RunReport| {
        r.histograms
            .iter()
            .map(|(k, h)| (*k, h.len(), h.value_at_quantile(0.99)))
            .collect::<Vec<_>>()
    };
    assert_eq!(quantiles(&a), quantiles(&b));
    assert!(a.histograms.contains_key("chunk_latency"));
}

/// A schedule replay follows the recording, not the scenario's own link: with 40 deliveries
/// of a clean recording deleted (a relay that dropped them), the rerun stream fails as the
/// injected recording does, where the scenario alone completes it.
#[test]
fn a_live_schedule_replay_follows_the_recorded_deliveries() {
    let scenario = relaysim::scenario::Scenario::from_toml_str(
        include_str!("../../scenarios/ideal-baseline.toml"),
        "ideal-baseline.toml",
    )
    .unwrap();
    let path =
        std::env::temp_dir().join(format!("relaysim-turmoil-cut-{}.jsonl", std::process::id()));
    relaysim::turmoil_driver::run_scenario(&scenario, 1, Some(&path)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let trace = relaysim::trace::Trace::parse(&text, "full.jsonl").unwrap();
    let clean = relaysim::replay::live_schedule::schedule_live(&trace, None).unwrap();
    assert!(clean.same_outcome());
    assert!(
        clean.recorded.values().all(|o| o == "completed"),
        "{:?}",
        clean.recorded
    );
    assert!(
        clean.calls.iter().all(|c| c.outcome == "completed"),
        "{:?}",
        clean.calls
    );

    // Drop deliveries 100..140 to anyone: a relay losing a burst mid-run.
    let mut delivered = 0;
    let cut: String = text
        .lines()
        .filter(|l| {
            if !l.contains(r#""type":"delivered""#) {
                return true;
            }
            delivered += 1;
            !(100..140).contains(&delivered)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(delivered > 140, "{delivered} deliveries");
    let trace = relaysim::trace::Trace::parse(&cut, "cut.jsonl").unwrap();
    let rerun = relaysim::replay::live_schedule::schedule_live(&trace, None).unwrap();
    assert!(
        rerun.recorded.values().any(|o| o != "completed"),
        "the cut recording injects to a failure: {:?}",
        rerun.recorded
    );
    assert!(
        rerun.same_outcome(),
        "{:?} vs {:?}",
        rerun.recorded,
        rerun.replayed
    );
    // The rerun endpoints lived through the same losses: the download and the stream fail.
    for tool in ["large_result", "stream"] {
        assert!(
            rerun
                .calls
                .iter()
                .any(|c| c.tool == tool && c.outcome.starts_with("failed")),
            "{tool}: {:?}",
            rerun.calls
        );
    }
}

/// A turmoil recording of two clients with identical traffic (the same token, the same
/// keepalive pings) reruns in des with each delivery going to the right client. The turmoil
/// relay applies the scenario's connection drops as the des world does: the plain CEP-41
/// reader fails and the resumable one completes, in both engines.
#[test]
fn a_live_schedule_replay_keeps_identical_frames_to_two_clients_apart() {
    let scenario = relaysim::scenario::Scenario::from_toml_str(
        include_str!("../../scenarios/resumable/khatru-drop-2s.toml"),
        "khatru-drop-2s.toml",
    )
    .unwrap();
    let path =
        std::env::temp_dir().join(format!("relaysim-turmoil-two-{}.jsonl", std::process::id()));
    let report = relaysim::turmoil_driver::run_scenario(&scenario, 1, Some(&path)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let outcomes: Vec<String> = report
        .items
        .iter()
        .map(|i| match &i.outcome {
            relaysim::stats::Outcome::Completed => "completed".to_owned(),
            relaysim::stats::Outcome::Failed(c) => c.clone(),
        })
        .collect();
    let des = scenario.run_seeds(1, 1, |_| {});
    let des: Vec<String> = des
        .items()
        .map(|i| match &i.outcome {
            relaysim::stats::Outcome::Completed => "completed".to_owned(),
            relaysim::stats::Outcome::Failed(c) => c.clone(),
        })
        .collect();
    assert_eq!(outcomes, ["stream-reorder-buffer-full", "completed"]);
    assert_eq!(outcomes, des, "turmoil and des agree");
    assert!(
        text.contains(r#""kind":"connection-drop""#),
        "the drops are in the trace"
    );
    let trace = relaysim::trace::Trace::parse(&text, "two.jsonl").unwrap();
    let rerun = relaysim::replay::live_schedule::schedule_live(&trace, None).unwrap();
    assert_eq!(rerun.recorded.len(), 2);
    assert!(
        rerun.same_outcome(),
        "{:?} vs {:?}",
        rerun.recorded,
        rerun.replayed
    );
    // The rerun's endpoints live through the recorded drop as the recorded ones did.
    let rerun_outcomes: Vec<&str> = rerun.calls.iter().map(|c| c.outcome.as_str()).collect();
    assert_eq!(
        rerun_outcomes,
        ["failed:stream-reorder-buffer-full", "completed"],
        "{:?}",
        rerun.calls
    );
    assert!(
        rerun.matched_publications * 100 >= rerun.replayed_publications * 95,
        "{} of {}",
        rerun.matched_publications,
        rerun.replayed_publications
    );
}
