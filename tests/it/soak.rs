//! `relaysim soak` through the CLI, and the bugs it found, each kept as a regression test.

use std::process::{Command, Output};

fn relaysim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(args)
        .output()
        .expect("relaysim runs")
}

/// The report without the wall-clock resources line, which varies by design.
fn deterministic_part(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("resources ") && !l.starts_with("wrote "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_soak_reports_no_violation_and_the_same_report_for_any_job_count() {
    let dir = std::env::temp_dir().join(format!("relaysim-soak-{}", std::process::id()));
    let out_dir = dir.to_string_lossy().into_owned();
    let soak = |jobs: &str, extra: &[&str]| {
        let mut args = vec![
            "soak",
            "--runs",
            "40",
            "--seed",
            "3",
            "--determinism-every",
            "10",
        ];
        args.extend(["--jobs", jobs]);
        args.extend(extra);
        relaysim(&args)
    };
    let one = soak("1", &[]);
    let two = soak("2", &["--out", &out_dir]);
    assert_eq!(
        one.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&one.stdout)
    );
    assert_eq!(two.status.code(), Some(0));
    let report = deterministic_part(&one);
    assert_eq!(report, deterministic_part(&two));
    assert!(report.contains("soak: 40 runs"), "{report}");
    assert!(
        report.contains("4 repeated to check determinism"),
        "{report}"
    );
    assert!(report.contains("violations: 0"), "{report}");
    let written = std::fs::read_to_string(dir.join("soak.txt")).expect("soak.txt");
    assert_eq!(written.trim_end(), report.trim_end());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn soak_refuses_zero_runs_and_zero_jobs() {
    for args in [["soak", "--runs", "0"], ["soak", "--jobs", "0"]] {
        let out = relaysim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// Found by `relaysim soak --runs 400` (run 40): a publish pipeline whose jitter can be 0 wrote a
/// costless message (a REQ after a reconnection) at an instant with a fraction of a
/// microsecond; rounding its wire time down to whole microseconds put it before now, and the
/// subtraction panicked.
#[test]
fn a_costless_publish_at_a_fractional_instant_does_not_panic() {
    let text = r#"
        seed = 15002558780639291941
        duration = "4m"
        [[relays]]
        name = "r0"
        profile = "khatru"
        connection_drop_every = "69s"
        connection_down_for = ["200ms", "3s"]
        [relays.up]
        delay = { dist = "lognormal", median = "32ms", sigma = 0.72 }
        [relays.down]
        delay = { dist = "normal", mean = "103ms", sd = "35ms" }
        [[servers]]
        name = "s"
        relays = ["r0"]
        behaviour = "rust-sdk"
        impl = "relaysim"
        [[clients]]
        name = "c0"
        relays = ["r0"]
        impl = "relaysim"
        publish = { mode = "sequential", per_event = "40us", per_kib = "200us", jitter = { dist = "empirical", samples = ["0ms", "0ms", "1ms", "2ms"] } }
        [[workloads]]
        kind = "slow"
        count = 3
        every = "13s"
        work = "29s"
        [[workloads]]
        kind = "request"
        count = 1
        every = "4s"
        bytes = 71
    "#;
    let scenario = relaysim::scenario::Scenario::from_toml_str(text, "soak-40.toml").unwrap();
    let report = scenario.run(scenario.seed);
    assert_eq!(report.integrity_violations, 0);
    assert_eq!(report.items.len(), 4);
}

/// The soak's 100,000 runs (seed 1) left twelve scenarios, kept in `results/soak/`, where a
/// reader saw a reordering no mechanism explained. Two causes: overlapping partitions let a
/// message that arrived during the second one through before those held since the first (one
/// connection delivered out of order: a physics bug), and the order tracker judged a copy by
/// the event's first pass through the relay when the publisher had sent it again (the copy
/// the reader got was the second; what happened to the first explained nothing). Each of
/// them now names its mechanism.
#[cfg(feature = "contextvm-sdk")]
#[test]
fn the_soak_s_unexplained_reorderings_name_their_mechanism() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results/soak");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("results/soak is in the repository")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 12, "the soak's twelve scenarios");
    for file in files {
        let scenario = relaysim::scenario::Scenario::from_file(&file).expect("a valid scenario");
        let report = scenario.run(scenario.seed);
        assert_eq!(report.integrity_violations, 0, "{}", file.display());
        for (name, n) in &report.counters {
            assert!(
                !name.ends_with(".unexplained") || *n == 0,
                "{}: {name} = {n}",
                file.display()
            );
        }
    }
}

/// `--scenario N` prints run N's scenario, which `relaysim run` runs alone: the way to time a
/// soak's slowest run or measure its memory.
#[test]
fn one_run_of_a_soak_is_printed_and_runs_alone() {
    let out = relaysim(&["soak", "--seed", "2029", "--scenario", "7"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("# soak --seed 2029 run 7\n") && text.contains("name = \"soak-7\""),
        "{text}"
    );
    let again = relaysim(&["soak", "--seed", "2029", "--scenario", "7"]);
    assert_eq!(String::from_utf8(again.stdout).unwrap(), text);
    let other = relaysim(&["soak", "--seed", "2029", "--scenario", "8"]);
    assert_ne!(String::from_utf8(other.stdout).unwrap(), text);
    let dir = std::env::temp_dir().join(format!("relaysim-soak-one-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("soak-7.toml");
    std::fs::write(&file, &text).unwrap();
    let run = relaysim(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert!(
        run.status.code() == Some(0) || run.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stdout).contains("scenario soak-7"));
    let _ = std::fs::remove_dir_all(dir);
}
