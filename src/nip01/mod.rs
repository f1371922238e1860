//! Nostr only: deterministic identities, signed events and NIP-01 messages as values. Nothing
//! here knows ContextVM; the layers above build on it.

pub(crate) mod event_json;
pub(crate) mod identity;
pub mod json_read;
pub mod json_segmented;
pub mod json_text;
pub(crate) mod message;
#[cfg(target_arch = "x86_64")]
mod shuffle;
pub mod signatures;
mod unescape;
pub mod wire;

pub use identity::{Identity, EPOCH_SECS};
pub use message::{is_size_rejection, ClientMessage, RelayMessage, RelayName};
pub use signatures::{Invalid, Signatures};
