//! Each event's JSON, serialised once and shared by everything that needs it, and its size.
//!
//! Serialising a large escape-heavy event is the costliest thing a world does with it. The des
//! world needs the size at several steps (the publish pipeline, the up link, a concurrent
//! intake's cost, the down link's bandwidth) and the JSON itself only for a trace that stores
//! events whole; a live relay sends the same event to every subscriber and again on every
//! replay of its store (serialising it each time made JSON escaping half of `serve`'s CPU
//! under load).
//!
//! Keyed by event id alone: an id is the hash of the event's content, so one id is one event.
//! Bounded by count and bytes, oldest first out; a miss only costs the serialisation again, so
//! the bound never changes a result.
//!
//! The JSON is `nostr`'s `Event::as_json`, byte for byte, written by [`text`] with
//! `json_text`'s escaper; [`len`] and [`len_of_parts`] give its length without writing it (the
//! signer and the relays need only that, unless a trace stores events whole).

use super::Signatures;
use nostr::prelude::{Event, EventId};
use std::collections::VecDeque;
use std::sync::Arc;

/// `event`'s JSON, `{"id":…,"pubkey":…,"created_at":…,"kind":…,"tags":…,"content":…,"sig":…}`,
/// as `Event::as_json` writes it.
pub(crate) fn text(event: &Event) -> String {
    use std::io::Write as _;
    let (tags, len) = tags_and_len(event);
    let mut json = Vec::with_capacity(len);
    write!(
        json,
        "{{\"id\":\"{}\",\"pubkey\":\"{}\",\"created_at\":{},\"kind\":{},\"tags\":{tags},\"content\":",
        event.id.to_hex(),
        event.pubkey.to_hex(),
        event.created_at.as_secs(),
        event.kind.as_u16()
    )
    .expect("writing to memory");
    super::json_text::write_escaped(&mut json, &event.content);
    write!(
        json,
        ",\"sig\":\"{}\"}}",
        hex::encode::<&[u8]>(event.sig.as_ref())
    )
    .expect("writing to memory");
    String::from_utf8(json).expect("escaped JSON keeps UTF-8 whole")
}

/// The length of `event`'s JSON ([`text`]), counted rather than written.
pub(crate) fn len(event: &Event) -> usize {
    tags_and_len(event).1
}

/// `event`'s tags as JSON, and the length of its whole JSON.
fn tags_and_len(event: &Event) -> (String, usize) {
    let tags = serde_json::to_string(&event.tags).expect("tags serialize");
    let len = len_of_parts(
        event.created_at.as_secs(),
        event.kind.as_u16(),
        tags.len(),
        super::json_text::escaped_len(&event.content) + 2,
    );
    (tags, len)
}

/// The length of the JSON of an event made at `created_at`, of `kind`, whose tags' JSON is
/// `tags_len` bytes long and whose content escaped (quotes included) is `content_len`.
pub(crate) fn len_of_parts(
    created_at: u64,
    kind: u16,
    tags_len: usize,
    content_len: usize,
) -> usize {
    const FIXED: usize =
        r#"{"id":"","pubkey":"","created_at":,"kind":,"tags":,"content":,"sig":""}"#.len();
    FIXED + 64 + 64 + 128 + digits(created_at) + digits(u64::from(kind)) + tags_len + content_len
}

/// Decimal digits of `n`.
fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

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
    /// `event`'s JSON, made on first use, with the real signature in place of a deferred
    /// one's placeholder (made then by `signatures`, the world's).
    pub(crate) fn of(&mut self, event: &Event, signatures: &Signatures) -> Arc<str> {
        if let Some(json) = self.by_id.get(&event.id) {
            return json.clone();
        }
        let json: Arc<str> = match signatures.real_signature_of(event) {
            Some(sig) => {
                let mut signed = event.clone();
                signed.sig = sig;
                text(&signed).into()
            }
            None => text(event).into(),
        };
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

    /// The length of `event`'s JSON, without making it: the kept JSON's, its signer's count
    /// when the world (`signatures`) remembers it, or counted ([`len`]).
    pub(crate) fn len_of(&self, event: &Event, signatures: &Signatures) -> usize {
        match self.by_id.get(&event.id) {
            Some(json) => json.len(),
            None => signatures.json_len(event),
        }
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
        assert_eq!(&*memo.of(&e, &Default::default()), e.as_json());
        assert!(
            Arc::ptr_eq(
                &memo.of(&e, &Default::default()),
                &memo.of(&e, &Default::default())
            ),
            "made once"
        );
        // Events of another signer (parsed ones, say) are serialised once and kept too.
        let parsed = Event::from_json(e.as_json()).unwrap();
        assert_eq!(&*memo.of(&parsed, &Default::default()), e.as_json());
        assert!(
            Arc::ptr_eq(
                &memo.of(&parsed, &Default::default()),
                &memo.of(&parsed, &Default::default())
            ),
            "made once"
        );
        assert_eq!(memo.len(), 1);
        for i in 0..40u64 {
            memo.of(
                &me.sign(1, i, vec![], "y".repeat(1 << 20)),
                &Default::default(),
            );
        }
        assert!(memo.bytes <= MAX_BYTES);
        assert_eq!(memo.by_id.len(), memo.order.len());
    }

    #[test]
    fn the_counted_length_is_the_json_s_at_the_edges_of_each_number() {
        let me = Identity::derive(2, "b");
        for created_at in [0, 9, 10, 99, 100, 1_700_000_000, u64::from(u32::MAX)] {
            for kind in [0u16, 9, 10, 25910, u16::MAX] {
                let e = me.sign(kind, created_at, vec![], "c\"\u{1}é".into());
                assert_eq!(len(&e), e.as_json().len(), "{created_at} {kind}");
                assert_eq!(text(&e), e.as_json());
                assert_eq!(
                    EventJson::default().len_of(&e, &Default::default()),
                    e.as_json().len()
                );
            }
        }
    }
}
