//! The real TypeScript SDK's row in `relaysim compare --ts-sdk`: the scenario's relays served
//! live (`live::serve`, impairments and outages on the wall clock), the pinned SDK's server and
//! client (`interop/ts-sdk/peers.mjs`) run through them, and the outcomes it reports tallied
//! per workload beside relaysim's pairings.
//!
//! `peers.mjs` has three calls, so a workload maps onto one when it can: `request` → `echo`,
//! `download` → `large` (its size), `stream` → `stream` (its chunk count). Other workloads are
//! left out of the row, saying why. The calls run one after another in the scenario's order,
//! not at their `at` times, and once: a wall-clock run is not a seed. Payloads are the
//! program's own (a `large` text of the download's size made of blocks that spell their
//! offset), not the workload's content class.

use super::WorkloadResult;
use crate::live::outcomes::{
    read_outcomes, CallOutcome, OutcomesError, TemporaryOutcomes, OUTCOMES_ENV,
};
use crate::live::ServeConfig;
use crate::peer::tools::ToolCall;
use crate::relay::RelayProfile;
use crate::scenario::Scenario;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The label of the TypeScript SDK's row.
pub const LABEL: &str = "ts-sdk (node, live)";
/// The loopback addresses the program's server and client connect from, so per-address
/// limits count them apart and outages aimed at a peer find them.
const SERVER_ADDRESS: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const CLIENT_ADDRESS: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
/// Requests up to this size map onto the program's `echo` of a short text; a larger one would
/// be an upload in relaysim (CEP-22 from the client) and compare unlike with like.
const MAX_ECHO_BYTES: usize = 1024;

/// What the program will be asked to do for a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct TsSdkPlan {
    /// The relays to serve.
    pub relays: Vec<(String, RelayProfile)>,
    /// The seed of their impairments.
    pub seed: u64,
    /// The scenario's first server and first client: the names the program's peers take.
    pub server: String,
    /// See `server`.
    pub client: String,
    /// The calls, in order, with the workload each stands for.
    pub calls: Vec<(&'static str, usize)>,
    /// `--large-bytes`, when a download is among the calls.
    pub large_bytes: Option<usize>,
    /// `--stream-chunks`, when a stream is among the calls.
    pub stream_chunks: Option<u64>,
    /// Workloads left out, and why.
    pub skipped: BTreeMap<usize, String>,
}

/// Maps `scenario`'s first client's calls (run with `seed`) onto the program's.
pub fn plan(scenario: &Scenario, seed: u64) -> TsSdkPlan {
    let plan = scenario.plan(seed);
    let mut out = TsSdkPlan {
        relays: plan.relays.clone(),
        seed,
        server: plan
            .servers
            .first()
            .map_or("server".into(), |s| s.0.clone()),
        client: plan
            .clients
            .first()
            .map_or("client".into(), |c| c.0.clone()),
        calls: Vec::new(),
        large_bytes: None,
        stream_chunks: None,
        skipped: BTreeMap::new(),
    };
    // Workloads only other clients run.
    for (_, client, call) in &plan.calls {
        if *client != 0
            && !plan
                .calls
                .iter()
                .any(|(_, c, x)| *c == 0 && x.workload == call.workload)
        {
            out.skipped.insert(
                call.workload,
                format!(
                    "peers.mjs is one client, and the first ({}) does not run it",
                    out.client
                ),
            );
        }
    }
    let mut calls: Vec<_> = plan.calls.iter().filter(|(_, c, _)| *c == 0).collect();
    calls.sort_by_key(|(at, _, _)| *at);
    for (_, _, call) in calls {
        let w = call.workload;
        if out.skipped.contains_key(&w) {
            continue;
        }
        let mapped = match &call.tool {
            ToolCall::Echo { text } if text.len() > MAX_ECHO_BYTES => Err(format!(
                "peers.mjs echoes a short text, and this request is {} B",
                text.len()
            )),
            ToolCall::Echo { .. } => Ok("echo"),
            ToolCall::LargeResult { bytes: 0, .. } => {
                Err("peers.mjs cannot return an empty large result".to_owned())
            }
            ToolCall::Stream { chunks: 0, .. } => {
                Err("peers.mjs cannot stream no chunks".to_owned())
            }
            ToolCall::LargeResult { bytes, .. } => the_only(&mut out.large_bytes, *bytes)
                .map(|()| "large")
                .map_err(|b| {
                    format!("peers.mjs has one --large-bytes ({b}), this download is {bytes} B")
                }),
            ToolCall::Stream { chunks, .. } => the_only(&mut out.stream_chunks, *chunks)
                .map(|()| "stream")
                .map_err(|c| {
                    format!("peers.mjs has one --stream-chunks ({c}), this stream has {chunks}")
                }),
            other => Err(format!("peers.mjs has no call like {}", other.name())),
        };
        match mapped {
            Ok(name) => out.calls.push((name, w)),
            Err(why) => {
                out.calls.retain(|(_, x)| *x != w);
                out.skipped.insert(w, why);
            }
        }
    }
    out
}

impl TsSdkPlan {
    /// The program's arguments besides the relays and the outcome file.
    pub fn args(&self) -> Vec<String> {
        let names: Vec<&str> = self.calls.iter().map(|(c, _)| *c).collect();
        let mut args = vec!["--calls".to_owned(), names.join(",")];
        if let Some(b) = self.large_bytes {
            args.extend(["--large-bytes".to_owned(), b.to_string()]);
        }
        if let Some(c) = self.stream_chunks {
            args.extend(["--stream-chunks".to_owned(), c.to_string()]);
        }
        args.extend([
            "--server-local-address".to_owned(),
            SERVER_ADDRESS.to_string(),
            "--client-local-address".to_owned(),
            CLIENT_ADDRESS.to_string(),
        ]);
        args
    }

    /// The program's outcomes tallied per workload (`workloads` of them): `None` for a
    /// workload it did not run. The n-th reported call of each kind is the n-th planned one.
    pub fn results(
        &self,
        outcomes: &[CallOutcome],
        workloads: usize,
    ) -> Vec<Option<WorkloadResult>> {
        let mut results: Vec<Option<WorkloadResult>> = (0..workloads)
            .map(|w| {
                (!self.skipped.contains_key(&w) && self.calls.iter().any(|(_, x)| *x == w)).then(
                    || WorkloadResult {
                        calls: 0,
                        completed: 0,
                        causes: BTreeMap::new(),
                        latencies: Vec::new(),
                    },
                )
            })
            .collect();
        // Reported calls by kind, in order.
        let mut reported: BTreeMap<&str, std::collections::VecDeque<&CallOutcome>> =
            BTreeMap::new();
        for o in outcomes {
            reported.entry(o.call.as_str()).or_default().push_back(o);
        }
        for (name, w) in &self.calls {
            let Some(Some(r)) = results.get_mut(*w) else {
                continue;
            };
            r.calls += 1;
            match reported.get_mut(name).and_then(|q| q.pop_front()) {
                Some(o) if o.completed() => {
                    r.completed += 1;
                    if let Some(ms) = o.latency_ms {
                        r.latencies
                            .push(Duration::from_micros((ms.max(0.0) * 1000.0) as u64));
                    }
                }
                Some(o) => *r.causes.entry(o.outcome.clone()).or_default() += 1,
                None => *r.causes.entry("not reported".into()).or_default() += 1,
            }
        }
        for r in results.iter_mut().flatten() {
            r.latencies.sort();
        }
        results
    }
}

/// Why the TypeScript SDK's row could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TsSdkError {
    /// The program is not there.
    #[error("cannot find {0}: run from the repository's root or give --ts-sdk PATH to peers.mjs")]
    NoProgram(PathBuf),
    /// Its node packages are not installed.
    #[error("the TypeScript SDK is not installed beside {0}: run `npm ci` in that directory (node 20 and npm are needed)")]
    NotInstalled(PathBuf),
    /// None of the scenario's workloads maps onto its calls.
    #[error(
        "none of the scenario's workloads maps onto a call of peers.mjs (echo, large, stream)"
    )]
    NothingToRun,
    /// Serving or running failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// `node` could not be started.
    #[error("cannot start node: {0} (node 20 is needed)")]
    NoNode(std::io::Error),
    /// The program stopped on bad setup (exit 2) or reported nothing.
    #[error("peers.mjs reported no outcome ({status}); its last words:\n{stderr}")]
    NoOutcome {
        /// How it exited.
        status: std::process::ExitStatus,
        /// The end of its standard error.
        stderr: String,
    },
    /// Its outcome file is unreadable.
    #[error(transparent)]
    Outcomes(#[from] OutcomesError),
}

/// Whether `program` is there with its node packages installed (checked before anything
/// long is run, so a missing install fails fast).
pub fn check(program: &Path) -> Result<(), TsSdkError> {
    if !program.is_file() {
        return Err(TsSdkError::NoProgram(program.to_owned()));
    }
    let dir = program.parent().unwrap_or(Path::new("."));
    if !dir
        .join("node_modules/@contextvm/sdk/package.json")
        .is_file()
    {
        return Err(TsSdkError::NotInstalled(dir.to_owned()));
    }
    Ok(())
}

/// Serves `plan`'s relays, runs `program` (`peers.mjs`) through them with each call given
/// `timeout`, and returns what it reported. Its standard error is kept, and shown only when
/// it reported nothing.
pub async fn run(
    plan: &TsSdkPlan,
    program: &Path,
    timeout: Duration,
) -> Result<Vec<CallOutcome>, TsSdkError> {
    check(program)?;
    if plan.calls.is_empty() {
        return Err(TsSdkError::NothingToRun);
    }
    let config = ServeConfig {
        seed: plan.seed,
        labels: BTreeMap::from([
            (IpAddr::V4(SERVER_ADDRESS), plan.server.clone()),
            (IpAddr::V4(CLIENT_ADDRESS), plan.client.clone()),
        ]),
        ..ServeConfig::relays(&plan.relays, SocketAddr::from(([127, 0, 0, 1], 0)))
    };
    let scratch = TemporaryOutcomes::new()?;
    let outcomes = scratch.path();
    let deployment = crate::live::serve(config).await?;
    let mut command = tokio::process::Command::new("node");
    command.arg(program);
    for url in deployment.urls() {
        command.args(["--relay", &url]);
    }
    command
        .args(plan.args())
        .args(["--timeout-ms", &timeout.as_millis().max(1).to_string()])
        .env(OUTCOMES_ENV, &outcomes)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = match command.spawn() {
        Ok(child) => child.wait_with_output().await,
        Err(e) => {
            deployment.shutdown().await;
            return Err(TsSdkError::NoNode(e));
        }
    };
    deployment.shutdown().await;
    let output = output?;
    let read = read_outcomes(&outcomes)?;
    if read.is_empty() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        return Err(TsSdkError::NoOutcome {
            status: output.status,
            stderr: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        });
    }
    Ok(read)
}

/// Sets `slot` to `value` unless it holds another value already (peers.mjs takes one of each
/// size per run), which is returned.
fn the_only<T: Copy + PartialEq>(slot: &mut Option<T>, value: T) -> Result<(), T> {
    match *slot {
        Some(held) if held != value => Err(held),
        _ => {
            *slot = Some(value);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"
name = "t"
[[relays]]
name = "r"
profile = "strfry"
[[servers]]
name = "srv"
relays = ["r"]
[[clients]]
name = "cli"
relays = ["r"]
[[workloads]]
kind = "request"
count = 2
[[workloads]]
kind = "download"
bytes = "100KB"
at = "1s"
[[workloads]]
kind = "upload"
bytes = "10KB"
at = "2s"
[[workloads]]
kind = "stream"
chunks = 7
at = "3s"
"#;

    fn outcome(call: &str, outcome: &str, ms: f64) -> CallOutcome {
        CallOutcome {
            peer: "ts-sdk client".into(),
            call: call.into(),
            outcome: outcome.into(),
            latency_ms: Some(ms),
            why: None,
            started_unix_ms: None,
            ended_unix_ms: None,
        }
    }

    #[test]
    fn workloads_map_onto_the_programs_calls_and_the_rest_say_why_not() {
        let scenario = Scenario::from_toml_str(SCENARIO, "t.toml").unwrap();
        let plan = plan(&scenario, 1);
        assert_eq!(
            plan.calls,
            [("echo", 0), ("echo", 0), ("large", 1), ("stream", 3)]
        );
        assert_eq!(
            (plan.large_bytes, plan.stream_chunks),
            (Some(100_000), Some(7))
        );
        assert_eq!((plan.server.as_str(), plan.client.as_str()), ("srv", "cli"));
        assert!(
            plan.skipped[&2].contains("no call like upload"),
            "{:?}",
            plan.skipped
        );
        let args = plan.args().join(" ");
        assert!(
            args.starts_with(
                "--calls echo,echo,large,stream --large-bytes 100000 --stream-chunks 7"
            ),
            "{args}"
        );
    }

    #[test]
    fn reported_outcomes_are_tallied_per_workload_in_order() {
        let scenario = Scenario::from_toml_str(SCENARIO, "t.toml").unwrap();
        let plan = plan(&scenario, 1);
        let results = plan.results(
            &[
                outcome("echo", "completed", 2.0),
                outcome("echo", "timeout", 30000.0),
                outcome("large", "completed", 1500.5),
            ],
            4,
        );
        let echo = results[0].as_ref().unwrap();
        assert_eq!((echo.calls, echo.completed), (2, 1));
        assert_eq!(echo.causes, BTreeMap::from([("timeout".to_owned(), 1)]));
        assert_eq!(echo.latencies, [Duration::from_millis(2)]);
        assert_eq!(
            results[1].as_ref().unwrap().latencies,
            [Duration::from_micros(1_500_500)]
        );
        assert!(results[2].is_none(), "the upload was not run");
        let stream = results[3].as_ref().unwrap();
        assert_eq!(
            stream.causes,
            BTreeMap::from([("not reported".to_owned(), 1)])
        );
    }
}
