//! `relaysim serve`: live relays on real sockets, one profile or every relay of a scenario,
//! optionally around a command (your SDK's peers) that runs against them.

use super::Exit;
use anyhow::{bail, Context, Result};
use relaysim::live::outcomes::{
    read_outcomes, CallOutcome, TemporaryOutcomes, OUTCOMES_ENV, RELAYS_ENV,
};
use relaysim::live::{LiveReport, ServeConfig};
use relaysim::relay::RelayProfile;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub(super) struct ServeArgs {
    /// A scenario file: every relay of it on its own port, with all of its impairments (both
    /// directions) and outages on the wall clock. Without it, one relay with --profile.
    scenario: Option<PathBuf>,
    /// Address of the first relay (the next relays take the next ports; port 0: free ports).
    #[arg(long, default_value = "127.0.0.1:7777")]
    listen: SocketAddr,
    /// Built-in relay profile of the lone relay (without a scenario).
    #[arg(long)]
    profile: Option<String>,
    /// Seed of the impairments' and outages' random draws (default: the scenario's, or 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Write every EVENT, OK, NOTICE, connection and outage to this trace (closed on stop).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Name the peer connecting from ADDR (outages aimed at a peer and the trace use it);
    /// bind each client to its own 127.x.y.z address to tell them apart. Repeatable.
    #[arg(long, value_name = "ADDR=NAME", value_parser = parse_label)]
    label: Vec<(IpAddr, String)>,
    /// Write report.json, report.txt and the command's outcomes.jsonl here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// At stop, print the report as JSON (what --out writes to report.json) instead of text.
    /// The command's standard output then goes to standard error, so standard output holds
    /// the report alone.
    #[arg(long)]
    json: bool,
    /// A command to run against the relays (after `--`); serve stops when it exits. It gets
    /// RELAYSIM_RELAYS (the relays' ws:// URLs, comma-separated) and RELAYSIM_OUTCOMES (a file
    /// for one JSON line per call: {"peer", "call", "outcome", "latency_ms"}, optionally with
    /// "why", "started_unix_ms" and "ended_unix_ms"; a failed call's why and the relays'
    /// disturbances are printed under the outcomes).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Reads `ADDR=NAME`.
pub(super) fn parse_label(text: &str) -> Result<(IpAddr, String), String> {
    let (addr, name) = text
        .split_once('=')
        .ok_or_else(|| format!("expected ADDR=NAME, got {text:?}"))?;
    let addr: IpAddr = addr
        .parse()
        .map_err(|e| format!("{addr:?} is not an IP address: {e}"))?;
    if name.is_empty() {
        return Err(format!("no name after '=' in {text:?}"));
    }
    Ok((addr, name.to_owned()))
}

/// What to serve: the relays (name and profile), the seed, and what to call it.
struct Deployment {
    relays: Vec<(String, RelayProfile)>,
    seed: u64,
    what: String,
}

fn deployment(args: &ServeArgs) -> Result<Deployment> {
    match (&args.scenario, &args.profile) {
        (Some(_), Some(_)) => bail!(
            "give a scenario or --profile, not both (a scenario's relays carry their own profiles)"
        ),
        (Some(path), None) => {
            let scenario = relaysim::Scenario::from_file(path)?;
            let seed = args.seed.unwrap_or(scenario.seed);
            let plan = scenario.plan(seed);
            Ok(Deployment {
                relays: plan.relays.clone(),
                seed,
                what: scenario.name.clone(),
            })
        }
        (None, profile) => {
            let name = profile.as_deref().unwrap_or("strfry");
            let Some(profile) = RelayProfile::built_in(name) else {
                bail!(
                    "unknown relay profile {name:?}; built-in profiles: {}",
                    RelayProfile::BUILT_IN.join(", ")
                );
            };
            Ok(Deployment {
                relays: vec![("upstream".to_owned(), profile)],
                seed: args.seed.unwrap_or(1),
                what: name.to_owned(),
            })
        }
    }
}

pub(super) fn serve(args: ServeArgs) -> Result<Exit> {
    // Before any relay is served: a command that cannot start says so, with the fix.
    if !args.command.is_empty() {
        check_command(&args.command)?;
    }
    if let Some(path) = &args.trace {
        super::create_parent(path)?;
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    }
    let Deployment { relays, seed, what } = deployment(&args)?;
    let config = ServeConfig {
        seed,
        trace: args.trace.clone(),
        labels: args.label.iter().cloned().collect::<BTreeMap<_, _>>(),
        ..ServeConfig::relays(&relays, args.listen)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (report, command) = runtime.block_on(async {
        let deployment = relaysim::live::serve(config).await?;
        eprintln!("relaysim serve: {what}, seed {seed}");
        for (name, addr) in &deployment.addrs {
            eprintln!("  relay {name:<12} ws://{addr}   (NIP-11 and /stats at http://{addr})");
        }
        let command = if args.command.is_empty() {
            eprintln!("Ctrl-C stops it and prints the counters");
            tokio::signal::ctrl_c()
                .await
                .map(|_| None)
                .map_err(anyhow::Error::from)
        } else {
            run_command(&args, &deployment.urls(), deployment.started_unix_us)
                .await
                .map(Some)
        };
        // Stopped whatever happened to the command, so the trace is closed and the counters
        // are printed.
        let report = deployment.shutdown().await;
        Ok::<_, anyhow::Error>((report, command))
    })?;
    let command = match command {
        Ok(command) => command,
        Err(e) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.text());
            }
            return Err(e);
        }
    };
    finish(&args, &report, command)
}

/// Why `command` cannot start, with the fix: a program not found on `PATH` (or at its path),
/// or a node script whose packages were never installed (a `package.json` above it and no
/// `node_modules` on the way), which node would only report as a module it cannot find.
fn check_command(command: &[String]) -> Result<()> {
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
struct CommandRun {
    success: bool,
    /// When the deployment's trace clock read 0 (Unix microseconds).
    started_unix_us: u64,
    outcomes: PathBuf,
    _scratch: Option<TemporaryOutcomes>,
}

async fn run_command(
    args: &ServeArgs,
    urls: &[String],
    started_unix_us: u64,
) -> Result<CommandRun> {
    let (outcomes, scratch) = match &args.out {
        Some(dir) => (dir.join("outcomes.jsonl"), None),
        None => {
            let scratch = TemporaryOutcomes::new()?;
            (scratch.path(), Some(scratch))
        }
    };
    let _ = std::fs::remove_file(&outcomes);
    eprintln!("running: {}", args.command.join(" "));
    let mut command = tokio::process::Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env(RELAYS_ENV, urls.join(","))
        .env(OUTCOMES_ENV, &outcomes)
        .kill_on_drop(true);
    if args.json {
        // Standard output is for the report alone.
        command.stdout(std::io::stderr());
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {:?}", args.command[0]))?;
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

fn finish(args: &ServeArgs, report: &LiveReport, command: Option<CommandRun>) -> Result<Exit> {
    let mut text = report.text();
    let mut exit = Exit::Success;
    if let Some(run) = &command {
        let outcomes = read_outcomes(&run.outcomes)?;
        text.push('\n');
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
        // What the relays did is the whole run's: worded once for every failed call.
        let disturbances = report.disturbances();
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
        if !run.success || failed > 0 {
            exit = Exit::ExpectationFailed;
        }
        if let Some(path) = &args.trace {
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
    }
    let json = serde_json::to_string_pretty(report)?;
    if args.json {
        println!("{json}");
    } else {
        print!("{text}");
    }
    if let Some(dir) = &args.out {
        super::write_file(&dir.join("report.txt"), &text)?;
        super::write_file(&dir.join("report.json"), &json)?;
        eprintln!("report written to {}", dir.display());
    }
    if let Some(path) = &args.trace {
        eprintln!("trace written to {}", path.display());
    }
    Ok(exit)
}
