//! `relaysim check-determinism`: a scenario twice, traces compared byte for byte.

use super::replay::short;
use super::run::load_scenario;
use super::Exit;
use anyhow::Result;
use relaysim::trace::{first_difference, EventsMode};

#[derive(clap::Args, Debug)]
pub(super) struct DeterminismArgs {
    /// The scenario file; without one, the built-in default.
    scenario: Option<std::path::PathBuf>,
    /// The seed (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the verdict as JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(super) fn check_determinism(args: DeterminismArgs) -> Result<Exit> {
    let scenario = load_scenario(&args.scenario)?;
    let seed = args.seed.unwrap_or(scenario.seed);
    let run = || scenario.run_traced(seed, EventsMode::Full).1;
    let (a, b) = (run(), run());
    let difference = first_difference(&a, &b);
    if args.json {
        let first = difference.as_ref().map(|(line, x, y)| {
            serde_json::json!({ "line": line, "first": short(x), "second": short(y) })
        });
        let document = serde_json::json!({
            "scenario": scenario.name,
            "seed": seed,
            "deterministic": difference.is_none(),
            "lines": a.lines().count(),
            "bytes": a.len(),
            "first_difference": first,
        });
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        match &difference {
            None => println!("deterministic: two runs of {} with seed {seed} gave identical traces ({} lines, {} bytes)", scenario.name, a.lines().count(), a.len()),
            Some((line, x, y)) => println!("NOT deterministic: the traces first differ at line {line}:\n  first:  {}\n  second: {}", short(x), short(y)),
        }
    }
    Ok(if difference.is_none() {
        Exit::Success
    } else {
        Exit::ExpectationFailed
    })
}
