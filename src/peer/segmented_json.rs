//! JSON texts of requests and results written a segment at a time around one long string: a
//! 1 GiB echo, upload or result is never whole beside the text it becomes (`segmented`).

use crate::nip01::json_segmented::LONG_STRING_JSON;
use crate::protocol::jsonrpc::{Message, RequestId};
use crate::segmented::{SegmentWriter, Segmented};
use serde_json::Value;

/// The JSON text of `request` ([`Message::to_json`]'s bytes) with `long` in place of the one
/// argument that holds [`LONG_STRING`](crate::nip01::json_segmented::LONG_STRING) ([`super::tools::ToolCall::into_request`]), written a
/// segment at a time and consuming `long`, so a very large argument and the request's text are
/// never both whole (as [`text_response_json`] does for a large result).
pub fn request_json(request: &Message, long: Segmented) -> Segmented {
    use crate::nip01::json_text::write_escaped_segmented;
    let small = request.to_json();
    let quoted = LONG_STRING_JSON;
    // The mark's JSON ends in a control character's escape right before its closing quote,
    // which no other string of such a request can: the method and tool names are relaysim's,
    // and a progress token (whose prefix a scenario may choose) ends in its call's digits. So
    // it is there once, where the argument is.
    let mut places = small.match_indices(quoted).map(|(at, _)| at);
    let (Some(at), None) = (places.next(), places.next()) else {
        panic!("a request with a long argument holds its mark once: {small}");
    };
    let mut out = SegmentWriter::new();
    out.current().extend_from_slice(&small.as_bytes()[..at]);
    write_escaped_segmented(&mut out, long);
    out.current()
        .extend_from_slice(&small.as_bytes()[at + quoted.len()..]);
    out.finish()
}

/// The JSON text of a response to `id` whose result is a [`super::tools::text_result`] of
/// `text` with `meta` as its `_meta` (as [`super::tools::digested_result`] makes it): the bytes of
/// `Message::Response { id, result }.to_json()`, written a segment at a time and consuming
/// `text`, so a very large result and its serialisation are never both whole.
pub fn text_response_json(id: &RequestId, text: Segmented, meta: Option<&Value>) -> Segmented {
    use crate::nip01::json_text::{write_escaped_segmented, write_value};
    let mut out = SegmentWriter::new();
    out.current()
        .extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    write_value(out.current(), &id.to_value());
    out.current()
        .extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    write_escaped_segmented(&mut out, text);
    out.current().extend_from_slice(br#"}],"isError":false"#);
    if let Some(meta) = meta {
        out.current().extend_from_slice(br#","_meta":"#);
        write_value(out.current(), meta);
    }
    out.current().extend_from_slice(b"}}");
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::tools::{digest_of, digested_result, object, text_result, ToolCall};
    use crate::protocol::oversized::Digest;
    use serde_json::json;

    #[test]
    fn a_segmented_text_response_is_the_message_serialised_whole() {
        for text in ["", "plain", "q\"uo\\te\u{1}é😀"] {
            for meta in [None, Some(json!({ "sha256": digest_of(text) }))] {
                for id in [RequestId::Number(7), RequestId::String("r\"1".into())] {
                    let mut result = text_result(text);
                    if let Some(m) = &meta {
                        result["_meta"] = m.clone();
                    }
                    let whole = Message::Response {
                        id: id.clone(),
                        result,
                    }
                    .to_json();
                    let segmented =
                        text_response_json(&id, Segmented::from(text.to_owned()), meta.as_ref());
                    assert_eq!(segmented.into_string(), whole);
                }
            }
        }
        let text = "x".repeat(10);
        assert_eq!(
            digested_result(&text)["_meta"]["sha256"],
            Digest::of_parts(Segmented::from(text.clone()).segments()).to_wire()
        );
    }

    /// The request an echo or upload makes with its payload kept in segments is the bytes
    /// `to_json` writes with the payload in place, whatever the payload holds and wherever its
    /// segments end (escapes, multi-byte characters and the mark's own characters at the
    /// boundaries).
    #[test]
    fn a_request_written_around_its_long_argument_is_the_request_written_whole() {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("\n\u{1}".to_owned()),
            Just("é😀".to_owned()),
            "[a-z ]{0,40}",
        ];
        let segments = prop::collection::vec(prop::collection::vec(piece, 0..8), 0..6);
        proptest!(|(segments in segments, upload in any::<bool>(), token in any::<bool>())| {
            let mut payload = Segmented::new();
            for pieces in &segments {
                payload.push(pieces.concat());
            }
            let tool = if upload {
                ToolCall::Upload { data: payload }
            } else {
                ToolCall::Echo { text: payload }
            };
            let (name, arguments, long) = tool.clone().into_request(0);
            let request = |arguments: Value| {
                let mut params = object([("name", name.into()), ("arguments", arguments)]);
                if token {
                    params["_meta"] = json!({ "progressToken": 3 });
                }
                Message::Request {
                    id: RequestId::Number(9),
                    method: "tools/call".into(),
                    params: Some(params),
                }
            };
            let written = request_json(&request(arguments), long.expect("a long argument"));
            let expected = request(tool.into_arguments().1).to_json();
            prop_assert_eq!(written.into_string(), expected);
        });
    }
}
