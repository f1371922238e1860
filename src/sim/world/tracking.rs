//! Which events the order tracker follows: the latest made, within its bounds.

use super::World;
use crate::sim::order::MAX_TRACKED_COPIES;
use nostr::prelude::EventId;

impl World {
    /// Notes that `event` was just made for the first time, and has the order tracker forget
    /// the oldest events past its bounds (`OrderTracker::forget`): a long world's memory stays
    /// bounded, as a live world's does, and with 10,000 clients the tracker's table stays
    /// small enough to be quick.
    pub(super) fn track_made(&mut self, event: EventId) {
        self.made_order.push_back(event);
        while self.made_order.len() > crate::relay::MAX_STORED_EVENTS
            || self.order.copies() > MAX_TRACKED_COPIES
        {
            let Some(old) = self.made_order.pop_front() else {
                break;
            };
            self.order.forget(old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::world::PeerId;
    use std::time::Duration;

    #[test]
    fn a_world_forgets_the_oldest_events_past_the_trackers_bound() {
        let mut world = World::new(1);
        let bound = crate::relay::MAX_STORED_EVENTS;
        let id = |n: usize| {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
            EventId::from_byte_array(bytes)
        };
        for n in 0..bound + 10 {
            let at = Duration::from_micros(n as u64);
            if world.order.made(PeerId::Server(0), id(n), at) {
                world.track_made(id(n));
            }
        }
        // Made again: not new, so nothing more is noted.
        assert!(!world
            .order
            .made(PeerId::Server(0), id(bound + 9), Duration::ZERO));
        assert_eq!(world.made_order.len(), bound);
        assert_eq!(
            world.order.made_at(&id(9)),
            None,
            "the oldest are forgotten"
        );
        assert_eq!(
            world.order.made_at(&id(10)),
            Some(Duration::from_micros(10))
        );
        let last = bound + 9;
        assert_eq!(
            world.order.made_at(&id(last)),
            Some(Duration::from_micros(last as u64))
        );
    }
}
