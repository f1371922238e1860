//! The CEP-41 writer: emits `start`, `chunk`…, `close`/`abort`, answers `ping`, keeps the
//! stream alive.
//!
//! Every frame goes through one FIFO queue and receives its `progress` when it is emitted, so
//! `progress` strictly increases over everything the writer sends (pongs and pings included)
//! and a keepalive frame can never overtake a chunk written before it. While the writer waits
//! for `accept`, chunks (and anything queued behind them) stay in the queue.

use super::frame::{StreamBody, StreamFrame};
use super::keepalive::{Keepalive, KeepaliveAction};
use super::policy::StreamFailure;
use crate::protocol::jsonrpc::ProgressToken;
use std::collections::VecDeque;
use std::time::Duration;

/// How a writer behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterConfig {
    /// Wait for `accept` before the first chunk (the reader's support is not known).
    pub wait_for_accept: bool,
    /// Give up waiting for `accept` after this long.
    pub accept_timeout: Duration,
    /// Put `lastChunkIndex` on `close` (a finite stream). Omitted anyway when no chunk was sent.
    pub declare_bound: bool,
    /// Silence from the reader before a keepalive `ping`.
    pub idle_timeout: Duration,
    /// Wait for the matching `pong`.
    pub probe_timeout: Duration,
    /// Largest nonce of the reader's pings that is answered.
    pub max_nonce_bytes: usize,
    /// `progress` of the `start` frame.
    pub first_progress: u64,
    /// Optional `contentType` on `start`.
    pub content_type: Option<String>,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            wait_for_accept: false,
            accept_timeout: Duration::from_secs(30),
            declare_bound: true,
            idle_timeout: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(20),
            max_nonce_bytes: 64,
            first_progress: 1,
            content_type: None,
        }
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// `close` or `abort` was already called, or the stream failed.
    #[error("the stream has ended")]
    Ended,
}

/// Where a writer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriterState {
    /// Nothing written yet; `start` goes out with the first write (or close).
    Idle,
    /// Started; chunks flow (or wait for `accept`, see [`OpenStreamWriter::awaiting_accept`]).
    Open,
    /// `close` queued: nothing more may be written.
    Closing,
    /// `close` emitted: the stream is complete on this side.
    Closed,
    /// Ended without success; an `abort` may still be waiting in the queue.
    Failed(StreamFailure),
}

/// One CEP-41 stream, writing side.
#[derive(Debug)]
pub struct OpenStreamWriter {
    token: ProgressToken,
    config: WriterConfig,
    state: WriterState,
    queue: VecDeque<StreamBody>,
    next_progress: u64,
    chunks_written: u64,
    keepalive: Option<Keepalive>,
    /// Set while chunks wait for `accept`: when the wait gives up.
    accept_deadline: Option<Duration>,
}

impl OpenStreamWriter {
    /// A writer for the stream named `token`.
    pub fn new(token: ProgressToken, config: WriterConfig) -> Self {
        OpenStreamWriter {
            next_progress: config.first_progress,
            token,
            config,
            state: WriterState::Idle,
            queue: VecDeque::new(),
            chunks_written: 0,
            keepalive: None,
            accept_deadline: None,
        }
    }

    /// The stream's token.
    pub fn token(&self) -> &ProgressToken {
        &self.token
    }

    /// The current state.
    pub fn state(&self) -> &WriterState {
        &self.state
    }

    /// True while chunks wait for the reader's `accept`.
    pub fn awaiting_accept(&self) -> bool {
        self.accept_deadline.is_some()
    }

    /// Chunks written so far.
    pub fn chunks_written(&self) -> u64 {
        self.chunks_written
    }

    /// True when nothing remains to send and the stream has ended.
    pub fn is_done(&self) -> bool {
        self.queue.is_empty() && matches!(self.state, WriterState::Closed | WriterState::Failed(_))
    }

    fn ensure_started(&mut self, now: Duration) {
        if self.state != WriterState::Idle {
            return;
        }
        self.queue.push_back(StreamBody::Start {
            content_type: self.config.content_type.clone(),
            metadata: Default::default(),
        });
        self.keepalive = Some(Keepalive::new(
            self.config.idle_timeout,
            self.config.probe_timeout,
            now,
        ));
        self.accept_deadline = self
            .config
            .wait_for_accept
            .then(|| now + self.config.accept_timeout);
        self.state = WriterState::Open;
    }

    fn accepts_writes(&self) -> bool {
        matches!(self.state, WriterState::Idle | WriterState::Open)
    }

    /// Writes one chunk (sending `start` first if needed).
    pub fn write(&mut self, data: impl Into<String>, now: Duration) -> Result<u64, WriteError> {
        if !self.accepts_writes() {
            return Err(WriteError::Ended);
        }
        self.ensure_started(now);
        let chunk_index = self.chunks_written;
        self.chunks_written += 1;
        self.queue.push_back(StreamBody::Chunk {
            chunk_index,
            data: data.into(),
        });
        Ok(chunk_index)
    }

    /// Closes the stream successfully after everything written so far.
    pub fn close(&mut self, now: Duration) -> Result<(), WriteError> {
        if !self.accepts_writes() {
            return Err(WriteError::Ended);
        }
        self.ensure_started(now);
        let last_chunk_index =
            (self.config.declare_bound && self.chunks_written > 0).then(|| self.chunks_written - 1);
        self.queue.push_back(StreamBody::Close { last_chunk_index });
        self.state = WriterState::Closing;
        Ok(())
    }

    /// Aborts: unsent chunks are dropped and an `abort` goes out next. No effect once ended.
    pub fn abort(&mut self, reason: &str) {
        let failure = StreamFailure::AbortedLocally {
            reason: reason.to_owned(),
        };
        self.fail_with(failure, Some(reason.to_owned()));
    }

    fn fail_with(&mut self, failure: StreamFailure, abort_reason: Option<String>) {
        if matches!(self.state, WriterState::Closed | WriterState::Failed(_)) {
            return;
        }
        let started = self.state != WriterState::Idle;
        // A start still in the queue has not gone out: the peer knows of no stream to abort.
        let start_unsent = matches!(self.queue.front(), Some(StreamBody::Start { .. }));
        self.queue.clear();
        self.accept_deadline = None;
        if started && !start_unsent {
            if let Some(reason) = abort_reason {
                self.queue.push_back(StreamBody::Abort {
                    reason: Some(reason),
                });
            }
        }
        self.state = WriterState::Failed(failure);
    }

    /// The next frame to publish, if one may go at `now`.
    pub fn poll_transmit(&mut self, _now: Duration) -> Option<StreamFrame> {
        let gated = self.awaiting_accept();
        match self.queue.front() {
            None => return None,
            Some(StreamBody::Chunk { .. }) if gated => return None,
            Some(StreamBody::Close { .. }) if gated => return None,
            Some(_) => {}
        }
        let body = self.queue.pop_front()?;
        if matches!(body, StreamBody::Close { .. }) {
            self.state = WriterState::Closed;
        }
        let progress = self.next_progress;
        self.next_progress += 1;
        Some(StreamFrame {
            token: self.token.clone(),
            progress,
            message: None,
            body,
        })
    }

    /// Takes a frame from the reader: `accept`, `ping`, `pong` or `abort`. Returns whether it
    /// was valid for this stream (and so counted as activity).
    pub fn handle_frame(&mut self, frame: &StreamFrame, now: Duration) -> bool {
        if frame.token != self.token
            || !frame.in_range()
            || matches!(
                self.state,
                WriterState::Idle | WriterState::Closed | WriterState::Failed(_)
            )
        {
            return false;
        }
        let valid = match &frame.body {
            StreamBody::Accept => {
                if self.accept_deadline.take().is_some() {
                    self.next_progress = self.next_progress.max(frame.progress + 1);
                }
                true
            }
            StreamBody::Ping { nonce } => {
                if nonce.len() > self.config.max_nonce_bytes {
                    false
                } else {
                    self.enqueue_control(StreamBody::Pong {
                        nonce: nonce.clone(),
                    });
                    true
                }
            }
            StreamBody::Pong { nonce } => {
                let matched = self.keepalive.as_mut().is_some_and(|k| k.pong(nonce, now));
                return matched;
            }
            StreamBody::Abort { reason } => {
                self.fail_with(
                    StreamFailure::AbortedByPeer {
                        reason: reason.clone(),
                    },
                    None,
                );
                return true;
            }
            StreamBody::Start { .. } | StreamBody::Chunk { .. } | StreamBody::Close { .. } => false,
        };
        if valid {
            if let Some(k) = self.keepalive.as_mut() {
                k.heard(now);
            }
        }
        valid
    }

    /// Queues a ping or pong behind every chunk already written but ahead of a queued `close`,
    /// so nothing ever follows the terminal frame.
    fn enqueue_control(&mut self, body: StreamBody) {
        match self.queue.back() {
            Some(StreamBody::Close { .. }) => {
                let at = self.queue.len() - 1;
                self.queue.insert(at, body);
            }
            _ => self.queue.push_back(body),
        }
    }

    /// Keepalive runs while the stream is live and not waiting for `accept` (which has its own
    /// timeout).
    fn keepalive_active(&self) -> bool {
        !self.awaiting_accept() && matches!(self.state, WriterState::Open | WriterState::Closing)
    }

    /// When [`OpenStreamWriter::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.accept_deadline.is_some() {
            return self.accept_deadline;
        }
        if self.keepalive_active() {
            return self.keepalive.as_ref().map(Keepalive::poll_timeout);
        }
        None
    }

    /// Runs the accept and keepalive timers.
    pub fn handle_timeout(&mut self, now: Duration) {
        if let Some(deadline) = self.accept_deadline {
            if now >= deadline {
                self.fail_with(StreamFailure::AcceptTimeout, Some("accept timeout".into()));
            }
            return;
        }
        if !self.keepalive_active() {
            return;
        }
        let Some(keepalive) = self.keepalive.as_mut() else {
            return;
        };
        match keepalive.on_timeout(now) {
            KeepaliveAction::Nothing => {}
            KeepaliveAction::Ping(nonce) => self.enqueue_control(StreamBody::Ping { nonce }),
            KeepaliveAction::ProbeTimedOut => {
                self.fail_with(StreamFailure::ProbeTimeout, Some("probe timeout".into()));
            }
        }
    }
}
