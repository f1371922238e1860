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

use super::capabilities::Capabilities;
use super::client::PROTOCOL_VERSION;
use super::content::payload_text;
use super::core::{Clock, PeerCore, PublishOutcome};
use super::engines::Implementation;
use super::event::SignedEventEnvelope;
use super::streams::{stream_tag, STREAM_TAG_ROOM};
use super::tools::{
    digest_of, digested_result, stream_chunk_text, text_result, tool_list, ToolCall,
};
use super::Peer;
use crate::nip01::{ClientMessage, RelayMessage, RelayName};
use crate::nip01::{Identity, EPOCH_SECS};
use crate::protocol::endpoint::{StreamWriting, TransferReceiving, TransferSending};
use crate::protocol::jsonrpc::{ErrorObject, Message, ProgressToken, RequestId};
use crate::protocol::open_stream::{StreamFrame, WriterConfig, WriterState};
use crate::protocol::oversized::{
    ReceiverConfig, ReceiverEvent, SenderConfig, TransferBody, TransferFrame,
};
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
    pub const INVALID_PARAMS: i64 = -32602;
    /// The response could not be delivered (too large without a token, stream aborted).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The `fail` tool.
    pub const TOOL_FAILED: i64 = -32000;
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
        /// The chunk index.
        index: u64,
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
}

/// A ContextVM server with the simulated tools.
pub struct ContextVmServer {
    core: PeerCore,
    config: ServerConfig,
    rng: ChaCha8Rng,
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
                core
            },
            uploads: config
                .implementation
                .transfer_receiver(config.oversized.clone()),
            budget: config.budget,
            config,
            rng,
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

    fn on_event(&mut self, event: Event) {
        let client = event.pubkey;
        let advertised = Capabilities::of(&event);
        self.clients
            .entry(client)
            .or_insert((Capabilities::default(), false))
            .0
            .learn(advertised);
        match Message::parse(&event.content) {
            Ok(message) => self.on_message(client, event.id, message),
            Err(_) => self.malformed += 1,
        }
    }

    fn on_message(&mut self, client: PublicKey, event_id: EventId, message: Message) {
        match message {
            Message::Request { id, method, params } => {
                self.on_request(client, event_id, id, method, params)
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
                let Some(Ok(params)) = message.progress_params() else {
                    return;
                };
                if let Ok(frame) = TransferFrame::from_params(&params) {
                    self.on_transfer_frame(client, event_id, frame);
                } else if let Ok(frame) = StreamFrame::from_params(&params) {
                    if let Some(stream) = self.streams.get_mut(&(client, frame.token.clone())) {
                        stream.writer.handle_frame(&frame, self.now);
                    }
                }
            }
            Message::Response { .. } | Message::Error { .. } => {}
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

    fn on_request(
        &mut self,
        client: PublicKey,
        request_event: EventId,
        id: RequestId,
        method: String,
        params: Option<Value>,
    ) {
        self.events.push_back(ServerEvent::Request {
            client,
            method: method.clone(),
        });
        let params = params.unwrap_or(Value::Null);
        let token = params
            .pointer("/_meta/progressToken")
            .and_then(|v| match v {
                Value::String(s) => Some(ProgressToken::String(s.clone())),
                Value::Number(n) => n.as_i64().map(ProgressToken::Number),
                _ => None,
            });
        self.next_call += 1;
        let call_id = self.next_call;
        self.calls.insert(
            call_id,
            Call {
                client,
                request_event,
                request_id: id.clone(),
                token: token.clone(),
                stream: None,
            },
        );
        let now = self.now;
        if method == "tools/call" {
            let long = matches!(
                ToolCall::parse(&params),
                Ok(ToolCall::Stream { .. } | ToolCall::Slow { .. } | ToolCall::LargeResult { .. })
            );
            if long {
                self.open_resumable(call_id, &id);
            }
        }
        let immediate = match method.as_str() {
            "initialize" => Ok(json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "relaysim-server", "version": env!("CARGO_PKG_VERSION") },
            })),
            "tools/list" => Ok(tool_list()),
            stream_msg::RESUME => self.resume(client, &params),
            stream_msg::POLL => StreamRef::from_params(&params)
                .map_err(|e| error(stream_msg::codes::INVALID_PARAMS, e.to_string()))
                .and_then(|r| {
                    self.store
                        .poll(&client, &r, now)
                        .map(|p| p.to_value())
                        .map_err(|e| error(e.code(), e.to_string()))
                }),
            stream_msg::POLL_ALL => {
                let cursor = params.get("cursor").and_then(Value::as_str);
                let (page, next) = self.store.poll_all(&client, cursor, now);
                let mut result = json!({
                    "streams": page.iter().map(|p| p.to_value()).collect::<Vec<_>>(),
                });
                if let Some(c) = next {
                    result["nextCursor"] = c.into();
                }
                Ok(result)
            }
            "tools/call" => match ToolCall::parse(&params) {
                Err(e) => Err(error(codes::INVALID_PARAMS, e.to_string())),
                Ok(ToolCall::Echo { text }) => Ok(text_result(&text)),
                Ok(ToolCall::LargeResult { bytes, content }) => Ok(digested_result(&payload_text(
                    content,
                    bytes,
                    &mut self.rng,
                ))),
                Ok(ToolCall::Upload { data }) => Ok(text_result(&digest_of(&data))),
                Ok(ToolCall::Fail { reason }) => Err(error(codes::TOOL_FAILED, reason)),
                Ok(ToolCall::Slow {
                    duration,
                    progress_every,
                }) => {
                    if let (Some(every), Some(_)) = (progress_every, &token) {
                        let total = (duration.as_micros() / every.as_micros().max(1)) as u64;
                        if total > 0 {
                            self.schedule(now + every, Job::Progress(call_id, 1, total, every));
                        }
                    }
                    self.schedule(
                        now + duration,
                        Job::Respond(call_id, Ok(text_result("done"))),
                    );
                    return;
                }
                Ok(ToolCall::Stream {
                    chunks,
                    chunk_bytes,
                    interval,
                }) => match token {
                    None => Err(error(
                        codes::INVALID_PARAMS,
                        "stream needs a progressToken".into(),
                    )),
                    Some(token) => {
                        let supports = self.clients.get(&client).is_some_and(|c| c.0.open_stream);
                        let config = WriterConfig {
                            wait_for_accept: !supports,
                            ..self.config.writer.clone()
                        };
                        let resumable = self.calls.get(&call_id).and_then(|c| c.stream.clone());
                        let config = match (&resumable, self.config.streams.resume_interval.max) {
                            (Some(_), Some(max)) => WriterConfig {
                                probe_timeout: config.probe_timeout.max(Duration::from_secs(max)),
                                ..config
                            },
                            _ => config,
                        };
                        let writer = self
                            .config
                            .implementation
                            .stream_writer(token.clone(), config);
                        self.streams.insert(
                            (client, token),
                            Stream {
                                call: call_id,
                                writer,
                                written: 0,
                                chunks,
                                chunk_bytes,
                                interval,
                                responded: false,
                                resumable,
                            },
                        );
                        self.schedule(now, Job::WriteChunk(call_id));
                        return;
                    }
                },
            },
            _ => Err(error(
                codes::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            )),
        };
        self.respond(call_id, immediate);
    }

    /// Opens a resumable stream for call `call_id` if its client advertised them, and
    /// announces it with `notifications/stream/create`.
    fn open_resumable(&mut self, call_id: u64, request_id: &RequestId) {
        let Some(call) = self.calls.get(&call_id) else {
            return;
        };
        let (client, request_event) = (call.client, call.request_event);
        let wants = self
            .clients
            .get(&client)
            .is_some_and(|c| c.0.resumable_streams);
        if !wants {
            return;
        }
        let Some(create) = self
            .store
            .create(client, Some(request_id.clone()), self.now)
        else {
            return; // the store is full: this call goes without one
        };
        let note = Message::Notification {
            method: stream_msg::CREATE.into(),
            params: Some(create.to_params()),
        };
        self.stream_origin
            .insert(create.stream_id.clone(), (client, request_event));
        if let Some(call) = self.calls.get_mut(&call_id) {
            call.stream = Some(create.stream_id);
        }
        let event = self.core.sign(
            &client,
            Some(&request_event),
            Vec::new(),
            note.to_json(),
            self.now,
        );
        self.core.publish(event);
    }

    /// Publishes `text` to `client`, on resumable stream `stream` when given (recorded there and
    /// tagged with its sequence number).
    fn publish_message(
        &mut self,
        client: &PublicKey,
        reply_to: Option<&EventId>,
        mut tags: Vec<nostr::prelude::Tag>,
        text: String,
        stream: Option<&str>,
    ) -> EventId {
        if let Some(seq) = stream.and_then(|id| self.store.record(id, &text)) {
            tags.push(stream_tag(stream.expect("recorded"), seq, None));
        }
        let event = self.core.sign(client, reply_to, tags, text, self.now);
        self.core.publish(event)
    }

    /// Ends resumable stream `stream`: its `notifications/stream/end` is its last message.
    fn end_resumable(&mut self, stream: &str) {
        let Some((seq, text)) = self.store.end(stream, self.now) else {
            return;
        };
        let Some(&(client, origin)) = self.stream_origin.get(stream) else {
            return;
        };
        let tags = vec![stream_tag(stream, seq, None)];
        let event = self.core.sign(&client, Some(&origin), tags, text, self.now);
        self.core.publish(event);
    }

    /// `stream/resume`: publishes the held messages after `lastSequence` again, marked as this
    /// replay, then answers with how many.
    fn resume(&mut self, client: PublicKey, params: &Value) -> Result<Value, ErrorObject> {
        let r = StreamRef::from_params(params)
            .map_err(|e| error(stream_msg::codes::INVALID_PARAMS, e.to_string()))?;
        let replay = self
            .store
            .resume(&client, &r, self.now)
            .map_err(|e| error(e.code(), e.to_string()))?;
        let origin = self.stream_origin.get(&r.stream_id).map(|o| o.1);
        let mut bytes = 0u64;
        for m in &replay.messages {
            bytes += m.text.len() as u64;
            let tags = vec![stream_tag(&r.stream_id, m.seq, Some(replay.number))];
            let event = self
                .core
                .sign(&client, origin.as_ref(), tags, m.text.clone(), self.now);
            self.core.publish(event);
        }
        self.events.push_back(ServerEvent::Replayed {
            client,
            messages: replay.messages.len() as u64,
            bytes,
        });
        let mut answer = json!({ "streamId": r.stream_id, "replayed": replay.messages.len() });
        if replay.more {
            // Paged: the client asks again from the last sequence it got.
            answer["more"] = true.into();
            answer["through"] = replay.messages.last().map_or(0, |m| m.seq).into();
        }
        Ok(answer)
    }

    fn capability_tags(&mut self, client: PublicKey) -> Vec<nostr::prelude::Tag> {
        let entry = self
            .clients
            .entry(client)
            .or_insert((Capabilities::default(), false));
        if entry.1 {
            return Vec::new();
        }
        entry.1 = true;
        self.config.capabilities.tags()
    }

    /// Publishes the final response of a call: directly, as CEP-22, or as a too-large error.
    fn respond(&mut self, call_id: u64, response: Result<Value, ErrorObject>) {
        let Some(call) = self.calls.remove(&call_id) else {
            return;
        };
        let message = match response {
            Ok(result) => Message::Response {
                id: call.request_id.clone(),
                result,
            },
            Err(error) => Message::Error {
                id: Some(call.request_id.clone()),
                error,
            },
        };
        let text = message.to_json();
        let tags = self.capability_tags(call.client);
        let event = self.core.sign(
            &call.client,
            Some(&call.request_event),
            tags.clone(),
            text.clone(),
            self.now,
        );
        let published_size = event.as_json().len();
        let room = if call.stream.is_some() {
            STREAM_TAG_ROOM
        } else {
            0
        };
        if published_size + room <= self.budget {
            let client = call.client;
            let id = match call.stream.clone() {
                None => self.core.publish(event),
                Some(stream) => {
                    let id = self.publish_message(
                        &client,
                        Some(&call.request_event),
                        tags,
                        text.clone(),
                        Some(&stream),
                    );
                    self.end_resumable(&stream);
                    id
                }
            };
            if call.token.is_some() {
                self.direct.insert(
                    id,
                    DirectResponse {
                        call,
                        text,
                        published_size,
                    },
                );
            }
            self.events.push_back(ServerEvent::Responded {
                client,
                mode: ResponseMode::Direct,
            });
        } else {
            self.send_oversized(call, text);
        }
    }

    fn send_oversized(&mut self, call: Call, text: String) {
        let client = call.client;
        let Some(token) = call.token.clone() else {
            self.publish_error(
                &call,
                "response too large to publish and the request had no progressToken".into(),
            );
            self.events.push_back(ServerEvent::Responded {
                client,
                mode: ResponseMode::TooLarge,
            });
            return;
        };
        let supports = self
            .clients
            .get(&client)
            .is_some_and(|c| c.0.oversized_transfer);
        let room = if call.stream.is_some() {
            STREAM_TAG_ROOM
        } else {
            0
        };
        let config = SenderConfig {
            budget: self.budget.saturating_sub(room),
            wait_for_accept: !supports,
            ..SenderConfig::default()
        };
        let sender = self.config.implementation.transfer_sender(
            token.clone(),
            text,
            config,
            &self.reply_envelope,
        );
        match sender {
            Ok(sender) => {
                self.outgoing.insert(
                    (client, token),
                    Outgoing {
                        client,
                        reply_to: call.request_event,
                        sender,
                        resumable: call.stream.clone(),
                    },
                );
                self.events.push_back(ServerEvent::Responded {
                    client,
                    mode: ResponseMode::Oversized,
                });
            }
            Err(e) => self.publish_error(&call, e.to_string()),
        }
    }

    /// Publishes a small internal-error response to `call` (when its real response cannot go).
    fn publish_error(&mut self, call: &Call, message: String) {
        let small = Message::Error {
            id: Some(call.request_id.clone()),
            error: error(codes::INTERNAL_ERROR, message),
        };
        self.publish_message(
            &call.client,
            Some(&call.request_event),
            Vec::new(),
            small.to_json(),
            call.stream.as_deref(),
        );
        if let Some(stream) = &call.stream {
            self.end_resumable(stream);
        }
    }

    fn run_job(&mut self, job: Job) {
        match job {
            Job::Respond(call, response) => self.respond(call, response),
            Job::Progress(call_id, k, total, every) => {
                let Some(call) = self.calls.get(&call_id) else {
                    return; // answered already
                };
                let Some(token) = call.token.clone() else {
                    return;
                };
                let (client, origin, stream) =
                    (call.client, call.request_event, call.stream.clone());
                let note = Message::Notification {
                    method: "notifications/progress".into(),
                    params: Some(json!({
                        "progressToken": token.to_value(),
                        "progress": k,
                        "total": total,
                    })),
                };
                self.publish_message(
                    &client,
                    Some(&origin),
                    Vec::new(),
                    note.to_json(),
                    stream.as_deref(),
                );
                if k < total {
                    let at = self.now + every;
                    self.schedule(at, Job::Progress(call_id, k + 1, total, every));
                }
            }
            Job::WriteChunk(call) => {
                let now = self.now;
                let Some((client, stream)) = self
                    .streams
                    .iter_mut()
                    .find(|(_, s)| s.call == call)
                    .map(|((c, _), s)| (c, s))
                else {
                    return;
                };
                if stream.written < stream.chunks {
                    let text = stream_chunk_text(stream.written, stream.chunk_bytes);
                    if let Ok(index) = stream.writer.write(text, now) {
                        stream.written += 1;
                        self.events.push_back(ServerEvent::ChunkWritten {
                            client: *client,
                            token: stream.writer.token().clone(),
                            index,
                        });
                    }
                }
                if stream.written == stream.chunks {
                    let _ = stream.writer.close(now);
                } else if !matches!(stream.writer.state(), WriterState::Failed(_)) {
                    let at = now + stream.interval;
                    self.schedule(at, Job::WriteChunk(call));
                }
            }
        }
    }

    /// Publishes what the engines have to send and finishes streams that ended.
    fn pump(&mut self) {
        let now = self.now;
        while let Some((id, outcome)) = self.core.poll_publish_outcome() {
            let Some(direct) = self.direct.remove(&id) else {
                continue;
            };
            if outcome == PublishOutcome::SizeRejected {
                // The relays' limit is below this event's size, and we do not know by how
                // much: retry (and from now on send) with half of it.
                self.budget = self.budget.min(direct.published_size / 2).max(MIN_BUDGET);
                self.send_oversized(direct.call, direct.text);
            }
        }
        // Oversized requests that completed are requests like any other.
        while let Some(event) = self.uploads.poll_event() {
            if let ReceiverEvent::Completed {
                peer,
                token,
                message,
            } = event
            {
                let origin = self.upload_origin.remove(&(peer, token));
                match (Message::parse(&message), origin) {
                    (Ok(Message::Request { id, method, params }), Some(origin)) => {
                        self.on_request(peer, origin, id, method, params)
                    }
                    _ => self.malformed += 1,
                }
            }
        }
        type Out = (PublicKey, Option<EventId>, String, Option<String>);
        let mut out: Vec<Out> = Vec::new();
        while let Some((client, frame)) = self.uploads.poll_transmit() {
            let origin = self
                .upload_origin
                .get(&(client, frame.token.clone()))
                .copied();
            out.push((client, origin, frame.to_json(), None));
        }
        let mut transfers_done: Vec<String> = Vec::new();
        for o in self.outgoing.values_mut() {
            while let Some(frame) = o.sender.poll_transmit(now) {
                out.push((
                    o.client,
                    Some(o.reply_to),
                    frame.to_json(),
                    o.resumable.clone(),
                ));
            }
            if o.sender.is_done() {
                transfers_done.extend(o.resumable.clone());
            }
        }
        self.outgoing.retain(|_, o| !o.sender.is_done());
        let mut finished: Vec<(u64, Result<Value, ErrorObject>)> = Vec::new();
        for ((client, _), stream) in self.streams.iter_mut() {
            let reply_to = self.calls.get(&stream.call).map(|c| c.request_event);
            while let Some(frame) = stream.writer.poll_transmit(now) {
                out.push((*client, reply_to, frame.to_json(), stream.resumable.clone()));
            }
            if stream.responded {
                continue;
            }
            match stream.writer.state() {
                WriterState::Closed => {
                    stream.responded = true;
                    let text = format!("streamed {} chunks", stream.written);
                    finished.push((stream.call, Ok(text_result(&text))));
                }
                WriterState::Failed(failure) => {
                    stream.responded = true;
                    finished.push((
                        stream.call,
                        Err(error(
                            codes::INTERNAL_ERROR,
                            format!("stream aborted: {failure}"),
                        )),
                    ));
                }
                _ => {}
            }
        }
        for (client, reply_to, text, stream) in out {
            self.publish_message(
                &client,
                reply_to.as_ref(),
                Vec::new(),
                text,
                stream.as_deref(),
            );
        }
        // A CEP-22 response's stream ends after its last frame.
        for stream in transfers_done {
            self.end_resumable(&stream);
        }
        // The final response goes out after the close (or abort) frame just published.
        for (call, response) in finished {
            self.respond(call, response);
        }
        let stats = self.store.stats();
        if stats != self.reported_stats {
            // The store frees streams only as it counts them (acknowledged or abandoned): then
            // their origins are needed no more.
            let store = &self.store;
            self.stream_origin.retain(|id, _| store.holds(id));
            self.reported_stats = stats;
            self.events.push_back(ServerEvent::StreamStats(stats));
        }
        self.streams
            .retain(|_, s| !(s.responded && s.writer.is_done()));
    }
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
        if let Some(event) = self.core.handle_relay_message(relay, message) {
            self.on_event(event);
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
        self.pump();
    }
}
