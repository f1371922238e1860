//! The world's network: each peer–relay connection with its two pipes (in order, bandwidth
//! queues), partitions and outages, a relay's intake (serial or concurrent), a peer's publish
//! pipeline, and the per-message decisions of all of them, drawn or planned.

use super::{Action, Observation, PeerId, Way, World};
use crate::nip01::{ClientMessage, RelayMessage};
use crate::relay::impair::{Direction, Impairments, LinkState, OutageKind, Pipe};
use crate::relay::profile::Intake;
use crate::relay::{ConnId, Relay};
use crate::sim::planner::{Decision, Planned};
use nostr::prelude::EventId;
use std::time::Duration;

/// Bytes a control message (REQ, OK, EOSE, NOTICE) is taken to occupy on a limited link.
const CONTROL_BYTES: usize = 100;
/// Bytes of WebSocket and NIP-01 framing around an event.
const EVENT_FRAMING: usize = 16;

pub(super) struct RelaySlot {
    pub(super) name: String,
    pub(super) relay: Relay,
    pub(super) impairments: Impairments,
    pub(super) down_until: Option<Duration>,
    /// Draws of a concurrent intake's handling times.
    pub(super) intake_rng: LinkState,
}

/// One peer's connection to one relay.
#[derive(Debug, Clone, Copy)]
pub(super) struct Link {
    pub(super) conn: ConnId,
    pub(super) connected: bool,
    /// A partition stalls the connection until then: TCP retransmits what it holds once the
    /// path is back, so messages wait; none is lost while the connection stays up.
    pub(super) stalled_until: Duration,
    /// Messages in flight peer → relay.
    pub(super) up: Pipe,
    /// Messages in flight relay → peer.
    pub(super) down: Pipe,
}

impl Link {
    /// The messages in flight in one direction (none for decisions that are not links).
    pub(super) fn pipe(&mut self, way: Way) -> Option<&mut Pipe> {
        match way {
            Way::Up => Some(&mut self.up),
            Way::Down => Some(&mut self.down),
            Way::Intake | Way::Publish => None,
        }
    }
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

impl World {
    /// Schedules the next random drop of the peer's connection to `relay`: an exponential
    /// time after `from`, for a uniformly drawn downtime, both from that connection's own
    /// outage stream (drawn in that order, so runs repeat).
    pub(super) fn schedule_random_drop(&mut self, relay: usize, peer: PeerId, from: Duration) {
        let outages = &self.relays[relay].impairments.outages;
        let (Some(mean), range) = (outages.connection_drop_every, outages.connection_down_for)
        else {
            return;
        };
        let Some(rng) = self.outage_rng.get_mut(&(relay, Some(peer))) else {
            return;
        };
        let at = from + rng.exponential(mean);
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

    pub(super) fn attach(&mut self, peer: PeerId, name: &str, relays: &[usize]) {
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
            if outages.connection_drop_every.is_some() {
                let rng =
                    LinkState::new(self.streams.stream(&format!("outage/{relay_name}/{name}")));
                self.outage_rng.insert((relay, Some(peer)), rng);
                self.schedule_random_drop(relay, peer, Duration::ZERO);
            }
            // A hosted program opens its connections itself, when it is ready.
            if !self.hosted_peers.contains(&peer) {
                self.connect(relay, peer);
                self.settle_subscription(relay, peer);
            }
        }
    }

    /// Puts a newly attached peer's subscription in place at once. A run starts with every
    /// peer subscribed, as in a deployment where servers are up before clients call; later
    /// reconnections go through the impaired network like everything else.
    pub(super) fn settle_subscription(&mut self, relay: usize, peer: PeerId) {
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

    pub(super) fn connect(&mut self, relay: usize, peer: PeerId) {
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

    /// The network or the relay ended a connection: the peer's program, if hosted, is told.
    pub(super) fn disconnect(&mut self, relay: usize, peer: PeerId, reason: &'static str) {
        if self.close_link(relay, peer, reason) {
            self.tell_hosted_lost(relay, peer);
        }
    }

    /// Closes the link's connection at the relay and reports it; whether it was open.
    pub(super) fn close_link(&mut self, relay: usize, peer: PeerId, reason: &'static str) -> bool {
        let Some(link) = self.links.get_mut(&(relay, peer)).filter(|l| l.connected) else {
            return false;
        };
        link.connected = false;
        let conn = link.conn;
        self.relays[relay].relay.disconnect(conn);
        self.observe(Observation::Disconnected {
            relay,
            peer,
            reason,
        });
        true
    }

    /// Counts an outage and tells the observer; false when a replay suppresses it.
    pub(super) fn outage_begins(
        &mut self,
        relay: usize,
        peer: Option<PeerId>,
        kind: &'static str,
        duration: Duration,
    ) -> bool {
        let index = self.outage_seq;
        self.outage_seq += 1;
        let suppressed = self.planners.iter().any(|p| p.suppresses_outage(index));
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
    pub(super) fn reschedule_restart(
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

    /// Whether a message sent on connection `conn` between `relay` and `peer` can still arrive:
    /// the link is up on that same connection.
    pub(super) fn link_live(&self, relay: usize, peer: PeerId, conn: ConnId) -> bool {
        self.links
            .get(&(relay, peer))
            .is_some_and(|l| l.connected && l.conn == conn)
    }

    /// When a partition holds the link's messages back, the time it ends.
    pub(super) fn stalled(&self, relay: usize, peer: PeerId) -> Option<Duration> {
        self.links
            .get(&(relay, peer))
            .map(|l| l.stalled_until)
            .filter(|t| *t > self.now)
    }

    /// When a partition holds a message in flight, the time it is let through.
    pub(super) fn held_by_partition(&self, action: &Action) -> Option<Duration> {
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

    /// Whether the relay spends time on `message` before acting on it.
    pub(super) fn relay_takes_time(&self, relay: usize, message: &ClientMessage) -> bool {
        let profile = self.relays[relay].relay.profile();
        match profile.intake {
            // A batch-commit intake spends its time in the relay's own writer.
            Intake::Serial | Intake::BatchCommit { .. } => {
                matches!(message, ClientMessage::Event(_)) && !profile.processing.is_zero()
            }
            Intake::Concurrent { .. } => true,
        }
    }

    /// When the relay is done handling `message`, which arrived now: after the events before
    /// it (serial intake), or after its own drawn handling time (concurrent intake), so it can
    /// finish before a message that arrived earlier.
    pub(super) fn handled_at(
        &mut self,
        relay: usize,
        peer: PeerId,
        message: &ClientMessage,
    ) -> Duration {
        let now = self.now;
        let bytes = match message {
            ClientMessage::Event(e)
                if matches!(
                    self.relays[relay].relay.profile().intake,
                    Intake::Concurrent { .. }
                ) =>
            {
                self.event_json.len_of(e, &self.signatures)
            }
            _ => CONTROL_BYTES,
        };
        let slot = &mut self.relays[relay];
        match slot.relay.profile().intake.clone() {
            Intake::Serial | Intake::BatchCommit { .. } => {
                let busy = self.relay_busy.entry(relay).or_insert(Duration::ZERO);
                let done = (*busy).max(now) + slot.relay.profile().processing;
                *busy = done;
                done
            }
            Intake::Concurrent { handling, per_kib } => {
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

    /// A peer made `message` for `relay`: it goes through the peer's publish pipeline to the
    /// wire.
    pub(super) fn emit(&mut self, relay: usize, peer: PeerId, message: ClientMessage) {
        let bytes = match &message {
            ClientMessage::Event(e) => {
                self.order.made(peer, e.id, self.now);
                Some(self.event_json.len_of(e, &self.signatures))
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
        // `wire_time` keeps whole microseconds (what traces record) and `now` may carry a
        // fraction of one (bandwidth and per-KiB costs are fractional), so a message with no
        // cost and no jitter can come out just before `now`: it is written now.
        let drawn = pipeline
            .wire_time(rng.rng(), now, bytes, *last)
            .saturating_sub(now);
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

    pub(super) fn send_up(&mut self, relay: usize, peer: PeerId, message: ClientMessage) {
        let Some(link) = self.links.get(&(relay, peer)).copied() else {
            return;
        };
        if self.observer.is_some() {
            if let Some(sent) = Observation::subscription_sent(relay, peer, &message) {
                self.observe(sent);
            }
        }
        let event = match &message {
            ClientMessage::Event(e) => Some((
                e.id,
                self.event_json.len_of(e, &self.signatures),
                self.observer
                    .as_ref()
                    .is_some_and(|o| o.wants_event_json())
                    .then(|| self.event_json.of(e, &self.signatures)),
            )),
            _ => None,
        };
        let event = event.map(|(id, bytes, json)| {
            self.observe(Observation::Published {
                peer,
                relay,
                event: id,
                bytes,
                json,
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
        let copy = event
            .map(|(id, _)| self.order.written(relay, link.conn, id))
            .unwrap_or_default();
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
                copy,
            },
            link.conn,
        );
    }

    pub(super) fn send_down(
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
        let copy = event.map(|id| self.order.sent(relay, id, replay));
        let direction = self.relays[relay].impairments.relay_to_peer.clone();
        let bytes = match (&message, direction.bandwidth) {
            (RelayMessage::Event { event, sub }, Some(_)) => {
                self.event_json.len_of(event, &self.signatures) + sub.len() + EVENT_FRAMING
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
                copy: copy.unwrap_or_default(),
            },
            conn,
        );
    }

    /// Schedules the copies of one message on a link. Loss and duplication apply to events;
    /// protocol answers (OK, EOSE, NOTICE) and subscriptions only take the delay.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn impair(
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
        let decision = Decision {
            relay,
            peer,
            way,
            seq,
            event,
            median: direction.delay.median(),
            recipient: self.peer_keys.get(&peer).copied(),
            published: event.and_then(|e| self.order.made_at(&e)),
            now: self.now,
        };
        // A planner's exact plan (a recording's) already includes every queue its copies
        // waited in; otherwise the copies queue behind the connection's earlier messages.
        let (delays, exact) = match self.planned(&decision) {
            Some(planned) => (planned.delays, planned.exact),
            None => (drawn, false),
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
            Some(pipe) => pipe.arrivals(direction, now, bytes, &delays, !exact),
            // Sent on a connection that is gone: it is reported lost when it would arrive.
            None => delays.iter().map(|d| now + *d).collect(),
        };
        for at in arrivals {
            self.schedule(at, make(conn));
        }
    }

    /// The number of the next decision of this kind on (relay, peer), from 0.
    pub(super) fn next_seq(&mut self, relay: usize, peer: PeerId, way: Way) -> u64 {
        let n = self.link_seq.entry((relay, peer, way)).or_insert(0);
        *n += 1;
        *n - 1
    }

    /// Decides when the `seq`-th decision of kind `way` on (relay, peer), made now, takes
    /// effect: as the first planner that answers says (an empty plan: in order), else after
    /// the drawn delay. An
    /// in-order decision takes effect no earlier than the previous one (`last`). Observed as a
    /// `link` line, so replays repeat it and `shrink` can remove it.
    pub(super) fn decide(
        &mut self,
        (relay, peer, way): (usize, PeerId, Way),
        event: bool,
        drawn: Duration,
        last: Duration,
    ) -> Duration {
        let now = self.now;
        let seq = self.next_seq(relay, peer, way);
        let drawn = Duration::from_micros(drawn.as_micros() as u64);
        let decision = Decision {
            relay,
            peer,
            way,
            seq,
            event: None,
            median: Duration::ZERO,
            recipient: None,
            published: None,
            now,
        };
        let plan = self
            .planned(&decision)
            .map_or_else(|| vec![drawn], |p| p.delays);
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

    /// The first planner's answer to `decision`, if any planner answers.
    pub(super) fn planned(&mut self, decision: &Decision) -> Option<Planned> {
        self.planners.iter_mut().find_map(|p| p.plan(decision))
    }
}
