//! The recording proxy: a transparent WebSocket proxy in front of any relay that writes what
//! crosses it, both ways, as a trace (driver `live`, see [`super::trace_writer`]).
//!
//! What a relay behind it sees stays as close to a direct connection as a proxy allows:
//! NIP-11 requests are forwarded; each client's upstream connection leaves from the client's
//! own loopback address when it has one (so per-address limits apply per client) and carries
//! `X-Forwarded-For`; an unreachable upstream is refused with `502 Bad Gateway` and a log line
//! rather than an accepted and silently dropped WebSocket.

use super::http::{http_response, read_head, Prefixed};
use super::trace_writer::{start_trace, Seen, TraceFeed};
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// A function that takes log lines.
type LogFn = dyn Fn(&str) + Send + Sync;

/// Where the proxy's log lines go (the CLI prints them on stderr).
#[derive(Clone, Default)]
pub struct Log(Option<Arc<LogFn>>);

impl Log {
    /// Log lines handed to `f`.
    pub fn to(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Log(Some(Arc::new(f)))
    }

    fn line(&self, text: &str) {
        if let Some(f) = &self.0 {
            f(text);
        }
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Log(on)"
        } else {
            "Log(off)"
        })
    }
}

/// How the recording proxy runs.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    /// Where clients connect.
    pub listen: SocketAddr,
    /// The relay behind the proxy (`ws://...`).
    pub upstream: String,
    /// The trace file.
    pub out: PathBuf,
    /// Peer names by client address, for the trace.
    pub labels: BTreeMap<IpAddr, String>,
    /// Clients proxied at once; more are refused with 429.
    pub max_connections: usize,
    /// How long to wait for the upstream's TCP connection and WebSocket handshake.
    pub connect_timeout: Duration,
    /// Where log lines go.
    pub log: Log,
    /// The relay's name in the trace (`upstream` by default).
    pub relay: String,
    /// The scenario whose peers are recorded, written into the trace's header so the trace
    /// can be schedule-replayed with no more arguments (the live engine sets it).
    pub origin: Option<crate::trace::ScenarioOrigin>,
}

impl RecordConfig {
    /// A proxy on `listen` in front of `upstream`, writing `out`.
    pub fn new(listen: SocketAddr, upstream: &str, out: PathBuf) -> Self {
        RecordConfig {
            listen,
            upstream: upstream.to_owned(),
            out,
            labels: BTreeMap::new(),
            max_connections: 256,
            connect_timeout: Duration::from_secs(5),
            log: Log::default(),
            relay: "upstream".into(),
            origin: None,
        }
    }
}

/// A running recording proxy.
pub struct Recorder {
    /// The address clients connect to.
    pub local_addr: SocketAddr,
    /// When the trace's clock read 0 (Unix microseconds), to place a command's own
    /// timestamps on it.
    pub started_unix_us: u64,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<u64>>,
    feed: TraceFeed,
}

impl Recorder {
    /// What feeds its trace, for the peers of a live run to add their calls to it.
    pub(crate) fn trace_feed(&self) -> TraceFeed {
        self.feed.clone()
    }

    /// Stops the proxy, writes the closing summary and returns how many lines were recorded.
    pub async fn finish(mut self) -> std::io::Result<u64> {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        self.task.await.map_err(std::io::Error::other)?
    }
}

/// Starts the proxy; returns once it listens.
pub async fn record(config: RecordConfig) -> std::io::Result<Recorder> {
    let listener = super::listen(config.listen)?;
    let local_addr = listener.local_addr()?;
    let started = Instant::now();
    let started_unix_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let (feed, writer) = start_trace(
        &config.out,
        format!("recording of {}", config.upstream),
        config.origin.as_ref(),
        started,
    )?;
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    let kept = feed.clone();
    let task = tokio::spawn(async move {
        accept(listener, Arc::new(config), feed, shutdown_rx).await;
        writer.await.map_err(std::io::Error::other)?
    });
    Ok(Recorder {
        local_addr,
        started_unix_us,
        shutdown: Some(shutdown_tx),
        task,
        feed: kept,
    })
}

async fn accept(
    listener: TcpListener,
    config: Arc<RecordConfig>,
    feed: TraceFeed,
    mut shutdown: oneshot::Receiver<()>,
) {
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let mut next = 0u64;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((mut stream, client_addr)) = accepted else { continue };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    let _ = stream.write_all(&http_response("429 Too Many Requests", "text/plain", "too many connections\n", "")).await;
                    continue;
                };
                let peer = config
                    .labels
                    .get(&client_addr.ip())
                    .cloned()
                    .unwrap_or_else(|| format!("client-{next}"));
                next += 1;
                let (feed, config) = (feed.clone(), config.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    proxy(stream, client_addr, peer, &config, feed).await;
                });
            }
        }
    }
    feed.close().await;
}

/// Host and port of a `ws://` URL.
fn host_port(url: &str) -> Option<(String, u16)> {
    let request = url.into_client_request().ok()?;
    let uri = request.uri();
    Some((uri.host()?.to_owned(), uri.port_u16().unwrap_or(80)))
}

/// A TCP connection to the upstream, from the client's own loopback address when it has one.
async fn connect_upstream(upstream: &str, client: IpAddr) -> std::io::Result<TcpStream> {
    let (host, port) = host_port(upstream)
        .ok_or_else(|| std::io::Error::other(format!("cannot read the address {upstream:?}")))?;
    let mut last = std::io::Error::other(format!("{host} resolves to no address"));
    for addr in tokio::net::lookup_host((host.as_str(), port)).await? {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // Leaving from the client's loopback address keeps per-address limits per client.
        // Only towards a loopback relay: a socket bound to loopback cannot reach another host,
        // and any other address is not ours to bind, so the system picks.
        if client.is_loopback() && addr.ip().is_loopback() && client.is_ipv4() == addr.is_ipv4() {
            let _ = socket.bind(SocketAddr::new(client, 0));
        }
        match socket.connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn proxy(
    mut stream: TcpStream,
    client_addr: SocketAddr,
    peer: String,
    config: &RecordConfig,
    feed: TraceFeed,
) {
    let Ok(Ok(Some(head))) =
        tokio::time::timeout(config.connect_timeout * 2, read_head(&mut stream)).await
    else {
        return;
    };
    let upgrade = String::from_utf8_lossy(&head)
        .to_ascii_lowercase()
        .contains("upgrade: websocket");
    let mut upstream = match tokio::time::timeout(
        config.connect_timeout,
        connect_upstream(&config.upstream, client_addr.ip()),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return refuse(stream, client_addr, config, &e.to_string()).await,
        Err(_) => {
            let why = format!("no connection within {:?}", config.connect_timeout);
            return refuse(stream, client_addr, config, &why).await;
        }
    };
    if !upgrade {
        // NIP-11 and any other plain request: the upstream answers it, addressed to it (its
        // own Host) and closing after the answer, so the whole answer is read at once.
        let head = forwarded_head(&head, &config.upstream);
        if upstream.write_all(&head).await.is_ok() {
            let mut answer = Vec::new();
            let mut limited = (&mut upstream).take(1 << 20);
            let read = limited.read_to_end(&mut answer);
            let _ = tokio::time::timeout(config.connect_timeout, read).await;
            let _ = stream.write_all(&answer).await;
        }
        return;
    }
    let Ok(mut request) = config.upstream.as_str().into_client_request() else {
        return refuse(
            stream,
            client_addr,
            config,
            "cannot read the upstream address",
        )
        .await;
    };
    if let Ok(value) = client_addr.ip().to_string().parse() {
        request.headers_mut().insert("x-forwarded-for", value);
    }
    let relay = match tokio::time::timeout(
        config.connect_timeout,
        tokio_tungstenite::client_async(request, upstream),
    )
    .await
    {
        Ok(Ok((relay, _))) => relay,
        // The relay refused the upgrade itself (429, 503, ...): the client gets its answer.
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
            let status = response.status();
            let line = format!(
                "{} {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            );
            let body = response
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            let _ = stream
                .write_all(&http_response(&line, "text/plain", &body, ""))
                .await;
            return;
        }
        Ok(Err(e)) => return refuse(stream, client_addr, config, &e.to_string()).await,
        Err(_) => {
            let why = format!("no WebSocket handshake within {:?}", config.connect_timeout);
            return refuse(stream, client_addr, config, &why).await;
        }
    };
    let Ok(downstream) = tokio_tungstenite::accept_async(Prefixed::new(head, stream)).await else {
        return;
    };
    let relay_name = config.relay.clone();
    feed.send(
        Instant::now(),
        Seen::Connected {
            relay: relay_name.clone(),
            peer: peer.clone(),
        },
    )
    .await;
    let (mut to_client, mut from_client) = downstream.split();
    let (mut to_relay, mut from_relay) = relay.split();
    let up = async {
        while let Some(Ok(m)) = from_client.next().await {
            if let Message::Text(t) = &m {
                let seen = Seen::FromClient {
                    relay: relay_name.clone(),
                    peer: peer.clone(),
                    text: t.to_string(),
                };
                feed.send(Instant::now(), seen).await;
            }
            let close = matches!(m, Message::Close(_));
            if to_relay.send(m).await.is_err() || close {
                break;
            }
        }
    };
    let down = async {
        while let Some(Ok(m)) = from_relay.next().await {
            if let Message::Text(t) = &m {
                let seen = Seen::FromRelay {
                    relay: relay_name.clone(),
                    peer: peer.clone(),
                    text: t.to_string(),
                    arrival: None,
                    latency_us: None,
                };
                feed.send(Instant::now(), seen).await;
            }
            let close = matches!(m, Message::Close(_));
            if to_client.send(m).await.is_err() || close {
                break;
            }
        }
    };
    // Whichever side ends first ends both: the other socket is dropped and closed.
    tokio::select! { _ = up => {}, _ = down => {} }
    feed.send(
        Instant::now(),
        Seen::Disconnected {
            relay: relay_name,
            peer,
            reason: "proxy connection ended".into(),
        },
    )
    .await;
}

/// A client's plain HTTP request head as sent to the upstream: `Host` names the upstream and
/// `Connection: close` ends the answer, every other header as the client sent it.
fn forwarded_head(head: &[u8], upstream: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let host = host_port(upstream).map_or(String::new(), |(h, p)| format!("{h}:{p}"));
    let mut lines = text.split("\r\n");
    let mut out = lines.next().unwrap_or_default().to_owned() + "\r\n";
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        if !name.eq_ignore_ascii_case("host") && !name.eq_ignore_ascii_case("connection") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str(&format!("Host: {host}\r\nConnection: close\r\n\r\n"));
    out.into_bytes()
}

/// Answers a client whose upstream is unreachable: 502 and a log line.
async fn refuse(mut stream: TcpStream, client: SocketAddr, config: &RecordConfig, why: &str) {
    config.log.line(&format!(
        "relaysim record: upstream {} unreachable for {client}: {why}",
        config.upstream
    ));
    let body = format!("upstream {} unreachable: {why}\n", config.upstream);
    let _ = stream
        .write_all(&http_response("502 Bad Gateway", "text/plain", &body, ""))
        .await;
}
