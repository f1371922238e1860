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
use contextvm_sdk::transport::open_stream::{
    FrameOutcome, KeepaliveAction, OpenStreamError, OpenStreamRegistry as SdkRegistry,
    OpenStreamRegistryPolicy, OpenStreamSession, OpenStreamWriter as SdkWriter,
    OpenStreamWriterOptions, PublishFrame, DEFAULT_OPEN_STREAM_IDLE_TIMEOUT_MS,
    DEFAULT_OPEN_STREAM_PROBE_TIMEOUT_MS,
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
        payload: String,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Box<dyn TransferSending>, ChunkingError> {
        Ok(Box::new(SdkTransferSender::new(
            token, payload, config, envelope,
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
        OversizedTransferError::Policy(_) => TransferFailure::Policy("contextvm-sdk policy"),
        OversizedTransferError::Digest(_) => TransferFailure::DigestMismatch,
        OversizedTransferError::Reassembly(m) => TransferFailure::Reassembly(m),
        OversizedTransferError::Sequence(_) => TransferFailure::Sequence("contextvm-sdk sequence"),
    }
}

fn stream_failure(e: OpenStreamError) -> StreamFailure {
    match e {
        OpenStreamError::Abort { reason, .. } => StreamFailure::AbortedByPeer { reason },
        OpenStreamError::Policy(_) => StreamFailure::TooManyStreams,
        OpenStreamError::Sequence(_) => StreamFailure::Sequence("contextvm-sdk sequence"),
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

/// The SDK's CEP-22 receiver: one `OversizedTransferReceiver` per transfer.
pub struct SdkTransferReceiver<P> {
    policy: TransferPolicy,
    timeout: Duration,
    send_accept: bool,
    transfers: BTreeMap<(P, ProgressToken), (OversizedTransferReceiver, Duration)>,
    outbox: VecDeque<(P, TransferFrame)>,
    events: VecDeque<ReceiverEvent<P>>,
}

impl<P: Clone + Ord> SdkTransferReceiver<P> {
    /// A receiver with the SDK's default policy. relaysim's `config` only says whether to
    /// answer `start` with `accept`.
    pub fn new(config: ReceiverConfig) -> Self {
        SdkTransferReceiver {
            policy: TransferPolicy {
                transfer_timeout_ms: 0,
                ..TransferPolicy::default()
            },
            timeout: Duration::from_millis(DEFAULT_TRANSFER_TIMEOUT_MS),
            send_accept: config.send_accept,
            transfers: BTreeMap::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        }
    }
}

impl<P: Clone + Ord + Send> TransferReceiving<P> for SdkTransferReceiver<P> {
    fn handle_frame(&mut self, peer: &P, frame: TransferFrame, now: Duration) {
        let Some(n) = to_sdk(&frame.to_json()) else {
            return;
        };
        let key = (peer.clone(), frame.token.clone());
        let policy = self.policy;
        let fresh = !self.transfers.contains_key(&key);
        let (receiver, _) = self
            .transfers
            .entry(key.clone())
            .or_insert_with(|| (OversizedTransferReceiver::with_policy(policy), now));
        let token = token_text(&frame.token);
        let was_tracking = receiver.is_tracking(&token);
        let result = receiver.process_frame(&n);
        match result {
            Ok(Some(message)) => {
                self.transfers.remove(&key);
                self.events.push_back(ReceiverEvent::Completed {
                    peer: peer.clone(),
                    token: frame.token,
                    message: serde_json::to_string(&message).unwrap_or_default(),
                });
            }
            Ok(None) => {
                let started = !was_tracking && receiver.is_tracking(&token);
                if let (
                    true,
                    TransferBody::Start {
                        total_bytes,
                        total_chunks,
                        ..
                    },
                ) = (started, &frame.body)
                {
                    self.events.push_back(ReceiverEvent::Started {
                        peer: peer.clone(),
                        token: frame.token.clone(),
                        total_bytes: *total_bytes,
                        total_chunks: *total_chunks,
                    });
                    if self.send_accept {
                        // As the SDK's server transport does: send it, and feed it to our own
                        // receiver, which reserves its slot.
                        let accept = TransferFrame {
                            token: frame.token.clone(),
                            progress: 2,
                            message: None,
                            body: TransferBody::Accept,
                        };
                        if let Some(n) = to_sdk(&accept.to_json()) {
                            let _ = receiver.process_frame(&n);
                        }
                        self.outbox.push_back((peer.clone(), accept));
                    }
                } else if fresh && !receiver.is_tracking(&token) {
                    // A frame for nothing the receiver tracks (dropped by it): hold no state.
                    self.transfers.remove(&key);
                }
            }
            Err(e) => {
                self.transfers.remove(&key);
                self.events.push_back(ReceiverEvent::Failed {
                    peer: peer.clone(),
                    token: frame.token,
                    failure: transfer_failure(e),
                });
            }
        }
    }

    fn set_send_accept(&mut self, send_accept: bool) {
        self.send_accept = send_accept;
    }

    fn poll_transmit(&mut self) -> Option<(P, TransferFrame)> {
        self.outbox.pop_front()
    }

    fn poll_event(&mut self) -> Option<ReceiverEvent<P>> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        self.transfers
            .values()
            .map(|(_, started)| *started + self.timeout)
            .min()
    }

    fn handle_timeout(&mut self, now: Duration) {
        let expired: Vec<(P, ProgressToken)> = self
            .transfers
            .iter()
            .filter(|(_, (_, started))| *started + self.timeout <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for (peer, token) in expired {
            self.transfers.remove(&(peer.clone(), token.clone()));
            self.events.push_back(ReceiverEvent::Failed {
                peer,
                token,
                failure: TransferFailure::Timeout,
            });
        }
    }
}

/// The SDK's CEP-22 frames, sent in the order its transport sends them.
pub struct SdkTransferSender {
    start: Option<TransferFrame>,
    chunks: VecDeque<TransferFrame>,
    end: Option<TransferFrame>,
    wait_for_accept: bool,
    accept_timeout: Duration,
    state: SenderState,
}

/// The token the SDK sizes chunks with (a UUID-length placeholder).
const SIZING_TOKEN: &str = "00000000-0000-0000-0000-000000000000";

/// The largest chunk of backslashes (the escaping worst case) whose published frame fits
/// `budget`, in `[1, DEFAULT_CHUNK_SIZE]`, as the SDK's transport chooses it.
fn safe_chunk_size(budget: usize, envelope: &dyn Envelope) -> usize {
    let fits = |n: usize| {
        OversizedFrame::Chunk {
            data: "\\".repeat(n),
        }
        .into_progress_notification(SIZING_TOKEN, 2, None)
        .ok()
        .and_then(|n| serde_json::to_string(&n).ok())
        .is_some_and(|text| envelope.published_size(&text) <= budget)
    };
    let (mut low, mut high, mut best) = (1usize, DEFAULT_CHUNK_SIZE, 1usize);
    while low <= high {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            best = mid;
            low = mid + 1;
        } else {
            high = mid - 1;
        }
    }
    best
}

impl SdkTransferSender {
    /// The SDK's frames for `payload`, chunked to fit `config.budget` under `envelope`.
    pub fn new(
        token: ProgressToken,
        payload: String,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Self, ChunkingError> {
        let chunk = safe_chunk_size(config.budget, envelope);
        let options = OversizedSenderOptions::new(token_text(&token))
            .with_chunk_size(chunk)
            .with_accept_handshake(config.wait_for_accept);
        let too_small = || ChunkingError::BudgetTooSmall {
            budget: config.budget,
            what: "contextvm-sdk chunk",
            needed: config.budget + 1,
        };
        let built = build_oversized_frames(&payload, &options).map_err(|_| too_small())?;
        let convert = |n: &JsonRpcNotification| transfer_frame(n).ok_or_else(too_small);
        let chunks = built
            .chunks
            .iter()
            .map(convert)
            .collect::<Result<VecDeque<_>, _>>()?;
        Ok(SdkTransferSender {
            start: Some(convert(&built.start)?),
            chunks,
            end: Some(convert(&built.end)?),
            wait_for_accept: config.wait_for_accept,
            accept_timeout: config.accept_timeout,
            state: SenderState::Starting,
        })
    }
}

impl TransferSending for SdkTransferSender {
    fn handle_frame(&mut self, frame: &TransferFrame) {
        match (&frame.body, &self.state) {
            (TransferBody::Accept, SenderState::AwaitingAccept { .. }) => {
                self.state = SenderState::Sending { next: 0 };
            }
            (TransferBody::Abort { reason }, s)
                if !matches!(s, SenderState::Finished | SenderState::Failed(_)) =>
            {
                self.state = SenderState::Failed(SenderFailure::AbortedByPeer {
                    reason: reason.clone(),
                });
            }
            _ => {}
        }
    }

    fn poll_transmit(&mut self, now: Duration) -> Option<TransferFrame> {
        match self.state {
            SenderState::Starting => {
                self.state = if self.wait_for_accept {
                    SenderState::AwaitingAccept {
                        deadline: now + self.accept_timeout,
                    }
                } else {
                    SenderState::Sending { next: 0 }
                };
                self.start.take()
            }
            SenderState::Sending { next } => match self.chunks.pop_front() {
                Some(chunk) => {
                    self.state = SenderState::Sending { next: next + 1 };
                    Some(chunk)
                }
                None => {
                    self.state = SenderState::Finished;
                    self.end.take()
                }
            },
            _ => None,
        }
    }

    fn state(&self) -> &SenderState {
        &self.state
    }

    fn is_done(&self) -> bool {
        matches!(self.state, SenderState::Finished | SenderState::Failed(_))
    }

    fn poll_timeout(&self) -> Option<Duration> {
        match self.state {
            SenderState::AwaitingAccept { deadline } => Some(deadline),
            _ => None,
        }
    }

    fn handle_timeout(&mut self, now: Duration) {
        if let SenderState::AwaitingAccept { deadline } = self.state {
            if now >= deadline {
                // The SDK gives up without an abort frame.
                self.state = SenderState::Failed(SenderFailure::AcceptTimeout);
            }
        }
    }
}

type Outbox = Arc<Mutex<VecDeque<JsonRpcNotification>>>;

/// A publish closure that queues what the SDK publishes, for the adapter to hand on.
fn queueing_publisher(queue: Outbox) -> PublishFrame {
    Arc::new(move |n: JsonRpcNotification| {
        queue.lock().expect("not poisoned").push_back(n);
        async { Ok(nostr044::EventId::all_zeros()) }.boxed()
    })
}

/// The SDK's CEP-41 writer.
pub struct SdkStreamWriter {
    token: ProgressToken,
    writer: SdkWriter,
    queue: Outbox,
    state: WriterState,
    written: u64,
    idle: Duration,
    probe: Duration,
    last_heard: Duration,
    outstanding: Option<(String, Duration)>,
}

impl SdkStreamWriter {
    /// A writer for `token`; of relaysim's `config` only `content_type` is used (the SDK's
    /// keepalive defaults apply, and it never waits for `accept`).
    pub fn new(token: ProgressToken, config: WriterConfig) -> Self {
        let queue: Outbox = Arc::new(Mutex::new(VecDeque::new()));
        let writer = SdkWriter::new(OpenStreamWriterOptions {
            progress_token: token_text(&token),
            publish_frame: queueing_publisher(queue.clone()),
            content_type: config.content_type.clone(),
            on_close: None,
            on_abort: None,
            idle_timeout: None,
            probe_timeout: Duration::from_millis(DEFAULT_OPEN_STREAM_PROBE_TIMEOUT_MS),
        });
        SdkStreamWriter {
            token,
            writer,
            queue,
            state: WriterState::Idle,
            written: 0,
            idle: Duration::from_millis(DEFAULT_OPEN_STREAM_IDLE_TIMEOUT_MS),
            probe: Duration::from_millis(DEFAULT_OPEN_STREAM_PROBE_TIMEOUT_MS),
            last_heard: Duration::ZERO,
            outstanding: None,
        }
    }

    fn ended(&self) -> bool {
        matches!(self.state, WriterState::Closed | WriterState::Failed(_))
    }
}

/// Runs a future that only awaits a ready publisher and the SDK's uncontended locks.
fn in_place<T>(f: impl std::future::Future<Output = T>) -> Option<T> {
    f.now_or_never()
}

impl StreamWriting for SdkStreamWriter {
    fn token(&self) -> &ProgressToken {
        &self.token
    }

    fn write(&mut self, data: String, now: Duration) -> Result<u64, WriteError> {
        if self.ended() {
            return Err(WriteError::Ended);
        }
        match in_place(self.writer.write(data)) {
            Some(Ok(())) => {
                if self.state == WriterState::Idle {
                    self.state = WriterState::Open;
                    self.last_heard = now;
                }
                self.written += 1;
                Ok(self.written - 1)
            }
            _ => Err(WriteError::Ended),
        }
    }

    fn close(&mut self, _now: Duration) -> Result<(), WriteError> {
        if self.ended() {
            return Err(WriteError::Ended);
        }
        let _ = in_place(self.writer.close());
        self.state = WriterState::Closed;
        Ok(())
    }

    fn handle_frame(&mut self, frame: &StreamFrame, now: Duration) {
        if self.ended() {
            return;
        }
        // As the SDK's writer: only a ping or the matching pong is liveness.
        match &frame.body {
            StreamBody::Ping { nonce } => {
                self.last_heard = self.last_heard.max(now);
                let _ = in_place(self.writer.pong(nonce.clone()));
            }
            StreamBody::Pong { nonce }
                if self.outstanding.as_ref().is_some_and(|(n, _)| n == nonce) =>
            {
                self.last_heard = self.last_heard.max(now);
                self.writer.ack_probe(nonce);
                self.outstanding = None;
            }
            StreamBody::Abort { reason } => {
                // The SDK's server answers a reader's abort through the writer's `abort`.
                let _ = in_place(self.writer.abort(reason.clone()));
                self.state = WriterState::Failed(StreamFailure::AbortedByPeer {
                    reason: reason.clone(),
                });
            }
            _ => {}
        }
    }

    fn state(&self) -> &WriterState {
        &self.state
    }

    fn poll_transmit(&mut self, _now: Duration) -> Option<StreamFrame> {
        loop {
            let n = self.queue.lock().expect("not poisoned").pop_front()?;
            if let Some(frame) = stream_frame(&n) {
                return Some(frame);
            }
        }
    }

    fn is_done(&self) -> bool {
        self.ended() && self.queue.lock().expect("not poisoned").is_empty()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        if self.state != WriterState::Open {
            return None;
        }
        Some(match &self.outstanding {
            Some((_, deadline)) => *deadline,
            None => self.last_heard + self.idle,
        })
    }

    fn handle_timeout(&mut self, now: Duration) {
        if self.state != WriterState::Open {
            return;
        }
        match &self.outstanding {
            Some((_, deadline)) if now >= *deadline => {
                let _ = in_place(self.writer.abort(Some("Probe timeout".into())));
                self.state = WriterState::Failed(StreamFailure::ProbeTimeout);
            }
            Some(_) => {}
            None if now >= self.last_heard + self.idle => {
                let _ = in_place(self.writer.ping());
                // The ping just queued carries the nonce the `pong` must echo.
                let nonce = self
                    .queue
                    .lock()
                    .expect("not poisoned")
                    .back()
                    .and_then(stream_frame)
                    .and_then(|f| match f.body {
                        StreamBody::Ping { nonce } => Some(nonce),
                        _ => None,
                    });
                if let Some(nonce) = nonce {
                    self.outstanding = Some((nonce, now + self.probe));
                }
            }
            None => {}
        }
    }
}

struct ReaderStream {
    session: Option<OpenStreamSession>,
    next_index: u64,
    own_progress: u64,
    exhausted: bool,
    /// Ended (closed or failed): later errors about it are not news.
    ended: bool,
}

/// The SDK's CEP-41 reader: an `OpenStreamRegistry` per writing peer.
pub struct SdkStreamReader<P> {
    clock: VirtualClock,
    policy: OpenStreamRegistryPolicy,
    sweep: Duration,
    registries: BTreeMap<P, SdkRegistry>,
    streams: BTreeMap<(P, ProgressToken), ReaderStream>,
    send_accept: bool,
    outbox: VecDeque<(P, StreamFrame)>,
    events: VecDeque<RegistryEvent<P>>,
    last_sweep: Duration,
}

impl<P: Clone + Ord> SdkStreamReader<P> {
    /// A reader with the SDK's default policy; relaysim's `policy` only says whether to answer
    /// `start` with `accept`.
    pub fn new(policy: StreamPolicy) -> Self {
        let sdk = OpenStreamRegistryPolicy::default();
        // The SDK's server sweeps its sessions every idle timeout / 2 (15 s by default), within
        // [1 s, 30 s].
        let sweep = Duration::from_millis(sdk.idle_timeout_ms / 2)
            .clamp(Duration::from_secs(1), Duration::from_secs(30));
        SdkStreamReader {
            clock: VirtualClock::new(),
            policy: sdk,
            sweep,
            registries: BTreeMap::new(),
            streams: BTreeMap::new(),
            send_accept: policy.send_accept,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            last_sweep: Duration::ZERO,
        }
    }

    /// Reports a stream's failure once. Errors about streams the reader never opened (frames
    /// before `start`, which the SDK refuses, or after a failure) are not reported: the SDK
    /// gives them no stream to fail.
    fn fail(&mut self, peer: P, token: ProgressToken, failure: StreamFailure) {
        let Some(s) = self.streams.get_mut(&(peer.clone(), token.clone())) else {
            return;
        };
        if s.ended {
            return;
        }
        s.ended = true;
        self.events.push_back(RegistryEvent::Failed {
            peer,
            token,
            failure,
        });
    }

    fn send(&mut self, peer: &P, token: &ProgressToken, body: StreamBody) {
        let Some(s) = self.streams.get_mut(&(peer.clone(), token.clone())) else {
            return;
        };
        s.own_progress += 1;
        self.outbox.push_back((
            peer.clone(),
            StreamFrame {
                token: token.clone(),
                progress: s.own_progress,
                message: None,
                body,
            },
        ));
    }
}

impl<P: Clone + Ord + Send> StreamReading<P> for SdkStreamReader<P> {
    fn handle_frame(&mut self, peer: &P, frame: StreamFrame, now: Duration) {
        let Some(n) = to_sdk(&frame.to_json()) else {
            return;
        };
        let policy = self.policy;
        let registry = self
            .registries
            .entry(peer.clone())
            .or_insert_with(|| SdkRegistry::with_policy(policy));
        let Some(result) = in_place(registry.process_frame(self.clock.at(now), &n)) else {
            return;
        };
        let key = (peer.clone(), frame.token.clone());
        let is_start = matches!(frame.body, StreamBody::Start { .. });
        if is_start && result.is_ok() && !self.streams.contains_key(&key) {
            let session = registry.get_session(&token_text(&frame.token));
            self.streams.insert(
                key.clone(),
                ReaderStream {
                    session,
                    next_index: 0,
                    own_progress: 0,
                    exhausted: false,
                    ended: false,
                },
            );
            self.events.push_back(RegistryEvent::Opened {
                peer: peer.clone(),
                token: frame.token.clone(),
            });
            if self.send_accept {
                self.send(peer, &frame.token, StreamBody::Accept);
            }
        }
        let (peer, token) = key;
        match result {
            Ok(FrameOutcome::None) => {}
            Ok(FrameOutcome::SendPong(nonce)) => {
                self.send(&peer, &token, StreamBody::Pong { nonce })
            }
            Ok(FrameOutcome::Closed) => {
                if let Some(s) = self.streams.get_mut(&(peer.clone(), token.clone())) {
                    s.ended = true;
                }
                self.events
                    .push_back(RegistryEvent::Completed { peer, token })
            }
            Ok(FrameOutcome::Aborted(reason)) => {
                self.fail(peer, token, StreamFailure::AbortedByPeer { reason })
            }
            Err(e) => self.fail(peer, token, stream_failure(e)),
        }
    }

    fn set_send_accept(&mut self, send_accept: bool) {
        self.send_accept = send_accept;
    }

    fn read(&mut self, peer: &P, token: &ProgressToken) -> Option<StreamChunk> {
        let s = self.streams.get_mut(&(peer.clone(), token.clone()))?;
        let session = s.session.as_mut()?;
        match session.next().now_or_never() {
            Some(Some(Ok(data))) => {
                s.next_index += 1;
                Some(StreamChunk {
                    chunk_index: s.next_index - 1,
                    data,
                })
            }
            Some(Some(Err(_))) | Some(None) => {
                s.exhausted = true;
                None
            }
            None => None,
        }
    }

    fn holds(&self, peer: &P, token: &ProgressToken) -> bool {
        self.streams
            .get(&(peer.clone(), token.clone()))
            .is_some_and(|s| !s.exhausted)
    }

    fn abort(&mut self, peer: &P, token: &ProgressToken, reason: &str) {
        if let Some(registry) = self.registries.get_mut(peer) {
            let _ = in_place(registry.consumer_abort(&token_text(token), Some(reason.to_owned())));
        }
        self.send(
            peer,
            token,
            StreamBody::Abort {
                reason: Some(reason.to_owned()),
            },
        );
        self.fail(
            peer.clone(),
            token.clone(),
            StreamFailure::AbortedLocally {
                reason: reason.to_owned(),
            },
        );
    }

    fn reprobe(&mut self, _peer: &P, _token: &ProgressToken) {
        // The SDK's session has no way to send its outstanding ping again.
    }

    fn poll_transmit(&mut self) -> Option<(P, StreamFrame)> {
        self.outbox.pop_front()
    }

    fn poll_event(&mut self) -> Option<RegistryEvent<P>> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        let live = self.registries.values().any(|r| r.size() > 0);
        live.then_some(self.last_sweep + self.sweep)
    }

    fn handle_timeout(&mut self, now: Duration) {
        if now < self.last_sweep + self.sweep {
            return;
        }
        self.last_sweep = now;
        let at = self.clock.at(now);
        let mut actions = Vec::new();
        for (peer, registry) in self.registries.iter_mut() {
            for (token, action) in registry.tick_all(at) {
                actions.push((peer.clone(), ProgressToken::String(token), action));
            }
        }
        // The SDK's registry keeps sessions in a HashMap, so `tick_all` lists them in an order
        // that changes from process to process: sort, so runs repeat exactly.
        actions.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        for (peer, token, action) in actions {
            match action {
                KeepaliveAction::None => {}
                KeepaliveAction::SendPing(nonce) => {
                    self.send(&peer, &token, StreamBody::Ping { nonce })
                }
                KeepaliveAction::Abort(reason) => self.fail(peer, token, tick_failure(&reason)),
            }
        }
    }
}
