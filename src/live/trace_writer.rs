//! The live trace writer: what `relaysim serve` and `relaysim record` saw, as trace lines
//! (driver `live`). Events are stored whole, so `relaysim replay --mode inject` feeds the
//! recorded deliveries to relaysim's receivers.

use crate::sim::order::{Arrival, OrderTracker, SentCopy};
use crate::trace::{EventsMode, Line, ScenarioOrigin, FORMAT};
use nostr::prelude::EventId;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What happened at a live relay or proxy, for the trace writer.
#[derive(Clone)]
pub(crate) enum Seen {
    /// Client → relay.
    FromClient {
        relay: String,
        peer: String,
        text: String,
    },
    /// Relay → client; `arrival` says whether a delivered event was reordered or a duplicate
    /// and why, `latency_us` how long after its first publication it arrived.
    FromRelay {
        relay: String,
        peer: String,
        text: String,
        arrival: Option<Arrival>,
        latency_us: Option<u64>,
    },
    /// A connection came up.
    Connected { relay: String, peer: String },
    /// A connection went down.
    Disconnected {
        relay: String,
        peer: String,
        reason: String,
    },
    /// A datagram-mode link lost an event.
    Lost {
        relay: String,
        peer: String,
        way: String,
        id: Option<String>,
    },
    /// A datagram-mode link duplicated an event.
    Duplicated {
        relay: String,
        peer: String,
        way: String,
        copies: usize,
    },
    /// A peer of a live run made a workload call (relaysim's own peers tell the traces of the
    /// relays they serve, so `show` can draw the call).
    Called {
        client: String,
        call: u64,
        workload: usize,
        tool: String,
    },
    /// What a live run's client reported about a call.
    ClientReport {
        client: String,
        call: u64,
        event: String,
    },
    /// An outage began.
    Outage {
        index: u64,
        relay: String,
        peer: Option<String>,
        kind: String,
        duration_us: u64,
    },
}

/// Observations waiting for the trace writer, at most.
const FEED_CAPACITY: usize = 65_536;

/// What feeds a live trace, bounded: the proxy waits for room (back-pressure on the traffic it
/// records); the relay's world never waits and counts what did not fit, and the count is
/// written in the trace's summary line.
#[derive(Clone)]
pub(crate) struct TraceFeed {
    tx: mpsc::Sender<Option<(Instant, Seen)>>,
    dropped: Arc<AtomicU64>,
}

impl TraceFeed {
    /// Hands `seen` to the writer, waiting for room.
    pub(super) async fn send(&self, at: Instant, seen: Seen) {
        let _ = self.tx.send(Some((at, seen))).await;
    }

    /// Hands `seen` to the writer if there is room; counts it as dropped if not.
    pub(crate) fn offer(&self, at: Instant, seen: Seen) {
        if self.tx.try_send(Some((at, seen))).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Tells the writer to finish: the summary line, then flush.
    pub(super) async fn close(&self) {
        let _ = self.tx.send(None).await;
    }
}

/// Writes the header of a live trace to `out` and starts the task that writes the rest;
/// returns the feed and the task (which yields the number of lines written).
/// `scenario` names what is recorded; `origin`, when relaysim's own peers ran a scenario
/// (the turmoil engine), is written whole so the trace can be schedule-replayed.
pub(crate) fn start_trace(
    out: &std::path::Path,
    scenario: String,
    origin: Option<&ScenarioOrigin>,
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
    let (tx, rx) = mpsc::channel(FEED_CAPACITY);
    let dropped = Arc::new(AtomicU64::new(0));
    let feed = TraceFeed {
        tx,
        dropped: dropped.clone(),
    };
    Ok((feed, tokio::spawn(write_lines(file, start, rx, dropped))))
}

async fn write_lines(
    mut file: std::io::BufWriter<std::fs::File>,
    start: Instant,
    mut seen: mpsc::Receiver<Option<(Instant, Seen)>>,
    dropped: Arc<AtomicU64>,
) -> std::io::Result<u64> {
    let mut published: BTreeMap<String, u64> = BTreeMap::new();
    // The proxy cannot see inside the relay: it marks reordered and duplicate deliveries
    // itself, without a mechanism (the relay's own world marks them with one).
    let mut order: OrderTracker<u32> = OrderTracker::default();
    let mut ordinals: BTreeMap<String, u32> = BTreeMap::new();
    let mut ordinal = |name: String| {
        let next = ordinals.len() as u32;
        *ordinals.entry(name).or_insert(next)
    };
    let mut lines = 1u64;
    let mut last = 0u64;
    // `None` marks the end: the proxy stopped (connections may still be open).
    while let Some(Some((at, s))) = seen.recv().await {
        // Times never go backwards in a trace, even if two tasks raced to report.
        let t = (at.saturating_duration_since(start).as_micros() as u64).max(last);
        last = t;
        let mut out: Vec<Line> = Vec::new();
        match s {
            Seen::FromClient { relay, peer, text } => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                if v[0] == "EVENT" {
                    let mut event = v[1].clone();
                    crate::peer::streams::redact_event_json(&mut event);
                    let id = event["id"].as_str().unwrap_or_default().to_owned();
                    published.entry(id.clone()).or_insert(t);
                    if let (Ok(event_id), Some(author)) =
                        (EventId::from_hex(&id), event["pubkey"].as_str())
                    {
                        let at = std::time::Duration::from_micros(t);
                        order.made(ordinal(format!("key:{author}")), event_id, at);
                    }
                    out.push(Line::Published {
                        t,
                        peer,
                        relay,
                        id,
                        bytes: event.to_string().len(),
                        event: Some(event),
                    });
                } else if v[0] == "REQ" {
                    let filters = v.as_array().map_or(&[][..], |a| a.get(2..).unwrap_or(&[]));
                    out.push(Line::Req {
                        t,
                        peer,
                        relay,
                        sub: v[1].as_str().unwrap_or_default().to_owned(),
                        filters: filters.to_vec(),
                    });
                } else if v[0] == "CLOSE" {
                    out.push(Line::Close {
                        t,
                        peer,
                        relay,
                        sub: v[1].as_str().unwrap_or_default().to_owned(),
                    });
                }
            }
            Seen::FromRelay {
                relay,
                peer,
                text,
                arrival,
                latency_us,
            } => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
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
                        let arrival = arrival.unwrap_or_else(|| {
                            let reader = ordinal(format!("peer:{peer}"));
                            match EventId::from_hex(&id) {
                                Ok(event_id) => Arrival {
                                    via: None,
                                    ..order.delivered(
                                        reader,
                                        0,
                                        (event_id, SentCopy::default()),
                                        false,
                                        false,
                                    )
                                },
                                Err(_) => Arrival {
                                    duplicate: false,
                                    reordered: false,
                                    via: None,
                                },
                            }
                        });
                        out.push(Line::Delivered {
                            t,
                            relay,
                            peer,
                            id,
                            latency_us: latency_us.unwrap_or(t - first),
                            reordered: arrival.reordered,
                            duplicate: arrival.duplicate,
                            via: arrival.via.map(|v| v.name().to_owned()),
                        });
                    }
                    Some("OK") => out.push(Line::Verdict {
                        t,
                        relay,
                        peer,
                        id: v[1].as_str().unwrap_or_default().to_owned(),
                        accepted: v[2].as_bool().unwrap_or(false),
                        message: v[3].as_str().unwrap_or_default().to_owned(),
                    }),
                    Some("NOTICE") => out.push(Line::Notice {
                        t,
                        relay,
                        peer,
                        message: v[1].as_str().unwrap_or_default().to_owned(),
                    }),
                    Some("AUTH") => out.push(Line::Auth {
                        t,
                        relay,
                        peer,
                        challenge: v[1].as_str().unwrap_or_default().to_owned(),
                    }),
                    Some("EOSE") => out.push(Line::Eose {
                        t,
                        relay,
                        peer,
                        sub: v[1].as_str().unwrap_or_default().to_owned(),
                    }),
                    Some("CLOSED") => out.push(Line::Closed {
                        t,
                        relay,
                        peer,
                        sub: v[1].as_str().unwrap_or_default().to_owned(),
                        message: v[2].as_str().unwrap_or_default().to_owned(),
                    }),
                    _ => {}
                }
            }
            Seen::Connected { relay, peer } => out.push(Line::Connected { t, relay, peer }),
            Seen::Called {
                client,
                call,
                workload,
                tool,
            } => out.push(Line::Called {
                t,
                client,
                call,
                workload,
                tool,
            }),
            Seen::ClientReport {
                client,
                call,
                event,
            } => out.push(Line::Client {
                t,
                client,
                call,
                event,
            }),
            Seen::Disconnected {
                relay,
                peer,
                reason,
            } => out.push(Line::Disconnected {
                t,
                relay,
                peer,
                reason,
            }),
            Seen::Lost {
                relay,
                peer,
                way,
                id,
            } => out.push(Line::Lost {
                t,
                relay,
                peer,
                way,
                id,
            }),
            Seen::Duplicated {
                relay,
                peer,
                way,
                copies,
            } => out.push(Line::Duplicated {
                t,
                relay,
                peer,
                way,
                copies,
            }),
            Seen::Outage {
                index,
                relay,
                peer,
                kind,
                duration_us,
            } => out.push(Line::Outage {
                t,
                index,
                relay,
                peer,
                kind,
                duration_us,
                suppressed: false,
            }),
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
        // The calls' outcomes are not known here: `trace::set_outcomes` adds them after.
        outcomes: Vec::new(),
        integrity_violations: 0,
        completion_ratio: None,
        dropped: dropped.load(Ordering::Relaxed),
    };
    writeln!(
        file,
        "{}",
        serde_json::to_string(&summary).map_err(std::io::Error::other)?
    )?;
    file.flush()?;
    Ok(lines + 1)
}
