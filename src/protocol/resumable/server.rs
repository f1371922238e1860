//! The server's side of resumable streams: a store of streams, each with a bounded buffer of
//! the messages sent on it, answering resume, poll, poll-all and ack. Sans-IO.
//!
//! Rules it keeps:
//! - Every message on a stream gets the next per-stream sequence number, from 0; the `end`
//!   notification is the stream's last message, so a resume replays it after everything else.
//! - A server cannot know what a relay delivered, so nothing is dropped as "sent": the buffer
//!   keeps the newest messages, at most `max_messages_per_stream` and `max_bytes_per_stream`,
//!   evicting the oldest first. A resume that needs an evicted message gets
//!   [`StreamError::Evicted`], never a silent gap.
//! - Resume, poll and ack need the requester to own the stream (someone else's stream is
//!   unknown to them), and a matching `resumeToken` when one is given.
//! - A completed stream that nobody resumed, polled or acknowledged for `resumeInterval.max`
//!   is abandoned: its buffer is freed, and later requests for it get
//!   [`StreamError::Abandoned`]. A live stream is not abandoned: it is still producing, its
//!   buffer is bounded, and the clock starts when it ends. With no `max` nothing is abandoned.
//! - Stream ids and tokens derive from a secret the owner supplies and a counter (SHA-256), so
//!   runs repeat exactly and neither can be guessed without the secret.

use super::messages::{
    end_params, PollResult, ResumeInterval, StreamCreate, StreamRef, StreamStatus, END,
};
use crate::protocol::jsonrpc::{Message, RequestId};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Limits and timing of a [`StreamStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Announced in every `notifications/stream/create`.
    pub resume_interval: ResumeInterval,
    /// Messages kept per stream.
    pub max_messages_per_stream: usize,
    /// Bytes (of message text) kept per stream.
    pub max_bytes_per_stream: usize,
    /// Streams held at once; a request beyond it gets no stream.
    pub max_streams: usize,
    /// Entries per `stream/poll/all` page.
    pub page_size: usize,
    /// Abandoned stream ids remembered, so they get "abandoned" rather than "unknown".
    pub max_tombstones: usize,
    /// Messages one resume sends; the answer says when more are held, and the client asks
    /// again from where it got to. This bounds what one request makes the server publish,
    /// and spares relays (and their rate caps) a burst of hundreds of events.
    pub max_replay_batch: usize,
}

impl Default for StoreConfig {
    /// 1 s minimum between attempts, 5 min before abandonment, 2048 messages or 4 MiB per
    /// stream (a 5-minute stream at four messages a second fits whole).
    fn default() -> Self {
        StoreConfig {
            resume_interval: ResumeInterval {
                min: Some(1),
                max: Some(300),
            },
            max_messages_per_stream: 2048,
            max_bytes_per_stream: 4 * 1024 * 1024,
            max_streams: 256,
            page_size: 50,
            max_tombstones: 1024,
            max_replay_batch: 32,
        }
    }
}

/// Why a resume or poll was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// No such stream, or not the requester's.
    #[error("unknown stream")]
    Unknown,
    /// Abandoned and reclaimed.
    #[error("stream abandoned: nobody resumed or polled it within resumeInterval.max")]
    Abandoned,
    /// The token does not match.
    #[error("wrong resumeToken")]
    WrongToken,
    /// Messages the client needs are gone.
    #[error("messages {first_needed}..={evicted_through} were evicted from the server's buffer")]
    Evicted {
        /// The first sequence number the client needs.
        first_needed: u64,
        /// The newest evicted sequence number.
        evicted_through: u64,
    },
}

impl StreamError {
    /// The JSON-RPC error code (see [`super::messages::codes`]).
    pub fn code(&self) -> i64 {
        use super::messages::codes;
        match self {
            StreamError::Unknown => codes::UNKNOWN_STREAM,
            StreamError::Abandoned => codes::ABANDONED,
            StreamError::WrongToken => codes::WRONG_TOKEN,
            StreamError::Evicted { .. } => codes::EVICTED,
        }
    }
}

/// One message held for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferedMessage {
    /// Its sequence number on the stream.
    pub seq: u64,
    /// The JSON-RPC text.
    pub text: String,
    is_request: bool,
    is_error: bool,
}

/// A replay: the messages to send again, in order, and which replay of the stream it is (so
/// the copies can be told apart from the originals and from each other).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// 1 for the stream's first replay, 2 for the second...
    pub number: u64,
    /// The messages.
    pub messages: Vec<BufferedMessage>,
    /// Whether more messages follow these (ask again from the last one).
    pub more: bool,
}

/// What the store has done, for statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Messages sent again by resumes.
    pub replayed_messages: u64,
    /// Their bytes.
    pub replayed_bytes: u64,
    /// Most messages one stream's buffer held.
    pub high_water_messages: u64,
    /// Most bytes one stream's buffer held.
    pub high_water_bytes: u64,
    /// Messages evicted from full buffers.
    pub evicted: u64,
    /// Streams abandoned.
    pub abandoned: u64,
    /// Completed streams the client acknowledged whole.
    pub released: u64,
}

struct Stored<P> {
    owner: P,
    token: String,
    status: StreamStatus,
    buffer: VecDeque<BufferedMessage>,
    bytes: usize,
    next_seq: u64,
    evicted_through: Option<u64>,
    ended_at: Option<Duration>,
    last_contact: Duration,
    replays: u64,
}

/// The server's resumable streams, for clients identified by `P`.
pub struct StreamStore<P> {
    config: StoreConfig,
    secret: [u8; 32],
    created: u64,
    streams: BTreeMap<String, Stored<P>>,
    tombstones: VecDeque<String>,
    /// Abandoned streams and their owners (someone else's is unknown to a requester).
    abandoned: BTreeMap<String, P>,
    stats: StoreStats,
}

impl<P: Clone + Ord> StreamStore<P> {
    /// An empty store whose ids and tokens derive from `secret`.
    pub fn new(config: StoreConfig, secret: [u8; 32]) -> Self {
        StreamStore {
            config,
            secret,
            created: 0,
            streams: BTreeMap::new(),
            tombstones: VecDeque::new(),
            abandoned: BTreeMap::new(),
            stats: StoreStats::default(),
        }
    }

    /// The store's limits.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// What the store has done so far.
    pub fn stats(&self) -> StoreStats {
        self.stats
    }

    /// Streams held (live or completed, not yet freed).
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether no stream is held.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Whether `stream_id` is held (live, or completed and not yet freed).
    pub fn holds(&self, stream_id: &str) -> bool {
        self.streams.contains_key(stream_id)
    }

    /// Whether `stream_id` is held and still live.
    pub fn is_live(&self, stream_id: &str) -> bool {
        self.streams
            .get(stream_id)
            .is_some_and(|s| s.status == StreamStatus::Live)
    }

    fn derive(&self, purpose: &str, n: u64) -> String {
        let mut h = Sha256::new();
        h.update(self.secret);
        h.update(purpose.as_bytes());
        h.update(n.to_be_bytes());
        let digest = h.finalize();
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Opens a stream for `owner`'s request `request_id`; `None` when the store is full (the
    /// request then proceeds without one).
    pub fn create(
        &mut self,
        owner: P,
        request_id: Option<RequestId>,
        now: Duration,
    ) -> Option<StreamCreate> {
        if self.streams.len() >= self.config.max_streams {
            return None;
        }
        self.created += 1;
        let stream_id = self.derive("stream-id", self.created);
        let token = self.derive("resume-token", self.created);
        self.streams.insert(
            stream_id.clone(),
            Stored {
                owner,
                token: token.clone(),
                status: StreamStatus::Live,
                buffer: VecDeque::new(),
                bytes: 0,
                next_seq: 0,
                evicted_through: None,
                ended_at: None,
                last_contact: now,
                replays: 0,
            },
        );
        Some(StreamCreate {
            stream_id,
            resume_token: Some(token),
            request_id,
            resume_interval: self.config.resume_interval,
        })
    }

    /// Records a message sent on a live stream; returns its sequence number, or `None` if the
    /// stream is not held or has ended.
    pub fn record(&mut self, stream_id: &str, text: &str) -> Option<u64> {
        let config = &self.config;
        let stats = &mut self.stats;
        let s = self.streams.get_mut(stream_id)?;
        if s.status != StreamStatus::Live {
            return None;
        }
        Some(push(s, text, config, stats))
    }

    /// Ends a live stream: records its `notifications/stream/end` as its last message and
    /// returns (sequence number, text) to send.
    pub fn end(&mut self, stream_id: &str, now: Duration) -> Option<(u64, String)> {
        let config = &self.config;
        let stats = &mut self.stats;
        let s = self.streams.get_mut(stream_id)?;
        if s.status != StreamStatus::Live {
            return None;
        }
        let text = Message::Notification {
            method: END.into(),
            params: Some(end_params(stream_id)),
        }
        .to_json();
        let seq = push(s, &text, config, stats);
        s.status = StreamStatus::Completed;
        s.ended_at = Some(now);
        Some((seq, text))
    }

    fn find(&mut self, owner: &P, r: &StreamRef) -> Result<&mut Stored<P>, StreamError> {
        match self.abandoned.get(&r.stream_id) {
            Some(o) if o == owner => return Err(StreamError::Abandoned),
            Some(_) => return Err(StreamError::Unknown),
            None => {}
        }
        let s = match self.streams.get_mut(&r.stream_id) {
            Some(s) if s.owner == *owner => s,
            _ => return Err(StreamError::Unknown),
        };
        match &r.resume_token {
            Some(t) if *t != s.token => Err(StreamError::WrongToken),
            _ => Ok(s),
        }
    }

    /// `stream/resume`: the messages after `lastSequence` (all held ones without it), to send
    /// again in order.
    pub fn resume(
        &mut self,
        owner: &P,
        r: &StreamRef,
        now: Duration,
    ) -> Result<Replay, StreamError> {
        let batch = self.config.max_replay_batch.max(1);
        let s = self.find(owner, r)?;
        s.last_contact = now;
        let first_needed = r.last_sequence.map_or(0, |l| l.saturating_add(1));
        if let Some(evicted_through) = s.evicted_through {
            if first_needed <= evicted_through {
                return Err(StreamError::Evicted {
                    first_needed,
                    evicted_through,
                });
            }
        }
        s.replays += 1;
        let mut pending = s.buffer.iter().filter(|m| m.seq >= first_needed);
        let messages: Vec<BufferedMessage> = pending.by_ref().take(batch).cloned().collect();
        let more = pending.next().is_some();
        let number = s.replays;
        self.stats.replayed_messages += messages.len() as u64;
        self.stats.replayed_bytes += messages.iter().map(|m| m.text.len() as u64).sum::<u64>();
        Ok(Replay {
            number,
            messages,
            more,
        })
    }

    /// `stream/poll`.
    pub fn poll(
        &mut self,
        owner: &P,
        r: &StreamRef,
        now: Duration,
    ) -> Result<PollResult, StreamError> {
        let s = self.find(owner, r)?;
        s.last_contact = now;
        Ok(poll_result(&r.stream_id, s, r.last_sequence))
    }

    /// `stream/poll/all`: the requester's streams in id order, a page at a time; the cursor
    /// is the last id of the previous page.
    pub fn poll_all(
        &mut self,
        owner: &P,
        cursor: Option<&str>,
        now: Duration,
    ) -> (Vec<PollResult>, Option<String>) {
        let page = self.config.page_size.max(1);
        let mut out = Vec::new();
        let mut next = None;
        for (id, s) in self.streams.iter_mut() {
            if s.owner != *owner || cursor.is_some_and(|c| id.as_str() <= c) {
                continue;
            }
            if out.len() == page {
                next = out.last().map(|r: &PollResult| r.stream_id.clone());
                break;
            }
            s.last_contact = now;
            out.push(poll_result(id, s, None));
        }
        (out, next)
    }

    /// The `ack` extension: the client processed the stream through `lastSequence`. A
    /// completed stream acknowledged through its end is freed.
    pub fn ack(&mut self, owner: &P, r: &StreamRef, now: Duration) -> Result<(), StreamError> {
        let s = self.find(owner, r)?;
        s.last_contact = now;
        let whole = s.status == StreamStatus::Completed
            && r.last_sequence
                .is_some_and(|l| l.saturating_add(1) >= s.next_seq);
        if whole {
            self.streams.remove(&r.stream_id);
            self.stats.released += 1;
        }
        Ok(())
    }

    fn abandon_deadline(&self, s: &Stored<P>) -> Option<Duration> {
        let max = Duration::from_secs(self.config.resume_interval.max?);
        let ended = s.ended_at?;
        Some(ended.max(s.last_contact) + max)
    }

    /// When [`StreamStore::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.streams
            .values()
            .filter_map(|s| self.abandon_deadline(s))
            .min()
    }

    /// Abandons completed streams whose time ran out.
    pub fn handle_timeout(&mut self, now: Duration) {
        let expired: Vec<String> = self
            .streams
            .iter()
            .filter(|(_, s)| self.abandon_deadline(s).is_some_and(|d| d <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let Some(s) = self.streams.remove(&id) else {
                continue;
            };
            self.stats.abandoned += 1;
            self.abandoned.insert(id.clone(), s.owner);
            self.tombstones.push_back(id);
            while self.tombstones.len() > self.config.max_tombstones {
                if let Some(old) = self.tombstones.pop_front() {
                    self.abandoned.remove(&old);
                }
            }
        }
    }
}

fn push<P>(s: &mut Stored<P>, text: &str, config: &StoreConfig, stats: &mut StoreStats) -> u64 {
    let seq = s.next_seq;
    s.next_seq += 1;
    let (is_request, is_error) = match Message::parse(text) {
        Ok(Message::Request { .. }) => (true, false),
        Ok(Message::Error { .. }) => (false, true),
        _ => (false, false),
    };
    s.bytes += text.len();
    s.buffer.push_back(BufferedMessage {
        seq,
        text: text.to_owned(),
        is_request,
        is_error,
    });
    while s.buffer.len() > config.max_messages_per_stream || s.bytes > config.max_bytes_per_stream {
        let Some(old) = s.buffer.pop_front() else {
            break;
        };
        s.bytes -= old.text.len();
        s.evicted_through = Some(old.seq);
        stats.evicted += 1;
    }
    stats.high_water_messages = stats.high_water_messages.max(s.buffer.len() as u64);
    stats.high_water_bytes = stats.high_water_bytes.max(s.bytes as u64);
    seq
}

fn poll_result<P>(id: &str, s: &Stored<P>, last: Option<u64>) -> PollResult {
    let first_needed = last.map_or(0, |l| l.saturating_add(1));
    let pending: Vec<&BufferedMessage> =
        s.buffer.iter().filter(|m| m.seq >= first_needed).collect();
    PollResult {
        stream_id: id.to_owned(),
        status: s.status,
        pending_messages: !pending.is_empty(),
        has_request: pending.iter().any(|m| m.is_request),
        has_error: pending.iter().any(|m| m.is_error),
    }
}
