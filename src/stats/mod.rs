//! Statistics of runs: latency histograms (microseconds of virtual time), counters, and the
//! outcome of every workload call, collected by an [`Observer`] on the world.
//!
//! Longer than 600 lines because the collector, the classification of a call's record into
//! its outcome and the report built from them share one record type and read best together;
//! explanations (`why`), outputs and request pairing live in their own modules.
//!
//! Metrics (all microseconds of virtual time):
//! - `relay_delivery_latency`: an event's first publish to each delivery to a subscriber;
//! - `time_to_first_chunk`: a stream call to its first chunk read;
//! - `chunk_latency`: the server writing a stream chunk to the client reading it;
//! - `transfer_completion`: a `download` or `upload` call to its verified response;
//! - `stream_completion`: a stream call to its successful close;
//! - `final_response_latency`: any call to its final JSON-RPC response.
//!
//! Counters: `events_published`, `bytes_published`, `events_accepted`, `rejected.<prefix>` (the OK prefix:
//! `invalid`, `rate-limited`, `mute`, `duplicate` is counted apart as `relay_duplicates`),
//! `notices`, `lost`, `duplicated` (deliveries of an id the peer already had), `delivered`,
//! `reordered` (first copies that arrived after a later event of the same author),
//! `reordered.<via>` and `duplicated.<via>` (by mechanism: `other-relay`, `relay-concurrency`,
//! `publisher-concurrency`, `resubscribe-replay`, `reconnection`, `republish`,
//! `datagram-link`, `unexplained`), `disconnects`, `outages`.

pub mod interval;
pub mod output;
pub mod rpc_pairs;
pub mod second_writers;
pub mod why;

use crate::peer::client::{CallFailure, CallId, ClientEvent};
use crate::peer::tools::Expected;
use crate::sim::world::{Observation, Observer, PeerId};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::Duration;

/// The metric names, in report order.
pub const METRICS: [&str; 7] = [
    "relay_delivery_latency",
    "time_to_first_chunk",
    "chunk_latency",
    "transfer_completion",
    "stream_completion",
    "final_response_latency",
    "resume_latency",
];

/// How one workload call ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// The result arrived, verified against what was sent.
    Completed,
    /// It did not; the cause names why (`timeout`, `download-gap-at-end`, `stream-probe-timeout`,
    /// `error-32603`, `unfinished`, ...). When another implementation said why in its own words,
    /// they follow the cause after `": "` (`stream-sequence: Non-increasing progress for stream
    /// 0`); the part before is the cause's family, the stable key for expectations and tables.
    Failed(String),
}

impl Outcome {
    /// The failure's cause family (`stream-sequence`), without an implementation's own words;
    /// `None` for a completed call.
    pub fn family(&self) -> Option<&str> {
        match self {
            Outcome::Completed => None,
            Outcome::Failed(c) => Some(family(c)),
        }
    }
}

/// A cause with another implementation's own words after it, when it gave them.
fn cause_text(family: &str, words: Option<&str>) -> String {
    match words {
        Some(words) => format!("{family}: {words}"),
        None => family.to_owned(),
    }
}

/// The family of a cause text: what comes before an implementation's own words.
pub fn family(cause: &str) -> &str {
    cause.split_once(": ").map_or(cause, |(f, _)| f)
}

/// One workload call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Index of its workload in the scenario.
    pub workload: usize,
    /// The client.
    pub client: usize,
    /// The call id.
    pub call: CallId,
    /// The tool.
    pub tool: &'static str,
    /// How it ended.
    pub outcome: Outcome,
    /// Call to final outcome, when it ended.
    pub latency: Option<Duration>,
    /// For a stream: chunks the server wrote and chunks the client read.
    pub chunks: Option<(u64, u64)>,
    /// For a failed call: what it awaited when it ran out of time, and the refusals and
    /// dropped connections while it was open ([`why`]).
    pub why: Option<String>,
}

#[derive(Debug, Clone)]
struct CallRecord {
    workload: usize,
    tool: &'static str,
    expected: Expected,
    started: Duration,
    first_chunk: Option<Duration>,
    last_chunk: Option<Duration>,
    chunks_read: u64,
    chunks_written: u64,
    next_index: u64,
    chunk_violations: u64,
    stream_end: Option<(Duration, Result<(), String>)>,
    response: Option<(Duration, Result<bool, String>)>,
    failure: Option<(Duration, String)>,
    /// Why the server failed this call's request, when it did without telling the client.
    server_failure: Option<String>,
    /// Its slow reader was still reading when the run ended.
    reading_at_end: bool,
}

/// Collects statistics as the world runs.
#[derive(Debug, Default)]
pub struct Collector {
    calls: BTreeMap<(usize, CallId), CallRecord>,
    written: BTreeMap<(usize, CallId, u64), Duration>,
    histograms: BTreeMap<&'static str, Histogram<u64>>,
    counters: BTreeMap<String, u64>,
    stores: BTreeMap<usize, crate::protocol::resumable::server::StoreStats>,
    /// Refusals and drops, to explain calls that ran out of time.
    events: why::RunEvents,
    /// Events sent to a relay, and relay answers (`OK`) to them: the difference went
    /// unanswered.
    sent_to_relays: u64,
    answered_by_relays: u64,
    /// Servers are programs: chunks written are not known.
    programs_write: bool,
    /// Refusals and drops only explain calls: the relays count them (live and turmoil runs);
    /// publications and their answers are followed all the same.
    link_events_explain_only: bool,
    /// What the program peers logged: `"peer: line"` and how often.
    program_lines: BTreeMap<String, u64>,
    /// Publications no relay has answered yet, by relay, publisher and event, with when they
    /// were published (at most [`MAX_UNANSWERED`]; more are only counted in `ok_missing`).
    unanswered: rustc_hash::FxHashMap<(usize, PeerId, nostr::prelude::EventId), Duration>,
    /// Tokens whose progress a peer wrote again, read off the events' JSON: for runs whose
    /// peers are programs, whose streams relaysim's receivers do not follow (see
    /// [`Collector::following_second_writers`]).
    second_writers: Option<second_writers::SecondWriters>,
    /// The progress events already read (a republished event is the same writer again, not a
    /// second one; a relay each publication goes to is another copy of it).
    progress_seen: rustc_hash::FxHashSet<nostr::prelude::EventId>,
}

/// Unanswered publications followed one by one, to name them in the calls they fell within.
const MAX_UNANSWERED: usize = 100_000;

/// Distinct program lines a run's report tallies; lines past them are counted under
/// [`OTHER_PROGRAM_LINES`].
const MAX_PROGRAM_LINES: usize = 256;

/// The report's key for the program lines past [`MAX_PROGRAM_LINES`] distinct ones.
pub const OTHER_PROGRAM_LINES: &str = "(other lines)";

/// Feeds `writers` the progress an event's JSON carries, if any.
fn follow_progress(writers: &mut second_writers::SecondWriters, shown_as: &str, json: &str) {
    let Ok(event) = serde_json::from_str::<nostr::prelude::Event>(json) else {
        return;
    };
    let recipient = event
        .tags
        .public_keys()
        .next()
        .map(|p| p.to_hex())
        .unwrap_or_default();
    writers.published(&event.pubkey.to_hex(), shown_as, &recipient, &event.content);
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty collector that names relays and peers in its explanations.
    pub fn named(names: why::Names) -> Self {
        Collector {
            events: why::RunEvents::named(names),
            ..Self::default()
        }
    }

    /// Refusals and dropped connections it observes explain calls and are not counted: for
    /// the turmoil and live engines, whose relays count their own answers and connections.
    /// Publications and the answers the peers got still make `ok_missing` and the
    /// explanations' "no OK came".
    pub fn explaining_link_events_only(mut self) -> Self {
        self.link_events_explain_only = true;
        self
    }

    /// Reads every published event's JSON for progress written again (a second writer, as
    /// when a server runs one request twice), and names what it finds in every failed call's
    /// `why`. For program peers: relaysim's own receivers name a second writer themselves
    /// (`failed:duplicate-writer`), and reading each event's JSON costs its serialisation.
    pub fn following_second_writers(mut self) -> Self {
        self.second_writers = Some(second_writers::SecondWriters::default());
        self
    }

    /// These streaming calls' readers were still reading when the run ended (`(client,
    /// call)`): a stream that ended well with chunks its reader had not read yet is unfinished,
    /// not short of chunks.
    pub fn still_reading(&mut self, calls: &[(usize, CallId)]) {
        for key in calls {
            if let Some(r) = self.calls.get_mut(key) {
                r.reading_at_end = true;
            }
        }
    }

    /// The run's servers are programs, which do not report the chunks they write: a stream's
    /// explanation does not claim a count.
    pub fn servers_are_programs(&mut self) {
        self.programs_write = true;
    }

    /// `n` lines the run's program peers logged past what the world keeps
    /// ([`crate::sim::hosted::MAX_LINES`]).
    pub fn program_lines_not_kept(&mut self, n: u64) {
        self.events.not_logged(n);
        if n > 0 {
            *self
                .program_lines
                .entry(OTHER_PROGRAM_LINES.to_owned())
                .or_default() += n;
        }
    }

    fn record(&mut self, metric: &'static str, value: Duration) {
        let h = self.histograms.entry(metric).or_insert_with(|| {
            // 1 µs to one day, 3 significant figures; longer values saturate.
            Histogram::new_with_bounds(1, 86_400_000_000, 3).expect("valid bounds")
        });
        h.saturating_record(micros(value).max(1));
    }

    fn count(&mut self, counter: &str, n: u64) {
        *self.counters.entry(counter.to_owned()).or_default() += n;
    }

    /// Classifies every call and returns the run's report.
    pub fn finish(mut self, seed: u64) -> RunReport {
        let unanswered = std::mem::take(&mut self.unanswered)
            .into_iter()
            .map(|((relay, peer, _), at)| (at, peer, relay))
            .collect();
        self.events.unanswered(unanswered);
        let mut items = Vec::new();
        let mut integrity_violations = 0;
        for ((client, call), r) in &self.calls {
            integrity_violations += r.chunk_violations;
            let (outcome, at) = classify(r);
            if matches!(&outcome, Outcome::Failed(c) if c == "integrity-violation") {
                integrity_violations += 1;
            }
            let why = outcome.family().and_then(|family| {
                self.events.explain(
                    &why::Awaiting {
                        started: r.started,
                        ended: at,
                        stream: match r.expected {
                            Expected::Stream { chunks } => Some(why::StreamProgress {
                                chunks,
                                read: r.chunks_read,
                                written: (!self.programs_write).then_some(r.chunks_written),
                                next_index: r.next_index,
                                last_read: r.last_chunk,
                                ended: matches!(r.stream_end, Some((_, Ok(())))),
                            }),
                            _ => None,
                        },
                        responded: r.response.is_some(),
                    },
                    why::ran_out_of_time(family),
                )
            });
            let why = match (
                matches!(&outcome, Outcome::Failed(c) if c == "integrity-violation")
                    .then(|| what_differed(r)),
                why,
            ) {
                (Some(differed), Some(more)) => Some(format!("{differed}; {more}")),
                (differed, more) => differed.or(more),
            };
            items.push(Item {
                workload: r.workload,
                client: *client,
                call: *call,
                tool: r.tool,
                outcome,
                latency: at.map(|t| t.saturating_sub(r.started)),
                chunks: (r.tool == "stream").then_some((r.chunks_written, r.chunks_read)),
                why,
            });
        }
        if let Some(writers) = &self.second_writers {
            let (named, more) = writers.found();
            let clauses = second_writers::clauses(named, more);
            if !clauses.is_empty() {
                // Which call a token belongs to is the program's own business: the clauses are
                // the run's, worded for every failed call.
                let run = format!("in this run, {}", clauses.join("; "));
                for item in items.iter_mut().filter(|i| i.outcome != Outcome::Completed) {
                    item.why = Some(match item.why.take() {
                        Some(why) => format!("{why}; {run}"),
                        None => run.clone(),
                    });
                }
            }
        }
        let mut counters = self.counters;
        // Events no relay answered: lost on the way, sent into a dropped connection, or
        // a relay that answers some events with silence (nostr-rs-relay 0.8, ephemeral).
        let unanswered = self.sent_to_relays.saturating_sub(self.answered_by_relays);
        if unanswered > 0 {
            counters.insert("ok_missing".to_owned(), unanswered);
        }
        if !self.stores.is_empty() {
            let sum = |f: fn(&crate::protocol::resumable::server::StoreStats) -> u64| {
                self.stores.values().map(f).sum::<u64>()
            };
            let max = |f: fn(&crate::protocol::resumable::server::StoreStats) -> u64| {
                self.stores.values().map(f).max().unwrap_or(0)
            };
            for (name, value) in [
                ("resumable.replayed_events", sum(|s| s.replayed_messages)),
                ("resumable.replayed_bytes", sum(|s| s.replayed_bytes)),
                ("resumable.evicted", sum(|s| s.evicted)),
                ("resumable.abandoned", sum(|s| s.abandoned)),
                ("resumable.released", sum(|s| s.released)),
                (
                    "resumable.buffer_high_water_events",
                    max(|s| s.high_water_messages),
                ),
                (
                    "resumable.buffer_high_water_bytes",
                    max(|s| s.high_water_bytes),
                ),
            ] {
                counters.insert(name.to_owned(), value);
            }
        }
        RunReport {
            seed,
            items,
            histograms: self.histograms,
            counters,
            integrity_violations,
            program_errors: Vec::new(),
            program_lines: self.program_lines,
        }
    }
}

/// A call's outcome. When several things went wrong, the earliest names the cause (a stream
/// that failed its keepalive, then a call that timed out, failed because of the stream).
fn classify(r: &CallRecord) -> (Outcome, Option<Duration>) {
    let failed = |cause: String, at| (Outcome::Failed(cause), Some(at));
    let stream_failure = match &r.stream_end {
        Some((at, Err(cause))) => Some((*at, format!("stream-{cause}"))),
        _ => None,
    };
    let error_response = match &r.response {
        Some((at, Err(code))) if r.expected != Expected::Error => Some((*at, code.clone())),
        _ => None,
    };
    // Ties go to the first listed: the client's own verdict, then the stream's, then the
    // server's error response (which usually reports the same trouble).
    let earliest = [r.failure.clone(), stream_failure, error_response]
        .into_iter()
        .flatten()
        .min_by_key(|(at, _)| *at);
    if let Some((at, cause)) = earliest {
        return failed(cause, at);
    }
    if let Expected::Stream { chunks } = r.expected {
        match &r.stream_end {
            Some((_, Err(_))) => unreachable!("handled above"),
            // The stream never reached an end on the client: the response says why, or, when
            // the server reports success, the stream itself never arrived.
            None => {
                return match &r.response {
                    Some((at, Err(code))) => failed(code.clone(), *at),
                    Some((at, Ok(_))) => failed("stream-missing".into(), *at),
                    None => (Outcome::Failed("unfinished".into()), None),
                }
            }
            // The stream ended well and every chunk read was intact, but its slow reader was
            // still reading when the run ended: the rest were not read in time.
            Some((_, Ok(())))
                if r.chunks_read < chunks && r.chunk_violations == 0 && r.reading_at_end =>
            {
                return (Outcome::Failed("unfinished".into()), None);
            }
            Some((_, Ok(()))) if r.chunks_read != chunks || r.chunk_violations > 0 => {
                let at = r.stream_end.as_ref().map(|(t, _)| *t).unwrap_or_default();
                return failed("integrity-violation".into(), at);
            }
            Some(_) => {}
        }
    }
    match &r.response {
        None => (Outcome::Failed("unfinished".into()), None),
        Some((at, Ok(true))) => {
            let end = r.stream_end.as_ref().map_or(*at, |(t, _)| (*t).max(*at));
            (Outcome::Completed, Some(end))
        }
        Some((at, Ok(false))) => failed("integrity-violation".into(), *at),
        Some((at, Err(code))) if r.expected == Expected::Error => {
            let _ = code;
            (Outcome::Completed, Some(*at))
        }
        Some((at, Err(code))) => failed(code.clone(), *at),
    }
}

/// What an integrity violation of call `r` was: which of its chunks, or its result, were not
/// what the other side meant.
fn what_differed(r: &CallRecord) -> String {
    match r.expected {
        Expected::Stream { .. } if r.chunk_violations > 0 => format!(
            "{} of the {} chunks it read were not the chunks written for it",
            r.chunk_violations, r.chunks_read
        ),
        Expected::Stream { chunks } if r.chunks_read != chunks => format!(
            "its stream ended well after {} of {chunks} chunks",
            r.chunks_read
        ),
        _ => "its result was not what the tool returns for it".to_owned(),
    }
}

impl Observer for Collector {
    /// Statistics count an event's bytes; only a collector following second writers reads
    /// the JSON.
    fn wants_event_json(&self) -> bool {
        self.second_writers.is_some()
    }

    fn observe(&mut self, at: Duration, o: &Observation) {
        match o {
            Observation::Logged { peer, text } => {
                let name = self.events.name_of(*peer);
                self.events.logged(at, &name, text);
                let key = format!("{name}: {text}");
                let key = if self.program_lines.len() < MAX_PROGRAM_LINES
                    || self.program_lines.contains_key(&key)
                {
                    key
                } else {
                    OTHER_PROGRAM_LINES.to_owned()
                };
                *self.program_lines.entry(key).or_default() += 1;
            }
            Observation::Published {
                bytes,
                peer,
                relay,
                event,
                json,
            } => {
                self.count("events_published", 1);
                self.count("bytes_published", *bytes as u64);
                if let (Some(writers), Some(json)) = (self.second_writers.as_mut(), json) {
                    if json.contains("notifications/progress") && self.progress_seen.insert(*event)
                    {
                        let shown_as = self.events.name_of(*peer);
                        follow_progress(writers, &shown_as, json);
                    }
                }
                self.sent_to_relays += 1;
                if self.unanswered.len() < MAX_UNANSWERED {
                    self.unanswered.insert((*relay, *peer, *event), at);
                }
            }
            Observation::Verdict {
                accepted,
                message,
                peer,
                relay,
                event,
            } => {
                if !*accepted {
                    self.events.refused(at, *peer, *relay, message);
                }
                self.unanswered.remove(&(*relay, *peer, *event));
                self.answered_by_relays += 1;
                if self.link_events_explain_only {
                    // The relays count their verdicts themselves.
                    return;
                }
                if *accepted && message.starts_with("duplicate:") {
                    self.count("relay_duplicates", 1);
                } else if *accepted {
                    self.count("events_accepted", 1);
                } else {
                    let prefix = message
                        .split(':')
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_owned();
                    self.count(&format!("rejected.{prefix}"), 1);
                }
            }
            Observation::Notice { .. } => self.count("notices", 1),
            Observation::Auth { .. } => self.count("auth_challenges", 1),
            Observation::Withheld {
                relay,
                peer,
                reason,
                ..
            } => {
                self.count("withheld", 1);
                self.events.withheld(at, *peer, *relay, reason);
            }
            Observation::Delivered {
                latency,
                reordered,
                duplicate,
                via,
                ..
            } => {
                self.count("delivered", 1);
                let counter = match (reordered, duplicate) {
                    (_, true) => Some("duplicated"),
                    (true, _) => Some("reordered"),
                    _ => None,
                };
                if let Some(counter) = counter {
                    self.count(counter, 1);
                    if let Some(via) = via {
                        self.count(&format!("{counter}.{}", via.name()), 1);
                    }
                }
                self.record("relay_delivery_latency", *latency);
            }
            Observation::Lost { .. } => self.count("lost", 1),
            // Counted where the copies arrive, with their mechanism.
            Observation::Duplicated { .. } => {}
            Observation::Disconnected {
                relay,
                peer,
                reason,
            } => {
                if !self.link_events_explain_only {
                    self.count("disconnects", 1);
                }
                self.events.dropped(at, *peer, *relay, reason);
            }
            Observation::Connected { .. }
            | Observation::LinkPlan { .. }
            | Observation::Subscription { .. } => {}
            Observation::Outage { suppressed, .. } => {
                if !suppressed {
                    self.count("outages", 1);
                }
            }
            Observation::Called {
                client,
                call,
                workload,
                tool,
                expected,
            } => {
                self.calls.insert(
                    (*client, *call),
                    CallRecord {
                        workload: *workload,
                        tool,
                        expected: expected.clone(),
                        started: at,
                        first_chunk: None,
                        last_chunk: None,
                        chunks_read: 0,
                        chunks_written: 0,
                        next_index: 0,
                        chunk_violations: 0,
                        stream_end: None,
                        response: None,
                        failure: None,
                        server_failure: None,
                        reading_at_end: false,
                    },
                );
            }
            Observation::ChunkWritten {
                client,
                call,
                index,
            } => {
                self.written.insert((*client, *call, *index), at);
                if let Some(r) = self.calls.get_mut(&(*client, *call)) {
                    r.chunks_written += 1;
                }
            }
            Observation::ServerFailed {
                client,
                call,
                cause,
            } => {
                if let Some(r) = self.calls.get_mut(&(*client, *call)) {
                    r.server_failure.get_or_insert_with(|| cause.clone());
                }
            }
            Observation::StreamStore { server, stats } => {
                self.stores.insert(*server, *stats);
            }
            Observation::ChunkRead {
                client,
                call,
                index,
                intact,
                ..
            } => {
                if let Some(written) = self.written.remove(&(*client, *call, *index)) {
                    self.record("chunk_latency", at.saturating_sub(written));
                }
                let mut first = None;
                if let Some(r) = self.calls.get_mut(&(*client, *call)) {
                    if r.first_chunk.is_none() {
                        r.first_chunk = Some(at);
                        first = Some(at.saturating_sub(r.started));
                    }
                    r.chunks_read += 1;
                    r.last_chunk = Some(at);
                    if !intact || *index != r.next_index {
                        r.chunk_violations += 1;
                    }
                    r.next_index = index + 1;
                }
                if let Some(ttfc) = first {
                    self.record("time_to_first_chunk", ttfc);
                }
            }
            Observation::Client { client, event } => self.on_client(at, *client, event),
        }
    }
}

impl Collector {
    fn on_client(&mut self, at: Duration, client: usize, event: &ClientEvent) {
        let call = match event {
            ClientEvent::Response { call, .. }
            | ClientEvent::StreamOpened { call }
            | ClientEvent::StreamEnded { call, .. }
            | ClientEvent::StreamResumed { call, .. }
            | ClientEvent::Failed { call, .. } => *call,
            ClientEvent::Initialized { .. } => return,
        };
        let Some(r) = self.calls.get_mut(&(client, call)) else {
            return;
        };
        let started = r.started;
        let mut metrics: Vec<(&'static str, Duration)> = Vec::new();
        match event {
            ClientEvent::Response { response, .. } => {
                let verdict = match response {
                    Ok(value) => Ok(r.expected.matches(value)),
                    Err(e) => Err(format!("error{}", e.code)),
                };
                if verdict == Ok(true) && matches!(r.tool, "large_result" | "upload") {
                    metrics.push(("transfer_completion", at - started));
                }
                metrics.push(("final_response_latency", at - started));
                r.response.get_or_insert((at, verdict));
            }
            ClientEvent::StreamEnded { outcome, .. } => {
                let outcome = outcome
                    .as_ref()
                    .map_err(|f| cause_text(f.cause(), f.detail()))
                    .copied();
                if outcome.is_ok() {
                    metrics.push(("stream_completion", at - started));
                }
                r.stream_end.get_or_insert((at, outcome));
            }
            ClientEvent::Failed { failure, .. } => {
                let server_words = r.server_failure.as_ref().map(|c| format!("server {c}"));
                // A call that timed out because the server failed its request says so.
                let words = match (failure, &server_words) {
                    (CallFailure::Timeout | CallFailure::HardTimeout, Some(w)) => Some(w.as_str()),
                    (CallFailure::TimeoutAfter(_), Some(w)) => Some(w.as_str()),
                    _ => failure.detail(),
                };
                let cause = cause_text(&failure.cause(), words);
                r.failure.get_or_insert((at, cause));
            }
            ClientEvent::StreamResumed { latency, .. } => {
                metrics.push(("resume_latency", *latency));
                self.count("resumable.resumes", 1);
            }
            ClientEvent::StreamOpened { .. } | ClientEvent::Initialized { .. } => {}
        }
        for (metric, value) in metrics {
            self.record(metric, value);
        }
    }
}

/// What one run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The run's seed.
    pub seed: u64,
    /// Every workload call.
    pub items: Vec<Item>,
    /// Latency histograms by metric name.
    pub histograms: BTreeMap<&'static str, Histogram<u64>>,
    /// Counters by name.
    pub counters: BTreeMap<String, u64>,
    /// Deliveries that differed from what was sent.
    pub integrity_violations: u64,
    /// What the host of the run's program peers found wrong (a program touched the real
    /// clock, threw, or the host failed): a run with any cannot be trusted.
    pub program_errors: Vec<String>,
    /// What the run's program peers logged (`env.log`: the SDK's warnings and errors), as
    /// `"peer: line"` with how often, in the order of the text.
    pub program_lines: BTreeMap<String, u64>,
}

/// Several runs of one scenario together. Runs are added with [`Report::push`], which merges
/// their latency histograms as they come, so memory does not grow with the number of runs by
/// more than each run's calls and counters.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// Each run, in order (their histograms are in `merged`).
    pub runs: Vec<RunReport>,
    /// Times were read off the wall clock (the live engine), not virtual time.
    pub wall_clock: bool,
    /// Every run's latency histograms, merged by metric.
    merged: BTreeMap<&'static str, Histogram<u64>>,
}

/// Percentiles of one metric over all runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyRow {
    /// Samples.
    pub count: u64,
    /// Smallest, median, p90, p99, p99.9, largest, in microseconds.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

impl Report {
    /// An empty report of scenario `scenario`.
    pub fn new(scenario: &str) -> Self {
        Report {
            scenario: scenario.to_owned(),
            ..Default::default()
        }
    }

    /// Adds a run, merging its histograms into the report's.
    pub fn push(&mut self, mut run: RunReport) {
        for (metric, h) in std::mem::take(&mut run.histograms) {
            match self.merged.get_mut(metric) {
                // Same bounds for every run's histogram of one metric: the add cannot fail.
                Some(m) => {
                    let _ = m.add(&h);
                }
                None => {
                    self.merged.insert(metric, h);
                }
            }
        }
        self.runs.push(run);
    }

    /// All calls of all runs.
    pub fn items(&self) -> impl Iterator<Item = &Item> {
        self.runs.iter().flat_map(|r| r.items.iter())
    }

    /// Completed calls / all calls (1 when there were none).
    pub fn completion_ratio(&self) -> f64 {
        let total = self.items().count();
        if total == 0 {
            return 1.0;
        }
        self.items()
            .filter(|i| i.outcome == Outcome::Completed)
            .count() as f64
            / total as f64
    }

    /// Integrity violations over all runs.
    pub fn integrity_violations(&self) -> u64 {
        self.runs.iter().map(|r| r.integrity_violations).sum()
    }

    /// What the host of program peers found wrong, by run seed, over all runs.
    pub fn program_errors(&self) -> Vec<(u64, &str)> {
        self.runs
            .iter()
            .flat_map(|r| r.program_errors.iter().map(|e| (r.seed, e.as_str())))
            .collect()
    }

    /// What the program peers logged, `"peer: line"` with how often, over all runs.
    pub fn program_lines(&self) -> BTreeMap<&str, u64> {
        let mut out: BTreeMap<&str, u64> = BTreeMap::new();
        for run in &self.runs {
            for (line, n) in &run.program_lines {
                // As in one run: the first distinct lines, the rest under one key.
                let distinct = out.len() - usize::from(out.contains_key(OTHER_PROGRAM_LINES));
                let key = if distinct < MAX_PROGRAM_LINES
                    || out.contains_key(line.as_str())
                    || line == OTHER_PROGRAM_LINES
                {
                    line.as_str()
                } else {
                    OTHER_PROGRAM_LINES
                };
                *out.entry(key).or_default() += n;
            }
        }
        out
    }

    /// Failures by cause family, over all runs.
    pub fn failures(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for item in self.items() {
            if let Some(family) = item.outcome.family() {
                *out.entry(family.to_owned()).or_default() += 1;
            }
        }
        out
    }

    /// The seeds of the runs in which each workload's calls failed, by workload index and
    /// cause family, each list sorted and without repeats.
    pub fn failing_seeds(&self) -> BTreeMap<(usize, String), Vec<u64>> {
        let mut out: BTreeMap<(usize, String), Vec<u64>> = BTreeMap::new();
        for run in &self.runs {
            for item in &run.items {
                if let Some(family) = item.outcome.family() {
                    out.entry((item.workload, family.to_owned()))
                        .or_default()
                        .push(run.seed);
                }
            }
        }
        for seeds in out.values_mut() {
            seeds.sort_unstable();
            seeds.dedup();
        }
        out
    }

    /// Failures in the implementations' own words (causes with text after the family), with
    /// their counts, over all runs.
    pub fn failure_texts(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for item in self.items() {
            if let Outcome::Failed(cause) = &item.outcome {
                if cause.contains(": ") {
                    *out.entry(cause.clone()).or_default() += 1;
                }
            }
        }
        out
    }

    /// Counters summed over all runs.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for run in &self.runs {
            for (k, v) in &run.counters {
                *out.entry(k.clone()).or_default() += v;
            }
        }
        out
    }

    /// A metric's histogram merged over all runs.
    pub fn histogram(&self, metric: &str) -> Option<Histogram<u64>> {
        self.merged.get(metric).cloned()
    }

    /// A metric's percentiles over all runs.
    pub fn latency(&self, metric: &str) -> Option<LatencyRow> {
        let h = self.histogram(metric)?;
        Some(LatencyRow {
            count: h.len(),
            min: h.min(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        })
    }
}
