//! The ContextVM `cvm` object inside `notifications/progress`: what CEP-22 and CEP-41 frames
//! have in common (the `type`/`frameType` header and typed field errors).

use crate::protocol::jsonrpc::{JsonRpcError, Message, ProgressParams};
use serde_json::{Map, Value};

/// Why a progress notification is not a valid frame of a given profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The JSON-RPC layer is malformed.
    #[error(transparent)]
    JsonRpc(#[from] JsonRpcError),
    /// Not a progress notification, or `cvm.type` is absent or another profile's.
    #[error("not a frame of this profile")]
    NotThisProfile,
    /// `cvm.frameType` is not one the profile defines.
    #[error("unknown frameType {0:?}")]
    UnknownFrameType(String),
    /// A field is missing or has the wrong type.
    #[error("cvm.{field}: {expected}")]
    BadField {
        /// Field name inside `cvm`.
        field: &'static str,
        /// What was expected.
        expected: &'static str,
    },
}

/// The largest integer a frame may carry in `progress`, `chunkIndex` or `lastChunkIndex`:
/// 2^53 - 1, the largest integer a JavaScript peer represents exactly. Bounding them also lets
/// every engine add small offsets without overflow.
pub(crate) const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Shorthand for [`FrameError::BadField`].
pub(crate) fn field_error(field: &'static str, expected: &'static str) -> FrameError {
    FrameError::BadField { field, expected }
}

/// The parts of a frame every profile reads first.
pub(crate) struct FrameHeader<'a> {
    /// The `cvm` object.
    pub cvm: &'a Map<String, Value>,
    /// The integer `progress`.
    pub progress: u64,
    /// `cvm.frameType`.
    pub frame_type: &'a str,
}

/// Reads the header of a frame of profile `cvm_type`, or [`FrameError::NotThisProfile`].
pub(crate) fn header<'a>(
    params: &'a ProgressParams,
    cvm_type: &str,
) -> Result<FrameHeader<'a>, FrameError> {
    let cvm = params.cvm.as_ref().ok_or(FrameError::NotThisProfile)?;
    if cvm.get("type").and_then(Value::as_str) != Some(cvm_type) {
        return Err(FrameError::NotThisProfile);
    }
    let progress = params.integer_progress()?;
    if progress > MAX_SAFE_INTEGER {
        return Err(FrameError::JsonRpc(
            crate::protocol::jsonrpc::JsonRpcError::BadField {
                field: "params.progress",
                expected: "an integer no larger than 2^53 - 1",
            },
        ));
    }
    let frame_type = cvm
        .get("frameType")
        .and_then(Value::as_str)
        .ok_or(field_error("frameType", "a string"))?;
    Ok(FrameHeader {
        cvm,
        progress,
        frame_type,
    })
}

/// The progress params of a `notifications/progress`, or [`FrameError::NotThisProfile`].
pub(crate) fn progress_params(message: &Message) -> Result<ProgressParams, FrameError> {
    Ok(message
        .progress_params()
        .ok_or(FrameError::NotThisProfile)??)
}

/// A required non-negative integer field.
pub(crate) fn u64_field(cvm: &Map<String, Value>, name: &'static str) -> Result<u64, FrameError> {
    cvm.get(name)
        .and_then(Value::as_u64)
        .filter(|n| *n <= MAX_SAFE_INTEGER)
        .ok_or(field_error(name, "a non-negative integer"))
}

/// A required string field.
pub(crate) fn str_field(
    cvm: &Map<String, Value>,
    name: &'static str,
) -> Result<String, FrameError> {
    cvm.get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or(field_error(name, "a string"))
}

/// An optional string field (`null` counts as absent).
pub(crate) fn opt_str_field(
    cvm: &Map<String, Value>,
    name: &'static str,
) -> Result<Option<String>, FrameError> {
    match cvm.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(field_error(name, "a string")),
    }
}

/// A `cvm` object with the header fields set.
pub(crate) fn new_cvm(cvm_type: &str, frame_type: &str) -> Map<String, Value> {
    let mut cvm = Map::new();
    cvm.insert("type".into(), Value::from(cvm_type));
    cvm.insert("frameType".into(), Value::from(frame_type));
    cvm
}
