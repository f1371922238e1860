//! Signed kind-25910 ContextVM events: every MCP message and every CEP-22/CEP-41 frame is one.

use crate::nip01::Identity;
use crate::protocol::envelope::{escaped_str_len, Envelope};
use nostr::prelude::{Event, EventId, PublicKey, Tag};

/// The ContextVM message kind: every MCP message and every CEP-22/CEP-41 frame is one event.
pub const CONTEXTVM_KIND: u16 = 25910;

/// ContextVM events signed by an [`Identity`].
pub trait ContextVmEvents {
    /// A kind-25910 ContextVM event to `recipient`, replying to `reply_to` if given.
    fn contextvm_event(
        &self,
        recipient: &PublicKey,
        reply_to: Option<&EventId>,
        created_at: u64,
        content: String,
    ) -> Event;
}

impl ContextVmEvents for Identity {
    fn contextvm_event(
        &self,
        recipient: &PublicKey,
        reply_to: Option<&EventId>,
        created_at: u64,
        content: String,
    ) -> Event {
        let mut tags = vec![Tag::public_key(*recipient)];
        if let Some(e) = reply_to {
            tags.push(Tag::event(*e));
        }
        self.sign(CONTEXTVM_KIND, created_at, tags, content)
    }
}

/// The published size of a signed kind-25910 event from one identity to one recipient.
///
/// A serialized event is its content, JSON-escaped, inside fields whose size does not depend on
/// the content (id, pubkey, signature, tags, `created_at`). The overhead is measured once on a
/// real signed event with empty content; after that each measurement is exact and cheap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedEventEnvelope {
    overhead: usize,
}

impl SignedEventEnvelope {
    /// Measures the envelope of `identity`'s events to `recipient` with the given tags and a
    /// `created_at` as wide as `created_at`.
    pub fn measure(
        identity: &Identity,
        recipient: &PublicKey,
        reply_to: Option<&EventId>,
        created_at: u64,
    ) -> Self {
        let empty = identity.contextvm_event(recipient, reply_to, created_at, String::new());
        SignedEventEnvelope {
            overhead: empty.as_json().len(),
        }
    }

    /// Bytes of the event with an empty content.
    pub fn overhead(&self) -> usize {
        self.overhead
    }
}

impl Envelope for SignedEventEnvelope {
    fn published_size(&self, jsonrpc_text: &str) -> usize {
        self.overhead + escaped_str_len(jsonrpc_text)
    }

    fn cost_model_is_exact(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::prelude::Kind;

    #[test]
    fn signed_events_are_byte_identical_and_verify() {
        let a = Identity::derive(1, "client");
        let b = Identity::derive(1, "server");
        let e1 = a.contextvm_event(
            &b.public_key(),
            None,
            1_700_000_000,
            "{\"x\":\"é\\\"\"}".into(),
        );
        let e2 = a.contextvm_event(
            &b.public_key(),
            None,
            1_700_000_000,
            "{\"x\":\"é\\\"\"}".into(),
        );
        assert_eq!(e1.as_json(), e2.as_json());
        e1.verify().expect("valid id and signature");
        assert_eq!(e1.kind, Kind::from(CONTEXTVM_KIND));
    }

    #[test]
    fn envelope_size_is_exact_for_real_events() {
        let a = Identity::derive(1, "client");
        let b = Identity::derive(1, "server");
        let reply = a
            .contextvm_event(&b.public_key(), None, 1, String::new())
            .id;
        for reply_to in [None, Some(&reply)] {
            let env = SignedEventEnvelope::measure(&a, &b.public_key(), reply_to, 1_700_000_000);
            for content in ["", "{\"a\":\"\\\"\\\\\\n\u{01}\"}", "é😀"] {
                let ev =
                    a.contextvm_event(&b.public_key(), reply_to, 1_700_000_000, content.into());
                assert_eq!(
                    env.published_size(content),
                    ev.as_json().len(),
                    "{content:?}"
                );
            }
        }
    }
}
