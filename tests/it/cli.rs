//! End-to-end tests through the `relaysim` binary.

use std::process::{Command, Output};

fn relaysim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_transfer_through_an_impaired_link_completes_exactly() {
    let out = relaysim(&[
        "transfer",
        "--size",
        "256KiB",
        "--jitter-ms",
        "200",
        "--duplicate",
        "0.2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(text.contains("completed in"), "{text}");
    assert!(
        text.contains("exact: the delivered message is byte-identical"),
        "{text}"
    );
}

#[test]
fn the_same_seed_prints_the_same_report_and_another_seed_does_not() {
    let args = [
        "transfer",
        "--size",
        "300KiB",
        "--content",
        "random",
        "--seed",
        "11",
    ];
    let a = stdout(&relaysim(&args));
    let b = stdout(&relaysim(&args));
    assert_eq!(a, b);
    let mut other = args;
    other[6] = "12";
    assert_ne!(a, stdout(&relaysim(&other)));
}

#[test]
fn a_lossy_link_fails_with_a_typed_cause_and_surfaces_nothing() {
    let out = relaysim(&["transfer", "--size", "4MiB", "--loss", "0.2", "--seed", "3"]);
    assert_eq!(out.status.code(), Some(1), "a failed transfer exits 1");
    let text = stdout(&out);
    assert!(text.contains("failed: "), "{text}");
    assert!(text.contains("nothing surfaced"), "{text}");
}

#[test]
fn a_jittered_connection_delays_a_transfer_but_never_reorders_it() {
    let out = relaysim(&["transfer", "--size", "1MiB", "--jitter-ms", "400"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("lost 0, duplicated 0, reordered 0"), "{text}");
}

#[test]
fn a_transfer_is_a_scenario_that_run_repeats() {
    let args = ["transfer", "--size", "200KiB", "--bootstrap", "--seed", "4"];
    let out = relaysim(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut print = args.to_vec();
    print.push("--print-scenario");
    let text = stdout(&relaysim(&print));
    assert!(text.contains("kind = \"upload\""), "{text}");
    let path = scenario_file("transfer.toml", &text);
    let dir = std::env::temp_dir().join(format!("relaysim-cli-transfer-{}", std::process::id()));
    let run = relaysim(&[
        "run",
        path.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stdout(&run).contains("completion 100.0%"),
        "{}",
        stdout(&run)
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_no_panic() {
    let out = relaysim(&["transfer", "--size", "3TiB"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown size unit \"TiB\""));
    let out = relaysim(&["transfer", "--loss", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--loss must be a probability"));
    let out = relaysim(&["transfer", "--budget", "100"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("budget 100 is too small"));
    let out = relaysim(&["transfer", "--content", "binary"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown content class"));
}

#[test]
fn a_scenario_with_several_problems_gets_all_of_them_with_their_places() {
    let dir = std::env::temp_dir().join(format!("relaysim-cli-problems-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        "[[relays]]\nname=\"r\"\nprofile=\"strfy\"\n[[servers]]\nname=\"s\"\nrelays=[\"r\"]\n\
         [[clients]]\nname=\"c\"\nrelays=[\"rr\"]\n",
    )
    .unwrap();
    let out = relaysim(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("bad.toml:3:9: `relays[0].profile`"), "{err}");
    assert!(err.contains("did you mean `strfry`?"), "{err}");
    assert!(err.contains("bad.toml:9:9: `clients[0].relays`"), "{err}");
    assert!(err.contains("2 problems in"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_shows_examples() {
    let out = relaysim(&["transfer", "--help"]);
    assert!(stdout(&out).contains("Examples:"));
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scenario_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("relaysim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const GOOD: &str = r#"
name = "cli-test"
[[relays]]
name = "main"
profile = "strfry"
[[servers]]
name = "server"
relays = ["main"]
[[clients]]
name = "client"
relays = ["main"]
[[workloads]]
kind = "request"
count = 3
"#;

#[test]
fn run_without_a_file_runs_the_default_scenario_and_explains_itself() {
    let out_dir = std::env::temp_dir().join(format!("relaysim-default-{}", std::process::id()));
    let out = relaysim(&["run", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "scenario default",
        "big-result",
        "transfer_completion",
        "expectations: all hold",
        "completion 100.0%",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    for file in ["summary.csv", "latency.csv", "failures.csv"] {
        assert!(out_dir.join(file).exists(), "{file}");
    }
    let summary = std::fs::read_to_string(out_dir.join("summary.csv")).unwrap();
    assert!(
        summary.starts_with("run,seed,workload,client,call,tool,outcome,cause,latency_us,why\n")
    );
    assert_eq!(summary.lines().count(), 5, "a header and one row per call");
}

#[test]
fn run_json_is_one_document_with_the_results() {
    let path = scenario_file("good.toml", GOOD);
    let out_dir = path.with_extension("out");
    let out = relaysim(&[
        "run",
        path.to_str().unwrap(),
        "--json",
        "--runs",
        "2",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["runs"], 2);
    assert_eq!(v["completion_ratio"], 1.0);
    assert_eq!(v["items"].as_array().unwrap().len(), 6);
    assert_eq!(
        v["items"][0]["client"], "client",
        "clients by name, not index"
    );
    let summary = std::fs::read_to_string(out_dir.join("summary.csv")).unwrap();
    assert!(
        summary.lines().nth(1).unwrap().contains(",client,"),
        "{summary}"
    );
}

#[test]
fn a_failed_expectation_exits_1_and_says_which() {
    let text =
        format!("{GOOD}\n[expect]\nlatency = {{ \"final_response_latency.max\" = \"1ms\" }}\n");
    let path = scenario_file("strict.toml", &text);
    let out = relaysim(&[
        "run",
        path.to_str().unwrap(),
        "--out",
        path.with_extension("out").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("expectations FAILED"), "{text}");
    assert!(text.contains("final_response_latency.max is"), "{text}");
}

#[test]
fn a_misspelled_key_names_file_line_and_the_likely_fix() {
    let path = scenario_file("typo.toml", &GOOD.replace("count = 3", "cuont = 3"));
    let out = relaysim(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("typo.toml:14:1"), "{err}");
    assert!(err.contains("unknown field `cuont`"), "{err}");
    assert!(err.contains("did you mean `count`?"), "{err}");
}

#[test]
fn an_unknown_relay_or_profile_is_pointed_at() {
    let path = scenario_file(
        "badref.toml",
        &GOOD.replace(
            "relays = [\"main\"]\n[[workloads]]",
            "relays = [\"mian\"]\n[[workloads]]",
        ),
    );
    let out = relaysim(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("badref.toml:11:11"), "{err}");
    assert!(err.contains("no relay named \"mian\""), "{err}");
    assert!(err.contains("did you mean `main`?"), "{err}");

    let path = scenario_file(
        "badprofile.toml",
        &GOOD.replace("profile = \"strfry\"", "profile = \"strfy\""),
    );
    let err = stderr(&relaysim(&["run", path.to_str().unwrap()]));
    assert!(err.contains("unknown relay profile \"strfy\""), "{err}");
    assert!(err.contains("did you mean `strfry`?"), "{err}");
}

#[test]
fn broken_toml_and_missing_files_are_clear_errors() {
    let path = scenario_file("broken.toml", "name = \"x\"\n[[relays]\n");
    let out = relaysim(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("broken.toml:2:"), "{}", stderr(&out));
    let out = relaysim(&["run", "/nonexistent/scenario.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
    let path = scenario_file(
        "nokind.toml",
        &GOOD.replace("kind = \"request\"", "kind = \"download\""),
    );
    let err = stderr(&relaysim(&["run", path.to_str().unwrap()]));
    assert!(err.contains("a download workload needs `bytes`"), "{err}");
}

#[test]
fn record_replay_shrink_loop_through_the_cli() {
    let dir = std::env::temp_dir().join(format!("relaysim-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.jsonl");
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/traces/src/khatru-drop-mid-stream.toml"
    );
    let out = relaysim(&[
        "run",
        src,
        "--trace",
        trace.to_str().unwrap(),
        "--out",
        dir.join("r").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = relaysim(&["replay", trace.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("identical to the trace, byte for byte"));
    let min = dir.join("min.jsonl");
    let out = relaysim(&[
        "shrink",
        trace.to_str().unwrap(),
        "--out",
        min.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("kept 1 of"), "{}", stdout(&out));
    let out = relaysim(&["replay", min.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("failed:stream-gap-at-close"));
    // A trace whose recorded outcome differs from what replays: --check exits 1.
    let text = std::fs::read_to_string(&min).unwrap().replace(
        "\"outcome\":\"failed:stream-gap-at-close\"",
        "\"outcome\":\"completed\"",
    );
    std::fs::write(dir.join("edited.jsonl"), text).unwrap();
    let out = relaysim(&[
        "replay",
        dir.join("edited.jsonl").to_str().unwrap(),
        "--check",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("outcome CHANGED"), "{}", stdout(&out));
}

#[test]
fn check_determinism_compares_two_runs() {
    let out = relaysim(&[
        "check-determinism",
        concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/ideal-baseline.toml"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("deterministic: two runs"));
}

#[test]
fn run_with_the_turmoil_engine_reports_like_des() {
    let out = std::env::temp_dir().join(format!("relaysim-cli-turmoil-{}", std::process::id()));
    let o = relaysim(&[
        "run",
        "scenarios/ideal-baseline.toml",
        "--engine",
        "turmoil",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("completion 100.0%"), "{text}");
    assert!(text.contains("expectations: all hold"), "{text}");
    assert!(out.join("summary.csv").exists());
    // The per-workload table (calls, completed, failed, causes) is the same as with des.
    let des = relaysim(&[
        "run",
        "scenarios/ideal-baseline.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    let table = |t: &str| -> Vec<String> {
        t.lines()
            .skip_while(|l| !l.starts_with("workload"))
            .take_while(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    assert!(table(&text).len() > 2, "{text}");
    assert_eq!(table(&text), table(&stdout(&des)));

    // Its trace reruns in des, deliveries as recorded (schedule replay of a live trace).
    let trace = out.with_extension("jsonl");
    let traced = relaysim(&[
        "run",
        "scenarios/ideal-baseline.toml",
        "--engine",
        "turmoil",
        "--out",
        out.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(traced.status.success(), "{}", stdout(&traced));
    let replayed = relaysim(&["replay", trace.to_str().unwrap(), "--check"]);
    let text = stdout(&replayed);
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&trace);
    assert!(replayed.status.success(), "{text}");
    assert!(
        text.contains("publications replayed as the recording delivered them"),
        "{text}"
    );
    assert!(text.contains("outcome unchanged"), "{text}");
    assert!(!text.contains("failed"), "{text}");

    let refused = relaysim(&[
        "run", "--engine", "turmoil", "--runs", "2", "--trace", "x.jsonl",
    ]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--trace records one run"), "{err}");
    assert!(!std::path::Path::new("x.jsonl").exists());
}

#[test]
fn a_resumable_stream_scenario_reports_both_clients_and_the_resume_counters() {
    let out = std::env::temp_dir().join(format!("relaysim-cli-resumable-{}", std::process::id()));
    let o = relaysim(&[
        "run",
        "scenarios/resumable/khatru-drop-20s.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = stdout(&o);
    let _ = std::fs::remove_dir_all(&out);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("expectations: all hold"), "{text}");
    let line = |prefix: &str| {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // The per-workload table, then the delivery table: plain lost chunks, resumable none.
    let plain = line("stream-plain");
    assert!(plain[0].contains("stream-reorder-buffer-full"), "{text}");
    assert!(!plain[1].ends_with("100.0%"), "{text}");
    assert!(line("stream-resumable")[1].ends_with("100.0%"), "{text}");
    let counters = line("resumable streams:");
    assert!(counters[0].contains("replayed_events"), "{text}");
    assert!(line("resume_latency").len() == 1, "{text}");
}

#[test]
fn zero_runs_is_refused_on_the_command_line_and_in_a_file() {
    let out = relaysim(&["run", "--runs", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--runs"));
    let dir = std::env::temp_dir().join(format!("relaysim-zero-runs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("zero.toml");
    std::fs::write(
        &file,
        "runs = 0\n[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n\
         [[clients]]\nname = \"c\"\nrelays = [\"r\"]\n",
    )
    .unwrap();
    let out = relaysim(&["run", file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("zero.toml:1") && err.contains("runs"), "{err}");
}

#[test]
fn a_run_with_failures_lists_the_failing_seeds_and_how_to_reproduce_one() {
    let out_dir = std::env::temp_dir().join(format!("relaysim-seeds-{}", std::process::id()));
    let out = relaysim(&[
        "run",
        "scenarios/damus-rate-cap.toml",
        "--runs",
        "3",
        "--seed",
        "4",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&out_dir);
    let text = stdout(&out);
    assert!(text.contains("runs 3  seeds 4-6"), "{text}");
    let listed = text
        .lines()
        .skip_while(|l| *l != "failing seeds:")
        .nth(1)
        .unwrap_or_default();
    assert!(
        listed.contains("stream-probe-timeout") && listed.ends_with("4-6"),
        "{text}"
    );
    assert!(
        text.contains(
            "relaysim run scenarios/damus-rate-cap.toml --seed 4 --runs 1 --trace trace-4.jsonl"
        ),
        "{text}"
    );
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    // More output than a pipe holds (1,500 workload rows), read by nobody.
    let dir = std::env::temp_dir().join(format!("relaysim-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::from(
        "[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n\
         [[clients]]\nname = \"c\"\nrelays = [\"r\"]\n",
    );
    for i in 0..1500 {
        text.push_str(&format!(
            "[[workloads]]\nname = \"w{i}\"\nkind = \"request\"\n"
        ));
    }
    let file = dir.join("many.toml");
    std::fs::write(&file, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(["run", file.to_str().unwrap(), "--out"])
        .arg(dir.join("out"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn shrink_says_plainly_when_there_is_nothing_to_shrink_in_a_des_or_a_live_trace() {
    let dir = std::env::temp_dir().join(format!("relaysim-shrink-{}", std::process::id()));
    let passing = dir.join("passing.jsonl");
    let run = relaysim(&[
        "run",
        "--trace",
        passing.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert!(run.status.success());
    let out = relaysim(&[
        "shrink",
        passing.to_str().unwrap(),
        "--out",
        dir.join("shrunk.jsonl").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("every call in this trace completed"), "{err}");
    // Asking for a cause changes nothing: there is still no failure, and no empty list.
    let out = relaysim(&[
        "shrink",
        passing.to_str().unwrap(),
        "--out",
        dir.join("shrunk.jsonl").to_str().unwrap(),
        "--cause",
        "timeout",
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("every call in this trace completed"), "{err}");
    // A live relay's trace: the header says so.
    let text = std::fs::read_to_string(&passing).unwrap();
    let live = dir.join("live.jsonl");
    std::fs::write(
        &live,
        text.replacen("\"driver\":\"des\"", "\"driver\":\"live\"", 1),
    )
    .unwrap();
    let out = relaysim(&[
        "shrink",
        live.to_str().unwrap(),
        "--out",
        dir.join("shrunk.jsonl").to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2));
    // It is shrunk by inject replay, where nothing fails either.
    assert!(
        err.contains("shrinks by inject replay") && err.contains("there is no failure to shrink"),
        "{err}"
    );
}

#[test]
fn results_go_to_a_directory_named_after_the_file_and_are_never_another_file_s() {
    let base = std::env::temp_dir().join(format!("relaysim-results-{}", std::process::id()));
    let text = "[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n\
                [[clients]]\nname = \"c\"\nrelays = [\"r\"]\n[[workloads]]\nkind = \"request\"\n";
    for dir in ["one", "two"] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
        std::fs::write(base.join(dir).join("same.toml"), text).unwrap();
    }
    let run = |file: &str| {
        Command::new(env!("CARGO_BIN_EXE_relaysim"))
            .args(["run", file])
            .current_dir(&base)
            .output()
            .unwrap()
    };
    let first = run("one/same.toml");
    assert!(first.status.success(), "{}", stdout(&first));
    assert!(stdout(&first).contains("results written to results/same"));
    assert!(base.join("results/same/summary.csv").exists());
    // The same file again, named differently: its own directory still.
    assert!(run("./one/../one/same.toml").status.success());
    // Another file of the same name: refused, with the way out.
    let second = run("two/same.toml");
    let err = String::from_utf8_lossy(&second.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&base);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(
        err.contains("holds the results of") && err.contains("--out"),
        "{err}"
    );
}

#[test]
fn run_takes_several_files_and_sums_them_up() {
    let base = std::env::temp_dir().join(format!("relaysim-several-{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    let text = "[[relays]]\nname = \"r\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n\
                [[clients]]\nname = \"c\"\nrelays = [\"r\"]\n[[workloads]]\nname = \"w\"\n\
                kind = \"request\"\n";
    std::fs::write(base.join("good.toml"), text).unwrap();
    let wrong = format!("{text}[expect]\noutcomes = {{ w = \"failed\" }}\n");
    std::fs::write(base.join("wrong.toml"), wrong).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(["run", "good.toml", "wrong.toml", "--out", "res"])
        .current_dir(&base)
        .output()
        .unwrap();
    let text = stdout(&out);
    let wrote_both = base.join("res/good/summary.csv").exists() && base.join("res/wrong").exists();
    let _ = std::fs::remove_dir_all(&base);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(wrote_both, "{text}");
    assert!(
        text.contains("2 scenarios: expectations hold in 1, fail in 1"),
        "{text}"
    );
    let verdicts: Vec<&str> = text.lines().rev().take(2).collect();
    assert!(verdicts[1].contains("good.toml") && verdicts[1].ends_with("all hold"));
    assert!(verdicts[0].contains("wrong.toml") && verdicts[0].ends_with("FAILED"));
}

#[cfg(unix)]
#[test]
fn serve_writes_its_trace_when_stopped() {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("relaysim-serve-trace-{}", std::process::id()));
    let trace = dir.join("nested/serve.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(["serve", "--listen", "127.0.0.1:0", "--trace"])
        .arg(&trace)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) until it listens.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    for _ in 0..20 {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 || line.contains("ws://") {
            break;
        }
    }
    assert!(line.contains("ws://127.0.0.1:"), "{line}");
    let stopped = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{rest}");
    assert!(rest.contains("trace written to"), "{rest}");
    assert!(
        text.lines()
            .next()
            .is_some_and(|h| h.contains("\"driver\":\"live\"")),
        "{text}"
    );
}

#[test]
fn inject_says_when_there_is_nothing_to_compare() {
    let dir = std::env::temp_dir().join(format!("relaysim-inject-none-{}", std::process::id()));
    let trace = dir.join("t.jsonl");
    let run = relaysim(&[
        "run",
        "--trace",
        trace.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert!(run.status.success());
    // Without its calls (as a recording of foreign peers), the trace has no outcomes to hold
    // the injected ones against.
    let text = std::fs::read_to_string(&trace).unwrap();
    let foreign: String = text
        .lines()
        .filter(|l| !l.contains("\"type\":\"called\"") && !l.contains("\"type\":\"client\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let bare = dir.join("bare.jsonl");
    std::fs::write(&bare, foreign).unwrap();
    let plain = relaysim(&["replay", bare.to_str().unwrap(), "--mode", "inject"]);
    let checked = relaysim(&[
        "replay",
        bare.to_str().unwrap(),
        "--mode",
        "inject",
        "--check",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(plain.status.success());
    let text = stdout(&plain);
    assert!(text.contains("nothing to compare"), "{text}");
    assert!(!text.contains("matches"), "{text}");
    assert_eq!(checked.status.code(), Some(2));
}

/// `serve SCENARIO -- COMMAND`: every relay of the scenario on its own port, the command run
/// against them with their URLs and an outcomes file, the counters and the command's outcomes
/// printed and written, and the exit code following the outcomes.
#[cfg(unix)]
#[test]
fn serve_runs_a_command_against_a_scenario_s_relays_and_reports_its_outcomes() {
    let dir = std::env::temp_dir().join(format!("relaysim-serve-cmd-{}", std::process::id()));
    let scenario =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/two-relays-one-down.toml");
    let serve = |outcome: &str| {
        let script = format!(
            "echo \"$RELAYSIM_RELAYS\"; \
             echo '{{\"peer\":\"sdk\",\"call\":\"echo\",\"outcome\":\"{outcome}\",\"latency_ms\":12.5}}' > \"$RELAYSIM_OUTCOMES\""
        );
        relaysim(&[
            "serve",
            scenario.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--out",
            dir.to_str().unwrap(),
            "--trace",
            dir.join("serve.jsonl").to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
    };
    // The trace closed with the relays; the command's outcome is written into its summary.
    let summary = || -> serde_json::Value {
        let text = std::fs::read_to_string(dir.join("serve.jsonl")).unwrap();
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    };
    let ok = serve("completed");
    let text = stdout(&ok);
    assert_eq!(ok.status.code(), Some(0), "{text}{}", stderr(&ok));
    let urls = text.lines().next().unwrap();
    assert_eq!(urls.split(',').count(), 2, "{urls}");
    assert!(urls.split(',').all(|u| u.starts_with("ws://127.0.0.1:")));
    assert!(
        text.contains("relay a (strfry)") && text.contains("relay b (khatru)"),
        "{text}"
    );
    assert!(
        text.contains("sdk") && text.contains("12.5ms  completed"),
        "{text}"
    );
    assert!(dir.join("report.json").exists() && dir.join("report.txt").exists());
    assert_eq!(summary()["outcomes"][0]["outcome"], "completed");
    assert_eq!(summary()["outcomes"][0]["client"], "sdk");
    assert_eq!(summary()["completion_ratio"], 1.0);
    let failed = serve("timeout");
    assert_eq!(failed.status.code(), Some(1), "{}", stdout(&failed));
    assert_eq!(
        summary()["outcomes"][0]["outcome"],
        "failed:program-timeout: timeout"
    );
    assert_eq!(summary()["completion_ratio"], 0.0);
    // A command that cannot start is refused before any relay is served or report printed.
    let missing = relaysim(&[
        "serve",
        scenario.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--",
        "relaysim-no-such-program-anywhere",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stdout(&missing).is_empty(), "{}", stdout(&missing));
    assert!(
        stderr(&missing).contains("cannot find `relaysim-no-such-program-anywhere`"),
        "{}",
        stderr(&missing)
    );
    // A node script whose packages were never installed: the fix, not node's stack.
    let program = dir.join("uninstalled");
    std::fs::create_dir_all(&program).unwrap();
    std::fs::write(program.join("package.json"), "{}").unwrap();
    std::fs::write(program.join("peers.mjs"), "import '@contextvm/sdk';").unwrap();
    let uninstalled = relaysim(&[
        "serve",
        scenario.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--",
        "node",
        program.join("peers.mjs").to_str().unwrap(),
    ]);
    assert_eq!(uninstalled.status.code(), Some(2));
    assert!(
        stderr(&uninstalled).contains("run `npm ci` in"),
        "{}",
        stderr(&uninstalled)
    );
    let both = relaysim(&["serve", scenario.to_str().unwrap(), "--profile", "damus"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(stderr(&both).contains("not both"), "{}", stderr(&both));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run --engine live`: the scenario's relays served on loopback, its peers on real sockets,
/// the same report; `--relay` belongs to that engine only.
#[test]
fn run_with_the_live_engine_serves_the_relays_and_reports_as_run_does() {
    let file = scenario_file(
        "live-engine.toml",
        "[[relays]]\nname = \"r\"\nprofile = \"strfry\"\n[[servers]]\nname = \"s\"\nrelays = [\"r\"]\n\
         [[clients]]\nname = \"c\"\nrelays = [\"r\"]\n[[workloads]]\nkind = \"request\"\ncount = 2\n",
    );
    let out = file.with_extension("out");
    let trace = file.with_extension("jsonl");
    let run = run_live(&file, &trace, &out, &[]);
    let text = stdout(&run);
    assert_eq!(run.status.code(), Some(0), "{text}{}", stderr(&run));
    assert!(
        stderr(&run).contains("one live run on real sockets, up to 10m of wall clock"),
        "a live run says what it is doing before it goes quiet: {}",
        stderr(&run)
    );
    // The relay's trace closed before the calls ended; their outcomes were written in after.
    let recorded = std::fs::read_to_string(&trace).unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(recorded.lines().last().unwrap()).unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(
        summary["outcomes"].as_array().unwrap().len(),
        2,
        "{summary}"
    );
    assert_eq!(summary["outcomes"][0]["client"], "c");
    assert_eq!(summary["completion_ratio"], 1.0);
    assert!(
        text.contains("request-0                         2         2"),
        "{text}"
    );
    assert!(text.contains("(wall clock)"), "{text}");
    // The served relay's counters: every request and response was accepted and delivered.
    let events = text
        .lines()
        .find(|l| l.starts_with("relay events:"))
        .unwrap_or_default();
    assert!(
        events.contains("events_accepted") && events.contains("delivered"),
        "{text}"
    );
    let misused = relaysim(&[
        "run",
        file.to_str().unwrap(),
        "--relay",
        "r=ws://127.0.0.1:9",
    ]);
    assert_eq!(misused.status.code(), Some(2));
    assert!(
        stderr(&misused).contains("--engine live"),
        "{}",
        stderr(&misused)
    );
    let misused = relaysim(&["run", file.to_str().unwrap(), "--key-nonce", "1"]);
    assert_eq!(misused.status.code(), Some(2));
    // Each live run keys its peers apart by a fresh nonce, printed; given back, it gives the
    // same keys.
    let nonce = key_nonce_of(&run);
    let author = |trace: &std::path::Path| {
        let text = std::fs::read_to_string(trace).unwrap();
        let published = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|l| l["type"] == "published" && l["peer"] == "c")
            .expect("the client published");
        published["event"]["pubkey"].as_str().unwrap().to_owned()
    };
    let first = author(&trace);
    let live = |extra: &[&str]| {
        let run = run_live(&file, &trace, &out, extra);
        assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
        (key_nonce_of(&run), author(&trace))
    };
    assert_eq!(
        live(&["--key-nonce", &nonce]),
        (nonce.clone(), first.clone())
    );
    let (fresh, other) = live(&[]);
    assert_ne!(fresh, nonce, "a fresh nonce per run");
    assert_ne!(other, first, "other keys under another nonce");
    let _ = std::fs::remove_dir_all(&out);
}

/// A live run given an earlier run's key nonce, against a relay that stores events (strfry
/// keeps ephemeral ones 300 s), is fed that run's events and warns in words; the first run,
/// on an empty relay, does not.
#[test]
fn a_live_run_fed_an_earlier_run_s_events_warns_and_says_how_to_keep_runs_apart() {
    let file = scenario_file(
        "stale.toml",
        "[[relays]]\nname = \"far\"\nprofile = \"strfry\"\n[[servers]]\nname = \"s\"\nrelays = [\"far\"]\n\
         [[clients]]\nname = \"c\"\nrelays = [\"far\"]\n[[workloads]]\nkind = \"request\"\ncount = 2\n",
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let relay = runtime
        .block_on(relaysim::live::serve(
            relaysim::live::ServeConfig::new(relaysim::relay::RelayProfile::strfry())
                .listening_on("127.0.0.1:0".parse().unwrap()),
        ))
        .unwrap();
    let url = format!("far=ws://{}", relay.local_addr);
    let (out, trace) = (file.with_extension("out"), file.with_extension("jsonl"));
    let live = || {
        let run = run_live(&file, &trace, &out, &["--relay", &url, "--key-nonce", "7"]);
        assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
        stderr(&run)
    };
    let first = live();
    assert!(!first.contains("warning:"), "{first}");
    // Past the margin within which an event may still be the run's own.
    std::thread::sleep(std::time::Duration::from_secs(
        relaysim::live::driver::STALE_AFTER_SECS + 2,
    ));
    let second = live();
    assert!(
        second.contains("events made before run 1 started reached its peers")
            && second.contains("leave out --key-nonce to keep runs apart"),
        "{second}"
    );
    runtime.block_on(relay.shutdown());
    let _ = std::fs::remove_dir_all(&out);
}

/// `relaysim run FILE --engine live --trace TRACE --out OUT` and `extra`.
fn run_live(
    file: &std::path::Path,
    trace: &std::path::Path,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "run",
        file.to_str().unwrap(),
        "--engine",
        "live",
        "--trace",
        trace.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    relaysim(&args)
}

/// The key nonce a live run printed.
fn key_nonce_of(run: &std::process::Output) -> String {
    let text = stderr(run);
    let (_, rest) = text
        .split_once("key nonce ")
        .unwrap_or_else(|| panic!("no key nonce printed: {text}"));
    rest.split_whitespace().next().unwrap().to_owned()
}

#[test]
fn run_and_compare_give_the_same_output_for_any_job_count() {
    let dir = std::env::temp_dir().join(format!("relaysim-jobs-{}", std::process::id()));
    let mut outputs = Vec::new();
    for jobs in ["1", "2", "5"] {
        let out_dir = dir.join(jobs);
        let out = out_dir.to_string_lossy().into_owned();
        let run = relaysim(&[
            "run",
            "scenarios/stream-reorder-duplicate.toml",
            "--runs",
            "6",
            "--jobs",
            jobs,
            "--out",
            &out,
        ]);
        assert!(
            run.status.success() || run.status.code() == Some(1),
            "{run:?}"
        );
        let stdout = String::from_utf8_lossy(&run.stdout).replace(&out, "OUT");
        let summary = std::fs::read_to_string(out_dir.join("summary.csv")).unwrap();
        let latency = std::fs::read_to_string(out_dir.join("latency.csv")).unwrap();
        let compare = relaysim(&[
            "compare",
            "scenarios/stream-reorder-duplicate.toml",
            "--runs",
            "3",
            "--jobs",
            jobs,
            "--out",
            &out,
        ]);
        let compared = String::from_utf8_lossy(&compare.stdout).replace(&out, "OUT");
        outputs.push((stdout, summary, latency, compared));
    }
    assert!(outputs[0].1.lines().count() > 6, "{}", outputs[0].1);
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[0], outputs[2]);
    let zero = relaysim(&["run", "--jobs", "0"]);
    assert_eq!(zero.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn probe_refuses_a_burst_or_wait_out_of_its_bounds_before_connecting() {
    for args in [
        [
            "probe",
            "ws://127.0.0.1:9",
            "--wait-ms",
            "18446744073709551615",
        ],
        ["probe", "ws://127.0.0.1:9", "--wait-ms", "0"],
        ["probe", "ws://127.0.0.1:9", "--burst", "1001"],
    ] {
        let o = relaysim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    }
}

/// A live run against a relay that refuses: the failed call's `why` names the refusal with the
/// relay's words and the names of peer and relay, and the relay's trace carries the calls, so
/// `show` draws the failing call with its cause.
#[test]
fn a_live_run_explains_a_refusal_and_show_draws_its_failing_call() {
    let file = scenario_file(
        "live-refused.toml",
        "[[relays]]\nname = \"r\"\nprofile = \"ideal\"\n\
         rate_limit = { scope = \"connection\", per_minute = 1.0, burst = 1.0, action = \"reject\", \
         message = \"rate-limited: once is enough\" }\n\
         [[servers]]\nname = \"s\"\nrelays = [\"r\"]\n\
         [[clients]]\nname = \"c\"\nrelays = [\"r\"]\n\
         [policy]\nrequest_timeout = \"2s\"\n\
         [[workloads]]\nkind = \"request\"\ncount = 2\nevery = \"300ms\"\n",
    );
    let out = file.with_extension("out");
    let trace = file.with_extension("jsonl");
    let run = run_live(&file, &trace, &out, &["--json"]);
    let report: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&run), stderr(&run)));
    let items = report["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{items:?}");
    let refused = "\"rate-limited: once is enough\" (c via r";
    for item in items {
        assert_eq!(item["outcome"], "failed:rejected", "{item}");
        let why = item["why"].as_str().unwrap_or_default();
        assert!(why.contains(refused), "{why}");
    }
    let picture = file.with_extension("picture");
    let shown = relaysim(&[
        "show",
        trace.to_str().unwrap(),
        "--json",
        "--out",
        picture.to_str().unwrap(),
    ]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["counts"]["call"], 2, "{shown}");
    let failing = shown["failing_calls"].as_array().unwrap();
    assert_eq!(failing.len(), 2, "{shown}");
    for call in failing {
        assert_eq!(call["lane"], "c");
        assert!(call["label"].as_str().unwrap().ends_with("failed:rejected"));
        assert!(call["why"].as_str().unwrap().contains(refused), "{call}");
        assert!(
            call["from_us"].as_u64() > Some(0),
            "drawn from when it was made"
        );
    }
    let svg = std::fs::read_to_string(shown["svg"].as_str().unwrap()).unwrap();
    assert!(svg.contains("once is enough"), "the picture says why");
    let _ = std::fs::remove_dir_all(&out);
}
