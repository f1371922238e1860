//! The recording proxy: a transparent WebSocket proxy in front of any relay that writes what
//! crosses it, both ways, as a trace (driver `live`). Events are stored whole, so
//! `relaysim replay --mode inject` feeds the recorded deliveries to relaysim's receivers.

use crate::trace::{EventsMode, Line, ScenarioOrigin, FORMAT};
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// How the recording proxy runs.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    /// Where clients connect.
    pub listen: SocketAddr,
    /// The relay behind the proxy (`ws://...`).
    pub upstream: String,
    /// The trace file.
    pub out: PathBuf,
}

/// A message that crossed a live relay or proxy, for the trace writer.
pub(crate) enum Seen {
    /// Client → relay.
    FromClient { client: u64, text: String },
    /// Relay → client.
    FromRelay { client: u64, text: String },
}

/// What feeds a live trace: `Some` per message, `None` to close it.
pub(crate) type TraceFeed = mpsc::UnboundedSender<Option<(Instant, Seen)>>;

/// Writes the header of a live trace to `out` and starts the task that writes the rest;
/// returns the feed and the task (which yields the number of lines written).
/// `scenario` names what is recorded; `origin`, when relaysim's own peers ran a scenario
/// (the turmoil engine), is written whole so the trace can be schedule-replayed.
pub(crate) fn start_trace(
    out: &std::path::Path,
    scenario: String,
    origin: Option<&ScenarioOrigin>,
    relay: String,
    start: Instant,
) -> std::io::Result<(TraceFeed, tokio::task::JoinHandle<std::io::Result<u64>>)> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let header = Line::Header {
        format: FORMAT,
        relaysim: env!("CARGO_PKG_VERSION").into(),
        scenario: origin.map_or(scenario, |o| o.name.clone()),
        scenario_hash: origin.map(|o| o.hash.clone()).unwrap_or_default(),
        seed: origin.map_or(0, |o| o.seed),
        driver: "live".into(),
        events: EventsMode::Full,
        suppressed_outages: Vec::new(),
        shrunk: None,
        scenario_toml: origin.map(|o| o.toml.clone()).unwrap_or_default(),
    };
    writeln!(
        file,
        "{}",
        serde_json::to_string(&header).map_err(std::io::Error::other)?
    )?;
    let (tx, rx) = mpsc::unbounded_channel();
    Ok((tx, tokio::spawn(write_lines(file, relay, start, rx))))
}

/// A running recording proxy.
pub struct Recorder {
    /// The address clients connect to.
    pub local_addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<u64>>,
}

impl Recorder {
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
    let listener = TcpListener::bind(config.listen).await?;
    let local_addr = listener.local_addr()?;
    let (seen_tx, writer) = start_trace(
        &config.out,
        format!("recording of {}", config.upstream),
        None,
        "upstream".into(),
        Instant::now(),
    )?;
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    let upstream = config.upstream.clone();
    let task = tokio::spawn(async move {
        accept(listener, upstream, seen_tx, shutdown_rx).await;
        writer.await.map_err(std::io::Error::other)?
    });
    Ok(Recorder {
        local_addr,
        shutdown: Some(shutdown_tx),
        task,
    })
}

async fn accept(
    listener: TcpListener,
    upstream: String,
    seen: mpsc::UnboundedSender<Option<(Instant, Seen)>>,
    mut shutdown: oneshot::Receiver<()>,
) {
    let mut next = 0u64;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let client = next;
                next += 1;
                let seen = seen.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(downstream) = tokio_tungstenite::accept_async(stream).await else { return };
                    let Ok((relay, _)) = tokio_tungstenite::connect_async(upstream.as_str()).await else { return };
                    let (mut to_client, mut from_client) = downstream.split();
                    let (mut to_relay, mut from_relay) = relay.split();
                    let seen_up = seen.clone();
                    let up = async {
                        while let Some(Ok(m)) = from_client.next().await {
                            if let Message::Text(t) = &m {
                                let _ = seen_up.send(Some((Instant::now(), Seen::FromClient { client, text: t.to_string() })));
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
                                let _ = seen.send(Some((Instant::now(), Seen::FromRelay { client, text: t.to_string() })));
                            }
                            let close = matches!(m, Message::Close(_));
                            if to_client.send(m).await.is_err() || close {
                                break;
                            }
                        }
                    };
                    tokio::select! { _ = up => {}, _ = down => {} }
                });
            }
        }
    }
    let _ = seen.send(None);
}

async fn write_lines(
    mut file: std::io::BufWriter<std::fs::File>,
    relay: String,
    start: Instant,
    mut seen: mpsc::UnboundedReceiver<Option<(Instant, Seen)>>,
) -> std::io::Result<u64> {
    let mut published: BTreeMap<String, u64> = BTreeMap::new();
    let mut lines = 1u64;
    let mut last = 0u64;
    // `None` marks the end: the proxy stopped (connections may still be open).
    while let Some(Some((at, s))) = seen.recv().await {
        // Times never go backwards in a trace, even if two tasks raced to report.
        let t = (at.saturating_duration_since(start).as_micros() as u64).max(last);
        last = t;
        let mut out: Vec<Line> = Vec::new();
        match s {
            Seen::FromClient { client, text } => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                if v[0] == "EVENT" {
                    let mut event = v[1].clone();
                    crate::peer::streams::redact_event_json(&mut event);
                    let id = event["id"].as_str().unwrap_or_default().to_owned();
                    published.entry(id.clone()).or_insert(t);
                    out.push(Line::Published {
                        t,
                        peer: format!("client-{client}"),
                        relay: relay.clone(),
                        id,
                        bytes: event.to_string().len(),
                        event: Some(event),
                    });
                }
            }
            Seen::FromRelay { client, text } => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                let peer = format!("client-{client}");
                match v[0].as_str() {
                    Some("EVENT") => {
                        let mut event = v[2].clone();
                        crate::peer::streams::redact_event_json(&mut event);
                        let id = event["id"].as_str().unwrap_or_default().to_owned();
                        // An event published elsewhere: store it so inject replay has its body.
                        let first = *published.entry(id.clone()).or_insert_with(|| {
                            out.push(Line::Published {
                                t,
                                peer: "external".into(),
                                relay: relay.clone(),
                                id: id.clone(),
                                bytes: event.to_string().len(),
                                event: Some(event.clone()),
                            });
                            t
                        });
                        out.push(Line::Delivered {
                            t,
                            relay: relay.clone(),
                            peer,
                            id,
                            latency_us: t - first,
                            reordered: false,
                            duplicate: false,
                            via: None,
                        });
                    }
                    Some("OK") => out.push(Line::Verdict {
                        t,
                        relay: relay.clone(),
                        peer,
                        id: v[1].as_str().unwrap_or_default().to_owned(),
                        accepted: v[2].as_bool().unwrap_or(false),
                        message: v[3].as_str().unwrap_or_default().to_owned(),
                    }),
                    Some("NOTICE") => out.push(Line::Notice {
                        t,
                        relay: relay.clone(),
                        peer,
                        message: v[1].as_str().unwrap_or_default().to_owned(),
                    }),
                    _ => {}
                }
            }
        }
        for line in out {
            writeln!(
                file,
                "{}",
                serde_json::to_string(&line).map_err(std::io::Error::other)?
            )?;
            lines += 1;
        }
    }
    let summary = Line::Summary {
        outcomes: Vec::new(),
        integrity_violations: 0,
        completion_ratio: 1.0,
    };
    writeln!(
        file,
        "{}",
        serde_json::to_string(&summary).map_err(std::io::Error::other)?
    )?;
    file.flush()?;
    Ok(lines + 1)
}
