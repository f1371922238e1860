//! Limits, timers and failure causes shared by the CEP-41 writer, session and registry.

use std::time::Duration;

/// Limits and timers of open streams. Defaults are the reference SDK's where it has them
/// (64 streams, 64 buffered chunks, 512 KiB, idle 30 s, probe 20 s, close grace 5 s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPolicy {
    /// Streams tracked at once (`maxConcurrentStreams`).
    pub max_concurrent_streams: usize,
    /// Out-of-order chunks waiting for a missing `chunkIndex` (`maxBufferedChunksPerStream`).
    pub max_buffered_chunks_per_stream: usize,
    /// Bytes of those waiting chunks (`maxBufferedBytesPerStream`).
    pub max_buffered_bytes_per_stream: usize,
    /// In-order chunks the application has not read yet. Kept apart from the reorder buffer so
    /// a slow consumer and a reordering relay fail with different causes.
    pub max_unread_chunks_per_stream: usize,
    /// Bytes of those unread chunks.
    pub max_unread_bytes_per_stream: usize,
    /// Silence before a keepalive `ping` (`idleTimeoutMs`).
    pub idle_timeout: Duration,
    /// Wait for the matching `pong` before failing (`probeTimeoutMs`).
    pub probe_timeout: Duration,
    /// Wait after `close` for missing chunks (`closeGracePeriodMs`).
    pub close_grace: Duration,
    /// Optional hard limit on a stream's life.
    pub max_lifetime: Option<Duration>,
    /// Largest nonce answered or accepted, in bytes (the spec's SHOULD: 64).
    pub max_nonce_bytes: usize,
    /// Whether a session answers `start` with `accept`.
    pub send_accept: bool,
    /// Frames held while their `start` has not arrived.
    pub max_orphan_frames: usize,
    /// How long such a frame is held.
    pub orphan_ttl: Duration,
    /// How many ended streams are remembered so their late frames are ignored.
    pub max_tombstones: usize,
}

impl Default for StreamPolicy {
    fn default() -> Self {
        StreamPolicy {
            max_concurrent_streams: 64,
            max_buffered_chunks_per_stream: 64,
            max_buffered_bytes_per_stream: 512 * 1024,
            max_unread_chunks_per_stream: 4096,
            max_unread_bytes_per_stream: 16 * 1024 * 1024,
            idle_timeout: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(20),
            close_grace: Duration::from_secs(5),
            max_lifetime: None,
            max_nonce_bytes: 64,
            send_accept: true,
            max_orphan_frames: 64,
            orphan_ttl: Duration::from_secs(10),
            max_tombstones: 4096,
        }
    }
}

/// The SDK's three error kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StreamErrorKind {
    /// The remote side or local policy aborted the stream (`OpenStreamAbortError`).
    Abort,
    /// Local admission or policy limits (`OpenStreamPolicyError`).
    Policy,
    /// Lifecycle, ordering or contiguity rules broken (`OpenStreamSequenceError`).
    Sequence,
}

/// Why a stream failed. [`StreamFailure::cause`] names it for statistics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamFailure {
    /// The peer sent `abort`.
    #[error("aborted by the peer: {reason:?}")]
    AbortedByPeer {
        /// Its advisory reason.
        reason: Option<String>,
    },
    /// The local application aborted.
    #[error("aborted locally: {reason}")]
    AbortedLocally {
        /// The reason sent.
        reason: String,
    },
    /// No matching `pong` before the probe timeout.
    #[error("no pong before the probe timeout")]
    ProbeTimeout,
    /// No `accept` before the accept timeout.
    #[error("no accept before the accept timeout")]
    AcceptTimeout,
    /// Chunks were still missing when the close grace period ended.
    #[error("{missing} chunks still missing when the close grace period ended")]
    GapAtClose {
        /// How many chunk indices were missing.
        missing: u64,
    },
    /// Too many out-of-order chunks waiting (network reordering or loss).
    #[error("reorder buffer full")]
    ReorderBufferFull,
    /// The application did not read fast enough.
    #[error("slow consumer: unread chunks over the limit")]
    SlowConsumer,
    /// The hard lifetime ran out.
    #[error("stream lifetime exceeded")]
    LifetimeExceeded,
    /// Admission refused the stream.
    #[error("too many concurrent streams")]
    TooManyStreams,
    /// A nonce longer than the local limit.
    #[error("nonce over the size limit")]
    OversizedNonce,
    /// A lifecycle or ordering rule was broken.
    #[error("sequence error: {0}")]
    Sequence(&'static str),
    /// Another implementation's failure, in its own words; `family` is its cause
    /// (`sequence`, `too-many-streams`).
    #[error("{message}")]
    Reported {
        /// The cause it counts as.
        family: &'static str,
        /// The implementation's own message.
        message: String,
    },
}

impl StreamFailure {
    /// The SDK error kind this failure maps to.
    pub fn kind(&self) -> StreamErrorKind {
        match self {
            StreamFailure::AbortedByPeer { .. }
            | StreamFailure::AbortedLocally { .. }
            | StreamFailure::ProbeTimeout
            | StreamFailure::AcceptTimeout
            | StreamFailure::GapAtClose { .. }
            | StreamFailure::LifetimeExceeded => StreamErrorKind::Abort,
            StreamFailure::ReorderBufferFull
            | StreamFailure::SlowConsumer
            | StreamFailure::TooManyStreams
            | StreamFailure::OversizedNonce => StreamErrorKind::Policy,
            StreamFailure::Sequence(_) => StreamErrorKind::Sequence,
            StreamFailure::Reported { family, .. } if *family == "sequence" => {
                StreamErrorKind::Sequence
            }
            StreamFailure::Reported { .. } => StreamErrorKind::Policy,
        }
    }

    /// Another implementation's own words for this failure, if it gave them.
    pub fn detail(&self) -> Option<&str> {
        match self {
            StreamFailure::Reported { message, .. } => Some(message),
            _ => None,
        }
    }

    /// A short, stable cause name for statistics.
    pub fn cause(&self) -> &'static str {
        match self {
            StreamFailure::AbortedByPeer { .. } => "aborted-by-peer",
            StreamFailure::AbortedLocally { .. } => "aborted-locally",
            StreamFailure::ProbeTimeout => "probe-timeout",
            StreamFailure::AcceptTimeout => "accept-timeout",
            StreamFailure::GapAtClose { .. } => "gap-at-close",
            StreamFailure::ReorderBufferFull => "reorder-buffer-full",
            StreamFailure::SlowConsumer => "slow-consumer",
            StreamFailure::LifetimeExceeded => "lifetime-exceeded",
            StreamFailure::TooManyStreams => "too-many-streams",
            StreamFailure::OversizedNonce => "oversized-nonce",
            StreamFailure::Sequence(_) => "sequence",
            StreamFailure::Reported { family, .. } => family,
        }
    }

    /// Whether the peer should be told with an `abort` frame (it already knows when it aborted).
    pub fn warrants_abort_frame(&self) -> bool {
        !matches!(self, StreamFailure::AbortedByPeer { .. })
    }
}
