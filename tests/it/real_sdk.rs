//! The real TypeScript SDK inside the des world (`program = "ts-sdk"`, hosted by node in
//! virtual time): byte-identical runs, the same report for any job count, a planted source of
//! nondeterminism caught, and the mobile reconnect bug reproduced, replayed and shrunk by
//! rerunning the real program; then one test per shipped `real-sdk/` scenario.
//!
//! Longer than 600 lines because each of those scenarios needs its own reading of the trace, and
//! they share the helpers at the top (the node packages, the traced run, the variants).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `npm ci` in the node host and the TypeScript program, once (CI runs it too).
pub(crate) fn packages() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        crate::ts_sdk::node_packages()
            .as_ref()
            .expect("the TypeScript SDK's packages");
        let host = root().join("interop/node-host");
        if !host.join("node_modules/esbuild").exists() {
            let out = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&host)
                .output()
                .expect("npm");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });
}

fn relaysim(args: &[&str], env: &[(&str, &str)]) -> Output {
    packages();
    let mut command = Command::new(env!("CARGO_BIN_EXE_relaysim"));
    command.args(args).current_dir(root());
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("relaysim runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("relaysim-real-sdk-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `scenario` changed by `edit`, written into `dir` (its program given by path, since the copy
/// is not beside `interop/`) and run with `args`; the run's output lands in `dir/name`.
fn run_variant(
    scenario: &str,
    dir: &Path,
    name: &str,
    args: &[&str],
    edit: impl FnOnce(String) -> String,
) -> Output {
    let text = std::fs::read_to_string(root().join(scenario)).unwrap();
    let file = dir.join(format!("{name}.toml"));
    let program = format!("program = {:?}", root().join("interop/ts-sdk/program.mjs"));
    std::fs::write(&file, edit(text).replace("program = \"ts-sdk\"", &program)).unwrap();
    let out_dir = dir.join(name);
    let mut all = vec!["run", file.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out_dir.to_str().unwrap()]);
    relaysim(&all, &[])
}

/// A trace's lines as JSON.
fn trace_lines(trace: &str) -> Vec<serde_json::Value> {
    trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The failing calls `show --json` draws for the trace at `path`.
fn failing_calls_shown(path: &Path) -> Vec<serde_json::Value> {
    let shown = relaysim(&["show", path.to_str().unwrap(), "--json"], &[]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    shown["failing_calls"]
        .as_array()
        .expect("failing calls")
        .clone()
}

fn run_traced(scenario: &str, dir: &Path, tag: &str, env: &[(&str, &str)]) -> (Output, String) {
    let trace = dir.join(format!("{tag}.jsonl"));
    let out = relaysim(
        &[
            "run",
            scenario,
            "--json",
            "--trace",
            trace.to_str().unwrap(),
            "--out",
            dir.join(tag).to_str().unwrap(),
        ],
        env,
    );
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    (out, text)
}

#[test]
fn the_real_sdk_completes_each_call_and_a_seed_gives_the_same_bytes_twice() {
    let dir = scratch("basic");
    let (first, trace) = run_traced("scenarios/real-sdk/basic.toml", &dir, "a", &[]);
    assert!(
        first.status.success(),
        "{}{}",
        stdout(&first),
        String::from_utf8_lossy(&first.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(report["completion_ratio"], 1.0, "{report}");
    assert_eq!(report["integrity_violations"], 0);
    assert!(trace.contains("\"type\":\"published\""));
    let (_, again) = run_traced("scenarios/real-sdk/basic.toml", &dir, "b", &[]);
    assert!(trace == again, "two runs of one seed differ");
}

/// Twenty seeds of the scenario with a reconnect and a failing stream: the printed report and
/// every result file are the same bytes whether one job runs them or two.
#[test]
fn twenty_seeds_give_the_same_bytes_for_one_job_and_two() {
    let out = scratch("jobs").join("out");
    let run = |jobs: &str| {
        let o = relaysim(
            &[
                "run",
                "scenarios/real-sdk/mobile-reconnect.toml",
                "--runs",
                "20",
                "--jobs",
                jobs,
                "--out",
                out.to_str().unwrap(),
            ],
            &[],
        );
        assert!(o.status.success(), "{}", stdout(&o));
        let files = ["summary.csv", "latency.csv", "failures.csv"]
            .map(|f| std::fs::read(out.join(f)).expect("a result file"));
        (o.stdout, files)
    };
    let (one, one_files) = run("1");
    let (two, two_files) = run("2");
    assert!(
        String::from_utf8_lossy(&one).contains("runs 20  seeds 1-20"),
        "{}",
        String::from_utf8_lossy(&one)
    );
    assert!(
        one == two,
        "{}\n---\n{}",
        String::from_utf8_lossy(&one),
        String::from_utf8_lossy(&two)
    );
    assert!(one_files == two_files, "the result files differ");
}

/// Every shipped real-SDK scenario passes `check-determinism`: two runs of its seed, the same
/// trace byte for byte.
#[test]
fn every_shipped_real_sdk_scenario_is_deterministic() {
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios/real-sdk"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    scenarios.sort();
    assert!(scenarios.len() >= 9, "{scenarios:?}");
    for scenario in scenarios {
        let out = relaysim(&["check-determinism", scenario.to_str().unwrap()], &[]);
        assert!(
            out.status.success() && stdout(&out).starts_with("deterministic:"),
            "{}: {}{}",
            scenario.display(),
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn planted_nondeterminism_in_the_host_is_caught() {
    // OS randomness planted in every peer: two runs of one seed differ, and the check says so.
    let out = relaysim(
        &["check-determinism", "scenarios/real-sdk/basic.toml"],
        &[("RELAYSIM_HOST_PLANT", "real-random")],
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("NOT deterministic"),
        "{}",
        stdout(&out)
    );
    // The real clock planted: the run is not what the seed gives (events carry the wall
    // clock's time, which the relay refuses as from the future).
    let dir = scratch("clock");
    let (_, honest) = run_traced("scenarios/real-sdk/basic.toml", &dir, "honest", &[]);
    let (_, planted) = run_traced(
        "scenarios/real-sdk/basic.toml",
        &dir,
        "planted",
        &[("RELAYSIM_HOST_PLANT", "real-clock")],
    );
    assert!(honest != planted, "a real clock left no trace");
    // Unplanted, the check passes.
    let out = relaysim(&["check-determinism", "scenarios/real-sdk/basic.toml"], &[]);
    assert!(out.status.success(), "{}", stdout(&out));
}

#[test]
fn the_mobile_reconnect_bug_reproduces_replays_and_shrinks_to_the_drop() {
    let dir = scratch("mobile");
    let scenario = "scenarios/real-sdk/mobile-reconnect.toml";
    let (out, trace) = run_traced(scenario, &dir, "run", &[]);
    // The scenario expects the stream to fail; the SDK's own words say how.
    assert!(out.status.success(), "{}", stdout(&out));
    let report = stdout(&out);
    assert!(
        report.contains("Non-increasing progress for stream 1"),
        "{report}"
    );
    // The mechanism is named too: the server ran the request twice, a second writer.
    let second_writer = "server wrote token 1's progress again from 1 after reaching";
    assert!(report.contains(second_writer), "{report}");
    assert!(trace.contains("\"via\":\"resubscribe-replay\""));
    let path = dir.join("run.jsonl");
    let path = path.to_str().unwrap();
    let replay = relaysim(&["replay", path, "--mode", "schedule"], &[]);
    assert!(
        stdout(&replay).contains("identical to the trace, byte for byte"),
        "{}",
        stdout(&replay)
    );
    let min = dir.join("min.jsonl");
    let shrunk = relaysim(&["shrink", path, "--out", min.to_str().unwrap()], &[]);
    let said = stdout(&shrunk);
    assert!(said.contains("kept 1 of"), "{said}");
    assert!(said.contains("outage    #0"), "{said}");
    let show = relaysim(&["show", min.to_str().unwrap()], &[]);
    assert!(
        stdout(&show).contains("Non-increasing progress for stream 1"),
        "{}",
        stdout(&show)
    );
    // `show` frames the failing call with both: the SDK's words and the second writer.
    let failing = failing_calls_shown(Path::new(path));
    assert!(
        failing.iter().any(|c| c["why"]
            .as_str()
            .is_some_and(|w| w.contains(second_writer) && w.contains("Non-increasing"))),
        "{failing:?}"
    );
}

#[test]
fn a_sweep_runs_program_peers_in_every_cell() {
    let dir = scratch("sweep");
    let sweep = dir.join("echo.toml");
    std::fs::write(
        &sweep,
        format!(
            "name = \"echo\"\nscenario = {:?}\nseeds = 1\n\n[[axes]]\nparam = \"workloads[0].bytes\"\nvalues = [10, 1000]\n",
            root().join("scenarios/real-sdk/basic.toml").display().to_string()
        ),
    )
    .unwrap();
    let out = relaysim(
        &[
            "sweep",
            sweep.to_str().unwrap(),
            "--out",
            dir.join("out").to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("out/sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        !csv.contains("program"),
        "no program failure in any cell: {csv}"
    );
}

/// A download scenario whose server hands `program_options` to the real SDK.
fn chunked_download(dir: &Path, server_options: &str) -> PathBuf {
    let path = dir.join(format!("download-{}.toml", server_options.len()));
    std::fs::write(
        &path,
        format!(
            "name = \"chunked\"\nseed = 1\nduration = \"1m\"\n\n[[relays]]\nname = \"strfry\"\nprofile = \"strfry\"\n\n\
             [[servers]]\nname = \"server\"\nrelays = [\"strfry\"]\nprogram = \"ts-sdk\"\n{server_options}\n\n\
             [[clients]]\nname = \"client\"\nrelays = [\"strfry\"]\nprogram = \"ts-sdk\"\n\n\
             [[workloads]]\nname = \"big\"\nkind = \"download\"\nbytes = \"256KiB\"\ncontent = \"ascii\"\n\n\
             [expect]\nmin_completion_ratio = 1.0\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn program_options_reach_the_real_sdk() {
    let dir = scratch("options");
    let published = |options: &str, tag: &str| {
        let scenario = chunked_download(&dir, options);
        let (out, trace) = run_traced(scenario.to_str().unwrap(), &dir, tag, &[]);
        assert!(
            out.status.success(),
            "{}{}",
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
        trace
            .lines()
            .filter(|l| l.contains("\"type\":\"published\"") && l.contains("\"peer\":\"server\""))
            .count()
    };
    let default = published("", "default");
    let small = published("program_options = { chunk_size_bytes = 8192 }", "small");
    // 256 KiB in 8 KiB chunks is 32 chunk frames at least; the SDK's default chunks are larger.
    assert!(small >= 32, "{small} server events with 8 KiB chunks");
    assert!(
        small > default,
        "smaller chunks, more events: {small} against {default}"
    );
}

/// Two TS clients' uploads under one SDK-minted token meet in the TS server's single CEP-22
/// receiver: both calls time out, and each call's explanation names the server's own errors.
#[test]
fn two_clients_uploads_under_one_token_collide_in_the_ts_server() {
    let dir = scratch("collision");
    let scenario = "scenarios/real-sdk/upload-token-collision.toml";
    let (out, trace) = run_traced(scenario, &dir, "run", &[]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}");
    for words in [
        "Duplicate start frame for active transfer (token: 1)",
        "Conflicting duplicate chunk detected (token: 1",
    ] {
        assert!(report.contains(words), "{words}: {report}");
        assert!(trace.contains(words), "{words}: the trace's why");
    }
    // The same client alone completes its upload: it is the second client's token that breaks it.
    let out = run_variant(scenario, &dir, "alone", &[], |text| {
        text.replace("count = 2", "count = 1")
            .replace("failed:program-timeout", "completed")
    });
    assert!(out.status.success(), "{}", stdout(&out));
}

/// The registration race: a TS client registers an uploaded request under its `end` frame only
/// once every relay has answered that publish, so an answer that comes back through a quick
/// relay while a slow one has not yet answered is dropped and the call times out; with the
/// slow relay quicker than the server, the same upload completes.
#[test]
fn an_answer_before_the_slow_relay_s_ok_for_end_is_lost_to_the_ts_client() {
    let dir = scratch("registration-race");
    let scenario = "scenarios/real-sdk/registration-race.toml";
    let (out, trace) = run_traced(scenario, &dir, "run", &[]);
    assert!(out.status.success(), "{}", stdout(&out));
    let lines = trace_lines(&trace);
    let published = |peer: &str, holding: &str| {
        lines
            .iter()
            .filter(|l| l["type"] == "published" && l["peer"] == peer)
            .filter(|l| {
                l["event"]["content"]
                    .as_str()
                    .unwrap_or("")
                    .contains(holding)
            })
            .map(|l| l["id"].as_str().unwrap().to_owned())
            .next_back()
            .unwrap_or_else(|| panic!("{peer} published {holding}"))
    };
    let time_of = |kind: &str, relay: &str, peer: &str, id: &str| {
        lines
            .iter()
            .find(|l| {
                l["type"] == kind && l["relay"] == relay && l["peer"] == peer && l["id"] == id
            })
            .and_then(|l| l["t"].as_u64())
            .unwrap_or_else(|| panic!("{kind} of {id} at {peer} via {relay}"))
    };
    let end = published("client", r#""frameType":"end""#);
    let answer = published("server", r#""result""#);
    let answered = time_of("delivered", "quick", "client", &answer);
    let end_ok = time_of("verdict", "slow", "client", &end);
    assert!(
        answered < end_ok,
        "the answer ({answered} µs) reached the client before the slow relay's OK for `end` ({end_ok} µs)"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "client" && l["event"] == "failed:program-timeout"),
        "the call timed out"
    );
    // The slow relay quicker than the server's answer: the same upload completes.
    let out = run_variant(scenario, &dir, "quick", &[], |text| {
        text.replace("value = \"2s\"", "value = \"50ms\"")
            .replace("failed:program-timeout", "completed")
    });
    assert!(out.status.success(), "{}", stdout(&out));
}

/// A `close` lost with the server's connection is published again by the TS server's relay
/// pool once the connection is back, so the client's stream ends well instead of waiting for a
/// probe timeout.
#[test]
fn a_close_lost_with_the_server_s_connection_is_published_again_and_the_stream_ends() {
    let dir = scratch("dropped-close");
    let (out, trace) = run_traced("scenarios/real-sdk/dropped-close.toml", &dir, "run", &[]);
    assert!(out.status.success(), "{}", stdout(&out));
    let lines = trace_lines(&trace);
    let of_type = |kind: &'static str| lines.iter().filter(move |l| l["type"] == kind);
    let lost = of_type("lost")
        .find(|l| l["peer"] == "server")
        .expect("a frame lost with the server's connection");
    let id = lost["id"].as_str().unwrap();
    let publications: Vec<&serde_json::Value> =
        of_type("published").filter(|l| l["id"] == id).collect();
    assert!(
        publications[0]["event"]["content"]
            .as_str()
            .unwrap()
            .contains(r#""frameType":"close""#),
        "the lost frame is the close"
    );
    let back = of_type("connected")
        .filter(|l| l["peer"] == "server")
        .filter_map(|l| l["t"].as_u64())
        .max()
        .unwrap();
    assert_eq!(publications.len(), 2, "published once more");
    assert!(
        publications[1]["t"].as_u64().unwrap() >= back,
        "after the reconnect"
    );
    assert!(
        of_type("delivered").any(|l| l["id"] == id && l["peer"] == "client"),
        "the close reached the client"
    );
    assert!(
        of_type("client").any(|l| l["event"] == "stream-ended-ok"),
        "the stream ended well"
    );
}

/// `callToolStream` pairs its stream with the progress token of the next `tools/call` the client
/// sends, stream or not: a slow call with progress started at the same moment takes the first
/// stream's pairing, and the second stream reads the first's chunks. Started apart, all three
/// complete.
#[test]
fn concurrent_calls_hand_a_ts_stream_call_another_call_s_stream() {
    let dir = scratch("stream-pairing");
    let scenario = "scenarios/real-sdk/stream-pairing.toml";
    let (out, trace) = run_traced(scenario, &dir, "run", &[]);
    assert!(out.status.success(), "{}", stdout(&out));
    let lines = trace_lines(&trace);
    // Call 3 (the second stream, 5-byte chunks) read the first stream's 1,322-byte chunks.
    let read: Vec<(u64, u64)> = lines
        .iter()
        .filter(|l| l["type"] == "chunk-read")
        .map(|l| (l["call"].as_u64().unwrap(), l["bytes"].as_u64().unwrap()))
        .collect();
    assert_eq!(read, vec![(3, 1322); 3], "{read:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let second = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["call"] == 3)
        .unwrap();
    assert_eq!(second["outcome"], "failed:integrity-violation", "{second}");
    assert_eq!(
        second["why"], "3 of the 3 chunks it read were not the chunks written for it",
        "{second}"
    );
    let out = run_variant(scenario, &dir, "apart", &["--json"], |text| {
        text.replace("interval = \"100ms\"", "interval = \"100ms\"\nat = \"5s\"")
            .replace("interval = \"50ms\"", "interval = \"50ms\"\nat = \"10s\"")
    });
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = report["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert!(
        items.iter().all(|i| i["outcome"] == "completed"),
        "{items:?}"
    );
}

/// `soak --program ts-sdk` makes every Nth run's peers the real program and checks those runs
/// as any other; a program given by a relative path runs and is reported by its absolute one.
#[test]
fn the_soak_runs_the_real_sdk_in_its_program_runs() {
    let out = relaysim(
        &[
            "soak",
            "--runs",
            "2",
            "--seed",
            "11",
            "--program",
            "interop/ts-sdk/program.mjs",
            "--program-every",
            "2",
            "--jobs",
            "1",
            "--json",
        ],
        &[],
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["runs"], 2);
    assert_eq!(report["program_runs"], 1);
    assert!(report["calls"].as_u64().unwrap() > 0);
    // A relative path is made absolute, so `compare soak-N.toml --program …` run beside the
    // written scenario finds it.
    let program = report["program"].as_str().unwrap();
    assert!(Path::new(program).is_absolute(), "{program}");
    assert!(program.ends_with("interop/ts-sdk/program.mjs"), "{program}");
}

/// Duplicated plaintext (B17): with two relays and encryption off, the TS server dispatches
/// each copy of a request again. The echo is answered twice (the same event, so each relay
/// says `duplicate:`), the second run of the stream ends in the server's "No pending request
/// found", the client warns of a late `initialize` answer, and every call completes; the
/// SDK's own lines reach the trace and the report. On one relay none of this happens.
#[test]
fn the_ts_server_answers_each_copy_of_a_duplicated_plaintext_request() {
    let dir = scratch("duplicated-plaintext");
    let scenario = "scenarios/real-sdk/duplicated-plaintext.toml";
    let (out, trace) = run_traced(scenario, &dir, "run", &[]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}");
    let lines = trace_lines(&trace);
    let request = |tool: &str| {
        lines
            .iter()
            .find(|l| {
                l["type"] == "published"
                    && l["peer"] == "client"
                    && l["event"]["content"]
                        .as_str()
                        .unwrap_or("")
                        .contains(&format!(r#""name":"{tool}""#))
            })
            .map(|l| l["id"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| panic!("the client called {tool}"))
    };
    let echo = request("echo");
    let answers: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["type"] == "published" && l["peer"] == "server")
        .filter(|l| {
            l["event"]["tags"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(["e", echo]))
        })
        .collect();
    assert_eq!(answers.len(), 4, "one answer per copy, each to both relays");
    let id = &answers[0]["id"];
    assert!(
        answers.iter().all(|a| &a["id"] == id),
        "the same event twice"
    );
    let duplicates = lines
        .iter()
        .filter(|l| l["type"] == "verdict" && &l["id"] == id)
        .filter(|l| {
            l["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("duplicate:")
        })
        .count();
    assert_eq!(duplicates, 2, "each relay has the second copy already");
    let logged = |peer: &str, words: &str| {
        lines.iter().any(|l| {
            l["type"] == "logged"
                && l["peer"] == peer
                && l["text"].as_str().unwrap_or("").contains(words)
        })
    };
    let no_route = format!(
        "No pending request found for response ID: {}",
        request("stream")
    );
    assert!(logged("server", &no_route), "the server's own error");
    assert!(
        logged("client", "Request not found in pending set"),
        "the client's warning"
    );
    let json: serde_json::Value = serde_json::from_str(&report).unwrap();
    let tallied = json["program_lines"].as_object().expect("program_lines");
    assert!(tallied.keys().any(|k| k.contains(&no_route)), "{tallied:?}");
    // One relay: one copy of each request, one answer, nothing logged.
    let one = dir.join("one-relay.jsonl");
    let out = run_variant(
        scenario,
        &dir,
        "one-relay",
        &["--trace", one.to_str().unwrap()],
        |text| text.replace(r#"relays = ["quick", "slow"]"#, r#"relays = ["quick"]"#),
    );
    assert!(out.status.success(), "{}", stdout(&out));
    let lines = trace_lines(&std::fs::read_to_string(&one).unwrap());
    assert!(
        lines.iter().all(|l| l["type"] != "logged"),
        "nothing logged"
    );
    let published = lines
        .iter()
        .filter(|l| l["type"] == "published" && l["peer"] == "server")
        .filter(|l| {
            l["event"]["content"]
                .as_str()
                .unwrap_or("")
                .contains(r#""result""#)
        })
        .count();
    assert_eq!(
        published, 3,
        "initialize, echo and stream answered once each"
    );
}

/// Two relays, encryption off, and the copies of a stream request landing either side of a
/// second's edge: the TS server runs the tool once per copy (B17), and the second run's start
/// frame carries a later `created_at`, so it is a new event rather than a `duplicate:` of the
/// first. The client reads a second start for its token and fails the stream; the report and
/// `show` name the server as a second writer. Called a second earlier (duplicated-plaintext),
/// the two runs' frames are the same events and the stream completes.
#[test]
fn a_copy_of_a_stream_request_run_in_the_next_second_is_a_second_writer() {
    let dir = scratch("two-relays-second-writer");
    let scenario = "scenarios/real-sdk/two-relays-second-writer.toml";
    let (out, trace) = run_traced(scenario, &dir, "run", &[]);
    let report = stdout(&out);
    // The scenario expects the echo to complete and the stream to fail.
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("Non-increasing progress for stream 2"),
        "{report}"
    );
    let second_writer = "server wrote token 2's progress again from 1 after reaching 1";
    assert!(report.contains(second_writer), "{report}");
    // Two start frames for token 2, one per run of the tool, a second apart on the events'
    // clock and therefore two events.
    let starts: Vec<(u64, String)> = trace_lines(&trace)
        .iter()
        .filter(|l| l["type"] == "published" && l["peer"] == "server" && l["relay"] == "quick")
        .filter_map(|l| {
            let content: serde_json::Value =
                serde_json::from_str(l["event"]["content"].as_str()?).ok()?;
            let params = &content["params"];
            (params["progressToken"] == "2" && params["progress"] == 1).then(|| {
                let at = l["event"]["created_at"].as_u64().unwrap();
                (at, l["id"].as_str().unwrap().to_owned())
            })
        })
        .collect();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(starts[1].0, starts[0].0 + 1, "{starts:?}");
    assert_ne!(starts[0].1, starts[1].1);
    // `show` frames the failing call with the SDK's words and the second writer.
    let failing = failing_calls_shown(&dir.join("run.jsonl"));
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert!(
        failing[0]["label"]
            .as_str()
            .is_some_and(|l| l.starts_with("call #2 stream (stream): failed:program-error")),
        "{failing:?}"
    );
    assert!(
        failing[0]["why"]
            .as_str()
            .is_some_and(|w| w.contains(second_writer) && w.contains("Non-increasing")),
        "{failing:?}"
    );
}

/// Encryption required on a default strfry: the client's `initialize` goes as a kind-1059 gift
/// wrap, which strfry keeps from connections that have not authenticated; the server never
/// reads it, the echo times out with the SDK's words, and the why, the trace and `show` name
/// the withheld event. On a relay that does not gate kind 1059 the same call completes.
#[test]
fn a_gift_wrapped_initialize_withheld_by_a_default_strfry_is_named_in_the_why() {
    let dir = scratch("encrypted-on-default-strfry");
    let scenario = "scenarios/real-sdk/encrypted-on-default-strfry.toml";
    let (out, trace) = run_traced(scenario, &dir, "run", &[]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("Request timed out"), "{report}");
    let withheld = "relays withheld 1 event from subscribers before it ended";
    assert!(report.contains(withheld), "{report}");
    let lines = trace_lines(&trace);
    let wrap = lines
        .iter()
        .find(|l| l["type"] == "published" && l["event"]["kind"] == 1059)
        .expect("a kind-1059 publication");
    let held = lines
        .iter()
        .find(|l| l["type"] == "withheld")
        .expect("a withheld line");
    assert_eq!(held["id"], wrap["id"]);
    assert_eq!(held["peer"], "server");
    assert_eq!(held["reason"], "auth-required");
    let failing = failing_calls_shown(&dir.join("run.jsonl"));
    assert!(
        failing[0]["why"]
            .as_str()
            .is_some_and(|w| w.contains(withheld)),
        "{failing:?}"
    );
    let open = run_variant(scenario, &dir, "open", &[], |text| {
        text.replace(r#"profile = "strfry""#, r#"profile = "nostr-relay-py""#)
            .replace(
                r#"outcomes = { echo = "failed:program-timeout" }"#,
                r#"outcomes = { echo = "completed" }"#,
            )
    });
    assert!(open.status.success(), "{}", stdout(&open));
}

/// `compare --program ts-sdk` adds a row with every peer the real SDK beside the presets' rows,
/// in the table and the CSV, and lists where the `ts-sdk` preset and the program complete
/// different calls: on `ideal-baseline` the real client's stream never ends (its frames come
/// before it has registered the stream), where the preset completes it.
#[test]
#[cfg(feature = "contextvm-sdk")]
fn compare_sets_the_real_sdk_beside_its_preset_and_lists_where_they_differ() {
    let out_dir = scratch("compare");
    let compare = |scenario: &str| {
        let out = relaysim(
            &[
                "compare",
                scenario,
                "--program",
                "ts-sdk",
                "--out",
                out_dir.to_str().unwrap(),
            ],
            &[],
        );
        let text = stdout(&out);
        assert!(out.status.success(), "{text}");
        text
    };
    let text = compare("scenarios/ideal-baseline.toml");
    assert!(text.contains("program/program"), "{text}");
    let listed = text
        .split("where the ts-sdk preset and the real program complete different calls:")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        listed.contains("stream-3: preset 1/1; program 0/1 unfinished×1"),
        "{text}"
    );
    let csv = std::fs::read_to_string(out_dir.join("compare.csv")).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.starts_with("program,program,stream-3,1,0,")),
        "{csv}"
    );
    // Peers that already run the program keep their options in its row: with encryption
    // required the echo times out on strfry, where the preset (which does not encrypt)
    // completes it.
    let text = compare("scenarios/real-sdk/encrypted-on-default-strfry.toml");
    assert!(
        text.contains("echo: preset 1/1; program 0/1 program-timeout×1"),
        "{text}"
    );
}
