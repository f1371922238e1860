//! How big a frame is once it is published: the byte budget that chunking obeys.
//!
//! A relay limits the size of the *published event*, not of the JSON-RPC text inside it. A
//! chunk's `data` is a JSON string inside the JSON-RPC text, which is itself a JSON string (the
//! event's `content`) inside the event, so it is escaped twice: one `"` in a payload costs four
//! bytes on the wire. Senders ask an [`Envelope`] for the published size of each frame.

/// Tells how many bytes a JSON-RPC message occupies once published as an event.
///
/// Implementations must be monotone: a longer text (by appending characters) never publishes
/// smaller. Chunking relies on that to search for the largest fragment that fits.
pub trait Envelope {
    /// Bytes of the published event whose `content` is `jsonrpc_text`.
    fn published_size(&self, jsonrpc_text: &str) -> usize;

    /// Estimated published bytes that one character of a frame's `data` string adds.
    ///
    /// Used only to guess a chunk's length quickly; every frame is then measured with
    /// [`Envelope::published_size`] and shrunk if the guess was too generous. The default assumes
    /// the text is JSON-escaped twice (data string inside JSON-RPC text inside event JSON).
    fn data_char_cost(&self, ch: char) -> usize {
        double_escaped_len(ch)
    }

    /// Whether the cost model is exact: `published_size` is a fixed overhead plus the
    /// JSON-escaped length of the text, and `data_char_cost` is the default. Then a frame's
    /// published size is its empty frame's plus the sum of its characters' costs, and chunking
    /// need not serialise each frame to measure it. `false` (the default) is always safe.
    fn cost_model_is_exact(&self) -> bool {
        false
    }

    /// Whether `jsonrpc_text` would publish to more than `limit` bytes. Under an exact model
    /// the size is at least the text's own length, so text already longer than the limit is
    /// not measured (for a 1 MiB result, a pass over every byte saved).
    fn published_size_exceeds(&self, jsonrpc_text: &str, limit: usize) -> bool {
        (self.cost_model_is_exact() && jsonrpc_text.len() > limit)
            || self.published_size(jsonrpc_text) > limit
    }
}

/// A plain envelope: a fixed number of bytes around the JSON-escaped `content`.
///
/// This is exactly how a kind-25910 event serializes (the other fields do not depend on the
/// content's bytes, only its length does), so with the right `overhead` it is exact; see
/// `peer::event` for the signed-event envelope that measures its overhead from a real event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EscapedContentEnvelope {
    /// Bytes of the event with an empty `content`.
    pub overhead: usize,
}

impl Envelope for EscapedContentEnvelope {
    fn published_size(&self, jsonrpc_text: &str) -> usize {
        self.overhead + escaped_str_len(jsonrpc_text)
    }

    fn cost_model_is_exact(&self) -> bool {
        true
    }
}

/// Length of `ch` once escaped in a JSON string, as `serde_json` writes it (which is how the
/// `nostr` crate serializes events): `"` and `\` take two bytes, `\b \f \n \r \t` two, other
/// control characters six (`\u00XX`), everything else its UTF-8 length.
pub fn escaped_len(ch: char) -> usize {
    match ch {
        '"' | '\\' | '\u{08}' | '\u{0c}' | '\n' | '\r' | '\t' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Length of `ch` once escaped twice: a string inside a JSON string inside JSON.
pub fn double_escaped_len(ch: char) -> usize {
    match ch {
        // `"` -> `\"` -> `\\\"`; `\` -> `\\` -> `\\\\`
        '"' | '\\' => 4,
        // `\n` -> `\\n`
        '\u{08}' | '\u{0c}' | '\n' | '\r' | '\t' => 3,
        // `\u0001` -> `\\u0001`
        c if (c as u32) < 0x20 => 7,
        c => c.len_utf8(),
    }
}

/// Length of `s` once escaped as a JSON string, without the quotes.
pub fn escaped_str_len(s: &str) -> usize {
    crate::nip01::json_text::escaped_len(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_lengths_match_serde_json() {
        for ch in [
            'a', '"', '\\', '\n', '\u{01}', '\u{1f}', 'é', '€', '😀', '\u{7f}', '/',
        ] {
            let once = serde_json::to_string(&ch.to_string()).unwrap();
            assert_eq!(escaped_len(ch), once.len() - 2, "{ch:?}");
            let inner = &once[1..once.len() - 1];
            let twice = serde_json::to_string(inner).unwrap();
            assert_eq!(double_escaped_len(ch), twice.len() - 2, "{ch:?}");
        }
        let s = "a\"b\\c\nd\u{02}é😀";
        assert_eq!(
            escaped_str_len(s),
            serde_json::to_string(s).unwrap().len() - 2
        );
    }

    #[test]
    fn every_ascii_byte_escapes_to_the_length_serde_json_writes() {
        for b in 0u8..0x80 {
            let s = char::from(b).to_string();
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(escaped_str_len(&s), json.len() - 2, "byte {b:#04x}");
        }
    }

    #[test]
    fn text_exceeds_a_limit_exactly_when_its_escaped_size_does() {
        let text = "ab\"c\\\n\u{01}é";
        let size = 10 + escaped_str_len(text);
        // Just under, at and just over the exact size; and limits its raw length already passes.
        for limit in [
            size - 1,
            size,
            size + 1,
            10 + text.len() - 1,
            text.len() - 1,
            0,
        ] {
            let env = EscapedContentEnvelope { overhead: 10 };
            assert_eq!(
                env.published_size_exceeds(text, limit),
                size > limit,
                "limit {limit}"
            );
        }
    }
}
