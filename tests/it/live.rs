//! The live relay on a real loopback socket: NIP-01 over WebSocket, NIP-11, the profile's
//! limits and reactions, malformed input.

use futures_util::{SinkExt, StreamExt};
use nostr::prelude::{Event, Filter, Kind, Tag};
use relaysim::live::{serve, ServeConfig};
use relaysim::nip01::Identity;
use relaysim::peer::event::ContextVmEvents;
use relaysim::peer::event::CONTEXTVM_KIND;
use relaysim::relay::RelayProfile;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

fn config(profile: RelayProfile) -> ServeConfig {
    ServeConfig::new(profile).listening_on("127.0.0.1:0".parse().unwrap())
}

fn event(padding: usize) -> Event {
    let alice = Identity::derive(1, "alice");
    let bob = Identity::derive(1, "bob");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    alice.sign(
        CONTEXTVM_KIND,
        now,
        vec![Tag::public_key(bob.public_key())],
        "x".repeat(padding),
    )
}

async fn next_text(
    ws: &mut (impl StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin),
) -> Option<serde_json::Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .ok()??
        {
            Ok(Message::Text(t)) => return serde_json::from_str(t.as_str()).ok(),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

/// A connection to `url` subscribed (as "s") to ContextVM events for `to`, after its EOSE.
async fn subscribed(
    url: &str,
    to: &Identity,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let (mut sub, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let filter = Filter::new()
        .kind(Kind::from(CONTEXTVM_KIND))
        .pubkey(to.public_key());
    sub.send(Message::text(
        serde_json::json!(["REQ", "s", filter]).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(
        next_text(&mut sub).await.unwrap(),
        serde_json::json!(["EOSE", "s"])
    );
    sub
}

#[tokio::test]
async fn publishes_and_delivers_over_websocket_with_oks() {
    let relay = serve(config(RelayProfile::ideal())).await.unwrap();
    let url = format!("ws://{}", relay.local_addr);
    let mut sub = subscribed(&url, &Identity::derive(1, "bob")).await;
    let (mut publisher, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let e = event(10);
    publisher
        .send(Message::text(format!("[\"EVENT\",{}]", e.as_json())))
        .await
        .unwrap();
    let ok = next_text(&mut publisher).await.unwrap();
    assert_eq!(ok[0], "OK");
    assert_eq!(ok[1], e.id.to_hex());
    assert_eq!(ok[2], true);
    let delivered = next_text(&mut sub).await.unwrap();
    assert_eq!(delivered[0], "EVENT");
    assert_eq!(delivered[2]["id"], e.id.to_hex());
    relay.shutdown().await;
}

#[tokio::test]
async fn serve_can_trace_what_crosses_it() {
    let out =
        std::env::temp_dir().join(format!("relaysim-serve-trace-{}.jsonl", std::process::id()));
    let relay = serve(ServeConfig {
        trace: Some(out.clone()),
        ..config(RelayProfile::strfry())
    })
    .await
    .unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}", relay.local_addr))
        .await
        .unwrap();
    let big = event(70_000);
    ws.send(Message::text(format!("[\"EVENT\",{}]", big.as_json())))
        .await
        .unwrap();
    next_text(&mut ws).await.unwrap();
    relay.shutdown().await;
    let trace = relaysim::trace::Trace::from_file(&out).unwrap();
    assert!(trace
        .lines
        .iter()
        .any(|l| matches!(l, relaysim::trace::Line::Published { .. })));
    assert!(trace.lines.iter().any(|l| matches!(l, relaysim::trace::Line::Verdict { accepted: false, message, .. } if message.starts_with("invalid: event too large"))));
}

#[tokio::test]
async fn the_strfry_profile_refuses_a_70_kb_event_and_malformed_input_gets_a_notice() {
    let relay = serve(config(RelayProfile::strfry())).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}", relay.local_addr))
        .await
        .unwrap();
    let big = event(70_000);
    ws.send(Message::text(format!("[\"EVENT\",{}]", big.as_json())))
        .await
        .unwrap();
    let ok = next_text(&mut ws).await.unwrap();
    assert_eq!(ok[2], false);
    assert!(
        ok[3]
            .as_str()
            .unwrap()
            .starts_with("invalid: event too large: "),
        "{ok}"
    );
    ws.send(Message::text("this is not json")).await.unwrap();
    let notice = next_text(&mut ws).await.unwrap();
    assert_eq!(notice[0], "NOTICE");
    // The connection survives both.
    let small = event(10);
    ws.send(Message::text(format!("[\"EVENT\",{}]", small.as_json())))
        .await
        .unwrap();
    assert_eq!(next_text(&mut ws).await.unwrap()[2], true);
    relay.shutdown().await;
}

#[tokio::test]
async fn nostr_rs_relay_drops_a_connection_after_its_notice() {
    let relay = serve(config(RelayProfile::nostr_rs_relay())).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}", relay.local_addr))
        .await
        .unwrap();
    let big = event(300_000);
    ws.send(Message::text(format!("[\"EVENT\",{}]", big.as_json())))
        .await
        .unwrap();
    let notice = next_text(&mut ws).await.unwrap();
    assert!(
        notice[1]
            .as_str()
            .unwrap()
            .starts_with("message too large ("),
        "{notice}"
    );
    assert!(
        next_text(&mut ws).await.is_none(),
        "then the connection closes"
    );
    relay.shutdown().await;
}

#[tokio::test]
async fn nip11_reflects_the_profile_limits() {
    let relay = serve(config(RelayProfile::strfry())).await.unwrap();
    let mut s = tokio::net::TcpStream::connect(relay.local_addr)
        .await
        .unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nAccept: application/nostr+json\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    let json = &body[body.find("\r\n\r\n").unwrap() + 4..];
    let doc: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(doc["limitation"]["max_message_length"], 131072);
    assert_eq!(doc["limitation"]["max_subscriptions"], 200);
    assert_eq!(doc["software"], "relaysim");
    relay.shutdown().await;
}

#[tokio::test]
async fn a_recording_proxy_captures_a_transfer_that_inject_replay_completes() {
    use relaysim::live::record::{record, RecordConfig};
    use relaysim::protocol::envelope::EscapedContentEnvelope;
    use relaysim::protocol::jsonrpc::{Message as Rpc, RequestId};
    use relaysim::protocol::oversized::{OversizedSender, SenderConfig};
    use relaysim::replay;
    use relaysim::trace::Trace;

    let relay = serve(config(RelayProfile::ideal())).await.unwrap();
    let out = std::env::temp_dir().join(format!("relaysim-record-{}.jsonl", std::process::id()));
    let proxy = record(RecordConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        &format!("ws://{}", relay.local_addr),
        out.clone(),
    ))
    .await
    .unwrap();
    let url = format!("ws://{}", proxy.local_addr);
    let server = Identity::derive(1, "server");
    let client = Identity::derive(1, "client");

    let (mut sub, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let filter = Filter::new()
        .kind(Kind::from(CONTEXTVM_KIND))
        .pubkey(client.public_key());
    sub.send(Message::text(
        serde_json::json!(["REQ", "s", filter]).to_string(),
    ))
    .await
    .unwrap();
    next_text(&mut sub).await.unwrap(); // EOSE

    let payload = Rpc::Response {
        id: RequestId::Number(1),
        result: serde_json::json!({ "text": "\"x\" ".repeat(3000) }),
    }
    .to_json();
    let mut sender = OversizedSender::new(
        RequestId::String("p1".into()),
        payload,
        SenderConfig {
            budget: 4000,
            ..SenderConfig::default()
        },
        &EscapedContentEnvelope { overhead: 700 },
    )
    .unwrap();
    let (mut publisher, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut frames = 0;
    while let Some(frame) = sender.poll_transmit(Duration::ZERO) {
        let e = server.contextvm_event(&client.public_key(), None, now, frame.to_json());
        publisher
            .send(Message::text(format!("[\"EVENT\",{}]", e.as_json())))
            .await
            .unwrap();
        next_text(&mut publisher).await.unwrap(); // OK
        frames += 1;
    }
    for _ in 0..frames {
        next_text(&mut sub).await.unwrap();
    }
    let lines = proxy.finish().await.unwrap();
    assert!(lines as usize > 2 * frames);

    let trace = Trace::from_file(&out).unwrap();
    let injected = replay::inject(&trace).unwrap();
    let got: Vec<_> = injected.iter().filter(|i| i.token == "p1").collect();
    assert!(
        got.iter()
            .any(|i| i.receiver == "client-0" && i.outcome == "completed"),
        "{injected:?}"
    );
    assert!(replay::schedule(&trace, "", &None)
        .unwrap_err()
        .to_string()
        .contains("--mode inject"));
    // A schedule replay needs the scenario the recorded peers ran, and refuses one whose
    // peers are not the recorded ones, or whose calls are not (these peers had a scenario's
    // names and seed, but made a call by hand).
    use relaysim::replay::live_schedule::schedule_live;
    assert!(matches!(
        schedule_live(&trace, None),
        Err(replay::ReplayError::LiveRecording)
    ));
    let scenario = || {
        relaysim::scenario::Scenario::from_toml_str(
            include_str!("../../scenarios/ideal-baseline.toml"),
            "ideal-baseline.toml",
        )
        .unwrap()
    };
    let err = |r: Result<_, replay::ReplayError>| r.map(|_| ()).unwrap_err();
    let wrong_seed = err(schedule_live(&trace, Some((scenario(), 2))));
    assert!(
        matches!(
            wrong_seed,
            replay::ReplayError::NoRecordedPeer { seed: 2, .. }
        ),
        "{wrong_seed}"
    );
    let other_calls = err(schedule_live(&trace, Some((scenario(), 1))));
    assert!(
        matches!(
            other_calls,
            replay::ReplayError::NothingMatched { seed: 1, .. }
        ),
        "{other_calls}"
    );
    relay.shutdown().await;
}

/// Sends `n` events from one connection through `profile` and returns the order (by their
/// content, the index they were sent with) in which one subscriber received them.
async fn order_through(profile: RelayProfile, n: usize) -> Vec<usize> {
    let relay = serve(config(profile)).await.unwrap();
    let url = format!("ws://{}", relay.local_addr);
    let alice = Identity::derive(1, "alice");
    let bob = Identity::derive(1, "bob");
    let mut sub = subscribed(&url, &bob).await;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (mut publisher, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let frames: Vec<String> = (0..n)
        .map(|i| {
            let e = alice.sign(
                CONTEXTVM_KIND,
                now,
                vec![Tag::public_key(bob.public_key())],
                i.to_string(),
            );
            format!("[\"EVENT\",{}]", e.as_json())
        })
        .collect();
    // Publish while reading, so neither side's buffers fill.
    let send = tokio::spawn(async move {
        for f in frames {
            publisher.send(Message::text(f)).await.unwrap();
        }
        publisher
    });
    let mut received = Vec::with_capacity(n);
    while received.len() < n {
        let Some(m) = next_text(&mut sub).await else {
            break;
        };
        if m[0] == "EVENT" {
            received.push(m[2]["content"].as_str().unwrap().parse().unwrap());
        }
    }
    drop(send.await.unwrap());
    received
}

fn jittered(ordering: relaysim::relay::impair::Ordering) -> RelayProfile {
    use relaysim::relay::impair::{Delay, Direction};
    let mut profile = RelayProfile::ideal();
    profile.impairments.relay_to_peer = Direction {
        ordering,
        delay: Delay::LogNormal {
            median: Duration::from_micros(500),
            sigma: 1.5,
        },
        ..Default::default()
    };
    profile
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jittered_connection_delivers_ten_thousand_events_in_order() {
    let n = 10_000;
    let received = order_through(jittered(relaysim::relay::impair::Ordering::Connection), n).await;
    assert_eq!(
        received.len(),
        n,
        "every event arrives while the connection is up"
    );
    let first_swap = received.windows(2).position(|w| w[1] < w[0]);
    assert_eq!(first_swap, None, "one connection delivers in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_datagram_stress_mode_does_reorder_on_one_connection() {
    // The same jitter per message, without the connection's order: the check above can fail.
    let received =
        order_through(jittered(relaysim::relay::impair::Ordering::Datagram), 2_000).await;
    assert!(received.windows(2).any(|w| w[1] < w[0]));
}
