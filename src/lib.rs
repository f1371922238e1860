//! relaysim: a deterministic record-and-replay simulator of Nostr relays carrying ContextVM
//! traffic (MCP JSON-RPC inside signed kind-25910 Nostr events).
//!
//! The crate is a library core with a thin command-line front end. Layers, from the bottom:
//! [`protocol`] (sans-IO CEP-22 / CEP-41 engines and JSON-RPC), [`peer`] (events and
//! identities), [`sim`] (seeded randomness, impaired links, runs) and [`cli`].

//! # Example: a CEP-22 transfer, sans-IO
//!
//! ```
//! use relaysim::protocol::envelope::EscapedContentEnvelope;
//! use relaysim::protocol::jsonrpc::{Message, RequestId};
//! use relaysim::protocol::oversized::{
//!     OversizedReceiver, OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig,
//! };
//! use std::time::Duration;
//!
//! let message = Message::Response {
//!     id: RequestId::Number(1),
//!     result: serde_json::json!({ "text": "\"quoted\" ".repeat(5000) }),
//! }
//! .to_json();
//! // Frames must publish within 4,000 bytes; an event adds ~650 bytes around its content.
//! let envelope = EscapedContentEnvelope { overhead: 650 };
//! let config = SenderConfig { budget: 4_000, ..SenderConfig::default() };
//! let token = RequestId::String("req-1".into());
//! let mut sender = OversizedSender::new(token, message.clone(), config, &envelope).unwrap();
//! let mut receiver = OversizedReceiver::new(ReceiverConfig::default());
//!
//! let now = Duration::ZERO;
//! let mut frames: Vec<_> = std::iter::from_fn(|| sender.poll_transmit(now)).collect();
//! frames[1..].reverse(); // a relay that reorders everything after `start`
//! for frame in frames {
//!     receiver.handle_frame(&"server", frame, now);
//! }
//! let delivered = std::iter::from_fn(|| receiver.poll_event()).find_map(|e| match e {
//!     ReceiverEvent::Completed { message, .. } => Some(message),
//!     _ => None,
//! });
//! assert_eq!(delivered, Some(message));
//! ```

#![warn(missing_docs)]

pub mod adapter;
pub mod compare;
pub mod implementations;
#[cfg(feature = "live")]
pub mod live;
pub mod nip01;
pub mod peer;
pub mod protocol;
pub mod relay;
pub mod replay;
pub mod rng;
pub mod scenario;
pub mod sim;
pub mod stats;
pub mod sweep;
pub mod trace;
#[cfg(feature = "turmoil")]
pub mod turmoil_driver;
