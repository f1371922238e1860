//! The SDK's CEP-41 engines: the writer with the keepalive its transport runs, and the reader
//! (the SDK's registry and sessions).

use super::*;

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
    /// A writer for `token`; of relaysim's `config` it takes `content_type` and the keepalive
    /// times, which the SDK writer's options also take (their defaults are the same, 30 s idle
    /// and 20 s probe). It never waits for `accept`, as the SDK writer does not.
    pub fn new(token: ProgressToken, config: WriterConfig) -> Self {
        let queue: Outbox = Arc::new(Mutex::new(VecDeque::new()));
        let writer = SdkWriter::new(OpenStreamWriterOptions {
            progress_token: token_text(&token),
            publish_frame: queueing_publisher(queue.clone()),
            content_type: config.content_type.clone(),
            on_close: None,
            on_abort: None,
            idle_timeout: None,
            probe_timeout: config.probe_timeout,
        });
        SdkStreamWriter {
            token,
            writer,
            queue,
            state: WriterState::Idle,
            written: 0,
            idle: config.idle_timeout,
            probe: config.probe_timeout,
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
    /// `start` arrived (a session opened at request time waits for it).
    started: bool,
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
    /// Largest ping nonce answered. The SDK session refuses nonces over 64 bytes (the Rust
    /// reader's cap); a reader copying one without the cap (the TS reader) sets more, and
    /// longer nonces reach the session under a short alias.
    max_nonce: usize,
    /// The alias of the ping being handled and the nonce it stands for: the session answers
    /// (or not) within that one frame, so nothing outlives it.
    nonce_alias: Option<(String, String)>,
    next_alias: u64,
}

/// The SDK session's cap on ping nonces (`MAX_OPEN_STREAM_PING_NONCE_BYTES`).
const SDK_NONCE_CAP: usize = 64;

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
            max_nonce: policy.max_nonce_bytes,
            nonce_alias: None,
            next_alias: 0,
        }
    }

    /// `frame` as the SDK session is to see it: a ping whose nonce is over the session's cap
    /// but within this reader's gets a short alias, answered with the original nonce.
    fn aliased(&mut self, mut frame: StreamFrame) -> StreamFrame {
        if let StreamBody::Ping { nonce } = &mut frame.body {
            if nonce.len() > SDK_NONCE_CAP && nonce.len() <= self.max_nonce {
                self.next_alias += 1;
                let alias = format!("alias:{}", self.next_alias);
                let original = std::mem::replace(nonce, alias.clone());
                self.nonce_alias = Some((alias, original));
            }
        }
        frame
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

impl<P: Clone + Ord + Send> SdkStreamReader<P> {
    /// One frame through the SDK's registry, and what it says back.
    fn handle_sdk_frame(&mut self, peer: &P, frame: StreamFrame, now: Duration) {
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
        let (started, ended) = self
            .streams
            .get(&key)
            .map_or((false, false), |s| (s.started, s.ended));
        if ended {
            // A session that failed before its `start` is gone from the registry; a late
            // `start` makes a new one there, but the caller holds the dead one (as an SDK
            // client's binding does) and never hears of it.
            return;
        }
        if is_start && result.is_ok() && !started {
            let session = registry.get_session(&token_text(&frame.token));
            let stream = self.streams.entry(key.clone()).or_insert(ReaderStream {
                session: None,
                next_index: 0,
                own_progress: 0,
                exhausted: false,
                ended: false,
                started: false,
            });
            stream.session = stream.session.take().or(session);
            stream.started = true;
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
                let nonce = match self.nonce_alias.take() {
                    Some((alias, original)) if alias == nonce => original,
                    _ => nonce,
                };
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
}

impl<P: Clone + Ord + Send> StreamReading<P> for SdkStreamReader<P> {
    fn handle_frame(&mut self, peer: &P, frame: StreamFrame, now: Duration) {
        let frame = self.aliased(frame);
        self.handle_sdk_frame(peer, frame, now);
        self.nonce_alias = None;
    }

    fn set_send_accept(&mut self, send_accept: bool) {
        self.send_accept = send_accept;
    }

    fn open(&mut self, peer: &P, token: &ProgressToken, _now: Duration) {
        // As `call_tool_stream` binds its reader when the request goes out.
        let policy = self.policy;
        let registry = self
            .registries
            .entry(peer.clone())
            .or_insert_with(|| SdkRegistry::with_policy(policy));
        let session = registry.create_session(token_text(token)).ok();
        self.streams
            .entry((peer.clone(), token.clone()))
            .or_insert(ReaderStream {
                session,
                next_index: 0,
                own_progress: 0,
                exhausted: false,
                ended: false,
                started: false,
            });
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

    fn release(&mut self, peer: &P, token: &ProgressToken) {
        let key = (peer.clone(), token.clone());
        if self.streams.get(&key).is_some_and(|s| !s.started) {
            self.streams.remove(&key);
            if let Some(registry) = self.registries.get_mut(peer) {
                // No publisher is wired to a pre-opened session: nothing goes on the wire.
                let _ = in_place(registry.consumer_abort(&token_text(token), None));
            }
        }
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
