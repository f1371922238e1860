//! CEP-22 bounded oversized transfer: frames, chunking by published-event budget, sender and
//! receiver state machines.
//!
//! A message too large for one relay event is sent as `start`, optionally `accept` (from the
//! receiver), `chunk`…, `end`, each a `notifications/progress` carrying a `cvm` object. The
//! receiver rebuilds the exact serialized message, checks its length and SHA-256 digest, and
//! only then surfaces it.

mod assembly;
pub(crate) mod chunking;
pub mod frame;
pub mod receiver;
pub mod sender;

pub use crate::protocol::cvm::FrameError;
pub use chunking::{plan_chunks, ChunkingError};
pub use frame::{Digest, TransferBody, TransferFrame};
pub use receiver::{
    FrameVerdict, OversizedReceiver, ReceiverConfig, ReceiverCounters, ReceiverEvent,
    TransferFailure,
};
pub use sender::{OversizedSender, SenderConfig, SenderFailure, SenderState};

#[cfg(test)]
mod tests;
