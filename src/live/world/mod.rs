//! Longer than 600 lines because the handlers of every inbound message (open, text, oversize,
//! close, stats) and the settle loop mutate the same connection and schedule maps: one state
//! machine, kept in one file; its delivery, outage and subscription parts have their own.
//!
//! The task that owns a live deployment's relay models: one [`Relay`] per relay of the
//! scenario (or the one `--profile` relay), the impaired links of every connection in both
//! directions, the outages on the wall clock, and the counters and trace of what happened.
//!
//! Connection tasks hand it text frames ([`Inbound`]); it decides when each reaches the relay
//! model and when each answer reaches the socket, with the same link physics as the des world
//! ([`LinkState`] draws, [`Pipe`] order and bandwidth): over a connection messages keep their
//! order and are delayed, never lost singly; loss, reordering and duplication of single
//! messages only in the datagram stress mode. Outages act on sockets: a relay restart closes
//! every connection and refuses new ones until it is back; a connection drop closes one peer's
//! connections and refuses that peer for the downtime; a partition holds a peer's messages,
//! both ways, until it ends (TCP retransmits them then).
//!
//! A peer is known by its label (`--label ADDR=NAME`) or, unlabelled, by its address: clients
//! on distinct loopback addresses are distinct peers for outages and per-address limits.

use super::report::LiveReport;
mod delivery;
mod ordinals;
mod outages;
mod slot;
mod subscriptions;
#[cfg(test)]
mod tests;

pub(crate) use slot::RelaySlot;

use super::outbox::{Outbox, Outgoing};
use super::trace_writer::{self as record};
use super::Gate;
use crate::nip01::wire::{to_model, to_wire};
use crate::nip01::{ClientMessage, RelayMessage};
use crate::relay::impair::{Direction, LinkState, Pipe};
use crate::relay::{ConnId, FrameOversizeReaction};
use crate::rng::SeededStreams;
use crate::sim::order::{OrderTracker, UpCopy};
use crate::stats::rpc_pairs::RpcPairs;
use nostr::prelude::EventId;
use outages::Outage;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// What connection tasks and the HTTP side tell the world.
pub(crate) enum Inbound {
    /// A WebSocket connection to relay `relay` is up; `kill` makes its task drop the socket
    /// at once (a reader cut off with its queue full cannot be sent a close).
    Open {
        relay: usize,
        conn: ConnId,
        ip: IpAddr,
        out: Outbox,
        kill: oneshot::Sender<()>,
    },
    /// A text frame from a connection, and what it parsed to. Connections' tasks parse their
    /// own frames, so parsing large events and REQs is spread over the runtime's threads
    /// instead of queueing every client behind it on the world's. The
    /// connection reads no more frames while it has too many bytes on their way to the relay
    /// model; `credit` gives them back once the relay has handled this frame (its last copy,
    /// when the link duplicates it), so frames waiting out a link delay or the relay's intake
    /// count too.
    Text {
        conn: ConnId,
        /// The frame's size.
        bytes: usize,
        /// The frame itself, kept when a trace records it.
        text: Option<String>,
        parsed: Parsed,
        credit: Credit,
    },
    /// A frame over the relay's message limit (`size` bytes; 0 when unknown) arrived; the
    /// connection task stops reading.
    Oversize { conn: ConnId, size: usize },
    /// The relay's keepalive closed a connection it had not heard from (a `Closed` follows).
    Silent { conn: ConnId },
    /// The client closed its connection.
    Closed { conn: ConnId },
    /// The counters so far (the HTTP stats path).
    Stats { reply: oneshot::Sender<LiveReport> },
    /// Stop: close the trace and answer with the final counters.
    Shutdown { reply: oneshot::Sender<LiveReport> },
}

/// One open connection.
struct Conn {
    relay: usize,
    /// The peer's name in the trace: its label, or `client-N`.
    peer: String,
    /// Who the peer is for outages: its label, or its address.
    identity: String,
    /// Its number among readers and authors, for the order tracker.
    reader: u64,
    out: Outbox,
    up: (LinkState, Pipe),
    down: (LinkState, Pipe),
    /// A partition holds this connection's messages until then.
    stalled_until: Duration,
    drop_rng: Option<LinkState>,
    /// Whether the peer has a label (an unlabelled one's trace name belongs to this
    /// connection alone).
    labelled: bool,
    /// Drops the socket at once.
    kill: Option<oneshot::Sender<()>>,
    /// The client closed its socket: nothing more can reach it, but what it sent before is
    /// still on its way to the relay.
    gone: bool,
}

/// Something due at a time.
enum Action {
    /// A client message reaches the relay; `processed` once its intake time has passed.
    ToRelay {
        conn: ConnId,
        message: ClientMessage,
        processed: bool,
        /// The event's copy, with what it has been through on its way in.
        copy: UpCopy,
        /// The sending connection's read credit, given back with the last copy.
        credit: Arc<Credit>,
    },
    /// A relay message reaches the socket.
    ToClient {
        conn: ConnId,
        outgoing: Outgoing,
        /// The delivered event, when it is one.
        event: Option<delivery::Delivery>,
    },
    /// An outage begins.
    Outage(Outage),
    /// A connection ends once what was on its way has arrived.
    Close { conn: ConnId, reason: &'static str },
}

/// Read credit held by a frame from when its connection read it until the relay model has
/// handled it: KiB of its connection's credit and of the whole server's (a small frame may take
/// its connection's small reserve instead). A flood that the relay cannot keep up with stops
/// being read (TCP pushes back on the sender) instead of piling up in memory, on one connection
/// or across a thousand.
pub(crate) struct Credit {
    /// The connection's share (held, never read: dropping it gives it back).
    _connection: tokio::sync::OwnedSemaphorePermit,
    /// The server's share; none for a frame in its connection's reserve.
    _server: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Credit {
    /// A frame's credit from its connection's and the server's permits.
    pub(super) fn new(
        connection: tokio::sync::OwnedSemaphorePermit,
        server: tokio::sync::OwnedSemaphorePermit,
    ) -> Self {
        Credit {
            _connection: connection,
            _server: Some(server),
        }
    }

    /// A small frame's credit from its connection's reserve alone.
    pub(super) fn reserved(reserve: tokio::sync::OwnedSemaphorePermit) -> Self {
        Credit {
            _connection: reserve,
            _server: None,
        }
    }
}

/// Settings the world needs beyond its relays.
pub(crate) struct WorldConfig {
    pub seed: u64,
    pub epoch_secs: Option<u64>,
    pub labels: BTreeMap<IpAddr, String>,
    pub outages_from: Duration,
    /// The REQ bytes live subscriptions may hold together, and the connection slots that
    /// share them.
    pub subscription_budget: (usize, usize),
}

/// The world's state; see the module documentation.
pub(crate) struct World {
    slots: Vec<RelaySlot>,
    conns: BTreeMap<ConnId, Conn>,
    due: BTreeMap<(Duration, u64), Action>,
    seq: u64,
    start: Instant,
    streams: SeededStreams,
    labels: BTreeMap<IpAddr, String>,
    gate: Arc<Mutex<Gate>>,
    order: OrderTracker<u64>,
    ordinals: ordinals::Ordinals,
    /// When each event id was first published, for delivery latencies.
    published_at: BTreeMap<EventId, Duration>,
    /// Event ids in publication order, so the oldest are forgotten past
    /// [`crate::relay::MAX_STORED_EVENTS`] events or [`MAX_TRACKED_COPIES`] first copies (the
    /// order tracker and `published_at` stay bounded however long the deployment runs).
    publication_order: std::collections::VecDeque<EventId>,
    /// Each event's JSON, serialised once for all its deliveries.
    event_json: crate::nip01::event_json::EventJson,
    /// Events its relays verified, so an event published to several is verified once.
    signatures: crate::nip01::Signatures,
    pairs: RpcPairs,
    /// Servers that wrote a token's progress again (a request run twice).
    second_writers: crate::stats::second_writers::SecondWriters,
    /// What live subscriptions hold, within one budget.
    subscription_bytes: subscriptions::SubscriptionBytes,
    outage_seq: u64,
    /// Outage times count from this long after the start.
    outages_from: Duration,
    /// Partitions in force: relay, peer (all when `None`), until when. A connection opened
    /// during one is held too.
    partitions: Vec<(usize, Option<String>, Duration)>,
    feed: Option<record::TraceFeed>,
}

/// First copies (one per event and reader) the order tracker remembers. With a few readers
/// this keeps the latest [`crate::relay::MAX_STORED_EVENTS`] events; with hundreds of readers
/// per event (the hostile-client test's fan-out) fewer, as each event costs an entry per
/// reader. An entry costs about 80 bytes with its share of the maps, so this is ~20 MB.
const MAX_TRACKED_COPIES: usize = 250_000;

/// A client frame, parsed.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A NIP-01 client message.
    Message(ClientMessage),
    /// A REQ with more filters than the relay takes (counted without building them).
    TooManyFilters,
    /// Not a client message the relay understands.
    Unparsable,
}

impl Parsed {
    /// `text` as a relay whose REQs take at most `max_filters` filters reads it.
    pub(super) fn frame(text: &str, max_filters: Option<usize>) -> Self {
        if max_filters.is_some_and(|max| req_filters(text) > max) {
            return Parsed::TooManyFilters;
        }
        to_model(text).map_or(Parsed::Unparsable, Parsed::Message)
    }
}

/// A raw frame from its first element on (`"REQ",…` for a REQ).
fn frame_head(text: &str) -> &str {
    text.trim_start().trim_start_matches('[').trim_start()
}

/// The filters of a raw REQ frame (0 for anything else), counted without building them.
fn req_filters(text: &str) -> usize {
    if !frame_head(text).starts_with("\"REQ\"") {
        return 0;
    }
    serde_json::from_str::<Vec<serde::de::IgnoredAny>>(text)
        .map_or(0, |v| v.len().saturating_sub(2))
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl World {
    pub(super) fn new(
        slots: Vec<RelaySlot>,
        config: WorldConfig,
        gate: Arc<Mutex<Gate>>,
        feed: Option<record::TraceFeed>,
    ) -> Self {
        let epoch = config.epoch_secs.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
        let mut world = World {
            slots,
            conns: BTreeMap::new(),
            due: BTreeMap::new(),
            seq: 0,
            start: Instant::now(),
            streams: SeededStreams::new(config.seed),
            labels: config.labels,
            gate,
            order: OrderTracker::default(),
            ordinals: ordinals::Ordinals::default(),
            published_at: BTreeMap::new(),
            publication_order: std::collections::VecDeque::new(),
            event_json: crate::nip01::event_json::EventJson::default(),
            signatures: crate::nip01::Signatures::default(),
            pairs: RpcPairs::default(),
            second_writers: Default::default(),
            subscription_bytes: subscriptions::SubscriptionBytes::new(
                config.subscription_budget.0,
                config.subscription_budget.1,
            ),
            outage_seq: 0,
            outages_from: config.outages_from,
            partitions: Vec::new(),
            feed,
        };
        for index in 0..world.slots.len() {
            world.slots[index].relay.set_epoch_secs(epoch);
            world.slots[index]
                .relay
                .set_signatures(world.signatures.clone());
            world.schedule_outages(index);
        }
        world
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn schedule(&mut self, at: Duration, action: Action) {
        self.seq += 1;
        self.due.insert((at, self.seq), action);
    }

    fn see(&self, seen: record::Seen) {
        if let Some(feed) = &self.feed {
            feed.offer(Instant::now(), seen);
        }
    }

    /// When the world next needs to run.
    pub(super) fn wake_at(&self) -> Option<Instant> {
        let relay = self
            .slots
            .iter()
            .filter_map(|s| s.relay.poll_timeout())
            .min();
        let due = self.due.keys().next().map(|(t, _)| *t);
        [relay, due]
            .into_iter()
            .flatten()
            .min()
            .map(|t| self.start + t)
    }

    /// Handles one message; false when the world should stop.
    pub(super) fn handle(&mut self, message: Inbound) -> bool {
        let now = self.now();
        match message {
            Inbound::Open {
                relay,
                conn,
                ip,
                out,
                kill,
            } => self.open(relay, conn, ip, (out, kill), now),
            Inbound::Text {
                conn,
                bytes,
                text,
                parsed,
                credit,
            } => self.text(conn, (bytes, text), parsed, credit, now),
            Inbound::Oversize { conn, size } => self.oversize(conn, size, now),
            Inbound::Silent { conn } => {
                if let Some(c) = self.conns.get(&conn) {
                    self.slots[c.relay].counters.closed_silent += 1;
                }
            }
            Inbound::Closed { conn } => {
                // What the client sent before closing still reaches the relay, as a real
                // relay reads a socket to its end; then the connection ends.
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.gone = true;
                    let last = self.last_due(conn, true).unwrap_or(now);
                    self.schedule(
                        last,
                        Action::Close {
                            conn,
                            reason: "client closed",
                        },
                    );
                }
            }
            Inbound::Stats { reply } => {
                let _ = reply.send(self.report());
            }
            Inbound::Shutdown { reply } => {
                let _ = reply.send(self.report());
                return false;
            }
        }
        self.settle(now);
        true
    }

    /// Runs what is due and moves the relays' output onto the links.
    pub(super) fn on_wake(&mut self) {
        let now = self.now();
        for slot in &mut self.slots {
            slot.relay.handle_timeout(now);
        }
        self.settle(now);
    }

    fn open(
        &mut self,
        relay: usize,
        conn: ConnId,
        ip: IpAddr,
        (out, kill): (Outbox, oneshot::Sender<()>),
        now: Duration,
    ) {
        let label = self.labels.get(&ip).cloned();
        let labelled = label.is_some();
        let identity = label.clone().unwrap_or_else(|| ip.to_string());
        // The gate refused this peer before the upgrade if it was down then; it may have gone
        // down since.
        let refused = self
            .gate_mut()
            .refuses(relay, &identity, self.start + now)
            .is_some();
        if refused {
            let _ = kill.send(());
            return;
        }
        let peer = label.unwrap_or_else(|| format!("client-{conn}"));
        let reader = self.ordinals.reader(&peer);
        let name = self.slots[relay].name.clone();
        let link = |way: &str| {
            (
                LinkState::new(self.streams.stream(&format!("live/{name}/{conn}/{way}"))),
                Pipe::default(),
            )
        };
        let drop_rng = self.slots[relay]
            .relay
            .profile()
            .impairments
            .outages
            .connection_drop_every
            .map(|_| LinkState::new(self.streams.stream(&format!("live/outage/{name}/{conn}"))));
        // A partition in force holds a new connection too.
        let stalled_until = self
            .partitions
            .iter()
            .filter(|(r, who, _)| {
                *r == relay && who.as_ref().is_none_or(|w| *w == identity || *w == peer)
            })
            .map(|(_, _, until)| *until)
            .max()
            .unwrap_or_default();
        let c = Conn {
            relay,
            peer: peer.clone(),
            identity,
            reader,
            out,
            up: link("up"),
            down: link("down"),
            stalled_until,
            drop_rng,
            labelled,
            kill: Some(kill),
            gone: false,
        };
        self.slots[relay].relay.connect(conn, &ip.to_string());
        self.slots[relay].counters.connections += 1;
        self.conns.insert(conn, c);
        self.next_drop(conn, now.max(self.outages_from));
        self.see(record::Seen::Connected { relay: name, peer });
    }

    /// A client frame of `bytes` bytes (its `text` when a trace records it) reaches the
    /// relay.
    fn text(
        &mut self,
        conn: ConnId,
        (bytes, text): (usize, Option<String>),
        parsed: Parsed,
        credit: Credit,
        now: Duration,
    ) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let relay = c.relay;
        let peer = c.peer.clone();
        if let Some(text) = text {
            self.see(record::Seen::FromClient {
                relay: self.slots[relay].name.clone(),
                peer: peer.clone(),
                text,
            });
        }
        if !self.conns.contains_key(&conn) {
            return;
        }
        let message = match parsed {
            Parsed::Message(message) => message,
            refused => {
                // Through the link like any answer, so it keeps its place behind earlier
                // ones. Too many filters: strfry's "arr too big" (RelayIngester.cpp).
                let message = match refused {
                    Parsed::TooManyFilters => "ERROR: bad req: arr too big",
                    _ => "error: could not parse the message",
                };
                let notice = RelayMessage::Notice {
                    message: message.into(),
                };
                self.transmit(relay, conn, notice, false, now);
                return;
            }
        };
        match &message {
            // An id the relay refuses opens no subscription, so it takes none of the budget
            // (and its possibly huge text is not kept as a key).
            ClientMessage::Req { sub, .. }
                if self.slots[relay]
                    .relay
                    .profile()
                    .accepts_subscription_id(sub) =>
            {
                if !self.subscription_bytes.admit(conn, sub, bytes) {
                    let closed = RelayMessage::Closed {
                        sub: sub.clone(),
                        message: subscriptions::REFUSED.into(),
                    };
                    self.transmit(relay, conn, closed, false, now);
                    return;
                }
            }
            ClientMessage::Close { sub } => self.subscription_bytes.release(conn, sub),
            ClientMessage::Req { .. } | ClientMessage::Event(_) => {}
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let up = self.slots[relay].up.clone();
        let delays = match &message {
            ClientMessage::Event(_) => c.up.0.plan(&up),
            _ => c.up.0.plan(&Direction {
                delay: up.delay.clone(),
                ..Default::default()
            }),
        };
        let sent = now.max(c.stalled_until);
        let arrivals = c.up.1.arrivals(&up, sent, bytes, &delays, true);
        let mut copy = UpCopy::default();
        if let ClientMessage::Event(event) = &message {
            // The order tracker follows only the events `published_at` remembers: every call on
            // it below and in the delivery path is for one of those, so forgetting an event
            // (`order.forget`) leaves nothing of it behind.
            let fresh = !self.published_at.contains_key(&event.id);
            if fresh {
                // A re-sent event keeps its first author: its author is looked up only here,
                // so a frame reusing a remembered id under another key makes no entry.
                let author = self.ordinals.author(&event.pubkey.to_hex());
                self.ordinals.published(author);
                self.order.made(author, event.id, now);
                self.published_at.insert(event.id, now);
                self.publication_order.push_back(event.id);
            }
            copy = self.order.written(relay, conn, event.id);
            if fresh {
                while self.publication_order.len() > crate::relay::MAX_STORED_EVENTS
                    || self.order.copies() > MAX_TRACKED_COPIES
                {
                    let Some(old) = self.publication_order.pop_front() else {
                        break;
                    };
                    self.published_at.remove(&old);
                    if let Some(author) = self.order.forget(old) {
                        self.ordinals.forgotten(author);
                    }
                }
            }
            self.pairs.published_parts(
                micros(now),
                u64::from(event.kind.as_u16()),
                &event.id.to_hex(),
                &event.content,
            );
            if fresh {
                let recipient = event.tags.iter().find_map(|t| match t.as_slice() {
                    [k, v, ..] if k == "p" => Some(v.as_str()),
                    _ => None,
                });
                self.second_writers.published(
                    &event.pubkey.to_hex(),
                    &peer,
                    recipient.unwrap_or_default(),
                    &event.content,
                );
            }
            self.link_fate(relay, &peer, "up", Some(event.id), arrivals.len());
        }
        let credit = Arc::new(credit);
        for at in arrivals {
            self.schedule(
                at,
                Action::ToRelay {
                    conn,
                    message: message.clone(),
                    processed: false,
                    copy,
                    credit: credit.clone(),
                },
            );
        }
    }

    /// A frame over the message limit: the profile's reaction (strfry and khatru drop the
    /// connection; nostr-rs-relay says why first).
    fn oversize(&mut self, conn: ConnId, size: usize, now: Duration) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let relay = c.relay;
        let profile = self.slots[relay].relay.profile();
        let max = profile
            .max_message_bytes
            .unwrap_or(super::http::DEFAULT_FRAME_LIMIT);
        let notice = match (&profile.frame_oversize, profile.max_message_bytes) {
            (FrameOversizeReaction::NoticeThenDrop(text), _) => Some(
                text.replace("{size}", &size.to_string())
                    .replace("{max}", &max.to_string()),
            ),
            // The profile sets no limit: the frame met serve's own, which says so, as no relay
            // of that profile would.
            (_, None) => Some(format!(
                "relaysim: a frame of {size} bytes is over the {} byte frame limit serve \
                 keeps for profiles that set none; the connection is closed",
                super::http::DEFAULT_FRAME_LIMIT
            )),
            _ => None,
        };
        if let Some(message) = notice {
            self.transmit(relay, conn, RelayMessage::Notice { message }, false, now);
        }
        self.slots[relay].counters.frames_too_large += 1;
        self.slots[relay].relay.disconnect(conn);
        self.close_after_pending(conn, "frame over the message limit", now);
    }

    /// Runs every due action and moves relay output onto the links, until nothing is due.
    fn settle(&mut self, mut now: Duration) {
        // The relays' own timers (rate-limit releases, batch flushes) run even when messages
        // keep the world busy and its wake-up never fires.
        for slot in &mut self.slots {
            slot.relay.handle_timeout(now);
        }
        loop {
            self.drain_relays(now);
            let Some(entry) = self.due.first_entry() else {
                break;
            };
            if entry.key().0 > now {
                break;
            }
            let action = entry.remove();
            self.act(action, now);
            now = self.now().max(now);
        }
    }

    fn act(&mut self, action: Action, now: Duration) {
        match action {
            Action::ToRelay {
                conn,
                message,
                processed,
                mut copy,
                credit,
            } => {
                let Some(c) = self.conns.get(&conn) else {
                    return; // the connection closed while the message was on its way
                };
                let relay = c.relay;
                if !processed {
                    self.order.received(&mut copy);
                    if let Some(done) = self.slots[relay].intake_done(&message, now) {
                        let processed = true;
                        self.schedule(
                            done,
                            Action::ToRelay {
                                conn,
                                message,
                                processed,
                                copy,
                                credit,
                            },
                        );
                        return;
                    }
                }
                if let ClientMessage::Event(event) = &message {
                    if self.published_at.contains_key(&event.id) {
                        self.order.handled(relay, event.id, copy);
                    }
                }
                self.slots[relay]
                    .relay
                    .handle_client_message(conn, message, now);
            }
            Action::ToClient {
                conn,
                outgoing,
                event,
            } => self.deliver(conn, outgoing, event, now),
            Action::Outage(outage) => self.begin_outage(outage, now),
            Action::Close { conn, reason } => self.close(conn, reason),
        }
    }

    /// When the last message still on its way on `conn` arrives: towards the relay when `up`,
    /// else towards the client.
    fn last_due(&self, conn: ConnId, up: bool) -> Option<Duration> {
        self.due
            .iter()
            .filter(|(_, a)| match a {
                Action::ToRelay { conn: c, .. } => up && *c == conn,
                Action::ToClient { conn: c, .. } => !up && *c == conn,
                _ => false,
            })
            .map(|((t, _), _)| *t)
            .max()
    }

    /// Ends `conn` once what the relay sent on it has arrived (a NOTICE before the close).
    fn close_after_pending(&mut self, conn: ConnId, reason: &'static str, now: Duration) {
        let at = self.last_due(conn, false).unwrap_or(now).max(now);
        self.schedule(at, Action::Close { conn, reason });
    }

    /// Holds what is on its way on `conns`, both ways, until `until` (a partition), keeping
    /// each connection's order: held messages go before anything sent later.
    fn hold(&mut self, conns: &[ConnId], until: Duration) {
        let held: Vec<(Duration, u64)> = self
            .due
            .range(..(until, 0))
            .filter(|(_, a)| match a {
                Action::ToRelay {
                    conn,
                    processed: false,
                    ..
                }
                | Action::ToClient { conn, .. } => conns.contains(conn),
                _ => false,
            })
            .map(|(k, _)| *k)
            .collect();
        for key in held {
            if let Some(action) = self.due.remove(&key) {
                self.schedule(until, action);
            }
        }
        for conn in conns {
            if let Some(c) = self.conns.get_mut(conn) {
                c.stalled_until = c.stalled_until.max(until);
            }
        }
    }

    fn gate_mut(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Ends a connection now: what is still on its way either way is lost (an outage, a
    /// cut-off), or has already arrived (see [`World::close_after_pending`]).
    fn close(&mut self, conn: ConnId, reason: &str) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        self.subscription_bytes.release_all(conn);
        self.slots[c.relay].relay.disconnect(conn);
        // An unlabelled client's name belongs to this connection alone: it will not read again.
        if !c.labelled {
            self.ordinals.reader_gone(&c.peer);
            self.order.forget_reader(c.reader);
        }
        c.out.close();
        self.see(record::Seen::Disconnected {
            relay: self.slots[c.relay].name.clone(),
            peer: c.peer,
            reason: reason.to_owned(),
        });
    }

    /// Takes every relay's output onto its links, and closes what the relays closed.
    fn drain_relays(&mut self, now: Duration) {
        for relay in 0..self.slots.len() {
            while let Some((conn, message, replay)) = self.slots[relay].relay.poll_transmit_tagged()
            {
                self.transmit(relay, conn, message, replay, now);
            }
            while let Some(conn) = self.slots[relay].relay.poll_dropped() {
                self.close_after_pending(conn, "closed by the relay", now);
            }
            // Counted by the relay (`withheld` in the report); nothing else to do live.
            while self.slots[relay].relay.poll_withheld().is_some() {}
        }
    }

    /// The counters so far.
    pub(super) fn report(&self) -> LiveReport {
        LiveReport {
            elapsed_us: micros(self.now()),
            relays: self
                .slots
                .iter()
                .map(|s| s.counters.with_model(s.relay.counters()))
                .collect(),
            calls: self.pairs.rows(),
            gift_wrapped: self.pairs.gift_wrapped(),
            second_writers: self.second_writers.found().0.to_vec(),
            second_writers_not_named: self.second_writers.found().1,
        }
    }
}

/// Runs `world` until it is told to stop or every sender is gone, then finishes its trace.
pub(crate) async fn run(
    mut world: World,
    mut inbound: mpsc::Receiver<Inbound>,
    writer: Option<tokio::task::JoinHandle<std::io::Result<u64>>>,
) {
    loop {
        let wake = world.wake_at();
        // Work that is due goes first: under a flood the inbound queue is never empty, and the
        // biased select below would otherwise hold every delivery (and every frame's credit)
        // until the flood paused.
        if wake.is_some_and(|t| t <= Instant::now()) {
            world.on_wake();
            continue;
        }
        tokio::select! {
            // `biased`: a fixed polling order keeps turmoil runs repeatable without relying
            // on tokio's seeded select (which needs `--cfg tokio_unstable`).
            biased;
            message = inbound.recv() => {
                let Some(message) = message else { break };
                if !world.handle(message) {
                    break;
                }
            }
            _ = async {
                match wake {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => world.on_wake(),
        }
    }
    // Close the trace: the summary line, then flush.
    if let Some(feed) = world.feed.take() {
        feed.close().await;
    }
    if let Some(w) = writer {
        let _ = w.await;
    }
}
