//! What is still on its way in the world's queue: when the run ends, and for the queue's own
//! bound (messages due after the end are not scheduled; see [`World::run_to_end`]).

use super::{Action, CallId, World};

impl Action {
    /// A message on its way: to a relay, to a peer, or to the wire.
    pub(super) fn is_message(&self) -> bool {
        matches!(
            self,
            Action::ToRelay { .. } | Action::ToPeer { .. } | Action::Wire { .. }
        )
    }
}

impl World {
    /// The streaming calls whose slow reader (`consume_interval`) still had a read scheduled:
    /// their application was reading when the world stopped, so chunks it had not read yet
    /// were not lost, only not read in time. `(client, call)`, in order.
    pub fn readers_still_reading(&self) -> Vec<(usize, CallId)> {
        let mut found: Vec<(usize, CallId)> = self
            .queue
            .values()
            .filter_map(|a| match a {
                Action::Consume { client, call } => Some((*client, *call)),
                _ => None,
            })
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Messages on their way (to relays, to peers, to the wire).
    pub fn messages_in_flight(&self) -> usize {
        self.queue.values().filter(|a| a.is_message()).count()
    }
}
