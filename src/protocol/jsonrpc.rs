//! MCP JSON-RPC 2.0 messages, as ContextVM carries them in event `content`.
//!
//! Messages keep their parameters as [`serde_json::Value`] with insertion order preserved
//! (`serde_json`'s `preserve_order` feature), so a compact message parses and serializes back to
//! the same text. MCP `notifications/progress` parameters have a typed view,
//! [`ProgressParams`], which keeps the ContextVM `cvm` extension object and any other field it
//! does not know, so nothing is lost on the way through.
//!
//! Serialization order is fixed: `jsonrpc`, `id`, `method`, `params` / `result` / `error`, and
//! inside progress params `progressToken`, `progress`, `total`, `message`, `cvm`, then the rest.

use serde_json::{Map, Number, Value};
use std::fmt;

/// The `notifications/progress` method name.
pub const PROGRESS_METHOD: &str = "notifications/progress";

/// Why a text is not a JSON-RPC message we can carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonRpcError {
    /// The text is not JSON at all.
    #[error("not JSON: {0}")]
    Syntax(String),
    /// The JSON is not an object.
    #[error("a JSON-RPC message must be a JSON object")]
    NotAnObject,
    /// `jsonrpc` is missing or not `"2.0"`.
    #[error("`jsonrpc` must be \"2.0\"")]
    BadVersion,
    /// A field has the wrong JSON type or value.
    #[error("field `{field}`: {expected}")]
    BadField {
        /// The field's name (dotted for nested fields).
        field: &'static str,
        /// What was expected there.
        expected: &'static str,
    },
    /// The object matches no JSON-RPC message shape.
    #[error("not a request, notification, response or error: {0}")]
    UnknownShape(&'static str),
}

fn bad(field: &'static str, expected: &'static str) -> JsonRpcError {
    JsonRpcError::BadField { field, expected }
}

/// A JSON-RPC request id: a string or an integer (fractional ids are refused).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestId {
    /// A numeric id.
    Number(i64),
    /// A string id.
    String(String),
}

impl RequestId {
    /// The id as a number, when it is one.
    pub fn as_number(&self) -> Option<u64> {
        match self {
            RequestId::Number(n) => u64::try_from(*n).ok(),
            RequestId::String(_) => None,
        }
    }

    /// The id as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Number(n) => Value::from(*n),
            RequestId::String(s) => Value::from(s.as_str()),
        }
    }

    fn from_value(value: &Value, field: &'static str) -> Result<Self, JsonRpcError> {
        match value {
            Value::String(s) => Ok(RequestId::String(s.clone())),
            Value::Number(n) => n
                .as_i64()
                .map(RequestId::Number)
                .ok_or(bad(field, "an integer or a string")),
            _ => Err(bad(field, "an integer or a string")),
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// An MCP progress token: a string or an integer. It names a CEP-22 transfer or a CEP-41 stream.
pub type ProgressToken = RequestId;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Optional structured detail.
    pub data: Option<Value>,
}

/// One JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request, which expects a response with the same id.
    Request {
        /// The request id.
        id: RequestId,
        /// The method name.
        method: String,
        /// Parameters, if any.
        params: Option<Value>,
    },
    /// A notification: no id, no response.
    Notification {
        /// The method name.
        method: String,
        /// Parameters, if any.
        params: Option<Value>,
    },
    /// A successful response.
    Response {
        /// The id of the request answered.
        id: RequestId,
        /// The result.
        result: Value,
    },
    /// An error response; `id` is `None` (JSON `null`) when the request id could not be read.
    Error {
        /// The id of the request answered.
        id: Option<RequestId>,
        /// The error.
        error: ErrorObject,
    },
}

impl Message {
    /// Parses a JSON-RPC message from its text.
    pub fn parse(text: &str) -> Result<Self, JsonRpcError> {
        let value = crate::nip01::json_read::parse(text)
            .map_err(|e| JsonRpcError::Syntax(e.to_string()))?;
        Self::from_value(value)
    }

    /// As [`Message::parse`], consuming `text`: a long string in it becomes the message's
    /// without being copied (`json_read::parse_owned`), so a very large message is not held
    /// twice while it is read.
    pub fn parse_owned(text: String) -> Result<Self, JsonRpcError> {
        let value = crate::nip01::json_read::parse_owned(text)
            .map_err(|e| JsonRpcError::Syntax(e.to_string()))?;
        Self::from_value(value)
    }

    /// Puts a long string read apart (`nip01::json_segmented`) back where it holds its place,
    /// whole.
    pub fn put_back(&mut self, long: crate::segmented::Segmented) {
        use crate::nip01::json_segmented::put_back;
        match self {
            Message::Request { params, .. } | Message::Notification { params, .. } => {
                if let Some(params) = params {
                    put_back(params, long);
                }
            }
            Message::Response { result, .. } => put_back(result, long),
            Message::Error { error, .. } => {
                if let Some(data) = &mut error.data {
                    put_back(data, long);
                }
            }
        }
    }

    /// Reads a JSON-RPC message from a parsed JSON value.
    pub fn from_value(value: Value) -> Result<Self, JsonRpcError> {
        let Value::Object(obj) = value else {
            return Err(JsonRpcError::NotAnObject);
        };
        // One pass over the fields (removing them one by one hashed and moved the map each
        // time); the checks below keep their order, so errors are the same.
        let (mut version, mut params, mut method, mut id, mut result, mut error) =
            (None, None, None, None, None, None);
        for (key, value) in obj {
            let slot = match key.as_str() {
                "jsonrpc" => &mut version,
                "params" => &mut params,
                "method" => &mut method,
                "id" => &mut id,
                "result" => &mut result,
                "error" => &mut error,
                _ => continue,
            };
            *slot = Some(value);
        }
        if version.as_ref().and_then(Value::as_str) != Some("2.0") {
            return Err(JsonRpcError::BadVersion);
        }
        let params = match params {
            None => None,
            Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
            Some(_) => return Err(bad("params", "an object or an array")),
        };
        if let Some(method) = method {
            let Value::String(method) = method else {
                return Err(bad("method", "a string"));
            };
            return match id {
                None => Ok(Message::Notification { method, params }),
                Some(id) => Ok(Message::Request {
                    id: RequestId::from_value(&id, "id")?,
                    method,
                    params,
                }),
            };
        }
        let id = id.ok_or(JsonRpcError::UnknownShape("no `method` and no `id`"))?;
        let id = &id;
        match (result, error) {
            (Some(result), None) => Ok(Message::Response {
                id: RequestId::from_value(id, "id")?,
                result,
            }),
            (None, Some(error)) => {
                let id = match id {
                    Value::Null => None,
                    other => Some(RequestId::from_value(other, "id")?),
                };
                Ok(Message::Error {
                    id,
                    error: parse_error_object(error)?,
                })
            }
            (Some(_), Some(_)) => Err(JsonRpcError::UnknownShape("both `result` and `error`")),
            (None, None) => Err(JsonRpcError::UnknownShape(
                "a response needs `result` or `error`",
            )),
        }
    }

    /// The message as a JSON value, fields in canonical order.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), Value::from("2.0"));
        match self {
            Message::Request { id, method, params } => {
                obj.insert("id".into(), id.to_value());
                obj.insert("method".into(), Value::from(method.as_str()));
                if let Some(p) = params {
                    obj.insert("params".into(), p.clone());
                }
            }
            Message::Notification { method, params } => {
                obj.insert("method".into(), Value::from(method.as_str()));
                if let Some(p) = params {
                    obj.insert("params".into(), p.clone());
                }
            }
            Message::Response { id, result } => {
                obj.insert("id".into(), id.to_value());
                obj.insert("result".into(), result.clone());
            }
            Message::Error { id, error } => {
                obj.insert(
                    "id".into(),
                    id.as_ref().map_or(Value::Null, RequestId::to_value),
                );
                let mut e = Map::new();
                e.insert("code".into(), Value::from(error.code));
                e.insert("message".into(), Value::from(error.message.as_str()));
                if let Some(d) = &error.data {
                    e.insert("data".into(), d.clone());
                }
                obj.insert("error".into(), Value::Object(e));
            }
        }
        Value::Object(obj)
    }

    /// The compact serialized text: what goes into an event's `content`.
    ///
    /// The same bytes as `serde_json` writes for [`Message::to_value`], with its escaping
    /// replaced by a faster one (`nip01::json_text`): payloads are escaped once per layer of
    /// JSON they are in. Written straight from the message, not through `to_value`, which
    /// would copy a large result whole.
    pub fn to_json(&self) -> String {
        self.write_json(crate::nip01::json_text::write_value)
    }

    /// The message's text, its params, result or error data written by `write_body`.
    fn write_json(&self, write_body: impl FnOnce(&mut Vec<u8>, &Value)) -> String {
        use crate::nip01::json_text::{write_escaped, write_value};
        fn key(out: &mut Vec<u8>, name: &str) {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
        }
        let mut out = br#"{"jsonrpc":"2.0""#.to_vec();
        let mut body = Some(write_body);
        let mut call = |out: &mut Vec<u8>, method: &str, params: Option<&Value>| {
            key(out, "method");
            write_escaped(out, method);
            if let Some(p) = params {
                key(out, "params");
                body.take().expect("one body")(out, p);
            }
        };
        match self {
            Message::Request { id, method, params } => {
                key(&mut out, "id");
                write_value(&mut out, &id.to_value());
                call(&mut out, method, params.as_ref());
            }
            Message::Notification { method, params } => call(&mut out, method, params.as_ref()),
            Message::Response { id, result } => {
                key(&mut out, "id");
                write_value(&mut out, &id.to_value());
                key(&mut out, "result");
                body.take().expect("one body")(&mut out, result);
            }
            Message::Error { id, error } => {
                key(&mut out, "id");
                write_value(
                    &mut out,
                    &id.as_ref().map_or(Value::Null, RequestId::to_value),
                );
                out.extend_from_slice(br#","error":{"code":"#);
                write_value(&mut out, &Value::from(error.code));
                key(&mut out, "message");
                write_escaped(&mut out, &error.message);
                if let Some(d) = &error.data {
                    key(&mut out, "data");
                    body.take().expect("one body")(&mut out, d);
                }
                out.push(b'}');
            }
        }
        out.push(b'}');
        String::from_utf8(out).expect("JSON text of strings is UTF-8")
    }

    /// The method name of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            _ => None,
        }
    }

    /// The progress parameters, if this is a well-formed `notifications/progress`.
    ///
    /// `None` for any other message; an error if it is a progress notification whose
    /// parameters are malformed.
    pub fn progress_params(&self) -> Option<Result<ProgressParams, JsonRpcError>> {
        match self {
            Message::Notification { method, params } if method == PROGRESS_METHOD => {
                Some(match params {
                    Some(p) => ProgressParams::from_value(p),
                    None => Err(bad("params", "an object")),
                })
            }
            _ => None,
        }
    }

    /// As [`Message::progress_params`], taking the message apart instead of copying its
    /// params: what a peer does with a frame it has no other use for.
    pub fn into_progress_params(self) -> Option<Result<ProgressParams, JsonRpcError>> {
        match self {
            Message::Notification { method, params } if method == PROGRESS_METHOD => {
                Some(match params {
                    Some(p) => ProgressParams::from_owned(p),
                    None => Err(bad("params", "an object")),
                })
            }
            _ => None,
        }
    }
}

fn parse_error_object(value: Value) -> Result<ErrorObject, JsonRpcError> {
    let Value::Object(mut e) = value else {
        return Err(bad("error", "an object"));
    };
    let code = e
        .get("code")
        .and_then(Value::as_i64)
        .ok_or(bad("error.code", "an integer"))?;
    let message = match e.remove("message") {
        Some(Value::String(m)) => m,
        _ => return Err(bad("error.message", "a string")),
    };
    Ok(ErrorObject {
        code,
        message,
        data: e.remove("data"),
    })
}

/// The parameters of an MCP `notifications/progress`, with the ContextVM `cvm` extension.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressParams {
    /// The token of the request this progress belongs to.
    pub progress_token: ProgressToken,
    /// The progress value (a JSON number; CEP-22 and CEP-41 frames require an integer).
    pub progress: Number,
    /// Optional total.
    pub total: Option<Number>,
    /// Optional human-readable message.
    pub message: Option<String>,
    /// The ContextVM transport object (`cvm`), if present.
    pub cvm: Option<Map<String, Value>>,
    /// Any other fields, kept in their original order.
    pub rest: Map<String, Value>,
}

impl ProgressParams {
    /// Reads progress params from the `params` value of a notification.
    pub fn from_value(value: &Value) -> Result<Self, JsonRpcError> {
        match value {
            Value::Object(_) => Self::from_owned(value.clone()),
            _ => Err(bad("params", "an object")),
        }
    }

    /// As [`ProgressParams::from_value`], taking the value apart instead of copying it (a
    /// chunk's data is moved, not cloned).
    pub fn from_owned(value: Value) -> Result<Self, JsonRpcError> {
        let Value::Object(fields) = value else {
            return Err(bad("params", "an object"));
        };
        // One pass over the fields (removing five keys one by one shifted the map five
        // times); the checks below keep their order, so errors are the same.
        let (mut token, mut progress, mut total, mut message, mut cvm) =
            (None, None, None, None, None);
        let mut rest = Map::new();
        for (key, value) in fields {
            let slot = match key.as_str() {
                "progressToken" => &mut token,
                "progress" => &mut progress,
                "total" => &mut total,
                "message" => &mut message,
                "cvm" => &mut cvm,
                _ => {
                    rest.insert(key, value);
                    continue;
                }
            };
            *slot = Some(value);
        }
        let token = token.ok_or(bad("params.progressToken", "present"))?;
        let progress_token = RequestId::from_value(&token, "params.progressToken")?;
        let progress = match progress {
            Some(Value::Number(n)) => n,
            _ => return Err(bad("params.progress", "a number")),
        };
        let total = match total {
            None => None,
            Some(Value::Number(n)) => Some(n),
            Some(_) => return Err(bad("params.total", "a number")),
        };
        let message = match message {
            None => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(bad("params.message", "a string")),
        };
        let cvm = match cvm {
            None => None,
            Some(Value::Object(o)) => Some(o),
            Some(_) => return Err(bad("params.cvm", "an object")),
        };
        Ok(ProgressParams {
            progress_token,
            progress,
            total,
            message,
            cvm,
            rest,
        })
    }

    /// The params as a JSON value, fields in canonical order.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("progressToken".into(), self.progress_token.to_value());
        obj.insert("progress".into(), Value::Number(self.progress.clone()));
        if let Some(t) = &self.total {
            obj.insert("total".into(), Value::Number(t.clone()));
        }
        if let Some(m) = &self.message {
            obj.insert("message".into(), Value::from(m.as_str()));
        }
        if let Some(c) = &self.cvm {
            obj.insert("cvm".into(), Value::Object(c.clone()));
        }
        for (k, v) in &self.rest {
            obj.insert(k.clone(), v.clone());
        }
        Value::Object(obj)
    }

    /// The `progress` value as an integer, as CEP-22 and CEP-41 frames require.
    pub fn integer_progress(&self) -> Result<u64, JsonRpcError> {
        self.progress
            .as_u64()
            .ok_or(bad("params.progress", "a non-negative integer"))
    }

    /// Wraps these params in a `notifications/progress` message.
    pub fn into_message(self) -> Message {
        Message::Notification {
            method: PROGRESS_METHOD.into(),
            params: Some(self.to_value()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_message() -> impl Strategy<Value = Message> {
        let value = || {
            prop_oneof![
                Just(Value::Null),
                any::<i64>().prop_map(Value::from),
                "[a-z\"\\\\\u{0}-\u{1f}é]{0,12}".prop_map(Value::from),
                prop::collection::btree_map("[a-z\"]{0,4}", any::<u32>(), 0..3).prop_map(|m| {
                    Value::Object(m.into_iter().map(|(k, v)| (k, v.into())).collect())
                }),
            ]
        };
        let id = prop_oneof![
            any::<i64>().prop_map(RequestId::Number),
            "[a-z\"]{0,6}".prop_map(RequestId::String),
        ];
        let method = "[a-z/\"\\\\]{0,10}";
        prop_oneof![
            (id.clone(), method, prop::option::of(value()))
                .prop_map(|(id, method, params)| Message::Request { id, method, params }),
            (method, prop::option::of(value()))
                .prop_map(|(method, params)| Message::Notification { method, params }),
            (id.clone(), value()).prop_map(|(id, result)| Message::Response { id, result }),
            (
                prop::option::of(id),
                any::<i64>(),
                "[a-z\"]{0,8}",
                prop::option::of(value())
            )
                .prop_map(|(id, code, message, data)| Message::Error {
                    id,
                    error: ErrorObject {
                        code,
                        message,
                        data
                    },
                }),
        ]
    }

    proptest! {
        #[test]
        fn to_json_writes_what_serde_json_writes_for_to_value(message in any_message()) {
            prop_assert_eq!(message.to_json(), serde_json::to_string(&message.to_value()).unwrap());
        }

    }

    fn roundtrip(text: &str) {
        let msg = Message::parse(text).unwrap();
        assert_eq!(msg.to_json(), text);
        assert_eq!(Message::parse(&msg.to_json()).unwrap(), msg);
    }

    #[test]
    fn request_response_error_notification_round_trip_exactly() {
        roundtrip(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"large_tool","arguments":{},"_meta":{"progressToken":"req-123"}}}"#,
        );
        roundtrip(
            r#"{"jsonrpc":"2.0","id":"abc","result":{"content":[{"type":"text","text":"é \"q\""}],"isError":false}}"#,
        );
        roundtrip(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#);
        roundtrip(
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"x","data":{"a":[1,2]}}}"#,
        );
        roundtrip(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    #[test]
    fn progress_params_keep_cvm_and_unknown_fields() {
        let text = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"req-123","progress":1,"total":4,"message":"starting","cvm":{"type":"oversized-transfer","frameType":"start"},"_meta":{"x":1}}}"#;
        let msg = Message::parse(text).unwrap();
        let p = msg.progress_params().unwrap().unwrap();
        assert_eq!(p.progress_token, RequestId::String("req-123".into()));
        assert_eq!(p.integer_progress().unwrap(), 1);
        assert_eq!(p.message.as_deref(), Some("starting"));
        assert_eq!(p.cvm.as_ref().unwrap()["frameType"], "start");
        assert_eq!(p.rest["_meta"]["x"], 1);
        assert_eq!(p.clone().into_message().to_json(), text);
    }

    #[test]
    fn several_unknown_fields_keep_their_order() {
        let text = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"a":1,"b":2,"c":3}}"#;
        let p = Message::parse(text)
            .unwrap()
            .progress_params()
            .unwrap()
            .unwrap();
        assert_eq!(p.into_message().to_json(), text);
    }

    #[test]
    fn numeric_progress_token_is_accepted() {
        let p =
            ProgressParams::from_value(&serde_json::json!({"progressToken": 42, "progress": 3}))
                .unwrap();
        assert_eq!(p.progress_token, RequestId::Number(42));
    }

    #[test]
    fn malformed_input_is_a_typed_error() {
        use JsonRpcError::*;
        assert!(matches!(Message::parse("{"), Err(Syntax(_))));
        assert_eq!(Message::parse("[]"), Err(NotAnObject));
        assert_eq!(
            Message::parse(r#"{"jsonrpc":"1.0","method":"x"}"#),
            Err(BadVersion)
        );
        assert_eq!(
            Message::parse(r#"{"jsonrpc":"2.0","method":7}"#),
            Err(BadField {
                field: "method",
                expected: "a string"
            })
        );
        assert_eq!(
            Message::parse(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
            Err(BadField {
                field: "id",
                expected: "an integer or a string"
            })
        );
        assert!(matches!(
            Message::parse(r#"{"jsonrpc":"2.0","id":1}"#),
            Err(UnknownShape(_))
        ));
        assert!(matches!(
            Message::parse(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#),
            Err(UnknownShape(_))
        ));
        assert_eq!(
            Message::parse(r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#),
            Err(BadField {
                field: "error.code",
                expected: "an integer"
            })
        );
        let no_token = Message::parse(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
        )
        .unwrap();
        assert_eq!(
            no_token.progress_params().unwrap(),
            Err(BadField {
                field: "params.progressToken",
                expected: "present"
            })
        );
        let frac =
            ProgressParams::from_value(&serde_json::json!({"progressToken": "t", "progress": 1.5}))
                .unwrap();
        assert!(frac.integer_progress().is_err());
    }
}
