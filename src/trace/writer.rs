//! The trace writer: an observer of the world that turns each observation into a line.

use super::*;
use crate::peer::client::ClientEvent;
use crate::sim::world::{Observation, Observer, SubscriptionStep, Way};
use crate::stats::{Outcome, RunReport};

fn us(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

fn way_name(way: Way) -> String {
    match way {
        Way::Up => "up".into(),
        Way::Down => "down".into(),
        Way::Intake => "intake".into(),
        Way::Publish => "publish".into(),
    }
}

/// The short text a trace uses for a client event.
pub fn client_event_text(event: &ClientEvent) -> (u64, String) {
    match event {
        ClientEvent::Initialized { .. } => (0, "initialized".into()),
        ClientEvent::Response {
            call,
            response: Ok(_),
        } => (*call, "response-ok".into()),
        ClientEvent::Response {
            call,
            response: Err(e),
        } => (*call, format!("response-error:{}", e.code)),
        ClientEvent::StreamOpened { call } => (*call, "stream-opened".into()),
        ClientEvent::StreamEnded {
            call,
            outcome: Ok(()),
        } => (*call, "stream-ended-ok".into()),
        ClientEvent::StreamEnded {
            call,
            outcome: Err(f),
        } => (*call, format!("stream-ended:{}", f.cause())),
        ClientEvent::Failed { call, failure } => (*call, format!("failed:{}", failure.cause())),
        ClientEvent::StreamResumed { call, .. } => (*call, "stream-resumed".into()),
    }
}

/// Names of the world's relays and peers, for trace lines (the same names the statistics'
/// explanations use).
pub use crate::stats::why::Names;

/// Writes trace lines as the world runs.
#[derive(Debug)]
pub struct TraceWriter {
    names: Names,
    events: EventsMode,
    text: String,
}

impl TraceWriter {
    /// A writer that starts with `header`.
    pub fn new(header: &Line, names: Names, events: EventsMode) -> Self {
        let mut w = TraceWriter {
            names,
            events,
            text: String::new(),
        };
        w.push(header);
        w
    }

    fn push(&mut self, line: &Line) {
        self.text
            .push_str(&serde_json::to_string(line).expect("trace lines serialize"));
        self.text.push('\n');
    }

    /// Appends the summary and returns the whole trace.
    pub fn finish(mut self, report: &RunReport, workloads: &[String]) -> String {
        let outcomes = report
            .items
            .iter()
            .map(|i| OutcomeLine {
                workload: workloads.get(i.workload).cloned().unwrap_or_default(),
                client: self.names.client(i.client),
                call: i.call,
                tool: i.tool.to_owned(),
                outcome: match &i.outcome {
                    Outcome::Completed => "completed".into(),
                    Outcome::Failed(c) => format!("failed:{c}"),
                },
                why: i.why.clone(),
                started_us: None,
                ended_us: None,
            })
            .collect();
        let total = report.items.len();
        let done = report
            .items
            .iter()
            .filter(|i| i.outcome == Outcome::Completed)
            .count();
        let summary = Line::Summary {
            outcomes,
            integrity_violations: report.integrity_violations,
            completion_ratio: Some(if total == 0 {
                1.0
            } else {
                done as f64 / total as f64
            }),
            dropped: 0,
        };
        self.push(&summary);
        self.text
    }
}

impl Observer for TraceWriter {
    /// Only a trace that stores events whole reads their JSON.
    fn wants_event_json(&self) -> bool {
        matches!(self.events, EventsMode::Full)
    }

    fn observe(&mut self, at: Duration, o: &Observation) {
        let t = us(at);
        let n = &self.names;
        let line = match o {
            Observation::Published {
                peer,
                relay,
                event,
                bytes,
                json,
            } => Line::Published {
                t,
                peer: n.peer(*peer),
                relay: n.relay(*relay),
                id: event.to_hex(),
                bytes: *bytes,
                event: match self.events {
                    EventsMode::Full => json
                        .as_deref()
                        .and_then(|json| serde_json::from_str(json).ok())
                        .map(|mut e: serde_json::Value| {
                            crate::peer::streams::redact_event_json(&mut e);
                            e
                        }),
                    EventsMode::Ids => None,
                },
            },
            Observation::LinkPlan {
                relay,
                peer,
                way,
                seq,
                event,
                delays,
            } => Line::Link {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                way: way_name(*way),
                seq: *seq,
                event: *event,
                delays_us: delays.iter().map(|d| us(*d)).collect(),
            },
            Observation::Verdict {
                relay,
                peer,
                event,
                accepted,
                message,
            } => Line::Verdict {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                id: event.to_hex(),
                accepted: *accepted,
                message: message.clone(),
            },
            Observation::Withheld {
                relay,
                peer,
                event,
                reason,
            } => Line::Withheld {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                id: event.to_hex(),
                reason: (*reason).into(),
            },
            Observation::Notice {
                relay,
                peer,
                message,
            } => Line::Notice {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                message: message.clone(),
            },
            Observation::Auth {
                relay,
                peer,
                challenge,
            } => Line::Auth {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                challenge: challenge.clone(),
            },
            Observation::Delivered {
                relay,
                peer,
                event,
                latency,
                reordered,
                duplicate,
                via,
            } => Line::Delivered {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                id: event.to_hex(),
                latency_us: us(*latency),
                reordered: *reordered,
                duplicate: *duplicate,
                via: via.map(|v| v.name().to_owned()),
            },
            Observation::Lost {
                relay,
                peer,
                way,
                event,
            } => Line::Lost {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                way: way_name(*way),
                id: event.map(|e| e.to_hex()),
            },
            Observation::Duplicated {
                relay,
                peer,
                way,
                copies,
            } => Line::Duplicated {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                way: way_name(*way),
                copies: *copies,
            },
            Observation::Disconnected {
                relay,
                peer,
                reason,
            } => Line::Disconnected {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
                reason: (*reason).into(),
            },
            Observation::Connected { relay, peer } => Line::Connected {
                t,
                relay: n.relay(*relay),
                peer: n.peer(*peer),
            },
            Observation::Subscription {
                relay,
                peer,
                sub,
                step,
            } => {
                let (relay, peer, sub) = (n.relay(*relay), n.peer(*peer), sub.clone());
                match step {
                    SubscriptionStep::Requested { filter } => Line::Req {
                        t,
                        peer,
                        relay,
                        sub,
                        filters: vec![filter.clone()],
                    },
                    SubscriptionStep::Ended => Line::Close {
                        t,
                        peer,
                        relay,
                        sub,
                    },
                    SubscriptionStep::StoredSent => Line::Eose {
                        t,
                        relay,
                        peer,
                        sub,
                    },
                    SubscriptionStep::Refused { message } => Line::Closed {
                        t,
                        relay,
                        peer,
                        sub,
                        message: message.clone(),
                    },
                }
            }
            Observation::Outage {
                index,
                relay,
                peer,
                kind,
                duration,
                suppressed,
            } => Line::Outage {
                t,
                index: *index,
                relay: n.relay(*relay),
                peer: peer.map(|p| n.peer(p)),
                kind: (*kind).into(),
                duration_us: us(*duration),
                suppressed: *suppressed,
            },
            Observation::Called {
                client,
                call,
                workload,
                tool,
                ..
            } => Line::Called {
                t,
                client: n.client(*client),
                call: *call,
                workload: *workload,
                tool: (*tool).into(),
            },
            // Totals, not events: reports carry them; a replay recomputes them.
            // Both follow from what the trace records: replaying it observes them again.
            Observation::StreamStore { .. } | Observation::ServerFailed { .. } => return,
            Observation::Logged { peer, text } => Line::Logged {
                t,
                peer: n.peer(*peer),
                text: text.clone(),
            },
            Observation::ChunkWritten {
                client,
                call,
                index,
            } => Line::ChunkWritten {
                t,
                client: n.client(*client),
                call: *call,
                index: *index,
            },
            Observation::ChunkRead {
                client,
                call,
                index,
                bytes,
                intact,
            } => Line::ChunkRead {
                t,
                client: n.client(*client),
                call: *call,
                index: *index,
                bytes: *bytes,
                intact: *intact,
            },
            Observation::Client { client, event } => {
                let (call, event) = client_event_text(event);
                Line::Client {
                    t,
                    client: n.client(*client),
                    call,
                    event,
                }
            }
        };
        self.push(&line);
    }
}
