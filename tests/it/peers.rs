//! End-to-end lifecycles between a client and a server peer over a perfect in-process relay:
//! every tool, every transfer mode.

use nostr::prelude::Event;
use relaysim::peer::client::{CallFailure, CallOptions, ClientEvent};
use relaysim::peer::server::{codes, ServerConfig, ServerEvent};
use relaysim::protocol::open_stream::StreamFailure;
use relaysim::relay::RelayProfile;
use relaysim::sim::loopback::{Loopback, Side};
use serde_json::{json, Value};
use std::time::Duration;

const S: fn(u64) -> Duration = Duration::from_secs;

fn net(configure: impl FnOnce(&mut relaysim::peer::client::ClientConfig)) -> Loopback {
    Loopback::new(
        7,
        vec![("relay-a".into(), RelayProfile::ideal())],
        configure,
        ServerConfig::default(),
    )
}

fn events(n: &mut Loopback) -> Vec<ClientEvent> {
    std::iter::from_fn(|| n.client.poll_event()).collect()
}

fn response_text(e: &ClientEvent) -> Option<String> {
    match e {
        ClientEvent::Response {
            response: Ok(v), ..
        } => v["content"][0]["text"].as_str().map(str::to_owned),
        _ => None,
    }
}

fn initialized(n: &mut Loopback) {
    n.client.initialize(S(0));
    n.run_until(S(1));
    let evs = events(n);
    assert!(
        matches!(evs[..], [ClientEvent::Initialized { capabilities }] if capabilities.oversized_transfer && capabilities.open_stream),
        "{evs:?}"
    );
}

#[test]
fn initialize_learns_the_servers_capabilities() {
    let mut n = net(|_| {});
    initialized(&mut n);
    // The initialize request carried the client's capability tags; the response the server's.
    let first = Event::from_json(&n.log[0].json).unwrap();
    assert!(first
        .tags
        .iter()
        .any(|t| t.as_slice() == ["support_oversized_transfer"]));
}

#[test]
fn echo_round_trip() {
    let mut n = net(|_| {});
    initialized(&mut n);
    let call = n.client.call_tool(
        "echo",
        json!({ "text": "hello \"relay\"" }),
        CallOptions::default(),
        S(1),
    );
    n.run_until(S(2));
    let evs = events(&mut n);
    assert_eq!(evs.len(), 1);
    assert!(matches!(evs[0], ClientEvent::Response { call: c, .. } if c == call));
    assert_eq!(response_text(&evs[0]).as_deref(), Some("hello \"relay\""));
}

#[test]
fn a_streamed_tool_delivers_chunks_in_order_then_the_final_result() {
    let mut n = net(|_| {});
    initialized(&mut n);
    let (call, _token) = n.client.call_tool_stream(
        "stream",
        json!({ "chunks": 20, "chunk_bytes": 100, "interval_ms": 50 }),
        S(1),
    );
    let mut chunks = Vec::new();
    let mut t = S(1);
    while t < S(5) {
        t += Duration::from_millis(10);
        n.run_until(t);
        while let Some(c) = n.client.read_stream(call) {
            chunks.push(c);
        }
    }
    assert_eq!(chunks.len(), 20);
    assert!(chunks
        .iter()
        .enumerate()
        .all(|(i, c)| c.chunk_index == i as u64
            && c.data.len() == 100
            && c.data.starts_with(&format!("chunk {i}:"))));
    let evs = events(&mut n);
    let kinds: Vec<&str> = evs
        .iter()
        .map(|e| match e {
            ClientEvent::StreamOpened { .. } => "opened",
            ClientEvent::StreamEnded {
                outcome: Ok(()), ..
            } => "ended",
            ClientEvent::Response { .. } => "response",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["opened", "ended", "response"], "{evs:?}");
    assert_eq!(
        response_text(&evs[2]).as_deref(),
        Some("streamed 20 chunks")
    );
}

#[test]
fn an_oversized_response_arrives_as_a_cep22_transfer() {
    let mut n = net(|_| {});
    initialized(&mut n);
    let call = n.client.call_tool(
        "large_result",
        json!({ "bytes": 300_000, "content": "escape-heavy" }),
        CallOptions { progress: true },
        S(1),
    );
    n.run_until(S(5));
    let evs = events(&mut n);
    let text = response_text(&evs[0]).expect("a response");
    assert!(matches!(evs[0], ClientEvent::Response { call: c, .. } if c == call));
    assert!(text.len() >= 300_000);
    let server_events = n.log.iter().filter(|p| p.side == Side::Server).count();
    assert!(
        server_events > 10,
        "a transfer of many frames, got {server_events} events"
    );
    assert!(
        n.log.iter().all(|p| p.json.len() <= 48_000),
        "every published event within the budget"
    );
}

#[test]
fn an_oversized_response_without_a_progress_token_fails_cleanly() {
    let mut n = net(|_| {});
    initialized(&mut n);
    n.client.call_tool(
        "large_result",
        json!({ "bytes": 300_000 }),
        CallOptions::default(),
        S(1),
    );
    n.run_until(S(5));
    let evs = events(&mut n);
    assert!(
        matches!(&evs[..], [ClientEvent::Response { response: Err(e), .. }] if e.code == codes::INTERNAL_ERROR),
        "{evs:?}"
    );
    assert!(n.log.iter().all(|p| p.json.len() <= 48_000));
}

fn oversized_request(stateless: bool) -> (Loopback, Vec<ClientEvent>) {
    let mut n = net(|c| c.stateless = stateless);
    if !stateless {
        initialized(&mut n);
    }
    let text = "\"\\".repeat(60_000);
    n.client.call_tool(
        "echo",
        json!({ "text": text }),
        CallOptions { progress: true },
        S(1),
    );
    n.run_until(S(10));
    let evs = events(&mut n);
    assert_eq!(
        response_text(&evs[0]).as_deref(),
        Some(text.as_str()),
        "{:?}",
        evs.iter()
            .map(|e| format!("{e:?}").chars().take(200).collect::<String>())
            .collect::<Vec<_>>()
    );
    (n, evs)
}

/// Every CEP-22 or CEP-41 frame published, in order, with who published it and when.
fn frame_log(n: &Loopback) -> Vec<(Side, Duration, String)> {
    n.log
        .iter()
        .filter_map(|p| {
            let content: Value =
                serde_json::from_str(Event::from_json(&p.json).unwrap().content.as_str()).ok()?;
            let frame = content.pointer("/params/cvm/frameType")?.as_str()?;
            Some((p.side, p.at, frame.to_owned()))
        })
        .collect()
}

/// Every CEP-22 or CEP-41 frame published, in order, with who published it.
fn frames(n: &Loopback) -> Vec<(Side, String)> {
    frame_log(n)
        .into_iter()
        .map(|(side, _, f)| (side, f))
        .collect()
}

fn frame_types(n: &Loopback, side: Side) -> Vec<String> {
    frames(n)
        .into_iter()
        .filter(|(s, _)| *s == side)
        .map(|(_, f)| f)
        .collect()
}

/// [`frames`] as `Side:frame` text, for order assertions.
fn frame_order(n: &Loopback) -> Vec<String> {
    frames(n)
        .into_iter()
        .map(|(side, f)| format!("{side:?}:{f}"))
        .collect()
}

#[test]
fn an_oversized_request_goes_direct_when_the_server_is_known_to_support_it() {
    let (n, _) = oversized_request(false);
    // The client's own accepts belong to the oversized echo coming back.
    let client_frames: Vec<String> = frame_types(&n, Side::Client)
        .into_iter()
        .filter(|f| f != "accept")
        .collect();
    assert_eq!(client_frames.first().map(String::as_str), Some("start"));
    assert_eq!(client_frames.last().map(String::as_str), Some("end"));
    // No accept was needed; the server still sends one (it cannot know the client did not wait).
    assert!(client_frames.iter().filter(|f| *f == "chunk").count() >= 3);
}

#[test]
fn an_oversized_request_in_stateless_mode_waits_for_accept() {
    let (n, _) = oversized_request(true);
    assert!(frame_types(&n, Side::Server).contains(&"accept".to_owned()));
    // The first request carried the client's capability tags (stateless advertisement).
    let first = Event::from_json(&n.log[0].json).unwrap();
    assert!(first
        .tags
        .iter()
        .any(|t| t.as_slice() == ["support_open_stream"]));
}

#[test]
fn stateless_calls_work_without_initialize() {
    let mut n = net(|c| c.stateless = true);
    n.client.call_tool(
        "echo",
        json!({ "text": "hi" }),
        CallOptions::default(),
        S(0),
    );
    n.run_until(S(1));
    let evs = events(&mut n);
    assert_eq!(response_text(&evs[0]).as_deref(), Some("hi"));
    assert!(
        n.client.server_capabilities().oversized_transfer,
        "learned from the first response's tags"
    );
}

#[test]
fn aborting_a_stream_mid_way_ends_it_and_the_call_gets_an_error() {
    let mut n = net(|_| {});
    initialized(&mut n);
    let (call, _) = n.client.call_tool_stream(
        "stream",
        json!({ "chunks": 100, "chunk_bytes": 10, "interval_ms": 100 }),
        S(1),
    );
    n.run_until(S(2));
    let mut read = 0;
    while n.client.read_stream(call).is_some() {
        read += 1;
    }
    assert!(read > 3 && read < 100);
    n.client.abort_stream(call, "user cancelled", S(2));
    n.run_until(S(20));
    let evs = events(&mut n);
    assert!(
        evs.iter().any(|e| matches!(
            e,
            ClientEvent::StreamEnded {
                outcome: Err(StreamFailure::AbortedLocally { .. }),
                ..
            }
        )),
        "{evs:?}"
    );
    assert!(evs.iter().any(|e| matches!(e, ClientEvent::Response { response: Err(er), .. } if er.message.contains("stream aborted"))), "{evs:?}");
    let chunks_sent = frame_types(&n, Side::Server)
        .iter()
        .filter(|f| *f == "chunk")
        .count();
    assert!(chunks_sent < 100, "the server stopped writing");
}

#[test]
fn the_fail_tool_returns_a_json_rpc_error() {
    let mut n = net(|_| {});
    initialized(&mut n);
    n.client.call_tool(
        "fail",
        json!({ "reason": "boom" }),
        CallOptions::default(),
        S(1),
    );
    n.run_until(S(2));
    let evs = events(&mut n);
    assert!(
        matches!(&evs[..], [ClientEvent::Response { response: Err(e), .. }] if e.code == codes::TOOL_FAILED && e.message == "boom")
    );
}

#[test]
fn a_slow_tool_answers_later_and_a_short_timeout_fails_first() {
    let mut n = net(|c| c.request_timeout = S(2));
    initialized(&mut n);
    let slow = n
        .client
        .call_tool("slow", json!({ "ms": 1500 }), CallOptions::default(), S(1));
    let too_slow = n
        .client
        .call_tool("slow", json!({ "ms": 5000 }), CallOptions::default(), S(1));
    n.run_until(S(10));
    let evs = events(&mut n);
    assert!(evs
        .iter()
        .any(|e| matches!(e, ClientEvent::Response { call, .. } if *call == slow)));
    assert!(evs.iter().any(|e| matches!(e, ClientEvent::Failed { call, failure: CallFailure::Timeout } if *call == too_slow)));
}

#[test]
fn stream_frames_keep_a_long_call_alive_past_the_request_timeout() {
    let mut n = net(|c| c.request_timeout = S(2));
    initialized(&mut n);
    let (call, _) = n.client.call_tool_stream(
        "stream",
        json!({ "chunks": 10, "chunk_bytes": 10, "interval_ms": 1000 }),
        S(1),
    );
    n.run_until(S(30));
    while n.client.read_stream(call).is_some() {}
    let evs = events(&mut n);
    assert!(
        evs.iter()
            .any(|e| matches!(e, ClientEvent::Response { call: c, response: Ok(_) } if *c == call)),
        "{evs:?}"
    );
}

#[test]
fn duplicate_deliveries_never_run_a_tool_twice() {
    let mut n = net(|_| {});
    n.duplicate_deliveries = true;
    initialized(&mut n);
    n.client.call_tool(
        "echo",
        json!({ "text": "once" }),
        CallOptions::default(),
        S(1),
    );
    n.run_until(S(2));
    let requests = std::iter::from_fn(|| n.server.poll_event())
        .filter(|e| matches!(e, ServerEvent::Request { method, .. } if method == "tools/call"))
        .count();
    assert_eq!(requests, 1);
    assert_eq!(events(&mut n).len(), 1, "one response event for the client");
    assert!(n.server.duplicates_dropped() > 0 && n.client.duplicates_dropped() > 0);
}

#[test]
fn a_relay_size_rejection_triggers_a_cep22_retry() {
    // The relay's limit is below the server's budget: the direct response is rejected as too
    // large, and the server retries as a transfer.
    let limits = RelayProfile {
        max_event_bytes: Some(20_000),
        ..RelayProfile::ideal()
    };
    let server = ServerConfig {
        budget: 48_000,
        ..ServerConfig::default()
    };
    let mut n = Loopback::new(
        7,
        vec![("strict".into(), limits)],
        |c| c.budget = 20_000,
        server,
    );
    initialized(&mut n);
    n.client.call_tool(
        "large_result",
        json!({ "bytes": 30_000 }),
        CallOptions { progress: true },
        S(1),
    );
    n.run_until(S(10));
    let evs = events(&mut n);
    assert!(
        response_text(&evs[0]).is_some_and(|t| t.len() == 30_000),
        "{:?}",
        evs.len()
    );
    assert!(frame_types(&n, Side::Server).contains(&"start".to_owned()));
}

#[test]
fn published_events_are_valid_nip01_and_byte_identical_across_runs() {
    let run = || {
        let mut n = net(|_| {});
        initialized(&mut n);
        n.client.call_tool(
            "large_result",
            json!({ "bytes": 120_000, "content": "random" }),
            CallOptions { progress: true },
            S(1),
        );
        n.client.call_tool_stream(
            "stream",
            json!({ "chunks": 5, "chunk_bytes": 50, "interval_ms": 10 }),
            S(1),
        );
        n.run_until(S(5));
        n.log
    };
    let a = run();
    assert_eq!(a, run());
    for p in &a {
        let event = Event::from_json(&p.json).expect("valid NIP-01 event JSON");
        event.verify().expect("valid id and signature");
        assert_eq!(event.kind.as_u16(), 25910);
        assert!(event.tags.public_keys().count() == 1, "one p tag");
    }
    // Responses and frames of a request reply to it with an e tag.
    let server_events: Vec<Event> = a
        .iter()
        .filter(|p| p.side == Side::Server)
        .map(|p| Event::from_json(&p.json).unwrap())
        .collect();
    assert!(server_events
        .iter()
        .all(|e| e.tags.event_ids().count() == 1));
}

#[test]
fn two_relays_deliver_everything_twice_and_each_peer_keeps_one_copy() {
    let relays = vec![
        ("relay-a".into(), RelayProfile::ideal()),
        ("relay-b".into(), RelayProfile::ideal()),
    ];
    let mut n = Loopback::new(7, relays, |_| {}, ServerConfig::default());
    initialized(&mut n);
    n.client.call_tool(
        "echo",
        json!({ "text": "both" }),
        CallOptions::default(),
        S(1),
    );
    n.run_until(S(2));
    let evs = events(&mut n);
    assert_eq!(evs.len(), 1);
    assert_eq!(response_text(&evs[0]).as_deref(), Some("both"));
    assert!(
        n.log.iter().any(|p| p.relay == "relay-b"),
        "published to every relay"
    );
    let tool_runs = std::iter::from_fn(|| n.server.poll_event())
        .filter(|e| matches!(e, ServerEvent::Request { method, .. } if method == "tools/call"))
        .count();
    assert_eq!(tool_runs, 1);
}

#[test]
fn a_hard_maximum_ends_calls_that_keep_refreshing_their_timeout() {
    let mut n = net(|c| {
        c.request_timeout = S(5);
        c.max_request_timeout = S(10);
    });
    initialized(&mut n);
    let (call, _) = n.client.call_tool_stream(
        "stream",
        json!({ "chunks": 100, "chunk_bytes": 10, "interval_ms": 1000 }),
        S(1),
    );
    n.run_until(S(30));
    let evs = events(&mut n);
    assert!(evs.iter().any(|e| matches!(e, ClientEvent::Failed { call: c, failure: CallFailure::HardTimeout } if *c == call)), "{evs:?}");
}

// Peer behaviours (`peer::behaviour`): each knob's effect on a minimal exchange.

use relaysim::peer::behaviour::{AcceptWait, Behaviour, Dedup, PublishWait, Role, TokenShape};

fn net_with(server: Behaviour, client: Behaviour) -> Loopback {
    net_with_stateless(server, client, false)
}

/// A loopback through one relay of `profile`: a server of `server`, and a client of `client`
/// with the rest of its configuration set by `configure`.
fn loopback(
    profile: RelayProfile,
    server: ServerConfig,
    client: Behaviour,
    configure: impl FnOnce(&mut relaysim::peer::client::ClientConfig),
) -> Loopback {
    Loopback::new(
        7,
        vec![("relay-a".into(), profile)],
        |c| {
            c.behaviour = client;
            configure(c);
        },
        server,
    )
}

fn server_of(behaviour: Behaviour) -> ServerConfig {
    ServerConfig {
        behaviour,
        ..ServerConfig::default()
    }
}

fn net_with_stateless(server: Behaviour, client: Behaviour, stateless: bool) -> Loopback {
    loopback(RelayProfile::ideal(), server_of(server), client, |c| {
        c.stateless = stateless
    })
}

/// [`net_with`], with the client's call timeout set to `timeout`.
fn net_with_timeout(server: Behaviour, client: Behaviour, timeout: Duration) -> Loopback {
    loopback(RelayProfile::ideal(), server_of(server), client, |c| {
        c.request_timeout = timeout
    })
}

fn tools_calls_seen(n: &mut Loopback) -> usize {
    std::iter::from_fn(|| n.server.poll_event())
        .filter(|e| matches!(e, ServerEvent::Request { method, .. } if method == "tools/call"))
        .count()
}

#[test]
fn a_server_that_does_not_deduplicate_runs_a_duplicated_request_twice() {
    // Every event is delivered twice; how many times does the server run the call?
    let runs = |server: Behaviour| {
        let mut n = net_with(server, Behaviour::relaysim());
        n.duplicate_deliveries = true;
        initialized(&mut n);
        n.client.call_tool(
            "echo",
            json!({ "text": "twice?" }),
            CallOptions::default(),
            S(1),
        );
        n.run_until(S(2));
        (tools_calls_seen(&mut n), n.server.duplicates_dropped())
    };
    // The TS server: no de-duplication of plain events (sdk-behaviour §6 C17).
    let ts_server = Behaviour::preset("ts-sdk", Role::Server).unwrap();
    assert_eq!(ts_server.dedup, Dedup::None);
    assert_eq!(runs(ts_server), (2, 0));
    // relaysim's server drops the copy.
    let (calls, dropped) = runs(Behaviour::relaysim());
    assert_eq!(calls, 1);
    assert!(dropped > 0);
}

#[test]
fn a_rust_sdk_client_s_first_token_is_zero_and_a_ts_client_s_is_its_message_id() {
    let first_token = |client: Behaviour| {
        let mut n = net_with(Behaviour::relaysim(), client);
        initialized(&mut n);
        let (call, token) = n.client.call_tool_stream(
            "stream",
            json!({ "chunks": 2, "chunk_bytes": 16, "interval_ms": 10 }),
            S(1),
        );
        n.run_until(S(5));
        let done = events(&mut n)
            .iter()
            .any(|e| matches!(e, ClientEvent::Response { call: c, .. } if *c == call));
        assert!(done, "the stream call completes with any token shape");
        (call, token.to_value())
    };
    let (_, rust) = first_token(Behaviour::preset("rust-sdk", Role::Client).unwrap());
    assert_eq!(rust, json!("0"));
    let (call, ts) = first_token(Behaviour::preset("ts-sdk", Role::Client).unwrap());
    assert_eq!(ts, json!(call.to_string()));
    let (call, ours) = first_token(Behaviour::relaysim());
    assert_eq!(ours, json!(format!("p{call}")));
    let long = Behaviour {
        tokens: TokenShape::Prefixed("t".repeat(80)),
        ..Behaviour::relaysim()
    };
    let (call, custom) = first_token(long);
    assert_eq!(custom, json!(format!("{}{call}", "t".repeat(80))));
}

#[test]
fn a_ts_sdk_client_sends_every_chunk_before_any_accept() {
    let upload_frames = |client: Behaviour| {
        let mut n = net_with_stateless(Behaviour::relaysim(), client, true);
        n.client.call_tool(
            "upload",
            json!({ "data": "x".repeat(150_000) }),
            CallOptions { progress: true },
            S(1),
        );
        n.run_until(S(10));
        let done = events(&mut n)
            .iter()
            .any(|e| matches!(e, ClientEvent::Response { .. }));
        assert!(done);
        // The order in which the client's and the server's frames were published.
        frame_order(&n)
    };
    let never = Behaviour {
        upload_accept: AcceptWait::Never,
        ..Behaviour::relaysim()
    };
    let ts = upload_frames(never);
    let accept = ts.iter().position(|f| f == "Server:accept").unwrap();
    let last_chunk = ts.iter().rposition(|f| f == "Client:chunk").unwrap();
    assert!(last_chunk < accept, "{ts:?}");
    // relaysim's client waits for the accept before its first chunk.
    let ours = upload_frames(Behaviour::relaysim());
    let accept = ours.iter().position(|f| f == "Server:accept").unwrap();
    let first_chunk = ours.iter().position(|f| f == "Client:chunk").unwrap();
    assert!(accept < first_chunk, "{ours:?}");
}

#[test]
fn an_sdk_server_streams_without_waiting_for_the_clients_accept() {
    // A client that does not advertise CEP-41: relaysim's writer waits for its accept, as the
    // CEP requires; the SDK servers' writers never wait (sdk-behaviour §3.5).
    let order = |server: Behaviour| {
        let mut n = loopback(
            RelayProfile::ideal(),
            server_of(server),
            Behaviour::relaysim(),
            |c| c.capabilities.open_stream = false,
        );
        initialized(&mut n);
        n.client.call_tool_stream(
            "stream",
            json!({ "chunks": 2, "chunk_bytes": 16, "interval_ms": 10 }),
            S(1),
        );
        n.run_until(S(5));
        frame_order(&n)
    };
    let ours = order(Behaviour::relaysim());
    let accept = ours.iter().position(|f| f == "Client:accept");
    let chunk = ours.iter().position(|f| f == "Server:chunk");
    assert!(
        matches!((accept, chunk), (Some(a), Some(c)) if a < c),
        "{ours:?}"
    );
    // Only this knob: the preset's publish lane would also hold the chunk back for an OK.
    let ts = order(Behaviour {
        publish_wait: PublishWait::Immediate,
        ..Behaviour::preset("ts-sdk", Role::Server).unwrap()
    });
    let chunk = ts.iter().position(|f| f == "Server:chunk").unwrap();
    let accept = ts.iter().position(|f| f == "Client:accept");
    assert!(accept.is_none_or(|a| chunk < a), "{ts:?}");
}

/// A loopback through one relay that never answers ephemeral events with OK (nostr-rs-relay
/// 0.8), so a lane waits out its whole OK timeout.
fn no_ok_net(server: ServerConfig, client: Behaviour) -> Loopback {
    loopback(RelayProfile::nostr_rs_relay(), server, client, |c| {
        c.request_timeout = S(600);
        c.max_request_timeout = S(600);
    })
}

/// When each frame of one side was published, in order.
fn frame_times(n: &Loopback, side: Side) -> Vec<(Duration, String)> {
    frame_log(n)
        .into_iter()
        .filter(|(s, _, _)| *s == side)
        .map(|(_, at, f)| (at, f))
        .collect()
}

#[test]
fn an_sdk_upload_publishes_each_frame_after_the_relays_answered_the_last_or_retries() {
    let upload = |client: Behaviour| {
        let mut n = no_ok_net(ServerConfig::default(), client);
        initialized(&mut n);
        n.client.call_tool(
            "upload",
            json!({ "data": "x".repeat(150_000) }),
            CallOptions { progress: true },
            n.now(),
        );
        n.run_until(S(300));
        let done = events(&mut n)
            .iter()
            .any(|e| matches!(e, ClientEvent::Response { .. }));
        (done, frame_times(&n, Side::Client))
    };
    // The SDKs await each publish; with no OK coming, each waits its 10 s out (sdk-behaviour
    // §2.3, §5): the frames go out 10 s apart, and the upload still completes.
    let (done, frames) = upload(Behaviour {
        upload_accept: AcceptWait::Never,
        ..Behaviour::preset("rust-sdk", Role::Client).unwrap()
    });
    assert!(done);
    assert!(frames.len() >= 4, "{frames:?}");
    for pair in frames.windows(2) {
        assert_eq!(pair[1].0 - pair[0].0, S(10), "{frames:?}");
    }
    // The TS pool publishes the same frame again: after 10 s, 10 s more, then every 500 ms; with no
    // relay ever answering the upload never gets past `start` (sdk-behaviour §5, §6 C8).
    let (done, frames) = upload(Behaviour {
        upload_accept: AcceptWait::Never,
        ..Behaviour::preset("ts-sdk", Role::Client).unwrap()
    });
    assert!(!done);
    assert!(frames.iter().all(|(_, f)| f == "start"), "{frames:?}");
    let gaps: Vec<Duration> = frames.windows(2).map(|p| p[1].0 - p[0].0).collect();
    assert_eq!(
        gaps[..3],
        [S(10), S(10), Duration::from_millis(500)],
        "{frames:?}"
    );
    // relaysim's client publishes them all at once.
    let (done, frames) = upload(Behaviour {
        upload_accept: AcceptWait::Never,
        ..Behaviour::relaysim()
    });
    assert!(done);
    assert!(
        frames.iter().all(|(at, _)| *at == frames[0].0),
        "{frames:?}"
    );
}

#[test]
fn an_sdk_writer_s_ping_does_not_wait_for_the_frame_before_it() {
    // The stream's `start` waits 10 s for an OK that never comes; a ping comes due after 1 s.
    let ping_at = |ping_bypass: bool| {
        let server = ServerConfig {
            behaviour: Behaviour {
                ping_bypass,
                ..Behaviour::preset("rust-sdk", Role::Server).unwrap()
            },
            writer: relaysim::protocol::open_stream::WriterConfig {
                idle_timeout: S(1),
                ..Default::default()
            },
            ..ServerConfig::default()
        };
        let mut n = no_ok_net(server, Behaviour::relaysim());
        initialized(&mut n);
        let start = n.now();
        n.client.call_tool_stream(
            "stream",
            json!({ "chunks": 1, "chunk_bytes": 16, "interval_ms": 10 }),
            start,
        );
        n.run_until(start + S(30));
        let frames = frame_times(&n, Side::Server);
        let start_at = frames.iter().find(|(_, f)| f == "start").unwrap().0;
        let ping = frames.iter().find(|(_, f)| f == "ping").map(|(at, _)| *at);
        (start_at, ping.expect("the writer pinged"), frames)
    };
    // Both SDK writers publish the ping outside their lock (sdk-behaviour §6 B4).
    let (start, ping, frames) = ping_at(true);
    assert!(ping - start < S(2), "{frames:?}");
    // Under the lock it waits for the start frame's OK timeout.
    let (start, ping, frames) = ping_at(false);
    assert!(ping - start >= S(10), "{frames:?}");
}

#[test]
fn ts_sdk_writer_frames_carry_no_e_tag_and_rust_sdk_ones_do() {
    let e_tagged = |server: Behaviour| {
        let mut n = net_with(server, Behaviour::relaysim());
        initialized(&mut n);
        n.client.call_tool_stream(
            "stream",
            json!({ "chunks": 2, "chunk_bytes": 16, "interval_ms": 10 }),
            S(1),
        );
        n.run_until(S(5));
        let frames: Vec<bool> = n
            .log
            .iter()
            .filter(|p| p.side == Side::Server)
            .map(|p| Event::from_json(&p.json).unwrap())
            .filter(|e| e.content.contains("open-stream"))
            .map(|e| e.tags.event_ids().next().is_some())
            .collect();
        assert!(frames.len() >= 4, "start, chunks and close: {frames:?}");
        frames
    };
    // sdk-behaviour §1: the TS writer's frames carry only `p`.
    let ts = e_tagged(Behaviour::preset("ts-sdk", Role::Server).unwrap());
    assert!(ts.iter().all(|tagged| !tagged));
    let rust = e_tagged(Behaviour::preset("rust-sdk", Role::Server).unwrap());
    assert!(rust.iter().all(|tagged| *tagged));
}

#[test]
fn a_rust_sdk_client_times_out_a_long_stream_whose_frames_carry_no_e_tag() {
    // 30 chunks a second apart, a 10 s call timeout: only frames keep the call alive.
    let outcome = |server: Behaviour, client: Behaviour| {
        let mut n = net_with_timeout(server, client, S(10));
        initialized(&mut n);
        let start = n.now();
        let (call, _) = n.client.call_tool_stream(
            "stream",
            json!({ "chunks": 30, "chunk_bytes": 16, "interval_ms": 1000 }),
            start,
        );
        n.run_until(start + S(120));
        events(&mut n).into_iter().find_map(|e| match e {
            ClientEvent::Response { call: c, .. } if c == call => Some(Ok(())),
            ClientEvent::Failed { call: c, failure } if c == call => Some(Err(failure)),
            _ => None,
        })
    };
    let ts = || Behaviour::preset("ts-sdk", Role::Server).unwrap();
    let rust = || Behaviour::preset("rust-sdk", Role::Client).unwrap();
    // sdk-behaviour §6 B5: the Rust client refreshes by `e` tag; the TS writer sends none.
    assert_eq!(outcome(ts(), rust()), Some(Err(CallFailure::Timeout)));
    // Rust-style frames keep it alive; relaysim's client counts any frame with its token.
    let rust_server = Behaviour::preset("rust-sdk", Role::Server).unwrap();
    assert_eq!(outcome(rust_server, rust()), Some(Ok(())));
    assert_eq!(outcome(ts(), Behaviour::relaysim()), Some(Ok(())));
}

#[test]
fn a_rust_sdk_client_notices_a_timeout_only_on_its_sweep_every_half_timeout() {
    // A tool that answers after 60 s, called at 1 s with a 10 s timeout (due at 11 s): is the
    // call failed by `at`?
    let failed_by = |client: Behaviour, at: Duration| {
        let mut n = net_with_timeout(Behaviour::relaysim(), client, S(10));
        n.client.call_tool(
            "slow",
            json!({ "ms": 60_000 }),
            CallOptions::default(),
            S(1),
        );
        n.run_until(at);
        events(&mut n).iter().any(|e| {
            matches!(
                e,
                ClientEvent::Failed {
                    failure: CallFailure::Timeout,
                    ..
                }
            )
        })
    };
    let rust = || Behaviour::preset("rust-sdk", Role::Client).unwrap();
    // sdk-behaviour §3.4: the Rust client sweeps every (timeout/2).clamp(1 s, 30 s), here 5 s,
    // so a deadline at 11 s is noticed at 15 s.
    assert!(!failed_by(rust(), Duration::from_millis(14_900)));
    assert!(failed_by(rust(), S(15)));
    // relaysim's (and the TS) client notices at the deadline.
    assert!(!failed_by(
        Behaviour::relaysim(),
        Duration::from_millis(10_999)
    ));
    assert!(failed_by(
        Behaviour::relaysim(),
        Duration::from_millis(11_001)
    ));
}
