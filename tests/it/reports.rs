//! The commands that explain things to a person, end to end through the binary: `show`,
//! `profiles`, `validate`, completions and man pages, and the sweep plots' honesty marks.

use std::path::{Path, PathBuf};
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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("relaysim-reports-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn shipped(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

#[test]
fn show_draws_a_shrunk_trace_with_its_outage_and_failing_call() {
    let dir = temp("show");
    let stem = dir.join("khatru");
    let o = relaysim(&[
        "show",
        &shipped("traces/khatru-drop-mid-stream.shrunk.jsonl"),
        "--out",
        stem.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("outage 0: connection-drop"), "{text}");
    assert!(text.contains("failing call on client"), "{text}");
    let svg = std::fs::read_to_string(stem.with_extension("svg")).unwrap();
    // What a reader must be able to see: the failing call, its cause, the outage, the legend
    // with the counts.
    assert!(
        svg.contains("failed:stream-gap-at-close"),
        "the failing call is labelled"
    );
    assert!(svg.contains("outage 0: connection-drop"));
    assert!(svg.contains("published (108)"));
    assert!(svg.contains("lost (1)"));
    assert!(svg.contains("shrunk to 1 of 10 disturbances"));
    let png = std::fs::metadata(stem.with_extension("png")).unwrap();
    assert!(png.len() > 10_000, "a real picture, not an empty file");

    let o = relaysim(&[
        "show",
        &shipped("traces/khatru-drop-mid-stream.shrunk.jsonl"),
        "--out",
        stem.to_str().unwrap(),
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(json["counts"]["lost"], 1);
    // `--out` naming the picture itself writes that picture, not `x.png.png`.
    let named = dir.join("named.png");
    let o = relaysim(&[
        "show",
        &shipped("traces/khatru-drop-mid-stream.shrunk.jsonl"),
        "--out",
        named.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(named.exists() && dir.join("named.svg").exists());
    assert!(!dir.join("named.png.png").exists());
    assert_eq!(json["failing_calls"].as_array().unwrap().len(), 1);
    assert_eq!(
        json["lanes"],
        serde_json::json!(["client", "khatru", "server"])
    );
}

#[test]
fn show_zooms_on_a_window_or_a_call_and_refuses_ones_that_do_not_exist() {
    let dir = temp("zoom");
    let trace = shipped("traces/khatru-drop-mid-stream.shrunk.jsonl");
    let stem = dir.join("zoom");
    let o = relaysim(&[
        "show",
        &trace,
        "--from",
        "2s",
        "--to",
        "4s",
        "--out",
        stem.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("shown: 2000.0ms to 4000.0ms"),
        "{}",
        stdout(&o)
    );
    let o = relaysim(&[
        "show",
        &trace,
        "--call",
        "7",
        "--out",
        stem.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no call 7 (its calls: 1)"),
        "{}",
        stderr(&o)
    );
    let o = relaysim(&["show", &trace, "--from", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("1.5s"),
        "the error shows the form: {}",
        stderr(&o)
    );
}

#[test]
fn profiles_lists_every_built_in_profile_and_details_one_with_its_sources() {
    let o = relaysim(&["profiles"]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert_eq!(relaysim::RelayProfile::BUILT_IN.len(), 10);
    for name in relaysim::RelayProfile::BUILT_IN {
        assert!(text.lines().any(|l| l == name), "{name} in\n{text}");
    }
    let o = relaysim(&["profiles", "strfry"]);
    let text = stdout(&o);
    assert!(text.contains("max_event_bytes      65536"), "{text}");
    assert!(text.contains("sources:"), "{text}");
    assert!(text.contains("maxWebsocketPayloadSize"), "{text}");
    let o = relaysim(&["profiles", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 10);
    assert_eq!(json[3]["name"], "nostr-rs-relay");
    assert!(json[3]["knobs"]["ephemeral"]
        .as_str()
        .unwrap()
        .contains("no OK sent"));
    assert_eq!(json[4]["name"], "nostr-rs-relay-0.9");
    assert!(!json[4]["knobs"]["ephemeral"]
        .as_str()
        .unwrap()
        .contains("no OK sent"));
    let o = relaysim(&["profiles", "strfy"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the built-in profiles are ideal, strfry"));
}

#[test]
fn validate_checks_scenarios_sweeps_and_traces_and_says_where_one_is_wrong() {
    let files = [
        shipped("scenarios/default.toml"),
        shipped("sweeps/keepalive.toml"),
        shipped("traces/lossy-download.jsonl"),
    ];
    let args: Vec<&str> = std::iter::once("validate")
        .chain(files.iter().map(String::as_str))
        .collect();
    let o = relaysim(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("(scenario)") && text.contains("(sweep)") && text.contains("(trace)"));
    let dir = temp("validate");
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\n[[relays]]\nname = \"r\"\nprofile = \"strfy\"\n",
    )
    .unwrap();
    let o = relaysim(&["validate", &files[0], bad.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json[0]["valid"], true);
    assert_eq!(json[1]["valid"], false);
    let error = json[1]["error"].as_str().unwrap();
    assert!(error.contains("bad.toml:4:11"), "{error}");
    assert!(error.contains("did you mean `strfry`"), "{error}");
    assert!(stderr(&o).contains("1 of 2 files are invalid"));
}

#[test]
fn shell_completions_and_man_pages_come_from_the_parser() {
    let o = relaysim(&["completions", "bash"]);
    assert!(o.status.success());
    let text = stdout(&o);
    for sub in ["run", "show", "profiles", "validate", "sweep"] {
        assert!(text.contains(sub), "{sub}");
    }
    let o = relaysim(&["completions", "zsh"]);
    assert!(stdout(&o).contains("#compdef relaysim"));
    let o = relaysim(&["man"]);
    assert!(stdout(&o).contains(".TH relaysim 1"));
    let dir = temp("man");
    let o = relaysim(&["man", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = std::fs::read_to_string(dir.join("relaysim-run.1")).unwrap();
    assert!(
        run.contains("\\-\\-runs"),
        "the run page documents its flags"
    );
}

#[test]
fn sweep_plots_and_csv_carry_intervals_and_the_legend_names_its_axis() {
    let dir = temp("plots");
    let o = relaysim(&[
        "sweep",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny-sweep.toml"),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for column in [
        "completion_ratio_lo",
        "completion_ratio_hi",
        "transfer_completion_p99_ms_lo",
        "transfer_completion_p99_ms_hi",
    ] {
        assert!(
            header.split(',').any(|c| c == column),
            "{column} in {header}"
        );
    }
    let svg = std::fs::read_to_string(dir.join("p99.svg")).unwrap();
    assert!(svg.contains("relays[0].profile"), "the legend's title");
    assert!(svg.contains("bars: 95%"), "the intervals are explained");
    assert!(svg.contains("2 seeds per cell"));
    let recommendation = std::fs::read_to_string(dir.join("recommendation.txt")).unwrap();
    assert!(recommendation.contains("[95% CI"), "{recommendation}");
}

#[test]
fn a_failed_transfer_says_what_was_lost_what_that_caused_and_where_publishing_stopped() {
    let o = relaysim(&["transfer", "--size", "2MiB", "--loss", "0.02"]);
    assert_eq!(o.status.code(), Some(1), "a failed transfer exits 1");
    let text = stdout(&o);
    assert!(text.contains("cause chain"), "{text}");
    assert!(text.contains("lost on relay -> client"), "{text}");
    assert!(
        text.contains("client failed call 1 with failed:download-"),
        "{text}"
    );
    assert!(text.contains("server published its last event"), "{text}");
    let lost = text.find("lost on").unwrap();
    let failed = text.find("failed call").unwrap();
    assert!(lost < failed, "in time order:\n{text}");
    let o = relaysim(&["transfer", "--size", "2MiB", "--loss", "0.02", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(json["cause_chain"].as_array().unwrap().len() >= 3);
    let o = relaysim(&["transfer", "--size", "64KiB"]);
    assert!(o.status.success());
    assert!(!stdout(&o).contains("cause chain"));
}

/// Two files with the same name in different folders: the second's default results directory
/// is the first's, and it is refused rather than overwritten.
#[test]
fn sweeps_and_comparisons_never_overwrite_another_file_s_default_results() {
    let dir = temp("claims");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for side in ["a", "b"] {
        std::fs::create_dir_all(dir.join(side)).unwrap();
        for f in ["tiny-sweep.toml", "tiny-base.toml"] {
            std::fs::copy(data.join(f), dir.join(side).join(f)).unwrap();
        }
        std::fs::copy(
            shipped("scenarios/ideal-baseline.toml"),
            dir.join(side).join("ideal-baseline.toml"),
        )
        .unwrap();
    }
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_relaysim"))
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = run(&["sweep", "a/tiny-sweep.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("results/tiny-sweep"), "{}", stdout(&o));
    assert!(dir.join("results/tiny-sweep/sweep.csv").exists());
    let again = run(&["sweep", "./a/tiny-sweep.toml"]);
    assert!(
        again.status.success(),
        "the same file, spelled otherwise, may rewrite its own"
    );
    let o = run(&["sweep", "b/tiny-sweep.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("holds the results of"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("--out DIR"), "{}", stderr(&o));

    let o = run(&["compare", "a/ideal-baseline.toml", "--runs", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir
        .join("results/compare/ideal-baseline/compare.csv")
        .exists());
    let o = run(&["compare", "b/ideal-baseline.toml", "--runs", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("holds the results of"),
        "{}",
        stderr(&o)
    );
}
