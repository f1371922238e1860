//! The NIP-01 JSON wire form of the model's messages, both directions, as the WebSocket drivers
//! need it: the relay server reads client frames and writes relay frames, the peer driver the
//! reverse. Parsing goes through the `nostr` crate so both sides agree with real relays.

use crate::nip01::{ClientMessage, RelayMessage};
use nostr::prelude::SubscriptionId;
use std::sync::Arc;

/// A client frame as the relay model's message; `None` for anything the model does not take
/// (malformed JSON, AUTH, COUNT, multi-filter-only shapes it cannot represent).
pub fn to_model(text: &str) -> Option<ClientMessage> {
    let m = nostr::prelude::ClientMessage::from_json(text).ok()?;
    Some(match m {
        nostr::prelude::ClientMessage::Event(e) => ClientMessage::Event(Arc::new(e.into_owned())),
        nostr::prelude::ClientMessage::Req {
            subscription_id,
            filters,
        } => ClientMessage::Req {
            sub: subscription_id.to_string(),
            // The model takes one filter per REQ; ContextVM peers send one.
            filter: Box::new(filters.into_iter().next()?.into_owned()),
        },
        nostr::prelude::ClientMessage::Close(sub) => ClientMessage::Close {
            sub: sub.to_string(),
        },
        _ => return None,
    })
}

/// A relay message as the JSON text frame a relay sends.
pub fn to_wire(m: &RelayMessage) -> String {
    use nostr::prelude::RelayMessage as R;
    match m {
        RelayMessage::Event { sub, event } => {
            R::event(SubscriptionId::new(sub), (**event).clone()).as_json()
        }
        RelayMessage::Ok {
            id,
            accepted,
            message,
        } => R::ok(*id, *accepted, message.clone()).as_json(),
        RelayMessage::Eose { sub } => R::eose(SubscriptionId::new(sub)).as_json(),
        RelayMessage::Closed { sub, message } => {
            R::closed(SubscriptionId::new(sub), message.clone()).as_json()
        }
        RelayMessage::Notice { message } => R::notice(message.clone()).as_json(),
        RelayMessage::Auth { challenge } => R::auth(challenge.clone()).as_json(),
    }
}

/// A client message as the JSON text frame a client sends.
pub fn client_to_wire(m: &ClientMessage) -> String {
    use nostr::prelude::ClientMessage as C;
    match m {
        ClientMessage::Event(event) => C::event((**event).clone()).as_json(),
        ClientMessage::Req { sub, filter } => {
            C::req(SubscriptionId::new(sub), vec![(**filter).clone()]).as_json()
        }
        ClientMessage::Close { sub } => C::close(SubscriptionId::new(sub)).as_json(),
    }
}

/// A relay frame as the peer's message; `None` for malformed frames and for kinds the model
/// has no message for (COUNT, NEG-*).
pub fn relay_from_wire(text: &str) -> Option<RelayMessage> {
    use nostr::prelude::RelayMessage as R;
    Some(match R::from_json(text).ok()? {
        R::Event {
            subscription_id,
            event,
        } => RelayMessage::Event {
            sub: subscription_id.to_string(),
            event: Arc::new(event.into_owned()),
        },
        R::Ok {
            event_id,
            status,
            message,
        } => RelayMessage::Ok {
            id: event_id,
            accepted: status,
            message: message.into_owned(),
        },
        R::EndOfStoredEvents(sub) => RelayMessage::Eose {
            sub: sub.to_string(),
        },
        R::Closed {
            subscription_id,
            message,
        } => RelayMessage::Closed {
            sub: subscription_id.to_string(),
            message: message.into_owned(),
        },
        R::Notice(message) => RelayMessage::Notice {
            message: message.into_owned(),
        },
        R::Auth { challenge } => RelayMessage::Auth {
            challenge: challenge.into_owned(),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::Identity;
    /// ContextVM's event kind (`peer::event::CONTEXTVM_KIND`, a layer above).
    const CONTEXTVM_KIND: u16 = 25910;
    use nostr::prelude::{Filter, Kind};

    #[test]
    fn client_messages_survive_the_wire() {
        let alice = Identity::derive(3, "alice");
        let event = alice.sign(CONTEXTVM_KIND, 1_700_000_000, vec![], "hi \"x\"".into());
        let messages = [
            ClientMessage::Event(Arc::new(event)),
            ClientMessage::Req {
                sub: "cvm".into(),
                filter: Box::new(
                    Filter::new()
                        .kind(Kind::from(CONTEXTVM_KIND))
                        .pubkey(alice.public_key()),
                ),
            },
            ClientMessage::Close { sub: "cvm".into() },
        ];
        for m in messages {
            assert_eq!(to_model(&client_to_wire(&m)), Some(m));
        }
    }

    #[test]
    fn relay_messages_survive_the_wire() {
        let alice = Identity::derive(3, "alice");
        let event = alice.sign(CONTEXTVM_KIND, 1_700_000_000, vec![], "body".into());
        let messages = [
            RelayMessage::Event {
                sub: "cvm".into(),
                event: Arc::new(event.clone()),
            },
            RelayMessage::Ok {
                id: event.id,
                accepted: false,
                message: "invalid: event too large: 70123".into(),
            },
            RelayMessage::Eose { sub: "cvm".into() },
            RelayMessage::Closed {
                sub: "cvm".into(),
                message: "error: shutting down".into(),
            },
            RelayMessage::Notice {
                message: "rate-limited".into(),
            },
            RelayMessage::Auth {
                challenge: "a1B2c3".into(),
            },
        ];
        for m in messages {
            assert_eq!(relay_from_wire(&to_wire(&m)), Some(m));
        }
    }

    #[test]
    fn malformed_frames_are_none_not_panics() {
        for text in [
            "",
            "[",
            "[\"OK\"]",
            "{\"a\":1}",
            "[\"EVENT\",\"s\",{}]",
            "[\"COUNT\",\"s\",{\"count\":1}]",
        ] {
            assert_eq!(relay_from_wire(text), None, "{text}");
        }
    }
}
