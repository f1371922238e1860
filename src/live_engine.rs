//! The `live` engine: a scenario's own peers over real WebSockets on real sockets and the real
//! clock, against the scenario's relays served on loopback (`relaysim serve`, in process) or
//! against any relays by URL (`run --engine live --relay NAME=ws://…`). Each peer connects
//! from its own loopback address (127.1.x.y), so per-address limits and outages aimed at a
//! peer treat peers apart. The report is the one the other engines give, with the counters of
//! the relays served here (as `--engine turmoil` has them; a relay given by URL is not
//! counted); a trace is each relay's `live` trace (written by the served relay, or by a
//! recording proxy in front of a relay given by URL) with the scenario in its header, so
//! `replay --mode schedule` takes it with no more arguments. Not deterministic: it runs on the
//! wall clock, by nature.

use crate::live::driver::TokioTcpFrom;
use crate::live::peers::{self, run_client, run_server, Log, PeerRelays, SETTLE};
use crate::live::record::{record, RecordConfig, Recorder};
use crate::live::trace_writer::{Seen, TraceFeed};
use crate::live::{relay_trace_path, serve, LiveRelay, ServeConfig};
use crate::peer::client::ContextVmClient;
use crate::peer::server::ContextVmServer;
use crate::rng::SeededStreams;
use crate::scenario::Plan;
use crate::sim::world::Observation;
use crate::stats::RunReport;
use crate::trace::client_event_text;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// Why a live run could not run.
#[derive(Debug, thiserror::Error)]
pub enum LiveEngineError {
    /// `--relay` names a relay the scenario does not have.
    #[error("--relay {0}: the scenario has no relay {0:?} (its relays: {1})")]
    UnknownRelay(String, String),
    /// A relay URL is not `ws://`.
    #[error("--relay {0}={1}: only ws:// URLs are supported")]
    NotWs(String, String),
    /// A socket could not be opened.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The loopback address of the `n`-th peer (servers first, then clients): 127.1.x.y, distinct
/// for up to 62,500 peers (more than a scenario may have).
fn peer_address(n: usize) -> IpAddr {
    IpAddr::from([127, 1, (n / 250 % 250) as u8, (n % 250 + 1) as u8])
}

/// What stands for each relay of a live run, stopped when the run ends.
enum RelayHandle {
    Served(LiveRelay),
    Proxied(Recorder),
    Direct,
}

/// Runs `plan` once on real sockets. `relays` maps scenario relay names to URLs of relays to
/// use instead of serving them; with `trace`, every relay's trace is written next to it (see
/// [`relay_trace_path`]).
pub fn run(
    plan: &Plan,
    relays: &BTreeMap<String, String>,
    trace: Option<&Path>,
) -> Result<RunReport, LiveEngineError> {
    let names: Vec<&String> = plan.relays.iter().map(|(n, _)| n).collect();
    for (name, url) in relays {
        if !names.contains(&name) {
            let known = names.iter().map(|n| n.as_str()).collect::<Vec<_>>();
            return Err(LiveEngineError::UnknownRelay(
                name.clone(),
                known.join(", "),
            ));
        }
        if !url.starts_with("ws://") {
            return Err(LiveEngineError::NotWs(name.clone(), url.clone()));
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, run_on_sockets(plan, relays, trace))
}

/// A tap that writes the clients' calls and reports into the trace of every relay served or
/// recorded here, as they happen, named as the des world names them.
fn call_tap(plan: &Plan, handles: &[RelayHandle]) -> peers::Tap {
    let feeds: Vec<TraceFeed> = handles
        .iter()
        .filter_map(|h| match h {
            RelayHandle::Served(relay) => relay.trace_feed(),
            RelayHandle::Proxied(proxy) => Some(proxy.trace_feed()),
            RelayHandle::Direct => None,
        })
        .collect();
    let clients: Vec<String> = plan.clients.iter().map(|(n, ..)| n.clone()).collect();
    std::sync::Arc::new(move |observation: &Observation| {
        let client = |i: usize| clients.get(i).cloned().unwrap_or_default();
        let seen = match observation {
            Observation::Called {
                client: c,
                call,
                workload,
                tool,
                ..
            } => Seen::Called {
                client: client(*c),
                call: *call,
                workload: *workload,
                tool: (*tool).to_owned(),
            },
            Observation::Client { client: c, event } => {
                let (call, event) = client_event_text(event);
                Seen::ClientReport {
                    client: client(*c),
                    call,
                    event,
                }
            }
            _ => return,
        };
        let now = tokio::time::Instant::now();
        for feed in &feeds {
            feed.offer(now, seen.clone());
        }
    })
}

/// The counter of events made before a live run started that reached its peers.
pub const STALE_EVENTS: &str = "stale_events";

async fn run_on_sockets(
    plan: &Plan,
    given: &BTreeMap<String, String>,
    trace: Option<&Path>,
) -> Result<RunReport, LiveEngineError> {
    let peer_names: Vec<&String> = plan
        .servers
        .iter()
        .map(|(n, ..)| n)
        .chain(plan.clients.iter().map(|(n, ..)| n))
        .collect();
    let address: BTreeMap<&String, IpAddr> = peer_names
        .iter()
        .enumerate()
        .map(|(i, n)| (*n, peer_address(i)))
        .collect();
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut handles = Vec::new();
    let mut urls = Vec::new();
    for (index, (name, profile)) in plan.relays.iter().enumerate() {
        let trace = trace.map(|t| relay_trace_path(t, name, plan.relays.len()));
        let (handle, url) = match (given.get(name), trace) {
            (Some(url), None) => (RelayHandle::Direct, url.clone()),
            (Some(url), Some(out)) => {
                let proxy = record(RecordConfig {
                    labels: address.iter().map(|(n, a)| (*a, (*n).clone())).collect(),
                    relay: name.clone(),
                    origin: plan.origin.clone(),
                    ..RecordConfig::new(loopback, url, out)
                })
                .await?;
                let url = format!("ws://{}", proxy.local_addr);
                (RelayHandle::Proxied(proxy), url)
            }
            (None, trace) => {
                let config = ServeConfig {
                    seed: plan.seed.wrapping_mul(1_000_003).wrapping_add(index as u64),
                    trace,
                    origin: plan.origin.clone(),
                    outages_from: SETTLE,
                    labels: address.iter().map(|(n, a)| (*a, (*n).clone())).collect(),
                    ..ServeConfig::new(profile.clone())
                        .named(name)
                        .listening_on(loopback)
                };
                let relay = serve(config).await?;
                let url = format!("ws://{}", relay.local_addr);
                (RelayHandle::Served(relay), url)
            }
        };
        handles.push(handle);
        urls.push(url);
    }
    let relay_urls =
        |relays: &[usize]| -> PeerRelays { relays.iter().map(|&r| (r, urls[r].clone())).collect() };
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let log: Log = Default::default();
    // The furthest behind a peer's clock runs: its own events are stamped that much earlier.
    let behind = plan
        .servers
        .iter()
        .map(|(_, _, c)| c.clock.skew_secs)
        .chain(plan.clients.iter().map(|(_, _, c)| c.clock.skew_secs))
        .min()
        .map_or(0, |skew| skew.min(0).unsigned_abs());
    let stale: peers::Stale = (Default::default(), behind);
    let tap = trace.map(|_| call_tap(plan, &handles));
    let client_keys = peers::client_keys(plan);
    let streams = SeededStreams::new(plan.seed);
    let mut servers = Vec::new();
    for (index, (name, relays, config)) in plan.servers.iter().enumerate() {
        let relays = relay_urls(relays);
        let server = ContextVmServer::new(
            plan.identity(name),
            relays.iter().map(|(_, url)| url.clone()).collect(),
            config.clone(),
            streams.stream(&format!("server/{name}/tools")),
        );
        let connector = TokioTcpFrom(address[name]);
        servers.push(tokio::task::spawn_local(run_server(
            (index, server),
            relays,
            epoch,
            connector,
            client_keys.clone(),
            (log.clone(), stale.clone()),
        )));
    }
    let mut clients = Vec::new();
    for (index, (name, relays, config)) in plan.clients.iter().enumerate() {
        let relays = relay_urls(relays);
        let urls = relays.iter().map(|(_, url)| url.clone()).collect();
        let client = ContextVmClient::new(plan.identity(name), urls, config.clone());
        let calls = plan.calls_of(index);
        clients.push(tokio::task::spawn_local(run_client(
            index,
            client,
            relays,
            calls,
            plan.duration,
            (log.clone(), stale.clone(), tap.clone()),
            (epoch, TokioTcpFrom(address[name])),
        )));
    }
    for client in clients {
        let _ = client.await;
    }
    for server in servers {
        server.abort();
    }
    let mut served = Vec::new();
    for handle in handles {
        match handle {
            RelayHandle::Served(relay) => {
                served.extend(relay.shutdown().await.relays);
            }
            RelayHandle::Proxied(proxy) => {
                proxy.finish().await?;
            }
            RelayHandle::Direct => {}
        }
    }
    let mut report = peers::report(&log, plan);
    // Only the relays served here are counted: a relay given by URL is a black box.
    for relay in served {
        relay.add_to_run_counters(&mut report.counters);
    }
    // Events older than the run: a relay that stores events fed it an earlier run's (the
    // same seed and key nonce give the same keys) or another party's.
    let stale = stale.0.load(std::sync::atomic::Ordering::Relaxed);
    if stale > 0 {
        report.counters.insert(STALE_EVENTS.into(), stale);
    }
    Ok(report)
}
