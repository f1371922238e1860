//! Deterministic signing identities and signed events (Nostr only, no ContextVM).
//!
//! Determinism rules (docs/design.md, principle 3): keys derive from the scenario seed and a peer
//! name, `created_at` comes from the virtual clock, and BIP-340 signatures use a fixed auxiliary
//! value, so the same run produces byte-identical events. Nothing here reads the wall clock or
//! the OS random source (`nostr`'s `Keys::generate`, `Timestamp::now` and `sign_schnorr` do).

use super::signatures::Signatures;
use nostr::event::Signature;
use nostr::prelude::{Event, EventId, Keys, Kind, PublicKey, SecretKey, Tag, Tags, Timestamp};
use secp256k1::{Secp256k1, SignOnly};
use sha2::{Digest as _, Sha256};
use std::sync::{Arc, LazyLock};

/// `created_at` at virtual time zero: a fixed epoch keeps runs reproducible.
pub const EPOCH_SECS: u64 = 1_700_000_000;

/// The fixed BIP-340 auxiliary value that makes signatures reproducible.
const AUX_RAND: [u8; 32] = *b"relaysim deterministic aux v1...";

static SIGNER: LazyLock<Secp256k1<SignOnly>> = LazyLock::new(Secp256k1::signing_only);

/// A peer's signing identity, derived from a seed and a name.
#[derive(Debug, Clone)]
pub struct Identity {
    keys: Arc<Keys>,
    /// The world whose relays it vouches to for the events it signs, if any.
    world: Option<Signatures>,
    /// Whether its events carry a placeholder until their signature is read (`signatures`).
    defers: bool,
}

/// The BIP-340 signature of `id` by `keys`, with the fixed auxiliary value.
pub(crate) fn schnorr(keys: &Keys, id: &EventId) -> Signature {
    keys.sign_schnorr_with_aux_rand(&SIGNER, id.as_bytes(), &AUX_RAND)
}

impl Identity {
    /// The identity named `name` in a run seeded with `seed`: the secret key is
    /// SHA-256(`"relaysim/key/v1"`, seed, name, counter), with the counter bumped in the
    /// (astronomically unlikely) case the hash is not a valid secret key.
    pub fn derive(seed: u64, name: &str) -> Self {
        Self::derive_in_run(seed, None, name)
    }

    /// The identity named `name` in a run seeded with `seed` and, when given, keyed apart by
    /// `run_nonce`: live runs against relays that store events draw a fresh nonce so a rerun
    /// of the same seed does not meet its own earlier events. Without a nonce it is
    /// [`Identity::derive`]; with one, SHA-256 also covers `"nonce"` and the nonce.
    pub fn derive_in_run(seed: u64, run_nonce: Option<u64>, name: &str) -> Self {
        for counter in 0u32.. {
            let mut h = Sha256::new();
            h.update(b"relaysim/key/v1");
            h.update(seed.to_le_bytes());
            if let Some(nonce) = run_nonce {
                h.update(b"nonce");
                h.update(nonce.to_le_bytes());
            }
            h.update((name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update(counter.to_le_bytes());
            if let Ok(secret) = SecretKey::from_slice(&h.finalize()) {
                return Identity {
                    keys: Arc::new(Keys::new(secret)),
                    world: None,
                    defers: false,
                };
            }
        }
        unreachable!("a valid secret key is found long before the counter wraps")
    }

    /// This identity as a peer of the world whose signature state is `world`: each event it
    /// signs is vouched for there, so the world's relays need not verify it again.
    pub fn vouching_to(mut self, world: &Signatures) -> Self {
        self.world = Some(world.clone());
        self
    }

    /// This identity as a peer of `world` ([`Identity::vouching_to`]), signing its events with
    /// a placeholder that stands for the signature until something reads it
    /// ([`super::signatures`]): for the `des` world, where nothing but a trace storing events
    /// whole reads signatures, and where signing is a small event's largest cost.
    pub fn deferring_signatures(mut self, world: &Signatures) -> Self {
        world.register_deferring(&self.keys);
        self.defers = true;
        self.vouching_to(world)
    }

    /// The length of the JSON of `event`, which this identity signed: its count at signing
    /// when the world still remembers it, else counted.
    pub fn json_len(&self, event: &Event) -> usize {
        match &self.world {
            Some(world) => world.json_len(event),
            None => super::event_json::len(event),
        }
    }

    /// The secret key, for a program that signs as this identity itself (a hosted peer).
    pub fn secret_key_hex(&self) -> String {
        self.keys.secret_key().to_secret_hex()
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

    /// Builds and signs an event, deterministically (with a placeholder signature if this
    /// identity defers its signatures).
    ///
    /// The content is escaped once, for the id's serialisation and the event's JSON together
    /// (byte for byte what `EventId::compute` and `Event::as_json` write; tests check both),
    /// and the JSON is left with the vouched event for whoever serialises it next.
    ///
    /// The event is a copy of the one the world's verification memo holds;
    /// [`Identity::sign_shared`] returns that one itself, which a relay of the world then
    /// recognises without comparing its fields.
    pub fn sign(&self, kind: u16, created_at: u64, tags: Vec<Tag>, content: String) -> Event {
        Event::clone(&self.sign_shared(kind, created_at, tags, content))
    }

    /// As [`Identity::sign`], returning the shared event the verification memo vouches for.
    pub fn sign_shared(
        &self,
        kind: u16,
        created_at: u64,
        tags: Vec<Tag>,
        content: String,
    ) -> Arc<Event> {
        use std::io::Write as _;
        let pubkey = self.public_key();
        let created_at = Timestamp::from_secs(created_at);
        let kind = Kind::from(kind);
        let tags = Tags::from_list(tags);
        let tags_json = serde_json::to_string(&tags).expect("tags serialize");
        // The id hashes `[0,pubkey,created_at,kind,tags,content]`, hashed from its pieces with
        // the content escaped a piece at a time straight into the hash: the JSON is not
        // written (only its length is counted) until something asks for it whole
        // (`event_json`), which only a trace storing events whole does.
        let mut pubkey_hex = [0u8; 64];
        hex::encode_to_slice(pubkey.to_bytes(), &mut pubkey_hex)
            .expect("64 hex digits for 32 bytes");
        let mut hash = Sha256::new();
        hash.update(b"[0,\"");
        hash.update(pubkey_hex);
        write!(
            hash,
            "\",{},{},{tags_json},",
            created_at.as_secs(),
            kind.as_u16()
        )
        .expect("hashing never fails");
        let content_len = super::json_text::escaped_in_pieces(&content, |piece| hash.update(piece));
        hash.update(b"]");
        let id = EventId::from_byte_array(hash.finalize().into());
        let sig = if self.defers {
            super::signatures::placeholder(&id)
        } else {
            schnorr(&self.keys, &id)
        };
        let json_len = super::event_json::len_of_parts(
            created_at.as_secs(),
            kind.as_u16(),
            tags_json.len(),
            content_len,
        );
        let event = Arc::new(Event::new(id, pubkey, created_at, kind, tags, content, sig));
        // Made here, so good: the world's relays need not verify it again.
        if let Some(world) = &self.world {
            world.vouch(&event, Some(json_len));
        }
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_event_has_nostrs_id_and_json_byte_for_byte() {
        let world = Signatures::default();
        let me = Identity::derive(1, "a").vouching_to(&world);
        let contents = [
            String::new(),
            "plain".to_owned(),
            "quotes \" and \\ backslashes, \n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}".to_owned(),
            "unicode é ✓ 😀 \u{2028}\u{2029} </script>".to_owned(),
            "\\\"".repeat(10_000),
        ];
        let tags = vec![
            Tag::public_key(me.public_key()),
            Tag::parse(["stream", "s\"1", "7"]).unwrap(),
        ];
        for (i, content) in contents.into_iter().enumerate() {
            for tags in [vec![], tags.clone()] {
                let e = me.sign(25910, 1_700_000_000 + i as u64, tags, content.clone());
                // nostr recomputes the id its own way, and checks the signature.
                assert!(e.verify_id());
                assert!(e.verify().is_ok());
                assert_eq!(world.json_len(&e), e.as_json().len());
                assert_eq!(me.json_len(&e), e.as_json().len());
                assert_eq!(crate::nip01::event_json::text(&e), e.as_json());
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn any_content_and_tags_sign_to_nostrs_id_and_json(
            content in proptest::prelude::any::<String>(),
            value in proptest::prelude::any::<String>(),
            kind in proptest::prelude::any::<u16>(),
            at in 0u64..4_000_000_000,
        ) {
            let world = Signatures::default();
            let me = Identity::derive(9, "p").vouching_to(&world);
            let tags = vec![Tag::parse(["t", value.as_str()]).unwrap()];
            let e = me.sign(kind, at, tags, content);
            proptest::prop_assert!(e.verify_id());
            proptest::prop_assert_eq!(world.json_len(&e), e.as_json().len());
            proptest::prop_assert_eq!(crate::nip01::event_json::len(&e), e.as_json().len());
            proptest::prop_assert_eq!(crate::nip01::event_json::text(&e), e.as_json());
        }
    }

    #[test]
    fn identities_are_derived_deterministically() {
        let a = Identity::derive(7, "client");
        assert_eq!(a.public_key(), Identity::derive(7, "client").public_key());
        assert_ne!(a.public_key(), Identity::derive(8, "client").public_key());
        assert_ne!(a.public_key(), Identity::derive(7, "server").public_key());
    }
}
