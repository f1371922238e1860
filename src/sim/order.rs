//! Longer than 600 lines because each mechanism it names has its test beside it (the tests
//! are about half the file).
//!
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
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::time::Duration;

/// The mechanism behind an out-of-order or duplicate delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Via {
    /// The copies took different relays, and the reader keeps the first copy of each id.
    OtherRelay,
    /// The relay handled or broadcast a later event before an earlier one.
    RelayConcurrency,
    /// The relay's writer committed a batch sorted by `(created_at, id)`, putting a later
    /// event before an earlier one of the same second (strfry).
    WriterBatchSort,
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
            Via::WriterBatchSort => "writer-batch-sort",
            Via::PublisherConcurrency => "publisher-concurrency",
            Via::ResubscribeReplay => "resubscribe-replay",
            Via::Reconnection => "reconnection",
            Via::Republish => "republish",
            Via::DatagramLink => "datagram-link",
            Via::Unexplained => "unexplained",
        }
    }

    /// Every mechanism, in report order.
    pub const ALL: [Via; 9] = [
        Via::OtherRelay,
        Via::RelayConcurrency,
        Via::WriterBatchSort,
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
pub(crate) struct Arrival {
    /// The reader already had this event id.
    pub duplicate: bool,
    /// A first copy that arrived after a later event of the same author.
    pub reordered: bool,
    /// Why, when it is a duplicate or reordered.
    pub via: Option<Via>,
}

impl Arrival {
    /// The same arrival at a relay whose only reordering of its own is its writer's batch
    /// sort: what the relay did is named for that mechanism.
    pub(crate) fn at_batch_writer(self) -> Arrival {
        Arrival {
            via: self.via.map(|v| match v {
                Via::RelayConcurrency => Via::WriterBatchSort,
                v => v,
            }),
            ..self
        }
    }
}

/// Ordinals of one event at the stages where order can change, for the copy the relay handled
/// last: when a publisher sends an event again (its first copy lost with a dropped
/// connection, say), the copy a reader gets is the re-sent one, and what happened to the first
/// copy explains nothing about it. Each copy carries its own ordinals through the network
/// ([`UpCopy`], [`SentCopy`]), so a copy still on its way cannot be confused with another.
#[derive(Debug, Clone, Copy, Default)]
struct Stages {
    /// The connection the event was first written on to this relay.
    first_conn: Option<u64>,
    /// Written on this relay's uplink: (connection, ordinal).
    wire: Option<(u64, u64)>,
    /// Received by this relay.
    received: Option<u64>,
    /// Last sent on by this relay.
    sent: Option<u64>,
}

/// Follows events through their stages; see the module documentation. Peers are named by
/// `P`: the des world's [`PeerId`], or whatever a live relay knows a connection by.
#[derive(Debug)]
pub(crate) struct OrderTracker<P = PeerId> {
    /// What is known of each event. Only looked up, never iterated into output, so it hashes
    /// (ids are SHA-256 outputs). The des world keeps an entry per event for the whole run:
    /// one entry holding all of it, not a map per fact, so following an event through a stage
    /// is one lookup (with 10,000 clients the maps were larger than any cache, and each
    /// lookup a miss), and forgetting it one removal.
    events: FxHashMap<EventId, Track<P>>,
    /// Readers' first copies in all: one per event and reader, what grows fastest when one
    /// event reaches many readers.
    copies: usize,
    /// Per reader, then author: the latest-made event delivered so far, through which relay,
    /// and its stages there when it was delivered (a later pass must not rewrite what it
    /// overtook).
    newest: BTreeMap<P, BTreeMap<P, Newest>>,
    /// Entries in `newest`, and how many there were after the last pruning (see
    /// [`OrderTracker::prune_newest`]).
    newest_entries: usize,
    pruned_at: usize,
    counter: u64,
}

/// What is known of one event.
#[derive(Debug)]
struct Track<P> {
    /// Its author and the ordinal at which the author made it (`None`: not made in this
    /// world, such as a recording's foreign event, or not yet).
    made: Option<(P, u64)>,
    /// When it was made (meaningful with `made`).
    made_at: Duration,
    /// Its stages at each relay it met: most events meet one, held inline.
    relays: SmallVec<[(usize, Stages); 1]>,
    /// The relay whose copy each reader took first.
    readers: Readers<P>,
}

impl<P> Default for Track<P> {
    fn default() -> Self {
        Track {
            made: None,
            made_at: Duration::ZERO,
            relays: SmallVec::new(),
            readers: Readers::default(),
        }
    }
}

/// One copy of an event a relay sent: the event's stages as they were when it left the relay.
/// A reader's copy is judged by these, not by the event's stages at delivery, since the relay
/// may have received and sent the event again (a publisher's re-send) while this copy was on
/// its way.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SentCopy(Stages);

/// One copy of an event on its way to a relay and through its intake.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UpCopy {
    wire: Option<(u64, u64)>,
    received: Option<u64>,
}

/// The latest-made event a reader has had from an author.
#[derive(Debug, Clone, Copy)]
struct Newest {
    made: u64,
    relay: usize,
    stages: Stages,
}

impl<P> Default for OrderTracker<P> {
    fn default() -> Self {
        OrderTracker {
            events: FxHashMap::default(),
            copies: 0,
            newest: BTreeMap::new(),
            newest_entries: 0,
            pruned_at: 0,
            counter: 0,
        }
    }
}

/// The readers that took a copy of one event, with the relay of their first copy: a short list
/// while few (most events have one reader, held inline), a map once many (one event broadcast
/// to many subscribers of a live relay).
#[derive(Debug)]
enum Readers<P> {
    Few(SmallVec<[(P, usize); 1]>),
    Many(BTreeMap<P, usize>),
}

impl<P> Default for Readers<P> {
    fn default() -> Self {
        Readers::Few(SmallVec::new())
    }
}

impl<P: Ord + Copy> Readers<P> {
    /// Readers beyond which a list is slower than a map.
    const FEW: usize = 16;

    fn get(&self, reader: &P) -> Option<&usize> {
        match self {
            Readers::Few(list) => list.iter().find(|(p, _)| p == reader).map(|(_, r)| r),
            Readers::Many(map) => map.get(reader),
        }
    }

    /// Records `reader`'s first copy unless it has one; true if it is new.
    fn insert_first(&mut self, reader: P, relay: usize) -> bool {
        if self.get(&reader).is_some() {
            return false;
        }
        match self {
            Readers::Few(list) if list.len() < Self::FEW => list.push((reader, relay)),
            Readers::Few(list) => {
                let mut map: BTreeMap<P, usize> = list.drain(..).collect();
                map.insert(reader, relay);
                *self = Readers::Many(map);
            }
            Readers::Many(map) => {
                map.insert(reader, relay);
            }
        }
        true
    }

    fn len(&self) -> usize {
        match self {
            Readers::Few(list) => list.len(),
            Readers::Many(map) => map.len(),
        }
    }
}

impl<P: Ord + Copy> OrderTracker<P> {
    fn tick(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    fn stage(&mut self, relay: usize, event: EventId) -> &mut Stages {
        let relays = &mut self.events.entry(event).or_default().relays;
        let at = match relays.iter().position(|(r, _)| *r == relay) {
            Some(at) => at,
            None => {
                relays.push((relay, Stages::default()));
                relays.len() - 1
            }
        };
        &mut relays[at].1
    }

    /// Forgets `event`: a long-running live relay keeps only the latest events' stages, so
    /// its memory stays bounded. A disturbance involving a forgotten event names no
    /// mechanism; with [`crate::relay::MAX_STORED_EVENTS`] events kept, that takes a delivery
    /// overtaken by a hundred thousand later publications.
    // Only live relays run long enough to need it.
    #[cfg_attr(not(feature = "live"), allow(dead_code))]
    pub(crate) fn forget(&mut self, event: EventId) -> Option<P> {
        let track = self.events.remove(&event)?;
        self.copies -= track.readers.len();
        track.made.map(|(author, _)| author)
    }

    /// Forgets `reader`, which will read nothing more (a live connection that ended; its
    /// first copies go with their events).
    #[cfg_attr(not(feature = "live"), allow(dead_code))]
    pub(crate) fn forget_reader(&mut self, reader: P) {
        if let Some(authors) = self.newest.remove(&reader) {
            self.newest_entries -= authors.len();
        }
    }

    /// Drops the `newest` entries of events made before every event still remembered. Such
    /// an entry can decide nothing: a remembered event arriving later was made after it, so it
    /// replaces the entry without being called reordered, and a forgotten one is not compared.
    /// Run when the entries have doubled since the last pruning, so it costs O(1) per entry
    /// amortised, and a reader that stays connected while authors come and go stays bounded.
    fn prune_newest(&mut self) {
        if self.newest_entries <= 2 * self.pruned_at + 1024 {
            return;
        }
        let floor = self
            .events
            .values()
            .filter_map(|t| t.made.map(|(_, made)| made))
            .min();
        let mut entries = 0;
        self.newest.retain(|_, authors| {
            authors.retain(|_, n| floor.is_some_and(|f| n.made >= f));
            entries += authors.len();
            !authors.is_empty()
        });
        self.newest_entries = entries;
        self.pruned_at = entries;
    }

    /// How many (event, reader) first copies are remembered.
    #[cfg_attr(not(feature = "live"), allow(dead_code))]
    pub(crate) fn copies(&self) -> usize {
        self.copies
    }

    /// `author` made `event` at `at` (the first time only: a re-send keeps its place and
    /// its time).
    pub(crate) fn made(&mut self, author: P, event: EventId, at: Duration) {
        let next = self.counter + 1;
        let track = self.events.entry(event).or_default();
        if track.made.is_none() {
            track.made = Some((author, next));
            track.made_at = at;
            self.counter = next;
        }
    }

    /// When `event` was made, if it was made here.
    pub(crate) fn made_at(&self, event: &EventId) -> Option<Duration> {
        let track = self.events.get(event)?;
        track.made.map(|_| track.made_at)
    }

    /// `event` was written on the uplink to `relay` over connection `conn`; the copy travels
    /// with the message and is handed to [`received`](Self::received) and
    /// [`handled`](Self::handled).
    pub(crate) fn written(&mut self, relay: usize, conn: u64, event: EventId) -> UpCopy {
        let n = self.tick();
        self.stage(relay, event).first_conn.get_or_insert(conn);
        UpCopy {
            wire: Some((conn, n)),
            received: None,
        }
    }

    /// A relay received `copy` (it starts handling it).
    pub(crate) fn received(&mut self, copy: &mut UpCopy) {
        copy.received = Some(self.tick());
    }

    /// `relay` acted on `copy` of `event` (stored it, broadcast it): what it sends on from now
    /// on is this copy.
    pub(crate) fn handled(&mut self, relay: usize, event: EventId, copy: UpCopy) {
        let stage = self.stage(relay, event);
        stage.wire = copy.wire;
        stage.received = copy.received;
    }

    /// `relay` sent `event` on to a subscriber (`replay`: as a stored event replayed to a new
    /// subscription); the copy is handed to [`delivered`](Self::delivered) when it arrives.
    /// A replayed copy left the relay now, but the event's own sending stage is left as it
    /// was: a replay says nothing about the order in which the relay broadcast live events.
    pub(crate) fn sent(&mut self, relay: usize, event: EventId, replay: bool) -> SentCopy {
        let n = self.tick();
        let mut stages = self.stages_at(relay, event).unwrap_or_default();
        stages.sent = Some(n);
        if !replay {
            *self.stage(relay, event) = stages;
        }
        SentCopy(stages)
    }

    /// `reader` received `copy` of `event` from `relay`; `replay` when the relay sent it as a
    /// stored event in answer to a subscription, `datagram` when the link to the reader or from
    /// the author is in the datagram stress mode.
    pub(crate) fn delivered(
        &mut self,
        reader: P,
        relay: usize,
        (event, copy): (EventId, SentCopy),
        replay: bool,
        datagram: bool,
    ) -> Arrival {
        let track = self.events.entry(event).or_default();
        if let Some(&first) = track.readers.get(&reader) {
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
        if track.readers.insert_first(reader, relay) {
            self.copies += 1;
        }
        let Some((author, made)) = track.made else {
            // Not made in this world (a recording's foreign event): nothing to compare.
            return Arrival {
                duplicate: false,
                reordered: false,
                via: None,
            };
        };
        let newest = self
            .newest
            .get(&reader)
            .and_then(|authors| authors.get(&author))
            .copied();
        if newest.is_none_or(|n| made > n.made) {
            let entry = Newest {
                made,
                relay,
                stages: copy.0,
            };
            if self
                .newest
                .entry(reader)
                .or_default()
                .insert(author, entry)
                .is_none()
            {
                self.newest_entries += 1;
                self.prune_newest();
            }
        }
        let Some(later) = newest.filter(|n| made < n.made) else {
            return Arrival {
                duplicate: false,
                reordered: false,
                via: None,
            };
        };
        let via = if later.relay != relay {
            Via::OtherRelay
        } else if replay {
            Via::ResubscribeReplay
        } else {
            Self::stage_that_swapped(copy.0, later.stages, datagram)
        };
        Arrival {
            duplicate: false,
            reordered: true,
            via: Some(via),
        }
    }

    fn stages_at(&self, relay: usize, event: EventId) -> Option<Stages> {
        let relays = &self.events.get(&event)?.relays;
        relays.iter().find(|(r, _)| *r == relay).map(|(_, s)| *s)
    }

    /// The first stage at which a later event got ahead of this one, given the stages of
    /// the two copies the reader got: `a` (this one) and `b` (the later one's).
    fn stage_that_swapped(a: Stages, b: Stages, datagram: bool) -> Via {
        let ahead = |x: Option<u64>, y: Option<u64>| matches!((x, y), (Some(x), Some(y)) if y < x);
        let differ =
            |x: Option<u64>, y: Option<u64>| matches!((x, y), (Some(x), Some(y)) if x != y);
        let conn = |s: &Stages| s.wire.map(|(c, _)| c);
        let ordinal = |s: &Stages| s.wire.map(|(_, n)| n);
        if differ(a.first_conn, b.first_conn) || differ(conn(&a), conn(&b)) {
            Via::Reconnection
        } else if ahead(ordinal(&a), ordinal(&b)) {
            Via::PublisherConcurrency
        } else if ahead(a.received, b.received) {
            if datagram {
                Via::DatagramLink
            } else {
                Via::Unexplained
            }
        } else if ahead(a.sent, b.sent) {
            Via::RelayConcurrency
        } else if datagram {
            Via::DatagramLink
        } else {
            Via::Unexplained
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

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
        let mut copies = BTreeMap::new();
        for n in wire {
            copies.insert(n, t.written(relay, 7, id(n)));
        }
        for n in received {
            let copy = copies.get_mut(&n).expect("written");
            t.received(copy);
            t.handled(relay, id(n), *copy);
        }
        for n in sent {
            t.sent(relay, id(n), false);
        }
    }

    /// Event `n` reaches `relay` and the relay acts on it.
    fn arrive(t: &mut OrderTracker, relay: usize, n: u8) {
        let mut copy = t.written(relay, 7, id(n));
        t.received(&mut copy);
        t.handled(relay, id(n), copy);
    }

    /// `READER` gets the copy `relay` sent last.
    fn deliver(t: &mut OrderTracker, relay: usize, n: u8, replay: bool, datagram: bool) -> Arrival {
        let copy = SentCopy(t.stages_at(relay, id(n)).unwrap_or_default());
        t.delivered(READER, relay, (id(n), copy), replay, datagram)
    }

    fn made(t: &mut OrderTracker) {
        t.made(AUTHOR, id(1), Duration::ZERO);
        t.made(AUTHOR, id(2), Duration::ZERO);
    }

    #[test]
    fn in_order_deliveries_need_no_explanation() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        for n in [1, 2] {
            let a = deliver(&mut t, 0, n, false, false);
            assert_eq!((a.duplicate, a.reordered, a.via), (false, false, None));
        }
    }

    #[test]
    fn a_relay_that_sends_a_later_event_first_is_named() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [2, 1]);
        deliver(&mut t, 0, 2, false, false);
        let a = deliver(&mut t, 0, 1, false, false);
        assert_eq!(a.via, Some(Via::RelayConcurrency));
        assert!(a.reordered);
    }

    #[test]
    fn a_publisher_that_writes_a_later_event_first_is_named() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [2, 1], [2, 1], [2, 1]);
        deliver(&mut t, 0, 2, false, false);
        assert_eq!(
            deliver(&mut t, 0, 1, false, false).via,
            Some(Via::PublisherConcurrency)
        );
    }

    #[test]
    fn copies_through_two_relays_are_named() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        through(&mut t, 1, [1, 2], [1, 2], [1, 2]);
        deliver(&mut t, 1, 2, false, false);
        let a = deliver(&mut t, 0, 1, false, false);
        assert_eq!((a.reordered, a.via), (true, Some(Via::OtherRelay)));
        let dup = deliver(&mut t, 0, 2, false, false);
        assert_eq!((dup.duplicate, dup.via), (true, Some(Via::OtherRelay)));
    }

    #[test]
    fn a_stored_replay_is_named() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        deliver(&mut t, 0, 1, false, false);
        let dup = deliver(&mut t, 0, 1, true, false);
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
        deliver(&mut t, 0, 1, false, false);
        t.forget(id(1));
        assert!(!t.events.contains_key(&id(1)));
        assert_eq!(t.copies(), 0, "its one reader's first copy went with it");
        // Event 2 is still followed: its first delivery is neither a copy nor a reordering.
        let a = deliver(&mut t, 0, 2, false, false);
        assert_eq!((a.duplicate, a.reordered), (false, false));
        deliver(&mut t, 0, 2, false, false); // a duplicate adds no first copy
        assert_eq!(t.copies(), 1);
        assert!(t.events.get(&id(2)).is_some_and(|t| !t.relays.is_empty()));
    }

    #[test]
    fn a_reader_that_is_gone_leaves_nothing_behind() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        deliver(&mut t, 0, 2, false, false);
        assert_eq!(t.newest_entries, 1);
        t.forget_reader(READER);
        assert!(t.newest.is_empty());
        assert_eq!(t.newest_entries, 0);
    }

    /// A reader that stays while thousands of authors come and go: the entries of forgotten
    /// events are pruned, and the remembered events' order is still judged.
    #[test]
    fn newest_entries_of_forgotten_events_are_pruned_without_changing_a_verdict() {
        let mut t = OrderTracker::<u64>::default();
        let reader = 0;
        let event = |n: u64| EventId::from_byte_array(Sha256::digest(n.to_le_bytes()).into());
        for n in 1..=10_000u64 {
            t.made(n, event(n), Duration::ZERO);
            t.delivered(reader, 0, (event(n), SentCopy::default()), false, false);
            if n > 10 {
                t.forget(event(n - 10));
            }
        }
        assert!(
            t.newest_entries < 3_000,
            "{} entries for 10 remembered events",
            t.newest_entries
        );
        // Author 10,001 makes two events; the later-made one arrives first.
        let (a, b) = (event(20_001), event(20_002));
        t.made(10_001, a, Duration::ZERO);
        t.made(10_001, b, Duration::ZERO);
        t.delivered(reader, 0, (b, SentCopy::default()), false, false);
        let late = t.delivered(reader, 0, (a, SentCopy::default()), false, false);
        assert!(late.reordered);
    }

    #[test]
    fn a_swap_no_mechanism_explains_is_flagged() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        deliver(&mut t, 0, 2, false, false);
        assert_eq!(
            deliver(&mut t, 0, 1, false, false).via,
            Some(Via::Unexplained)
        );
        // The same swap on a datagram link is that link's doing.
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]);
        deliver(&mut t, 0, 2, false, true);
        assert_eq!(
            deliver(&mut t, 0, 1, false, true).via,
            Some(Via::DatagramLink)
        );
    }

    /// Soak run 18827: the first copies of events 1 and 2 went out on a connection that
    /// dropped and reached nobody; the publisher sent both again and the relay handled 2
    /// before 1 the second time. The reader's copies are the second ones, so their second pass
    /// explains the order.
    #[test]
    fn a_re_sent_event_is_judged_by_the_copy_the_reader_got() {
        let mut t = OrderTracker::default();
        made(&mut t);
        through(&mut t, 0, [1, 2], [1, 2], [1, 2]); // the first pass, lost on the way down
        through(&mut t, 0, [1, 2], [1, 2], [2, 1]);
        deliver(&mut t, 0, 2, false, false);
        let a = deliver(&mut t, 0, 1, false, false);
        assert_eq!((a.reordered, a.via), (true, Some(Via::RelayConcurrency)));
    }

    /// Soak run 99181: the relay sent event 2, then 1, then 2 again (a publisher's re-send,
    /// broadcast again) before the reader got the first copy of 2. The later pass must not
    /// rewrite the stages of the copy the reader already had.
    #[test]
    fn a_later_pass_does_not_rewrite_a_delivered_copy() {
        let mut t = OrderTracker::default();
        made(&mut t);
        for n in [1, 2] {
            arrive(&mut t, 0, n);
        }
        let two = t.sent(0, id(2), false);
        let one = t.sent(0, id(1), false);
        arrive(&mut t, 0, 2);
        let two_again = t.sent(0, id(2), false);
        t.delivered(READER, 0, (id(2), two), false, false);
        let a = t.delivered(READER, 0, (id(1), one), false, false);
        assert_eq!((a.reordered, a.via), (true, Some(Via::RelayConcurrency)));
        let dup = t.delivered(READER, 0, (id(2), two_again), false, false);
        assert_eq!((dup.duplicate, dup.via), (true, Some(Via::Republish)));
    }

    /// Soak run 55804: a reader resubscribed while the relay was still handling event 1; the
    /// replay of stored events carried event 2, handled first, and event 1 came live after.
    #[test]
    fn a_replayed_later_event_ahead_of_a_live_earlier_one_is_the_relay_s_concurrency() {
        let mut t = OrderTracker::default();
        made(&mut t);
        for n in [1, 2] {
            arrive(&mut t, 0, n);
        }
        let two = t.sent(0, id(2), true);
        let one = t.sent(0, id(1), false);
        t.delivered(READER, 0, (id(2), two), true, false);
        let a = t.delivered(READER, 0, (id(1), one), false, false);
        assert_eq!((a.reordered, a.via), (true, Some(Via::RelayConcurrency)));
    }

    /// Property-test case: the publisher wrote event 2 before event 1 (its pipeline is
    /// concurrent), then wrote 2 again while the first copy was still on its way. The relay
    /// got the first copy of 2, then 1; the second copy's write must not stand in for the
    /// first's.
    #[test]
    fn a_copy_keeps_its_own_write_when_the_event_is_written_again() {
        let mut t = OrderTracker::default();
        made(&mut t);
        let mut two = t.written(0, 7, id(2));
        let mut one = t.written(0, 7, id(1));
        let _two_again = t.written(0, 7, id(2));
        t.received(&mut two);
        t.handled(0, id(2), two);
        t.received(&mut one);
        t.handled(0, id(1), one);
        let two = t.sent(0, id(2), false);
        let one = t.sent(0, id(1), false);
        t.delivered(READER, 0, (id(2), two), false, false);
        let a = t.delivered(READER, 0, (id(1), one), false, false);
        assert_eq!(
            (a.reordered, a.via),
            (true, Some(Via::PublisherConcurrency))
        );
    }
}
