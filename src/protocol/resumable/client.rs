//! The client's side of resumable streams: which streams it follows, which messages it has
//! processed, and when to resume, poll or acknowledge. Sans-IO.
//!
//! Rules it keeps:
//! - Messages are processed once and in sequence order: a (stream, sequence) seen before is a
//!   duplicate, whether a relay duplicated it or a resume replayed it; one that arrives ahead
//!   of a missing one is held (up to `max_held`) and released when the gap is filled. Relays
//!   reorder, and a relay that stores ephemeral events (strfry) sends a reconnecting client
//!   minutes of them at once: in order, the consumers (CEP-41's reorder window) never see the
//!   burst's disorder.
//! - `lastSequence` is the end of the contiguous run from 0: everything up to it has been
//!   processed, so a resume asks for what follows (and duplicates above it are dropped).
//! - A resume is due after a reconnection (ephemeral events published meanwhile are gone), or
//!   when a gap has stayed open for `gap_grace` (longer than relays reorder). A poll is due
//!   when a live stream has been silent for `silence`; a poll that reports pending messages
//!   makes a resume due.
//! - Attempts on one stream are at least `resumeInterval.min` apart, and only one is in
//!   flight at a time (an unanswered one is given up after `attempt_timeout`). Asking for the
//!   next batch of a paged replay is part of the same resume, not a new attempt: it goes as
//!   soon as the previous batch has arrived (or after `gap_grace`).
//! - A resume after one that brought nothing (the contiguous run did not grow: the replayed
//!   messages were refused, lost or never answered) waits twice as long as the one before,
//!   from `max(resumeInterval.min, gap_grace)` up to `max_backoff`, as a client retrying a
//!   failing request backs off; without it a server whose replays a relay refuses is asked
//!   for the same batch every second for as long as the stream lives. A reconnection starts
//!   afresh: what failed over the old connection may not fail over the new one.
//! - A stream that is done (processed through its end, or refused by the server) is
//!   remembered (the newest `max_finished`), so a late copy or a late `create` does not bring
//!   it back.
//! - A stream is done once its `end` (its last message) and everything before it have been
//!   processed; the client then acknowledges it (relaysim's extension) and forgets it.
//! - A stream first seen through one of its messages (its `create` was lost) is followed all
//!   the same; without a token, resumes rely on the server checking the requester's key.

use super::messages::{PollResult, StreamCreate, StreamRef, StreamStatus};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// Timing of a [`StreamFollower`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerConfig {
    /// How long a gap may stay open before a resume (relays reorder within this).
    pub gap_grace: Duration,
    /// Silence on a live stream before a poll.
    pub silence: Duration,
    /// An attempt unanswered for this long is given up (and may be retried).
    pub attempt_timeout: Duration,
    /// Messages held per stream while an earlier one is missing; beyond it the stream is
    /// given up ([`FollowerEvent::ResumeRefused`]).
    pub max_held: usize,
    /// Finished streams remembered, so their late messages are known as duplicates.
    pub max_finished: usize,
    /// The longest wait between resumes that bring nothing.
    pub max_backoff: Duration,
}

impl Default for FollowerConfig {
    fn default() -> Self {
        FollowerConfig {
            gap_grace: Duration::from_secs(1),
            silence: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(5),
            max_held: 4096,
            max_finished: 1024,
            max_backoff: Duration::from_secs(32),
        }
    }
}

/// What the client must send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowerRequest {
    /// `stream/resume`.
    Resume(StreamRef),
    /// `stream/poll`.
    Poll(StreamRef),
    /// `notifications/stream/ack` (relaysim's extension).
    Ack(StreamRef),
}

/// What became of a message that arrived on a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival<T> {
    /// These messages are now next in order (the one that arrived and any it unblocked):
    /// process them, in this order.
    Release(Vec<T>),
    /// It is ahead of a missing message: held until the gap is filled.
    Held,
    /// Already processed or held: drop it.
    Duplicate,
}

/// What the follower reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowerEvent {
    /// A resume was answered after this long (request to answer).
    Resumed {
        /// The stream.
        stream_id: String,
        /// Request to answer.
        latency: Duration,
    },
    /// The server could not resume the stream: messages are lost.
    ResumeRefused {
        /// The stream.
        stream_id: String,
        /// The server's error message.
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    Nothing,
    Poll,
    Resume,
}

struct Followed<T> {
    token: Option<String>,
    min_gap: Duration,
    /// Highest contiguous sequence processed from 0.
    through: Option<u64>,
    /// Messages that arrived above `through`, waiting for the gap below them.
    held: BTreeMap<u64, T>,
    end_seq: Option<u64>,
    last_heard: Duration,
    gap_since: Option<Duration>,
    due: Due,
    last_attempt: Option<Duration>,
    /// The contiguous run when the last resume was sent, when it was sent, and how many
    /// resumes in a row brought nothing (see the module documentation).
    through_at_resume: Option<Option<u64>>,
    last_resume: Option<Duration>,
    fruitless: u32,
    in_flight: Option<(u64, Duration)>,
    /// A paged replay: the last sequence of the batch just answered, and when. The next batch
    /// is asked for once the run has reached it (or after `gap_grace`), without waiting out
    /// `resumeInterval.min`: it is one resume, not a new attempt.
    continue_after: Option<(u64, Duration)>,
}

impl<T> Followed<T> {
    fn new(token: Option<String>, min_gap: Duration, now: Duration) -> Self {
        Followed {
            token,
            min_gap,
            through: None,
            held: BTreeMap::new(),
            end_seq: None,
            last_heard: now,
            gap_since: None,
            due: Due::Nothing,
            last_attempt: None,
            through_at_resume: None,
            last_resume: None,
            fruitless: 0,
            in_flight: None,
            continue_after: None,
        }
    }

    fn reference(&self, id: &str) -> StreamRef {
        StreamRef {
            stream_id: id.to_owned(),
            resume_token: self.token.clone(),
            last_sequence: self.through,
        }
    }

    fn complete(&self) -> bool {
        self.end_seq.is_some() && self.end_seq == self.through
    }

    fn has_gap(&self) -> bool {
        !self.held.is_empty()
    }

    /// The earliest time the next attempt may go: `resumeInterval.min` after the last one,
    /// and a resume after one that brought nothing also its backoff after that resume (a poll
    /// does not wait on it: it asks what is pending, not for the replay again).
    fn allowed_at(&self, config: &FollowerConfig, resume: bool) -> Duration {
        let after = |t: Option<Duration>, wait: Duration| {
            t.map_or(Duration::ZERO, |t| {
                t.checked_add(wait).unwrap_or(Duration::MAX)
            })
        };
        let min = after(self.last_attempt, self.min_gap);
        match self.fruitless_if_resumed() {
            n if n > 0 && resume => {
                let base = self.min_gap.max(config.gap_grace);
                let backoff = base
                    .saturating_mul(1 << (n - 1).min(16))
                    .min(config.max_backoff.max(self.min_gap));
                min.max(after(self.last_resume, backoff))
            }
            _ => min,
        }
    }

    /// How many resumes in a row will have brought nothing if one goes now.
    fn fruitless_if_resumed(&self) -> u32 {
        match self.through_at_resume {
            Some(before) if before == self.through => self.fruitless.saturating_add(1),
            _ => 0,
        }
    }

    /// A resume goes at `now`.
    fn resume_sent(&mut self, now: Duration) {
        self.fruitless = self.fruitless_if_resumed();
        self.through_at_resume = Some(self.through);
        self.last_attempt = Some(now);
        self.last_resume = Some(now);
    }
}

/// The stream whose attempt `attempt` is answered, no longer in flight, and when the attempt
/// was sent.
fn answered<T>(
    streams: &mut BTreeMap<String, Followed<T>>,
    attempt: u64,
) -> Option<(&String, &mut Followed<T>, Duration)> {
    let (id, f) = streams
        .iter_mut()
        .find(|(_, f)| f.in_flight.is_some_and(|(a, _)| a == attempt))?;
    let (_, sent) = f.in_flight.take()?;
    Some((id, f, sent))
}

/// The streams a client follows.
pub struct StreamFollower<T> {
    config: FollowerConfig,
    streams: BTreeMap<String, Followed<T>>,
    finished: BTreeSet<String>,
    finished_order: VecDeque<String>,
    next_attempt: u64,
    outbox: VecDeque<(u64, FollowerRequest)>,
    events: VecDeque<FollowerEvent>,
}

impl<T> StreamFollower<T> {
    /// A follower with no streams.
    pub fn new(config: FollowerConfig) -> Self {
        StreamFollower {
            config,
            streams: BTreeMap::new(),
            finished: BTreeSet::new(),
            finished_order: VecDeque::new(),
            next_attempt: 0,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Streams followed.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether none is followed.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Whether `stream_id` is followed and not yet complete.
    pub fn is_following(&self, stream_id: &str) -> bool {
        self.streams.contains_key(stream_id)
    }

    /// Whether `stream_id` is done: processed through its end, or refused.
    pub fn is_finished(&self, stream_id: &str) -> bool {
        self.finished.contains(stream_id)
    }

    /// Forgets a stream that is done, remembering its id.
    fn finish(&mut self, id: &str) {
        self.streams.remove(id);
        if self.finished.insert(id.to_owned()) {
            self.finished_order.push_back(id.to_owned());
            while self.finished_order.len() > self.config.max_finished.max(1) {
                if let Some(old) = self.finished_order.pop_front() {
                    self.finished.remove(&old);
                }
            }
        }
    }

    fn refuse(&mut self, id: &str, reason: String) {
        self.events.push_back(FollowerEvent::ResumeRefused {
            stream_id: id.to_owned(),
            reason,
        });
        self.finish(id);
    }

    fn follow(&mut self, id: &str, now: Duration) -> &mut Followed<T> {
        self.streams
            .entry(id.to_owned())
            .or_insert_with(|| Followed::new(None, Duration::ZERO, now))
    }

    /// A `notifications/stream/create` arrived.
    pub fn on_create(&mut self, create: &StreamCreate, now: Duration) {
        if self.finished.contains(&create.stream_id) {
            return;
        }
        let min_gap = Duration::from_secs(create.resume_interval.min.unwrap_or(0));
        let f = self.follow(&create.stream_id, now);
        f.token = create.resume_token.clone();
        f.min_gap = min_gap;
    }

    /// Message `message` with sequence `seq` arrived on `stream_id`; `is_end` when it is the
    /// stream's `end` notification.
    pub fn on_message(
        &mut self,
        stream_id: &str,
        seq: u64,
        is_end: bool,
        message: T,
        now: Duration,
    ) -> Arrival<T> {
        let max_held = self.config.max_held;
        if self.finished.contains(stream_id) {
            return Arrival::Duplicate;
        }
        let f = self.follow(stream_id, now);
        f.last_heard = now;
        if f.through.is_some_and(|t| seq <= t) || f.held.contains_key(&seq) {
            return Arrival::Duplicate;
        }
        if is_end {
            f.end_seq = Some(seq);
        }
        f.held.insert(seq, message);
        // Release the contiguous run.
        let mut released = Vec::new();
        loop {
            let next = f.through.map_or(0, |t| t + 1);
            let Some(m) = f.held.remove(&next) else {
                break;
            };
            released.push(m);
            f.through = Some(next);
        }
        if f.has_gap() {
            f.gap_since.get_or_insert(now);
        } else {
            f.gap_since = None;
        }
        if f.held.len() > max_held {
            self.refuse(
                stream_id,
                format!("more than {max_held} messages held behind a gap"),
            );
        } else if f.complete() {
            let r = f.reference(stream_id);
            self.finish(stream_id);
            self.queue(FollowerRequest::Ack(r));
        }
        if released.is_empty() {
            Arrival::Held
        } else {
            Arrival::Release(released)
        }
    }

    /// The relay connection came back: whatever was published meanwhile is gone.
    pub fn on_reconnect(&mut self) {
        for f in self.streams.values_mut() {
            f.due = Due::Resume;
            // A new connection: what failed over the old one may not fail now.
            f.fruitless = 0;
            f.through_at_resume = None;
        }
    }

    /// The answer to attempt `attempt` (see [`StreamFollower::poll_transmit`]) of a resume:
    /// `Ok(Some(last))` when the server holds more after `last`, the batch's last sequence.
    pub fn on_resume_answer(
        &mut self,
        attempt: u64,
        result: Result<Option<u64>, String>,
        now: Duration,
    ) {
        let Some((id, f, sent)) = answered(&mut self.streams, attempt) else {
            return;
        };
        let id = id.clone();
        match result {
            Ok(more) => {
                f.continue_after = more.map(|last| (last, now));
                self.events.push_back(FollowerEvent::Resumed {
                    stream_id: id,
                    latency: now.saturating_sub(sent),
                });
            }
            Err(reason) => self.refuse(&id, reason),
        }
    }

    /// The answer to a poll.
    pub fn on_poll_answer(&mut self, attempt: u64, result: Result<PollResult, String>) {
        let Some((id, f, _)) = answered(&mut self.streams, attempt) else {
            return;
        };
        let id = id.clone();
        match result {
            Ok(p) if p.pending_messages => f.due = Due::Resume,
            Ok(p) if p.status == StreamStatus::Completed && !f.complete() => f.due = Due::Resume,
            Ok(_) => {}
            Err(reason) => self.refuse(&id, reason),
        }
    }

    fn queue(&mut self, request: FollowerRequest) -> u64 {
        self.next_attempt += 1;
        self.outbox.push_back((self.next_attempt, request));
        self.next_attempt
    }

    /// The next request to send, with its attempt number (to match the answer).
    pub fn poll_transmit(&mut self) -> Option<(u64, FollowerRequest)> {
        self.outbox.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<FollowerEvent> {
        self.events.pop_front()
    }

    fn next_wake(&self, f: &Followed<T>) -> Option<Duration> {
        if let Some((_, sent)) = f.in_flight {
            return Some(sent + self.config.attempt_timeout);
        }
        if let Some((last, answered)) = f.continue_after {
            if f.through.is_some_and(|t| t >= last) {
                return Some(Duration::ZERO);
            }
            return Some((answered + self.config.gap_grace).max(f.allowed_at(&self.config, true)));
        }
        let config = &self.config;
        match f.due {
            Due::Resume => Some(f.allowed_at(config, true)),
            Due::Poll => Some(f.allowed_at(config, false)),
            Due::Nothing => {
                let gap = f
                    .gap_since
                    .map(|g| (g + config.gap_grace).max(f.allowed_at(config, true)));
                let silence = (f.end_seq.is_none() || f.has_gap())
                    .then(|| (f.last_heard + config.silence).max(f.allowed_at(config, false)));
                [gap, silence].into_iter().flatten().min()
            }
        }
    }

    /// When [`StreamFollower::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.streams
            .values()
            .filter_map(|f| self.next_wake(f))
            .min()
    }

    /// Sends the resumes and polls that are due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        let config = self.config.clone();
        let mut out = Vec::new();
        for (id, f) in self.streams.iter_mut() {
            if let Some((_, sent)) = f.in_flight {
                if now < sent + config.attempt_timeout {
                    continue;
                }
                // Unanswered: the request or its answer was lost. Try again.
                f.in_flight = None;
                f.due = Due::Resume;
            }
            if let Some((last, answered)) = f.continue_after {
                let reached = f.through.is_some_and(|t| t >= last);
                // Not reached: the batch was lost or refused; asking again is a retry.
                let retry =
                    now >= answered + config.gap_grace && now >= f.allowed_at(&config, true);
                if reached || retry {
                    f.continue_after = None;
                    let attempt_ref = f.reference(id);
                    out.push((id.clone(), FollowerRequest::Resume(attempt_ref)));
                    f.due = Due::Nothing;
                    f.last_heard = now;
                    if reached {
                        // The next batch of the same resume: not an attempt of its own.
                        f.fruitless = 0;
                        f.through_at_resume = Some(f.through);
                    } else {
                        f.resume_sent(now);
                    }
                }
                continue;
            }
            if f.due == Due::Nothing {
                if f.gap_since.is_some_and(|g| now >= g + config.gap_grace) {
                    f.due = Due::Resume;
                } else if now >= f.last_heard + config.silence {
                    f.due = Due::Poll;
                }
            }
            if f.due == Due::Nothing || now < f.allowed_at(&config, f.due == Due::Resume) {
                continue;
            }
            let r = f.reference(id);
            let request = match f.due {
                Due::Resume => {
                    f.resume_sent(now);
                    FollowerRequest::Resume(r)
                }
                _ => {
                    f.last_attempt = Some(now);
                    FollowerRequest::Poll(r)
                }
            };
            out.push((id.clone(), request));
            f.due = Due::Nothing;
            // A poll or resume is news of the stream too: silence counts from here.
            f.last_heard = now;
        }
        for (id, request) in out {
            let attempt = self.queue(request);
            if let Some(f) = self.streams.get_mut(&id) {
                f.in_flight = Some((attempt, now));
            }
        }
    }
}
