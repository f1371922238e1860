//! Scenario validation: every problem reported with file:line:col, and the files shipped.
use super::*;

const BASE: &str = "[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n[[clients]]\nname = \"c\"\nrelays = [\"r\"]\n";

fn err(extra: &str) -> Diagnostic {
    match Scenario::from_toml_str(&format!("{BASE}{extra}"), "t.toml") {
        Err(ScenarioError::Invalid(d)) => d.first().clone(),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("accepted: {extra}"),
    }
}

#[test]
fn an_unknown_implementation_is_named_with_a_suggestion() {
    let d = err("impl = \"relaysm\"\n");
    assert!(
        d.message.contains("unknown implementation"),
        "{}",
        d.message
    );
    assert_eq!(d.suggestion.as_deref(), Some("relaysim"));
}

#[cfg(not(feature = "contextvm-sdk"))]
#[test]
fn an_implementation_this_build_lacks_is_explained_without_suggesting_itself() {
    let d = err("impl = \"contextvm-sdk\"\n");
    assert!(
        d.message.contains("--features contextvm-sdk"),
        "{}",
        d.message
    );
    assert_eq!(d.suggestion, None);
}

#[test]
fn an_unknown_workload_kind_is_named_with_a_suggestion() {
    let d = err("[[workloads]]\nkind = \"strem\"\nchunks = 3\n");
    assert_eq!(d.key, "workloads[0].kind");
    assert_eq!(d.line, Some(10));
    assert_eq!(d.suggestion.as_deref(), Some("stream"));
}

#[test]
fn probabilities_out_of_range_are_refused() {
    let d = err("[relays.down]\nordering = \"datagram\"\nloss = 1.5\n");
    assert_eq!(d.key, "relays[0].down.loss");
    assert!(d.message.contains("between 0 and 1"));
}

#[test]
fn per_message_disturbances_need_the_datagram_mode() {
    for key in [
        "loss = 0.1",
        "reorder = 0.1",
        "duplicate = 0.1",
        "reorder_delay = \"1s\"",
    ] {
        let d = err(&format!("[relays.down]\n{key}\n"));
        assert!(d.key.starts_with("relays[0].down."), "{}", d.key);
        assert!(
            d.message.contains("ordering = \"datagram\""),
            "{}",
            d.message
        );
    }
    let d = err("[relays.up]\nordering = \"datagrm\"\n");
    assert_eq!(d.suggestion.as_deref(), Some("datagram"));
}

#[test]
fn intake_and_publish_tables_are_checked() {
    let d = err("[relays.intake]\nmode = \"concurent\"\n");
    assert_eq!(d.suggestion.as_deref(), Some("concurrent"));
    let d = err("[relays.intake]\nmode = \"serial\"\nper_kib = \"1us\"\n");
    assert!(d.message.contains("concurrent intake"), "{}", d.message);
}

#[test]
fn latency_expectations_must_name_a_metric_and_quantile() {
    let d = err("[expect]\nlatency = { \"transfer_completoin.p99\" = \"1s\" }\n");
    assert_eq!(d.suggestion.as_deref(), Some("transfer_completion.p99"));
}

#[test]
fn bad_durations_and_sizes_say_how_to_write_them() {
    let d = err("[[workloads]]\nkind = \"download\"\nbytes = \"3TiB\"\n");
    assert!(d.message.contains("unknown size unit"), "{}", d.message);
    let Err(ScenarioError::Invalid(ds)) =
        Scenario::from_toml_str(&format!("duration = \"ten minutes\"\n{BASE}"), "t.toml")
    else {
        panic!("accepted a bad duration")
    };
    let d = ds.first();
    assert!(d.message.contains("invalid duration"), "{}", d.message);
    assert_eq!(d.line, Some(1));
}

#[test]
fn peers_need_distinct_names_and_outages_known_peers() {
    let text = BASE.replace("name = \"c\"\n", "name = \"s\"\n");
    let Err(ScenarioError::Invalid(ds)) = Scenario::from_toml_str(&text, "t.toml") else {
        panic!("accepted")
    };
    let d = ds.first();
    assert!(
        d.message.contains("two peers are named \"s\""),
        "{}",
        d.message
    );
    let text = BASE.replace("[[servers]]", "[[relays.outages]]\nat = \"1s\"\nduration = \"1s\"\nkind = \"connection-drop\"\npeer = \"cc\"\n[[servers]]");
    let Err(ScenarioError::Invalid(ds)) = Scenario::from_toml_str(&text, "t.toml") else {
        panic!("accepted")
    };
    let d = ds.first();
    assert_eq!(d.key, "relays[0].outages[0].peer");
    assert_eq!(d.suggestion.as_deref(), Some("c"));
}

#[test]
fn ten_years_written_in_years_is_within_the_ten_year_bound() {
    assert!(Scenario::from_toml_str(&format!("duration = \"10y\"\n{BASE}"), "t.toml").is_ok());
    assert!(Scenario::from_toml_str(&format!("duration = \"11y\"\n{BASE}"), "t.toml").is_err());
}

#[test]
fn absurd_durations_and_counts_are_refused_not_panicked_on() {
    for extra in ["duration = 1e20\n", "duration = \"100000y\"\n"] {
        let Err(ScenarioError::Invalid(ds)) =
            Scenario::from_toml_str(&format!("{extra}{BASE}"), "t.toml")
        else {
            panic!("accepted {extra}")
        };
        let d = ds.first();
        assert!(d.message.contains("duration"), "{}", d.message);
    }
    let d = err(
        "[relays.down]\nordering = \"datagram\"\nduplicate = 1.0\nduplicate_copies = 4000000000\n",
    );
    assert!(d.message.contains("at most 100"), "{}", d.message);
    let d = err("[[workloads]]\nkind = \"request\"\ncount = 0\n");
    assert!(d.message.contains("between 1 and 1000000"), "{}", d.message);
}

/// Every number has an upper bound checked at validation, named in the message, so an
/// absurd value is refused (exit 2) instead of growing memory or failing at run time.
#[test]
fn numbers_above_their_bounds_are_refused_with_the_bound() {
    let cases = [
        ("runs = 4294967295\n", "at most 100000 runs"),
        (
            "[[workloads]]\nkind = \"download\"\nbytes = \"18446744073709551615B\"\n",
            "at most 4294967296 bytes",
        ),
        (
            "[[workloads]]\nkind = \"download\"\nbytes = 18446744073709551615\n",
            "at most 4294967296 bytes",
        ),
        (
            "[[workloads]]\nkind = \"download\"\nbytes = \"1025MiB\"\n",
            "at most 1073741824 bytes",
        ),
        (
            "[[workloads]]\nkind = \"stream\"\nchunks = 10000000\n",
            "at most 1000000 chunks",
        ),
        (
            "[[workloads]]\nkind = \"stream\"\nchunks = 1\nchunk_bytes = \"2MiB\"\n",
            "at most 1048576 bytes",
        ),
        (
            "[[workloads]]\nkind = \"request\"\ncount = 1000000\n\
             [[workloads]]\nkind = \"request\"\ncount = 1000000\n",
            "2000000 calls in one run",
        ),
    ];
    for (extra, expected) in cases {
        // Top-level keys go before the tables, the rest after them.
        let text = if extra.starts_with("runs") {
            format!("{extra}{BASE}")
        } else {
            format!("{BASE}{extra}")
        };
        let message = match Scenario::from_toml_str(&text, "t.toml") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted {extra}"),
        };
        assert!(message.contains(expected), "{extra}: {message}");
    }
}

#[test]
fn a_slow_consumer_fails_only_when_its_backlog_outgrows_the_limit() {
    let stream = "[[workloads]]\nkind = \"stream\"\nchunks = 100\ninterval = \"10ms\"\nconsume_interval = \"50ms\"\n";
    let patient = Scenario::from_toml_str(&format!("{BASE}{stream}"), "t.toml")
        .unwrap()
        .run_all();
    assert_eq!(patient.completion_ratio(), 1.0, "{:?}", patient.failures());
    let strict = format!("[policy]\nmax_unread_chunks = 20\n{BASE}{stream}");
    let report = Scenario::from_toml_str(&strict, "t.toml")
        .unwrap()
        .run_all();
    assert_eq!(
        report.failures().get("stream-slow-consumer"),
        Some(&1),
        "{:?}",
        report.failures()
    );
}

#[test]
fn count_expands_clients_and_workloads_target_them_all() {
    let text = BASE.replace("name = \"c\"\n", "name = \"c\"\ncount = 3\n")
        + "[[workloads]]\nkind = \"request\"\ncount = 2\n";
    let s = Scenario::from_toml_str(&text, "t.toml").unwrap();
    assert_eq!(s.workloads[0].clients, vec![0, 1, 2]);
    let report = s.run_all();
    assert_eq!(report.items().count(), 6);
    assert_eq!(report.completion_ratio(), 1.0);
}

#[test]
fn every_problem_in_a_file_is_reported_at_once_with_its_place() {
    let text = format!(
        "{BASE}[relays.down]\nloss = 0.5\n[[workloads]]\nkind = \"strem\"\n\
         [[workloads]]\nkind = \"download\"\nclient = \"cc\"\n[policy]\nbudget = 10\n"
    );
    let Err(ScenarioError::Invalid(ds)) = Scenario::from_toml_str(&text, "t.toml") else {
        panic!("accepted")
    };
    let keys: Vec<&str> = ds.0.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "relays[0].down.loss",
            "workloads[0].kind",
            "workloads[1].bytes",
            "policy.budget"
        ],
        "{ds}"
    );
    // Semantic problems have a place too, found from their key.
    assert!(ds.0.iter().all(|d| d.line.is_some()), "{ds}");
    assert!(ds.to_string().ends_with("4 problems in t.toml"));
}

#[test]
fn a_broken_part_causes_no_second_problem_and_behaviour_tables_are_checked_once() {
    // A broken workload still has its name for [expect]; a broken client for outages.
    let text = format!(
        "{BASE}count = 0\n[[relays.outages]]\nat = \"1s\"\nduration = \"1s\"\n\
         kind = \"partition\"\npeer = \"c\"\n[[workloads]]\nname = \"w\"\n\
         kind = \"download\"\n[expect]\noutcomes = {{ w = \"completed\" }}\n"
    );
    let Err(ScenarioError::Invalid(ds)) = Scenario::from_toml_str(&text, "t.toml") else {
        panic!("accepted")
    };
    let keys: Vec<&str> = ds.0.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(keys, ["clients[0].count", "workloads[0].bytes"], "{ds}");
    // A table named like a preset, and a bad knob in a table no peer uses: each once.
    let text = format!(
        "{BASE}[behaviours.ts-sdk]\ndedup = \"none\"\n[behaviours.unused]\n\
         tokens = \"uuid\"\n[behaviours.mixed]\ntokens = \"peer-counter\"\n\
         token_prefix = \"x\"\n"
    );
    let Err(ScenarioError::Invalid(ds)) = Scenario::from_toml_str(&text, "t.toml") else {
        panic!("accepted")
    };
    let keys: Vec<&str> = ds.0.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "behaviours.ts-sdk",
            "behaviours.unused.tokens",
            "behaviours.mixed.token_prefix"
        ],
        "{ds}"
    );
    // The transport knobs: each table's problem at its key.
    let text = format!(
        "{BASE}[behaviours.a]\nok_timeout = \"5s\"\n[behaviours.b]\npreset = \"ts-sdk\"\n\
         missing_ok = \"maybe\"\n[behaviours.c]\nnonce_limit = 2000000\n\
         [behaviours.d]\ntimer_sweep = \"2h\"\n[behaviours.e]\ncall_refresh = \"progress\"\n"
    );
    let Err(ScenarioError::Invalid(ds)) = Scenario::from_toml_str(&text, "t.toml") else {
        panic!("accepted")
    };
    let keys: Vec<&str> = ds.0.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "behaviours.a.ok_timeout",
            "behaviours.b.missing_ok",
            "behaviours.c.nonce_limit",
            "behaviours.d.timer_sweep",
            "behaviours.e.call_refresh"
        ],
        "{ds}"
    );
    let every_knob = format!(
        "{BASE}behaviour = \"all\"\n[behaviours.all]\npublish_wait = \"ok\"\n\
         ok_quorum = \"any\"\nmissing_ok = \"retry\"\nok_timeout = \"2s\"\n\
         call_refresh = \"e-tag\"\n\
         timer_sweep = \"5s\"\nnonce_limit = 0\nfailures_reach_call = false\n"
    );
    let s = Scenario::from_toml_str(&every_knob, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let b = &s.clients[0].behaviour;
    assert_eq!(
        b.publish_wait,
        crate::peer::behaviour::PublishWait::ForOk {
            timeout: Duration::from_secs(2),
            quorum: crate::peer::behaviour::OkQuorum::Any,
            missing: crate::peer::behaviour::MissingOk::Retry,
        }
    );
    assert!(!b.failures_reach_call);
    assert_eq!(b.call_refresh, crate::peer::behaviour::CallRefresh::ETag);
    assert_eq!(
        (b.timer_sweep, b.nonce_limit),
        (
            crate::peer::behaviour::TimerSweep::Every(Duration::from_secs(5)),
            None
        )
    );
    // Expectations name families, never an implementation's words.
    let text = format!(
        "{BASE}[[workloads]]\nname = \"w\"\nkind = \"request\"\n[expect]\n\
         outcomes = {{ w = \"failed:stream-sequence: Non-increasing\" }}\n"
    );
    let Err(ScenarioError::Invalid(ds)) = Scenario::from_toml_str(&text, "t.toml") else {
        panic!("accepted")
    };
    assert!(ds.first().message.contains("cause family"), "{ds}");
}

#[test]
fn program_options_are_refused_without_a_program() {
    let d = err("program_options = { chunk_size_bytes = 1000 }\n");
    assert_eq!(d.key, "clients[0].program_options");
    assert!(d.message.contains("add `program`"), "{}", d.message);
}

#[test]
fn program_options_reach_the_program_peer_as_json() {
    let s = Scenario::from_toml_str(
        &format!("{BASE}program = \"ts-sdk\"\nprogram_options = {{ chunk_size_bytes = 1000, stateless = true }}\n"),
        "t.toml",
    )
    .expect("valid");
    assert_eq!(
        s.clients[0].program_options,
        serde_json::json!({ "chunk_size_bytes": 1000, "stateless": true })
    );
    assert_eq!(s.servers[0].program_options, serde_json::json!({}));
}

/// A scenario whose every call completes (the `ideal` relay), with `expect` appended.
fn all_complete(expect: &str) -> Scenario {
    let text =
        format!("{BASE}[[workloads]]\nname = \"w\"\nkind = \"request\"\n[expect]\n{expect}\n");
    Scenario::from_toml_str(&text, "t.toml").expect("valid")
}

#[test]
fn outcomes_pinned_to_a_seed_hold_that_run_alone_and_name_seed_and_client() {
    let s = all_complete("seed = 2\noutcomes = { w = \"failed\" }");
    let report = s.run_seeds(1, 3, |_| {});
    let failed = s.check(&report);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].starts_with("seed 2, workload \"w\" call 1 (client c): completed"),
        "{}",
        failed[0]
    );
    // A pinned seed the runs did not cover is said, and neither holds nor fails.
    let s = all_complete("seed = 9\noutcomes = { w = \"failed\" }");
    let report = s.run_seeds(1, 3, |_| {});
    assert!(s.check(&report).is_empty());
    let notes = s.unchecked(&report);
    assert!(notes[0].contains("seed 9, which was not run"), "{notes:?}");
}

#[test]
fn rates_are_exact_shares_or_bounds_over_every_run() {
    let s =
        all_complete("[expect.rates]\nw = { completed = \"1/2\", failed = { max = \"1/10\" } }");
    let report = s.run_seeds(1, 2, |_| {});
    let failed = s.check(&report);
    assert_eq!(
        failed,
        ["workload \"w\": 2 of 2 calls ended completed (seeds 1-2), expected 1/2"]
    );
    // Three calls cannot be half of anything: the exact share is not checked, and says so.
    let report = s.run_seeds(1, 3, |_| {});
    assert!(s.check(&report).is_empty());
    assert!(s.unchecked(&report)[0].contains("needs a multiple of 2 calls; these runs made 3"));
    let s = all_complete("[expect.rates]\nw = { completed = { min = \"2/3\" }, failed = \"0/1\" }");
    assert!(s.check(&s.run_seeds(1, 3, |_| {})).is_empty());
}

#[test]
fn rates_name_a_workload_an_outcome_and_a_share() {
    for (rates, key, words) in [
        (
            "x = { completed = \"1/2\" }",
            "expect.rates.x",
            "no workload is named",
        ),
        (
            "w = { done = \"1/2\" }",
            "expect.rates.w.done",
            "not an outcome",
        ),
        (
            "w = { completed = \"3/2\" }",
            "expect.rates.w.completed",
            "cannot exceed 1",
        ),
        (
            "w = { completed = \"half\" }",
            "expect.rates.w.completed",
            "not a share",
        ),
        (
            "w = { completed = \"1/0\" }",
            "expect.rates.w.completed",
            "denominator",
        ),
        (
            "w = { completed = {} }",
            "expect.rates.w.completed",
            "needs `min`, `max`",
        ),
    ] {
        let d = err(&format!(
            "[[workloads]]\nname = \"w\"\nkind = \"request\"\n[expect.rates]\n{rates}\n"
        ));
        assert_eq!(d.key, key, "{rates}");
        assert!(d.message.contains(words), "{rates}: {}", d.message);
    }
}

#[test]
fn a_behaviour_table_with_the_other_role_s_knobs_is_refused_where_a_peer_uses_it() {
    let on = |table: &str, role: &str| {
        let text = format!(
            "[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n{}\
             [[clients]]\nname = \"c\"\nrelays = [\"r\"]\n{}[behaviours.x]\n{table}\n",
            if role == "server" {
                "behaviour = \"x\"\n"
            } else {
                ""
            },
            if role == "client" {
                "behaviour = \"x\"\n"
            } else {
                ""
            },
        );
        match Scenario::from_toml_str(&text, "t.toml") {
            Err(ScenarioError::Invalid(d)) => Some(d.first().clone()),
            Err(e) => panic!("{e}"),
            Ok(_) => None,
        }
    };
    let d = on("feed_accept = true", "client").expect("a server's knob on a client");
    assert_eq!(d.key, "clients[0].behaviour");
    assert!(
        d.message.contains("sets feed_accept, servers' knobs"),
        "{}",
        d.message
    );
    let d = on("reader_session = \"at-start\"\nnonce_limit = 64", "server").expect("refused");
    assert_eq!(d.key, "servers[0].behaviour");
    assert!(
        d.message.contains("reader_session, nonce_limit"),
        "{}",
        d.message
    );
    assert!(on("feed_accept = true", "server").is_none());
    assert!(on("reader_session = \"at-start\"", "client").is_none());
    assert!(
        on("dedup = \"none\"", "server").is_none(),
        "shared knobs fit both"
    );
}

#[test]
fn a_token_prefix_never_changes_the_token_shape_on_its_own() {
    let d = err("[behaviours.x]\npreset = \"ts-sdk\"\ntoken_prefix = \"long-\"\n");
    assert_eq!(d.key, "behaviours.x.token_prefix");
    assert!(
        d.message.contains("makes message-id tokens"),
        "{}",
        d.message
    );
    // relaysim's own tokens are prefixed: a prefix alone fits them, as does saying the shape.
    Scenario::from_toml_str(
        &format!("{BASE}[behaviours.x]\ntoken_prefix = \"q\"\n"),
        "t",
    )
    .expect("relaysim's preset has prefixed tokens");
    Scenario::from_toml_str(
        &format!("{BASE}[behaviours.x]\npreset = \"rust-sdk\"\ntokens = \"prefixed\"\ntoken_prefix = \"q\"\n"),
        "t",
    )
    .expect("the shape said");
}

#[test]
fn expectations_an_engine_cannot_observe_are_listed_as_not_checked() {
    let s = all_complete(
        "latency = { \"relay_delivery_latency.p99\" = \"1ms\" }\ncounters = { delivered = 999 }",
    );
    let report = s.run_seeds(1, 1, |_| {});
    // The des world sees the relays: the counter bound fails (the ideal relay delivers in
    // under a millisecond, so the latency bound holds there).
    let failed = s.check(&report);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with("counter \"delivered\""), "{failed:?}");
    assert!(s.unchecked(&report).is_empty());
    // An engine that sees neither (live against a relay by URL): neither fails, and both are
    // said to be unchecked.
    assert!(s.check_observed(&report, Observes::CallsOnly).is_empty());
    let notes = s.unchecked_observed(&report, Observes::CallsOnly);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with("latency.relay_delivery_latency.p99"),
        "{notes:?}"
    );
    assert!(notes[1].starts_with("counters.delivered"), "{notes:?}");
    // One whose counters are its relays' own (turmoil): they mean something else than the
    // des counters (what the peers saw), so they are not compared either, and it says why.
    assert!(s
        .check_observed(&report, Observes::RelayCounters)
        .is_empty());
    let notes = s.unchecked_observed(&report, Observes::RelayCounters);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[1].contains("the relays' own"), "{notes:?}");
}

/// `compare`'s pairings of engines and presets run relaysim's peers on those engines: a
/// scenario's program peers become relaysim's peers there, and only its program row runs
/// the program.
#[test]
fn a_pairing_of_engines_runs_those_engines_instead_of_the_scenario_s_program() {
    let text = "[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\nprogram = \"ts-sdk\"\n[[clients]]\nname = \"c\"\nrelays = [\"r\"]\nprogram = \"ts-sdk\"\n[[workloads]]\nkind = \"request\"\n";
    let s = Scenario::from_toml_str(text, "t.toml").unwrap();
    assert_eq!(s.program(), Some("ts-sdk"));
    let paired = s.with_presets("relaysim", "relaysim").unwrap();
    assert_eq!(paired.program(), None);
    assert!(paired.servers.iter().all(|d| d.program.is_none()));
    assert!(paired.clients.iter().all(|d| d.program.is_none()));
    // Without a program host the run is relaysim's own: every call completes.
    let report = paired.run(paired.seed);
    assert!(!report.items.is_empty());
    assert!(report
        .items
        .iter()
        .all(|i| i.outcome == crate::stats::Outcome::Completed));
}

/// A key nonce gives every peer other keys than the seed alone, the same ones for the same
/// nonce, and tells each client its server's new key.
#[test]
fn a_key_nonce_moves_every_peer_to_other_keys_and_clients_follow_their_server() {
    let scenario = Scenario::from_toml_str(
        "[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n\
         [[servers]]\nname = \"t\"\nrelays = [\"r\"]\n\
         [[clients]]\nname = \"c\"\nrelays = [\"r\"]\nserver = \"s\"\n\
         [[clients]]\nname = \"d\"\nrelays = [\"r\"]\nserver = \"t\"\n",
        "t.toml",
    )
    .unwrap();
    let plain = scenario.plan(3);
    let salted = scenario.plan(3).with_key_nonce(11);
    for name in ["s", "t", "c", "d"] {
        assert_ne!(
            plain.identity(name).public_key(),
            salted.identity(name).public_key(),
            "{name}"
        );
        assert_eq!(
            salted.identity(name).public_key(),
            scenario
                .plan(3)
                .with_key_nonce(11)
                .identity(name)
                .public_key()
        );
    }
    assert_eq!(
        plain.identity("s").public_key(),
        crate::nip01::Identity::derive(3, "s").public_key(),
        "without a nonce, the des world's keys"
    );
    for (index, server) in [(0, "s"), (1, "t")] {
        assert_eq!(
            salted.clients[index].2.server,
            salted.identity(server).public_key()
        );
        assert_eq!(
            plain.clients[index].2.server,
            plain.identity(server).public_key()
        );
    }
}

/// A rate limit's refill: smooth by default, `ticks` with a period, `whole-seconds` with no
/// burst of its own; every misuse named.
#[test]
fn a_rate_limit_s_refill_is_read_and_checked() {
    let rate = |extra: &str| {
        format!(
            "[[relays]]\nname = \"r\"\nrate_limit = {{ scope = \"ip\", per_minute = 6.0, \
             action = \"reject\"{extra} }}\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n\
             [[clients]]\nname = \"c\"\nrelays = [\"r\"]\n"
        )
    };
    let refill_of = |extra: &str| {
        let scenario = Scenario::from_toml_str(&rate(extra), "t.toml").unwrap();
        scenario.relays[0].1.rate_limit.clone().unwrap().refill
    };
    use crate::relay::profile::Refill;
    assert_eq!(refill_of(""), Refill::Smooth);
    assert_eq!(
        refill_of(", refill = \"ticks\", tick = \"3m\""),
        Refill::Ticks {
            every: std::time::Duration::from_secs(180)
        }
    );
    assert_eq!(
        refill_of(", refill = \"whole-seconds\""),
        Refill::WholeSeconds
    );
    let refused = |extra: &str| match Scenario::from_toml_str(&rate(extra), "t.toml") {
        Err(ScenarioError::Invalid(d)) => d.first().clone(),
        other => panic!("accepted {extra}: {:?}", other.map(|_| ())),
    };
    let d = refused(", refill = \"ticks\"");
    assert!(d.message.contains("needs a tick"), "{}", d.message);
    let d = refused(", tick = \"1m\"");
    assert!(d.message.contains("tick is for"), "{}", d.message);
    let d = refused(", refill = \"whole-seconds\", burst = 10.0");
    assert!(d.message.contains("leave burst out"), "{}", d.message);
    let d = refused(", refill = \"tick\"");
    assert_eq!(d.suggestion.as_deref(), Some("ticks"));
}
