//! `relaysim run`: one scenario, one or many seeds, in the des or turmoil engine.

use super::Exit;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use relaysim::scenario::{Observes, Scenario};
use relaysim::stats::output;
use relaysim::trace::EventsMode;

#[derive(clap::Args, Debug)]
pub(super) struct RunArgs {
    /// Scenario files (TOML), run one after the other. Default: the built-in default scenario.
    scenarios: Vec<std::path::PathBuf>,
    /// First seed (overrides the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Number of runs, with seeds seed, seed+1, ... (overrides the scenario's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=relaysim::limits::MAX_RUNS as i64))]
    runs: Option<u32>,
    /// Runs at once, one per thread (default: the number of cores); the report is the same
    /// for any value.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    jobs: Option<u16>,
    /// Where to write summary.csv, latency.csv and failures.csv (default results/<file name>/,
    /// with `-turmoil` for that engine; never another scenario file's directory).
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
    /// async tasks on turmoil's simulated TCP (slower; reports calls, their latencies and the
    /// relays' counters, not relay-side latencies; relays apply impairments both ways and
    /// outages as `serve` does;
    /// --trace writes each relay's live trace, which `replay` takes in both modes). `live`:
    /// the same peers on real sockets and the wall clock, against the scenario's relays served
    /// on loopback or the relays given with --relay (not deterministic).
    #[arg(long, value_enum, default_value = "des")]
    engine: Engine,
    /// With `--engine live`: use the relay at URL for the scenario's relay NAME instead of
    /// serving it (with --trace, a recording proxy in front of it writes its trace). Repeatable.
    #[arg(long, value_name = "NAME=ws://HOST:PORT", value_parser = parse_relay)]
    relay: Vec<(String, String)>,
    /// With `--engine live`: derive the peers' keys from the seed and this nonce. Each live
    /// run draws a fresh one by default (and prints it), so a relay that stores events cannot
    /// feed a rerun the requests of an earlier one; give the printed nonce to reuse its keys.
    #[arg(long, value_name = "N")]
    key_nonce: Option<u64>,
}

/// A nonce no earlier run is likely to have drawn: from the OS's randomness, through the
/// standard library's per-process hash keys (live runs are not deterministic by nature).
fn fresh_key_nonce() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x6b65_7973_u64)
}

fn parse_relay(text: &str) -> Result<(String, String), String> {
    let (name, url) = text
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=ws://HOST:PORT, got {text:?}"))?;
    if name.is_empty() || !url.starts_with("ws://") {
        return Err(format!(
            "expected NAME=ws://HOST:PORT (a relay name, then a ws:// URL), got {text:?}"
        ));
    }
    Ok((name.to_owned(), url.to_owned()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Engine {
    Des,
    Turmoil,
    Live,
}

pub(super) fn run_scenario(args: RunArgs) -> Result<Exit> {
    if args.scenarios.len() <= 1 {
        let path = args.scenarios.first().cloned();
        let (exit, document) = run_file(&args, path.as_ref(), args.out.clone())?;
        if let Some(document) = document {
            println!("{}", serde_json::to_string_pretty(&document)?);
        }
        return Ok(exit);
    }
    if args.trace.is_some() {
        bail!("--trace records one run of one scenario; give one scenario file");
    }
    let mut results = Vec::new();
    let mut documents = Vec::new();
    for path in &args.scenarios {
        // With several files, --out is a parent: each file's results go under its name.
        let out = args.out.as_ref().map(|o| {
            o.join(
                path.file_stem()
                    .map_or("scenario".into(), |s| s.to_string_lossy().into_owned()),
            )
        });
        if !args.json {
            println!("== {}", path.display());
        }
        let (exit, document) = run_file(&args, Some(path), out)
            .with_context(|| format!("running {}", path.display()))?;
        if let Some(document) = document {
            documents.push(serde_json::json!({
                "file": path.display().to_string(),
                "report": document,
            }));
        } else {
            println!();
        }
        results.push((path, exit));
    }
    let all_held = results.iter().all(|(_, e)| matches!(e, Exit::Success));
    if args.json {
        // One document for all the files.
        println!("{}", serde_json::to_string_pretty(&documents)?);
        return Ok(if all_held {
            Exit::Success
        } else {
            Exit::ExpectationFailed
        });
    }
    let held = results
        .iter()
        .filter(|(_, e)| matches!(e, Exit::Success))
        .count();
    println!(
        "{} scenarios: expectations hold in {held}, fail in {}",
        results.len(),
        results.len() - held
    );
    for (path, exit) in &results {
        let verdict = match exit {
            Exit::Success => "all hold",
            Exit::ExpectationFailed => "FAILED",
        };
        println!("  {:<60} {verdict}", path.display());
    }
    Ok(if held == results.len() {
        Exit::Success
    } else {
        Exit::ExpectationFailed
    })
}

/// Runs one scenario file (`None`: the built-in default), its CSV files into `out` (`None`:
/// the default results directory). With `--json`, the report comes back as a document for the
/// caller to print (one for all files) instead of being printed.
fn run_file(
    args: &RunArgs,
    path: Option<&std::path::PathBuf>,
    out: Option<std::path::PathBuf>,
) -> Result<(Exit, Option<serde_json::Value>)> {
    let scenario = load_scenario(&path.cloned())?;
    let seed = args.seed.unwrap_or(scenario.seed);
    let runs = args.runs.unwrap_or(scenario.runs);
    if args.engine != Engine::Des && args.trace_events == EventsMode::Ids {
        bail!("live traces (turmoil and live engines) store events whole; drop --trace-events ids");
    }
    if args.engine != Engine::Des && scenario.program().is_some() {
        bail!(
            "program peers run in the des engine only; the turmoil and live engines run \
             relaysim's own peers (for the real SDK over real sockets: relaysim serve -- node \
             interop/ts-sdk/peers.mjs)"
        );
    }
    if args.engine != Engine::Live && !args.relay.is_empty() {
        bail!("--relay is for --engine live (the other engines simulate the scenario's relays)");
    }
    if args.engine != Engine::Live && args.key_nonce.is_some() {
        bail!("--key-nonce is for --engine live (the other engines derive keys from the seed)");
    }
    if args.trace.is_some() && runs > 1 {
        bail!("--trace records one run; add --runs 1 (the scenario asks for {runs})");
    }
    if let Some(path) = &args.trace {
        super::create_parent(path)?;
    }
    if let (Some(path), Engine::Des) = (&args.trace, args.engine) {
        let (_, text) = scenario.run_traced(seed, args.trace_events);
        super::write_file(path, &text)?;
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
    } else if args.engine == Engine::Live {
        // One live run takes wall-clock time, up to the scenario's duration: say so, and
        // tick while it runs.
        eprintln!(
            "{}: one live run on real sockets, up to {} of wall clock",
            scenario.name,
            humantime::format_duration(scenario.duration)
        );
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}: {elapsed} of wall clock")
                .expect("a valid template"),
        );
        bar.set_message(scenario.name.clone());
        bar.enable_steady_tick(std::time::Duration::from_secs(1));
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let report = match args.engine {
        Engine::Des => scenario.run_seeds_on(seed, runs, super::jobs(args.jobs), |done| {
            bar.set_position(done as u64)
        }),
        Engine::Turmoil | Engine::Live => {
            let given: std::collections::BTreeMap<String, String> =
                args.relay.iter().cloned().collect();
            let mut report = relaysim::stats::Report::new(&scenario.name);
            report.wall_clock = args.engine == Engine::Live;
            let key_nonce = (args.engine == Engine::Live).then(|| {
                let nonce = args.key_nonce.unwrap_or_else(fresh_key_nonce);
                eprintln!(
                    "{}: peers' keys from each seed and key nonce {nonce} \
                     (--key-nonce {nonce} reuses them)",
                    scenario.name
                );
                nonce
            });
            for i in 0..runs {
                let mut plan = scenario.plan(seed.wrapping_add(i as u64));
                if let Some(nonce) = key_nonce {
                    plan = plan.with_key_nonce(nonce);
                }
                let trace = args.trace.as_deref();
                let run = match args.engine {
                    Engine::Live => relaysim::live_engine::run(&plan, &given, trace)
                        .map_err(anyhow::Error::from),
                    _ => relaysim::turmoil_driver::run(&plan, trace).map_err(anyhow::Error::from),
                }
                .with_context(|| format!("run {} of {}", i + 1, scenario.name))?;
                if let Some(n) = run.counters.get(relaysim::live_engine::STALE_EVENTS) {
                    eprintln!(
                        "warning: {n} events made before run {} started reached its peers: a \
                         relay that stores events (strfry keeps ephemeral ones 300 s) fed it an \
                         earlier run's, whose peers had the same keys (the same seed and \
                         --key-nonce), or another party's. Calls may have answered old \
                         requests; leave out --key-nonce to keep runs apart",
                        i + 1
                    );
                }
                report.push(run);
                bar.set_position(i as u64 + 1);
            }
            if let Some(trace) = &args.trace {
                let relays = scenario.plan(seed).relays;
                // The relays' traces closed before the calls ended; their outcomes go in now.
                let workloads = scenario.workload_names();
                let outcomes = report.runs.last().map_or_else(Vec::new, |run| {
                    run.items
                        .iter()
                        .map(|i| relaysim::trace::OutcomeLine {
                            workload: workloads[i.workload].clone(),
                            client: scenario.client_name(i.client),
                            call: i.call,
                            tool: i.tool.to_owned(),
                            outcome: match &i.outcome {
                                relaysim::stats::Outcome::Completed => "completed".into(),
                                relaysim::stats::Outcome::Failed(c) => format!("failed:{c}"),
                            },
                            why: i.why.clone(),
                            started_us: None,
                            ended_us: None,
                        })
                        .collect()
                });
                for (name, _) in &relays {
                    let path = relaysim::live::relay_trace_path(trace, name, relays.len());
                    relaysim::trace::set_outcomes(&path, outcomes.clone()).with_context(|| {
                        format!("cannot write the outcomes into {}", path.display())
                    })?;
                    eprintln!("trace of relay {name} written to {}", path.display());
                }
            }
            report
        }
    };
    bar.finish_and_clear();
    let names = scenario.workload_names();
    let clients = scenario.client_names();
    let observes = match args.engine {
        Engine::Des => Observes::Everything,
        Engine::Live if !args.relay.is_empty() => Observes::CallsOnly,
        Engine::Turmoil | Engine::Live => Observes::RelayCounters,
    };
    let failed = scenario.check_observed(&report, observes);
    let unchecked = scenario.unchecked_observed(&report, observes);
    let out = match out {
        Some(out) => out,
        None => default_results_dir(path, args.engine)?,
    };
    output::write_csv(&report, &names, &clients, &out)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    let exit = if failed.is_empty() {
        Exit::Success
    } else {
        Exit::ExpectationFailed
    };
    if args.json {
        let mut document = output::to_json(&report, &names, &clients, &failed);
        document["expectations_unchecked"] = unchecked.clone().into();
        document["results"] = out.display().to_string().into();
        return Ok((exit, Some(document)));
    } else {
        if !scenario.description.is_empty() {
            println!("{}\n", scenario.description.trim());
        }
        print!("{}", output::summary_text(&report, &names));
        if let Some(seed) = report
            .failing_seeds()
            .values()
            .filter_map(|s| s.first())
            .min()
        {
            let file = path.map_or(String::new(), |p| format!(" {}", p.display()));
            println!("{}", reproduce_hint(&file, args.engine, &args.relay, *seed));
        }
        println!("results written to {}", out.display());
        if !unchecked.is_empty() {
            println!("expectations not checked by these runs:");
            for u in &unchecked {
                println!("  - {u}");
            }
        }
        if failed.is_empty() {
            println!("expectations: all hold");
        } else {
            println!("expectations FAILED:");
            for f in &failed {
                println!("  - {f}");
            }
        }
    }
    Ok((exit, None))
}

/// The command that reruns one failing seed with a trace: the whole command, with the relays
/// a live run was given by URL.
fn reproduce_hint(file: &str, engine: Engine, relays: &[(String, String)], seed: u64) -> String {
    let engine: String = match engine {
        Engine::Des => String::new(),
        Engine::Turmoil => " --engine turmoil".into(),
        Engine::Live => std::iter::once(" --engine live".to_owned())
            .chain(
                relays
                    .iter()
                    .map(|(name, url)| format!(" --relay {name}={url}")),
            )
            .collect(),
    };
    format!(
        "reproduce one with a trace: relaysim run{file}{engine} --seed {seed} --runs 1 \
         --trace trace-{seed}.jsonl"
    )
}

/// The file that says which scenario a results directory belongs to.
const OWNER_FILE: &str = "scenario.txt";

/// `results/<file name>/` (`-turmoil` or `-live` for those engines), claimed for this scenario file. A
/// directory another scenario file's results are in is refused, not overwritten.
fn default_results_dir(
    path: Option<&std::path::PathBuf>,
    engine: Engine,
) -> Result<std::path::PathBuf> {
    let (stem, source) = match path {
        Some(path) => super::stem_and_source(path),
        None => (
            "default".to_owned(),
            "the built-in default scenario".to_owned(),
        ),
    };
    let dir_name = match engine {
        Engine::Des => stem,
        Engine::Turmoil => format!("{stem}-turmoil"),
        Engine::Live => format!("{stem}-live"),
    };
    let dir = std::path::Path::new("results").join(dir_name);
    super::claim_results_dir(&dir, OWNER_FILE, &source)?;
    Ok(dir)
}

pub(super) fn load_scenario(path: &Option<std::path::PathBuf>) -> Result<Scenario> {
    let mut scenario = match path {
        Some(path) => Scenario::from_file(path)?,
        None => Scenario::from_toml_str(
            relaysim::scenario::DEFAULT_SCENARIO,
            "scenarios/default.toml (built in)",
        )?,
    };
    with_program_hosts(&mut scenario)?;
    Ok(scenario)
}

/// Node hosts for replaying a trace whose scenario has program peers (checked as
/// [`with_program_hosts`] checks them); none for any other trace.
pub(super) fn replay_hosts(trace: &relaysim::Trace) -> Result<relaysim::replay::Hosts> {
    let Ok(mut scenario) = relaysim::replay::scenario_of(trace, &None) else {
        return Ok(None);
    };
    with_program_hosts(&mut scenario)?;
    Ok(scenario.program().map(|_| {
        std::sync::Arc::new(relaysim::node_host::NodeHosts::new())
            as std::sync::Arc<dyn relaysim::sim::hosted::ProgramHosts>
    }))
}

/// Gives a scenario with program peers its node hosts, once node and the program's packages
/// are known to be there (with the fix when they are not).
pub(super) fn with_program_hosts(scenario: &mut Scenario) -> Result<()> {
    if let Some(program) = scenario.program() {
        let path = relaysim::node_host::program_path(program, scenario.base_dir());
        relaysim::node_host::check(&path)
            .map_err(|e| anyhow::anyhow!("program peers cannot run: {e}"))?;
        scenario.set_program_hosts(std::sync::Arc::new(relaysim::node_host::NodeHosts::new()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_run_s_reproduce_hint_keeps_the_relays_given_by_url() {
        let relays = [("far".to_owned(), "ws://127.0.0.1:7777".to_owned())];
        assert_eq!(
            reproduce_hint(" s.toml", Engine::Live, &relays, 3),
            "reproduce one with a trace: relaysim run s.toml --engine live --relay \
             far=ws://127.0.0.1:7777 --seed 3 --runs 1 --trace trace-3.jsonl"
        );
        assert!(reproduce_hint("", Engine::Des, &[], 1)
            .starts_with("reproduce one with a trace: relaysim run --seed 1"));
    }
}
