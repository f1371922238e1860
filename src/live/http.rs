//! The socket side of a live relay: accepting connections, reading the HTTP request head,
//! answering NIP-11 and `/stats`, refusing what the relay would refuse (over the connection
//! limit: 429; restarting or the peer's connection down: 503), and moving WebSocket frames
//! between a connection and the [`world`](super::world).

use super::outbox::{Outbox, Outgoing, QueueBudget};
use super::slots::{Admission, Slot, Slots};
use super::world::{Credit, Inbound, Parsed};
use super::{nip11, Gate, Listener};
use crate::nip01::ClientMessage;
use crate::relay::{ConnId, KeepAlive, RelayProfile};
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// The whole HTTP request head and WebSocket upgrade must finish within this, so a client
/// that trickles bytes cannot hold a connection slot.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// KiB of one connection's frames that may wait for the relay model at once.
const INBOUND_CREDIT_KIB: usize = 64;
/// KiB of all connections' frames that may wait for the relay model at once: without it, a
/// thousand connections each within their own credit still hold 64 MiB and more.
pub(crate) const SERVER_INBOUND_CREDIT_KIB: usize = 16 << 10;
/// KiB of small frames a connection may have on their way outside the server's credit. The
/// server's credit is handed out first come, first served, so under a flood of large frames a
/// well-behaved client's REQ would queue behind every flooder; this reserve lets it through.
/// It costs at most this much per connection slot.
const RESERVED_CREDIT_KIB: usize = 4;
/// The longest request head accepted.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The frame limit of a relay whose profile sets none (`ideal`, `relay-builder`): relaysim's,
/// not a relay's, and only there to bound memory. Every connection reads a frame whole before
/// it waits for the relay model, so the frames being read take up to this much per
/// connection: at tungstenite's 64 MiB, 16 clients each sending 16 MB REQs took the process
/// to about 1 GB. 1 MiB is above the largest limit a measured relay sets (damus's 1,000,000
/// bytes) and above any frame relaysim's or the SDKs' chunked transfers publish.
pub(crate) const DEFAULT_FRAME_LIMIT: usize = 1 << 20;

/// What a connection to one relay needs to know.
#[derive(Clone)]
pub(crate) struct RelayDoor {
    pub index: usize,
    /// When the relay started serving (a keepalive on the relay's clock ticks from here).
    pub started: Instant,
    pub profile: RelayProfile,
    pub max_connections: usize,
    pub queues: Arc<QueueBudget>,
    /// The server's inbound credit ([`SERVER_INBOUND_CREDIT_KIB`]), shared by every door.
    pub inbound_credit: Arc<Semaphore>,
    pub labels: BTreeMap<IpAddr, String>,
    pub gate: Arc<Mutex<Gate>>,
    pub next_conn: Arc<AtomicU64>,
    /// Whether the world records a trace, which needs each frame's text; otherwise a parsed
    /// frame's text is dropped.
    pub keep_text: bool,
}

/// A connection's side of the profile's [`KeepAlive`]: when to ping, and when it last heard
/// from the client.
struct Keepalive {
    policy: KeepAlive,
    ticker: tokio::time::Interval,
    last_heard: Instant,
    /// When the last ping went out.
    pinged: Option<Instant>,
}

impl Keepalive {
    /// The keepalive of a connection opening now to a relay that started at `relay_started`.
    fn new(policy: KeepAlive, relay_started: Instant) -> Self {
        let now = Instant::now();
        let every = policy.ping_every.max(Duration::from_millis(1));
        let first = first_ping(now, relay_started, every, policy.on_relay_clock);
        Keepalive {
            policy,
            ticker: tokio::time::interval_at(first, every),
            last_heard: now,
            pinged: None,
        }
    }

    /// The next ping time; never, without a keepalive.
    async fn tick(this: &mut Option<Self>) {
        match this {
            Some(k) => {
                k.ticker.tick().await;
            }
            None => std::future::pending().await,
        }
    }

    /// A frame arrived (`pong`: it was a pong).
    fn heard(&mut self, pong: bool) {
        if pong || !self.policy.pongs_only {
            self.last_heard = Instant::now();
        }
    }

    /// At a ping time: whether the client has been silent long enough to be closed, with a
    /// ping unanswered (a client is never closed before it was pinged); otherwise note the
    /// ping about to go out.
    fn silent(&mut self) -> bool {
        let unanswered = self.pinged.is_some_and(|p| self.last_heard < p);
        if unanswered && self.last_heard.elapsed() >= self.policy.silent_after {
            return true;
        }
        self.pinged = Some(Instant::now());
        false
    }
}

/// When a connection opened at `now` is first pinged: `every` after it opened, or, on the
/// relay's clock, at the relay's next tick (a multiple of `every` since `relay_started`)
/// strictly after `now`.
fn first_ping(
    now: Instant,
    relay_started: Instant,
    every: Duration,
    on_relay_clock: bool,
) -> Instant {
    if !on_relay_clock {
        return now + every;
    }
    let ticks = now.duration_since(relay_started).as_nanos() / every.as_nanos() + 1;
    relay_started + every * u32::try_from(ticks).unwrap_or(u32::MAX)
}

/// Accepts connections to one relay until told to stop.
pub(crate) async fn accept_loop<L: Listener>(
    listener: L,
    door: RelayDoor,
    inbound: mpsc::Sender<Inbound>,
    mut stop: watch::Receiver<bool>,
) {
    // Slots shared fairly: see `slots` for who gives one up when they are full.
    let slots = Slots::new(door.max_connections);
    loop {
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break;
                }
            }
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let conn = door.next_conn.fetch_add(1, Ordering::Relaxed);
                let (door, inbound) = (door.clone(), inbound.clone());
                match slots.admit(peer.ip()) {
                    Admission::Now(slot) => {
                        tokio::spawn(async move {
                            let _ = handle_connection(stream, peer, conn, door, inbound, slot).await;
                        });
                    }
                    // Waited for on the connection's own task: the accept loop goes on.
                    Admission::AfterEviction(slot) => {
                        tokio::spawn(async move {
                            match slot.await {
                                Some(slot) => {
                                    let _ = handle_connection(stream, peer, conn, door, inbound, slot).await;
                                }
                                None => refuse(stream, "too many connections\n"),
                            }
                        });
                    }
                    // Over the connection limit: refuse before the upgrade, as khatru does.
                    Admission::Refused(why) => refuse(stream, why),
                }
            }
        }
    }
}

/// What a frame may take in memory once parsed, for its read credit: its text, plus for each
/// JSON string in it the heap string and map slot it becomes. A REQ of many short filter values
/// (`"#t":["a","b",…]`) takes several times its text parsed, and parsed is how it waits for the
/// relay model.
fn parsed_weight(text: &str) -> usize {
    /// A `String` (24 bytes), its heap block (at least 16) and its share of a B-tree node.
    const PER_STRING: usize = 48;
    // Quotes that delimit strings, not escaped ones inside them (an escape-heavy event's
    // content is one string however many `\"` it holds).
    let (mut quotes, mut escaped) = (0, false);
    for b in text.bytes() {
        match (escaped, b) {
            (true, _) => escaped = false,
            (false, b'\\') => escaped = true,
            (false, b'"') => quotes += 1,
            _ => {}
        }
    }
    text.len() + quotes / 2 * PER_STRING
}

/// Answers a refused connection with 429 on a task of its own: the accept loop must not wait
/// on any one client while others queue behind it.
fn refuse<S: AsyncWrite + Unpin + Send + 'static>(mut stream: S, why: &'static str) {
    tokio::spawn(async move {
        let response = plain_response("429 Too Many Requests", why);
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&response)).await;
    });
}

pub(crate) fn plain_response(status: &str, body: &str) -> Vec<u8> {
    http_response(status, "text/plain", body, "")
}

pub(crate) fn http_response(status: &str, kind: &str, body: &str, extra_headers: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\naccess-control-allow-origin: *\r\ncontent-length: {}\r\n{extra_headers}connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A stream that first yields bytes already read from it (the HTTP request head).
pub(crate) struct Prefixed<S> {
    prefix: Vec<u8>,
    offset: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    /// `inner`, yielding `prefix` first.
    pub(crate) fn new(prefix: Vec<u8>, inner: S) -> Self {
        Prefixed {
            prefix,
            offset: 0,
            inner,
        }
    }
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

/// Reads the HTTP request head; `None` when the client went away or sent too much.
pub(crate) async fn read_head<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD_BYTES {
            return Ok(None);
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(Some(head))
}

async fn handle_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut stream: S,
    peer: SocketAddr,
    conn: ConnId,
    door: RelayDoor,
    inbound: mpsc::Sender<Inbound>,
    slot: Slot,
) -> std::io::Result<()> {
    let deadline = Instant::now() + HANDSHAKE_DEADLINE;
    let Some(head) = tokio::time::timeout_at(deadline, read_head(&mut stream))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)??
    else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let path = text.split_whitespace().nth(1).unwrap_or("/");
    if !text.contains("upgrade: websocket") {
        let response = if path == "/stats" {
            let (reply, answer) = oneshot::channel();
            let _ = inbound.send(Inbound::Stats { reply }).await;
            let body = match answer.await {
                Ok(report) => serde_json::to_string_pretty(&report).unwrap_or_default(),
                Err(_) => "{}".into(),
            };
            http_response("200 OK", "application/json", &body, "")
        } else if text.contains("application/nostr+json") {
            http_response(
                "200 OK",
                "application/nostr+json",
                &nip11(&door.profile).to_string(),
                "",
            )
        } else {
            plain_response("200 OK", "relaysim: connect with a WebSocket client\n")
        };
        stream.write_all(&response).await?;
        return Ok(());
    }
    let identity = door
        .labels
        .get(&peer.ip())
        .cloned()
        .unwrap_or_else(|| peer.ip().to_string());
    let refusal = door
        .gate
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .refuses(door.index, &identity, Instant::now());
    if let Some(why) = refusal {
        let body = format!("{why}\n");
        stream
            .write_all(&http_response(
                "503 Service Unavailable",
                "text/plain",
                &body,
                "retry-after: 1\r\n",
            ))
            .await?;
        return Ok(());
    }
    // Frames over the profile's message limit are refused before they are read whole, as
    // the real relays' WebSocket libraries do; the world applies the profile's reaction.
    let limit = door
        .profile
        .max_message_bytes
        .unwrap_or(DEFAULT_FRAME_LIMIT);
    // Small socket buffers (tungstenite's default is 128 KiB each way): thousands of
    // connections must fit the memory bound; frames larger than a buffer still arrive whole.
    let ws_config = WebSocketConfig::default()
        .max_message_size(Some(limit))
        .max_frame_size(Some(limit))
        .read_buffer_size(16 << 10)
        .write_buffer_size(16 << 10);
    let upgrade =
        tokio_tungstenite::accept_async_with_config(Prefixed::new(head, stream), Some(ws_config));
    let ws = tokio::time::timeout_at(deadline, upgrade)
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)?
        .map_err(std::io::Error::other)?;
    slot.activity.upgraded();
    let (mut sink, mut source) = ws.split();
    let (out_tx, mut out_rx) = Outbox::new(door.queues.clone());
    let (kill_tx, mut kill) = oneshot::channel::<()>();
    let pings = out_tx.downgrade();
    let open = Inbound::Open {
        relay: door.index,
        conn,
        ip: peer.ip(),
        out: out_tx,
        kill: kill_tx,
    };
    if inbound.send(open).await.is_err() {
        return Ok(());
    }
    let mut writer = tokio::spawn(async move {
        // Each message's bytes are given back when its `Queued` drops: after the write, or
        // unsent when this task ends.
        while let Some(mut queued) = out_rx.recv().await {
            let Some(m) = queued.take() else { continue };
            let close = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() || close {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let credits = Arc::new(Semaphore::new(INBOUND_CREDIT_KIB));
    let reserve = Arc::new(Semaphore::new(RESERVED_CREDIT_KIB));
    let mut killable = true;
    let mut keepalive = door
        .profile
        .keepalive
        .map(|k| Keepalive::new(k, door.started));
    loop {
        // `biased`, in this order: a cut-off is acted on even while a client floods, and a
        // frame already read (a pong) counts before a keepalive tick that came due while the
        // loop waited for credit judges the client silent.
        let frame = tokio::select! {
            biased;
            // The world cut this connection off: drop the socket now, unsent backlog and all.
            killed = &mut kill, if killable => match killed {
                Ok(()) => {
                    writer.abort();
                    return Ok(());
                }
                // The world let go of the connection the ordinary way (a close is queued).
                Err(_) => {
                    killable = false;
                    continue;
                }
            },
            frame = source.next() => frame,
            // A fresh client took this idle socket's slot (`slots`): the socket goes now, and
            // the world hears it closed.
            () = slot.activity.evicted() => {
                writer.abort();
                break;
            }
            () = Keepalive::tick(&mut keepalive) => {
                let k = keepalive.as_mut().expect("ticks only when there is a keepalive");
                if k.silent() {
                    // Terminated, as the real relays do: the socket goes, no close frame.
                    let _ = inbound.send(Inbound::Silent { conn }).await;
                    writer.abort();
                    break;
                }
                // A ping that does not fit the outbox is as good as unanswered.
                if let Some(out) = pings.upgrade() {
                    let _ = out.push(Outgoing::Message(Message::Ping(Default::default())));
                }
                continue;
            }
        };
        let Some(frame) = frame else { break };
        if let Some(k) = keepalive.as_mut() {
            k.heard(matches!(frame, Ok(Message::Pong(_))));
        }
        let text = match frame {
            Ok(Message::Text(t)) => t.to_string(),
            // A binary frame is not NIP-01: the world answers it as unparseable.
            Ok(Message::Binary(_)) => String::new(),
            Err(tokio_tungstenite::tungstenite::Error::Capacity(e)) => {
                let size = match e {
                    CapacityError::MessageTooLong { size, .. } => size,
                    CapacityError::TooManyHeaders => 0,
                };
                let _ = inbound.send(Inbound::Oversize { conn, size }).await;
                break;
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        // Flow control: a connection has at most INBOUND_CREDIT_KIB KiB of frames waiting for
        // the world, so a flood from one client neither piles up in memory nor fills the
        // world's queue ahead of everyone else; its socket simply stops being read.
        // A frame larger than the connection's credit takes all of it, but the server's share
        // counts its whole size, so the server's bound holds for any frame.
        let kib = parsed_weight(&text) / 1024 + 1;
        let small = (kib <= RESERVED_CREDIT_KIB)
            .then(|| reserve.clone().try_acquire_many_owned(kib as u32).ok())
            .flatten();
        let credit = match small {
            Some(reserved) => Credit::reserved(reserved),
            None => {
                let mine = kib.min(INBOUND_CREDIT_KIB) as u32;
                let Ok(connection) = credits.clone().acquire_many_owned(mine).await else {
                    break;
                };
                let ours = kib.min(SERVER_INBOUND_CREDIT_KIB) as u32;
                let Ok(server) = door.inbound_credit.clone().acquire_many_owned(ours).await else {
                    break;
                };
                Credit::new(connection, server)
            }
        };
        let parsed = Parsed::frame(&text, door.profile.max_filters);
        slot.activity.heard(matches!(
            parsed,
            Parsed::Message(ClientMessage::Req { .. }) | Parsed::TooManyFilters
        ));
        let keep = door.keep_text;
        let frame = Inbound::Text {
            conn,
            bytes: text.len(),
            text: keep.then_some(text),
            parsed,
            credit,
        };
        if inbound.send(frame).await.is_err() {
            break;
        }
    }
    let _ = inbound.send(Inbound::Closed { conn }).await;
    // Let the writer send what the world queued (an oversize NOTICE, a close) before going.
    if tokio::time::timeout(Duration::from_secs(1), &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{first_ping, parsed_weight};
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn pings_on_the_relay_s_clock_come_at_its_next_tick_others_a_period_after_opening() {
        let started = Instant::now();
        let every = Duration::from_secs(55);
        let s = Duration::from_secs;
        // Opened 100 s into the relay's life: its ticks are at 55, 110, 165 s.
        assert_eq!(
            first_ping(started + s(100), started, every, true),
            started + s(110)
        );
        // Exactly on a tick: the next one, not now.
        assert_eq!(
            first_ping(started + s(110), started, every, true),
            started + s(165)
        );
        assert_eq!(first_ping(started, started, every, true), started + s(55));
        assert_eq!(
            first_ping(started + s(100), started, every, false),
            started + s(155)
        );
    }

    #[test]
    fn a_frame_weighs_its_text_and_its_strings_not_escaped_quotes() {
        let many_values = r##"["REQ","s",{"#t":["a","b","c"]}]"##;
        assert_eq!(parsed_weight(many_values), many_values.len() + 6 * 48);
        let escape_heavy = r#"["EVENT",{"content":"\"\"\"\\"}]"#;
        assert_eq!(parsed_weight(escape_heavy), escape_heavy.len() + 3 * 48);
    }
}
