//! MCP resumable streams (the draft spec page and PR #899), mapped onto relays: a server
//! keeps a bounded buffer of each stream's messages with per-stream sequence numbers, and a
//! client that lost messages (ephemeral events published while its connection was down)
//! resumes from the last sequence it processed.
//!
//! - [`messages`]: the wire forms and where the two texts differ.
//! - [`server::StreamStore`]: streams, buffers, eviction, resume/poll/poll-all/ack,
//!   abandonment.
//! - [`client::StreamFollower`]: de-duplication, gaps, when to resume or poll.
//!
//! How sequence numbers travel (a Nostr tag) is the peers' business: see `peer::streams`.

pub mod client;
pub mod messages;
pub mod server;

#[cfg(test)]
mod tests;
