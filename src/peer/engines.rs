//! Which implementation's CEP-22 and CEP-41 engines a peer runs: relaysim's own, or (with the
//! `contextvm-sdk` feature) those of the published Rust ContextVM SDK through
//! [`crate::adapter::contextvm_sdk`]. The peer logic around them (MCP lifecycle, events,
//! resumable streams) is relaysim's either way.

use crate::protocol::endpoint::{StreamReading, StreamWriting, TransferReceiving, TransferSending};
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::ProgressToken;
use crate::protocol::open_stream::{
    OpenStreamRegistry, OpenStreamWriter, StreamPolicy, WriterConfig,
};
use crate::protocol::oversized::{
    ChunkingError, OversizedReceiver, OversizedSender, ReceiverConfig, SenderConfig,
};
use nostr::prelude::PublicKey;

/// An implementation of the CEP-22 and CEP-41 endpoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Implementation {
    /// relaysim's own engines.
    #[default]
    Relaysim,
    /// The `contextvm-sdk` crate's engines (version 0.2.2).
    #[cfg(feature = "contextvm-sdk")]
    ContextvmSdk,
}

/// The names `impl` accepts, whether or not this build has them.
pub const NAMES: [&str; 2] = ["relaysim", "contextvm-sdk"];

/// Why an implementation name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImplementationError {
    /// Not an implementation relaysim knows.
    #[error("unknown implementation {0:?}: use relaysim or contextvm-sdk")]
    Unknown(String),
    /// Known, but this build lacks it.
    #[error("this relaysim was built without the contextvm-sdk feature: build it with `cargo build --release --features contextvm-sdk`")]
    NotBuilt,
}

impl Implementation {
    /// Every implementation in this build.
    pub fn all() -> Vec<Implementation> {
        vec![
            Implementation::Relaysim,
            #[cfg(feature = "contextvm-sdk")]
            Implementation::ContextvmSdk,
        ]
    }

    /// The implementation named `name`.
    pub fn parse(name: &str) -> Result<Self, ImplementationError> {
        match name {
            "relaysim" => Ok(Implementation::Relaysim),
            #[cfg(feature = "contextvm-sdk")]
            "contextvm-sdk" => Ok(Implementation::ContextvmSdk),
            #[cfg(not(feature = "contextvm-sdk"))]
            "contextvm-sdk" => Err(ImplementationError::NotBuilt),
            other => Err(ImplementationError::Unknown(other.to_owned())),
        }
    }

    /// Its name in scenarios and reports.
    pub fn name(&self) -> &'static str {
        match self {
            Implementation::Relaysim => "relaysim",
            #[cfg(feature = "contextvm-sdk")]
            Implementation::ContextvmSdk => "contextvm-sdk",
        }
    }

    /// A CEP-22 receiver.
    pub fn transfer_receiver(
        &self,
        config: ReceiverConfig,
    ) -> Box<dyn TransferReceiving<PublicKey>> {
        match self {
            Implementation::Relaysim => Box::new(OversizedReceiver::new(config)),
            #[cfg(feature = "contextvm-sdk")]
            Implementation::ContextvmSdk => Box::new(
                crate::adapter::contextvm_sdk::SdkTransferReceiver::new(config),
            ),
        }
    }

    /// A CEP-22 sender of `payload`, every frame publishing within `config.budget` under
    /// `envelope`.
    pub fn transfer_sender(
        &self,
        token: ProgressToken,
        payload: String,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Box<dyn TransferSending>, ChunkingError> {
        match self {
            Implementation::Relaysim => Ok(Box::new(OversizedSender::new(
                token, payload, config, envelope,
            )?)),
            #[cfg(feature = "contextvm-sdk")]
            Implementation::ContextvmSdk => Ok(Box::new(
                crate::adapter::contextvm_sdk::SdkTransferSender::new(
                    token, payload, config, envelope,
                )?,
            )),
        }
    }

    /// A CEP-41 writer.
    pub fn stream_writer(
        &self,
        token: ProgressToken,
        config: WriterConfig,
    ) -> Box<dyn StreamWriting> {
        match self {
            Implementation::Relaysim => Box::new(OpenStreamWriter::new(token, config)),
            #[cfg(feature = "contextvm-sdk")]
            Implementation::ContextvmSdk => Box::new(
                crate::adapter::contextvm_sdk::SdkStreamWriter::new(token, config),
            ),
        }
    }

    /// A CEP-41 reader.
    pub fn stream_reader(&self, policy: StreamPolicy) -> Box<dyn StreamReading<PublicKey>> {
        match self {
            Implementation::Relaysim => Box::new(OpenStreamRegistry::new(policy)),
            #[cfg(feature = "contextvm-sdk")]
            Implementation::ContextvmSdk => {
                Box::new(crate::adapter::contextvm_sdk::SdkStreamReader::new(policy))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_a_missing_feature_is_explained() {
        assert_eq!(
            Implementation::parse("relaysim"),
            Ok(Implementation::Relaysim)
        );
        assert!(matches!(
            Implementation::parse("rust-sdk"),
            Err(ImplementationError::Unknown(_))
        ));
        #[cfg(feature = "contextvm-sdk")]
        assert_eq!(
            Implementation::parse("contextvm-sdk").map(|i| i.name()),
            Ok("contextvm-sdk")
        );
        #[cfg(not(feature = "contextvm-sdk"))]
        assert!(Implementation::parse("contextvm-sdk")
            .unwrap_err()
            .to_string()
            .contains("--features contextvm-sdk"));
        for i in Implementation::all() {
            assert_eq!(Implementation::parse(i.name()), Ok(i));
        }
    }
}
