//! MCP resumable streams at the peers: what the server publishes for a client that advertises
//! them, and its JSON-RPC answers to `stream/resume`, `stream/poll` and `stream/poll/all`,
//! driven with hand-made requests.

use nostr::prelude::{Event, Tag};
use relaysim::nip01::Identity;
use relaysim::nip01::{ClientMessage, RelayMessage};
use relaysim::peer::client::{ClientConfig, ClientEvent};
use relaysim::peer::event::CONTEXTVM_KIND;
use relaysim::peer::server::{ContextVmServer, ServerConfig};
use relaysim::peer::streams::stream_position;
use relaysim::peer::Peer;
use relaysim::protocol::resumable::messages::codes;
use relaysim::relay::RelayProfile;
use relaysim::rng::SeededStreams;
use relaysim::sim::loopback::{Loopback, Side};
use serde_json::{json, Value};
use std::time::Duration;

const S: fn(u64) -> Duration = Duration::from_secs;

fn content(e: &Event) -> Value {
    serde_json::from_str(&e.content).unwrap()
}

#[test]
fn a_resumable_client_gets_create_then_numbered_messages_then_end_and_acks() {
    let mut n = Loopback::new(
        3,
        vec![("r".into(), RelayProfile::ideal())],
        |c: &mut ClientConfig| *c = c.clone().with_resumable_streams(),
        ServerConfig::default(),
    );
    let now = n.now();
    let (call, _) = n.client.call_tool_stream(
        "stream",
        json!({ "chunks": 5, "chunk_bytes": 16, "interval_ms": 10 }),
        now,
    );
    n.run_until(S(5));
    let events: Vec<ClientEvent> = std::iter::from_fn(|| n.client.poll_event()).collect();
    assert!(
        events.iter().any(
            |e| matches!(e, ClientEvent::StreamEnded { call: c, outcome: Ok(()) } if *c == call)
        ),
        "{events:?}"
    );
    let from_server: Vec<Event> = n
        .log
        .iter()
        .filter(|p| p.side == Side::Server)
        .map(|p| Event::from_json(&p.json).unwrap())
        .collect();
    // The server's first word about the call is the stream's creation, naming the request.
    let create = from_server
        .iter()
        .map(content)
        .find(|c| c["method"] == "notifications/stream/create")
        .expect("a create notification");
    assert_eq!(create["params"]["requestId"], json!(call));
    assert!(create["params"]["resumeToken"]
        .as_str()
        .is_some_and(|t| t.len() >= 32));
    assert_eq!(
        create["params"]["resumeInterval"],
        json!({ "min": 1, "max": 300 })
    );
    // Then every message of the call on the stream, numbered from 0, the end last.
    let numbered: Vec<(u64, Value)> = from_server
        .iter()
        .filter_map(|e| stream_position(e).map(|(_, seq)| (seq, content(e))))
        .collect();
    let seqs: Vec<u64> = numbered.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (0..numbered.len() as u64).collect::<Vec<_>>());
    // start, 5 chunks, close, the result, the end.
    assert_eq!(numbered.len(), 9, "{numbered:?}");
    assert_eq!(
        numbered[7].1["id"],
        json!(call),
        "the final response is on the stream"
    );
    assert_eq!(numbered[8].1["method"], "notifications/stream/end");
    // The client, having everything, acknowledges and the server frees the stream.
    let ack = n
        .log
        .iter()
        .filter(|p| p.side == Side::Client)
        .map(|p| content(&Event::from_json(&p.json).unwrap()))
        .find(|c| c["method"] == "notifications/stream/ack")
        .expect("an ack");
    assert_eq!(ack["params"]["lastSequence"], json!(8));
}

#[test]
fn a_client_that_does_not_advertise_them_gets_no_stream() {
    let mut n = Loopback::new(
        3,
        vec![("r".into(), RelayProfile::ideal())],
        |_| {},
        ServerConfig::default(),
    );
    let now = n.now();
    n.client.call_tool_stream(
        "stream",
        json!({ "chunks": 2, "chunk_bytes": 16, "interval_ms": 10 }),
        now,
    );
    n.run_until(S(5));
    for p in &n.log {
        let e = Event::from_json(&p.json).unwrap();
        assert_eq!(stream_position(&e), None);
        assert!(
            !e.content.contains("notifications/stream/"),
            "{}",
            e.content
        );
    }
}

/// A server, and requests to it from hand-made events.
struct Bench {
    server: ContextVmServer,
    alice: Identity,
    next: u64,
}

impl Bench {
    fn new() -> Self {
        let mut server = ContextVmServer::new(
            Identity::derive(1, "server"),
            vec!["r".into()],
            ServerConfig::default(),
            SeededStreams::new(1).stream("tools"),
        );
        server.connected("r", S(0));
        let mut b = Bench {
            server,
            alice: Identity::derive(1, "alice"),
            next: 0,
        };
        b.drain();
        b
    }

    /// Everything the server publishes, as JSON-RPC values.
    fn drain(&mut self) -> Vec<(Event, Value)> {
        let mut out = Vec::new();
        while let Some((_, m)) = self.server.poll_transmit() {
            if let ClientMessage::Event(e) = m {
                let c = content(&e);
                out.push((Event::clone(&e), c));
            }
        }
        out
    }

    /// Sends `message` from `who` at `now` and returns what the server published.
    fn send(
        &mut self,
        who: &Identity,
        message: Value,
        tags: Vec<Tag>,
        now: Duration,
    ) -> Vec<(Event, Value)> {
        self.next += 1;
        let mut all = vec![Tag::public_key(self.server.public_key())];
        all.extend(tags);
        let event = who.sign(
            CONTEXTVM_KIND,
            1_700_000_000 + self.next,
            all,
            message.to_string(),
        );
        self.server.handle_relay_message(
            "r",
            RelayMessage::Event {
                sub: "s".into(),
                event: std::sync::Arc::new(event),
            },
            now,
        );
        self.drain()
    }

    /// Alice calls a slow tool on a stream; returns (stream id, token).
    fn slow_call(&mut self, ms: u64, now: Duration) -> (String, String) {
        let tags = vec![Tag::parse(["support_resumable_streams"]).unwrap()];
        let alice = self.alice.clone();
        let out = self.send(
            &alice,
            json!({ "jsonrpc": "2.0", "id": self.next + 100, "method": "tools/call",
                    "params": { "name": "slow", "arguments": { "ms": ms } } }),
            tags,
            now,
        );
        let create = out
            .iter()
            .find(|(_, c)| c["method"] == "notifications/stream/create")
            .expect("a stream for the slow call");
        let p = &create.1["params"];
        (
            p["streamId"].as_str().unwrap().into(),
            p["resumeToken"].as_str().unwrap().into(),
        )
    }

    fn request(&mut self, who: &Identity, method: &str, params: Value, now: Duration) -> Value {
        let id = format!("q{}", self.next);
        let out = self.send(
            who,
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }),
            Vec::new(),
            now,
        );
        out.into_iter()
            .map(|(_, c)| c)
            .find(|c| c["id"] == json!(id))
            .expect("an answer")
    }
}

#[test]
fn resume_replays_what_follows_last_sequence_as_new_events_before_answering() {
    let mut b = Bench::new();
    let (stream, token) = b.slow_call(1000, S(0));
    b.server.handle_timeout(S(1));
    let live: Vec<(Event, Value)> = b.drain();
    // The result (seq 0) and the end (seq 1).
    let positions: Vec<_> = live.iter().map(|(e, _)| stream_position(e)).collect();
    assert_eq!(
        positions,
        vec![Some((stream.clone(), 0)), Some((stream.clone(), 1))]
    );
    let alice = b.alice.clone();
    let out = b.send(
        &alice,
        json!({ "jsonrpc": "2.0", "id": "r1", "method": "stream/resume",
                "params": { "streamId": stream, "resumeToken": token, "lastSequence": 0 } }),
        Vec::new(),
        S(2),
    );
    assert_eq!(out.len(), 2, "{out:?}");
    let (replayed, answer) = (&out[0], &out[1]);
    // The end again, as a new event (another id) at the same position, marked as replay 1.
    assert_eq!(stream_position(&replayed.0), Some((stream.clone(), 1)));
    assert_ne!(replayed.0.id, live[1].0.id);
    assert!(replayed
        .0
        .tags
        .iter()
        .any(|t| t.as_slice().get(3).map(String::as_str) == Some("replay-1")));
    assert_eq!(replayed.1["method"], "notifications/stream/end");
    assert_eq!(answer.1["id"], "r1");
    assert_eq!(answer.1["result"]["replayed"], json!(1));
}

#[test]
fn wrong_tokens_foreign_requesters_unknown_and_abandoned_streams_get_errors() {
    let mut b = Bench::new();
    let (stream, token) = b.slow_call(10, S(0));
    let alice = b.alice.clone();
    let mallory = Identity::derive(1, "mallory");
    let code = |v: &Value| v["error"]["code"].as_i64();
    let wrong = b.request(
        &alice,
        "stream/resume",
        json!({ "streamId": stream, "resumeToken": "guess" }),
        S(1),
    );
    assert_eq!(code(&wrong), Some(codes::WRONG_TOKEN));
    let foreign = b.request(
        &mallory,
        "stream/poll",
        json!({ "streamId": stream, "resumeToken": token }),
        S(1),
    );
    assert_eq!(code(&foreign), Some(codes::UNKNOWN_STREAM));
    let unknown = b.request(&alice, "stream/poll", json!({ "streamId": "nope" }), S(1));
    assert_eq!(code(&unknown), Some(codes::UNKNOWN_STREAM));
    let malformed = b.request(&alice, "stream/resume", json!({ "lastSequence": 1 }), S(1));
    assert_eq!(code(&malformed), Some(codes::INVALID_PARAMS));
    // The call ends at 10 ms; nobody resumes for resumeInterval.max (300 s).
    b.server.handle_timeout(S(1));
    b.server.handle_timeout(S(302));
    let gone = b.request(
        &alice,
        "stream/resume",
        json!({ "streamId": stream, "resumeToken": token }),
        S(303),
    );
    assert_eq!(code(&gone), Some(codes::ABANDONED));
    // Tokens never appear in what the server answers to someone else.
    assert!(!foreign.to_string().contains(&token));
}

#[test]
fn poll_and_poll_all_report_the_requesters_streams() {
    let mut b = Bench::new();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(b.slow_call(60_000, S(0)).0);
    }
    let alice = b.alice.clone();
    let poll = b.request(&alice, "stream/poll", json!({ "streamId": ids[0] }), S(1));
    assert_eq!(poll["result"]["status"], "live");
    assert_eq!(poll["result"]["pendingMessages"], false);
    let all = b.request(&alice, "stream/poll/all", json!({}), S(1));
    let listed: Vec<&str> = all["result"]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["streamId"].as_str().unwrap())
        .collect();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(listed, expected);
    let mallory = Identity::derive(1, "mallory");
    let none = b.request(&mallory, "stream/poll/all", json!({}), S(1));
    assert_eq!(none["result"]["streams"], json!([]));
}
