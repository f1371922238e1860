//! The CEP-22 receiver: admission, bounded reordering, exact reassembly, digest, timeouts.
//!
//! # Choices where the spec leaves room
//!
//! These make transfers survive what real relays do (delay, reorder, duplicate) without ever
//! surfacing a wrong or partial message:
//!
//! - **Processing order is `progress` order, not arrival order.** A frame that arrives ahead of
//!   a missing `progress` position waits in a bounded reorder buffer. That covers an `end` that
//!   overtakes the last chunks: the spec's "end while provisional gaps remain MUST fail" is
//!   applied when the `end` is *reached in progress order*, after a bounded grace period
//!   ([`ReceiverConfig::end_grace`]) for the missing positions, restarted whenever one of them
//!   arrives; when it expires the transfer fails with [`TransferFailure::GapAtEnd`].
//! - **Frames that overtake their `start`** (unknown token) are held as orphans, a bounded
//!   number for a bounded time, and replayed once the `start` arrives.
//! - **`progress` is expected to count up by one per frame**, as every reference SDK does; that
//!   is what makes a missing position detectable. When this receiver sent `accept`, the accept
//!   takes the position after `start`, and chunks may start either there (a sender that did not
//!   wait) or one later (a sender that waited); both numberings complete, and `end` tells which
//!   one was used (`end - totalChunks` is the first chunk's position).
//! - **Duplicates**: a frame identical to one already seen is dropped and counted; a different
//!   frame at an occupied position (or a second, different `start`) fails the transfer.
//! - **Bounds**: admission checks `totalBytes`, `totalChunks` and the number of concurrent
//!   transfers before any memory is committed; chunks may run at most
//!   [`ReceiverConfig::reorder_window`] positions past the first missing one, and at most
//!   [`ReceiverConfig::max_out_of_order_chunks`] may wait; received bytes may never exceed the
//!   declared `totalBytes`. Each transfer has a hard timeout from its `start`. The reorder
//!   defaults (1024 positions and chunks) are far wider than the reference SDK's (21 and 42):
//!   a sender publishes a transfer's frames back to back, so a relay with tens of milliseconds
//!   of jitter permutes them almost completely, and a narrow window fails transfers that would
//!   have completed. Memory stays bounded by the admitted `totalBytes` either way.
//! - **Termination is final**: a finished or failed transfer leaves a tombstone (a bounded
//!   number are kept), and later frames for it are ignored; they never resurrect it.
//! - **Failing sends `abort`** to the sender when the failure is local, so the sender stops.

use super::assembly::{Assembled, Assembly};
use super::frame::{Digest, TransferBody, TransferFrame, COMPLETION_MODE_RENDER};
use crate::nip01::json_read::STEAL_FROM;
use crate::nip01::json_segmented::parse_pieces;
use crate::protocol::jsonrpc::{JsonRpcError, Message, ProgressToken};
use crate::segmented::Segmented;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Receiver limits and timers. Defaults follow the reference SDK where it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Largest `totalBytes` admitted (reference SDK: 100 MiB).
    pub max_total_bytes: u64,
    /// Largest `totalChunks` admitted (reference SDK: 10,000).
    pub max_total_chunks: u64,
    /// Transfers in flight at once (reference SDK: 64).
    pub max_concurrent_transfers: usize,
    /// How far past the first missing position a chunk may arrive.
    pub reorder_window: u64,
    /// How many chunks may wait behind a missing position.
    pub max_out_of_order_chunks: usize,
    /// Hard limit on a transfer's life, from its `start` (reference SDK: 5 min).
    pub transfer_timeout: Duration,
    /// How long positions missing before `end` may still arrive.
    pub end_grace: Duration,
    /// Whether to answer `start` with `accept`.
    pub send_accept: bool,
    /// Whether an `accept` this receiver sends also reserves its slot in the receiver's own
    /// numbering (a transport that sends accept but never feeds it to its receiver does not).
    /// Only engines that track the slot (the contextvm-sdk crate's) are affected.
    pub feed_accept: bool,
    /// Frames held while their `start` has not arrived.
    pub max_orphan_frames: usize,
    /// Bytes of chunk data held while their `start` has not arrived.
    pub max_orphan_bytes: usize,
    /// How long an orphan frame is held.
    pub orphan_ttl: Duration,
    /// How many ended transfers are remembered so their late frames are ignored.
    pub max_tombstones: usize,
    /// Whether a completed transfer hands over its reassembled text beside the parsed
    /// message. Without it the text is parsed consuming it (a long string in it becomes the
    /// message's without a copy: `Message::parse_owned`), so a large transfer is held once,
    /// not twice, while it is read. Only relaysim's own receiver heeds it; others always hand
    /// the text over.
    pub keep_text: bool,
    /// Whether a very large transfer (from 64 MiB declared) that does not keep its text is
    /// assembled in pieces and read piece by piece, its long string handed over in segments
    /// (`ReceiverEvent::Completed::long`), so that a consumer that can use it so (a server's
    /// echo) never holds it whole. Without it the text is read in place into one string, the
    /// cheapest way for a consumer that wants the string whole (a client's result).
    pub long_in_segments: bool,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            max_total_bytes: 100 * 1024 * 1024,
            max_total_chunks: 10_000,
            max_concurrent_transfers: 64,
            reorder_window: 1024,
            max_out_of_order_chunks: 1024,
            transfer_timeout: Duration::from_secs(300),
            end_grace: Duration::from_secs(5),
            send_accept: true,
            feed_accept: true,
            // A jittery relay can deliver most of a transfer before its start.
            max_orphan_frames: 1024,
            max_orphan_bytes: 16 * 1024 * 1024,
            orphan_ttl: Duration::from_secs(10),
            max_tombstones: 4096,
            keep_text: true,
            long_in_segments: false,
        }
    }
}

/// Why a transfer failed. [`TransferFailure::cause`] names it for statistics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferFailure {
    /// The sender aborted.
    #[error("aborted by the sender: {reason:?}")]
    AbortedByPeer {
        /// Its advisory reason.
        reason: Option<String>,
    },
    /// `completionMode` is missing or not `render`.
    #[error("unsupported completion mode {0:?}")]
    UnsupportedCompletionMode(Option<String>),
    /// Admission refused the transfer.
    #[error("refused by policy: {0}")]
    Policy(&'static str),
    /// A frame broke transfer order or contradicted an earlier one.
    #[error("sequence error: {0}")]
    Sequence(&'static str),
    /// The reorder buffer's bounds were exceeded.
    #[error("reorder buffer exceeded: {0}")]
    Buffer(&'static str),
    /// The chunks cannot add up to what `start` declared.
    #[error("chunks do not match the declared totals: {0}")]
    Totals(&'static str),
    /// The reassembled text does not hash to the declared digest.
    #[error("digest mismatch")]
    DigestMismatch,
    /// The reassembled text is not a JSON-RPC message.
    #[error("reassembled text is not JSON-RPC: {0}")]
    InvalidMessage(String),
    /// Another implementation's reassembly check failed (for example chunks missing when
    /// `end` arrived); relaysim's own receiver reports these as the cases above.
    #[error("reassembly failed: {0}")]
    Reassembly(String),
    /// Another implementation's failure, in its own words; `family` is its cause
    /// (`policy`, `sequence`, `digest-mismatch`).
    #[error("{message}")]
    Reported {
        /// The cause it counts as.
        family: &'static str,
        /// The implementation's own message.
        message: String,
    },
    /// Positions before `end` were still missing when the grace period ran out.
    #[error("{missing} frames still missing at end after the grace period")]
    GapAtEnd {
        /// How many positions were missing.
        missing: u64,
    },
    /// The hard transfer timeout ran out.
    #[error("transfer timed out")]
    Timeout,
}

impl TransferFailure {
    /// Another implementation's own words for this failure, if it gave them.
    pub fn detail(&self) -> Option<&str> {
        match self {
            TransferFailure::Reported { message, .. } | TransferFailure::Reassembly(message) => {
                Some(message)
            }
            _ => None,
        }
    }

    /// A short, stable cause name for statistics.
    pub fn cause(&self) -> &'static str {
        match self {
            TransferFailure::AbortedByPeer { .. } => "aborted-by-peer",
            TransferFailure::UnsupportedCompletionMode(_) => "unsupported-completion-mode",
            TransferFailure::Policy(_) => "policy",
            TransferFailure::Sequence(_) => "sequence",
            TransferFailure::Buffer(_) => "buffer",
            TransferFailure::Totals(_) => "totals",
            TransferFailure::DigestMismatch => "digest-mismatch",
            TransferFailure::InvalidMessage(_) => "invalid-message",
            TransferFailure::Reassembly(_) => "reassembly",
            TransferFailure::Reported { family, .. } => family,
            TransferFailure::GapAtEnd { .. } => "gap-at-end",
            TransferFailure::Timeout => "timeout",
        }
    }
}

/// What became of a frame handed to the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameVerdict {
    /// Taken into a transfer (or it ended one).
    Accepted,
    /// Identical to a frame already seen; dropped.
    Duplicate,
    /// Its `start` has not arrived; held for a while.
    Orphaned,
    /// Ignored: the transfer has ended, or the frame is not one a receiver takes.
    Ignored(&'static str),
}

/// What the receiver tells the application.
#[derive(Debug, Clone, PartialEq)]
pub enum ReceiverEvent<P> {
    /// A transfer was admitted.
    Started {
        /// The sending peer.
        peer: P,
        /// The transfer's token.
        token: ProgressToken,
        /// Declared size.
        total_bytes: u64,
        /// Declared chunk count.
        total_chunks: u64,
    },
    /// A transfer completed and validated: the exact serialized message.
    Completed {
        /// The sending peer.
        peer: P,
        /// The transfer's token.
        token: ProgressToken,
        /// The reassembled JSON-RPC text, byte length and digest verified; `None` from a
        /// receiver that does not keep it (`ReceiverConfig::keep_text`).
        message: Option<String>,
        /// That text parsed, when it is a JSON-RPC message (always, from this receiver, which
        /// fails a transfer that is not): consumers need not parse it again.
        parsed: Option<Box<Message>>,
        /// The long string of a very large transfer read in segments (from a receiver that
        /// does not keep the text): `parsed` holds
        /// [`LONG_STRING`](crate::nip01::json_segmented::LONG_STRING) in its place, and
        /// [`Message::put_back`] puts it in whole for a consumer that wants it so.
        long: Option<Segmented>,
    },
    /// A transfer failed; nothing of it was surfaced.
    Failed {
        /// The sending peer.
        peer: P,
        /// The transfer's token.
        token: ProgressToken,
        /// Why.
        failure: TransferFailure,
    },
}

/// Counts of frames that did not advance any transfer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    /// Identical duplicates dropped.
    pub duplicates: u64,
    /// Frames for ended transfers, or of a kind a receiver does not take.
    pub ignored: u64,
    /// Orphans dropped because the orphan buffer was full or their time ran out.
    pub orphans_dropped: u64,
}

struct Transfer {
    start: TransferFrame,
    start_progress: u64,
    accept_slot: Option<u64>,
    digest: Digest,
    total_bytes: u64,
    total_chunks: u64,
    /// Chunks assembled so far, in progress order.
    assembled: Assembly,
    /// Chunks waiting behind a missing position.
    waiting: BTreeMap<u64, String>,
    received_bytes: u64,
    /// Lowest position after `start` that is neither a received chunk nor our accept.
    next_missing: u64,
    end_progress: Option<u64>,
    /// Chunks still missing when `end` was last checked.
    missing_at_end: u64,
    highest_progress: u64,
    deadline: Duration,
    grace_deadline: Option<Duration>,
}

impl Transfer {
    fn chunk_count(&self) -> u64 {
        (self.assembled.chunks() + self.waiting.len()) as u64
    }

    /// Appends waiting chunks that have become contiguous.
    fn advance(&mut self) {
        loop {
            if Some(self.next_missing) == self.accept_slot {
                self.next_missing += 1;
            } else if let Some(data) = self.waiting.remove(&self.next_missing) {
                self.assembled.append(self.next_missing, &data);
                self.next_missing += 1;
            } else {
                break;
            }
        }
    }

    fn content_at(&self, progress: u64) -> Option<&str> {
        if let Some(data) = self.assembled.chunk(progress) {
            return Some(data);
        }
        self.waiting.get(&progress).map(String::as_str)
    }
}

/// A completed transfer: its text if kept, the message, and its long string if read apart.
type Completed = (Option<String>, Message, Option<Segmented>);

/// All CEP-22 transfers a peer is receiving, keyed by (sending peer, progress token).
pub struct OversizedReceiver<P> {
    config: ReceiverConfig,
    transfers: BTreeMap<(P, ProgressToken), Transfer>,
    orphans: VecDeque<(P, TransferFrame, Duration)>,
    orphan_bytes: usize,
    tombstones: BTreeMap<(P, ProgressToken), ()>,
    tombstone_order: VecDeque<(P, ProgressToken)>,
    outbox: VecDeque<(P, TransferFrame)>,
    events: VecDeque<ReceiverEvent<P>>,
    counters: ReceiverCounters,
}

fn frame_bytes(frame: &TransferFrame) -> usize {
    match &frame.body {
        TransferBody::Chunk { data } => data.len(),
        _ => 0,
    }
}

enum Step {
    Continue,
    Fail(TransferFailure),
    Finalize,
}

impl<P: Ord + Clone> OversizedReceiver<P> {
    /// A receiver with the given limits.
    pub fn new(config: ReceiverConfig) -> Self {
        OversizedReceiver {
            config,
            transfers: BTreeMap::new(),
            orphans: VecDeque::new(),
            orphan_bytes: 0,
            tombstones: BTreeMap::new(),
            tombstone_order: VecDeque::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            counters: ReceiverCounters::default(),
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &ReceiverConfig {
        &self.config
    }

    /// Whether `start` is answered with `accept` from now on. A peer sets it per sender: a
    /// sender that knows our support does not wait, so an accept would only be noise.
    pub fn set_send_accept(&mut self, send_accept: bool) {
        self.config.send_accept = send_accept;
    }

    /// Counts of frames that advanced nothing.
    pub fn counters(&self) -> &ReceiverCounters {
        &self.counters
    }

    /// How many transfers are in flight.
    pub fn active_transfers(&self) -> usize {
        self.transfers.len()
    }

    /// Takes one frame from `peer` at `now`.
    pub fn handle_frame(&mut self, peer: &P, frame: TransferFrame, now: Duration) -> FrameVerdict {
        if !frame.in_range() {
            self.counters.ignored += 1;
            return FrameVerdict::Ignored("progress out of range");
        }
        let key = (peer.clone(), frame.token.clone());
        if self.tombstones.contains_key(&key) {
            self.counters.ignored += 1;
            return FrameVerdict::Ignored("transfer has ended");
        }
        if matches!(frame.body, TransferBody::Accept) {
            // Accept is what a receiver sends; a sender's accept means nothing here.
            self.counters.ignored += 1;
            return FrameVerdict::Ignored("accept is not for a receiver");
        }
        if !self.transfers.contains_key(&key) {
            return match frame.body {
                TransferBody::Start { .. } => self.admit(key, frame, now),
                _ => self.hold_orphan(peer, frame, now),
            };
        }
        let verdict;
        let step = {
            let transfer = self.transfers.get_mut(&key).expect("checked above");
            let (v, s) = Self::apply(&self.config, transfer, frame, now);
            verdict = v;
            s
        };
        if verdict == FrameVerdict::Duplicate {
            self.counters.duplicates += 1;
        }
        self.after_step(key, step);
        verdict
    }

    fn admit(
        &mut self,
        key: (P, ProgressToken),
        frame: TransferFrame,
        now: Duration,
    ) -> FrameVerdict {
        let TransferBody::Start {
            completion_mode,
            digest,
            total_bytes,
            total_chunks,
        } = &frame.body
        else {
            unreachable!("admit takes start frames only")
        };
        let refusal = if completion_mode.as_deref() != Some(COMPLETION_MODE_RENDER) {
            Some(TransferFailure::UnsupportedCompletionMode(
                completion_mode.clone(),
            ))
        } else if *total_bytes > self.config.max_total_bytes {
            Some(TransferFailure::Policy("totalBytes over the limit"))
        } else if *total_chunks > self.config.max_total_chunks {
            Some(TransferFailure::Policy("totalChunks over the limit"))
        } else if self.transfers.len() >= self.config.max_concurrent_transfers {
            Some(TransferFailure::Policy("too many concurrent transfers"))
        } else if *total_chunks == 0 && *total_bytes > 0 {
            Some(TransferFailure::Totals("bytes declared but no chunks"))
        } else {
            None
        };
        let (peer, token) = key.clone();
        if let Some(failure) = refusal {
            self.send_abort(&peer, &token, frame.progress + 1, &failure);
            self.events.push_back(ReceiverEvent::Failed {
                peer,
                token,
                failure,
            });
            self.bury(key);
            return FrameVerdict::Accepted;
        }
        let start_progress = frame.progress;
        let accept_slot = self.config.send_accept.then_some(start_progress + 1);
        if let Some(slot) = accept_slot {
            self.outbox.push_back((
                peer.clone(),
                TransferFrame {
                    token: token.clone(),
                    progress: slot,
                    message: None,
                    body: TransferBody::Accept,
                },
            ));
        }
        self.events.push_back(ReceiverEvent::Started {
            peer: peer.clone(),
            token: token.clone(),
            total_bytes: *total_bytes,
            total_chunks: *total_chunks,
        });
        let mut transfer = Transfer {
            digest: *digest,
            total_bytes: *total_bytes,
            total_chunks: *total_chunks,
            start_progress,
            accept_slot,
            // Room for the declared size, admitted under the policy's limit above, up to
            // 2 GiB (a limit set out of reach must not let a declaration reserve without
            // end); a very large one in pieces (`assembly`).
            assembled: Assembly::new(
                *total_bytes,
                self.config.long_in_segments && !self.config.keep_text,
            ),
            waiting: BTreeMap::new(),
            received_bytes: 0,
            next_missing: start_progress + 1,
            end_progress: None,
            missing_at_end: u64::MAX,
            highest_progress: accept_slot.unwrap_or(start_progress),
            deadline: now + self.config.transfer_timeout,
            grace_deadline: None,
            start: frame,
        };
        transfer.advance(); // steps over our own accept
        self.transfers.insert(key.clone(), transfer);
        // Frames that overtook this start go in now, in progress order.
        let mut early = self.take_orphans(&key);
        early.sort_by_key(|f| f.progress);
        let mut step = Step::Continue;
        for f in early {
            let Some(transfer) = self.transfers.get_mut(&key) else {
                break;
            };
            step = Self::apply(&self.config, transfer, f, now).1;
            if !matches!(step, Step::Continue) {
                break;
            }
        }
        self.after_step(key, step);
        FrameVerdict::Accepted
    }

    fn hold_orphan(&mut self, peer: &P, frame: TransferFrame, now: Duration) -> FrameVerdict {
        if self.config.max_orphan_frames == 0 {
            self.counters.orphans_dropped += 1;
            return FrameVerdict::Ignored("no transfer with this token");
        }
        let bytes = frame_bytes(&frame);
        while !self.orphans.is_empty()
            && (self.orphans.len() >= self.config.max_orphan_frames
                || self.orphan_bytes + bytes > self.config.max_orphan_bytes)
        {
            if let Some((_, old, _)) = self.orphans.pop_front() {
                self.orphan_bytes -= frame_bytes(&old);
            }
            self.counters.orphans_dropped += 1;
        }
        self.orphan_bytes += bytes;
        self.orphans
            .push_back((peer.clone(), frame, now + self.config.orphan_ttl));
        FrameVerdict::Orphaned
    }

    /// Applies a non-start-of-transfer frame to an active transfer.
    fn apply(
        config: &ReceiverConfig,
        t: &mut Transfer,
        frame: TransferFrame,
        now: Duration,
    ) -> (FrameVerdict, Step) {
        let p = frame.progress;
        match frame.body {
            TransferBody::Start { .. } => {
                if frame == t.start {
                    (FrameVerdict::Duplicate, Step::Continue)
                } else {
                    (
                        FrameVerdict::Accepted,
                        Step::Fail(TransferFailure::Sequence(
                            "a second start for an active transfer",
                        )),
                    )
                }
            }
            TransferBody::Abort { reason } => (
                FrameVerdict::Accepted,
                Step::Fail(TransferFailure::AbortedByPeer { reason }),
            ),
            TransferBody::Accept => (
                FrameVerdict::Ignored("accept is not for a receiver"),
                Step::Continue,
            ),
            TransferBody::End => {
                if let Some(e) = t.end_progress {
                    return if e == p {
                        (FrameVerdict::Duplicate, Step::Continue)
                    } else {
                        (
                            FrameVerdict::Accepted,
                            Step::Fail(TransferFailure::Sequence("two different end frames")),
                        )
                    };
                }
                if p <= t.highest_progress {
                    return (
                        FrameVerdict::Accepted,
                        Step::Fail(TransferFailure::Sequence("end does not follow every chunk")),
                    );
                }
                t.end_progress = Some(p);
                t.highest_progress = p;
                (FrameVerdict::Accepted, Self::check_end(config, t, now))
            }
            TransferBody::Chunk { data } => {
                if let Some(existing) = t.content_at(p) {
                    return if existing == data {
                        (FrameVerdict::Duplicate, Step::Continue)
                    } else {
                        (
                            FrameVerdict::Accepted,
                            Step::Fail(TransferFailure::Sequence(
                                "two different chunks at one progress value",
                            )),
                        )
                    };
                }
                let step = Self::take_chunk(config, t, p, data);
                if !matches!(step, Step::Continue) {
                    return (FrameVerdict::Accepted, step);
                }
                let step = if t.end_progress.is_some() {
                    Self::check_end(config, t, now)
                } else {
                    Step::Continue
                };
                (FrameVerdict::Accepted, step)
            }
        }
    }

    fn take_chunk(config: &ReceiverConfig, t: &mut Transfer, p: u64, data: String) -> Step {
        if p <= t.start_progress {
            return Step::Fail(TransferFailure::Sequence("chunk before start"));
        }
        if t.end_progress.is_some_and(|e| p >= e) {
            return Step::Fail(TransferFailure::Sequence("chunk after end"));
        }
        if t.chunk_count() >= t.total_chunks {
            return Step::Fail(TransferFailure::Totals("more chunks than totalChunks"));
        }
        if t.received_bytes + data.len() as u64 > t.total_bytes {
            return Step::Fail(TransferFailure::Totals("more bytes than totalBytes"));
        }
        t.received_bytes += data.len() as u64;
        t.highest_progress = t.highest_progress.max(p);
        if Some(p) == t.accept_slot {
            // The sender did not count our accept; this is its first chunk.
            // It precedes every other chunk, so it goes in front.
            t.assembled.prepend(p, &data);
            return Step::Continue;
        }
        if p == t.next_missing {
            t.assembled.append(p, &data);
            t.next_missing += 1;
            t.advance();
            return Step::Continue;
        }
        if p - t.next_missing > config.reorder_window {
            return Step::Fail(TransferFailure::Buffer("chunk beyond the reorder window"));
        }
        if t.waiting.len() >= config.max_out_of_order_chunks {
            return Step::Fail(TransferFailure::Buffer("too many out-of-order chunks"));
        }
        t.waiting.insert(p, data);
        Step::Continue
    }

    /// With `end` known: complete, fail, or wait (bounded) for missing positions.
    fn check_end(config: &ReceiverConfig, t: &mut Transfer, now: Duration) -> Step {
        let end = t.end_progress.expect("called with end known");
        let Some(first) = end.checked_sub(t.total_chunks) else {
            return Step::Fail(TransferFailure::Totals(
                "end comes too early for totalChunks",
            ));
        };
        let valid_first = first == t.start_progress + 1
            || t.accept_slot.is_some_and(|a| first == a || first == a + 1);
        if !valid_first {
            return Step::Fail(TransferFailure::Totals("end does not match totalChunks"));
        }
        let lowest = [t.assembled.first_chunk(), t.waiting.keys().next().copied()]
            .into_iter()
            .flatten()
            .min();
        if lowest.is_some_and(|l| l < first) {
            return Step::Fail(TransferFailure::Sequence(
                "a chunk outside the positions end declares",
            ));
        }
        // Every chunk lies in first..end and there are at most totalChunks of them, so the
        // count alone says how many positions are still empty.
        let missing = t.total_chunks - t.chunk_count();
        if missing == 0 {
            return Step::Finalize;
        }
        // The grace period starts at end and starts again whenever a missing chunk arrives: a
        // slow but progressing relay is not a gap.
        if t.grace_deadline.is_none() || missing < t.missing_at_end {
            t.grace_deadline = Some(now + config.end_grace);
        }
        t.missing_at_end = missing;
        Step::Continue
    }

    fn after_step(&mut self, key: (P, ProgressToken), step: Step) {
        match step {
            Step::Continue => {}
            Step::Fail(failure) => self.fail(key, failure),
            Step::Finalize => {
                let t = self
                    .transfers
                    .remove(&key)
                    .expect("finalizing an active transfer");
                let (peer, token) = key.clone();
                let result = Self::validate(t, self.config.keep_text);
                self.bury(key);
                match result {
                    Ok((message, parsed, long)) => {
                        self.events.push_back(ReceiverEvent::Completed {
                            peer,
                            token,
                            message,
                            parsed: Some(Box::new(parsed)),
                            long,
                        })
                    }
                    Err((failure, next_progress)) => {
                        self.send_abort(&peer, &token, next_progress, &failure);
                        self.events.push_back(ReceiverEvent::Failed {
                            peer,
                            token,
                            failure,
                        });
                    }
                }
            }
        }
    }

    fn validate(t: Transfer, keep_text: bool) -> Result<Completed, (TransferFailure, u64)> {
        let next = t.highest_progress + 1;
        if t.chunk_count() != t.total_chunks || !t.waiting.is_empty() {
            return Err((
                TransferFailure::Totals("chunk count differs from totalChunks"),
                next,
            ));
        }
        if t.assembled.len() as u64 != t.total_bytes {
            return Err((
                TransferFailure::Totals("byte count differs from totalBytes"),
                next,
            ));
        }
        if t.assembled.digest() != t.digest {
            return Err((TransferFailure::DigestMismatch, next));
        }
        let invalid = |e: String| (TransferFailure::InvalidMessage(e), next);
        match t.assembled.into_text() {
            Assembled::Whole(text) if keep_text => Message::parse(&text)
                .map(|m| (Some(text), m, None))
                .map_err(|e| invalid(e.to_string())),
            Assembled::Whole(text) => Message::parse_owned(text)
                .map(|m| (None, m, None))
                .map_err(|e| invalid(e.to_string())),
            Assembled::Pieces(pieces) if keep_text => {
                let text = pieces.concat();
                Message::parse(&text)
                    .map(|m| (Some(text), m, None))
                    .map_err(|e| invalid(e.to_string()))
            }
            // Read piece by piece, each freed once read, its long string kept in segments.
            Assembled::Pieces(pieces) => {
                let (value, long) = parse_pieces(pieces, STEAL_FROM)
                    .map_err(|e| invalid(JsonRpcError::Syntax(e.to_string()).to_string()))?;
                Message::from_value(value)
                    .map(|m| (None, m, long))
                    .map_err(|e| invalid(e.to_string()))
            }
        }
    }

    fn fail(&mut self, key: (P, ProgressToken), failure: TransferFailure) {
        let Some(t) = self.transfers.remove(&key) else {
            return;
        };
        let (peer, token) = key.clone();
        if !matches!(failure, TransferFailure::AbortedByPeer { .. }) {
            self.send_abort(&peer, &token, t.highest_progress + 1, &failure);
        }
        self.events.push_back(ReceiverEvent::Failed {
            peer,
            token,
            failure,
        });
        self.bury(key);
    }

    fn send_abort(
        &mut self,
        peer: &P,
        token: &ProgressToken,
        progress: u64,
        failure: &TransferFailure,
    ) {
        self.outbox.push_back((
            peer.clone(),
            TransferFrame {
                token: token.clone(),
                progress,
                message: None,
                body: TransferBody::Abort {
                    reason: Some(failure.to_string()),
                },
            },
        ));
    }

    /// Removes and returns the orphans of one transfer, in arrival order.
    fn take_orphans(&mut self, key: &(P, ProgressToken)) -> Vec<TransferFrame> {
        let (mine, rest): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.orphans)
            .into_iter()
            .partition(|(p, f, _)| *p == key.0 && f.token == key.1);
        self.orphans = rest;
        let mine: Vec<TransferFrame> = mine.into_iter().map(|(_, f, _)| f).collect();
        self.orphan_bytes -= mine.iter().map(frame_bytes).sum::<usize>();
        mine
    }

    fn bury(&mut self, key: (P, ProgressToken)) {
        self.take_orphans(&key);
        if self.tombstones.insert(key.clone(), ()).is_none() {
            self.tombstone_order.push_back(key);
        }
        while self.tombstone_order.len() > self.config.max_tombstones {
            if let Some(old) = self.tombstone_order.pop_front() {
                self.tombstones.remove(&old);
            }
        }
    }

    /// The next frame to send to a sender (`accept` or `abort`).
    pub fn poll_transmit(&mut self) -> Option<(P, TransferFrame)> {
        self.outbox.pop_front()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ReceiverEvent<P>> {
        self.events.pop_front()
    }

    /// The earliest instant at which [`OversizedReceiver::handle_timeout`] has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let transfers = self
            .transfers
            .values()
            .flat_map(|t| [Some(t.deadline), t.grace_deadline])
            .flatten();
        let orphans = self.orphans.iter().map(|(_, _, expiry)| *expiry);
        transfers.chain(orphans).min()
    }

    /// Fails transfers whose hard timeout or end grace has run out; drops expired orphans.
    pub fn handle_timeout(&mut self, now: Duration) {
        let expired: Vec<((P, ProgressToken), TransferFailure)> = self
            .transfers
            .iter()
            .filter_map(|(key, t)| {
                if t.deadline <= now {
                    Some((key.clone(), TransferFailure::Timeout))
                } else if t.grace_deadline.is_some_and(|g| g <= now) {
                    let missing = t.total_chunks.saturating_sub(t.chunk_count());
                    Some((key.clone(), TransferFailure::GapAtEnd { missing }))
                } else {
                    None
                }
            })
            .collect();
        for (key, failure) in expired {
            self.fail(key, failure);
        }
        // Expire by time, wherever an orphan sits: a driver may hand frames in with times that
        // are not in order, and an expiry left in place would be polled for ever.
        let (expired, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.orphans)
            .into_iter()
            .partition(|(_, _, expiry)| *expiry <= now);
        self.orphans = kept;
        for (_, old, _) in expired {
            self.orphan_bytes -= frame_bytes(&old);
            self.counters.orphans_dropped += 1;
        }
    }
}
