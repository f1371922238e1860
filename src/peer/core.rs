//! What every ContextVM peer does with relays: sign, publish to every relay, subscribe to its
//! own `#p`, drop events it has already seen, and tally each publication's OK verdicts.
//!
//! Publications may go through *lanes*: a lane (one transfer's or one stream's frames) holds
//! its next event back until every relay has answered the previous one, or until a timeout,
//! as the SDKs await each publish (see [`PublishWait`]).

use super::behaviour::{Dedup, MissingOk, OkQuorum, PublishWait, RETRY_EVERY};
use super::event::CONTEXTVM_KIND;
use crate::nip01::{is_size_rejection, ClientMessage, RelayMessage, RelayName};
use crate::nip01::{Identity, EPOCH_SECS};
use nostr::prelude::{Event, EventId, Filter, Kind, PublicKey, Tag};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// The subscription id every peer uses for its ContextVM traffic.
pub const SUBSCRIPTION: &str = "cvm";
/// How many publications may wait for verdicts (relays that never answer must not leak memory).
const PENDING_CAPACITY: usize = 4096;

/// What the relays said about one published event, once all of them answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishOutcome {
    /// At least one relay accepted it.
    Accepted,
    /// No relay accepted it and at least one said it was too large.
    SizeRejected,
    /// No relay accepted it, for other reasons (the first reason given).
    Rejected(String),
}

#[derive(Debug)]
struct Publication {
    waiting: BTreeSet<RelayName>,
    accepted: bool,
    too_large: bool,
    first_reason: Option<String>,
}

/// A peer's clock as relays see it: the `created_at` of its events and the `since` of its
/// subscriptions. Events are stamped in whole seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    /// Seconds this peer's clock runs ahead of the true time (behind when negative).
    pub skew_secs: i64,
    /// Subscribe with `since` set to the peer's own now, as the ContextVM SDKs do: events
    /// stamped earlier (by a peer whose clock is behind, or earlier in the same second before
    /// a resubscription) are filtered out by the relay, live ones included.
    pub subscribe_since: bool,
}

/// The relay-facing half of a peer.
#[derive(Debug)]
pub struct PeerCore {
    identity: Identity,
    relays: Vec<RelayName>,
    /// Unix seconds at virtual time zero: `created_at` of events signed at `now` is this plus
    /// `now`. Simulations use [`EPOCH_SECS`]; live drivers the wall clock at start, because
    /// real relays reject events whose `created_at` is far from their own clock.
    epoch_secs: u64,
    clock: Clock,
    dedup: Dedup,
    seen: FxHashSet<EventId>,
    seen_order: VecDeque<EventId>,
    outbox: VecDeque<(RelayName, ClientMessage)>,
    publications: FxHashMap<EventId, Publication>,
    publication_order: VecDeque<EventId>,
    outcomes: VecDeque<(EventId, PublishOutcome)>,
    duplicates_dropped: u64,
    wait: PublishWait,
    lanes: BTreeMap<String, Lane>,
    /// The lane of each event that holds one back.
    in_flight: FxHashMap<EventId, String>,
    /// A fault for tests of the simulator itself: rewrites an event's content after the peer
    /// made it and before it is signed, so the text that crosses the relay is not what the
    /// peer meant.
    #[cfg(test)]
    pub(crate) tamper: Option<fn(&str) -> Option<String>>,
}

/// One lane's publications: the event being published and the ones waiting for it.
#[derive(Debug, Default)]
struct Lane {
    /// The event whose verdicts the lane waits for.
    in_flight: Option<InFlight>,
    /// Events behind it, in the order they were published.
    held: VecDeque<Arc<Event>>,
}

/// A lane's event awaiting its verdicts: kept whole so it can be published again.
#[derive(Debug)]
struct InFlight {
    event: Arc<Event>,
    /// When the wait (or the next retry) runs out.
    deadline: Duration,
    /// Times it was published again for want of an answer.
    retries: u32,
}

impl PeerCore {
    /// A peer core publishing to `relays`.
    pub fn new(identity: Identity, relays: Vec<RelayName>) -> Self {
        PeerCore {
            identity,
            relays,
            epoch_secs: EPOCH_SECS,
            clock: Clock::default(),
            dedup: super::behaviour::Behaviour::relaysim().dedup,
            seen: FxHashSet::default(),
            seen_order: VecDeque::new(),
            outbox: VecDeque::new(),
            publications: FxHashMap::default(),
            publication_order: VecDeque::new(),
            outcomes: VecDeque::new(),
            duplicates_dropped: 0,
            wait: PublishWait::Immediate,
            lanes: BTreeMap::new(),
            in_flight: FxHashMap::default(),
            #[cfg(test)]
            tamper: None,
        }
    }

    /// Sets whether lanes wait for the relays' verdicts.
    pub fn set_publish_wait(&mut self, wait: PublishWait) {
        self.wait = wait;
    }

    /// Publishes `event` in lane `lane` at `now`: at once when the lane is free (or lanes do
    /// not wait), else after the events before it. Returns the event's id.
    pub fn publish_in_lane(&mut self, lane: &str, event: Arc<Event>, now: Duration) -> EventId {
        let PublishWait::ForOk { .. } = self.wait else {
            return self.publish(event);
        };
        let id = event.id;
        self.lanes
            .entry(lane.to_owned())
            .or_default()
            .held
            .push_back(event);
        self.release(lane, now);
        id
    }

    /// Whether lane `lane` has events waiting or in flight.
    pub fn lane_busy(&self, lane: &str) -> bool {
        self.lanes.contains_key(lane)
    }

    /// Sends lane `lane`'s next event if nothing of it is in flight; forgets an idle lane.
    fn release(&mut self, lane: &str, now: Duration) {
        let PublishWait::ForOk { timeout, .. } = self.wait else {
            return;
        };
        let Some(l) = self.lanes.get_mut(lane) else {
            return;
        };
        if l.in_flight.is_some() {
            return;
        }
        let Some(event) = l.held.pop_front() else {
            self.lanes.remove(lane);
            return;
        };
        l.in_flight = Some(InFlight {
            event: event.clone(),
            deadline: now + timeout,
            retries: 0,
        });
        self.in_flight.insert(event.id, lane.to_owned());
        self.publish(event);
    }

    /// Whether the verdicts on lane event `id` so far end its wait: every relay's, or with
    /// quorum `Any` the first definitive one (the TS pool resolves on an acknowledgement and
    /// throws at once on an `OK false`).
    fn answered(&self, id: &EventId, all_answered: bool) -> bool {
        match self.wait {
            PublishWait::ForOk {
                quorum: OkQuorum::Any,
                ..
            } => {
                all_answered
                    || self
                        .publications
                        .get(id)
                        .is_some_and(|p| p.accepted || p.first_reason.is_some())
            }
            _ => all_answered,
        }
    }

    /// Lane `lane`'s event `id` is done with (every relay answered, or its time ran out).
    fn lane_done(&mut self, id: EventId, now: Duration) {
        let Some(lane) = self.in_flight.remove(&id) else {
            return;
        };
        if let Some(l) = self.lanes.get_mut(&lane) {
            l.in_flight = None;
        }
        self.release(&lane, now);
    }

    /// When the next lane stops waiting for a verdict.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.lanes
            .values()
            .filter_map(|l| l.in_flight.as_ref().map(|f| f.deadline))
            .min()
    }

    /// Lanes whose verdicts did not come in time either go on, as nostr-sdk's `send_event`
    /// returns after its timeout even when every relay failed, or publish the event again to
    /// the relays that have not answered, as the TS pool does.
    pub fn handle_timeout(&mut self, now: Duration) {
        let PublishWait::ForOk {
            timeout, missing, ..
        } = self.wait
        else {
            return;
        };
        let expired: Vec<EventId> = self
            .lanes
            .values()
            .filter_map(|l| l.in_flight.as_ref())
            .filter(|f| f.deadline <= now)
            .map(|f| f.event.id)
            .collect();
        for id in expired {
            let (waiting, rejected): (Vec<RelayName>, bool) = self
                .publications
                .get(&id)
                .map(|p| {
                    (
                        p.waiting.iter().cloned().collect(),
                        p.first_reason.is_some(),
                    )
                })
                .unwrap_or_default();
            if missing == MissingOk::Proceed || waiting.is_empty() || rejected {
                self.lane_done(id, now);
                continue;
            }
            let Some(flight) = self
                .in_flight
                .get(&id)
                .and_then(|lane| self.lanes.get_mut(lane))
                .and_then(|l| l.in_flight.as_mut())
            else {
                continue;
            };
            // The TS pool's schedule (sdk-behaviour §5): the first attempt and one internal
            // retry each get the full timeout, then it tries again every 500 ms.
            flight.deadline = now
                + if flight.retries == 0 {
                    timeout
                } else {
                    RETRY_EVERY
                };
            flight.retries += 1;
            let event = flight.event.clone();
            for relay in waiting {
                self.outbox
                    .push_back((relay, ClientMessage::Event(event.clone())));
            }
        }
    }

    /// The peer's public key.
    pub fn public_key(&self) -> PublicKey {
        self.identity.public_key()
    }

    /// The peer's identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Sets the Unix time of virtual time zero (see [`crate::peer::Peer::set_epoch_secs`]).
    pub fn set_epoch_secs(&mut self, secs: u64) {
        self.epoch_secs = secs;
    }

    /// Sets the peer's clock skew and subscription `since`.
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// The peer's idea of the Unix time at virtual time `now`, in whole seconds.
    fn unix_secs(&self, now: Duration) -> u64 {
        (self.epoch_secs + now.as_secs()).saturating_add_signed(self.clock.skew_secs)
    }

    /// Sets how inbound events are de-duplicated by id.
    pub fn set_dedup(&mut self, dedup: Dedup) {
        self.dedup = dedup;
    }

    /// Relays this peer uses.
    pub fn relays(&self) -> &[RelayName] {
        &self.relays
    }

    /// Events dropped because they had been seen already.
    pub fn duplicates_dropped(&self) -> u64 {
        self.duplicates_dropped
    }

    /// Subscribes on `relay` (after connecting or reconnecting at `now`) to ContextVM events
    /// for us.
    pub fn subscribe(&mut self, relay: &str, now: Duration) {
        let mut filter = Filter::new()
            .kind(Kind::from(CONTEXTVM_KIND))
            .pubkey(self.public_key());
        if self.clock.subscribe_since {
            filter = filter.since(nostr::prelude::Timestamp::from_secs(self.unix_secs(now)));
        }
        self.outbox.push_back((
            relay.to_owned(),
            ClientMessage::Req {
                sub: SUBSCRIPTION.into(),
                filter: Box::new(filter),
            },
        ));
    }

    /// Subscribes on every relay.
    pub fn subscribe_all(&mut self, now: Duration) {
        for relay in self.relays.clone() {
            self.subscribe(&relay, now);
        }
    }

    /// Signs a ContextVM event to `recipient` at virtual time `now`.
    pub fn sign(
        &self,
        recipient: &PublicKey,
        reply_to: Option<&EventId>,
        extra_tags: Vec<Tag>,
        content: String,
        now: Duration,
    ) -> Arc<Event> {
        let mut tags = vec![Tag::public_key(*recipient)];
        if let Some(e) = reply_to {
            tags.push(Tag::event(*e));
        }
        tags.extend(extra_tags);
        #[cfg(test)]
        let content = self.tamper.and_then(|f| f(&content)).unwrap_or(content);
        self.identity
            .sign_shared(CONTEXTVM_KIND, self.unix_secs(now), tags, content)
    }

    /// The length of the JSON of `event`, which this peer signed.
    pub fn json_len(&self, event: &Event) -> usize {
        self.identity.json_len(event)
    }

    /// Publishes `event` to every relay and starts tallying their verdicts.
    pub fn publish(&mut self, event: Arc<Event>) -> EventId {
        let id = event.id;
        self.publications.insert(
            id,
            Publication {
                waiting: self.relays.iter().cloned().collect(),
                accepted: false,
                too_large: false,
                first_reason: None,
            },
        );
        self.publication_order.push_back(id);
        // Forget the oldest tallies, except those a lane waits on: their verdicts (or their
        // relays still to answer, for a retry) decide when the lane goes on.
        let mut kept = 0;
        while self.publication_order.len() > PENDING_CAPACITY + kept {
            let Some(old) = self.publication_order.pop_front() else {
                break;
            };
            if self.in_flight.contains_key(&old) {
                self.publication_order.push_back(old);
                kept += 1;
            } else {
                self.publications.remove(&old);
            }
        }
        // Our own events never come back to us as news.
        self.remember(id);
        for relay in &self.relays {
            self.outbox
                .push_back((relay.clone(), ClientMessage::Event(event.clone())));
        }
        id
    }

    /// Notes `id` as seen; false when it was seen already and the peer drops repeats.
    fn remember(&mut self, id: EventId) -> bool {
        let Dedup::PerId { memory } = self.dedup else {
            return true;
        };
        if !self.seen.insert(id) {
            return false;
        }
        self.seen_order.push_back(id);
        if self.seen_order.len() > memory {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }

    /// Takes a message from `relay`. Returns a ContextVM event addressed to us that has not been
    /// seen before; everything else is absorbed here.
    pub fn handle_relay_message(
        &mut self,
        relay: &str,
        message: RelayMessage,
        now: Duration,
    ) -> Option<Arc<Event>> {
        match message {
            RelayMessage::Event { event, .. } => {
                let for_us = event.kind == Kind::from(CONTEXTVM_KIND)
                    && event.tags.public_keys().any(|p| p == self.public_key());
                if !for_us {
                    return None;
                }
                if !self.remember(event.id) {
                    self.duplicates_dropped += 1;
                    return None;
                }
                Some(event)
            }
            RelayMessage::Ok {
                id,
                accepted,
                message,
            } => {
                let all_answered = self.verdict(relay, id, accepted, message);
                if self.in_flight.contains_key(&id) && self.answered(&id, all_answered) {
                    self.lane_done(id, now);
                }
                None
            }
            // relaysim's peers never authenticate: an AUTH challenge changes nothing for them.
            RelayMessage::Eose { .. }
            | RelayMessage::Closed { .. }
            | RelayMessage::Notice { .. }
            | RelayMessage::Auth { .. } => None,
        }
    }

    /// Tallies one relay's verdict; true when it was the last one awaited.
    fn verdict(&mut self, relay: &str, id: EventId, accepted: bool, message: String) -> bool {
        let Some(p) = self.publications.get_mut(&id) else {
            return false;
        };
        if !p.waiting.remove(relay) {
            return false;
        }
        p.accepted |= accepted;
        if !accepted {
            p.too_large |= is_size_rejection(&message);
            p.first_reason.get_or_insert(message);
        }
        if p.waiting.is_empty() {
            let p = self.publications.remove(&id).expect("present");
            let outcome = if p.accepted {
                PublishOutcome::Accepted
            } else if p.too_large {
                PublishOutcome::SizeRejected
            } else {
                PublishOutcome::Rejected(p.first_reason.unwrap_or_default())
            };
            self.outcomes.push_back((id, outcome));
            return true;
        }
        false
    }

    /// The next verdict on a publication, once every relay has answered.
    pub fn poll_publish_outcome(&mut self) -> Option<(EventId, PublishOutcome)> {
        self.outcomes.pop_front()
    }

    /// The next message for a relay.
    pub fn poll_transmit(&mut self) -> Option<(RelayName, ClientMessage)> {
        self.outbox.pop_front()
    }
}

/// The id of the event an event replies to (its first `e` tag).
pub fn reply_to(event: &Event) -> Option<EventId> {
    event.tags.event_ids().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(clock: Clock) -> PeerCore {
        let mut core = PeerCore::new(Identity::derive(1, "p"), vec!["r".into()]);
        core.set_clock(clock);
        core
    }

    fn since_of_next_req(core: &mut PeerCore) -> Option<u64> {
        match core.poll_transmit() {
            Some((_, ClientMessage::Req { filter, .. })) => filter.since.map(|t| t.as_secs()),
            other => panic!("expected a REQ, got {other:?}"),
        }
    }

    fn lanes(quorum: OkQuorum, missing: MissingOk) -> PeerCore {
        let mut core = PeerCore::new(Identity::derive(1, "p"), vec!["a".into(), "b".into()]);
        core.set_publish_wait(PublishWait::ForOk {
            timeout: Duration::from_secs(10),
            quorum,
            missing,
        });
        core
    }

    fn event(core: &PeerCore, text: &str) -> Arc<Event> {
        let other = Identity::derive(1, "q").public_key();
        core.sign(&other, None, vec![], text.into(), Duration::ZERO)
    }

    /// The events sent, by relay, since the last call.
    fn sent(core: &mut PeerCore) -> Vec<(String, EventId)> {
        std::iter::from_fn(|| core.poll_transmit())
            .filter_map(|(relay, m)| match m {
                ClientMessage::Event(e) => Some((relay, e.id)),
                _ => None,
            })
            .collect()
    }

    fn ok(core: &mut PeerCore, relay: &str, id: EventId, accepted: bool, at: Duration) {
        let message = if accepted { "" } else { "blocked: no" };
        let verdict = RelayMessage::Ok {
            id,
            accepted,
            message: message.into(),
        };
        core.handle_relay_message(relay, verdict, at);
    }

    #[test]
    fn a_lane_waits_for_every_relay_or_the_first_acceptance() {
        for quorum in [OkQuorum::All, OkQuorum::Any] {
            let mut core = lanes(quorum, MissingOk::Proceed);
            let (first, second) = (event(&core, "1"), event(&core, "2"));
            let (a, b) = (first.id, second.id);
            core.publish_in_lane("l", first, Duration::ZERO);
            core.publish_in_lane("l", second, Duration::ZERO);
            assert_eq!(sent(&mut core), [("a".into(), a), ("b".into(), a)]);
            ok(&mut core, "a", a, true, Duration::from_millis(5));
            let after_one = sent(&mut core);
            ok(&mut core, "b", a, true, Duration::from_millis(6));
            let after_both = sent(&mut core);
            let second_out = vec![("a".to_owned(), b), ("b".to_owned(), b)];
            match quorum {
                OkQuorum::Any => assert_eq!((after_one, after_both), (second_out, vec![])),
                OkQuorum::All => assert_eq!((after_one, after_both), (vec![], second_out)),
            }
        }
    }

    #[test]
    fn a_retrying_lane_publishes_again_to_silent_relays_until_one_rejects() {
        let mut core = lanes(OkQuorum::Any, MissingOk::Retry);
        let (first, second) = (event(&core, "1"), event(&core, "2"));
        let (a, b) = (first.id, second.id);
        core.publish_in_lane("l", first, Duration::ZERO);
        core.publish_in_lane("l", second, Duration::ZERO);
        sent(&mut core);
        // No answer in 10 s: again to both; then 10 s more; then every 500 ms.
        let mut retries = Vec::new();
        while let Some(at) = core
            .poll_timeout()
            .filter(|at| *at < Duration::from_secs(21))
        {
            core.handle_timeout(at);
            retries.push((at, sent(&mut core).len()));
        }
        let s = Duration::from_secs;
        assert_eq!(
            retries,
            [(s(10), 2), (s(20), 2), (Duration::from_millis(20_500), 2)]
        );
        // A definitive `OK false` ends the wait (the TS pool throws at once).
        ok(&mut core, "a", a, false, s(21));
        assert_eq!(sent(&mut core), [("a".into(), b), ("b".into(), b)]);
    }

    #[test]
    fn a_skewed_clock_stamps_events_in_whole_seconds_off_true_time() {
        let behind = core(Clock {
            skew_secs: -3,
            subscribe_since: false,
        });
        let other = Identity::derive(1, "q").public_key();
        let e = behind.sign(
            &other,
            None,
            vec![],
            "x".into(),
            Duration::from_millis(10_900),
        );
        assert_eq!(e.created_at.as_secs(), EPOCH_SECS + 10 - 3);
    }

    #[test]
    fn subscriptions_carry_since_only_when_asked() {
        let mut plain = core(Clock::default());
        plain.subscribe("r", Duration::from_secs(7));
        assert_eq!(since_of_next_req(&mut plain), None);
        let mut sdk_like = core(Clock {
            skew_secs: 2,
            subscribe_since: true,
        });
        sdk_like.subscribe("r", Duration::from_millis(7_500));
        assert_eq!(since_of_next_req(&mut sdk_like), Some(EPOCH_SECS + 7 + 2));
    }
}
