//! The relay→peer side of a live world: relay output onto each connection's impaired link,
//! and deliveries to sockets with their order marks, counters and request/response pairs.

use super::{micros, record, to_wire, Action, World};
use crate::live::outbox::{OutboxError, Outgoing};
use crate::nip01::RelayMessage;
use crate::relay::impair::{Direction, Ordering};
use crate::relay::ConnId;
use crate::sim::order::{Arrival, SentCopy};
use nostr::prelude::{Event, EventId};
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

impl World {
    /// Counts and traces a datagram link's loss or duplication of one event.
    pub(super) fn link_fate(
        &mut self,
        relay: usize,
        peer: &str,
        way: &str,
        id: Option<EventId>,
        copies: usize,
    ) {
        let name = self.slots[relay].name.clone();
        let counters = &mut self.slots[relay].counters;
        match copies {
            0 => {
                *counters.lost.entry(way.to_owned()).or_default() += 1;
                self.see(record::Seen::Lost {
                    relay: name,
                    peer: peer.to_owned(),
                    way: way.to_owned(),
                    id: id.map(|i| i.to_hex()),
                });
            }
            1 => {}
            n => {
                *counters.duplicated.entry(way.to_owned()).or_default() += 1;
                self.see(record::Seen::Duplicated {
                    relay: name,
                    peer: peer.to_owned(),
                    way: way.to_owned(),
                    copies: n,
                });
            }
        }
    }

    pub(super) fn transmit(
        &mut self,
        relay: usize,
        conn: ConnId,
        message: RelayMessage,
        replay: bool,
        now: Duration,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let down = self.slots[relay].down.clone();
        let delays = if matches!(message, RelayMessage::Event { .. }) {
            c.down.0.plan(&down)
        } else {
            c.down.0.plan(&Direction {
                delay: down.delay.clone(),
                ..Default::default()
            })
        };
        // Made once and shared by every copy on the link; an event's frame is built by the
        // connection's writer, not here.
        let (outgoing, event) = match message {
            RelayMessage::Event { sub, event } => (
                Outgoing::event(&sub, self.event_json.of(&event, &self.signatures)),
                Some(event),
            ),
            other => (Outgoing::Message(Message::text(to_wire(&other))), None),
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let sent = now.max(c.stalled_until);
        let arrivals = c
            .down
            .1
            .arrivals(&down, sent, outgoing.len(), &delays, true);
        let peer = c.peer.clone();
        let event = event.map(|event| {
            // An event forgotten since it was published is no longer followed.
            let copy = if self.published_at.contains_key(&event.id) {
                self.order.sent(relay, event.id, replay)
            } else {
                SentCopy::default()
            };
            self.link_fate(relay, &peer, "down", Some(event.id), arrivals.len());
            Delivery {
                event,
                replay,
                copy,
            }
        });
        for at in arrivals {
            self.schedule(
                at,
                Action::ToClient {
                    conn,
                    outgoing: outgoing.clone(),
                    event: event.clone(),
                },
            );
        }
    }

    pub(super) fn deliver(
        &mut self,
        conn: ConnId,
        outgoing: Outgoing,
        event: Option<Delivery>,
        now: Duration,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.gone {
            return; // the client closed its socket: nothing reaches it any more
        }
        let relay = c.relay;
        let (reader, peer) = (c.reader, c.peer.clone());
        match c.out.push(outgoing.clone()) {
            Ok(()) => {}
            Err(OutboxError::Full) => {
                // A reader that cannot keep up is cut off, as strfry does past its buffer: its
                // socket is dropped at once (a close could not be queued behind the backlog).
                if let Some(kill) = c.kill.take() {
                    let _ = kill.send(());
                }
                self.slots[relay].counters.cut_off += 1;
                self.close(conn, "slow reader");
                return;
            }
            Err(OutboxError::Closed) => return,
        }
        let arrival = event.as_ref().map(|d| {
            let datagram = self.slots[relay].up.ordering == Ordering::Datagram
                || self.slots[relay].down.ordering == Ordering::Datagram;
            if self.published_at.contains_key(&d.event.id) {
                self.order
                    .delivered(reader, relay, (d.event.id, d.copy), d.replay, datagram)
            } else {
                // Forgotten: a disturbance involving it names no mechanism (see the guide).
                Arrival {
                    duplicate: false,
                    reordered: false,
                    via: None,
                }
            }
        });
        if let Some(d) = &event {
            self.count_delivery(relay, arrival, now, &d.event);
        }
        if self.feed.is_none() {
            return; // no trace: no need for the frame's text
        }
        self.see(record::Seen::FromRelay {
            relay: self.slots[relay].name.clone(),
            peer,
            text: outgoing.text(),
            arrival,
            latency_us: event
                .and_then(|d| self.published_at.get(&d.event.id))
                .map(|p| micros(now.saturating_sub(*p))),
        });
    }

    pub(super) fn count_delivery(
        &mut self,
        relay: usize,
        arrival: Option<Arrival>,
        now: Duration,
        event: &Event,
    ) {
        let counters = &mut self.slots[relay].counters;
        counters.delivered += 1;
        if let Some(a) = arrival.filter(|a| a.duplicate || a.reordered) {
            let via = a.via.map_or("unknown", |v| v.name()).to_owned();
            let table = if a.duplicate {
                &mut counters.duplicate_deliveries
            } else {
                &mut counters.reordered_deliveries
            };
            *table.entry(via).or_default() += 1;
        }
        // Nothing for pairing in a copy the reader already had.
        if arrival.is_some_and(|a| a.duplicate) {
            return;
        }
        let tagged = event.tags.iter().filter_map(|t| match t.as_slice() {
            [name, id, ..] if name == "e" => Some(id.as_str()),
            _ => None,
        });
        self.pairs.delivered_parts(
            micros(now),
            u64::from(event.kind.as_u16()),
            tagged,
            &event.content,
        );
    }
}

/// An event delivery on its way to a reader.
#[derive(Debug, Clone)]
pub(super) struct Delivery {
    /// The event.
    pub event: Arc<Event>,
    /// A stored event replayed to a new REQ.
    pub replay: bool,
    /// What the event had been through when this copy left the relay.
    pub copy: SentCopy,
}
