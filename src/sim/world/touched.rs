//! Work proportional to activity: which peers may have something to send or report, and each
//! peer's next timeout, kept up to date as peers are touched instead of asking every peer at
//! every step. With a thousand clients, asking all of them after every action was most of a
//! run's time.
//!
//! The rule that keeps it exact: every access that hands a peer something goes through the
//! world's `peer_mut` (or the public `client`/`server`), which marks the peer; the flush's
//! polls of a peer's queues (`poll_transmit`, `poll_event`), which only pop, call `polled`,
//! which marks its timeout for asking again. A peer never marked has nothing queued (it was
//! drained when last marked) and an unchanged timeout, so skipping it is what the full scan
//! would have done. Marks are taken in peer order with a cursor, so peers
//! are served in the same order as the scan served them.

use super::PeerId;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};
use std::time::Duration;

/// Peers touched since their queues were drained, and the cached timeouts.
#[derive(Debug, Default)]
pub(super) struct Touched {
    /// May have messages to send.
    transmit: BTreeSet<PeerId>,
    /// May have events to report.
    events: BTreeSet<PeerId>,
    /// Timeout to be asked again.
    stale: BTreeSet<PeerId>,
    /// Every peer's cached next timeout, by time then peer.
    timers: BTreeSet<(Duration, PeerId)>,
    /// The same, by peer.
    timer_of: BTreeMap<PeerId, Duration>,
}

impl Touched {
    /// `peer` was handed something, or its state changed: its queues and timeout must be
    /// looked at.
    pub(super) fn mark(&mut self, peer: PeerId) {
        self.transmit.insert(peer);
        self.events.insert(peer);
        self.stale.insert(peer);
    }

    /// A queue was polled: the timeout may have moved (a pipeline may arm a timer).
    pub(super) fn polled(&mut self, peer: PeerId) {
        self.stale.insert(peer);
    }

    /// The next peer after `after` (or the first) that may have messages, taken off the set.
    pub(super) fn next_transmit(&mut self, after: Option<PeerId>) -> Option<PeerId> {
        take_after(&mut self.transmit, after, None)
    }

    /// The next peer of `kind`'s variant after `after` that may have events, taken off the set.
    pub(super) fn next_events(&mut self, after: Option<PeerId>, kind: PeerId) -> Option<PeerId> {
        take_after(&mut self.events, after, Some(kind))
    }

    /// Asks the stale peers for their timeout again (`timeout` answers for a peer).
    pub(super) fn refresh(&mut self, mut timeout: impl FnMut(PeerId) -> Option<Duration>) {
        for peer in std::mem::take(&mut self.stale) {
            if let Some(old) = self.timer_of.remove(&peer) {
                self.timers.remove(&(old, peer));
            }
            if let Some(at) = timeout(peer) {
                self.timer_of.insert(peer, at);
                self.timers.insert((at, peer));
            }
        }
    }

    /// The earliest timeout of any peer; stale peers are asked through `timeout`.
    pub(super) fn earliest(
        &self,
        timeout: impl Fn(PeerId) -> Option<Duration>,
    ) -> Option<Duration> {
        let cached = self
            .timers
            .iter()
            .find(|(_, peer)| !self.stale.contains(peer))
            .map(|(at, _)| *at);
        let fresh = self.stale.iter().filter_map(|p| timeout(*p)).min();
        cached.into_iter().chain(fresh).min()
    }

    /// The peers whose cached timeout is due at `now`, in peer order (call after `refresh`).
    pub(super) fn due(&self, now: Duration) -> Vec<PeerId> {
        let mut due: Vec<PeerId> = self
            .timers
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, peer)| *peer)
            .collect();
        due.sort_unstable();
        due
    }
}

/// Removes and returns the first peer of `set` after `after` (of `kind`'s variant only, when
/// given).
fn take_after(
    set: &mut BTreeSet<PeerId>,
    after: Option<PeerId>,
    kind: Option<PeerId>,
) -> Option<PeerId> {
    let lower = match after {
        Some(p) => Excluded(p),
        None => Unbounded,
    };
    let next = set
        .range((lower, Unbounded))
        .copied()
        .find(|p| kind.is_none_or(|k| same_variant(*p, k)))?;
    set.remove(&next);
    Some(next)
}

fn same_variant(a: PeerId, b: PeerId) -> bool {
    matches!(
        (a, b),
        (PeerId::Client(_), PeerId::Client(_)) | (PeerId::Server(_), PeerId::Server(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_peers_come_back_in_peer_order_once() {
        let mut t = Touched::default();
        for p in [PeerId::Server(0), PeerId::Client(3), PeerId::Client(1)] {
            t.mark(p);
        }
        let mut order = Vec::new();
        let mut cursor = None;
        while let Some(p) = t.next_transmit(cursor) {
            order.push(p);
            cursor = Some(p);
            if p == PeerId::Client(3) {
                // Marked again behind the cursor: left for the next round.
                t.mark(PeerId::Client(1));
            }
        }
        assert_eq!(
            order,
            [PeerId::Client(1), PeerId::Client(3), PeerId::Server(0)]
        );
        assert_eq!(t.next_transmit(None), Some(PeerId::Client(1)));
        assert_eq!(
            t.next_events(None, PeerId::Server(0)),
            Some(PeerId::Server(0))
        );
        assert_eq!(
            t.next_events(None, PeerId::Client(0)),
            Some(PeerId::Client(1))
        );
    }

    #[test]
    fn timeouts_are_cached_until_a_peer_is_touched() {
        let mut t = Touched::default();
        t.mark(PeerId::Client(0));
        t.mark(PeerId::Server(0));
        let mut answers = BTreeMap::from([
            (PeerId::Client(0), Duration::from_secs(5)),
            (PeerId::Server(0), Duration::from_secs(2)),
        ]);
        t.refresh(|p| answers.get(&p).copied());
        assert_eq!(t.earliest(|_| None), Some(Duration::from_secs(2)));
        assert_eq!(
            t.due(Duration::from_secs(5)),
            [PeerId::Client(0), PeerId::Server(0)]
        );
        // The server is touched and its timer moves; until refreshed it is asked directly.
        answers.insert(PeerId::Server(0), Duration::from_secs(9));
        t.mark(PeerId::Server(0));
        assert_eq!(
            t.earliest(|p| answers.get(&p).copied()),
            Some(Duration::from_secs(5))
        );
        t.refresh(|p| answers.get(&p).copied());
        assert_eq!(t.due(Duration::from_secs(6)), [PeerId::Client(0)]);
    }
}
