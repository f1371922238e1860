//! The published contextvm-sdk crate's engines against relaysim's (feature `contextvm-sdk`):
//! every pairing agrees where nothing is reordered, the differences found are pinned by the
//! shipped scenarios and traces, comparisons repeat exactly, and the SDK's engines never
//! corrupt a delivery whatever the relay does (they may fail, with a typed cause).

use proptest::prelude::*;
use relaysim::adapter::contextvm_sdk::IMPLEMENTATION as SDK;
use relaysim::compare::{compare, pairings};
use relaysim::replay;
use relaysim::scenario::Scenario;
use relaysim::trace::Trace;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn scenario(path: &str) -> Scenario {
    Scenario::from_file(&root().join(path)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn nine_pairings_and_over_an_ideal_relay_they_all_complete_everything() {
    // relaysim, ts-sdk and rust-sdk on either side.
    assert_eq!(pairings().len(), 9);
    let c = compare(&scenario("scenarios/ideal-baseline.toml"), 1, 2, 2, || {});
    for (pairing, report) in &c.reports {
        assert_eq!(
            report.completion_ratio(),
            1.0,
            "{}: {:?}",
            pairing.label(),
            report.failures()
        );
        assert_eq!(report.integrity_violations(), 0);
    }
    assert!(c.differences().is_empty(), "{}", c.text());
}

#[test]
fn the_sdk_writer_keeps_a_silent_stream_alive_in_virtual_time() {
    // Ten simulated minutes of silence: the SDK's writer pings through its own `ping()`, on the
    // simulator's clock, and relaysim's reader answers (and the other way round).
    let s = scenario("scenarios/silent-stream-keepalive.toml").with_implementations(SDK, SDK);
    let report = s.run_all();
    assert_eq!(report.completion_ratio(), 1.0, "{:?}", report.failures());
    assert!(s.check(&report).is_empty(), "{:?}", s.check(&report));
}

#[test]
fn a_comparison_repeats_exactly() {
    let s = scenario("scenarios/default.toml");
    let a = compare(&s, 4, 1, 1, || {}).text();
    let b = compare(&s, 4, 1, 2, || {}).text();
    assert_eq!(a, b);
}

#[test]
fn the_shipped_difference_scenarios_state_both_outcomes_and_hold() {
    let files =
        relaysim::scenario::scenario_files(&[root().join("scenarios/contextvm-sdk")]).unwrap();
    assert_eq!(files.len(), 9);
    for path in files {
        let s = Scenario::from_file(&path).unwrap();
        let report = s.run_all();
        let failed = s.check(&report);
        assert!(failed.is_empty(), "{}: {failed:?}", path.display());
        // Each pins the outcome of every workload: an SDK preset's failure, and what
        // relaysim's own peers do in its place (completed, unless they share the weakness).
        let text = std::fs::read_to_string(&path).unwrap();
        let outcomes = text
            .lines()
            .find(|l| l.starts_with("outcomes = {"))
            .unwrap_or_else(|| panic!("{}: no outcomes", path.display()));
        for workload in s.workload_names() {
            assert!(
                outcomes.contains(&format!("\"{workload}\" = ")),
                "{}: {workload} has no expected outcome",
                path.display()
            );
        }
        assert!(outcomes.contains("\"failed"), "{}", path.display());
    }
}

#[test]
fn the_readme_s_twenty_seeds_of_the_ping_overtaking_a_chunk_hold_every_stated_rate() {
    // README: `relaysim run scenarios/contextvm-sdk/writer-ping-overtakes-chunk.toml --runs 20
    // --seed 1` states how many of the 20 streams each writer loses; it must exit 0.
    let s = scenario("scenarios/contextvm-sdk/writer-ping-overtakes-chunk.toml");
    let report = s.run_seeds(1, 20, |_| {});
    assert_eq!(s.check(&report), Vec::<String>::new());
    assert_eq!(
        s.unchecked(&report),
        Vec::<String>::new(),
        "every rate checked"
    );
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let failing = |w: &str| {
        report
            .items()
            .filter(|i| s.workload_names()[i.workload] == w && i.outcome.family().is_some())
            .count()
    };
    let row = format!(
        "| {}/20 fail | {}/20 fail | {}/20 fail",
        failing("ts-stream"),
        failing("rust-stream"),
        failing("relaysim-stream")
    );
    assert!(readme.contains(&row), "README lacks {row:?}");
}

#[test]
fn inject_names_a_second_writer_under_one_token_as_the_cause() {
    // The TS server runs a request strfry replayed after its reconnect: two writers, one token.
    let dir = std::env::temp_dir().join(format!("relaysim-dup-writer-{}", std::process::id()));
    let trace = dir.join("t.jsonl");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args([
            "run",
            "scenarios/contextvm-sdk/ts-server-reruns-replayed-request.toml",
        ])
        .args([
            "--trace",
            trace.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
    let inject = std::process::Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args([
            "replay",
            trace.to_str().unwrap(),
            "--mode",
            "inject",
            "--json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&inject.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&inject.stdout)));
    let rows = v["receivers"].as_array().expect("receivers");
    let outcome = |who: &str| {
        rows.iter()
            .find(|r| r["receiver"] == who)
            .map(|r| r["injected"].as_str().unwrap_or("").to_owned())
            .unwrap_or_else(|| panic!("no {who} in {v}"))
    };
    let ts = outcome("ts-client");
    assert!(
        ts.starts_with("failed:duplicate-writer: a second start"),
        "{ts}"
    );
    assert!(ts.contains("two writers share one token"), "{ts}");
    assert_eq!(outcome("relaysim-client"), "completed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_shipped_physics_scenarios_meet_their_expectations() {
    let files = relaysim::scenario::scenario_files(&[root().join("scenarios/physics")]).unwrap();
    assert_eq!(files.len(), 7);
    for path in files {
        let s = Scenario::from_file(&path).unwrap();
        let report = s.run_all();
        let failed = s.check(&report);
        assert!(failed.is_empty(), "{}: {failed:?}", path.display());
        for (name, n) in report.counters() {
            assert!(
                !name.ends_with(".unexplained"),
                "{}: {name} {n}",
                path.display()
            );
        }
    }
}

#[test]
fn the_shipped_difference_traces_replay_to_their_outcome_byte_for_byte() {
    let dir = root().join("traces/contextvm-sdk");
    let expected: BTreeMap<String, String> =
        toml::from_str(&std::fs::read_to_string(dir.join("expected.toml")).unwrap()).unwrap();
    assert_eq!(expected.len(), 16);
    for (file, outcome) in &expected {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let trace = Trace::parse(&text, file).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            // Traces keep the SDK's own words after the cause family.
            trace
                .outcomes()
                .iter()
                .any(|o| relaysim::stats::family(&o.outcome) == outcome.as_str()),
            "{file} records {:?}",
            trace.outcomes()
        );
        let r = replay::schedule(&trace, &text, &None).unwrap();
        assert!(r.same_outcome(), "{file}");
        assert_eq!(r.first_difference, None, "{file} replays to other bytes");
    }
}

#[test]
fn compare_through_the_cli_prints_the_differences_and_writes_csv() {
    let out = std::env::temp_dir().join(format!("relaysim-compare-{}", std::process::id()));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args([
            "compare",
            "scenarios/stream-reorder-duplicate.toml",
            "--runs",
            "1",
            "--out",
            out.to_str().unwrap(),
        ])
        .current_dir(root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{text}");
    assert!(text.contains("differences:"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("relaysim/ts-sdk") && l.contains("0/1"));
    assert!(row.is_some_and(|r| r.contains("stream-sequence")), "{text}");
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    // A row per pairing of the three presets.
    assert_eq!(csv.lines().count(), 1 + 9, "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("relaysim,ts-sdk,stream-0,1,0,1,stream-sequence:1")),
        "{csv}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Any pairing, any relay schedule (the datagram stress mode, worse than any relay):
    /// every call completes with intact data or fails with a
    /// typed cause; the SDK's engines never surface a corrupted delivery.
    #[test]
    fn any_pairing_any_schedule_never_corrupts(
        pairing in 0usize..9,
        reorder in 0.0f64..0.2,
        duplicate in 0.0f64..0.1,
        lossy in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let loss = if lossy { 0.03 } else { 0.0 };
        let text = format!(
            r#"
            duration = "10m"
            [[relays]]
            name = "r"
            profile = "khatru"
            [relays.down]
            ordering = "datagram"
            delay = {{ dist = "lognormal", median = "40ms", sigma = 0.4 }}
            reorder = {reorder}
            reorder_delay = "120ms"
            duplicate = {duplicate}
            loss = {loss}
            [[servers]]
            name = "s"
            relays = ["r"]
            [[clients]]
            name = "c"
            relays = ["r"]
            [[workloads]]
            kind = "download"
            bytes = "300KB"
            content = "escape-heavy"
            [[workloads]]
            kind = "upload"
            bytes = "200KB"
            content = "utf8"
            [[workloads]]
            kind = "stream"
            chunks = 60
            interval = "20ms"
            "#
        );
        let p = pairings()[pairing].clone();
        let s = Scenario::from_toml_str(&text, "generated.toml")
            .unwrap()
            .with_presets(&p.server, &p.client)
            .unwrap();
        let report = s.run_seeds(seed, 1, |_| {});
        prop_assert_eq!(report.integrity_violations(), 0, "{}", p.label());
        for item in report.items() {
            if let relaysim::stats::Outcome::Failed(cause) = &item.outcome {
                prop_assert!(!cause.is_empty());
            }
        }
    }
}

#[test]
fn shrinking_finds_the_one_publish_that_overtook_another() {
    // A server publishing from concurrent tasks lets a later frame reach the wire first; the
    // SDK's CEP-41 reader fails on it. The trace records every publish decision, so shrinking
    // can put them back in order one by one and keep the one swap that causes the failure.
    let s = scenario("scenarios/physics/publisher-concurrency.toml");
    let (report, text) = s.run_traced(1, relaysim::trace::EventsMode::Ids);
    assert!(report
        .items
        .iter()
        .any(|i| i.outcome.family() == Some("stream-sequence")));
    let trace = Trace::parse(&text, "publisher-concurrency.jsonl").unwrap();
    let shrunk =
        relaysim::replay::shrink::shrink(&trace, Some("stream-sequence"), 500, &None).unwrap();
    assert!(shrunk.before > 10, "{}", shrunk.before);
    assert!(
        matches!(
            shrunk.kept.as_slice(),
            [relaysim::replay::shrink::Disturbance::Link { link, what: "overtaken", .. }]
                if link.2 == "publish"
        ),
        "{:?}",
        shrunk.kept
    );
    // The shrunk trace replays to itself, byte for byte.
    let again = Trace::parse(&shrunk.text, "shrunk").unwrap();
    let r = replay::schedule(&again, &shrunk.text, &None).unwrap();
    assert!(
        r.replayed
            .iter()
            .any(|o| o.outcome.starts_with("failed:stream-sequence: ")),
        "{:?}",
        r.replayed
    );
}

/// sdk-behaviour §6 B1 at the engine boundary: the SDK's receiver behind a server that sends
/// `accept` but does not feed it (the TS transport) fails a 29-chunk upload numbered for the
/// handshake, in the SDK's own words; fed (the Rust transport), it completes.
#[test]
fn an_unfed_accept_fails_a_long_upload_in_the_sdk_s_own_words() {
    use relaysim::adapter::contextvm_sdk::SdkTransferReceiver;
    use relaysim::protocol::endpoint::TransferReceiving;
    use relaysim::protocol::envelope::EscapedContentEnvelope;
    use relaysim::protocol::jsonrpc::{Message, RequestId};
    use relaysim::protocol::oversized::{
        OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig, TransferBody, TransferFrame,
    };
    use std::time::Duration;

    let upload = |feed_accept: bool| {
        let message = Message::Request {
            id: RequestId::Number(1),
            method: "tools/call".into(),
            params: Some(serde_json::json!({ "name": "upload", "arguments": { "data": "x".repeat(200_000) } })),
        }
        .to_json();
        let token = RequestId::String("1".into());
        let config = SenderConfig {
            budget: 8_000,
            wait_for_accept: true,
            ..SenderConfig::default()
        };
        let envelope = EscapedContentEnvelope { overhead: 650 };
        let mut sender = OversizedSender::new(token.clone(), message, config, &envelope).unwrap();
        let mut receiver = SdkTransferReceiver::new(ReceiverConfig {
            feed_accept,
            ..ReceiverConfig::default()
        });
        let now = Duration::ZERO;
        let start = sender.poll_transmit(now).expect("start");
        receiver.handle_frame(&"client", start, now);
        let (_, accept) = receiver
            .poll_transmit()
            .expect("the server answers with accept");
        assert!(matches!(accept.body, TransferBody::Accept));
        sender.handle_frame(&accept);
        let frames: Vec<TransferFrame> = std::iter::from_fn(|| sender.poll_transmit(now)).collect();
        assert!(frames.len() >= 23, "{} frames", frames.len());
        for frame in frames {
            receiver.handle_frame(&"client", frame, now);
        }
        std::iter::from_fn(|| receiver.poll_event()).last()
    };
    match upload(false) {
        Some(ReceiverEvent::Failed { failure, .. }) => {
            assert_eq!(failure.cause(), "policy");
            assert!(
                failure
                    .to_string()
                    .contains("Out-of-order gap 22 exceeds policy limit 21"),
                "{failure}"
            );
        }
        other => panic!("expected the SDK's policy failure, got {other:?}"),
    }
    assert!(matches!(
        upload(true),
        Some(ReceiverEvent::Completed { .. })
    ));
}

/// The SDK clients open their reading session when the request goes out: a chunk that beats
/// `start` meets a live session, which refuses it in the SDK's words and the stream is dead. A
/// reader that opens on `start` finds no session for it, drops it, and reports nothing yet.
#[test]
fn a_duplicate_start_leaves_the_sdk_s_active_upload_alone() {
    // sdk-behaviour §2.4: "Duplicate start frame for active transfer" is refused and the
    // existing transfer continues; a relay's second copy of `start` must not kill it.
    use relaysim::adapter::contextvm_sdk::SdkTransferReceiver;
    use relaysim::protocol::endpoint::TransferReceiving;
    use relaysim::protocol::envelope::EscapedContentEnvelope;
    use relaysim::protocol::jsonrpc::{Message, RequestId};
    use relaysim::protocol::oversized::{
        OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig, TransferFrame,
    };
    let message = Message::Request {
        id: RequestId::Number(1),
        method: "tools/call".into(),
        params: Some(
            serde_json::json!({ "name": "upload", "arguments": { "data": "y".repeat(50_000) } }),
        ),
    }
    .to_json();
    let config = SenderConfig {
        budget: 8_000,
        wait_for_accept: true,
        ..SenderConfig::default()
    };
    let envelope = EscapedContentEnvelope { overhead: 650 };
    let mut sender =
        OversizedSender::new(RequestId::String("7".into()), message, config, &envelope).unwrap();
    let mut receiver = SdkTransferReceiver::new(ReceiverConfig::default());
    let now = Duration::ZERO;
    let start = sender.poll_transmit(now).expect("start");
    receiver.handle_frame(&"client", start.clone(), now);
    let (_, accept) = receiver.poll_transmit().expect("accept");
    sender.handle_frame(&accept);
    let frames: Vec<TransferFrame> = std::iter::from_fn(|| sender.poll_transmit(now)).collect();
    assert!(frames.len() > 3);
    for (k, frame) in frames.into_iter().enumerate() {
        if k == 2 {
            receiver.handle_frame(&"client", start.clone(), now); // the copy
        }
        receiver.handle_frame(&"client", frame, now);
    }
    let events: Vec<_> = std::iter::from_fn(|| receiver.poll_event()).collect();
    assert!(
        matches!(events.last(), Some(ReceiverEvent::Completed { .. })),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ReceiverEvent::Failed { .. })),
        "{events:?}"
    );
}

#[test]
fn a_chunk_before_start_kills_a_session_opened_at_request_time() {
    use relaysim::adapter::contextvm_sdk::SdkStreamReader;
    use relaysim::protocol::endpoint::StreamReading;
    use relaysim::protocol::jsonrpc::RequestId;
    use relaysim::protocol::open_stream::{RegistryEvent, StreamBody, StreamFrame, StreamPolicy};
    use std::time::Duration;

    let token = RequestId::String("0".into());
    let frame = |progress: u64, body: StreamBody| StreamFrame {
        token: token.clone(),
        progress,
        message: None,
        body,
    };
    let run = |open_at_request: bool| {
        let mut reader = SdkStreamReader::new(StreamPolicy::default());
        let now = Duration::ZERO;
        if open_at_request {
            reader.open(&"server", &token, now);
        }
        let chunk = StreamBody::Chunk {
            chunk_index: 0,
            data: "first".into(),
        };
        reader.handle_frame(&"server", frame(2, chunk), now);
        let start = StreamBody::Start {
            content_type: None,
            metadata: Default::default(),
        };
        reader.handle_frame(&"server", frame(1, start), now);
        std::iter::from_fn(|| reader.poll_event()).collect::<Vec<_>>()
    };
    let events = run(true);
    let failure = events
        .iter()
        .find_map(|e| match e {
            RegistryEvent::Failed { failure, .. } => Some(failure.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the session should have failed: {events:?}"));
    assert!(failure.contains("before start"), "{failure}");
    // The late `start` does not revive the dead stream.
    assert!(
        !events.iter().any(|e| matches!(
            e,
            RegistryEvent::Opened { .. } | RegistryEvent::Completed { .. }
        )),
        "{events:?}"
    );
    let events = run(false);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, RegistryEvent::Failed { .. })),
        "{events:?}"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, RegistryEvent::Opened { .. })));
}

/// An SDK engine's own words reach the report, the per-call CSV and the trace, after the cause
/// family that expectations and tables key on.
#[test]
fn sdk_failures_keep_their_own_words_in_report_csv_and_trace() {
    let dir = std::env::temp_dir().join(format!("relaysim-words-{}", std::process::id()));
    // The trace's directory does not exist yet: `run` creates it.
    let trace = dir.join("traces/t.jsonl");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args([
            "run",
            "scenarios/physics/publisher-concurrency.toml",
            "--runs",
            "1",
        ])
        .args([
            "--out",
            dir.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ])
        .current_dir(root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("in the implementation's own words:"),
        "{text}"
    );
    assert!(
        text.contains("stream-sequence: Non-increasing progress for stream"),
        "{text}"
    );
    // The workload table still counts the family alone.
    assert!(text.contains("stream-sequence ×1"), "{text}");
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(
        csv.contains("stream-sequence: Non-increasing progress"),
        "{csv}"
    );
    let failures = std::fs::read_to_string(dir.join("failures.csv")).unwrap();
    assert!(
        failures.lines().any(|l| l == "stream-sequence,1"),
        "{failures}"
    );
    let t = std::fs::read_to_string(&trace).unwrap();
    assert!(t.contains("failed:stream-sequence: Non-increasing progress"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_client_timeout_names_the_server_s_failure_of_its_upload() {
    // sdk-behaviour §6 B1: the TS server's receiver fails the upload and tells no one; the
    // client's timeout carries the server's own words.
    let report = scenario("scenarios/contextvm-sdk/ts-server-stateless-upload.toml").run_all();
    let texts = report.failure_texts();
    assert!(
        texts.keys().any(|t| t.starts_with(
            "timeout: server upload-policy: Out-of-order gap 22 exceeds policy limit 21"
        )),
        "{texts:?}"
    );
}

#[test]
fn compare_pairs_a_scenario_s_own_behaviour_tables_beside_the_presets() {
    // A Rust client with 70-byte prefixed tokens: its reader refuses the writer's long ping
    // nonces. Replacing the table by the presets would show every pairing completing.
    let text = r#"
[[relays]]
name = "r"
[[servers]]
name = "s"
relays = ["r"]
behaviour = "rust-sdk"
[[clients]]
name = "c"
relays = ["r"]
behaviour = "long-tokens"
[behaviours.long-tokens]
preset = "rust-sdk"
tokens = "prefixed"
token_prefix = "tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt"
nonce_limit = 64
[policy]
idle_timeout = "1s"
[[workloads]]
name = "slow-stream"
kind = "stream"
chunks = 3
chunk_bytes = 16
interval = "3s"
"#;
    let s = Scenario::from_toml_str(text, "long-tokens.toml").unwrap();
    let c = compare(&s, 1, 1, 1, || {});
    let labels: Vec<String> = c.reports.iter().map(|(p, _)| p.label()).collect();
    assert_eq!(
        labels.len(),
        12,
        "3 server presets × (3 presets + the table): {labels:?}"
    );
    assert!(
        labels.iter().all(|l| !l.starts_with("long-tokens/")),
        "a client's table"
    );
    let result = |label: &str| {
        c.workload(0)
            .into_iter()
            .find(|(p, _)| p.label() == label)
            .unwrap_or_else(|| panic!("no {label}"))
            .1
    };
    assert_eq!(result("rust-sdk/rust-sdk").completed, 1);
    let table = result("rust-sdk/long-tokens");
    assert_eq!(table.completed, 0, "{}", c.text());
    assert!(c.text().contains("rust-sdk/long-tokens"), "{}", c.text());
}

#[test]
fn a_rust_sdk_reader_dies_of_a_long_token_s_ping_nonce_and_a_ts_sdk_one_does_not() {
    // An SDK writer's nonce is "<token>:<n>"; a 70-byte token makes it over 64 bytes. The
    // writer pings after 1 s of silence, between chunks 3 s apart.
    use relaysim::peer::behaviour::{Behaviour, Role, TokenShape};
    use relaysim::peer::client::ClientEvent;
    use relaysim::peer::server::ServerConfig;
    let outcome = |client: Behaviour| {
        let server = ServerConfig {
            behaviour: Behaviour::preset("rust-sdk", Role::Server).unwrap(),
            implementation: SDK,
            writer: relaysim::protocol::open_stream::WriterConfig {
                idle_timeout: Duration::from_secs(1),
                ..Default::default()
            },
            ..ServerConfig::default()
        };
        let mut n = relaysim::sim::loopback::Loopback::new(
            7,
            vec![("relay-a".into(), relaysim::relay::RelayProfile::ideal())],
            |c| {
                c.implementation = SDK;
                c.behaviour = Behaviour {
                    tokens: TokenShape::Prefixed("t".repeat(70)),
                    ..client
                }
            },
            server,
        );
        n.client.initialize(n.now());
        n.run_until(n.now() + Duration::from_secs(1));
        let start = n.now();
        let (call, _) = n.client.call_tool_stream(
            "stream",
            serde_json::json!({ "chunks": 3, "chunk_bytes": 16, "interval_ms": 3000 }),
            start,
        );
        n.run_until(start + Duration::from_secs(60));
        std::iter::from_fn(|| n.client.poll_event()).find_map(|e| match e {
            ClientEvent::StreamEnded { call: c, outcome } if c == call => Some(outcome),
            _ => None,
        })
    };
    // sdk-behaviour §6 D: the Rust reader caps nonces at 64 bytes; the TS reader has no cap.
    let rust = outcome(Behaviour::preset("rust-sdk", Role::Client).unwrap());
    match rust {
        Some(Err(failure)) => assert!(
            failure.detail().is_some_and(|d| d.contains("nonce")),
            "{failure:?}"
        ),
        other => panic!("the Rust reader should refuse the nonce: {other:?}"),
    }
    assert_eq!(
        outcome(Behaviour::preset("ts-sdk", Role::Client).unwrap()),
        Some(Ok(()))
    );
}

#[test]
fn an_sdk_client_s_failed_download_reaches_its_call_only_as_a_timeout() {
    // two-relays-one-down: the SDK's CEP-22 receiver fails a download ("download-policy").
    // Both SDKs only log that; the call times out (sdk-behaviour §2.5).
    let base = std::fs::read_to_string(root().join("scenarios/two-relays-one-down.toml")).unwrap();
    let run = |client_behaviour: &str| {
        let text = base.replace(
            "[[clients]]\nname = \"client\"\nrelays = [\"a\", \"b\"]",
            &format!(
                "[[clients]]\nname = \"client\"\nrelays = [\"a\", \"b\"]\nbehaviour = \"{client_behaviour}\"\n\
                 [behaviours.ts-reaching]\npreset = \"ts-sdk\"\nfailures_reach_call = true"
            ),
        );
        assert_ne!(text, base);
        let report = Scenario::from_toml_str(&text, "t.toml")
            .unwrap()
            .run_seeds(1, 1, |_| {});
        report.failure_texts()
    };
    let ts = run("ts-sdk");
    assert!(
        ts.keys()
            .any(|t| t.starts_with("timeout: download-policy: ")),
        "{ts:?}"
    );
    let reaching = run("ts-reaching");
    assert!(
        reaching.keys().any(|t| t.starts_with("download-policy: ")),
        "{reaching:?}"
    );
}
