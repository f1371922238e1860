//! `relaysim probe` against relaysim's own served profiles: the probe and the model agree on
//! what each profile's knobs say, and the strfry profile reproduces what a real strfry did
//! (`fixtures/probes/strfry-f8a56a8.json`) but for the differences the fixture documents.

use relaysim::live::{serve, ServeConfig};
use relaysim::probe::{differences, probe, ProbeConfig, ProbeReport};
use relaysim::relay::Intake;
use relaysim::RelayProfile;
use std::net::SocketAddr;
use std::time::Duration;

fn probe_profile(profile: RelayProfile, burst: usize, wait: Duration) -> ProbeReport {
    probe_profile_listening(profile, burst, wait, None)
}

/// As [`probe_profile`], the keepalive probe listening `keepalive` long.
fn probe_profile_listening(
    profile: RelayProfile,
    burst: usize,
    wait: Duration,
    keepalive: Option<Duration>,
) -> ProbeReport {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let relay = serve(ServeConfig::new(profile).listening_on(listen))
            .await
            .expect("serves on loopback");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let report = probe(ProbeConfig {
            url: format!("ws://{}", relay.local_addr),
            now_secs: now,
            nonce: 7,
            burst,
            wait,
            keepalive,
        })
        .await
        .expect("the probe runs");
        relay.shutdown().await;
        report
    })
}

#[test]
fn the_strfry_profile_answers_the_probe_as_a_real_strfry_did() {
    let fixture = fixture("strfry-f8a56a8");
    let burst = fixture.bursts[0].sent;
    let model = probe_profile(RelayProfile::strfry(), burst, Duration::from_secs(2));
    let same_second = &model.bursts[0];
    assert_eq!(same_second.name, "same-second");
    assert!(
        !same_second.in_order && !same_second.oks_in_order,
        "{same_second:?}"
    );
    // No difference: both REQs for gift wraps alone get strfry's AUTH challenge, then CLOSED.
    assert_eq!(
        differences(&model, &fixture),
        Vec::<String>::new(),
        "{}",
        model.to_text()
    );
    // Keepalive (the fixture listened 120 s): a ping before 55 s had passed since connecting,
    // as pings on the relay's clock give; the connection that answered pings kept, the one
    // that read nothing closed by the second tick.
    let heard = fixture.keepalive.as_ref().expect("the fixture's keepalive");
    let knobs = RelayProfile::strfry().keepalive.unwrap();
    let period = knobs.ping_every.as_secs_f64();
    assert!(knobs.on_relay_clock);
    assert!(heard.first_ping_s.is_some_and(|s| s < period), "{heard:?}");
    assert!(!heard.answering_closed);
    // The silent connection is closed at the second tick after it connected, at most two
    // periods in: a listen that long must have seen it.
    if heard.waited_s as f64 >= 2.0 * period {
        assert!(heard.silent_closed, "{heard:?}");
    }
}

#[test]
fn every_built_in_profile_answers_the_probe_as_its_knobs_say() {
    for name in RelayProfile::BUILT_IN {
        let profile = RelayProfile::built_in(name).unwrap();
        // The mobile profile is strfry's semantics behind a modelled link: its answers come
        // seconds late at random, which says nothing of the relay the probe looks for.
        if profile.impairments != relaysim::relay::impair::Impairments::none() {
            continue;
        }
        let report = probe_profile(profile.clone(), 40, Duration::from_millis(700));
        let text = report.to_text();
        // Bursts: a serial intake keeps every order; a batch writer reorders only the
        // same-second burst sent without waiting; anything awaiting its OK stays in order.
        for b in &report.bursts {
            let kept = match (&profile.intake, b.name.as_str()) {
                (_, "await-ok") | (Intake::Serial, _) => Some(true),
                // Twenty or more ids in a random order are in order with odds of 1 in 20!;
                // a rate limit (damus) may let only a few through.
                (Intake::BatchCommit { .. }, "same-second") if b.delivered >= 20 => Some(false),
                (Intake::BatchCommit { .. }, "same-second") => None,
                (Intake::BatchCommit { .. }, _) => Some(true),
                (Intake::Concurrent { .. }, _) => None,
            };
            if let Some(kept) = kept {
                assert_eq!(b.in_order, kept, "{name}: {b:?}\n{text}");
            }
        }
        // Bursts are refused only by a rate limit, in its own words, and surely so when 40
        // events at once are more than its bucket holds.
        let refused: std::collections::BTreeSet<&str> = report
            .bursts
            .iter()
            .flat_map(|b| b.refused.keys().map(String::as_str))
            .collect();
        match profile.rate_limit.as_ref().map(|r| (&r.action, r.capacity)) {
            Some((relaysim::relay::RateAction::Reject(words), capacity)) => {
                assert!(
                    refused.iter().all(|r| r == words),
                    "{name}: {refused:?}\n{text}"
                );
                if capacity < 40.0 {
                    assert!(refused.contains(words.as_str()), "{name}\n{text}");
                }
            }
            _ => assert!(refused.is_empty(), "{name}: {refused:?}\n{text}"),
        }
        // Ephemeral events: an OK, or none where the profile sends none.
        if !profile.ephemeral.send_ok {
            assert_eq!(report.ephemeral, "no answer", "{name}\n{text}");
        } else {
            assert!(report.ephemeral.starts_with("ok "), "{name}\n{text}");
        }
        // Subscription ids: up to the profile's length, refused with CLOSED past it.
        for (len, answer) in &report.subscription_ids {
            if *len <= profile.max_subscription_id {
                assert_eq!(answer, "eose", "{name}: {len}\n{text}");
            } else {
                assert!(answer.starts_with("closed: "), "{name}: {len}\n{text}");
            }
        }
        // The subscription limit, and how the one past it is refused.
        let expected = (profile.max_subscriptions < 260).then(|| {
            let n = profile.max_subscriptions + 1;
            let answer = match (
                &profile.too_many_subscriptions_notice,
                profile.refuses_subscription_after_replay,
            ) {
                (Some(m), true) => format!("eose, then notice: {m}"),
                (Some(m), false) => format!("notice: {m}"),
                (None, _) => "closed: rate-limited: too many subscriptions".into(),
            };
            (n, answer)
        });
        assert_eq!(report.subscription_limit, expected, "{name}\n{text}");
        // Gift wraps: refused after a NIP-42 challenge, and not delivered, where kind 1059
        // is restricted.
        let restricted = profile.restricted_read_kinds.contains(&1059);
        assert_eq!(
            report
                .gift_wrap_req
                .starts_with("auth, closed: ERROR: auth-required"),
            restricted,
            "{name}\n{text}"
        );
        if restricted {
            assert!(!report.gift_wrap_delivered, "{name}\n{text}");
        }
        // A REQ that asks for another kind beside gift wraps is kept, and gets gift wraps only
        // where they are not restricted (a rate limit may have refused the gift wrap itself).
        if profile.rate_limit.is_none() {
            assert_eq!(
                report.gift_wrap_mixed_delivered,
                Some(!restricted),
                "{name}\n{text}"
            );
        }
        // Gift wraps are a regular kind: stored where the profile keeps regular events (a
        // re-send answered with its duplicate answer, a new REQ gets it unless restricted);
        // where the bursts spent a rate limit's bucket, the gift wrap is refused instead.
        let limited = profile.rate_limit.as_ref().is_some_and(|r| {
            matches!(&r.action, relaysim::relay::RateAction::Reject(w)
                if report.gift_wrap_resend.as_deref() == Some(&format!("ok false: {w}")))
        });
        if limited {
            continue;
        }
        let (accepted, words) = &profile.duplicate_answer;
        let duplicate = format!("ok {accepted}: {words}");
        assert_eq!(
            report.gift_wrap_resend.as_deref() == Some(duplicate.as_str()),
            profile.store_regular,
            "{name}\n{text}"
        );
        let replayed = report
            .gift_wrap_replay
            .as_deref()
            .is_some_and(|r| r.starts_with("replayed"));
        assert_eq!(
            replayed,
            profile.store_regular && !restricted,
            "{name}\n{text}"
        );
    }
}

/// The differences between rust-nostr's nostr-relay-builder `LocalRelay` (a dev-dependency,
/// run in-process) and the `relay-builder` profile, each a documented modelling choice
/// (docs/relays.md).
#[test]
fn the_relay_builder_profile_answers_the_probe_as_the_real_local_relay_does() {
    use nostr_relay_builder::{LocalRelay, RelayBuilder};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let burst = 40;
    let wait = Duration::from_millis(700);
    let real = runtime.block_on(async {
        let relay = LocalRelay::new(RelayBuilder::default());
        relay.run().await.unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let report = probe(ProbeConfig {
            url: relay.url().await.to_string(),
            now_secs: now,
            nonce: 11,
            burst,
            wait,
            keepalive: None,
        })
        .await
        .expect("the probe runs");
        relay.shutdown();
        report
    });
    drop(runtime);
    let model = probe_profile(RelayProfile::relay_builder(), burst, wait);
    let differences = differences(&real, &model);
    assert_eq!(
        differences,
        Vec::<String>::new(),
        "real:\n{}\nmodel:\n{}",
        real.to_text(),
        model.to_text()
    );
}

/// The recorded probe of a real relay (`fixtures/probes/NAME.json`).
fn fixture(name: &str) -> ProbeReport {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/probes")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_python_relay_profile_answers_the_probe_as_the_real_nostr_relay_did() {
    let real = fixture("nostr-relay-py-1.14");
    let model = probe_profile(
        RelayProfile::nostr_relay_py(),
        real.bursts[0].sent,
        Duration::from_secs(2),
    );
    assert_eq!(
        differences(&model, &real),
        Vec::<String>::new(),
        "{}",
        model.to_text()
    );
}

#[test]
fn the_nostr_rs_relay_profile_answers_the_probe_as_the_real_0_8_12_did() {
    let real = fixture("nostr-rs-relay-0.8.12");
    let model = probe_profile(
        RelayProfile::nostr_rs_relay(),
        real.bursts[0].sent,
        Duration::from_secs(2),
    );
    // The known difference: a 1.1 MB message closed the real relay's connection without the
    // NOTICE it sent for 300 KB and 600 KB (fixtures/probes/README.md). A relay that sends a
    // NOTICE and closes while the client is still writing resets the connection, and whether
    // the client reads the NOTICE first is a race on any socket: under a loaded test machine
    // the served model loses it too, at 600 KB or 1.1 MB. So every difference must be that one,
    // an oversized message answered by a NOTICE on one side and a bare close on the other.
    let differences = differences(&model, &real);
    assert!(
        differences.iter().all(|d| is_the_socket_race(d)),
        "{differences:?}\n{}",
        model.to_text()
    );
}

/// An oversized message answered by a NOTICE on one side and a bare close on the other: the
/// one race on the socket a nostr-rs-relay comparison may show (above).
fn is_the_socket_race(difference: &str) -> bool {
    difference.contains("-byte event: ")
        && difference.contains("message too large (")
        && difference.contains("connection closed")
}

/// nostr-rs-relay 0.9.0, built from its tagged source (fixtures/probes/README.md), answers
/// ephemeral events with `OK true ""` (a7b169c) and otherwise as 0.8.12: its built-in profile
/// differs from it only by the socket race above, and the 0.8.12 profile by the OKs.
#[test]
fn nostr_rs_relay_0_9_answers_the_probe_as_its_profile_does() {
    let real = fixture("nostr-rs-relay-0.9.0");
    let profile = RelayProfile::built_in("nostr-rs-relay-0.9").unwrap();
    let model = probe_profile(profile, real.bursts[0].sent, Duration::from_secs(2));
    let found = differences(&model, &real);
    assert!(
        found.iter().all(|d| is_the_socket_race(d)),
        "{found:?}\n{}",
        model.to_text()
    );
    let unchanged = probe_profile(
        RelayProfile::nostr_rs_relay(),
        real.bursts[0].sent,
        Duration::from_secs(2),
    );
    assert!(differences(&unchanged, &real)
        .iter()
        .any(|d| d.starts_with("ephemeral event: no answer | ok true")));
}

/// The keepalive probe against a served profile that pings every second: the first ping after
/// a second, a connection that answers pings kept open, one that reads nothing (so answers
/// none) closed at the ping after.
#[test]
fn the_keepalive_probe_sees_pings_and_the_close_of_a_connection_that_answers_none() {
    let mut profile = RelayProfile::ideal();
    profile.keepalive = Some(relaysim::relay::KeepAlive {
        ping_every: Duration::from_secs(1),
        silent_after: Duration::from_secs(1),
        pongs_only: false,
        on_relay_clock: false,
    });
    let report = probe_profile_listening(
        profile,
        10,
        Duration::from_millis(500),
        Some(Duration::from_secs(4)),
    );
    let keepalive = report.keepalive.expect("the keepalive probe ran");
    assert_eq!(
        keepalive.words(),
        "first ping after 1 s; answering pings: kept open; reading nothing: closed"
    );
    // Without a keepalive: no ping, nothing closed.
    let quiet = probe_profile_listening(
        RelayProfile::ideal(),
        10,
        Duration::from_millis(500),
        Some(Duration::from_secs(2)),
    );
    assert_eq!(
        quiet.keepalive.unwrap().words(),
        "no ping; answering pings: kept open; reading nothing: kept open"
    );
}
