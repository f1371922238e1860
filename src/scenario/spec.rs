//! The scenario file format, as serde types. Every table refuses unknown keys, so a typo is
//! an error with a suggestion rather than a silently ignored setting.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::time::Duration;
use toml::Spanned;

/// The longest duration a scenario may state: ten years as durations are written (`"10y"` is
/// ten years of 365.25 days).
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 31_557_600);

/// A duration written as a string with a unit (`"250ms"`, `"30s"`, `"10m"`) or a number of
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Seconds(f64),
        }
        let d = match Raw::deserialize(d)? {
            Raw::Text(s) => humantime::parse_duration(&s).map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid duration {s:?}: {e} (write e.g. \"250ms\", \"30s\", \"10m\")"
                ))
            })?,
            Raw::Seconds(n) if n.is_finite() && n >= 0.0 => Duration::try_from_secs_f64(n)
                .map_err(|_| serde::de::Error::custom(format!("invalid duration {n}")))?,
            Raw::Seconds(n) => {
                return Err(serde::de::Error::custom(format!(
                    "invalid duration {n}: must be a non-negative number of seconds"
                )))
            }
        };
        // Virtual time is counted in microseconds from the start of a run; nothing a scenario
        // means can need more than ten years, and bounding it keeps all arithmetic in range.
        if d > MAX_DURATION {
            return Err(serde::de::Error::custom(format!(
                "duration {d:?} is longer than the 10-year limit"
            )));
        }
        Ok(Dur(d))
    }
}

/// A byte size written as a number or a string with a unit (`"64KiB"`, `"10MiB"`, `"1GiB"`,
/// `"2MB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub usize);

/// Parses `65536`, `64KiB`, `10MiB`, `1GiB`, `2MB`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size: write e.g. 65536, \"64KiB\" or \"10MiB\""))?;
    let factor = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        "KB" | "kB" => 1000,
        "MB" => 1_000_000,
        "GiB" => 1 << 30,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit {other:?}: use B, KiB, MiB, GiB, KB, MB or GB"
            ))
        }
    };
    n.checked_mul(factor)
        .filter(|n| *n <= crate::limits::MAX_SIZE)
        .ok_or_else(|| {
            format!(
                "{s:?} is too large: sizes are at most {} bytes (4 GiB)",
                crate::limits::MAX_SIZE
            )
        })
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Bytes(u64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
            Raw::Bytes(n) => usize::try_from(n)
                .ok()
                .filter(|n| *n <= crate::limits::MAX_SIZE)
                .map(Size)
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "{n} is too large: sizes are at most {} bytes (4 GiB)",
                        crate::limits::MAX_SIZE
                    ))
                }),
        }
    }
}

/// A whole scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Name; defaults to the file name.
    pub name: Option<String>,
    /// What the scenario shows.
    pub description: Option<String>,
    /// Run seed (default 1).
    pub seed: Option<u64>,
    /// Number of runs; run `i` uses seed `seed + i` (default 1).
    pub runs: Option<u32>,
    /// How long a run may last in virtual time (default 10 minutes).
    pub duration: Option<Dur>,
    /// How the world's peers sign: `deferred` (default) or `real`.
    pub signatures: Option<SignatureMode>,
    /// Relays.
    #[serde(default)]
    pub relays: Vec<RelaySpec>,
    /// Server peers.
    #[serde(default)]
    pub servers: Vec<ServerSpec>,
    /// Client peers.
    #[serde(default)]
    pub clients: Vec<ClientSpec>,
    /// Endpoint policies.
    #[serde(default)]
    pub policy: PolicySpec,
    /// What the clients do.
    #[serde(default)]
    pub workloads: Vec<Spanned<WorkloadSpec>>,
    /// Assertions over the results.
    #[serde(default)]
    pub expect: ExpectSpec,
    /// Peer behaviours by name: a preset with knobs overridden.
    #[serde(default)]
    pub behaviours: BTreeMap<String, BehaviourSpec>,
}

/// How a des world's peers sign their events (`nip01::signatures`): the same events, traces
/// and relay verdicts either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignatureMode {
    /// A placeholder stands for each signature until something reads it (a trace storing
    /// events whole), when the real one is made.
    #[default]
    Deferred,
    /// Every event is signed (BIP-340) as it is made.
    Real,
}

/// A peer behaviour: a preset with knobs overridden (`docs/behaviours.md`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BehaviourSpec {
    /// The preset it starts from (default `relaysim`).
    pub preset: Option<Spanned<String>>,
    /// `none` or `per-id`.
    pub dedup: Option<Spanned<String>>,
    /// How many ids `per-id` de-duplication remembers.
    pub dedup_memory: Option<usize>,
    /// `prefixed`, `message-id` or `peer-counter`.
    pub tokens: Option<Spanned<String>>,
    /// The text before the call id of `prefixed` tokens (up to 4,096 bytes).
    pub token_prefix: Option<String>,
    /// Server: feed its own `accept` to its CEP-22 receiver.
    pub feed_accept: Option<bool>,
    /// Client: `when-unknown` or `never`.
    pub upload_accept: Option<Spanned<String>>,
    /// Client: `at-start` or `at-request`.
    pub reader_session: Option<Spanned<String>>,
    /// Server: `when-unknown` or `never`.
    pub stream_accept: Option<Spanned<String>>,
    /// `none` or `ok`: whether a transfer's or stream's next frame waits for the relays' OKs.
    pub publish_wait: Option<Spanned<String>>,
    /// With `publish_wait = "ok"`: how long to wait for the OKs.
    pub ok_timeout: Option<Dur>,
    /// With `publish_wait = "ok"`: `all` (every relay's verdict) or `any` (the first acceptance).
    pub ok_quorum: Option<Spanned<String>>,
    /// With `publish_wait = "ok"`: `proceed` or `retry` when the OKs do not come in time.
    pub missing_ok: Option<Spanned<String>>,
    /// Server: a CEP-41 writer's keepalive ping skips the wait for earlier frames.
    pub ping_bypass: Option<bool>,
    /// Server: CEP-41 writer frames carry an `e` tag naming the request.
    pub writer_e_tags: Option<bool>,
    /// Client: `token` or `e-tag`: what keeps a pending call alive.
    pub call_refresh: Option<Spanned<String>>,
    /// Client: check call timeouts only on sweeps this far apart (`"0s"`: exactly).
    pub timer_sweep: Option<Dur>,
    /// Client: the largest ping nonce its reader answers, in bytes (0: any).
    pub nonce_limit: Option<usize>,
    /// Client: a failed CEP-22 download fails its call at once (else it times out).
    pub failures_reach_call: Option<bool>,
}

/// A relay: a profile plus overrides.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelaySpec {
    /// Its name, used by peers.
    pub name: Spanned<String>,
    /// Built-in profile (default `ideal`).
    pub profile: Option<Spanned<String>>,
    /// Event size limit override.
    pub max_event_bytes: Option<Size>,
    /// WebSocket message limit override.
    pub max_message_bytes: Option<Size>,
    /// Rate limit override.
    pub rate_limit: Option<RateSpec>,
    /// Time the relay spends on each event, one at a time (caps its event rate).
    pub processing: Option<Dur>,
    /// How the relay orders work between reading a message and acting on it.
    pub intake: Option<IntakeSpec>,
    /// Peer → relay network.
    pub up: Option<LinkSpec>,
    /// Relay → peer network.
    pub down: Option<LinkSpec>,
    /// Scheduled outages.
    #[serde(default)]
    pub outages: Vec<OutageSpec>,
    /// Random connection drops: mean time between them, per peer.
    pub connection_drop_every: Option<Dur>,
    /// How long a dropped connection stays down: `[min, max]`.
    pub connection_down_for: Option<[Dur; 2]>,
}

/// A token-bucket rate limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateSpec {
    /// `connection`, `pubkey`, `ip` or `server`.
    pub scope: Spanned<String>,
    /// Events allowed per minute.
    pub per_minute: f64,
    /// Burst size (default: one minute's worth).
    pub burst: Option<f64>,
    /// `reject`, `delay` or `drop`.
    pub action: Spanned<String>,
    /// The OK message for `reject` (default `rate-limited: slow down`).
    pub message: Option<String>,
    /// How tokens come back: `smooth` (the default), `ticks` (in steps every `tick`) or
    /// `whole-seconds` (noteguard's and nostr-relay-builder's count).
    pub refill: Option<Spanned<String>>,
    /// The timer's period for `refill = "ticks"`.
    pub tick: Option<Dur>,
}

/// A relay's intake: `mode = "serial"` (the default), `"concurrent"` with a handling time, or
/// `"batch-commit"` with a commit cost.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntakeSpec {
    /// `"serial"`, `"concurrent"` or `"batch-commit"`.
    pub mode: Spanned<String>,
    /// Concurrent: handling time of each message.
    pub handling: Option<DelaySpec>,
    /// Concurrent: extra handling time per KiB.
    pub per_kib: Option<Dur>,
    /// Batch commit: fixed cost of one commit.
    pub per_batch: Option<Dur>,
    /// Batch commit: extra cost per event in a batch.
    pub per_event: Option<Dur>,
}

/// A peer's publish pipeline.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishSpec {
    /// `"sequential"` (the default) or `"concurrent"`.
    pub mode: Option<Spanned<String>>,
    /// Fixed cost of each event (signing).
    pub per_event: Option<Dur>,
    /// Cost per KiB of event.
    pub per_kib: Option<Dur>,
    /// Scheduling jitter of each message.
    pub jitter: Option<DelaySpec>,
}

/// One direction of a relay's network.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// `"connection"` (the default: a WebSocket, in order, lossless while up) or `"datagram"`
    /// (a stress mode: per-message reordering, duplication and loss).
    pub ordering: Option<Spanned<String>>,
    /// Delay distribution.
    pub delay: Option<DelaySpec>,
    /// Datagram mode: probability an event is held back by `reorder_delay`.
    pub reorder: Option<f64>,
    /// Extra delay of a held-back event.
    pub reorder_delay: Option<Dur>,
    /// Probability an event is duplicated.
    pub duplicate: Option<f64>,
    /// Extra copies of a duplicated event.
    pub duplicate_copies: Option<u32>,
    /// Time between copies.
    pub duplicate_spacing: Option<Dur>,
    /// Independent loss probability.
    pub loss: Option<f64>,
    /// Bursty loss instead (Gilbert–Elliott).
    pub burst_loss: Option<BurstLossSpec>,
    /// Link capacity, e.g. `"1MB/s"` or `"10MiB/s"` (bytes per second).
    pub bandwidth: Option<Spanned<String>>,
}

/// Gilbert–Elliott parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BurstLossSpec {
    /// Good → bad transition probability per event.
    pub good_to_bad: f64,
    /// Bad → good transition probability per event.
    pub bad_to_good: f64,
    /// Loss probability while good.
    #[serde(default)]
    pub loss_in_good: f64,
    /// Loss probability while bad.
    pub loss_in_bad: f64,
}

/// A delay distribution: `{ dist = "lognormal", median = "80ms", sigma = 0.5 }` and so on.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, tag = "dist", rename_all = "lowercase")]
pub enum DelaySpec {
    /// Always `value`.
    Constant {
        /// The delay.
        value: Dur,
    },
    /// Uniform in `[min, max]`.
    Uniform {
        /// Lower bound.
        min: Dur,
        /// Upper bound.
        max: Dur,
    },
    /// Normal, truncated at zero.
    Normal {
        /// Mean.
        mean: Dur,
        /// Standard deviation.
        sd: Dur,
    },
    /// Lognormal.
    Lognormal {
        /// Median.
        median: Dur,
        /// Shape.
        sigma: f64,
    },
    /// Pareto.
    Pareto {
        /// Minimum.
        scale: Dur,
        /// Tail index.
        shape: f64,
    },
    /// Drawn from samples.
    Empirical {
        /// The samples.
        samples: Vec<Dur>,
    },
}

/// A scheduled outage.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutageSpec {
    /// When it starts.
    pub at: Dur,
    /// How long it lasts.
    pub duration: Dur,
    /// `relay-restart`, `connection-drop` or `partition`.
    pub kind: Spanned<String>,
    /// The peer affected (connection drops and partitions; all peers when absent).
    pub peer: Option<String>,
}

/// A server peer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Its name.
    pub name: Spanned<String>,
    /// Relays it uses.
    pub relays: Vec<Spanned<String>>,
    /// The endpoint implementation (`relaysim`).
    pub r#impl: Option<Spanned<String>>,
    /// How its messages reach the wire.
    pub publish: Option<PublishSpec>,
    /// Seconds its clock runs ahead of true time (behind when negative).
    pub clock_skew_secs: Option<i64>,
    /// Subscribe with `since` = its own now, as the ContextVM SDKs do.
    #[serde(default)]
    pub subscribe_since: bool,
    /// The transport it copies: a preset (`relaysim`, `ts-sdk`, `rust-sdk`) or a
    /// `[behaviours.NAME]` table.
    pub behaviour: Option<Spanned<String>>,
    /// A program that is this peer's whole transport, run by the node host in virtual time:
    /// `ts-sdk` (the pinned TypeScript SDK) or a path to a program module.
    pub program: Option<Spanned<String>>,
    /// Options handed to the program as they are (`env.options`).
    pub program_options: Option<Spanned<toml::Table>>,
}

/// Client peers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// Its name (with `-0`, `-1`... appended when `count` > 1).
    pub name: Spanned<String>,
    /// Relays it uses.
    pub relays: Vec<Spanned<String>>,
    /// The server it calls (default: the only one).
    pub server: Option<Spanned<String>>,
    /// How many such clients.
    pub count: Option<usize>,
    /// Skip `initialize` and advertise capabilities on requests.
    #[serde(default)]
    pub stateless: bool,
    /// Share one IP address between these clients (for per-IP rate limits).
    pub ip: Option<String>,
    /// Advertise MCP resumable streams: the server then carries its long calls on streams
    /// the client resumes after losing messages.
    #[serde(default)]
    pub resumable_streams: bool,
    /// The endpoint implementation (`relaysim`).
    pub r#impl: Option<Spanned<String>>,
    /// How its messages reach the wire.
    pub publish: Option<PublishSpec>,
    /// Seconds its clock runs ahead of true time (behind when negative).
    pub clock_skew_secs: Option<i64>,
    /// Subscribe with `since` = its own now, as the ContextVM SDKs do.
    #[serde(default)]
    pub subscribe_since: bool,
    /// The transport it copies: a preset (`relaysim`, `ts-sdk`, `rust-sdk`) or a
    /// `[behaviours.NAME]` table.
    pub behaviour: Option<Spanned<String>>,
    /// A program that is this peer's whole transport (see [`ServerSpec::program`]).
    pub program: Option<Spanned<String>>,
    /// Options handed to the program as they are (`env.options`).
    pub program_options: Option<Spanned<toml::Table>>,
}

/// Endpoint policies, for every peer.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    /// Largest published event (chunk budget).
    pub budget: Option<Size>,
    /// Soft request timeout.
    pub request_timeout: Option<Dur>,
    /// Hard request timeout.
    pub max_request_timeout: Option<Dur>,
    /// CEP-41 idle timeout.
    pub idle_timeout: Option<Dur>,
    /// CEP-41 probe timeout.
    pub probe_timeout: Option<Dur>,
    /// CEP-41 close grace period.
    pub close_grace: Option<Dur>,
    /// CEP-22 hard transfer timeout.
    pub transfer_timeout: Option<Dur>,
    /// CEP-22 grace for chunks missing at `end`.
    pub end_grace: Option<Dur>,
    /// CEP-22 reorder window (progress positions).
    pub reorder_window: Option<u64>,
    /// CEP-22 out-of-order chunks held.
    pub max_out_of_order_chunks: Option<usize>,
    /// CEP-22 receivers: the largest transfer admitted, counted on the whole JSON-RPC message
    /// (default 100 MiB, the reference SDK's).
    pub max_transfer_bytes: Option<Size>,
    /// CEP-22 receivers: the most chunks a transfer may declare (default 10,000).
    pub max_transfer_chunks: Option<u64>,
    /// CEP-41 out-of-order chunks held.
    pub max_buffered_chunks: Option<usize>,
    /// CEP-41 out-of-order bytes held.
    pub max_buffered_bytes: Option<Size>,
    /// CEP-41 chunks released but not yet read by the application (a slow consumer's backlog).
    pub max_unread_chunks: Option<usize>,
    /// Resumable streams: `resumeInterval.min`, whole seconds.
    pub resume_min: Option<Dur>,
    /// Resumable streams: `resumeInterval.max`, whole seconds.
    pub resume_max: Option<Dur>,
    /// Resumable streams: messages the server keeps per stream.
    pub stream_buffer_events: Option<usize>,
}

/// What clients do.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// A name for reports (default: `<kind>-<index>`).
    pub name: Option<String>,
    /// `request`, `download`, `upload`, `stream` or `slow`.
    pub kind: Spanned<String>,
    /// Which client (default: every client).
    pub client: Option<Spanned<String>>,
    /// How many calls per client.
    pub count: Option<u32>,
    /// When the first call goes out.
    pub at: Option<Dur>,
    /// Time between calls.
    pub every: Option<Dur>,
    /// Payload size (download, upload; request text).
    pub bytes: Option<Size>,
    /// `ascii`, `escape-heavy`, `utf8` or `random`.
    pub content: Option<Spanned<String>>,
    /// Stream chunks.
    pub chunks: Option<u64>,
    /// Stream chunk size.
    pub chunk_bytes: Option<Size>,
    /// Time between stream chunks.
    pub interval: Option<Dur>,
    /// A slow consumer: the client application reads one stream chunk per this interval.
    pub consume_interval: Option<Dur>,
    /// How long a `slow` call works.
    pub work: Option<Dur>,
    /// A `slow` call sends a progress notification this often.
    pub progress_every: Option<Dur>,
    /// Send a progress token (default: true; false makes oversized responses fail cleanly).
    pub progress: Option<bool>,
}

/// A count bound: an exact number, or `{ min = .., max = .. }`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Bound {
    /// Exactly this many.
    Exact(u64),
    /// Within a range.
    Range {
        /// At least.
        min: Option<u64>,
        /// At most.
        max: Option<u64>,
    },
}

/// Assertions over the results of all runs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    /// Completed calls / all calls, at least.
    pub min_completion_ratio: Option<f64>,
    /// Integrity violations, at most (always checked; default 0).
    pub max_integrity_violations: Option<u64>,
    /// Latency bounds: `"<metric>.<quantile>" = "<duration>"`, e.g. `"transfer_completion.p99"`.
    #[serde(default)]
    pub latency: BTreeMap<String, Dur>,
    /// Failure counts by cause.
    #[serde(default)]
    pub failures: BTreeMap<String, Bound>,
    /// Counter bounds, e.g. `"rejected.rate-limited" = { min = 1 }`.
    #[serde(default)]
    pub counters: BTreeMap<String, Bound>,
    /// How every call of a workload ends: `"completed"`, `"failed"` (any cause) or
    /// `"failed:<cause>"`, by workload name.
    #[serde(default)]
    pub outcomes: BTreeMap<String, String>,
    /// Hold `outcomes` to the run of this seed only (other runs' calls may end otherwise):
    /// an outcome that depends on the seed, stated for the seed that shows it.
    pub seed: Option<u64>,
    /// Shares of a workload's calls over all runs that end a given way, by workload and
    /// outcome: `{ "ts-stream" = { "failed:stream-sequence" = "12/20" } }`.
    #[serde(default)]
    pub rates: BTreeMap<String, BTreeMap<String, Rate>>,
}

/// The share of a workload's calls that end one way: exactly `"a/b"`, or within
/// `{ min = "a/b", max = "c/d" }`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Rate {
    /// Exactly this share: `"12/20"` holds for 12 of 20 calls, 24 of 40, ...
    Exact(String),
    /// Within a range of shares.
    Range {
        /// At least.
        min: Option<String>,
        /// At most.
        max: Option<String>,
    },
}

/// A share `a/b` (`a <= b`, `0 < b <= 1,000,000`), as a numerator and denominator.
pub fn parse_share(text: &str) -> Result<(u64, u64), String> {
    let (a, b) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not a share: write it as \"a/b\", e.g. \"12/20\""))?;
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("{text:?} is not a share: {s:?} is not a whole number"))
    };
    let (a, b) = (number(a)?, number(b)?);
    if b == 0 || b > 1_000_000 {
        return Err(format!(
            "{text:?}: the denominator must be between 1 and 1,000,000"
        ));
    }
    if a > b {
        return Err(format!("{text:?}: a share cannot exceed 1 ({a} > {b})"));
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_units_and_bad_ones_explain_themselves() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("10MiB"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_size("2MB"), Ok(2_000_000));
        assert!(parse_size("ten").unwrap_err().contains("not a size"));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("3GB"), Ok(3_000_000_000));
        assert!(parse_size("5GiB").unwrap_err().contains("too large"));
        assert!(parse_size("3TiB")
            .unwrap_err()
            .contains("unknown size unit"));
    }
}
