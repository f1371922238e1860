//! Prints one full ContextVM lifecycle as the events it publishes: `initialize`, a streamed
//! `tools/call` (CEP-41) and an oversized response (CEP-22), over a perfect in-process relay.
//!
//! `cargo run --example lifecycle`

use nostr::prelude::Event;
use relaysim::peer::client::CallOptions;
use relaysim::peer::server::ServerConfig;
use relaysim::relay::RelayProfile;
use relaysim::sim::loopback::Loopback;
use serde_json::{json, Value};
use std::time::Duration;

fn main() {
    let mut net = Loopback::new(
        1,
        vec![("relay".into(), RelayProfile::ideal())],
        |_| {},
        ServerConfig::default(),
    );
    net.client.initialize(Duration::ZERO);
    net.run_until(Duration::from_secs(1));
    let (call, _) = net.client.call_tool_stream(
        "stream",
        json!({ "chunks": 3, "chunk_bytes": 16, "interval_ms": 100 }),
        Duration::from_secs(1),
    );
    net.run_until(Duration::from_secs(2));
    while net.client.read_stream(call).is_some() {}
    net.client.call_tool(
        "large_result",
        json!({ "bytes": 100_000, "content": "escape-heavy" }),
        CallOptions { progress: true },
        Duration::from_secs(2),
    );
    net.run_until(Duration::from_secs(3));

    println!(
        "{:>8}  {:<6}  {:>5}  {:>6}  {:<34}  message",
        "time", "from", "kind", "bytes", "tags"
    );
    for p in &net.log {
        let event = Event::from_json(&p.json).expect("valid event");
        let tags: Vec<String> = event
            .tags
            .iter()
            .map(|t| match t.as_slice() {
                [name, value, ..] => format!("{name}:{}…", &value[..6]),
                [name] => name.replace("support_", "+"),
                [] => String::new(),
            })
            .collect();
        let msg: Value = serde_json::from_str(&event.content).expect("JSON-RPC");
        let summary = match (
            msg.get("method").and_then(Value::as_str),
            msg.pointer("/params/cvm/frameType"),
        ) {
            (Some("notifications/progress"), Some(frame)) => format!(
                "{} {} progress={}",
                msg.pointer("/params/cvm/type")
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
                frame.as_str().unwrap_or("?"),
                msg.pointer("/params/progress").unwrap_or(&Value::Null)
            ),
            (Some(method), _) => match msg.get("id") {
                Some(id) => format!("request {method} id={id}"),
                None => format!("notification {method}"),
            },
            (None, _) if msg.get("error").is_some() => format!("error id={}", msg["id"]),
            (None, _) => format!("response id={}", msg["id"]),
        };
        println!(
            "{:>7.3}s  {:<6}  {:>5}  {:>6}  {:<34}  {summary}",
            p.at.as_secs_f64(),
            format!("{:?}", p.side).to_lowercase(),
            event.kind.as_u16(),
            p.json.len(),
            tags.join(" "),
        );
    }
}
