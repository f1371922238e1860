//! relaysim: a deterministic record-and-replay simulator of Nostr relays carrying ContextVM
//! traffic (MCP JSON-RPC inside signed kind-25910 Nostr events).
//!
//! The crate is a library core with a thin command-line front end. Layers, from the bottom:
//! [`protocol`] (sans-IO CEP-22 / CEP-41 engines and JSON-RPC) and [`peer`] (events and
//! identities).

#![warn(missing_docs)]

pub mod cli;
pub mod peer;
pub mod protocol;
pub mod sim;
