//! Protocol engines: sans-IO state machines that never read a clock, sleep, spawn, open a
//! socket or draw randomness. Time comes in as `now: Duration` (virtual time since the start of
//! a run); output goes out through `poll_*` methods. Nothing here depends on other relaysim
//! modules.

pub mod chunk_text;
pub(crate) mod cvm;
pub mod endpoint;
pub mod envelope;
pub mod jsonrpc;
pub mod open_stream;
pub mod oversized;
pub mod resumable;
