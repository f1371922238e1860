//! Each event's JSON, serialised once however many readers it reaches.
//!
//! A live relay sends the same event to every subscriber, and again on every replay of its
//! store: serialising it each time made JSON escaping half of `serve`'s CPU under load (a
//! profile of `tests/it/hostile.rs`'s long run). The texts are kept in a cache bounded by count
//! and bytes, oldest first out; an evicted event is serialised again if it is sent again.

use nostr::prelude::{Event, EventId};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Events whose text is kept.
const MAX_EVENTS: usize = 100_000;
/// Bytes of text kept.
const MAX_BYTES: usize = 32 << 20;

/// The cache.
#[derive(Debug, Default)]
pub(super) struct EventTexts {
    texts: BTreeMap<EventId, Arc<str>>,
    order: VecDeque<EventId>,
    bytes: usize,
}

impl EventTexts {
    /// `event`'s JSON.
    pub fn get(&mut self, event: &Event) -> Arc<str> {
        if let Some(text) = self.texts.get(&event.id) {
            return text.clone();
        }
        let text: Arc<str> = event.as_json().into();
        self.bytes += text.len();
        self.texts.insert(event.id, text.clone());
        self.order.push_back(event.id);
        while self.order.len() > MAX_EVENTS || self.bytes > MAX_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(t) = self.texts.remove(&old) {
                self.bytes -= t.len();
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::outbox::Outgoing;
    use crate::nip01::{Identity, RelayMessage};

    #[test]
    fn a_frame_from_the_cached_text_is_the_frame_to_wire_writes() {
        let event =
            Identity::derive(1, "a").sign(25910, 1_700_000_000, vec![], "x \"q\" \n é".into());
        let mut cache = EventTexts::default();
        for sub in ["s", "with \"quotes\" and \\ and \u{1}", ""] {
            let expected = crate::live::wire::to_wire(&RelayMessage::Event {
                sub: sub.into(),
                event: std::sync::Arc::new(event.clone()),
            });
            let outgoing = Outgoing::event(sub, cache.get(&event));
            assert_eq!(outgoing.text(), expected);
            assert_eq!(outgoing.len(), expected.len());
            assert_eq!(
                outgoing.into_message().into_text().unwrap().as_str(),
                expected
            );
        }
        assert_eq!(cache.texts.len(), 1);
    }
}
