//! A one-way impaired link: what a relay does to each event between publisher and subscriber,
//! reduced to delay, duplication and loss. (The full relay model, with NIP-01 semantics,
//! profiles, size limits and rate caps, is the simulated-relays work.)

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// How a link treats each event.
#[derive(Debug, Clone, PartialEq)]
pub struct Impairments {
    /// Smallest delivery delay.
    pub min_delay: Duration,
    /// Largest delivery delay; delays are uniform in between, which reorders events whose
    /// send times are closer than the spread.
    pub max_delay: Duration,
    /// Probability that an event is delivered twice.
    pub duplicate: f64,
    /// Probability that an event is lost.
    pub loss: f64,
}

impl Default for Impairments {
    fn default() -> Self {
        Impairments {
            min_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(20),
            duplicate: 0.0,
            loss: 0.0,
        }
    }
}

/// A link with its own random stream.
pub struct Link {
    impairments: Impairments,
    rng: ChaCha8Rng,
}

impl Link {
    /// A link drawing from `rng`.
    pub fn new(impairments: Impairments, rng: ChaCha8Rng) -> Self {
        Link { impairments, rng }
    }

    fn delay(&mut self) -> Duration {
        let (lo, hi) = (self.impairments.min_delay, self.impairments.max_delay);
        if hi <= lo {
            return lo;
        }
        let micros = self
            .rng
            .random_range(lo.as_micros() as u64..=hi.as_micros() as u64);
        Duration::from_micros(micros)
    }

    /// The delays after which copies of one event arrive: none when it is lost, two when it is
    /// duplicated. Draws happen in a fixed order so a run is reproducible.
    pub fn schedule(&mut self) -> Vec<Duration> {
        let lost = self.rng.random_bool(self.impairments.loss.clamp(0.0, 1.0));
        let duplicated = self
            .rng
            .random_bool(self.impairments.duplicate.clamp(0.0, 1.0));
        let first = self.delay();
        let second = self.delay();
        match (lost, duplicated) {
            (true, _) => vec![],
            (false, false) => vec![first],
            (false, true) => vec![first, second],
        }
    }
}
