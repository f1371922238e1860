//! NIP-01 messages between a peer and a relay, as values (the JSON wire form belongs to the
//! WebSocket drivers).

use nostr::prelude::{Event, EventId, Filter};
use std::sync::Arc;

/// Names a relay (its URL or a scenario name).
pub type RelayName = String;

/// Client → relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMessage {
    /// `["EVENT", event]`: publish. Shared: a peer publishing to several relays, and the
    /// signer's verification memo, hold the one event its signer made.
    Event(Arc<Event>),
    /// `["REQ", sub, filter]`: subscribe.
    Req {
        /// Subscription id, scoped to the connection.
        sub: String,
        /// What to deliver.
        filter: Box<Filter>,
    },
    /// `["CLOSE", sub]`.
    Close {
        /// Subscription id.
        sub: String,
    },
}

/// Relay → client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayMessage {
    /// `["EVENT", sub, event]`: a delivery.
    Event {
        /// The subscription it matched.
        sub: String,
        /// The event, shared by every delivery of it (a relay fans one event out to many
        /// subscriptions; each delivery copying it was most of a large event's cost).
        event: Arc<Event>,
    },
    /// `["OK", id, accepted, message]`: the verdict on a published event.
    Ok {
        /// The event's id.
        id: EventId,
        /// Accepted or not.
        accepted: bool,
        /// `prefix: text`, e.g. `invalid: event too large: 70123`.
        message: String,
    },
    /// `["EOSE", sub]`.
    Eose {
        /// Subscription id.
        sub: String,
    },
    /// `["CLOSED", sub, message]`.
    Closed {
        /// Subscription id.
        sub: String,
        /// Why.
        message: String,
    },
    /// `["NOTICE", message]`.
    Notice {
        /// Human-readable text.
        message: String,
    },
    /// `["AUTH", challenge]`: NIP-42, the relay asks the connection to authenticate.
    Auth {
        /// The challenge a signed kind-22242 answer must carry.
        challenge: String,
    },
}

/// Whether a relay's rejection says the event was too large (the one failure CEP-22 says a
/// sender may react to by switching to oversized transfer; anything else is ambiguous).
pub fn is_size_rejection(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("too large") || lower.contains("too big") || lower.contains("exceeded max size")
}

#[cfg(test)]
mod tests {
    use super::is_size_rejection;

    #[test]
    fn size_rejections_are_recognized_and_nothing_else() {
        assert!(is_size_rejection("invalid: event too large: 70123"));
        assert!(is_size_rejection("event exceeded max size"));
        assert!(!is_size_rejection("rate-limited: slow down"));
        assert!(!is_size_rejection("error: could not connect"));
        assert!(!is_size_rejection(""));
    }
}
