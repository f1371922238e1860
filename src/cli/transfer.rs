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
    /// Size of the tool result text: bytes, or with a KiB/MiB/KB/MB suffix.
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
    let report = match &args.trace {
        Some(path) => {
            let (report, trace) = scenario.run_traced(args.seed, EventsMode::Full);
            super::write_file(path, &trace)?;
            eprintln!("trace written to {}", path.display());
            report
        }
        None => scenario.run(args.seed),
    };
    print_report(&args, &report);
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

fn print_report(args: &TransferArgs, report: &RunReport) {
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
                "  outcome            completed in {:.3} s of virtual time",
                at.as_secs_f64()
            ),
            (Outcome::Completed, None) => println!("  outcome            completed"),
            (Outcome::Failed(cause), _) => println!("  outcome            failed: {cause}"),
        }
    }
    let completed = report.items.iter().all(|i| i.outcome == Outcome::Completed);
    let integrity = match (completed, report.integrity_violations) {
        (_, n) if n > 0 => "VIOLATED: the delivered message differs from the one sent",
        (true, _) => "exact: the delivered message is byte-identical",
        (false, _) => "nothing surfaced (no partial message reached the application)",
    };
    println!("  integrity          {integrity}");
    if !completed {
        println!(
            "  next               relaysim transfer ... --trace t.jsonl, then relaysim shrink t.jsonl --out min.jsonl"
        );
    }
}
