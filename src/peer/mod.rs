//! ContextVM peers: JSON-RPC inside signed kind-25910 Nostr events.

pub mod event;
