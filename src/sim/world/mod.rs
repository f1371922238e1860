//! The simulated world and its discrete-event driver (`des`).
//!
//! The world is split by job, as turmoil splits World, Topology and Host: this file holds the
//! queue and stepping and the builder; [`network`] the connections, links, bandwidth, outages,
//! relay intake and publish pipelines; `dispatch` what each action does to relays and peers;
//! [`observation`] what an observer sees. Who decides a message's fate instead of the random
//! draws is a [`LinkPlanner`](crate::sim::planner::LinkPlanner).
//!
//! A world holds relays (each a [`Relay`] model plus the [`Impairments`] of its network), and
//! client and server peers, each connected to one or more relays. The driver is a priority
//! queue ordered by (virtual time, sequence number): relay and peer messages in flight,
//! reconnections, outages and workload calls are actions; peers' and relays' own wake-ups are
//! polled. The clock jumps to the next action, so idle time costs nothing.
//!
//! Every random draw comes from a stream named after what it is for
//! (`link/<relay>/<peer>/<direction>`, `outage/<relay>/<peer>`, `intake/<relay>`,
//! `publish/<peer>/<relay>`), so adding a relay or a peer never changes another one's draws,
//! and one seed gives one outcome.
//!
//! Each peer–relay link is one connection: per direction its messages arrive in the order they
//! were written ([`Pipe`]), and they are lost only with the connection. Reordering and
//! duplicates come from the mechanisms a deployment has — several relays, a relay's concurrent
//! intake, a peer's concurrent publish pipeline, a new subscription's replay — or from a link
//! in the datagram stress mode, and the [`OrderTracker`] names the mechanism of each.
//!
//! An observer sees every action as an [`Observation`]: publishes, relay verdicts,
//! deliveries (with their mechanism when out of order or duplicate), losses, disconnects, and
//! the client's results.

mod call;
mod dispatch;
mod hosting;
mod in_flight;
pub(crate) mod network;
pub mod observation;
mod slots;
mod touched;

pub use call::Call;
pub use network::ReconnectPolicy;
pub use observation::{Observation, Observer, PeerId, Recorder, SubscriptionStep, Way};

use super::order::{OrderTracker, SentCopy, UpCopy};
use super::planner::LinkPlanner;
use super::publish::PublishPipeline;
use crate::nip01::{ClientMessage, RelayMessage};
use crate::nip01::{Identity, Signatures};
use crate::peer::client::{CallId, ClientConfig, ContextVmClient};
use crate::peer::server::{ContextVmServer, ServerConfig};
use crate::peer::Peer;
use crate::relay::impair::{LinkState, OutageKind};
use crate::relay::{ConnId, Relay, RelayProfile};
use crate::rng::SeededStreams;
use crate::sim::hosted::SharedHost;
use network::{Link, RelaySlot};
use rustc_hash::FxHashMap;
use slots::{ClientSlot, ServerSlot};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

enum Action {
    ToRelay {
        relay: usize,
        peer: PeerId,
        conn: ConnId,
        message: ClientMessage,
        processed: bool,
        /// The event's copy, with what it has been through on its way in.
        copy: UpCopy,
    },
    ToPeer {
        relay: usize,
        peer: PeerId,
        conn: ConnId,
        message: RelayMessage,
        /// A stored event the relay replayed to a new subscription.
        replay: bool,
        /// What the event had been through when this copy left the relay.
        copy: SentCopy,
    },
    /// A message a peer made earlier reaches the wire (after its publish pipeline).
    Wire {
        relay: usize,
        peer: PeerId,
        message: ClientMessage,
    },
    Reconnect {
        relay: usize,
        peer: PeerId,
    },
    DropConnection {
        relay: usize,
        peer: PeerId,
        down_for: Duration,
        random: bool,
    },
    RelayRestart {
        relay: usize,
        down_for: Duration,
        random: bool,
    },
    PartitionStart {
        relay: usize,
        peer: PeerId,
        duration: Duration,
    },
    Call {
        client: usize,
        call: Call,
    },
    Consume {
        client: usize,
        call: CallId,
    },
}

/// The world and its `des` driver.
pub struct World {
    now: Duration,
    seq: u64,
    queue: BTreeMap<(Duration, u64), Action>,
    /// Queue sequence numbers of the messages a partition holds back.
    held: BTreeSet<u64>,
    /// The running action's sequence number, when it is a held message let through.
    running_held: Option<u64>,
    streams: SeededStreams,
    relays: Vec<RelaySlot>,
    clients: Vec<(String, ClientSlot, Vec<usize>)>,
    servers: Vec<(String, ServerSlot, Vec<usize>)>,
    // The maps by peer below are only looked up (a relay's links are sorted before they are
    // walked), never iterated into output, so they hash: with 10,000 clients a B-tree lookup
    // walked several nodes, each a cache miss, for every message on every link.
    ips: FxHashMap<PeerId, String>,
    links: FxHashMap<(usize, PeerId), Link>,
    owners: FxHashMap<(usize, ConnId), PeerId>,
    impair_state: FxHashMap<(usize, PeerId, Way), LinkState>,
    outage_rng: FxHashMap<(usize, Option<PeerId>), LinkState>,
    next_conn: ConnId,
    order: OrderTracker,
    publish: FxHashMap<PeerId, PublishPipeline>,
    /// Per peer and relay: the pipeline's draws and when its last message reached the wire.
    publish_state: FxHashMap<(PeerId, usize), (LinkState, Duration)>,
    open_streams: BTreeSet<(usize, CallId)>,
    stream_chunk_bytes: BTreeMap<(usize, CallId), usize>,
    consume_every: BTreeMap<(usize, CallId), Duration>,
    client_keys: FxHashMap<nostr::prelude::PublicKey, usize>,
    peer_keys: FxHashMap<PeerId, nostr::prelude::PublicKey>,
    reconnect: ReconnectPolicy,
    /// Who decides fates instead of the draws, in order (none in a normal run).
    planners: Vec<Box<dyn LinkPlanner>>,
    link_seq: FxHashMap<(usize, PeerId, Way), u64>,
    relay_busy: BTreeMap<usize, Duration>,
    /// Per relay and peer: when a concurrent intake last finished one of the peer's messages.
    intake_done: FxHashMap<(usize, PeerId), Duration>,
    outage_seq: u64,
    observer: Option<Box<dyn Observer>>,
    actions: u64,
    /// Peers with possible output and the cached timeouts (see `touched`).
    touched: touched::Touched,
    /// Each event's JSON, made once.
    event_json: crate::nip01::event_json::EventJson,
    /// The world's signature state: its identities that defer, and the events known to be
    /// good (`nip01::signatures`), shared with its relays and its peers' identities.
    signatures: Signatures,
    /// Whether its peers defer their signatures (the default) or sign each event at once.
    deferred_signatures: bool,
    /// The host of its hosted peers, if it has any, and those peers.
    hosted: Option<Rc<RefCell<SharedHost>>>,
    hosted_peers: Vec<PeerId>,
    /// Until when a hosted peer's connection to a relay is held off (a connection drop).
    held_off: FxHashMap<(usize, PeerId), Duration>,
    /// The next id of a hosted client's call.
    hosted_calls: CallId,
    /// When the run ends, once known (`run_to_end`): a message that would arrive later is not
    /// kept, since nothing after the end runs.
    ends_at: Option<Duration>,
    /// Whether a message was not kept because it would arrive after the end.
    beyond_end: bool,
}
impl World {
    /// An empty world whose randomness derives from `seed`.
    pub fn new(seed: u64) -> Self {
        World {
            now: Duration::ZERO,
            seq: 0,
            queue: BTreeMap::new(),
            held: BTreeSet::new(),
            running_held: None,
            streams: SeededStreams::new(seed),
            relays: Vec::new(),
            clients: Vec::new(),
            servers: Vec::new(),
            ips: FxHashMap::default(),
            links: FxHashMap::default(),
            owners: FxHashMap::default(),
            impair_state: FxHashMap::default(),
            outage_rng: FxHashMap::default(),
            next_conn: 1,
            order: OrderTracker::default(),
            publish: FxHashMap::default(),
            publish_state: FxHashMap::default(),
            open_streams: BTreeSet::new(),
            stream_chunk_bytes: BTreeMap::new(),
            consume_every: BTreeMap::new(),
            client_keys: FxHashMap::default(),
            peer_keys: FxHashMap::default(),
            reconnect: ReconnectPolicy::default(),
            planners: Vec::new(),
            link_seq: FxHashMap::default(),
            relay_busy: BTreeMap::new(),
            intake_done: FxHashMap::default(),
            outage_seq: 0,
            observer: None,
            actions: 0,
            touched: touched::Touched::default(),
            event_json: crate::nip01::event_json::EventJson::default(),
            signatures: Signatures::default(),
            deferred_signatures: true,
            hosted: None,
            hosted_peers: Vec::new(),
            held_off: FxHashMap::default(),
            hosted_calls: 1,
            ends_at: None,
            beyond_end: false,
        }
    }

    /// The run seed.
    pub fn seed(&self) -> u64 {
        self.streams.seed()
    }

    /// Virtual time now.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Actions executed so far (messages delivered, timers, outages, calls).
    pub fn actions(&self) -> u64 {
        self.actions
    }

    /// Sets the observer that sees every action.
    pub fn set_observer(&mut self, observer: Box<dyn Observer>) {
        self.observer = Some(observer);
    }

    /// Takes the observer back.
    pub fn take_observer(&mut self) -> Option<Box<dyn Observer>> {
        self.observer.take()
    }

    /// Sets how peers reconnect.
    pub fn set_reconnect(&mut self, policy: ReconnectPolicy) {
        self.reconnect = policy;
    }

    fn observe(&mut self, observation: Observation) {
        if let Some(o) = self.observer.as_mut() {
            o.observe(self.now, &observation);
        }
    }

    fn schedule(&mut self, at: Duration, action: Action) {
        self.seq += 1;
        if self.ends_at.is_some_and(|end| at > end) && action.is_message() {
            // Nothing after the end runs, so the run is the same without it; a writer that
            // outruns a slow link (a storm of resumable-stream replays over a mobile uplink)
            // would otherwise hold every message it wrote, to be delivered hours after the end.
            self.beyond_end = true;
            return;
        }
        self.queue.insert((at, self.seq), action);
    }

    /// Holds a message in flight until `until`, when a partition lets it through. Held
    /// messages are let through in the order they were first held (arrival order), and one
    /// held again because a second partition began while it waited keeps its place: otherwise
    /// a message that arrived during the second partition would be let through first, and one
    /// connection would deliver out of order.
    fn hold(&mut self, until: Duration, action: Action) {
        let seq = self.running_held.take().unwrap_or_else(|| {
            self.seq += 1;
            self.seq
        });
        self.held.insert(seq);
        self.queue.insert((until, seq), action);
    }

    /// Adds a relay; returns its index. Its scheduled and random outages are planned now.
    pub fn add_relay(&mut self, name: &str, profile: RelayProfile) -> usize {
        let index = self.relays.len();
        let impairments = profile.impairments.clone();
        for outage in &impairments.outages.scheduled {
            let action = match &outage.kind {
                OutageKind::RelayRestart => Action::RelayRestart {
                    relay: index,
                    down_for: outage.duration,
                    random: false,
                },
                // Peer-specific outages are planned when the peer connects.
                OutageKind::ConnectionDrop { .. } | OutageKind::Partition { .. } => continue,
            };
            self.schedule(outage.at, action);
        }
        if let Some(mean) = impairments.outages.relay_restart_every {
            let mut rng = LinkState::new(self.streams.stream(&format!("outage/{name}/restart")));
            let at = rng.exponential(mean);
            let down_for = rng.uniform(impairments.outages.relay_down_for);
            self.outage_rng.insert((index, None), rng);
            self.schedule(
                at,
                Action::RelayRestart {
                    relay: index,
                    down_for,
                    random: true,
                },
            );
        }
        let intake_rng = LinkState::new(self.streams.stream(&format!("intake/{name}")));
        let mut relay = Relay::new(profile);
        relay.set_signatures(self.signatures.clone());
        self.relays.push(RelaySlot {
            name: name.to_owned(),
            relay,
            impairments,
            down_until: None,
            intake_rng,
        });
        index
    }

    /// The index of the relay named `name`.
    pub fn relay_index(&self, name: &str) -> Option<usize> {
        self.relays.iter().position(|r| r.name == name)
    }

    /// A relay's name.
    pub fn relay_name(&self, relay: usize) -> &str {
        &self.relays[relay].name
    }

    /// A relay's model.
    pub fn relay(&self, relay: usize) -> &Relay {
        &self.relays[relay].relay
    }

    fn relay_names(&self, relays: &[usize]) -> Vec<String> {
        relays
            .iter()
            .map(|r| self.relays[*r].name.clone())
            .collect()
    }

    /// Whether the world's peers sign each event at once (`real`) instead of deferring the
    /// signature until something reads it (`deferred`, the default): the same events, traces
    /// and verdicts either way, since a deferred signature is made, byte for byte the same,
    /// wherever one is read (`nip01::signatures`). Call before adding peers.
    pub fn set_deferred_signatures(&mut self, deferred: bool) {
        self.deferred_signatures = deferred;
    }

    /// The identity of the peer named `name`, signing as the world says.
    fn identity(&self, name: &str) -> Identity {
        let identity = Identity::derive(self.seed(), name);
        if self.deferred_signatures {
            identity.deferring_signatures(&self.signatures)
        } else {
            identity.vouching_to(&self.signatures)
        }
    }

    /// The world's signature state, for whatever writes its events out whole (a trace): it
    /// makes the real signature of a deferred one ([`Signatures::real_signature_of`]).
    pub fn signatures(&self) -> &Signatures {
        &self.signatures
    }

    /// Adds a server peer named `name` on `relays`; returns its index.
    pub fn add_server(&mut self, name: &str, relays: &[usize], config: ServerConfig) -> usize {
        let identity = self.identity(name);
        let rng = self.streams.stream(&format!("server/{name}/tools"));
        let server = ContextVmServer::new(identity, self.relay_names(relays), config, rng);
        let index = self.servers.len();
        self.peer_keys
            .insert(PeerId::Server(index), server.public_key());
        self.servers.push((
            name.to_owned(),
            ServerSlot::Own(Box::new(server)),
            relays.to_vec(),
        ));
        self.touched.mark(PeerId::Server(index));
        self.attach(PeerId::Server(index), name, relays);
        index
    }

    /// Adds a client peer named `name` on `relays`, talking to server `server`.
    pub fn add_client(
        &mut self,
        name: &str,
        relays: &[usize],
        server: usize,
        configure: impl FnOnce(&mut ClientConfig),
    ) -> usize {
        let identity = self.identity(name);
        let mut config = ClientConfig::new(self.servers[server].1.public_key());
        configure(&mut config);
        let client = ContextVmClient::new(identity, self.relay_names(relays), config);
        let index = self.clients.len();
        self.client_keys.insert(client.public_key(), index);
        self.peer_keys
            .insert(PeerId::Client(index), client.public_key());
        self.clients.push((
            name.to_owned(),
            ClientSlot::Own(Box::new(client)),
            relays.to_vec(),
        ));
        self.touched.mark(PeerId::Client(index));
        self.attach(PeerId::Client(index), name, relays);
        index
    }

    /// Sets how `peer`'s messages reach the wire (signing time, concurrent tasks).
    pub fn set_publish(&mut self, peer: PeerId, pipeline: PublishPipeline) {
        self.publish.insert(peer, pipeline);
    }

    /// Makes peers share an IP address (for per-IP rate limits).
    pub fn set_ip(&mut self, peer: PeerId, ip: &str) {
        self.ips.insert(peer, ip.to_owned());
    }

    /// Adds a planner that decides fates instead of the random draws (schedule replays,
    /// shrinking, recorded fates; see [`crate::sim::planner`]). Planners are asked in the order
    /// they were added. Call before running.
    pub fn add_planner(&mut self, planner: Box<dyn LinkPlanner>) {
        self.planners.push(planner);
    }

    /// Every peer with its name: clients, then servers.
    pub fn peers(&self) -> Vec<(PeerId, String)> {
        let clients = self
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| (PeerId::Client(i), c.0.clone()));
        let servers = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| (PeerId::Server(i), s.0.clone()));
        clients.chain(servers).collect()
    }

    /// The names of the relays, by index.
    pub fn relay_names_all(&self) -> Vec<String> {
        self.relays.iter().map(|r| r.name.clone()).collect()
    }

    /// A peer's name.
    pub fn peer_name(&self, peer: PeerId) -> &str {
        match peer {
            PeerId::Client(i) => &self.clients[i].0,
            PeerId::Server(i) => &self.servers[i].0,
        }
    }

    /// A peer, to hand it something: marked, so its output and timeout are looked at.
    /// Handing a hosted peer something steps the host, which fires every hosted peer's due
    /// timers: they are all marked.
    fn peer_mut(&mut self, peer: PeerId) -> &mut dyn Peer {
        self.touched.mark(peer);
        if self.hosted_peers.contains(&peer) {
            for other in self.hosted_peers.clone() {
                self.touched.mark(other);
            }
        }
        self.peer_unmarked(peer)
    }

    /// A peer, only to poll a queue (which adds nothing to its other queues).
    fn peer_unmarked(&mut self, peer: PeerId) -> &mut dyn Peer {
        self.touched.polled(peer);
        match peer {
            PeerId::Client(i) => self.clients[i].1.peer(),
            PeerId::Server(i) => self.servers[i].1.peer(),
        }
    }

    /// The n-th client (marked: whatever is done to it is looked at).
    ///
    /// # Panics
    /// When it is a hosted program's.
    pub fn client(&mut self, index: usize) -> &mut ContextVmClient {
        self.touched.mark(PeerId::Client(index));
        match &mut self.clients[index].1 {
            ClientSlot::Own(c) => c,
            ClientSlot::Hosted(_) => panic!("client {index} is a hosted program"),
        }
    }

    /// The n-th server (marked: whatever is done to it is looked at).
    ///
    /// # Panics
    /// When it is a hosted program's.
    pub fn server(&mut self, index: usize) -> &mut ContextVmServer {
        self.touched.mark(PeerId::Server(index));
        match &mut self.servers[index].1 {
            ServerSlot::Own(s) => s,
            ServerSlot::Hosted(_) => panic!("server {index} is a hosted program"),
        }
    }

    /// Asks the touched peers for their timeouts again.
    fn refresh_timers(&mut self) {
        let (clients, servers) = (&self.clients, &self.servers);
        self.touched.refresh(|peer| match peer {
            PeerId::Client(i) => clients[i].1.peer_ref().poll_timeout(),
            PeerId::Server(i) => servers[i].1.peer_ref().poll_timeout(),
        });
    }

    /// A peer's timeout, asked now.
    fn timeout_of(&self, peer: PeerId) -> Option<Duration> {
        match peer {
            PeerId::Client(i) => self.clients[i].1.peer_ref().poll_timeout(),
            PeerId::Server(i) => self.servers[i].1.peer_ref().poll_timeout(),
        }
    }

    /// Schedules a workload call by client `client` at `at`.
    pub fn schedule_call(&mut self, at: Duration, client: usize, call: Call) {
        self.schedule(at, Action::Call { client, call });
    }

    /// Runs until nothing is left to do or virtual time would pass `until`; time then stands
    /// at the last action run (or `until` if something is still pending).
    pub fn run_until(&mut self, until: Duration) {
        assert!(
            self.ends_at.is_none_or(|end| until <= end),
            "the world ended at {:?}: it cannot run to {until:?}",
            self.ends_at
        );
        loop {
            self.flush();
            self.refresh_timers();
            let Some(next) = self.next_wakeup() else {
                return;
            };
            if next > until {
                self.now = self.now.max(until);
                return;
            }
            self.now = self.now.max(next);
            self.step();
        }
    }

    /// Runs the whole run, which ends at `end`: as [`World::run_until`], except that messages
    /// that would arrive after `end` are not scheduled (the bandwidth queue of a link a writer
    /// outruns can reach far past the end). Time then stands as `run_until(end)` leaves it.
    /// The world cannot run past `end` afterwards.
    pub fn run_to_end(&mut self, end: Duration) {
        self.ends_at = Some(end);
        self.run_until(end);
        if self.beyond_end {
            // `run_until` would have found the dropped messages pending.
            self.now = self.now.max(end);
        }
    }

    /// Whether anything is left to happen.
    pub fn is_idle(&self) -> bool {
        self.next_wakeup().is_none()
    }

    fn next_wakeup(&self) -> Option<Duration> {
        let queued = self.queue.keys().next().map(|(t, _)| *t);
        let peers = self.touched.earliest(|peer| self.timeout_of(peer));
        let relays = self.relays.iter().filter_map(|r| r.relay.poll_timeout());
        queued.into_iter().chain(peers).chain(relays).min()
    }

    /// Runs everything due at `self.now`.
    fn step(&mut self) {
        let now = self.now;
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, seq), action) = entry.remove_entry();
            self.running_held = self.held.remove(&seq).then_some(seq);
            self.actions += 1;
            self.run(action);
            self.running_held = None;
            self.flush();
        }
        for i in 0..self.relays.len() {
            if self.relays[i]
                .relay
                .poll_timeout()
                .is_some_and(|t| t <= now)
            {
                self.actions += 1;
                self.relays[i].relay.handle_timeout(now);
            }
        }
        // Clients, then servers, in index order, as a scan of all of them would; handling one
        // peer's timeout changes no other peer's.
        self.refresh_timers();
        for peer in self.touched.due(now) {
            if self.timeout_of(peer).is_some_and(|t| t <= now) {
                self.actions += 1;
                self.peer_mut(peer).handle_timeout(now);
            }
        }
    }
}
