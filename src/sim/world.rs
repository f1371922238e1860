//! The simulated world and its discrete-event driver (`des`).
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

use super::fates::{FateTracker, RecordedFates};
use super::order::{OrderTracker, Via};
use super::publish::PublishPipeline;
use crate::nip01::Identity;
use crate::nip01::{ClientMessage, RelayMessage};
use crate::peer::client::{CallId, CallOptions, ClientConfig, ClientEvent, ContextVmClient};
use crate::peer::server::{ContextVmServer, ServerConfig};
use crate::peer::tools::ToolCall;
use crate::peer::Peer;
use crate::relay::impair::{Direction, Impairments, LinkState, Ordering, OutageKind, Pipe};
use crate::relay::profile::Intake;
use crate::relay::{ConnId, Relay, RelayProfile};
use crate::rng::SeededStreams;
use nostr::prelude::EventId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Bytes a control message (REQ, OK, EOSE, NOTICE) is taken to occupy on a limited link.
const CONTROL_BYTES: usize = 100;
/// Bytes of WebSocket and NIP-01 framing around an event.
const EVENT_FRAMING: usize = 16;

/// A peer in the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerId {
    /// The n-th client.
    Client(usize),
    /// The n-th server.
    Server(usize),
}

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Way {
    /// Peer → relay.
    Up,
    /// Relay → peer.
    Down,
    /// Not a link: a concurrent relay intake's handling of a peer's message. A plan is the
    /// handling time; an empty plan means "in order" (done no earlier than the message before).
    Intake,
    /// Not a link: a peer's publish pipeline to a relay. A plan is the time from making a
    /// message to writing it; an empty plan means "in order".
    Publish,
}

/// Something the world did, for traces and statistics.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// A peer sent an event to a relay.
    Published {
        /// Who.
        peer: PeerId,
        /// Where.
        relay: usize,
        /// The event.
        event: EventId,
        /// Its serialized size.
        bytes: usize,
        /// The event's JSON (for traces that store events whole).
        json: std::rc::Rc<str>,
    },
    /// What a link did with one message: the delays of its copies (none: lost). The n-th
    /// message on a (relay, peer, way) link; schedule replays reuse these.
    LinkPlan {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// Which way.
        way: Way,
        /// The message's number on this link, from 0.
        seq: u64,
        /// Whether it carried an event (loss and duplication apply to events only).
        event: bool,
        /// Delays of the copies.
        delays: Vec<Duration>,
    },
    /// An outage began (or would have, when suppressed by a replay).
    Outage {
        /// Its number in the run, from 0.
        index: u64,
        /// The relay.
        relay: usize,
        /// The peer, for connection drops and partitions.
        peer: Option<PeerId>,
        /// `relay-restart`, `connection-drop` or `partition`.
        kind: &'static str,
        /// How long it lasts.
        duration: Duration,
        /// Whether a replay suppressed it.
        suppressed: bool,
    },
    /// A relay answered an event.
    Verdict {
        /// The relay.
        relay: usize,
        /// The publisher.
        peer: PeerId,
        /// The event.
        event: EventId,
        /// Accepted or not.
        accepted: bool,
        /// The OK message.
        message: String,
    },
    /// A relay sent a NOTICE.
    Notice {
        /// The relay.
        relay: usize,
        /// To whom.
        peer: PeerId,
        /// Its text.
        message: String,
    },
    /// An event reached a subscriber.
    Delivered {
        /// Through which relay.
        relay: usize,
        /// To whom.
        peer: PeerId,
        /// The event.
        event: EventId,
        /// Time since it was first published.
        latency: Duration,
        /// A first copy that arrived after a later event of the same author had reached this
        /// peer (through any relay).
        reordered: bool,
        /// The peer already had this event id.
        duplicate: bool,
        /// Why it is reordered or a duplicate.
        via: Option<Via>,
    },
    /// A message was lost on a link.
    Lost {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// Which way.
        way: Way,
        /// The event, if the message carried one.
        event: Option<EventId>,
    },
    /// A message was duplicated on a link (extra copies).
    Duplicated {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// Which way.
        way: Way,
        /// Extra copies.
        copies: usize,
    },
    /// A connection went down.
    Disconnected {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// Why: `relay-closed`, `outage`, `relay-restart`.
        reason: &'static str,
    },
    /// A connection came (back) up.
    Connected {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
    },
    /// A workload call was made.
    Called {
        /// The client.
        client: usize,
        /// Its call id.
        call: CallId,
        /// The workload it belongs to.
        workload: usize,
        /// The tool.
        tool: &'static str,
        /// What a correct result looks like.
        expected: Expected,
    },
    /// The server wrote a stream chunk.
    ChunkWritten {
        /// The client it is for.
        client: usize,
        /// The call.
        call: CallId,
        /// The chunk index.
        index: u64,
    },
    /// A server's resumable-stream totals changed.
    StreamStore {
        /// The server's index.
        server: usize,
        /// Its totals so far.
        stats: crate::protocol::resumable::server::StoreStats,
    },
    /// A client reported something about a call.
    Client {
        /// The client.
        client: usize,
        /// What.
        event: ClientEvent,
    },
    /// A client read a stream chunk.
    ChunkRead {
        /// The client.
        client: usize,
        /// The call.
        call: CallId,
        /// The chunk index.
        index: u64,
        /// Its data length.
        bytes: usize,
        /// Whether it is exactly what the server wrote for that index.
        intact: bool,
    },
}

/// What a correct result of a call looks like, so every delivery can be checked against what
/// was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// This exact text (echo, and the digest an upload must come back with).
    Text(String),
    /// A text that matches the digest in its own `_meta.sha256` (large_result).
    SelfDigest,
    /// `streamed N chunks`, after N intact chunks.
    Stream {
        /// Chunks written.
        chunks: u64,
    },
    /// Any successful result (slow).
    Done,
    /// A JSON-RPC error (fail).
    Error,
}

impl Expected {
    /// What `tool` should answer.
    pub fn of(tool: &ToolCall) -> Self {
        match tool {
            ToolCall::Echo { text } => Expected::Text(text.clone()),
            ToolCall::Upload { data } => Expected::Text(crate::peer::tools::digest_of(data)),
            ToolCall::LargeResult { .. } => Expected::SelfDigest,
            ToolCall::Stream { chunks, .. } => Expected::Stream { chunks: *chunks },
            ToolCall::Slow { .. } => Expected::Done,
            ToolCall::Fail { .. } => Expected::Error,
        }
    }

    /// Whether a successful result is intact.
    pub fn matches(&self, result: &serde_json::Value) -> bool {
        use crate::peer::tools::{digest_of, result_text};
        let text = result_text(result);
        match self {
            Expected::Text(t) => text == Some(t.as_str()),
            Expected::SelfDigest => {
                let claimed = result
                    .pointer("/_meta/sha256")
                    .and_then(serde_json::Value::as_str);
                text.is_some_and(|t| Some(digest_of(t).as_str()) == claimed)
            }
            Expected::Stream { chunks } => {
                text == Some(format!("streamed {chunks} chunks").as_str())
            }
            Expected::Done => text.is_some(),
            Expected::Error => false,
        }
    }
}

/// Receives every observation with its virtual time.
pub trait Observer {
    /// One observation.
    fn observe(&mut self, at: Duration, observation: &Observation);
}

/// An observer that keeps everything.
#[derive(Debug, Default)]
pub struct Recorder {
    /// What was observed, in order.
    pub log: Vec<(Duration, Observation)>,
}

impl Observer for Recorder {
    fn observe(&mut self, at: Duration, observation: &Observation) {
        self.log.push((at, observation.clone()));
    }
}

/// Lets the caller keep a handle on an observer the world owns.
impl<O: Observer> Observer for std::rc::Rc<std::cell::RefCell<O>> {
    fn observe(&mut self, at: Duration, observation: &Observation) {
        self.borrow_mut().observe(at, observation);
    }
}

/// A workload call scheduled in the world.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The tool and its arguments.
    pub tool: ToolCall,
    /// Send a progress token (needed for streams and oversized messages).
    pub progress: bool,
    /// The workload it belongs to (for attribution in reports).
    pub workload: usize,
    /// For streams: the application reads one chunk per this interval (a slow consumer).
    /// `None`: it reads each chunk as soon as it is released.
    pub consume_every: Option<Duration>,
}

impl Call {
    /// Makes this call on `client` at `now` (a stream through `call_tool_stream`, as the SDK's
    /// `callToolStream`); returns its id, and for a stream its chunk size, by which chunks read
    /// are checked. Every driver starts workload calls here.
    pub fn start(&self, client: &mut ContextVmClient, now: Duration) -> (CallId, Option<usize>) {
        let (name, arguments) = self.tool.arguments();
        if let ToolCall::Stream { chunk_bytes, .. } = self.tool {
            (
                client.call_tool_stream(name, arguments, now).0,
                Some(chunk_bytes),
            )
        } else {
            let options = CallOptions {
                progress: self.progress,
            };
            (client.call_tool(name, arguments, options, now), None)
        }
    }

    /// The observation that this call, with id `call` on client `client`, started.
    pub fn called(&self, client: usize, call: CallId) -> Observation {
        Observation::Called {
            client,
            call,
            workload: self.workload,
            tool: self.tool.arguments().0,
            expected: Expected::of(&self.tool),
        }
    }
}

enum Action {
    ToRelay {
        relay: usize,
        peer: PeerId,
        conn: ConnId,
        message: ClientMessage,
        processed: bool,
    },
    ToPeer {
        relay: usize,
        peer: PeerId,
        conn: ConnId,
        message: RelayMessage,
        /// A stored event the relay replayed to a new subscription.
        replay: bool,
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

struct RelaySlot {
    name: String,
    relay: Relay,
    impairments: Impairments,
    down_until: Option<Duration>,
    /// Draws of a concurrent intake's handling times.
    intake_rng: LinkState,
}

/// One peer's connection to one relay.
#[derive(Debug, Clone, Copy)]
struct Link {
    conn: ConnId,
    connected: bool,
    /// A partition stalls the connection until then: TCP retransmits what it holds once the
    /// path is back, so messages wait; none is lost while the connection stays up.
    stalled_until: Duration,
    /// Messages in flight peer → relay.
    up: Pipe,
    /// Messages in flight relay → peer.
    down: Pipe,
}

impl Link {
    /// The messages in flight in one direction (none for decisions that are not links).
    fn pipe(&mut self, way: Way) -> Option<&mut Pipe> {
        match way {
            Way::Up => Some(&mut self.up),
            Way::Down => Some(&mut self.down),
            Way::Intake | Way::Publish => None,
        }
    }
}

/// Decisions a replay imposes on a run instead of the random streams.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// For each (relay, peer, way) link, the delays of the copies of its n-th message
    /// (empty: lost). Messages past the end of a list use the link's own draws.
    pub plans: BTreeMap<(usize, PeerId, Way), Vec<Vec<Duration>>>,
    /// Outages (by their number in the run) that do not happen.
    pub suppress_outages: BTreeSet<u64>,
    /// Messages with no plan above travel undisturbed (one copy at the link's median delay)
    /// instead of drawing their own fate: used when shrinking.
    pub undisturbed_beyond: bool,
    /// What a recorded real relay (by index here) did with each publication, imposed on
    /// that relay's deliveries: schedule replays of live recordings.
    pub fates: Option<(usize, RecordedFates)>,
}

/// How reconnecting peers behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// Wait after the relay closed a connection before reconnecting.
    pub after_close: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            after_close: Duration::from_secs(1),
        }
    }
}

/// The world and its `des` driver.
pub struct World {
    now: Duration,
    seq: u64,
    queue: BTreeMap<(Duration, u64), Action>,
    streams: SeededStreams,
    relays: Vec<RelaySlot>,
    clients: Vec<(String, ContextVmClient, Vec<usize>)>,
    servers: Vec<(String, ContextVmServer, Vec<usize>)>,
    ips: BTreeMap<PeerId, String>,
    links: BTreeMap<(usize, PeerId), Link>,
    owners: BTreeMap<(usize, ConnId), PeerId>,
    impair_state: BTreeMap<(usize, PeerId, Way), LinkState>,
    outage_rng: BTreeMap<(usize, Option<PeerId>), LinkState>,
    next_conn: ConnId,
    published_at: BTreeMap<EventId, (Duration, u64)>,
    publish_seq: u64,
    order: OrderTracker,
    publish: BTreeMap<PeerId, PublishPipeline>,
    /// Per peer and relay: the pipeline's draws and when its last message reached the wire.
    publish_state: BTreeMap<(PeerId, usize), (LinkState, Duration)>,
    open_streams: BTreeSet<(usize, CallId)>,
    stream_chunk_bytes: BTreeMap<(usize, CallId), usize>,
    consume_every: BTreeMap<(usize, CallId), Duration>,
    client_keys: BTreeMap<nostr::prelude::PublicKey, usize>,
    peer_keys: BTreeMap<PeerId, nostr::prelude::PublicKey>,
    fates: FateTracker,
    reconnect: ReconnectPolicy,
    overrides: Overrides,
    link_seq: BTreeMap<(usize, PeerId, Way), u64>,
    relay_busy: BTreeMap<usize, Duration>,
    /// Per relay and peer: when a concurrent intake last finished one of the peer's messages.
    intake_done: BTreeMap<(usize, PeerId), Duration>,
    outage_seq: u64,
    observer: Option<Box<dyn Observer>>,
    actions: u64,
}

impl World {
    /// An empty world whose randomness derives from `seed`.
    pub fn new(seed: u64) -> Self {
        World {
            now: Duration::ZERO,
            seq: 0,
            queue: BTreeMap::new(),
            streams: SeededStreams::new(seed),
            relays: Vec::new(),
            clients: Vec::new(),
            servers: Vec::new(),
            ips: BTreeMap::new(),
            links: BTreeMap::new(),
            owners: BTreeMap::new(),
            impair_state: BTreeMap::new(),
            outage_rng: BTreeMap::new(),
            next_conn: 1,
            published_at: BTreeMap::new(),
            publish_seq: 0,
            order: OrderTracker::default(),
            publish: BTreeMap::new(),
            publish_state: BTreeMap::new(),
            open_streams: BTreeSet::new(),
            stream_chunk_bytes: BTreeMap::new(),
            consume_every: BTreeMap::new(),
            client_keys: BTreeMap::new(),
            peer_keys: BTreeMap::new(),
            fates: FateTracker::default(),
            reconnect: ReconnectPolicy::default(),
            overrides: Overrides::default(),
            link_seq: BTreeMap::new(),
            relay_busy: BTreeMap::new(),
            intake_done: BTreeMap::new(),
            outage_seq: 0,
            observer: None,
            actions: 0,
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
        self.queue.insert((at, self.seq), action);
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
        self.relays.push(RelaySlot {
            name: name.to_owned(),
            relay: Relay::new(profile),
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

    /// Adds a server peer named `name` on `relays`; returns its index.
    pub fn add_server(&mut self, name: &str, relays: &[usize], config: ServerConfig) -> usize {
        let identity = Identity::derive(self.seed(), name);
        let rng = self.streams.stream(&format!("server/{name}/tools"));
        let server = ContextVmServer::new(identity, self.relay_names(relays), config, rng);
        let index = self.servers.len();
        self.peer_keys
            .insert(PeerId::Server(index), server.public_key());
        self.servers
            .push((name.to_owned(), server, relays.to_vec()));
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
        let identity = Identity::derive(self.seed(), name);
        let mut config = ClientConfig::new(self.servers[server].1.public_key());
        configure(&mut config);
        let client = ContextVmClient::new(identity, self.relay_names(relays), config);
        let index = self.clients.len();
        self.client_keys.insert(client.public_key(), index);
        self.peer_keys
            .insert(PeerId::Client(index), client.public_key());
        self.clients
            .push((name.to_owned(), client, relays.to_vec()));
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

    /// Counts an outage and tells the observer; false when a replay suppresses it.
    fn outage_begins(
        &mut self,
        relay: usize,
        peer: Option<PeerId>,
        kind: &'static str,
        duration: Duration,
    ) -> bool {
        let index = self.outage_seq;
        self.outage_seq += 1;
        // Under a recording, the recording's network is the network: it had no outages.
        let suppressed = self.overrides.suppress_outages.contains(&index) || self.fates.active();
        self.observe(Observation::Outage {
            index,
            relay,
            peer,
            kind,
            duration,
            suppressed,
        });
        !suppressed
    }

    /// Plans the next random restart of `relay` after one that started at `now`.
    fn reschedule_restart(
        &mut self,
        relay: usize,
        now: Duration,
        down_for: Duration,
        random: bool,
    ) {
        if !random {
            return;
        }
        let mean = self.relays[relay].impairments.outages.relay_restart_every;
        let range = self.relays[relay].impairments.outages.relay_down_for;
        if let (Some(mean), Some(rng)) = (mean, self.outage_rng.get_mut(&(relay, None))) {
            let at = now + down_for + rng.exponential(mean);
            let down_for = rng.uniform(range);
            self.schedule(
                at,
                Action::RelayRestart {
                    relay,
                    down_for,
                    random: true,
                },
            );
        }
    }

    /// Replaces the links' random decisions and suppresses outages (schedule replays and
    /// shrinking). Call before running.
    pub fn set_overrides(&mut self, mut overrides: Overrides) {
        if let Some((relay, fates)) = overrides.fates.take() {
            self.fates = FateTracker::new(relay, fates);
        }
        self.overrides = overrides;
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

    fn attach(&mut self, peer: PeerId, name: &str, relays: &[usize]) {
        let ip = format!(
            "10.{}.{}.1",
            matches!(peer, PeerId::Server(_)) as u8,
            self.ips.len()
        );
        self.ips.entry(peer).or_insert(ip);
        for &relay in relays {
            let relay_name = self.relays[relay].name.clone();
            for way in [Way::Up, Way::Down] {
                let stream = self
                    .streams
                    .stream(&format!("link/{relay_name}/{name}/{way:?}"));
                self.impair_state
                    .insert((relay, peer, way), LinkState::new(stream));
            }
            let outages = self.relays[relay].impairments.outages.clone();
            for outage in &outages.scheduled {
                let who = match &outage.kind {
                    OutageKind::ConnectionDrop { peer } | OutageKind::Partition { peer } => peer,
                    OutageKind::RelayRestart => continue,
                };
                if who.as_deref().is_some_and(|w| w != name) {
                    continue;
                }
                let action = match outage.kind {
                    OutageKind::Partition { .. } => Action::PartitionStart {
                        relay,
                        peer,
                        duration: outage.duration,
                    },
                    _ => Action::DropConnection {
                        relay,
                        peer,
                        down_for: outage.duration,
                        random: false,
                    },
                };
                self.schedule(outage.at, action);
            }
            if let Some(mean) = outages.connection_drop_every {
                let mut rng =
                    LinkState::new(self.streams.stream(&format!("outage/{relay_name}/{name}")));
                let at = rng.exponential(mean);
                let down_for = rng.uniform(outages.connection_down_for);
                self.outage_rng.insert((relay, Some(peer)), rng);
                self.schedule(
                    at,
                    Action::DropConnection {
                        relay,
                        peer,
                        down_for,
                        random: true,
                    },
                );
            }
            self.connect(relay, peer);
            self.settle_subscription(relay, peer);
        }
    }

    /// Puts a newly attached peer's subscription in place at once. A run starts with every
    /// peer subscribed, as in a deployment where servers are up before clients call; later
    /// reconnections go through the impaired network like everything else.
    fn settle_subscription(&mut self, relay: usize, peer: PeerId) {
        let Some(conn) = self.links.get(&(relay, peer)).map(|l| l.conn) else {
            return;
        };
        let now = self.now;
        let name = self.relays[relay].name.clone();
        while let Some((_, message)) = self.peer_mut(peer).poll_transmit() {
            self.relays[relay]
                .relay
                .handle_client_message(conn, message, now);
        }
        while let Some((c, message)) = self.relays[relay].relay.poll_transmit() {
            if c == conn {
                self.peer_mut(peer)
                    .handle_relay_message(&name, message, now);
            }
        }
    }

    fn connect(&mut self, relay: usize, peer: PeerId) {
        if self.relays[relay].down_until.is_some_and(|t| t > self.now) {
            return; // the relay is down; it reconnects everyone when it is back
        }
        let conn = self.next_conn;
        self.next_conn += 1;
        let ip = self.ips.get(&peer).cloned().unwrap_or_default();
        self.relays[relay].relay.connect(conn, &ip);
        self.links.insert(
            (relay, peer),
            Link {
                conn,
                connected: true,
                stalled_until: Duration::ZERO,
                up: Pipe::default(),
                down: Pipe::default(),
            },
        );
        self.owners.insert((relay, conn), peer);
        let name = self.relays[relay].name.clone();
        let now = self.now;
        self.peer_mut(peer).connected(&name, now);
        self.observe(Observation::Connected { relay, peer });
    }

    fn disconnect(&mut self, relay: usize, peer: PeerId, reason: &'static str) {
        if let Some(link) = self.links.get_mut(&(relay, peer)) {
            if link.connected {
                link.connected = false;
                let conn = link.conn;
                self.relays[relay].relay.disconnect(conn);
                self.observe(Observation::Disconnected {
                    relay,
                    peer,
                    reason,
                });
            }
        }
    }

    fn peer_mut(&mut self, peer: PeerId) -> &mut dyn Peer {
        match peer {
            PeerId::Client(i) => &mut self.clients[i].1,
            PeerId::Server(i) => &mut self.servers[i].1,
        }
    }

    /// The n-th client.
    pub fn client(&mut self, index: usize) -> &mut ContextVmClient {
        &mut self.clients[index].1
    }

    /// The n-th server.
    pub fn server(&mut self, index: usize) -> &mut ContextVmServer {
        &mut self.servers[index].1
    }

    /// Schedules a workload call by client `client` at `at`.
    pub fn schedule_call(&mut self, at: Duration, client: usize, call: Call) {
        self.schedule(at, Action::Call { client, call });
    }

    /// Runs until nothing is left to do or virtual time would pass `until`; time then stands
    /// at the last action run (or `until` if something is still pending).
    pub fn run_until(&mut self, until: Duration) {
        loop {
            self.flush();
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

    /// Whether anything is left to happen.
    pub fn is_idle(&self) -> bool {
        self.next_wakeup().is_none()
    }

    fn next_wakeup(&self) -> Option<Duration> {
        let queued = self.queue.keys().next().map(|(t, _)| *t);
        let clients = self.clients.iter().filter_map(|(_, c, _)| c.poll_timeout());
        let servers = self.servers.iter().filter_map(|(_, s, _)| s.poll_timeout());
        let relays = self.relays.iter().filter_map(|r| r.relay.poll_timeout());
        queued
            .into_iter()
            .chain(clients)
            .chain(servers)
            .chain(relays)
            .min()
    }

    /// Runs everything due at `self.now`.
    fn step(&mut self) {
        let now = self.now;
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let action = entry.remove();
            self.actions += 1;
            self.run(action);
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
        for i in 0..self.clients.len() {
            if self.clients[i].1.poll_timeout().is_some_and(|t| t <= now) {
                self.actions += 1;
                self.clients[i].1.handle_timeout(now);
            }
        }
        for i in 0..self.servers.len() {
            if self.servers[i].1.poll_timeout().is_some_and(|t| t <= now) {
                self.actions += 1;
                self.servers[i].1.handle_timeout(now);
            }
        }
    }

    /// Whether a message sent on connection `conn` between `relay` and `peer` can still arrive:
    /// the link is up on that same connection.
    fn link_live(&self, relay: usize, peer: PeerId, conn: ConnId) -> bool {
        self.links
            .get(&(relay, peer))
            .is_some_and(|l| l.connected && l.conn == conn)
    }

    /// When a partition holds the link's messages back, the time it ends.
    fn stalled(&self, relay: usize, peer: PeerId) -> Option<Duration> {
        self.links
            .get(&(relay, peer))
            .map(|l| l.stalled_until)
            .filter(|t| *t > self.now)
    }

    /// Whether the relay spends time on `message` before acting on it.
    fn relay_takes_time(&self, relay: usize, message: &ClientMessage) -> bool {
        let profile = self.relays[relay].relay.profile();
        match profile.intake {
            Intake::Serial => {
                matches!(message, ClientMessage::Event(_)) && !profile.processing.is_zero()
            }
            Intake::Concurrent { .. } => true,
        }
    }

    /// When the relay is done handling `message`, which arrived now: after the events before
    /// it (serial intake), or after its own drawn handling time (concurrent intake), so it can
    /// finish before a message that arrived earlier.
    fn handled_at(&mut self, relay: usize, peer: PeerId, message: &ClientMessage) -> Duration {
        let now = self.now;
        let slot = &mut self.relays[relay];
        match slot.relay.profile().intake.clone() {
            Intake::Serial => {
                let busy = self.relay_busy.entry(relay).or_insert(Duration::ZERO);
                let done = (*busy).max(now) + slot.relay.profile().processing;
                *busy = done;
                done
            }
            Intake::Concurrent { handling, per_kib } => {
                let bytes = match message {
                    ClientMessage::Event(e) => e.as_json().len(),
                    _ => CONTROL_BYTES,
                };
                let took =
                    slot.intake_rng.sample(&handling) + per_kib.mul_f64(bytes as f64 / 1024.0);
                let last = self
                    .intake_done
                    .get(&(relay, peer))
                    .copied()
                    .unwrap_or_default();
                let event = matches!(message, ClientMessage::Event(_));
                let done = self.decide((relay, peer, Way::Intake), event, took, last);
                self.intake_done.insert((relay, peer), last.max(done));
                done
            }
        }
    }

    /// The number of the next decision of this kind on (relay, peer), from 0.
    fn next_seq(&mut self, relay: usize, peer: PeerId, way: Way) -> u64 {
        let n = self.link_seq.entry((relay, peer, way)).or_insert(0);
        *n += 1;
        *n - 1
    }

    /// Decides when the `seq`-th decision of kind `way` on (relay, peer), made now, takes
    /// effect: after the recorded plan when a replay has one, in order when a shrink removed
    /// it (or a replay runs past the recording undisturbed), else after the drawn delay. An
    /// in-order decision takes effect no earlier than the previous one (`last`). Observed as a
    /// `link` line, so replays repeat it and `shrink` can remove it.
    fn decide(
        &mut self,
        (relay, peer, way): (usize, PeerId, Way),
        event: bool,
        drawn: Duration,
        last: Duration,
    ) -> Duration {
        let now = self.now;
        let seq = self.next_seq(relay, peer, way);
        let drawn = Duration::from_micros(drawn.as_micros() as u64);
        let plan = self
            .overrides
            .plans
            .get(&(relay, peer, way))
            .and_then(|plans| plans.get(seq as usize))
            .cloned()
            .or_else(|| self.overrides.undisturbed_beyond.then(Vec::new))
            .unwrap_or_else(|| vec![drawn]);
        let at = match plan.first() {
            Some(d) => now + *d,
            None => last.max(now),
        };
        self.observe(Observation::LinkPlan {
            relay,
            peer,
            way,
            seq,
            event,
            delays: plan,
        });
        at
    }

    /// When a partition holds a message in flight, the time it is let through.
    fn held_by_partition(&self, action: &Action) -> Option<Duration> {
        match action {
            Action::ToRelay {
                relay,
                peer,
                conn,
                processed: false,
                ..
            }
            | Action::ToPeer {
                relay, peer, conn, ..
            } if self.link_live(*relay, *peer, *conn) => self.stalled(*relay, *peer),
            _ => None,
        }
    }

    fn run(&mut self, action: Action) {
        let now = self.now;
        if let Some(until) = self.held_by_partition(&action) {
            // Rescheduled in the order they arrive, so the connection's order holds.
            self.schedule(until, action);
            return;
        }
        match action {
            Action::ToRelay {
                relay,
                peer,
                conn,
                message,
                processed: false,
            } if self.relay_takes_time(relay, &message) => {
                if let ClientMessage::Event(e) = &message {
                    self.order.received(relay, e.id);
                }
                let done = self.handled_at(relay, peer, &message);
                self.schedule(
                    done,
                    Action::ToRelay {
                        relay,
                        peer,
                        conn,
                        message,
                        processed: true,
                    },
                );
            }
            Action::ToRelay {
                relay,
                peer,
                conn,
                message,
                processed,
            } => {
                let live = self.link_live(relay, peer, conn);
                if live {
                    if let ClientMessage::Event(e) = &message {
                        if !processed {
                            self.order.received(relay, e.id);
                        }
                        if relay == self.fates.relay() {
                            self.fates.published(e);
                        }
                    }
                    self.relays[relay]
                        .relay
                        .handle_client_message(conn, message, now);
                } else {
                    let event = match &message {
                        ClientMessage::Event(e) => Some(e.id),
                        _ => None,
                    };
                    self.observe(Observation::Lost {
                        relay,
                        peer,
                        way: Way::Up,
                        event,
                    });
                }
            }
            Action::ToPeer {
                relay,
                peer,
                conn,
                message,
                replay,
            } => {
                let live = self.link_live(relay, peer, conn);
                if !live {
                    let event = match &message {
                        RelayMessage::Event { event, .. } => Some(event.id),
                        _ => None,
                    };
                    self.observe(Observation::Lost {
                        relay,
                        peer,
                        way: Way::Down,
                        event,
                    });
                    return;
                }
                self.observe_incoming(relay, peer, &message, replay);
                let name = self.relays[relay].name.clone();
                self.peer_mut(peer)
                    .handle_relay_message(&name, message, now);
            }
            Action::Wire {
                relay,
                peer,
                message,
            } => self.send_up(relay, peer, message),
            Action::Reconnect { relay, peer } => {
                if !self.links.get(&(relay, peer)).is_some_and(|l| l.connected) {
                    self.connect(relay, peer);
                }
            }
            Action::DropConnection {
                relay,
                peer,
                down_for,
                random,
            } => {
                if self.outage_begins(relay, Some(peer), "connection-drop", down_for) {
                    self.disconnect(relay, peer, "outage");
                    self.schedule(now + down_for, Action::Reconnect { relay, peer });
                }
                if random {
                    let mean = self.relays[relay].impairments.outages.connection_drop_every;
                    let range = self.relays[relay].impairments.outages.connection_down_for;
                    if let (Some(mean), Some(rng)) =
                        (mean, self.outage_rng.get_mut(&(relay, Some(peer))))
                    {
                        let at = now + down_for + rng.exponential(mean);
                        let down_for = rng.uniform(range);
                        self.schedule(
                            at,
                            Action::DropConnection {
                                relay,
                                peer,
                                down_for,
                                random: true,
                            },
                        );
                    }
                }
            }
            Action::PartitionStart {
                relay,
                peer,
                duration,
            } => {
                if self.outage_begins(relay, Some(peer), "partition", duration) {
                    if let Some(link) = self.links.get_mut(&(relay, peer)) {
                        link.stalled_until = link.stalled_until.max(now + duration);
                    }
                }
            }
            Action::RelayRestart {
                relay,
                down_for,
                random,
            } if !self.outage_begins(relay, None, "relay-restart", down_for) => {
                self.reschedule_restart(relay, now, down_for, random);
            }
            Action::RelayRestart {
                relay,
                down_for,
                random,
            } => {
                self.relays[relay].relay.restart();
                self.relays[relay].down_until = Some(now + down_for);
                let peers: Vec<PeerId> = self
                    .links
                    .keys()
                    .filter(|(r, _)| *r == relay)
                    .map(|(_, p)| *p)
                    .collect();
                for peer in peers {
                    if let Some(link) = self.links.get_mut(&(relay, peer)) {
                        if link.connected {
                            link.connected = false;
                            self.observe(Observation::Disconnected {
                                relay,
                                peer,
                                reason: "relay-restart",
                            });
                        }
                    }
                    self.schedule(now + down_for, Action::Reconnect { relay, peer });
                }
                while self.relays[relay].relay.poll_dropped().is_some() {}
                self.reschedule_restart(relay, now, down_for, random);
            }
            Action::Consume { client, call } => {
                // One chunk, then the next read one interval later, for as long as the
                // stream may still hold chunks.
                let read = self.read_one(client, call);
                let ended = !self.clients[client].1.stream_alive(call);
                if read || !ended {
                    if let Some(every) = self.consume_every.get(&(client, call)).copied() {
                        self.schedule(now + every, Action::Consume { client, call });
                    }
                }
            }
            Action::Call { client, call } => {
                let (id, chunk_bytes) = call.start(&mut self.clients[client].1, now);
                if let Some(bytes) = chunk_bytes {
                    self.stream_chunk_bytes.insert((client, id), bytes);
                }
                if let Some(every) = call.consume_every {
                    self.consume_every.insert((client, id), every);
                }
                self.observe(call.called(client, id));
            }
        }
    }

    fn observe_incoming(
        &mut self,
        relay: usize,
        peer: PeerId,
        message: &RelayMessage,
        replay: bool,
    ) {
        match message {
            RelayMessage::Event { event, .. } => {
                let (published, _) = self
                    .published_at
                    .get(&event.id)
                    .copied()
                    .unwrap_or((self.now, 0));
                let impairments = &self.relays[relay].impairments;
                let datagram = impairments.relay_to_peer.ordering == Ordering::Datagram
                    || impairments.peer_to_relay.ordering == Ordering::Datagram;
                let arrival = self
                    .order
                    .delivered(peer, relay, event.id, replay, datagram);
                let latency = self.now.saturating_sub(published);
                self.observe(Observation::Delivered {
                    relay,
                    peer,
                    event: event.id,
                    latency,
                    reordered: arrival.reordered,
                    duplicate: arrival.duplicate,
                    via: arrival.via,
                });
            }
            RelayMessage::Ok {
                id,
                accepted,
                message,
            } => {
                let observation = Observation::Verdict {
                    relay,
                    peer,
                    event: *id,
                    accepted: *accepted,
                    message: message.clone(),
                };
                self.observe(observation);
            }
            RelayMessage::Notice { message } => {
                let observation = Observation::Notice {
                    relay,
                    peer,
                    message: message.clone(),
                };
                self.observe(observation);
            }
            RelayMessage::Eose { .. } | RelayMessage::Closed { .. } => {}
        }
    }

    /// Moves every message the peers and relays have to send onto the impaired links, and
    /// reports what the clients did.
    fn flush(&mut self) {
        loop {
            let mut moved = false;
            let peers: Vec<PeerId> = (0..self.clients.len())
                .map(PeerId::Client)
                .chain((0..self.servers.len()).map(PeerId::Server))
                .collect();
            for peer in peers {
                while let Some((relay_name, message)) = self.peer_mut(peer).poll_transmit() {
                    moved = true;
                    let Some(relay) = self.relay_index(&relay_name) else {
                        continue;
                    };
                    self.emit(relay, peer, message);
                }
            }
            for relay in 0..self.relays.len() {
                while let Some((conn, message, replay)) =
                    self.relays[relay].relay.poll_transmit_tagged()
                {
                    moved = true;
                    let Some(&peer) = self.owners.get(&(relay, conn)) else {
                        continue;
                    };
                    self.send_down(relay, peer, conn, message, replay);
                }
                while let Some(conn) = self.relays[relay].relay.poll_dropped() {
                    moved = true;
                    if let Some(&peer) = self.owners.get(&(relay, conn)) {
                        if let Some(link) = self.links.get_mut(&(relay, peer)) {
                            if link.conn == conn && link.connected {
                                link.connected = false;
                                self.observe(Observation::Disconnected {
                                    relay,
                                    peer,
                                    reason: "relay-closed",
                                });
                                let at = self.now + self.reconnect.after_close;
                                self.schedule(at, Action::Reconnect { relay, peer });
                            }
                        }
                    }
                }
            }
            moved |= self.drain_clients();
            moved |= self.drain_servers();
            if !moved {
                return;
            }
        }
    }

    fn drain_clients(&mut self) -> bool {
        let mut moved = false;
        for client in 0..self.clients.len() {
            while let Some(event) = self.clients[client].1.poll_event() {
                moved = true;
                match &event {
                    ClientEvent::StreamOpened { call } => {
                        match self.consume_every.get(&(client, *call)) {
                            // A slow consumer reads on its own schedule.
                            Some(every) => {
                                let at = self.now + *every;
                                self.schedule(
                                    at,
                                    Action::Consume {
                                        client,
                                        call: *call,
                                    },
                                );
                            }
                            None => {
                                self.open_streams.insert((client, *call));
                            }
                        }
                    }
                    ClientEvent::StreamEnded { call, .. } => {
                        if !self.consume_every.contains_key(&(client, *call)) {
                            self.read_stream(client, *call);
                        }
                        self.open_streams.remove(&(client, *call));
                    }
                    _ => {}
                }
                self.observe(Observation::Client { client, event });
            }
            let open: Vec<CallId> = self
                .open_streams
                .iter()
                .filter(|(c, _)| *c == client)
                .map(|(_, call)| *call)
                .collect();
            for call in open {
                moved |= self.read_stream(client, call);
            }
        }
        moved
    }

    fn drain_servers(&mut self) -> bool {
        let mut moved = false;
        for server in 0..self.servers.len() {
            while let Some(event) = self.servers[server].1.poll_event() {
                moved = true;
                if let crate::peer::server::ServerEvent::StreamStats(stats) = event {
                    self.observe(Observation::StreamStore { server, stats });
                    continue;
                }
                if let crate::peer::server::ServerEvent::ChunkWritten {
                    client,
                    token,
                    index,
                } = event
                {
                    let client = self.client_keys.get(&client).copied();
                    let call = crate::peer::client::call_of_token(&token);
                    if let (Some(client), Some(call)) = (client, call) {
                        self.observe(Observation::ChunkWritten {
                            client,
                            call,
                            index,
                        });
                    }
                }
            }
        }
        moved
    }

    fn read_one(&mut self, client: usize, call: CallId) -> bool {
        let Some(chunk) = self.clients[client].1.read_stream(call) else {
            return false;
        };
        let intact = self
            .stream_chunk_bytes
            .get(&(client, call))
            .is_some_and(|b| {
                chunk.data == crate::peer::tools::stream_chunk_text(chunk.chunk_index, *b)
            });
        self.observe(Observation::ChunkRead {
            client,
            call,
            index: chunk.chunk_index,
            bytes: chunk.data.len(),
            intact,
        });
        true
    }

    /// Reads every chunk released so far; true if there was any.
    fn read_stream(&mut self, client: usize, call: CallId) -> bool {
        let mut read = false;
        while self.read_one(client, call) {
            read = true;
        }
        read
    }

    /// A peer made `message` for `relay`: it goes through the peer's publish pipeline to the
    /// wire.
    fn emit(&mut self, relay: usize, peer: PeerId, message: ClientMessage) {
        let bytes = match &message {
            ClientMessage::Event(e) => {
                self.order.made(peer, e.id);
                self.publish_seq += 1;
                let seq = self.publish_seq;
                self.published_at.entry(e.id).or_insert((self.now, seq));
                Some(e.as_json().len())
            }
            _ => None,
        };
        let Some(pipeline) = self.publish.get(&peer).filter(|p| !p.is_instant()) else {
            return self.send_up(relay, peer, message);
        };
        let now = self.now;
        let (rng, last) = self.publish_state.entry((peer, relay)).or_insert_with(|| {
            let name = match peer {
                PeerId::Client(i) => &self.clients[i].0,
                PeerId::Server(i) => &self.servers[i].0,
            };
            let relay_name = &self.relays[relay].name;
            let stream = self.streams.stream(&format!("publish/{name}/{relay_name}"));
            (LinkState::new(stream), Duration::ZERO)
        });
        let drawn = pipeline.wire_time(rng.rng(), now, bytes, *last) - now;
        let previous = *last;
        let at = self.decide(
            (relay, peer, Way::Publish),
            bytes.is_some(),
            drawn,
            previous,
        );
        if let Some((_, last)) = self.publish_state.get_mut(&(peer, relay)) {
            *last = (*last).max(at);
        }
        self.schedule(
            at,
            Action::Wire {
                relay,
                peer,
                message,
            },
        );
    }

    fn send_up(&mut self, relay: usize, peer: PeerId, message: ClientMessage) {
        let Some(link) = self.links.get(&(relay, peer)).copied() else {
            return;
        };
        let event = match &message {
            ClientMessage::Event(e) => Some((e.id, e.as_json())),
            _ => None,
        };
        let event = event.map(|(id, json)| {
            let bytes = json.len();
            self.observe(Observation::Published {
                peer,
                relay,
                event: id,
                bytes,
                json: json.into(),
            });
            (id, bytes)
        });
        if !link.connected {
            self.observe(Observation::Lost {
                relay,
                peer,
                way: Way::Up,
                event: event.map(|e| e.0),
            });
            return;
        }
        if let Some((id, _)) = event {
            self.order.written(relay, link.conn, id);
        }
        let direction = self.relays[relay].impairments.peer_to_relay.clone();
        // Control messages are small; their exact size does not matter for bandwidth.
        let bytes = event.map_or(CONTROL_BYTES, |e| e.1 + EVENT_FRAMING);
        self.impair(
            relay,
            peer,
            Way::Up,
            &direction,
            (event.map(|e| e.0), bytes),
            |conn| Action::ToRelay {
                relay,
                peer,
                conn,
                message: message.clone(),
                processed: false,
            },
            link.conn,
        );
    }

    fn send_down(
        &mut self,
        relay: usize,
        peer: PeerId,
        conn: ConnId,
        message: RelayMessage,
        replay: bool,
    ) {
        let event = match &message {
            RelayMessage::Event { event, .. } => Some(event.id),
            _ => None,
        };
        if let (Some(id), false) = (event, replay) {
            self.order.sent(relay, id);
        }
        let direction = self.relays[relay].impairments.relay_to_peer.clone();
        let bytes = match (&message, direction.bandwidth) {
            (RelayMessage::Event { event, sub }, Some(_)) => {
                event.as_json().len() + sub.len() + EVENT_FRAMING
            }
            _ => CONTROL_BYTES,
        };
        self.impair(
            relay,
            peer,
            Way::Down,
            &direction,
            (event, bytes),
            |conn| Action::ToPeer {
                relay,
                peer,
                conn,
                message: message.clone(),
                replay,
            },
            conn,
        );
    }

    /// The delays a recorded relay's fate gives `relay`'s delivery of `event` to `peer`, if the
    /// recording covers that publication.
    fn recorded_fate(
        &mut self,
        relay: usize,
        peer: PeerId,
        event: &EventId,
    ) -> Option<Vec<Duration>> {
        let recipient = self.peer_keys.get(&peer)?;
        let (published, _) = self.published_at.get(event)?;
        self.fates
            .delays(relay, event, recipient, *published, self.now)
    }

    /// Schedules the copies of one message on a link. Loss and duplication apply to events;
    /// protocol answers (OK, EOSE, NOTICE) and subscriptions only take the delay.
    #[allow(clippy::too_many_arguments)]
    fn impair(
        &mut self,
        relay: usize,
        peer: PeerId,
        way: Way,
        direction: &Direction,
        (event, bytes): (Option<EventId>, usize),
        make: impl Fn(ConnId) -> Action,
        conn: ConnId,
    ) {
        let Some(state) = self.impair_state.get_mut(&(relay, peer, way)) else {
            return;
        };
        // Draw even when a replay overrides the plan, so the rest of the run draws the same.
        let drawn = if event.is_some() {
            state.plan(direction)
        } else {
            let control = Direction {
                delay: direction.delay.clone(),
                ..Direction::default()
            };
            state.plan(&control)
        };
        let seq = self.next_seq(relay, peer, way);
        // Whole microseconds, the unit traces record, so a replay is exact.
        let drawn: Vec<Duration> = drawn
            .into_iter()
            .map(|d| Duration::from_micros(d.as_micros() as u64))
            .collect();
        let recorded = self
            .overrides
            .plans
            .get(&(relay, peer, way))
            .and_then(|plans| plans.get(seq as usize))
            .cloned();
        // A recorded relay's fate already includes every queue its copies waited in, and the
        // recording's uplink: events reach it at once, none lost.
        let fate = match (way, event) {
            (Way::Down, Some(id)) if recorded.is_none() => self.recorded_fate(relay, peer, &id),
            (Way::Up, _) if recorded.is_none() && self.fates.active() => Some(vec![Duration::ZERO]),
            _ => None,
        };
        let fated = fate.is_some();
        let delays = match recorded.or(fate) {
            Some(plan) => plan,
            None if self.overrides.undisturbed_beyond => {
                vec![Duration::from_micros(
                    direction.delay.median().as_micros() as u64
                )]
            }
            None => drawn,
        };
        self.observe(Observation::LinkPlan {
            relay,
            peer,
            way,
            seq,
            event: event.is_some(),
            delays: delays.clone(),
        });
        match delays.len() {
            0 => self.observe(Observation::Lost {
                relay,
                peer,
                way,
                event,
            }),
            1 => {}
            n => self.observe(Observation::Duplicated {
                relay,
                peer,
                way,
                copies: n - 1,
            }),
        }
        let now = self.now;
        let pipe = self
            .links
            .get_mut(&(relay, peer))
            .filter(|l| l.conn == conn)
            .and_then(|l| l.pipe(way));
        let arrivals = match pipe {
            Some(pipe) => pipe.arrivals(direction, now, bytes, &delays, !fated),
            // Sent on a connection that is gone: it is reported lost when it would arrive.
            None => delays.iter().map(|d| now + *d).collect(),
        };
        for at in arrivals {
            self.schedule(at, make(conn));
        }
    }
}
