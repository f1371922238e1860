//! The discrete-event world: relays with profiles and impairments, peers, workloads.

use relaysim::peer::client::ClientEvent;
use relaysim::peer::content::ContentClass;
use relaysim::peer::server::ServerConfig;
use relaysim::peer::tools::ToolCall;
use relaysim::protocol::open_stream::StreamFailure;
use relaysim::relay::impair::{Delay, Direction, Outage, OutageKind};
use relaysim::relay::RelayProfile;
use relaysim::sim::world::{Call, Observation, Recorder, World};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

fn world(seed: u64, profile: RelayProfile) -> (World, Rc<RefCell<Recorder>>) {
    world_with(seed, profile, Duration::from_secs(300))
}

fn world_with(
    seed: u64,
    profile: RelayProfile,
    max_call: Duration,
) -> (World, Rc<RefCell<Recorder>>) {
    let mut w = World::new(seed);
    let recorder = Rc::new(RefCell::new(Recorder::default()));
    w.set_observer(Box::new(recorder.clone()));
    let relay = w.add_relay("r", profile);
    let server = w.add_server("server", &[relay], ServerConfig::default());
    w.add_client("client", &[relay], server, |c| {
        c.stateless = true;
        c.max_request_timeout = max_call;
    });
    (w, recorder)
}

fn client_events(rec: &Rc<RefCell<Recorder>>) -> Vec<ClientEvent> {
    rec.borrow()
        .log
        .iter()
        .filter_map(|(_, o)| match o {
            Observation::Client { event, .. } => Some(event.clone()),
            _ => None,
        })
        .collect()
}

fn response_ok(events: &[ClientEvent]) -> bool {
    events.iter().any(|e| {
        matches!(
            e,
            ClientEvent::Response {
                response: Ok(_),
                ..
            }
        )
    })
}

/// An echo call of "hi".
fn echo() -> Call {
    Call {
        tool: ToolCall::Echo { text: "hi".into() },
        progress: false,
        workload: 0,
        consume_every: None,
    }
}

fn stream(chunks: u64, interval: Duration) -> Call {
    Call {
        tool: ToolCall::Stream {
            chunks,
            chunk_bytes: 64,
            interval,
        },
        progress: true,
        workload: 0,
        consume_every: None,
    }
}

fn chunks_read(rec: &Rc<RefCell<Recorder>>) -> Vec<u64> {
    rec.borrow()
        .log
        .iter()
        .filter_map(|(_, o)| match o {
            Observation::ChunkRead { index, .. } => Some(*index),
            _ => None,
        })
        .collect()
}

#[test]
fn an_ideal_world_runs_every_tool() {
    let (mut w, rec) = world(1, RelayProfile::ideal());
    w.schedule_call(S(0), 0, echo());
    w.schedule_call(S(1), 0, stream(10, MS(10)));
    w.schedule_call(
        S(2),
        0,
        Call {
            tool: ToolCall::LargeResult {
                bytes: 200_000,
                content: ContentClass::Utf8,
            },
            progress: true,
            workload: 0,
            consume_every: None,
        },
    );
    w.run_until(S(60));
    let events = client_events(&rec);
    let responses = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                ClientEvent::Response {
                    response: Ok(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(responses, 3, "{events:?}");
    assert_eq!(chunks_read(&rec), (0..10).collect::<Vec<_>>());
    assert!(w.is_idle());
}

#[test]
fn one_seed_gives_one_outcome_and_another_seed_another() {
    let run = |seed| {
        let mut profile = RelayProfile::mobile();
        profile.impairments.outages.connection_drop_every = Some(S(20));
        let (mut w, rec) = world(seed, profile);
        w.schedule_call(S(0), 0, stream(200, MS(50)));
        w.schedule_call(
            S(1),
            0,
            Call {
                tool: ToolCall::LargeResult {
                    bytes: 300_000,
                    content: ContentClass::Random,
                },
                progress: true,
                workload: 0,
                consume_every: None,
            },
        );
        w.run_until(S(120));
        let log = format!("{:?}", rec.borrow().log);
        log
    };
    let a = run(3);
    assert_eq!(a, run(3));
    assert_ne!(a, run(4));
}

#[test]
fn a_1_mib_escape_heavy_response_crosses_strfry_with_jitter_and_reordering() {
    // The datagram stress mode: per-message reordering and duplicates on one connection.
    let mut profile = RelayProfile::strfry();
    profile.impairments.relay_to_peer = Direction {
        ordering: relaysim::relay::impair::Ordering::Datagram,
        delay: Delay::LogNormal {
            median: MS(80),
            sigma: 0.5,
        },
        reorder: 0.2,
        reorder_delay: MS(300),
        duplicate: 0.05,
        duplicate_copies: 1,
        ..Direction::default()
    };
    let (mut w, rec) = world(5, profile);
    w.schedule_call(
        S(0),
        0,
        Call {
            tool: ToolCall::LargeResult {
                bytes: 1 << 20,
                content: ContentClass::EscapeHeavy,
            },
            progress: true,
            workload: 0,
            consume_every: None,
        },
    );
    w.run_until(S(120));
    let events = client_events(&rec);
    assert!(
        response_ok(&events),
        "{:?}",
        events
            .iter()
            .map(|e| format!("{e:?}").chars().take(120).collect::<String>())
            .collect::<Vec<_>>()
    );
    let log = rec.borrow();
    let reordered = log
        .log
        .iter()
        .filter(|(_, o)| {
            matches!(
                o,
                Observation::Delivered {
                    reordered: true,
                    ..
                }
            )
        })
        .count();
    assert!(reordered > 0, "the link did reorder");
    let too_large = log
        .log
        .iter()
        .filter(|(_, o)| {
            matches!(
                o,
                Observation::Verdict {
                    accepted: false,
                    ..
                }
            )
        })
        .count();
    assert_eq!(too_large, 0, "every frame fit strfry's 64 KiB limit");
}

#[test]
fn the_damus_rate_cap_breaks_a_fast_stream() {
    let (mut w, rec) = world(1, RelayProfile::damus());
    w.schedule_call(S(0), 0, stream(40, MS(20)));
    w.run_until(S(120));
    let log = rec.borrow();
    let limited = log.log.iter().filter(|(_, o)| matches!(o, Observation::Verdict { accepted: false, message, .. } if message.starts_with("rate-limited:"))).count();
    assert!(limited > 20, "{limited}");
    drop(log);
    let events = client_events(&rec);
    assert!(
        !events.iter().any(|e| matches!(
            e,
            ClientEvent::StreamEnded {
                outcome: Ok(()),
                ..
            }
        )),
        "{events:?}"
    );
}

#[test]
fn nostr_rs_relay_sends_no_ok_for_the_ephemeral_traffic_yet_calls_complete() {
    let (mut w, rec) = world(1, RelayProfile::nostr_rs_relay());
    w.schedule_call(
        S(0),
        0,
        Call {
            tool: ToolCall::Echo { text: "x".into() },
            progress: false,
            workload: 0,
            consume_every: None,
        },
    );
    w.run_until(S(10));
    assert!(response_ok(&client_events(&rec)));
    assert!(!rec
        .borrow()
        .log
        .iter()
        .any(|(_, o)| matches!(o, Observation::Verdict { .. })));
}

fn dropped_mid_stream(profile: RelayProfile) -> Vec<ClientEvent> {
    let mut profile = profile;
    profile.impairments.outages.scheduled.push(Outage {
        at: MS(2_050),
        duration: S(2),
        kind: OutageKind::ConnectionDrop {
            peer: Some("client".into()),
        },
    });
    let (mut w, rec) = world(1, profile);
    w.schedule_call(S(0), 0, stream(100, MS(50)));
    w.run_until(S(120));
    assert!(rec
        .borrow()
        .log
        .iter()
        .any(|(_, o)| matches!(o, Observation::Disconnected { .. })));
    client_events(&rec)
}

#[test]
fn strfrys_stored_ephemeral_events_heal_a_two_second_disconnect() {
    let events = dropped_mid_stream(RelayProfile::strfry());
    assert!(
        events.iter().any(|e| matches!(
            e,
            ClientEvent::StreamEnded {
                outcome: Ok(()),
                ..
            }
        )),
        "{events:?}"
    );
}

#[test]
fn a_live_only_relay_loses_what_was_published_during_a_disconnect() {
    let events = dropped_mid_stream(RelayProfile::khatru());
    assert!(
        events.iter().any(|e| matches!(
            e,
            ClientEvent::StreamEnded {
                outcome: Err(StreamFailure::GapAtClose { .. } | StreamFailure::ReorderBufferFull),
                ..
            }
        )),
        "{events:?}"
    );
}

#[test]
fn a_silent_stream_keeps_itself_alive_for_ten_minutes() {
    // The call's hard maximum must outlast the stream; keepalive does the rest.
    let (mut w, rec) = world_with(1, RelayProfile::strfry(), S(3600));
    w.schedule_call(S(0), 0, stream(2, S(600)));
    w.run_until(S(700));
    let events = client_events(&rec);
    assert!(
        events.iter().any(|e| matches!(
            e,
            ClientEvent::StreamEnded {
                outcome: Ok(()),
                ..
            }
        )),
        "{events:?}"
    );
    assert!(response_ok(&events));
}

#[test]
fn a_relay_restart_drops_everyone_and_they_come_back() {
    let mut profile = RelayProfile::ideal();
    profile.impairments.outages.scheduled.push(Outage {
        at: S(5),
        duration: S(3),
        kind: OutageKind::RelayRestart,
    });
    let (mut w, rec) = world(1, profile);
    w.run_until(S(20));
    let log = rec.borrow();
    let down = log
        .log
        .iter()
        .filter(|(_, o)| {
            matches!(
                o,
                Observation::Disconnected {
                    reason: "relay-restart",
                    ..
                }
            )
        })
        .count();
    let up = log
        .log
        .iter()
        .filter(|(t, o)| *t >= S(8) && matches!(o, Observation::Connected { .. }))
        .count();
    assert_eq!((down, up), (2, 2));
}

#[test]
fn a_stateless_advertisement_overtaken_by_a_later_request_does_not_stall_a_stream() {
    // Two calls at once over a jittery relay: the stream request, which may reach the server
    // first, must carry the capability tags too, or the server waits for an accept that the
    // client, believing itself known, never sends.
    let mut profile = RelayProfile::strfry();
    profile.impairments.peer_to_relay = Direction {
        delay: Delay::LogNormal {
            median: MS(60),
            sigma: 0.8,
        },
        ..Direction::default()
    };
    for seed in 0..8 {
        let (mut w, rec) = world(seed, profile.clone());
        w.schedule_call(
            S(0),
            0,
            Call {
                tool: ToolCall::Echo {
                    text: "first".into(),
                },
                progress: false,
                workload: 0,
                consume_every: None,
            },
        );
        w.schedule_call(S(0), 0, stream(20, MS(10)));
        w.run_until(S(120));
        let events = client_events(&rec);
        assert!(
            events.iter().any(|e| matches!(
                e,
                ClientEvent::StreamEnded {
                    outcome: Ok(()),
                    ..
                }
            )),
            "seed {seed}: {events:?}"
        );
    }
}

#[test]
fn bandwidth_and_relay_processing_pace_a_transfer() {
    let run = |bandwidth: Option<u64>, processing: Duration| {
        let mut profile = RelayProfile::ideal();
        profile.impairments.relay_to_peer.bandwidth = bandwidth;
        profile.processing = processing;
        let (mut w, rec) = world(1, profile);
        w.schedule_call(
            S(0),
            0,
            Call {
                tool: ToolCall::LargeResult {
                    bytes: 1_000_000,
                    content: ContentClass::Ascii,
                },
                progress: true,
                workload: 0,
                consume_every: None,
            },
        );
        w.run_until(S(120));
        let done = rec.borrow().log.iter().find_map(|(t, o)| {
            matches!(
                o,
                Observation::Client {
                    event: ClientEvent::Response {
                        response: Ok(_),
                        ..
                    },
                    ..
                }
            )
            .then_some(*t)
        });
        done.expect("the transfer completes")
    };
    let free = run(None, Duration::ZERO);
    let narrow = run(Some(500_000), Duration::ZERO);
    let busy = run(None, MS(50));
    assert!(free < MS(10), "{free:?}");
    // About 1.06 MB of events through 500 KB/s: at least two seconds.
    assert!(narrow >= S(2) && narrow < S(3), "{narrow:?}");
    // 23 events at 50 ms each, one at a time: over a second.
    assert!(busy >= S(1), "{busy:?}");
}

/// Notes whether each published event came with its JSON.
struct JsonSeen {
    wants: bool,
    seen: Vec<Option<String>>,
}

impl relaysim::sim::world::Observer for JsonSeen {
    fn observe(&mut self, _at: Duration, o: &Observation) {
        if let Observation::Published { json, .. } = o {
            self.seen.push(json.as_deref().map(str::to_owned));
        }
    }

    fn wants_event_json(&self) -> bool {
        self.wants
    }
}

#[test]
fn an_event_s_json_is_made_only_for_an_observer_that_wants_it() {
    for wants in [false, true] {
        let mut w = World::new(1);
        let seen = Rc::new(RefCell::new(JsonSeen {
            wants,
            seen: Vec::new(),
        }));
        w.set_observer(Box::new(seen.clone()));
        let relay = w.add_relay("r", RelayProfile::ideal());
        let server = w.add_server("server", &[relay], ServerConfig::default());
        w.add_client("client", &[relay], server, |c| c.stateless = true);
        w.schedule_call(S(0), 0, echo());
        w.run_until(S(10));
        let seen = &seen.borrow().seen;
        assert!(!seen.is_empty());
        for json in seen {
            assert_eq!(json.is_some(), wants);
            if let Some(json) = json {
                let value: serde_json::Value = serde_json::from_str(json).expect("JSON");
                for key in [
                    "id",
                    "pubkey",
                    "created_at",
                    "kind",
                    "tags",
                    "content",
                    "sig",
                ] {
                    assert!(value.get(key).is_some(), "{key} in {json}");
                }
            }
        }
    }
}
