//! What the world shows an observer: every publication, decision, verdict, delivery, loss,
//! outage and client report, with its virtual time.

use crate::peer::client::{CallId, ClientEvent};
use crate::peer::tools::Expected;
use crate::sim::order::Via;
use nostr::prelude::EventId;
use std::time::Duration;

impl Observation {
    /// The subscription step a peer's `message` makes, if it is a REQ or a CLOSE.
    pub(crate) fn subscription_sent(
        relay: usize,
        peer: PeerId,
        message: &crate::nip01::ClientMessage,
    ) -> Option<Self> {
        use crate::nip01::ClientMessage;
        let (sub, step) = match message {
            ClientMessage::Req { sub, filter } => {
                let filter = serde_json::to_value(filter).unwrap_or_default();
                (sub, SubscriptionStep::Requested { filter })
            }
            ClientMessage::Close { sub } => (sub, SubscriptionStep::Ended),
            ClientMessage::Event(_) => return None,
        };
        Some(Observation::Subscription {
            relay,
            peer,
            sub: sub.clone(),
            step,
        })
    }
}

/// A peer in the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerId {
    /// The n-th client.
    Client(usize),
    /// The n-th server.
    Server(usize),
}

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Way {
    /// Peer → relay.
    Up,
    /// Relay → peer.
    Down,
    /// Not a link: a concurrent relay intake's handling of a peer's message. A plan is the
    /// handling time; an empty plan means "in order" (done no earlier than the message before).
    Intake,
    /// Not a link: a peer's publish pipeline to a relay. A plan is the time from making a
    /// message to writing it; an empty plan means "in order".
    Publish,
}

/// A step in the life of a subscription ([`Observation::Subscription`]).
#[derive(Debug, Clone, PartialEq)]
pub enum SubscriptionStep {
    /// The peer asked for it (`REQ`); the filter as NIP-01 JSON.
    Requested {
        /// The filter's JSON.
        filter: serde_json::Value,
    },
    /// The peer ended it (`CLOSE`).
    Ended,
    /// The relay had sent every stored event it matched (`EOSE`).
    StoredSent,
    /// The relay ended or refused it (`CLOSED`), saying why.
    Refused {
        /// The relay's words.
        message: String,
    },
}

/// Something the world did, for traces and statistics.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// A peer sent an event to a relay.
    Published {
        /// Who.
        peer: PeerId,
        /// Where.
        relay: usize,
        /// The event.
        event: EventId,
        /// Its serialized size.
        bytes: usize,
        /// The event's JSON (for traces that store events whole), made only when the world's
        /// observer wants it ([`Observer::wants_event_json`]), with its real signature (a
        /// deferred one made for it).
        json: Option<std::sync::Arc<str>>,
    },
    /// What a link did with one message: the delays of its copies (none: lost). The n-th
    /// message on a (relay, peer, way) link; schedule replays reuse these.
    LinkPlan {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// Which way.
        way: Way,
        /// The message's number on this link, from 0.
        seq: u64,
        /// Whether it carried an event (loss and duplication apply to events only).
        event: bool,
        /// Delays of the copies.
        delays: Vec<Duration>,
    },
    /// An outage began (or would have, when suppressed by a replay).
    Outage {
        /// Its number in the run, from 0.
        index: u64,
        /// The relay.
        relay: usize,
        /// The peer, for connection drops and partitions.
        peer: Option<PeerId>,
        /// `relay-restart`, `connection-drop` or `partition`.
        kind: &'static str,
        /// How long it lasts.
        duration: Duration,
        /// Whether a replay suppressed it.
        suppressed: bool,
    },
    /// A relay answered an event.
    Verdict {
        /// The relay.
        relay: usize,
        /// The publisher.
        peer: PeerId,
        /// The event.
        event: EventId,
        /// Accepted or not.
        accepted: bool,
        /// The OK message.
        message: String,
    },
    /// A relay did not send a subscriber an event its subscription matched: the connection
    /// may not read that kind (`auth-required`: strfry's `restrictedReadKinds` without AUTH).
    Withheld {
        /// The relay.
        relay: usize,
        /// The subscriber.
        peer: PeerId,
        /// The event.
        event: EventId,
        /// Why.
        reason: &'static str,
    },
    /// A relay sent a NIP-42 AUTH challenge (strfry, before refusing a REQ for a kind only
    /// an authenticated connection may read).
    Auth {
        /// The relay.
        relay: usize,
        /// To whom.
        peer: PeerId,
        /// The challenge.
        challenge: String,
    },
    /// A relay sent a NOTICE.
    Notice {
        /// The relay.
        relay: usize,
        /// To whom.
        peer: PeerId,
        /// Its text.
        message: String,
    },
    /// An event reached a subscriber.
    Delivered {
        /// Through which relay.
        relay: usize,
        /// To whom.
        peer: PeerId,
        /// The event.
        event: EventId,
        /// Time since it was first published.
        latency: Duration,
        /// A first copy that arrived after a later event of the same author had reached this
        /// peer (through any relay).
        reordered: bool,
        /// The peer already had this event id.
        duplicate: bool,
        /// Why it is reordered or a duplicate.
        via: Option<Via>,
    },
    /// A message was lost on a link.
    Lost {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// Which way.
        way: Way,
        /// The event, if the message carried one.
        event: Option<EventId>,
    },
    /// A message was duplicated on a link (extra copies).
    Duplicated {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// Which way.
        way: Way,
        /// Extra copies.
        copies: usize,
    },
    /// A connection went down.
    Disconnected {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// Why: `relay-closed`, `outage`, `relay-restart`.
        reason: &'static str,
    },
    /// A connection came (back) up.
    Connected {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
    },
    /// A step in the life of a subscription: a peer's REQ or CLOSE as it left, the relay's
    /// EOSE or CLOSED as the peer received it.
    Subscription {
        /// The relay.
        relay: usize,
        /// The peer.
        peer: PeerId,
        /// The subscription id.
        sub: String,
        /// Which step.
        step: SubscriptionStep,
    },
    /// A workload call was made.
    Called {
        /// The client.
        client: usize,
        /// Its call id.
        call: CallId,
        /// The workload it belongs to.
        workload: usize,
        /// The tool.
        tool: &'static str,
        /// What a correct result looks like.
        expected: Expected,
    },
    /// The server wrote a stream chunk.
    ChunkWritten {
        /// The client it is for.
        client: usize,
        /// The call.
        call: CallId,
        /// The chunk index.
        index: u64,
    },
    /// A server's receiver failed a call's oversized request; the client is not told.
    ServerFailed {
        /// The client whose call it was.
        client: usize,
        /// The call.
        call: CallId,
        /// The server's cause, with the implementation's own words if any.
        cause: String,
    },
    /// A server's resumable-stream totals changed.
    StreamStore {
        /// The server's index.
        server: usize,
        /// Its totals so far.
        stats: crate::protocol::resumable::server::StoreStats,
    },
    /// A client reported something about a call.
    Client {
        /// The client.
        client: usize,
        /// What.
        event: ClientEvent,
    },
    /// A client read a stream chunk.
    ChunkRead {
        /// The client.
        client: usize,
        /// The call.
        call: CallId,
        /// The chunk index.
        index: u64,
        /// Its data length.
        bytes: usize,
        /// Whether it is exactly what the server wrote for that index.
        intact: bool,
    },
    /// A hosted peer's program logged a line (`env.log`): the SDK's own words, as its
    /// warnings and errors, at the virtual time it logged them.
    Logged {
        /// The peer.
        peer: PeerId,
        /// The line (at most [`crate::sim::program_lines::MAX_LINE_BYTES`]).
        text: String,
    },
}

/// Receives every observation with its virtual time.
pub trait Observer {
    /// One observation.
    fn observe(&mut self, at: Duration, observation: &Observation);

    /// Whether this observer reads a published event's JSON (`Observation::Published`'s
    /// `json`): the world writes an event's JSON only for an observer that does, since
    /// escaping a large event is the costliest thing done with it. Yes unless an observer says
    /// otherwise.
    fn wants_event_json(&self) -> bool {
        true
    }
}

/// An observer that keeps everything.
#[derive(Debug, Default)]
pub struct Recorder {
    /// What was observed, in order.
    pub log: Vec<(Duration, Observation)>,
}

impl Observer for Recorder {
    fn observe(&mut self, at: Duration, observation: &Observation) {
        self.log.push((at, observation.clone()));
    }
}

/// Lets the caller keep a handle on an observer the world owns.
impl<O: Observer> Observer for std::rc::Rc<std::cell::RefCell<O>> {
    fn observe(&mut self, at: Duration, observation: &Observation) {
        self.borrow_mut().observe(at, observation);
    }

    fn wants_event_json(&self) -> bool {
        self.borrow().wants_event_json()
    }
}
