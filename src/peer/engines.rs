//! Which implementation's CEP-22 and CEP-41 engines a peer runs. A peer holds an
//! [`Implementation`], a handle on an [`EngineFactory`], and never names the engines behind it:
//! relaysim's own ([`OwnEngines`]) by default, or one registered by name at the composition
//! root (`crate::implementations`), such as the contextvm-sdk adapter. The peer logic around
//! the engines (MCP lifecycle, events, resumable streams) is relaysim's either way.

use crate::protocol::endpoint::{
    EngineFactory, OwnEngines, StreamReading, StreamWriting, TransferReceiving, TransferSending,
};
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::ProgressToken;
use crate::protocol::open_stream::{StreamPolicy, WriterConfig};
use crate::protocol::oversized::{ChunkingError, ReceiverConfig, SenderConfig};
use crate::segmented::Segmented;
use nostr::prelude::PublicKey;
use std::cmp::Ordering;
use std::fmt;

/// An implementation of the CEP-22 and CEP-41 endpoints, compared and printed by name.
#[derive(Clone, Copy)]
pub struct Implementation(&'static dyn EngineFactory<PublicKey>);

/// relaysim's own engines.
pub const RELAYSIM: Implementation = Implementation(&OwnEngines);

impl Default for Implementation {
    fn default() -> Self {
        RELAYSIM
    }
}

impl Implementation {
    /// The implementation whose engines `factory` builds.
    pub const fn new(factory: &'static dyn EngineFactory<PublicKey>) -> Self {
        Implementation(factory)
    }

    /// Its name in scenarios and reports.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// A CEP-22 receiver.
    pub fn transfer_receiver(
        &self,
        config: ReceiverConfig,
    ) -> Box<dyn TransferReceiving<PublicKey>> {
        self.0.transfer_receiver(config)
    }

    /// A CEP-22 sender of `payload`, every frame publishing within `config.budget` under
    /// `envelope`.
    pub fn transfer_sender(
        &self,
        token: ProgressToken,
        payload: Segmented,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Box<dyn TransferSending>, ChunkingError> {
        self.0.transfer_sender(token, payload, config, envelope)
    }

    /// A CEP-41 writer.
    pub fn stream_writer(
        &self,
        token: ProgressToken,
        config: WriterConfig,
    ) -> Box<dyn StreamWriting> {
        self.0.stream_writer(token, config)
    }

    /// A CEP-41 reader.
    pub fn stream_reader(&self, policy: StreamPolicy) -> Box<dyn StreamReading<PublicKey>> {
        self.0.stream_reader(policy)
    }
}

impl fmt::Debug for Implementation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for Implementation {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Implementation {}

impl PartialOrd for Implementation {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Ordered by name, so reports that group by implementation are stable.
impl Ord for Implementation {
    fn cmp(&self, other: &Self) -> Ordering {
        self.name().cmp(other.name())
    }
}
