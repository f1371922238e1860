//! Messages this thread's peers sent as CEP-22 transfers, kept by the digest their `start`
//! frame announced, so the receiver that reassembles a text with that digest takes the typed
//! message instead of parsing it again.
//!
//! Parsing a reassembled 1 MiB escape-heavy response was a tenth of a `strfry-1mib-escape` run.
//! The receiver still reassembles the text, checks its length and its SHA-256 against the
//! announced digest, and only then asks for the message ([`take`], the hook its engine is built
//! with): a text with the digest of the one the sender serialised is that text, and parsing
//! the serialisation of a message gives the message back (`jsonrpc`'s round-trip property
//! test). So taking it changes nothing the receiver does; a message not kept here (sent by
//! another thread or implementation, dropped for the bounds, taken already) is parsed as
//! before.

use super::kept::Kept;
use crate::protocol::jsonrpc::Message;
use crate::protocol::oversized::Digest;
use std::cell::RefCell;

/// Text bytes of the messages kept at most. A larger message is not kept: its typed value
/// would stay alive for the whole transfer, beside the text being sent.
pub const MAX_BYTES: usize = 64 << 20;

/// Messages kept at most.
pub const MAX_ENTRIES: usize = 1024;

thread_local! {
    static SENT: RefCell<Kept<Digest, Message>> = RefCell::new(Kept::new(MAX_BYTES, MAX_ENTRIES));
}

/// Whether a message whose text is `text_len` bytes long is worth keeping.
pub fn fits(text_len: usize) -> bool {
    text_len <= MAX_BYTES
}

/// Keeps `message`, whose serialisation (`text_len` bytes) has `digest`.
pub fn remember(digest: Digest, text_len: usize, message: Message) {
    if fits(text_len) {
        SENT.with(|s| s.borrow_mut().keep(digest, message, text_len));
    }
}

/// The message kept for `digest`, if any, which is kept no longer. The receiver's hook:
/// asked only once the reassembled text has this digest.
pub fn take(digest: &Digest) -> Option<Message> {
    SENT.with(|s| s.borrow_mut().take(digest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::RequestId;
    use serde_json::json;

    #[test]
    fn a_message_is_taken_once_by_its_digest_and_a_large_one_is_not_kept() {
        let message = Message::Response {
            id: RequestId::Number(1),
            result: json!({"content": [{"type": "text", "text": "\"quoted\""}]}),
        };
        let text = message.to_json();
        let digest = Digest::of(&text);
        remember(digest, text.len(), message.clone());
        assert_eq!(take(&Digest::of("other")), None);
        assert_eq!(take(&digest), Some(message.clone()));
        assert_eq!(take(&digest), None, "taken");
        remember(digest, MAX_BYTES + 1, message);
        assert_eq!(take(&digest), None, "too large to keep");
    }
}
