//! `relaysim shrink`: a failing trace down to the disturbances that still cause its failure.

use super::Exit;
use anyhow::Result;
use relaysim::replay::shrink::Disturbance;
use relaysim::trace::Trace;

#[derive(clap::Args, Debug)]
pub(super) struct ShrinkArgs {
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
    /// Print what was kept as JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(super) fn shrink(args: ShrinkArgs) -> Result<Exit> {
    let trace = Trace::from_file(&args.trace)?;
    let hosts = super::run::replay_hosts(&trace)?;
    let result =
        relaysim::replay::shrink::shrink(&trace, args.cause.as_deref(), args.max_runs, &hosts)?;
    super::write_file(&args.out, &result.text)?;
    if args.json {
        let kept: Vec<serde_json::Value> = result
            .kept
            .iter()
            .map(|d| match d {
                Disturbance::Link { link, seq, what } => serde_json::json!({
                    "kind": "link",
                    "what": what,
                    "relay": link.0,
                    "peer": link.1,
                    "way": link.2,
                    "seq": seq,
                }),
                Disturbance::Outage { index } => {
                    serde_json::json!({ "kind": "outage", "index": index })
                }
                Disturbance::Delivery { peer, id, what, t } => serde_json::json!({
                    "kind": "delivery",
                    "what": what,
                    "peer": peer,
                    "id": id,
                    "t_us": t,
                }),
            })
            .collect();
        let document = serde_json::json!({
            "cause": result.cause,
            "before": result.before,
            "kept": kept,
            "runs": result.runs,
            "out": args.out.display().to_string(),
        });
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(Exit::Success);
    }
    println!(
        "kept {} of {} disturbances that still cause {:?} ({} candidate runs)",
        result.kept.len(),
        result.before,
        result.cause,
        result.runs
    );
    for d in &result.kept {
        match d {
            Disturbance::Link { link, seq, what } => {
                println!(
                    "  {what:<9} message {seq} on {} -> {} ({})",
                    link.1, link.0, link.2
                )
            }
            Disturbance::Outage { index } => {
                println!("  outage    #{index}")
            }
            Disturbance::Delivery { peer, id, what, t } => {
                println!(
                    "  {what:<9} event {} to {peer} at {:.3} s",
                    id.get(..12).unwrap_or(id),
                    *t as f64 / 1e6
                )
            }
        }
    }
    if result.kept.is_empty() {
        println!(
            "  none: with every disturbance undone it still fails, so the cause is elsewhere \
             (what the peers sent, or a relay's policy such as a rate limit)"
        );
    }
    println!("shrunk trace written to {}", args.out.display());
    Ok(Exit::Success)
}
