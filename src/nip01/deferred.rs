//! Deferred signatures: events whose BIP-340 signature is made only when something reads it.
//!
//! In the `des` world no signature leaves the process unless a trace stores events whole, and
//! making one is the largest single cost of a small event (a Schnorr signature costs more than
//! everything else a peer and a relay do with it). So identities made with
//! [`Identity::deferring_signatures`](super::Identity::deferring_signatures) sign with a
//! *placeholder*: the 64 bytes are the event id twice. It has a real signature's length, so every
//! size a relay or a limit measures is unchanged. It stands for the one signature the author's key
//! would make for that id (signing is deterministic), and:
//!
//! - a relay accepts it exactly when it would accept that signature: the id must still be the
//!   hash of the fields, the placeholder must match the id, and the author must be an identity of
//!   this thread that defers (only its owner could have made the event), see
//!   [`verified::verify`](super::verified::verify). A placeholder for any other key, or with any
//!   byte changed, goes to a full Schnorr verification and fails it, as a bad signature does;
//! - whatever writes an event out (a trace storing events whole) asks [`complete_json`] for the
//!   real signature, which is made then, byte-identical to what eager signing writes.
//!
//! Identities register their keys per thread (a world runs on one thread) and are forgotten once
//! every copy of the identity is dropped, so the registry holds only the living worlds' peers.

use nostr::event::Signature;
use nostr::prelude::{Event, EventId, Keys, PublicKey};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// The identities of this thread that defer their signatures, by x-only public key.
#[derive(Default)]
struct Registry {
    /// Every living copy with that key (two worlds of one seed may live on a thread at once).
    keys: HashMap<[u8; 32], Vec<Weak<Keys>>>,
    /// Entries after the last sweep of dropped identities; the next sweep runs at twice this.
    after_sweep: usize,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// Records that `keys` defers its signatures on this thread, for as long as `keys` lives.
pub(crate) fn register(keys: &Arc<Keys>) {
    REGISTRY.with(|r| {
        let mut r = r.borrow_mut();
        if r.keys.len() >= 2 * r.after_sweep.max(64) {
            r.keys.retain(|_, copies| {
                copies.retain(|k| k.strong_count() > 0);
                !copies.is_empty()
            });
            r.after_sweep = r.keys.len();
        }
        let copies = r.keys.entry(keys.public_key().to_bytes()).or_default();
        copies.retain(|k| k.strong_count() > 0);
        copies.push(Arc::downgrade(keys));
    });
}

/// The keys of the living identity behind `pubkey`, if it defers its signatures on this thread.
fn keys_of(pubkey: &PublicKey) -> Option<Arc<Keys>> {
    REGISTRY.with(|r| {
        r.borrow()
            .keys
            .get(&pubkey.to_bytes())?
            .iter()
            .find_map(Weak::upgrade)
    })
}

/// The placeholder that stands for the signature of `id`: the id twice.
pub(crate) fn placeholder(id: &EventId) -> Signature {
    let mut bytes = [0u8; 64];
    bytes[..32].copy_from_slice(id.as_bytes());
    bytes[32..].copy_from_slice(id.as_bytes());
    Signature::from_byte_array(bytes)
}

/// Whether `event`'s signature is the placeholder for its id.
pub(crate) fn is_placeholder(event: &Event) -> bool {
    let sig: &[u8] = event.sig.as_ref();
    sig[..32] == *event.id.as_bytes() && sig[32..] == *event.id.as_bytes()
}

/// Whether `event` carries a placeholder whose signature an identity of this thread would make:
/// then it is as good as signed, provided its id is the hash of its fields (checked apart).
pub(crate) fn stands_for_a_signature(event: &Event) -> bool {
    is_placeholder(event) && keys_of(&event.pubkey).is_some()
}

/// The real signature of `id` by the deferring identity behind `pubkey`, if there is one.
fn real_signature(id: &EventId, pubkey: &PublicKey) -> Option<Signature> {
    Some(super::identity::schnorr(&*keys_of(pubkey)?, id))
}

/// Puts the real signature into an event's JSON object if it carries a placeholder of an
/// identity of this thread; any other JSON is left as it is.
pub fn complete_json(event: &mut serde_json::Value) {
    let field = |name: &str| event.get(name).and_then(|v| v.as_str());
    let (Some(id), Some(pubkey), Some(sig)) = (field("id"), field("pubkey"), field("sig")) else {
        return;
    };
    if sig.len() != 2 * id.len() || !sig.starts_with(id) || !sig.ends_with(id) {
        return;
    }
    let (Ok(id), Ok(pubkey)) = (EventId::from_hex(id), PublicKey::from_hex(pubkey)) else {
        return;
    };
    if let Some(sig) = real_signature(&id, &pubkey) {
        event["sig"] = sig.to_string().into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::Identity;

    #[test]
    fn a_deferred_event_differs_from_the_signed_one_only_in_its_signature_until_completed() {
        let eager = Identity::derive(1, "a");
        let lazy = Identity::derive(1, "a").deferring_signatures();
        let tags = vec![nostr::prelude::Tag::public_key(eager.public_key())];
        let signed = eager.sign(25910, 1_700_000_000, tags.clone(), "hi \"x\"".into());
        let deferred = lazy.sign(25910, 1_700_000_000, tags, "hi \"x\"".into());
        assert_eq!(deferred.id, signed.id);
        assert_ne!(deferred.sig, signed.sig);
        assert_eq!(deferred.as_json().len(), signed.as_json().len());
        assert!(stands_for_a_signature(&deferred));
        let mut json: serde_json::Value = serde_json::from_str(&deferred.as_json()).unwrap();
        complete_json(&mut json);
        assert_eq!(json.to_string(), signed.as_json());
        let completed = Event::from_json(json.to_string()).unwrap();
        assert!(completed.verify().is_ok());
    }

    #[test]
    fn a_placeholder_stands_only_while_its_identity_lives_on_this_thread() {
        let lazy = Identity::derive(2, "b").deferring_signatures();
        let event = lazy.sign(1, 0, vec![], "x".into());
        assert!(stands_for_a_signature(&event));
        let elsewhere = event.clone();
        let on_another_thread = std::thread::spawn(move || stands_for_a_signature(&elsewhere));
        assert!(!on_another_thread.join().unwrap());
        drop(lazy);
        assert!(!stands_for_a_signature(&event));
        let mut json: serde_json::Value = serde_json::from_str(&event.as_json()).unwrap();
        let before = json.clone();
        complete_json(&mut json);
        assert_eq!(json, before, "nobody can sign for a dropped identity");
    }

    #[test]
    fn an_eager_identity_placeholder_does_not_stand_for_a_signature() {
        let eager = Identity::derive(3, "c");
        let mut event = eager.sign(1, 0, vec![], "x".into());
        event.sig = placeholder(&event.id);
        assert!(!stands_for_a_signature(&event));
    }

    #[test]
    fn two_living_copies_of_one_identity_keep_its_placeholders_standing_until_both_are_dropped() {
        let first = Identity::derive(5, "twin").deferring_signatures();
        let second = Identity::derive(5, "twin").deferring_signatures();
        let event = first.sign(1, 0, vec![], "x".into());
        drop(first);
        assert!(
            stands_for_a_signature(&event),
            "the second copy still signs for it"
        );
        drop(second);
        assert!(!stands_for_a_signature(&event));
    }

    #[test]
    fn the_registry_forgets_dropped_identities() {
        for i in 0..1000 {
            let _ = Identity::derive(i, "churn").deferring_signatures();
        }
        let kept = Identity::derive(0, "kept").deferring_signatures();
        let size = REGISTRY.with(|r| r.borrow().keys.len());
        assert!(size <= 256, "{size} entries for one living identity");
        assert!(keys_of(&kept.public_key()).is_some());
    }
}
