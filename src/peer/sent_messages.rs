//! Messages this thread's peers sent as CEP-22 transfers, kept by the digest their `start`
//! frame announced, so the receiver that reassembles a text with that digest takes the typed
//! message instead of parsing it again.
//!
//! Parsing a reassembled 1 MiB escape-heavy response was a tenth of a `strfry-1mib-escape` run.
//! The receiver still reassembles the text, checks its length and its SHA-256 against the
//! announced digest, and only then asks for the message ([`take`], the hook its engine is built
//! with): a text with the digest of the one the sender serialised is that text, and parsing
//! the serialisation of a message gives the message back — for the messages kept here, which
//! hold no floating-point number and nest less than `json_read::MAX_DEPTH` deep ([`round_trips`];
//! the property test below checks it). So taking it changes nothing the receiver does; a
//! message not kept here (sent by another thread or implementation, not round-tripping,
//! dropped for the bounds, taken already) is parsed as before.

use super::kept::Kept;
use crate::nip01::json_read::MAX_DEPTH;
use crate::protocol::jsonrpc::Message;
use crate::protocol::oversized::Digest;
use serde_json::Value;
use std::cell::RefCell;

/// Text bytes of the messages kept at most. A larger message is not kept: its typed value
/// would stay alive for the whole transfer, beside the text being sent.
pub const MAX_BYTES: usize = 64 << 20;

/// Messages kept at most.
pub const MAX_ENTRIES: usize = 1024;

thread_local! {
    static SENT: RefCell<Kept<Digest, Message>> = RefCell::new(Kept::new(MAX_BYTES, MAX_ENTRIES));
}

/// Whether a message whose text is `text_len` bytes long is worth keeping: small enough, and
/// a des world is open to receive it (`memo_scope`), so a sender elsewhere drops it at once.
pub fn fits(text_len: usize) -> bool {
    text_len <= MAX_BYTES && super::memo_scope::is_open()
}

/// Whether `message` may be worth keeping, asked before it is serialised: a des world is open
/// and its strings alone do not pass [`MAX_BYTES`]. A message that surely does not fit is
/// serialised consuming it (`Message::into_json`), so it and its text are never both whole.
pub fn may_fit(message: &Message) -> bool {
    /// Bytes of the strings in `value`, at least; counting stops past [`MAX_BYTES`].
    fn string_bytes(value: &Value, mut sum: usize) -> usize {
        match value {
            Value::String(s) => sum + s.len(),
            Value::Array(items) => {
                for item in items {
                    sum = string_bytes(item, sum);
                    if sum > MAX_BYTES {
                        break;
                    }
                }
                sum
            }
            Value::Object(map) => {
                for (key, item) in map {
                    sum = string_bytes(item, sum + key.len());
                    if sum > MAX_BYTES {
                        break;
                    }
                }
                sum
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => sum,
        }
    }
    let body = match message {
        Message::Request { params, .. } | Message::Notification { params, .. } => params.as_ref(),
        Message::Response { result, .. } => Some(result),
        Message::Error { error, .. } => error.data.as_ref(),
    };
    fits(body.map_or(0, |b| string_bytes(b, 0)))
}

/// Keeps `message`, whose serialisation (`text_len` bytes) has `digest`, if it is worth keeping
/// and surely parses back as itself.
pub fn remember(digest: Digest, text_len: usize, message: Message) {
    if fits(text_len) && round_trips(&message) {
        SENT.with(|s| s.borrow_mut().keep(digest, message, text_len));
    }
}

/// Whether parsing `message`'s serialisation surely gives `message` back. Not with params
/// that are neither an object nor an array, nor with a
/// floating-point number (`serde_json`, which reads them, may read one back a unit in the last
/// place off), nor with values nested as deep as `json_read::MAX_DEPTH` (past which the text
/// goes to `serde_json`, which refuses nesting past 128).
pub fn round_trips(message: &Message) -> bool {
    // The message's own object is one level, its params, result or error another.
    fn plain(value: &Value, depth: usize) -> bool {
        match value {
            _ if depth >= MAX_DEPTH => false,
            Value::Number(n) => !n.is_f64(),
            Value::Array(items) => items.iter().all(|v| plain(v, depth + 1)),
            Value::Object(map) => map.values().all(|v| plain(v, depth + 1)),
            Value::Null | Value::Bool(_) | Value::String(_) => true,
        }
    }
    match message {
        // Params other than an object or an array are written but not read (JSON-RPC).
        Message::Request { params, .. } | Message::Notification { params, .. } => params
            .as_ref()
            .is_none_or(|p| matches!(p, Value::Object(_) | Value::Array(_)) && plain(p, 2)),
        Message::Response { result, .. } => plain(result, 2),
        Message::Error { error, .. } => error.data.as_ref().is_none_or(|d| plain(d, 3)),
    }
}

/// Forgets every message.
pub(crate) fn forget_all() {
    SENT.with(|s| s.borrow_mut().clear());
}

/// The message kept for `digest`, if any, which is kept no longer. The receiver's hook:
/// asked only once the reassembled text has this digest.
pub fn take(digest: &Digest) -> Option<Message> {
    SENT.with(|s| s.borrow_mut().take(digest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::json_text::tests::any_value;
    use crate::protocol::jsonrpc::RequestId;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn a_message_is_taken_once_by_its_digest_and_a_large_one_is_not_kept() {
        let _world = crate::peer::memo_scope::SentMemos::open();
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

    #[test]
    fn a_message_whose_strings_alone_pass_the_bound_surely_does_not_fit() {
        let response = |text: String| Message::Response {
            id: RequestId::Number(1),
            result: json!({"content": [{"type": "text", "text": text}]}),
        };
        assert!(!may_fit(&response(String::new())), "no des world open");
        let _world = crate::peer::memo_scope::SentMemos::open();
        assert!(may_fit(&response("small".into())));
        assert!(may_fit(&response("x".repeat(MAX_BYTES - 100))));
        assert!(!may_fit(&response("x".repeat(MAX_BYTES + 1))));
    }

    #[test]
    fn floats_and_deep_nesting_are_not_kept() {
        let _world = crate::peer::memo_scope::SentMemos::open();
        let float = Message::Response {
            id: RequestId::Number(1),
            result: json!({"x": 0.1}),
        };
        assert!(!round_trips(&float));
        let mut deep = json!("leaf");
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        let deep = Message::Notification {
            method: "m".into(),
            params: Some(deep),
        };
        assert!(!round_trips(&deep));
        for message in [float, deep] {
            let text = message.to_json();
            let digest = Digest::of(&text);
            remember(digest, text.len(), message);
            assert_eq!(take(&digest), None);
        }
    }

    proptest! {
        #[test]
        fn a_message_kept_is_the_one_its_text_parses_as(
            value in any_value(),
            id in any::<i64>(),
            kind in 0..3u8,
        ) {
            let message = match kind {
                0 => Message::Response { id: RequestId::Number(id), result: value },
                1 => Message::Notification { method: "m".into(), params: Some(value) },
                _ => Message::Error {
                    id: Some(RequestId::Number(id)),
                    error: crate::protocol::jsonrpc::ErrorObject {
                        code: -1,
                        message: "e".into(),
                        data: Some(value),
                    },
                },
            };
            if round_trips(&message) {
                prop_assert_eq!(Message::parse(&message.to_json()).ok(), Some(message));
            }
        }
    }
}
