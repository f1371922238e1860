//! Deterministic signing identities and signed events (Nostr only, no ContextVM).
//!
//! Determinism rules (docs/design.md, principle 3): keys derive from the scenario seed and a peer
//! name, `created_at` comes from the virtual clock, and BIP-340 signatures use a fixed auxiliary
//! value, so the same run produces byte-identical events. Nothing here reads the wall clock or
//! the OS random source (`nostr`'s `Keys::generate`, `Timestamp::now` and `sign_schnorr` do).

use nostr::prelude::{
    Event, EventId, Keys, Kind, PublicKey, SecretKey, Tag, Timestamp, UnsignedEvent,
};
use secp256k1::{Secp256k1, SignOnly};
use sha2::{Digest as _, Sha256};
use std::sync::LazyLock;

/// `created_at` at virtual time zero: a fixed epoch keeps runs reproducible.
pub const EPOCH_SECS: u64 = 1_700_000_000;

/// The fixed BIP-340 auxiliary value that makes signatures reproducible.
const AUX_RAND: [u8; 32] = *b"relaysim deterministic aux v1...";

static SIGNER: LazyLock<Secp256k1<SignOnly>> = LazyLock::new(Secp256k1::signing_only);

/// A peer's signing identity, derived from a seed and a name.
#[derive(Debug, Clone)]
pub struct Identity {
    keys: Keys,
}

impl Identity {
    /// The identity named `name` in a run seeded with `seed`: the secret key is
    /// SHA-256(`"relaysim/key/v1"`, seed, name, counter), with the counter bumped in the
    /// (astronomically unlikely) case the hash is not a valid secret key.
    pub fn derive(seed: u64, name: &str) -> Self {
        for counter in 0u32.. {
            let mut h = Sha256::new();
            h.update(b"relaysim/key/v1");
            h.update(seed.to_le_bytes());
            h.update((name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update(counter.to_le_bytes());
            if let Ok(secret) = SecretKey::from_slice(&h.finalize()) {
                return Identity {
                    keys: Keys::new(secret),
                };
            }
        }
        unreachable!("a valid secret key is found long before the counter wraps")
    }

    /// The public key.
    pub fn public_key(&self) -> PublicKey {
        self.keys.public_key()
    }

    /// A 32-byte secret for `purpose`, derived from the secret key (SHA-256 of both): for
    /// values others must not guess, such as resume tokens, without drawing randomness.
    pub fn derived_secret(&self, purpose: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.keys.secret_key().as_secret_bytes());
        h.update(purpose.as_bytes());
        h.finalize().into()
    }

    /// Builds and signs an event, deterministically.
    pub fn sign(&self, kind: u16, created_at: u64, tags: Vec<Tag>, content: String) -> Event {
        let created_at = Timestamp::from_secs(created_at);
        let kind = Kind::from(kind);
        let unsigned =
            UnsignedEvent::new(self.public_key(), created_at, kind, tags.clone(), content);
        let id: EventId = unsigned.compute_id();
        let sig = self
            .keys
            .sign_schnorr_with_aux_rand(&SIGNER, id.as_bytes(), &AUX_RAND);
        let event = Event::new(
            id,
            self.public_key(),
            created_at,
            kind,
            tags,
            unsigned.content,
            sig,
        );
        // Made here, so good: relays of this process need not verify the signature again.
        super::verified::vouch(&event);
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_derived_deterministically() {
        let a = Identity::derive(7, "client");
        assert_eq!(a.public_key(), Identity::derive(7, "client").public_key());
        assert_ne!(a.public_key(), Identity::derive(8, "client").public_key());
        assert_ne!(a.public_key(), Identity::derive(7, "server").public_key());
    }
}
