//! CEP-22 frames: `start`, `accept`, `chunk`, `end`, `abort`, carried in the `cvm` object of an
//! MCP `notifications/progress` with `cvm.type = "oversized-transfer"`.

use crate::protocol::cvm::{self, field_error, opt_str_field, str_field, u64_field, FrameError};
use crate::protocol::jsonrpc::{Message, ProgressParams, ProgressToken};
use serde_json::{Map, Number, Value};

/// The `cvm.type` of every CEP-22 frame.
pub const CVM_TYPE: &str = "oversized-transfer";
/// The only completion mode this CEP version defines.
pub const COMPLETION_MODE_RENDER: &str = "render";

/// A SHA-256 digest, written on the wire as `sha256:` and 64 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The digest of `text`'s UTF-8 bytes.
    pub fn of(text: &str) -> Self {
        use sha2::Digest as _;
        Digest(sha2::Sha256::digest(text.as_bytes()).into())
    }

    /// The digest of the text made of `parts` one after the other (a segmented text's).
    pub fn of_parts<'a>(parts: impl IntoIterator<Item = &'a str>) -> Self {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        parts.into_iter().for_each(|p| hasher.update(p.as_bytes()));
        Digest(hasher.finalize().into())
    }

    /// The wire form, `sha256:<lowercase hex>`.
    pub fn to_wire(&self) -> String {
        format!("sha256:{}", hex::encode(self.0))
    }

    /// Parses the wire form; hex digits may be of either case.
    pub fn parse(wire: &str) -> Option<Self> {
        let hex_part = wire.strip_prefix("sha256:")?;
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).ok()?;
        Some(Digest(out))
    }
}

/// What a CEP-22 frame says, beyond its token and progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferBody {
    /// Begins a transfer.
    Start {
        /// `completionMode`; only `render` is supported. `None` when the sender omitted it.
        completion_mode: Option<String>,
        /// SHA-256 of the exact serialized message.
        digest: Digest,
        /// UTF-8 byte length of the serialized message.
        total_bytes: u64,
        /// Number of chunk frames before `end`.
        total_chunks: u64,
    },
    /// The receiver lets the sender begin chunks.
    Accept,
    /// One ordered fragment of the serialized message.
    Chunk {
        /// The fragment.
        data: String,
    },
    /// Sender-side completion.
    End,
    /// The transfer did not complete.
    Abort {
        /// Advisory reason.
        reason: Option<String>,
    },
}

impl TransferBody {
    /// The `frameType` on the wire.
    pub fn frame_type(&self) -> &'static str {
        match self {
            TransferBody::Start { .. } => "start",
            TransferBody::Accept => "accept",
            TransferBody::Chunk { .. } => "chunk",
            TransferBody::End => "end",
            TransferBody::Abort { .. } => "abort",
        }
    }
}

/// One CEP-22 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferFrame {
    /// The transfer's progress token.
    pub token: ProgressToken,
    /// MCP `progress`: the normative ordering field.
    pub progress: u64,
    /// Optional human-readable `message` (advisory only).
    pub message: Option<String>,
    /// The frame itself.
    pub body: TransferBody,
}

impl TransferFrame {
    /// Reads a frame from progress params. [`FrameError::NotThisProfile`] when `cvm.type` is not
    /// `oversized-transfer`, so callers can try the other profiles.
    pub fn from_params(params: &ProgressParams) -> Result<Self, FrameError> {
        let cvm::FrameHeader {
            cvm,
            progress,
            frame_type,
        } = cvm::header(params, CVM_TYPE)?;
        let body = match frame_type {
            "start" => TransferBody::Start {
                completion_mode: opt_str_field(cvm, "completionMode")?,
                digest: cvm
                    .get("digest")
                    .and_then(Value::as_str)
                    .and_then(Digest::parse)
                    .ok_or(field_error("digest", "\"sha256:\" and 64 hex digits"))?,
                total_bytes: u64_field(cvm, "totalBytes")?,
                total_chunks: u64_field(cvm, "totalChunks")?,
            },
            "accept" => TransferBody::Accept,
            "chunk" => TransferBody::Chunk {
                data: str_field(cvm, "data")?,
            },
            "end" => TransferBody::End,
            "abort" => TransferBody::Abort {
                reason: opt_str_field(cvm, "reason")?,
            },
            other => return Err(FrameError::UnknownFrameType(other.to_owned())),
        };
        Ok(TransferFrame {
            token: params.progress_token.clone(),
            progress,
            message: params.message.clone(),
            body,
        })
    }

    /// Whether the frame's numbers are within [`cvm::MAX_SAFE_INTEGER`] (frames built in code
    /// rather than parsed may not be; engines ignore those).
    pub fn in_range(&self) -> bool {
        self.progress <= cvm::MAX_SAFE_INTEGER
    }

    /// Reads a frame from a JSON-RPC message.
    pub fn from_message(message: &Message) -> Result<Self, FrameError> {
        let params = message
            .progress_params()
            .ok_or(FrameError::NotThisProfile)??;
        Self::from_params(&params)
    }

    /// The frame as MCP progress params.
    pub fn to_params(&self) -> ProgressParams {
        let mut cvm = cvm::new_cvm(CVM_TYPE, self.body.frame_type());
        match &self.body {
            TransferBody::Start {
                completion_mode,
                digest,
                total_bytes,
                total_chunks,
            } => {
                if let Some(mode) = completion_mode {
                    cvm.insert("completionMode".into(), Value::from(mode.as_str()));
                }
                cvm.insert("digest".into(), Value::from(digest.to_wire()));
                cvm.insert("totalBytes".into(), Value::from(*total_bytes));
                cvm.insert("totalChunks".into(), Value::from(*total_chunks));
            }
            TransferBody::Chunk { data } => {
                cvm.insert("data".into(), Value::from(data.as_str()));
            }
            TransferBody::Abort { reason: Some(r) } => {
                cvm.insert("reason".into(), Value::from(r.as_str()));
            }
            TransferBody::Accept | TransferBody::End | TransferBody::Abort { reason: None } => {}
        }
        ProgressParams {
            progress_token: self.token.clone(),
            progress: Number::from(self.progress),
            total: None,
            message: self.message.clone(),
            cvm: Some(cvm),
            rest: Map::new(),
        }
    }

    /// The frame as a `notifications/progress` message.
    pub fn to_message(&self) -> Message {
        self.to_params().into_message()
    }

    /// The compact JSON-RPC text of the frame: what an event's `content` holds.
    pub fn to_json(&self) -> String {
        self.to_message().to_json()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::RequestId;

    fn frame(body: TransferBody) -> TransferFrame {
        TransferFrame {
            token: RequestId::String("req-123".into()),
            progress: 2,
            message: None,
            body,
        }
    }

    #[test]
    fn every_frame_type_round_trips_through_json() {
        let bodies = [
            TransferBody::Start {
                completion_mode: Some("render".into()),
                digest: Digest::of("x"),
                total_bytes: 49,
                total_chunks: 2,
            },
            TransferBody::Accept,
            TransferBody::Chunk {
                data: "{\"jsonrpc\":\"2.0\",é".into(),
            },
            TransferBody::End,
            TransferBody::Abort {
                reason: Some("too big".into()),
            },
            TransferBody::Abort { reason: None },
        ];
        for body in bodies {
            let f = frame(body);
            let text = f.to_json();
            let back = TransferFrame::from_message(&Message::parse(&text).unwrap()).unwrap();
            assert_eq!(back, f);
            assert_eq!(back.to_json(), text);
        }
    }

    #[test]
    fn spec_example_start_frame_parses() {
        let digest = format!(
            "sha256:{}",
            "8d969eef6ecad3c29a3a629280e686cff8fabcd1".repeat(2)[..64].to_owned()
        );
        let text = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"req-123","progress":1,"message":"starting oversized response","cvm":{{"type":"oversized-transfer","frameType":"start","completionMode":"render","digest":"{digest}","totalBytes":49,"totalChunks":2}}}}}}"#
        );
        let f = TransferFrame::from_message(&Message::parse(&text).unwrap()).unwrap();
        assert_eq!(f.progress, 1);
        assert!(matches!(
            f.body,
            TransferBody::Start {
                total_bytes: 49,
                total_chunks: 2,
                ..
            }
        ));
        assert_eq!(f.to_json(), text);
    }

    #[test]
    fn malformed_frames_are_typed_errors() {
        let parse = |cvm: Value| {
            let p = ProgressParams::from_value(&serde_json::json!({
                "progressToken": "t", "progress": 1, "cvm": cvm
            }))
            .unwrap();
            TransferFrame::from_params(&p)
        };
        assert_eq!(
            parse(serde_json::json!({"type": "open-stream", "frameType": "start"})),
            Err(FrameError::NotThisProfile)
        );
        assert_eq!(
            parse(serde_json::json!({"type": "oversized-transfer", "frameType": "resume"})),
            Err(FrameError::UnknownFrameType("resume".into()))
        );
        assert_eq!(
            parse(serde_json::json!({"type": "oversized-transfer", "frameType": "chunk"})),
            Err(field_error("data", "a string"))
        );
        assert_eq!(
            parse(
                serde_json::json!({"type": "oversized-transfer", "frameType": "start",
                "digest": "md5:00", "totalBytes": 1, "totalChunks": 1})
            ),
            Err(field_error("digest", "\"sha256:\" and 64 hex digits"))
        );
        assert_eq!(
            parse(
                serde_json::json!({"type": "oversized-transfer", "frameType": "start",
                "digest": Digest::of("").to_wire(), "totalBytes": -1, "totalChunks": 1})
            ),
            Err(field_error("totalBytes", "a non-negative integer"))
        );
    }
}
