//! The node processes that host programs for the des world (`sim::hosted`): each runs
//! `interop/node-host/host.mjs`, which runs a JavaScript program (the real TypeScript SDK) in
//! virtual time, and speaks the line protocol of `interop/node-host/PROTOCOL.md` on its
//! standard input and output.
//!
//! Starting node and bundling a program take about a second, so processes are kept in a pool
//! and reused from one world to the next: a world starts with a fresh realm per peer, so
//! nothing of one seed reaches the next. Real time enters only as a watchdog: a host that does
//! not answer within [`ANSWER_TIMEOUT`] (a program stuck in a loop) is killed and the world's
//! hosted peers fail, which changes nothing in a run that goes well.

use crate::sim::hosted::{HostInput, HostOutput, HostReply, HostedStart, HostedWorld};
use crate::sim::hosted::{ProgramHost, ProgramHosts};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a host may take to answer one line (bundling the program, at start, included).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the programs that ship with relaysim live: `$RELAYSIM_INTEROP`, else the `interop`
/// directory of the source tree this binary was built from.
pub fn interop_dir() -> PathBuf {
    std::env::var_os("RELAYSIM_INTEROP")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("interop"))
}

/// The program a scenario's `program = "..."` names: a shipped one by name (`ts-sdk`: the
/// pinned TypeScript SDK, `interop/ts-sdk/program.mjs`), else a path, relative to `base`.
pub fn program_path(name: &str, base: &Path) -> PathBuf {
    if is_shipped(name) {
        interop_dir().join(name).join("program.mjs")
    } else {
        base.join(name)
    }
}

/// Whether `name` names a program relaysim ships (`ts-sdk`) rather than a path.
pub fn is_shipped(name: &str) -> bool {
    name == "ts-sdk"
}

/// Why hosting cannot start, checked before a run: what is missing, and the fix.
pub fn check(program: &Path) -> Result<(), String> {
    let node = Command::new("node").arg("--version").output();
    match node {
        Ok(out) if out.status.success() => {}
        _ => {
            return Err(
                "`node` (version 20 or later) is needed to run program peers; install Node.js"
                    .into(),
            )
        }
    }
    let host = interop_dir().join("node-host");
    if !host.join("node_modules").is_dir() {
        return Err(format!(
            "the node host's packages are not installed: run `npm ci` in {}",
            host.display()
        ));
    }
    if !program.is_file() {
        return Err(format!("no program at {}", program.display()));
    }
    let mut dir = program.parent();
    while let Some(d) = dir {
        if d.join("node_modules").is_dir() {
            return Ok(());
        }
        if d.join("package.json").is_file() {
            return Err(format!(
                "the program's packages are not installed: run `npm ci` in {}",
                d.display()
            ));
        }
        dir = d.parent();
    }
    Ok(())
}

/// A pool of node hosts, shared by a run's worlds (on any thread).
#[derive(Debug, Default)]
pub struct NodeHosts {
    idle: Arc<Mutex<Vec<NodeProcess>>>,
}

impl NodeHosts {
    /// An empty pool; processes start as worlds need them.
    pub fn new() -> Self {
        Self::default()
    }
}

impl ProgramHosts for NodeHosts {
    fn host(&self, program: &str, base: &Path) -> Result<Box<dyn ProgramHost>, String> {
        let program = &program_path(program, base);
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.iter()
                .position(|p| &p.program == program)
                .map(|i| idle.swap_remove(i))
        };
        let process = match reused {
            Some(p) => p,
            None => NodeProcess::start(program)?,
        };
        Ok(Box::new(Pooled {
            process: Some(process),
            pool: Arc::clone(&self.idle),
        }))
    }
}

/// A host on loan from the pool, back in it when the world is done with it.
struct Pooled {
    process: Option<NodeProcess>,
    pool: Arc<Mutex<Vec<NodeProcess>>>,
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            // Only a host that ended its world cleanly goes back.
            if process.request(&json!({ "type": "end" })).is_ok() {
                self.pool
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(process);
            }
        }
    }
}

impl Pooled {
    fn process(&mut self) -> Result<&mut NodeProcess, String> {
        self.process
            .as_mut()
            .ok_or_else(|| "the host failed earlier".to_owned())
    }

    fn exchange(&mut self, line: &Value) -> Result<HostReply, String> {
        let answer = self.process()?.request(line);
        match answer.and_then(|v| reply(&v)) {
            Ok(reply) => Ok(reply),
            Err(e) => {
                // A host that failed once is not trusted again.
                self.process = None;
                Err(e)
            }
        }
    }
}

impl ProgramHost for Pooled {
    fn start(&mut self, world: &HostedWorld) -> Result<HostReply, String> {
        let peers: Vec<Value> = world
            .peers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut peer = json!({
                    "peer": i,
                    "role": p.role,
                    "name": p.name,
                    "secret_key": p.secret_key,
                    "relays": p.relays,
                    "options": p.options,
                });
                if let Some(key) = &p.server_pubkey {
                    peer["server_pubkey"] = key.clone().into();
                }
                if p.start == HostedStart::WhenAsked {
                    peer["start_us"] = Value::Null;
                }
                peer
            })
            .collect();
        self.exchange(&json!({
            "type": "world",
            "seed": world.seed.to_string(),
            "epoch_ms": world.epoch_ms,
            "env": { "LOG_LEVEL": "warn" },
            // What a program logs itself names the calls it hurt (`why`); the SDK's own
            // console lines stay on stderr.
            "log_outputs": ["program", "warn", "error"],
            "peers": peers,
        }))
    }

    fn step(&mut self, now: Duration, inputs: Vec<HostInput>) -> Result<HostReply, String> {
        let inputs: Vec<Value> = inputs.into_iter().map(input).collect();
        self.exchange(&json!({ "type": "step", "now_us": micros(now), "inputs": inputs }))
    }
}

/// A console line without the `stack` properties of the objects it shows (the SDK's logger
/// puts every error's stack trace in its line; the frames name the bundle's lines and drown
/// the message). Node's inspection quotes a string with `'`, or with `"` or a backtick when
/// the string holds the quote before it, and escapes the quote it chose inside.
fn without_stacks(text: &str) -> String {
    const KEY: &str = "stack: ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(KEY) {
        let after = &rest[start + KEY.len()..];
        let Some(quote) = after
            .chars()
            .next()
            .filter(|c| matches!(c, '\'' | '"' | '`'))
        else {
            // Not a quoted string (an object, say): keep it.
            out.push_str(&rest[..start + KEY.len()]);
            rest = after;
            continue;
        };
        out.push_str(&rest[..start]);
        let body = &after[1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                c if c == quote && !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(end) = end else {
            // Unterminated (cut): drop the rest of it.
            return out.trim_end_matches([' ', ',']).to_owned();
        };
        rest = &body[end + 1..];
        rest = rest.strip_prefix(", ").unwrap_or(rest);
        if out.ends_with(", ") && rest.starts_with(" }") {
            out.truncate(out.len() - 2);
        }
    }
    out.push_str(rest);
    out
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn input(i: HostInput) -> Value {
    match i {
        HostInput::Open { peer, socket } => json!({"kind": "open", "peer": peer, "socket": socket}),
        HostInput::Message { peer, socket, text } => {
            json!({"kind": "message", "peer": peer, "socket": socket, "text": text})
        }
        HostInput::Close { peer, socket } => {
            json!({"kind": "close", "peer": peer, "socket": socket, "code": 1006, "reason": ""})
        }
        HostInput::Call {
            peer,
            call,
            name,
            arguments,
            progress,
            stream,
        } => json!({"kind": "call", "peer": peer, "call": call, "name": name,
                    "arguments": arguments, "progress": progress, "stream": stream}),
        HostInput::Start { peer } => json!({"kind": "start", "peer": peer}),
    }
}

/// The typed reply of an `out` line.
fn reply(line: &Value) -> Result<HostReply, String> {
    match line.get("type").and_then(Value::as_str) {
        Some("out") => {}
        Some("fatal") => {
            let error = line.get("error").and_then(Value::as_str).unwrap_or("?");
            return Err(format!("the host stopped: {error}"));
        }
        _ => return Err(format!("the host answered {line}")),
    }
    let next_timer = line
        .get("next_timer_us")
        .and_then(Value::as_u64)
        .map(Duration::from_micros);
    let outputs = line
        .get("outputs")
        .and_then(Value::as_array)
        .map(|o| o.iter().filter_map(output).collect())
        .unwrap_or_default();
    Ok(HostReply {
        outputs,
        next_timer,
    })
}

fn output(o: &Value) -> Option<HostOutput> {
    let peer = || o.get("peer").and_then(Value::as_u64).map(|p| p as usize);
    let socket = || o.get("socket").and_then(Value::as_u64);
    let text = |key: &str| o.get(key).and_then(Value::as_str).map(str::to_owned);
    Some(match o.get("kind")?.as_str()? {
        "connect" => HostOutput::Connect {
            peer: peer()?,
            socket: socket()?,
            url: text("url")?,
        },
        "send" => HostOutput::Send {
            peer: peer()?,
            socket: socket()?,
            text: text("text")?,
        },
        "close" => HostOutput::Close {
            peer: peer()?,
            socket: socket()?,
        },
        "ready" => HostOutput::Ready {
            peer: peer()?,
            result: if o.get("ok").and_then(Value::as_bool) == Some(true) {
                Ok(())
            } else {
                Err(text("error").unwrap_or_default())
            },
        },
        "outcome" => HostOutput::Outcome {
            peer: peer()?,
            call: o.get("call")?.as_u64()?,
            result: if o.get("ok").and_then(Value::as_bool) == Some(true) {
                let chunks = o.get("chunks").and_then(Value::as_array).map(|c| {
                    c.iter()
                        .map(|v| v.as_str().unwrap_or_default().to_owned())
                        .collect()
                });
                Ok((o.get("result").cloned().unwrap_or(Value::Null), chunks))
            } else {
                Err(text("error").unwrap_or_default())
            },
        },
        // `env.log` lines as they are; the SDK's console warnings and errors with their level.
        "log" => HostOutput::Log {
            peer: peer()?,
            text: match o.get("level").and_then(Value::as_str) {
                Some(level @ ("warn" | "error")) => {
                    format!("{level}: {}", without_stacks(&text("text")?))
                }
                _ => text("text")?,
            },
        },
        "error" => HostOutput::Error {
            peer: peer(),
            error: text("error").unwrap_or_default(),
        },
        _ => return None,
    })
}

/// One node process running the host.
#[derive(Debug)]
struct NodeProcess {
    program: PathBuf,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<std::io::Result<String>>,
}

impl NodeProcess {
    fn start(program: &Path) -> Result<Self, String> {
        check(program)?;
        let host = interop_dir().join("node-host").join("host.mjs");
        let stderr = if std::env::var_os("RELAYSIM_NODE_STDERR").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        };
        let mut child = Command::new("node")
            .args([
                "--experimental-vm-modules",
                "--expose-gc",
                "--disable-warning=ExperimentalWarning",
            ])
            .arg(&host)
            .arg("--program")
            .arg(program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start node: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let mut process = NodeProcess {
            program: program.to_owned(),
            child,
            stdin,
            lines,
        };
        let hello = process.read()?;
        if hello.get("type").and_then(Value::as_str) != Some("hello")
            || hello.get("protocol").and_then(Value::as_u64) != Some(1)
        {
            return Err(format!("the node host did not start: {hello}"));
        }
        Ok(process)
    }

    fn request(&mut self, line: &Value) -> Result<Value, String> {
        let mut text = serde_json::to_string(line).map_err(|e| e.to_string())?;
        text.push('\n');
        self.stdin
            .write_all(text.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("the host is gone: {e}"))?;
        self.read()
    }

    fn read(&mut self) -> Result<Value, String> {
        match self.lines.recv_timeout(ANSWER_TIMEOUT) {
            Ok(Ok(line)) => serde_json::from_str(&line).map_err(|e| format!("{e}: {line}")),
            Ok(Err(e)) => Err(format!("cannot read from the host: {e}")),
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                Err(format!(
                    "the host did not answer within {} s (a program stuck in a loop?)",
                    ANSWER_TIMEOUT.as_secs()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => Err("the host exited".into()),
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::without_stacks;

    #[test]
    fn console_lines_lose_their_stack_traces_and_keep_the_rest() {
        let line = r"{ module: 'x' } { error: 'Relay rejected publish', stack: 'Error: it\'s\n    at f (b.js:1:2)', kind: 25910 } Failed to publish";
        assert_eq!(
            without_stacks(line),
            "{ module: 'x' } { error: 'Relay rejected publish', kind: 25910 } Failed to publish"
        );
        assert_eq!(
            without_stacks("{ error: 'e', stack: 'Error: e' } last"),
            "{ error: 'e' } last"
        );
        assert_eq!(without_stacks("no stack here"), "no stack here");
        // Node switches to double quotes for a string holding a single quote.
        assert_eq!(
            without_stacks(r#"{ error: 'e', stack: "TypeError: (reading 'x')\n    at f", n: 1 }"#),
            "{ error: 'e', n: 1 }"
        );
        assert_eq!(
            without_stacks("{ stack: { depth: 1 } }"),
            "{ stack: { depth: 1 } }"
        );
        assert_eq!(without_stacks("{ stack: 'cut"), "{");
    }
}
