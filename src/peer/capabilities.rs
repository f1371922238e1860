//! ContextVM capability tags: what a peer says it supports, on initialization or on the first
//! request/response of a stateless exchange.

use nostr::prelude::{Event, Tag};

/// CEP-22 support.
pub(crate) const OVERSIZED_TRANSFER: &str = "support_oversized_transfer";
/// CEP-41 support.
pub(crate) const OPEN_STREAM: &str = "support_open_stream";
/// MCP resumable streams (relaysim's tag for the MCP `streams` capability, which stateless
/// ContextVM exchanges can only carry this way).
pub(crate) const RESUMABLE_STREAMS: &str = "support_resumable_streams";

/// What a peer supports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// CEP-22 oversized transfer.
    pub oversized_transfer: bool,
    /// CEP-41 open streams.
    pub open_stream: bool,
    /// MCP resumable streams. Not in [`Capabilities::all`]: a client opts in.
    pub resumable_streams: bool,
}

impl Capabilities {
    /// Everything relaysim implements.
    pub fn all() -> Self {
        Capabilities {
            oversized_transfer: true,
            open_stream: true,
            resumable_streams: false,
        }
    }

    /// The single-element tags that advertise these capabilities.
    pub fn tags(&self) -> Vec<Tag> {
        let mut tags = Vec::new();
        if self.oversized_transfer {
            tags.push(Tag::parse([OVERSIZED_TRANSFER]).expect("a one-element tag"));
        }
        if self.open_stream {
            tags.push(Tag::parse([OPEN_STREAM]).expect("a one-element tag"));
        }
        if self.resumable_streams {
            tags.push(Tag::parse([RESUMABLE_STREAMS]).expect("a one-element tag"));
        }
        tags
    }

    /// The capabilities an event advertises.
    pub fn of(event: &Event) -> Self {
        let has = |name: &str| {
            event
                .tags
                .iter()
                .any(|t| t.as_slice().first().map(String::as_str) == Some(name))
        };
        Capabilities {
            oversized_transfer: has(OVERSIZED_TRANSFER),
            open_stream: has(OPEN_STREAM),
            resumable_streams: has(RESUMABLE_STREAMS),
        }
    }

    /// Merges what another event advertised (support, once seen, stays known).
    pub fn learn(&mut self, other: Capabilities) {
        self.oversized_transfer |= other.oversized_transfer;
        self.open_stream |= other.open_stream;
        self.resumable_streams |= other.resumable_streams;
    }
}
