//! `relaysim transfer`: one CEP-22 transfer through one relay, from flags. It writes a
//! one-workload scenario and runs it in the des world like any other (there is one simulator),
//! so `--print-scenario` gives a file to go on with in `relaysim run`.

use super::Exit;
use anyhow::{bail, Result};
use relaysim::peer::content::ContentClass;
use relaysim::scenario::Scenario;
use relaysim::stats::{Outcome, RunReport};
use relaysim::trace::EventsMode;

#[derive(clap::Args, Debug)]
pub(super) struct TransferArgs {
    /// Size of the tool result text: bytes, or with a KiB/MiB/GiB/KB/MB/GB suffix.
    #[arg(long, default_value = "1MiB", value_parser = relaysim::scenario::spec::parse_size)]
    size: usize,
    /// What the text is made of: ascii, escape-heavy, utf8 or random.
    #[arg(long, default_value = "escape-heavy")]
    content: ContentClass,
    /// Largest published event per frame, in bytes (the SDKs use 48000).
    #[arg(long, default_value_t = 48_000)]
    budget: usize,
    /// Send the text as an upload from a stateless client, which waits for the server's
    /// `accept` before its chunks (the bootstrap), instead of as a download.
    #[arg(long)]
    bootstrap: bool,
    /// The relay's profile (see `relaysim`'s guide, docs/guide.md#relay-profiles).
    #[arg(long, default_value = "ideal")]
    profile: String,
    /// Run seed: keys, payload and every delay derive from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Milliseconds the sender spends on each event before publishing the next (its publish
    /// pipeline, one event at a time).
    #[arg(long, default_value_t = 5)]
    interval_ms: u64,
    /// Base relay→peer delay in milliseconds.
    #[arg(long, default_value_t = 40)]
    delay_ms: u64,
    /// Extra uniform delay of up to this many milliseconds. The connection keeps order, so
    /// jitter holds later frames behind a slow one (head-of-line); it never reorders them.
    #[arg(long, default_value_t = 100)]
    jitter_ms: u64,
    /// Probability that an event is delivered twice. Not something a WebSocket does: it puts
    /// the relay→peer link in the datagram stress mode (see docs/physics.md).
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Probability that an event is lost alone. Not something a WebSocket does: it puts the
    /// relay→peer link in the datagram stress mode (see docs/physics.md).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Print the scenario these flags make and exit.
    #[arg(long)]
    print_scenario: bool,
    /// Write the run's trace here (JSON Lines), for `relaysim replay` and `relaysim shrink`.
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn probability(name: &str, p: f64) -> Result<f64> {
    if !(0.0..=1.0).contains(&p) {
        bail!("--{name} must be a probability between 0 and 1, got {p}");
    }
    Ok(p)
}

/// The scenario the flags describe.
fn scenario_text(args: &TransferArgs) -> Result<String> {
    let duplicate = probability("duplicate", args.duplicate)?;
    let loss = probability("loss", args.loss)?;
    let datagram = duplicate > 0.0 || loss > 0.0;
    let (kind, sender) = if args.bootstrap {
        ("upload", "clients")
    } else {
        ("download", "servers")
    };
    let mut link = format!(
        "delay = {{ dist = \"uniform\", min = \"{}ms\", max = \"{}ms\" }}\n",
        args.delay_ms,
        args.delay_ms + args.jitter_ms
    );
    if datagram {
        link.push_str(
            "ordering = \"datagram\"             # --duplicate/--loss: the stress mode\n",
        );
        link.push_str(&format!("duplicate = {duplicate}\nloss = {loss}\n"));
    }
    let publish = format!(
        "publish = {{ mode = \"sequential\", per_event = \"{}ms\" }}\n",
        args.interval_ms
    );
    let (server_publish, client_publish) = if sender == "servers" {
        (publish.as_str(), "")
    } else {
        ("", publish.as_str())
    };
    Ok(format!(
        r#"# Written by `relaysim transfer`: one CEP-22 {kind} through one relay.
name = "transfer"
description = "One {size}-byte {content} CEP-22 {kind} through a {profile} relay."
seed = {seed}
runs = 1
duration = "30m"

[[relays]]
name = "relay"
profile = "{profile}"
[relays.down]
{link}
[[servers]]
name = "server"
relays = ["relay"]
{server_publish}
[[clients]]
name = "client"
relays = ["relay"]
stateless = {stateless}
{client_publish}
[[workloads]]
name = "{kind}"
kind = "{kind}"
bytes = "{size}B"
content = "{content}"

[policy]
budget = "{budget}B"
"#,
        size = args.size,
        content = args.content,
        profile = args.profile,
        seed = args.seed,
        stateless = args.bootstrap,
        budget = args.budget,
    ))
}

pub(super) fn transfer(args: TransferArgs) -> Result<Exit> {
    let text = scenario_text(&args)?;
    if args.print_scenario {
        print!("{text}");
        return Ok(Exit::Success);
    }
    let scenario = Scenario::from_toml_str(&text, "the scenario of `relaysim transfer`")?;
    // Always traced: on failure the trace is where the cause chain is read from (events by
    // id only, unless the trace is to be written for replays).
    let mode = if args.trace.is_some() {
        EventsMode::Full
    } else {
        EventsMode::Ids
    };
    let (report, trace_text) = scenario.run_traced(args.seed, mode);
    if let Some(path) = &args.trace {
        super::write_file(path, &trace_text)?;
        eprintln!("trace written to {}", path.display());
    }
    let failed = report.items.iter().any(|i| i.outcome != Outcome::Completed);
    let chain = if failed {
        let trace = relaysim::Trace::parse(&trace_text, "the transfer's trace")?;
        Some(relaysim::show::chain::CauseChain::of(&trace).text())
    } else {
        None
    };
    if args.json {
        let mut json = report_json(&args, &report);
        json["cause_chain"] = chain.as_ref().map_or(serde_json::Value::Null, |c| {
            c.lines().map(str::trim).collect::<Vec<_>>().into()
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print_report(&args, &report, chain.as_deref());
    }
    if report.integrity_violations > 0 {
        bail!("integrity violation: the delivered message differs from the one sent");
    }
    let completed = report
        .items
        .iter()
        .all(|item| item.outcome == Outcome::Completed);
    Ok(if completed {
        Exit::Success
    } else {
        Exit::ExpectationFailed
    })
}

/// What the transfer did to the message: `violated`, `exact` or `nothing-surfaced`, and the
/// sentence for people.
fn integrity(report: &RunReport) -> (&'static str, &'static str) {
    let completed = report.items.iter().all(|i| i.outcome == Outcome::Completed);
    match (completed, report.integrity_violations) {
        (_, n) if n > 0 => (
            "violated",
            "VIOLATED: the delivered message differs from the one sent",
        ),
        (true, _) => ("exact", "exact: the delivered message is byte-identical"),
        (false, _) => (
            "nothing-surfaced",
            "nothing surfaced (no partial message reached the application)",
        ),
    }
}

/// The report as one JSON document: the flags that shaped the run, the relay's counters, each
/// call's outcome and virtual time, and the integrity verdict.
fn report_json(args: &TransferArgs, report: &RunReport) -> serde_json::Value {
    let counter = |name: &str| report.counters.get(name).copied().unwrap_or(0);
    let calls: Vec<serde_json::Value> = report
        .items
        .iter()
        .map(|item| {
            let (outcome, cause) = match &item.outcome {
                Outcome::Completed => ("completed", None),
                Outcome::Failed(cause) => ("failed", Some(cause)),
            };
            let latency = item
                .latency
                .filter(|_| cause.is_none())
                .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
            serde_json::json!({ "outcome": outcome, "cause": cause, "completed_in_us": latency })
        })
        .collect();
    serde_json::json!({
        "seed": args.seed,
        "direction": if args.bootstrap { "upload" } else { "download" },
        "bootstrap": args.bootstrap,
        "size": args.size,
        "content": args.content.to_string(),
        "budget": args.budget,
        "profile": args.profile,
        "events_published": counter("events_published"),
        "bytes_published": counter("bytes_published"),
        "delivered": counter("delivered"),
        "lost": counter("lost"),
        "duplicated": counter("duplicated"),
        "reordered": counter("reordered"),
        "calls": calls,
        "completed": report.items.iter().all(|i| i.outcome == Outcome::Completed),
        "integrity": integrity(report).0,
        "integrity_violations": report.integrity_violations,
        "trace": args.trace.as_ref().map(|p| p.display().to_string()),
    })
}

/// The text report; `chain` is the failure's cause chain, when it failed.
fn print_report(args: &TransferArgs, report: &RunReport, chain: Option<&str>) {
    let counter = |name: &str| report.counters.get(name).copied().unwrap_or(0);
    let direction = if args.bootstrap {
        "upload with the accept bootstrap"
    } else {
        "download"
    };
    println!(
        "relaysim transfer  seed {}  {direction}  content {}  budget {} B  relay {}",
        args.seed, args.content, args.budget, args.profile
    );
    println!(
        "  events published   {:>12}  ({} bytes on the wire)",
        counter("events_published"),
        counter("bytes_published")
    );
    println!(
        "  deliveries         {:>12}  (lost {}, duplicated {}, reordered {})",
        counter("delivered"),
        counter("lost"),
        counter("duplicated"),
        counter("reordered")
    );
    for item in &report.items {
        match (&item.outcome, item.latency) {
            (Outcome::Completed, Some(at)) => println!(
                "  outcome            completed in {} of virtual time",
                relaysim::stats::output::human_us(
                    u64::try_from(at.as_micros()).unwrap_or(u64::MAX)
                )
            ),
            (Outcome::Completed, None) => println!("  outcome            completed"),
            (Outcome::Failed(cause), _) => println!("  outcome            failed: {cause}"),
        }
    }
    let completed = report.items.iter().all(|i| i.outcome == Outcome::Completed);
    println!("  integrity          {}", integrity(report).1);
    if let Some(chain) = chain {
        println!("  cause chain        what the trace shows, in time order:");
        for line in chain.lines() {
            println!("    {}", line.trim_start());
        }
    }
    if !completed {
        println!(
            "  next               relaysim transfer ... --trace t.jsonl, then relaysim shrink t.jsonl --out min.jsonl"
        );
    }
}
