//! `--json` on every command that prints a report: one JSON document on standard output, with
//! the same exit codes as the text.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn relaysim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Standard output as one JSON document (anything after it but white space fails).
fn document(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A shipped file, by its path in the repository.
fn shipped(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .to_str()
        .expect("a UTF-8 path")
        .to_owned()
}

/// A fresh temporary directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("relaysim-json-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

#[test]
fn compare_json_has_each_pairing_and_workload_and_names_its_csv() {
    let dir = temp_dir("compare");
    let scenario = shipped("scenarios/ideal-baseline.toml");
    let args = ["compare", &scenario, "--runs", "1", "--out", text(&dir)];
    let out = relaysim(&[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["scenario"], "ideal-baseline");
    assert_eq!(d["seeds"], serde_json::json!([1]));
    let pairings = d["pairings"].as_array().unwrap();
    assert_eq!(pairings[0]["pairing"], "relaysim/relaysim");
    assert_eq!(pairings[0]["server"], "relaysim");
    assert_eq!(pairings[0]["client"], "relaysim");
    for p in pairings {
        assert_eq!(p["completion_ratio"], 1.0, "{p}");
        assert_eq!(p["failures"], serde_json::json!({}), "{p}");
    }
    let workloads = d["workloads"].as_array().unwrap();
    let names: Vec<&str> = workloads
        .iter()
        .map(|w| w["workload"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["request-0", "download-1", "upload-2", "stream-3"]);
    for w in workloads {
        let results = w["pairings"].as_array().unwrap();
        assert_eq!(results.len(), pairings.len(), "{w}");
        for r in results {
            assert_eq!(r["calls"], r["completed"], "{r}");
            assert!(r["p50_us"].is_u64() && r["p99_us"].is_u64(), "{r}");
            assert_eq!(r["causes"], serde_json::json!({}), "{r}");
        }
    }
    assert_eq!(d["differences"], serde_json::json!({}));
    let csv = dir.join("compare.csv");
    assert_eq!(d["csv"], text(&csv));
    assert!(csv.exists());

    // The text: latencies in human units, and where compare.csv went.
    let out = relaysim(&args);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("ok p50") && table.contains("ok p99"),
        "{table}"
    );
    assert!(!table.contains("p50 ms"), "{table}");
    assert!(table.contains("990.0ms"), "{table}");
    assert!(table.contains("compare.csv written to"), "{table}");

    // Several files: one array, each comparison with its own compare.csv; a workload that
    // completes no call has no latency.
    let damus = shipped("scenarios/damus-rate-cap.toml");
    let out = relaysim(&[
        "compare",
        &scenario,
        &damus,
        "--runs",
        "1",
        "--out",
        text(&dir),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let all = document(&out);
    let all = all.as_array().expect("an array for several files");
    assert_eq!(all.len(), 2);
    assert_eq!(all[1]["scenario"], "damus-rate-cap");
    assert_eq!(
        all[1]["csv"],
        text(&dir.join("damus-rate-cap").join("compare.csv"))
    );
    let stream = &all[1]["workloads"][0]["pairings"][0];
    assert_eq!(stream["completed"], 0, "{stream}");
    assert!(
        stream["p50_us"].is_null() && stream["p99_us"].is_null(),
        "{stream}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_json_in_schedule_mode_has_the_calls_and_the_first_difference() {
    let trace = shipped("traces/damus-rate-cap.jsonl");
    let out = relaysim(&["replay", &trace, "--check", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["mode"], "schedule");
    assert_eq!(d["live"], false);
    let calls = d["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["workload"], "stream-0");
    assert_eq!(calls[0]["recorded"], "failed:stream-probe-timeout");
    assert_eq!(calls[0]["replayed"], "failed:stream-probe-timeout");
    assert_eq!(d["identical"], true);
    assert!(d["first_difference"].is_null());
    assert_eq!(d["compared"], 1);
    assert_eq!(d["same_outcome"], true);
}

#[test]
fn replay_json_in_inject_mode_has_the_receivers_and_the_traffic() {
    let trace = shipped("traces/damus-rate-cap.jsonl");
    let out = relaysim(&["replay", &trace, "--mode", "inject", "--check", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["mode"], "inject");
    let receivers = d["receivers"].as_array().unwrap();
    assert_eq!(receivers.len(), 1);
    assert_eq!(receivers[0]["receiver"], "client");
    assert_eq!(receivers[0]["kind"], "stream");
    assert_eq!(receivers[0]["injected"], "failed:probe-timeout");
    assert_eq!(receivers[0]["recorded"], "failed:probe-timeout");
    assert_eq!(d["compared"], 1);
    assert_eq!(d["same_outcome"], true);
    let traffic = &d["traffic"];
    assert_eq!(traffic["peers"]["client"]["published"], 5);
    assert_eq!(traffic["peers"]["server"]["delivered"], 5);
    assert_eq!(traffic["calls"][0]["method"], "initialize");
    assert_eq!(traffic["calls"][1]["answered"], 0);
    assert!(traffic["calls"][1]["p50_us"].is_null(), "{traffic}");
    assert_eq!(traffic["gift_wrapped"], 0);
}

/// A live trace (turmoil's) replays in schedule mode with the receivers compared; in inject
/// mode it has nothing to compare, which --check refuses after the document.
#[test]
fn replay_json_of_a_live_trace_compares_receivers_or_says_nothing_was_compared() {
    let dir = temp_dir("replay-live");
    let trace = dir.join("live.jsonl");
    let run = relaysim(&[
        "run",
        &shipped("scenarios/ideal-baseline.toml"),
        "--engine",
        "turmoil",
        "--runs",
        "1",
        "--trace",
        text(&trace),
        "--out",
        text(&dir.join("results")),
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out = relaysim(&["replay", text(&trace), "--check", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["mode"], "schedule");
    assert_eq!(d["live"], true);
    assert_eq!(d["scenario"], "ideal-baseline");
    assert_eq!(d["matched_publications"], d["replayed_publications"]);
    assert!(!d["calls"].as_array().unwrap().is_empty());
    let receivers = d["receivers"].as_array().unwrap();
    assert!(!receivers.is_empty());
    for r in receivers {
        assert_eq!(r["recorded"], r["replayed"], "{r}");
    }
    // The trace carries the run's call outcomes: each is compared with the rerun's too.
    let recorded_calls = d["recorded_calls"].as_array().unwrap();
    assert_eq!(recorded_calls.len(), d["calls"].as_array().unwrap().len());
    assert_eq!(d["compared"], receivers.len() + recorded_calls.len());
    assert_eq!(d["same_outcome"], true);

    let inject = ["replay", text(&trace), "--mode", "inject", "--json"];
    let out = relaysim(&inject);
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["compared"], 0);
    assert!(d["same_outcome"].is_null());
    let checked = relaysim(&[&inject[..], &["--check"]].concat());
    assert_eq!(checked.status.code(), Some(2));
    assert_eq!(document(&checked)["compared"], 0);
    assert!(String::from_utf8_lossy(&checked.stderr).contains("nothing to check"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shrink_json_has_the_kept_disturbances() {
    let dir = temp_dir("shrink");
    let min = dir.join("min.jsonl");
    let out = relaysim(&[
        "shrink",
        &shipped("traces/lossy-download.jsonl"),
        "--out",
        text(&min),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["cause"], "download-gap-at-end");
    assert_eq!(d["before"], 1);
    assert_eq!(
        d["kept"],
        serde_json::json!([{
            "kind": "link", "what": "drop", "relay": "strfry", "peer": "client", "way": "down",
            "seq": 10
        }])
    );
    assert!(d["runs"].as_u64().unwrap() >= 1);
    assert_eq!(d["out"], text(&min));
    assert!(min.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_and_merge_json_have_the_files_and_the_recommendations() {
    let dir = temp_dir("sweep");
    let sweep = shipped("tests/data/tiny-sweep.toml");
    let whole = dir.join("whole");
    let out = relaysim(&["sweep", &sweep, "--out", text(&whole), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["sweep"], "tiny");
    assert_eq!(d["cells"], 4);
    assert_eq!(d["seeds"], 2);
    assert_eq!(d["out"], text(&whole));
    let files: Vec<&str> = d["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for name in ["sweep.csv", "p99.svg", "p99.png", "recommendation.txt"] {
        let path = whole.join(name);
        assert!(files.contains(&text(&path)), "{files:?}");
        assert!(path.exists(), "{}", path.display());
    }
    let recommendation = &d["recommendation"];
    assert_eq!(recommendation["choose"], "policy.budget");
    let recs = recommendation["recommendations"].as_array().unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0]["group"]["relays[0].profile"], "khatru");
    assert_eq!(recs[1]["group"]["relays[0].profile"], "strfry");
    for r in recs {
        assert!(r["value"].is_string(), "{r}");
        assert!(r["ties"].is_array(), "{r}");
        assert!(r["text"].as_str().unwrap().contains("policy.budget"), "{r}");
    }

    // Shards, then their merge: the same recommendations.
    let mut shards = Vec::new();
    for i in 0..2 {
        let shard_dir = dir.join(format!("shard-{i}"));
        let shard = format!("{i}/2");
        let out = relaysim(&[
            "sweep",
            &sweep,
            "--shard",
            &shard,
            "--out",
            text(&shard_dir),
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0));
        let s = document(&out);
        assert_eq!(s["shard"], serde_json::json!({ "index": i, "count": 2 }));
        assert_eq!(s["cells"], 2);
        assert_eq!(s["total_cells"], 4);
        shards.push(shard_dir.join("sweep.csv"));
    }
    let merged = dir.join("merged");
    let out = relaysim(&[
        "merge",
        &sweep,
        text(&shards[0]),
        text(&shards[1]),
        "--out",
        text(&merged),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let m = document(&out);
    assert_eq!(m["cells"], 4);
    assert_eq!(
        m["recommendation"]["recommendations"],
        d["recommendation"]["recommendations"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn soak_json_has_the_report_and_the_resources_apart() {
    let run = |jobs: &str| {
        let out = relaysim(&["soak", "--runs", "3", "--jobs", jobs, "--json"]);
        assert_eq!(out.status.code(), Some(0));
        document(&out)
    };
    let mut d = run("1");
    assert_eq!(d["runs"], 3);
    assert_eq!(d["seed"], 1);
    assert_eq!(d["determinism_checked"], 1);
    assert!(d["datagram_runs"].as_u64().unwrap() <= 3);
    let calls = d["calls"].as_u64().unwrap();
    let failed: u64 = d["failures"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(d["completed"].as_u64().unwrap() + failed, calls);
    assert!(d["counters"]["events_published"].as_u64().unwrap() > 0);
    assert_eq!(d["violations"], serde_json::json!({}));
    assert_eq!(d["findings"], serde_json::json!([]));
    let resources = d["resources"].as_object().unwrap();
    assert_eq!(resources["jobs"], 1);
    assert!(resources["wall_us"].is_u64());
    assert!(resources["slowest_run"]["index"].as_u64().unwrap() < 3);
    // Everything but the resources is the same for any job count.
    let mut other = run("2");
    d.as_object_mut().unwrap().remove("resources");
    other.as_object_mut().unwrap().remove("resources");
    assert_eq!(d, other);
}

#[test]
fn check_determinism_json_has_the_verdict_and_the_trace_size() {
    let out = relaysim(&[
        "check-determinism",
        &shipped("scenarios/ideal-baseline.toml"),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["scenario"], "ideal-baseline");
    assert_eq!(d["deterministic"], true);
    assert!(d["lines"].as_u64().unwrap() > 1);
    assert!(d["bytes"].as_u64().unwrap() > d["lines"].as_u64().unwrap());
    assert!(d["first_difference"].is_null());
}

#[test]
fn transfer_json_has_the_counters_the_outcome_and_the_integrity() {
    let out = relaysim(&["transfer", "--size", "64KiB", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let d = document(&out);
    assert_eq!(d["size"], 65536);
    assert_eq!(d["direction"], "download");
    assert_eq!(d["profile"], "ideal");
    assert_eq!(d["content"], "escape-heavy");
    assert!(d["events_published"].as_u64().unwrap() > 0);
    assert_eq!(d["delivered"], d["events_published"]);
    assert_eq!(d["lost"], 0);
    assert_eq!(d["calls"][0]["outcome"], "completed");
    assert!(d["calls"][0]["completed_in_us"].as_u64().unwrap() > 0);
    assert_eq!(d["completed"], true);
    assert_eq!(d["integrity"], "exact");

    // A failed transfer exits 1, as the text does.
    let out = relaysim(&[
        "transfer", "--size", "4MiB", "--loss", "0.2", "--seed", "3", "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let d = document(&out);
    assert_eq!(d["completed"], false);
    assert_eq!(d["calls"][0]["outcome"], "failed");
    assert!(d["calls"][0]["cause"].is_string());
    assert_eq!(d["integrity"], "nothing-surfaced");
}

/// The report on standard output is report.json's, and the command's own output goes to
/// standard error.
#[test]
fn serve_json_prints_the_report_json_and_keeps_the_command_off_stdout() {
    let dir = temp_dir("serve");
    let script = "echo \"$RELAYSIM_RELAYS\"; \
         echo '{\"peer\":\"sdk\",\"call\":\"echo\",\"outcome\":\"completed\"}' > \"$RELAYSIM_OUTCOMES\"";
    let out = relaysim(&[
        "serve",
        &shipped("scenarios/two-relays-one-down.toml"),
        "--listen",
        "127.0.0.1:0",
        "--out",
        text(&dir),
        "--json",
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = document(&out);
    let relays: Vec<(&str, &str)> = d["relays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["relay"].as_str().unwrap(), r["profile"].as_str().unwrap()))
        .collect();
    assert_eq!(relays, [("a", "strfry"), ("b", "khatru")]);
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(d, written);
    assert!(String::from_utf8_lossy(&out.stderr).contains("ws://127.0.0.1:"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_json_with_several_files_is_one_array_that_says_where_results_went() {
    let out = temp_dir("run-several");
    let o = relaysim(&[
        "run",
        &shipped("scenarios/ideal-baseline.toml"),
        &shipped("scenarios/damus-rate-cap.toml"),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let json = document(&o);
    let list = json.as_array().expect("one array for several files");
    assert_eq!(list.len(), 2);
    assert!(list[0]["file"]
        .as_str()
        .unwrap()
        .ends_with("ideal-baseline.toml"));
    assert!(list[1]["report"]["results"]
        .as_str()
        .unwrap()
        .ends_with("damus-rate-cap"));
}
