//! The CEP-22 sender: turns one serialized JSON-RPC message into `start`, (`accept` wait),
//! `chunk`…, `end` frames.
//!
//! Sans-IO: the driver calls [`OversizedSender::poll_transmit`] for the next frame to publish,
//! feeds frames from the receiver to [`OversizedSender::handle_frame`], and honours
//! [`OversizedSender::poll_timeout`] / [`OversizedSender::handle_timeout`] for the accept wait.
//!
//! Numbering: `progress` counts up by one per frame of the transfer. In bootstrap mode the
//! receiver's `accept` takes the value after `start` (as in the spec's example and the reference
//! SDKs: start 1, accept 2, first chunk 3); if an accept arrives with a higher value, the sender
//! continues above it, so `progress` stays strictly increasing over all frames either way.

use super::chunking::{plan_chunks_segmented, ChunkingError};
use super::frame::{Digest, TransferBody, TransferFrame, COMPLETION_MODE_RENDER};
use crate::protocol::envelope::Envelope;
use crate::protocol::jsonrpc::ProgressToken;
use crate::segmented::Segmented;
use std::ops::Range;
use std::time::Duration;

/// The reference SDKs' default chunk budget, in bytes of published event.
pub const DEFAULT_CHUNK_BUDGET: usize = 48_000;
/// How long a bootstrap sender waits for `accept` by default (as the reference Rust SDK).
pub const DEFAULT_ACCEPT_TIMEOUT: Duration = Duration::from_secs(30);

/// How a sender frames a transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderConfig {
    /// Largest published event, in bytes, any frame of the transfer may become.
    pub budget: usize,
    /// Bootstrap mode: wait for `accept` before the first chunk (the receiver's support is not
    /// known). Direct mode when false.
    pub wait_for_accept: bool,
    /// Number the frames for the handshake (chunks after a slot for `accept`) without waiting
    /// for it, as the TS client does (sdk-behaviour §2.3). Implied by `wait_for_accept`.
    pub accept_slot: bool,
    /// How long to wait for `accept` before aborting.
    pub accept_timeout: Duration,
    /// `progress` of the `start` frame.
    pub first_progress: u64,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            budget: DEFAULT_CHUNK_BUDGET,
            wait_for_accept: false,
            accept_slot: false,
            accept_timeout: DEFAULT_ACCEPT_TIMEOUT,
            first_progress: 1,
        }
    }
}

/// Why a sender stopped without completing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SenderFailure {
    /// No `accept` came within the accept timeout.
    #[error("no accept within the accept timeout")]
    AcceptTimeout,
    /// The receiver aborted the transfer.
    #[error("aborted by the receiver: {reason:?}")]
    AbortedByPeer {
        /// The receiver's advisory reason.
        reason: Option<String>,
    },
    /// The application aborted the transfer.
    #[error("aborted locally: {reason}")]
    AbortedLocally {
        /// The reason sent in the abort frame.
        reason: String,
    },
}

impl SenderFailure {
    /// A short, stable cause name for statistics.
    pub fn cause(&self) -> &'static str {
        match self {
            SenderFailure::AcceptTimeout => "accept-timeout",
            SenderFailure::AbortedByPeer { .. } => "aborted-by-peer",
            SenderFailure::AbortedLocally { .. } => "aborted-locally",
        }
    }
}

/// Where a sender is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SenderState {
    /// `start` not yet emitted.
    Starting,
    /// `start` emitted; no chunk until `accept` arrives.
    AwaitingAccept {
        /// When the wait gives up.
        deadline: Duration,
    },
    /// Emitting chunks; `next` is the index of the next one.
    Sending {
        /// Index of the next chunk.
        next: usize,
    },
    /// All chunks emitted; `end` is next.
    Ending,
    /// `end` emitted: the sender's part is complete.
    Finished,
    /// Stopped; an abort frame may still be waiting in `poll_transmit`.
    Failed(SenderFailure),
}

/// One CEP-22 transfer, sending side.
pub struct OversizedSender {
    token: ProgressToken,
    /// The message's text, read once, chunk after chunk: its segments are freed as sending
    /// advances (`segmented`), so a 1 GiB response is not held whole beside the receiver's
    /// reassembly of it.
    payload: Segmented,
    ranges: Vec<Range<usize>>,
    digest: Digest,
    config: SenderConfig,
    next_progress: u64,
    state: SenderState,
    pending_abort: Option<TransferFrame>,
}

/// Without the payload's bytes: a transfer's text can be a gigabyte.
impl std::fmt::Debug for OversizedSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OversizedSender")
            .field("token", &self.token)
            .field("payload_bytes", &self.payload.len())
            .field("chunks", &self.ranges.len())
            .field("digest", &self.digest)
            .field("config", &self.config)
            .field("next_progress", &self.next_progress)
            .field("state", &self.state)
            .field("pending_abort", &self.pending_abort)
            .finish()
    }
}

impl OversizedSender {
    /// Plans a transfer of `payload` (the exact serialized JSON-RPC message) under `token`.
    ///
    /// Fails when the budget cannot hold a frame; every frame this sender emits publishes
    /// within `config.budget` under `envelope`.
    pub fn new(
        token: ProgressToken,
        payload: impl Into<Segmented>,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Self, ChunkingError> {
        let payload = payload.into();
        let ranges = plan_chunks_segmented(&payload, &token, config.budget, envelope)?;
        let digest = Digest::of_parts(payload.segments());
        let sender = OversizedSender {
            next_progress: config.first_progress,
            token,
            payload,
            ranges,
            digest,
            config,
            state: SenderState::Starting,
            pending_abort: None,
        };
        // Control frames must fit too; measure them at the widest progress value.
        for body in [sender.start_body(), TransferBody::End] {
            let what = body.frame_type();
            let frame = TransferFrame {
                token: sender.token.clone(),
                progress: u64::MAX,
                message: None,
                body,
            };
            let needed = envelope.published_size(&frame.to_json());
            if needed > sender.config.budget {
                return Err(ChunkingError::BudgetTooSmall {
                    budget: sender.config.budget,
                    what,
                    needed,
                });
            }
        }
        Ok(sender)
    }

    fn start_body(&self) -> TransferBody {
        TransferBody::Start {
            completion_mode: Some(COMPLETION_MODE_RENDER.into()),
            digest: self.digest,
            total_bytes: self.payload.len() as u64,
            total_chunks: self.ranges.len() as u64,
        }
    }

    /// The transfer's progress token.
    pub fn token(&self) -> &ProgressToken {
        &self.token
    }

    /// How many chunk frames the transfer has.
    pub fn total_chunks(&self) -> usize {
        self.ranges.len()
    }

    /// The current state.
    pub fn state(&self) -> &SenderState {
        &self.state
    }

    /// True once `end` or `abort` has been emitted and nothing remains to send.
    pub fn is_done(&self) -> bool {
        self.pending_abort.is_none()
            && matches!(self.state, SenderState::Finished | SenderState::Failed(_))
    }

    /// True when [`OversizedSender::poll_transmit`] has a frame ready (it is not waiting for
    /// `accept` and has not finished).
    pub fn has_pending(&self) -> bool {
        self.pending_abort.is_some()
            || matches!(
                self.state,
                SenderState::Starting | SenderState::Sending { .. } | SenderState::Ending
            )
    }

    fn frame(&mut self, body: TransferBody) -> TransferFrame {
        let progress = self.next_progress;
        self.next_progress += 1;
        TransferFrame {
            token: self.token.clone(),
            progress,
            message: None,
            body,
        }
    }

    /// The next frame to publish, if any is ready at `now`.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<TransferFrame> {
        if let Some(abort) = self.pending_abort.take() {
            return Some(abort);
        }
        match self.state {
            SenderState::Starting => {
                let body = self.start_body();
                let start = self.frame(body);
                if self.config.wait_for_accept || self.config.accept_slot {
                    // The receiver's accept takes the next progress value.
                    self.next_progress += 1;
                }
                self.state = if self.config.wait_for_accept {
                    SenderState::AwaitingAccept {
                        deadline: now + self.config.accept_timeout,
                    }
                } else {
                    self.after_chunk(0)
                };
                Some(start)
            }
            SenderState::Sending { next } => {
                // Chunks go in order and none is sent twice: what precedes this one's end
                // will not be read again.
                let data = self.payload.take(self.ranges[next].clone());
                let chunk = self.frame(TransferBody::Chunk { data });
                self.state = self.after_chunk(next + 1);
                Some(chunk)
            }
            SenderState::Ending => {
                self.state = SenderState::Finished;
                Some(self.frame(TransferBody::End))
            }
            SenderState::AwaitingAccept { .. } | SenderState::Finished | SenderState::Failed(_) => {
                None
            }
        }
    }

    fn after_chunk(&self, next: usize) -> SenderState {
        if next < self.ranges.len() {
            SenderState::Sending { next }
        } else {
            SenderState::Ending
        }
    }

    /// Takes a frame the receiver sent for this transfer (`accept` or `abort`). Frames for
    /// another token, and frames a sender has no use for, are ignored; returns whether the
    /// frame changed anything.
    pub fn handle_frame(&mut self, frame: &TransferFrame) -> bool {
        if frame.token != self.token || self.is_terminal() || !frame.in_range() {
            return false;
        }
        match &frame.body {
            TransferBody::Accept => {
                if let SenderState::AwaitingAccept { .. } = self.state {
                    self.next_progress = self.next_progress.max(frame.progress + 1);
                    self.state = self.after_chunk(0);
                    true
                } else {
                    false // a duplicate accept, or one we did not wait for
                }
            }
            TransferBody::Abort { reason } => {
                self.state = SenderState::Failed(SenderFailure::AbortedByPeer {
                    reason: reason.clone(),
                });
                true
            }
            _ => false,
        }
    }

    fn is_terminal(&self) -> bool {
        matches!(self.state, SenderState::Finished | SenderState::Failed(_))
    }

    /// Aborts the transfer: an `abort` frame with `reason` is queued and nothing else follows.
    /// No effect once the transfer has ended.
    pub fn abort(&mut self, reason: &str) {
        if self.is_terminal() {
            return;
        }
        let frame = self.frame(TransferBody::Abort {
            reason: Some(reason.to_owned()),
        });
        self.pending_abort = Some(frame);
        self.state = SenderState::Failed(SenderFailure::AbortedLocally {
            reason: reason.to_owned(),
        });
    }

    /// When the sender next needs [`OversizedSender::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Duration> {
        match self.state {
            SenderState::AwaitingAccept { deadline } => Some(deadline),
            _ => None,
        }
    }

    /// Gives up waiting for `accept` once its deadline has passed; queues an abort.
    pub fn handle_timeout(&mut self, now: Duration) {
        if let SenderState::AwaitingAccept { deadline } = self.state {
            if now >= deadline {
                self.abort("accept timeout");
                self.state = SenderState::Failed(SenderFailure::AcceptTimeout);
            }
        }
    }
}
