//! Live mode: the relay model behind a real NIP-01 WebSocket server on real sockets, so any
//! client (the TypeScript ContextVM SDK, the Rust SDK, a CLI) can be tested against relays that
//! behave like strfry, damus, nostr-rs-relay or khatru, impairments and outages included.
//!
//! One task, the [`world`], owns the sans-IO [`Relay`] of every relay in the deployment (the
//! relays of a scenario, each on its own port, or one `--profile` relay) and the impaired links
//! of every connection; connection tasks ([`http`]) hand it text frames and write what it
//! sends. A plain HTTP GET with `Accept: application/nostr+json` gets the NIP-11 document,
//! which reflects the profile's limits; `GET /stats` gets the counters so far. Live mode reads
//! the real clock: it is the one driver that is not deterministic, by nature.

pub mod driver;
mod http;
mod outbox;
pub mod outcomes;
pub mod peers;
pub mod record;
pub mod report;
mod slots;
pub(crate) mod trace_writer;

mod world;

pub use report::{LiveRelayCounters, LiveReport};

use crate::relay::RelayProfile;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use world::{Inbound, RelaySlot, World, WorldConfig};

/// One relay of a live deployment.
#[derive(Debug, Clone)]
pub struct LiveRelaySpec {
    /// Its name (the scenario's relay name; `upstream` for a lone `--profile` relay).
    pub name: String,
    /// Where it listens; port 0 picks a free port.
    pub listen: SocketAddr,
    /// How it behaves, impairments and outages included.
    pub profile: RelayProfile,
}

/// How a live deployment runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The relays, each on its own port.
    pub relays: Vec<LiveRelaySpec>,
    /// Seed of the impairments' random draws.
    pub seed: u64,
    /// Connections served at once per relay; more are refused (2,048: real relays have no
    /// such cap beyond file descriptors, so it is high; memory is bounded by the queue and
    /// subscription budgets, not by it).
    pub max_connections: usize,
    /// Bytes queued for one connection before it is cut off as a slow reader (32 MiB: strfry
    /// cuts off readers with more pending, `docs/relays.md`).
    pub max_queued_bytes: usize,
    /// Bytes queued for all connections of the deployment together before connections over
    /// their fair share (this over the connection slots of every relay) are cut off as slow
    /// readers (128 MiB): a bound on the process's memory that no relay documents; see
    /// `outbox`.
    pub max_total_queued_bytes: usize,
    /// Bytes of REQ text the live subscriptions of the deployment may hold together before
    /// connections over their fair share have new REQs refused (64 MiB; relaysim's bound,
    /// see `world::subscriptions`).
    pub max_subscription_bytes: usize,
    /// Write every EVENT, OK and NOTICE that crosses the relays to this trace (driver `live`).
    pub trace: Option<std::path::PathBuf>,
    /// Unix seconds the relays' clock reads at start. `None` reads the wall clock, as a real
    /// relay does; simulated networks (turmoil) fix it so runs repeat exactly.
    pub epoch_secs: Option<u64>,
    /// The scenario whose peers these relays carry, written into the trace's header so the
    /// trace can be schedule-replayed.
    pub origin: Option<crate::trace::ScenarioOrigin>,
    /// Peer names by client address: outages aimed at a peer, and the trace, use them.
    pub labels: BTreeMap<IpAddr, String>,
    /// Outage times (scheduled ones, and the first random ones) count from this long after
    /// the start: the turmoil engine lets its peers connect first, as the des world starts
    /// with them connected.
    pub outages_from: std::time::Duration,
}

impl ServeConfig {
    /// One relay, `upstream`, with `profile` on `127.0.0.1:7777`.
    pub fn new(profile: RelayProfile) -> Self {
        ServeConfig {
            relays: vec![LiveRelaySpec {
                name: "upstream".into(),
                listen: SocketAddr::from(([127, 0, 0, 1], 7777)),
                profile,
            }],
            seed: 1,
            max_connections: 2048,
            max_queued_bytes: 32 << 20,
            max_total_queued_bytes: 128 << 20,
            max_subscription_bytes: 64 << 20,
            trace: None,
            epoch_secs: None,
            origin: None,
            labels: BTreeMap::new(),
            outages_from: std::time::Duration::ZERO,
        }
    }

    /// Every relay of `relays` (name and profile, in order), the first on `base`, the next
    /// on the following ports (all on free ports when `base`'s port is 0).
    pub fn relays(relays: &[(String, RelayProfile)], base: SocketAddr) -> Self {
        let mut config = ServeConfig::new(RelayProfile::ideal());
        config.relays = relays
            .iter()
            .enumerate()
            .map(|(i, (name, profile))| {
                let port = match base.port() {
                    0 => 0,
                    p => p.saturating_add(i as u16),
                };
                LiveRelaySpec {
                    name: name.clone(),
                    listen: SocketAddr::new(base.ip(), port),
                    profile: profile.clone(),
                }
            })
            .collect();
        config
    }

    /// This configuration with the first relay listening on `listen`.
    pub fn listening_on(mut self, listen: SocketAddr) -> Self {
        if let Some(first) = self.relays.first_mut() {
            first.listen = listen;
        }
        self
    }

    /// This configuration with the first relay named `name`.
    pub fn named(mut self, name: &str) -> Self {
        if let Some(first) = self.relays.first_mut() {
            first.name = name.to_owned();
        }
        self
    }
}

/// Who may not connect right now: relays down for a restart, peers whose connection dropped.
/// Checked before the WebSocket upgrade (503), updated by the world.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// Relays restarting, until when.
    down_until: BTreeMap<usize, Instant>,
    /// Peers (by label or address; `*` for everyone) refused by a relay, until when.
    blocked: BTreeMap<(usize, String), Instant>,
}

impl Gate {
    /// Why `identity` may not connect to `relay` now, if it may not.
    fn refuses(&self, relay: usize, identity: &str, now: Instant) -> Option<&'static str> {
        if self.down_until.get(&relay).is_some_and(|t| *t > now) {
            return Some("the relay is restarting");
        }
        let blocked = |who: &str| {
            self.blocked
                .get(&(relay, who.to_owned()))
                .is_some_and(|t| *t > now)
        };
        (blocked(identity) || blocked("*")).then_some("this peer's connection is down")
    }
}
/// Where a relay accepts connections: tokio's real TCP, or turmoil's simulated TCP.
pub trait Listener: Send + 'static {
    /// The accepted stream.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection and its peer address.
    fn accept(
        &self,
    ) -> impl std::future::Future<Output = std::io::Result<(Self::Stream, SocketAddr)>> + Send;
}

impl Listener for TcpListener {
    type Stream = TcpStream;
    fn accept(
        &self,
    ) -> impl std::future::Future<Output = std::io::Result<(TcpStream, SocketAddr)>> + Send {
        TcpListener::accept(self)
    }
}

#[cfg(feature = "turmoil")]
impl Listener for turmoil::net::TcpListener {
    type Stream = turmoil::net::TcpStream;
    fn accept(
        &self,
    ) -> impl std::future::Future<Output = std::io::Result<(Self::Stream, SocketAddr)>> + Send {
        turmoil::net::TcpListener::accept(self)
    }
}

/// A running live deployment.
pub struct LiveRelay {
    /// The address the first relay listens on.
    pub local_addr: SocketAddr,
    /// Every relay's name and address, in order.
    pub addrs: Vec<(String, SocketAddr)>,
    /// The wall-clock time (Unix microseconds) at which its trace's clock reads 0.
    pub started_unix_us: u64,
    inbound: mpsc::Sender<Inbound>,
    stop_accepting: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// What feeds its trace, if it writes one.
    feed: Option<trace_writer::TraceFeed>,
}

impl LiveRelay {
    /// What feeds its trace, for the peers of a live run to add their calls to it.
    pub(crate) fn trace_feed(&self) -> Option<trace_writer::TraceFeed> {
        self.feed.clone()
    }

    /// The `ws://` URL of every relay, in order.
    pub fn urls(&self) -> Vec<String> {
        self.addrs
            .iter()
            .map(|(_, a)| format!("ws://{a}"))
            .collect()
    }

    /// The counters so far; `None` once the deployment has stopped.
    pub async fn stats(&self) -> Option<LiveReport> {
        let (reply, answer) = oneshot::channel();
        self.inbound.send(Inbound::Stats { reply }).await.ok()?;
        answer.await.ok()
    }

    /// Stops accepting, closes connections, finishes the trace and returns the counters.
    pub async fn shutdown(self) -> LiveReport {
        let _ = self.stop_accepting.send(true);
        let (reply, answer) = oneshot::channel();
        let _ = self.inbound.send(Inbound::Shutdown { reply }).await;
        let report = answer.await.unwrap_or_default();
        let _ = self.task.await;
        report
    }
}

/// The NIP-11 document of a profile.
pub fn nip11(profile: &RelayProfile) -> serde_json::Value {
    let mut limitation = serde_json::Map::new();
    if let Some(m) = profile.max_message_bytes {
        limitation.insert("max_message_length".into(), m.into());
    }
    if let Some(m) = profile.max_event_bytes {
        limitation.insert("max_content_length".into(), m.into());
    }
    // usize::MAX stands for "no limit", which NIP-11 says by leaving the field out.
    if profile.max_subscriptions != usize::MAX {
        limitation.insert("max_subscriptions".into(), profile.max_subscriptions.into());
    }
    if profile.max_subscription_id != usize::MAX {
        limitation.insert(
            "max_subid_length".into(),
            profile.max_subscription_id.into(),
        );
    }
    if let Some(m) = profile.max_limit {
        limitation.insert("max_limit".into(), m.into());
    }
    if let Some(m) = profile.max_filters {
        limitation.insert("max_filters".into(), m.into());
    }
    if let Some(w) = profile.reject_newer_than {
        limitation.insert("created_at_upper_limit".into(), w.as_secs().into());
    }
    limitation.insert("auth_required".into(), false.into());
    serde_json::json!({
        "name": format!("relaysim ({})", profile.name),
        "description": format!("A simulated relay behaving like {}. {}", profile.name, profile.sources),
        "software": "relaysim",
        "version": env!("CARGO_PKG_VERSION"),
        "supported_nips": [1, 11],
        "limitation": limitation,
    })
}

/// Connections the kernel may hold waiting for `accept` (capped by `net.core.somaxconn`).
/// tokio's `TcpListener::bind` asks for 1,024: under a reconnect storm a burst of refused
/// clients fills that while the accept task waits for a core, and every SYN past it is dropped,
/// which costs a well-behaved client a whole second (the first SYN retransmission).
const LISTEN_BACKLOG: u32 = 4096;

/// A TCP listener on `addr` with [`LISTEN_BACKLOG`].
pub(crate) fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does: a restarted relay may take its port back at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Starts a live deployment on real sockets (each relay's `listen`); returns once every relay
/// listens.
pub async fn serve(config: ServeConfig) -> std::io::Result<LiveRelay> {
    let mut listeners = Vec::new();
    for relay in &config.relays {
        let listener = listen(relay.listen).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("relay {} on {}: {e}", relay.name, relay.listen),
            )
        })?;
        let addr = listener.local_addr()?;
        listeners.push((listener, addr));
    }
    serve_on(listeners, config)
}

/// Starts a deployment on already bound listeners, one per relay of `config` in order
/// (each reported as its address): the same server on tokio's TCP or inside a turmoil
/// simulation. Must be called inside a tokio runtime.
pub fn serve_on<L: Listener>(
    listeners: Vec<(L, SocketAddr)>,
    config: ServeConfig,
) -> std::io::Result<LiveRelay> {
    if listeners.len() != config.relays.len() || listeners.is_empty() {
        return Err(std::io::Error::other(format!(
            "{} listeners for {} relays",
            listeners.len(),
            config.relays.len()
        )));
    }
    let (inbound_tx, inbound_rx) = mpsc::channel::<Inbound>(65_536);
    // The trace's clock starts here; its wall-clock time lets a command's own timestamps be
    // placed on it (`LiveRelay::started_unix_us`).
    let started = Instant::now();
    let started_unix_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let trace = match &config.trace {
        Some(path) => {
            let what = match config.relays.as_slice() {
                [one] => format!("relaysim serve ({})", one.profile.name),
                many => format!("relaysim serve ({} relays)", many.len()),
            };
            Some(trace_writer::start_trace(
                path,
                what,
                config.origin.as_ref(),
                started,
            )?)
        }
        None => None,
    };
    let (feed, writer) = match trace {
        Some((f, w)) => (Some(f), Some(w)),
        None => (None, None),
    };
    let trace_feed = feed.clone();
    let gate = Arc::new(Mutex::new(Gate::default()));
    let streams = crate::rng::SeededStreams::new(config.seed);
    let slots = config
        .relays
        .iter()
        .map(|r| RelaySlot::new(r.name.clone(), r.profile.clone(), &streams))
        .collect();
    let world = World::new(
        slots,
        WorldConfig {
            seed: config.seed,
            epoch_secs: config.epoch_secs,
            labels: config.labels.clone(),
            outages_from: config.outages_from,
            subscription_budget: (
                config.max_subscription_bytes,
                config.max_connections * config.relays.len(),
            ),
        },
        gate.clone(),
        feed,
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let next_conn = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let mut addrs = Vec::new();
    let mut accepting = tokio::task::JoinSet::new();
    let queues = outbox::QueueBudget::new(
        config.max_total_queued_bytes,
        config.max_connections * config.relays.len(),
        config.max_queued_bytes,
    );
    let inbound_credit = Arc::new(tokio::sync::Semaphore::new(http::SERVER_INBOUND_CREDIT_KIB));
    for (index, (listener, addr)) in listeners.into_iter().enumerate() {
        addrs.push((config.relays[index].name.clone(), addr));
        accepting.spawn(http::accept_loop(
            listener,
            http::RelayDoor {
                index,
                started: tokio::time::Instant::now(),
                profile: config.relays[index].profile.clone(),
                max_connections: config.max_connections,
                queues: queues.clone(),
                inbound_credit: inbound_credit.clone(),
                labels: config.labels.clone(),
                gate: gate.clone(),
                next_conn: next_conn.clone(),
                keep_text: config.trace.is_some(),
            },
            inbound_tx.clone(),
            stop_rx.clone(),
        ));
    }
    let task = tokio::spawn(async move {
        world::run(world, inbound_rx, writer).await;
        while accepting.join_next().await.is_some() {}
    });
    Ok(LiveRelay {
        local_addr: addrs[0].1,
        started_unix_us,
        addrs,
        inbound: inbound_tx,
        stop_accepting: stop_tx,
        task,
        feed: trace_feed,
    })
}

/// Where relay `relay`'s trace goes: `trace` itself when there is one relay, else `trace` with
/// the relay's name before the extension (`run.jsonl` → `run.strfry.jsonl`).
pub fn relay_trace_path(trace: &Path, relay: &str, relays: usize) -> PathBuf {
    if relays == 1 {
        return trace.to_path_buf();
    }
    let stem = trace
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match trace.extension() {
        Some(ext) => format!("{stem}.{relay}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{relay}"),
    };
    trace.with_file_name(name)
}
