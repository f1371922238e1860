//! Replaying traces.
//!
//! - **schedule**: the scenario in the trace's header runs again with its seed, and every link
//!   decision (the delays, copies and losses of the n-th message on each relay/peer/way link)
//!   and every outage comes from the trace instead of the random streams. With unchanged code
//!   the replay is byte-identical to the trace; with changed endpoints it shows how the new code
//!   fares under the same disturbances.
//! - **inject**: the recorded deliveries (stored whole) are fed to fresh CEP-22 and CEP-41
//!   receivers at their recorded times; each transfer's and stream's outcome is reported. This
//!   is how someone else's traffic is replayed into our receivers.

use crate::scenario::TraceContext;
use crate::sim::planner::{LinkPlanner, Recorded, Undisturbed};
use crate::sim::world::Way;
use crate::stats::RunReport;
use crate::trace::{first_difference, EventsMode, Line, Names, OutcomeLine, ShrinkInfo, Trace};
pub use crate::trace::{plans_of, NamedPlans};

pub mod live_schedule;
pub mod shrink;
mod shrink_live;
pub mod traffic;
use crate::protocol::jsonrpc::Message;
use crate::protocol::open_stream::{OpenStreamRegistry, RegistryEvent, StreamFrame, StreamPolicy};
use crate::protocol::oversized::{OversizedReceiver, ReceiverConfig, ReceiverEvent, TransferFrame};
use crate::scenario::{Scenario, ScenarioError};
use nostr::prelude::Event;
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a replay cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The scenario in the trace's header is not valid.
    #[error("the trace's scenario: {0}")]
    Scenario(#[from] ScenarioError),
    /// A recording of a real relay carries no scenario, and none was given.
    #[error("this trace records a live relay without a scenario: give the scenario its peers ran with --scenario FILE [--seed N], or replay it with --mode inject")]
    LiveRecording,
    /// The recorded relay is not one of the scenario's.
    #[error("the recording is of relay {recorded:?}, and the scenario has several relays ({scenario}) but none of that name")]
    NoSuchRelay {
        /// The recorded relay's name.
        recorded: String,
        /// The scenario's relays.
        scenario: String,
    },
    /// The rerun published nothing the recording has, so no recorded delivery applied.
    #[error("the recording has none of the {replayed} publications of scenario {scenario:?} with seed {seed}: its peers are the recorded ones, but their calls are not")]
    NothingMatched {
        /// The scenario's name.
        scenario: String,
        /// The seed tried.
        seed: u64,
        /// The rerun's publications.
        replayed: usize,
    },
    /// No recorded connection belongs to one of the scenario's peers.
    #[error("no peer in the recording has the key of a peer of scenario {scenario:?} with seed {seed}: a schedule replay reruns relaysim's peers, so the recording must be of those peers, run with the same names and seed")]
    NoRecordedPeer {
        /// The scenario's name.
        scenario: String,
        /// The seed tried.
        seed: u64,
    },
    /// Inject mode needs events stored whole.
    #[error("this trace stores events by id only; record with --trace-events full to replay it with --mode inject")]
    NeedsFullEvents,
}

/// Where a replay's worlds get hosts for the recorded scenario's program peers.
pub type Hosts = Option<std::sync::Arc<dyn crate::sim::hosted::ProgramHosts>>;

/// The scenario a trace was recorded from, its program peers (if any) hosted by `hosts`.
pub fn scenario_of(trace: &Trace, hosts: &Hosts) -> Result<Scenario, ReplayError> {
    if matches!(&trace.lines[0], Line::Header { driver, .. } if driver == "live") {
        return Err(ReplayError::LiveRecording);
    }
    let (toml, ..) = trace.header();
    let mut scenario = Scenario::from_toml_str(toml, "<the trace's scenario>")?;
    // A scenario without `name` was named after its file when it was recorded.
    if let Line::Header { scenario: name, .. } = &trace.lines[0] {
        scenario.name = name.clone();
    }
    if let Some(hosts) = hosts {
        scenario.set_program_hosts(hosts.clone());
    }
    Ok(scenario)
}

/// What a schedule replay produced.
#[derive(Debug, Clone)]
pub struct ScheduleReplay {
    /// The outcomes the trace recorded.
    pub recorded: Vec<OutcomeLine>,
    /// The outcomes of the replay.
    pub replayed: Vec<OutcomeLine>,
    /// The replay's own trace.
    pub text: String,
    /// The first line where the replay's trace differs from the recorded one.
    pub first_difference: Option<(usize, String, String)>,
}

impl ScheduleReplay {
    /// Whether the replay reached the recorded outcomes.
    pub fn same_outcome(&self) -> bool {
        // The outcomes, not their explanations (`why`), which traces written before it lack.
        let key = |o: &OutcomeLine| {
            (
                o.workload.clone(),
                o.client.clone(),
                o.call,
                o.outcome.clone(),
            )
        };
        self.recorded
            .iter()
            .map(key)
            .eq(self.replayed.iter().map(key))
    }
}

/// Reruns `scenario` with `seed`, each decision the n-th of its (relay, peer, way) in `plans`
/// (by names) and the outages in `suppressed` suppressed; decisions past the plans are drawn,
/// or undisturbed when `undisturbed_beyond` is set (for shrinking). Returns the report and the
/// trace text, whose header carries `suppressed` and `shrunk`.
pub fn rerun(
    scenario: &Scenario,
    seed: u64,
    plans: &NamedPlans,
    suppressed: &[u64],
    undisturbed_beyond: bool,
    events: EventsMode,
    shrunk: Option<ShrinkInfo>,
) -> (RunReport, String) {
    let context = TraceContext {
        suppressed_outages: suppressed.to_vec(),
        shrunk,
    };
    scenario.run_planned(seed, events, context, |names| {
        let mut planners: Vec<Box<dyn LinkPlanner>> =
            vec![Box::new(recorded(names, plans, suppressed))];
        if undisturbed_beyond {
            planners.push(Box::new(Undisturbed));
        }
        planners
    })
}

/// The recorded decisions `plans` (by names) as a planner of the world `names` describes.
fn recorded(names: &Names, plans: &NamedPlans, suppressed: &[u64]) -> Recorded {
    let mut recorded = Recorded {
        suppress_outages: suppressed.iter().copied().collect(),
        ..Recorded::default()
    };
    for ((relay, peer, way), list) in plans {
        let relay = names.relays.iter().position(|r| r == relay);
        let peer = names
            .peers
            .iter()
            .find(|(_, n)| *n == peer)
            .map(|(p, _)| *p);
        let way = match way.as_str() {
            "up" => Some(Way::Up),
            "down" => Some(Way::Down),
            "intake" => Some(Way::Intake),
            "publish" => Some(Way::Publish),
            _ => None,
        };
        if let (Some(relay), Some(peer), Some(way)) = (relay, peer, way) {
            recorded.plans.insert((relay, peer, way), list.clone());
        }
    }
    recorded
}

/// Replays `trace` (whose text is `original`) in schedule mode.
pub fn schedule(
    trace: &Trace,
    original: &str,
    hosts: &Hosts,
) -> Result<ScheduleReplay, ReplayError> {
    let scenario = scenario_of(trace, hosts)?;
    let (_, seed, events, suppressed) = trace.header();
    let shrunk = match &trace.lines[0] {
        Line::Header { shrunk, .. } => shrunk.clone(),
        _ => None,
    };
    let (_, text) = rerun(
        &scenario,
        seed,
        &plans_of(trace),
        suppressed,
        false,
        events,
        shrunk,
    );
    let replayed = Trace::parse(&text, "<replay>")
        .expect("relaysim reads its own traces")
        .outcomes()
        .to_vec();
    Ok(ScheduleReplay {
        recorded: trace.outcomes().to_vec(),
        replayed,
        first_difference: first_difference(original, &text),
        text,
    })
}

/// One transfer or stream as the injected receivers saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    /// The receiving peer.
    pub receiver: String,
    /// The progress token.
    pub token: String,
    /// `transfer` (CEP-22) or `stream` (CEP-41).
    pub kind: &'static str,
    /// `completed`, `failed:<cause>` or `unfinished`.
    pub outcome: String,
    /// Stream chunks read.
    pub chunks: u64,
}

#[derive(Default)]
struct Receivers {
    transfers: Option<OversizedReceiver<String>>,
    streams: Option<OpenStreamRegistry<String>>,
}

fn token_text(t: &crate::protocol::jsonrpc::ProgressToken) -> String {
    match t {
        crate::protocol::jsonrpc::ProgressToken::String(s) => s.clone(),
        crate::protocol::jsonrpc::ProgressToken::Number(n) => n.to_string(),
    }
}

/// Feeds a trace's deliveries to fresh receivers (inject mode).
pub fn inject(trace: &Trace) -> Result<Vec<Injected>, ReplayError> {
    let frames = Frames::of(trace)?;
    Ok(inject_lines(&trace.lines, &frames))
}

/// The progress frames a trace's published events carry, parsed once (a shrink injects the
/// same events hundreds of times): event id → (sender's public key, progress parameters).
/// Events that carry no progress notification are left out: receivers ignore them.
pub(crate) struct Frames {
    by_id: BTreeMap<String, (String, crate::protocol::jsonrpc::ProgressParams)>,
}

impl Frames {
    /// Parses the events a trace stores whole.
    pub(crate) fn of(trace: &Trace) -> Result<Self, ReplayError> {
        let (_, _, events, _) = trace.header();
        if events != crate::trace::EventsMode::Full {
            return Err(ReplayError::NeedsFullEvents);
        }
        let mut by_id = BTreeMap::new();
        for line in &trace.lines {
            let Line::Published {
                id, event: Some(e), ..
            } = line
            else {
                continue;
            };
            if by_id.contains_key(id) {
                continue;
            }
            let Ok(event) = Event::from_json(e.to_string()) else {
                continue;
            };
            let Ok(message) = Message::parse(&event.content) else {
                continue;
            };
            if let Some(Ok(params)) = message.progress_params() {
                by_id.insert(id.clone(), (event.pubkey.to_hex(), params));
            }
        }
        Ok(Frames { by_id })
    }
}

/// Feeds the `delivered` lines among `lines` to fresh receivers, each at its `t`.
pub(crate) fn inject_lines(lines: &[Line], frames: &Frames) -> Vec<Injected> {
    let mut receivers: BTreeMap<String, Receivers> = BTreeMap::new();
    let mut results: BTreeMap<(String, String), Injected> = BTreeMap::new();
    // The event that started each (receiver, token): a start in another event is a second
    // writer, whatever its frame says (a second run of the same tool writes the same frames).
    let mut starts: BTreeMap<(String, String), (String, Duration)> = BTreeMap::new();
    let mut last = Duration::ZERO;
    for line in lines {
        let Line::Delivered { t, peer, id, .. } = line else {
            continue;
        };
        let now = Duration::from_micros(*t);
        run_timers(&mut receivers, &mut results, now);
        last = now;
        let Some((sender, params)) = frames.by_id.get(id) else {
            continue;
        };
        let r = receivers.entry(peer.clone()).or_default();
        if let Ok(frame) = TransferFrame::from_params(params) {
            // Only a sender's frames open an entry; accepts and aborts flow the other way.
            if !matches!(
                frame.body,
                crate::protocol::oversized::TransferBody::Start { .. }
                    | crate::protocol::oversized::TransferBody::Chunk { .. }
                    | crate::protocol::oversized::TransferBody::End
            ) {
                continue;
            }
            let is_chunk = matches!(
                frame.body,
                crate::protocol::oversized::TransferBody::Chunk { .. }
            );
            let is_start = matches!(
                frame.body,
                crate::protocol::oversized::TransferBody::Start { .. }
            );
            let entry = results
                .entry((peer.clone(), token_text(&frame.token)))
                .or_insert_with(|| Injected {
                    receiver: peer.clone(),
                    token: token_text(&frame.token),
                    kind: "transfer",
                    outcome: "unfinished".into(),
                    chunks: 0,
                });
            if is_chunk {
                entry.chunks += 1;
            }
            if is_start {
                second_writer(&mut starts, entry, id, now);
            }
            r.transfers
                .get_or_insert_with(|| OversizedReceiver::new(ReceiverConfig::default()))
                .handle_frame(sender, frame, now);
        } else if let Ok(frame) = StreamFrame::from_params(params) {
            use crate::protocol::open_stream::StreamBody;
            if !matches!(
                frame.body,
                StreamBody::Start { .. } | StreamBody::Chunk { .. } | StreamBody::Close { .. }
            ) {
                // Keepalive and control frames still reach an existing session.
                let token = token_text(&frame.token);
                if let Some(reg) = r.streams.as_mut() {
                    reg.handle_frame(sender, frame, now);
                }
                drain(peer, r, &mut results, Some((sender.as_str(), &token)));
                continue;
            }
            let token = token_text(&frame.token);
            let entry = results
                .entry((peer.clone(), token.clone()))
                .or_insert_with(|| Injected {
                    receiver: peer.clone(),
                    token: token.clone(),
                    kind: "stream",
                    outcome: "unfinished".into(),
                    chunks: 0,
                });
            if matches!(frame.body, StreamBody::Start { .. }) {
                second_writer(&mut starts, entry, id, now);
            }
            r.streams
                .get_or_insert_with(|| OpenStreamRegistry::new(StreamPolicy::default()))
                .handle_frame(sender, frame, now);
            drain(peer, r, &mut results, Some((sender.as_str(), &token)));
            continue;
        }
        drain(peer, r, &mut results, None);
    }
    // Let grace periods and timeouts run out.
    run_timers(
        &mut receivers,
        &mut results,
        last + Duration::from_secs(3600),
    );
    results.into_values().collect()
}

/// Cause family of a transfer or stream whose token a second writer started again.
pub const DUPLICATE_WRITER: &str = "duplicate-writer";

/// A `start` in event `id` at `now` for `entry`: the first opens it; one in another event while
/// the first is unfinished is a second writer under the same token (a server that ran the
/// request twice: two relays, a reconnect's replay of the stored request). The SDKs' readers
/// then fail the stream ("Non-increasing progress", "Duplicate start frame"); relaysim's own
/// would read the second writer's frames as duplicates, so the cause is named here.
fn second_writer(
    starts: &mut BTreeMap<(String, String), (String, Duration)>,
    entry: &mut Injected,
    id: &str,
    now: Duration,
) {
    let key = (entry.receiver.clone(), entry.token.clone());
    match starts.get(&key) {
        None => {
            starts.insert(key, (id.to_owned(), now));
        }
        Some((first, _)) if first == id => {} // the same event again: a relay's duplicate
        Some((first, at)) => {
            if entry.outcome == "unfinished" {
                let short = |id: &str| id.chars().take(8).collect::<String>();
                entry.outcome = format!(
                    "failed:{DUPLICATE_WRITER}: a second start (event {}) {} after the first \
                     (event {}) under token {}: two writers share one token",
                    short(id),
                    crate::stats::output::human_us(
                        u64::try_from(now.saturating_sub(*at).as_micros()).unwrap_or(u64::MAX)
                    ),
                    short(first),
                    entry.token
                );
            }
        }
    }
}

fn run_timers(
    receivers: &mut BTreeMap<String, Receivers>,
    results: &mut BTreeMap<(String, String), Injected>,
    until: Duration,
) {
    for (peer, r) in receivers.iter_mut() {
        loop {
            let next = [
                r.transfers.as_ref().and_then(|x| x.poll_timeout()),
                r.streams.as_ref().and_then(|x| x.poll_timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= until => {
                    if let Some(x) = r.transfers.as_mut() {
                        x.handle_timeout(t);
                    }
                    if let Some(x) = r.streams.as_mut() {
                        x.handle_timeout(t);
                    }
                    drain(peer, r, results, None);
                }
                _ => break,
            }
        }
    }
}

/// Takes the receivers' events into `results`; `frame` names the sender and token of the
/// frame just handled, whose stream is read (only that one: reading every open stream at each
/// delivery made injection quadratic in the number of streams).
fn drain(
    peer: &str,
    r: &mut Receivers,
    results: &mut BTreeMap<(String, String), Injected>,
    frame: Option<(&str, &str)>,
) {
    let mut set = |token: String, outcome: String| {
        if let Some(i) = results.get_mut(&(peer.to_owned(), token)) {
            if i.outcome == "unfinished" {
                i.outcome = outcome;
            }
        }
    };
    if let Some(x) = r.transfers.as_mut() {
        while x.poll_transmit().is_some() {}
        while let Some(e) = x.poll_event() {
            match e {
                ReceiverEvent::Completed { token, .. } => {
                    set(token_text(&token), "completed".into())
                }
                ReceiverEvent::Failed { token, failure, .. } => {
                    set(token_text(&token), format!("failed:{}", failure.cause()))
                }
                ReceiverEvent::Started { .. } => {}
            }
        }
    }
    if let Some(x) = r.streams.as_mut() {
        while x.poll_transmit().is_some() {}
        while let Some(e) = x.poll_event() {
            match e {
                RegistryEvent::Completed { token, .. } => {
                    set(token_text(&token), "completed".into())
                }
                RegistryEvent::Failed { token, failure, .. } => {
                    set(token_text(&token), format!("failed:{}", failure.cause()))
                }
                RegistryEvent::Opened { .. } => {}
            }
        }
        if let Some((sender, token)) = frame {
            // Tokens are strings or integers, and `token_text` wrote both as text: digits may be
            // either (the TypeScript SDK sends its numeric ids as strings), so both are read.
            use crate::protocol::jsonrpc::ProgressToken;
            let mut keys = vec![ProgressToken::String(token.to_owned())];
            if let Ok(n) = token.parse::<i64>() {
                if n.to_string() == token {
                    keys.push(ProgressToken::Number(n));
                }
            }
            let sender = sender.to_owned();
            for key in &keys {
                while x.read(&sender, key).is_some() {
                    if let Some(i) = results.get_mut(&(peer.to_owned(), token.to_owned())) {
                        i.chunks += 1;
                    }
                }
            }
        }
    }
}

/// What the trace recorded for the transfers and streams a client received, in the terms of
/// [`Injected::outcome`], keyed by (client, token).
pub fn recorded_receiver_outcomes(trace: &Trace) -> BTreeMap<(String, String), String> {
    let mut tools: BTreeMap<(String, u64), String> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for line in &trace.lines {
        match line {
            Line::Called {
                client, call, tool, ..
            } => {
                tools.insert((client.clone(), *call), tool.clone());
            }
            Line::Client {
                client,
                call,
                event,
                ..
            } => {
                let key = (client.clone(), format!("p{call}"));
                let tool = tools.get(&(client.clone(), *call)).map(String::as_str);
                let outcome = match (tool, event.as_str()) {
                    (Some("stream"), "stream-ended-ok") => Some("completed".to_owned()),
                    (Some("stream"), e) => e
                        .strip_prefix("stream-ended:")
                        .map(|c| format!("failed:{c}")),
                    (Some("large_result"), "response-ok") => Some("completed".to_owned()),
                    (Some("large_result"), e) => e
                        .strip_prefix("failed:download-")
                        .map(|c| format!("failed:{c}")),
                    _ => None,
                };
                if let Some(o) = outcome {
                    out.entry(key).or_insert(o);
                }
            }
            _ => {}
        }
    }
    out
}
