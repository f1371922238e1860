//! Outages on the wall clock: scheduled ones from the profile, random relay restarts and
//! connection drops drawn from their own seeded streams, and what each does to sockets (see
//! the parent module's documentation).

use super::{micros, record, Action, World};
use crate::relay::impair::{LinkState, OutageKind};
use crate::relay::ConnId;
use std::time::Duration;

/// What an outage does.
pub(super) enum Outage {
    /// A relay restarts.
    Restart {
        relay: usize,
        down_for: Duration,
        random: bool,
    },
    /// A peer's connections (everyone's when `None`) drop.
    Drop {
        relay: usize,
        peer: Option<String>,
        down_for: Duration,
        /// A random drop of this one connection (then it draws its next one).
        random: Option<ConnId>,
    },
    /// A peer's messages (everyone's when `None`) are held.
    Partition {
        relay: usize,
        peer: Option<String>,
        duration: Duration,
    },
}

impl World {
    pub(super) fn begin_outage(&mut self, outage: Outage, now: Duration) {
        match outage {
            Outage::Restart {
                relay,
                down_for,
                random,
            } => {
                self.outage(relay, None, "relay-restart", down_for);
                self.slots[relay].relay.restart();
                // Every connection ends now, and what was in flight is lost (as in des).
                while let Some(conn) = self.slots[relay].relay.poll_dropped() {
                    self.close(conn, "relay-restart");
                }
                self.gate_mut()
                    .down_until
                    .insert(relay, self.start + now + down_for);
                if random {
                    self.next_restart(relay, now + down_for);
                }
            }
            Outage::Drop {
                relay,
                peer,
                down_for,
                random,
            } => {
                let victims: Vec<ConnId> = match random {
                    Some(conn) => vec![conn],
                    None => self.conns_of(relay, peer.as_deref()),
                };
                // Who is refused until the drop ends: the named peer, everyone, or the one
                // randomly dropped connection's peer: its label, or, unlabelled, its address
                // (a real drop takes the device's network away, so every client sharing that
                // address is held off too; `--label` or an address of its own tells peers
                // apart).
                let (who, named) = match (&peer, random) {
                    (Some(p), _) => (Some(p.clone()), peer.clone()),
                    (None, None) => (Some("*".to_owned()), None),
                    (None, Some(conn)) => match self.conns.get(&conn) {
                        Some(c) => (Some(c.identity.clone()), Some(c.peer.clone())),
                        None => return, // already gone: its random drops end with it
                    },
                };
                self.outage(relay, named, "connection-drop", down_for);
                if let Some(who) = who {
                    self.gate_mut()
                        .blocked
                        .insert((relay, who), self.start + now + down_for);
                }
                for conn in victims {
                    self.close(conn, "outage");
                }
            }
            Outage::Partition {
                relay,
                peer,
                duration,
            } => {
                self.outage(relay, peer.clone(), "partition", duration);
                let conns = self.conns_of(relay, peer.as_deref());
                self.hold(&conns, now + duration);
                self.partitions.retain(|(_, _, until)| *until > now);
                self.partitions.push((relay, peer, now + duration));
            }
        }
    }

    /// The scheduled outages of relay `index`, and its first random restart.
    pub(super) fn schedule_outages(&mut self, index: usize) {
        let outages = self.slots[index]
            .relay
            .profile()
            .impairments
            .outages
            .clone();
        for outage in outages.scheduled {
            let action = match outage.kind {
                OutageKind::RelayRestart => Action::Outage(Outage::Restart {
                    relay: index,
                    down_for: outage.duration,
                    random: false,
                }),
                OutageKind::ConnectionDrop { peer } => Action::Outage(Outage::Drop {
                    relay: index,
                    peer,
                    down_for: outage.duration,
                    random: None,
                }),
                OutageKind::Partition { peer } => Action::Outage(Outage::Partition {
                    relay: index,
                    peer,
                    duration: outage.duration,
                }),
            };
            self.schedule(self.outages_from + outage.at, action);
        }
        if outages.relay_restart_every.is_some() {
            let name = self.slots[index].name.clone();
            self.slots[index].restart_rng = Some(LinkState::new(
                self.streams.stream(&format!("live/outage/{name}")),
            ));
            self.next_restart(index, self.outages_from);
        }
    }

    fn next_restart(&mut self, relay: usize, from: Duration) {
        let outages = &self.slots[relay].relay.profile().impairments.outages;
        let (Some(mean), range) = (outages.relay_restart_every, outages.relay_down_for) else {
            return;
        };
        let Some(rng) = self.slots[relay].restart_rng.as_mut() else {
            return;
        };
        let at = from + rng.exponential(mean);
        let down_for = rng.uniform(range);
        self.schedule(
            at,
            Action::Outage(Outage::Restart {
                relay,
                down_for,
                random: true,
            }),
        );
    }

    pub(super) fn next_drop(&mut self, conn: ConnId, from: Duration) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let relay = c.relay;
        let outages = &self.slots[relay].relay.profile().impairments.outages;
        let (Some(mean), range) = (outages.connection_drop_every, outages.connection_down_for)
        else {
            return;
        };
        let Some(rng) = c.drop_rng.as_mut() else {
            return;
        };
        let at = from + rng.exponential(mean);
        let down_for = rng.uniform(range);
        self.schedule(
            at,
            Action::Outage(Outage::Drop {
                relay,
                peer: None,
                down_for,
                random: Some(conn),
            }),
        );
    }

    /// The connections to `relay` of the peer known as `peer` (all when `None`).
    pub(super) fn conns_of(&self, relay: usize, peer: Option<&str>) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.relay == relay)
            .filter(|(_, c)| peer.is_none_or(|p| p == c.identity || p == c.peer))
            .map(|(id, _)| *id)
            .collect()
    }

    pub(super) fn outage(
        &mut self,
        relay: usize,
        peer: Option<String>,
        kind: &str,
        duration: Duration,
    ) {
        *self.slots[relay]
            .counters
            .outages
            .entry(kind.to_owned())
            .or_default() += 1;
        self.see(record::Seen::Outage {
            index: self.outage_seq,
            relay: self.slots[relay].name.clone(),
            peer,
            kind: kind.to_owned(),
            duration_us: micros(duration),
        });
        self.outage_seq += 1;
    }
}
