//! Link planners: who decides the fate of each message instead of the world's random draws.
//!
//! Every message on a link (its copies' delays, or none: lost), every decision of a concurrent
//! relay intake and every publish-pipeline decision is a numbered [`Decision`]. The world
//! always draws its own plan first, so the random streams advance the same whatever decides,
//! then asks its planners in order; the first that answers decides, else the draw stands.
//!
//! - no planner: a normal run, every fate drawn;
//! - [`Recorded`]: a schedule replay of a des trace, the n-th decision of each link as recorded,
//!   and the outages the trace (or a shrink) suppresses;
//! - [`Undisturbed`]: after [`Recorded`] when shrinking, every decision the shrunk trace does not
//!   keep is undisturbed (one copy at the link's median delay, in order);
//! - [`RecordedFates`](super::fates::RecordedFates) through [`Fates`]: a schedule replay of a
//!   live recording, each publication delivered as the recorded relay delivered it.

use super::fates::{FateTracker, RecordedFates};
use super::world::{PeerId, Way};
use nostr::prelude::{Event, EventId, PublicKey};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One decision the world is about to make.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The relay.
    pub relay: usize,
    /// The peer.
    pub peer: PeerId,
    /// A link direction, or an intake or publish decision.
    pub way: Way,
    /// The decision's number on (relay, peer, way), from 0.
    pub seq: u64,
    /// The event the message carries, if any.
    pub event: Option<EventId>,
    /// The link's median delay.
    pub median: Duration,
    /// The recipient's key (relay → peer messages).
    pub recipient: Option<PublicKey>,
    /// When the event was first published.
    pub published: Option<Duration>,
    /// Virtual time now.
    pub now: Duration,
}

/// A planner's answer: the delays of the message's copies from now (none: lost; for intake
/// and publish decisions, none means "in order"), and whether they are final arrival times
/// that skip the connection's queue (a recording's times already include every queue).
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Delays of the copies.
    pub delays: Vec<Duration>,
    /// The copies arrive exactly then, not behind the connection's earlier messages.
    pub exact: bool,
}

impl Planned {
    fn queued(delays: Vec<Duration>) -> Self {
        Planned {
            delays,
            exact: false,
        }
    }
}

/// Decides fates instead of the world's random draws (see the module documentation).
pub trait LinkPlanner {
    /// The plan for `decision`, or `None` to leave it to the next planner (or the draw).
    fn plan(&mut self, decision: &Decision) -> Option<Planned>;

    /// Whether outage number `index` (in order of the run) does not happen.
    fn suppresses_outage(&self, _index: u64) -> bool {
        false
    }

    /// A relay received `event` from its author.
    fn relay_received(&mut self, _relay: usize, _event: &Event) {}
}

/// The decisions of a des trace, by (relay, peer, way) and number, and its suppressed outages.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Recorded {
    /// For each (relay, peer, way), the delays of the copies of its n-th decision. Decisions
    /// past the end of a list are left to the next planner.
    pub plans: BTreeMap<(usize, PeerId, Way), Vec<Vec<Duration>>>,
    /// Outages (by their number in the run) that do not happen.
    pub suppress_outages: BTreeSet<u64>,
}

impl LinkPlanner for Recorded {
    fn plan(&mut self, d: &Decision) -> Option<Planned> {
        let delays = self
            .plans
            .get(&(d.relay, d.peer, d.way))?
            .get(d.seq as usize)?;
        Some(Planned::queued(delays.clone()))
    }

    fn suppresses_outage(&self, index: u64) -> bool {
        self.suppress_outages.contains(&index)
    }
}

/// Every decision undisturbed: one copy at the link's median delay; intake and publish in
/// order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Undisturbed;

impl LinkPlanner for Undisturbed {
    fn plan(&mut self, d: &Decision) -> Option<Planned> {
        Some(Planned::queued(match d.way {
            Way::Up | Way::Down => vec![Duration::from_micros(d.median.as_micros() as u64)],
            Way::Intake | Way::Publish => Vec::new(),
        }))
    }
}

/// A live recording imposed on one relay: its publications reach it at once (the recording's
/// uplink), and reach each recipient when the recording says, or never. The recording's network
/// had no outages.
#[derive(Debug)]
pub(crate) struct Fates {
    tracker: FateTracker,
}

impl Fates {
    /// The recording `fates`, made at the world's relay number `relay`.
    pub(crate) fn new(relay: usize, fates: RecordedFates) -> Self {
        Fates {
            tracker: FateTracker::new(relay, fates),
        }
    }
}

impl LinkPlanner for Fates {
    fn plan(&mut self, d: &Decision) -> Option<Planned> {
        if !self.tracker.active() {
            return None;
        }
        match (d.way, d.event) {
            (Way::Up, _) => Some(Planned {
                delays: vec![Duration::ZERO],
                exact: true,
            }),
            (Way::Down, Some(event)) => {
                let delays = self.tracker.delays(
                    d.relay,
                    &event,
                    d.recipient.as_ref()?,
                    d.published?,
                    d.now,
                )?;
                Some(Planned {
                    delays,
                    exact: true,
                })
            }
            _ => None,
        }
    }

    fn suppresses_outage(&self, _index: u64) -> bool {
        self.tracker.active()
    }

    fn relay_received(&mut self, relay: usize, event: &Event) {
        if relay == self.tracker.relay() {
            self.tracker.published(event);
        }
    }
}
