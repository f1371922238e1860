//! The relay's store of ephemeral events: expiry at the end of their lifetime, and eviction
//! of the oldest beyond the store's bounds.

use super::Relay;
use std::time::Duration;

impl Relay {
    pub(super) fn expire_stored(&mut self, now: Duration) {
        while let Some((at, id)) = self.stored_order.front().copied() {
            if at > now {
                break;
            }
            self.stored_order.pop_front();
            if let Some((e, _)) = self.stored.remove(&id) {
                self.stored_bytes -= e.content.len();
            }
        }
    }

    /// Keeps the stored events within [`MAX_STORED_EVENTS`] and [`MAX_STORED_BYTES`], oldest
    /// first out: a simulated relay must not grow without end under a flood.
    pub(super) fn evict_stored(&mut self) {
        let (max_events, max_bytes) = self.store_bounds;
        while self.stored.len() > max_events || self.stored_bytes > max_bytes {
            let Some((_, id)) = self.stored_order.pop_front() else {
                break;
            };
            if let Some((e, _)) = self.stored.remove(&id) {
                self.stored_bytes -= e.content.len();
                self.counters.evicted += 1;
            }
        }
    }
}
