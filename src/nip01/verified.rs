//! Event verification with a memo of events already known to be good.
//!
//! A relay must refuse every event whose id or signature is wrong, and relaysim's relays do.
//! But most events a simulated relay sees were signed a moment earlier by this process, and
//! checking them is costly: a Schnorr verification (with the parse of the author's key it
//! starts with) costs more than everything else the relay does with a small event, and the
//! id's recomputation serialises the whole content again (escaping it), which dominates with
//! large escape-heavy events. So the signer vouches for each event it makes, and a
//! verification that passed once vouches too:
//!
//! - for the `(id, signature)` pair: a later event with that pair needs only its id checked;
//! - for the fields behind the id (author, time, kind, tags, content), kept for recent events
//!   within a byte budget: a later event with that pair and *equal* fields (compared, not
//!   hashed) is the vouched event itself, so its id needs no recomputation. The memo holds
//!   the signer's own shared copy of the event rather than copies of its fields, so the relay
//!   that receives that very copy recognises it by address: the memo's reference keeps the
//!   event alive and unchangeable (an `Arc` is only mutable alone), so no other event can be
//!   at that address. Any other copy is compared field by field.
//!
//! Any other event is verified in full, so a tampered event fails as it would without the
//! memo. The signer also leaves the length of the event's JSON with its fields (it counts it
//! while hashing the id, without writing the JSON), and [`json_len`] hands it to whoever
//! measures that very event (same fields, compared) next. The memo is per thread (a world runs on one thread) and bounded: when full it forgets,
//! which costs only speed. Whether an event is in it never changes a verdict, so it cannot
//! reach a run's output.

use nostr::prelude::{Event, EventId};
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;

/// Pairs remembered per thread before the memo is emptied (96 bytes each: about 6 MiB).
const CAPACITY: usize = 1 << 16;
/// Content bytes of vouched fields kept per thread; the oldest are forgotten first. Events
/// are verified moments after they are signed, so a few MiB cover every event in flight.
const FIELD_BYTES: usize = 16 << 20;

/// An event's id and signature, side by side.
type Pair = [u8; 96];

/// A vouched event (whose fields are what its id hashes), and its JSON's length when the
/// signer counted it.
struct Fields {
    event: Arc<Event>,
    json_len: Option<usize>,
}

impl Fields {
    /// Bytes it holds, for the budget: the strings, and a fixed allowance for the entry and
    /// each tag (so events with empty content still count).
    fn bytes(&self) -> usize {
        let tags: usize = self
            .event
            .tags
            .iter()
            .map(|t| 24 + t.as_slice().iter().map(|s| s.len() + 24).sum::<usize>())
            .sum();
        256 + tags + self.event.content.len()
    }

    /// Whether `event` has the vouched event's signature (its id is the key it was found by).
    fn signs(&self, event: &Event) -> bool {
        std::ptr::eq(&*self.event, event) || self.event.sig == event.sig
    }

    /// Whether `event` has the vouched event's fields: it is that very copy (see the module
    /// documentation), or its fields are equal.
    fn are_of(&self, event: &Event) -> bool {
        let vouched = &*self.event;
        std::ptr::eq(vouched, event)
            || (vouched.pubkey == event.pubkey
                && vouched.created_at == event.created_at
                && vouched.kind == event.kind
                && vouched.content == event.content
                && vouched.tags == event.tags)
    }
}

/// A pair is vouched for when it is in `pairs` or, unless it is a deferred signature's
/// placeholder (which is checked without the pair), a key of `fields`: a pair kept with its
/// fields is not in `pairs` as well, and goes there when its fields are forgotten. With
/// 10,000 clients the memo is larger than any cache, so every lookup it saves is a miss saved.
///
/// Fields are found by the event's id alone (their event holds the signature): a third of the
/// key, and of the table, a 96-byte pair would make.
#[derive(Default)]
struct Memo {
    pairs: FxHashSet<Pair>,
    /// At most one vouched event per id; another pair with that id goes to `pairs`.
    fields: FxHashMap<EventId, Fields>,
    /// Ids with fields, oldest first, and their content bytes in all.
    order: VecDeque<EventId>,
    bytes: usize,
}

impl Memo {
    fn vouch(&mut self, event: &Arc<Event>, json_len: Option<usize>) {
        let fields = Fields {
            event: event.clone(),
            json_len,
        };
        let size = fields.bytes();
        if size > FIELD_BYTES || self.fields.contains_key(&event.id) {
            self.vouch_pair(event);
            return;
        }
        while self.bytes + size > FIELD_BYTES || self.order.len() >= CAPACITY {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(f) = self.fields.remove(&old) {
                self.bytes -= f.bytes();
                self.vouch_pair(&f.event);
            }
        }
        self.bytes += size;
        self.order.push_back(event.id);
        self.fields.insert(event.id, fields);
    }

    /// Keeps the pair of `event` in `pairs`.
    fn vouch_pair(&mut self, event: &Event) {
        // A deferred signature's placeholder is checked without the pair (`deferred`).
        if !super::deferred::is_placeholder(event) {
            if self.pairs.len() >= CAPACITY {
                self.pairs.clear();
            }
            self.pairs.insert(pair(event));
        }
    }

    /// The vouched fields kept for `event`'s pair, if any.
    fn fields_of(&self, event: &Event) -> Option<&Fields> {
        self.fields.get(&event.id).filter(|f| f.signs(event))
    }

    /// Whether `event` is a vouched event itself (equal fields), and whether its pair is
    /// vouched for.
    fn knows(&self, event: &Event) -> (bool, bool) {
        match self.fields_of(event) {
            Some(f) => (f.are_of(event), !super::deferred::is_placeholder(event)),
            None => (false, self.pairs.contains(&pair(event))),
        }
    }
}

thread_local! {
    static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
}

fn pair(event: &Event) -> Pair {
    let mut p = [0u8; 96];
    p[..32].copy_from_slice(event.id.as_bytes());
    p[32..].copy_from_slice(event.sig.as_ref());
    p
}

/// Records that `event` is good: its signature for its id, and its id for its fields (the
/// signer made it, or it was verified in full). Crate-private: only this process's signer and
/// a full verification may vouch, so nothing outside can make a bad event pass.
pub(crate) fn vouch(event: &Event) {
    let shared = Arc::new(event.clone());
    MEMO.with(|m| m.borrow_mut().vouch(&shared, None));
}

/// As [`vouch`], for the signer's shared copy of the event, with the length of its JSON
/// (`event_json::text(event).len()`) for [`json_len`].
pub(crate) fn vouch_with_json_len(event: &Arc<Event>, json_len: usize) {
    MEMO.with(|m| m.borrow_mut().vouch(event, Some(json_len)));
}

/// Empties this thread's memo, for tests of what happens once it has forgotten.
#[cfg(test)]
pub(crate) fn forget_all() {
    MEMO.with(|m| *m.borrow_mut() = Memo::default());
}

/// The length of `event`'s JSON: its signer's count when this very event (same id, signature
/// and fields) was signed on this thread recently, else counted (`event_json::len`).
pub(crate) fn json_len(event: &Event) -> usize {
    let signed = MEMO.with(|m| {
        let m = m.borrow();
        let f = m.fields_of(event)?;
        if f.are_of(event) {
            f.json_len
        } else {
            None
        }
    });
    signed.unwrap_or_else(|| super::event_json::len(event))
}

/// Why an event fails verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// The id is not the hash of the event's fields.
    #[error("bad event id")]
    Id,
    /// The signature does not verify for the id and the author.
    #[error("bad signature")]
    Signature,
}

/// Verifies `event` as `Event::verify` does. A vouched event with equal fields passes as it
/// is; otherwise its id is recomputed, and its signature checked unless this
/// `(id, signature)` pair was vouched for or is a deferred signature's placeholder
/// ([`super::deferred`]).
pub fn verify(event: &Event) -> Result<(), Invalid> {
    let (same_fields, vouched_pair) = MEMO.with(|m| m.borrow().knows(event));
    if same_fields {
        return Ok(());
    }
    if !event.verify_id() {
        return Err(Invalid::Id);
    }
    if vouched_pair {
        return Ok(());
    }
    if super::deferred::stands_for_a_signature(event) {
        vouch(event);
        return Ok(());
    }
    if !event.verify_signature() {
        return Err(Invalid::Signature);
    }
    vouch(event);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::Identity;

    fn with_content(event: &Event, content: &str) -> Event {
        let mut json: serde_json::Value = serde_json::from_str(&event.as_json()).unwrap();
        json["content"] = content.into();
        Event::from_json(json.to_string()).unwrap()
    }

    fn with_sig_of(event: &Event, other: &Event) -> Event {
        let mut json: serde_json::Value = serde_json::from_str(&event.as_json()).unwrap();
        json["sig"] = serde_json::to_value(other.sig).unwrap();
        Event::from_json(json.to_string()).unwrap()
    }

    #[test]
    fn a_signed_event_verifies_and_tampering_is_caught_even_when_vouched() {
        let me = Identity::derive(1, "a");
        let good = me.sign(1, 0, vec![], "hello".into());
        assert_eq!(verify(&good), Ok(()));
        // The signer vouched for (id, sig); a changed content keeps both but not the id.
        assert_eq!(verify(&with_content(&good, "tampered")), Err(Invalid::Id));
        // Another event's signature on this id is not vouched for, and fails in full.
        let other = me.sign(1, 0, vec![], "other".into());
        assert_eq!(verify(&with_sig_of(&good, &other)), Err(Invalid::Signature));
    }

    #[test]
    fn the_memo_holds_the_signers_own_copy_and_knows_equal_copies_too() {
        let me = Identity::derive(7, "h");
        let shared = me.sign_shared(1, 0, vec![], "shared".into());
        let held = MEMO.with(|m| {
            m.borrow()
                .fields
                .get(&shared.id)
                .is_some_and(|f| Arc::ptr_eq(&f.event, &shared))
        });
        assert!(held, "the memo shares the signer's event, not a copy");
        assert_eq!(verify(&shared), Ok(()));
        let copy = Event::clone(&shared);
        assert_eq!(verify(&copy), Ok(()));
        assert_eq!(json_len(&copy), copy.as_json().len());
        assert_eq!(json_len(&shared), shared.as_json().len());
        // A copy changed after signing is another event: not the memo's, and caught.
        assert_eq!(verify(&with_content(&shared, "changed")), Err(Invalid::Id));
    }

    #[test]
    fn an_unvouched_event_is_verified_in_full_and_then_remembered() {
        let good = Identity::derive(2, "b").sign(1, 0, vec![], "x".into());
        forget_all();
        assert_eq!(verify(&good), Ok(()));
        assert_eq!(MEMO.with(|m| m.borrow().knows(&good)), (true, true));
    }

    #[test]
    fn the_memo_stays_bounded() {
        let me = Identity::derive(3, "c");
        forget_all();
        let mut first = None;
        for i in 0..(CAPACITY + 10) {
            let mut e = me.sign(1, 0, vec![], String::new());
            // Distinct pairs without signing 65,546 events: vary the stored id bytes.
            let mut json: serde_json::Value = serde_json::from_str(&e.as_json()).unwrap();
            json["content"] = i.to_string().into();
            e = Event::from_json(json.to_string()).unwrap();
            vouch(&e);
            first.get_or_insert(e);
        }
        let first = first.expect("vouched some");
        MEMO.with(|m| {
            let m = m.borrow();
            assert!(m.pairs.len() <= CAPACITY);
            assert!(m.bytes <= FIELD_BYTES && m.fields.len() == m.order.len());
            assert!(m.fields.len() <= CAPACITY);
            assert_eq!(
                m.knows(&first),
                (false, true),
                "its fields are forgotten, its pair still vouched for"
            );
        });
    }

    #[test]
    fn fields_are_kept_within_their_byte_budget_oldest_forgotten_first() {
        let me = Identity::derive(4, "d");
        forget_all();
        let big = "x".repeat(FIELD_BYTES / 3 + 1);
        let events: Vec<Event> = (0..4).map(|i| me.sign(1, i, vec![], big.clone())).collect();
        MEMO.with(|m| {
            let m = m.borrow();
            assert!(m.bytes <= FIELD_BYTES);
            assert!(
                !m.fields.contains_key(&events[0].id),
                "the oldest is forgotten"
            );
            assert!(m.fields.contains_key(&events[3].id));
        });
        // Forgotten fields only cost speed: the event still verifies.
        assert_eq!(verify(&events[0]), Ok(()));
    }

    #[test]
    fn a_vouched_event_with_other_tags_or_time_is_checked_in_full() {
        let me = Identity::derive(5, "e");
        let good = me.sign(1, 7, vec![], "same".into());
        let mut json: serde_json::Value = serde_json::from_str(&good.as_json()).unwrap();
        json["created_at"] = 8.into();
        let retimed = Event::from_json(json.to_string()).unwrap();
        assert_eq!(verify(&retimed), Err(Invalid::Id));
        let mut json: serde_json::Value = serde_json::from_str(&good.as_json()).unwrap();
        json["tags"] = serde_json::json!([["p", "00"]]);
        let retagged = Event::from_json(json.to_string()).unwrap();
        assert_eq!(verify(&retagged), Err(Invalid::Id));
    }

    #[test]
    fn a_deferred_signature_verifies_after_the_memo_forgets_it_and_tampering_is_still_caught() {
        let me = Identity::derive(6, "f").deferring_signatures();
        let good = me.sign(1, 0, vec![], "deferred".into());
        forget_all();
        assert_eq!(verify(&good), Ok(()));
        forget_all();
        // Changed fields: the placeholder still matches the stored id, the id not the fields.
        assert_eq!(verify(&with_content(&good, "tampered")), Err(Invalid::Id));
        // A real signature of another event, or a placeholder of another id, fails in full.
        let other = me.sign(1, 0, vec![], "other".into());
        assert_eq!(verify(&with_sig_of(&good, &other)), Err(Invalid::Signature));
        let eager = Identity::derive(6, "g");
        let mut foreign = eager.sign(1, 0, vec![], "x".into());
        foreign.sig = crate::nip01::deferred::placeholder(&foreign.id);
        forget_all();
        assert_eq!(
            verify(&foreign),
            Err(Invalid::Signature),
            "not a deferring key"
        );
        drop(me);
        forget_all();
        assert_eq!(verify(&good), Err(Invalid::Signature), "its key is gone");
    }
}
