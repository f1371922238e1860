//! Tests of the why lines.

use super::*;

fn names() -> Names {
    Names {
        relays: vec!["damus".into()],
        peers: BTreeMap::from([
            (PeerId::Server(0), "server".into()),
            (PeerId::Client(0), "client".into()),
        ]),
    }
}

#[test]
fn a_stream_timeout_says_which_chunk_it_awaited_and_what_the_relays_refused_meanwhile() {
    let mut run = RunEvents::named(names());
    let s = Duration::from_secs;
    run.refused(s(1), PeerId::Server(0), 0, "rate-limited: slow down");
    run.refused(s(2), PeerId::Server(0), 0, "rate-limited: slow down");
    run.refused(s(99), PeerId::Server(0), 0, "after the call");
    run.dropped(s(3), PeerId::Client(0), 0, "outage");
    let line = run
        .explain(
            &Awaiting {
                started: s(0),
                ended: Some(s(30)),
                stream: Some(StreamProgress {
                    chunks: 147,
                    read: 23,
                    written: Some(40),
                    next_index: 23,
                    last_read: Some(Duration::from_millis(4100)),
                    ended: false,
                }),
                responded: false,
            },
            true,
        )
        .unwrap();
    assert_eq!(
        line,
        "awaiting chunk 23 of 147 (23 read, 40 written, the last at 4100.0ms); relays \
         refused 2 publishes while it was open: \"rate-limited: slow down\" (server via \
         damus ×2); connections dropped while it was open: client–damus at 3000.0ms (outage)"
    );
}

#[test]
fn a_call_the_run_outlived_says_so_and_the_kept_lists_are_bounded() {
    let mut run = RunEvents::named(names());
    for k in 0..MAX_KEPT as u64 + 5 {
        run.refused(
            Duration::from_millis(k),
            PeerId::Client(0),
            0,
            "blocked: no",
        );
    }
    let call = Awaiting {
        started: Duration::ZERO,
        ended: None,
        stream: None,
        responded: false,
    };
    let line = run.explain(&call, true).unwrap();
    assert!(
        line.starts_with("awaiting the response when the run ended; relays refused 4096 publishes"),
        "{line}"
    );
    assert!(
        line.ends_with("5 later refusals and drops of the run are not listed"),
        "{line}"
    );
    assert!(
        line.contains("(client via damus ×256), and 3840 more"),
        "{line}"
    );
    // A failure that did not run out of time is told only what happened meanwhile.
    let without = run.explain(&call, false).unwrap();
    assert!(without.starts_with("relays refused 4096"), "{without}");
    assert_eq!(RunEvents::default().explain(&call, false), None);
}

#[test]
fn what_the_programs_logged_while_a_call_was_open_is_named_grouped_and_cut() {
    let mut run = RunEvents::named(names());
    let s = Duration::from_secs;
    run.logged(s(1), "client", "before the call");
    run.logged(
        s(2),
        "server",
        "server error: Duplicate start frame (token: 1)",
    );
    run.logged(
        s(3),
        "server",
        "server error: Duplicate start frame (token: 1)",
    );
    run.logged(s(3), "server", &"x".repeat(1000));
    run.logged(s(9), "server", "after the call");
    let call = Awaiting {
        started: s(2),
        ended: Some(s(5)),
        stream: None,
        responded: false,
    };
    let line = run.explain(&call, true).unwrap();
    let long = format!("{}…", "x".repeat(LINE_CHARS));
    assert_eq!(
        line,
        format!(
            "awaiting the response; the programs logged while it was open: \"server error: \
             Duplicate start frame (token: 1)\" (server ×2), \"{long}\" (server ×1)"
        )
    );
    // A call open while nothing was logged is told nothing of it.
    let quiet = Awaiting {
        started: s(4),
        ended: Some(s(5)),
        ..call
    };
    assert_eq!(run.explain(&quiet, false), None);
}

#[test]
fn publications_no_relay_answered_while_a_call_was_open_are_counted_by_who() {
    let mut run = RunEvents::named(names());
    let s = Duration::from_secs;
    // Given in any order, as a map hands them over.
    run.unanswered(vec![
        (s(9), PeerId::Client(0), 0),
        (s(3), PeerId::Server(0), 0),
        (s(2), PeerId::Client(0), 0),
        (s(1), PeerId::Client(0), 0),
        (s(4), PeerId::Client(0), 0),
    ]);
    let call = Awaiting {
        started: s(2),
        ended: Some(s(5)),
        stream: None,
        responded: false,
    };
    assert_eq!(
        run.explain(&call, false).unwrap(),
        "no OK came for 3 publishes while it was open (client via damus ×2, server via damus ×1)"
    );
    let later = Awaiting {
        started: s(6),
        ended: Some(s(7)),
        ..call
    };
    assert_eq!(run.explain(&later, false), None);
}

#[test]
fn events_withheld_from_a_subscriber_before_a_call_ended_are_named_even_from_before_it() {
    let mut run = RunEvents::named(names());
    let s = Duration::from_secs;
    // Withheld before the call was made (its `initialize`, say) and after it ended.
    run.withheld(s(0), PeerId::Server(0), 0, "auth-required");
    run.withheld(s(9), PeerId::Server(0), 0, "auth-required");
    let call = Awaiting {
        started: s(1),
        ended: Some(s(5)),
        stream: None,
        responded: false,
    };
    assert_eq!(
        run.explain(&call, false).unwrap(),
        "relays withheld 1 event from subscribers before it ended (a kind the reader may not \
         read without AUTH): \"auth-required\" (server from damus ×1)"
    );
}
