//! Longer than 600 lines because it holds one test per documented profile fact.
//!
//! Each profile's documented behaviour (`docs/relays.md`), asserted against the model.

use super::*;
use crate::nip01::Identity;
/// Any kind works for the relay model; ContextVM's is the one relaysim carries.
const CONTEXTVM_KIND: u16 = 25910;
use nostr::prelude::{Kind, Tag};

const A: ConnId = 1; // publisher
const B: ConnId = 2; // subscriber
const C: ConnId = 3; // another subscriber

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

struct Bench {
    relay: Relay,
    alice: Identity,
    bob: Identity,
    n: u64,
}

impl Bench {
    fn new(profile: RelayProfile) -> Self {
        let mut relay = Relay::new(profile);
        relay.connect(A, "10.0.0.1");
        relay.connect(B, "10.0.0.2");
        Bench {
            relay,
            alice: Identity::derive(1, "alice"),
            bob: Identity::derive(1, "bob"),
            n: 0,
        }
    }

    fn subscribe(&mut self, conn: ConnId, now: Duration) -> Vec<RelayMessage> {
        let filter = Filter::new()
            .kind(Kind::from(CONTEXTVM_KIND))
            .pubkey(self.bob.public_key());
        self.relay.handle_client_message(
            conn,
            ClientMessage::Req {
                sub: "s".into(),
                filter: Box::new(filter),
            },
            now,
        );
        self.out(conn)
    }

    /// A kind-25910 event to bob, `padding` bytes of content, created at `created` seconds.
    fn event(&mut self, padding: usize, created: Duration) -> Event {
        self.n += 1;
        let content = format!("{}{}", self.n, "x".repeat(padding));
        self.alice.sign(
            CONTEXTVM_KIND,
            EPOCH_SECS + created.as_secs(),
            vec![Tag::public_key(self.bob.public_key())],
            content,
        )
    }

    /// A kind-25910 event to bob created at time zero whose content is exactly `content`.
    fn saying(&self, content: &str) -> Event {
        self.alice.sign(
            CONTEXTVM_KIND,
            EPOCH_SECS,
            vec![Tag::public_key(self.bob.public_key())],
            content.to_owned(),
        )
    }

    /// Sends `event` from A and lets a batch writer commit it (the writer's own order and
    /// timing are tested with [`Bench::send_event`]).
    fn publish(&mut self, event: &Event, now: Duration) {
        self.send_event(event, now);
        while let Some(t) = self.relay.writer.poll_timeout() {
            self.relay.handle_timeout(t);
        }
    }

    /// Sends `event` from A, as it arrives at the relay.
    fn send_event(&mut self, event: &Event, now: Duration) {
        self.relay
            .handle_client_message(A, ClientMessage::Event(Arc::new(event.clone())), now);
    }

    fn out(&mut self, conn: ConnId) -> Vec<RelayMessage> {
        let all: Vec<_> = std::iter::from_fn(|| self.relay.poll_transmit()).collect();
        all.into_iter()
            .filter(|(c, _)| *c == conn)
            .map(|(_, m)| m)
            .collect()
    }

    fn drain(&mut self) -> Vec<(ConnId, RelayMessage)> {
        std::iter::from_fn(|| self.relay.poll_transmit()).collect()
    }
}

fn oks(messages: &[(ConnId, RelayMessage)]) -> Vec<(bool, String)> {
    messages
        .iter()
        .filter_map(|(c, m)| match m {
            RelayMessage::Ok {
                accepted, message, ..
            } if *c == A => Some((*accepted, message.clone())),
            _ => None,
        })
        .collect()
}

fn deliveries(messages: &[(ConnId, RelayMessage)]) -> usize {
    messages
        .iter()
        .filter(|(c, m)| *c == B && matches!(m, RelayMessage::Event { .. }))
        .count()
}

#[test]
fn strfry_answers_a_resent_ephemeral_event_with_duplicate_and_does_not_rebroadcast() {
    let mut b = Bench::new(RelayProfile::strfry());
    b.subscribe(B, s(0));
    let e = b.event(10, s(0));
    b.publish(&e, s(0));
    b.relay.handle_timeout(s(1)); // the 100 ms delivery batch
    let first = b.drain();
    assert_eq!(oks(&first), vec![(true, String::new())]);
    assert_eq!(deliveries(&first), 1);
    b.publish(&e, s(2));
    b.relay.handle_timeout(s(3));
    let again = b.drain();
    assert_eq!(
        oks(&again),
        vec![(true, "duplicate: have this event".into())]
    );
    assert_eq!(deliveries(&again), 0);
}

/// The stored events a new REQ gets back, by id.
fn replayed(b: &mut Bench, now: Duration) -> Vec<EventId> {
    b.subscribe(B, now)
        .into_iter()
        .filter_map(|m| match m {
            RelayMessage::Event { event, .. } => Some(event.id),
            _ => None,
        })
        .collect()
}

#[test]
fn strfry_forgets_a_stored_event_at_its_first_sweep_300_s_after_its_created_at() {
    let mut b = Bench::new(RelayProfile::strfry());
    // Created 50 s before it arrives; a fresh one after it, so it is not the newest.
    let old = b.event(10, s(0));
    let fresh = b.event(10, s(50));
    b.publish(&old, s(50));
    b.publish(&fresh, s(50));
    b.drain();
    assert_eq!(replayed(&mut b, s(100)), vec![fresh.id, old.id]);
    // 300 s old at 300 s; the sweeps run every 9 s, so it goes at 306 s, long before 300 s
    // after it arrived (350 s).
    assert_eq!(replayed(&mut b, s(305)), vec![fresh.id, old.id]);
    assert_eq!(replayed(&mut b, s(306)), vec![fresh.id]);
    // The fresh one's time comes at 351 s, but the newest event is never swept.
    assert_eq!(replayed(&mut b, s(400)), vec![fresh.id]);
}

#[test]
fn strfry_never_sweeps_its_most_recent_event() {
    let mut b = Bench::new(RelayProfile::strfry());
    let last = b.event(10, s(0));
    b.publish(&last, s(0));
    b.drain();
    // Alone on a quiet relay, it outlives its 300 s.
    assert_eq!(replayed(&mut b, s(1000)), vec![last.id]);
    // Once another arrives, the next sweep takes it.
    let next = b.event(10, s(1000));
    b.publish(&next, s(1000));
    b.drain();
    assert_eq!(replayed(&mut b, s(1007)), vec![next.id, last.id]);
    assert_eq!(replayed(&mut b, s(1008)), vec![next.id]);
    // The most recent event of any kind: a gift wrap (regular, kept for good) arriving after
    // the last ephemeral event frees it too.
    let mut b = Bench::new(RelayProfile::strfry());
    let last = b.event(10, s(0));
    b.publish(&last, s(0));
    let wrap = b
        .alice
        .sign(1059, EPOCH_SECS + 500, vec![], "sealed".into());
    b.publish(&wrap, s(500));
    b.drain();
    assert_eq!(replayed(&mut b, s(503)), vec![last.id]);
    assert_eq!(replayed(&mut b, s(504)), Vec::<EventId>::new());
}

#[test]
fn strfry_replays_stored_events_newest_first_and_not_again_live() {
    let mut b = Bench::new(RelayProfile::strfry());
    // Three events in two seconds: created_at 10, 11, 11 (the last two tie on the second).
    let events = [b.event(1, s(10)), b.event(1, s(11)), b.event(1, s(11))];
    for (i, e) in events.iter().enumerate() {
        b.publish(e, s(10) + Duration::from_millis(400 * i as u64));
    }
    // Subscribed before the delivery batch is flushed: the replay has them all.
    let replay: Vec<EventId> = b
        .subscribe(B, Duration::from_millis(11_000))
        .into_iter()
        .filter_map(|m| match m {
            RelayMessage::Event { event, .. } => Some(event.id),
            _ => None,
        })
        .collect();
    assert_eq!(replay, vec![events[2].id, events[1].id, events[0].id]);
    // The batch flush that follows does not send them to that subscription again.
    b.relay.handle_timeout(s(12));
    assert_eq!(deliveries(&b.drain()), 0);
}

#[test]
fn strfry_rejects_a_70_kb_event_as_too_large() {
    let mut b = Bench::new(RelayProfile::strfry());
    let e = b.event(70_000, s(0));
    b.publish(&e, s(0));
    let ok = oks(&b.drain());
    assert_eq!(ok.len(), 1);
    assert!(!ok[0].0);
    assert_eq!(
        ok[0].1,
        format!("invalid: event too large: {}", e.as_json().len())
    );
    assert_eq!(b.relay.counters().rejected.get("invalid"), Some(&1));
}

#[test]
fn strfry_drops_the_connection_silently_for_a_message_over_128_kib() {
    let mut b = Bench::new(RelayProfile::strfry());
    let e = b.event(140_000, s(0));
    b.publish(&e, s(0));
    assert!(b.drain().is_empty(), "no message at all");
    assert_eq!(b.relay.poll_dropped(), Some(A));
    assert!(!b.relay.is_connected(A));
}

#[test]
fn strfry_rejects_expired_ephemeral_events_and_events_from_the_future() {
    let mut b = Bench::new(RelayProfile::strfry());
    let old = b.event(1, s(0));
    b.publish(&old, s(61));
    let future = b.event(1, s(2000));
    b.publish(&future, s(61));
    let ok = oks(&b.drain());
    assert_eq!(ok[0], (false, "invalid: ephemeral event expired".into()));
    assert_eq!(ok[1], (false, "invalid: created_at too late".into()));
}

#[test]
fn strfry_batches_live_deliveries_with_its_debounce() {
    let mut b = Bench::new(RelayProfile::strfry());
    b.subscribe(B, s(0));
    let (e1, e2) = (b.event(1, s(0)), b.event(1, s(0)));
    b.publish(&e1, Duration::from_millis(10));
    b.publish(&e2, Duration::from_millis(50));
    assert_eq!(
        deliveries(&b.drain()),
        0,
        "nothing before the batch flushes"
    );
    // Committed 0.9 ms after it arrived (one event: 0.75 ms + 0.15 ms), flushed 100 ms later.
    let flush = Duration::from_micros(110_900);
    assert_eq!(b.relay.poll_timeout(), Some(flush));
    b.relay.handle_timeout(flush);
    assert_eq!(deliveries(&b.drain()), 2);
}

#[test]
fn strfry_answers_too_many_reqs_with_a_notice() {
    let mut b = Bench::new(RelayProfile {
        max_subscriptions: 2,
        ..RelayProfile::strfry()
    });
    for i in 0..3 {
        b.relay.handle_client_message(
            B,
            ClientMessage::Req {
                sub: format!("s{i}"),
                filter: Box::new(Filter::new()),
            },
            s(0),
        );
    }
    let out = b.out(B);
    assert_eq!(
        out.last(),
        Some(&RelayMessage::Notice {
            message: "ERROR: too many concurrent REQs".into()
        })
    );
}

/// Whether each of `count` events published at `at` was accepted.
fn accepted_at(b: &mut Bench, count: usize, at: Duration) -> Vec<bool> {
    for _ in 0..count {
        let e = b.event(1, at);
        b.publish(&e, at);
    }
    oks(&b.drain()).into_iter().map(|(a, _)| a).collect()
}

/// noteguard's count (relay.damus.io): a burst of six, then tokens only for whole seconds
/// since the last *accepted* event, one taken before checking: a retry after 10 s earns one
/// token and spends it, so is refused; after 20 s, two, and one event passes.
#[test]
fn damus_counts_whole_seconds_since_the_last_accepted_event_and_takes_a_token_first() {
    let mut b = Bench::new(RelayProfile::damus());
    let ok = accepted_at(&mut b, 7, s(0));
    assert_eq!(ok, [true, true, true, true, true, true, false]);
    let e = b.event(1, s(0));
    b.publish(&e, s(0));
    assert_eq!(
        oks(&b.drain()),
        vec![(false, "rate-limited: you note too much".into())]
    );
    // A smooth bucket of 6/min would have a token after 10 s; noteguard's count does not.
    assert_eq!(accepted_at(&mut b, 1, s(10)), [false]);
    assert_eq!(accepted_at(&mut b, 2, s(20)), [true, false]);
    // Fractions of a second earn nothing: 19.9 s after the last accepted event is 19 s, one
    // token, spent at once.
    assert_eq!(
        accepted_at(&mut b, 1, Duration::from_millis(39_900)),
        [false]
    );
    assert_eq!(accepted_at(&mut b, 1, s(40)), [true]);
}

#[test]
fn nostr_rs_relay_sends_no_ok_for_ephemeral_events_and_rebroadcasts_resends() {
    let mut b = Bench::new(RelayProfile::nostr_rs_relay());
    b.subscribe(B, s(0));
    let e = b.event(1, s(0));
    b.publish(&e, s(0));
    b.publish(&e, s(1));
    let out = b.drain();
    assert!(oks(&out).is_empty(), "no OK at all");
    assert_eq!(deliveries(&out), 2, "not de-duplicated");
    assert_eq!(b.relay.counters().ok_withheld, 2, "the silence is counted");
}

#[test]
fn nostr_rs_relay_answers_an_oversized_message_with_a_notice_and_drops_the_connection() {
    let mut b = Bench::new(RelayProfile::nostr_rs_relay());
    let e = b.event(300_000, s(0));
    b.publish(&e, s(0));
    let out = b.drain();
    assert!(
        matches!(&out[..], [(A, RelayMessage::Notice { message })] if message.starts_with("message too large (300") && message.ends_with(" > 262144)")),
        "{out:?}"
    );
    assert_eq!(b.relay.poll_dropped(), Some(A));
}

#[test]
fn nostr_rs_relay_event_limit_gives_a_notice_and_keeps_the_connection() {
    // With the WebSocket limit raised, the event limit (on the whole EVENT message) answers.
    let mut b = Bench::new(RelayProfile {
        max_message_bytes: Some(1 << 20),
        ..RelayProfile::nostr_rs_relay()
    });
    let e = b.event(300_000, s(0));
    b.publish(&e, s(0));
    let out = b.drain();
    assert_eq!(
        out,
        vec![(
            A,
            RelayMessage::Notice {
                message: "event exceeded max size".into()
            }
        )]
    );
    assert!(b.relay.is_connected(A));
}

#[test]
fn nostr_rs_relay_rate_limit_delays_instead_of_rejecting() {
    let mut b = Bench::new(RelayProfile::nostr_rs_relay_rate(2.0));
    b.subscribe(B, s(0));
    for _ in 0..4 {
        let e = b.event(1, s(0));
        b.publish(&e, s(0));
    }
    assert_eq!(deliveries(&b.drain()), 2, "the burst capacity goes at once");
    assert_eq!(b.relay.poll_timeout(), Some(Duration::from_millis(500)));
    b.relay.handle_timeout(Duration::from_millis(500));
    assert_eq!(deliveries(&b.drain()), 1);
    b.relay.handle_timeout(s(1));
    assert_eq!(deliveries(&b.drain()), 1);
    assert!(b.relay.counters().rejected.is_empty());
}

#[test]
fn khatru_mutes_ephemeral_events_nobody_listens_to() {
    let mut b = Bench::new(RelayProfile::khatru());
    let e = b.event(1, s(0));
    b.publish(&e, s(0));
    assert_eq!(
        oks(&b.drain()),
        vec![(false, "mute: no one was listening for this".into())]
    );
    b.subscribe(B, s(0));
    let e = b.event(1, s(0));
    b.publish(&e, s(0));
    assert_eq!(
        oks(&b.drain()),
        vec![(true, "broadcasted to 1 listeners".into())]
    );
}

#[test]
fn khatru_closes_connections_over_its_read_limit() {
    let mut b = Bench::new(RelayProfile::khatru());
    let e = b.event(600_000, s(0));
    b.publish(&e, s(0));
    assert_eq!(b.relay.poll_dropped(), Some(A));
}

/// khatru's limiters give tokens back in steps on one timer started with the relay: 2 every
/// 3 minutes, so 90 s after a spent burst nothing is back (a smooth refill would have one).
#[test]
fn khatru_sane_defaults_allow_a_burst_of_ten_per_ip_and_give_two_back_every_three_minutes() {
    let mut b = Bench::new(RelayProfile::khatru_sane_defaults());
    b.subscribe(B, s(0));
    let ok = accepted_at(&mut b, 10, s(0));
    assert!(ok.iter().all(|a| *a), "{ok:?}");
    let e = b.event(1, s(0));
    b.publish(&e, s(0));
    assert_eq!(
        oks(&b.drain()),
        vec![(false, "rate-limited: slow down, please".into())]
    );
    assert_eq!(accepted_at(&mut b, 1, s(90)), [false]);
    assert_eq!(accepted_at(&mut b, 1, s(179)), [false]);
    assert_eq!(accepted_at(&mut b, 3, s(180)), [true, true, false]);
    // The timer's phase is the relay's, not the bucket's: the next step is at 360 s.
    assert_eq!(accepted_at(&mut b, 1, s(359)), [false]);
    assert_eq!(accepted_at(&mut b, 2, s(360)), [true, true]);
}

/// khatru's sane defaults refuse base64 media in the content before the rate limiter runs,
/// so a refused event costs no token; plain khatru takes it.
#[test]
fn khatru_sane_defaults_refuse_base64_media_without_taking_a_token() {
    let mut b = Bench::new(RelayProfile::khatru_sane_defaults());
    b.subscribe(B, s(0));
    for content in [
        "see data:image/png;base64,AAAA",
        "data:video/mp4;base64,AAAA",
    ] {
        let e = b.saying(content);
        b.publish(&e, s(0));
        assert_eq!(
            oks(&b.drain()),
            vec![(false, "blocked: event with base64 media".into())]
        );
    }
    assert!(accepted_at(&mut b, 10, s(0)).iter().all(|a| *a));
    let mut plain = Bench::new(RelayProfile::khatru());
    plain.subscribe(B, s(0));
    let e = plain.saying("data:image/png;base64,AAAA");
    plain.publish(&e, s(0));
    assert!(oks(&plain.drain())[0].0);
}

/// khatru caps neither subscriptions per connection nor subscription ids.
#[test]
fn khatru_takes_any_number_of_subscriptions_with_long_ids() {
    let mut b = Bench::new(RelayProfile::khatru());
    for i in 0..1_500 {
        let filter = Filter::new().kind(Kind::from(CONTEXTVM_KIND));
        b.relay.handle_client_message(
            B,
            ClientMessage::Req {
                sub: format!("{i:0>100}"),
                filter: Box::new(filter),
            },
            s(0),
        );
    }
    let out = b.out(B);
    assert_eq!(out.len(), 1_500, "one EOSE each");
    assert!(out.iter().all(|m| matches!(m, RelayMessage::Eose { .. })));
}

#[test]
fn relay_builder_allows_sixty_notes_a_minute_per_connection_with_no_size_limit() {
    let mut b = Bench::new(RelayProfile::relay_builder());
    let big = b.event(200_000, s(0));
    b.publish(&big, s(0));
    for _ in 0..60 {
        let e = b.event(1, s(0));
        b.publish(&e, s(0));
    }
    let ok = oks(&b.drain());
    assert!(ok[0].0, "a 200 KB event is fine");
    assert_eq!(ok.iter().filter(|(a, _)| !*a).count(), 1);
    assert_eq!(ok[60], (false, "rate-limited: slow down".into()));
    // The count noteguard uses too: one second earns one token, which the event spends.
    assert_eq!(accepted_at(&mut b, 1, s(1)), [false]);
    assert_eq!(accepted_at(&mut b, 1, s(2)), [true]);
}

#[test]
fn events_with_a_bad_signature_are_refused() {
    let mut b = Bench::new(RelayProfile::ideal());
    let good = b.event(1, s(0));
    let mut json: serde_json::Value = serde_json::from_str(&good.as_json()).unwrap();
    json["content"] = "tampered".into();
    let bad = Event::from_json(json.to_string()).unwrap();
    b.publish(&bad, s(0));
    assert_eq!(
        oks(&b.drain()),
        vec![(false, "invalid: bad event id or signature".into())]
    );
}

#[test]
fn every_built_in_profile_has_sources_and_valid_delays() {
    for name in RelayProfile::BUILT_IN {
        let p = RelayProfile::built_in(name).unwrap();
        assert_eq!(p.name, name);
        assert!(p.sources.len() > 20, "{name} documents its sources");
        p.impairments.peer_to_relay.delay.validate().unwrap();
        p.impairments.relay_to_peer.delay.validate().unwrap();
    }
    assert!(RelayProfile::built_in("nope").is_none());
}

#[test]
fn every_built_in_profile_is_one_relay_s_or_a_version_of_one() {
    let mut named: Vec<&str> = RelayProfile::FAMILIES.to_vec();
    for (version, of) in RelayProfile::VERSIONS {
        assert!(
            RelayProfile::FAMILIES.contains(&of),
            "{version} is a version of {of}"
        );
        assert!(!RelayProfile::FAMILIES.contains(&version));
        named.push(version);
    }
    named.sort_unstable();
    let mut built_in = RelayProfile::BUILT_IN.to_vec();
    built_in.sort_unstable();
    assert_eq!(named, built_in);
}

#[test]
fn nostr_rs_relay_0_9_answers_ephemeral_events_and_is_otherwise_0_8_12() {
    let old = RelayProfile::nostr_rs_relay();
    let new = RelayProfile::built_in("nostr-rs-relay-0.9").unwrap();
    assert!(!old.ephemeral.send_ok);
    assert!(new.ephemeral.send_ok);
    let mut same = new.clone();
    same.ephemeral.send_ok = false;
    same.name = old.name.clone();
    same.sources = old.sources.clone();
    assert_eq!(same, old);
    let mut b = Bench::new(new);
    let event = b.event(1, s(0));
    b.publish(&event, s(0));
    assert_eq!(oks(&b.drain()), vec![(true, String::new())]);
}

#[test]
fn a_subscription_id_over_the_limit_gets_closed_with_the_id() {
    let mut b = Bench::new(RelayProfile::strfry());
    for len in [65, 72] {
        let long = "s".repeat(len);
        b.relay.handle_client_message(
            B,
            ClientMessage::Req {
                sub: long.clone(),
                filter: Box::new(Filter::new()),
            },
            s(0),
        );
        assert_eq!(
            b.out(B),
            vec![RelayMessage::Closed {
                sub: long,
                message: "ERROR: bad req: invalid subscription id length".into()
            }]
        );
    }
    let fits = "s".repeat(64);
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: fits.clone(),
            filter: Box::new(Filter::new()),
        },
        s(0),
    );
    assert_eq!(b.out(B), vec![RelayMessage::Eose { sub: fits }]);
}

#[test]
fn strfry_refuses_the_201st_subscription_after_its_eose_and_keeps_it_not() {
    let mut b = Bench::new(RelayProfile::strfry());
    for i in 0..200 {
        b.relay.handle_client_message(
            B,
            ClientMessage::Req {
                sub: format!("s{i}"),
                filter: Box::new(Filter::new()),
            },
            s(0),
        );
    }
    b.out(B);
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: "over".into(),
            filter: Box::new(Filter::new()),
        },
        s(0),
    );
    assert_eq!(
        b.out(B),
        vec![
            RelayMessage::Eose { sub: "over".into() },
            RelayMessage::Notice {
                message: "ERROR: too many concurrent REQs".into()
            }
        ]
    );
    let e = b.event(1, s(0));
    b.publish(&e, s(0));
    b.relay.handle_timeout(s(1));
    let to_over = b
        .out(B)
        .into_iter()
        .filter(|m| matches!(m, RelayMessage::Event { sub, .. } if sub == "over"))
        .count();
    assert_eq!(to_over, 0, "the refused subscription gets nothing live");
}

#[test]
fn strfry_refuses_a_req_for_gift_wraps_only_and_never_sends_them() {
    let mut b = Bench::new(RelayProfile::strfry());
    let gift_wraps = Filter::new().kind(Kind::from(1059));
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: "g".into(),
            filter: Box::new(gift_wraps),
        },
        s(0),
    );
    let refused = RelayMessage::Closed {
        sub: "g".into(),
        message: "ERROR: auth-required: requested filter requires authentication".into(),
    };
    // A NIP-42 challenge first, once per connection (RelayIngester.cpp: only when the
    // connection has no auth session yet).
    let out = b.out(B);
    assert_eq!(out.len(), 2, "{out:?}");
    let RelayMessage::Auth { challenge } = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(challenge.len(), 22);
    assert!(challenge.bytes().all(|c| c.is_ascii_alphanumeric()));
    assert_eq!(out[1], refused);
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: "g".into(),
            filter: Box::new(Filter::new().kind(Kind::from(1059))),
        },
        s(0),
    );
    assert_eq!(b.out(B), vec![refused.clone()]);
    // Another connection gets a challenge of its own.
    b.relay.connect(C, "10.0.0.3");
    b.relay.handle_client_message(
        C,
        ClientMessage::Req {
            sub: "g".into(),
            filter: Box::new(Filter::new().kind(Kind::from(1059))),
        },
        s(0),
    );
    let other = b.out(C);
    assert!(
        matches!(&other[0], RelayMessage::Auth { challenge: c } if c != challenge),
        "{other:?}"
    );
    // A REQ that also asks for another kind is kept, but gift wraps do not reach it.
    let mixed = Filter::new().kinds([Kind::from(1059), Kind::from(CONTEXTVM_KIND)]);
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: "m".into(),
            filter: Box::new(mixed),
        },
        s(0),
    );
    assert_eq!(b.out(B), vec![RelayMessage::Eose { sub: "m".into() }]);
    let wrap = b.alice.sign(1059, EPOCH_SECS, vec![], "sealed".into());
    let plain = b.event(1, s(0));
    b.publish(&wrap, s(0));
    b.publish(&plain, s(0));
    b.relay.handle_timeout(s(1));
    let delivered: Vec<EventId> = b
        .out(B)
        .into_iter()
        .filter_map(|m| match m {
            RelayMessage::Event { event, .. } => Some(event.id),
            _ => None,
        })
        .collect();
    assert_eq!(delivered, vec![plain.id]);
    // The gift wrap the mixed subscription matched is reported as withheld, and counted.
    assert_eq!(b.relay.poll_withheld(), Some((B, wrap.id, "auth-required")));
    assert_eq!(b.relay.poll_withheld(), None);
    assert_eq!(b.relay.counters().withheld, 1);
    // A new mixed subscription is not replayed the stored gift wrap either: withheld again.
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: "m2".into(),
            filter: Box::new(Filter::new().kinds([Kind::from(1059), Kind::from(CONTEXTVM_KIND)])),
        },
        s(2),
    );
    assert!(b
        .out(B)
        .iter()
        .all(|m| !matches!(m, RelayMessage::Event { event, .. } if event.id == wrap.id)));
    assert_eq!(b.relay.poll_withheld(), Some((B, wrap.id, "auth-required")));
}

/// A new REQ gets back at most `limit` stored events, and never more than strfry's
/// `maxFilterLimit`, newest first.
#[test]
fn stored_replay_honours_limit_and_the_relay_s_maximum() {
    let mut b = Bench::new(RelayProfile::strfry());
    for i in 0..600 {
        let e = b.event(1, s(i / 100));
        b.publish(&e, s(0));
    }
    b.drain();
    let replayed = |b: &mut Bench, limit: Option<usize>| {
        let mut filter = Filter::new().kind(Kind::from(CONTEXTVM_KIND));
        if let Some(l) = limit {
            filter = filter.limit(l);
        }
        b.relay.handle_client_message(
            B,
            ClientMessage::Req {
                sub: "r".into(),
                filter: Box::new(filter),
            },
            s(1),
        );
        b.out(B)
            .iter()
            .filter(|m| matches!(m, RelayMessage::Event { .. }))
            .count()
    };
    assert_eq!(replayed(&mut b, Some(7)), 7);
    assert_eq!(replayed(&mut b, None), 500);
    assert_eq!(replayed(&mut b, Some(10_000)), 500);
}

/// The store keeps its bounds under a flood, the oldest events going first.
#[test]
fn the_store_evicts_the_oldest_events_beyond_its_bounds() {
    let mut b = Bench::new(RelayProfile::strfry());
    b.relay.set_store_bounds(10, 1 << 20);
    let events: Vec<Event> = (0..25).map(|_| b.event(1, s(0))).collect();
    for e in &events {
        b.publish(e, s(0));
    }
    b.drain();
    assert_eq!(b.relay.counters().evicted, 15);
    // The oldest are gone: re-sending one is new to the relay, the newest is a duplicate.
    b.publish(&events[0], s(0));
    b.publish(&events[24], s(0));
    let answers = oks(&b.drain());
    assert_eq!(answers[0], (true, String::new()));
    assert_eq!(answers[1], (true, "duplicate: have this event".into()));
    // And by bytes.
    let mut b = Bench::new(RelayProfile::strfry());
    b.relay.set_store_bounds(1000, 50_000);
    for _ in 0..10 {
        let e = b.event(10_000, s(0));
        b.publish(&e, s(0));
    }
    assert_eq!(b.relay.counters().evicted, 6);
}

/// The `#p` index offers every subscription a filter could match, never fewer, and forgets
/// subscriptions that are closed, replaced or whose connection went away.
#[test]
fn the_p_index_offers_every_subscription_that_matches_and_forgets_closed_ones() {
    use nostr::prelude::{Kind, PublicKey, Tag};
    let me = crate::nip01::Identity::derive(9, "x");
    let a = crate::nip01::Identity::derive(9, "a").public_key();
    let b = crate::nip01::Identity::derive(9, "b").public_key();
    let to = |p: &PublicKey| me.sign(25910, 0, vec![Tag::public_key(*p)], String::new());
    let untagged = me.sign(25910, 0, vec![], String::new());
    let filters = [
        Filter::new().kind(Kind::from(25910u16)).pubkey(a),
        Filter::new().kind(Kind::from(25910u16)),
        Filter::new().pubkeys([a, b]),
        Filter::new().author(me.public_key()),
    ];
    let mut index = super::sub_index::SubIndex::default();
    for (i, f) in filters.iter().enumerate() {
        index.insert((i as u64, "s".into()), f);
    }
    for e in [to(&a), to(&b), untagged.clone()] {
        let offered = index.candidates(&super::p_tags(&e));
        for (i, f) in filters.iter().enumerate() {
            if f.match_event(&e, MatchEventOptions::default()) {
                assert!(offered.contains(&(i as u64, "s".into())), "{f:?} on {e:?}");
            }
        }
    }
    assert!(
        !index
            .candidates(&super::p_tags(&to(&b)))
            .contains(&(0, "s".into())),
        "it does narrow"
    );
    for (i, f) in filters.iter().enumerate() {
        index.remove(&(i as u64, "s".into()), f);
    }
    assert_eq!(index.len(), 0);
}

/// Through the relay: a replaced subscription and a closed connection leave nothing behind.
#[test]
fn replaced_and_closed_subscriptions_leave_the_index() {
    let mut b = Bench::new(RelayProfile::ideal());
    let e = b.event(1, s(0));
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: "x".into(),
            filter: Box::new(Filter::new().kind(e.kind)),
        },
        s(0),
    );
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: "x".into(),
            filter: Box::new(Filter::new().pubkey(e.pubkey)),
        },
        s(0),
    );
    assert_eq!(b.relay.index.len(), 1, "the REQ replaced the first");
    b.relay.disconnect(B);
    assert_eq!(b.relay.index.len(), 0);
}

/// strfry with a batch writer whose commits take 2 ms (the tests do not depend on strfry's
/// calibrated figures).
fn batch_writer() -> RelayProfile {
    RelayProfile {
        intake: Intake::BatchCommit {
            per_batch: Duration::from_millis(2),
            per_event: Duration::ZERO,
        },
        delivery_batch: None,
        ..RelayProfile::strfry()
    }
}

/// Publishes `events` from connection A at the given times and returns the ids of the OKs A
/// got and of the deliveries B got, in the order the relay sent them.
fn through_writer(b: &mut Bench, events: &[(Event, Duration)]) -> (Vec<EventId>, Vec<EventId>) {
    let mut sent = Vec::new();
    for (e, at) in events {
        b.relay.handle_timeout(*at);
        sent.extend(b.drain());
        b.send_event(e, *at);
        sent.extend(b.drain());
    }
    b.relay.handle_timeout(s(10));
    sent.extend(b.drain());
    let oks = sent
        .iter()
        .filter_map(|(c, m)| match m {
            RelayMessage::Ok { id, accepted, .. } if *c == A && *accepted => Some(*id),
            _ => None,
        })
        .collect();
    let delivered = sent
        .iter()
        .filter_map(|(c, m)| match m {
            RelayMessage::Event { event, .. } if *c == B => Some(event.id),
            _ => None,
        })
        .collect();
    (oks, delivered)
}

#[test]
fn a_batch_writer_sorts_a_same_second_burst_by_id_in_its_oks_and_deliveries() {
    let mut b = Bench::new(batch_writer());
    b.subscribe(B, s(0));
    // 20 events back to back (10 µs apart) within one created_at second: the first commits
    // alone, the other 19 queue meanwhile and are written as one batch sorted by id.
    let events: Vec<(Event, Duration)> = (0..20)
        .map(|i| (b.event(10, s(0)), Duration::from_micros(10 * i)))
        .collect();
    let (oks, delivered) = through_writer(&mut b, &events);
    let mut expected: Vec<EventId> = events[1..].iter().map(|(e, _)| e.id).collect();
    expected.sort();
    expected.insert(0, events[0].0.id);
    assert_eq!(oks, expected, "OKs in the batch's sorted order");
    assert_eq!(
        delivered, expected,
        "deliveries in the batch's sorted order"
    );
    let sent: Vec<EventId> = events.iter().map(|(e, _)| e.id).collect();
    assert_ne!(delivered, sent, "20 random ids are not already sorted");
}

#[test]
fn a_batch_writer_keeps_the_order_of_rising_created_at_and_of_spaced_events() {
    // Rising created_at: the sort keeps the order they were sent in.
    let mut b = Bench::new(batch_writer());
    b.subscribe(B, s(0));
    let rising: Vec<(Event, Duration)> = (0..20)
        .map(|i| (b.event(10, s(i)), Duration::from_micros(10 * i)))
        .collect();
    let sent: Vec<EventId> = rising.iter().map(|(e, _)| e.id).collect();
    assert_eq!(through_writer(&mut b, &rising), (sent.clone(), sent));
    // Spaced wider than a commit: every batch holds one event.
    let mut b = Bench::new(batch_writer());
    b.subscribe(B, s(0));
    let spaced: Vec<(Event, Duration)> = (0..20)
        .map(|i| (b.event(10, s(0)), Duration::from_millis(3 * i)))
        .collect();
    let sent: Vec<EventId> = spaced.iter().map(|(e, _)| e.id).collect();
    assert_eq!(through_writer(&mut b, &spaced), (sent.clone(), sent));
}

#[test]
fn a_batch_writer_answers_nothing_before_its_commit_and_loses_it_on_a_restart() {
    let mut b = Bench::new(batch_writer());
    b.subscribe(B, s(0));
    let e = b.event(10, s(0));
    b.send_event(&e, s(0));
    assert!(
        b.drain().is_empty(),
        "no OK and no delivery before the commit"
    );
    assert_eq!(b.relay.poll_timeout(), Some(Duration::from_millis(2)));
    // The same event again while it waits: strfry's write finds it a duplicate.
    b.send_event(&e, Duration::from_millis(1));
    assert_eq!(
        oks(&b.drain()),
        vec![(true, "duplicate: have this event".into())]
    );
    b.relay.restart();
    b.relay.handle_timeout(s(1));
    assert!(b.drain().is_empty());
    assert_eq!(
        b.relay.counters().accepted,
        0,
        "the uncommitted batch is lost"
    );
}

/// A gift wrap (kind 1059, a regular kind) to bob, created at time zero.
fn gift_wrap(b: &Bench) -> Event {
    b.alice.sign(
        1059,
        EPOCH_SECS,
        vec![Tag::public_key(b.bob.public_key())],
        "sealed".into(),
    )
}

/// What a connection's subscription to gift wraps gets (events by id, and the rest).
fn gift_wraps_to(b: &mut Bench, conn: ConnId, sub: &str, now: Duration) -> Vec<RelayMessage> {
    b.relay.handle_client_message(
        conn,
        ClientMessage::Req {
            sub: sub.into(),
            filter: Box::new(Filter::new().kind(Kind::from(1059))),
        },
        now,
    );
    b.out(conn)
}

/// Measured on nostr-rs-relay 0.8.12 and the Python nostr-relay 1.14 (the probe's gift-wrap
/// storage): a regular event is stored, a re-send is answered `duplicate:` and not delivered
/// again, and a new subscription gets it back before EOSE.
#[test]
fn a_relay_that_stores_regular_events_answers_a_re_sent_one_duplicate_and_replays_it() {
    for profile in [
        RelayProfile::nostr_rs_relay(),
        RelayProfile::nostr_relay_py(),
    ] {
        let (accepted, message) = profile.duplicate_answer.clone();
        let mut b = Bench::new(profile);
        gift_wraps_to(&mut b, B, "live", s(0));
        let wrap = gift_wrap(&b);
        b.publish(&wrap, s(0));
        b.publish(&wrap, s(1));
        b.relay.handle_timeout(s(2));
        let sent = b.drain();
        let last_to_a = sent
            .iter()
            .filter(|(c, _)| *c == A)
            .map(|(_, m)| m)
            .next_back();
        assert_eq!(
            last_to_a,
            Some(&RelayMessage::Ok {
                id: wrap.id,
                accepted,
                message
            })
        );
        let live = sent
            .iter()
            .filter(|(c, m)| *c == B && matches!(m, RelayMessage::Event { .. }))
            .count();
        assert_eq!(live, 1, "the re-send is not delivered again");
        let replayed = gift_wraps_to(&mut b, B, "new", s(3));
        assert!(
            matches!(&replayed[..], [RelayMessage::Event { event, .. }, RelayMessage::Eose { .. }] if event.id == wrap.id),
            "{replayed:?}"
        );
    }
}

/// khatru keeps nothing: a re-sent gift wrap is delivered again, and a new subscription gets
/// only its EOSE.
#[test]
fn a_relay_that_keeps_no_regular_events_delivers_a_re_send_and_replays_nothing() {
    let mut b = Bench::new(RelayProfile::khatru());
    gift_wraps_to(&mut b, B, "live", s(0));
    let wrap = gift_wrap(&b);
    b.publish(&wrap, s(0));
    b.publish(&wrap, s(1));
    b.relay.handle_timeout(s(2));
    let live = b
        .out(B)
        .into_iter()
        .filter(|m| matches!(m, RelayMessage::Event { .. }))
        .count();
    assert_eq!(live, 2);
    assert_eq!(
        gift_wraps_to(&mut b, B, "new", s(3)),
        vec![RelayMessage::Eose { sub: "new".into() }]
    );
}

/// Stored regular events count against the store's bounds and go after every stored
/// ephemeral event.
#[test]
fn regular_events_are_evicted_after_ephemeral_ones() {
    let mut b = Bench::new(RelayProfile::nostr_relay_py());
    b.relay.store_bounds = (2, usize::MAX);
    let wrap = gift_wrap(&b);
    b.publish(&wrap, s(0));
    let first = b.event(1, s(0));
    let second = b.event(1, s(0));
    b.publish(&first, s(0));
    b.publish(&second, s(0));
    assert!(
        b.relay.stored.contains_key(&wrap.id),
        "the regular one stays"
    );
    assert!(
        !b.relay.stored.contains_key(&first.id),
        "the oldest ephemeral goes"
    );
    assert!(b.relay.stored.contains_key(&second.id));
}

/// Two copies of one regular event held by a delaying rate limit: the first released is
/// stored, the second is answered as a duplicate, and the store holds it once.
#[test]
fn a_copy_released_by_a_delaying_rate_limit_after_its_twin_was_stored_is_a_duplicate() {
    let profile = RelayProfile::nostr_rs_relay_rate(1.0);
    let (accepted, message) = profile.duplicate_answer.clone();
    let mut b = Bench::new(profile);
    let first = b.event(1, s(0));
    b.publish(&first, s(0)); // takes the one token
    let wrap = gift_wrap(&b);
    b.publish(&wrap, s(0));
    b.publish(&wrap, s(0)); // both copies wait for tokens
    b.relay.handle_timeout(s(5));
    let oks: Vec<RelayMessage> = b
        .out(A)
        .into_iter()
        .filter(|m| matches!(m, RelayMessage::Ok { id, .. } if *id == wrap.id))
        .collect();
    assert_eq!(
        oks,
        vec![
            RelayMessage::Ok {
                id: wrap.id,
                accepted: true,
                message: String::new()
            },
            RelayMessage::Ok {
                id: wrap.id,
                accepted,
                message
            }
        ]
    );
    let replayed: Vec<RelayMessage> = gift_wraps_to(&mut b, B, "new", s(6))
        .into_iter()
        .filter(|m| matches!(m, RelayMessage::Event { .. }))
        .collect();
    assert_eq!(replayed.len(), 1, "stored once");
}

/// strfry applies a REQ's `limit` to what it scanned, then drops what the reader may not see:
/// a gift wrap newer than the one readable event takes the only place, and is withheld.
#[test]
fn gift_wraps_withheld_from_a_replay_use_up_its_limit() {
    let mut b = Bench::new(RelayProfile::strfry());
    let plain = b.event(1, s(0));
    b.publish(&plain, s(0));
    let wrap = b.alice.sign(
        1059,
        EPOCH_SECS + 1,
        vec![Tag::public_key(b.bob.public_key())],
        "sealed".into(),
    );
    b.publish(&wrap, s(1));
    b.drain();
    let mixed = Filter::new()
        .kinds([Kind::from(1059), Kind::from(CONTEXTVM_KIND)])
        .limit(1);
    b.relay.handle_client_message(
        B,
        ClientMessage::Req {
            sub: "m".into(),
            filter: Box::new(mixed),
        },
        s(2),
    );
    assert_eq!(b.out(B), vec![RelayMessage::Eose { sub: "m".into() }]);
    assert_eq!(b.relay.poll_withheld(), Some((B, wrap.id, "auth-required")));
    assert_eq!(b.relay.poll_withheld(), None);
}
