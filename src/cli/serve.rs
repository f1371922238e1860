//! `relaysim serve`: live relays on real sockets, one profile or every relay of a scenario,
//! optionally around a command (your SDK's peers) that runs against them.

use super::command::{check_command, report_outcomes, run_command, CommandRun, CommandSpec};
use super::Exit;
use anyhow::{bail, Context, Result};
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
            let spec = CommandSpec {
                command: &args.command,
                out: args.out.as_deref(),
                stdout_to_stderr: args.json,
            };
            run_command(&spec, &deployment.urls(), deployment.started_unix_us)
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

fn finish(args: &ServeArgs, report: &LiveReport, command: Option<CommandRun>) -> Result<Exit> {
    let mut text = report.text();
    let mut exit = Exit::Success;
    if let Some(run) = &command {
        // What the relays did is the whole run's: worded once for every failed call.
        let (calls, all_completed) =
            report_outcomes(run, &report.disturbances(), args.trace.as_deref())?;
        text.push_str(&calls);
        if !all_completed {
            exit = Exit::ExpectationFailed;
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
