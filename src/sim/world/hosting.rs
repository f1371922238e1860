//! The world's hosted peers (`sim::hosted`): adding them, starting their host, and the
//! connections their programs open and close themselves.

use super::slots::{ClientSlot, ServerSlot};
use super::{Observation, PeerId, World};
use crate::nip01::Identity;
use crate::sim::hosted::{
    relay_url, HostedPeer, HostedPeerSpec, HostedStart, ProgramHost, SharedHost,
};

impl World {
    /// Adds a server whose transport is a hosted program (`sim::hosted`); returns its index.
    /// Its program starts with the world ([`World::start_hosted`]).
    pub fn add_hosted_server(
        &mut self,
        name: &str,
        relays: &[usize],
        options: serde_json::Value,
    ) -> usize {
        let index = self.servers.len();
        let peer = self.hosted_peer(PeerId::Server(index), name, relays, "server", None, options);
        self.servers
            .push((name.to_owned(), ServerSlot::Hosted(peer), relays.to_vec()));
        self.attach(PeerId::Server(index), name, relays);
        index
    }

    /// Adds a client whose transport is a hosted program, talking to server `server`;
    /// returns its index. Its program starts once every hosted server is ready.
    pub fn add_hosted_client(
        &mut self,
        name: &str,
        relays: &[usize],
        server: usize,
        options: serde_json::Value,
    ) -> usize {
        let index = self.clients.len();
        let server_key = self.servers[server].1.public_key();
        let peer = self.hosted_peer(
            PeerId::Client(index),
            name,
            relays,
            "client",
            Some(server_key),
            options,
        );
        self.client_keys.insert(peer.public_key(), index);
        self.clients
            .push((name.to_owned(), ClientSlot::Hosted(peer), relays.to_vec()));
        self.attach(PeerId::Client(index), name, relays);
        index
    }

    fn hosted_peer(
        &mut self,
        id: PeerId,
        name: &str,
        relays: &[usize],
        role: &'static str,
        server: Option<nostr::prelude::PublicKey>,
        options: serde_json::Value,
    ) -> HostedPeer {
        let identity = Identity::derive(self.seed(), name);
        let shared = self.hosted.get_or_insert_with(SharedHost::new).clone();
        let index = shared.borrow_mut().add_peer(HostedPeerSpec {
            role,
            name: name.to_owned(),
            secret_key: identity.secret_key_hex(),
            server_pubkey: server.map(|k| k.to_hex()),
            relays: relays.iter().map(|r| relay_url(*r)).collect(),
            options,
            start: if role == "server" {
                HostedStart::AtOnce
            } else {
                HostedStart::WhenAsked
            },
        });
        self.peer_keys.insert(id, identity.public_key());
        self.hosted_peers.push(id);
        self.touched.mark(id);
        HostedPeer::new(index, identity.public_key(), shared)
    }

    /// Starts the world's hosted peers on `host` (or records why they have none: every call
    /// of a hosted client then fails with that reason). Call once every peer is added.
    pub fn start_hosted(&mut self, host: Result<Box<dyn ProgramHost>, String>) {
        let Some(shared) = self.hosted.clone() else {
            return;
        };
        let urls = (0..self.relays.len())
            .map(|r| (relay_url(r), self.relays[r].name.clone()))
            .collect();
        let epoch_ms = crate::nip01::EPOCH_SECS * 1000;
        shared.borrow_mut().start(host, self.seed(), epoch_ms, urls);
        for peer in self.hosted_peers.clone() {
            self.touched.mark(peer);
        }
    }

    /// Whether the world has hosted peers.
    pub fn has_hosted_peers(&self) -> bool {
        self.hosted.is_some()
    }

    /// Exceptions and rejections the world's programs left unhandled (their own behaviour,
    /// as the SDK throwing from an event handler).
    pub fn hosted_unhandled(&self) -> u64 {
        self.hosted.as_ref().map_or(0, |h| h.borrow().unhandled())
    }

    /// What the host of the world's programs found wrong (empty for a run that can be
    /// trusted).
    pub fn hosted_errors(&self) -> Vec<String> {
        self.hosted
            .as_ref()
            .map(|h| h.borrow().errors().to_vec())
            .unwrap_or_default()
    }

    /// Lines the world's programs logged past [`crate::sim::hosted::MAX_LINES`], not kept.
    pub fn hosted_lines_not_kept(&self) -> u64 {
        self.hosted
            .as_ref()
            .map_or(0, |h| h.borrow().lines_not_kept())
    }

    /// Shows the observer what the world's programs logged (`env.log`) since it last looked,
    /// at the virtual time each line was logged.
    pub(super) fn observe_program_lines(&mut self) {
        let Some(shared) = self.hosted.as_ref() else {
            return;
        };
        let lines = shared.borrow_mut().take_lines();
        for (at, index, text) in lines {
            let Some(&peer) = self.hosted_peers.get(index) else {
                continue;
            };
            if let Some(o) = self.observer.as_mut() {
                o.observe(at, &Observation::Logged { peer, text });
            }
        }
    }

    /// A hosted peer's handle (`None` for relaysim's own peers).
    pub(super) fn hosted_mut(&mut self, peer: PeerId) -> Option<&mut HostedPeer> {
        match peer {
            PeerId::Client(i) => self.clients[i].1.hosted(),
            PeerId::Server(i) => self.servers[i].1.hosted(),
        }
    }

    /// A hosted peer's program sees its socket to `relay` close (relaysim's own peers learn
    /// of a lost connection when they are connected again).
    pub(super) fn tell_hosted_lost(&mut self, relay: usize, peer: PeerId) {
        if !self.hosted_peers.contains(&peer) {
            return;
        }
        let name = self.relays[relay].name.clone();
        let now = self.now;
        self.peer_mut(peer);
        if let Some(hosted) = self.hosted_mut(peer) {
            hosted.lost(&name, now);
        }
    }

    /// Carries out the connections hosted programs ask for and give up: a connection opens
    /// when the relay is up and the peer is not held off by an outage, and is refused (the
    /// program's socket closes) otherwise; the program retries on its own schedule.
    pub(super) fn serve_link_requests(&mut self) -> bool {
        use crate::sim::hosted::LinkRequest;
        let mut moved = false;
        for peer in self.hosted_peers.clone() {
            while let Some(request) = self.hosted_mut(peer).and_then(|h| h.poll_link()) {
                moved = true;
                let name = match &request {
                    LinkRequest::Open(name) | LinkRequest::Close(name) => name.clone(),
                };
                let Some(relay) = self.relay_index(&name) else {
                    continue;
                };
                match request {
                    LinkRequest::Open(_) => {
                        let now = self.now;
                        let down = self.relays[relay].down_until.is_some_and(|t| t > now);
                        let held = self.held_off.get(&(relay, peer)).is_some_and(|t| *t > now);
                        let up = self.links.get(&(relay, peer)).is_some_and(|l| l.connected);
                        if down || held {
                            self.peer_mut(peer);
                            if let Some(hosted) = self.hosted_mut(peer) {
                                hosted.refused(&name, now);
                            }
                        } else {
                            if up {
                                self.disconnect(relay, peer, "replaced");
                            }
                            self.connect(relay, peer);
                        }
                    }
                    // The program closed it itself: nothing to tell it.
                    LinkRequest::Close(_) => {
                        self.close_link(relay, peer, "closed-by-peer");
                    }
                }
            }
        }
        moved
    }
}
