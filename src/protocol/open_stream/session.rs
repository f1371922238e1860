//! The CEP-41 session: the reading side of one stream.
//!
//! # Choices where the spec leaves room
//!
//! Relays reorder and duplicate, so arrival order is not stream order:
//!
//! - **Chunks are released in `chunkIndex` order** (the spec's completeness field). A chunk
//!   that arrives ahead of a missing index waits in a bounded reorder buffer
//!   (`max_buffered_chunks_per_stream` / `max_buffered_bytes_per_stream`); overflowing it fails
//!   the stream with [`StreamFailure::ReorderBufferFull`]. Released chunks wait for the
//!   application in a separate bounded queue; overflowing that is
//!   [`StreamFailure::SlowConsumer`], so a slow reader is never mistaken for a bad relay.
//! - **`progress` is checked for consistency, not arrival order.** Unlike a reader that fails on
//!   any non-increasing `progress`, this one only fails on what a relay cannot cause: two
//!   different frames claiming one position (same `chunkIndex` or same `progress` with other
//!   content), `chunkIndex` order that disagrees with `progress` order, a chunk beyond
//!   `close.lastChunkIndex` or numbered after `close`, a second different `start` or `close`.
//!   `progress` may have gaps (the reader's own `accept` takes one, and writers differ on what
//!   else consumes values), so gaps in `progress` are never errors.
//! - **`close` that overtakes chunks** waits for them for `close_grace`; with
//!   `lastChunkIndex` the stream completes once every index up to it is released, also when
//!   the *tail* chunk was the one missing, and fails with [`StreamFailure::GapAtClose`] when the
//!   grace period ends first (it restarts whenever a missing chunk arrives). Without a bound nothing says how many chunks there were, so the
//!   session uses `progress` as a hint: `close` completes at once when no gap is known and every
//!   `progress` value between the last chunk and `close` belongs to a frame it has seen;
//!   otherwise it waits the grace period for a chunk that may still be in flight, then completes
//!   with what it has (or fails, if a known gap remains). The session's own `accept` does not
//!   count: a writer that did not wait for it numbers its first chunk in the same position.
//! - **Identical duplicates are dropped** and counted; a duplicated `ping` is answered once.
//! - **Keepalive**: any valid frame resets the idle timer; an invalid `pong` does not. Pings with
//!   a nonce over `max_nonce_bytes` are ignored (neither answered nor counted as activity).
//! - **Failure keeps what was already released**: chunks that were validated and released
//!   before a failure stay readable; the failure is reported after them.

use super::frame::{StreamBody, StreamFrame};
use super::keepalive::{Keepalive, KeepaliveAction};
use super::policy::{StreamFailure, StreamPolicy};
use crate::protocol::jsonrpc::ProgressToken;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// How many released chunks are remembered for duplicate detection.
const RECENT_RELEASED: usize = 1024;
/// How many control frames are remembered for duplicate detection.
const RECENT_CONTROL: usize = 256;

/// One chunk of stream payload, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamChunk {
    /// Its contiguous index.
    pub chunk_index: u64,
    /// The payload fragment.
    pub data: String,
}

/// Where a session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    /// Receiving.
    Open,
    /// `close` received; waiting (within the grace period) for missing chunks.
    Closing,
    /// Closed successfully: every chunk was released (reading may still be in progress).
    Completed,
    /// Ended without success.
    Failed(StreamFailure),
}

/// What became of a frame handed to a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameVerdict {
    /// Taken into the stream (or it ended it).
    Accepted,
    /// Identical to a frame already seen; dropped.
    Duplicate,
    /// Not taken: the stream has ended, or the frame is invalid for keepalive or policy.
    Ignored(&'static str),
}

/// FNV-1a: a deterministic fingerprint of released chunk data for duplicate detection.
fn fingerprint(data: &str) -> u64 {
    data.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One CEP-41 stream, reading side.
#[derive(Debug)]
pub struct OpenStreamSession {
    token: ProgressToken,
    policy: StreamPolicy,
    start: StreamFrame,

    state: SessionState,
    next_release: u64,
    last_released: Option<(u64, u64)>,
    recent_released: VecDeque<(u64, u64, u64)>,
    waiting: BTreeMap<u64, (u64, String)>,
    waiting_bytes: usize,
    unread: VecDeque<StreamChunk>,
    unread_bytes: usize,
    highest_chunk: Option<(u64, u64)>,
    recent_control: BTreeMap<u64, StreamBody>,
    close: Option<(u64, Option<u64>)>,
    keepalive: Keepalive,
    outbox: VecDeque<StreamBody>,
    own_progress: u64,
    lifetime_deadline: Option<Duration>,
    grace_deadline: Option<Duration>,
    missing_at_close: u64,
    duplicates: u64,
}

impl OpenStreamSession {
    /// Opens a session from its `start` frame at `now`. Queues `accept` if the policy says so.
    pub fn new(start: StreamFrame, policy: StreamPolicy, now: Duration) -> Self {
        let mut outbox = VecDeque::new();
        if policy.send_accept {
            outbox.push_back(StreamBody::Accept);
        }
        OpenStreamSession {
            token: start.token.clone(),
            keepalive: Keepalive::new(policy.idle_timeout, policy.probe_timeout, now),
            lifetime_deadline: policy.max_lifetime.map(|l| now + l),
            own_progress: start.progress + 1,

            policy,
            start,
            state: SessionState::Open,
            next_release: 0,
            last_released: None,
            recent_released: VecDeque::new(),
            waiting: BTreeMap::new(),
            waiting_bytes: 0,
            unread: VecDeque::new(),
            unread_bytes: 0,
            highest_chunk: None,
            recent_control: BTreeMap::new(),
            close: None,
            outbox,
            grace_deadline: None,
            missing_at_close: u64::MAX,
            duplicates: 0,
        }
    }

    /// The stream's token.
    pub fn token(&self) -> &ProgressToken {
        &self.token
    }

    /// The current state.
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// True once the stream has completed or failed.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.state,
            SessionState::Completed | SessionState::Failed(_)
        )
    }

    /// True once the stream has ended and every released chunk has been read.
    pub fn is_finished(&self) -> bool {
        self.is_terminal() && self.unread.is_empty()
    }

    /// Identical duplicate frames dropped so far.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// The next chunk in order, if one has been released.
    pub fn read(&mut self) -> Option<StreamChunk> {
        let chunk = self.unread.pop_front()?;
        self.unread_bytes -= chunk.data.len();
        Some(chunk)
    }

    /// Takes one frame from the writer.
    pub fn handle_frame(&mut self, frame: StreamFrame, now: Duration) -> FrameVerdict {
        if frame.token != self.token {
            return FrameVerdict::Ignored("another stream's frame");
        }
        if !frame.in_range() {
            return FrameVerdict::Ignored("number out of range");
        }
        if self.is_terminal() {
            return FrameVerdict::Ignored("stream has ended");
        }
        let verdict = match self.apply(frame, now) {
            Ok(verdict) => verdict,
            Err(failure) => {
                self.fail(failure);
                FrameVerdict::Accepted
            }
        };
        if verdict == FrameVerdict::Duplicate {
            self.duplicates += 1;
        }
        verdict
    }

    fn apply(&mut self, frame: StreamFrame, now: Duration) -> Result<FrameVerdict, StreamFailure> {
        let p = frame.progress;
        if let StreamBody::Start { .. } = frame.body {
            return if frame == self.start {
                Ok(FrameVerdict::Duplicate)
            } else {
                Err(StreamFailure::Sequence(
                    "a second start for an active stream",
                ))
            };
        }
        if p <= self.start.progress {
            return Err(StreamFailure::Sequence("frame numbered before start"));
        }
        if let StreamBody::Chunk { chunk_index, data } = frame.body {
            let verdict = self.take_chunk(chunk_index, p, data)?;
            if verdict == FrameVerdict::Accepted {
                self.keepalive.heard(now);
                self.check_close(now);
            }
            return Ok(verdict);
        }
        // Control frames: one position, one frame.
        match self.recent_control.get(&p) {
            Some(seen) if *seen == frame.body => return Ok(FrameVerdict::Duplicate),
            Some(_) => {
                return Err(StreamFailure::Sequence(
                    "two different frames at one progress value",
                ))
            }
            None => {}
        }
        let verdict = match &frame.body {
            StreamBody::Ping { nonce } => {
                if nonce.len() > self.policy.max_nonce_bytes {
                    return Ok(FrameVerdict::Ignored("nonce over the size limit"));
                }
                self.outbox.push_back(StreamBody::Pong {
                    nonce: nonce.clone(),
                });
                self.keepalive.heard(now);
                FrameVerdict::Accepted
            }
            StreamBody::Pong { nonce } => {
                if !self.keepalive.pong(nonce, now) {
                    return Ok(FrameVerdict::Ignored("pong matches no outstanding ping"));
                }
                FrameVerdict::Accepted
            }
            StreamBody::Close { last_chunk_index } => {
                self.take_close(p, *last_chunk_index)?;
                self.keepalive.heard(now);
                self.check_close(now);
                FrameVerdict::Accepted
            }
            StreamBody::Abort { reason } => {
                return Err(StreamFailure::AbortedByPeer {
                    reason: reason.clone(),
                })
            }
            StreamBody::Accept => return Ok(FrameVerdict::Ignored("accept is for writers")),
            StreamBody::Start { .. } | StreamBody::Chunk { .. } => unreachable!("handled above"),
        };
        self.recent_control.insert(p, frame.body);
        while self.recent_control.len() > RECENT_CONTROL {
            self.recent_control.pop_first();
        }
        Ok(verdict)
    }

    fn take_close(&mut self, p: u64, last: Option<u64>) -> Result<(), StreamFailure> {
        if let Some((cp, cl)) = self.close {
            return if (cp, cl) == (p, last) {
                Ok(())
            } else {
                Err(StreamFailure::Sequence("two different close frames"))
            };
        }
        if let Some((hi_index, hi_progress)) = self.highest_chunk {
            if hi_progress >= p {
                return Err(StreamFailure::Sequence("a chunk numbered after close"));
            }
            if last.is_some_and(|l| hi_index > l) {
                return Err(StreamFailure::Sequence("a chunk beyond lastChunkIndex"));
            }
        }
        self.close = Some((p, last));
        self.state = SessionState::Closing;
        Ok(())
    }

    fn take_chunk(
        &mut self,
        index: u64,
        p: u64,
        data: String,
    ) -> Result<FrameVerdict, StreamFailure> {
        if let Some((close_progress, last)) = self.close {
            if p >= close_progress {
                return Err(StreamFailure::Sequence("a chunk numbered after close"));
            }
            if last.is_some_and(|l| index > l) {
                return Err(StreamFailure::Sequence("a chunk beyond lastChunkIndex"));
            }
        }
        // Already released: an identical duplicate, a conflict, or too old to tell.
        if index < self.next_release {
            let fp = fingerprint(&data);
            return match self.recent_released.iter().find(|(i, _, _)| *i == index) {
                Some(&(_, rp, rfp)) if rp == p && rfp == fp => Ok(FrameVerdict::Duplicate),
                Some(_) => Err(StreamFailure::Sequence(
                    "two different chunks with one chunkIndex",
                )),
                None => Ok(FrameVerdict::Ignored("stale chunk")),
            };
        }
        if let Some((wp, wdata)) = self.waiting.get(&index) {
            return if *wp == p && *wdata == data {
                Ok(FrameVerdict::Duplicate)
            } else {
                Err(StreamFailure::Sequence(
                    "two different chunks with one chunkIndex",
                ))
            };
        }
        // chunkIndex order must agree with progress order.
        let before = self
            .waiting
            .range(..index)
            .next_back()
            .map(|(_, (wp, _))| *wp)
            .or(self.last_released.map(|(_, lp)| lp));
        let after = self
            .waiting
            .range(index + 1..)
            .next()
            .map(|(_, (wp, _))| *wp);
        if before.is_some_and(|b| b >= p) || after.is_some_and(|a| a <= p) {
            return Err(StreamFailure::Sequence(
                "chunkIndex order disagrees with progress order",
            ));
        }
        if self.highest_chunk.is_none_or(|(hi, _)| index > hi) {
            self.highest_chunk = Some((index, p));
        }
        if index == self.next_release {
            self.release(index, p, data)?;
            while let Some((wp, wdata)) = self.waiting.remove(&self.next_release) {
                self.waiting_bytes -= wdata.len();
                self.release(self.next_release, wp, wdata)?;
            }
        } else {
            if self.waiting.len() >= self.policy.max_buffered_chunks_per_stream
                || self.waiting_bytes + data.len() > self.policy.max_buffered_bytes_per_stream
            {
                return Err(StreamFailure::ReorderBufferFull);
            }
            self.waiting_bytes += data.len();
            self.waiting.insert(index, (p, data));
        }
        Ok(FrameVerdict::Accepted)
    }

    fn release(&mut self, index: u64, p: u64, data: String) -> Result<(), StreamFailure> {
        if self.unread.len() >= self.policy.max_unread_chunks_per_stream
            || self.unread_bytes + data.len() > self.policy.max_unread_bytes_per_stream
        {
            return Err(StreamFailure::SlowConsumer);
        }
        self.recent_released
            .push_back((index, p, fingerprint(&data)));
        if self.recent_released.len() > RECENT_RELEASED {
            self.recent_released.pop_front();
        }
        self.last_released = Some((index, p));
        self.next_release = index + 1;
        self.unread_bytes += data.len();
        self.unread.push_back(StreamChunk {
            chunk_index: index,
            data,
        });
        Ok(())
    }

    /// Chunk indices still missing before `close` can complete.
    fn missing(&self) -> u64 {
        match self.close {
            Some((_, Some(last))) => (last + 1 - self.next_release) - self.waiting.len() as u64,
            // No bound: only the gaps below waiting chunks are known.
            _ => self.waiting.keys().next_back().map_or(0, |hi| {
                hi + 1 - self.next_release - self.waiting.len() as u64
            }),
        }
    }

    /// For a `close` without a bound: whether every `progress` value between the last chunk and
    /// `close` is a frame already seen, so no chunk can still be in flight.
    fn tail_accounted(&self) -> bool {
        let Some((close_progress, None)) = self.close else {
            return true;
        };
        let after = self.highest_chunk.map_or(self.start.progress, |(_, p)| p);
        close_progress - after <= RECENT_CONTROL as u64
            && (after + 1..close_progress).all(|q| self.recent_control.contains_key(&q))
    }

    fn check_close(&mut self, now: Duration) {
        if self.close.is_none() || self.is_terminal() {
            return;
        }
        let missing = self.missing();
        if missing == 0 && self.waiting.is_empty() && self.tail_accounted() {
            self.state = SessionState::Completed;
            self.grace_deadline = None;
        } else if self.grace_deadline.is_none() || missing < self.missing_at_close {
            // Starts at close, and again whenever a missing chunk arrives.
            self.grace_deadline = Some(now + self.policy.close_grace);
        }
        self.missing_at_close = missing;
    }

    /// Fails the stream locally: releases buffers and, when warranted, queues `abort`.
    pub fn fail(&mut self, failure: StreamFailure) {
        if self.is_terminal() {
            return;
        }
        self.waiting.clear();
        self.waiting_bytes = 0;
        self.outbox.clear();
        if failure.warrants_abort_frame() {
            self.outbox.push_back(StreamBody::Abort {
                reason: Some(failure.to_string()),
            });
        }
        self.state = SessionState::Failed(failure);
    }

    /// Aborts the stream from the application side.
    pub fn abort(&mut self, reason: &str) {
        self.fail(StreamFailure::AbortedLocally {
            reason: reason.to_owned(),
        });
    }

    /// Sends the outstanding keepalive probe again, with the same nonce, for a transport that
    /// knows the first copy may be lost (a resumed stream: pings sent while the connection
    /// was down never left). A `pong` to either copy satisfies the probe. Nothing happens
    /// when no probe is outstanding.
    pub fn reprobe(&mut self) {
        if self.is_terminal() {
            return;
        }
        if let Some(nonce) = self.keepalive.outstanding() {
            let nonce = nonce.to_owned();
            self.outbox.push_back(StreamBody::Ping { nonce });
        }
    }

    /// The next frame to send to the writer (`accept`, `pong`, `ping`, `abort`).
    pub fn poll_transmit(&mut self) -> Option<StreamFrame> {
        let body = self.outbox.pop_front()?;
        let progress = self.own_progress;
        self.own_progress += 1;
        Some(StreamFrame {
            token: self.token.clone(),
            progress,
            message: None,
            body,
        })
    }

    /// When [`OpenStreamSession::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.is_terminal() {
            return None;
        }
        [
            Some(self.keepalive.poll_timeout()),
            self.grace_deadline,
            self.lifetime_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs the lifetime, close-grace and keepalive timers.
    pub fn handle_timeout(&mut self, now: Duration) {
        if self.is_terminal() {
            return;
        }
        if self.lifetime_deadline.is_some_and(|d| now >= d) {
            return self.fail(StreamFailure::LifetimeExceeded);
        }
        if self.grace_deadline.is_some_and(|d| now >= d) {
            let unbounded = matches!(self.close, Some((_, None)));
            if unbounded && self.waiting.is_empty() {
                // No bound and no known gap: what arrived is the stream.
                self.grace_deadline = None;
                self.state = SessionState::Completed;
                return;
            }
            let missing = self.missing().max(1);
            return self.fail(StreamFailure::GapAtClose { missing });
        }
        match self.keepalive.on_timeout(now) {
            KeepaliveAction::Nothing => {}
            KeepaliveAction::Ping(nonce) => self.outbox.push_back(StreamBody::Ping { nonce }),
            KeepaliveAction::ProbeTimedOut => self.fail(StreamFailure::ProbeTimeout),
        }
    }
}
