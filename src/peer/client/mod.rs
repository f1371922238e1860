//! The ContextVM client peer: MCP requests out, responses, CEP-22 transfers and CEP-41 streams
//! in, all inside kind-25910 events. Sans-IO like the engines it drives.
//!
//! Correlation: a response is matched to its call by JSON-RPC id; transfer and stream frames by
//! progress token (every call that may stream or transfer carries one). The server also tags
//! them with `["e", request_event_id]`.

mod receiving;
mod sending;

use super::behaviour::{Behaviour, PublishWait, ReaderSession, Tokens};
use super::capabilities::Capabilities;
use super::core::{Clock, PeerCore, PublishOutcome};
use super::engines::Implementation;
use super::event::SignedEventEnvelope;
use super::streams::stream_position;
use super::Peer;
use crate::nip01::{ClientMessage, RelayMessage, RelayName};
use crate::nip01::{Identity, EPOCH_SECS};
use crate::protocol::endpoint::{StreamReading, TransferReceiving, TransferSending};
use crate::protocol::jsonrpc::{ErrorObject, Message, ProgressToken, RequestId};
use crate::protocol::open_stream::{RegistryEvent, StreamChunk, StreamFailure, StreamPolicy};
use crate::protocol::oversized::{
    ReceiverConfig, ReceiverEvent, SenderConfig, SenderFailure, SenderState, TransferBody,
    TransferFailure,
};
use crate::protocol::resumable::client::{
    Arrival, FollowerConfig, FollowerEvent, FollowerRequest, StreamFollower,
};
use crate::protocol::resumable::messages::{self as stream_msg, PollResult, StreamCreate};
use crate::segmented::Segmented;
use nostr::prelude::{Event, EventId, PublicKey};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// Identifies a call; it is also the JSON-RPC id of the request.
pub type CallId = u64;

/// MCP protocol version the peers speak.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// How a client behaves.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server's public key.
    pub server: PublicKey,
    /// What this client advertises.
    pub capabilities: Capabilities,
    /// Skip `initialize`; advertise capabilities on the first request instead.
    pub stateless: bool,
    /// A call fails when nothing about it arrives for this long (valid frames refresh it).
    pub request_timeout: Duration,
    /// A call fails after this long whatever arrives.
    pub max_request_timeout: Duration,
    /// Largest published event; larger requests go out as CEP-22 transfers.
    pub budget: usize,
    /// Limits for oversized responses.
    pub oversized: ReceiverConfig,
    /// Limits for streams.
    pub stream_policy: StreamPolicy,
    /// When to resume or poll resumable streams (with `capabilities.resumable_streams`).
    pub follower: FollowerConfig,
    /// Whose CEP-22 and CEP-41 engines the client runs.
    pub implementation: Implementation,
    /// Its clock skew and whether it subscribes with `since`.
    pub clock: Clock,
    /// The transport it copies (de-duplication, token shape, waiting for `accept`).
    pub behaviour: Behaviour,
}

/// How long a client with resumable streams lets a CEP-41 keepalive probe go unanswered: a
/// server's `resumeInterval.max` by default. Its liveness is the resumable stream's business:
/// a `pong` lost with the connection comes back when the stream resumes (and a lost `ping` is
/// sent again then).
pub const RESUMABLE_PROBE_TIMEOUT: Duration = Duration::from_secs(300);

impl ClientConfig {
    /// Defaults for a client of `server`: everything supported, stateful, 60 s soft (the MCP
    /// SDKs' default request timeout, and longer than the 30 s stream keepalive so pings and
    /// pongs can keep a quiet call alive) and 5 min hard request timeouts, the SDKs'
    /// 48,000-byte budget.
    pub fn new(server: PublicKey) -> Self {
        ClientConfig {
            server,
            capabilities: Capabilities::all(),
            stateless: false,
            request_timeout: Duration::from_secs(60),
            max_request_timeout: Duration::from_secs(300),
            budget: 48_000,
            // The receiver answers `start` with `accept`: a server that does not know our
            // support waits for it, and one that does not wait is handled all the same.
            oversized: ReceiverConfig::default(),
            stream_policy: StreamPolicy::default(),
            follower: FollowerConfig::default(),
            implementation: Implementation::default(),
            clock: Clock::default(),
            behaviour: Behaviour::relaysim(),
        }
    }

    /// Advertises MCP resumable streams (see [`crate::protocol::resumable`]), and lets CEP-41
    /// keepalive probes wait [`RESUMABLE_PROBE_TIMEOUT`].
    pub fn with_resumable_streams(mut self) -> Self {
        self.capabilities.resumable_streams = true;
        self.stream_policy.probe_timeout = self
            .stream_policy
            .probe_timeout
            .max(RESUMABLE_PROBE_TIMEOUT);
        self
    }
}

/// Why a call ended without a response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailure {
    /// Nothing about the call arrived within the request timeout.
    #[error("request timed out")]
    Timeout,
    /// The hard maximum ran out.
    #[error("request exceeded the hard timeout")]
    HardTimeout,
    /// The request is too large to publish and has no progress token for CEP-22.
    #[error("request too large to publish without a progress token")]
    RequestTooLarge,
    /// Every relay rejected the request (not for size).
    #[error("relays rejected the request: {0}")]
    Rejected(String),
    /// The oversized response failed.
    #[error("oversized response failed: {0}")]
    Download(TransferFailure),
    /// The call timed out after its transport failed something of it without telling the
    /// caller (both SDKs only log a failed CEP-22 download, sdk-behaviour §2.5): what failed.
    #[error("request timed out after {0}")]
    TimeoutAfter(String),
    /// The oversized request failed.
    #[error("oversized request failed: {0}")]
    Upload(SenderFailure),
    /// The call's resumable stream lost messages the server could not send again.
    #[error("the server could not resume the call's stream: {0}")]
    ResumeRefused(String),
    /// A hosted program failed the call, in its own words (its SDK's error text).
    #[error("{0}")]
    Program(String),
}

impl CallFailure {
    /// Another implementation's own words for this failure, if it gave them.
    pub fn detail(&self) -> Option<&str> {
        match self {
            CallFailure::Download(f) => f.detail(),
            CallFailure::TimeoutAfter(what) | CallFailure::Program(what) => Some(what),
            _ => None,
        }
    }

    /// A short, stable cause name for statistics.
    pub fn cause(&self) -> String {
        match self {
            CallFailure::Timeout | CallFailure::TimeoutAfter(_) => "timeout".into(),
            CallFailure::HardTimeout => "hard-timeout".into(),
            CallFailure::RequestTooLarge => "request-too-large".into(),
            CallFailure::Rejected(_) => "rejected".into(),
            CallFailure::Download(f) => format!("download-{}", f.cause()),
            CallFailure::Upload(f) => format!("upload-{}", f.cause()),
            CallFailure::ResumeRefused(_) => "resume-refused".into(),
            CallFailure::Program(text) => program_cause(text).into(),
        }
    }
}

/// The cause family of a foreign program's failure in its own words: a program's words vary,
/// so its timeouts ("… timed out", or the outcome-file word `timeout`, alone or after a
/// `what: `) are told apart from its other errors. Hosted programs and served commands alike.
pub fn program_cause(words: &str) -> &'static str {
    let timed_out = words.to_lowercase().contains("timed out")
        || words == "timeout"
        || words.ends_with(": timeout");
    if timed_out {
        "program-timeout"
    } else {
        "program-error"
    }
}

/// What the client tells the application.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// `initialize` answered.
    Initialized {
        /// What the server advertised.
        capabilities: Capabilities,
    },
    /// The final JSON-RPC response of a call.
    Response {
        /// The call.
        call: CallId,
        /// Its result or error.
        response: Result<Value, ErrorObject>,
    },
    /// The server started a stream for a call.
    StreamOpened {
        /// The call.
        call: CallId,
    },
    /// A call's stream ended.
    StreamEnded {
        /// The call.
        call: CallId,
        /// Closed successfully, or why not.
        outcome: Result<(), StreamFailure>,
    },
    /// A call's resumable stream was resumed after a loss.
    StreamResumed {
        /// The call.
        call: CallId,
        /// From the `stream/resume` request to its answer.
        latency: Duration,
    },
    /// A call ended without a response.
    Failed {
        /// The call.
        call: CallId,
        /// Why.
        failure: CallFailure,
    },
}

/// How a call may use the transports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// Send `_meta.progressToken`, enabling CEP-22 in both directions.
    pub progress: bool,
}

struct PendingCall {
    token: Option<ProgressToken>,
    /// The serialized request, kept while a size rejection could still call for CEP-22.
    request_text: Option<String>,
    request_event: Option<EventId>,
    soft_deadline: Duration,
    hard_deadline: Duration,
    is_initialize: bool,
    /// The request carried our capability tags.
    advertised: bool,
    /// Silence allowed before the call fails: the request timeout, or for a call on a
    /// resumable stream the stream's `resumeInterval.max` if longer.
    patience: Duration,
    /// A failure the transport kept from the call (see [`Behaviour::failures_reach_call`]).
    swallowed: Option<String>,
    /// An uploaded request's `start` event, which the server's answer names in its `e` tag.
    upload_start: Option<EventId>,
}

/// A ContextVM client.
pub struct ContextVmClient {
    core: PeerCore,
    config: ClientConfig,
    frame_envelope: SignedEventEnvelope,
    next_id: CallId,
    /// The progress tokens of its calls, in the behaviour's shape.
    tokens: Tokens,
    now: Duration,
    server_capabilities: Capabilities,
    advertised: bool,
    /// Capability tags waiting for the next event to the server (a request that went out as a
    /// transfer advertises on its `start` frame).
    pending_tags: Vec<nostr::prelude::Tag>,
    /// `initialize` has been answered.
    initialized: bool,
    /// The `initialize` call in flight, if any.
    initializing: Option<CallId>,
    /// Calls made before `initialize` was answered, sent once it is.
    deferred: Vec<(CallId, Segmented)>,
    calls: BTreeMap<CallId, PendingCall>,
    by_token: BTreeMap<ProgressToken, CallId>,
    downloads: Box<dyn TransferReceiving<PublicKey>>,
    uploads: BTreeMap<ProgressToken, Box<dyn TransferSending>>,
    /// Each upload's frames out and not yet answered: its next frame waits for room.
    upload_windows: BTreeMap<ProgressToken, crate::peer::send_window::SendWindow>,
    streams: Box<dyn StreamReading<PublicKey>>,
    events: VecDeque<ClientEvent>,
    malformed: u64,
    follower: StreamFollower<Message>,
    /// The call each resumable stream carries.
    stream_calls: BTreeMap<String, CallId>,
    /// Relays connected at least once, and those reconnected whose subscription is not yet
    /// confirmed (EOSE): resumes wait for it, or the replay would find no subscription.
    connected_once: BTreeSet<String>,
    awaiting_eose: BTreeSet<String>,
    stream_duplicates: u64,
}

impl ContextVmClient {
    /// Rewrites the content of each event this peer signs (see `PeerCore::tamper`): a
    /// fault for tests of the simulator itself.
    #[cfg(test)]
    pub(crate) fn tamper_outgoing(&mut self, tamper: fn(&str) -> Option<String>) {
        self.core.tamper = Some(tamper);
    }

    /// A client using `relays`. The driver calls [`Peer::connected`] for each relay once its
    /// connection is up; the client then subscribes there.
    pub fn new(identity: Identity, relays: Vec<RelayName>, config: ClientConfig) -> Self {
        let frame_envelope =
            SignedEventEnvelope::measure(&identity, &config.server, None, EPOCH_SECS);
        let mut core = PeerCore::new(identity, relays);
        core.set_clock(config.clock);
        core.set_dedup(config.behaviour.dedup);
        core.set_publish_wait(config.behaviour.publish_wait);
        ContextVmClient {
            follower: StreamFollower::new(config.follower.clone()),
            stream_calls: BTreeMap::new(),
            connected_once: BTreeSet::new(),
            awaiting_eose: BTreeSet::new(),
            stream_duplicates: 0,
            // Responses are read from their parsed messages only, so a large one is not held
            // twice while it is parsed.
            downloads: config.implementation.transfer_receiver(ReceiverConfig {
                keep_text: false,
                ..config.oversized.clone()
            }),
            streams: config.implementation.stream_reader(StreamPolicy {
                max_nonce_bytes: config.behaviour.nonce_limit.unwrap_or(usize::MAX),
                ..config.stream_policy.clone()
            }),
            core,
            frame_envelope,
            tokens: Tokens::new(config.behaviour.tokens.clone()),
            config,
            next_id: 1,
            now: Duration::ZERO,
            server_capabilities: Capabilities::default(),
            advertised: false,
            pending_tags: Vec::new(),
            initialized: false,
            initializing: None,
            deferred: Vec::new(),
            calls: BTreeMap::new(),
            by_token: BTreeMap::new(),
            uploads: BTreeMap::new(),
            upload_windows: BTreeMap::new(),
            events: VecDeque::new(),
            malformed: 0,
        }
    }

    /// The client's public key.
    pub fn public_key(&self) -> PublicKey {
        self.core.public_key()
    }

    /// What the server has advertised so far.
    pub fn server_capabilities(&self) -> Capabilities {
        self.server_capabilities
    }

    /// Events from the server that were not valid JSON-RPC.
    pub fn malformed_messages(&self) -> u64 {
        self.malformed
    }

    /// Duplicate event deliveries dropped.
    pub fn duplicates_dropped(&self) -> u64 {
        self.core.duplicates_dropped()
    }

    /// Messages on resumable streams dropped as already processed (replays and duplicates).
    pub fn stream_duplicates(&self) -> u64 {
        self.stream_duplicates
    }

    /// Calls still waiting for their response.
    pub fn pending_calls(&self) -> usize {
        self.calls.len()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Sends `initialize` (stateful operation), advertising this client's capabilities. A
    /// stateful client that is asked for a call first initializes on its own and sends the call
    /// once `initialize` is answered.
    pub fn initialize(&mut self, now: Duration) -> CallId {
        self.now = now;
        let capabilities = if self.config.capabilities.resumable_streams {
            json!({ "streams": {} })
        } else {
            json!({})
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": capabilities,
            "clientInfo": { "name": "relaysim", "version": env!("CARGO_PKG_VERSION") },
        });
        let id = self.send_request("initialize", params, None, None, true);
        self.initializing = Some(id);
        id
    }

    /// Calls a tool. With `options.progress` the request carries a progress token, so either
    /// side may use CEP-22 and the server may stream.
    pub fn call_tool(
        &mut self,
        name: &str,
        arguments: Value,
        options: CallOptions,
        now: Duration,
    ) -> CallId {
        self.call_tool_with_long_argument(name, arguments, None, options, now)
    }

    /// As [`ContextVmClient::call_tool`], with `long` the text of the one argument that holds
    /// [`crate::nip01::json_segmented::LONG_STRING`] ([`crate::peer::tools::ToolCall::into_request`]):
    /// the request's text is written around it a segment at a time, and a CEP-22 upload frees
    /// each segment once sent, so a very large argument is held about once.
    pub fn call_tool_with_long_argument(
        &mut self,
        name: &str,
        arguments: Value,
        long: Option<Segmented>,
        options: CallOptions,
        now: Duration,
    ) -> CallId {
        self.now = now;
        let id = self.next_id;
        let token = options.progress.then(|| self.tokens.mint(id));
        let mut params =
            crate::peer::tools::object([("name", name.into()), ("arguments", arguments)]);
        if let Some(t) = &token {
            params["_meta"] = json!({ "progressToken": t.to_value() });
        }
        self.send_request("tools/call", params, long, token, false)
    }

    /// The SDK's `callToolStream`: a call with a progress token whose stream is read with
    /// [`ContextVmClient::read_stream`], whose final result arrives as
    /// [`ClientEvent::Response`], and which [`ContextVmClient::abort_stream`] cancels.
    pub fn call_tool_stream(
        &mut self,
        name: &str,
        arguments: Value,
        now: Duration,
    ) -> (CallId, ProgressToken) {
        let call = self.call_tool(name, arguments, CallOptions { progress: true }, now);
        let token = self.token_of(call).expect("a stream call has a token");
        if self.config.behaviour.reader_session == ReaderSession::AtRequest {
            let server = self.config.server;
            self.streams.open(&server, &token, now);
        }
        (call, token)
    }

    /// The next chunk of a call's stream, in order.
    pub fn read_stream(&mut self, call: CallId) -> Option<StreamChunk> {
        let token = self.token_of(call)?;
        let server = self.config.server;
        self.streams.read(&server, &token)
    }

    /// The progress token of call `call`, if it has one.
    pub fn token_of(&self, call: CallId) -> Option<ProgressToken> {
        self.tokens.of_call(call)
    }

    /// The call a progress token of this client names; `None` for tokens it did not mint.
    pub fn call_of(&self, token: &ProgressToken) -> Option<CallId> {
        // Only calls this client has made: a finished call still takes its stream's frames.
        self.tokens
            .call_of(token)
            .filter(|id| *id > 0 && *id < self.next_id)
    }

    /// Whether a call's stream is still held: open, or ended with chunks not read yet.
    pub fn stream_alive(&self, call: CallId) -> bool {
        self.token_of(call)
            .is_some_and(|token| self.streams.holds(&self.config.server, &token))
    }

    /// Aborts a call's stream: the server is told with an `abort` frame.
    pub fn abort_stream(&mut self, call: CallId, reason: &str, now: Duration) {
        self.now = now;
        let Some(token) = self.token_of(call) else {
            return;
        };
        let server = self.config.server;
        self.streams.abort(&server, &token, reason);
        self.pump();
    }
}

impl Peer for ContextVmClient {
    fn set_epoch_secs(&mut self, secs: u64) {
        self.core.set_epoch_secs(secs);
    }

    fn connected(&mut self, relay: &str, now: Duration) {
        self.now = now;
        self.core.subscribe(relay, now);
        if !self.connected_once.insert(relay.to_owned()) {
            self.awaiting_eose.insert(relay.to_owned());
        }
    }

    fn handle_relay_message(&mut self, relay: &str, message: RelayMessage, now: Duration) {
        self.now = now;
        if matches!(message, RelayMessage::Eose { .. }) && self.awaiting_eose.remove(relay) {
            // Subscribed again after a reconnection: what was published meanwhile is gone.
            self.follower.on_reconnect();
        }
        if let Some(event) = self.core.handle_relay_message(relay, message, now) {
            self.on_event(&event);
        }
        self.drain_engines();
        self.pump();
    }

    fn poll_transmit(&mut self) -> Option<(RelayName, ClientMessage)> {
        self.core.poll_transmit()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        let calls = self
            .calls
            .values()
            .map(|c| self.swept(c.soft_deadline.min(c.hard_deadline)));
        let uploads = self
            .uploads
            .values()
            .filter_map(|s| s.poll_timeout())
            .chain(
                self.upload_windows
                    .values()
                    .filter_map(|w| w.poll_timeout()),
            );
        calls
            .chain(uploads)
            .chain(self.downloads.poll_timeout())
            .chain(self.streams.poll_timeout())
            .chain(self.follower.poll_timeout())
            .chain(self.core.poll_timeout())
            .min()
    }

    fn handle_timeout(&mut self, now: Duration) {
        self.now = now;
        let expired: Vec<(CallId, CallFailure)> = self
            .calls
            .iter()
            .filter_map(|(id, c)| {
                if self.swept(c.hard_deadline) <= now {
                    Some((*id, CallFailure::HardTimeout))
                } else if self.swept(c.soft_deadline) <= now {
                    let failure = match &c.swallowed {
                        Some(what) => CallFailure::TimeoutAfter(what.clone()),
                        None => CallFailure::Timeout,
                    };
                    Some((*id, failure))
                } else {
                    None
                }
            })
            .collect();
        for (call, failure) in expired {
            self.fail_call(call, failure);
        }
        for sender in self.uploads.values_mut() {
            sender.handle_timeout(now);
        }
        self.downloads.handle_timeout(now);
        self.streams.handle_timeout(now);
        self.core.handle_timeout(now);
        self.pump();
    }
}

impl ContextVmClient {
    /// When a call deadline is noticed: at once, or on the next sweep of pending calls when
    /// the behaviour sweeps (sweeps fall on multiples of the interval from virtual time zero).
    fn swept(&self, deadline: Duration) -> Duration {
        let sweep = self.config.behaviour.timer_sweep;
        let Some(every) = sweep.interval(self.config.request_timeout) else {
            return deadline;
        };
        let every = every.as_nanos().max(1);
        let ticks = deadline.as_nanos().div_ceil(every);
        Duration::from_nanos(u64::try_from(ticks * every).unwrap_or(u64::MAX))
    }
}

/// The attempt number in the id of a resume or poll request (`resume-<n>`, `poll-<n>`).
fn attempt_of(id: &str, prefix: &str) -> Option<u64> {
    id.strip_prefix(prefix).and_then(|n| n.parse().ok())
}
