//! A CEP-22 or CEP-41 frame of either profile, and the commonest one, a chunk, read straight
//! from its text.
//!
//! Receivers see chunks far more often than anything else, and reading one the general way
//! (`Message::parse` into a JSON value, then the progress params, then the frame) builds a map
//! for each of its three objects, allocating and hashing every key. A chunk as relaysim's
//! writers send it has one shape: compact, fields in canonical order, no `message`. [`read`]
//! reads that shape field by field and returns `None` for anything else (another frame type,
//! other field order, whitespace, extra fields, a number JSON would read as a float), which
//! the general path then reads. Where it returns a frame, it is the frame the general path
//! reads (property-tested below), so which path ran never shows.

use super::cvm::MAX_SAFE_INTEGER;
use super::jsonrpc::{ProgressParams, RequestId};
use super::open_stream::{StreamBody, StreamFrame};
use super::oversized::{TransferBody, TransferFrame};
use crate::nip01::json_read::string_prefix;

/// A frame of either profile, read from one `notifications/progress`.
#[derive(Debug, Clone, PartialEq)]
pub enum ProgressFrame {
    /// A CEP-22 oversized-transfer frame.
    Transfer(TransferFrame),
    /// A CEP-41 open-stream frame.
    Stream(StreamFrame),
}

impl ProgressFrame {
    /// The frame `params` carry, trying CEP-22 first as every receiver does; `None` when they
    /// are neither profile's valid frame.
    pub fn from_params(params: &ProgressParams) -> Option<Self> {
        if let Ok(frame) = TransferFrame::from_params(params) {
            Some(ProgressFrame::Transfer(frame))
        } else {
            StreamFrame::from_params(params)
                .ok()
                .map(ProgressFrame::Stream)
        }
    }

    /// The frame's progress token.
    pub fn token(&self) -> &RequestId {
        match self {
            ProgressFrame::Transfer(f) => &f.token,
            ProgressFrame::Stream(f) => &f.token,
        }
    }
}

const HEAD: &str =
    r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"#;
const STREAM_CHUNK: &str = r#""open-stream","frameType":"chunk","chunkIndex":"#;
const TRANSFER_CHUNK: &str = r#""oversized-transfer","frameType":"chunk","data":"#;

/// The chunk frame `text` holds if it has the shape relaysim writes; `None` for anything else.
pub fn read(text: &str) -> Option<ProgressFrame> {
    let rest = text.strip_prefix(HEAD)?;
    let (token, rest) = token(rest)?;
    let rest = rest.strip_prefix(r#","progress":"#)?;
    let (progress, rest) = safe_integer(rest)?;
    let rest = rest.strip_prefix(r#","cvm":{"type":"#)?;
    if let Some(rest) = rest.strip_prefix(STREAM_CHUNK) {
        let (chunk_index, rest) = safe_integer(rest)?;
        let rest = rest.strip_prefix(r#","data":"#)?;
        let (data, rest) = string_prefix(rest)?;
        (rest == "}}}").then_some(ProgressFrame::Stream(StreamFrame {
            token,
            progress,
            message: None,
            body: StreamBody::Chunk { chunk_index, data },
        }))
    } else {
        let rest = rest.strip_prefix(TRANSFER_CHUNK)?;
        let (data, rest) = string_prefix(rest)?;
        (rest == "}}}").then_some(ProgressFrame::Transfer(TransferFrame {
            token,
            progress,
            message: None,
            body: TransferBody::Chunk { data },
        }))
    }
}

/// A progress token: a string, or an integer JSON reads as one (no sign on zero, no leading
/// zeros, within `i64`).
fn token(text: &str) -> Option<(RequestId, &str)> {
    if text.starts_with('"') {
        let (s, rest) = string_prefix(text)?;
        return Some((RequestId::String(s), rest));
    }
    let negative = text.starts_with('-');
    let digits = &text[usize::from(negative)..];
    let (magnitude, rest) = digit_run(digits)?;
    if negative && magnitude == 0 {
        return None; // `-0`: a float to serde_json
    }
    let value = if negative {
        0i64.checked_sub_unsigned(magnitude)?
    } else {
        i64::try_from(magnitude).ok()?
    };
    Some((RequestId::Number(value), rest))
}

/// A non-negative integer no larger than [`MAX_SAFE_INTEGER`], as the frames' numbers must be.
fn safe_integer(text: &str) -> Option<(u64, &str)> {
    digit_run(text).filter(|(n, _)| *n <= MAX_SAFE_INTEGER)
}

/// A JSON integer's digits (one `0`, or no leading zero) as a `u64`, and the text after them;
/// `None` when a fraction or exponent follows (a float to serde_json).
fn digit_run(text: &str) -> Option<(u64, &str)> {
    let end = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, rest) = text.split_at(end);
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    if rest.starts_with(['.', 'e', 'E']) {
        return None;
    }
    Some((digits.parse().ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::Message;
    use proptest::prelude::*;

    /// The general path: the message, its progress params, then the frame.
    fn general(text: &str) -> Option<ProgressFrame> {
        let params = Message::parse(text).ok()?.into_progress_params()?.ok()?;
        ProgressFrame::from_params(&params)
    }

    fn any_token() -> impl Strategy<Value = RequestId> {
        prop_oneof![
            any::<String>().prop_map(RequestId::String),
            any::<i64>().prop_map(RequestId::Number),
        ]
    }

    fn any_chunk() -> impl Strategy<Value = ProgressFrame> {
        let progress = 0..=MAX_SAFE_INTEGER;
        prop_oneof![
            (any_token(), progress.clone(), any::<String>()).prop_map(|(token, progress, data)| {
                ProgressFrame::Transfer(TransferFrame {
                    token,
                    progress,
                    message: None,
                    body: TransferBody::Chunk { data },
                })
            }),
            (any_token(), progress, 0..=MAX_SAFE_INTEGER, any::<String>()).prop_map(
                |(token, progress, chunk_index, data)| {
                    ProgressFrame::Stream(StreamFrame {
                        token,
                        progress,
                        message: None,
                        body: StreamBody::Chunk { chunk_index, data },
                    })
                }
            ),
        ]
    }

    fn text_of(frame: &ProgressFrame) -> String {
        match frame {
            ProgressFrame::Transfer(f) => f.to_json(),
            ProgressFrame::Stream(f) => f.to_json(),
        }
    }

    proptest! {
        #[test]
        fn every_chunk_relaysim_writes_is_read_straight_and_as_the_general_path_reads_it(
            frame in any_chunk()
        ) {
            let text = text_of(&frame);
            prop_assert_eq!(read(&text), Some(frame.clone()));
            prop_assert_eq!(general(&text), Some(frame));
        }

        #[test]
        fn a_changed_chunk_text_reads_as_the_general_path_reads_it_or_not_at_all(
            frame in any_chunk(),
            at in any::<prop::sample::Index>(),
            insert in prop_oneof![
                Just(" "), Just("0"), Just("-"), Just(".5"), Just("e1"), Just("\""), Just("\\"),
                Just("\\u0000"), Just("\\ud800"), Just(","), Just("}"), Just("\"message\":\"m\","),
                Just("9999999999999999999"),
            ],
            cut in any::<bool>(),
        ) {
            let mut text = text_of(&frame);
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            if cut {
                text.truncate(i);
            } else {
                text.insert_str(i, insert);
            }
            if let Some(straight) = read(&text) {
                prop_assert_eq!(Some(straight), general(&text));
            }
        }
    }

    #[test]
    fn other_frames_and_shapes_are_left_to_the_general_path() {
        let start = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"cvm":{"type":"open-stream","frameType":"start"}}}"#;
        assert_eq!(read(start), None);
        assert!(general(start).is_some());
        let spaced = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"cvm":{"type":"oversized-transfer","frameType":"chunk","data": "x"}}}"#;
        assert_eq!(read(spaced), None);
        assert!(general(spaced).is_some());
        let float = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1.0,"cvm":{"type":"oversized-transfer","frameType":"chunk","data":"x"}}}"#;
        assert_eq!(read(float), None);
        let unsafe_index = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":1,"cvm":{{"type":"open-stream","frameType":"chunk","chunkIndex":{},"data":"x"}}}}}}"#,
            MAX_SAFE_INTEGER + 1
        );
        assert_eq!(read(&unsafe_index), None);
        assert_eq!(
            general(&unsafe_index),
            None,
            "the general path refuses it too"
        );
    }
}
