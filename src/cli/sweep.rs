//! `relaysim sweep` and `relaysim merge`: parameter sweeps, their shards, plots and recommendation.

use super::Exit;
use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use relaysim::sweep::Sweep;

#[derive(clap::Args, Debug)]
pub(super) struct SweepArgs {
    /// The sweep file (TOML).
    sweep: std::path::PathBuf,
    /// Cells run at once (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory (default results/<sweep>/).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Run only shard I of N (cells i with i % N == I), e.g. `--shard 2/8`.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
}

#[derive(clap::Args, Debug)]
pub(super) struct MergeArgs {
    /// The sweep file the shards ran.
    sweep: std::path::PathBuf,
    /// The shards' sweep.csv files.
    #[arg(required = true)]
    shards: Vec<std::path::PathBuf>,
    /// Output directory (default results/<sweep>/).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

pub(super) fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: write the shard as I/N, e.g. 0/4"))?;
    let i: usize = i
        .parse()
        .map_err(|_| format!("{s:?}: I must be a number"))?;
    let n: usize = n
        .parse()
        .map_err(|_| format!("{s:?}: N must be a number"))?;
    if n == 0 || i >= n {
        return Err(format!("{s:?}: need 0 <= I < N"));
    }
    Ok((i, n))
}

pub(super) fn sweep(args: SweepArgs) -> Result<Exit> {
    let sweep = Sweep::from_file(&args.sweep)?;
    let shard = args.shard.unwrap_or((0, 1));
    let jobs = args.jobs.unwrap_or_else(relaysim::parallel::default_jobs);
    let cells = (0..sweep.cells.len())
        .filter(|i| i % shard.1 == shard.0)
        .count();
    let bar = ProgressBar::with_draw_target(Some(cells as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} cells, {elapsed} elapsed, eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_message(sweep.name.clone());
    let rows = sweep.run(jobs, shard, || bar.inc(1))?;
    bar.finish_and_clear();
    let out = args
        .out
        .unwrap_or_else(|| std::path::Path::new("results").join(&sweep.name));
    if shard.1 > 1 {
        relaysim::sweep::write_csv(&out.join("sweep.csv"), &sweep.axes(), &rows)?;
        println!(
            "shard {}/{}: {} of {} cells written to {}",
            shard.0,
            shard.1,
            rows.len(),
            sweep.cells.len(),
            out.join("sweep.csv").display()
        );
        println!(
            "merge the shards with: relaysim merge {} <shard dirs>/sweep.csv",
            args.sweep.display()
        );
        return Ok(Exit::Success);
    }
    finish_sweep(&sweep, &rows, &out)
}

pub(super) fn merge(args: MergeArgs) -> Result<Exit> {
    let sweep = Sweep::from_file(&args.sweep)?;
    let mut rows = Vec::new();
    for path in &args.shards {
        let (axes, mut r) = relaysim::sweep::read_csv(path)?;
        if axes != sweep.axes() {
            bail!(
                "{}: its axes {:?} are not the sweep's {:?}",
                path.display(),
                axes,
                sweep.axes()
            );
        }
        rows.append(&mut r);
    }
    rows.sort_by_key(|r| r.cell);
    rows.dedup_by_key(|r| r.cell);
    if rows.len() != sweep.cells.len() {
        eprintln!(
            "warning: {} of {} cells present; the missing shards' cells are left out",
            rows.len(),
            sweep.cells.len()
        );
    }
    let out = args
        .out
        .unwrap_or_else(|| std::path::Path::new("results").join(&sweep.name));
    finish_sweep(&sweep, &rows, &out)
}

pub(super) fn finish_sweep(
    sweep: &Sweep,
    rows: &[relaysim::sweep::Row],
    out: &std::path::Path,
) -> Result<Exit> {
    let axes = sweep.axes();
    relaysim::sweep::write_csv(&out.join("sweep.csv"), &axes, rows)?;
    for plot in &sweep.spec.plots {
        relaysim::sweep::plot::draw(plot, &axes, rows, out)
            .map_err(|e| anyhow::anyhow!("plot {}: {e}", plot.file))?;
    }
    println!(
        "sweep {}: {} cells x {} seeds; results in {}",
        sweep.name,
        rows.len(),
        sweep.spec.seeds,
        out.display()
    );
    if let Some(spec) = &sweep.spec.recommend {
        let recs = relaysim::sweep::recommend(spec, &axes, rows);
        let text: String = recs.iter().map(|r| format!("{}\n", r.text)).collect();
        println!(
            "recommendation (lowest {} with completion >= {}):",
            spec.minimise, spec.min_completion_ratio
        );
        for r in &recs {
            println!("  {}", r.text);
        }
        std::fs::write(out.join("recommendation.txt"), text)?;
    }
    Ok(Exit::Success)
}
