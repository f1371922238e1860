//! CEP-41 frames: `start`, `accept`, `chunk`, `ping`, `pong`, `close`, `abort`, carried in the
//! `cvm` object of an MCP `notifications/progress` with `cvm.type = "open-stream"`.

use crate::protocol::cvm::{self, opt_str_field, str_field, u64_field, FrameError};
use crate::protocol::jsonrpc::{Message, ProgressParams, ProgressToken};
use serde_json::{Map, Number, Value};

/// The `cvm.type` of every CEP-41 frame.
pub const CVM_TYPE: &str = "open-stream";

/// What a CEP-41 frame says, beyond its token and progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamBody {
    /// Begins a stream.
    Start {
        /// Optional `contentType`.
        content_type: Option<String>,
        /// Other advisory `cvm` fields, kept in order; never needed for correctness.
        metadata: Map<String, Value>,
    },
    /// The receiver lets the writer begin chunks.
    Accept,
    /// One ordered fragment of the stream.
    Chunk {
        /// Contiguous index from 0.
        chunk_index: u64,
        /// The fragment.
        data: String,
    },
    /// A liveness probe.
    Ping {
        /// Identifies the probe within the stream.
        nonce: String,
    },
    /// The answer to a ping.
    Pong {
        /// The nonce of the ping answered.
        nonce: String,
    },
    /// Successful sender-side closure.
    Close {
        /// The greatest `chunkIndex` sent, when the stream declares a completeness bound.
        last_chunk_index: Option<u64>,
    },
    /// The stream did not complete.
    Abort {
        /// Advisory reason.
        reason: Option<String>,
    },
}

impl StreamBody {
    /// The `frameType` on the wire.
    pub fn frame_type(&self) -> &'static str {
        match self {
            StreamBody::Start { .. } => "start",
            StreamBody::Accept => "accept",
            StreamBody::Chunk { .. } => "chunk",
            StreamBody::Ping { .. } => "ping",
            StreamBody::Pong { .. } => "pong",
            StreamBody::Close { .. } => "close",
            StreamBody::Abort { .. } => "abort",
        }
    }
}

/// One CEP-41 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFrame {
    /// The stream's progress token.
    pub token: ProgressToken,
    /// MCP `progress`: orders all frames of the stream.
    pub progress: u64,
    /// Optional human-readable `message` (advisory only).
    pub message: Option<String>,
    /// The frame itself.
    pub body: StreamBody,
}

impl StreamFrame {
    /// Reads a frame from progress params; [`FrameError::NotThisProfile`] when `cvm.type` is
    /// not `open-stream`.
    pub fn from_params(params: &ProgressParams) -> Result<Self, FrameError> {
        let cvm::FrameHeader {
            cvm,
            progress,
            frame_type,
        } = cvm::header(params, CVM_TYPE)?;
        let body = match frame_type {
            "start" => {
                let mut metadata = cvm.clone();
                for known in ["type", "frameType", "contentType"] {
                    metadata.shift_remove(known);
                }
                StreamBody::Start {
                    content_type: opt_str_field(cvm, "contentType")?,
                    metadata,
                }
            }
            "accept" => StreamBody::Accept,
            "chunk" => StreamBody::Chunk {
                chunk_index: u64_field(cvm, "chunkIndex")?,
                data: str_field(cvm, "data")?,
            },
            "ping" => StreamBody::Ping {
                nonce: str_field(cvm, "nonce")?,
            },
            "pong" => StreamBody::Pong {
                nonce: str_field(cvm, "nonce")?,
            },
            "close" => StreamBody::Close {
                last_chunk_index: match cvm.get("lastChunkIndex") {
                    None | Some(Value::Null) => None,
                    Some(_) => Some(u64_field(cvm, "lastChunkIndex")?),
                },
            },
            "abort" => StreamBody::Abort {
                reason: opt_str_field(cvm, "reason")?,
            },
            other => return Err(FrameError::UnknownFrameType(other.to_owned())),
        };
        Ok(StreamFrame {
            token: params.progress_token.clone(),
            progress,
            message: params.message.clone(),
            body,
        })
    }

    /// Whether the frame's numbers are within [`cvm::MAX_SAFE_INTEGER`] (frames built in code
    /// rather than parsed may not be; engines ignore those).
    pub fn in_range(&self) -> bool {
        let max = cvm::MAX_SAFE_INTEGER;
        self.progress <= max
            && match &self.body {
                StreamBody::Chunk { chunk_index, .. } => *chunk_index <= max,
                StreamBody::Close {
                    last_chunk_index: Some(last),
                } => *last <= max,
                _ => true,
            }
    }

    /// Reads a frame from a JSON-RPC message.
    pub fn from_message(message: &Message) -> Result<Self, FrameError> {
        Self::from_params(&cvm::progress_params(message)?)
    }

    /// The frame as MCP progress params.
    pub fn to_params(&self) -> ProgressParams {
        let mut cvm = cvm::new_cvm(CVM_TYPE, self.body.frame_type());
        match &self.body {
            StreamBody::Start {
                content_type,
                metadata,
            } => {
                if let Some(ct) = content_type {
                    cvm.insert("contentType".into(), Value::from(ct.as_str()));
                }
                for (k, v) in metadata {
                    cvm.insert(k.clone(), v.clone());
                }
            }
            StreamBody::Chunk { chunk_index, data } => {
                cvm.insert("chunkIndex".into(), Value::from(*chunk_index));
                cvm.insert("data".into(), Value::from(data.as_str()));
            }
            StreamBody::Ping { nonce } | StreamBody::Pong { nonce } => {
                cvm.insert("nonce".into(), Value::from(nonce.as_str()));
            }
            StreamBody::Close {
                last_chunk_index: Some(last),
            } => {
                cvm.insert("lastChunkIndex".into(), Value::from(*last));
            }
            StreamBody::Abort { reason: Some(r) } => {
                cvm.insert("reason".into(), Value::from(r.as_str()));
            }
            StreamBody::Accept
            | StreamBody::Close {
                last_chunk_index: None,
            }
            | StreamBody::Abort { reason: None } => {}
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

    /// The compact JSON-RPC text of the frame.
    pub fn to_json(&self) -> String {
        self.to_message().to_json()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::cvm::field_error;
    use crate::protocol::jsonrpc::RequestId;

    #[test]
    fn every_frame_type_round_trips_through_json() {
        let mut metadata = Map::new();
        metadata.insert("model".into(), Value::from("x"));
        let bodies = [
            StreamBody::Start {
                content_type: Some("text/plain".into()),
                metadata,
            },
            StreamBody::Start {
                content_type: None,
                metadata: Map::new(),
            },
            StreamBody::Accept,
            StreamBody::Chunk {
                chunk_index: 3,
                data: "Hello \"w\" é".into(),
            },
            StreamBody::Ping { nonce: "n1".into() },
            StreamBody::Pong { nonce: "n1".into() },
            StreamBody::Close {
                last_chunk_index: Some(9),
            },
            StreamBody::Close {
                last_chunk_index: None,
            },
            StreamBody::Abort {
                reason: Some("upstream failed".into()),
            },
            StreamBody::Abort { reason: None },
        ];
        for body in bodies {
            let f = StreamFrame {
                token: RequestId::String("req-123".into()),
                progress: 4,
                message: None,
                body,
            };
            let text = f.to_json();
            let back = StreamFrame::from_message(&Message::parse(&text).unwrap()).unwrap();
            assert_eq!(back, f);
            assert_eq!(back.to_json(), text);
        }
    }

    #[test]
    fn spec_example_chunk_parses() {
        let text = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"req-123","progress":2,"cvm":{"type":"open-stream","frameType":"chunk","chunkIndex":0,"data":"Hello"}}}"#;
        let f = StreamFrame::from_message(&Message::parse(text).unwrap()).unwrap();
        assert_eq!(
            f.body,
            StreamBody::Chunk {
                chunk_index: 0,
                data: "Hello".into()
            }
        );
        assert_eq!(f.to_json(), text);
    }

    #[test]
    fn malformed_frames_are_typed_errors() {
        let parse = |cvm: Value| {
            let p = ProgressParams::from_value(
                &serde_json::json!({"progressToken": "t", "progress": 1, "cvm": cvm}),
            )
            .unwrap();
            StreamFrame::from_params(&p)
        };
        assert_eq!(
            parse(serde_json::json!({"type": "oversized-transfer", "frameType": "chunk"})),
            Err(FrameError::NotThisProfile)
        );
        assert_eq!(
            parse(serde_json::json!({"type": "open-stream", "frameType": "end"})),
            Err(FrameError::UnknownFrameType("end".into()))
        );
        assert_eq!(
            parse(serde_json::json!({"type": "open-stream", "frameType": "chunk", "data": "x"})),
            Err(field_error("chunkIndex", "a non-negative integer"))
        );
        assert_eq!(
            parse(serde_json::json!({"type": "open-stream", "frameType": "ping"})),
            Err(field_error("nonce", "a string"))
        );
        assert_eq!(
            parse(
                serde_json::json!({"type": "open-stream", "frameType": "close", "lastChunkIndex": "x"})
            ),
            Err(field_error("lastChunkIndex", "a non-negative integer"))
        );
        assert_eq!(
            parse(serde_json::json!({"type": "open-stream"})),
            Err(field_error("frameType", "a string"))
        );
    }
}
