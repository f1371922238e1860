//! Tests against a real relay from a registry, running on loopback: the Python `nostr-relay`
//! 1.14 (PyPI), installed outside the clone by `.ci/run` (a virtual environment from
//! `fixtures/probes/nostr-relay-py/requirements.lock.txt`) and started here with
//! `fixtures/probes/nostr-relay-py/run.sh` (its default configuration, a fresh database).
//!
//! Where the relay is not installed (a developer's machine without it), each test says so on
//! stderr and passes; CI always installs it. To install it by hand:
//! `python3 -m venv ~/.cache/relaysim-tools/nostr-relay-py-1.14 &&
//! ~/.cache/relaysim-tools/nostr-relay-py-1.14/bin/pip install -r
//! fixtures/probes/nostr-relay-py/requirements.lock.txt`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where the relay's virtual environment is: `RELAYSIM_NOSTR_RELAY_PY_VENV`, or the place
/// `.ci/run` installs it.
/// Named by `RELAYSIM_NOSTR_RELAY_PY_VENV` (as CI does), it must be there.
fn venv() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RELAYSIM_NOSTR_RELAY_PY_VENV").map(PathBuf::from) {
        assert!(
            dir.join("bin/nostr-relay").is_file(),
            "RELAYSIM_NOSTR_RELAY_PY_VENV={} has no bin/nostr-relay",
            dir.display()
        );
        return Some(dir);
    }
    let dir =
        PathBuf::from(std::env::var_os("HOME")?).join(".cache/relaysim-tools/nostr-relay-py-1.14");
    dir.join("bin/nostr-relay").is_file().then_some(dir)
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

/// A running Python relay, stopped when dropped.
struct PythonRelay {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PythonRelay {
    /// Starts it, or `None` (having said why) when it is not installed.
    fn start(name: &str) -> Option<PythonRelay> {
        let Some(venv) = venv() else {
            eprintln!(
                "skipped: the Python nostr-relay 1.14 is not installed (see tests/it/real_relays.rs)"
            );
            return None;
        };
        let dir =
            std::env::temp_dir().join(format!("relaysim-pyrelay-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let child = Command::new("bash")
            .arg(root().join("fixtures/probes/nostr-relay-py/run.sh"))
            .arg(port.to_string())
            .arg(dir.join("db"))
            .env("NOSTR_RELAY_PY_VENV", venv)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("relay.log")).unwrap())
            .spawn()
            .expect("run.sh starts");
        let relay = PythonRelay { child, port, dir };
        wait_for(port, "the Python relay", Some(&relay.dir.join("relay.log")));
        Some(relay)
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }
}

impl Drop for PythonRelay {
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
    let Some(relay) = PythonRelay::start("probe") else {
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

/// The TypeScript SDK through `record` in front of the Python relay with its default
/// configuration: the relay refuses the server's CEP-22 `start` frame for its content length
/// (`invalid: 280 characters should be enough for anybody`) and the large call times out; the
/// recording's inject replay names the refusal in the relay's words, and `show` draws it.
#[test]
fn the_ts_sdk_recorded_in_front_of_the_python_relay_names_its_refusal() {
    if super::ts_sdk::node_packages().is_err() {
        panic!("{:?}", super::ts_sdk::node_packages());
    }
    let Some(relay) = PythonRelay::start("record") else {
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
        .args([
            "--relay",
            &format!("ws://127.0.0.1:{listen}"),
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
            "--out",
            outcomes.to_str().unwrap(),
        ])
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
    let picture = relay.dir.join("picture");
    let out = relaysim(&[
        "show",
        trace.to_str().unwrap(),
        "--out",
        picture.to_str().unwrap(),
        "--json",
    ]);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["counts"]["rejected"], 1, "{shown}");
}
