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
}

pub(super) fn check_determinism(args: DeterminismArgs) -> Result<Exit> {
    let scenario = load_scenario(&args.scenario)?;
    let seed = args.seed.unwrap_or(scenario.seed);
    let run = || scenario.run_traced(seed, EventsMode::Full).1;
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
