//! Hostile clients against a real `relaysim serve` process on loopback: each attack of the
//! bounds issue runs for a few seconds from many addresses while the relay's resident memory
//! is sampled from `/proc` and a fresh, well-behaved client keeps asking for a subscription.
//! The relay must stay under [`RSS_BOUND`] and keep answering the fresh client.
//!
//! Counts and times are small here so the suite stays quick; the documented long run is
//!
//! ```text
//! HOSTILE_CONNECTIONS=1000 HOSTILE_SECS=60 cargo test --release --test it hostile::long -- --ignored --nocapture
//! ```
//!
//! which mixes every attack over 1,000 connections and prints the peak memory and the
//! slowest answer to a fresh client. `HOSTILE_SERVE_WRAPPER=heaptrack` (or any command that
//! takes the relay's command line) runs the relay under a profiler.

use futures_util::{SinkExt, StreamExt};
use relaysim::nip01::Identity;
use relaysim::peer::event::CONTEXTVM_KIND;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// What `relaysim serve` may hold resident under any attack here.
const RSS_BOUND: u64 = 512 << 20;

type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

/// A `relaysim serve` child, killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(profile: &str) -> Served {
    // HOSTILE_SERVE_WRAPPER runs the relay under a profiler (e.g. `heaptrack`).
    let bin = env!("CARGO_BIN_EXE_relaysim");
    let mut command = match std::env::var("HOSTILE_SERVE_WRAPPER") {
        Ok(wrapper) => {
            let mut c = Command::new(wrapper);
            c.arg(bin);
            c
        }
        Err(_) => Command::new(bin),
    };
    let mut child = command
        .args(["serve", "--profile", profile, "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("relaysim serve starts");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            let url = l.split_whitespace().find(|w| w.starts_with("ws://"))?;
            url.trim_start_matches("ws://").parse().ok()
        })
        .expect("serve prints its address");
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Served { child, addr }
}

/// The child's resident set now, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Loopback address number `i` (127.0.1.0 upwards): attackers spread over many addresses,
/// so the per-address share does not stop them at the door.
fn attacker(i: usize) -> IpAddr {
    IpAddr::from([127, 0, 1 + (i / 250) as u8, (i % 250) as u8 + 1])
}

async fn tcp_from(from: IpAddr, addr: SocketAddr) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(from, 0)).ok()?;
    tokio::time::timeout(Duration::from_secs(5), socket.connect(addr))
        .await
        .ok()?
        .ok()
}

async fn ws_from(from: IpAddr, addr: SocketAddr) -> Option<Ws> {
    let stream = tcp_from(from, addr).await?;
    let handshake = tokio_tungstenite::client_async(format!("ws://{addr}"), stream);
    let (ws, _) = tokio::time::timeout(Duration::from_secs(5), handshake)
        .await
        .ok()?
        .ok()?;
    Some(ws)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The attacks.
#[derive(Debug, Clone, Copy)]
enum Attack {
    /// REQs as large as a frame may be (strfry: 128 KiB of ids), as many as the relay keeps.
    HugeReqs,
    /// Subscribed to everything, never reading, while others publish 60 KB events.
    NeverRead,
    /// Publishing 60 KB ephemeral events as fast as the relay answers (the store fills).
    StoreFlood,
    /// A REQ for everything stored, again and again, read promptly.
    ReplayStore,
    /// The HTTP head, one byte a second.
    SlowHead,
    /// Upgraded, then silent.
    Idle,
    /// Subscription ids of 100 KB.
    LongSubIds,
}

const ALL: [Attack; 7] = [
    Attack::HugeReqs,
    Attack::NeverRead,
    Attack::StoreFlood,
    Attack::ReplayStore,
    Attack::SlowHead,
    Attack::Idle,
    Attack::LongSubIds,
];

/// One attacking connection, looping (reconnecting when refused or closed) until `stop`.
async fn attack(kind: Attack, i: usize, addr: SocketAddr, stop: Arc<AtomicBool>) {
    let from = attacker(i);
    while !stop.load(Ordering::Relaxed) {
        match kind {
            Attack::SlowHead => {
                let Some(mut tcp) = tcp_from(from, addr).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                for b in b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n".iter() {
                    if stop.load(Ordering::Relaxed) || tcp.write_all(&[*b]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            _ => {
                let Some(ws) = ws_from(from, addr).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                connected(kind, i, ws, &stop).await;
            }
        }
    }
}

/// What an attacker does on an open WebSocket, until it closes or `stop`.
async fn connected(kind: Attack, i: usize, ws: Ws, stop: &AtomicBool) {
    let (mut tx, mut rx) = ws.split();
    let author = Identity::derive(i as u64, "attacker");
    let reads = !matches!(kind, Attack::NeverRead | Attack::Idle);
    let drain = tokio::spawn(async move {
        if reads {
            while let Some(Ok(_)) = rx.next().await {}
        } else {
            // Hold the socket without reading a byte.
            std::future::pending::<()>().await;
            drop(rx);
        }
    });
    // Built once: the attacker's own CPU should go to sending, not to formatting, since it
    // shares the machine with the relay it attacks.
    let ids: Vec<String> = (0..1900).map(|k| format!("\"{:064x}\"", k + i)).collect();
    let ids = ids.join(",");
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) && !drain.is_finished() {
        n += 1;
        let frame = match kind {
            Attack::HugeReqs => format!(r#"["REQ","h{}",{{"ids":[{ids}]}}]"#, n % 300),
            Attack::NeverRead if n == 1 => r#"["REQ","all",{"kinds":[25910]}]"#.to_owned(),
            Attack::NeverRead | Attack::Idle => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Attack::StoreFlood => {
                let e = author.sign(CONTEXTVM_KIND, unix_now(), vec![], format!("{n:>60000}"));
                format!("[\"EVENT\",{}]", e.as_json())
            }
            Attack::ReplayStore => format!(r#"["REQ","r{}",{{"kinds":[25910]}}]"#, n % 10),
            Attack::LongSubIds => format!(r#"["REQ","{}",{{"kinds":[1]}}]"#, "s".repeat(100_000)),
            Attack::SlowHead => unreachable!("handled before the upgrade"),
        };
        if tx.send(Message::text(frame)).await.is_err() {
            break;
        }
        if matches!(kind, Attack::StoreFlood | Attack::ReplayStore) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    drain.abort();
}

/// A well-behaved client from its own address: connect, subscribe, wait for EOSE. How long it
/// took to open its WebSocket and in all, or `None` when it got no EOSE within 10 s.
async fn fresh_client(addr: SocketAddr, n: u64) -> Option<(Duration, Duration)> {
    let started = Instant::now();
    let mut ws = ws_from(IpAddr::from([127, 0, 0, 200]), addr).await?;
    let connected = started.elapsed();
    let req = format!(r#"["REQ","fresh{n}",{{"kinds":[1],"limit":1}}]"#);
    ws.send(Message::text(req)).await.ok()?;
    let eose = async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m {
                if t.as_str().starts_with("[\"EOSE\"") {
                    return Some(());
                }
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(10), eose)
        .await
        .ok()??;
    let _ = ws.close(None).await;
    Some((connected, started.elapsed()))
}

/// What one hostile run measured.
#[derive(Debug)]
struct Measured {
    peak_rss: u64,
    fresh_clients: usize,
    slowest_fresh: Duration,
    /// Of which the WebSocket handshake (the rest is the REQ's way through the relay).
    slowest_handshake: Duration,
    unanswered: usize,
}

/// Runs `attacks` over `connections` connections (spread evenly) for `secs` seconds against a
/// fresh `serve --profile profile`, with a legitimate publisher, and measures.
async fn hostile(profile: &str, attacks: &[Attack], connections: usize, secs: u64) -> Measured {
    let served = serve(profile);
    let pid = served.child.id();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..connections {
        let kind = attacks[i % attacks.len()];
        tasks.push(tokio::spawn(attack(kind, i, served.addr, stop.clone())));
    }
    // A legitimate publisher of 60 KB events, reading its OKs: what a non-reader piles up.
    tasks.push(tokio::spawn(attack(
        Attack::StoreFlood,
        connections + 1,
        served.addr,
        stop.clone(),
    )));
    let mut m = Measured {
        peak_rss: 0,
        fresh_clients: 0,
        slowest_fresh: Duration::ZERO,
        slowest_handshake: Duration::ZERO,
        unanswered: 0,
    };
    let end = Instant::now() + Duration::from_secs(secs);
    let mut n = 0;
    while Instant::now() < end {
        n += 1;
        m.peak_rss = m.peak_rss.max(rss(pid));
        match fresh_client(served.addr, n).await {
            Some((handshake, t)) => {
                m.fresh_clients += 1;
                m.slowest_fresh = m.slowest_fresh.max(t);
                m.slowest_handshake = m.slowest_handshake.max(handshake);
            }
            None => m.unanswered += 1,
        }
        m.peak_rss = m.peak_rss.max(rss(pid));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.abort();
    }
    m.peak_rss = m.peak_rss.max(rss(pid));
    m
}

fn check(what: &str, m: &Measured) {
    eprintln!("{what}: {m:?}");
    assert!(m.peak_rss > 0, "{what}: no memory reading");
    assert!(m.peak_rss < RSS_BOUND, "{what}: {m:?}");
    assert!(
        m.fresh_clients > 0,
        "{what}: no fresh client was served: {m:?}"
    );
    assert_eq!(m.unanswered, 0, "{what}: {m:?}");
}

macro_rules! one_attack {
    ($name:ident, $attack:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let m = hostile("strfry", &[$attack], 60, 4).await;
            check(stringify!($name), &m);
        }
    };
}

one_attack!(huge_reqs_stay_bounded, Attack::HugeReqs);
one_attack!(readers_that_never_read_stay_bounded, Attack::NeverRead);
one_attack!(a_store_flood_stays_bounded, Attack::StoreFlood);
one_attack!(replaying_the_store_stays_bounded, Attack::ReplayStore);
one_attack!(slow_heads_do_not_lock_out_others, Attack::SlowHead);
one_attack!(idle_sockets_do_not_lock_out_others, Attack::Idle);
one_attack!(long_subscription_ids_stay_bounded, Attack::LongSubIds);

/// The long run: every attack over many connections (env
/// `HOSTILE_CONNECTIONS`, default 1,000) for `HOSTILE_SECS` (default 60).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a minute of load; run by hand (see the module docs)"]
async fn long() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let connections = env("HOSTILE_CONNECTIONS", 1000) as usize;
    let secs = env("HOSTILE_SECS", 60);
    let m = hostile("strfry", &ALL, connections, secs).await;
    check("every attack", &m);
}
