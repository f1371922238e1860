//! Impairments between peers and a relay, per direction: delay distributions, extra
//! reordering, duplication and loss (independent or bursty Gilbert–Elliott), and outages.
//!
//! Samplers take the random stream they draw from, so the world gives each (relay, peer,
//! direction) link a stream of its own and adding one link never changes another's draws.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal, Normal, Pareto};
use std::time::Duration;

/// A one-way delay distribution.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Delay {
    /// No delay.
    #[default]
    Zero,
    /// Always the same.
    Constant(Duration),
    /// Uniform between two bounds.
    Uniform {
        /// Lower bound.
        min: Duration,
        /// Upper bound.
        max: Duration,
    },
    /// Normal, truncated at zero.
    Normal {
        /// Mean.
        mean: Duration,
        /// Standard deviation.
        sd: Duration,
    },
    /// Lognormal: `median` is e^mu, `sigma` the shape (heavier tail as it grows).
    LogNormal {
        /// The median delay.
        median: Duration,
        /// Shape.
        sigma: f64,
    },
    /// Pareto: never below `scale`, tail index `shape` (a smaller shape, a heavier tail).
    Pareto {
        /// The minimum delay.
        scale: Duration,
        /// Tail index.
        shape: f64,
    },
    /// Drawn uniformly from measured samples (e.g. a recorded trace's delivery delays).
    Empirical(Vec<Duration>),
}

/// Why a delay distribution's parameters are unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelayError {
    /// A parameter is out of range.
    #[error("{0}")]
    Invalid(&'static str),
}

fn from_secs(s: f64) -> Duration {
    // Clamp absurd draws (NaN, negative, beyond a day) so a heavy tail cannot stall a run.
    Duration::from_secs_f64(if s.is_finite() {
        s.clamp(0.0, 86_400.0)
    } else {
        0.0
    })
}

impl Delay {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), DelayError> {
        match self {
            Delay::Uniform { min, max } if min > max => {
                Err(DelayError::Invalid("uniform delay: min is above max"))
            }
            Delay::LogNormal { median, sigma }
                if median.is_zero() || !(*sigma >= 0.0 && sigma.is_finite()) =>
            {
                Err(DelayError::Invalid(
                    "lognormal delay: median must be positive and sigma finite and non-negative",
                ))
            }
            Delay::Pareto { scale, shape }
                if scale.is_zero() || !(*shape > 0.0 && shape.is_finite()) =>
            {
                Err(DelayError::Invalid(
                    "pareto delay: scale and shape must be positive",
                ))
            }
            Delay::Empirical(samples) if samples.is_empty() => {
                Err(DelayError::Invalid("empirical delay: no samples"))
            }
            _ => Ok(()),
        }
    }

    /// The median delay: what an undisturbed message takes.
    pub fn median(&self) -> Duration {
        match self {
            Delay::Zero => Duration::ZERO,
            Delay::Constant(d) => *d,
            Delay::Uniform { min, max } => (*min + *max) / 2,
            Delay::Normal { mean, .. } => *mean,
            Delay::LogNormal { median, .. } => *median,
            Delay::Pareto { scale, shape } => scale.mul_f64(2f64.powf(1.0 / shape.max(1e-9))),
            Delay::Empirical(samples) => {
                let mut s = samples.clone();
                s.sort();
                s.get(s.len() / 2).copied().unwrap_or_default()
            }
        }
    }

    /// Draws one delay. Parameters must have passed [`Delay::validate`]; invalid ones give zero
    /// rather than a panic.
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> Duration {
        match self {
            Delay::Zero => Duration::ZERO,
            Delay::Constant(d) => *d,
            Delay::Uniform { min, max } => {
                if max <= min {
                    *min
                } else {
                    Duration::from_nanos(
                        rng.random_range(min.as_nanos() as u64..=max.as_nanos() as u64),
                    )
                }
            }
            Delay::Normal { mean, sd } => Normal::new(mean.as_secs_f64(), sd.as_secs_f64())
                .map(|n| from_secs(n.sample(rng)))
                .unwrap_or(*mean),
            Delay::LogNormal { median, sigma } => LogNormal::new(median.as_secs_f64().ln(), *sigma)
                .map(|d| from_secs(d.sample(rng)))
                .unwrap_or(*median),
            Delay::Pareto { scale, shape } => Pareto::new(scale.as_secs_f64(), *shape)
                .map(|d| from_secs(d.sample(rng)))
                .unwrap_or(*scale),
            Delay::Empirical(samples) => {
                if samples.is_empty() {
                    Duration::ZERO
                } else {
                    samples[rng.random_range(0..samples.len())]
                }
            }
        }
    }
}

/// Event loss on a link.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Loss {
    /// Nothing is lost.
    #[default]
    None,
    /// Each event is lost independently with this probability.
    Iid(f64),
    /// Bursty loss: a two-state (good/bad) Markov chain, stepped once per event.
    GilbertElliott {
        /// Probability of moving from good to bad.
        good_to_bad: f64,
        /// Probability of moving from bad to good.
        bad_to_good: f64,
        /// Loss probability in the good state.
        loss_in_good: f64,
        /// Loss probability in the bad state.
        loss_in_bad: f64,
    },
}

/// What a link does to events in one direction.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Direction {
    /// Base one-way delay.
    pub delay: Delay,
    /// Probability that an event is held back by `reorder_delay` on top of its delay, so later
    /// events overtake it.
    pub reorder: f64,
    /// How long a reordered event is held back.
    pub reorder_delay: Duration,
    /// Probability that an event is delivered more than once.
    pub duplicate: f64,
    /// Extra copies of a duplicated event (at least one).
    pub duplicate_copies: u32,
    /// Time between copies of a duplicated event.
    pub duplicate_spacing: Duration,
    /// Loss.
    pub loss: Loss,
    /// Link capacity in bytes per second: messages queue behind each other and take
    /// size / bandwidth to cross, before their delay. `None`: unlimited.
    pub bandwidth: Option<u64>,
}

/// Scheduled or random outages.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outages {
    /// Outages at fixed times.
    pub scheduled: Vec<Outage>,
    /// Mean time between drops of each peer's connection (exponential); `None`: never.
    pub connection_drop_every: Option<Duration>,
    /// How long a dropped connection stays down (uniform between the two).
    pub connection_down_for: (Duration, Duration),
    /// Mean time between relay restarts (exponential); `None`: never.
    pub relay_restart_every: Option<Duration>,
    /// How long a restart takes (uniform between the two).
    pub relay_down_for: (Duration, Duration),
}

/// One outage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    /// When it starts.
    pub at: Duration,
    /// How long it lasts.
    pub duration: Duration,
    /// What it does.
    pub kind: OutageKind,
}

/// What an outage does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutageKind {
    /// The relay restarts: every connection drops and nobody can connect until it is back.
    RelayRestart,
    /// One peer's connection (all peers' when `None`) drops and comes back.
    ConnectionDrop {
        /// The peer's name.
        peer: Option<String>,
    },
    /// Messages between the peer (all when `None`) and the relay vanish, with no disconnect.
    Partition {
        /// The peer's name.
        peer: Option<String>,
    },
}

/// The network between peers and one relay.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Impairments {
    /// Peer → relay.
    pub peer_to_relay: Direction,
    /// Relay → peer.
    pub relay_to_peer: Direction,
    /// Outages.
    pub outages: Outages,
}

impl Impairments {
    /// A perfect network.
    pub fn none() -> Self {
        Self::default()
    }
}

/// The state of one link direction: its random stream and its Gilbert–Elliott state.
#[derive(Debug, Clone)]
pub struct LinkState {
    rng: ChaCha8Rng,
    in_bad_state: bool,
}

impl LinkState {
    /// A link drawing from `rng`.
    pub fn new(rng: ChaCha8Rng) -> Self {
        LinkState {
            rng,
            in_bad_state: false,
        }
    }

    /// Whether the next event is lost.
    fn lost(&mut self, loss: &Loss) -> bool {
        match loss {
            Loss::None => false,
            Loss::Iid(p) => self.rng.random_bool(p.clamp(0.0, 1.0)),
            Loss::GilbertElliott {
                good_to_bad,
                bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => {
                let flip = if self.in_bad_state {
                    bad_to_good
                } else {
                    good_to_bad
                };
                if self.rng.random_bool(flip.clamp(0.0, 1.0)) {
                    self.in_bad_state = !self.in_bad_state;
                }
                let p = if self.in_bad_state {
                    loss_in_bad
                } else {
                    loss_in_good
                };
                self.rng.random_bool(p.clamp(0.0, 1.0))
            }
        }
    }

    /// The delays after which the copies of one event arrive: empty when it is lost, several
    /// when it is duplicated. Draws happen in a fixed order, whatever the outcome.
    pub fn plan(&mut self, direction: &Direction) -> Vec<Duration> {
        let lost = self.lost(&direction.loss);
        let reordered = self.rng.random_bool(direction.reorder.clamp(0.0, 1.0));
        let duplicated = self.rng.random_bool(direction.duplicate.clamp(0.0, 1.0));
        let mut delay = direction.delay.sample(&mut self.rng);
        if lost {
            return Vec::new();
        }
        if reordered {
            delay += direction.reorder_delay;
        }
        let copies = if duplicated {
            1 + direction.duplicate_copies.max(1)
        } else {
            1
        };
        (0..copies)
            .map(|i| delay + direction.duplicate_spacing * i)
            .collect()
    }

    /// An exponential wait with the given mean (for random outages).
    pub fn exponential(&mut self, mean: Duration) -> Duration {
        Exp::new(1.0 / mean.as_secs_f64().max(1e-9))
            .map(|e| from_secs(e.sample(&mut self.rng)))
            .unwrap_or(mean)
    }

    /// A uniform duration between two bounds.
    pub fn uniform(&mut self, (lo, hi): (Duration, Duration)) -> Duration {
        Delay::Uniform {
            min: lo,
            max: hi.max(lo),
        }
        .sample(&mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::SeededStreams;

    const N: usize = 20_000;

    fn link() -> LinkState {
        LinkState::new(SeededStreams::new(42).stream("test-link"))
    }

    fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q) as usize]
    }

    fn draws(delay: Delay) -> Vec<f64> {
        let mut l = link();
        (0..N)
            .map(|_| delay.sample(&mut l.rng).as_secs_f64())
            .collect()
    }

    #[test]
    fn delay_quantiles_match_their_distributions() {
        let ms = Duration::from_millis;
        let u = draws(Delay::Uniform {
            min: ms(100),
            max: ms(300),
        });
        assert!((quantile(u.clone(), 0.5) - 0.2).abs() < 0.005);
        assert!(u.iter().all(|d| (0.1..=0.3).contains(d)));
        let n = draws(Delay::Normal {
            mean: ms(200),
            sd: ms(20),
        });
        assert!((quantile(n.clone(), 0.5) - 0.2).abs() < 0.002);
        assert!(
            (quantile(n, 0.8413) - 0.22).abs() < 0.002,
            "one sd above the mean"
        );
        let l = draws(Delay::LogNormal {
            median: ms(120),
            sigma: 0.6,
        });
        assert!((quantile(l.clone(), 0.5) - 0.12).abs() < 0.004);
        // The 97.72 % quantile of a lognormal is median * e^(2 sigma).
        assert!((quantile(l, 0.9772) / (0.12 * (1.2f64).exp()) - 1.0).abs() < 0.06);
        let p = draws(Delay::Pareto {
            scale: ms(50),
            shape: 2.0,
        });
        assert!(p.iter().all(|d| *d >= 0.05));
        // Median of a Pareto: scale * 2^(1/shape).
        assert!((quantile(p, 0.5) / (0.05 * 2f64.sqrt()) - 1.0).abs() < 0.03);
        let e = draws(Delay::Empirical(vec![ms(10), ms(30)]));
        let share = e.iter().filter(|d| (**d - 0.01).abs() < 1e-9).count() as f64 / N as f64;
        assert!((share - 0.5).abs() < 0.02);
    }

    #[test]
    fn loss_duplicate_and_reorder_rates_match_their_configuration() {
        let mut l = link();
        let dir = Direction {
            delay: Delay::Constant(Duration::from_millis(10)),
            reorder: 0.1,
            reorder_delay: Duration::from_millis(500),
            duplicate: 0.05,
            duplicate_copies: 2,
            duplicate_spacing: Duration::from_millis(7),
            loss: Loss::Iid(0.02),
            bandwidth: None,
        };
        let plans: Vec<Vec<Duration>> = (0..N).map(|_| l.plan(&dir)).collect();
        let lost = plans.iter().filter(|p| p.is_empty()).count() as f64 / N as f64;
        let duplicated = plans.iter().filter(|p| p.len() == 3).count() as f64 / N as f64;
        let held = plans
            .iter()
            .filter(|p| p.first() == Some(&Duration::from_millis(510)))
            .count() as f64
            / N as f64;
        assert!((lost - 0.02).abs() < 0.005, "{lost}");
        assert!((duplicated - 0.05 * 0.98).abs() < 0.007, "{duplicated}");
        assert!((held - 0.1 * 0.98).abs() < 0.01, "{held}");
        let dup = plans.iter().find(|p| p.len() == 3).unwrap();
        assert_eq!(dup[1] - dup[0], Duration::from_millis(7));
    }

    #[test]
    fn gilbert_elliott_loss_comes_in_bursts_of_the_expected_length() {
        let mut l = link();
        let dir = Direction {
            loss: Loss::GilbertElliott {
                good_to_bad: 0.01,
                bad_to_good: 0.25,
                loss_in_good: 0.0,
                loss_in_bad: 1.0,
            },
            ..Default::default()
        };
        let lost: Vec<bool> = (0..200_000).map(|_| l.plan(&dir).is_empty()).collect();
        let mut bursts = Vec::new();
        let mut run = 0;
        for &x in &lost {
            if x {
                run += 1;
            } else if run > 0 {
                bursts.push(run);
                run = 0;
            }
        }
        let mean_burst = bursts.iter().sum::<usize>() as f64 / bursts.len() as f64;
        // Time spent in the bad state is geometric with mean 1 / bad_to_good = 4 events.
        assert!((mean_burst - 4.0).abs() < 0.3, "{mean_burst}");
        let rate = lost.iter().filter(|x| **x).count() as f64 / lost.len() as f64;
        // Stationary share of the bad state: 0.01 / (0.01 + 0.25).
        assert!((rate - 0.01 / 0.26).abs() < 0.005, "{rate}");
    }

    #[test]
    fn bad_parameters_are_reported_not_panicked_on() {
        let ms = Duration::from_millis;
        assert!(Delay::Uniform {
            min: ms(5),
            max: ms(1)
        }
        .validate()
        .is_err());
        assert!(Delay::LogNormal {
            median: ms(0),
            sigma: 1.0
        }
        .validate()
        .is_err());
        assert!(Delay::Pareto {
            scale: ms(1),
            shape: -1.0
        }
        .validate()
        .is_err());
        assert!(Delay::Empirical(vec![]).validate().is_err());
        let mut l = link();
        assert_eq!(Delay::Empirical(vec![]).sample(&mut l.rng), Duration::ZERO);
        assert_eq!(
            Delay::Pareto {
                scale: ms(1),
                shape: -1.0
            }
            .sample(&mut l.rng),
            ms(1)
        );
    }
}
