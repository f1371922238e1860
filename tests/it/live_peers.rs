//! The sans-IO peers over real WebSocket connections (the async driver) against `relaysim
//! serve` on loopback: the same lifecycles as the des driver, on real sockets, through real
//! profile checks (strfry's size limit and clock window), and across a relay restart.

use relaysim::live::driver::PeerDriver;
use relaysim::live::{serve, LiveRelay, ServeConfig};
use relaysim::nip01::Identity;
use relaysim::peer::client::{CallOptions, ClientConfig, ClientEvent, ContextVmClient};
use relaysim::peer::server::{ContextVmServer, ServerConfig};
use relaysim::relay::RelayProfile;
use relaysim::rng::SeededStreams;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

async fn relay_at(profile: RelayProfile, listen: SocketAddr) -> LiveRelay {
    serve(ServeConfig::new(profile).listening_on(listen))
        .await
        .unwrap()
}

/// A server peer driven in its own task until the test ends, with its connection count
/// published so tests wait for it instead of sleeping.
fn spawn_server(url: &str) -> (tokio::task::JoinHandle<()>, Arc<AtomicU64>) {
    let server = ContextVmServer::new(
        Identity::derive(5, "server"),
        vec![url.to_owned()],
        ServerConfig::default(),
        SeededStreams::new(5).stream("server"),
    );
    spawn_server_peer(server, url)
}

/// Drives `server` on `url` in its own task, as [`spawn_server`] does.
fn spawn_server_peer(
    server: ContextVmServer,
    url: &str,
) -> (tokio::task::JoinHandle<()>, Arc<AtomicU64>) {
    let mut driver = PeerDriver::connect(server, vec![url.to_owned()]);
    let connects = Arc::new(AtomicU64::new(0));
    let published = connects.clone();
    let task = tokio::spawn(async move {
        loop {
            driver.run_until(|_| false, Duration::from_millis(20)).await;
            published.store(driver.stats().connects, Ordering::SeqCst);
        }
    });
    (task, connects)
}

/// Waits until the server has connected `n` times (and so sent its REQ `n` times).
async fn server_connected(connects: &AtomicU64, n: u64) {
    for _ in 0..500 {
        if connects.load(Ordering::SeqCst) >= n {
            // The REQ leaves right after the connection is up; let the relay take it.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the server did not connect {n} times");
}

fn client_driver(url: &str) -> PeerDriver<ContextVmClient> {
    let client = ContextVmClient::new(
        Identity::derive(5, "client"),
        vec![url.to_owned()],
        ClientConfig::new(Identity::derive(5, "server").public_key()),
    );
    PeerDriver::connect(client, vec![url.to_owned()])
}

/// Runs until the client has an event to report, and returns it.
async fn next_event(driver: &mut PeerDriver<ContextVmClient>) -> ClientEvent {
    let mut got = None;
    driver
        .run_until(
            |c| {
                got = c.poll_event();
                got.is_some()
            },
            LIMIT,
        )
        .await;
    got.expect("the client reported an event within the limit")
}

fn response_text(e: &ClientEvent) -> Option<String> {
    match e {
        ClientEvent::Response {
            response: Ok(v), ..
        } => v["content"][0]["text"].as_str().map(str::to_owned),
        _ => None,
    }
}

async fn connected(driver: &mut PeerDriver<ContextVmClient>, connects: u64) {
    // Connection state lives in the driver, not the peer: step in short slices until it shows.
    for _ in 0..200 {
        if driver.stats().connects >= connects {
            return;
        }
        driver.run_until(|_| false, Duration::from_millis(50)).await;
    }
    panic!("not connected: {:?}", driver.stats());
}

/// A server peer in its own task and a client peer driven by the test, both on `url`.
struct Peers {
    server: tokio::task::JoinHandle<()>,
    server_connects: Arc<AtomicU64>,
    client: PeerDriver<ContextVmClient>,
}

impl Peers {
    async fn start(url: &str) -> Peers {
        let (server, server_connects) = spawn_server(url);
        let mut client = client_driver(url);
        connected(&mut client, 1).await;
        server_connected(&server_connects, 1).await;
        Peers {
            server,
            server_connects,
            client,
        }
    }

    /// Calls a tool and returns the call's final response, skipping the events before it (the
    /// client initializes on its own first).
    async fn call(
        &mut self,
        tool: &str,
        arguments: serde_json::Value,
        progress: bool,
    ) -> ClientEvent {
        let now = self.client.now();
        let call = self
            .client
            .peer_mut()
            .call_tool(tool, arguments, CallOptions { progress }, now);
        loop {
            let event = next_event(&mut self.client).await;
            if matches!(&event, ClientEvent::Response { call: c, .. } | ClientEvent::Failed { call: c, .. } if *c == call)
            {
                return event;
            }
        }
    }

    async fn stop(self) {
        self.server.abort();
        self.client.shutdown().await;
    }
}

#[tokio::test]
async fn initialize_and_echo_over_real_websockets() {
    let relay = relay_at(RelayProfile::ideal(), "127.0.0.1:0".parse().unwrap()).await;
    let mut peers = Peers::start(&format!("ws://{}", relay.local_addr)).await;
    let now = peers.client.now();
    peers.client.peer_mut().initialize(now);
    let init = next_event(&mut peers.client).await;
    assert!(
        matches!(&init, ClientEvent::Initialized { capabilities } if capabilities.oversized_transfer),
        "{init:?}"
    );
    let reply = peers
        .call("echo", json!({ "text": "über \"relay\"" }), false)
        .await;
    assert_eq!(response_text(&reply).as_deref(), Some("über \"relay\""));
    assert_eq!(peers.client.stats().drops, 0);
    peers.stop().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn an_oversized_result_crosses_a_strfry_profile_as_a_cep22_transfer() {
    // strfry's profile rejects events over its size limit and outside its clock window; the
    // driver stamps events from the wall clock and the server splits the result by CEP-22.
    let relay = relay_at(RelayProfile::strfry(), "127.0.0.1:0".parse().unwrap()).await;
    let mut peers = Peers::start(&format!("ws://{}", relay.local_addr)).await;
    let reply = peers
        .call(
            "large_result",
            json!({ "bytes": 400_000, "content": "escape-heavy" }),
            true,
        )
        .await;
    let text = response_text(&reply).unwrap_or_else(|| panic!("{reply:?}"));
    assert!(text.len() >= 400_000, "{}", text.len());
    peers.stop().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn peers_reconnect_and_resubscribe_after_the_relay_restarts() {
    let first = relay_at(RelayProfile::ideal(), "127.0.0.1:0".parse().unwrap()).await;
    let addr = first.local_addr;
    let mut peers = Peers::start(&format!("ws://{addr}")).await;

    first.shutdown().await;
    // The restarted relay has no subscriptions: only the peers' re-REQs can route the echo.
    let second = relay_at(RelayProfile::ideal(), addr).await;
    connected(&mut peers.client, 2).await;
    assert!(
        peers.client.stats().drops >= 1,
        "{:?}",
        peers.client.stats()
    );
    server_connected(&peers.server_connects, 2).await;

    let reply = peers.call("echo", json!({ "text": "again" }), false).await;
    assert_eq!(response_text(&reply).as_deref(), Some("again"), "{reply:?}");
    peers.stop().await;
    second.shutdown().await;
}

/// The scenario the interop test's peers run: the same keys, server randomness and calls as
/// in the des world, so the recording can be schedule-replayed there.
const INTEROP_SCENARIO: &str = r#"
name = "interop"
seed = 5
duration = "1m"
[[relays]]
name = "upstream"
profile = "ideal"
[[servers]]
name = "server"
relays = ["upstream"]
[[clients]]
name = "client"
relays = ["upstream"]
[[workloads]]
name = "big-result"
kind = "download"
bytes = "150KB"
content = "escape-heavy"
[[workloads]]
name = "stream"
kind = "stream"
chunks = 5
chunk_bytes = 20
interval = "10ms"
at = "1s"
"#;

/// Interop with a relay nobody here wrote: rust-nostr's `LocalRelay` on loopback, our peers
/// through `relaysim record` in front of it, and the recorded trace replayed in the simulator,
/// both ways: its deliveries into fresh receivers (inject), and the scenario's peers rerun in
/// the des world under the recorded relay's deliveries (schedule).
#[tokio::test]
async fn a_third_party_relay_recorded_through_the_proxy_replays_to_the_same_outcome() {
    use nostr_relay_builder::{LocalRelay, RelayBuilder};
    use relaysim::live::record::{record, RecordConfig};
    use relaysim::replay::{self, live_schedule};
    use relaysim::scenario::Scenario;
    use relaysim::trace::Trace;

    let scenario = Scenario::from_toml_str(INTEROP_SCENARIO, "interop").unwrap();
    let plan = scenario.plan(5);
    let upstream = LocalRelay::new(RelayBuilder::default());
    upstream.run().await.unwrap();
    let out = std::env::temp_dir().join(format!("relaysim-interop-{}.jsonl", std::process::id()));
    let proxy = record(RecordConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        &upstream.url().await.to_string(),
        out.clone(),
    ))
    .await
    .unwrap();
    let url = format!("ws://{}", proxy.local_addr);
    // The scenario's peers, built as the des world builds them.
    let (name, _, config) = &plan.servers[0];
    let server = ContextVmServer::new(
        Identity::derive(5, name),
        vec![url.clone()],
        config.clone(),
        SeededStreams::new(5).stream(&format!("server/{name}/tools")),
    );
    let (server, server_connects) = spawn_server_peer(server, &url);
    let (name, _, config) = &plan.clients[0];
    let client = ContextVmClient::new(Identity::derive(5, name), vec![url.clone()], config.clone());
    let mut client = PeerDriver::connect(client, vec![url.clone()]);
    connected(&mut client, 1).await;
    server_connected(&server_connects, 1).await;

    // A CEP-22 transfer of an oversized result, then a CEP-41 stream: the scenario's calls.
    for (_, _, call) in &plan.calls {
        let now = client.now();
        let (id, _) = call.clone().start(client.peer_mut(), now);
        loop {
            match next_event(&mut client).await {
                ClientEvent::Response { call: c, response } if c == id => {
                    let text = response.unwrap()["content"][0]["text"]
                        .as_str()
                        .map(str::len);
                    assert!(text.unwrap_or(0) > 0, "empty response to {call:?}");
                    break;
                }
                ClientEvent::StreamEnded { call: c, outcome } if c == id => {
                    assert_eq!(outcome, Ok(()));
                    break;
                }
                ClientEvent::Failed { call: c, failure } if c == id => {
                    panic!("{call:?} failed: {failure:?}")
                }
                _ => {}
            }
        }
    }
    server.abort();
    client.shutdown().await;
    proxy.finish().await.unwrap();
    upstream.shutdown();

    let trace = Trace::from_file(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let injected = replay::inject(&trace).unwrap();
    for kind in ["transfer", "stream"] {
        assert!(
            injected
                .iter()
                .any(|i| i.kind == kind && i.outcome == "completed"),
            "no completed {kind} in the replay: {injected:?}"
        );
    }
    assert!(
        injected.iter().all(|i| i.outcome == "completed"),
        "{injected:?}"
    );

    let rerun = live_schedule::schedule_live(&trace, Some((scenario, 5))).unwrap();
    assert_eq!(rerun.recorded.len(), 2, "{:?}", rerun.recorded);
    assert!(
        rerun.same_outcome(),
        "{:?} vs {:?}",
        rerun.recorded,
        rerun.replayed
    );
    // The rerun published what the recording did, so the recorded relay decided every delivery.
    assert_eq!(
        rerun.matched_publications, rerun.replayed_publications,
        "{} of {} publications matched the recording ({} recorded)",
        rerun.matched_publications, rerun.replayed_publications, rerun.recorded_publications
    );
}

#[tokio::test]
async fn a_relay_nobody_listens_on_is_reported_with_the_reason() {
    // A port that was free a moment ago: connections to it are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("ws://127.0.0.1:{port}");
    let mut driver = client_driver(&url);
    for _ in 0..100 {
        if driver.stats().failed_attempts > 0 {
            break;
        }
        driver.run_until(|_| false, Duration::from_millis(20)).await;
    }
    let stats = driver.stats();
    assert_eq!(stats.connects, 0);
    assert!(stats.failed_attempts >= 1, "{stats:?}");
    let why = stats.last_failure.unwrap();
    assert!(why.starts_with(&url), "{why}");
    driver.shutdown().await;
}
