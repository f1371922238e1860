//! Live mode: the relay model behind a real NIP-01 WebSocket server on a real socket, so any
//! client (the TypeScript ContextVM SDK, the Rust SDK, a CLI) can be tested against a relay that
//! behaves like strfry, damus, nostr-rs-relay or khatru, impairments included.
//!
//! One task owns the sans-IO [`Relay`]; connection tasks hand it text frames and it hands back
//! the messages to send, delayed as the profile's relay→peer impairments say: in order per
//! connection (head-of-line delay) unless the profile asks for the datagram stress mode. A plain HTTP GET with `Accept: application/nostr+json` gets the NIP-11 document, which
//! reflects the profile's limits. Live mode reads the real clock: it is the one driver that is
//! not deterministic, by nature.

pub mod driver;
pub mod record;
pub(crate) mod wire;

use wire::{to_model, to_wire};

use crate::nip01::RelayMessage;
use crate::relay::impair::{LinkState, Pipe};
use crate::relay::{ConnId, Relay, RelayProfile};
use crate::rng::SeededStreams;
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// How a live relay runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen (loopback by default).
    pub listen: SocketAddr,
    /// The relay's behaviour.
    pub profile: RelayProfile,
    /// Seed of the impairments' random draws.
    pub seed: u64,
    /// Connections served at once; more are refused.
    pub max_connections: usize,
    /// Messages queued for one connection before it is cut off as a slow reader.
    pub max_queued_per_connection: usize,
    /// Write every EVENT, OK and NOTICE that crosses the relay to this trace (driver `live`).
    pub trace: Option<std::path::PathBuf>,
    /// The relay's name in its trace (`upstream` by default; the scenario's relay name under
    /// the turmoil engine).
    pub name: String,
    /// Unix seconds the relay's clock reads at start. `None` reads the wall clock, as a real
    /// relay does; simulated networks (turmoil) fix it so runs repeat exactly.
    pub epoch_secs: Option<u64>,
    /// The scenario whose peers this relay carries (the turmoil engine), written into its
    /// trace's header so the trace can be schedule-replayed.
    pub origin: Option<crate::trace::ScenarioOrigin>,
}

impl ServeConfig {
    /// A relay with `profile` on `127.0.0.1:7777`.
    pub fn new(profile: RelayProfile) -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 7777)),
            profile,
            seed: 1,
            max_connections: 256,
            max_queued_per_connection: 4096,
            trace: None,
            name: "upstream".into(),
            epoch_secs: None,
            origin: None,
        }
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

/// A running live relay.
pub struct LiveRelay {
    /// The address it listens on.
    pub local_addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl LiveRelay {
    /// Stops accepting, closes connections and waits for the relay task to end.
    pub async fn shutdown(mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        let _ = self.task.await;
    }
}

enum Inbound {
    Open {
        conn: ConnId,
        ip: String,
        out: mpsc::Sender<Message>,
    },
    Text {
        conn: ConnId,
        text: String,
    },
    Closed {
        conn: ConnId,
    },
    Shutdown,
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
    limitation.insert("max_subscriptions".into(), profile.max_subscriptions.into());
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

/// Starts a live relay on a real socket (`config.listen`); returns once it listens.
pub async fn serve(config: ServeConfig) -> std::io::Result<LiveRelay> {
    let listener = TcpListener::bind(config.listen).await?;
    let local_addr = listener.local_addr()?;
    serve_on(listener, local_addr, config)
}

/// Starts a relay on an already bound `listener` (reported as `local_addr`): the same server
/// on tokio's TCP or inside a turmoil simulation. Must be called inside a tokio runtime.
pub fn serve_on<L: Listener>(
    listener: L,
    local_addr: SocketAddr,
    config: ServeConfig,
) -> std::io::Result<LiveRelay> {
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    let (inbound_tx, inbound_rx) = mpsc::channel::<Inbound>(65_536);
    let trace = match &config.trace {
        Some(path) => Some(record::start_trace(
            path,
            format!("relaysim serve ({})", config.profile.name),
            config.origin.as_ref(),
            config.name.clone(),
            Instant::now(),
        )?),
        None => None,
    };
    let relay_task = tokio::spawn(run_relay(config.clone(), inbound_rx, trace));
    let task = tokio::spawn(accept_loop(
        listener,
        config,
        inbound_tx,
        shutdown_rx,
        relay_task,
    ));
    Ok(LiveRelay {
        local_addr,
        shutdown: Some(shutdown_tx),
        task,
    })
}

async fn accept_loop<L: Listener>(
    listener: L,
    config: ServeConfig,
    inbound: mpsc::Sender<Inbound>,
    mut shutdown: oneshot::Receiver<()>,
    relay_task: tokio::task::JoinHandle<()>,
) {
    let slots = std::sync::Arc::new(Semaphore::new(config.max_connections));
    let mut next_conn: ConnId = 1;
    loop {
        // `biased`: a fixed polling order keeps turmoil runs repeatable without relying on
        // tokio's seeded select (which needs `--cfg tokio_unstable`).
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    // Over the connection limit: refuse before the upgrade, as khatru does.
                    let mut stream = stream;
                    let _ = stream.write_all(b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n").await;
                    continue;
                };
                let conn = next_conn;
                next_conn += 1;
                let inbound = inbound.clone();
                let profile = config.profile.clone();
                let queue = config.max_queued_per_connection;
                tokio::spawn(async move {
                    let _permit = permit;
                    let _ = handle_connection(stream, peer, conn, inbound, profile, queue).await;
                });
            }
        }
    }
    // The relay task closes the trace before it ends.
    let _ = inbound.send(Inbound::Shutdown).await;
    let _ = relay_task.await;
}

/// A stream that first yields bytes already read from it (the HTTP request head).
struct Prefixed<S> {
    prefix: Vec<u8>,
    offset: usize,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.offset < self.prefix.len() {
            let n = buf.remaining().min(self.prefix.len() - self.offset);
            let start = self.offset;
            buf.put_slice(&self.prefix[start..start + n]);
            self.offset += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

async fn handle_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut stream: S,
    peer: SocketAddr,
    conn: ConnId,
    inbound: mpsc::Sender<Inbound>,
    profile: RelayProfile,
    queue: usize,
) -> std::io::Result<()> {
    // Read the HTTP request head to tell a NIP-11 request from a WebSocket upgrade.
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Ok(());
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .map_err(|_| std::io::ErrorKind::TimedOut)??;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    if !text.contains("upgrade: websocket") {
        let body = if text.contains("application/nostr+json") {
            nip11(&profile).to_string()
        } else {
            "relaysim: connect with a WebSocket client\n".to_owned()
        };
        let kind = if text.contains("application/nostr+json") {
            "application/nostr+json"
        } else {
            "text/plain"
        };
        let response = format!("HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\naccess-control-allow-origin: *\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        stream.write_all(response.as_bytes()).await?;
        return Ok(());
    }
    // The relay model applies the profile's own size rules; the socket only guards memory.
    let ws_config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let ws = tokio_tungstenite::accept_async_with_config(
        Prefixed {
            prefix: head,
            offset: 0,
            inner: stream,
        },
        Some(ws_config),
    )
    .await
    .map_err(std::io::Error::other)?;
    let (mut sink, mut source) = ws.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(queue);
    if inbound
        .send(Inbound::Open {
            conn,
            ip: peer.ip().to_string(),
            out: out_tx,
        })
        .await
        .is_err()
    {
        return Ok(());
    }
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            let close = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() || close {
                break;
            }
        }
        let _ = sink.close().await;
    });
    while let Some(frame) = source.next().await {
        match frame {
            Ok(Message::Text(t)) => {
                if inbound
                    .send(Inbound::Text {
                        conn,
                        text: t.to_string(),
                    })
                    .await
                    .is_err()
                {
                    break;
                }
            }
            Ok(Message::Binary(_)) => {
                let _ = inbound
                    .send(Inbound::Text {
                        conn,
                        text: String::new(),
                    })
                    .await;
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let _ = inbound.send(Inbound::Closed { conn }).await;
    writer.abort();
    Ok(())
}

async fn run_relay(
    config: ServeConfig,
    mut inbound: mpsc::Receiver<Inbound>,
    trace: Option<(
        record::TraceFeed,
        tokio::task::JoinHandle<std::io::Result<u64>>,
    )>,
) {
    let (feed, writer) = match trace {
        Some((f, w)) => (Some(f), Some(w)),
        None => (None, None),
    };
    let seen = |s: record::Seen| {
        if let Some(f) = &feed {
            let _ = f.send(Some((Instant::now(), s)));
        }
    };
    let start = Instant::now();
    let mut relay = Relay::new(config.profile.clone());
    let epoch = config.epoch_secs.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    relay.set_epoch_secs(epoch);
    let streams = SeededStreams::new(config.seed);
    let mut conns: BTreeMap<ConnId, mpsc::Sender<Message>> = BTreeMap::new();
    // Each connection draws its own delays and keeps its own order (a WebSocket over TCP).
    let mut links: BTreeMap<ConnId, (LinkState, Pipe)> = BTreeMap::new();
    let mut delayed: BTreeMap<(Instant, u64), (ConnId, Message)> = BTreeMap::new();
    let mut seq = 0u64;
    let down = config.profile.impairments.relay_to_peer.clone();
    loop {
        let wake = [
            relay.poll_timeout().map(|t| start + t),
            delayed.keys().next().map(|(t, _)| *t),
        ]
        .into_iter()
        .flatten()
        .min();
        tokio::select! {
            biased;
            msg = inbound.recv() => {
                let Some(msg) = msg else { break };
                if matches!(msg, Inbound::Shutdown) {
                    break;
                }
                let now = start.elapsed();
                match msg {
                    Inbound::Open { conn, ip, out } => {
                        relay.connect(conn, &ip);
                        conns.insert(conn, out);
                        links.insert(conn, (LinkState::new(streams.stream(&format!("live/{conn}/down"))), Pipe::default()));
                    }
                    Inbound::Shutdown => unreachable!("handled above"),
                    Inbound::Text { conn, text } => {
                        let parsed = to_model(&text);
                        seen(record::Seen::FromClient { client: conn, text });
                        match parsed {
                            Some(m) => relay.handle_client_message(conn, m, now),
                            None => {
                                if let Some(out) = conns.get(&conn) {
                                    let notice = RelayMessage::Notice { message: "error: could not parse the message".into() };
                                    let _ = out.try_send(Message::text(to_wire(&notice)));
                                }
                            }
                        }
                    }
                    Inbound::Closed { conn } => {
                        relay.disconnect(conn);
                        conns.remove(&conn);
                        links.remove(&conn);
                    }
                }
            }
            _ = async { match wake { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                relay.handle_timeout(start.elapsed());
            }
        }
        // Messages from the relay: through the relay -> peer impairments.
        let now = start.elapsed();
        while let Some((conn, message)) = relay.poll_transmit() {
            let Some((link, pipe)) = links.get_mut(&conn) else {
                continue;
            };
            let is_event = matches!(message, RelayMessage::Event { .. });
            let delays = if is_event {
                link.plan(&down)
            } else {
                link.plan(&crate::relay::impair::Direction {
                    delay: down.delay.clone(),
                    ..Default::default()
                })
            };
            let text = to_wire(&message);
            for at in pipe.arrivals(&down, now, text.len(), &delays, true) {
                seq += 1;
                delayed.insert((start + at, seq), (conn, Message::text(text.clone())));
            }
        }
        while let Some(conn) = relay.poll_dropped() {
            if let Some(out) = conns.remove(&conn) {
                // What the relay said before closing (a NOTICE) goes out first.
                let pending: Vec<(Instant, u64)> = delayed
                    .iter()
                    .filter(|(_, (c, _))| *c == conn)
                    .map(|(k, _)| *k)
                    .collect();
                for key in pending {
                    if let Some((_, m)) = delayed.remove(&key) {
                        let _ = out.try_send(m);
                    }
                }
                let _ = out.try_send(Message::Close(None));
            }
            links.remove(&conn);
        }
        while let Some(entry) = delayed.first_entry() {
            if entry.key().0 > Instant::now() {
                break;
            }
            let (conn, message) = entry.remove();
            if let Message::Text(t) = &message {
                seen(record::Seen::FromRelay {
                    client: conn,
                    text: t.to_string(),
                });
            }
            if let Some(out) = conns.get(&conn) {
                if out.try_send(message).is_err() {
                    // A reader that cannot keep up is cut off, as strfry does past 32 MiB.
                    relay.disconnect(conn);
                    conns.remove(&conn);
                }
            }
        }
    }
    // Close the trace: the summary line, then flush.
    if let Some(f) = &feed {
        let _ = f.send(None);
    }
    if let Some(w) = writer {
        let _ = w.await;
    }
}
