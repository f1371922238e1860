//! Why a delivery arrived out of order or twice.
//!
//! A reader's view of one author's events can differ from the order the author made them only
//! through a mechanism that exists in a real deployment (see `docs/physics.md`): several
//! relays, a relay's own concurrency, the publisher's concurrency, a new subscription's replay
//! of stored events, a reconnection, a publisher sending the same event again — or the
//! datagram stress mode, which no single WebSocket has. The [`OrderTracker`] follows each
//! event through the stages where order can change (made by the author, written on an uplink,
//! received by a relay, sent by the relay, delivered) and names the first stage at which a
//! later event got ahead, so every out-of-order or duplicate delivery in a trace says why.

use super::world::PeerId;
use nostr::prelude::EventId;
use std::collections::BTreeMap;

/// The mechanism behind an out-of-order or duplicate delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Via {
    /// The copies took different relays, and the reader keeps the first copy of each id.
    OtherRelay,
    /// The relay handled or broadcast a later event before an earlier one.
    RelayConcurrency,
    /// The publisher wrote a later event on the wire before an earlier one.
    PublisherConcurrency,
    /// A new subscription got stored events back, after newer live ones.
    ResubscribeReplay,
    /// The author's connection to the relay changed between the two events.
    Reconnection,
    /// The publisher sent the same event again and the relay broadcast it again.
    Republish,
    /// A datagram-mode link (a stress mode, not a WebSocket).
    DatagramLink,
    /// No mechanism explains it: a simulator bug (tests assert this never happens).
    Unexplained,
}

impl Via {
    /// The name traces and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Via::OtherRelay => "other-relay",
            Via::RelayConcurrency => "relay-concurrency",
            Via::PublisherConcurrency => "publisher-concurrency",
            Via::ResubscribeReplay => "resubscribe-replay",
            Via::Reconnection => "reconnection",
            Via::Republish => "republish",
            Via::DatagramLink => "datagram-link",
            Via::Unexplained => "unexplained",
        }
    }

    /// Every mechanism, in report order.
    pub const ALL: [Via; 8] = [
        Via::OtherRelay,
        Via::RelayConcurrency,
        Via::PublisherConcurrency,
        Via::ResubscribeReplay,
        Via::Reconnection,
        Via::Republish,
        Via::DatagramLink,
        Via::Unexplained,
    ];

    /// The mechanism named `name`.
    pub fn from_name(name: &str) -> Option<Via> {
        Via::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// How a delivery relates to what the reader already had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The reader already had this event id.
    pub duplicate: bool,
    /// A first copy that arrived after a later event of the same author.
    pub reordered: bool,
    /// Why, when it is a duplicate or reordered.
    pub via: Option<Via>,
}

/// Ordinals of one event at the stages where order can change.
#[derive(Debug, Clone, Copy, Default)]
struct Stages {
    /// Written on this relay's uplink: (connection, ordinal).
    wire: Option<(u64, u64)>,
    /// Received by this relay.
    received: Option<u64>,
    /// First sent on by this relay.
    sent: Option<u64>,
}

/// Follows events through their stages; see the module documentation. Peers are named by
/// `P`: the des world's [`PeerId`], or whatever a live relay knows a connection by.
#[derive(Debug)]
pub struct OrderTracker<P = PeerId> {
    /// Author and the ordinal at which the author made it.
    made: BTreeMap<EventId, (P, u64)>,
    /// By event, then relay (so forgetting an event is one removal).
    stages: BTreeMap<EventId, BTreeMap<usize, Stages>>,
    /// The relay whose copy each reader took first.
    first_copy: BTreeMap<EventId, BTreeMap<P, usize>>,
    /// Per reader and author: the latest-made event delivered so far, and through which relay.
    newest: BTreeMap<(P, P), (u64, EventId, usize)>,
    counter: u64,
}

impl<P> Default for OrderTracker<P> {
    fn default() -> Self {
        OrderTracker {
            made: BTreeMap::new(),
            stages: BTreeMap::new(),
            first_copy: BTreeMap::new(),
            newest: BTreeMap::new(),
            counter: 0,
        }
    }
}

impl<P: Ord + Copy> OrderTracker<P> {
    fn tick(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    fn stage(&mut self, relay: usize, event: EventId) -> &mut Stages {
        self.stages
            .entry(event)
            .or_default()
            .entry(relay)
            .or_default()
    }

    /// Forgets `event`: a long-running live relay keeps only the latest events' stages, so
    /// its memory stays bounded. A disturbance involving a forgotten event names no
    /// mechanism; with [`crate::relay::MAX_STORED_EVENTS`] events kept, that takes a delivery
    /// overtaken by a hundred thousand later publications.
    // Only live relays run long enough to need it.
    #[cfg_attr(not(feature = "live"), allow(dead_code))]
    pub fn forget(&mut self, event: EventId) {
        self.made.remove(&event);
        self.stages.remove(&event);
        self.first_copy.remove(&event);
    }

    /// `author` made `event` (the first time only: a re-send keeps its place).
    pub fn made(&mut self, author: P, event: EventId) {
        if !self.made.contains_key(&event) {
            let n = self.tick();
            self.made.insert(event, (author, n));
        }
    }

    /// `event` was written on the uplink to `relay` over connection `conn`.
    pub fn written(&mut self, relay: usize, conn: u64, event: EventId) {
        let n = self.tick();
        let stage = self.stage(relay, event);
        stage.wire.get_or_insert((conn, n));
    }

    /// `relay` received `event`.
    pub fn received(&mut self, relay: usize, event: EventId) {
        let n = self.tick();
        self.stage(relay, event).received.get_or_insert(n);
    }

    /// `relay` sent `event` on to a subscriber.
    pub fn sent(&mut self, relay: usize, event: EventId) {
        let n = self.tick();
        self.stage(relay, event).sent.get_or_insert(n);
    }

    /// `reader` received `event` from `relay`; `replay` when the relay sent it as a stored
    /// event in answer to a subscription, `datagram` when the link to the reader or from the
    /// author is in the datagram stress mode.
    pub fn delivered(
        &mut self,
        reader: P,
        relay: usize,
        event: EventId,
        replay: bool,
        datagram: bool,
    ) -> Arrival {
        if let Some(&first) = self.first_copy.get(&event).and_then(|m| m.get(&reader)) {
            let via = if first != relay {
                Via::OtherRelay
            } else if replay {
                Via::ResubscribeReplay
            } else if datagram {
                Via::DatagramLink
            } else {
                Via::Republish
            };
            return Arrival {
                duplicate: true,
                reordered: false,
                via: Some(via),
            };
        }
        self.first_copy
            .entry(event)
            .or_default()
            .insert(reader, relay);
        let Some(&(author, made)) = self.made.get(&event) else {
            // Not made in this world (a recording's foreign event): nothing to compare.
            return Arrival {
                duplicate: false,
                reordered: false,
                via: None,
            };
        };
        let newest = self.newest.get(&(reader, author)).copied();
        if newest.is_none_or(|(n, _, _)| made > n) {
            self.newest.insert((reader, author), (made, event, relay));
        }
        let Some((_, later, later_relay)) = newest.filter(|(n, _, _)| made < *n) else {
            return Arrival {
                duplicate: false,
                reordered: false,
                via: None,
            };
        };
        let via = if later_relay != relay {
            Via::OtherRelay
        } else if replay {
            Via::ResubscribeReplay
        } else {
            self.stage_that_swapped(relay, event, later, datagram)
        };
        Arrival {
            duplicate: false,
            reordered: true,
            via: Some(via),
        }
    }

    /// The first stage at which `later` got ahead of `event` on `relay`.
    fn stage_that_swapped(
        &self,
        relay: usize,
        event: EventId,
        later: EventId,
        datagram: bool,
    ) -> Via {
        let (Some(a), Some(b)) = (
            self.stages.get(&event).and_then(|m| m.get(&relay)),
            self.stages.get(&later).and_then(|m| m.get(&relay)),
        ) else {
            return Via::Unexplained;
        };
        let ahead = |x: Option<u64>, y: Option<u64>| matches!((x, y), (Some(x), Some(y)) if y < x);
        match (a.wire, b.wire) {
            (Some((conn_a, _)), Some((conn_b, _))) if conn_a != conn_b => Via::Reconnection,
            (Some((_, wa)), Some((_, wb))) if wb < wa => Via::PublisherConcurrency,
            _ if ahead(a.received, b.received) => {
                if datagram {
                    Via::DatagramLink
                } else {
                    Via::Unexplained
                }
            }
            _ if ahead(a.sent, b.sent) => Via::RelayConcurrency,
            _ if datagram => Via::DatagramLink,
            _ => Via::Unexplained,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> EventId {
        EventId::from_byte_array([n; 32])
    }

    const AUTHOR: PeerId = PeerId::Server(0);
    const READER: PeerId = PeerId::Client(0);

    /// Makes events 1 and 2 and takes them through `relay` in the orders given.
    fn through(
        t: &mut OrderTracker,
        relay: usize,
        wire: [u8; 2],
        received: [u8; 2],
        sent: [u8; 2],
    ) {
        for n in wire {
            t.written(relay, 7, id(n));
        }
        for n in received {
            t.received(relay, id(n));
        }
        for n in sent {
            t.sent(relay, id(n));
        }
    }

    fn made(t: &mut OrderTracker) {
        t.made(AUTHOR, id(1));
        t.made(AUTHOR, id(2));
    }

    #[test]
    fn in_order_deliveries_need_no_explanation() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        for n in [1, 2] {
            let a = t.delivered(READER, 0, id(n), false, false);
            assert_eq!((a.duplicate, a.reordered, a.via), (false, false, None));
        }
    }

    #[test]
    fn a_relay_that_sends_a_later_event_first_is_named() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [2, 1]);
        t.delivered(READER, 0, id(2), false, false);
        let a = t.delivered(READER, 0, id(1), false, false);
        assert_eq!(a.via, Some(Via::RelayConcurrency));
        assert!(a.reordered);
    }

    #[test]
    fn a_publisher_that_writes_a_later_event_first_is_named() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [2, 1], [2, 1], [2, 1]);
        t.delivered(READER, 0, id(2), false, false);
        assert_eq!(
            t.delivered(READER, 0, id(1), false, false).via,
            Some(Via::PublisherConcurrency)
        );
    }

    #[test]
    fn copies_through_two_relays_are_named() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        through(&mut t, 1, [1, 2], [1, 2], [1, 2]);
        t.delivered(READER, 1, id(2), false, false);
        let a = t.delivered(READER, 0, id(1), false, false);
        assert_eq!((a.reordered, a.via), (true, Some(Via::OtherRelay)));
        let dup = t.delivered(READER, 0, id(2), false, false);
        assert_eq!((dup.duplicate, dup.via), (true, Some(Via::OtherRelay)));
    }

    #[test]
    fn a_stored_replay_is_named() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        t.delivered(READER, 0, id(1), false, false);
        let dup = t.delivered(READER, 0, id(1), true, false);
        assert_eq!(
            (dup.duplicate, dup.via),
            (true, Some(Via::ResubscribeReplay))
        );
    }

    #[test]
    fn a_forgotten_event_leaves_nothing_behind() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        t.delivered(READER, 0, id(1), false, false);
        t.forget(id(1));
        assert!(!t.made.contains_key(&id(1)));
        assert!(!t.stages.contains_key(&id(1)));
        assert!(!t.first_copy.contains_key(&id(1)));
        // Event 2 is still followed: its first delivery is neither a copy nor a reordering.
        let a = t.delivered(READER, 0, id(2), false, false);
        assert_eq!((a.duplicate, a.reordered), (false, false));
        assert!(t.stages.contains_key(&id(2)));
    }

    #[test]
    fn a_swap_no_mechanism_explains_is_flagged() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        t.delivered(READER, 0, id(2), false, false);
        assert_eq!(
            t.delivered(READER, 0, id(1), false, false).via,
            Some(Via::Unexplained)
        );
        // The same swap on a datagram link is that link's doing.
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        t.delivered(READER, 0, id(2), false, true);
        assert_eq!(
            t.delivered(READER, 0, id(1), false, true).via,
            Some(Via::DatagramLink)
        );
    }
}
