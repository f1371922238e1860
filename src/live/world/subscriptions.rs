//! A bound on the memory live subscriptions hold, over the whole deployment.
//!
//! A relay keeps every filter it is sent for as long as the subscription lives. Each REQ is
//! held to the frame limit and each connection to the profile's subscription count, but
//! 2,048 connections × 200 subscriptions × 128 KiB (strfry's limits) is still 50 GiB. No relay
//! documents a bound on the total, so this one is relaysim's: the REQ text of live
//! subscriptions counts against one budget, and while the budget is spent a connection
//! already holding more than its fair share (the budget over the connection slots) has its
//! next REQ refused with a CLOSED that says why. A connection within its share is always
//! served, so one client hoarding filters cannot starve the others.

use crate::relay::ConnId;
use std::collections::BTreeMap;

/// The REQ bytes of every live subscription, by connection and subscription id.
#[derive(Debug)]
pub(super) struct SubscriptionBytes {
    held: BTreeMap<ConnId, BTreeMap<String, usize>>,
    total: usize,
    max_total: usize,
    fair_share: usize,
}

/// The CLOSED message of a refused REQ.
pub(super) const REFUSED: &str =
    "error: relaysim: live subscriptions hold too much memory on this relay; close some first";

impl SubscriptionBytes {
    /// A budget of `max_total` bytes over `slots` connections.
    pub(super) fn new(max_total: usize, slots: usize) -> Self {
        SubscriptionBytes {
            held: BTreeMap::new(),
            total: 0,
            max_total,
            fair_share: max_total / slots.max(1),
        }
    }

    /// Whether connection `conn` may open (or replace) subscription `sub` with a REQ of
    /// `bytes`; if so, it is counted.
    pub(super) fn admit(&mut self, conn: ConnId, sub: &str, bytes: usize) -> bool {
        let subs = self.held.entry(conn).or_default();
        let replaced = subs.get(sub).copied().unwrap_or(0);
        let mine = subs.values().sum::<usize>() - replaced + bytes;
        let total = self.total - replaced + bytes;
        if total > self.max_total && mine > self.fair_share {
            return false;
        }
        subs.insert(sub.to_owned(), bytes);
        self.total = total;
        true
    }

    /// Subscription `sub` of `conn` was closed.
    pub(super) fn release(&mut self, conn: ConnId, sub: &str) {
        if let Some(bytes) = self.held.get_mut(&conn).and_then(|s| s.remove(sub)) {
            self.total -= bytes;
        }
    }

    /// Connection `conn` ended: all its subscriptions went with it.
    pub(super) fn release_all(&mut self, conn: ConnId) {
        if let Some(subs) = self.held.remove(&conn) {
            self.total -= subs.values().sum::<usize>();
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_budget_only_connections_over_their_share_are_refused() {
        // 1,000 bytes over 4 slots: a share of 250.
        let mut b = SubscriptionBytes::new(1000, 4);
        for i in 0..10 {
            assert!(b.admit(1, &format!("s{i}"), 100));
        }
        assert!(
            !b.admit(1, "s10", 100),
            "the hoarder is over budget and share"
        );
        assert!(
            b.admit(2, "mine", 200),
            "a connection within its share is served"
        );
        // Replacing a subscription counts only the difference.
        assert!(b.admit(2, "mine", 240));
        assert_eq!(b.total(), 1240);
        b.release(1, "s0");
        b.release(1, "unknown");
        assert_eq!(b.total(), 1140);
        b.release_all(1);
        assert_eq!(b.total(), 240);
        assert!(b.admit(1, "again", 100));
    }
}
