//! Event verification with a memo of signatures already known to be good.
//!
//! A relay must refuse every event whose id or signature is wrong, and relaysim's relays do.
//! But most events a simulated relay sees were signed a moment earlier by this process, and a
//! Schnorr verification (with the parse of the author's key it starts with) costs more than
//! everything else the relay does with a small event. So the signer vouches for each
//! `(id, signature)` it makes, and a verification that passed once vouches too; a later
//! verification of a vouched pair checks only the id, which it recomputes from the event's
//! fields, so a tampered event still fails. Any other pair is verified in full.
//!
//! The memo is per thread (a world runs on one thread) and bounded: when full it is emptied,
//! which costs only speed. Whether a pair is in it never changes a verdict, so it cannot reach
//! a run's output.

use nostr::prelude::Event;
use std::cell::RefCell;
use std::collections::HashSet;

/// Pairs remembered per thread before the memo is emptied (96 bytes each: about 6 MiB).
const CAPACITY: usize = 1 << 16;

/// An event's id and signature, side by side.
type Pair = [u8; 96];

thread_local! {
    static VOUCHED: RefCell<HashSet<Pair>> = RefCell::new(HashSet::new());
}

fn pair(event: &Event) -> Pair {
    let mut p = [0u8; 96];
    p[..32].copy_from_slice(event.id.as_bytes());
    p[32..].copy_from_slice(event.sig.as_ref());
    p
}

/// Records that `event`'s signature is good for its id (the signer made it, or it was
/// verified in full). Crate-private: only this process's signer and a full verification may
/// vouch, so nothing outside can make a bad pair pass.
pub(crate) fn vouch(event: &Event) {
    VOUCHED.with(|v| {
        let mut v = v.borrow_mut();
        if v.len() >= CAPACITY {
            v.clear();
        }
        v.insert(pair(event));
    });
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

/// Verifies `event` as `Event::verify` does: its id is recomputed every time; its signature is
/// checked unless this `(id, signature)` pair was vouched for.
pub fn verify(event: &Event) -> Result<(), Invalid> {
    if !event.verify_id() {
        return Err(Invalid::Id);
    }
    let key = pair(event);
    if VOUCHED.with(|v| v.borrow().contains(&key)) {
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
    fn an_unvouched_event_is_verified_in_full_and_then_remembered() {
        let good = Identity::derive(2, "b").sign(1, 0, vec![], "x".into());
        VOUCHED.with(|v| v.borrow_mut().clear());
        assert_eq!(verify(&good), Ok(()));
        assert!(VOUCHED.with(|v| v.borrow().contains(&pair(&good))));
    }

    #[test]
    fn the_memo_stays_bounded() {
        let me = Identity::derive(3, "c");
        VOUCHED.with(|v| v.borrow_mut().clear());
        for i in 0..(CAPACITY + 10) {
            let mut e = me.sign(1, 0, vec![], String::new());
            // Distinct pairs without signing 65,546 events: vary the stored id bytes.
            let mut json: serde_json::Value = serde_json::from_str(&e.as_json()).unwrap();
            json["content"] = i.to_string().into();
            e = Event::from_json(json.to_string()).unwrap();
            vouch(&e);
        }
        assert!(VOUCHED.with(|v| v.borrow().len()) <= CAPACITY);
    }
}
