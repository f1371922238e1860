//! The relay→peer side of a live world: relay output onto each connection's impaired link,
//! and deliveries to sockets with their order marks, counters and request/response pairs.

use super::{event_text, micros, record, to_wire, Action, World};
use crate::live::outbox::OutboxError;
use crate::nip01::RelayMessage;
use crate::relay::impair::{Direction, Ordering};
use crate::relay::ConnId;
use crate::sim::order::{Arrival, SentCopy};
use nostr::prelude::EventId;
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
        let event = match &message {
            RelayMessage::Event { event, .. } => Some((event.id, replay)),
            _ => None,
        };
        let delays = if event.is_some() {
            c.down.0.plan(&down)
        } else {
            c.down.0.plan(&Direction {
                delay: down.delay.clone(),
                ..Default::default()
            })
        };
        let text = match &message {
            RelayMessage::Event { sub, event } => {
                event_text::event_frame(sub, &self.event_texts.get(event))
            }
            other => to_wire(other),
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let sent = now.max(c.stalled_until);
        let arrivals = c.down.1.arrivals(&down, sent, text.len(), &delays, true);
        let peer = c.peer.clone();
        let event = event.map(|(id, replay)| {
            let copy = match replay {
                true => self.order.replayed(relay, id),
                false => self.order.sent(relay, id),
            };
            self.link_fate(relay, &peer, "down", Some(id), arrivals.len());
            (id, replay, copy)
        });
        for at in arrivals {
            self.schedule(
                at,
                Action::ToClient {
                    conn,
                    text: text.clone(),
                    event,
                },
            );
        }
    }

    pub(super) fn deliver(
        &mut self,
        conn: ConnId,
        text: String,
        event: Option<(EventId, bool, SentCopy)>,
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
        match c.out.push(Message::text(text.clone())) {
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
        let arrival = event.map(|(id, replay, copy)| {
            let datagram = self.slots[relay].up.ordering == Ordering::Datagram
                || self.slots[relay].down.ordering == Ordering::Datagram;
            self.order
                .delivered(reader, relay, (id, copy), replay, datagram)
        });
        if event.is_some() {
            self.count_delivery(relay, arrival, now, &text);
        }
        self.see(record::Seen::FromRelay {
            relay: self.slots[relay].name.clone(),
            peer,
            text,
            arrival,
            latency_us: event
                .and_then(|(id, _, _)| self.published_at.get(&id))
                .map(|p| micros(now.saturating_sub(*p))),
        });
    }

    pub(super) fn count_delivery(
        &mut self,
        relay: usize,
        arrival: Option<Arrival>,
        now: Duration,
        text: &str,
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
        // Only what pairing needs is read, borrowing from the text (no copy of a large
        // content without escapes), and nothing at all for a copy the reader already had.
        if arrival.is_some_and(|a| a.duplicate) {
            return;
        }
        if let Ok(EventFrame(_, _, event)) = serde_json::from_str::<EventFrame>(text) {
            let tagged = event.tags.iter().filter_map(|t| match t.as_slice() {
                [name, id, ..] if name == "e" => Some(id.as_ref()),
                _ => None,
            });
            self.pairs
                .delivered_parts(micros(now), event.kind, tagged, &event.content);
        }
    }
}

/// `["EVENT", sub, event]` as pairing reads it.
#[derive(serde::Deserialize)]
struct EventFrame<'a>(
    serde::de::IgnoredAny,
    serde::de::IgnoredAny,
    #[serde(borrow)] DeliveredEvent<'a>,
);

/// The fields of a delivered event that pairing reads.
#[derive(serde::Deserialize)]
struct DeliveredEvent<'a> {
    kind: u64,
    #[serde(borrow)]
    tags: Vec<Vec<std::borrow::Cow<'a, str>>>,
    #[serde(borrow)]
    content: std::borrow::Cow<'a, str>,
}
