//! CEP-41 open-ended streams: frames, writer, session (reader) with keepalive, a registry of
//! sessions with policies, and an async `Stream` adapter for async drivers.

pub(crate) mod adapter;
pub mod frame;
pub(crate) mod keepalive;
pub(crate) mod policy;
pub(crate) mod registry;
pub(crate) mod session;
pub mod writer;

pub use adapter::{chunk_stream, ChunkFeeder, ChunkStream};
pub use frame::{StreamBody, StreamFrame};
pub use policy::{StreamErrorKind, StreamFailure, StreamPolicy};
pub use registry::{OpenStreamRegistry, RegistryEvent};
pub use session::{FrameVerdict, OpenStreamSession, SessionState, StreamChunk};
pub use writer::{OpenStreamWriter, WriteError, WriterConfig, WriterState};

#[cfg(test)]
mod tests;
