//! One test per rule of the resumable-streams texts and of relaysim's mapping, and a property
//! test: any disconnect schedule within `resumeInterval.max` delivers every message exactly
//! once, in order.

use super::client::{Arrival, FollowerConfig, FollowerEvent, FollowerRequest, StreamFollower};
use super::messages::{StreamRef, StreamStatus};
use super::server::{StoreConfig, StreamError, StreamStore};
use crate::protocol::jsonrpc::RequestId;
use std::time::Duration;

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

fn store() -> StreamStore<&'static str> {
    StreamStore::new(StoreConfig::default(), [7; 32])
}

fn reference(id: &str, token: Option<&str>, last: Option<u64>) -> StreamRef {
    StreamRef {
        stream_id: id.into(),
        resume_token: token.map(str::to_owned),
        last_sequence: last,
    }
}

#[test]
fn create_gives_a_unique_id_a_secret_token_the_request_and_the_interval() {
    let mut s = store();
    let a = s.create("alice", Some(RequestId::Number(3)), S(0)).unwrap();
    let b = s.create("alice", None, S(0)).unwrap();
    assert_ne!(a.stream_id, b.stream_id);
    assert_ne!(a.resume_token, b.resume_token);
    assert_eq!(a.request_id, Some(RequestId::Number(3)));
    assert_eq!(a.resume_interval, StoreConfig::default().resume_interval);
    // Derived from the secret: another secret gives other ids, the same one the same.
    let mut other = StreamStore::<&str>::new(StoreConfig::default(), [8; 32]);
    assert_ne!(
        other.create("alice", None, S(0)).unwrap().stream_id,
        a.stream_id
    );
    assert_eq!(
        store().create("alice", None, S(0)).unwrap().stream_id,
        a.stream_id
    );
}

#[test]
fn messages_get_consecutive_sequence_numbers_and_end_is_the_last() {
    let mut s = store();
    let c = s.create("alice", None, S(0)).unwrap();
    assert_eq!(
        s.record(&c.stream_id, "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}"),
        Some(0)
    );
    assert_eq!(
        s.record(&c.stream_id, "{\"jsonrpc\":\"2.0\",\"method\":\"b\"}"),
        Some(1)
    );
    let (seq, text) = s.end(&c.stream_id, S(1)).unwrap();
    assert_eq!(seq, 2);
    assert!(text.contains("notifications/stream/end"), "{text}");
    assert!(text.contains(&c.stream_id));
    assert_eq!(
        s.record(&c.stream_id, "late"),
        None,
        "nothing after the end"
    );
    assert_eq!(s.end(&c.stream_id, S(2)), None, "ends once");
}

#[test]
fn resume_sends_what_follows_last_sequence_then_the_end() {
    let mut s = store();
    let c = s.create("alice", None, S(0)).unwrap();
    for i in 0..5 {
        s.record(&c.stream_id, &format!("m{i}"));
    }
    s.end(&c.stream_id, S(1));
    let token = c.resume_token.as_deref();
    let r = s
        .resume(&"alice", &reference(&c.stream_id, token, Some(2)), S(2))
        .unwrap();
    let seqs: Vec<u64> = r.messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, vec![3, 4, 5]);
    assert!(r.messages.last().unwrap().text.contains("stream/end"));
    assert_eq!(r.number, 1);
    // Without lastSequence: everything held. Each replay has its own number.
    let all = s
        .resume(&"alice", &reference(&c.stream_id, token, None), S(3))
        .unwrap();
    assert_eq!(all.messages.len(), 6);
    assert_eq!(all.number, 2);
    assert_eq!(s.stats().replayed_messages, 9);
}

#[test]
fn unknown_foreign_and_wrong_token_requests_are_errors() {
    let mut s = store();
    let c = s.create("alice", None, S(0)).unwrap();
    let id = c.stream_id.as_str();
    assert_eq!(
        s.resume(&"alice", &reference("nope", None, None), S(1))
            .unwrap_err(),
        StreamError::Unknown
    );
    // Someone else's stream does not exist for them, token or not.
    assert_eq!(
        s.poll(
            &"mallory",
            &reference(id, c.resume_token.as_deref(), None),
            S(1)
        )
        .unwrap_err(),
        StreamError::Unknown
    );
    assert_eq!(
        s.resume(&"alice", &reference(id, Some("guess"), None), S(1))
            .unwrap_err(),
        StreamError::WrongToken
    );
    // The draft form has no token: the owner may resume without one.
    assert!(s.resume(&"alice", &reference(id, None, None), S(1)).is_ok());
    assert_eq!(
        StreamError::WrongToken.code(),
        super::messages::codes::WRONG_TOKEN
    );
}

#[test]
fn poll_reports_status_pending_messages_requests_and_errors() {
    let mut s = store();
    let c = s.create("alice", None, S(0)).unwrap();
    let id = c.stream_id.as_str();
    s.record(
        id,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
    );
    s.record(
        id,
        r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage"}"#,
    );
    let p = s.poll(&"alice", &reference(id, None, None), S(1)).unwrap();
    assert_eq!(p.status, StreamStatus::Live);
    assert!(p.pending_messages && p.has_request && !p.has_error);
    let caught_up = s
        .poll(&"alice", &reference(id, None, Some(1)), S(1))
        .unwrap();
    assert!(!caught_up.pending_messages && !caught_up.has_request);
    s.record(
        id,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#,
    );
    s.end(id, S(2));
    let p = s
        .poll(&"alice", &reference(id, None, Some(1)), S(3))
        .unwrap();
    assert_eq!(p.status, StreamStatus::Completed);
    assert!(p.pending_messages && p.has_error && !p.has_request);
}

#[test]
fn poll_all_pages_through_the_requesters_streams_only() {
    let config = StoreConfig {
        page_size: 2,
        ..StoreConfig::default()
    };
    let mut s = StreamStore::new(config, [1; 32]);
    for _ in 0..5 {
        s.create("alice", None, S(0));
    }
    s.create("bob", None, S(0));
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (page, next) = s.poll_all(&"alice", cursor.as_deref(), S(1));
        assert!(page.len() <= 2);
        seen.extend(page.into_iter().map(|p| p.stream_id));
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen.len(), 5);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, seen, "each once, in id order");
    assert_eq!(s.poll_all(&"bob", None, S(1)).0.len(), 1);
}

#[test]
fn the_buffer_is_bounded_and_a_resume_past_evicted_messages_is_an_error() {
    let config = StoreConfig {
        max_messages_per_stream: 4,
        ..StoreConfig::default()
    };
    let mut s = StreamStore::new(config, [1; 32]);
    let c = s.create("alice", None, S(0)).unwrap();
    let id = c.stream_id.as_str();
    for i in 0..10 {
        s.record(id, &format!("m{i}"));
    }
    assert_eq!(s.stats().high_water_messages, 4);
    assert_eq!(s.stats().evicted, 6);
    // Messages 6..=9 are held: a client that processed 5 gets the rest...
    let r = s
        .resume(&"alice", &reference(id, None, Some(5)), S(1))
        .unwrap();
    assert_eq!(
        r.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![6, 7, 8, 9]
    );
    // ...one that processed 3 cannot: 4 and 5 are gone.
    assert_eq!(
        s.resume(&"alice", &reference(id, None, Some(3)), S(1))
            .unwrap_err(),
        StreamError::Evicted {
            first_needed: 4,
            evicted_through: 5
        }
    );
    // The byte bound holds too.
    let config = StoreConfig {
        max_bytes_per_stream: 10,
        ..StoreConfig::default()
    };
    let mut s = StreamStore::new(config, [1; 32]);
    let c = s.create("alice", None, S(0)).unwrap();
    for _ in 0..5 {
        s.record(&c.stream_id, "abcd");
    }
    assert!(s.stats().high_water_bytes <= 10);
}

#[test]
fn a_completed_stream_nobody_resumes_within_max_is_abandoned() {
    let mut s = store();
    let c = s.create("alice", None, S(0)).unwrap();
    let id = c.stream_id.clone();
    s.record(&id, "m");
    // Live streams are not abandoned, however long nobody asks.
    s.handle_timeout(S(10_000));
    assert!(s.is_live(&id));
    s.end(&id, S(10_000));
    assert_eq!(s.poll_timeout(), Some(S(10_300)));
    // A poll counts as contact and restarts the clock.
    s.poll(&"alice", &reference(&id, None, None), S(10_100))
        .unwrap();
    s.handle_timeout(S(10_300));
    assert_eq!(s.len(), 1);
    s.handle_timeout(S(10_400));
    assert!(s.is_empty());
    assert_eq!(s.stats().abandoned, 1);
    assert_eq!(
        s.resume(&"alice", &reference(&id, None, None), S(10_401))
            .unwrap_err(),
        StreamError::Abandoned
    );
    assert_eq!(
        s.poll(&"alice", &reference(&id, None, None), S(10_401))
            .unwrap_err(),
        StreamError::Abandoned
    );
}

#[test]
fn without_max_nothing_is_abandoned() {
    let mut config = StoreConfig::default();
    config.resume_interval.max = None;
    let mut s = StreamStore::new(config, [1; 32]);
    let c = s.create("alice", None, S(0)).unwrap();
    s.end(&c.stream_id, S(1));
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(S(1_000_000));
    assert_eq!(s.len(), 1);
}

#[test]
fn an_acknowledged_completed_stream_is_freed_not_abandoned() {
    let mut s = store();
    let c = s.create("alice", None, S(0)).unwrap();
    let id = c.stream_id.as_str();
    s.record(id, "m");
    // An ack short of the end keeps it.
    s.ack(&"alice", &reference(id, None, Some(0)), S(1))
        .unwrap();
    assert_eq!(s.len(), 1);
    let (end, _) = s.end(id, S(2)).unwrap();
    s.ack(&"alice", &reference(id, None, Some(end)), S(3))
        .unwrap();
    assert!(s.is_empty());
    assert_eq!(s.stats().released, 1);
    assert_eq!(s.stats().abandoned, 0);
}

#[test]
fn the_store_refuses_streams_beyond_its_limit() {
    let config = StoreConfig {
        max_streams: 2,
        ..StoreConfig::default()
    };
    let mut s = StreamStore::new(config, [1; 32]);
    assert!(s.create("a", None, S(0)).is_some());
    assert!(s.create("a", None, S(0)).is_some());
    assert!(s.create("a", None, S(0)).is_none());
}

fn follower() -> StreamFollower<u64> {
    StreamFollower::new(FollowerConfig::default())
}

fn created(s: &mut StreamStore<&'static str>) -> super::messages::StreamCreate {
    s.create("alice", None, S(0)).unwrap()
}

#[test]
fn the_client_processes_each_sequence_once_and_in_order() {
    let mut f = follower();
    assert_eq!(
        f.on_message("s", 0, false, 0, S(0)),
        Arrival::Release(vec![0])
    );
    assert_eq!(f.on_message("s", 0, false, 0, S(0)), Arrival::Duplicate);
    // Ahead of a missing message: held, and a second copy of it is a duplicate.
    assert_eq!(f.on_message("s", 2, false, 2, S(0)), Arrival::Held);
    assert_eq!(f.on_message("s", 2, false, 2, S(0)), Arrival::Duplicate);
    assert_eq!(f.on_message("s", 3, false, 3, S(0)), Arrival::Held);
    // The missing one releases the run behind it, in order.
    assert_eq!(
        f.on_message("s", 1, false, 1, S(0)),
        Arrival::Release(vec![1, 2, 3])
    );
    assert_eq!(f.on_message("s", 1, false, 1, S(0)), Arrival::Duplicate);
}

#[test]
fn too_many_messages_held_behind_a_gap_give_the_stream_up() {
    let mut f = StreamFollower::new(FollowerConfig {
        max_held: 3,
        ..FollowerConfig::default()
    });
    for seq in 1..=4u64 {
        f.on_message("s", seq, false, seq, S(0));
    }
    assert!(matches!(
        f.poll_event(),
        Some(FollowerEvent::ResumeRefused { .. })
    ));
    assert_eq!(
        f.on_message("s", 0, false, 0, S(0)),
        Arrival::Duplicate,
        "given up"
    );
}

#[test]
fn a_gap_open_longer_than_the_grace_asks_for_a_resume_from_the_contiguous_end() {
    let mut s = store();
    let c = created(&mut s);
    let mut f = follower();
    f.on_create(&c, S(0));
    f.on_message(&c.stream_id, 0, false, 0, S(1));
    f.on_message(&c.stream_id, 2, false, 2, S(1));
    // Within the grace a late message may still fill it.
    f.handle_timeout(S(1) + MS(500));
    assert_eq!(f.poll_transmit(), None);
    assert_eq!(f.poll_timeout(), Some(S(2)));
    f.handle_timeout(S(2));
    let (_, request) = f.poll_transmit().unwrap();
    assert_eq!(
        request,
        FollowerRequest::Resume(StreamRef {
            stream_id: c.stream_id.clone(),
            resume_token: c.resume_token.clone(),
            last_sequence: Some(0),
        })
    );
}

#[test]
fn a_reconnection_makes_a_resume_due_and_attempts_respect_resume_interval_min() {
    let mut s = store();
    let mut c = created(&mut s);
    c.resume_interval.min = Some(5);
    let mut f = follower();
    f.on_create(&c, S(0));
    f.on_message(&c.stream_id, 0, false, 0, S(0));
    f.on_reconnect();
    f.handle_timeout(S(1));
    let (first, r) = f.poll_transmit().unwrap();
    assert!(matches!(r, FollowerRequest::Resume(_)));
    f.on_resume_answer(first, Ok(None), S(1) + MS(300));
    assert_eq!(
        f.poll_event(),
        Some(FollowerEvent::Resumed {
            stream_id: c.stream_id.clone(),
            latency: MS(300)
        })
    );
    // Another drop right away: the next attempt waits for min (5 s after the first).
    f.on_reconnect();
    f.handle_timeout(S(2));
    assert_eq!(f.poll_transmit(), None);
    assert_eq!(f.poll_timeout(), Some(S(6)));
    f.handle_timeout(S(6));
    assert!(matches!(
        f.poll_transmit(),
        Some((_, FollowerRequest::Resume(_)))
    ));
}

/// Sends the resume due next and answers it with `more` (the last sequence of a batch the
/// server says it has more after, or `None`) 100 ms later; returns when it went.
fn resume_answered(f: &mut StreamFollower<u64>, more: Option<u64>) -> std::time::Duration {
    let now = f.poll_timeout().expect("a resume is due");
    f.handle_timeout(now);
    let (attempt, r) = f.poll_transmit().expect("a resume");
    assert!(matches!(r, FollowerRequest::Resume(_)), "{r:?}");
    f.on_resume_answer(attempt, Ok(more), now + MS(100));
    f.poll_event();
    now
}

fn gaps(sent: &[std::time::Duration]) -> Vec<std::time::Duration> {
    sent.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn resumes_that_bring_nothing_back_off_and_progress_or_a_reconnection_starts_afresh() {
    let mut s = store();
    let c = created(&mut s); // resumeInterval.min = 1 s
    let id = c.stream_id.clone();
    let mut f = follower();
    f.on_create(&c, S(0));
    f.on_message(&id, 0, false, 0, S(0));
    // Sequence 1 is missing.
    f.on_message(&id, 2, false, 2, S(0));
    // Each resume's replay is refused by the relays: nothing arrives, and the server keeps
    // saying it holds more after sequence 1 (a paged replay whose batch never comes).
    let sent: Vec<_> = (0..9).map(|_| resume_answered(&mut f, Some(1))).collect();
    // The first retry when the batch is overdue (the answer's 100 ms plus `gap_grace`, as
    // without backoff), then twice as long each time up to `max_backoff` (32 s).
    let expected: Vec<_> = [MS(1100), S(2), S(4), S(8), S(16), S(32), S(32), S(32)].into();
    assert_eq!(gaps(&sent), expected, "{sent:?}");
    // The missing message arrives: the run grows, the server's next batch is asked for at
    // once, and a resume after it that brings nothing waits only the minimum again.
    let now = *sent.last().unwrap() + S(1);
    f.on_message(&id, 1, false, 1, now);
    assert_eq!(f.poll_timeout(), Some(std::time::Duration::ZERO));
    f.handle_timeout(now);
    let (attempt, _) = f.poll_transmit().unwrap();
    f.on_resume_answer(attempt, Ok(Some(3)), now);
    assert_eq!(f.poll_timeout(), Some(now + S(1)));
    f.handle_timeout(now + S(1));
    let (attempt, _) = f.poll_transmit().unwrap();
    f.on_resume_answer(attempt, Ok(None), now + S(1));
    // A reconnection: the resume after it waits only the minimum, not the 2 s backoff.
    f.on_reconnect();
    assert_eq!(f.poll_timeout(), Some(now + S(2)));
}

#[test]
fn resumes_for_a_gap_that_stays_open_back_off_too() {
    let mut s = store();
    let c = created(&mut s);
    let id = c.stream_id.clone();
    // No polls for silence in the way.
    let mut f = StreamFollower::new(FollowerConfig {
        silence: S(600),
        ..FollowerConfig::default()
    });
    f.on_create(&c, S(0));
    f.on_message(&id, 0, false, 0, S(0));
    f.on_message(&id, 2, false, 2, S(0));
    // Each resume is answered "nothing more" and its replay of 1 never arrives.
    let sent: Vec<_> = (0..7).map(|_| resume_answered(&mut f, None)).collect();
    let expected: Vec<_> = [S(1), S(2), S(4), S(8), S(16), S(32)].into();
    assert_eq!(gaps(&sent), expected, "{sent:?}");
}

#[test]
fn a_poll_does_not_wait_on_the_resume_backoff() {
    let mut s = store();
    let c = created(&mut s);
    let id = c.stream_id.clone();
    let mut f = follower();
    f.on_create(&c, S(0));
    f.on_message(&id, 0, false, 0, S(0));
    let pending = super::messages::PollResult {
        stream_id: id.clone(),
        status: StreamStatus::Live,
        pending_messages: true,
        has_request: false,
        has_error: false,
    };
    // A live stream falls silent; each poll says messages are pending, each resume's replay
    // never arrives. Polls keep to the 10 s of silence after the last resume while the
    // resumes' backoff grows past it (16 s, 32 s).
    let mut last_resume = S(0);
    for round in 0..8 {
        let at = f.poll_timeout().unwrap();
        f.handle_timeout(at);
        let (attempt, r) = f.poll_transmit().unwrap();
        assert!(
            matches!(r, FollowerRequest::Poll(_)),
            "round {round}: {r:?}"
        );
        assert_eq!(at, last_resume + S(10), "round {round}");
        f.on_poll_answer(attempt, Ok(pending.clone()));
        last_resume = resume_answered(&mut f, None);
    }
}

#[test]
fn silence_on_a_live_stream_polls_and_pending_messages_make_a_resume_due() {
    let mut f = follower();
    f.on_message("s", 0, false, 0, S(0));
    f.handle_timeout(S(10));
    let (attempt, r) = f.poll_transmit().unwrap();
    assert!(matches!(r, FollowerRequest::Poll(_)));
    f.on_poll_answer(
        attempt,
        Ok(super::messages::PollResult {
            stream_id: "s".into(),
            status: StreamStatus::Live,
            pending_messages: true,
            has_request: false,
            has_error: false,
        }),
    );
    f.handle_timeout(S(10));
    assert!(matches!(
        f.poll_transmit(),
        Some((_, FollowerRequest::Resume(_)))
    ));
}

#[test]
fn an_unanswered_attempt_is_retried() {
    let mut f = follower();
    f.on_message("s", 0, false, 0, S(0));
    f.on_reconnect();
    f.handle_timeout(S(1));
    assert!(f.poll_transmit().is_some());
    f.handle_timeout(S(3));
    assert_eq!(f.poll_transmit(), None, "still waiting for the answer");
    f.handle_timeout(S(6));
    assert!(matches!(
        f.poll_transmit(),
        Some((_, FollowerRequest::Resume(_)))
    ));
}

#[test]
fn a_refused_resume_is_reported_and_not_retried() {
    let mut f = follower();
    f.on_message("s", 0, false, 0, S(0));
    f.on_reconnect();
    f.handle_timeout(S(1));
    let (attempt, _) = f.poll_transmit().unwrap();
    f.on_resume_answer(attempt, Err("evicted".into()), S(2));
    assert!(matches!(
        f.poll_event(),
        Some(FollowerEvent::ResumeRefused { .. })
    ));
    f.on_reconnect();
    f.handle_timeout(S(100));
    assert_eq!(f.poll_transmit(), None);
}

#[test]
fn a_stream_processed_through_its_end_is_acknowledged_and_forgotten() {
    let mut f = follower();
    f.on_message("s", 1, true, 1, S(0));
    assert!(f.is_following("s"), "0 is still missing");
    f.on_message("s", 0, false, 0, S(0));
    assert!(!f.is_following("s"));
    let (_, ack) = f.poll_transmit().unwrap();
    assert_eq!(
        ack,
        FollowerRequest::Ack(StreamRef {
            stream_id: "s".into(),
            resume_token: None,
            last_sequence: Some(1),
        })
    );
}

mod property {
    use super::*;
    use proptest::prelude::*;

    /// A stream of `n` messages, one per 100 ms, through a link that drops everything during
    /// the `outages` (start and length in 100 ms steps, each shorter than `max`), with
    /// reconnections at each outage's end. Every message must be processed exactly once, in
    /// sequence order.
    fn run(n: u64, outages: &[(u64, u64)], min: u64) -> (Vec<u64>, u64) {
        let mut config = StoreConfig::default();
        config.resume_interval.min = Some(min);
        let mut store = StreamStore::new(config, [3; 32]);
        let create = store.create("c", None, S(0)).unwrap();
        let id = create.stream_id.clone();
        let mut follower = StreamFollower::new(FollowerConfig::default());
        follower.on_create(&create, S(0));
        let down = |t: u64| outages.iter().any(|&(a, len)| t >= a && t < a + len);
        let mut processed: Vec<u64> = Vec::new();
        let mut deliver = |f: &mut StreamFollower<u64>, seq: u64, is_end: bool, now: Duration| {
            if let Arrival::Release(seqs) = f.on_message(&id, seq, is_end, seq, now) {
                processed.extend(seqs);
            }
        };
        let mut resumes = 0;
        // 100 ms steps; the stream runs for n steps, then as long as it takes to recover.
        for step in 0..(n + 2000) {
            let now = MS(step * 100);
            if step < n {
                let seq = store.record(&id, &format!("m{step}")).unwrap();
                if !down(step) {
                    deliver(&mut follower, seq, false, now);
                }
            } else if step == n {
                let (seq, _) = store.end(&id, now).unwrap();
                if !down(step) {
                    deliver(&mut follower, seq, true, now);
                }
            }
            if outages.iter().any(|&(a, len)| step == a + len) {
                follower.on_reconnect();
            }
            follower.handle_timeout(now);
            while let Some((attempt, request)) = follower.poll_transmit() {
                if down(step) {
                    continue; // lost on the way up
                }
                match request {
                    FollowerRequest::Resume(r) => {
                        resumes += 1;
                        let replay = store.resume(&"c", &r, now).map_err(|e| e.to_string());
                        if let Ok(replay) = &replay {
                            for m in &replay.messages {
                                let is_end = m.text.contains("stream/end");
                                deliver(&mut follower, m.seq, is_end, now);
                            }
                        }
                        let more =
                            replay.map(|r| r.more.then(|| r.messages.last().map_or(0, |m| m.seq)));
                        follower.on_resume_answer(attempt, more, now);
                    }
                    FollowerRequest::Poll(r) => {
                        let p = store.poll(&"c", &r, now).map_err(|e| e.to_string());
                        follower.on_poll_answer(attempt, p);
                    }
                    FollowerRequest::Ack(r) => {
                        let _ = store.ack(&"c", &r, now);
                    }
                }
            }
            if follower.is_empty() && step > n {
                break;
            }
        }
        (processed, resumes)
    }

    proptest! {
        #[test]
        fn any_disconnect_schedule_within_max_delivers_every_message_exactly_once(
            n in 1u64..400,
            outages in proptest::collection::vec((0u64..400, 1u64..1200), 0..4),
            min in 0u64..4,
        ) {
            let (processed, _) = run(n, &outages, min);
            let expected: Vec<u64> = (0..=n).collect();
            prop_assert_eq!(processed, expected, "each of 0..=n exactly once, in order");
        }
    }

    #[test]
    fn a_two_minute_disconnect_mid_stream_is_recovered_in_replay_batches() {
        // 1200 messages lost; each resume sends at most `max_replay_batch` (32) of them.
        let (processed, resumes) = run(3000, &[(1000, 1200)], 1);
        assert_eq!(processed, (0..=3000).collect::<Vec<u64>>());
        // Live messages after the reconnection also follow the gap in the server's buffer, so
        // one more batch may be asked for before the answer says nothing more is held.
        let batch = StoreConfig::default().max_replay_batch as u64;
        let least = 1200u64.div_ceil(batch);
        assert!((least..=least + 1).contains(&resumes), "{resumes} resumes");
    }
}

#[test]
fn a_finished_stream_stays_finished_whatever_arrives_late() {
    let mut f = follower();
    f.on_message("s", 0, true, 0, S(0));
    assert!(f.is_finished("s") && !f.is_following("s"));
    let _ack = f.poll_transmit();
    // A replayed copy, a relay's late duplicate, or a late create: all old news.
    assert_eq!(f.on_message("s", 0, true, 0, S(1)), Arrival::Duplicate);
    let mut create = store().create("alice", None, S(0)).unwrap();
    create.stream_id = "s".into();
    f.on_create(&create, S(1));
    assert!(!f.is_following("s"));
    f.on_reconnect();
    f.handle_timeout(S(100));
    assert_eq!(f.poll_transmit(), None, "nothing to resume");
}

#[test]
fn hostile_numbers_neither_panic_nor_overflow() {
    use super::messages::{StreamCreate, MAX_INTERVAL_SECS};
    // A server announcing absurd bounds gets them clamped to a day.
    let create = StreamCreate::from_params(&serde_json::json!({
        "streamId": "s", "resumeInterval": { "min": u64::MAX, "max": u64::MAX }
    }))
    .unwrap();
    assert_eq!(create.resume_interval.max, Some(MAX_INTERVAL_SECS));
    let mut f = follower();
    f.on_create(&create, S(0));
    f.on_message("s", 1, false, 1, S(0));
    f.handle_timeout(S(2));
    assert!(f.poll_transmit().is_some());
    f.on_reconnect();
    f.handle_timeout(S(3));
    assert!(f.poll_timeout().is_some());
    // A client acknowledging u64::MAX does not overflow the server.
    let mut s = store();
    let c = created(&mut s);
    s.end(&c.stream_id, S(1));
    s.ack(
        &"alice",
        &reference(&c.stream_id, None, Some(u64::MAX)),
        S(2),
    )
    .unwrap();
    assert!(s.is_empty());
}

#[test]
fn someone_elses_abandoned_stream_is_unknown_to_them() {
    let mut s = store();
    let c = created(&mut s);
    s.end(&c.stream_id, S(0));
    s.handle_timeout(S(301));
    assert_eq!(
        s.poll(&"alice", &reference(&c.stream_id, None, None), S(302))
            .unwrap_err(),
        StreamError::Abandoned
    );
    assert_eq!(
        s.poll(&"mallory", &reference(&c.stream_id, None, None), S(302))
            .unwrap_err(),
        StreamError::Unknown
    );
}
