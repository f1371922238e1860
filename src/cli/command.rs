//! A command (your SDK's peers) run against live relays: `serve -- COMMAND` and
//! `record -- COMMAND`. It gets the relays' URLs and a file for its calls' outcomes; when it
//! exits, the outcomes are printed with why each failed call failed and written into the
//! trace, so `show` draws them.

use anyhow::{bail, Context, Result};
use relaysim::live::outcomes::{
    read_outcomes, CallOutcome, TemporaryOutcomes, OUTCOMES_ENV, RELAYS_ENV,
};
use std::path::{Path, PathBuf};

/// Why `command` cannot start, with the fix: a program not found on `PATH` (or at its path),
/// or a node script whose packages were never installed (a `package.json` above it and no
/// `node_modules` on the way), which node would only report as a module it cannot find.
pub(super) fn check_command(command: &[String]) -> Result<()> {
    let program = &command[0];
    let found = if program.contains('/') {
        std::path::Path::new(program).is_file()
    } else {
        std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| dir.join(program).is_file())
        })
    };
    if !found {
        let hint = if program == "node" {
            "; install Node.js 20 or later"
        } else {
            ""
        };
        bail!("cannot find `{program}` on PATH{hint}");
    }
    let is_node = std::path::Path::new(program)
        .file_name()
        .is_some_and(|n| n == "node");
    let script = command[1..]
        .iter()
        .find(|a| !a.starts_with('-'))
        .filter(|a| [".js", ".mjs", ".cjs"].iter().any(|ext| a.ends_with(ext)));
    if let (true, Some(script)) = (is_node, script) {
        let script = std::path::Path::new(script);
        if !script.is_file() {
            bail!("no script at {}", script.display());
        }
        let mut dir = script.parent();
        while let Some(d) = dir {
            if d.join("node_modules").is_dir() {
                break;
            }
            if d.join("package.json").is_file() {
                bail!(
                    "the packages of {} are not installed: run `npm ci` in {}",
                    script.display(),
                    d.display()
                );
            }
            dir = d.parent();
        }
    }
    Ok(())
}

/// What the command did: its exit status and the outcomes file it was given (in a temporary
/// directory, removed with this value, when there is no `--out`).
pub(super) struct CommandRun {
    success: bool,
    /// When the trace's clock read 0 (Unix microseconds).
    started_unix_us: u64,
    outcomes: PathBuf,
    _scratch: Option<TemporaryOutcomes>,
}

/// How to run the command.
pub(super) struct CommandSpec<'a> {
    pub(super) command: &'a [String],
    /// Where its `outcomes.jsonl` goes (a temporary file without it).
    pub(super) out: Option<&'a Path>,
    /// Its standard output to standard error (when standard output is for a JSON report).
    pub(super) stdout_to_stderr: bool,
}

/// Runs the command against the relays at `urls` until it exits (Ctrl-C stops it).
pub(super) async fn run_command(
    spec: &CommandSpec<'_>,
    urls: &[String],
    started_unix_us: u64,
) -> Result<CommandRun> {
    let (outcomes, scratch) = match spec.out {
        Some(dir) => (dir.join("outcomes.jsonl"), None),
        None => {
            let scratch = TemporaryOutcomes::new()?;
            (scratch.path(), Some(scratch))
        }
    };
    let _ = std::fs::remove_file(&outcomes);
    eprintln!("running: {}", spec.command.join(" "));
    let mut command = tokio::process::Command::new(&spec.command[0]);
    command
        .args(&spec.command[1..])
        .env(RELAYS_ENV, urls.join(","))
        .env(OUTCOMES_ENV, &outcomes)
        .kill_on_drop(true);
    if spec.stdout_to_stderr {
        command.stdout(std::io::stderr());
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {:?}", spec.command[0]))?;
    let status = tokio::select! {
        status = child.wait() => status?,
        _ = tokio::signal::ctrl_c() => {
            let _ = child.kill().await;
            bail!("interrupted; the command was stopped");
        }
    };
    if !status.success() {
        eprintln!("the command exited with {status}");
    }
    Ok(CommandRun {
        success: status.success(),
        started_unix_us,
        outcomes,
        _scratch: scratch,
    })
}

/// Why a call the command reported did not complete: what its program said (its SDK's
/// words), then what the relays did while the command ran. The relays cannot tell which of
/// their events belonged to which of the program's calls, so that part is the whole run's.
fn failure_why(o: &CallOutcome, relays: Option<&str>) -> Option<String> {
    if o.completed() {
        return None;
    }
    let parts: Vec<&str> = o.why.as_deref().into_iter().chain(relays).collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The command's calls as text (a table, then why each failed call failed, the relays'
/// `disturbances` worded once for all of them), written into the `trace` when there is one.
/// Returns the text and whether the command exited well with every call completed.
pub(super) fn report_outcomes(
    run: &CommandRun,
    disturbances: &[String],
    trace: Option<&Path>,
) -> Result<(String, bool)> {
    let outcomes = read_outcomes(&run.outcomes)?;
    let mut text = String::from("\n");
    if outcomes.is_empty() {
        text.push_str("the command reported no call outcomes\n");
    } else {
        text.push_str(&format!(
            "{:<16} {:<12} {:>10}  outcome\n",
            "peer", "call", "latency"
        ));
        for o in &outcomes {
            let latency = o
                .latency_ms
                .map_or("-".to_owned(), |ms| format!("{ms:.1}ms"));
            text.push_str(&format!(
                "{:<16} {:<12} {:>10}  {}\n",
                o.peer, o.call, latency, o.outcome
            ));
        }
    }
    let relays = (!disturbances.is_empty())
        .then(|| format!("while the command ran, {}", disturbances.join("; ")));
    let whys: Vec<Option<String>> = outcomes
        .iter()
        .map(|o| failure_why(o, relays.as_deref()))
        .collect();
    if whys.iter().any(Option::is_some) {
        text.push_str("\nwhy calls failed:\n");
        for (o, why) in outcomes.iter().zip(&whys) {
            if let Some(why) = why {
                text.push_str(&format!("  {} {}: {why}\n", o.peer, o.call));
            }
        }
    }
    let failed = outcomes.iter().filter(|o| !o.completed()).count();
    if let Some(path) = trace {
        // The trace closed with the relays; the command's outcomes come after.
        let lines = outcomes
            .iter()
            .zip(whys)
            .enumerate()
            .map(|(i, (o, why))| {
                let (started_us, ended_us) = o.on_trace_clock(run.started_unix_us);
                relaysim::trace::OutcomeLine {
                    workload: o.call.clone(),
                    client: o.peer.clone(),
                    call: i as u64 + 1,
                    tool: o.call.clone(),
                    outcome: relaysim::trace::program_outcome(&o.outcome),
                    why,
                    started_us,
                    ended_us,
                }
            })
            .collect();
        relaysim::trace::set_outcomes(path, lines).with_context(|| {
            format!(
                "cannot write the outcomes into the trace {}",
                path.display()
            )
        })?;
    }
    Ok((text, run.success && failed == 0))
}
