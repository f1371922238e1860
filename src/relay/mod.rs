//! The relay model: NIP-01 semantics as a sans-IO state machine. Connections send client
//! messages in; relay messages come out through [`Relay::poll_transmit`].
//!
//! This is the relay's core behaviour (subscriptions, filter matching, verification, OK
//! verdicts, broadcast of ephemeral events to live subscribers). Profiles of real relays and
//! impairments build on it.

use crate::peer::nip01::{ClientMessage, RelayMessage};
use nostr::prelude::{Event, Filter, MatchEventOptions};
use std::collections::{BTreeMap, VecDeque};

/// Identifies one connection to a relay.
pub type ConnId = u64;

/// Relay limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayLimits {
    /// Largest event, measured on its serialized JSON; larger ones get
    /// `OK false "invalid: event too large: N"` (strfry's wording).
    pub max_event_bytes: Option<usize>,
    /// Subscriptions per connection.
    pub max_subscriptions: usize,
}

impl Default for RelayLimits {
    fn default() -> Self {
        RelayLimits {
            max_event_bytes: None,
            max_subscriptions: 200,
        }
    }
}

#[derive(Debug, Default)]
struct Connection {
    subscriptions: BTreeMap<String, Filter>,
}

/// Counters of what a relay did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayCounters {
    /// Events received.
    pub received: u64,
    /// Events accepted.
    pub accepted: u64,
    /// Events rejected (any reason).
    pub rejected: u64,
    /// Copies delivered to subscribers.
    pub delivered: u64,
}

/// One relay.
#[derive(Debug)]
pub struct Relay {
    limits: RelayLimits,
    connections: BTreeMap<ConnId, Connection>,
    outbox: VecDeque<(ConnId, RelayMessage)>,
    counters: RelayCounters,
}

impl Relay {
    /// A relay with the given limits.
    pub fn new(limits: RelayLimits) -> Self {
        Relay {
            limits,
            connections: BTreeMap::new(),
            outbox: VecDeque::new(),
            counters: RelayCounters::default(),
        }
    }

    /// What the relay has done so far.
    pub fn counters(&self) -> &RelayCounters {
        &self.counters
    }

    /// A connection opens.
    pub fn connect(&mut self, conn: ConnId) {
        self.connections.entry(conn).or_default();
    }

    /// A connection closes; its subscriptions go with it.
    pub fn disconnect(&mut self, conn: ConnId) {
        self.connections.remove(&conn);
    }

    /// A message from `conn`.
    pub fn handle_client_message(&mut self, conn: ConnId, message: ClientMessage) {
        if !self.connections.contains_key(&conn) {
            return;
        }
        match message {
            ClientMessage::Event(event) => self.on_event(conn, *event),
            ClientMessage::Req { sub, filter } => {
                let c = self.connections.get_mut(&conn).expect("checked");
                if !c.subscriptions.contains_key(&sub)
                    && c.subscriptions.len() >= self.limits.max_subscriptions
                {
                    self.outbox.push_back((
                        conn,
                        RelayMessage::Closed {
                            sub,
                            message: "error: too many subscriptions".into(),
                        },
                    ));
                    return;
                }
                // A REQ with an existing id replaces it. Ephemeral events are not stored, so
                // there is nothing to replay before EOSE.
                c.subscriptions.insert(sub.clone(), *filter);
                self.outbox.push_back((conn, RelayMessage::Eose { sub }));
            }
            ClientMessage::Close { sub } => {
                if let Some(c) = self.connections.get_mut(&conn) {
                    c.subscriptions.remove(&sub);
                }
            }
        }
    }

    fn on_event(&mut self, conn: ConnId, event: Event) {
        self.counters.received += 1;
        let id = event.id;
        let size = event.as_json().len();
        let verdict = if event.verify().is_err() {
            Err("invalid: bad event id or signature".to_owned())
        } else if self.limits.max_event_bytes.is_some_and(|max| size > max) {
            Err(format!("invalid: event too large: {size}"))
        } else {
            Ok(())
        };
        match verdict {
            Err(message) => {
                self.counters.rejected += 1;
                self.outbox.push_back((
                    conn,
                    RelayMessage::Ok {
                        id,
                        accepted: false,
                        message,
                    },
                ));
            }
            Ok(()) => {
                self.counters.accepted += 1;
                self.outbox.push_back((
                    conn,
                    RelayMessage::Ok {
                        id,
                        accepted: true,
                        message: String::new(),
                    },
                ));
                self.broadcast(&event);
            }
        }
    }

    fn broadcast(&mut self, event: &Event) {
        for (conn, c) in &self.connections {
            for (sub, filter) in &c.subscriptions {
                if filter.match_event(event, MatchEventOptions::default()) {
                    self.counters.delivered += 1;
                    self.outbox.push_back((
                        *conn,
                        RelayMessage::Event {
                            sub: sub.clone(),
                            event: Box::new(event.clone()),
                        },
                    ));
                }
            }
        }
    }

    /// The next message to a connection.
    pub fn poll_transmit(&mut self) -> Option<(ConnId, RelayMessage)> {
        self.outbox.pop_front()
    }
}
