//! `relaysim soak`: many random scenarios, checked for what no relay may cause.

use super::Exit;
use anyhow::{Context as _, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use relaysim::soak::{SoakConfig, SoakPrograms, MAX_SOAK_RUNS};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub(super) struct SoakArgs {
    /// Random scenarios to generate and run.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=MAX_SOAK_RUNS))]
    runs: u64,
    /// The soak's seed: the same seed and run count always give the same scenarios and report.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs at once (default: the number of cores); the report does not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    jobs: Option<u16>,
    /// Repeat every Nth run and compare the two traces byte for byte (0: never).
    #[arg(long, default_value_t = 100)]
    determinism_every: u64,
    /// Write soak.txt and, for every run with a violation, its scenario (soak-<run>.toml,
    /// which `relaysim run` reproduces) into this directory.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Print the report as JSON instead of text, the machine's resource figures apart in
    /// `resources`.
    #[arg(long)]
    json: bool,
    /// Also run real programs: in every Nth run (`--program-every`) every peer runs this
    /// program (`ts-sdk`, or a path to your own), hosted by node in virtual time.
    #[arg(long)]
    program: Option<String>,
    /// With `--program`: every this many runs, from the first, is a program run.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    program_every: u64,
    /// Print the scenario of run N of this seed (as `--out` writes a run with a violation) and
    /// run nothing: `relaysim run` on it reproduces that run alone, to time it or measure its
    /// memory (the report names the slowest run).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..MAX_SOAK_RUNS))]
    scenario: Option<u64>,
}

pub(super) fn soak(args: SoakArgs) -> Result<Exit> {
    if let Some(index) = args.scenario {
        print!(
            "# soak --seed {} run {index}\n# reproduce: relaysim run soak-{index}.toml\n{}",
            args.seed,
            relaysim::soak::generate(args.seed, index).toml
        );
        return Ok(Exit::Success);
    }
    let programs = match &args.program {
        Some(program) => {
            let path = relaysim::node_host::program_path(program, std::path::Path::new("."));
            relaysim::node_host::check(&path)
                .map_err(|e| anyhow::anyhow!("program runs cannot run: {e}"))?;
            // A path of the user's is made absolute, so the runs and the reproduce commands
            // the report prints (`compare soak-N.toml --program …`, run beside soak-N.toml in
            // the output directory) find it wherever they run from.
            let program = if relaysim::node_host::is_shipped(program) {
                program.clone()
            } else {
                std::path::absolute(&path)?.to_string_lossy().into_owned()
            };
            Some(SoakPrograms {
                program,
                every: args.program_every,
                hosts: std::sync::Arc::new(relaysim::node_host::NodeHosts::new()),
            })
        }
        None => None,
    };
    let config = SoakConfig {
        runs: args.runs,
        seed: args.seed,
        jobs: super::jobs(args.jobs),
        determinism_every: args.determinism_every,
        programs,
    };
    let bar = ProgressBar::with_draw_target(Some(config.runs), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "soak [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let (report, resources) = relaysim::soak::soak(&config, |done| bar.set_position(done));
    bar.finish_and_clear();
    let wall = started.elapsed();
    let rss = peak_rss();
    let text = report.text();
    if !args.json {
        print!("{text}");
        // Resource figures come from the wall clock and the kernel: they vary between
        // machines and runs, so they are printed apart from the report and not written to
        // soak.txt.
        println!(
            "resources (this machine, not deterministic): {} wall with {} job(s), peak RSS {}, slowest run {}",
            human(wall),
            config.jobs,
            rss.map_or_else(|| "unknown".to_owned(), |b| format!("{:.0} MiB", b as f64 / 1048576.0)),
            resources.slowest.map_or_else(
                || "none".to_owned(),
                |(i, t)| format!("{} ({})", i, human(t))
            ),
        );
    }
    let mut written = Vec::new();
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the directory {}", dir.display()))?;
        let summary = dir.join("soak.txt");
        super::write_file(&summary, &text)?;
        written.push(summary);
        for f in &report.findings {
            let what: Vec<String> = f.violations.iter().map(|v| format!("# {v}")).collect();
            let reproduce = match &f.program {
                Some(p) => format!("relaysim compare soak-{}.toml --program {p}", f.index),
                None => format!("relaysim run soak-{}.toml", f.index),
            };
            let body = format!(
                "# soak --seed {} run {}:\n{}\n# reproduce: {reproduce}\n{}",
                config.seed,
                f.index,
                what.join("\n"),
                f.toml
            );
            let path = dir.join(format!("soak-{}.toml", f.index));
            super::write_file(&path, &body)?;
            written.push(path);
        }
        if !args.json {
            println!(
                "wrote {} ({} scenario(s) with violations)",
                dir.join("soak.txt").display(),
                report.findings.len()
            );
        }
    }
    if args.json {
        let mut document = report.to_json();
        if let Some(fields) = document.as_object_mut() {
            fields.insert("seed".to_owned(), config.seed.into());
            let slowest = resources
                .slowest
                .map(|(index, t)| json!({ "index": index, "wall_us": micros(t) }));
            fields.insert(
                "resources".to_owned(),
                json!({
                    "deterministic": false,
                    "wall_us": micros(wall),
                    "busy_us": micros(resources.busy),
                    "jobs": config.jobs,
                    "peak_rss_bytes": rss,
                    "slowest_run": slowest,
                }),
            );
            let files: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
            fields.insert(
                "out".to_owned(),
                args.out.as_ref().map(|d| d.display().to_string()).into(),
            );
            fields.insert("files".to_owned(), files.into());
        }
        println!("{}", serde_json::to_string_pretty(&document)?);
    }
    Ok(if report.findings.is_empty() {
        Exit::Success
    } else {
        Exit::ExpectationFailed
    })
}

/// The process's peak resident set size (`VmHWM`), where the kernel says (Linux).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn human(d: std::time::Duration) -> String {
    relaysim::stats::output::human_us(micros(d))
}

/// A duration in whole microseconds (saturating).
fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
