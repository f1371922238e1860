//! Traces: versioned JSON Lines that record a run so it can be replayed and shrunk.
//!
//! The format is documented field by field in `docs/trace-format.md`. In short: a `header`
//! line (format version, relaysim version, scenario name, hash and text, seed, driver), then one
//! line per observation in the order the world made it, with virtual time `t` in microseconds,
//! then a `summary` line with every call's outcome.

use crate::peer::client::ClientEvent;
use crate::sim::world::{Observation, Observer, PeerId, Way};
use crate::stats::{Outcome, RunReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The trace format this relaysim writes and reads.
pub const FORMAT: u32 = 2;

/// Whether published events are stored whole (needed by `replay --mode inject`) or by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum EventsMode {
    /// The whole signed event on each `published` line.
    Full,
    /// Only the event id.
    Ids,
}

/// The scenario behind a recording made by relaysim's own live relays (the turmoil engine),
/// written into the live trace's header so `replay --mode schedule` can rerun it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioOrigin {
    /// The scenario's name.
    pub name: String,
    /// The hash of its text.
    pub hash: String,
    /// Its TOML text.
    pub toml: String,
    /// The run's seed.
    pub seed: u64,
}

/// How a trace was shrunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShrinkInfo {
    /// Disturbances in the original trace.
    pub disturbances_before: usize,
    /// Disturbances kept.
    pub disturbances_after: usize,
    /// The failure cause that was preserved.
    pub cause: String,
}

/// One line of a trace.
#[allow(missing_docs)] // Fields are documented in docs/trace-format.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Line {
    /// The first line.
    Header {
        format: u32,
        relaysim: String,
        scenario: String,
        scenario_hash: String,
        seed: u64,
        driver: String,
        events: EventsMode,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        suppressed_outages: Vec<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shrunk: Option<ShrinkInfo>,
        scenario_toml: String,
    },
    /// A peer sent an event to a relay.
    Published {
        t: u64,
        peer: String,
        relay: String,
        id: String,
        bytes: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event: Option<serde_json::Value>,
    },
    /// What a link did with its `seq`-th message: the delays of its copies (empty: lost).
    Link {
        t: u64,
        relay: String,
        peer: String,
        way: String,
        seq: u64,
        event: bool,
        delays_us: Vec<u64>,
    },
    /// A relay's OK.
    Verdict {
        t: u64,
        relay: String,
        peer: String,
        id: String,
        accepted: bool,
        message: String,
    },
    /// A relay's NOTICE.
    Notice {
        t: u64,
        relay: String,
        peer: String,
        message: String,
    },
    /// An event reached a subscriber.
    Delivered {
        t: u64,
        relay: String,
        peer: String,
        id: String,
        latency_us: u64,
        /// A first copy that arrived after a later event of the same author.
        reordered: bool,
        /// The peer already had this event id.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        duplicate: bool,
        /// Why it is reordered or a duplicate (`other-relay`, `relay-concurrency`, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
    },
    /// A message was lost.
    Lost {
        t: u64,
        relay: String,
        peer: String,
        way: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// A message was duplicated.
    Duplicated {
        t: u64,
        relay: String,
        peer: String,
        way: String,
        copies: usize,
    },
    /// A connection went down.
    Disconnected {
        t: u64,
        relay: String,
        peer: String,
        reason: String,
    },
    /// A connection came up.
    Connected { t: u64, relay: String, peer: String },
    /// An outage began.
    Outage {
        t: u64,
        index: u64,
        relay: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer: Option<String>,
        kind: String,
        duration_us: u64,
        suppressed: bool,
    },
    /// A workload call.
    Called {
        t: u64,
        client: String,
        call: u64,
        workload: usize,
        tool: String,
    },
    /// The server wrote a stream chunk.
    ChunkWritten {
        t: u64,
        client: String,
        call: u64,
        index: u64,
    },
    /// A client read a stream chunk.
    ChunkRead {
        t: u64,
        client: String,
        call: u64,
        index: u64,
        bytes: usize,
        intact: bool,
    },
    /// A client's report about a call.
    Client {
        t: u64,
        client: String,
        call: u64,
        event: String,
    },
    /// The last line: every call's outcome.
    Summary {
        outcomes: Vec<OutcomeLine>,
        integrity_violations: u64,
        completion_ratio: f64,
    },
}

impl Line {
    /// The line's virtual time, for observation lines.
    pub fn time(&self) -> Option<u64> {
        match self {
            Line::Header { .. } | Line::Summary { .. } => None,
            Line::Published { t, .. }
            | Line::Link { t, .. }
            | Line::Verdict { t, .. }
            | Line::Notice { t, .. }
            | Line::Delivered { t, .. }
            | Line::Lost { t, .. }
            | Line::Duplicated { t, .. }
            | Line::Disconnected { t, .. }
            | Line::Connected { t, .. }
            | Line::Outage { t, .. }
            | Line::Called { t, .. }
            | Line::ChunkWritten { t, .. }
            | Line::ChunkRead { t, .. }
            | Line::Client { t, .. } => Some(*t),
        }
    }
}

/// A call's outcome in the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeLine {
    /// The workload's name.
    pub workload: String,
    /// The client's name.
    pub client: String,
    /// The call id.
    pub call: u64,
    /// The tool.
    pub tool: String,
    /// `completed` or `failed:<cause>`.
    pub outcome: String,
}

fn us(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

fn way_name(way: Way) -> String {
    match way {
        Way::Up => "up".into(),
        Way::Down => "down".into(),
        Way::Intake => "intake".into(),
        Way::Publish => "publish".into(),
    }
}

/// The short text a trace uses for a client event.
pub fn client_event_text(event: &ClientEvent) -> (u64, String) {
    match event {
        ClientEvent::Initialized { .. } => (0, "initialized".into()),
        ClientEvent::Response {
            call,
            response: Ok(_),
        } => (*call, "response-ok".into()),
        ClientEvent::Response {
            call,
            response: Err(e),
        } => (*call, format!("response-error:{}", e.code)),
        ClientEvent::StreamOpened { call } => (*call, "stream-opened".into()),
        ClientEvent::StreamEnded {
            call,
            outcome: Ok(()),
        } => (*call, "stream-ended-ok".into()),
        ClientEvent::StreamEnded {
            call,
            outcome: Err(f),
        } => (*call, format!("stream-ended:{}", f.cause())),
        ClientEvent::Failed { call, failure } => (*call, format!("failed:{}", failure.cause())),
        ClientEvent::StreamResumed { call, .. } => (*call, "stream-resumed".into()),
    }
}

/// Names of the world's relays and peers, for trace lines.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Relay names by index.
    pub relays: Vec<String>,
    /// Peer names.
    pub peers: BTreeMap<PeerId, String>,
}

impl Names {
    fn relay(&self, i: usize) -> String {
        self.relays.get(i).cloned().unwrap_or_default()
    }

    fn peer(&self, p: PeerId) -> String {
        self.peers.get(&p).cloned().unwrap_or_default()
    }

    fn client(&self, i: usize) -> String {
        self.peer(PeerId::Client(i))
    }
}

/// Writes trace lines as the world runs.
#[derive(Debug)]
pub struct TraceWriter {
    names: Names,
    events: EventsMode,
    text: String,
}

impl TraceWriter {
    /// A writer that starts with `header`.
    pub fn new(header: &Line, names: Names, events: EventsMode) -> Self {
        let mut w = TraceWriter {
            names,
            events,
            text: String::new(),
        };
        w.push(header);
        w
    }

    fn push(&mut self, line: &Line) {
        self.text
            .push_str(&serde_json::to_string(line).expect("trace lines serialize"));
        self.text.push('\n');
    }

    /// Appends the summary and returns the whole trace.
    pub fn finish(mut self, report: &RunReport, workloads: &[String]) -> String {
        let outcomes = report
            .items
            .iter()
            .map(|i| OutcomeLine {
                workload: workloads.get(i.workload).cloned().unwrap_or_default(),
                client: self.names.client(i.client),
                call: i.call,
                tool: i.tool.to_owned(),
                outcome: match &i.outcome {
                    Outcome::Completed => "completed".into(),
                    Outcome::Failed(c) => format!("failed:{c}"),
                },
            })
            .collect();
        let total = report.items.len();
        let done = report
            .items
            .iter()
            .filter(|i| i.outcome == Outcome::Completed)
            .count();
        let summary = Line::Summary {
            outcomes,
            integrity_violations: report.integrity_violations,
            completion_ratio: if total == 0 {
                1.0
            } else {
                done as f64 / total as f64
            },
        };
        self.push(&summary);
        self.text
    }
}

impl Observer for TraceWriter {
    fn observe(&mut self, at: Duration, o: &Observation) {
        let t = us(at);
        let n = &self.names;
        let line = match o {
            Observation::Published {
                peer,
                relay,
                event,
                bytes,
                json,
            } => Line::Published {
                t,
                peer: n.peer(*peer),
                relay: n.relay(*relay),
                id: event.to_hex(),
                bytes: *bytes,
                event: match self.events {
                    EventsMode::Full => serde_json::from_str(json).ok().map(|mut e| {
                        crate::peer::streams::redact_event_json(&mut e);
                        e
                    }),
                    EventsMode::Ids => None,
                },
            },
            Observation::LinkPlan {
                relay,
                peer,
                way,
                seq,
                event,
                delays,
            } => Line::Link {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                way: way_name(*way),
                seq: *seq,
                event: *event,
                delays_us: delays.iter().map(|d| us(*d)).collect(),
            },
            Observation::Verdict {
                relay,
                peer,
                event,
                accepted,
                message,
            } => Line::Verdict {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                id: event.to_hex(),
                accepted: *accepted,
                message: message.clone(),
            },
            Observation::Notice {
                relay,
                peer,
                message,
            } => Line::Notice {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                message: message.clone(),
            },
            Observation::Delivered {
                relay,
                peer,
                event,
                latency,
                reordered,
                duplicate,
                via,
            } => Line::Delivered {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                id: event.to_hex(),
                latency_us: us(*latency),
                reordered: *reordered,
                duplicate: *duplicate,
                via: via.map(|v| v.name().to_owned()),
            },
            Observation::Lost {
                relay,
                peer,
                way,
                event,
            } => Line::Lost {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                way: way_name(*way),
                id: event.map(|e| e.to_hex()),
            },
            Observation::Duplicated {
                relay,
                peer,
                way,
                copies,
            } => Line::Duplicated {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                way: way_name(*way),
                copies: *copies,
            },
            Observation::Disconnected {
                relay,
                peer,
                reason,
            } => Line::Disconnected {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                reason: (*reason).into(),
            },
            Observation::Connected { relay, peer } => Line::Connected {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
            },
            Observation::Outage {
                index,
                relay,
                peer,
                kind,
                duration,
                suppressed,
            } => Line::Outage {
                t,
                index: *index,
                relay: n.relay(*relay),
                peer: peer.map(|p| n.peer(p)),
                kind: (*kind).into(),
                duration_us: us(*duration),
                suppressed: *suppressed,
            },
            Observation::Called {
                client,
                call,
                workload,
                tool,
                ..
            } => Line::Called {
                t,
                client: n.client(*client),
                call: *call,
                workload: *workload,
                tool: (*tool).into(),
            },
            // Totals, not events: reports carry them; a replay recomputes them.
            Observation::StreamStore { .. } => return,
            Observation::ChunkWritten {
                client,
                call,
                index,
            } => Line::ChunkWritten {
                t,
                client: n.client(*client),
                call: *call,
                index: *index,
            },
            Observation::ChunkRead {
                client,
                call,
                index,
                bytes,
                intact,
            } => Line::ChunkRead {
                t,
                client: n.client(*client),
                call: *call,
                index: *index,
                bytes: *bytes,
                intact: *intact,
            },
            Observation::Client { client, event } => {
                let (call, event) = client_event_text(event);
                Line::Client {
                    t,
                    client: n.client(*client),
                    call,
                    event,
                }
            }
        };
        self.push(&line);
    }
}

/// Why a trace cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("{path}: cannot read")]
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A line is not a valid trace line.
    #[error("{file}:{line}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// A parsed trace.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Every line, header first and summary last.
    pub lines: Vec<Line>,
}

impl Trace {
    /// Reads and checks a trace file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses trace text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, TraceError> {
        let err = |line: usize, message: String| TraceError::Invalid {
            file: file.to_owned(),
            line,
            message,
        };
        let mut lines = Vec::new();
        let mut last_time = 0u64;
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let n = i + 1;
            if lines.is_empty() {
                // Check the version before the shape, so a newer format says so.
                let v: serde_json::Value =
                    serde_json::from_str(raw).map_err(|e| err(n, format!("not JSON: {e}")))?;
                if v.get("type").and_then(|t| t.as_str()) != Some("header") {
                    return Err(err(n, "the first line must be the header".into()));
                }
                match v.get("format").and_then(|f| f.as_u64()) {
                    Some(f) if f == FORMAT as u64 => {}
                    // A live format-1 trace records what a real relay did; only its
                    // `delivered` lines lack the (optional) mechanism, so it still reads.
                    Some(1) if v.get("driver").and_then(|d| d.as_str()) == Some("live") => {}
                    Some(1) => {
                        let scenario = v.get("scenario").and_then(|s| s.as_str()).unwrap_or("?");
                        let seed = v.get("seed").and_then(|s| s.as_u64()).unwrap_or(0);
                        return Err(err(n, format!(
                            "trace format 1 was recorded under the old link model, where one \
                             connection could reorder and lose single messages; this relaysim \
                             reads format {FORMAT}. Regenerate it from its scenario \
                             ({scenario:?}, seed {seed}): `relaysim run SCENARIO.toml --seed \
                             {seed} --trace NEW.jsonl` (add `ordering = \"datagram\"` to a \
                             link to keep the old per-message behaviour)"
                        )));
                    }
                    Some(f) if f > FORMAT as u64 => {
                        return Err(err(n, format!("trace format {f} is newer than this relaysim reads ({FORMAT}); upgrade relaysim")))
                    }
                    Some(f) => return Err(err(n, format!("unknown trace format {f}"))),
                    None => return Err(err(n, "the header has no `format`".into())),
                }
            }
            let line: Line = serde_json::from_str(raw)
                .map_err(|e| err(i + 1, format!("not a trace line: {e}")))?;
            // Observations come in time order, and a link's n-th message cannot be numbered
            // beyond every line seen so far: both keep replays finite and in bounds.
            if let Some(t) = line.time() {
                if t < last_time {
                    return Err(err(
                        i + 1,
                        format!("time goes backwards ({t} after {last_time})"),
                    ));
                }
                last_time = t;
            }
            if let Line::Link { seq, .. } = &line {
                if *seq > i as u64 {
                    return Err(err(
                        i + 1,
                        format!("link message number {seq} is out of range"),
                    ));
                }
            }
            if !lines.is_empty() && matches!(line, Line::Header { .. }) {
                return Err(err(i + 1, "a second header".into()));
            }
            if matches!(lines.last(), Some(Line::Summary { .. })) {
                return Err(err(i + 1, "a line after the summary".into()));
            }
            lines.push(line);
        }
        match (lines.first(), lines.last()) {
            (Some(Line::Header { .. }), Some(Line::Summary { .. })) if lines.len() >= 2 => {
                Ok(Trace { lines })
            }
            (None, _) => Err(err(1, "empty trace".into())),
            _ => Err(err(
                text.lines().count(),
                "truncated: the trace has no closing summary line".into(),
            )),
        }
    }

    /// The header's fields: scenario text, seed, events mode, suppressed outages.
    pub fn header(&self) -> (&str, u64, EventsMode, &[u64]) {
        match &self.lines[0] {
            Line::Header {
                scenario_toml,
                seed,
                events,
                suppressed_outages,
                ..
            } => (scenario_toml, *seed, *events, suppressed_outages),
            _ => unreachable!("checked by parse"),
        }
    }

    /// The recorded outcomes.
    pub fn outcomes(&self) -> &[OutcomeLine] {
        match self.lines.last() {
            Some(Line::Summary { outcomes, .. }) => outcomes,
            _ => unreachable!("checked by parse"),
        }
    }
}

/// The first line where two traces differ: (1-based line number, left, right).
pub fn first_difference(a: &str, b: &str) -> Option<(usize, String, String)> {
    let mut la = a.lines();
    let mut lb = b.lines();
    let mut n = 0;
    loop {
        n += 1;
        match (la.next(), lb.next()) {
            (None, None) => return None,
            (x, y) if x == y => continue,
            (x, y) => {
                return Some((
                    n,
                    x.unwrap_or("<end of trace>").to_owned(),
                    y.unwrap_or("<end of trace>").to_owned(),
                ))
            }
        }
    }
}

/// Link decisions by (relay, peer, way) names: the delays of the copies of each message.
pub type NamedPlans = BTreeMap<(String, String, String), Vec<Vec<Duration>>>;

/// The link decisions recorded in a trace.
pub fn plans_of(trace: &Trace) -> NamedPlans {
    let mut plans = NamedPlans::new();
    for line in &trace.lines {
        if let Line::Link {
            relay,
            peer,
            way,
            seq,
            delays_us,
            ..
        } = line
        {
            let list = plans
                .entry((relay.clone(), peer.clone(), way.clone()))
                .or_default();
            let seq = *seq as usize;
            if list.len() <= seq {
                list.resize(seq + 1, Vec::new());
            }
            list[seq] = delays_us
                .iter()
                .map(|d| Duration::from_micros(*d))
                .collect();
        }
    }
    plans
}
