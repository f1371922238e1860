//! The tool catalogue: the simulated tools a server peer offers, as workloads call them.
//!
//! Everything about a tool lives here: its call ([`ToolCall`]: arguments, parsing), the
//! workload kind that calls it ([`WorkloadKind`]), what it does ([`ToolHandler`], implemented
//! by [`SimulatedTools`]) and what its correct result is ([`Expected`]). The server peer
//! carries out a handler's [`ToolAction`]s (answer now, answer later with progress, stream)
//! over the ContextVM transport without knowing which tool asked for them.
//!
//! Longer than 600 lines because the catalogue is one table read four ways (call, parse,
//! handle, expect) and its tests check each way against the others beside it.

use super::content::{payload_segments, ContentClass};
pub use super::segmented_json::{request_json, text_response_json};
use crate::nip01::json_segmented::LONG_STRING;
use crate::protocol::oversized::Digest;
use crate::segmented::Segmented;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::time::Duration;

/// A parsed `tools/call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCall {
    /// `echo {text}`: returns the text.
    Echo {
        /// Text to return, in segments: a large one is written into the request a segment at
        /// a time ([`ToolCall::into_request`]).
        text: Segmented,
    },
    /// `large_result {bytes, content}`: returns that much text of a content class.
    LargeResult {
        /// Bytes of text.
        bytes: usize,
        /// What it is made of.
        content: ContentClass,
    },
    /// `stream {chunks, chunk_bytes, interval_ms}`: a CEP-41 stream, then a final result.
    Stream {
        /// Number of chunks.
        chunks: u64,
        /// Bytes per chunk.
        chunk_bytes: usize,
        /// Time between chunks.
        interval: Duration,
    },
    /// `slow {ms, progress_ms?}`: answers after a delay, sending MCP progress notifications
    /// every `progress_ms` (at least 100) meanwhile when the call has a progress token.
    Slow {
        /// How long the tool works.
        duration: Duration,
        /// Between progress notifications (none when absent).
        progress_every: Option<Duration>,
    },
    /// `fail {reason}`: answers with an error.
    Fail {
        /// The error message.
        reason: String,
    },
    /// `upload {data}`: takes a (large) argument and answers with its digest, so the client can
    /// check the server received it intact.
    Upload {
        /// The uploaded text, in segments as an echo's.
        data: Segmented,
    },
}

/// What a workload calls, as a scenario describes it: the catalogue of workload kinds. Each
/// kind becomes a [`ToolCall`] per call ([`WorkloadKind::call`]), whose correct result is
/// [`Expected::of`] it. Calls whose arguments are drawn afresh each time have their own
/// variants; the others are the call itself.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadKind {
    /// `echo` of an ASCII text of `bytes` bytes, drawn per call.
    Request {
        /// Text size.
        bytes: usize,
    },
    /// `upload` of `bytes` bytes of a content class, drawn per call.
    Upload {
        /// Size.
        bytes: usize,
        /// Content class.
        content: ContentClass,
    },
    /// The same call every time (`large_result`, `stream`, `slow`).
    Fixed(ToolCall),
}

impl WorkloadKind {
    /// One call of this kind; payloads are drawn from `rng` (one stream per call).
    pub fn call(&self, rng: &mut impl rand::Rng) -> ToolCall {
        match self {
            WorkloadKind::Request { bytes } => ToolCall::Echo {
                text: payload_segments(ContentClass::Ascii, *bytes, rng),
            },
            WorkloadKind::Upload { bytes, content } => ToolCall::Upload {
                data: payload_segments(*content, *bytes, rng),
            },
            WorkloadKind::Fixed(call) => call.clone(),
        }
    }
}

/// Why a `tools/call` cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// No such tool.
    #[error("unknown tool {0:?}")]
    Unknown(String),
    /// An argument is missing or malformed.
    #[error("tool {tool}: argument `{arg}` must be {expected}")]
    BadArgument {
        /// The tool.
        tool: &'static str,
        /// The argument.
        arg: &'static str,
        /// What it must be.
        expected: &'static str,
    },
}

/// Largest `large_result` the simulated server produces (guards a typo'd workload).
pub const MAX_TOOL_BYTES: usize = crate::limits::MAX_PAYLOAD_BYTES;

impl ToolCall {
    /// Reads a tool call from `tools/call` params (`name` and `arguments`).
    pub fn parse(params: &Value) -> Result<Self, ToolError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // Borrowed: the arguments may hold a gigabyte.
        let no_arguments = json!({});
        let args = params.get("arguments").unwrap_or(&no_arguments);
        let uint = |tool: &'static str, arg: &'static str, max: u64| {
            args.get(arg)
                .and_then(Value::as_u64)
                .filter(|n| *n <= max)
                .ok_or(ToolError::BadArgument {
                    tool,
                    arg,
                    expected: "a non-negative integer within limits",
                })
        };
        match name {
            "echo" => Ok(ToolCall::Echo {
                text: args
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into(),
            }),
            "large_result" => Ok(ToolCall::LargeResult {
                bytes: uint("large_result", "bytes", MAX_TOOL_BYTES as u64)? as usize,
                content: args
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or("ascii")
                    .parse()
                    .map_err(|_| ToolError::BadArgument {
                        tool: "large_result",
                        arg: "content",
                        expected: "ascii, escape-heavy, utf8 or random",
                    })?,
            }),
            "stream" => Ok(ToolCall::Stream {
                chunks: uint("stream", "chunks", crate::limits::MAX_STREAM_CHUNKS)?,
                chunk_bytes: uint(
                    "stream",
                    "chunk_bytes",
                    crate::limits::MAX_CHUNK_BYTES as u64,
                )? as usize,
                interval: Duration::from_millis(uint("stream", "interval_ms", 86_400_000)?),
            }),
            "slow" => Ok(ToolCall::Slow {
                duration: Duration::from_millis(uint("slow", "ms", 86_400_000)?),
                progress_every: match args.get("progress_ms") {
                    None => None,
                    // At least 100 ms: one request must not make the server sign an
                    // event per millisecond for a day.
                    Some(_) => Some(Duration::from_millis(
                        uint("slow", "progress_ms", 86_400_000)?.max(100),
                    )),
                },
            }),
            "upload" => Ok(ToolCall::Upload {
                data: args
                    .get("data")
                    .and_then(Value::as_str)
                    .ok_or(ToolError::BadArgument {
                        tool: "upload",
                        arg: "data",
                        expected: "a string",
                    })?
                    .into(),
            }),
            "fail" => Ok(ToolCall::Fail {
                reason: args
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("tool failed")
                    .to_owned(),
            }),
            other => Err(ToolError::Unknown(other.to_owned())),
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCall::Echo { .. } => "echo",
            ToolCall::LargeResult { .. } => "large_result",
            ToolCall::Stream { .. } => "stream",
            ToolCall::Slow { .. } => "slow",
            ToolCall::Fail { .. } => "fail",
            ToolCall::Upload { .. } => "upload",
        }
    }

    /// The `arguments` object that calls this tool, taking its payload rather than copying it
    /// (a 1 GiB echo or upload is one gibibyte, not two).
    pub fn into_arguments(self) -> (&'static str, Value) {
        match self {
            ToolCall::Echo { text } => (
                "echo",
                object([("text", Value::String(text.into_string()))]),
            ),
            ToolCall::Upload { data } => (
                "upload",
                object([("data", Value::String(data.into_string()))]),
            ),
            other => other.arguments(),
        }
    }

    /// As [`ToolCall::into_arguments`], with an echo's or upload's payload of at least
    /// `long_from` bytes kept in its segments: the argument holds [`LONG_STRING`] and the
    /// payload is returned beside, for [`request_json`] to write into the request's text a
    /// segment at a time. A 1 GiB payload is then never whole beside the text it becomes; a
    /// short one goes in place, as [`ToolCall::into_arguments`] puts it.
    pub fn into_request(self, long_from: usize) -> (&'static str, Value, Option<Segmented>) {
        let mark = || Value::String(LONG_STRING.to_owned());
        match self {
            ToolCall::Echo { text } if text.len() >= long_from => {
                ("echo", object([("text", mark())]), Some(text))
            }
            ToolCall::Upload { data } if data.len() >= long_from => {
                ("upload", object([("data", mark())]), Some(data))
            }
            other => {
                let (name, arguments) = other.into_arguments();
                (name, arguments, None)
            }
        }
    }

    /// The `arguments` object that calls this tool.
    pub fn arguments(&self) -> (&'static str, Value) {
        match self {
            ToolCall::Echo { text } => ("echo", json!({ "text": text.clone().into_string() })),
            ToolCall::LargeResult { bytes, content } => (
                "large_result",
                json!({ "bytes": bytes, "content": content.to_string() }),
            ),
            ToolCall::Stream {
                chunks,
                chunk_bytes,
                interval,
            } => (
                "stream",
                json!({ "chunks": chunks, "chunk_bytes": chunk_bytes, "interval_ms": interval.as_millis() as u64 }),
            ),
            ToolCall::Slow {
                duration,
                progress_every,
            } => {
                let mut args = json!({ "ms": duration.as_millis() as u64 });
                if let Some(every) = progress_every {
                    args["progress_ms"] = (every.as_millis() as u64).into();
                }
                ("slow", args)
            }
            ToolCall::Fail { reason } => ("fail", json!({ "reason": reason })),
            ToolCall::Upload { data } => ("upload", json!({ "data": data.clone().into_string() })),
        }
    }
}

/// What a tool asks the server to do with a call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolAction {
    /// Answer now: a result, or a JSON-RPC error (code, message).
    Respond(Result<Value, (i64, String)>),
    /// Answer now with a result of one text block ([`text_result`]), the text given in
    /// segments — a large result, each of whose segments is freed as it is serialised — and
    /// `meta` as the result's `_meta` when given.
    RespondText {
        /// The text.
        text: Segmented,
        /// The result's `_meta`.
        meta: Option<Value>,
    },
    /// Answer `result` after `after`, sending MCP progress notifications every
    /// `progress_every` meanwhile when the call has a progress token.
    Later {
        /// How long the tool works.
        after: Duration,
        /// Between progress notifications.
        progress_every: Option<Duration>,
        /// The answer.
        result: Value,
    },
    /// Stream `chunks` chunks ([`stream_chunk_text`]) over CEP-41, one per `interval`, then
    /// answer `streamed N chunks` (needs a progress token).
    Stream {
        /// Number of chunks.
        chunks: u64,
        /// Bytes per chunk.
        chunk_bytes: usize,
        /// Time between chunks.
        interval: Duration,
    },
}

/// The tools a server offers: a list, and what each call does. The server peer is the
/// ContextVM transport around it; swap the handler to serve other tools.
pub trait ToolHandler: Send {
    /// The `tools/list` result.
    fn list(&self) -> Value;
    /// What to do with a `tools/call` (its params: `name` and `arguments`).
    fn call(&mut self, params: Value) -> ToolAction;
    /// As [`ToolHandler::call`], with `long` the text of the one string of `params` that holds
    /// [`LONG_STRING`]: a very large argument, read in segments from the request's pieces.
    /// By default it is put back whole and the call goes to [`ToolHandler::call`].
    fn call_with_long(&mut self, mut params: Value, long: Option<Segmented>) -> ToolAction {
        if let Some(long) = long {
            crate::nip01::json_segmented::put_back(&mut params, long);
        }
        self.call(params)
    }
    /// Whether a call may run long enough to be carried on a resumable stream.
    fn long_running(&self, params: &Value) -> bool;
}

/// JSON-RPC error codes the simulated tools answer with.
pub mod tool_codes {
    /// Invalid params (JSON-RPC).
    pub const INVALID_PARAMS: i64 = -32602;
    /// A tool that failed (MCP tool error).
    pub const TOOL_FAILED: i64 = -32000;
}

/// relaysim's simulated tools (`echo`, `large_result`, `stream`, `slow`, `fail`, `upload`),
/// drawing generated content from their own seeded stream.
pub struct SimulatedTools {
    rng: ChaCha8Rng,
}

impl SimulatedTools {
    /// Tools drawing `large_result` content from `rng`.
    pub fn new(rng: ChaCha8Rng) -> Self {
        SimulatedTools { rng }
    }
}

impl ToolHandler for SimulatedTools {
    fn list(&self) -> Value {
        tool_list()
    }

    fn call(&mut self, mut params: Value) -> ToolAction {
        use tool_codes::{INVALID_PARAMS, TOOL_FAILED};
        let respond = ToolAction::Respond;
        // `echo` and `upload` take their payload out of the request: parsing the call would
        // copy it, and answering an echo through a `Value` would copy it twice more (a 1 GiB
        // request peaked at four times its payload in the server alone).
        if let Some(text) = take_payload(&mut params, "echo", "text") {
            return ToolAction::RespondText {
                text: Segmented::from(text),
                meta: None,
            };
        }
        if let Some(data) = take_payload(&mut params, "upload", "data") {
            return respond(Ok(text_result(&digest_of(&data))));
        }
        match ToolCall::parse(&params) {
            Err(e) => respond(Err((INVALID_PARAMS, e.to_string()))),
            Ok(ToolCall::Echo { text }) => respond(Ok(text_result(&text.into_string()))),
            Ok(ToolCall::LargeResult { bytes, content }) => {
                let text = payload_segments(content, bytes, &mut self.rng);
                let meta = json!({ "sha256": digest_of_parts(&text) });
                ToolAction::RespondText {
                    text,
                    meta: Some(meta),
                }
            }
            Ok(ToolCall::Upload { data }) => respond(Ok(text_result(&digest_of_parts(&data)))),
            Ok(ToolCall::Fail { reason }) => respond(Err((TOOL_FAILED, reason))),
            Ok(ToolCall::Slow {
                duration,
                progress_every,
            }) => ToolAction::Later {
                after: duration,
                progress_every,
                result: text_result("done"),
            },
            Ok(ToolCall::Stream {
                chunks,
                chunk_bytes,
                interval,
            }) => ToolAction::Stream {
                chunks,
                chunk_bytes,
                interval,
            },
        }
    }

    fn call_with_long(&mut self, mut params: Value, long: Option<Segmented>) -> ToolAction {
        if let Some(long) = long {
            // An echo answers with the segments it got and an upload with their digest, so
            // neither holds the payload whole.
            if holds_long_argument(&params, "echo", "text") {
                return ToolAction::RespondText {
                    text: long,
                    meta: None,
                };
            }
            if holds_long_argument(&params, "upload", "data") {
                return ToolAction::Respond(Ok(text_result(&digest_of_parts(&long))));
            }
            crate::nip01::json_segmented::put_back(&mut params, long);
        }
        self.call(params)
    }

    fn long_running(&self, params: &Value) -> bool {
        // By name first: parsing an echo or an upload would copy its payload.
        let name = params.get("name").and_then(Value::as_str);
        matches!(name, Some("stream" | "slow" | "large_result"))
            && matches!(
                ToolCall::parse(params),
                Ok(ToolCall::Stream { .. } | ToolCall::Slow { .. } | ToolCall::LargeResult { .. })
            )
    }
}

/// A JSON object of `fields`, in their order, moved in: `json!` would copy each value it is
/// given (it serialises a reference), a gigabyte for a large payload.
pub fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// The string argument `arg` of a call to `tool`, taken out of the call's params; `None` for
/// another tool or when the argument is missing or not a string (the call's parser then
/// answers as it does for any call).
fn take_payload(params: &mut Value, tool: &str, arg: &str) -> Option<String> {
    if params.get("name").and_then(Value::as_str) != Some(tool) {
        return None;
    }
    match params.get_mut("arguments")?.get_mut(arg)? {
        Value::String(payload) => Some(std::mem::take(payload)),
        _ => None,
    }
}

/// Whether `params` call `tool` with its argument `arg` holding [`LONG_STRING`].
fn holds_long_argument(params: &Value, tool: &str, arg: &str) -> bool {
    params.get("name").and_then(Value::as_str) == Some(tool)
        && params
            .get("arguments")
            .and_then(|a| a.get(arg))
            .and_then(Value::as_str)
            == Some(LONG_STRING)
}

/// An MCP tool result with one text block.
pub fn text_result(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": false })
}

/// `sha256:<hex>` of a text's UTF-8 bytes: how tools let the other side check integrity.
pub fn digest_of(text: &str) -> String {
    Digest::of(text).to_wire()
}

/// [`digest_of`] a text held in segments.
pub fn digest_of_parts(text: &Segmented) -> String {
    Digest::of_parts(text.segments()).to_wire()
}

/// A text result that also carries the text's digest in `_meta.sha256`, so the receiver can
/// verify end to end what it got (what `large_result` answers).
pub fn digested_result(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": false, "_meta": { "sha256": digest_of(text) } })
}

/// The first text block of a tool result.
pub fn result_text(result: &Value) -> Option<&str> {
    // Step by step as `pointer("/content/0/text")` reads it (an object's key "0" too), which
    // allocates for every path it walks.
    let first = match result.get("content")? {
        Value::Array(items) => items.first(),
        Value::Object(fields) => fields.get("0"),
        _ => None,
    };
    first?.get("text")?.as_str()
}

/// The `tools/list` result.
pub fn tool_list() -> Value {
    let tool = |name: &str, description: &str| json!({ "name": name, "description": description, "inputSchema": { "type": "object" } });
    json!({ "tools": [
        tool("echo", "Returns `text`."),
        tool("large_result", "Returns `bytes` bytes of `content` text (ascii, escape-heavy, utf8, random)."),
        tool("stream", "Streams `chunks` chunks of `chunk_bytes` bytes every `interval_ms` over CEP-41, then returns."),
        tool("slow", "Returns after `ms` milliseconds."),
        tool("fail", "Returns a JSON-RPC error with `reason`."),
        tool("upload", "Takes `data` and returns its sha256 digest."),
    ]})
}

/// The text of stream chunk `index`, exactly `bytes` long (at least the index label).
pub fn stream_chunk_text(index: u64, bytes: usize) -> String {
    let mut text = format!("chunk {index}:");
    while text.len() < bytes {
        text.push('x');
    }
    text
}

/// The longest echo text kept whole to check its answer; a longer one is checked by digest.
const ECHO_KEPT_WHOLE: usize = 4096;

/// What a correct result of a call looks like, so every delivery can be checked against what
/// was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// This exact text (a short echo, and the digest an upload must come back with).
    Text(String),
    /// A text with this SHA-256 ([`digest_of`]): a long echo, whose copy kept for the check
    /// would double the payload's memory.
    Digest(String),
    /// A text that matches the digest in its own `_meta.sha256` (large_result).
    SelfDigest,
    /// `streamed N chunks`, after N intact chunks.
    Stream {
        /// Chunks written.
        chunks: u64,
    },
    /// Any successful result (slow).
    Done,
    /// A JSON-RPC error (fail).
    Error,
}

impl Expected {
    /// What `tool` should answer.
    pub fn of(tool: &ToolCall) -> Self {
        match tool {
            ToolCall::Echo { text } if text.len() > ECHO_KEPT_WHOLE => {
                Expected::Digest(digest_of_parts(text))
            }
            ToolCall::Echo { text } => Expected::Text(text.clone().into_string()),
            ToolCall::Upload { data } => Expected::Text(digest_of_parts(data)),
            ToolCall::LargeResult { .. } => Expected::SelfDigest,
            ToolCall::Stream { chunks, .. } => Expected::Stream { chunks: *chunks },
            ToolCall::Slow { .. } => Expected::Done,
            ToolCall::Fail { .. } => Expected::Error,
        }
    }

    /// Whether a successful result is intact.
    pub fn matches(&self, result: &serde_json::Value) -> bool {
        let text = result_text(result);
        match self {
            Expected::Text(t) => text == Some(t.as_str()),
            Expected::Digest(d) => text.is_some_and(|t| digest_of(t) == *d),
            Expected::SelfDigest => {
                let claimed = result
                    .get("_meta")
                    .and_then(|m| m.get("sha256"))
                    .and_then(serde_json::Value::as_str);
                text.is_some_and(|t| Some(digest_of(t).as_str()) == claimed)
            }
            Expected::Stream { chunks } => {
                text == Some(format!("streamed {chunks} chunks").as_str())
            }
            Expected::Done => text.is_some(),
            Expected::Error => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::Message;
    use rand::SeedableRng;

    #[test]
    fn tool_calls_round_trip_through_their_arguments() {
        let calls = [
            ToolCall::Echo { text: "hi".into() },
            ToolCall::LargeResult {
                bytes: 10,
                content: ContentClass::Utf8,
            },
            ToolCall::Stream {
                chunks: 3,
                chunk_bytes: 20,
                interval: Duration::from_millis(5),
            },
            ToolCall::Slow {
                duration: Duration::from_millis(70),
                progress_every: None,
            },
            ToolCall::Slow {
                duration: Duration::from_millis(70),
                progress_every: Some(Duration::from_millis(200)),
            },
            ToolCall::Fail {
                reason: "nope".into(),
            },
            ToolCall::Upload {
                data: "payload".into(),
            },
        ];
        for call in calls {
            let (name, arguments) = call.arguments();
            assert_eq!(
                ToolCall::parse(&json!({ "name": name, "arguments": arguments })),
                Ok(call)
            );
        }
    }

    #[test]
    fn echo_and_upload_answer_from_the_payload_they_take_as_a_parsed_call_would() {
        // The answers the tools gave when they parsed (and copied) the call first.
        let mut tools = SimulatedTools::new(ChaCha8Rng::seed_from_u64(1));
        let id = crate::protocol::jsonrpc::RequestId::Number(7);
        let text = "a \"quoted\" line\n".repeat(100);
        let params = ToolCall::Echo {
            text: text.as_str().into(),
        }
        .into_arguments();
        let call = object([("name", params.0.into()), ("arguments", params.1)]);
        let ToolAction::RespondText { text: answer, meta } = tools.call(call) else {
            panic!("an echo answers with its text");
        };
        let parsed = Message::Response {
            id: id.clone(),
            result: text_result(&text),
        };
        assert_eq!(
            text_response_json(&id, answer, meta.as_ref()).into_string(),
            parsed.to_json()
        );
        let upload = object([
            ("name", "upload".into()),
            ("arguments", object([("data", text.clone().into())])),
        ]);
        let ToolAction::Respond(Ok(result)) = tools.call(upload) else {
            panic!("an upload answers with a result");
        };
        assert_eq!(result, text_result(&digest_of(&text)));
        // A malformed echo still goes to the parser, which answers as before.
        let odd = json!({ "name": "echo", "arguments": { "text": 5 } });
        assert_eq!(tools.call(odd), ToolAction::Respond(Ok(text_result(""))));
    }

    #[test]
    fn a_long_argument_in_segments_is_echoed_and_digested_without_being_joined() {
        let mut tools = SimulatedTools::new(ChaCha8Rng::seed_from_u64(1));
        let mut segments = Segmented::new();
        segments.push("first ".into());
        segments.push("second".into());
        let call = |tool: &str, arg: &str| {
            object([
                ("name", tool.into()),
                ("arguments", object([(arg, LONG_STRING.into())])),
            ])
        };
        assert_eq!(
            tools.call_with_long(call("echo", "text"), Some(segments.clone())),
            ToolAction::RespondText {
                text: segments.clone(),
                meta: None
            }
        );
        assert_eq!(
            tools.call_with_long(call("upload", "data"), Some(segments.clone())),
            ToolAction::Respond(Ok(text_result(&digest_of("first second"))))
        );
        // Anywhere else the string is put back whole: a failing tool's reason, say.
        assert_eq!(
            tools.call_with_long(call("fail", "reason"), Some(segments)),
            ToolAction::Respond(Err((tool_codes::TOOL_FAILED, "first second".into())))
        );
    }

    #[test]
    fn bad_tool_calls_are_typed_errors() {
        assert_eq!(
            ToolCall::parse(&json!({ "name": "rm" })),
            Err(ToolError::Unknown("rm".into()))
        );
        assert!(matches!(
            ToolCall::parse(&json!({ "name": "large_result", "arguments": { "bytes": "big" } })),
            Err(ToolError::BadArgument { arg: "bytes", .. })
        ));
        assert!(matches!(
            ToolCall::parse(
                &json!({ "name": "large_result", "arguments": { "bytes": 1u64 << 40 } })
            ),
            Err(ToolError::BadArgument { arg: "bytes", .. })
        ));
    }
}
