//! The `turmoil` driver: a scenario's relays as `relaysim serve` on turmoil hosts, its peers
//! driven by [`PeerDriver`] over turmoil's simulated TCP with real WebSocket framing. It runs
//! the async transport code the live mode uses, deterministically: a seeded scheduler, turmoil's
//! virtual clock and a fixed epoch.
//!
//! Peers report what the des world reports about calls ([`Observation::Called`],
//! [`Observation::ChunkWritten`], [`Observation::ChunkRead`], [`Observation::Client`]), so the
//! same [`Collector`] turns them into the same tables. Each relay's counters (the relay model's
//! and its links', as `relaysim serve` reports them when it stops) are added to the run's
//! counters under the des names where the meaning is the same
//! ([`crate::live::report::LiveRelayCounters::add_to_run_counters`]).
//!
//! Relays apply their whole profile as `relaysim serve` does: impairments both ways, intake,
//! outages (counted from the end of the settling second) and per-peer addresses (each peer is
//! a turmoil host, named by its address). What it does not model (the des driver does): slow
//! consumers (clients read streams as chunks arrive). Its traces
//! are relay-side `live` traces (what crossed each relay) whose headers carry the scenario, so
//! they replay in both modes (see [`crate::replay::live_schedule`]).

use crate::live::driver::TurmoilTcp;
use crate::live::peers::{self, run_client, run_server, Log, PeerRelays, SETTLE};
pub use crate::live::relay_trace_path;
use crate::live::{serve_on, ServeConfig};
use crate::nip01::EPOCH_SECS;
use crate::peer::client::ContextVmClient;
use crate::peer::server::ContextVmServer;
use crate::rng::SeededStreams;
use crate::scenario::{Plan, Scenario};
use crate::stats::RunReport;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

/// The port every simulated relay listens on.
const RELAY_PORT: u16 = 7777;

/// Why a turmoil run could not run.
#[derive(Debug, thiserror::Error)]
pub enum TurmoilError {
    /// turmoil stopped the simulation (a host failed or the time limit passed with work left).
    #[error("turmoil: {0}")]
    Simulation(String),
    /// A relay or peer name cannot be a turmoil host name.
    #[error("{0:?} cannot name a turmoil host: use letters, digits and '-' only")]
    HostName(String),
}

/// Relays and peers become hosts `relay-NAME` and `peer-NAME`, so names never collide; a name
/// must be a DNS label to be one.
fn check_host_name(name: &str) -> Result<(), TurmoilError> {
    let label = !name.is_empty()
        && name.len() <= 56
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if label {
        Ok(())
    } else {
        Err(TurmoilError::HostName(name.to_owned()))
    }
}

fn url(relay: &str) -> String {
    format!("ws://relay-{relay}:{RELAY_PORT}")
}

fn urls(plan: &Plan, relays: &[usize]) -> Vec<String> {
    relays.iter().map(|&r| url(&plan.relays[r].0)).collect()
}

/// Runs `plan` in a turmoil simulation and returns the same kind of report the des driver gives.
/// With `trace`, every relay also writes what crossed it as a `live` trace (see
/// [`relay_trace_path`]); one seed gives byte-identical traces.
pub fn run(plan: &Plan, trace: Option<&Path>) -> Result<RunReport, TurmoilError> {
    let names = plan.relays.iter().map(|(n, _)| n);
    let names = names
        .chain(plan.servers.iter().map(|(n, ..)| n))
        .chain(plan.clients.iter().map(|(n, ..)| n));
    for name in names {
        check_host_name(name)?;
    }
    let mut sim = turmoil::Builder::new()
        // Slack after the scenario's limit so clients can record unfinished calls.
        .simulation_duration(SETTLE + plan.duration + Duration::from_secs(60))
        .rng_seed(plan.seed)
        .build();
    let streams = SeededStreams::new(plan.seed);
    // Relays run as turmoil clients (futures the simulation waits for) so that, once every
    // client peer is done, they shut down cleanly and their traces are complete.
    let clients_done = Rc::new(std::cell::Cell::new(0usize));
    // Each relay's counters, when it stops.
    let relay_reports: Rc<RefCell<Vec<crate::live::report::LiveRelayCounters>>> = Rc::default();
    let client_count = plan.clients.len();
    let peer_names: Vec<String> = plan
        .servers
        .iter()
        .map(|(n, ..)| n.clone())
        .chain(plan.clients.iter().map(|(n, ..)| n.clone()))
        .collect();
    for (index, (name, profile)) in plan.relays.iter().enumerate() {
        let mut config = ServeConfig {
            seed: plan.seed.wrapping_mul(1_000_003).wrapping_add(index as u64),
            epoch_secs: Some(EPOCH_SECS),
            trace: trace.map(|t| relay_trace_path(t, name, plan.relays.len())),
            origin: plan.origin.clone(),
            outages_from: SETTLE,
            ..ServeConfig::new(profile.clone()).named(name)
        };
        let done = clients_done.clone();
        let peer_names = peer_names.clone();
        let reports = relay_reports.clone();
        sim.client(format!("relay-{name}").as_str(), async move {
            // Every host exists once the simulation runs: name each peer's address, so
            // outages aimed at a peer and the trace use the scenario's names.
            config.labels = peer_names
                .iter()
                .map(|n| (turmoil::lookup(format!("peer-{n}").as_str()), n.clone()))
                .collect();
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", RELAY_PORT)).await?;
            let relay = serve_on(
                vec![(
                    listener,
                    std::net::SocketAddr::from(([0, 0, 0, 0], RELAY_PORT)),
                )],
                config,
            )?;
            while done.get() < client_count {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let report = relay.shutdown().await;
            reports.borrow_mut().extend(report.relays);
            Ok(())
        });
    }
    let log: Log = Default::default();
    let client_keys = peers::client_keys(plan);
    for (index, (name, relays, config)) in plan.servers.iter().enumerate() {
        let identity = plan.identity(name);
        let relays: PeerRelays = relays.iter().copied().zip(urls(plan, relays)).collect();
        let config = config.clone();
        let rng = streams.stream(&format!("server/{name}/tools"));
        let (host_log, host_keys) = (log.clone(), client_keys.clone());
        sim.host(format!("peer-{name}").as_str(), move || {
            let server = ContextVmServer::new(
                identity.clone(),
                relays.iter().map(|(_, url)| url.clone()).collect(),
                config.clone(),
                rng.clone(),
            );
            let relays = relays.clone();
            let log = host_log.clone();
            let client_keys = host_keys.clone();
            async move {
                // A simulated network starts empty: no relay holds an earlier run's events.
                let stale = (Default::default(), 0);
                run_server(
                    (index, server),
                    relays,
                    EPOCH_SECS,
                    TurmoilTcp,
                    client_keys,
                    (log, stale),
                )
                .await;
                Ok(())
            }
        });
    }
    for (index, (name, relays, config)) in plan.clients.iter().enumerate() {
        let client = ContextVmClient::new(plan.identity(name), urls(plan, relays), config.clone());
        let calls = plan.calls_of(index);
        let relays: PeerRelays = relays.iter().copied().zip(urls(plan, relays)).collect();
        let log = log.clone();
        let duration = plan.duration;
        let done = clients_done.clone();
        sim.client(format!("peer-{name}").as_str(), async move {
            run_client(
                index,
                client,
                relays,
                calls,
                duration,
                (log, (Default::default(), 0), None),
                (EPOCH_SECS, TurmoilTcp),
            )
            .await;
            done.set(done.get() + 1);
            Ok(())
        });
    }
    sim.run()
        .map_err(|e| TurmoilError::Simulation(e.to_string()))?;
    let mut report = peers::report(&log, plan);
    for relay in relay_reports.take() {
        relay.add_to_run_counters(&mut report.counters);
    }
    Ok(report)
}

/// Runs `scenario` once with `seed` in the turmoil driver, writing each relay's trace next to
/// `trace` when given.
pub fn run_scenario(
    scenario: &Scenario,
    seed: u64,
    trace: Option<&Path>,
) -> Result<RunReport, TurmoilError> {
    run(&scenario.plan(seed), trace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::RelayProfile;
    use std::path::PathBuf;

    #[test]
    fn names_that_cannot_be_hosts_are_refused_before_running() {
        let plan = Plan {
            seed: 1,
            duration: Duration::from_secs(1),
            relays: vec![("strfry main".into(), RelayProfile::ideal())],
            servers: Vec::new(),
            clients: Vec::new(),
            client_servers: Vec::new(),
            calls: Vec::new(),
            origin: None,
            key_nonce: None,
        };
        let err = run(&plan, None).unwrap_err();
        assert!(
            matches!(&err, TurmoilError::HostName(n) if n == "strfry main"),
            "{err}"
        );
        assert!(check_host_name("relay-1").is_ok());
        assert!(check_host_name("").is_err());
        assert!(check_host_name("a:b").is_err());
    }

    #[test]
    fn several_relays_trace_to_one_file_each() {
        let t = Path::new("/tmp/run.jsonl");
        assert_eq!(relay_trace_path(t, "a", 1), PathBuf::from("/tmp/run.jsonl"));
        assert_eq!(
            relay_trace_path(t, "a", 2),
            PathBuf::from("/tmp/run.a.jsonl")
        );
        assert_eq!(
            relay_trace_path(Path::new("run"), "b", 2),
            PathBuf::from("run.b")
        );
    }
}
