//! Signatures and their verification, for one world: which of its identities defer their
//! signatures, and a memo of the events already known to be good.
//!
//! A relay must refuse every event whose id or signature is wrong, and relaysim's relays do.
//! But most events a simulated relay sees were signed a moment earlier by a peer of the same
//! world, and checking them is costly: a Schnorr verification (with the parse of the author's
//! key it starts with) costs more than everything else the relay does with a small event, and
//! the id's recomputation serialises the whole content again (escaping it), which dominates
//! with large escape-heavy events. So the world's signer vouches for each event it makes, and
//! a verification that passed once vouches too:
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
//! memo. Whether an event is in the memo never changes a verdict, only its cost.
//!
//! **Deferred signatures.** In the `des` world no signature leaves the process unless a trace
//! stores events whole, and making one is the largest single cost of a small event. So a
//! world's identities may defer: an event carries a *placeholder*, the event id twice (a real
//! signature's length, so every size a relay or a limit measures is unchanged), which stands
//! for the one signature the author's key would make for that id (signing is deterministic).
//! A relay of the world accepts a placeholder exactly when it would accept that signature: the
//! id must be the hash of the fields, the placeholder must match the id, and the author must
//! be an identity of this world that defers (only its owner could have made the event). A
//! placeholder for any other key, or with any byte changed, goes to a full Schnorr
//! verification and fails it, as a bad signature does. Whatever writes an event out (a trace
//! storing events whole) asks [`Signatures::real_signature_of`] for the real signature, made
//! then, byte-identical to what eager signing writes.
//!
//! The state belongs to the world that creates it and hands it to its relays and identities
//! ([`Signatures`] is a shared handle); nothing lives on the thread, so a relay's verdict
//! depends only on the event and its world.

use nostr::event::Signature;
use nostr::prelude::{Event, EventId, Keys};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Pairs remembered before the memo is emptied (96 bytes each: about 6 MiB).
const CAPACITY: usize = 1 << 16;
/// Content bytes of vouched fields kept; the oldest are forgotten first. Events are verified
/// moments after they are signed, so a few MiB cover every event in flight.
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
        if !is_placeholder(event) {
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
            Some(f) => (f.are_of(event), !is_placeholder(event)),
            None => (false, self.pairs.contains(&pair(event))),
        }
    }
}

/// What a world knows about signatures: the memo, and its identities that defer.
#[derive(Default)]
struct State {
    memo: Memo,
    /// The keys of the world's identities that defer their signatures, by public key.
    deferring: FxHashMap<[u8; 32], Arc<Keys>>,
}

/// One world's signature state, shared by its relays and identities (a clone is a handle on the
/// same state). Worlds on other threads, and other worlds, have their own.
#[derive(Clone, Default)]
pub struct Signatures(Arc<Mutex<State>>);

impl std::fmt::Debug for Signatures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signatures")
    }
}

fn pair(event: &Event) -> Pair {
    let mut p = [0u8; 96];
    p[..32].copy_from_slice(event.id.as_bytes());
    p[32..].copy_from_slice(event.sig.as_ref());
    p
}

/// The placeholder that stands for the signature of `id`: the id twice.
pub(crate) fn placeholder(id: &EventId) -> Signature {
    let mut bytes = [0u8; 64];
    bytes[..32].copy_from_slice(id.as_bytes());
    bytes[32..].copy_from_slice(id.as_bytes());
    Signature::from_byte_array(bytes)
}

/// Whether `event`'s signature is the placeholder for its id.
fn is_placeholder(event: &Event) -> bool {
    let sig: &[u8] = event.sig.as_ref();
    sig[..32] == *event.id.as_bytes() && sig[32..] == *event.id.as_bytes()
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

impl Signatures {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held left nothing half-done that a verdict relies on:
        // every update is a whole insertion or removal.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that `keys`, an identity of this world, defers its signatures.
    pub(crate) fn register_deferring(&self, keys: &Arc<Keys>) {
        self.state()
            .deferring
            .insert(keys.public_key().to_bytes(), Arc::clone(keys));
    }

    /// Records that `event` is good: its signature for its id, and its id for its fields (this
    /// world's signer made it, or it was verified in full), with the length of its JSON when
    /// the signer counted it. Crate-private: only the signer and a full verification may vouch,
    /// so nothing outside can make a bad event pass.
    pub(crate) fn vouch(&self, event: &Arc<Event>, json_len: Option<usize>) {
        self.state().memo.vouch(event, json_len);
    }

    /// The length of `event`'s JSON: its signer's count when this very event (same id,
    /// signature and fields) was signed in this world recently, else counted
    /// (`event_json::len`).
    pub fn json_len(&self, event: &Event) -> usize {
        let signed = {
            let state = self.state();
            state
                .memo
                .fields_of(event)
                .filter(|f| f.are_of(event))
                .and_then(|f| f.json_len)
        };
        signed.unwrap_or_else(|| super::event_json::len(event))
    }

    /// Verifies `event` as `Event::verify` does. A vouched event with equal fields passes as it
    /// is; otherwise its id is recomputed, and its signature checked unless this
    /// `(id, signature)` pair was vouched for or is the placeholder of a deferring identity of
    /// this world.
    pub fn verify(&self, event: &Event) -> Result<(), Invalid> {
        let (same_fields, vouched_pair, deferring) = {
            let state = self.state();
            let (same, pair) = state.memo.knows(event);
            let deferring =
                is_placeholder(event) && state.deferring.contains_key(&event.pubkey.to_bytes());
            (same, pair, deferring)
        };
        if same_fields {
            return Ok(());
        }
        if !event.verify_id() {
            return Err(Invalid::Id);
        }
        if vouched_pair {
            return Ok(());
        }
        if deferring {
            self.vouch(&Arc::new(event.clone()), None);
            return Ok(());
        }
        if !event.verify_signature() {
            return Err(Invalid::Signature);
        }
        self.vouch(&Arc::new(event.clone()), None);
        Ok(())
    }

    /// The real signature of `event` when it carries the placeholder of a deferring identity
    /// of this world (made now, byte for byte what eager signing makes); `None` for any other
    /// event, whose signature is what it carries.
    pub fn real_signature_of(&self, event: &Event) -> Option<Signature> {
        if !is_placeholder(event) {
            return None;
        }
        let keys = self
            .state()
            .deferring
            .get(&event.pubkey.to_bytes())
            .cloned()?;
        Some(super::identity::schnorr(&keys, &event.id))
    }

    /// Forgets every vouched event, for tests of what happens once the memo has forgotten.
    #[cfg(test)]
    fn forget_vouched(&self) {
        self.state().memo = Memo::default();
    }
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
        let world = Signatures::default();
        let me = Identity::derive(1, "a").vouching_to(&world);
        let good = me.sign(1, 0, vec![], "hello".into());
        assert_eq!(world.verify(&good), Ok(()));
        // The signer vouched for (id, sig); a changed content keeps both but not the id.
        assert_eq!(
            world.verify(&with_content(&good, "tampered")),
            Err(Invalid::Id)
        );
        // Another event's signature on this id is not vouched for, and fails in full.
        let other = me.sign(1, 0, vec![], "other".into());
        assert_eq!(
            world.verify(&with_sig_of(&good, &other)),
            Err(Invalid::Signature)
        );
    }

    #[test]
    fn the_memo_holds_the_signers_own_copy_and_knows_equal_copies_too() {
        let world = Signatures::default();
        let me = Identity::derive(7, "h").vouching_to(&world);
        let shared = me.sign_shared(1, 0, vec![], "shared".into());
        let held = world
            .state()
            .memo
            .fields
            .get(&shared.id)
            .is_some_and(|f| Arc::ptr_eq(&f.event, &shared));
        assert!(held, "the memo shares the signer's event, not a copy");
        assert_eq!(world.verify(&shared), Ok(()));
        let copy = Event::clone(&shared);
        assert_eq!(world.verify(&copy), Ok(()));
        assert_eq!(world.json_len(&copy), copy.as_json().len());
        assert_eq!(world.json_len(&shared), shared.as_json().len());
        // A copy changed after signing is another event: not the memo's, and caught.
        assert_eq!(
            world.verify(&with_content(&shared, "changed")),
            Err(Invalid::Id)
        );
    }

    #[test]
    fn an_unvouched_event_is_verified_in_full_and_then_remembered() {
        let world = Signatures::default();
        let good = Identity::derive(2, "b").sign(1, 0, vec![], "x".into());
        assert_eq!(world.state().memo.knows(&good), (false, false));
        assert_eq!(world.verify(&good), Ok(()));
        assert_eq!(world.state().memo.knows(&good), (true, true));
    }

    #[test]
    fn one_worlds_vouching_is_not_anothers() {
        let (a, b) = (Signatures::default(), Signatures::default());
        let lazy = Identity::derive(8, "w").deferring_signatures(&a);
        let event = lazy.sign(1, 0, vec![], "x".into());
        assert_eq!(a.verify(&event), Ok(()));
        assert_eq!(
            b.verify(&event),
            Err(Invalid::Signature),
            "a placeholder stands for a signature only in its own world"
        );
    }

    #[test]
    fn the_memo_stays_bounded() {
        let world = Signatures::default();
        let me = Identity::derive(3, "c").vouching_to(&world);
        let mut first = None;
        for i in 0..(CAPACITY + 10) {
            let mut e = me.sign(1, 0, vec![], String::new());
            // Distinct pairs without signing 65,546 events: vary the stored id bytes.
            let mut json: serde_json::Value = serde_json::from_str(&e.as_json()).unwrap();
            json["content"] = i.to_string().into();
            e = Event::from_json(json.to_string()).unwrap();
            world.vouch(&Arc::new(e.clone()), None);
            first.get_or_insert(e);
        }
        let first = first.expect("vouched some");
        let state = world.state();
        let m = &state.memo;
        assert!(m.pairs.len() <= CAPACITY);
        assert!(m.bytes <= FIELD_BYTES && m.fields.len() == m.order.len());
        assert!(m.fields.len() <= CAPACITY);
        assert_eq!(
            m.knows(&first),
            (false, true),
            "its fields are forgotten, its pair still vouched for"
        );
    }

    #[test]
    fn fields_are_kept_within_their_byte_budget_oldest_forgotten_first() {
        let world = Signatures::default();
        let me = Identity::derive(4, "d").vouching_to(&world);
        let big = "x".repeat(FIELD_BYTES / 3 + 1);
        let events: Vec<Event> = (0..4).map(|i| me.sign(1, i, vec![], big.clone())).collect();
        {
            let state = world.state();
            assert!(state.memo.bytes <= FIELD_BYTES);
            assert!(
                !state.memo.fields.contains_key(&events[0].id),
                "the oldest is forgotten"
            );
            assert!(state.memo.fields.contains_key(&events[3].id));
        }
        // Forgotten fields only cost speed: the event still verifies.
        assert_eq!(world.verify(&events[0]), Ok(()));
    }

    #[test]
    fn a_vouched_event_with_other_tags_or_time_is_checked_in_full() {
        let world = Signatures::default();
        let me = Identity::derive(5, "e").vouching_to(&world);
        let good = me.sign(1, 7, vec![], "same".into());
        let mut json: serde_json::Value = serde_json::from_str(&good.as_json()).unwrap();
        json["created_at"] = 8.into();
        let retimed = Event::from_json(json.to_string()).unwrap();
        assert_eq!(world.verify(&retimed), Err(Invalid::Id));
        let mut json: serde_json::Value = serde_json::from_str(&good.as_json()).unwrap();
        json["tags"] = serde_json::json!([["p", "00"]]);
        let retagged = Event::from_json(json.to_string()).unwrap();
        assert_eq!(world.verify(&retagged), Err(Invalid::Id));
    }

    #[test]
    fn a_deferred_signature_verifies_after_the_memo_forgets_it_and_tampering_is_still_caught() {
        let world = Signatures::default();
        let me = Identity::derive(6, "f").deferring_signatures(&world);
        let good = me.sign(1, 0, vec![], "deferred".into());
        world.forget_vouched();
        assert_eq!(world.verify(&good), Ok(()));
        world.forget_vouched();
        // Changed fields: the placeholder still matches the stored id, the id not the fields.
        assert_eq!(
            world.verify(&with_content(&good, "tampered")),
            Err(Invalid::Id)
        );
        // A real signature of another event, or a placeholder of another id, fails in full.
        let other = me.sign(1, 0, vec![], "other".into());
        assert_eq!(
            world.verify(&with_sig_of(&good, &other)),
            Err(Invalid::Signature)
        );
        let eager = Identity::derive(6, "g");
        let mut foreign = eager.sign(1, 0, vec![], "x".into());
        foreign.sig = placeholder(&foreign.id);
        assert_eq!(
            world.verify(&foreign),
            Err(Invalid::Signature),
            "not a deferring key of this world"
        );
    }

    #[test]
    fn a_deferred_event_differs_from_the_signed_one_only_in_its_signature_until_completed() {
        let world = Signatures::default();
        let eager = Identity::derive(1, "a");
        let lazy = Identity::derive(1, "a").deferring_signatures(&world);
        let tags = vec![nostr::prelude::Tag::public_key(eager.public_key())];
        let signed = eager.sign(25910, 1_700_000_000, tags.clone(), "hi \"x\"".into());
        let deferred = lazy.sign(25910, 1_700_000_000, tags, "hi \"x\"".into());
        assert_eq!(deferred.id, signed.id);
        assert_ne!(deferred.sig, signed.sig);
        assert_eq!(deferred.as_json().len(), signed.as_json().len());
        let mut completed = deferred.clone();
        completed.sig = world
            .real_signature_of(&deferred)
            .expect("a deferred signature");
        assert_eq!(completed.as_json(), signed.as_json());
        assert!(completed.verify().is_ok());
        assert_eq!(world.real_signature_of(&signed), None, "already signed");
        // Another world cannot sign for this one's identity.
        assert_eq!(Signatures::default().real_signature_of(&deferred), None);
        // The world's event JSON carries the real signature.
        let mut memo = crate::nip01::event_json::EventJson::default();
        assert_eq!(&*memo.of(&deferred, &world), signed.as_json());
    }

    #[test]
    fn an_eager_identity_placeholder_does_not_stand_for_a_signature() {
        let world = Signatures::default();
        let eager = Identity::derive(3, "c").vouching_to(&world);
        let mut event = eager.sign(1, 0, vec![], "x".into());
        event.sig = placeholder(&event.id);
        assert_eq!(world.verify(&event), Err(Invalid::Signature));
    }
}
