//! Impairments between peers and a relay, per direction, and outages.
//!
//! (Longer than 600 lines because its statistical unit tests, about 230 lines, sit beside the
//! draws they check; the code is about 440.)
//!
//! A NIP-01 connection is a WebSocket over TCP. By default ([`Ordering::Connection`]) a link
//! behaves like one: per connection and direction, messages arrive in the order they were
//! written and none is lost while the connection is up, so a drawn delay is head-of-line
//! delay ([`Pipe`]). Loss comes with the connection (outages, a relay closing it) or from a
//! relay's decision. The per-message stress mode ([`Ordering::Datagram`]) adds independent
//! reordering, duplication and loss (independent or bursty Gilbert–Elliott): no single
//! WebSocket does that, so it must be asked for by name.
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

/// The longest delay a draw (or a distribution's median) gives: a day.
pub const MAX_DELAY_SECS: f64 = 86_400.0;

fn from_secs(s: f64) -> Duration {
    // Clamp absurd draws (NaN, negative, beyond a day) so a heavy tail cannot stall a run.
    Duration::from_secs_f64(if s.is_finite() {
        s.clamp(0.0, MAX_DELAY_SECS)
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

    /// The median delay: what an undisturbed message takes, clamped to a day as draws are
    /// (a Pareto of a tiny shape has a median beyond any duration).
    pub fn median(&self) -> Duration {
        match self {
            Delay::Zero => Duration::ZERO,
            Delay::Constant(d) => *d,
            Delay::Uniform { min, max } => (*min + *max) / 2,
            Delay::Normal { mean, .. } => *mean,
            Delay::LogNormal { median, .. } => *median,
            Delay::Pareto { scale, shape } => {
                from_secs(scale.as_secs_f64() * 2f64.powf(1.0 / shape.max(1e-9)))
            }
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

/// How a link direction orders and loses messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ordering {
    /// A WebSocket over TCP: first in, first out; nothing lost while the connection is up.
    /// A message's arrival is `max(its drawn arrival, the previous message's arrival)`.
    #[default]
    Connection,
    /// A stress mode no single WebSocket has: every message draws its own delay, loss,
    /// duplication and hold-back, so messages overtake each other and vanish on a live
    /// connection. For testing receivers against the worst, never as a model of a relay.
    Datagram,
}

impl Ordering {
    /// The name scenario files and traces use.
    pub fn name(self) -> &'static str {
        match self {
            Ordering::Connection => "connection",
            Ordering::Datagram => "datagram",
        }
    }
}

/// What a link does to messages in one direction.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Direction {
    /// First-in first-out over a connection (the default), or per-message datagrams.
    pub ordering: Ordering,
    /// Base one-way delay. Over a connection it is head-of-line delay: a late message holds
    /// back every message behind it.
    pub delay: Delay,
    /// Datagram mode only: probability that an event is held back by `reorder_delay` on top
    /// of its delay, so later events overtake it.
    pub reorder: f64,
    /// How long a reordered event is held back.
    pub reorder_delay: Duration,
    /// Datagram mode only: probability that an event is delivered more than once.
    pub duplicate: f64,
    /// Extra copies of a duplicated event (at least one).
    pub duplicate_copies: u32,
    /// Time between copies of a duplicated event.
    pub duplicate_spacing: Duration,
    /// Datagram mode only: loss of single events on a live link.
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

impl OutageKind {
    /// Every kind, by its name in scenarios.
    pub const NAMES: [&'static str; 3] = ["relay-restart", "connection-drop", "partition"];
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
    /// when it is duplicated. Over a connection that is always one delay (order and loss are
    /// the connection's business, see [`Pipe`]); in datagram mode draws happen in a fixed
    /// order, whatever the outcome.
    pub fn plan(&mut self, direction: &Direction) -> Vec<Duration> {
        if direction.ordering == Ordering::Connection {
            return vec![direction.delay.sample(&mut self.rng)];
        }
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

    /// One draw from a delay distribution.
    pub fn sample(&mut self, delay: &Delay) -> Duration {
        delay.sample(&mut self.rng)
    }

    /// The link's random stream, for other draws tied to it.
    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
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

/// The messages in flight on one connection in one direction: where its bandwidth queue
/// stands and when its last message arrives. A new connection starts with a new pipe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pipe {
    /// When the link has finished putting the last message's bytes on the wire.
    busy_until: Duration,
    /// When the last message arrives.
    last_arrival: Duration,
}

impl Pipe {
    /// When the copies of a message of `bytes` bytes sent at `now` arrive, given the delays
    /// drawn (or recorded) for it. A limited link sends one message after another: a message
    /// leaves when the link is free and its bytes have gone out, then takes its delay. Over a
    /// connection no message arrives before the one written ahead of it (head-of-line
    /// blocking); `serialise` false skips the bandwidth queue (a recorded fate already
    /// includes every queue).
    pub fn arrivals(
        &mut self,
        direction: &Direction,
        now: Duration,
        bytes: usize,
        delays: &[Duration],
        serialise: bool,
    ) -> Vec<Duration> {
        let sent = match direction.bandwidth {
            Some(bps) if bps > 0 && serialise => {
                let sent =
                    self.busy_until.max(now) + Duration::from_secs_f64(bytes as f64 / bps as f64);
                self.busy_until = sent;
                sent
            }
            _ => now,
        };
        delays
            .iter()
            .map(|delay| {
                let arrival = sent + *delay;
                match direction.ordering {
                    Ordering::Datagram => arrival,
                    Ordering::Connection => {
                        let arrival = arrival.max(self.last_arrival);
                        self.last_arrival = arrival;
                        arrival
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeededStreams;
    use rand::SeedableRng;

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
            ordering: Ordering::Datagram,
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
            ordering: Ordering::Datagram,
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
    fn a_connection_delivers_in_order_and_loses_nothing_whatever_is_configured() {
        let mut l = link();
        let dir = Direction {
            delay: Delay::LogNormal {
                median: Duration::from_millis(60),
                sigma: 1.0,
            },
            reorder: 0.5,
            reorder_delay: Duration::from_millis(500),
            duplicate: 0.5,
            duplicate_copies: 2,
            loss: Loss::Iid(0.5),
            bandwidth: Some(100_000),
            ..Default::default()
        };
        let mut pipe = Pipe::default();
        let mut last = Duration::ZERO;
        let mut held_back = 0;
        for i in 0..N {
            let now = Duration::from_millis(i as u64);
            let plan = l.plan(&dir);
            assert_eq!(plan.len(), 1, "one copy, never lost");
            let arrival = pipe.arrivals(&dir, now, 500, &plan, true);
            assert_eq!(arrival.len(), 1);
            assert!(
                arrival[0] >= last,
                "message {i} overtook the one ahead of it"
            );
            if arrival[0] > now + plan[0] + Duration::from_micros(5_000) {
                held_back += 1;
            }
            last = arrival[0];
        }
        // Jitter shows as head-of-line delay: messages wait behind a slow one.
        assert!(held_back > N / 10, "{held_back}");
    }

    #[test]
    fn a_datagram_link_lets_messages_overtake_each_other() {
        let mut l = link();
        let dir = Direction {
            ordering: Ordering::Datagram,
            delay: Delay::Uniform {
                min: Duration::ZERO,
                max: Duration::from_millis(50),
            },
            ..Default::default()
        };
        let mut pipe = Pipe::default();
        let arrivals: Vec<Duration> = (0..1000)
            .flat_map(|i| {
                let plan = l.plan(&dir);
                pipe.arrivals(&dir, Duration::from_millis(i), 100, &plan, true)
            })
            .collect();
        assert!(arrivals.windows(2).any(|w| w[1] < w[0]));
    }

    #[test]
    fn a_limited_link_serialises_messages_before_their_delay() {
        let dir = Direction {
            delay: Delay::Constant(Duration::from_millis(10)),
            bandwidth: Some(1000),
            ..Default::default()
        };
        let mut pipe = Pipe::default();
        let ms = Duration::from_millis;
        // 500 bytes at 1000 B/s: half a second on the wire, then 10 ms of delay.
        assert_eq!(pipe.arrivals(&dir, ms(0), 500, &[ms(10)], true), [ms(510)]);
        // The next one queues behind it.
        assert_eq!(pipe.arrivals(&dir, ms(0), 500, &[ms(10)], true), [ms(1010)]);
        // A recorded fate skips the queue but still keeps the order.
        assert_eq!(pipe.arrivals(&dir, ms(0), 500, &[ms(1)], false), [ms(1010)]);
    }

    proptest::proptest! {
        #[test]
        fn every_accepted_distribution_draws_and_has_a_median_within_a_day(
            kind in 0u8..6,
            a_ms in 1u64..315_360_000_000,
            b_ms in 0u64..315_360_000_000,
            shape in proptest::prop_oneof![1e-300f64..1e-3, 1e-3f64..10.0, 10.0f64..1e300],
            seed in 0u64..1000,
        ) {
            let (a, b) = (Duration::from_millis(a_ms), Duration::from_millis(b_ms));
            let delay = match kind {
                0 => Delay::Constant(a),
                1 => Delay::Uniform { min: a.min(b), max: a.max(b) },
                2 => Delay::Normal { mean: a, sd: b },
                3 => Delay::LogNormal { median: a, sigma: shape.min(1e6) },
                4 => Delay::Pareto { scale: a, shape },
                _ => Delay::Empirical(vec![a, b]),
            };
            if delay.validate().is_ok() {
                let _ = delay.median();
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                for _ in 0..8 {
                    let _ = delay.sample(&mut rng);
                }
            }
        }
    }

    #[test]
    fn a_pareto_of_a_tiny_shape_has_a_median_of_a_day_not_a_panic() {
        let d = Delay::Pareto {
            scale: Duration::from_millis(10),
            shape: 0.01,
        };
        assert!(d.validate().is_ok());
        assert_eq!(d.median(), Duration::from_secs(86_400));
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
