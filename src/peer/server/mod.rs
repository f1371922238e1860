//! The ContextVM server peer: answers `initialize`, `tools/list` and `tools/call` for the
//! simulated tools, streams over CEP-41, sends oversized responses over CEP-22, and takes
//! oversized requests. Sans-IO.
//!
//! Rules it keeps:
//! - every response and every frame of a request carries `["e", request_event_id]` (for a
//!   request that arrived as a CEP-22 transfer, the id of its `start` event);
//! - a response whose *published* event would exceed the budget goes out as CEP-22 when the
//!   request carried a progress token, and as a small JSON-RPC error otherwise; a relay verdict
//!   of "too large" on a direct response triggers the same CEP-22 retry; any other rejection is
//!   ambiguous and never retried. After a size rejection of an S-byte event the server retries
//!   (and keeps sending) with a budget of S/2, since the relay's real limit is unknown;
//! - a streaming tool's final response is published only after its `close` frame (or, after an
//!   abort, an error response), exactly once;
//! - a request delivered twice (relays and multi-relay setups duplicate) runs once;
//! - for a client that advertises resumable streams, a long tool call (`stream`, `slow`,
//!   `large_result`) gets a stream: `notifications/stream/create` first, then every message of
//!   the call (CEP-41 and CEP-22 frames, progress, the final response) tagged with its
//!   sequence number and kept for `stream/resume`, then `notifications/stream/end`. A CEP-41
//!   stream on it waits up to `resumeInterval.max` for a `pong`, since a client that lost its
//!   connection answers once it resumes.

mod pump;
mod requests;
mod responses;
mod resumable;

pub use crate::peer::send_window::{ANSWER_WAIT, MAX_FRAMES_OUT, SEND_WINDOW_BYTES};

use super::behaviour::{Behaviour, PublishWait};
use super::capabilities::Capabilities;
use super::client::PROTOCOL_VERSION;
use super::core::{Clock, PeerCore};
use super::engines::Implementation;
use super::event::SignedEventEnvelope;
use super::streams::{stream_tag, STREAM_TAG_ROOM};
use super::tools::{stream_chunk_text, tool_codes, SimulatedTools, ToolAction, ToolHandler};
use super::Peer;
use crate::nip01::{ClientMessage, RelayMessage, RelayName};
use crate::nip01::{Identity, EPOCH_SECS};
use crate::protocol::chunk_text::ProgressFrame;
use crate::protocol::endpoint::{StreamWriting, TransferReceiving, TransferSending};
use crate::protocol::jsonrpc::{ErrorObject, Message, ProgressToken, RequestId};
use crate::protocol::open_stream::{WriterConfig, WriterState};
use crate::protocol::oversized::{ReceiverConfig, SenderConfig, TransferBody, TransferFrame};
use crate::protocol::resumable::messages::{self as stream_msg, StreamRef};
use crate::protocol::resumable::server::{StoreConfig, StoreStats, StreamStore};
use nostr::prelude::{Event, EventId, PublicKey};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// JSON-RPC error codes the server uses.
pub mod codes {
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad tool name or arguments.
    pub const INVALID_PARAMS: i64 = super::tool_codes::INVALID_PARAMS;
    /// The response could not be delivered (too large without a token, stream aborted).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The `fail` tool.
    pub const TOOL_FAILED: i64 = super::tool_codes::TOOL_FAILED;
}

/// The lowest budget a size rejection can push the server to.
const MIN_BUDGET: usize = 4096;

/// How a server behaves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// What the server advertises.
    pub capabilities: Capabilities,
    /// Largest published event; larger responses go out as CEP-22.
    pub budget: usize,
    /// Limits for oversized requests.
    pub oversized: ReceiverConfig,
    /// Keepalive of the streams it writes.
    pub writer: WriterConfig,
    /// Resumable streams, for clients that advertise them.
    pub streams: StoreConfig,
    /// Whose CEP-22 and CEP-41 engines the server runs.
    pub implementation: Implementation,
    /// Its clock skew and whether it subscribes with `since`.
    pub clock: Clock,
    /// The transport it copies (de-duplication, feeding its own `accept`).
    pub behaviour: Behaviour,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            capabilities: Capabilities::all(),
            budget: 48_000,
            oversized: ReceiverConfig::default(),
            writer: WriterConfig::default(),
            streams: StoreConfig::default(),
            implementation: Implementation::default(),
            clock: Clock::default(),
            behaviour: Behaviour::relaysim(),
        }
    }
}

/// What the server reports about its work (for observers and statistics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A request arrived (after reassembly, for an oversized one).
    Request {
        /// The client.
        client: PublicKey,
        /// JSON-RPC method.
        method: String,
    },
    /// A response went out.
    Responded {
        /// The client.
        client: PublicKey,
        /// How.
        mode: ResponseMode,
    },
    /// A `stream/resume` sent messages again.
    Replayed {
        /// The client.
        client: PublicKey,
        /// Messages sent again.
        messages: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// The resumable-stream store's totals changed (abandoned streams, buffer high-water
    /// marks).
    StreamStats(StoreStats),
    /// A streaming tool wrote a chunk (for chunk latency: written here, read by the client).
    ChunkWritten {
        /// The client.
        client: PublicKey,
        /// The stream's token.
        token: ProgressToken,
        /// The call's JSON-RPC request id (the client's call id).
        request: RequestId,
        /// The chunk index.
        index: u64,
    },
    /// An oversized request (CEP-22 upload) failed in the server's receiver. Neither SDK tells
    /// the client (there is no CEP-22 abort), so the client only sees its call time out; this
    /// says why.
    UploadFailed {
        /// The client.
        client: PublicKey,
        /// The transfer's token (the client's progress token).
        token: ProgressToken,
        /// The failure: its cause family, then the implementation's own words if it gave any.
        cause: String,
    },
}

/// How a response was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseMode {
    /// One event.
    Direct,
    /// A CEP-22 transfer.
    Oversized,
    /// Too large and no progress token: a small error instead.
    TooLarge,
}

struct Call {
    client: PublicKey,
    request_event: EventId,
    request_id: RequestId,
    token: Option<ProgressToken>,
    /// The resumable stream carrying this call's messages.
    stream: Option<String>,
}

enum Job {
    Respond(u64, Result<Value, ErrorObject>),
    WriteChunk(u64),
    /// The `k`-th of `total` progress notifications of a slow call, and the gap to the next.
    Progress(u64, u64, u64, Duration),
}

struct Stream {
    call: u64,
    writer: Box<dyn StreamWriting>,
    written: u64,
    chunks: u64,
    chunk_bytes: usize,
    interval: Duration,
    responded: bool,
    resumable: Option<String>,
    /// The tool's next write waits for the stream's lane: the SDK writer's `write` holds its
    /// lock until the frame before was published, so a waiting chunk has no progress yet.
    write_waiting: bool,
    /// Its frames out and not yet answered: like a socket's send buffer, a full window holds
    /// the tool's next write (see `send_window`), so a writer that outruns its relays waits
    /// instead of piling up frames.
    window: crate::peer::send_window::SendWindow,
    /// The tool's next write waits for room in the window.
    window_waiting: bool,
}

struct DirectResponse {
    call: Call,
    text: String,
    published_size: usize,
}

struct Outgoing {
    client: PublicKey,
    reply_to: EventId,
    sender: Box<dyn TransferSending>,
    resumable: Option<String>,
    /// Its frames out and not yet answered: its next frame waits for room.
    window: crate::peer::send_window::SendWindow,
}

/// A ContextVM server with the simulated tools.
pub struct ContextVmServer {
    core: PeerCore,
    config: ServerConfig,
    tools: Box<dyn ToolHandler>,
    reply_envelope: SignedEventEnvelope,
    /// The budget in force: the configured one, lowered when a relay rejects an event as too
    /// large.
    budget: usize,
    now: Duration,
    clients: BTreeMap<PublicKey, (Capabilities, bool)>,
    calls: BTreeMap<u64, Call>,
    next_call: u64,
    timers: BTreeMap<(Duration, u64), Job>,
    timer_seq: u64,
    streams: BTreeMap<(PublicKey, ProgressToken), Stream>,
    uploads: Box<dyn TransferReceiving<PublicKey>>,
    upload_origin: BTreeMap<(PublicKey, ProgressToken), EventId>,
    outgoing: BTreeMap<(PublicKey, ProgressToken), Outgoing>,
    direct: BTreeMap<EventId, DirectResponse>,
    events: VecDeque<ServerEvent>,
    malformed: u64,
    store: StreamStore<PublicKey>,
    /// Each resumable stream's client and request event (replies point at it).
    stream_origin: BTreeMap<String, (PublicKey, EventId)>,
    reported_stats: StoreStats,
}

impl ContextVmServer {
    /// Rewrites the content of each event this peer signs (see `PeerCore::tamper`): a
    /// fault for tests of the simulator itself.
    #[cfg(test)]
    pub(crate) fn tamper_outgoing(&mut self, tamper: fn(&str) -> Option<String>) {
        self.core.tamper = Some(tamper);
    }

    /// A server using `relays`, drawing tool output from `rng`. The driver calls
    /// [`Peer::connected`] for each relay once its connection is up.
    pub fn new(
        identity: Identity,
        relays: Vec<RelayName>,
        config: ServerConfig,
        rng: ChaCha8Rng,
    ) -> Self {
        // Any 32-byte key and event id measure the same: only lengths matter.
        let reply_envelope = SignedEventEnvelope::measure(
            &identity,
            &identity.public_key(),
            Some(&EventId::from_byte_array([0; 32])),
            EPOCH_SECS,
        );
        let store = StreamStore::new(
            config.streams.clone(),
            identity.derived_secret("relaysim/resumable-streams"),
        );
        ContextVmServer {
            store,
            stream_origin: BTreeMap::new(),
            reported_stats: StoreStats::default(),
            core: {
                let mut core = PeerCore::new(identity, relays);
                core.set_clock(config.clock);
                core.set_dedup(config.behaviour.dedup);
                core.set_publish_wait(config.behaviour.publish_wait);
                core
            },
            // Requests are read from their parsed messages only, so a large one is not held
            // twice while it is parsed, and a very large one's long argument reaches the tool
            // in segments.
            uploads: config.implementation.transfer_receiver(ReceiverConfig {
                feed_accept: config.behaviour.feed_accept,
                keep_text: false,
                long_in_segments: true,
                ..config.oversized.clone()
            }),
            budget: config.budget,
            config,
            tools: Box::new(SimulatedTools::new(rng)),
            reply_envelope,
            now: Duration::ZERO,
            clients: BTreeMap::new(),
            calls: BTreeMap::new(),
            next_call: 0,
            timers: BTreeMap::new(),
            timer_seq: 0,
            streams: BTreeMap::new(),
            upload_origin: BTreeMap::new(),
            outgoing: BTreeMap::new(),
            direct: BTreeMap::new(),
            events: VecDeque::new(),
            malformed: 0,
        }
    }

    /// The same server offering `tools` instead of the simulated ones.
    pub fn with_tools(mut self, tools: Box<dyn ToolHandler>) -> Self {
        self.tools = tools;
        self
    }

    /// The server's public key.
    pub fn public_key(&self) -> PublicKey {
        self.core.public_key()
    }

    /// The next event for observers.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Events that were not valid JSON-RPC.
    pub fn malformed_messages(&self) -> u64 {
        self.malformed
    }

    /// Duplicate event deliveries dropped (a duplicated request is never run twice).
    pub fn duplicates_dropped(&self) -> u64 {
        self.core.duplicates_dropped()
    }

    fn schedule(&mut self, at: Duration, job: Job) {
        self.timer_seq += 1;
        self.timers.insert((at, self.timer_seq), job);
    }

    fn on_event(&mut self, event: &Event) {
        let client = event.pubkey;
        let advertised = Capabilities::of(event);
        self.clients
            .entry(client)
            .or_insert((Capabilities::default(), false))
            .0
            .learn(advertised);
        // A chunk read straight from its text is the frame the general path reads.
        if let Some(frame) = crate::protocol::chunk_text::read(&event.content) {
            return self.on_frame(client, event.id, frame);
        }
        match Message::parse(&event.content) {
            Ok(message) => self.on_message(client, event.id, message),
            Err(_) => self.malformed += 1,
        }
    }

    fn on_message(&mut self, client: PublicKey, event_id: EventId, message: Message) {
        match message {
            Message::Request { id, method, params } => {
                self.on_request(client, event_id, id, method, params, None)
            }
            Message::Notification {
                ref method,
                ref params,
            } if method == stream_msg::ACK => {
                if let Some(Ok(r)) = params.as_ref().map(StreamRef::from_params) {
                    let _ = self.store.ack(&client, &r, self.now);
                }
            }
            Message::Notification { .. } => {
                let Some(Ok(params)) = message.into_progress_params() else {
                    return;
                };
                if let Some(frame) = ProgressFrame::from_params(&params) {
                    self.on_frame(client, event_id, frame);
                }
            }
            Message::Response { .. } | Message::Error { .. } => {}
        }
    }

    /// A CEP-22 or CEP-41 frame from `client`.
    fn on_frame(&mut self, client: PublicKey, event_id: EventId, frame: ProgressFrame) {
        match frame {
            ProgressFrame::Transfer(frame) => self.on_transfer_frame(client, event_id, frame),
            ProgressFrame::Stream(frame) => {
                if let Some(stream) = self.streams.get_mut(&(client, frame.token.clone())) {
                    stream.writer.handle_frame(&frame, self.now);
                }
            }
        }
    }

    fn on_transfer_frame(&mut self, client: PublicKey, event_id: EventId, frame: TransferFrame) {
        let key = (client, frame.token.clone());
        // Accept or abort for a response we are sending.
        if matches!(
            frame.body,
            TransferBody::Accept | TransferBody::Abort { .. }
        ) {
            if let Some(out) = self.outgoing.get_mut(&key) {
                out.sender.handle_frame(&frame);
                return;
            }
        }
        if matches!(frame.body, TransferBody::Start { .. }) {
            self.upload_origin.entry(key).or_insert(event_id);
        }
        // Every upload is answered with accept: whether the client waits depends on whether our
        // capability tags reached it before it started, which the server cannot know (a
        // response carrying them may still be in flight). The receiver completes either
        // numbering, so an accept the client did not need costs one event.
        self.uploads.handle_frame(&client, frame, self.now);
    }
}

/// The publish lane of one transfer's or stream's frames to `client`.
pub(super) fn lane_of(client: &PublicKey, token: &ProgressToken) -> String {
    format!("{client} {}", token.to_value())
}

fn error(code: i64, message: String) -> ErrorObject {
    ErrorObject {
        code,
        message,
        data: None,
    }
}

impl Peer for ContextVmServer {
    fn set_epoch_secs(&mut self, secs: u64) {
        self.core.set_epoch_secs(secs);
    }

    fn connected(&mut self, relay: &str, now: Duration) {
        self.now = now;
        self.core.subscribe(relay, now);
    }

    fn handle_relay_message(&mut self, relay: &str, message: RelayMessage, now: Duration) {
        self.now = now;
        if let Some(event) = self.core.handle_relay_message(relay, message, now) {
            self.on_event(&event);
        }
        self.pump();
    }

    fn poll_transmit(&mut self) -> Option<(RelayName, ClientMessage)> {
        self.core.poll_transmit()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        let timers = self.timers.keys().next().map(|(t, _)| *t);
        let writers = self
            .streams
            .values()
            .filter_map(|s| s.writer.poll_timeout());
        let senders = self
            .outgoing
            .values()
            .filter_map(|o| o.sender.poll_timeout());
        timers
            .into_iter()
            .chain(writers)
            .chain(senders)
            .chain(self.uploads.poll_timeout())
            .chain(self.store.poll_timeout())
            .chain(self.core.poll_timeout())
            .chain(
                self.outgoing
                    .values()
                    .filter_map(|o| o.window.poll_timeout()),
            )
            .chain(
                self.streams
                    .values()
                    .filter(|s| s.window_waiting)
                    .filter_map(|s| s.window.poll_timeout()),
            )
            .min()
    }

    fn handle_timeout(&mut self, now: Duration) {
        self.now = now;
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let job = entry.remove();
            self.run_job(job);
            self.pump();
        }
        for stream in self.streams.values_mut() {
            stream.writer.handle_timeout(now);
        }
        for o in self.outgoing.values_mut() {
            o.sender.handle_timeout(now);
        }
        self.uploads.handle_timeout(now);
        self.store.handle_timeout(now);
        self.core.handle_timeout(now);
        self.pump();
    }
}
