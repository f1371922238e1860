//! Each event's JSON, made once per world and shared by everything that needs it or its size:
//! the publish pipeline, the up link's observation (traces store events whole), a concurrent
//! intake's cost per KiB, the down link's bandwidth. Serialising a large escape-heavy event is
//! the costliest thing the world does with it, and it used to be done at each of those steps.
//!
//! Keyed by event id alone: in a world every event is signed by its own peers, deterministically,
//! so one id is one event. Bounded by bytes, oldest first out; a miss only costs the
//! serialisation again, so the bound never changes a result.

use nostr::prelude::{Event, EventId};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

/// Bytes of JSON kept at most (a 10 MiB transfer's frames in flight fit many times over).
const MAX_BYTES: usize = 32 << 20;

/// The memo.
#[derive(Debug, Default)]
pub(super) struct EventJson {
    by_id: BTreeMap<EventId, Rc<str>>,
    order: VecDeque<EventId>,
    bytes: usize,
}

impl EventJson {
    /// `event`'s JSON, made on first use.
    pub(super) fn of(&mut self, event: &Event) -> Rc<str> {
        if let Some(json) = self.by_id.get(&event.id) {
            return json.clone();
        }
        let json: Rc<str> = event.as_json().into();
        self.bytes += json.len();
        self.by_id.insert(event.id, json.clone());
        self.order.push_back(event.id);
        while self.bytes > MAX_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.by_id.remove(&old) {
                self.bytes -= gone.len();
            }
        }
        json
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::Identity;

    #[test]
    fn the_json_is_the_event_s_and_the_memo_stays_bounded() {
        let me = Identity::derive(1, "a");
        let mut memo = EventJson::default();
        let e = me.sign(1, 0, vec![], "x".repeat(1 << 20));
        assert_eq!(&*memo.of(&e), e.as_json());
        assert!(Rc::ptr_eq(&memo.of(&e), &memo.of(&e)), "made once");
        for i in 0..40u64 {
            memo.of(&me.sign(1, i, vec![], "y".repeat(1 << 20)));
        }
        assert!(memo.bytes <= MAX_BYTES);
        assert_eq!(memo.by_id.len(), memo.order.len());
    }
}
