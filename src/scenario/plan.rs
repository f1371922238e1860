//! A scenario lowered for the async drivers (turmoil and live): its relays, its peers with their
//! configurations, and its workload's calls, for one seed.

use super::Scenario;
use crate::nip01::Identity;
use crate::peer::client::ClientConfig;
use crate::peer::server::ServerConfig;
use crate::relay::RelayProfile;
use crate::sim::world::Call;
use crate::trace::ScenarioOrigin;
use std::time::Duration;

/// Everything an async driver (turmoil, live) needs to run a scenario once, built by
/// [`Scenario::plan`].
#[derive(Debug, Clone)]
pub struct Plan {
    /// The run's seed.
    pub seed: u64,
    /// Simulated time limit.
    pub duration: Duration,
    /// Relays by name.
    pub relays: Vec<(String, RelayProfile)>,
    /// Servers: name, relay indices, configuration.
    pub servers: Vec<(String, Vec<usize>, ServerConfig)>,
    /// Clients: name, relay indices, configuration (naming the server's key, derived from the
    /// seed and the server's name).
    pub clients: Vec<(String, Vec<usize>, ClientConfig)>,
    /// Each client's server: an index into `servers`.
    pub client_servers: Vec<usize>,
    /// Workload calls: when, which client, what.
    pub calls: Vec<(Duration, usize, Call)>,
    /// The scenario this plan was built from, for the relays' trace headers.
    pub origin: Option<ScenarioOrigin>,
    /// What keys the peers' identities apart from other runs of the same seed, if anything
    /// ([`Plan::with_key_nonce`]).
    pub key_nonce: Option<u64>,
}

impl Plan {
    /// The signing identity of the peer `name` in this run.
    pub fn identity(&self, name: &str) -> Identity {
        Identity::derive_in_run(self.seed, self.key_nonce, name)
    }

    /// This plan with every peer's keys derived from the seed and `nonce` too, so events a
    /// relay kept from another run of the same seed are addressed to other keys. Clients
    /// learn their servers' new keys.
    pub fn with_key_nonce(mut self, nonce: u64) -> Self {
        self.key_nonce = Some(nonce);
        let servers: Vec<String> = self.servers.iter().map(|(n, ..)| n.clone()).collect();
        for index in 0..self.clients.len() {
            let server = servers[self.client_servers[index]].clone();
            self.clients[index].2.server = self.identity(&server).public_key();
        }
        self
    }

    /// The calls of client `client`: when, and what.
    pub fn calls_of(&self, client: usize) -> Vec<(Duration, Call)> {
        self.calls
            .iter()
            .filter(|(_, c, _)| *c == client)
            .map(|(at, _, call)| (*at, call.clone()))
            .collect()
    }
}

impl Scenario {
    /// The run with `seed` as a plan for the async drivers (turmoil, live): relays, peers with
    /// their configurations, and the workload's calls.
    pub fn plan(&self, seed: u64) -> Plan {
        Plan {
            seed,
            duration: self.duration,
            relays: self.relays.clone(),
            servers: self
                .servers
                .iter()
                .map(|s| {
                    let config = ServerConfig {
                        implementation: s.implementation,
                        behaviour: s.behaviour.clone(),
                        clock: s.clock,
                        ..self.server_config.clone()
                    };
                    (s.name.clone(), s.relays.clone(), config)
                })
                .collect(),
            clients: self
                .clients
                .iter()
                .map(|c| {
                    // Identities derive from the seed and the name, as in the des world.
                    let server = &self.servers[c.server].name;
                    let key = Identity::derive(seed, server).public_key();
                    let mut config = ClientConfig::new(key);
                    self.client_config(&mut config, c.stateless, c.resumable);
                    config.implementation = c.implementation;
                    config.behaviour = c.behaviour.clone();
                    config.clock = c.clock;
                    (c.name.clone(), c.relays.clone(), config)
                })
                .collect(),
            client_servers: self.clients.iter().map(|c| c.server).collect(),
            calls: super::workloads::calls(&self.workloads, seed),
            origin: Some(ScenarioOrigin {
                name: self.name.clone(),
                hash: self.hash.clone(),
                toml: self.source.clone(),
                seed,
            }),
            key_nonce: None,
        }
    }
}
