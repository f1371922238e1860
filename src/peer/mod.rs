//! ContextVM peers: JSON-RPC inside signed kind-25910 Nostr events.
//!
//! A peer is sans-IO like the engines: it takes relay messages and time, and gives back relay
//! messages and wake-ups through the [`Peer`] trait, which every driver uses.

use crate::nip01::{ClientMessage, RelayMessage, RelayName};
use std::time::Duration;

/// What a driver does with a peer.
pub trait Peer {
    /// The connection to `relay` is up (first time or after a reconnect): subscribe there.
    fn connected(&mut self, relay: &str, now: Duration);
    /// A message from `relay`.
    fn handle_relay_message(&mut self, relay: &str, message: RelayMessage, now: Duration);
    /// The next message for a relay.
    fn poll_transmit(&mut self) -> Option<(RelayName, ClientMessage)>;
    /// When [`Peer::handle_timeout`] next has work.
    fn poll_timeout(&self) -> Option<Duration>;
    /// Runs timers due at `now`.
    fn handle_timeout(&mut self, now: Duration);
    /// Sets the Unix time (seconds) of virtual time zero, from which events' `created_at` is
    /// counted. Simulated drivers leave the fixed default, [`crate::nip01::EPOCH_SECS`]; the live
    /// driver sets the wall clock so real relays accept the events.
    fn set_epoch_secs(&mut self, secs: u64);
}

pub mod behaviour;
pub(crate) mod capabilities;
pub mod client;
pub mod content;
pub mod core;
pub(crate) mod engines;

pub use engines::{Implementation, RELAYSIM};
pub mod event;
pub(crate) mod segmented_json;
pub(crate) mod send_window;
pub mod server;
pub mod streams;
pub mod tools;
