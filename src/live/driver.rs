//! The async driver for the sans-IO peers over real WebSocket connections: the same
//! [`ContextVmClient`](crate::peer::client::ContextVmClient) and
//! [`ContextVmServer`](crate::peer::server::ContextVmServer) the des driver runs, talking to any
//! NIP-01 relay (`relaysim serve`, `relaysim record`, strfry, a third-party relay).
//!
//! One connection task per relay connects, reports the connection up to the driver (the peer
//! subscribes again there), forwards frames both ways and, after a drop, reconnects with a
//! doubling back-off. Messages the peer sends while a relay is down are dropped and counted:
//! a real socket does not queue them either. The driver owns the peer and runs its timers from
//! its wake-ups, on tokio's clock, so it runs unchanged under a paused or simulated clock.
//!
//! ```no_run
//! # async fn demo() {
//! use relaysim::live::driver::PeerDriver;
//! use relaysim::peer::client::{ClientConfig, ContextVmClient};
//! use relaysim::nip01::Identity;
//! use std::time::Duration;
//!
//! let url = "ws://127.0.0.1:7777".to_string();
//! let server = Identity::derive(1, "server").public_key();
//! let client = ContextVmClient::new(
//!     Identity::derive(1, "client"),
//!     vec![url.clone()],
//!     ClientConfig::new(server),
//! );
//! let mut driver = PeerDriver::connect(client, vec![url]);
//! // Messages sent before the connection is up are dropped, as on a real socket.
//! while driver.stats().connects == 0 {
//!     driver.run_until(|_| false, Duration::from_millis(50)).await;
//! }
//! let now = driver.now();
//! driver.peer_mut().initialize(now);
//! driver
//!     .run_until(|c| c.pending_calls() == 0, Duration::from_secs(10))
//!     .await;
//! # }
//! ```

use crate::nip01::wire::{client_to_wire, relay_from_wire};
use crate::nip01::{ClientMessage, RelayMessage, RelayName};
use crate::peer::Peer;
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// Frames from all relays waiting for the driver.
const INBOX_CAPACITY: usize = 4096;
/// The first reconnect back-off; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// How a driver opens the TCP connection under a relay's WebSocket: tokio's real TCP, or
/// turmoil's simulated TCP.
pub trait Connector: Clone + Send + Sync + 'static {
    /// The connected stream.
    type Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static;
    /// Connects to `host:port`.
    fn connect(
        &self,
        host: String,
        port: u16,
    ) -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send;
}

/// Real TCP through tokio.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioTcp;

impl Connector for TokioTcp {
    type Stream = tokio::net::TcpStream;
    fn connect(
        &self,
        host: String,
        port: u16,
    ) -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send {
        tokio::net::TcpStream::connect((host, port))
    }
}

/// Real TCP through tokio from a chosen local address, so that peers on one machine are
/// distinct clients to a relay's per-address limits (any 127.x.y.z on Linux).
#[derive(Debug, Clone, Copy)]
pub struct TokioTcpFrom(pub std::net::IpAddr);

impl Connector for TokioTcpFrom {
    type Stream = tokio::net::TcpStream;
    fn connect(
        &self,
        host: String,
        port: u16,
    ) -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send {
        let local = self.0;
        async move {
            let mut last = std::io::Error::other(format!("{host} resolves to no address"));
            for addr in tokio::net::lookup_host((host.as_str(), port)).await? {
                let socket = if addr.is_ipv4() {
                    tokio::net::TcpSocket::new_v4()?
                } else {
                    tokio::net::TcpSocket::new_v6()?
                };
                // A socket bound to loopback reaches loopback only: towards another host the
                // system picks the address.
                let reachable = !local.is_loopback() || addr.ip().is_loopback();
                if local.is_ipv4() == addr.is_ipv4() && reachable {
                    socket.bind(std::net::SocketAddr::new(local, 0))?;
                }
                match socket.connect(addr).await {
                    Ok(stream) => return Ok(stream),
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

/// Turmoil's simulated TCP: hosts are turmoil host names.
#[cfg(feature = "turmoil")]
#[derive(Debug, Clone, Copy, Default)]
pub struct TurmoilTcp;

#[cfg(feature = "turmoil")]
impl Connector for TurmoilTcp {
    type Stream = turmoil::net::TcpStream;
    fn connect(
        &self,
        host: String,
        port: u16,
    ) -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send {
        turmoil::net::TcpStream::connect((host, port))
    }
}

/// What a connection task tells the driver.
#[derive(Debug)]
enum Inbound {
    Connected(RelayName),
    Message(RelayName, RelayMessage),
    Dropped(RelayName),
    /// A connection attempt failed; the task retries after its back-off.
    Unreachable(RelayName, String),
}

/// What happened on the connections so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Successful connections, reconnects included.
    pub connects: u64,
    /// Connections lost (closed by the relay or failed).
    pub drops: u64,
    /// Frames that were not NIP-01 relay messages the model has a type for (COUNT, NEG-*,
    /// malformed JSON); an AUTH challenge is one, and its peers ignore it.
    pub unparsed_frames: u64,
    /// Messages the peer sent to a relay that was down at the time.
    pub sent_while_down: u64,
    /// Connection attempts that failed (each is retried after a back-off).
    pub failed_attempts: u64,
    /// Why the latest failed attempt failed, with the relay's URL: what to show a user whose
    /// peer never connects.
    pub last_failure: Option<String>,
    /// Events that reached the peer although they were made before it started (their
    /// `created_at` more than [`STALE_AFTER_SECS`], and any clock skew, before its epoch): a
    /// relay that stores
    /// events replayed them from an earlier run, or another party's.
    pub stale_events: u64,
}

/// How much older than a driver's epoch an event must be to count as made before it started
/// (a run's own events are stamped from its epoch on).
pub const STALE_AFTER_SECS: u64 = 2;

/// Counts the connection tasks keep.
#[derive(Debug, Default)]
struct SharedCounters {
    unparsed: AtomicU64,
    /// Frames queued for a connection that dropped before sending them.
    sent_while_down: AtomicU64,
}

/// What a driver saw on its links that can explain a failed call, by relay name, handed to
/// its [`LinkWitness`] as it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// The peer published an event to the relay: sent, or dropped because the connection
    /// was down (it then never gets an OK).
    Published {
        /// The relay.
        relay: RelayName,
        /// The event.
        id: nostr::prelude::EventId,
        /// The length of the event's JSON, as the des world counts it.
        bytes: usize,
    },
    /// The relay answered a publish `OK`: accepted, or refused with its words.
    Answered {
        /// The relay.
        relay: RelayName,
        /// The event answered.
        id: nostr::prelude::EventId,
        /// Whether it was accepted.
        accepted: bool,
        /// Its words.
        message: String,
    },
    /// The connection to the relay was lost (closed by the relay or failed).
    Dropped {
        /// The relay.
        relay: RelayName,
    },
}

/// Told of each [`LinkEvent`] with the peer's clock.
pub type LinkWitness = Box<dyn FnMut(Duration, LinkEvent) + Send>;

/// One sans-IO peer driven over WebSocket connections to its relays.
pub struct PeerDriver<P: Peer> {
    peer: P,
    start: Instant,
    // Unbounded on purpose: a bounded queue here and the bounded inbox could each wait on the
    // other. What waits here is what the peer itself produced and holds anyway.
    outgoing: BTreeMap<RelayName, mpsc::UnboundedSender<String>>,
    up: BTreeMap<RelayName, bool>,
    inbox: mpsc::Receiver<Inbound>,
    tasks: JoinSet<()>,
    stats: ConnectionStats,
    counters: std::sync::Arc<SharedCounters>,
    epoch_secs: u64,
    /// Stale events, counted here and wherever else the counter is shared.
    stale: std::sync::Arc<AtomicU64>,
    /// How much older than the epoch an event must be to count as stale.
    stale_after_secs: u64,
    /// Who hears of refusals and drops, if anyone.
    witness: Option<LinkWitness>,
}

impl<P: Peer> PeerDriver<P> {
    /// Starts connecting `peer` to `relays` (WebSocket URLs, which must be the names the peer
    /// was built with). Events are stamped from the wall clock, as real relays expect. Must be
    /// called inside a tokio runtime.
    pub fn connect(peer: P, relays: Vec<RelayName>) -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self::connect_with(peer, relays, wall, TokioTcp)
    }

    /// As [`PeerDriver::connect`], with events stamped from `epoch_secs` (Unix seconds at the
    /// driver's start) and connections opened by `connector`: for simulated networks
    /// ([`TurmoilTcp`]), where a fixed epoch keeps runs identical.
    pub fn connect_with<C: Connector>(
        mut peer: P,
        relays: Vec<RelayName>,
        epoch_secs: u64,
        connector: C,
    ) -> Self {
        peer.set_epoch_secs(epoch_secs);
        let (inbox_tx, inbox) = mpsc::channel(INBOX_CAPACITY);
        let counters = std::sync::Arc::new(SharedCounters::default());
        let mut tasks = JoinSet::new();
        let mut outgoing = BTreeMap::new();
        let mut up = BTreeMap::new();
        for url in relays {
            let (tx, rx) = mpsc::unbounded_channel();
            outgoing.insert(url.clone(), tx);
            up.insert(url.clone(), false);
            tasks.spawn(connection(
                connector.clone(),
                url,
                rx,
                inbox_tx.clone(),
                counters.clone(),
            ));
        }
        PeerDriver {
            peer,
            start: Instant::now(),
            outgoing,
            up,
            inbox,
            tasks,
            stats: ConnectionStats::default(),
            counters,
            epoch_secs,
            stale: Default::default(),
            stale_after_secs: STALE_AFTER_SECS,
            witness: None,
        }
    }

    /// Tells `witness` of every publication, answer and dropped connection on the peer's
    /// links.
    pub fn witnessed_by(mut self, witness: LinkWitness) -> Self {
        self.witness = Some(witness);
        self
    }

    fn witness(&mut self, now: Duration, event: LinkEvent) {
        if let Some(witness) = self.witness.as_mut() {
            witness(now, event);
        }
    }

    /// Counts the peer's stale events into `counter` (shared by the peers of one run, so the
    /// run can warn that a relay fed it another run's events). `behind_secs`: how far behind
    /// true time the run's peers' clocks may run (their own events are stamped that much
    /// earlier), added to the margin.
    pub fn counting_stale_into(
        mut self,
        counter: std::sync::Arc<AtomicU64>,
        behind_secs: u64,
    ) -> Self {
        self.stale = counter;
        self.stale_after_secs = STALE_AFTER_SECS + behind_secs;
        self
    }

    /// Time since the driver started: the peer's clock.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// The peer, to start calls or read its events.
    pub fn peer_mut(&mut self) -> &mut P {
        &mut self.peer
    }

    /// The peer.
    pub fn peer(&self) -> &P {
        &self.peer
    }

    /// What happened on the connections so far.
    pub fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            unparsed_frames: self.counters.unparsed.load(Ordering::Relaxed),
            sent_while_down: self.stats.sent_while_down
                + self.counters.sent_while_down.load(Ordering::Relaxed),
            stale_events: self.stats.stale_events,
            ..self.stats.clone()
        }
    }

    /// Runs the peer until `done` says so (checked after every step) or `limit` passes.
    /// Returns whether `done` was reached.
    pub async fn run_until(
        &mut self,
        mut done: impl FnMut(&mut P) -> bool,
        limit: Duration,
    ) -> bool {
        // A limit too large for the clock means "no limit": about a century.
        let now = Instant::now();
        let deadline = now
            .checked_add(limit)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        loop {
            self.flush();
            if done(&mut self.peer) {
                return true;
            }
            let wake = self
                .peer
                .poll_timeout()
                .map(|t| self.start + t)
                .map_or(deadline, |t| t.min(deadline));
            tokio::select! {
                biased;
                inbound = self.inbox.recv() => match inbound {
                    Some(inbound) => self.take(inbound),
                    // Every connection task has ended: nothing more can arrive.
                    None => return done(&mut self.peer),
                },
                _ = tokio::time::sleep_until(wake) => {
                    if Instant::now() >= deadline {
                        return done(&mut self.peer);
                    }
                    let now = self.now();
                    self.peer.handle_timeout(now);
                }
            }
        }
    }

    fn take(&mut self, inbound: Inbound) {
        let now = self.now();
        match inbound {
            Inbound::Connected(relay) => {
                self.stats.connects += 1;
                self.up.insert(relay.clone(), true);
                self.peer.connected(&relay, now);
            }
            Inbound::Message(relay, message) => {
                match &message {
                    RelayMessage::Event { event, .. }
                        if event.created_at.as_secs() + self.stale_after_secs < self.epoch_secs =>
                    {
                        self.stats.stale_events += 1;
                        self.stale.fetch_add(1, Ordering::Relaxed);
                    }
                    RelayMessage::Ok {
                        id,
                        accepted,
                        message: words,
                    } => {
                        let answered = LinkEvent::Answered {
                            relay: relay.clone(),
                            id: *id,
                            accepted: *accepted,
                            message: words.clone(),
                        };
                        self.witness(now, answered);
                    }
                    _ => {}
                }
                self.peer.handle_relay_message(&relay, message, now);
            }
            Inbound::Dropped(relay) => {
                self.stats.drops += 1;
                self.up.insert(relay.clone(), false);
                self.witness(now, LinkEvent::Dropped { relay });
            }
            Inbound::Unreachable(relay, why) => {
                self.stats.failed_attempts += 1;
                self.stats.last_failure = Some(format!("{relay}: {why}"));
            }
        }
    }

    /// Hands everything the peer wants sent to the connection tasks.
    fn flush(&mut self) {
        while let Some((relay, message)) = self.peer.poll_transmit() {
            let up = self.up.get(&relay).copied().unwrap_or(false);
            if let ClientMessage::Event(event) = &message {
                if self.witness.is_some() {
                    let now = self.now();
                    let published = LinkEvent::Published {
                        relay: relay.clone(),
                        id: event.id,
                        bytes: crate::nip01::event_json::len(event),
                    };
                    self.witness(now, published);
                }
            }
            match self.outgoing.get(&relay) {
                Some(tx) if up => {
                    if tx.send(client_to_wire(&message)).is_err() {
                        self.stats.sent_while_down += 1;
                    }
                }
                _ => self.stats.sent_while_down += 1,
            }
        }
    }

    /// Closes every connection and gives the peer back.
    pub async fn shutdown(mut self) -> P {
        self.outgoing.clear();
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        self.peer
    }
}

/// Keeps one relay connected: connect, forward both ways, reconnect after a drop.
async fn connection<C: Connector>(
    connector: C,
    url: RelayName,
    mut outgoing: mpsc::UnboundedReceiver<String>,
    inbox: mpsc::Sender<Inbound>,
    counters: std::sync::Arc<SharedCounters>,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let opened = open(&connector, &url).await;
        if let Err(e) = &opened {
            if inbox
                .send(Inbound::Unreachable(url.clone(), e.to_string()))
                .await
                .is_err()
            {
                return;
            }
        }
        if let Ok(ws) = opened {
            backoff = FIRST_BACKOFF;
            // Frames queued while the relay was down belong to the old connection.
            while outgoing.try_recv().is_ok() {
                counters.sent_while_down.fetch_add(1, Ordering::Relaxed);
            }
            if inbox.send(Inbound::Connected(url.clone())).await.is_err() {
                return;
            }
            let (mut sink, mut stream) = ws.split();
            loop {
                tokio::select! {
                    biased;
                    frame = outgoing.recv() => match frame {
                        Some(text) => {
                            if sink.send(Message::text(text)).await.is_err() {
                                break;
                            }
                        }
                        // The driver is gone.
                        None => {
                            let _ = sink.close().await;
                            return;
                        }
                    },
                    frame = stream.next() => match frame {
                        Some(Ok(Message::Text(text))) => match relay_from_wire(text.as_str()) {
                            Some(m) => {
                                if inbox.send(Inbound::Message(url.clone(), m)).await.is_err() {
                                    return;
                                }
                            }
                            None => {
                                counters.unparsed.fetch_add(1, Ordering::Relaxed);
                            }
                        },
                        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                        // Pings are answered by tungstenite; binary frames are not NIP-01.
                        Some(Ok(_)) => {}
                    },
                }
            }
            if inbox.send(Inbound::Dropped(url.clone())).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Opens a WebSocket to `url` (`ws://host:port/...`) over the connector's TCP.
async fn open<C: Connector>(
    connector: &C,
    url: &str,
) -> Result<tokio_tungstenite::WebSocketStream<C::Stream>, tokio_tungstenite::tungstenite::Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let request = url.into_client_request()?;
    let uri = request.uri();
    if uri.scheme_str() != Some("ws") {
        // No TLS here: a wss:// relay would be dialled in plaintext and fail obscurely.
        return Err(tokio_tungstenite::tungstenite::Error::Url(
            tokio_tungstenite::tungstenite::error::UrlError::UnsupportedUrlScheme,
        ));
    }
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(80);
    let stream = connector.connect(host, port).await?;
    let (ws, _) = tokio_tungstenite::client_async(request, stream).await?;
    Ok(ws)
}
