//! Schedule replays of live recordings: a scenario's peers run again in the des world, and the
//! recorded relay's deliveries (each copy's latency, or its loss) are imposed on the same
//! publications, matched by author and content (see [`crate::sim::fates`]).
//!
//! The scenario comes from the trace's header (traces the turmoil engine writes carry it) or
//! from the user, for recordings of relaysim's peers made with `relaysim record`. Its peers
//! must be the recorded ones: same names and seed, hence the same keys.

use super::{inject, ReplayError};
use crate::nip01::Identity;
use crate::scenario::Scenario;
use crate::sim::fates::{PublicationKey, RecordedFates};
use crate::trace::{Line, OutcomeLine, Trace};
use nostr::prelude::PublicKey;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

/// What a recording holds, read for a schedule replay.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// The recorded relay's name.
    pub relay: String,
    /// What it did with each publication.
    pub fates: RecordedFates,
    /// The key behind each recorded connection (`client-N`), from what it published or, for
    /// a connection that only received, the `p` tag of what it received.
    pub connections: BTreeMap<String, PublicKey>,
}

/// Reads the publications and deliveries of a live trace.
pub fn recording_of(trace: &Trace) -> Recording {
    let mut recording = Recording::default();
    let mut keys: BTreeMap<&str, PublicationKey> = BTreeMap::new();
    let mut occurrences: BTreeMap<(PublicKey, Option<PublicKey>, [u8; 32]), u32> = BTreeMap::new();
    let mut tagged: BTreeMap<&str, PublicKey> = BTreeMap::new();
    for line in &trace.lines {
        let Line::Published {
            peer,
            relay,
            id,
            event: Some(event),
            ..
        } = line
        else {
            continue;
        };
        if recording.relay.is_empty() {
            recording.relay = relay.clone();
        }
        let Some(author) = event["pubkey"]
            .as_str()
            .and_then(|k| PublicKey::from_str(k).ok())
        else {
            continue;
        };
        if let Some(p) = p_tag(event) {
            tagged.insert(id, p);
        }
        if keys.contains_key(id.as_str()) {
            continue;
        }
        if peer != "external" {
            recording.connections.entry(peer.clone()).or_insert(author);
        }
        let content = event["content"].as_str().unwrap_or("");
        let first = PublicationKey::new(author, p_tag(event), content, 0);
        let n = occurrences
            .entry((first.author, first.recipient, first.content_sha256))
            .or_insert(0);
        let key = PublicationKey {
            occurrence: *n,
            ..first
        };
        *n += 1;
        keys.insert(id, key);
        recording.fates.by_publication.entry(key).or_default();
    }
    for line in &trace.lines {
        let Line::Delivered {
            peer,
            id,
            latency_us,
            ..
        } = line
        else {
            continue;
        };
        let recipient = match recording.connections.get(peer) {
            Some(k) => *k,
            None => match tagged.get(id.as_str()) {
                Some(k) => {
                    recording.connections.insert(peer.clone(), *k);
                    *k
                }
                None => continue,
            },
        };
        if let Some(key) = keys.get(id.as_str()) {
            recording
                .fates
                .by_publication
                .entry(*key)
                .or_default()
                .entry(recipient)
                .or_default()
                .push(Duration::from_micros(*latency_us));
        }
    }
    recording
}

/// The first `p` tag's key: a ContextVM event's recipient.
fn p_tag(event: &serde_json::Value) -> Option<PublicKey> {
    event["tags"]
        .as_array()?
        .iter()
        .find(|t| t[0] == "p")
        .and_then(|t| t[1].as_str())
        .and_then(|k| PublicKey::from_str(k).ok())
}

/// What a schedule replay of a live recording produced.
#[derive(Debug, Clone)]
pub struct LiveScheduleReplay {
    /// The scenario that ran.
    pub scenario: String,
    /// Its seed.
    pub seed: u64,
    /// The recorded relay, and the scenario relay that played it.
    pub relay: String,
    /// What the recording's deliveries did to each transfer and stream a client received
    /// (inject mode), keyed by (client name, progress token): `completed`, `failed:<cause>`
    /// or `unfinished`.
    pub recorded: BTreeMap<(String, String), String>,
    /// The same for the replay's deliveries: the rerun endpoints react to what reached them
    /// (aborts, accepts, answers), so this shows whether they published what was recorded and
    /// the recorded relay's fates played out the same.
    pub replayed: BTreeMap<(String, String), String>,
    /// How each of the replay's calls ended, as the rerun endpoints saw it.
    pub calls: Vec<OutcomeLine>,
    /// How the recording's calls ended, when the trace carries them (relaysim's own peers
    /// in `run --engine live`; a served command's reported outcomes).
    pub recorded_calls: Vec<OutcomeLine>,
    /// Publications in the recording.
    pub recorded_publications: usize,
    /// Publications in the replay, and how many of them the recording has (whose deliveries
    /// therefore followed the recording rather than the scenario's own link).
    pub replayed_publications: usize,
    /// See `replayed_publications`.
    pub matched_publications: usize,
    /// The replay's des trace.
    pub text: String,
}

impl LiveScheduleReplay {
    /// Whether there is anything to compare: a transfer or stream that reached a client in the
    /// recording. (Calls themselves are not in a relay's recording.)
    pub fn compared(&self) -> bool {
        !self.recorded.is_empty() || !self.call_pairs().is_empty()
    }

    /// Whether every transfer and stream the recording shows ended the same in the replay,
    /// and every recorded call of a rerun client ended the same way (by cause family).
    pub fn same_outcome(&self) -> bool {
        let family = |o: &str| crate::stats::family(o).to_owned();
        self.recorded
            .iter()
            .all(|(k, v)| self.replayed.get(k) == Some(v))
            && self.call_pairs().iter().all(|(recorded, replayed)| {
                replayed.is_some_and(|r| family(&r.outcome) == family(&recorded.outcome))
            })
    }

    /// Each recorded call of a client the rerun has, with the rerun's same call (`None`:
    /// the rerun did not make it). A served program's calls name its own peers, not the
    /// scenario's, and are left out.
    pub fn call_pairs(&self) -> Vec<(&OutcomeLine, Option<&OutcomeLine>)> {
        self.recorded_calls
            .iter()
            .filter(|c| self.calls.iter().any(|r| r.client == c.client))
            .map(|c| {
                let rerun = self
                    .calls
                    .iter()
                    .find(|r| r.client == c.client && r.call == c.call);
                (c, rerun)
            })
            .collect()
    }
}

/// Replays live `trace` in schedule mode with `scenario` (and `seed`), or, when `scenario` is
/// `None`, the one in the trace's header.
pub fn schedule_live(
    trace: &Trace,
    scenario: Option<(Scenario, u64)>,
) -> Result<LiveScheduleReplay, ReplayError> {
    let (scenario, seed) = match scenario {
        Some(given) => given,
        None => {
            let (toml, seed, ..) = trace.header();
            if toml.is_empty() {
                return Err(ReplayError::LiveRecording);
            }
            let mut scenario = Scenario::from_toml_str(toml, "<the trace's scenario>")?;
            if let Line::Header { scenario: name, .. } = &trace.lines[0] {
                scenario.name = name.clone();
            }
            (scenario, seed)
        }
    };
    let recording = recording_of(trace);
    let plan = scenario.plan(seed);
    let relay_names: Vec<&str> = plan.relays.iter().map(|(n, _)| n.as_str()).collect();
    let relay = match relay_names.iter().position(|n| *n == recording.relay) {
        Some(i) => i,
        None if relay_names.len() == 1 => 0,
        None => {
            return Err(ReplayError::NoSuchRelay {
                recorded: recording.relay.clone(),
                scenario: relay_names.join(", "),
            })
        }
    };
    // Recorded connections by the scenario peer behind them.
    let peers: BTreeMap<PublicKey, String> = plan
        .clients
        .iter()
        .map(|(n, ..)| n)
        .chain(plan.servers.iter().map(|(n, ..)| n))
        .map(|n| (Identity::derive(seed, n).public_key(), n.clone()))
        .collect();
    let connection_names: BTreeMap<&str, &str> = recording
        .connections
        .iter()
        .filter_map(|(c, k)| peers.get(k).map(|n| (c.as_str(), n.as_str())))
        .collect();
    if connection_names.is_empty() {
        return Err(ReplayError::NoRecordedPeer {
            scenario: scenario.name.clone(),
            seed,
        });
    }
    let clients: Vec<&str> = plan.clients.iter().map(|(n, ..)| n.as_str()).collect();
    // What fresh receivers make of a trace's deliveries to clients, by scenario name.
    let received = |trace: &Trace, name_of: &dyn Fn(&str) -> Option<String>| {
        inject(trace).map(|injected| {
            injected
                .into_iter()
                .filter_map(|i| {
                    let name = name_of(&i.receiver)?;
                    clients
                        .contains(&name.as_str())
                        .then_some(((name, i.token), i.outcome))
                })
                .collect::<BTreeMap<_, _>>()
        })
    };
    let recorded = received(trace, &|c| connection_names.get(c).map(|n| (*n).to_owned()))?;
    let recorded_publications = recording.fates.by_publication.len();
    let fates = recording.fates.clone();
    let (_, text) = scenario.run_planned(
        seed,
        crate::trace::EventsMode::Full,
        crate::scenario::TraceContext::default(),
        |_| vec![Box::new(crate::sim::planner::Fates::new(relay, fates))],
    );
    let replay = Trace::parse(&text, "<replay>").expect("relaysim reads its own traces");
    let replayed_recording = recording_of(&replay);
    let replayed_publications = replayed_recording.fates.by_publication.len();
    let matched_publications = replayed_recording
        .fates
        .by_publication
        .keys()
        .filter(|k| recording.fates.by_publication.contains_key(k))
        .count();
    if matched_publications == 0 {
        return Err(ReplayError::NothingMatched {
            scenario: scenario.name.clone(),
            seed,
            replayed: replayed_publications,
        });
    }
    Ok(LiveScheduleReplay {
        scenario: scenario.name.clone(),
        seed,
        relay: relay_names[relay].to_owned(),
        recorded,
        replayed: received(&replay, &|n| Some(n.to_owned()))?,
        calls: replay.outcomes().to_vec(),
        recorded_calls: trace.outcomes().to_vec(),
        recorded_publications,
        replayed_publications,
        matched_publications,
        text,
    })
}
