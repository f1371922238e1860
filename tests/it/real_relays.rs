//! Tests against real relays from registries, running on loopback, each installed outside the
//! clone by `.ci/run` and started here with its `run.sh` (its default configuration, a fresh
//! database):
//! - the Python `nostr-relay` 1.14 (PyPI): a virtual environment from
//!   `fixtures/probes/nostr-relay-py/requirements.lock.txt`;
//! - nostr-rs-relay 0.8.12 (crates.io): built by `fixtures/probes/nostr-rs-relay/build.sh` with
//!   the dependency versions of the `Cargo.lock` beside it.
//!
//! Where a relay is not installed (a developer's machine without it), each of its tests says so
//! on stderr and passes; CI always installs both. To install them by hand:
//! `python3 -m venv ~/.cache/relaysim-tools/nostr-relay-py-1.14 &&
//! ~/.cache/relaysim-tools/nostr-relay-py-1.14/bin/pip install -r
//! fixtures/probes/nostr-relay-py/requirements.lock.txt` and
//! `fixtures/probes/nostr-rs-relay/build.sh ~/.cache/relaysim-tools/nostr-rs-relay-0.8.12`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A real relay these tests run: where it is installed and how it is started.
#[derive(Clone, Copy)]
enum Installed {
    /// The Python `nostr-relay` 1.14.
    PythonRelay,
    /// nostr-rs-relay 0.8.12.
    NostrRsRelay,
}

impl Installed {
    fn name(self) -> &'static str {
        match self {
            Installed::PythonRelay => "the Python nostr-relay 1.14",
            Installed::NostrRsRelay => "nostr-rs-relay 0.8.12",
        }
    }

    /// The variable naming its directory (as CI sets it) and the directory `run.sh` is told.
    fn variables(self) -> (&'static str, &'static str) {
        match self {
            Installed::PythonRelay => ("RELAYSIM_NOSTR_RELAY_PY_VENV", "NOSTR_RELAY_PY_VENV"),
            Installed::NostrRsRelay => ("RELAYSIM_NOSTR_RS_RELAY_DIR", "NOSTR_RS_RELAY_DIR"),
        }
    }

    /// The default place `.ci/run` installs it, and the program that shows it is there.
    fn default_place(self) -> (&'static str, &'static str) {
        match self {
            Installed::PythonRelay => ("nostr-relay-py-1.14", "bin/nostr-relay"),
            Installed::NostrRsRelay => ("nostr-rs-relay-0.8.12", "bin/nostr-rs-relay"),
        }
    }

    fn run_script(self) -> PathBuf {
        let dir = match self {
            Installed::PythonRelay => "nostr-relay-py",
            Installed::NostrRsRelay => "nostr-rs-relay",
        };
        root().join("fixtures/probes").join(dir).join("run.sh")
    }

    /// Where it is installed: the directory its variable names (which must hold it, as in
    /// CI), or the place `.ci/run` installs it.
    fn dir(self) -> Option<PathBuf> {
        let (variable, _) = self.variables();
        let (place, program) = self.default_place();
        if let Some(dir) = std::env::var_os(variable).map(PathBuf::from) {
            assert!(
                dir.join(program).is_file(),
                "{variable}={} has no {program}",
                dir.display()
            );
            return Some(dir);
        }
        let dir = PathBuf::from(std::env::var_os("HOME")?)
            .join(".cache/relaysim-tools")
            .join(place);
        dir.join(program).is_file().then_some(dir)
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (at most 30 s) until something accepts connections on `port`; `log` is shown if
/// nothing does.
fn wait_for(port: u16, what: &str, log: Option<&Path>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {port}: {}",
            log.map(|l| std::fs::read_to_string(l).unwrap_or_default())
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `signal` to `child` and waits for it (at most 10 s, then kills it).
fn stop(child: &mut Child, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running real relay, stopped when dropped.
struct RealRelay {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl RealRelay {
    /// Starts it, or `None` (having said why) when it is not installed.
    fn start(relay: Installed, name: &str) -> Option<RealRelay> {
        let Some(installed) = relay.dir() else {
            eprintln!(
                "skipped: {} is not installed (see tests/it/real_relays.rs)",
                relay.name()
            );
            return None;
        };
        let dir =
            std::env::temp_dir().join(format!("relaysim-real-relay-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let child = Command::new("bash")
            .arg(relay.run_script())
            .arg(port.to_string())
            .arg(dir.join("db"))
            .env(relay.variables().1, installed)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("relay.log")).unwrap())
            .spawn()
            .expect("run.sh starts");
        let relay = RealRelay { child, port, dir };
        wait_for(port, "the relay", Some(&relay.dir.join("relay.log")));
        Some(relay)
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }
}

impl Drop for RealRelay {
    fn drop(&mut self) {
        // run.sh execs the relay; SIGTERM lets gunicorn stop its worker too.
        stop(&mut self.child, "-TERM");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn relaysim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("relaysim runs")
}

/// The probe of the running relay and of the `nostr-relay-py` profile served by relaysim find
/// no difference: the profile is checked against the relay itself, not only against the
/// recorded fixture.
#[test]
fn the_python_relay_answers_the_probe_as_its_profile_does() {
    let Some(relay) = RealRelay::start(Installed::PythonRelay, "python-probe") else {
        return;
    };
    let out = relaysim(&["probe", &relay.url(), "--profile", "nostr-relay-py"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("no difference from profile nostr-relay-py"),
        "{text}"
    );
}

/// The TypeScript example's peers, each from its own address, calling an echo and a 100 kB
/// result with a 5 s timeout.
const PEERS_CALLS: [&str; 10] = [
    "--server-local-address",
    "127.0.0.2",
    "--client-local-address",
    "127.0.0.3",
    "--calls",
    "echo,large",
    "--large-bytes",
    "100000",
    "--timeout-ms",
    "5000",
];

/// What `show --json` says of `trace`, its pictures written at `picture`.
fn show_json(trace: &Path, picture: &Path) -> serde_json::Value {
    let out = relaysim(&[
        "show",
        trace.to_str().unwrap(),
        "--out",
        picture.to_str().unwrap(),
        "--json",
    ]);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The TypeScript SDK through `record` in front of the Python relay with its default
/// configuration: the relay refuses the server's CEP-22 `start` frame for its content length
/// (`invalid: 280 characters should be enough for anybody`) and the large call times out; the
/// recording's inject replay names the refusal in the relay's words, and `show` draws it.
#[test]
fn the_ts_sdk_recorded_in_front_of_the_python_relay_names_its_refusal() {
    if super::ts_sdk::node_packages().is_err() {
        panic!("{:?}", super::ts_sdk::node_packages());
    }
    let Some(relay) = RealRelay::start(Installed::PythonRelay, "python-record") else {
        return;
    };
    let trace = relay.dir.join("trace.jsonl");
    let listen = free_port();
    let mut record = Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args([
            "record",
            "--upstream",
            &relay.url(),
            "--listen",
            &format!("127.0.0.1:{listen}"),
            "--out",
            trace.to_str().unwrap(),
            "--label",
            "127.0.0.2=ts-server",
            "--label",
            "127.0.0.3=ts-client",
        ])
        .stderr(Stdio::null())
        .spawn()
        .expect("record starts");
    wait_for(listen, "relaysim record", None);
    let outcomes = relay.dir.join("outcomes.jsonl");
    let node = Command::new("node")
        .arg(root().join("interop/ts-sdk/peers.mjs"))
        .args(["--relay", &format!("ws://127.0.0.1:{listen}")])
        .args(PEERS_CALLS)
        .args(["--out", outcomes.to_str().unwrap()])
        .output()
        .expect("node runs");
    // Ctrl-C closes the recording.
    stop(&mut record, "-INT");
    let reported = std::fs::read_to_string(&outcomes).unwrap_or_default();
    assert!(
        reported.contains(r#""call":"echo","outcome":"completed""#)
            && reported.contains(r#""call":"large","outcome":"timeout""#),
        "{reported}\n{}",
        String::from_utf8_lossy(&node.stderr)
    );
    let out = relaysim(&["replay", trace.to_str().unwrap(), "--mode", "inject"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "refused by the relays (OK false):\n  upstream refused 1 of ts-server's events: \
             \"invalid: 280 characters should be enough for anybody\""
        ),
        "{text}"
    );
    let shown = show_json(&trace, &relay.dir.join("picture"));
    assert_eq!(shown["counts"]["rejected"], 1, "{shown}");
}

/// The same through `record -- COMMAND`: the recording stops when the SDK's peers exit, and
/// the failed call is printed with the SDK's words and the relay's refusal in its own, written
/// into the trace, and drawn by `show` as a failing call with that cause.
#[test]
fn record_around_the_ts_sdk_says_why_its_call_failed_and_show_draws_it() {
    if super::ts_sdk::node_packages().is_err() {
        panic!("{:?}", super::ts_sdk::node_packages());
    }
    let Some(relay) = RealRelay::start(Installed::PythonRelay, "python-record-command") else {
        return;
    };
    let trace = relay.dir.join("trace.jsonl");
    let peers = root().join("interop/ts-sdk/peers.mjs");
    let upstream = relay.url();
    let args: Vec<&str> = [
        "record",
        "--upstream",
        &upstream,
        "--listen",
        "127.0.0.1:0",
        "--out",
        trace.to_str().unwrap(),
        "--label",
        "127.0.0.2=ts-server",
        "--label",
        "127.0.0.3=ts-client",
        "--",
        "node",
        peers.to_str().unwrap(),
    ]
    .into_iter()
    .chain(PEERS_CALLS)
    .collect();
    let out = relaysim(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    // A failed call makes the exit code 1, as for `serve -- COMMAND`.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refusal = "upstream refused 1 of ts-server's events: \
                   \"invalid: 280 characters should be enough for anybody\"";
    let why = text
        .lines()
        .find(|l| l.trim_start().starts_with("ts-sdk client large:"))
        .unwrap_or_else(|| panic!("no why for the large call:\n{text}"));
    assert!(why.contains(refusal), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("echo") && l.ends_with("completed")),
        "{text}"
    );
    let shown = show_json(&trace, &relay.dir.join("picture"));
    let failing = shown["failing_calls"].as_array().expect("failing calls");
    assert_eq!(failing.len(), 1, "{shown}");
    let drawn_why = failing[0]["why"].as_str().unwrap_or_default();
    assert!(drawn_why.contains("invalid: 280 characters"), "{shown}");
}

/// The probe of a running nostr-rs-relay 0.8.12 and of the `nostr-rs-relay` profile served by
/// relaysim differ at most where the socket decides: a relay that sends a NOTICE for an
/// oversized message and closes while the client is still writing resets the connection, and
/// whether the client reads the NOTICE first is a race (fixtures/probes/README.md). Everything
/// else — no OK for ephemeral events, nothing stored, bursts in order, the 262,144-byte limit
/// and its NOTICE, the 33rd subscription's NOTICE — must be the same.
#[test]
fn nostr_rs_relay_answers_the_probe_as_its_profile_does() {
    let Some(relay) = RealRelay::start(Installed::NostrRsRelay, "rs-probe") else {
        return;
    };
    let out = relaysim(&[
        "probe",
        &relay.url(),
        "--profile",
        "nostr-rs-relay",
        "--burst",
        "100",
        "--wait-ms",
        "1000",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let differences: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("differences from profile nostr-rs-relay"))
        .skip(1)
        .collect();
    assert!(
        text.contains("no difference from profile nostr-rs-relay")
            || differences.iter().all(|d| {
                (d.starts_with("  600000-byte event: ") || d.starts_with("  1100000-byte event: "))
                    && d.contains("message too large (")
                    && d.contains("connection closed")
            }),
        "{text}"
    );
    // The facts the profile rests on, seen on the relay itself.
    for fact in [
        "ephemeral event (kind 25910)       no answer",
        "0 replayed, ended by eose",
        "300000-byte content                notice: message too large (300428 > 262144)",
        "#33 refused: notice: Subscription error: Maximum concurrent subscription count reached",
    ] {
        assert!(text.contains(fact), "{fact}: {text}");
    }
}

/// The TypeScript SDK straight at a running nostr-rs-relay 0.8.12 fails every call at
/// `initialize` with its own "Relay rejected publish": the relay sends no OK for ephemeral
/// events, and the SDK takes the silence for a refusal. `serve --profile nostr-rs-relay` makes
/// it fail the same way (`ts_sdk::ts_sdk_through_nostr_rs_relay_fails_at_initialize`).
#[test]
fn the_ts_sdk_fails_at_initialize_on_nostr_rs_relay_as_through_its_profile() {
    if let Err(e) = super::ts_sdk::node_packages() {
        panic!("{e}");
    }
    let Some(relay) = RealRelay::start(Installed::NostrRsRelay, "rs-sdk") else {
        return;
    };
    let outcomes = relay.dir.join("outcomes.jsonl");
    let node = Command::new("node")
        .arg(root().join("interop/ts-sdk/peers.mjs"))
        .args([
            "--relay",
            &relay.url(),
            "--timeout-ms",
            "15000",
            "--out",
            outcomes.to_str().unwrap(),
        ])
        .output()
        .expect("node runs");
    let reported = std::fs::read_to_string(&outcomes).unwrap_or_default();
    let got: Vec<(String, String)> = reported
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["call"].as_str().unwrap_or_default().to_owned(),
                v["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected = "error: initialize: Relay rejected publish";
    assert_eq!(
        got,
        [
            ("echo", expected),
            ("large", expected),
            ("stream", expected)
        ]
        .map(|(c, o)| (c.to_owned(), o.to_owned())),
        "{reported}\n{}",
        String::from_utf8_lossy(&node.stderr)
    );
}
