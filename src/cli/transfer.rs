//! `relaysim transfer`: one CEP-22 transfer through an impaired link.

use anyhow::{bail, Context, Result};
use relaysim::peer::content::ContentClass;
use relaysim::protocol::oversized::ReceiverConfig;
use relaysim::sim::link::Impairments;
use relaysim::sim::transfer::TransferRun;
use std::time::Duration;

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

pub(super) fn probability(name: &str, p: f64) -> Result<f64> {
    if !(0.0..=1.0).contains(&p) {
        bail!("--{name} must be a probability between 0 and 1, got {p}");
    }
    Ok(p)
}

pub(super) fn transfer(args: TransferArgs) -> Result<()> {
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
