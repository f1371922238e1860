//! Each event's JSON, serialised once and shared by everything that needs it or its size.
//!
//! Serialising a large escape-heavy event is the costliest thing a world does with it. The des
//! world needs the JSON at several steps (the publish pipeline, the up link's observation, a
//! concurrent intake's cost, the down link's bandwidth); a live relay sends the same event to
//! every subscriber and again on every replay of its store (serialising it each time made JSON
//! escaping half of `serve`'s CPU under load).
//!
//! Keyed by event id alone: an id is the hash of the event's content, so one id is one event.
//! Bounded by count and bytes, oldest first out; a miss only costs the serialisation again, so
//! the bound never changes a result.

use nostr::prelude::{Event, EventId};
use std::collections::VecDeque;
use std::sync::Arc;

/// Events whose JSON is kept at most.
const MAX_EVENTS: usize = 100_000;
/// Bytes of JSON kept at most (a 10 MiB transfer's frames in flight fit many times over).
const MAX_BYTES: usize = 32 << 20;

/// The memo.
#[derive(Debug, Default)]
pub(crate) struct EventJson {
    by_id: rustc_hash::FxHashMap<EventId, Arc<str>>,
    order: VecDeque<EventId>,
    bytes: usize,
}

impl EventJson {
    /// `event`'s JSON, made on first use.
    pub(crate) fn of(&mut self, event: &Event) -> Arc<str> {
        if let Some(json) = self.by_id.get(&event.id) {
            return json.clone();
        }
        // Its signer may have made it already (escaping the content once for both); the
        // verification memo keeps that, so it is not kept here too.
        if let Some(json) = super::verified::json_of(event) {
            return json;
        }
        let json: Arc<str> = event.as_json().into();
        self.bytes += json.len();
        self.by_id.insert(event.id, json.clone());
        self.order.push_back(event.id);
        while self.order.len() > MAX_EVENTS || self.bytes > MAX_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.by_id.remove(&old) {
                self.bytes -= gone.len();
            }
        }
        json
    }

    /// Events held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
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
        assert!(Arc::ptr_eq(&memo.of(&e), &memo.of(&e)), "made once");
        // Events the signer left no JSON for (parsed ones, say) are serialised once and kept.
        let parsed = Event::from_json(e.as_json()).unwrap();
        crate::nip01::verified::forget_all();
        assert_eq!(&*memo.of(&parsed), e.as_json());
        assert!(
            Arc::ptr_eq(&memo.of(&parsed), &memo.of(&parsed)),
            "made once"
        );
        assert_eq!(memo.len(), 1);
        for i in 0..40u64 {
            let e = me.sign(1, i, vec![], "y".repeat(1 << 20));
            crate::nip01::verified::forget_all();
            memo.of(&e);
        }
        assert!(memo.bytes <= MAX_BYTES);
        assert_eq!(memo.by_id.len(), memo.order.len());
    }
}
