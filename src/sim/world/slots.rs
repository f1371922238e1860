//! The world's peers: relaysim's own, or hosted programs (`sim::hosted`), behind one interface
//! so the rest of the world does not ask which.

use crate::peer::client::{CallId, ClientEvent, ContextVmClient};
use crate::peer::server::{ContextVmServer, ServerEvent};
use crate::peer::Peer;
use crate::protocol::jsonrpc::ProgressToken;
use crate::protocol::open_stream::StreamChunk;
use crate::sim::hosted::HostedPeer;
use nostr::prelude::PublicKey;

/// A client peer of the world.
pub(crate) enum ClientSlot {
    /// relaysim's client.
    Own(Box<ContextVmClient>),
    /// A hosted program's.
    Hosted(HostedPeer),
}

/// A server peer of the world.
pub(crate) enum ServerSlot {
    /// relaysim's server.
    Own(Box<ContextVmServer>),
    /// A hosted program's.
    Hosted(HostedPeer),
}

impl ClientSlot {
    pub(super) fn peer(&mut self) -> &mut dyn Peer {
        match self {
            ClientSlot::Own(c) => c.as_mut(),
            ClientSlot::Hosted(h) => h,
        }
    }

    pub(super) fn peer_ref(&self) -> &dyn Peer {
        match self {
            ClientSlot::Own(c) => c.as_ref(),
            ClientSlot::Hosted(h) => h,
        }
    }

    pub(super) fn hosted(&mut self) -> Option<&mut HostedPeer> {
        match self {
            ClientSlot::Hosted(h) => Some(h),
            ClientSlot::Own(_) => None,
        }
    }

    pub(super) fn poll_event(&mut self) -> Option<ClientEvent> {
        match self {
            ClientSlot::Own(c) => c.poll_event(),
            ClientSlot::Hosted(h) => h.poll_event(),
        }
    }

    pub(super) fn read_stream(&mut self, call: CallId) -> Option<StreamChunk> {
        match self {
            ClientSlot::Own(c) => c.read_stream(call),
            ClientSlot::Hosted(h) => h.read_stream(call),
        }
    }

    pub(super) fn stream_alive(&self, call: CallId) -> bool {
        match self {
            ClientSlot::Own(c) => c.stream_alive(call),
            ClientSlot::Hosted(h) => h.stream_alive(call),
        }
    }

    pub(super) fn call_of(&self, token: &ProgressToken) -> Option<CallId> {
        match self {
            ClientSlot::Own(c) => c.call_of(token),
            ClientSlot::Hosted(_) => None,
        }
    }
}

impl ServerSlot {
    pub(super) fn peer(&mut self) -> &mut dyn Peer {
        match self {
            ServerSlot::Own(s) => s.as_mut(),
            ServerSlot::Hosted(h) => h,
        }
    }

    pub(super) fn peer_ref(&self) -> &dyn Peer {
        match self {
            ServerSlot::Own(s) => s.as_ref(),
            ServerSlot::Hosted(h) => h,
        }
    }

    pub(super) fn hosted(&mut self) -> Option<&mut HostedPeer> {
        match self {
            ServerSlot::Hosted(h) => Some(h),
            ServerSlot::Own(_) => None,
        }
    }

    pub(super) fn poll_event(&mut self) -> Option<ServerEvent> {
        match self {
            ServerSlot::Own(s) => s.poll_event(),
            ServerSlot::Hosted(_) => None,
        }
    }

    pub(super) fn public_key(&self) -> PublicKey {
        match self {
            ServerSlot::Own(s) => s.public_key(),
            ServerSlot::Hosted(h) => h.public_key(),
        }
    }
}
