//! The `relaysim` command line: argument parsing and printing only; the work is in the library.
//! One file per subcommand.

mod command;
mod compare;
mod completions;
mod determinism;
mod probe;
mod profiles;
mod record;
mod replay;
mod run;
mod serve;
mod show;
mod shrink;
mod soak;
mod sweep;
mod transfer;
mod validate;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};

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
        relaysim run scenarios/contextvm-sdk/*.toml\n  \
        relaysim run my.toml --out /tmp/results")]
    Run(run::RunArgs),
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
    Compare(compare::CompareArgs),
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
    Replay(replay::ReplayArgs),
    /// Shrink a failing trace to the few disturbances that still cause its failure.
    ///
    /// A des trace is rerun with disturbances taken away (lost, duplicated, delayed or overtaken
    /// messages, outages) and the failure is a call's. A live recording (serve --trace, record,
    /// run --engine live|turmoil) cannot be rerun, so it is shrunk by inject replay: the failure
    /// is one of relaysim's receivers fed the recorded deliveries, and the disturbances are
    /// duplicate, reordered and missing deliveries of CEP-22 and CEP-41 frames.
    #[command(after_help = "Examples:\n  \
        relaysim shrink traces/khatru-drop-mid-stream.jsonl --out /tmp/min.jsonl\n  \
        relaysim serve traces/src/lossy-download.toml --trace ts.jsonl -- node interop/ts-sdk/peers.mjs\n  \
        relaysim shrink ts.jsonl --out ts.min.jsonl     # the lost chunk the TypeScript client missed\n  \
        relaysim shrink my-trace.jsonl --cause download-gap-at-end --out min.jsonl")]
    Shrink(shrink::ShrinkArgs),
    /// Draw a trace: a timeline per client, relay and peer with every publication, delivery,
    /// copy, loss, outage and failure, the failing calls framed; SVG and PNG.
    ///
    /// Works on any trace, shrunk ones included: the record → shrink → show loop ends with a
    /// picture of the cause. Exit code: 0, or 2 for a bad trace or window.
    #[command(after_help = "Examples:\n  \
        relaysim show traces/khatru-drop-mid-stream.shrunk.jsonl\n  \
        relaysim show run.jsonl --from 2s --to 4.5s --out /tmp/zoom\n  \
        relaysim show run.jsonl --call 3")]
    Show(show::ShowArgs),
    /// Run a sweep: a scenario over parameter axes, several seeds per cell, cells in parallel;
    /// write sweep.csv, plots (SVG and PNG) and a recommendation.
    #[command(after_help = "Examples:\n  \
        relaysim sweep sweeps/chunk-budget.toml\n  \
        relaysim sweep sweeps/keepalive.toml --jobs 8 --out /tmp/keepalive\n  \
        relaysim sweep sweeps/chunk-budget.toml --shard 0/4 --out shard-0   # one of 4 batch jobs\n  \
        relaysim merge sweeps/chunk-budget.toml shard-*/sweep.csv --out results/chunk-budget")]
    Sweep(sweep::SweepArgs),
    /// Merge the sweep.csv files of a sweep's shards into one result with plots and a
    /// recommendation.
    Merge(sweep::MergeArgs),
    /// Run live relays on real sockets, one profile or every relay of a scenario (impairments
    /// both ways, outages on the wall clock), for clients in any language; print counters and
    /// request latencies when stopped, optionally around a command that runs your peers.
    ///
    /// Exit code: 0; with a command, 1 when it failed or a call it reported did not complete;
    /// 2 for bad input.
    #[command(after_help = "Examples:\n  \
        relaysim serve                                   # strfry on ws://127.0.0.1:7777\n  \
        relaysim serve --profile damus --listen 127.0.0.1:9000\n  \
        relaysim serve scenarios/live/sdk-two-relays.toml --out results/mine\n  \
        relaysim serve --profile strfry --listen 127.0.0.1:0 -- node interop/ts-sdk/peers.mjs\n  \
        curl -H 'Accept: application/nostr+json' http://127.0.0.1:7777   # NIP-11\n  \
        curl http://127.0.0.1:7777/stats                                  # counters so far")]
    Serve(serve::ServeArgs),
    /// Record what crosses a transparent proxy in front of a real relay, as a trace that
    /// `replay --mode inject` feeds to relaysim's receivers.
    #[command(after_help = "Example:\n  \
        relaysim record --upstream ws://127.0.0.1:7000 --listen 127.0.0.1:7001 --out real.jsonl\n  \
        # point the clients at ws://127.0.0.1:7001, run them, press Ctrl-C, then:\n  \
        relaysim replay real.jsonl --mode inject\n  \
        # or record your SDK's peers, their calls' outcomes and why they failed:\n  \
        relaysim record --upstream ws://127.0.0.1:7000 --listen 127.0.0.1:0 --out real.jsonl -- node interop/ts-sdk/peers.mjs\n  \
        relaysim show real.jsonl --out real.svg")]
    Record(record::RecordArgs),
    /// Generate and run many random scenarios (every profile, impairment, outage, peer
    /// behaviour and workload), checking what no relay may cause: corrupt deliveries, failures
    /// without a cause, disturbances without a mechanism, panics, nondeterminism.
    ///
    /// Failed calls are results, not violations. Exit code: 0 when no run had a violation,
    /// 1 when one did (its scenario is written with --out), 2 for bad input.
    #[command(after_help = "Examples:\n  \
        relaysim soak --runs 1000\n  \
        relaysim soak --runs 100000 --seed 7 --out /tmp/soak   # violating scenarios land here\n  \
        relaysim run /tmp/soak/soak-123.toml                   # reproduce one")]
    Soak(soak::SoakArgs),
    /// The built-in relay profiles: what each does (limits, ephemeral events, rate limits,
    /// intake, keepalive, link), knob by knob, with the sources the values come from.
    #[command(after_help = "Examples:\n  \
        relaysim profiles\n  \
        relaysim profiles strfry\n  \
        relaysim profiles --json")]
    Profiles(profiles::ProfilesArgs),
    /// Check scenario, sweep and trace files without running them: every problem with its
    /// file, line and column.
    ///
    /// Exit code: 0 when every file is valid, 2 when one is not.
    #[command(after_help = "Examples:\n  \
        relaysim validate scenarios/*.toml sweeps/*.toml\n  \
        relaysim validate traces/lossy-download.jsonl --json")]
    Validate(validate::ValidateArgs),
    /// Print a shell completion script.
    #[command(after_help = "Examples:\n  \
        relaysim completions bash > ~/.local/share/bash-completion/completions/relaysim\n  \
        relaysim completions zsh > ~/.zfunc/_relaysim\n  \
        relaysim completions fish > ~/.config/fish/completions/relaysim.fish")]
    Completions(completions::CompletionsArgs),
    /// Print the man page, or write one per subcommand with --out.
    #[command(after_help = "Examples:\n  \
        relaysim man | man -l -\n  \
        relaysim man --out target/man")]
    Man(completions::ManArgs),
    /// Run a scenario twice and compare the traces byte for byte.
    #[command(
        name = "check-determinism",
        after_help = "Example:\n  relaysim check-determinism scenarios/default.toml --seed 3"
    )]
    CheckDeterminism(determinism::DeterminismArgs),
    /// Send one CEP-22 transfer through one relay, in virtual time, from flags.
    ///
    /// The flags make a one-workload scenario (`--print-scenario` shows it) that runs like any
    /// other: real signed kind-25910 events, a relay profile, a relay→peer link that keeps
    /// order per connection. `--duplicate` and `--loss` switch that link to the datagram
    /// stress mode, which no WebSocket reproduces. The same arguments always print the same
    /// report. Exit code: 0 when the transfer completes exactly, 1 when it fails, 2 for bad
    /// input.
    #[command(after_help = "Examples:\n  \
        relaysim transfer --size 1MiB --content escape-heavy\n  \
        relaysim transfer --size 10MiB --budget 60000 --jitter-ms 400 --profile strfry --seed 7\n  \
        relaysim transfer --size 2MiB --bootstrap\n  \
        relaysim transfer --size 4MiB --loss 0.01 --trace t.jsonl   # stress mode, then shrink t.jsonl\n  \
        relaysim transfer --size 300KiB --print-scenario > my.toml")]
    Transfer(transfer::TransferArgs),
    /// Characterise a running NIP-01 relay on what ContextVM traffic depends on: the answer to
    /// ephemeral events and re-sends, replay to new subscriptions, the order of one
    /// connection's bursts, size and subscription limits, gift-wrap gating, latency. Bounded
    /// in count and time. With --profile, the built-in profile is served on loopback and
    /// probed too, and every difference listed.
    ///
    /// Exit code: 0, or 2 for bad input. Differences are results, not errors.
    #[command(after_help = "Examples:\n  \
        relaysim probe ws://127.0.0.1:7777\n  \
        relaysim probe ws://127.0.0.1:7777 --against strfry --json strfry.json\n  \
        relaysim probe --profile strfry --expect fixtures/probes/strfry.json")]
    Probe(probe::ProbeArgs),
}

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
        Command::Run(args) => run::run_scenario(args),
        Command::Compare(args) => compare::compare(args),
        Command::Replay(args) => replay::replay(args),
        Command::Shrink(args) => shrink::shrink(args),
        Command::Show(args) => show::show(args),
        Command::CheckDeterminism(args) => determinism::check_determinism(args),
        Command::Sweep(args) => sweep::sweep(args),
        Command::Serve(args) => serve::serve(args),
        Command::Record(args) => record::record(args),
        Command::Merge(args) => sweep::merge(args),
        Command::Transfer(args) => transfer::transfer(args),
        Command::Soak(args) => soak::soak(args),
        Command::Profiles(args) => profiles::profiles(args),
        Command::Probe(args) => probe::probe_relay(args),
        Command::Validate(args) => validate::validate(args),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => completions::man(args),
    }
}

/// The job count a `--jobs` flag asks for: all cores by default.
pub(crate) fn jobs(flag: Option<u16>) -> usize {
    flag.map_or_else(relaysim::parallel::default_jobs, usize::from)
}

/// Writes `text` to `path`, creating the directory it names first (traces and shrunk traces
/// often go to a directory that does not exist yet).
pub(crate) fn write_file(path: &std::path::Path, text: &str) -> Result<()> {
    create_parent(path)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Claims the default results directory `dir` for `source` (a file's canonical path): creates
/// it and writes `source` into `dir/owner_file`. A directory another file's results are in is
/// refused, not overwritten.
pub(crate) fn claim_results_dir(
    dir: &std::path::Path,
    owner_file: &str,
    source: &str,
) -> Result<()> {
    let owner = dir.join(owner_file);
    match std::fs::read_to_string(&owner) {
        Ok(text) if text.trim() != source => anyhow::bail!(
            "{} holds the results of {}; give this run its own directory with --out DIR",
            dir.display(),
            text.trim()
        ),
        _ => {}
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(&owner, format!("{source}\n"))
        .with_context(|| format!("cannot write {}", owner.display()))
}

/// A file's stem (`scenarios/x.toml` → `x`), and its canonical path, which names it however
/// the command line spelled it.
pub(crate) fn stem_and_source(path: &std::path::Path) -> (String, String) {
    (
        path.file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().into_owned()),
        std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string(),
    )
}

/// Creates the directory `path` is in, if it names one.
pub(crate) fn create_parent(path: &std::path::Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    }
    Ok(())
}
