//! Splitting a serialized message into chunk fragments that fit a published-event byte budget.
//!
//! Each fragment is the longest run of whole characters whose chunk frame, once enveloped,
//! publishes within the budget. The guess comes from the envelope's per-character cost model;
//! the frame is then measured for real and the guess is shrunk by binary search if the model
//! was too generous, so the guarantee holds for any monotone [`Envelope`]. When the envelope
//! says its model is exact ([`Envelope::cost_model_is_exact`]), the guess is the measurement
//! and no frame is serialised. Frames are measured
//! with the widest possible `progress` value, so the plan holds whatever numbering the transfer
//! ends up using (the accept bootstrap shifts it by one).

use super::frame::{TransferBody, TransferFrame};
use crate::nip01::json_text;
use crate::protocol::envelope::{double_escaped_len, Envelope};
use crate::protocol::jsonrpc::ProgressToken;
use crate::segmented::Segmented;
use std::borrow::Cow;
use std::ops::Range;

/// Why a payload cannot be split within a budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkingError {
    /// Not even a chunk with one character fits (or a control frame does not).
    #[error("byte budget {budget} is too small: a {what} frame publishes as {needed} bytes")]
    BudgetTooSmall {
        /// The budget asked for.
        budget: usize,
        /// Which frame did not fit.
        what: &'static str,
        /// Its smallest published size.
        needed: usize,
    },
}

fn chunk_frame(token: &ProgressToken, data: &str) -> TransferFrame {
    TransferFrame {
        token: token.clone(),
        progress: u64::MAX,
        message: None,
        body: TransferBody::Chunk {
            data: data.to_owned(),
        },
    }
}

/// Published size of the chunk frame for `data`, measured at the widest progress value.
fn measured(token: &ProgressToken, data: &str, env: &dyn Envelope) -> usize {
    env.published_size(&chunk_frame(token, data).to_json())
}

/// Plans the byte ranges of `payload` that become chunks, each publishing within `budget`.
///
/// Ranges are contiguous, cover the payload exactly, never split a character and are never
/// empty. An empty payload yields no ranges.
pub fn plan_chunks(
    payload: &str,
    token: &ProgressToken,
    budget: usize,
    env: &dyn Envelope,
) -> Result<Vec<Range<usize>>, ChunkingError> {
    plan(
        payload.len(),
        |from, max| {
            let rest = &payload[from..];
            let mut end = rest.len().min(max);
            while !rest.is_char_boundary(end) {
                end -= 1;
            }
            Cow::Borrowed(&rest[..end])
        },
        token,
        budget,
        env,
    )
}

/// [`plan_chunks`] of a segmented payload, which is read a window of one chunk at a time.
pub(crate) fn plan_chunks_segmented(
    payload: &Segmented,
    token: &ProgressToken,
    budget: usize,
    env: &dyn Envelope,
) -> Result<Vec<Range<usize>>, ChunkingError> {
    plan(
        payload.len(),
        |from, max| payload.window(from, max),
        token,
        budget,
        env,
    )
}

/// Plans the chunks of a payload of `len` bytes, asking `window(from, max)` for its text from
/// `from`, at most `max` bytes cut back to a character boundary.
///
/// A chunk holds at most `room` bytes (what a frame has room for besides its overhead): its
/// data is in the frame at least once, each byte at least once, so a window a character longer
/// than the room holds every prefix that can fit.
fn plan<'a>(
    len: usize,
    window: impl Fn(usize, usize) -> Cow<'a, str>,
    token: &ProgressToken,
    budget: usize,
    env: &dyn Envelope,
) -> Result<Vec<Range<usize>>, ChunkingError> {
    let overhead = measured(token, "", env);
    if overhead >= budget {
        return Err(ChunkingError::BudgetTooSmall {
            budget,
            what: "empty chunk",
            needed: overhead,
        });
    }
    let room = budget - overhead;
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < len {
        let rest = window(start, room + 4);
        let rest = rest.as_ref();
        // Guess from the cost model: the longest prefix whose estimated cost fits the room.
        let exact = env.cost_model_is_exact();
        let (guess, cost) = if exact {
            default_cost_prefix(rest, room)
        } else {
            model_cost_prefix(rest, room, env)
        };
        // Under an exact model no frame is serialised to measure it: every plan checks, on
        // its first chunk, that the table scan is the model and the model the measurement.
        if ranges.is_empty() {
            assert_eq!(
                cost,
                cost_of(env, &rest[..guess]),
                "the cost table is the model"
            );
            assert!(
                !exact || measured(token, &rest[..guess], env) == overhead + cost,
                "an envelope that says its cost model is exact measures as the model says"
            );
        }
        let end = if guess > 0 && (exact || measured(token, &rest[..guess], env) <= budget) {
            guess
        } else {
            largest_fitting_prefix(rest, token, budget, env, guess)?
        };
        ranges.push(start..start + end);
        start += end;
    }
    Ok(ranges)
}

/// The longest prefix of `rest` whose model cost fits `room`, and that cost, asking `env`
/// for each character's.
fn model_cost_prefix(rest: &str, room: usize, env: &dyn Envelope) -> (usize, usize) {
    let mut cost = 0;
    for (i, ch) in rest.char_indices() {
        let c = env.data_char_cost(ch);
        if cost + c > room {
            return (i, cost);
        }
        cost += c;
    }
    (rest.len(), cost)
}

/// [`model_cost_prefix`] under the default cost model ([`double_escaped_len`]) from a table: a
/// character's cost is its bytes' costs (non-ASCII bytes cost 1 each, as non-ASCII characters
/// cost their UTF-8 length), and the prefix is cut back to a character boundary. No call per
/// character: this scan runs over every byte of every transfer. Whole words first while they
/// fit — a word with no control character (a chunk's data is compact JSON text, which has
/// none) costs its eight bytes and the extra of each quote and backslash, counted at once —
/// then the rest a byte at a time.
fn default_cost_prefix(rest: &str, room: usize) -> (usize, usize) {
    let table: [u8; 256] = std::array::from_fn(|b| match u8::try_from(b) {
        Ok(b) if b.is_ascii() => double_escaped_len(char::from(b)) as u8,
        _ => 1,
    });
    let extra = double_escaped_len('"') - 1;
    assert_eq!(
        extra,
        double_escaped_len('\\') - 1,
        "quotes and backslashes cost alike"
    );
    let bytes = rest.as_bytes();
    let mut cost = 0;
    let mut start = 0;
    while let Some(word) = bytes.get(start..start + 8) {
        let word: [u8; 8] = word.try_into().expect("8 bytes");
        let c = match json_text::quotes_and_backslashes(u64::from_le_bytes(word)) {
            Some(n) => 8 + extra * n as usize,
            None => word
                .iter()
                .map(|&b| usize::from(table[usize::from(b)]))
                .sum(),
        };
        if cost + c > room {
            break;
        }
        cost += c;
        start += 8;
    }
    let mut end = bytes.len();
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        let c = usize::from(table[usize::from(b)]);
        if cost + c > room {
            end = i;
            break;
        }
        cost += c;
    }
    // Back to a character boundary, giving back the cut character's bytes.
    while !rest.is_char_boundary(end) {
        end -= 1;
        cost -= 1;
    }
    (end, cost)
}

/// The model's cost of `data`'s characters.
fn cost_of(env: &dyn Envelope, data: &str) -> usize {
    data.chars().map(|ch| env.data_char_cost(ch)).sum()
}

/// Binary search over character boundaries for the longest prefix that measures within budget.
/// Only runs when the cost model over-estimated what fits (an envelope the model does not
/// describe, such as an encrypted one). Prefixes longer than the guess (or, with no guess, than
/// the budget itself) are not considered.
fn largest_fitting_prefix(
    rest: &str,
    token: &ProgressToken,
    budget: usize,
    env: &dyn Envelope,
    upper_guess: usize,
) -> Result<usize, ChunkingError> {
    let boundaries: Vec<usize> = rest
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|&end| end <= if upper_guess > 0 { upper_guess } else { budget })
        .collect();
    let first = rest.chars().next().map_or(0, char::len_utf8);
    let (mut lo, mut hi) = (0usize, boundaries.len()); // answer: boundaries[lo-1], lo in 0..=hi
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if measured(token, &rest[..boundaries[mid - 1]], env) <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    if lo == 0 {
        return Err(ChunkingError::BudgetTooSmall {
            budget,
            what: "one-character chunk",
            needed: measured(token, &rest[..first], env),
        });
    }
    Ok(boundaries[lo - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::envelope::EscapedContentEnvelope;
    use crate::protocol::jsonrpc::RequestId;

    proptest::proptest! {
        #[test]
        fn the_table_scan_agrees_with_the_per_character_cost_model(
            text in "(\\PC|[\"\\\\\n\u{1}é✓😀]){0,64}",
            room in 0usize..200,
        ) {
            let env = EscapedContentEnvelope { overhead: 0 };
            proptest::prop_assert_eq!(
                default_cost_prefix(&text, room),
                model_cost_prefix(&text, room, &env)
            );
        }
    }

    /// An envelope the cost model knows nothing about: base64-like growth of 4/3.
    struct Inflating;
    impl Envelope for Inflating {
        fn published_size(&self, text: &str) -> usize {
            200 + text.len().div_ceil(3) * 4
        }
    }

    fn token() -> ProgressToken {
        RequestId::String("tok".into())
    }

    fn check(payload: &str, budget: usize, env: &dyn Envelope) {
        let ranges = plan_chunks(payload, &token(), budget, env).unwrap();
        // Segmented at awkward places, the plan is the same.
        let mut segmented = Segmented::new();
        let mut at = 0;
        for (i, (end, _)) in payload.char_indices().enumerate() {
            if i % 7 == 3 {
                segmented.push(payload[at..end].to_owned());
                at = end;
            }
        }
        segmented.push(payload[at..].to_owned());
        assert_eq!(
            plan_chunks_segmented(&segmented, &token(), budget, env).unwrap(),
            ranges
        );
        let mut joined = String::new();
        for r in &ranges {
            assert!(!r.is_empty());
            let data = &payload[r.clone()];
            assert!(measured(&token(), data, env) <= budget);
            joined.push_str(data);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn escape_heavy_and_multibyte_payloads_fit_the_budget() {
        let env = EscapedContentEnvelope { overhead: 600 };
        check(&"\"\\".repeat(5000), 2000, &env);
        check(&"é€😀".repeat(3000), 1500, &env);
        check(&"\u{01}a\n".repeat(3000), 1000, &env);
        check("", 1000, &env);
    }

    /// The same envelope, without claiming its model is exact: every frame is measured.
    struct Measuring(EscapedContentEnvelope);
    impl Envelope for Measuring {
        fn published_size(&self, text: &str) -> usize {
            self.0.published_size(text)
        }
    }

    #[test]
    fn an_exact_cost_model_measures_what_serialising_measures() {
        let env = EscapedContentEnvelope { overhead: 600 };
        let empty = measured(&token(), "", &env);
        for data in [
            "",
            "plain",
            "\"\\",
            "é€😀",
            "\u{01}\u{1f}\n\t\r\u{08}\u{0c}",
            "/<>&'\u{7f}",
        ] {
            assert_eq!(
                measured(&token(), data, &env),
                empty + cost_of(&env, data),
                "{data:?}"
            );
        }
        let payload = "a\"b\\é\n😀\u{02}".repeat(2_000);
        for budget in [700, 1_000, 4_096] {
            assert_eq!(
                plan_chunks(&payload, &token(), budget, &env),
                plan_chunks(&payload, &token(), budget, &Measuring(env)),
                "budget {budget}"
            );
        }
    }

    #[test]
    fn an_envelope_outside_the_cost_model_still_fits() {
        check(&"abc\"".repeat(4000), 3000, &Inflating);
    }

    #[test]
    fn chunks_are_as_large_as_the_budget_allows() {
        let env = EscapedContentEnvelope { overhead: 600 };
        let payload = "x".repeat(10_000);
        let ranges = plan_chunks(&payload, &token(), 2000, &env).unwrap();
        let first = &payload[ranges[0].clone()];
        assert_eq!(measured(&token(), first, &env), 2000);
    }

    #[test]
    fn a_budget_below_the_frame_overhead_is_refused() {
        let env = EscapedContentEnvelope { overhead: 600 };
        assert!(matches!(
            plan_chunks("abc", &token(), 650, &env),
            Err(ChunkingError::BudgetTooSmall {
                what: "empty chunk",
                ..
            })
        ));
        let empty = measured(&token(), "", &env);
        assert!(matches!(
            plan_chunks("😀", &token(), empty + 2, &env),
            Err(ChunkingError::BudgetTooSmall {
                what: "one-character chunk",
                ..
            })
        ));
    }
}
