//! Traces: versioned JSON Lines that record a run so it can be replayed and shrunk.
//!
//! The format is documented field by field in `docs/trace-format.md`. In short: a `header`
//! line (format version, relaysim version, scenario name, hash and text, seed, driver), then one
//! line per observation in the order the world made it, with virtual time `t` in microseconds,
//! then a `summary` line with every call's outcome.

mod outcomes;
mod reader;
mod writer;

pub use outcomes::{program_outcome, set_outcomes};
pub use reader::{first_difference, plans_of, NamedPlans, Trace, TraceError};
pub use writer::{client_event_text, Names, TraceWriter};

use serde::{Deserialize, Serialize};
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
    /// A relay's NIP-42 AUTH challenge.
    Auth {
        t: u64,
        relay: String,
        peer: String,
        challenge: String,
    },
    /// A relay did not send `peer` an event its subscription matched, and why
    /// (`auth-required`: the connection may not read that kind without AUTH).
    Withheld {
        t: u64,
        relay: String,
        peer: String,
        id: String,
        reason: String,
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
    /// A peer sent a REQ: subscription `sub` with its filters (NIP-01 JSON).
    Req {
        t: u64,
        peer: String,
        relay: String,
        sub: String,
        filters: Vec<serde_json::Value>,
    },
    /// A peer sent a CLOSE for subscription `sub`.
    Close {
        t: u64,
        peer: String,
        relay: String,
        sub: String,
    },
    /// The relay's EOSE for subscription `sub`, as the subscriber received it.
    Eose {
        t: u64,
        relay: String,
        peer: String,
        sub: String,
    },
    /// The relay's CLOSED for subscription `sub`, as the subscriber received it.
    Closed {
        t: u64,
        relay: String,
        peer: String,
        sub: String,
        message: String,
    },
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
    /// A program peer logged a line (its SDK's own words).
    Logged { t: u64, peer: String, text: String },
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
        /// Completed calls / calls; left out when the trace knows no outcome (a live trace
        /// whose calls reported nothing).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        completion_ratio: Option<f64>,
        /// Live traces: observations that could not be written because the writer fell
        /// behind (never silently: counted here, and 0 is left out).
        #[serde(default, skip_serializing_if = "is_zero")]
        dropped: u64,
    },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
            | Line::Auth { t, .. }
            | Line::Withheld { t, .. }
            | Line::Delivered { t, .. }
            | Line::Lost { t, .. }
            | Line::Duplicated { t, .. }
            | Line::Disconnected { t, .. }
            | Line::Connected { t, .. }
            | Line::Req { t, .. }
            | Line::Close { t, .. }
            | Line::Eose { t, .. }
            | Line::Closed { t, .. }
            | Line::Outage { t, .. }
            | Line::Called { t, .. }
            | Line::Logged { t, .. }
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
    /// For a call that ran out of time: what it awaited, and the refusals and dropped
    /// connections while it was open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// When the call started and ended on the trace's clock, for traces without `called`
    /// lines for it (a `serve` command's calls, placed by the times the command reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub ended_us: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::Line;

    #[test]
    fn an_auth_line_reads_as_docs_trace_format_says() {
        let text =
            r#"{"type":"auth","t":1500,"relay":"strfry","peer":"server","challenge":"a1B2"}"#;
        let line: Line = serde_json::from_str(text).unwrap();
        assert_eq!(
            line,
            Line::Auth {
                t: 1500,
                relay: "strfry".into(),
                peer: "server".into(),
                challenge: "a1B2".into(),
            }
        );
        assert_eq!(serde_json::to_string(&line).unwrap(), text);
        assert_eq!(line.time(), Some(1500));
    }
}
