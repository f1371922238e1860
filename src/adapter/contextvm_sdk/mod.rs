//! The published Rust ContextVM SDK (`contextvm-sdk` 0.2.2) behind relaysim's endpoint traits.
//!
//! Its engines run unchanged, each with its own defaults (CEP-22: a 21-position reorder
//! window and 42 held chunks; CEP-41: 64 buffered chunks, 30 s idle, 20 s probe). Frames cross
//! the boundary as JSON-RPC text, so each side parses what the other wrote. What the adapter
//! does itself, and why (each is where the SDK reads the wall clock or leaves the work to its
//! transports, which need a real relay pool):
//!
//! - **Time.** Engines that take `now: Instant` get a virtual one: a base instant fixed when
//!   the adapter is made, plus the simulator's time. Only differences between such instants
//!   reach their logic, so runs repeat exactly.
//! - **CEP-22 receiver timeout.** `OversizedTransferReceiver` stamps a transfer's start and
//!   reaps expired ones by the wall clock (`remove_expired`). Its reaper is switched off
//!   (`transfer_timeout_ms = 0`); each transfer gets its own receiver, dropped when its
//!   300 s (the SDK's default) run out in virtual time. A receiver per transfer also means
//!   the SDK's limit of 64 concurrent transfers per receiver does not apply.
//! - **CEP-22 sender.** `build_oversized_frames` makes the frames. The order the SDK's async
//!   `send_oversized_transfer` keeps (start, wait for `accept` when the receiver's support is
//!   unknown, chunks, end; no abort on an accept timeout) is kept here in virtual time, since
//!   that function waits with `tokio::time::timeout`. The chunk size is chosen as the SDK's
//!   transport does: the largest all-backslash chunk (the escaping worst case) whose published
//!   event fits the budget, searched in `[1, 48000]`; relaysim measures the event, since the
//!   SDK's measuring needs its transport.
//! - **CEP-22 accept.** The SDK's receiver never emits `accept`; its server transport sends one
//!   and feeds it to its own receiver. The adapter does the same when the peer asks.
//! - **CEP-41 writer keepalive.** `OpenStreamWriter` stamps its idle clock with the wall clock,
//!   so its own keepalive is off (`idle_timeout: None`). The adapter pings through the
//!   writer's `ping()` after 30 s without a ping or matching pong from the reader (what the
//!   SDK counts as liveness) and aborts through `abort()` when no matching `pong` comes within
//!   20 s (the SDK's defaults). The SDK's transport checks this every 15 s, so it pings and
//!   aborts up to 15 s later than the adapter does. The writer does not wait for `accept`.
//! - **CEP-41 reader.** `OpenStreamRegistry::process_frame` and `tick_all` take the virtual
//!   instant; `tick_all` runs every 15 s, as the SDK's server sweeps (idle timeout / 2). Its
//!   actions are sorted by stream, since the registry lists sessions in hash order. It has no
//!   `accept` or `abort` of its own to send, and no way to resend a probe: the adapter sends
//!   `accept` and `abort` frames when the peer asks, and ignores `reprobe`. A `start` the
//!   registry refuses (too many streams) opens nothing, and its call waits for its timeout.
//! - **What stays relaysim's.** The peer around the engines decides whether a sender waits for
//!   `accept` and whether a reader sends one, as relaysim's peers do. The SDK's own transports
//!   decide differently: its server fragments only for clients known to support CEP-22 and
//!   never waits, and its client never sends a CEP-41 `accept`. Resumable streams' keepalive
//!   help (a probe waiting `resumeInterval.max`, a resent ping) does not reach the SDK's
//!   engines, which keep their own timeouts.
//! - Async methods (the writer's, the registry's `process_frame`) only await the adapter's
//!   publish closure, which is ready at once, so they are polled to completion in place.

mod stream;
mod transfer;

pub use stream::{SdkStreamReader, SdkStreamWriter};
pub use transfer::{SdkTransferReceiver, SdkTransferSender};

use crate::peer::engines::Implementation;
use crate::protocol::endpoint::{
    EngineFactory, StreamReading, StreamWriting, TransferReceiving, TransferSending,
};
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::{Message, ProgressToken};
use crate::protocol::open_stream::{
    RegistryEvent, StreamBody, StreamChunk, StreamFailure, StreamFrame, StreamPolicy, WriteError,
    WriterConfig, WriterState,
};
use crate::protocol::oversized::{
    ChunkingError, ReceiverConfig, ReceiverEvent, SenderConfig, SenderFailure, SenderState,
    TransferBody, TransferFailure, TransferFrame,
};
use crate::segmented::Segmented;
use contextvm_sdk::transport::open_stream::{
    FrameOutcome, KeepaliveAction, OpenStreamError, OpenStreamRegistry as SdkRegistry,
    OpenStreamRegistryPolicy, OpenStreamSession, OpenStreamWriter as SdkWriter,
    OpenStreamWriterOptions, PublishFrame,
};
use contextvm_sdk::transport::oversized_transfer::{
    build_oversized_frames, OversizedFrame, OversizedSenderOptions, OversizedTransferError,
    OversizedTransferReceiver, TransferPolicy, DEFAULT_CHUNK_SIZE, DEFAULT_TRANSFER_TIMEOUT_MS,
};
use contextvm_sdk::JsonRpcNotification;
use futures_util::{FutureExt, StreamExt};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The contextvm-sdk crate's engines (version 0.2.2), as `impl = "contextvm-sdk"` names them.
pub const IMPLEMENTATION: Implementation = Implementation::new(&SdkEngines);

/// Builds the contextvm-sdk crate's engines behind relaysim's endpoint traits.
#[derive(Debug, Clone, Copy, Default)]
pub struct SdkEngines;

impl EngineFactory<nostr::prelude::PublicKey> for SdkEngines {
    fn name(&self) -> &'static str {
        "contextvm-sdk"
    }
    fn transfer_receiver(
        &self,
        config: ReceiverConfig,
    ) -> Box<dyn TransferReceiving<nostr::prelude::PublicKey>> {
        Box::new(SdkTransferReceiver::new(config))
    }
    fn transfer_sender(
        &self,
        token: ProgressToken,
        payload: Segmented,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Box<dyn TransferSending>, ChunkingError> {
        // The SDK's sender takes the whole text.
        Ok(Box::new(SdkTransferSender::new(
            token,
            payload.into_string(),
            config,
            envelope,
        )?))
    }
    fn stream_writer(&self, token: ProgressToken, config: WriterConfig) -> Box<dyn StreamWriting> {
        Box::new(SdkStreamWriter::new(token, config))
    }
    fn stream_reader(
        &self,
        policy: StreamPolicy,
    ) -> Box<dyn StreamReading<nostr::prelude::PublicKey>> {
        Box::new(SdkStreamReader::new(policy))
    }
}

/// Virtual time as the SDK's `Instant`s: a fixed base plus the simulator's time.
#[derive(Debug, Clone, Copy)]
struct VirtualClock {
    base: Instant,
}

impl VirtualClock {
    fn new() -> Self {
        // Only an anchor: the SDK compares instants, and every one it gets is base + offset.
        VirtualClock {
            base: Instant::now(),
        }
    }

    fn at(&self, now: Duration) -> Instant {
        self.base + now
    }
}

fn token_text(t: &ProgressToken) -> String {
    match t {
        ProgressToken::String(s) => s.clone(),
        ProgressToken::Number(n) => n.to_string(),
    }
}

/// relaysim's frame text as the SDK's notification.
fn to_sdk(json: &str) -> Option<JsonRpcNotification> {
    serde_json::from_str(json).ok()
}

fn progress_params(n: &JsonRpcNotification) -> Option<crate::protocol::jsonrpc::ProgressParams> {
    let text = serde_json::to_string(n).ok()?;
    Message::parse(&text).ok()?.progress_params()?.ok()
}

fn transfer_frame(n: &JsonRpcNotification) -> Option<TransferFrame> {
    TransferFrame::from_params(&progress_params(n)?).ok()
}

fn stream_frame(n: &JsonRpcNotification) -> Option<StreamFrame> {
    StreamFrame::from_params(&progress_params(n)?).ok()
}

fn transfer_failure(e: OversizedTransferError) -> TransferFailure {
    match e {
        OversizedTransferError::Abort { reason, .. } => TransferFailure::AbortedByPeer { reason },
        // The SDK's own words are kept: a stalled receiver and a reordered one read differently.
        OversizedTransferError::Policy(message) => TransferFailure::Reported {
            family: "policy",
            message,
        },
        OversizedTransferError::Digest(message) => TransferFailure::Reported {
            family: "digest-mismatch",
            message,
        },
        OversizedTransferError::Reassembly(m) => TransferFailure::Reassembly(m),
        OversizedTransferError::Sequence(message) => TransferFailure::Reported {
            family: "sequence",
            message,
        },
    }
}

fn stream_failure(e: OpenStreamError) -> StreamFailure {
    match e {
        OpenStreamError::Abort { reason, .. } => StreamFailure::AbortedByPeer { reason },
        OpenStreamError::Policy(message) => StreamFailure::Reported {
            family: "too-many-streams",
            message,
        },
        OpenStreamError::Sequence(message) => StreamFailure::Reported {
            family: "sequence",
            message,
        },
    }
}

/// The failure behind a reason the SDK's `tick` gives for aborting a stream.
fn tick_failure(reason: &str) -> StreamFailure {
    if reason.contains("Probe") {
        StreamFailure::ProbeTimeout
    } else if reason.contains("grace") {
        StreamFailure::GapAtClose { missing: 1 }
    } else {
        StreamFailure::AbortedLocally {
            reason: reason.to_owned(),
        }
    }
}

/// What the SDK publishes, queued for the adapter to hand on.
type Outbox = Arc<Mutex<VecDeque<JsonRpcNotification>>>;

/// A publish closure that queues what the SDK publishes, for the adapter to hand on.
fn queueing_publisher(queue: Outbox) -> PublishFrame {
    Arc::new(move |n: JsonRpcNotification| {
        queue.lock().expect("not poisoned").push_back(n);
        async { Ok(nostr044::EventId::all_zeros()) }.boxed()
    })
}
