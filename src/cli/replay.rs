//! `relaysim replay`: a trace's disturbances against the endpoints again, or its deliveries into
//! fresh receivers.

use super::Exit;
use anyhow::{bail, Context, Result};
use relaysim::replay;
use relaysim::scenario::Scenario;
use relaysim::trace::Trace;
use serde_json::json;

#[derive(clap::Args, Debug)]
pub(super) struct ReplayArgs {
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
    /// Print the comparison as JSON instead of the table (the exit codes are the same).
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ReplayMode {
    Schedule,
    Inject,
}

/// Schedule replay of a live trace: prints each received transfer's and stream's outcome as
/// recorded and as replayed.
pub(super) fn replay_live(args: &ReplayArgs, trace: &Trace) -> Result<Exit> {
    let given = match &args.scenario {
        Some(path) => {
            let scenario = Scenario::from_file(path)?;
            let seed = args.seed.unwrap_or(scenario.seed);
            Some((scenario, seed))
        }
        None => None,
    };
    let r = relaysim::replay::live_schedule::schedule_live(trace, given)?;
    if args.json {
        let receivers: Vec<serde_json::Value> = r
            .recorded
            .iter()
            .map(|((client, token), recorded)| {
                let replayed = r.replayed.get(&(client.clone(), token.clone()));
                json!({
                    "client": client,
                    "token": token,
                    "recorded": recorded,
                    "replayed": replayed,
                })
            })
            .collect();
        let compared = r.recorded.len() + r.call_pairs().len();
        print_json(&json!({
            "mode": "schedule",
            "live": true,
            "scenario": r.scenario,
            "seed": r.seed,
            "relay": r.relay,
            "recorded_publications": r.recorded_publications,
            "replayed_publications": r.replayed_publications,
            "matched_publications": r.matched_publications,
            "calls": r.calls,
            "recorded_calls": r.recorded_calls,
            "receivers": receivers,
            "compared": compared,
            "same_outcome": (compared > 0).then(|| r.same_outcome()),
            "out": args.out.as_ref().map(|p| p.display().to_string()),
        }))?;
    } else {
        print_live(&r);
    }
    if let Some(path) = &args.out {
        super::write_file(path, &r.text)?;
    }
    if !r.compared() {
        if args.check {
            bail!("--check has nothing to check: the recording shows no transfer or stream reaching a client, and no call of the scenario's clients");
        }
        return Ok(Exit::Success);
    }
    let same = r.same_outcome();
    Ok(if args.check && !same {
        Exit::ExpectationFailed
    } else {
        Exit::Success
    })
}

/// The text of a live schedule replay: the rerun's calls, each received transfer's and
/// stream's outcome as recorded and as replayed, and the verdict.
fn print_live(r: &relaysim::replay::live_schedule::LiveScheduleReplay) {
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
    let pairs = r.call_pairs();
    if !pairs.is_empty() {
        println!("the recording's calls, and the rerun's:");
        for (recorded, rerun) in &pairs {
            println!(
                "{:<16} call {:<4} {:<30} {}",
                recorded.client,
                recorded.call,
                recorded.outcome,
                rerun.map_or("<not made>", |c| c.outcome.as_str())
            );
        }
    }
    if r.compared() {
        let same = r.same_outcome();
        println!("outcome {}", if same { "unchanged" } else { "CHANGED" });
    } else {
        println!(
            "nothing to compare: no transfer or stream reached a client in the recording, and it \
             records no call of the scenario's clients"
        );
    }
}

pub(super) fn replay(args: ReplayArgs) -> Result<Exit> {
    // Read a line at a time; only a des schedule replay, which compares its trace with the
    // recorded one byte for byte, needs the text as well.
    let trace = Trace::from_file(&args.trace)?;
    let live =
        matches!(&trace.lines[0], relaysim::trace::Line::Header { driver, .. } if driver == "live");
    if args.scenario.is_some() && !(live && args.mode == ReplayMode::Schedule) {
        bail!("--scenario is for schedule replays (--mode schedule) of live traces; this is a des trace or an inject replay");
    }
    match args.mode {
        ReplayMode::Schedule if live => replay_live(&args, &trace),
        ReplayMode::Schedule => {
            let text =
                relaysim::limits::read_text(&args.trace, relaysim::limits::MAX_TRACE_FILE_BYTES)
                    .with_context(|| format!("cannot read {}", args.trace.display()))?;
            replay_schedule(&args, &trace, &text)
        }
        ReplayMode::Inject => replay_inject(&args, &trace),
    }
}

/// Schedule replay of a des trace: each call's outcome as recorded and as replayed, and where
/// the replay's trace first differs from the recorded one.
fn replay_schedule(args: &ReplayArgs, trace: &Trace, text: &str) -> Result<Exit> {
    let r = replay::schedule(trace, text, &super::run::replay_hosts(trace)?)?;
    // The rows the table shows: the recorded calls, each beside its replayed outcome.
    let rows = r
        .recorded
        .iter()
        .zip(r.replayed.iter().map(Some).chain(std::iter::repeat(None)));
    if args.json {
        let calls: Vec<serde_json::Value> = rows
            .map(|(rec, new)| {
                json!({
                    "workload": rec.workload,
                    "client": rec.client,
                    "call": rec.call,
                    "tool": rec.tool,
                    "recorded": rec.outcome,
                    "replayed": new.map(|n| &n.outcome),
                })
            })
            .collect();
        let first_difference = r.first_difference.as_ref().map(|(line, old, new)| {
            json!({ "line": line, "recorded": short(old), "replayed": short(new) })
        });
        print_json(&json!({
            "mode": "schedule",
            "live": false,
            "calls": calls,
            "identical": r.first_difference.is_none(),
            "first_difference": first_difference,
            "compared": r.recorded.len(),
            "same_outcome": r.same_outcome(),
            "out": args.out.as_ref().map(|p| p.display().to_string()),
        }))?;
    } else {
        println!(
            "{:<24} {:<8} {:<12} {:<30} replayed",
            "workload", "call", "tool", "recorded"
        );
        for (rec, new) in rows {
            let new = new.map_or("<missing>", |n| n.outcome.as_str());
            println!(
                "{:<24} {:<8} {:<12} {:<30} {new}",
                rec.workload, rec.call, rec.tool, rec.outcome
            );
        }
    }
    if let Some(path) = &args.out {
        super::write_file(path, &r.text)?;
    }
    if !args.json {
        match (&r.first_difference, r.same_outcome()) {
            (None, _) => println!("the replay is identical to the trace, byte for byte"),
            (Some((line, old, new)), same) => {
                println!("the replay first differs from the trace at line {line}:");
                println!("  recorded: {}", short(old));
                println!("  replayed: {}", short(new));
                println!("outcome {}", if same { "unchanged" } else { "CHANGED" });
            }
        }
    }
    Ok(if args.check && !r.same_outcome() {
        Exit::ExpectationFailed
    } else {
        Exit::Success
    })
}

/// Inject replay: each transfer's and stream's outcome in fresh receivers beside the recorded
/// one, and the trace's traffic.
fn replay_inject(args: &ReplayArgs, trace: &Trace) -> Result<Exit> {
    let injected = replay::inject(trace)?;
    let recorded = replay::recorded_receiver_outcomes(trace);
    let rows: Vec<(&replay::Injected, Option<&String>)> = injected
        .iter()
        .map(|i| (i, recorded.get(&(i.receiver.clone(), i.token.clone()))))
        .collect();
    let compared = rows.iter().filter(|(_, rec)| rec.is_some()).count();
    let differs = rows
        .iter()
        .any(|(i, rec)| rec.is_some_and(|r| *r != i.outcome));
    let traffic = replay::traffic::traffic(trace);
    if args.json {
        let receivers: Vec<serde_json::Value> = rows
            .iter()
            .map(|(i, rec)| {
                json!({
                    "receiver": i.receiver,
                    "token": i.token,
                    "kind": i.kind,
                    "chunks": i.chunks,
                    "injected": i.outcome,
                    "recorded": rec,
                })
            })
            .collect();
        print_json(&json!({
            "mode": "inject",
            "receivers": receivers,
            "traffic": traffic.to_json(),
            "compared": compared,
            "same_outcome": (compared > 0).then_some(!differs),
        }))?;
    } else {
        println!(
            "{:<12} {:<10} {:<9} {:>7}  {:<28} recorded",
            "receiver", "token", "kind", "chunks", "injected"
        );
        for (i, rec) in &rows {
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
        println!();
        print!("{}", traffic.text());
        println!();
        if compared == 0 {
            // Foreign peers (a live recording) record no outcomes to hold these against.
            println!(
                "nothing to compare: the trace records no receiver outcome for these {} \
                 transfers and streams",
                injected.len()
            );
        } else if differs {
            println!("outcome CHANGED for at least one receiver");
        } else {
            println!("every injected outcome matches the recorded one");
        }
    }
    if compared == 0 {
        if args.check {
            bail!("--check has nothing to check: the trace records no receiver outcome");
        }
        return Ok(Exit::Success);
    }
    Ok(if args.check && differs {
        Exit::ExpectationFailed
    } else {
        Exit::Success
    })
}

/// Prints `document` as pretty JSON on stdout.
fn print_json(document: &serde_json::Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(document)?);
    Ok(())
}

pub(super) fn short(line: &str) -> String {
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
