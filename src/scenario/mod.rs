//! Scenarios: TOML files that describe relays, peers, workloads and expectations; validation
//! with precise errors; running them in the `des` world; checking the expectations.
//!
//! # Example: a deterministic regression test in your own crate
//!
//! ```
//! use relaysim::scenario::Scenario;
//!
//! let scenario = Scenario::from_toml_str(
//!     r#"
//!     name = "echo-over-strfry"
//!     [[relays]]
//!     name = "main"
//!     profile = "strfry"
//!     [[servers]]
//!     name = "server"
//!     relays = ["main"]
//!     [[clients]]
//!     name = "client"
//!     relays = ["main"]
//!     [[workloads]]
//!     kind = "download"
//!     bytes = "200KiB"
//!     content = "escape-heavy"
//!     [expect]
//!     min_completion_ratio = 1.0
//!     "#,
//!     "inline.toml",
//! )
//! .unwrap();
//! let report = scenario.run_all();
//! assert!(scenario.check(&report).is_empty());
//! assert_eq!(report.completion_ratio(), 1.0);
//! ```

mod plan;
pub mod spec;

pub use plan::Plan;

/// What the header of a rerun's trace says about it: the outages its planners suppress and,
/// for a shrunk trace, the shrink it came from.
#[derive(Debug, Clone, Default)]
pub struct TraceContext {
    /// Outages (by number) that did not happen.
    pub suppressed_outages: Vec<u64>,
    /// The shrink this trace is the result of.
    pub shrunk: Option<crate::trace::ShrinkInfo>,
}

/// The smallest `policy.budget` accepted: a signed kind-25910 event with an empty content is
/// about 650 bytes and a CEP-22 frame's JSON-RPC wrapper about 200 more.
pub const MIN_BUDGET: usize = 1024;

/// The built-in default scenario: what `relaysim run` runs without a file (also shipped as
/// `scenarios/default.toml`).
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.toml");

use crate::peer::client::ClientConfig;
use crate::peer::content::{payload_text, ContentClass};
use crate::peer::core::Clock;
use crate::peer::engines::Implementation;
use crate::peer::server::ServerConfig;
use crate::peer::tools::ToolCall;
use crate::relay::impair::{Delay, Direction, Loss, Ordering, Outage, OutageKind};
use crate::relay::profile::Intake;
use crate::relay::profile::{RateAction, RateLimit, RateScope};
use crate::relay::RelayProfile;
use crate::rng::SeededStreams;
use crate::sim::publish::{PublishMode, PublishPipeline};
use crate::sim::world::{Call, PeerId, World};
use crate::stats::{Collector, Report, METRICS};
use sha2::{Digest as _, Sha256};
use spec::{Bound, DelaySpec, LinkSpec, ScenarioSpec};
use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;
use toml::Spanned;

/// A problem in a scenario file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The line's text, when known.
    pub source_line: Option<String>,
    /// The key or item concerned.
    pub key: String,
    /// What is wrong and what was expected.
    pub message: String,
    /// A likely fix (a misspelled key or name).
    pub suggestion: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)?;
        } else {
            write!(f, ": `{}`: {}", self.key, self.message)?;
        }
        if let (Some(text), Some(line), Some(col)) = (&self.source_line, self.line, self.column) {
            let gutter = line.to_string().len();
            write!(f, "\n {line} | {text}\n {:gutter$} | {:>col$}", "", "^")?;
        }
        if let Some(s) = &self.suggestion {
            write!(f, "\nhelp: did you mean `{s}`?")?;
        }
        Ok(())
    }
}

/// Why a scenario cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: cannot read")]
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a valid scenario.
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
}

/// The closest candidate to `word`, if close enough to be a likely typo.
fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min()
        .map(|(_, c)| c.to_owned())
}

struct Ctx<'a> {
    file: &'a str,
    source: &'a str,
}

impl Ctx<'_> {
    fn at(
        &self,
        span: Option<std::ops::Range<usize>>,
        key: &str,
        message: String,
        suggestion: Option<String>,
    ) -> ScenarioError {
        let (line, column, source_line) = match span {
            Some(span) => {
                let before = &self.source[..span.start.min(self.source.len())];
                let line = before.matches('\n').count() + 1;
                let line_start = before.rfind('\n').map_or(0, |i| i + 1);
                let column = before[line_start..].chars().count() + 1;
                let text = self.source[line_start..]
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                (Some(line), Some(column), Some(text))
            }
            None => (None, None, None),
        };
        ScenarioError::Invalid(Box::new(Diagnostic {
            file: self.file.to_owned(),
            line,
            column,
            source_line,
            key: key.to_owned(),
            message,
            suggestion,
        }))
    }

    fn spanned<T>(
        &self,
        s: &Spanned<T>,
        key: &str,
        message: String,
        suggestion: Option<String>,
    ) -> ScenarioError {
        self.at(Some(s.span()), key, message, suggestion)
    }

    fn toml(&self, e: toml::de::Error) -> ScenarioError {
        let message = e.message().trim().to_owned();
        // serde's "unknown field `x`, expected one of `a`, `b`": suggest the closest.
        let mut suggestion = None;
        let mut key = String::new();
        if let Some(rest) = message
            .strip_prefix("unknown field `")
            .or_else(|| message.strip_prefix("unknown variant `"))
        {
            if let Some((word, expected)) = rest.split_once('`') {
                key = word.to_owned();
                let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
                suggestion = closest(word, candidates);
            }
        }
        self.at(e.span(), &key, message, suggestion)
    }
}

fn check_probability(ctx: &Ctx, key: &str, p: Option<f64>) -> Result<f64, ScenarioError> {
    let p = p.unwrap_or(0.0);
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(ctx.at(
            None,
            key,
            format!("must be a probability between 0 and 1, got {p}"),
            None,
        ))
    }
}

fn delay(spec: &DelaySpec) -> Delay {
    match spec {
        DelaySpec::Constant { value } => Delay::Constant(value.0),
        DelaySpec::Uniform { min, max } => Delay::Uniform {
            min: min.0,
            max: max.0,
        },
        DelaySpec::Normal { mean, sd } => Delay::Normal {
            mean: mean.0,
            sd: sd.0,
        },
        DelaySpec::Lognormal { median, sigma } => Delay::LogNormal {
            median: median.0,
            sigma: *sigma,
        },
        DelaySpec::Pareto { scale, shape } => Delay::Pareto {
            scale: scale.0,
            shape: *shape,
        },
        DelaySpec::Empirical { samples } => Delay::Empirical(samples.iter().map(|d| d.0).collect()),
    }
}

fn checked_delay(ctx: &Ctx, key: &str, spec: &DelaySpec) -> Result<Delay, ScenarioError> {
    let d = delay(spec);
    d.validate()
        .map_err(|e| ctx.at(None, key, e.to_string(), None))?;
    Ok(d)
}

/// A relay's intake from its `intake` table.
fn intake(ctx: &Ctx, key: &str, spec: &spec::IntakeSpec) -> Result<Intake, ScenarioError> {
    match spec.mode.get_ref().as_str() {
        "serial" => {
            if spec.handling.is_some() || spec.per_kib.is_some() {
                return Err(ctx.spanned(
                    &spec.mode,
                    key,
                    "`handling` and `per_kib` apply to a concurrent intake; a serial one \
                     takes the relay's `processing` time"
                        .into(),
                    None,
                ));
            }
            Ok(Intake::Serial)
        }
        "concurrent" => Ok(Intake::Concurrent {
            handling: match &spec.handling {
                Some(h) => checked_delay(ctx, &format!("{key}.handling"), h)?,
                None => Delay::Zero,
            },
            per_kib: spec.per_kib.map_or(Duration::ZERO, |d| d.0),
        }),
        other => {
            let options = ["serial", "concurrent"];
            Err(ctx.spanned(
                &spec.mode,
                &format!("{key}.mode"),
                format!(
                    "unknown intake {other:?}; expected one of {}",
                    options.join(", ")
                ),
                closest(other, options),
            ))
        }
    }
}

/// A peer's clock from its `clock_skew_secs` and `subscribe_since` keys.
fn clock(
    ctx: &Ctx,
    key: &str,
    skew: Option<i64>,
    subscribe_since: bool,
) -> Result<Clock, ScenarioError> {
    const DAY: i64 = 86_400;
    let skew_secs = skew.unwrap_or(0);
    if !(-DAY..=DAY).contains(&skew_secs) {
        return Err(ctx.at(
            None,
            &format!("{key}.clock_skew_secs"),
            format!("must be within a day (-86400..=86400 seconds), got {skew_secs}"),
            None,
        ));
    }
    Ok(Clock {
        skew_secs,
        subscribe_since,
    })
}

/// A peer's publish pipeline from its `publish` table (instant when absent).
fn publish(
    ctx: &Ctx,
    key: &str,
    spec: &Option<spec::PublishSpec>,
) -> Result<PublishPipeline, ScenarioError> {
    let Some(spec) = spec else {
        return Ok(PublishPipeline::default());
    };
    let mode = match spec.mode.as_ref().map(|m| (m, m.get_ref().as_str())) {
        None | Some((_, "sequential")) => PublishMode::Sequential,
        Some((_, "concurrent")) => PublishMode::Concurrent,
        Some((m, other)) => {
            let options = ["sequential", "concurrent"];
            return Err(ctx.spanned(
                m,
                &format!("{key}.mode"),
                format!(
                    "unknown publish mode {other:?}; expected one of {}",
                    options.join(", ")
                ),
                closest(other, options),
            ));
        }
    };
    Ok(PublishPipeline {
        mode,
        per_event: spec.per_event.map_or(Duration::ZERO, |d| d.0),
        per_kib: spec.per_kib.map_or(Duration::ZERO, |d| d.0),
        jitter: match &spec.jitter {
            Some(j) => checked_delay(ctx, &format!("{key}.jitter"), j)?,
            None => Delay::Zero,
        },
    })
}

fn link(
    ctx: &Ctx,
    key: &str,
    spec: &LinkSpec,
    base: &Direction,
) -> Result<Direction, ScenarioError> {
    let mut d = base.clone();
    if let Some(ordering) = &spec.ordering {
        d.ordering = match ordering.get_ref().as_str() {
            "connection" => Ordering::Connection,
            "datagram" => Ordering::Datagram,
            other => {
                let options = ["connection", "datagram"];
                return Err(ctx.spanned(
                    ordering,
                    &format!("{key}.ordering"),
                    format!(
                        "unknown ordering {other:?}; expected one of {}",
                        options.join(", ")
                    ),
                    closest(other, options),
                ));
            }
        };
    }
    // Per-message disturbances exist only in the stress mode: a WebSocket over TCP delivers
    // in order and loses nothing while the connection is up.
    if d.ordering == Ordering::Connection {
        let per_message = [
            (
                "reorder",
                spec.reorder.is_some() || spec.reorder_delay.is_some(),
            ),
            (
                "duplicate",
                spec.duplicate.is_some()
                    || spec.duplicate_copies.is_some()
                    || spec.duplicate_spacing.is_some(),
            ),
            ("loss", spec.loss.is_some()),
            ("burst_loss", spec.burst_loss.is_some()),
        ];
        if let Some((name, _)) = per_message.iter().find(|(_, set)| *set) {
            return Err(ctx.at(
                None,
                &format!("{key}.{name}"),
                format!(
                    "`{name}` acts on single messages, but one WebSocket connection never \
                     reorders, duplicates or loses a message while it is up. For the stress \
                     mode, add `ordering = \"datagram\"` to this link; for causes a real \
                     deployment has, use several relays, `connection_drop_every`, outages, \
                     `[relays.intake]` or `publish` on a peer (docs/physics.md)"
                ),
                None,
            ));
        }
    }
    if let Some(spec) = &spec.delay {
        d.delay = checked_delay(ctx, &format!("{key}.delay"), spec)?;
    }
    if spec.reorder.is_some() {
        d.reorder = check_probability(ctx, &format!("{key}.reorder"), spec.reorder)?;
    }
    if let Some(r) = spec.reorder_delay {
        d.reorder_delay = r.0;
    }
    if spec.duplicate.is_some() {
        d.duplicate = check_probability(ctx, &format!("{key}.duplicate"), spec.duplicate)?;
    }
    if let Some(c) = spec.duplicate_copies {
        if c > 100 {
            return Err(ctx.at(
                None,
                &format!("{key}.duplicate_copies"),
                format!("at most 100 extra copies, got {c}"),
                None,
            ));
        }
        d.duplicate_copies = c;
    }
    if let Some(s) = spec.duplicate_spacing {
        d.duplicate_spacing = s.0;
    }
    if spec.loss.is_some() {
        d.loss = Loss::Iid(check_probability(ctx, &format!("{key}.loss"), spec.loss)?);
    }
    if let Some(b) = &spec.burst_loss {
        for (name, p) in [
            ("good_to_bad", b.good_to_bad),
            ("bad_to_good", b.bad_to_good),
            ("loss_in_good", b.loss_in_good),
            ("loss_in_bad", b.loss_in_bad),
        ] {
            check_probability(ctx, &format!("{key}.burst_loss.{name}"), Some(p))?;
        }
        d.loss = Loss::GilbertElliott {
            good_to_bad: b.good_to_bad,
            bad_to_good: b.bad_to_good,
            loss_in_good: b.loss_in_good,
            loss_in_bad: b.loss_in_bad,
        };
    }
    if let Some(bw) = &spec.bandwidth {
        let text = bw.get_ref();
        let bytes = text
            .strip_suffix("/s")
            .and_then(|size| spec::parse_size(size).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| ctx.spanned(bw, &format!("{key}.bandwidth"), format!("{text:?} is not a bandwidth: write bytes per second, e.g. \"1MB/s\" or \"512KiB/s\""), None))?;
        d.bandwidth = Some(bytes as u64);
    }
    Ok(d)
}

/// What a workload does, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadKind {
    /// `echo` of a text of `bytes` bytes.
    Request {
        /// Text size.
        bytes: usize,
    },
    /// `large_result`: an oversized response.
    Download {
        /// Size.
        bytes: usize,
        /// Content class.
        content: ContentClass,
    },
    /// `upload`: an oversized request.
    Upload {
        /// Size.
        bytes: usize,
        /// Content class.
        content: ContentClass,
    },
    /// `stream`: a CEP-41 stream.
    Stream {
        /// Chunks.
        chunks: u64,
        /// Chunk size.
        chunk_bytes: usize,
        /// Time between chunks.
        interval: Duration,
    },
    /// `slow`: a call that takes a while.
    Slow {
        /// How long.
        work: Duration,
        /// Progress notifications this often (none when `None`).
        progress_every: Option<Duration>,
    },
}

/// A workload, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its name in reports.
    pub name: String,
    /// What it does.
    pub kind: WorkloadKind,
    /// Client indices it runs on.
    pub clients: Vec<usize>,
    /// Calls per client.
    pub count: u32,
    /// First call.
    pub at: Duration,
    /// Between calls.
    pub every: Duration,
    /// Send a progress token.
    pub progress: bool,
    /// Streams: the client reads one chunk per this interval.
    pub consume_every: Option<Duration>,
}

struct ClientDef {
    publish: PublishPipeline,
    clock: Clock,
    name: String,
    relays: Vec<usize>,
    server: usize,
    stateless: bool,
    ip: Option<String>,
    resumable: bool,
    implementation: Implementation,
}

struct ServerDef {
    publish: PublishPipeline,
    clock: Clock,
    implementation: Implementation,
    name: String,
    relays: Vec<usize>,
}

/// The scenario files (`*.toml`) directly in each of `dirs`, sorted: how tests, benches and
/// tools find the shipped scenarios (`scenarios/`, `scenarios/resumable/`, ...).
pub fn scenario_files(dirs: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "toml") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// A validated scenario, ready to run.
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// First seed.
    pub seed: u64,
    /// Runs (seeds `seed`, `seed + 1`, ...).
    pub runs: u32,
    /// Virtual time limit of one run.
    pub duration: Duration,
    /// SHA-256 of the file text (for traces).
    pub hash: String,
    /// The file text (traces carry it, so they replay on their own).
    pub source: String,
    relays: Vec<(String, RelayProfile)>,
    servers: Vec<ServerDef>,
    clients: Vec<ClientDef>,
    /// The workloads.
    pub workloads: Vec<Workload>,
    server_config: ServerConfig,
    policy: spec::PolicySpec,
    expect: spec::ExpectSpec,
}

const KINDS: [&str; 5] = ["request", "download", "upload", "stream", "slow"];
const CONTENTS: [&str; 4] = ["ascii", "escape-heavy", "utf8", "random"];

impl Scenario {
    /// Loads and validates a scenario file.
    pub fn from_file(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let mut s = Self::from_toml_str(&text, &path.display().to_string())?;
        if s.name.is_empty() {
            s.name = path
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        Ok(s)
    }

    /// Parses and validates scenario text; `file` names it in error messages.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Self, ScenarioError> {
        let ctx = Ctx { file, source: text };
        let spec: ScenarioSpec = toml::from_str(text).map_err(|e| ctx.toml(e))?;
        Self::validate(&ctx, spec, text)
    }

    fn validate(ctx: &Ctx, spec: ScenarioSpec, text: &str) -> Result<Self, ScenarioError> {
        if spec.relays.is_empty() {
            return Err(ctx.at(
                None,
                "relays",
                "a scenario needs at least one [[relays]] table".into(),
                None,
            ));
        }
        let mut relays: Vec<(String, RelayProfile)> = Vec::new();
        for (i, r) in spec.relays.iter().enumerate() {
            let key = format!("relays[{i}]");
            let name = r.name.get_ref().clone();
            if relays.iter().any(|(n, _)| *n == name) {
                return Err(ctx.spanned(
                    &r.name,
                    &format!("{key}.name"),
                    format!("a second relay named {name:?}"),
                    None,
                ));
            }
            let mut profile = match &r.profile {
                None => RelayProfile::ideal(),
                Some(p) => RelayProfile::built_in(p.get_ref()).ok_or_else(|| {
                    ctx.spanned(
                        p,
                        &format!("{key}.profile"),
                        format!(
                            "unknown relay profile {:?}; built-in profiles: {}",
                            p.get_ref(),
                            RelayProfile::BUILT_IN.join(", ")
                        ),
                        closest(p.get_ref(), RelayProfile::BUILT_IN),
                    )
                })?,
            };
            if let Some(s) = r.max_event_bytes {
                profile.max_event_bytes = Some(s.0);
            }
            if let Some(s) = r.max_message_bytes {
                profile.max_message_bytes = Some(s.0);
            }
            if let Some(rate) = &r.rate_limit {
                let scope = match rate.scope.get_ref().as_str() {
                    "connection" => RateScope::Connection,
                    "pubkey" => RateScope::Pubkey,
                    "ip" => RateScope::Ip,
                    "server" => RateScope::Server,
                    other => {
                        let options = ["connection", "pubkey", "ip", "server"];
                        return Err(ctx.spanned(
                            &rate.scope,
                            &format!("{key}.rate_limit.scope"),
                            format!(
                                "unknown scope {other:?}; expected one of {}",
                                options.join(", ")
                            ),
                            closest(other, options),
                        ));
                    }
                };
                let action = match rate.action.get_ref().as_str() {
                    "reject" => RateAction::Reject(
                        rate.message
                            .clone()
                            .unwrap_or_else(|| "rate-limited: slow down".into()),
                    ),
                    "delay" => RateAction::Delay,
                    "drop" => RateAction::Drop,
                    other => {
                        let options = ["reject", "delay", "drop"];
                        return Err(ctx.spanned(
                            &rate.action,
                            &format!("{key}.rate_limit.action"),
                            format!(
                                "unknown action {other:?}; expected one of {}",
                                options.join(", ")
                            ),
                            closest(other, options),
                        ));
                    }
                };
                if !(rate.per_minute > 0.0 && rate.per_minute.is_finite()) {
                    return Err(ctx.at(
                        None,
                        &format!("{key}.rate_limit.per_minute"),
                        "must be a positive number".into(),
                        None,
                    ));
                }
                profile.rate_limit = Some(RateLimit {
                    scope,
                    capacity: rate.burst.unwrap_or(rate.per_minute).max(1.0),
                    refill_per_sec: rate.per_minute / 60.0,
                    action,
                });
            }
            if let Some(p) = r.processing {
                profile.processing = p.0;
            }
            if let Some(i) = &r.intake {
                profile.intake = intake(ctx, &format!("{key}.intake"), i)?;
            }
            if let Some(up) = &r.up {
                profile.impairments.peer_to_relay = link(
                    ctx,
                    &format!("{key}.up"),
                    up,
                    &profile.impairments.peer_to_relay,
                )?;
            }
            if let Some(down) = &r.down {
                profile.impairments.relay_to_peer = link(
                    ctx,
                    &format!("{key}.down"),
                    down,
                    &profile.impairments.relay_to_peer,
                )?;
            }
            for (j, o) in r.outages.iter().enumerate() {
                let kind = match o.kind.get_ref().as_str() {
                    "relay-restart" => OutageKind::RelayRestart,
                    "connection-drop" => OutageKind::ConnectionDrop {
                        peer: o.peer.clone(),
                    },
                    "partition" => OutageKind::Partition {
                        peer: o.peer.clone(),
                    },
                    other => {
                        let options = ["relay-restart", "connection-drop", "partition"];
                        return Err(ctx.spanned(
                            &o.kind,
                            &format!("{key}.outages[{j}].kind"),
                            format!(
                                "unknown outage kind {other:?}; expected one of {}",
                                options.join(", ")
                            ),
                            closest(other, options),
                        ));
                    }
                };
                profile.impairments.outages.scheduled.push(Outage {
                    at: o.at.0,
                    duration: o.duration.0,
                    kind,
                });
            }
            if let Some(every) = r.connection_drop_every {
                if every.0 < Duration::from_secs(1) {
                    return Err(ctx.at(
                        None,
                        &format!("{key}.connection_drop_every"),
                        "must be at least 1s".into(),
                        None,
                    ));
                }
                profile.impairments.outages.connection_drop_every = Some(every.0);
            }
            if let Some([lo, hi]) = r.connection_down_for {
                profile.impairments.outages.connection_down_for = (lo.0, hi.0);
            }
            relays.push((name, profile));
        }
        let relay_names: Vec<String> = relays.iter().map(|(n, _)| n.clone()).collect();
        let resolve_relays =
            |list: &[Spanned<String>], key: &str| -> Result<Vec<usize>, ScenarioError> {
                if list.is_empty() {
                    return Err(ctx.at(None, key, "lists no relay".into(), None));
                }
                list.iter()
                    .map(|r| {
                        relay_names
                            .iter()
                            .position(|n| n == r.get_ref())
                            .ok_or_else(|| {
                                ctx.spanned(
                                    r,
                                    key,
                                    format!(
                                        "no relay named {:?}; relays: {}",
                                        r.get_ref(),
                                        relay_names.join(", ")
                                    ),
                                    closest(r.get_ref(), relay_names.iter().map(String::as_str)),
                                )
                            })
                    })
                    .collect()
            };
        let check_impl =
            |i: &Option<Spanned<String>>, key: &str| -> Result<Implementation, ScenarioError> {
                match i {
                    None => Ok(Implementation::default()),
                    Some(s) => crate::implementations::parse(s.get_ref()).map_err(|e| {
                        ctx.spanned(
                            s,
                            key,
                            e.to_string(),
                            closest(s.get_ref(), crate::implementations::NAMES),
                        )
                    }),
                }
            };
        if spec.servers.is_empty() {
            return Err(ctx.at(
                None,
                "servers",
                "a scenario needs at least one [[servers]] table".into(),
                None,
            ));
        }
        let mut servers = Vec::new();
        for (i, s) in spec.servers.iter().enumerate() {
            let implementation = check_impl(&s.r#impl, &format!("servers[{i}].impl"))?;
            servers.push(ServerDef {
                publish: publish(ctx, &format!("servers[{i}].publish"), &s.publish)?,
                clock: clock(
                    ctx,
                    &format!("servers[{i}]"),
                    s.clock_skew_secs,
                    s.subscribe_since,
                )?,
                implementation,
                name: s.name.get_ref().clone(),
                relays: resolve_relays(&s.relays, &format!("servers[{i}].relays"))?,
            });
        }
        let server_names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
        if spec.clients.is_empty() {
            return Err(ctx.at(
                None,
                "clients",
                "a scenario needs at least one [[clients]] table".into(),
                None,
            ));
        }
        let mut clients = Vec::new();
        let mut client_groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, c) in spec.clients.iter().enumerate() {
            let key = format!("clients[{i}]");
            let implementation = check_impl(&c.r#impl, &format!("{key}.impl"))?;
            let relays = resolve_relays(&c.relays, &format!("{key}.relays"))?;
            let server = match &c.server {
                Some(s) => server_names
                    .iter()
                    .position(|n| n == s.get_ref())
                    .ok_or_else(|| {
                        ctx.spanned(
                            s,
                            &format!("{key}.server"),
                            format!("no server named {:?}", s.get_ref()),
                            closest(s.get_ref(), server_names.iter().map(String::as_str)),
                        )
                    })?,
                None if servers.len() == 1 => 0,
                None => {
                    return Err(ctx.spanned(
                        &c.name,
                        &format!("{key}.server"),
                        "several servers: say which one this client calls".into(),
                        None,
                    ))
                }
            };
            let pipeline = publish(ctx, &format!("{key}.publish"), &c.publish)?;
            let peer_clock = clock(ctx, &key, c.clock_skew_secs, c.subscribe_since)?;
            let count = c.count.unwrap_or(1);
            if count == 0 || count > 10_000 {
                return Err(ctx.spanned(
                    &c.name,
                    &format!("{key}.count"),
                    "must be between 1 and 10000".into(),
                    None,
                ));
            }
            let mut group = Vec::new();
            for k in 0..count {
                let name = if count == 1 {
                    c.name.get_ref().clone()
                } else {
                    format!("{}-{k}", c.name.get_ref())
                };
                group.push(clients.len());
                clients.push(ClientDef {
                    publish: pipeline.clone(),
                    clock: peer_clock,
                    name,
                    relays: relays.clone(),
                    server,
                    stateless: c.stateless,
                    ip: c.ip.clone(),
                    resumable: c.resumable_streams,
                    implementation,
                });
            }
            client_groups.push((c.name.get_ref().clone(), group));
        }
        // Names identify peers (their keys derive from them, traces name them): no two alike.
        let mut names: Vec<&str> = servers
            .iter()
            .map(|s| s.name.as_str())
            .chain(clients.iter().map(|c| c.name.as_str()))
            .collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(ctx.at(None, "clients", format!("two peers are named {:?} (clients with `count` are named <name>-0, <name>-1, ...)", w[0]), None));
        }
        for (i, (relay_name, profile)) in relays.iter().enumerate() {
            for (j, o) in profile.impairments.outages.scheduled.iter().enumerate() {
                if let OutageKind::ConnectionDrop { peer: Some(p) }
                | OutageKind::Partition { peer: Some(p) } = &o.kind
                {
                    if !names.contains(&p.as_str()) {
                        return Err(ctx.at(
                            None,
                            &format!("relays[{i}].outages[{j}].peer"),
                            format!(
                                "relay {relay_name:?}: no peer named {p:?}; peers: {}",
                                names.join(", ")
                            ),
                            closest(p, names.iter().copied()),
                        ));
                    }
                }
            }
        }
        let mut workloads = Vec::new();
        for (i, w) in spec.workloads.iter().enumerate() {
            let key = format!("workloads[{i}]");
            let ws = w.get_ref();
            let kind_name = ws.kind.get_ref().as_str();
            let need = |field: &str| {
                ctx.spanned(
                    w,
                    &format!("{key}.{field}"),
                    format!("a {kind_name} workload needs `{field}`"),
                    None,
                )
            };
            let content = match &ws.content {
                None => ContentClass::Ascii,
                Some(c) => c.get_ref().parse().map_err(|m: String| {
                    ctx.spanned(
                        c,
                        &format!("{key}.content"),
                        m,
                        closest(c.get_ref(), CONTENTS),
                    )
                })?,
            };
            let kind = match kind_name {
                "request" => WorkloadKind::Request {
                    bytes: ws.bytes.map_or(16, |b| b.0),
                },
                "download" => WorkloadKind::Download {
                    bytes: ws.bytes.ok_or_else(|| need("bytes"))?.0,
                    content,
                },
                "upload" => WorkloadKind::Upload {
                    bytes: ws.bytes.ok_or_else(|| need("bytes"))?.0,
                    content,
                },
                "stream" => WorkloadKind::Stream {
                    chunks: ws.chunks.ok_or_else(|| need("chunks"))?,
                    chunk_bytes: ws.chunk_bytes.map_or(64, |b| b.0),
                    interval: ws.interval.map_or(Duration::ZERO, |d| d.0),
                },
                "slow" => WorkloadKind::Slow {
                    work: ws.work.ok_or_else(|| need("work"))?.0,
                    progress_every: ws.progress_every.map(|d| d.0).filter(|d| !d.is_zero()),
                },
                other => {
                    return Err(ctx.spanned(
                        &ws.kind,
                        &format!("{key}.kind"),
                        format!(
                            "unknown workload kind {other:?}; expected one of {}",
                            KINDS.join(", ")
                        ),
                        closest(other, KINDS),
                    ));
                }
            };
            let targets = match &ws.client {
                None => (0..clients.len()).collect(),
                Some(name) => client_groups
                    .iter()
                    .find(|(n, _)| n == name.get_ref())
                    .map(|(_, g)| g.clone())
                    .ok_or_else(|| {
                        let names: Vec<&str> =
                            client_groups.iter().map(|(n, _)| n.as_str()).collect();
                        ctx.spanned(
                            name,
                            &format!("{key}.client"),
                            format!(
                                "no client named {:?}; clients: {}",
                                name.get_ref(),
                                names.join(", ")
                            ),
                            closest(name.get_ref(), names),
                        )
                    })?,
            };
            workloads.push(Workload {
                name: ws
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{kind_name}-{i}")),
                kind,
                clients: targets,
                count: match ws.count.unwrap_or(1) {
                    n @ 1..=1_000_000 => n,
                    n => {
                        return Err(ctx.spanned(
                            w,
                            &format!("{key}.count"),
                            format!("must be between 1 and 1000000, got {n}"),
                            None,
                        ))
                    }
                },
                at: ws.at.map_or(Duration::ZERO, |d| d.0),
                every: ws.every.map_or(Duration::ZERO, |d| d.0),
                progress: ws.progress.unwrap_or(true),
                consume_every: ws.consume_interval.map(|d| d.0).filter(|d| !d.is_zero()),
            });
        }
        for metric_key in spec.expect.latency.keys() {
            let valid = metric_key
                .rsplit_once('.')
                .is_some_and(|(m, q)| METRICS.contains(&m) && quantile(q).is_some());
            if !valid {
                let candidates: Vec<String> = METRICS
                    .iter()
                    .flat_map(|m| ["p50", "p90", "p99", "p999", "max"].map(|q| format!("{m}.{q}")))
                    .collect();
                return Err(ctx.at(
                    None,
                    &format!("expect.latency.{metric_key}"),
                    format!("not a metric and quantile; metrics: {}; quantiles: p50, p90, p99, p999, max", METRICS.join(", ")),
                    closest(metric_key, candidates.iter().map(String::as_str)),
                ));
            }
        }
        for (workload, outcome) in &spec.expect.outcomes {
            let names: Vec<&str> = workloads.iter().map(|w| w.name.as_str()).collect();
            if !names.contains(&workload.as_str()) {
                return Err(ctx.at(
                    None,
                    &format!("expect.outcomes.{workload}"),
                    format!(
                        "no workload is named {workload:?}; workloads: {}",
                        names.join(", ")
                    ),
                    closest(workload, names.iter().copied()),
                ));
            }
            let valid = outcome == "completed"
                || outcome == "failed"
                || outcome
                    .strip_prefix("failed:")
                    .is_some_and(|c| !c.is_empty());
            if !valid {
                return Err(ctx.at(
                    None,
                    &format!("expect.outcomes.{workload}"),
                    format!("{outcome:?} is not an outcome: use \"completed\", \"failed\" or \"failed:<cause>\""),
                    None,
                ));
            }
        }
        if let Some(r) = spec.expect.min_completion_ratio {
            if !(0.0..=1.0).contains(&r) {
                return Err(ctx.at(
                    None,
                    "expect.min_completion_ratio",
                    "must be between 0 and 1".into(),
                    None,
                ));
            }
        }
        let mut server_config = ServerConfig::default();
        if let Some(b) = spec.policy.budget {
            if b.0 < MIN_BUDGET {
                return Err(ctx.at(
                    None,
                    "policy.budget",
                    format!(
                        "budget {} is too small: a signed kind-25910 event with an empty content \
                         already publishes as about 650 bytes; use at least {MIN_BUDGET}",
                        b.0
                    ),
                    None,
                ));
            }
            server_config.budget = b.0;
        }
        apply_oversized_policy(&spec.policy, &mut server_config.oversized);
        if let Some(d) = spec.policy.idle_timeout {
            server_config.writer.idle_timeout = d.0;
        }
        if let Some(d) = spec.policy.probe_timeout {
            server_config.writer.probe_timeout = d.0;
        }
        for (key, value) in [
            ("policy.resume_min", spec.policy.resume_min),
            ("policy.resume_max", spec.policy.resume_max),
        ] {
            if value.is_some_and(|d| d.0.subsec_nanos() != 0 || d.0.is_zero()) {
                return Err(ctx.at(
                    None,
                    key,
                    "must be a positive whole number of seconds (resumeInterval is in seconds)"
                        .into(),
                    None,
                ));
            }
        }
        let resume = &mut server_config.streams.resume_interval;
        if let Some(d) = spec.policy.resume_min {
            resume.min = Some(d.0.as_secs());
        }
        if let Some(d) = spec.policy.resume_max {
            resume.max = Some(d.0.as_secs());
        }
        if let Some(n) = spec.policy.stream_buffer_events {
            server_config.streams.max_messages_per_stream = n.max(1);
        }
        Ok(Scenario {
            name: spec.name.clone().unwrap_or_default(),
            description: spec.description.clone().unwrap_or_default(),
            seed: spec.seed.unwrap_or(1),
            runs: spec.runs.unwrap_or(1).max(1),
            duration: spec.duration.map_or(Duration::from_secs(600), |d| d.0),
            hash: hex::encode(Sha256::digest(text.as_bytes())),
            source: text.to_owned(),
            relays,
            servers,
            clients,
            workloads,
            server_config,
            policy: spec.policy,
            expect: spec.expect,
        })
    }

    /// The profile (with overrides) of the relay named `name`.
    pub fn relay_profile(&self, name: &str) -> Option<&RelayProfile> {
        self.relays.iter().find(|(n, _)| n == name).map(|(_, p)| p)
    }

    /// The workloads' names, in index order (for reports).
    pub fn workload_names(&self) -> Vec<String> {
        self.workloads.iter().map(|w| w.name.clone()).collect()
    }

    /// The same scenario with every server on `server` engines and every client on `client`
    /// engines (what `relaysim compare` runs).
    pub fn with_implementations(&self, server: Implementation, client: Implementation) -> Self {
        let mut s = Scenario::from_toml_str(&self.source, &self.name).expect("it parsed before");
        s.name = self.name.clone();
        for d in &mut s.servers {
            d.implementation = server;
        }
        for d in &mut s.clients {
            d.implementation = client;
        }
        s
    }

    /// Builds the world for one run.
    pub fn build(&self, seed: u64) -> World {
        let mut world = World::new(seed);
        for (name, profile) in &self.relays {
            world.add_relay(name, profile.clone());
        }
        for s in &self.servers {
            let config = ServerConfig {
                implementation: s.implementation,
                clock: s.clock,
                ..self.server_config.clone()
            };
            let index = world.add_server(&s.name, &s.relays, config);
            world.set_publish(PeerId::Server(index), s.publish.clone());
        }
        for c in &self.clients {
            let index = world.add_client(&c.name, &c.relays, c.server, |config| {
                self.client_config(config, c.stateless, c.resumable);
                config.implementation = c.implementation;
                config.clock = c.clock;
            });
            if let Some(ip) = &c.ip {
                world.set_ip(PeerId::Client(index), ip);
            }
            world.set_publish(PeerId::Client(index), c.publish.clone());
        }
        for (at, client, call) in self.calls(seed) {
            world.schedule_call(at, client, call);
        }
        world
    }

    /// Every workload call of a run with `seed`: when, which client, what.
    fn calls(&self, seed: u64) -> Vec<(Duration, usize, Call)> {
        let mut calls = Vec::new();
        let streams = SeededStreams::new(seed);
        for (w_index, w) in self.workloads.iter().enumerate() {
            for &client in &w.clients {
                for k in 0..w.count {
                    let at = w.at + w.every * k;
                    let mut rng = streams.stream(&format!("workload/{w_index}/{client}/{k}"));
                    let tool = match &w.kind {
                        WorkloadKind::Request { bytes } => ToolCall::Echo {
                            text: payload_text(ContentClass::Ascii, *bytes, &mut rng),
                        },
                        WorkloadKind::Download { bytes, content } => ToolCall::LargeResult {
                            bytes: *bytes,
                            content: *content,
                        },
                        WorkloadKind::Upload { bytes, content } => ToolCall::Upload {
                            data: payload_text(*content, *bytes, &mut rng),
                        },
                        WorkloadKind::Stream {
                            chunks,
                            chunk_bytes,
                            interval,
                        } => ToolCall::Stream {
                            chunks: *chunks,
                            chunk_bytes: *chunk_bytes,
                            interval: *interval,
                        },
                        WorkloadKind::Slow {
                            work,
                            progress_every,
                        } => ToolCall::Slow {
                            duration: *work,
                            progress_every: *progress_every,
                        },
                    };
                    calls.push((
                        at,
                        client,
                        Call {
                            tool,
                            progress: w.progress,
                            workload: w_index,
                            consume_every: w.consume_every,
                        },
                    ));
                }
            }
        }
        calls
    }

    fn client_config(&self, config: &mut ClientConfig, stateless: bool, resumable: bool) {
        let p = &self.policy;
        config.stateless = stateless;
        if let Some(b) = p.budget {
            config.budget = b.0;
        }
        if let Some(d) = p.request_timeout {
            config.request_timeout = d.0;
        }
        if let Some(d) = p.max_request_timeout {
            config.max_request_timeout = d.0;
        }
        apply_oversized_policy(p, &mut config.oversized);
        let s = &mut config.stream_policy;
        if let Some(d) = p.idle_timeout {
            s.idle_timeout = d.0;
        }
        if let Some(d) = p.probe_timeout {
            s.probe_timeout = d.0;
        }
        if let Some(d) = p.close_grace {
            s.close_grace = d.0;
        }
        if let Some(n) = p.max_buffered_chunks {
            s.max_buffered_chunks_per_stream = n;
        }
        if let Some(b) = p.max_buffered_bytes {
            s.max_buffered_bytes_per_stream = b.0;
        }
        if let Some(n) = p.max_unread_chunks {
            s.max_unread_chunks_per_stream = n;
        }
        if resumable {
            // Last: a resumable client's probe timeout is at least the resume bound.
            *config = config.clone().with_resumable_streams();
            if let Some(max) = p.resume_max {
                let s = &mut config.stream_policy;
                s.probe_timeout = s.probe_timeout.max(max.0);
            }
        }
    }

    /// Runs once with `seed`.
    pub fn run(&self, seed: u64) -> crate::stats::RunReport {
        let mut world = self.build(seed);
        let collector = Rc::new(RefCell::new(Collector::new()));
        world.set_observer(Box::new(collector.clone()));
        world.run_until(self.duration);
        drop(world.take_observer());
        let collector = Rc::try_unwrap(collector)
            .map(RefCell::into_inner)
            .unwrap_or_default();
        collector.finish(seed)
    }

    /// Runs once with `seed` and records a trace; returns the report and the trace text.
    pub fn run_traced(
        &self,
        seed: u64,
        events: crate::trace::EventsMode,
    ) -> (crate::stats::RunReport, String) {
        self.run_planned(seed, events, TraceContext::default(), |_| Vec::new())
    }

    /// Runs once with `seed`, the fates of messages decided by the planners `make` builds from
    /// the world's names (schedule replays, shrinking, recorded fates; see
    /// [`crate::sim::planner`]) before the random draws, writing a des trace whose header
    /// carries `context`.
    pub fn run_planned(
        &self,
        seed: u64,
        events: crate::trace::EventsMode,
        context: TraceContext,
        make: impl FnOnce(&crate::trace::Names) -> Vec<Box<dyn crate::sim::planner::LinkPlanner>>,
    ) -> (crate::stats::RunReport, String) {
        let TraceContext {
            suppressed_outages: suppressed,
            shrunk,
        } = context;
        use crate::trace::{Line, Names, TraceWriter};
        let mut world = self.build(seed);
        let names = Names {
            relays: world.relay_names_all(),
            peers: world.peers().into_iter().collect(),
        };
        for planner in make(&names) {
            world.add_planner(planner);
        }
        let header = Line::Header {
            format: crate::trace::FORMAT,
            relaysim: env!("CARGO_PKG_VERSION").into(),
            scenario: self.name.clone(),
            scenario_hash: self.hash.clone(),
            seed,
            driver: "des".into(),
            events,
            suppressed_outages: suppressed,
            shrunk,
            scenario_toml: self.source.clone(),
        };
        let collector = Rc::new(RefCell::new(Collector::new()));
        let writer = Rc::new(RefCell::new(TraceWriter::new(&header, names, events)));
        world.set_observer(Box::new(Tee(collector.clone(), writer.clone())));
        world.run_until(self.duration);
        drop(world.take_observer());
        let report = Rc::try_unwrap(collector)
            .map(RefCell::into_inner)
            .unwrap_or_default()
            .finish(seed);
        let writer = Rc::try_unwrap(writer)
            .map(RefCell::into_inner)
            .expect("the world released the writer");
        let text = writer.finish(&report, &self.workload_names());
        (report, text)
    }

    /// Runs every run of the scenario (seeds `seed`, `seed + 1`, ...).
    pub fn run_all(&self) -> Report {
        self.run_seeds(self.seed, self.runs, |_| {})
    }

    /// Runs `runs` runs from `first_seed`, calling `progress` after each.
    pub fn run_seeds(&self, first_seed: u64, runs: u32, mut progress: impl FnMut(u32)) -> Report {
        let mut report = Report {
            scenario: self.name.clone(),
            runs: Vec::new(),
        };
        for i in 0..runs {
            report
                .runs
                .push(self.run(first_seed.wrapping_add(i as u64)));
            progress(i + 1);
        }
        report
    }

    /// The expectations that do not hold, each said in one sentence (empty when all hold).
    pub fn check(&self, report: &Report) -> Vec<String> {
        self.check_observed(report, true)
    }

    /// As [`Scenario::check`], for an engine that may not observe relay events (the turmoil
    /// engine sees calls, not relays): with `relay_events` false, expectations on relay-side
    /// metrics (`relay_*`) and on counters are left out rather than failed for lack of samples.
    pub fn check_observed(&self, report: &Report, relay_events: bool) -> Vec<String> {
        let e = &self.expect;
        let mut failed = Vec::new();
        if let Some(min) = e.min_completion_ratio {
            let got = report.completion_ratio();
            if got + 1e-12 < min {
                failed.push(format!(
                    "completion ratio {got:.3} is below the expected {min}"
                ));
            }
        }
        let max_violations = e.max_integrity_violations.unwrap_or(0);
        if report.integrity_violations() > max_violations {
            failed.push(format!(
                "{} integrity violations, at most {max_violations} expected",
                report.integrity_violations()
            ));
        }
        for (key, limit) in &e.latency {
            let Some((metric, q)) = key.rsplit_once('.') else {
                continue;
            };
            if !relay_events && metric.starts_with("relay_") {
                continue;
            }
            let value = report
                .latency(metric)
                .and_then(|row| quantile(q).map(|f| f(&row)));
            match value {
                Some(us) if Duration::from_micros(us) > limit.0 => failed.push(format!(
                    "{key} is {:.1} ms, above the expected {:.1} ms",
                    us as f64 / 1000.0,
                    limit.0.as_secs_f64() * 1000.0
                )),
                Some(_) => {}
                None => failed.push(format!("{key}: no samples of {metric} were recorded")),
            }
        }
        let failures = report.failures();
        for (cause, bound) in &e.failures {
            let n = failures.get(cause).copied().unwrap_or(0);
            if let Some(why) = violates(n, bound) {
                failed.push(format!("failures of cause {cause:?}: {n}, {why}"));
            }
        }
        for (workload, expected) in &e.outcomes {
            let Some(index) = self.workloads.iter().position(|w| &w.name == workload) else {
                continue; // checked when the scenario was read
            };
            for item in report.items().filter(|i| i.workload == index) {
                let got = match &item.outcome {
                    crate::stats::Outcome::Completed => "completed".to_owned(),
                    crate::stats::Outcome::Failed(c) => format!("failed:{c}"),
                };
                let matches =
                    got == *expected || (expected == "failed" && got.starts_with("failed:"));
                if !matches {
                    failed.push(format!(
                        "workload {workload:?} call {}: {got}, expected {expected}",
                        item.call
                    ));
                }
            }
        }
        let counters = report.counters();
        let counted = e.counters.iter().filter(|_| relay_events);
        for (name, bound) in counted {
            let n = counters.get(name).copied().unwrap_or(0);
            if let Some(why) = violates(n, bound) {
                failed.push(format!("counter {name:?}: {n}, {why}"));
            }
        }
        failed
    }
}

/// Sends every observation to two observers.
struct Tee<A, B>(A, B);

impl<A: crate::sim::world::Observer, B: crate::sim::world::Observer> crate::sim::world::Observer
    for Tee<A, B>
{
    fn observe(&mut self, at: Duration, o: &crate::sim::world::Observation) {
        self.0.observe(at, o);
        self.1.observe(at, o);
    }
}

fn apply_oversized_policy(
    p: &spec::PolicySpec,
    r: &mut crate::protocol::oversized::ReceiverConfig,
) {
    if let Some(d) = p.transfer_timeout {
        r.transfer_timeout = d.0;
    }
    if let Some(d) = p.end_grace {
        r.end_grace = d.0;
    }
    if let Some(n) = p.reorder_window {
        r.reorder_window = n;
    }
    if let Some(n) = p.max_out_of_order_chunks {
        r.max_out_of_order_chunks = n;
    }
}

type QuantileFn = fn(&crate::stats::LatencyRow) -> u64;

fn quantile(q: &str) -> Option<QuantileFn> {
    Some(match q {
        "p50" => |r| r.p50,
        "p90" => |r| r.p90,
        "p99" => |r| r.p99,
        "p999" => |r| r.p999,
        "max" => |r| r.max,
        _ => return None,
    })
}

fn violates(n: u64, bound: &Bound) -> Option<String> {
    match *bound {
        Bound::Exact(want) if n != want => Some(format!("expected exactly {want}")),
        Bound::Range { min: Some(min), .. } if n < min => Some(format!("expected at least {min}")),
        Bound::Range { max: Some(max), .. } if n > max => Some(format!("expected at most {max}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n[[clients]]\nname = \"c\"\nrelays = [\"r\"]\n";

    fn err(extra: &str) -> Diagnostic {
        match Scenario::from_toml_str(&format!("{BASE}{extra}"), "t.toml") {
            Err(ScenarioError::Invalid(d)) => *d,
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("accepted: {extra}"),
        }
    }

    #[test]
    fn an_unknown_workload_kind_is_named_with_a_suggestion() {
        let d = err("[[workloads]]\nkind = \"strem\"\nchunks = 3\n");
        assert_eq!(d.key, "workloads[0].kind");
        assert_eq!(d.line, Some(10));
        assert_eq!(d.suggestion.as_deref(), Some("stream"));
    }

    #[test]
    fn probabilities_out_of_range_are_refused() {
        let d = err("[relays.down]\nordering = \"datagram\"\nloss = 1.5\n");
        assert_eq!(d.key, "relays[0].down.loss");
        assert!(d.message.contains("between 0 and 1"));
    }

    #[test]
    fn per_message_disturbances_need_the_datagram_mode() {
        for key in [
            "loss = 0.1",
            "reorder = 0.1",
            "duplicate = 0.1",
            "reorder_delay = \"1s\"",
        ] {
            let d = err(&format!("[relays.down]\n{key}\n"));
            assert!(d.key.starts_with("relays[0].down."), "{}", d.key);
            assert!(
                d.message.contains("ordering = \"datagram\""),
                "{}",
                d.message
            );
        }
        let d = err("[relays.up]\nordering = \"datagrm\"\n");
        assert_eq!(d.suggestion.as_deref(), Some("datagram"));
    }

    #[test]
    fn intake_and_publish_tables_are_checked() {
        let d = err("[relays.intake]\nmode = \"concurent\"\n");
        assert_eq!(d.suggestion.as_deref(), Some("concurrent"));
        let d = err("[relays.intake]\nmode = \"serial\"\nper_kib = \"1us\"\n");
        assert!(d.message.contains("concurrent intake"), "{}", d.message);
    }

    #[test]
    fn latency_expectations_must_name_a_metric_and_quantile() {
        let d = err("[expect]\nlatency = { \"transfer_completoin.p99\" = \"1s\" }\n");
        assert_eq!(d.suggestion.as_deref(), Some("transfer_completion.p99"));
    }

    #[test]
    fn bad_durations_and_sizes_say_how_to_write_them() {
        let d = err("[[workloads]]\nkind = \"download\"\nbytes = \"3GiB\"\n");
        assert!(d.message.contains("unknown size unit"), "{}", d.message);
        let Err(ScenarioError::Invalid(d)) =
            Scenario::from_toml_str(&format!("duration = \"ten minutes\"\n{BASE}"), "t.toml")
        else {
            panic!("accepted a bad duration")
        };
        assert!(d.message.contains("invalid duration"), "{}", d.message);
        assert_eq!(d.line, Some(1));
    }

    #[test]
    fn peers_need_distinct_names_and_outages_known_peers() {
        let text = BASE.replace("name = \"c\"\n", "name = \"s\"\n");
        let Err(ScenarioError::Invalid(d)) = Scenario::from_toml_str(&text, "t.toml") else {
            panic!("accepted")
        };
        assert!(
            d.message.contains("two peers are named \"s\""),
            "{}",
            d.message
        );
        let text = BASE.replace("[[servers]]", "[[relays.outages]]\nat = \"1s\"\nduration = \"1s\"\nkind = \"connection-drop\"\npeer = \"cc\"\n[[servers]]");
        let Err(ScenarioError::Invalid(d)) = Scenario::from_toml_str(&text, "t.toml") else {
            panic!("accepted")
        };
        assert_eq!(d.key, "relays[0].outages[0].peer");
        assert_eq!(d.suggestion.as_deref(), Some("c"));
    }

    #[test]
    fn absurd_durations_and_counts_are_refused_not_panicked_on() {
        for extra in ["duration = 1e20\n", "duration = \"100000y\"\n"] {
            let Err(ScenarioError::Invalid(d)) =
                Scenario::from_toml_str(&format!("{extra}{BASE}"), "t.toml")
            else {
                panic!("accepted {extra}")
            };
            assert!(d.message.contains("duration"), "{}", d.message);
        }
        let d = err(
            "[relays.down]\nordering = \"datagram\"\nduplicate = 1.0\nduplicate_copies = 4000000000\n",
        );
        assert!(d.message.contains("at most 100"), "{}", d.message);
        let d = err("[[workloads]]\nkind = \"request\"\ncount = 0\n");
        assert!(d.message.contains("between 1 and 1000000"), "{}", d.message);
    }

    #[test]
    fn a_slow_consumer_fails_only_when_its_backlog_outgrows_the_limit() {
        let stream = "[[workloads]]\nkind = \"stream\"\nchunks = 100\ninterval = \"10ms\"\nconsume_interval = \"50ms\"\n";
        let patient = Scenario::from_toml_str(&format!("{BASE}{stream}"), "t.toml")
            .unwrap()
            .run_all();
        assert_eq!(patient.completion_ratio(), 1.0, "{:?}", patient.failures());
        let strict = format!("[policy]\nmax_unread_chunks = 20\n{BASE}{stream}");
        let report = Scenario::from_toml_str(&strict, "t.toml")
            .unwrap()
            .run_all();
        assert_eq!(
            report.failures().get("stream-slow-consumer"),
            Some(&1),
            "{:?}",
            report.failures()
        );
    }

    #[test]
    fn count_expands_clients_and_workloads_target_them_all() {
        let text = BASE.replace("name = \"c\"\n", "name = \"c\"\ncount = 3\n")
            + "[[workloads]]\nkind = \"request\"\ncount = 2\n";
        let s = Scenario::from_toml_str(&text, "t.toml").unwrap();
        assert_eq!(s.workloads[0].clients, vec![0, 1, 2]);
        let report = s.run_all();
        assert_eq!(report.items().count(), 6);
        assert_eq!(report.completion_ratio(), 1.0);
    }
}
