//! The `relaysim` command line: argument parsing and printing only; the work is in the library.

use crate::peer::content::ContentClass;
use crate::protocol::oversized::ReceiverConfig;
use crate::replay;
use crate::scenario::Scenario;
use crate::sim::link::Impairments;
use crate::sim::transfer::TransferRun;
use crate::stats::output;
use crate::sweep::Sweep;
use crate::trace::{first_difference, EventsMode, Trace};
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// Deterministic simulator of Nostr relays carrying ContextVM (MCP over Nostr) traffic.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario: relays, peers and workloads in virtual time; print a summary, write CSV
    /// files, check the scenario's expectations.
    ///
    /// Without a file, runs the built-in default scenario (the one in scenarios/default.toml).
    /// Exit code: 0 when every expectation holds, 1 when one fails, 2 for bad input.
    #[command(after_help = "Examples:\n  \
        relaysim run\n  \
        relaysim run scenarios/strfry-1mib-escape.toml --runs 20\n  \
        relaysim run scenarios/damus-rate-cap.toml --seed 7 --json\n  \
        relaysim run my.toml --out /tmp/results")]
    Run(RunArgs),
    /// Run a scenario under every pairing of endpoint implementations (server engines ×
    /// client engines: relaysim's, and the published contextvm-sdk crate's when built with
    /// `--features contextvm-sdk`), with the same seeds; print the outcomes side by side and
    /// the workloads where they differ; write compare.csv.
    ///
    /// Exit code: 0, or 2 for bad input. Differences are results, not errors.
    #[command(after_help = "Examples:\n  \
        relaysim compare scenarios/stream-reorder-duplicate.toml\n  \
        relaysim compare scenarios/strfry-1mib-escape.toml --runs 10 --out /tmp/cmp\n  \
        relaysim compare scenarios/*.toml")]
    Compare(CompareArgs),
    /// Replay a trace: its disturbances against the endpoints again (schedule), or its
    /// deliveries into fresh receivers (inject).
    ///
    /// A live trace (from `record`, `serve --trace` or `run --engine turmoil --trace`) replays
    /// in schedule mode too: the scenario's peers run in the des world and every publication
    /// the recording has is delivered as the recorded relay delivered it (or lost). Turmoil
    /// traces carry their scenario; for a `record` trace of relaysim's peers, give it.
    ///
    /// Exit code with --check: 0 when the outcome matches the recorded one, 1 when it differs
    /// (the first divergence is printed), 2 for a bad trace.
    #[command(after_help = "Examples:\n  \
        relaysim replay traces/damus-rate-cap.jsonl --check\n  \
        relaysim replay traces/damus-rate-cap.jsonl --mode inject\n  \
        relaysim run scenarios/default.toml --engine turmoil --trace run.jsonl\n  \
        relaysim replay run.jsonl --check            # the turmoil recording, rerun in des\n  \
        relaysim replay recorded.jsonl --scenario peers.toml --seed 7")]
    Replay(ReplayArgs),
    /// Shrink a failing trace to the few disturbances that still cause its failure.
    #[command(after_help = "Examples:\n  \
        relaysim shrink traces/khatru-drop-mid-stream.jsonl --out /tmp/min.jsonl\n  \
        relaysim shrink my-trace.jsonl --cause download-gap-at-end --out min.jsonl")]
    Shrink(ShrinkArgs),
    /// Run a sweep: a scenario over parameter axes, several seeds per cell, cells in parallel;
    /// write sweep.csv, plots (SVG and PNG) and a recommendation.
    #[command(after_help = "Examples:\n  \
        relaysim sweep sweeps/chunk-budget.toml\n  \
        relaysim sweep sweeps/keepalive.toml --jobs 8 --out /tmp/keepalive\n  \
        relaysim sweep sweeps/chunk-budget.toml --shard 0/4 --out shard-0   # one of 4 batch jobs\n  \
        relaysim merge sweeps/chunk-budget.toml shard-*/sweep.csv --out results/chunk-budget")]
    Sweep(SweepArgs),
    /// Merge the sweep.csv files of a sweep's shards into one result with plots and a
    /// recommendation.
    Merge(MergeArgs),
    /// Run a live relay on a real socket, with a profile's behaviour and impairments, for
    /// clients in any language.
    #[command(after_help = "Examples:\n  \
        relaysim serve                                   # strfry on ws://127.0.0.1:7777\n  \
        relaysim serve --profile damus --listen 127.0.0.1:9000\n  \
        curl -H 'Accept: application/nostr+json' http://127.0.0.1:7777   # NIP-11")]
    Serve(ServeArgs),
    /// Record what crosses a transparent proxy in front of a real relay, as a trace that
    /// `replay --mode inject` feeds to relaysim's receivers.
    #[command(after_help = "Example:\n  \
        relaysim record --upstream ws://127.0.0.1:7000 --listen 127.0.0.1:7001 --out real.jsonl\n  \
        # point the clients at ws://127.0.0.1:7001, run them, press Ctrl-C, then:\n  \
        relaysim replay real.jsonl --mode inject")]
    Record(RecordArgs),
    /// Run a scenario twice and compare the traces byte for byte.
    #[command(
        name = "check-determinism",
        after_help = "Example:\n  relaysim check-determinism scenarios/default.toml --seed 3"
    )]
    CheckDeterminism(DeterminismArgs),
    /// Send one CEP-22 oversized transfer through a seeded, impaired link in virtual time.
    ///
    /// Every frame is published as a real signed kind-25910 event; the link delays, reorders,
    /// duplicates and loses single events, as the datagram stress mode does (no real WebSocket
    /// does that: for relay physics, write a scenario and use `relaysim run`); the report tells
    /// whether the receiver rebuilt the exact message. The same arguments always print the same
    /// report.
    #[command(after_help = "Examples:\n  \
        relaysim transfer --size 1MiB --content escape-heavy\n  \
        relaysim transfer --size 10MiB --budget 60000 --jitter-ms 400 --duplicate 0.1 --seed 7\n  \
        relaysim transfer --size 2MiB --loss 0.01 --bootstrap")]
    Transfer(TransferArgs),
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The scenario file (TOML). Default: the built-in default scenario.
    scenario: Option<std::path::PathBuf>,
    /// First seed (overrides the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Number of runs, with seeds seed, seed+1, ... (overrides the scenario's).
    #[arg(long)]
    runs: Option<u32>,
    /// Where to write summary.csv, latency.csv and failures.csv (default results/<scenario>/).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Print the report as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Record a trace of the run to this file (JSON Lines; one run only).
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Store events whole (needed to replay with --mode inject) or by id.
    #[arg(long, value_enum, default_value = "full")]
    trace_events: EventsMode,
    /// `des`: the discrete-event simulator. `turmoil`: relays as WebSocket servers and peers as
    /// async tasks on turmoil's simulated TCP (slower; reports calls and latencies only, no
    /// relay counters; peer→relay impairments and outages are not applied; --trace writes each
    /// relay's live trace, which `replay` takes in both modes).
    #[arg(long, value_enum, default_value = "des")]
    engine: Engine,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Engine {
    Des,
    Turmoil,
}

#[derive(clap::Args, Debug)]
struct CompareArgs {
    /// Scenario files (TOML).
    #[arg(required = true)]
    scenarios: Vec<std::path::PathBuf>,
    /// First seed (overrides each scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Runs per pairing (overrides each scenario's).
    #[arg(long)]
    runs: Option<u32>,
    /// Where to write compare.csv (default results/compare/<scenario>/).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug)]
struct ReplayArgs {
    /// The trace file.
    trace: std::path::PathBuf,
    /// `schedule`: rerun the endpoints under the recorded disturbances (for a live trace: the
    /// recorded relay's deliveries); `inject`: feed the recorded deliveries to fresh receivers.
    #[arg(long, value_enum, default_value = "schedule")]
    mode: ReplayMode,
    /// Exit 1 if the outcome differs from the recorded one.
    #[arg(long)]
    check: bool,
    /// Write the replay's own trace here (schedule mode).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Schedule mode, live traces: the scenario the recorded peers ran (default: the one in
    /// the trace's header).
    #[arg(long)]
    scenario: Option<std::path::PathBuf>,
    /// With --scenario: the seed the recorded peers' keys derive from (default: the
    /// scenario's).
    #[arg(long, requires = "scenario")]
    seed: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ReplayMode {
    Schedule,
    Inject,
}

#[derive(clap::Args, Debug)]
struct ShrinkArgs {
    /// The failing trace.
    trace: std::path::PathBuf,
    /// Where to write the shrunk trace.
    #[arg(long)]
    out: std::path::PathBuf,
    /// The failure cause to keep (default: the first one recorded).
    #[arg(long)]
    cause: Option<String>,
    /// At most this many candidate runs.
    #[arg(long, default_value_t = 2000)]
    max_runs: usize,
}

#[derive(clap::Args, Debug)]
struct SweepArgs {
    /// The sweep file (TOML).
    sweep: std::path::PathBuf,
    /// Cells run at once (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory (default results/<sweep>/).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Run only shard I of N (cells i with i % N == I), e.g. `--shard 2/8`.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
}

#[derive(clap::Args, Debug)]
struct MergeArgs {
    /// The sweep file the shards ran.
    sweep: std::path::PathBuf,
    /// The shards' sweep.csv files.
    #[arg(required = true)]
    shards: Vec<std::path::PathBuf>,
    /// Output directory (default results/<sweep>/).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: write the shard as I/N, e.g. 0/4"))?;
    let i: usize = i
        .parse()
        .map_err(|_| format!("{s:?}: I must be a number"))?;
    let n: usize = n
        .parse()
        .map_err(|_| format!("{s:?}: N must be a number"))?;
    if n == 0 || i >= n {
        return Err(format!("{s:?}: need 0 <= I < N"));
    }
    Ok((i, n))
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:7777")]
    listen: std::net::SocketAddr,
    /// Built-in relay profile.
    #[arg(long, default_value = "strfry")]
    profile: String,
    /// Seed of the impairments' random draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every EVENT, OK and NOTICE to this trace (closed on Ctrl-C).
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug)]
struct RecordArgs {
    /// The relay to put the proxy in front of (`ws://host:port`).
    #[arg(long)]
    upstream: String,
    /// Where clients connect (loopback by default).
    #[arg(long, default_value = "127.0.0.1:7001")]
    listen: std::net::SocketAddr,
    /// The trace file to write.
    #[arg(long)]
    out: std::path::PathBuf,
}

#[derive(clap::Args, Debug)]
struct DeterminismArgs {
    /// The scenario file; without one, the built-in default.
    scenario: Option<std::path::PathBuf>,
    /// The seed (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(clap::Args, Debug)]
struct TransferArgs {
    /// Size of the tool result text: bytes, or with a KiB/MiB/KB/MB suffix.
    #[arg(long, default_value = "1MiB", value_parser = crate::scenario::spec::parse_size)]
    size: usize,
    /// What the text is made of: ascii, escape-heavy, utf8 or random.
    #[arg(long, default_value = "escape-heavy")]
    content: ContentClass,
    /// Largest published event per frame, in bytes (the SDKs use 48000).
    #[arg(long, default_value_t = 48_000)]
    budget: usize,
    /// Wait for the receiver's accept before chunks (stateless bootstrap).
    #[arg(long)]
    bootstrap: bool,
    /// Run seed: keys, payload and every impairment derive from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Milliseconds between frames leaving the sender.
    #[arg(long, default_value_t = 5)]
    interval_ms: u64,
    /// Base relay delay in milliseconds.
    #[arg(long, default_value_t = 40)]
    delay_ms: u64,
    /// Extra uniform delay of up to this many milliseconds (reorders frames sent closer together).
    #[arg(long, default_value_t = 100)]
    jitter_ms: u64,
    /// Probability that an event is delivered twice.
    #[arg(long, default_value_t = 0.05)]
    duplicate: f64,
    /// Probability that an event is lost.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
}

fn probability(name: &str, p: f64) -> Result<f64> {
    if !(0.0..=1.0).contains(&p) {
        bail!("--{name} must be a probability between 0 and 1, got {p}");
    }
    Ok(p)
}

/// The built-in default scenario (also shipped as `scenarios/default.toml`).
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.toml");

/// What the command asks the process to exit with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything held.
    Success,
    /// A scenario expectation failed.
    ExpectationFailed,
}

/// Parses the command line and runs it.
pub fn run() -> Result<Exit> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run_scenario(args),
        Command::Compare(args) => compare(args),
        Command::Replay(args) => replay(args),
        Command::Shrink(args) => shrink(args),
        Command::CheckDeterminism(args) => check_determinism(args),
        Command::Sweep(args) => sweep(args),
        Command::Serve(args) => serve(args),
        Command::Record(args) => record(args),
        Command::Merge(args) => merge(args),
        Command::Transfer(args) => transfer(args).map(|()| Exit::Success),
    }
}

fn compare(args: CompareArgs) -> Result<Exit> {
    let pairings = crate::compare::pairings().len();
    if pairings == 1 {
        eprintln!(
            "note: this relaysim was built without the contextvm-sdk feature, so relaysim/relaysim \
             is the only pairing; build with `--features contextvm-sdk` to compare"
        );
    }
    for path in &args.scenarios {
        let scenario = Scenario::from_file(path)?;
        let seed = args.seed.unwrap_or(scenario.seed);
        let runs = args.runs.unwrap_or(scenario.runs).max(1);
        let bar = ProgressBar::with_draw_target(
            Some((runs as usize * pairings) as u64),
            ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} runs, eta {eta}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar.set_message(scenario.name.clone());
        let comparison = crate::compare::compare(&scenario, seed, runs, || bar.inc(1));
        bar.finish_and_clear();
        print!("{}", comparison.text());
        let dir = match (&args.out, args.scenarios.len()) {
            (Some(out), 1) => out.clone(),
            (Some(out), _) => out.join(&scenario.name),
            (None, _) => std::path::Path::new("results/compare").join(&scenario.name),
        };
        comparison
            .write_csv(&dir)
            .with_context(|| format!("cannot write {}", dir.display()))?;
        println!("compare.csv written to {}", dir.display());
        println!();
    }
    Ok(Exit::Success)
}

fn run_scenario(args: RunArgs) -> Result<Exit> {
    let scenario = load_scenario(&args.scenario)?;
    let seed = args.seed.unwrap_or(scenario.seed);
    let runs = args.runs.unwrap_or(scenario.runs).max(1);
    if args.engine == Engine::Turmoil && args.trace_events == EventsMode::Ids {
        bail!("the turmoil engine's traces store events whole; drop --trace-events ids");
    }
    if args.trace.is_some() && runs > 1 {
        bail!("--trace records one run; add --runs 1 (the scenario asks for {runs})");
    }
    if let (Some(path), Engine::Des) = (&args.trace, args.engine) {
        let (_, text) =
            scenario.run_traced(seed, &Default::default(), &[], args.trace_events, None);
        std::fs::write(path, text)
            .with_context(|| format!("cannot write the trace to {}", path.display()))?;
        eprintln!("trace written to {}", path.display());
    }
    let bar = ProgressBar::with_draw_target(Some(runs as u64), ProgressDrawTarget::stderr());
    if runs > 1 {
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} runs, eta {eta}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar.set_message(scenario.name.clone());
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let report = match args.engine {
        Engine::Des => scenario.run_seeds(seed, runs, |done| bar.set_position(done as u64)),
        Engine::Turmoil => {
            let mut report = crate::stats::Report {
                scenario: scenario.name.clone(),
                runs: Vec::new(),
            };
            for i in 0..runs {
                let run = crate::turmoil_driver::run_scenario(
                    &scenario,
                    seed.wrapping_add(i as u64),
                    args.trace.as_deref(),
                )
                .with_context(|| format!("run {} of {}", i + 1, scenario.name))?;
                report.runs.push(run);
                bar.set_position(i as u64 + 1);
            }
            if let Some(trace) = &args.trace {
                let relays = scenario.plan(seed).relays;
                for (name, _) in &relays {
                    let path = crate::turmoil_driver::relay_trace_path(trace, name, relays.len());
                    eprintln!("trace of relay {name} written to {}", path.display());
                }
            }
            report
        }
    };
    bar.finish_and_clear();
    let names = scenario.workload_names();
    let failed = scenario.check_observed(&report, args.engine == Engine::Des);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| std::path::Path::new("results").join(&scenario.name));
    output::write_csv(&report, &names, &out)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&output::to_json(&report, &names, &failed))?
        );
    } else {
        if !scenario.description.is_empty() {
            println!("{}\n", scenario.description.trim());
        }
        print!("{}", output::summary_text(&report, &names));
        println!("results written to {}", out.display());
        if failed.is_empty() {
            println!("expectations: all hold");
        } else {
            println!("expectations FAILED:");
            for f in &failed {
                println!("  - {f}");
            }
        }
    }
    Ok(if failed.is_empty() {
        Exit::Success
    } else {
        Exit::ExpectationFailed
    })
}

fn load_scenario(path: &Option<std::path::PathBuf>) -> Result<Scenario> {
    Ok(match path {
        Some(path) => Scenario::from_file(path)?,
        None => Scenario::from_toml_str(DEFAULT_SCENARIO, "scenarios/default.toml (built in)")?,
    })
}

/// Schedule replay of a live trace: prints each received transfer's and stream's outcome as
/// recorded and as replayed.
fn replay_live(args: &ReplayArgs, trace: &Trace) -> Result<Exit> {
    let given = match &args.scenario {
        Some(path) => {
            let scenario = Scenario::from_file(path)?;
            let seed = args.seed.unwrap_or(scenario.seed);
            Some((scenario, seed))
        }
        None => None,
    };
    let r = crate::replay::live_schedule::schedule_live(trace, given)?;
    println!(
        "scenario {} (seed {}), relay {} as recorded: {} of {} publications replayed as the recording delivered them",
        r.scenario, r.seed, r.relay, r.matched_publications, r.replayed_publications
    );
    println!("the rerun's calls:");
    println!("{:<24} {:<8} {:<12} outcome", "workload", "call", "tool");
    for c in &r.calls {
        println!(
            "{:<24} {:<8} {:<12} {}",
            c.workload, c.call, c.tool, c.outcome
        );
    }
    println!("what fresh receivers make of each trace's deliveries to the clients:");
    println!(
        "{:<16} {:<10} {:<30} replayed",
        "client", "token", "recorded"
    );
    for ((client, token), recorded) in &r.recorded {
        let new = r
            .replayed
            .get(&(client.clone(), token.clone()))
            .map_or("<missing>", String::as_str);
        println!("{client:<16} {token:<10} {recorded:<30} {new}");
    }
    if let Some(path) = &args.out {
        std::fs::write(path, &r.text)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if !r.compared() {
        println!("nothing to compare: no transfer or stream reached a client in the recording");
        if args.check {
            bail!("--check has nothing to check: the recording shows no transfer or stream reaching a client");
        }
        return Ok(Exit::Success);
    }
    let same = r.same_outcome();
    println!("outcome {}", if same { "unchanged" } else { "CHANGED" });
    Ok(if args.check && !same {
        Exit::ExpectationFailed
    } else {
        Exit::Success
    })
}

fn replay(args: ReplayArgs) -> Result<Exit> {
    let text = std::fs::read_to_string(&args.trace)
        .with_context(|| format!("cannot read {}", args.trace.display()))?;
    let trace = Trace::parse(&text, &args.trace.display().to_string())?;
    let live =
        matches!(&trace.lines[0], crate::trace::Line::Header { driver, .. } if driver == "live");
    if args.scenario.is_some() && !(live && args.mode == ReplayMode::Schedule) {
        bail!("--scenario is for schedule replays (--mode schedule) of live traces; this is a des trace or an inject replay");
    }
    match args.mode {
        ReplayMode::Schedule if live => replay_live(&args, &trace),
        ReplayMode::Schedule => {
            let r = replay::schedule(&trace, &text)?;
            println!(
                "{:<24} {:<8} {:<12} {:<30} replayed",
                "workload", "call", "tool", "recorded"
            );
            for (rec, new) in r
                .recorded
                .iter()
                .zip(r.replayed.iter().map(Some).chain(std::iter::repeat(None)))
            {
                let new = new.map_or("<missing>", |n| n.outcome.as_str());
                println!(
                    "{:<24} {:<8} {:<12} {:<30} {new}",
                    rec.workload, rec.call, rec.tool, rec.outcome
                );
            }
            if let Some(path) = &args.out {
                std::fs::write(path, &r.text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            match (&r.first_difference, r.same_outcome()) {
                (None, _) => println!("the replay is identical to the trace, byte for byte"),
                (Some((line, old, new)), same) => {
                    println!("the replay first differs from the trace at line {line}:");
                    println!("  recorded: {}", short(old));
                    println!("  replayed: {}", short(new));
                    println!("outcome {}", if same { "unchanged" } else { "CHANGED" });
                }
            }
            Ok(if args.check && !r.same_outcome() {
                Exit::ExpectationFailed
            } else {
                Exit::Success
            })
        }
        ReplayMode::Inject => {
            let injected = replay::inject(&trace)?;
            let recorded = replay::recorded_receiver_outcomes(&trace);
            let mut differs = false;
            println!(
                "{:<12} {:<10} {:<9} {:>7}  {:<28} recorded",
                "receiver", "token", "kind", "chunks", "injected"
            );
            for i in &injected {
                let rec = recorded.get(&(i.receiver.clone(), i.token.clone()));
                if rec.is_some_and(|r| *r != i.outcome) {
                    differs = true;
                }
                println!(
                    "{:<12} {:<10} {:<9} {:>7}  {:<28} {}",
                    i.receiver,
                    i.token,
                    i.kind,
                    i.chunks,
                    i.outcome,
                    rec.map_or("-", String::as_str)
                );
            }
            println!(
                "{}",
                if differs {
                    "outcome CHANGED for at least one receiver"
                } else {
                    "every injected outcome matches the recorded one"
                }
            );
            Ok(if args.check && differs {
                Exit::ExpectationFailed
            } else {
                Exit::Success
            })
        }
    }
}

fn short(line: &str) -> String {
    if line.len() > 200 {
        let cut = (0..=200)
            .rev()
            .find(|i| line.is_char_boundary(*i))
            .unwrap_or(0);
        format!("{}…", &line[..cut])
    } else {
        line.to_owned()
    }
}

fn shrink(args: ShrinkArgs) -> Result<Exit> {
    let trace = Trace::from_file(&args.trace)?;
    let result = crate::replay::shrink::shrink(&trace, args.cause.as_deref(), args.max_runs)?;
    std::fs::write(&args.out, &result.text)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!(
        "kept {} of {} disturbances that still cause {:?} ({} candidate runs)",
        result.kept.len(),
        result.before,
        result.cause,
        result.runs
    );
    for d in &result.kept {
        match d {
            crate::replay::shrink::Disturbance::Link { link, seq, what } => {
                println!(
                    "  {what:<9} message {seq} on {} -> {} ({})",
                    link.1, link.0, link.2
                )
            }
            crate::replay::shrink::Disturbance::Outage { index } => {
                println!("  outage    #{index}")
            }
        }
    }
    println!("shrunk trace written to {}", args.out.display());
    Ok(Exit::Success)
}

fn sweep(args: SweepArgs) -> Result<Exit> {
    let sweep = Sweep::from_file(&args.sweep)?;
    let shard = args.shard.unwrap_or((0, 1));
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cells = (0..sweep.cells.len())
        .filter(|i| i % shard.1 == shard.0)
        .count();
    let bar = ProgressBar::with_draw_target(Some(cells as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} cells, {elapsed} elapsed, eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_message(sweep.name.clone());
    let rows = sweep.run(jobs, shard, || bar.inc(1))?;
    bar.finish_and_clear();
    let out = args
        .out
        .unwrap_or_else(|| std::path::Path::new("results").join(&sweep.name));
    if shard.1 > 1 {
        crate::sweep::write_csv(&out.join("sweep.csv"), &sweep.axes(), &rows)?;
        println!(
            "shard {}/{}: {} of {} cells written to {}",
            shard.0,
            shard.1,
            rows.len(),
            sweep.cells.len(),
            out.join("sweep.csv").display()
        );
        println!(
            "merge the shards with: relaysim merge {} <shard dirs>/sweep.csv",
            args.sweep.display()
        );
        return Ok(Exit::Success);
    }
    finish_sweep(&sweep, &rows, &out)
}

fn merge(args: MergeArgs) -> Result<Exit> {
    let sweep = Sweep::from_file(&args.sweep)?;
    let mut rows = Vec::new();
    for path in &args.shards {
        let (axes, mut r) = crate::sweep::read_csv(path)?;
        if axes != sweep.axes() {
            bail!(
                "{}: its axes {:?} are not the sweep's {:?}",
                path.display(),
                axes,
                sweep.axes()
            );
        }
        rows.append(&mut r);
    }
    rows.sort_by_key(|r| r.cell);
    rows.dedup_by_key(|r| r.cell);
    if rows.len() != sweep.cells.len() {
        eprintln!(
            "warning: {} of {} cells present; the missing shards' cells are left out",
            rows.len(),
            sweep.cells.len()
        );
    }
    let out = args
        .out
        .unwrap_or_else(|| std::path::Path::new("results").join(&sweep.name));
    finish_sweep(&sweep, &rows, &out)
}

fn finish_sweep(sweep: &Sweep, rows: &[crate::sweep::Row], out: &std::path::Path) -> Result<Exit> {
    let axes = sweep.axes();
    crate::sweep::write_csv(&out.join("sweep.csv"), &axes, rows)?;
    for plot in &sweep.spec.plots {
        crate::sweep::plot::draw(plot, &axes, rows, out)
            .map_err(|e| anyhow::anyhow!("plot {}: {e}", plot.file))?;
    }
    println!(
        "sweep {}: {} cells x {} seeds; results in {}",
        sweep.name,
        rows.len(),
        sweep.spec.seeds,
        out.display()
    );
    if let Some(spec) = &sweep.spec.recommend {
        let recs = crate::sweep::recommend(spec, &axes, rows);
        let text: String = recs.iter().map(|r| format!("{}\n", r.text)).collect();
        println!(
            "recommendation (lowest {} with completion >= {}):",
            spec.minimise, spec.min_completion_ratio
        );
        for r in &recs {
            println!("  {}", r.text);
        }
        std::fs::write(out.join("recommendation.txt"), text)?;
    }
    Ok(Exit::Success)
}

fn serve(args: ServeArgs) -> Result<Exit> {
    let Some(profile) = crate::relay::RelayProfile::built_in(&args.profile) else {
        bail!(
            "unknown relay profile {:?}; built-in profiles: {}",
            args.profile,
            crate::relay::RelayProfile::BUILT_IN.join(", ")
        );
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = crate::live::ServeConfig {
            listen: args.listen,
            seed: args.seed,
            ..crate::live::ServeConfig::new(profile)
        };
        let relay = crate::live::serve(config)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        eprintln!(
            "relaysim serve: {} relay on ws://{} (NIP-11 at http://{}); Ctrl-C stops it",
            args.profile, relay.local_addr, relay.local_addr
        );
        tokio::signal::ctrl_c().await?;
        relay.shutdown().await;
        eprintln!("relaysim serve: stopped");
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Exit::Success)
}

fn record(args: RecordArgs) -> Result<Exit> {
    if !args.upstream.starts_with("ws://") {
        bail!(
            "--upstream must be a ws:// address, got {:?}",
            args.upstream
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = crate::live::record::RecordConfig {
            listen: args.listen,
            upstream: args.upstream.clone(),
            out: args.out.clone(),
        };
        let proxy = crate::live::record::record(config)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        eprintln!(
            "relaysim record: ws://{} -> {}, writing {}; Ctrl-C stops and closes the trace",
            proxy.local_addr,
            args.upstream,
            args.out.display()
        );
        tokio::signal::ctrl_c().await?;
        let lines = proxy.finish().await?;
        eprintln!(
            "relaysim record: {lines} lines written to {}",
            args.out.display()
        );
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Exit::Success)
}

fn check_determinism(args: DeterminismArgs) -> Result<Exit> {
    let scenario = load_scenario(&args.scenario)?;
    let seed = args.seed.unwrap_or(scenario.seed);
    let run = || {
        scenario
            .run_traced(seed, &Default::default(), &[], EventsMode::Full, None)
            .1
    };
    let (a, b) = (run(), run());
    match first_difference(&a, &b) {
        None => {
            println!("deterministic: two runs of {} with seed {seed} gave identical traces ({} lines, {} bytes)", scenario.name, a.lines().count(), a.len());
            Ok(Exit::Success)
        }
        Some((line, x, y)) => {
            println!("NOT deterministic: the traces first differ at line {line}:\n  first:  {}\n  second: {}", short(&x), short(&y));
            Ok(Exit::ExpectationFailed)
        }
    }
}

fn transfer(args: TransferArgs) -> Result<()> {
    let run = TransferRun {
        size: args.size,
        content: args.content,
        budget: args.budget,
        bootstrap: args.bootstrap,
        seed: args.seed,
        send_interval: Duration::from_millis(args.interval_ms),
        impairments: Impairments {
            min_delay: Duration::from_millis(args.delay_ms),
            max_delay: Duration::from_millis(args.delay_ms + args.jitter_ms),
            duplicate: probability("duplicate", args.duplicate)?,
            loss: probability("loss", args.loss)?,
        },
        receiver: ReceiverConfig::default(),
    };
    let report = run.run().context("cannot plan the transfer")?;
    println!(
        "relaysim transfer  seed {}  content {}  budget {} B",
        args.seed, args.content, args.budget
    );
    println!(
        "  message            {:>12} bytes in {} chunks",
        report.payload_bytes, report.chunks
    );
    println!(
        "  events published   {:>12}  ({} bytes on the wire, largest {} bytes)",
        report.events_published, report.wire_bytes, report.largest_event
    );
    println!(
        "  deliveries         {:>12}  (lost {}, duplicated {}, reordered {})",
        report.deliveries, report.lost, report.duplicated, report.reordered
    );
    match &report.outcome {
        Ok(at) => println!(
            "  outcome            completed at {:.3} s of virtual time",
            at.as_secs_f64()
        ),
        Err((cause, detail)) => println!("  outcome            failed ({cause}): {detail}"),
    }
    let integrity = match (&report.outcome, report.integrity_violation) {
        (_, true) => "VIOLATED: the delivered message differs from the one sent",
        (Ok(_), false) => "exact: the delivered message is byte-identical",
        (Err(_), false) => "nothing surfaced (no partial message reached the application)",
    };
    println!("  integrity          {integrity}");
    if report.integrity_violation {
        bail!("integrity violation");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::scenario::spec::parse_size;

    #[test]
    fn sizes_parse_with_units_and_bad_ones_explain_themselves() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("10MiB"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_size("2MB"), Ok(2_000_000));
        assert!(parse_size("ten").unwrap_err().contains("not a size"));
        assert!(parse_size("3GiB")
            .unwrap_err()
            .contains("unknown size unit"));
    }
}
