//! `relaysim compare`: a scenario under every pairing of implementations (behaviour presets
//! with their engines).

use super::Exit;
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use relaysim::scenario::Scenario;

#[derive(clap::Args, Debug)]
pub(super) struct CompareArgs {
    /// Scenario files (TOML).
    #[arg(required = true)]
    scenarios: Vec<std::path::PathBuf>,
    /// First seed (overrides each scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Runs per pairing (overrides each scenario's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=relaysim::limits::MAX_RUNS as i64))]
    runs: Option<u32>,
    /// Runs at once, one per thread (default: the number of cores); the report is the same
    /// for any value.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    jobs: Option<u16>,
    /// Where to write compare.csv (default results/compare/<file name>/, never another scenario
    /// file's directory; with several files, a directory per file under it).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Print the comparison as JSON instead of the tables (with several scenario files, one
    /// array with a comparison per file); each names its compare.csv in `csv`.
    #[arg(long)]
    json: bool,
    /// Add the real TypeScript SDK's row: the scenario's relays served live and
    /// interop/ts-sdk/peers.mjs (or PATH) run through them once (node 20; `npm ci` in its
    /// directory first). Workloads map onto its calls: request → echo, download → large,
    /// stream → stream; others are left out, saying why.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "interop/ts-sdk/peers.mjs")]
    ts_sdk: Option<std::path::PathBuf>,
    /// Add the row of a program run by every peer in virtual time (`ts-sdk`: the pinned
    /// TypeScript SDK, or a path), beside the presets that model it, and say where the ts-sdk
    /// preset and the real program disagree (node 20; `npm ci` in interop/ts-sdk and
    /// interop/node-host first).
    #[arg(long, value_name = "PROGRAM")]
    program: Option<String>,
    /// With --ts-sdk: each of its calls' timeout.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    ts_sdk_timeout: std::time::Duration,
}

pub(super) fn compare(args: CompareArgs) -> Result<Exit> {
    let pairings = relaysim::compare::pairings().len();
    if pairings == 1 {
        eprintln!(
            "note: this relaysim was built without the contextvm-sdk feature, so relaysim/relaysim \
             is the only pairing; build with `--features contextvm-sdk` to compare"
        );
    }
    if let Some(program) = &args.ts_sdk {
        // Before minutes of comparing, not after.
        relaysim::compare::ts_sdk::check(program)?;
    }
    let mut documents = Vec::new();
    for path in &args.scenarios {
        let scenario = Scenario::from_file(path)?;
        // Named after the file (two files may share a scenario name), and with several files
        // under --out, each in its own directory.
        let (stem, source) = super::stem_and_source(path);
        let dir = match (&args.out, args.scenarios.len()) {
            (Some(out), 1) => out.clone(),
            (Some(out), _) => out.join(&stem),
            (None, _) => {
                let dir = std::path::Path::new("results/compare").join(&stem);
                super::claim_results_dir(&dir, "scenario.txt", &source)?;
                dir
            }
        };

        let seed = args.seed.unwrap_or(scenario.seed);
        let runs = args.runs.unwrap_or(scenario.runs);
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
        let comparison =
            relaysim::compare::compare(&scenario, seed, runs, super::jobs(args.jobs), || {
                bar.inc(1)
            });
        bar.finish_and_clear();
        let mut comparison = comparison;
        if let Some(program) = &args.program {
            let path = relaysim::node_host::program_path(program, scenario.base_dir());
            relaysim::node_host::check(&path)
                .map_err(|e| anyhow::anyhow!("--program cannot run: {e}"))?;
            let hosts = std::sync::Arc::new(relaysim::node_host::NodeHosts::new());
            relaysim::compare::add_program_row(
                &mut comparison,
                &scenario,
                program,
                hosts,
                super::jobs(args.jobs),
                || {},
            );
        }
        if let Some(program) = &args.ts_sdk {
            comparison.ts_sdk = Some(ts_sdk_row(&scenario, seed, program, args.ts_sdk_timeout)?);
        }
        if !args.json {
            print!("{}", comparison.text());
        }
        comparison
            .write_csv(&dir)
            .with_context(|| format!("cannot write {}", dir.display()))?;
        if args.json {
            let mut document = comparison.to_json();
            if let Some(fields) = document.as_object_mut() {
                let csv = dir.join("compare.csv").display().to_string();
                fields.insert("csv".to_owned(), csv.into());
            }
            documents.push(document);
        } else {
            println!("compare.csv written to {}", dir.display());
            println!();
        }
    }
    if args.json {
        // One file, one object; several, an array of them.
        let document = match documents.len() {
            1 => documents.remove(0),
            _ => serde_json::Value::Array(documents),
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
    }
    Ok(Exit::Success)
}

/// Runs the TypeScript SDK through `scenario`'s relays, live, and tallies its outcomes.
fn ts_sdk_row(
    scenario: &Scenario,
    seed: u64,
    program: &std::path::Path,
    timeout: std::time::Duration,
) -> Result<relaysim::compare::ForeignRow> {
    use relaysim::compare::ts_sdk;
    let plan = ts_sdk::plan(scenario, seed);
    let names: Vec<&str> = plan.calls.iter().map(|(c, _)| *c).collect();
    eprintln!(
        "{}: running {} through the relays of {} served live (calls: {})",
        ts_sdk::LABEL,
        program.display(),
        scenario.name,
        names.join(",")
    );
    let workloads = scenario.workload_names().len();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let results = match runtime.block_on(ts_sdk::run(&plan, program, timeout)) {
        Ok(outcomes) => plan.results(&outcomes, workloads),
        // The pairings' tables stand without the row: say why it is empty and go on.
        Err(e) => {
            eprintln!("{}: not run: {e}", ts_sdk::LABEL);
            let why = e.to_string();
            let why = why.lines().next().unwrap_or_default();
            let mut row = relaysim::compare::ForeignRow {
                label: ts_sdk::LABEL.to_owned(),
                results: vec![None; workloads],
                skipped: plan.skipped.clone(),
            };
            for w in 0..workloads {
                row.skipped.entry(w).or_insert_with(|| why.to_owned());
            }
            return Ok(row);
        }
    };
    Ok(relaysim::compare::ForeignRow {
        label: ts_sdk::LABEL.to_owned(),
        results,
        skipped: plan.skipped.clone(),
    })
}
