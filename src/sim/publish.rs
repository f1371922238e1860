//! A peer's publish pipeline: the time between a peer deciding to send a message and its bytes
//! going on the wire to one relay, and whether messages can overtake each other on the way.
//!
//! Real SDKs sign (and may encrypt) every event before writing it, which costs time that grows
//! with the event's size, and some publish from concurrent tasks: a keepalive ping that does
//! not take the writer's lock, parallel publishes to several relays. A small event made after
//! a large one can then reach the wire first. A sequential pipeline (one writer, in order)
//! only delays; a concurrent one can reorder. See `docs/physics.md`.

use crate::relay::impair::Delay;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// How a peer's messages reach the wire.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PublishPipeline {
    /// Whether messages can overtake each other before the wire.
    pub mode: PublishMode,
    /// Fixed cost of each event (signing: ~40 µs with the `nostr` crate on one core).
    pub per_event: Duration,
    /// Cost per KiB of event (serialisation, hashing, encryption).
    pub per_kib: Duration,
    /// Scheduling jitter of each publish (task wake-up, event loop).
    pub jitter: Delay,
}

/// Whether a peer writes messages one after another or from concurrent tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PublishMode {
    /// One writer: a message waits for the one before it.
    #[default]
    Sequential,
    /// Each message from its own task: a cheap one can overtake an expensive one.
    Concurrent,
}

impl PublishMode {
    /// The name scenario files use.
    pub fn name(self) -> &'static str {
        match self {
            PublishMode::Sequential => "sequential",
            PublishMode::Concurrent => "concurrent",
        }
    }
}

impl PublishPipeline {
    /// Whether the pipeline takes no time at all (the default): messages go on the wire when
    /// they are made, with no draw.
    pub fn is_instant(&self) -> bool {
        self.per_event.is_zero() && self.per_kib.is_zero() && self.jitter == Delay::Zero
    }

    /// When a message of `bytes` bytes made at `now` reaches the wire, given when the previous
    /// one did (`last`); events pay the signing cost, control messages only the jitter.
    ///
    /// A sequential pipeline is one writer: a message's work starts when it is scheduled and the
    /// writer is free, so costs add up (ten 48 KB events made at once leave one signing time
    /// apart). A concurrent one starts every message's work at once, so a cheap message can
    /// finish before an expensive one made earlier.
    pub fn wire_time(
        &self,
        rng: &mut ChaCha8Rng,
        now: Duration,
        bytes: Option<usize>,
        last: Duration,
    ) -> Duration {
        let cost = match bytes {
            Some(b) => self.per_event + self.per_kib.mul_f64(b as f64 / 1024.0),
            None => Duration::ZERO,
        };
        let scheduled = now + self.jitter.sample(rng);
        let start = match self.mode {
            PublishMode::Sequential => scheduled.max(last),
            PublishMode::Concurrent => scheduled,
        };
        // Whole microseconds, the unit traces record.
        Duration::from_micros((start + cost).as_micros() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeededStreams;

    fn rng() -> ChaCha8Rng {
        SeededStreams::new(3).stream("publish-test")
    }

    #[test]
    fn a_sequential_pipeline_keeps_the_order_messages_were_made_in() {
        let p = PublishPipeline {
            per_event: Duration::from_micros(40),
            per_kib: Duration::from_micros(100),
            ..Default::default()
        };
        let mut r = rng();
        let big = p.wire_time(&mut r, Duration::ZERO, Some(48_000), Duration::ZERO);
        let small = p.wire_time(&mut r, Duration::ZERO, Some(600), big);
        assert!(big > Duration::from_millis(4));
        assert!(small >= big);
    }

    #[test]
    fn a_sequential_pipeline_adds_up_the_costs_of_messages_made_together() {
        let p = PublishPipeline {
            per_event: Duration::from_millis(5),
            ..Default::default()
        };
        let mut r = rng();
        let mut last = Duration::ZERO;
        let mut wire = Vec::new();
        for _ in 0..3 {
            last = p.wire_time(&mut r, Duration::ZERO, Some(600), last);
            wire.push(last.as_millis());
        }
        assert_eq!(wire, [5, 10, 15]);
        // A control message (no signing) waits for the writer but costs nothing itself.
        assert_eq!(p.wire_time(&mut r, Duration::ZERO, None, last), last);
    }

    #[test]
    fn a_concurrent_pipeline_lets_a_small_event_overtake_a_large_one() {
        let p = PublishPipeline {
            mode: PublishMode::Concurrent,
            per_event: Duration::from_micros(40),
            per_kib: Duration::from_micros(100),
            ..Default::default()
        };
        let mut r = rng();
        let big = p.wire_time(&mut r, Duration::ZERO, Some(48_000), Duration::ZERO);
        let small = p.wire_time(&mut r, Duration::ZERO, Some(600), big);
        assert!(small < big);
    }
}
