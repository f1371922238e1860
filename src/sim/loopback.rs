//! A perfect in-process network: one client and one server peer connected to relays, every
//! message delivered at once (optionally twice), virtual time jumping to the next wake-up. It
//! exercises the peers' lifecycles without impairments and records every published event.

use crate::nip01::Identity;
use crate::nip01::{ClientMessage, RelayMessage};
use crate::peer::client::{ClientConfig, ContextVmClient};
use crate::peer::server::{ContextVmServer, ServerConfig};
use crate::peer::Peer;
use crate::relay::{ConnId, Relay, RelayProfile};
use crate::rng::SeededStreams;
use std::collections::BTreeMap;
use std::time::Duration;

/// Which peer published an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// The client.
    Client,
    /// The server.
    Server,
}

/// One event as it was published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// Virtual time.
    pub at: Duration,
    /// Who published it.
    pub side: Side,
    /// The relay it went to.
    pub relay: String,
    /// The event's JSON.
    pub json: String,
}

/// A client, a server and relays on a perfect network.
pub struct Loopback {
    /// The client peer.
    pub client: ContextVmClient,
    /// The server peer.
    pub server: ContextVmServer,
    relays: BTreeMap<String, Relay>,
    now: Duration,
    /// Deliver every event twice (as duplicating relays do).
    pub duplicate_deliveries: bool,
    /// Every event published, in order.
    pub log: Vec<Published>,
}

const CLIENT_CONN: ConnId = 1;
const SERVER_CONN: ConnId = 2;

impl Loopback {
    /// A network seeded with `seed`. `client_config` adjusts the client's defaults.
    pub fn new(
        seed: u64,
        relays: Vec<(String, RelayProfile)>,
        client_config: impl FnOnce(&mut ClientConfig),
        server_config: ServerConfig,
    ) -> Self {
        let streams = SeededStreams::new(seed);
        let names: Vec<String> = relays.iter().map(|(n, _)| n.clone()).collect();
        let server = ContextVmServer::new(
            Identity::derive(seed, "server"),
            names.clone(),
            server_config,
            streams.stream("server/tools"),
        );
        let mut config = ClientConfig::new(server.public_key());
        client_config(&mut config);
        let client = ContextVmClient::new(Identity::derive(seed, "client"), names.clone(), config);
        let mut net = Loopback {
            client,
            server,
            relays: relays
                .into_iter()
                .map(|(name, profile)| (name, Relay::new(profile)))
                .collect(),
            now: Duration::ZERO,
            duplicate_deliveries: false,
            log: Vec::new(),
        };
        for (name, relay) in net.relays.iter_mut() {
            relay.connect(CLIENT_CONN, "10.0.0.1");
            relay.connect(SERVER_CONN, "10.0.0.2");
            net.client.connected(name, Duration::ZERO);
            net.server.connected(name, Duration::ZERO);
        }
        // Subscriptions are in place before anyone publishes (ephemeral events reach only
        // live subscribers).
        while net.exchange() {}
        net
    }

    /// Virtual time now.
    pub fn now(&self) -> Duration {
        self.now
    }

    fn peer(&mut self, conn: ConnId) -> &mut dyn Peer {
        if conn == CLIENT_CONN {
            &mut self.client
        } else {
            &mut self.server
        }
    }

    /// Moves messages until the network is quiet, then runs timers, until nothing is due
    /// before `until`; virtual time then stands at `until`.
    pub fn run_until(&mut self, until: Duration) -> Duration {
        loop {
            if self.exchange() {
                continue;
            }
            let next = [self.client.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.client.handle_timeout(self.now);
                    self.server.handle_timeout(self.now);
                }
                _ => {
                    self.now = self.now.max(until);
                    return self.now;
                }
            }
        }
    }

    /// One round of message passing; true if anything moved.
    fn exchange(&mut self) -> bool {
        let mut moved = false;
        for (conn, side) in [(CLIENT_CONN, Side::Client), (SERVER_CONN, Side::Server)] {
            while let Some((relay, message)) = self.peer(conn).poll_transmit() {
                moved = true;
                if let ClientMessage::Event(event) = &message {
                    self.log.push(Published {
                        at: self.now,
                        side,
                        relay: relay.clone(),
                        json: event.as_json(),
                    });
                }
                if let Some(r) = self.relays.get_mut(&relay) {
                    r.handle_client_message(conn, message, self.now);
                }
            }
        }
        let names: Vec<String> = self.relays.keys().cloned().collect();
        for name in names {
            while let Some((conn, message)) =
                self.relays.get_mut(&name).and_then(Relay::poll_transmit)
            {
                moved = true;
                let copies =
                    if self.duplicate_deliveries && matches!(message, RelayMessage::Event { .. }) {
                        2
                    } else {
                        1
                    };
                let now = self.now;
                for _ in 0..copies {
                    self.peer(conn)
                        .handle_relay_message(&name, message.clone(), now);
                }
            }
        }
        moved
    }
}
