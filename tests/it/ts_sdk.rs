//! The real TypeScript ContextVM SDK (`@contextvm/sdk`, pinned in `interop/ts-sdk/`) as a
//! server and a client, through `relaysim serve` on every built-in profile, each peer on its
//! own loopback address: `serve … -- node interop/ts-sdk/peers.mjs`. Each test asserts the
//! outcome of the three calls (a plain `echo`, a CEP-22 `large` result, a CEP-41 `stream`)
//! measured for that profile, then replays the recording with `--mode inject`.
//!
//! The node packages are installed once, with `npm ci` from the lockfile, when missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/ts-sdk")
}

/// Installs the pinned node packages if they are not there (once per test binary).
pub(crate) fn node_packages() -> &'static Result<(), String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY.get_or_init(|| {
        let dir = interop_dir();
        if dir
            .join("node_modules/@contextvm/sdk/package.json")
            .exists()
        {
            return Ok(());
        }
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .output()
            .map_err(|e| format!("cannot run npm (node and npm are needed): {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "npm ci failed in {}:\n{}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    })
}

fn relaysim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(args)
        .output()
        .expect("the relaysim binary runs")
}

/// The calls' outcomes (call, outcome) of a run through one `serve --profile` with each call
/// given `timeout_ms`, the run's exit code, its output directory and what it printed.
fn through(
    profile: &str,
    timeout_ms: &str,
) -> (Vec<(String, String)>, Option<i32>, PathBuf, String) {
    through_relays(
        profile,
        &["--profile", profile],
        &["--timeout-ms", timeout_ms],
    )
}

/// As [`through`], with `relays` naming what to serve (`--profile P` or a scenario file) and
/// `peer_args` given to `peers.mjs`; `name` names the output directory.
fn through_relays(
    name: &str,
    relays: &[&str],
    peer_args: &[&str],
) -> (Vec<(String, String)>, Option<i32>, PathBuf, String) {
    if let Err(e) = node_packages() {
        panic!("{e}");
    }
    let dir = std::env::temp_dir().join(format!("relaysim-ts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let trace = dir.join("trace.jsonl");
    let peers = interop_dir().join("peers.mjs");
    let mut args = vec!["serve"];
    args.extend_from_slice(relays);
    args.extend_from_slice(&[
        "--listen",
        "127.0.0.1:0",
        "--label",
        "127.0.0.2=ts-server",
        "--label",
        "127.0.0.3=ts-client",
        "--out",
        dir.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--",
        "node",
        peers.to_str().unwrap(),
        "--server-local-address",
        "127.0.0.2",
        "--client-local-address",
        "127.0.0.3",
    ]);
    args.extend_from_slice(peer_args);
    let out = relaysim(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let outcomes = std::fs::read_to_string(dir.join("outcomes.jsonl"))
        .unwrap_or_else(|e| {
            panic!(
                "no outcomes from the TypeScript peers ({e}); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["call"].as_str().unwrap().to_owned(),
                v["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (outcomes, out.status.code(), dir, stdout)
}

/// The failing calls `show` draws for the trace in `dir` (its `--json` `failing_calls`).
fn failing_calls_drawn(dir: &Path) -> Vec<serde_json::Value> {
    let trace = dir.join("trace.jsonl");
    let out = relaysim(&[
        "show",
        trace.to_str().unwrap(),
        "--out",
        dir.join("picture").to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    shown["failing_calls"].as_array().unwrap().clone()
}

fn outcomes(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(c, o)| (c.to_string(), o.to_string()))
        .collect()
}

/// A profile whose relay carries all three calls: exit 0, the report's pairs answered, and
/// the recording's CEP-22 result and CEP-41 stream read again whole by injection.
fn all_complete(profile: &str) {
    let (got, code, dir, stdout) = through(profile, "10000");
    assert_eq!(
        got,
        outcomes(&[
            ("echo", "completed"),
            ("large", "completed"),
            ("stream", "completed")
        ]),
        "{stdout}"
    );
    assert_eq!(code, Some(0), "{stdout}");
    for call in ["tools/call echo", "tools/call large", "tools/call stream"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(call))
            .unwrap_or_else(|| panic!("no {call} row in\n{stdout}"));
        let cells: Vec<&str> = row[call.len()..].split_whitespace().collect();
        assert_eq!(&cells[..2], &["1", "1"], "sent and answered: {row}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert!(report["relays"][0]["delivered"].as_u64().unwrap() > 20);
    let inject = relaysim(&[
        "replay",
        dir.join("trace.jsonl").to_str().unwrap(),
        "--mode",
        "inject",
    ]);
    let text = String::from_utf8_lossy(&inject.stdout);
    assert_eq!(inject.status.code(), Some(0), "{text}");
    let row = |kind: &str| {
        text.lines()
            .find(|l| l.starts_with("ts-client") && l.contains(kind))
            .unwrap_or_else(|| panic!("no {kind} for ts-client in\n{text}"))
            .to_owned()
    };
    assert!(row("transfer").contains("completed"), "{text}");
    let stream = row("stream");
    assert!(
        stream.contains(" 20 ") && stream.contains("completed"),
        "{stream}"
    );
    assert!(text.contains("nothing to compare"), "{text}");
    subscriptions_closed_as_requested(&dir.join("trace.jsonl"));
    let _ = std::fs::remove_dir_all(dir);
}

/// Encryption required, through a relay of the strfry profile: the client's `initialize` goes
/// as a kind-1059 gift wrap, which strfry keeps from readers that have not authenticated, so
/// the SDK gives up at `initialize` (as it did against a running strfry f8a56a8,
/// docs/relays.md) and `serve` names the withheld event.
#[test]
fn ts_sdk_encrypted_through_strfry_waits_for_an_initialize_the_relay_withholds() {
    let (got, code, dir, stdout) = through_relays(
        "encrypted-strfry",
        &["--profile", "strfry"],
        &[
            "--timeout-ms",
            "10000",
            "--calls",
            "echo",
            "--encryption",
            "required",
        ],
    );
    assert_eq!(
        got,
        outcomes(&[("echo", "error: initialize: timeout")]),
        "{stdout}"
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "relay upstream (strfry) withheld 1 events from subscribers not allowed to read \
             their kind without AUTH"
        ),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The SDK's peers close their transports when the program ends: the trace has CLOSE lines,
/// each for a subscription its peer opened on that relay earlier (a REQ line).
fn subscriptions_closed_as_requested(trace: &Path) {
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let key = |l: &serde_json::Value| (l["peer"].clone(), l["relay"].clone(), l["sub"].clone());
    let mut closes = 0;
    for (i, line) in lines.iter().enumerate() {
        if line["type"] == "close" {
            closes += 1;
            assert!(
                lines[..i]
                    .iter()
                    .any(|l| l["type"] == "req" && key(l) == key(line)),
                "a CLOSE for a subscription never requested: {line}"
            );
        }
    }
    assert!(closes > 0, "no CLOSE line in {}", trace.display());
}

/// A profile whose per-address rate limit stops the server's CEP-22 and CEP-41 frames: the SDK
/// drops the transfer without an abort frame, and the client's calls time out.
fn rate_limited(profile: &str, reason: &str) {
    let (got, code, dir, stdout) = through(profile, "10000");
    assert_eq!(
        got,
        outcomes(&[
            ("echo", "completed"),
            ("large", "timeout"),
            ("stream", "timeout")
        ]),
        "{stdout}"
    );
    assert_eq!(code, Some(1));
    // The report's row: `  rejected   <reason> ×N`.
    assert!(
        stdout.lines().any(|l| l
            .trim_start()
            .strip_prefix("rejected ")
            .is_some_and(|rest| rest.trim_start().starts_with(reason))),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn ts_sdk_through_ideal() {
    all_complete("ideal");
}

#[test]
fn ts_sdk_through_strfry() {
    all_complete("strfry");
}

#[test]
fn ts_sdk_through_khatru() {
    all_complete("khatru");
}

#[test]
fn ts_sdk_through_relay_builder() {
    all_complete("relay-builder");
}

#[test]
fn ts_sdk_through_mobile() {
    all_complete("mobile");
}

/// nostr-rs-relay 0.9 answers ephemeral events with OK, so the handshake that fails on 0.8.12
/// goes through and every call completes.
#[test]
fn ts_sdk_through_nostr_rs_relay_0_9() {
    all_complete("nostr-rs-relay-0.9");
}

#[test]
fn ts_sdk_through_damus_is_rate_limited() {
    rate_limited("damus", "rate-limited ×");
}

#[test]
fn ts_sdk_through_khatru_sane_defaults_is_rate_limited() {
    rate_limited("khatru-sane-defaults", "rate-limited ×");
}

/// nostr-rs-relay answers no OK to ephemeral events; the TS pool takes the missing OK as a
/// refusal after 10 s, so the MCP handshake (which awaits its `initialized` publication) fails.
/// The calls get 15 s so that the pool's 10 s, not the call's own timeout, ends the wait.
#[test]
fn ts_sdk_through_nostr_rs_relay_fails_at_initialize() {
    let (got, code, dir, stdout) = through("nostr-rs-relay", "15000");
    let expected = "error: initialize: Relay rejected publish";
    assert_eq!(
        got,
        outcomes(&[
            ("echo", expected),
            ("large", expected),
            ("stream", expected)
        ]),
        "{stdout}"
    );
    assert_eq!(code, Some(1));
    // Why, in words: the SDK's own error and the relay's silence.
    for words in [
        "why calls failed:",
        "ts-sdk client echo: client error: Relay rejected publish",
        "relay upstream (nostr-rs-relay) accepted",
        "events without sending an OK",
    ] {
        assert!(stdout.contains(words), "{words}: {stdout}");
    }
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(trace.lines().last().unwrap()).unwrap();
    let why = summary["outcomes"][0]["why"].as_str().unwrap_or_default();
    assert!(why.contains("without sending an OK"), "{why}");
    let drawn = failing_calls_drawn(&dir);
    assert_eq!(drawn.len(), 3, "{drawn:?}");
    assert!(drawn.iter().all(|c| c["why"]
        .as_str()
        .unwrap_or_default()
        .contains("without sending an OK")));
    let _ = std::fs::remove_dir_all(dir);
}

/// A link that loses single messages (the datagram stress mode of `lossy-download`): the SDK
/// client waits for a CEP-22 chunk that never comes and times out. The recording, fed to
/// relaysim's receivers, fails with a gap at the end, and `shrink` finds the one lost chunk:
/// with it delivered the transfer completes, with it missing the shrunk trace fails the same way.
#[test]
fn ts_sdk_recording_through_a_lossy_link_shrinks_to_the_lost_chunk() {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/src/lossy-download.toml");
    let (got, code, dir, stdout) = through_relays(
        "lossy",
        &[scenario.to_str().unwrap()],
        &[
            "--timeout-ms",
            "6000",
            "--calls",
            "echo,large",
            "--large-bytes",
            "300000",
        ],
    );
    assert_eq!(
        got,
        outcomes(&[("echo", "completed"), ("large", "timeout")]),
        "{stdout}"
    );
    assert_eq!(code, Some(1));
    // The timeout explained: the link's losses (and whatever the SDK reported meanwhile).
    assert!(
        stdout.contains("why calls failed:\n  ts-sdk client large: ")
            && stdout.contains("relay strfry (strfry) lost on a link: down ×"),
        "{stdout}"
    );
    // `show` draws the failed call where it lay on the trace's clock, with that cause.
    let drawn = failing_calls_drawn(&dir);
    assert_eq!(drawn.len(), 1, "{drawn:?}");
    assert_eq!(drawn[0]["lane"], "ts-sdk client");
    assert!(drawn[0]["label"].as_str().unwrap().contains("large"));
    let (from, to) = (drawn[0]["from_us"].as_u64(), drawn[0]["to_us"].as_u64());
    assert!(
        from > Some(0) && to >= from.map(|f| f + 5_000_000),
        "{from:?}..{to:?}: the 6 s timeout"
    );
    assert!(drawn[0]["why"].as_str().unwrap().contains("lost on a link"));
    let trace = dir.join("trace.jsonl");
    let shrunk = dir.join("trace.min.jsonl");
    let out = relaysim(&[
        "shrink",
        trace.to_str().unwrap(),
        "--out",
        shrunk.to_str().unwrap(),
        "--json",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["cause"], "gap-at-end", "{text}");
    let kept = report["kept"].as_array().unwrap();
    assert_eq!(kept.len(), 1, "{text}");
    assert_eq!(kept[0]["what"], "missing", "{text}");
    assert_eq!(kept[0]["peer"], "ts-client", "{text}");
    let inject = relaysim(&["replay", shrunk.to_str().unwrap(), "--mode", "inject"]);
    let text = String::from_utf8_lossy(&inject.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("ts-client") && l.contains("transfer"))
        .unwrap_or_else(|| panic!("no transfer row in\n{text}"));
    assert!(row.contains("failed:gap-at-end"), "{row}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `compare --ts-sdk` puts the real SDK's row beside relaysim's pairings: on the ideal relay
/// every call it can make completes, and the upload it has no call for says so.
#[test]
fn compare_shows_the_ts_sdk_row_beside_the_pairings() {
    if let Err(e) = node_packages() {
        panic!("{e}");
    }
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/ideal-baseline.toml");
    let out = std::env::temp_dir().join(format!("relaysim-ts-compare-{}", std::process::id()));
    let peers = interop_dir().join("peers.mjs");
    let run = relaysim(&[
        "compare",
        scenario.to_str().unwrap(),
        "--ts-sdk",
        peers.to_str().unwrap(),
        "--ts-sdk-timeout",
        "10s",
        "--runs",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let document: serde_json::Value = serde_json::from_str(&text).unwrap();
    let row = &document["ts_sdk"];
    assert_eq!(row["completion_ratio"], 1.0, "{row}");
    let workloads = row["workloads"].as_array().unwrap();
    let by_name = |name: &str| {
        workloads
            .iter()
            .find(|w| w["workload"] == name)
            .unwrap_or_else(|| panic!("no {name} in {row}"))
    };
    assert_eq!(by_name("request-0")["completed"], 10, "{row}");
    assert_eq!(by_name("download-1")["completed"], 1, "{row}");
    assert_eq!(by_name("stream-3")["completed"], 1, "{row}");
    assert!(
        by_name("upload-2")["not_run"]
            .as_str()
            .unwrap()
            .contains("upload"),
        "{row}"
    );
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert!(csv.contains("ts-sdk (node, live)"), "{csv}");
    let _ = std::fs::remove_dir_all(out);
}

/// Two relays deliver every request to the TS server twice and it runs each twice (it does not
/// deduplicate plaintext requests): the report names the server as a second writer of a
/// progress token, and a call that failed for it says so in its why. The second run's frames
/// are new events only where a `created_at` second ends between the two runs' copies (40 ms
/// apart); within one second they are the first run's events again, answered `duplicate:`.
/// Which of the two happens is the wall clock's: either is checked, and a failed call must name
/// the second writer.
#[test]
fn ts_sdk_through_two_relays_names_the_server_a_second_writer() {
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/live/requests-run-twice.toml");
    let (got, _, dir, stdout) = through_relays(
        "run-twice",
        &[scenario.to_str().unwrap()],
        &[
            "--timeout-ms",
            "20000",
            "--calls",
            "echo,stream",
            "--stream-chunks",
            "100",
        ],
    );
    // Each request ran twice: frames of the second run within the first's second are the same
    // events, answered `duplicate:`; frames past a second's end are named as a second writer.
    let duplicates = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("answered duplicate"))
        .any(|n| n.trim() != "0");
    let named =
        stdout.contains("second writers (a token's progress written again):\n  ts-server token ");
    assert!(duplicates || named, "{stdout}");
    for (call, outcome) in &got {
        if outcome != "completed" {
            assert!(
                stdout.contains(&format!("ts-sdk client {call}: "))
                    && stdout.contains("(a second writer, as when a request runs twice)"),
                "{call} {outcome}: {stdout}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
