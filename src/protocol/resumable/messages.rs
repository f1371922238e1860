//! The messages of MCP resumable streams, in the union of the draft spec page and PR #899.
//!
//! Where the texts differ:
//! - `notifications/stream/create`: the draft nests `{stream: {streamId, resumeInterval}}`;
//!   the PR inlines `streamId`, `resumeToken`, `requestId` and `resumeInterval` in `params`.
//!   Both parse; relaysim sends the inlined form (the PR's direction, and the only one with a
//!   token).
//! - `resumeToken`: the draft has none. It is optional in `stream/resume` and `stream/poll`;
//!   when present it must match. (On Nostr the requester is also authenticated by its event
//!   signature, and the server always checks that it owns the stream.)
//! - `stream/poll/all` (PR) is supported with cursor pagination, as MCP's list methods do.
//! - `lastSequence` in `stream/resume` and `stream/poll` is relaysim's extension: the last
//!   per-stream sequence number the client processed, the relay analogue of `Last-Event-ID`.
//! - `notifications/stream/ack` is relaysim's extension: a client that received a completed
//!   stream whole says so, and the server frees it at once instead of waiting out
//!   `resumeInterval.max` and counting it abandoned.
//! - The `stream/resume` answer is relaysim's: `{streamId, replayed}`, plus `more: true` and
//!   `through` (the last sequence sent) when the server holds more, for the client to ask for
//!   the next batch.
//! - `resumeInterval` bounds above [`MAX_INTERVAL_SECS`] (a day) are read as that: a peer
//!   cannot make the other side's timers overflow.

use crate::protocol::jsonrpc::RequestId;
use serde_json::{json, Map, Value};

/// `notifications/stream/create`.
pub const CREATE: &str = "notifications/stream/create";
/// `notifications/stream/end`.
pub const END: &str = "notifications/stream/end";
/// `notifications/stream/ack` (relaysim's extension).
pub const ACK: &str = "notifications/stream/ack";
/// `stream/resume`.
pub const RESUME: &str = "stream/resume";
/// `stream/poll`.
pub const POLL: &str = "stream/poll";
/// `stream/poll/all`.
pub const POLL_ALL: &str = "stream/poll/all";

/// JSON-RPC error codes for stream requests (in the implementation-defined server range).
pub mod codes {
    /// No such stream (or not the requester's).
    pub const UNKNOWN_STREAM: i64 = -32010;
    /// The stream was abandoned and its messages reclaimed.
    pub const ABANDONED: i64 = -32011;
    /// The `resumeToken` does not match.
    pub const WRONG_TOKEN: i64 = -32012;
    /// Messages after `lastSequence` were evicted from the server's buffer.
    pub const EVICTED: i64 = -32013;
    /// Malformed parameters.
    pub const INVALID_PARAMS: i64 = -32602;
}

/// Why stream parameters could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid stream parameters: {0}")]
pub struct ParamsError(pub &'static str);

/// The largest `resumeInterval` bound honoured, in seconds (a day); larger ones are clamped.
pub const MAX_INTERVAL_SECS: u64 = 86_400;

/// How long a client should and may wait before resuming, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResumeInterval {
    /// Minimum seconds between a client's resume or poll attempts.
    pub min: Option<u64>,
    /// Seconds without a resume or poll after which the server may abandon the stream;
    /// `None`: never.
    pub max: Option<u64>,
}

impl ResumeInterval {
    fn to_value(self) -> Value {
        let mut m = Map::new();
        if let Some(min) = self.min {
            m.insert("min".into(), min.into());
        }
        if let Some(max) = self.max {
            m.insert("max".into(), max.into());
        }
        Value::Object(m)
    }

    fn from_value(v: Option<&Value>) -> Result<Self, ParamsError> {
        let Some(v) = v else {
            return Ok(ResumeInterval::default());
        };
        let secs = |key| match v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => x
                .as_u64()
                .map(|s| Some(s.min(MAX_INTERVAL_SECS)))
                .ok_or(ParamsError("resumeInterval bounds must be whole seconds")),
        };
        Ok(ResumeInterval {
            min: secs("min")?,
            max: secs("max")?,
        })
    }
}

/// `notifications/stream/create` parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamCreate {
    /// The stream.
    pub stream_id: String,
    /// The secret that resumes and polls it (PR #899; absent in the draft form).
    pub resume_token: Option<String>,
    /// The request the stream carries the output of.
    pub request_id: Option<RequestId>,
    /// Resume bounds.
    pub resume_interval: ResumeInterval,
}

impl StreamCreate {
    /// The inlined (PR #899) form.
    pub fn to_params(&self) -> Value {
        let mut p = json!({
            "streamId": self.stream_id,
            "resumeInterval": self.resume_interval.to_value(),
        });
        if let Some(t) = &self.resume_token {
            p["resumeToken"] = t.clone().into();
        }
        if let Some(id) = &self.request_id {
            p["requestId"] = id.to_value();
        }
        p
    }

    /// Reads either form: inlined (PR #899) or nested under `stream` (draft).
    pub fn from_params(params: &Value) -> Result<Self, ParamsError> {
        let body = match params.get("stream") {
            Some(nested) if nested.is_object() => nested,
            _ => params,
        };
        let text = |v: &Value, key| v.get(key).and_then(Value::as_str).map(str::to_owned);
        Ok(StreamCreate {
            stream_id: text(body, "streamId").ok_or(ParamsError("streamId missing"))?,
            resume_token: text(body, "resumeToken").or_else(|| text(params, "resumeToken")),
            request_id: body
                .get("requestId")
                .or_else(|| params.get("requestId"))
                .and_then(|v| match v {
                    Value::String(s) => Some(RequestId::String(s.clone())),
                    Value::Number(n) => n.as_i64().map(RequestId::Number),
                    _ => None,
                }),
            resume_interval: ResumeInterval::from_value(body.get("resumeInterval"))?,
        })
    }
}

/// Parameters of `stream/resume` and `stream/poll`, and of the `ack` extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRef {
    /// The stream.
    pub stream_id: String,
    /// Its resume token, if the client has it.
    pub resume_token: Option<String>,
    /// The last sequence number the client processed (relaysim's extension).
    pub last_sequence: Option<u64>,
}

impl StreamRef {
    /// As JSON-RPC params.
    pub fn to_params(&self) -> Value {
        let mut p = json!({ "streamId": self.stream_id });
        if let Some(t) = &self.resume_token {
            p["resumeToken"] = t.clone().into();
        }
        if let Some(s) = self.last_sequence {
            p["lastSequence"] = s.into();
        }
        p
    }

    /// Reads JSON-RPC params.
    pub fn from_params(params: &Value) -> Result<Self, ParamsError> {
        let last_sequence = match params.get("lastSequence") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or(ParamsError("lastSequence must be a whole number"))?,
            ),
        };
        Ok(StreamRef {
            stream_id: params
                .get("streamId")
                .and_then(Value::as_str)
                .ok_or(ParamsError("streamId missing"))?
                .to_owned(),
            resume_token: params
                .get("resumeToken")
                .and_then(Value::as_str)
                .map(str::to_owned),
            last_sequence,
        })
    }
}

/// A stream's state in a poll result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStatus {
    /// Still producing messages.
    Live,
    /// Ended (`notifications/stream/end` was sent).
    Completed,
}

/// `stream/poll` result (and one entry of `stream/poll/all`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollResult {
    /// The stream.
    pub stream_id: String,
    /// Live or completed.
    pub status: StreamStatus,
    /// Whether the server holds messages the client has not processed.
    pub pending_messages: bool,
    /// Whether those include a server-to-client request.
    pub has_request: bool,
    /// Whether those include an error result.
    pub has_error: bool,
}

impl PollResult {
    /// As a JSON-RPC result.
    pub fn to_value(&self) -> Value {
        json!({
            "streamId": self.stream_id,
            "status": match self.status {
                StreamStatus::Live => "live",
                StreamStatus::Completed => "completed",
            },
            "pendingMessages": self.pending_messages,
            "hasRequest": self.has_request,
            "hasError": self.has_error,
        })
    }

    /// Reads a JSON-RPC result.
    pub fn from_value(v: &Value) -> Result<Self, ParamsError> {
        let flag = |key| v.get(key).and_then(Value::as_bool).unwrap_or(false);
        Ok(PollResult {
            stream_id: v
                .get("streamId")
                .and_then(Value::as_str)
                .ok_or(ParamsError("streamId missing"))?
                .to_owned(),
            status: match v.get("status").and_then(Value::as_str) {
                Some("live") => StreamStatus::Live,
                Some("completed") => StreamStatus::Completed,
                _ => return Err(ParamsError("status must be live or completed")),
            },
            pending_messages: flag("pendingMessages"),
            has_request: flag("hasRequest"),
            has_error: flag("hasError"),
        })
    }
}

/// What replaces a `resumeToken` wherever relaysim writes a message down.
pub const REDACTED: &str = "<redacted>";

/// `content` with any `resumeToken` in its params replaced by [`REDACTED`], or `None` when it
/// has none. Tokens are secrets: traces and logs get this, never the token.
pub fn redact_tokens(content: &str) -> Option<String> {
    if !content.contains("resumeToken") {
        return None;
    }
    let mut v: Value = serde_json::from_str(content).ok()?;
    let mut changed = false;
    // The inlined (PR #899) form, and the draft's nested `stream` object.
    for path in ["/params/resumeToken", "/params/stream/resumeToken"] {
        if let Some(token) = v.pointer_mut(path) {
            if token.as_str() != Some(REDACTED) {
                *token = REDACTED.into();
                changed = true;
            }
        }
    }
    changed.then(|| v.to_string())
}

/// The `streamId` of `notifications/stream/end`.
pub fn end_params(stream_id: &str) -> Value {
    json!({ "streamId": stream_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_reads_the_inlined_pr_form_and_the_nested_draft_form() {
        let sent = StreamCreate {
            stream_id: "s1".into(),
            resume_token: Some("secret".into()),
            request_id: Some(RequestId::Number(7)),
            resume_interval: ResumeInterval {
                min: Some(1),
                max: Some(300),
            },
        };
        assert_eq!(StreamCreate::from_params(&sent.to_params()), Ok(sent));
        let draft = json!({ "stream": {
            "streamId": "550e8400",
            "resumeInterval": { "min": 5, "max": 3600 },
        }});
        let read = StreamCreate::from_params(&draft).unwrap();
        assert_eq!(read.stream_id, "550e8400");
        assert_eq!(read.resume_token, None);
        assert_eq!(read.resume_interval.max, Some(3600));
        // `max` may be omitted: the stream is never abandoned.
        let open = StreamCreate::from_params(&json!({ "streamId": "x" })).unwrap();
        assert_eq!(open.resume_interval, ResumeInterval::default());
        assert!(StreamCreate::from_params(&json!({ "stream": {} })).is_err());
        assert!(StreamCreate::from_params(
            &json!({ "streamId": "x", "resumeInterval": { "min": "soon" } })
        )
        .is_err());
    }

    #[test]
    fn tokens_are_redacted_and_nothing_else_changes() {
        let create = StreamCreate {
            stream_id: "s".into(),
            resume_token: Some("secret-token".into()),
            request_id: None,
            resume_interval: ResumeInterval::default(),
        };
        let text =
            json!({ "jsonrpc": "2.0", "method": CREATE, "params": create.to_params() }).to_string();
        let redacted = redact_tokens(&text).unwrap();
        assert!(!redacted.contains("secret-token"), "{redacted}");
        assert!(redacted.contains(REDACTED) && redacted.contains("\"streamId\":\"s\""));
        assert_eq!(redact_tokens(&redacted), None, "already redacted");
        assert_eq!(redact_tokens(r#"{"jsonrpc":"2.0","method":"x"}"#), None);
        assert_eq!(redact_tokens("not json resumeToken"), None);
        // The draft's nested form too.
        let nested = r#"{"jsonrpc":"2.0","method":"x","params":{"stream":{"streamId":"s","resumeToken":"secret-token"}}}"#;
        assert!(!redact_tokens(nested).unwrap().contains("secret-token"));
    }

    #[test]
    fn resume_and_poll_params_round_trip_and_bad_ones_are_errors() {
        let r = StreamRef {
            stream_id: "s".into(),
            resume_token: Some("t".into()),
            last_sequence: Some(41),
        };
        assert_eq!(StreamRef::from_params(&r.to_params()), Ok(r));
        assert!(StreamRef::from_params(&json!({ "lastSequence": 1 })).is_err());
        assert!(StreamRef::from_params(&json!({ "streamId": "s", "lastSequence": -1 })).is_err());
        let p = PollResult {
            stream_id: "s".into(),
            status: StreamStatus::Completed,
            pending_messages: true,
            has_request: false,
            has_error: true,
        };
        assert_eq!(PollResult::from_value(&p.to_value()), Ok(p));
        assert!(
            PollResult::from_value(&json!({ "streamId": "s", "status": "abandoned" })).is_err()
        );
    }
}
