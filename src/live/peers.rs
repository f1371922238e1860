//! A scenario's peers as async tasks over real WebSocket framing: the workload schedule of
//! each client and the server loop, logging what the des world observes about calls, so the
//! same [`Collector`] turns them into the same tables. The turmoil engine runs them on
//! simulated TCP; the live engine (`run --engine live`) on real sockets.

use super::driver::{Connector, LinkEvent, LinkWitness, PeerDriver};
use crate::peer::client::{ClientEvent, ContextVmClient};
use crate::peer::server::{ContextVmServer, ServerEvent};
use crate::peer::tools::stream_chunk_text;
use crate::scenario::Plan;
use crate::sim::world::{Call, Observation, Observer, PeerId};
use crate::stats::why::Names;
use crate::stats::{Collector, RunReport};
use nostr::prelude::PublicKey;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Time for every peer to connect and subscribe before the workload's clock starts. The des
/// world starts with peers connected; over TCP, a call published before the server's REQ
/// landed would be lost (ContextVM events are ephemeral). Reported times exclude it.
pub const SETTLE: Duration = Duration::from_secs(1);

/// Observations with their time, the observer's rank (0 for servers, 1 + index for clients)
/// and the observer's own sequence number. The peers of one run share one thread (turmoil's,
/// or a local task set); the log is shared across threads only so that a peer's driver, which
/// is `Send`, can hold a [`LinkWitness`] writing to it.
pub type Log = Arc<Mutex<Vec<(Duration, usize, u64, Observation)>>>;

/// Told of every call a client makes and of what it reports, as it happens: a live run adds
/// them to the traces of the relays it serves or records, so `show` can draw its calls.
pub type Tap = Arc<dyn Fn(&Observation) + Send + Sync>;

/// A peer's sequence numbers for its records, shared by its witness.
type Seq = Arc<AtomicU64>;

fn append(log: &Log, record: (Duration, usize, u64, Observation)) {
    log.lock()
        .expect("no peer panics holding the log")
        .push(record);
}

/// Events made before the run started that reached its peers, summed over them (see
/// [`super::driver::ConnectionStats::stale_events`]), and how far behind true time the run's
/// peers' clocks run at most (seconds), so their own events do not count.
pub type Stale = (std::sync::Arc<std::sync::atomic::AtomicU64>, u64);

/// Each client's public key and index, for servers to name the client of a chunk they write.
pub fn client_keys(plan: &Plan) -> Rc<BTreeMap<PublicKey, usize>> {
    Rc::new(
        plan.clients
            .iter()
            .enumerate()
            .map(|(i, (name, ..))| (plan.identity(name).public_key(), i))
            .collect(),
    )
}

/// The run's report from what the peers logged, naming `plan`'s relays and peers in its
/// explanations.
pub fn report(log: &Log, plan: &Plan) -> RunReport {
    let mut observations =
        std::mem::take(&mut *log.lock().expect("no peer panics holding the log"));
    // Peers ran concurrently: order by time, then servers before clients (a chunk is written
    // before it is read), then each peer's own order.
    observations.sort_by_key(|(at, rank, seq, _)| (*at, *rank, *seq));
    let names = Names {
        relays: plan.relays.iter().map(|(n, _)| n.clone()).collect(),
        peers: (plan.servers.iter().enumerate())
            .map(|(i, (n, ..))| (PeerId::Server(i), n.clone()))
            .chain(
                (plan.clients.iter().enumerate())
                    .map(|(i, (n, ..))| (PeerId::Client(i), n.clone())),
            )
            .collect(),
    };
    // The relays count their own answers (a served relay's counters join the report); what
    // the peers saw of them only explains calls.
    let mut collector = Collector::named(names).explaining_link_events_only();
    for (at, _, _, observation) in &observations {
        collector.observe(*at, observation);
    }
    collector.finish(plan.seed)
}

/// A peer's relays: each one's index among the scenario's relays, and its URL.
pub type PeerRelays = Vec<(usize, String)>;

/// Logs what a peer's driver saw of refusals and dropped connections as the des world would
/// observe them, in the peer's own order (`seq`, shared with the peer's other records).
fn link_witness(
    log: Log,
    (rank, peer): (usize, PeerId),
    relays: &PeerRelays,
    seq: Seq,
) -> LinkWitness {
    let index: BTreeMap<String, usize> = relays.iter().map(|(i, url)| (url.clone(), *i)).collect();
    Box::new(move |at, event| {
        // The driver speaks only of the relays it was given, which are all in `index`.
        let relay_of = |url: &String| index.get(url).copied();
        let observation = match event {
            LinkEvent::Published { relay, id, bytes } => Observation::Published {
                peer,
                relay: match relay_of(&relay) {
                    Some(relay) => relay,
                    None => return,
                },
                event: id,
                bytes,
                json: None,
            },
            LinkEvent::Answered {
                relay,
                id,
                accepted,
                message,
            } => Observation::Verdict {
                relay: match relay_of(&relay) {
                    Some(relay) => relay,
                    None => return,
                },
                peer,
                event: id,
                accepted,
                message,
            },
            LinkEvent::Dropped { relay } => Observation::Disconnected {
                relay: match relay_of(&relay) {
                    Some(relay) => relay,
                    None => return,
                },
                peer,
                reason: "connection-lost",
            },
        };
        let seq = seq.fetch_add(1, Ordering::Relaxed) + 1;
        append(&log, (at.saturating_sub(SETTLE), rank, seq, observation));
    })
}

/// A server: answers calls until the task is dropped, logging the stream chunks it writes
/// (for chunk latency) for the clients in `client_keys` (public key → client index).
pub async fn run_server<C: Connector>(
    (index, server): (usize, ContextVmServer),
    relays: PeerRelays,
    epoch_secs: u64,
    connector: C,
    client_keys: Rc<BTreeMap<PublicKey, usize>>,
    (log, stale): (Log, Stale),
) {
    let start = tokio::time::Instant::now();
    let seq = Seq::default();
    let witness = link_witness(
        log.clone(),
        (0, PeerId::Server(index)),
        &relays,
        seq.clone(),
    );
    let urls = relays.into_iter().map(|(_, url)| url).collect();
    let mut driver = PeerDriver::connect_with(server, urls, epoch_secs, connector)
        .counting_stale_into(stale.0, stale.1)
        .witnessed_by(witness);
    // Chunks written, for chunk latency: the des world observes the same event.
    let mut observe = |s: &mut ContextVmServer| {
        while let Some(event) = s.poll_event() {
            let ServerEvent::ChunkWritten {
                client,
                request,
                index,
                ..
            } = event
            else {
                continue;
            };
            // A call's id is its request's JSON-RPC id.
            let call = request.as_number();
            if let (Some(&client), Some(call)) = (client_keys.get(&client), call) {
                let seq = seq.fetch_add(1, Ordering::Relaxed) + 1;
                let at = start.elapsed().saturating_sub(SETTLE);
                let observation = Observation::ChunkWritten {
                    client,
                    call,
                    index,
                };
                append(&log, (at, 0, seq, observation));
            }
        }
        false
    };
    driver
        .run_until(&mut observe, Duration::from_secs(10 * 365 * 86_400))
        .await;
}

/// One client's workload: makes its calls on schedule, reads streams as chunks arrive, and logs
/// what the des world would observe, until its calls end or the scenario's time is up.
pub async fn run_client<C: Connector>(
    index: usize,
    client: ContextVmClient,
    relays: PeerRelays,
    mut calls: Vec<(Duration, Call)>,
    duration: Duration,
    (log, stale, tap): (Log, Stale, Option<Tap>),
    (epoch_secs, connector): (u64, C),
) {
    calls.sort_by_key(|(at, _)| *at);
    let mut calls = std::collections::VecDeque::from(calls);
    let seq = Seq::default();
    let rank = (index + 1, PeerId::Client(index));
    let witness = link_witness(log.clone(), rank, &relays, seq.clone());
    let urls = relays.into_iter().map(|(_, url)| url).collect();
    let mut driver = PeerDriver::connect_with(client, urls, epoch_secs, connector)
        .counting_stale_into(stale.0, stale.1)
        .witnessed_by(witness);
    let record = |at: Duration, observation: Observation| {
        if let Some(tap) = &tap {
            tap(&observation);
        }
        let seq = seq.fetch_add(1, Ordering::Relaxed) + 1;
        append(
            &log,
            (at.saturating_sub(SETTLE), index + 1, seq, observation),
        );
    };
    for (at, _) in &mut calls {
        *at += SETTLE;
    }
    let duration = duration + SETTLE;
    // Calls still waiting for their final response.
    let mut open: BTreeSet<u64> = BTreeSet::new();
    // Streams still being read (a final response may overtake its stream's last chunks), with
    // their chunk size.
    let mut streams: BTreeMap<u64, usize> = BTreeMap::new();
    loop {
        let now = driver.now();
        while calls.front().is_some_and(|(at, _)| *at <= now) {
            let (_, call) = calls.pop_front().expect("checked");
            let (id, chunk_bytes, called) = call.start_observed(index, driver.peer_mut(), now);
            open.insert(id);
            if let Some(bytes) = chunk_bytes {
                streams.insert(id, bytes);
            }
            record(now, called);
        }
        if (calls.is_empty() && open.is_empty() && streams.is_empty()) || now >= duration {
            break;
        }
        let until = calls
            .front()
            .map_or(duration, |(at, _)| (*at).min(duration));
        let mut events = Vec::new();
        let mut chunks = Vec::new();
        driver
            .run_until(
                |c| {
                    for (&call, &bytes) in &streams {
                        while let Some(chunk) = c.read_stream(call) {
                            chunks.push((call, bytes, chunk));
                        }
                    }
                    while let Some(event) = c.poll_event() {
                        events.push(event);
                    }
                    !events.is_empty() || !chunks.is_empty()
                },
                until.saturating_sub(now),
            )
            .await;
        let at = driver.now();
        for (call, bytes, chunk) in chunks {
            record(
                at,
                Observation::ChunkRead {
                    client: index,
                    call,
                    index: chunk.chunk_index,
                    bytes: chunk.data.len(),
                    intact: chunk.data == stream_chunk_text(chunk.chunk_index, bytes),
                },
            );
        }
        for event in events {
            match &event {
                ClientEvent::Response { call, response } => {
                    open.remove(call);
                    // An error response means no stream is coming (or it already failed).
                    if response.is_err() {
                        streams.remove(call);
                    }
                }
                ClientEvent::Failed { call, .. } => {
                    open.remove(call);
                    streams.remove(call);
                }
                ClientEvent::StreamEnded { call, .. } => {
                    streams.remove(call);
                }
                ClientEvent::StreamOpened { .. }
                | ClientEvent::StreamResumed { .. }
                | ClientEvent::Initialized { .. } => {}
            }
            record(
                at,
                Observation::Client {
                    client: index,
                    event,
                },
            );
        }
    }
    driver.shutdown().await;
}
