//! The relay model: NIP-01 as a sans-IO state machine, with the behaviour of a
//! [`RelayProfile`]. Connections send client messages in; relay messages come out through
//! [`Relay::poll_transmit`], connections the relay closes through [`Relay::poll_dropped`], and
//! timed work (rate-limit queues, delivery batches, storage expiry) through
//! [`Relay::poll_timeout`] / [`Relay::handle_timeout`]. Network impairments are applied around
//! the relay by the driver ([`impair`]).

mod counters;
mod describe;
pub mod impair;
pub(crate) mod profile;
mod requests;
mod store;
mod sub_index;
mod writer;

use crate::nip01::{ClientMessage, RelayMessage};
use crate::nip01::{Signatures, EPOCH_SECS};
pub use counters::RelayCounters;
pub use describe::Fact;
use nostr::prelude::{Event, EventId, Filter, MatchEventOptions, SingleLetterTag};
pub use profile::{
    FrameOversizeReaction, Intake, KeepAlive, OversizeReaction, RateAction, RateLimit, RateScope,
    Refill, RelayProfile, SizeMeasure, StoreExpiry,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// Identifies one connection to a relay.
pub type ConnId = u64;

#[derive(Debug)]
struct Connection {
    ip: String,
    /// Each subscription's filter, and the relay's count of accepted events when it was
    /// made: stored events accepted before that were replayed to it, so a later live
    /// broadcast of them (a delivery batch) skips it, as strfry's monitor starts after the
    /// events its query returned.
    subscriptions: BTreeMap<String, (Filter, u64)>,
    /// Whether the relay has sent this connection a NIP-42 challenge (strfry sends one per
    /// connection, the first time it refuses a REQ for lack of AUTH).
    challenged: bool,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    /// When the bucket was last filled (for `Refill::WholeSeconds`: the last accepted event).
    at: Duration,
}

impl Bucket {
    /// Whether an event at `now` gets a token (taking it); `fresh` when the bucket was made
    /// for this event.
    fn take(&mut self, limit: &RateLimit, now: Duration, fresh: bool) -> bool {
        match limit.refill {
            Refill::Smooth => {
                let earned = (now - self.at).as_secs_f64() * limit.refill_per_sec;
                self.tokens = (self.tokens + earned).min(limit.capacity);
                self.at = now;
            }
            Refill::Ticks { every } => {
                // Ticks of the relay-wide timer since the last look, each giving a step back.
                let tick = |t: Duration| t.as_micros() / every.as_micros().max(1);
                let ticks = (tick(now) - tick(self.at)) as f64;
                let step = limit.refill_per_sec * every.as_secs_f64();
                self.tokens = (self.tokens + ticks * step).min(limit.capacity);
                self.at = now;
            }
            Refill::WholeSeconds => {
                if fresh {
                    return true;
                }
                // In f32, as both sources compute it.
                let per_minute = limit.capacity as f32;
                let seconds = (now - self.at).min(Duration::from_secs(60)).as_secs() as f32;
                let earned = (seconds / 60.0 * per_minute).floor() as f64;
                self.tokens = (self.tokens + earned - 1.0).clamp(0.0, limit.capacity - 1.0);
                if self.tokens == 0.0 {
                    return false;
                }
                self.at = now;
                return true;
            }
        }
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Stored (ephemeral) events a relay keeps at most; the oldest go first beyond it.
pub const MAX_STORED_EVENTS: usize = 100_000;
/// Content bytes of stored events a relay keeps at most (256 MiB).
pub const MAX_STORED_BYTES: usize = 256 << 20;

/// One relay.
#[derive(Debug)]
pub struct Relay {
    profile: RelayProfile,
    connections: BTreeMap<ConnId, Connection>,
    /// The connections' subscriptions by the `p` values they ask for.
    index: sub_index::SubIndex,
    /// Stored events and when each is forgotten.
    stored: rustc_hash::FxHashMap<EventId, (Arc<Event>, Duration)>,
    /// Stored ephemeral events in the order they arrived, with when each is forgotten.
    stored_order: VecDeque<(Duration, EventId)>,
    /// Stored regular events in the order they arrived (never forgotten; `store_regular`).
    regular_order: VecDeque<EventId>,
    /// The event stored last, of any kind (strfry's sweep never deletes it).
    newest_stored: Option<EventId>,
    /// Up to when the store has been swept (`StoreExpiry::AfterCreatedAt`).
    swept_until: Duration,
    /// Content bytes of the stored events.
    stored_bytes: usize,
    /// The most stored events and content bytes kept.
    store_bounds: (usize, usize),
    buckets: BTreeMap<String, Bucket>,
    delayed: VecDeque<(Duration, ConnId, Arc<Event>)>,
    batch: Vec<(Arc<Event>, u64)>,
    /// The writer of a batch-commit intake (unused by other intakes).
    writer: writer::BatchWriter,
    batch_flush_at: Option<Duration>,
    /// Messages to send, and whether each is a stored event replayed to a new subscription.
    outbox: VecDeque<(ConnId, RelayMessage, bool)>,
    dropped: VecDeque<ConnId>,
    /// Events a subscription matched but was not sent, with the reason ([`Relay::poll_withheld`]).
    withheld: VecDeque<(ConnId, EventId, &'static str)>,
    counters: RelayCounters,
    /// Unix time at virtual time zero, for `created_at` checks.
    epoch_secs: u64,
    /// NIP-42 challenges sent so far (each challenge is drawn from this count).
    challenges_sent: u64,
    /// The signature state of the world this relay is part of (its own unless given one).
    signatures: Signatures,
}

fn prefix_of(message: &str) -> String {
    message
        .split(':')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

impl Relay {
    /// A relay behaving like `profile`.
    pub fn new(profile: RelayProfile) -> Self {
        Relay {
            profile,
            epoch_secs: EPOCH_SECS,
            challenges_sent: 0,
            connections: BTreeMap::new(),
            index: sub_index::SubIndex::default(),
            stored: rustc_hash::FxHashMap::default(),
            stored_order: VecDeque::new(),
            regular_order: VecDeque::new(),
            newest_stored: None,
            swept_until: Duration::ZERO,
            stored_bytes: 0,
            store_bounds: (MAX_STORED_EVENTS, MAX_STORED_BYTES),
            buckets: BTreeMap::new(),
            delayed: VecDeque::new(),
            batch: Vec::new(),
            writer: writer::BatchWriter::default(),
            batch_flush_at: None,
            outbox: VecDeque::new(),
            dropped: VecDeque::new(),
            withheld: VecDeque::new(),
            counters: RelayCounters::default(),
            signatures: Signatures::default(),
        }
    }

    /// This relay as part of the world whose signature state is `signatures`: events the
    /// world's peers signed are known to be good without verifying them again, and the
    /// placeholders of the world's deferring identities stand for their signatures
    /// (`nip01::signatures`).
    pub fn set_signatures(&mut self, signatures: Signatures) {
        self.signatures = signatures;
    }

    /// Sets the Unix time that `now = 0` stands for (the live server uses the real clock; the
    /// simulators use [`EPOCH_SECS`]).
    pub fn set_epoch_secs(&mut self, epoch_secs: u64) {
        self.epoch_secs = epoch_secs;
    }

    /// Keeps at most `events` stored events of at most `bytes` content bytes together (by
    /// default [`MAX_STORED_EVENTS`] and [`MAX_STORED_BYTES`]).
    pub fn set_store_bounds(&mut self, events: usize, bytes: usize) {
        self.store_bounds = (events, bytes);
    }

    /// The profile in force.
    pub fn profile(&self) -> &RelayProfile {
        &self.profile
    }

    /// What the relay has done so far.
    pub fn counters(&self) -> &RelayCounters {
        &self.counters
    }

    /// A connection opens from `ip`.
    pub fn connect(&mut self, conn: ConnId, ip: &str) {
        self.connections.insert(
            conn,
            Connection {
                ip: ip.to_owned(),
                subscriptions: BTreeMap::new(),
                challenged: false,
            },
        );
    }

    /// Whether `conn` is open.
    pub fn is_connected(&self, conn: ConnId) -> bool {
        self.connections.contains_key(&conn)
    }

    /// A connection closes (the client went away); its subscriptions go with it.
    pub fn disconnect(&mut self, conn: ConnId) {
        self.remove_connection(conn);
        self.delayed.retain(|(_, c, _)| *c != conn);
    }

    /// Removes a connection and its subscriptions from the index; whether it was open.
    fn remove_connection(&mut self, conn: ConnId) -> bool {
        let Some(c) = self.connections.remove(&conn) else {
            return false;
        };
        for (sub, (filter, _)) in c.subscriptions {
            self.index.remove(&(conn, sub), &filter);
        }
        true
    }

    /// The relay restarts: every connection drops. Stored events survive (they are in the
    /// database); queued work is lost.
    pub fn restart(&mut self) {
        let conns: Vec<ConnId> = self.connections.keys().copied().collect();
        for conn in conns {
            self.close(conn);
        }
        self.delayed.clear();
        self.writer.clear();
        self.batch.clear();
        self.batch_flush_at = None;
    }

    fn close(&mut self, conn: ConnId) {
        if self.remove_connection(conn) {
            self.counters.connections_closed += 1;
            self.dropped.push_back(conn);
        }
        self.delayed.retain(|(_, c, _)| *c != conn);
        self.outbox.retain(|(c, _, _)| *c != conn);
    }

    /// Queues `message` for `conn`, if it is still open: a batch can be written after its
    /// publisher went away (the events still are; their OKs go nowhere).
    fn send(&mut self, conn: ConnId, message: RelayMessage) {
        if self.connections.contains_key(&conn) {
            self.outbox.push_back((conn, message, false));
        }
    }

    fn refuse(&mut self, conn: ConnId, id: EventId, message: String) {
        *self
            .counters
            .rejected
            .entry(prefix_of(&message))
            .or_default() += 1;
        self.send(
            conn,
            RelayMessage::Ok {
                id,
                accepted: false,
                message,
            },
        );
    }

    /// A message from `conn` at virtual time `now`.
    pub fn handle_client_message(&mut self, conn: ConnId, message: ClientMessage, now: Duration) {
        if !self.connections.contains_key(&conn) {
            return;
        }
        match message {
            ClientMessage::Event(event) => self.on_event(conn, event, now),
            ClientMessage::Req { sub, filter } => self.on_req(conn, sub, *filter, now),
            ClientMessage::Close { sub } => {
                if let Some(c) = self.connections.get_mut(&conn) {
                    if let Some((filter, _)) = c.subscriptions.remove(&sub) {
                        self.index.remove(&(conn, sub), &filter);
                    }
                }
            }
        }
    }

    fn on_event(&mut self, conn: ConnId, event: Arc<Event>, now: Duration) {
        self.counters.received += 1;
        let id = event.id;
        // The length its signer counted (this very event, fields compared) saves serialising
        // it only to measure it.
        let json_len = self.signatures.json_len(&event);
        let message_len = json_len + r#"["EVENT",]"#.len();
        if let Some(max) = self.profile.max_message_bytes {
            if message_len > max {
                match self.profile.frame_oversize.clone() {
                    FrameOversizeReaction::Drop => {}
                    FrameOversizeReaction::NoticeThenDrop(text) => {
                        let message = text
                            .replace("{size}", &message_len.to_string())
                            .replace("{max}", &max.to_string());
                        self.send(conn, RelayMessage::Notice { message });
                    }
                }
                *self
                    .counters
                    .rejected
                    .entry("connection-closed".into())
                    .or_default() += 1;
                // The notice goes out before the close.
                let notice: Vec<_> = self
                    .outbox
                    .iter()
                    .filter(|(c, _, _)| *c == conn)
                    .cloned()
                    .collect();
                self.close(conn);
                self.outbox.extend(notice);
                return;
            }
        }
        if self.signatures.verify(&event).is_err() {
            return self.refuse(conn, id, "invalid: bad event id or signature".into());
        }
        let kind = event.kind.as_u16();
        if let Some(allowed) = &self.profile.allowed_kinds {
            if !allowed.contains(&kind) {
                return self.refuse(
                    conn,
                    id,
                    format!("blocked: event kind {kind} is not allowed"),
                );
            }
        }
        if let Some(refusal) = self.profile.refused_content.iter().find(|r| {
            r.containing
                .iter()
                .any(|c| event.content.contains(c.as_str()))
        }) {
            let message = refusal.message.clone();
            return self.refuse(conn, id, message);
        }
        let relay_now = self.epoch_secs + now.as_secs();
        let created = event.created_at.as_secs();
        if let Some(window) = self.profile.reject_newer_than {
            if created > relay_now + window.as_secs() {
                return self.refuse(conn, id, "invalid: created_at too late".into());
            }
        }
        let ephemeral = event.kind.is_ephemeral();
        if ephemeral {
            if let Some(age) = self.profile.ephemeral.reject_older_than {
                if created + age.as_secs() < relay_now {
                    return self.refuse(conn, id, "invalid: ephemeral event expired".into());
                }
            }
        }
        if let Some(max) = self.profile.max_event_bytes {
            let size = match self.profile.size_measure {
                SizeMeasure::EventJson => json_len,
                SizeMeasure::EventMessage => message_len,
                SizeMeasure::ContentChars => event.content.chars().count(),
            };
            if size > max {
                match self.profile.oversize.clone() {
                    OversizeReaction::OkFalse(text) => {
                        return self.refuse(conn, id, text.replace("{size}", &size.to_string()));
                    }
                    OversizeReaction::Notice(message) => {
                        *self.counters.rejected.entry("notice".into()).or_default() += 1;
                        return self.send(conn, RelayMessage::Notice { message });
                    }
                }
            }
        }
        self.expire_stored(now);
        if self.answered_as_duplicate(conn, &event) {
            return;
        }
        if let Some(limit) = self.profile.rate_limit.clone() {
            let key = match limit.scope {
                RateScope::Connection => format!("conn:{conn}"),
                RateScope::Pubkey => format!("pubkey:{}", event.pubkey),
                RateScope::Ip => format!("ip:{}", self.connections[&conn].ip),
                RateScope::Server => "server".into(),
            };
            let (bucket, fresh) = match self.buckets.entry(key) {
                std::collections::btree_map::Entry::Occupied(b) => (b.into_mut(), false),
                std::collections::btree_map::Entry::Vacant(b) => (
                    b.insert(Bucket {
                        tokens: limit.capacity,
                        at: now,
                    }),
                    true,
                ),
            };
            if !bucket.take(&limit, now, fresh) {
                match limit.action {
                    RateAction::Reject(message) => return self.refuse(conn, id, message),
                    RateAction::Drop => {
                        self.counters.dropped += 1;
                        return;
                    }
                    RateAction::Delay => {
                        // Wait for the next token; the bucket is spent in advance.
                        let wait = (1.0 - bucket.tokens) / limit.refill_per_sec.max(1e-9);
                        bucket.tokens -= 1.0;
                        // The debt already counts every event queued before this one.
                        let release = (now + Duration::from_secs_f64(wait.max(0.0)))
                            .max(self.delayed.back().map_or(now, |(t, _, _)| *t));
                        self.counters.delayed += 1;
                        self.delayed.push_back((release, conn, event));
                        return;
                    }
                }
            }
        }
        self.accept(conn, event, now);
    }

    fn listeners(&self, event: &Event) -> usize {
        self.index
            .candidates(&p_tags(event))
            .iter()
            .filter_map(|(conn, sub)| self.connections.get(conn)?.subscriptions.get(sub))
            .filter(|(f, _)| f.match_event(event, MatchEventOptions::default()))
            .count()
    }

    /// The cost of a commit, when the relay commits in batches.
    fn commit_cost(&self) -> Option<writer::CommitCost> {
        match self.profile.intake {
            Intake::BatchCommit {
                per_batch,
                per_event,
            } => Some(writer::CommitCost {
                per_batch,
                per_event,
            }),
            _ => None,
        }
    }

    /// An event passed every check: it is committed now, or handed to the batch writer.
    fn accept(&mut self, conn: ConnId, event: Arc<Event>, now: Duration) {
        match self.commit_cost() {
            Some(cost) => self.writer.push(conn, event, now, cost),
            None => self.commit(conn, event, now),
        }
    }

    /// An accepted event is written: answered, stored and broadcast.
    fn commit(&mut self, conn: ConnId, event: Arc<Event>, now: Duration) {
        // The publisher's one copy: the store, the batch and every delivery share it.
        let id = event.id;
        let ephemeral = event.kind.is_ephemeral();
        // Counted only where the profile says something with it (matching is a second pass
        // over the candidates `broadcast` walks).
        let mute = ephemeral && self.profile.ephemeral.mute_without_listener;
        let listeners =
            (mute || self.profile.ok_message.contains("{n}")).then(|| self.listeners(&event));
        if mute && listeners == Some(0) {
            return self.refuse(conn, id, "mute: no one was listening for this".into());
        }
        self.counters.accepted += 1;
        if ephemeral && !self.profile.ephemeral.send_ok {
            self.counters.ok_withheld += 1;
        }
        if !ephemeral || self.profile.ephemeral.send_ok {
            let message = match listeners {
                Some(n) => self.profile.ok_message.replace("{n}", &n.to_string()),
                None => self.profile.ok_message.clone(),
            };
            self.send(
                conn,
                RelayMessage::Ok {
                    id,
                    accepted: true,
                    message,
                },
            );
        }
        self.keep(&event, now);
        match self.profile.delivery_batch {
            Some(debounce) => {
                self.batch.push((event, self.counters.accepted));
                self.batch_flush_at.get_or_insert(now + debounce);
            }
            None => self.broadcast(&event, self.counters.accepted),
        }
    }

    /// Sends `event`, the `accepted`-th event accepted, to every matching subscription that
    /// did not already get it as a stored replay.
    fn broadcast(&mut self, event: &Arc<Event>, accepted: u64) {
        let readable = self.readable(event);
        let stored = self.stored.contains_key(&event.id);
        let mut out = Vec::new();
        // In connection and id order, as walking every subscription would find them.
        for (conn, sub) in self.index.candidates(&p_tags(event)) {
            let Some((filter, made_after)) = self
                .connections
                .get(&conn)
                .and_then(|c| c.subscriptions.get(&sub))
            else {
                continue;
            };
            if stored && accepted <= *made_after {
                continue;
            }
            if filter.match_event(event, MatchEventOptions::default()) {
                out.push((conn, sub));
            }
        }
        if !readable {
            for (conn, _) in out {
                self.withhold(conn, event.id);
            }
            return;
        }
        for (conn, sub) in out {
            self.counters.delivered += 1;
            self.send(
                conn,
                RelayMessage::Event {
                    sub,
                    event: event.clone(),
                },
            );
        }
    }

    /// The next message to a connection.
    pub fn poll_transmit(&mut self) -> Option<(ConnId, RelayMessage)> {
        self.outbox
            .pop_front()
            .map(|(conn, message, _)| (conn, message))
    }

    /// The next message to a connection, and whether it is a stored event replayed to a new
    /// subscription (rather than a live broadcast or an answer).
    pub fn poll_transmit_tagged(&mut self) -> Option<(ConnId, RelayMessage, bool)> {
        self.outbox.pop_front()
    }

    /// The next connection the relay closed on its own.
    pub fn poll_dropped(&mut self) -> Option<ConnId> {
        self.dropped.pop_front()
    }

    /// The next event a connection's subscription matched but was not sent, and why
    /// (`auth-required`: the connection may not read that kind without NIP-42 AUTH).
    pub fn poll_withheld(&mut self) -> Option<(ConnId, EventId, &'static str)> {
        self.withheld.pop_front()
    }

    /// When [`Relay::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        [
            self.delayed.front().map(|(t, _, _)| *t),
            self.writer.poll_timeout(),
            self.batch_flush_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Releases rate-limited events, writes a committed batch and flushes delivery batches
    /// due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        while let Some((at, _, _)) = self.delayed.front() {
            if *at > now {
                break;
            }
            let (_, conn, event) = self.delayed.pop_front().expect("just looked");
            // A copy released earlier may have been stored meanwhile.
            if self.connections.contains_key(&conn) && !self.answered_as_duplicate(conn, &event) {
                self.accept(conn, event, now);
            }
        }
        // Each batch is written at its own time, and the next one starts then.
        if let Some(cost) = self.commit_cost() {
            while let Some(at) = self.writer.poll_timeout().filter(|t| *t <= now) {
                for (conn, event) in self.writer.finish(at, cost) {
                    self.commit(conn, event, at);
                }
            }
        }
        if self.batch_flush_at.is_some_and(|t| t <= now) {
            self.batch_flush_at = None;
            for (event, accepted) in std::mem::take(&mut self.batch) {
                self.broadcast(&event, accepted);
            }
        }
    }
}

/// The values of an event's `p` tags (its recipients, for ContextVM traffic).
fn p_tags(event: &Event) -> Vec<&str> {
    let p = SingleLetterTag::LOWERCASE_P;
    event
        .tags
        .iter()
        .filter(|t| t.single_letter_tag() == Some(p))
        .filter_map(|t| t.content())
        .collect()
}

#[cfg(test)]
mod tests;
