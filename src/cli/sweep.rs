//! `relaysim sweep` and `relaysim merge`: parameter sweeps, their shards, plots and recommendation.

use super::Exit;
use anyhow::{bail, Context as _, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use relaysim::sweep::{Recommendation, Sweep};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub(super) struct SweepArgs {
    /// The sweep file (TOML).
    sweep: std::path::PathBuf,
    /// Cells run at once (default: the number of cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    jobs: Option<u16>,
    /// Output directory (default results/<file name>/, never another sweep file's).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Run only shard I of N (cells i with i % N == I), e.g. `--shard 2/8`.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Print what was run and written, and the recommendation, as JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct MergeArgs {
    /// The sweep file the shards ran.
    sweep: std::path::PathBuf,
    /// The shards' sweep.csv files.
    #[arg(required = true)]
    shards: Vec<std::path::PathBuf>,
    /// Output directory (default results/<file name>/, never another sweep file's).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Print what was merged and written, and the recommendation, as JSON instead of text.
    #[arg(long)]
    json: bool,
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
    let mut sweep = Sweep::from_file(&args.sweep)?;
    if let Some((program, base)) = sweep.program()? {
        let path = relaysim::node_host::program_path(&program, &base);
        relaysim::node_host::check(&path)
            .map_err(|e| anyhow::anyhow!("program peers cannot run: {e}"))?;
        sweep.set_program_hosts(std::sync::Arc::new(relaysim::node_host::NodeHosts::new()));
    }
    // Claimed before any cell runs, so a refused directory costs nothing.
    let out = match args.out {
        Some(out) => out,
        None => default_out(&args.sweep)?,
    };
    let shard = args.shard.unwrap_or((0, 1));
    let jobs = super::jobs(args.jobs);
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
    if shard.1 > 1 {
        let csv = out.join("sweep.csv");
        relaysim::sweep::write_csv(&csv, &sweep.axes(), &rows)?;
        if args.json {
            let document = json!({
                "sweep": sweep.name,
                "shard": { "index": shard.0, "count": shard.1 },
                "cells": rows.len(),
                "total_cells": sweep.cells.len(),
                "seeds": sweep.spec.seeds,
                "out": out.display().to_string(),
                "files": [csv.display().to_string()],
            });
            println!("{}", serde_json::to_string_pretty(&document)?);
            return Ok(Exit::Success);
        }
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
    finish_sweep(&sweep, &rows, &out, args.json)
}

/// `results/<sweep file name>/`, claimed for this sweep file (a directory holding another
/// sweep's results is refused, not overwritten).
fn default_out(path: &std::path::Path) -> Result<std::path::PathBuf> {
    let (stem, source) = super::stem_and_source(path);
    let dir = std::path::Path::new("results").join(stem);
    super::claim_results_dir(&dir, "sweep.txt", &source)?;
    Ok(dir)
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
    let out = match args.out {
        Some(out) => out,
        None => default_out(&args.sweep)?,
    };
    finish_sweep(&sweep, &rows, &out, args.json)
}

/// Writes a whole sweep's results (sweep.csv, the plots, the recommendation) into `out` and
/// prints what was written, as text or (`json`) as one JSON document.
pub(super) fn finish_sweep(
    sweep: &Sweep,
    rows: &[relaysim::sweep::Row],
    out: &std::path::Path,
    json: bool,
) -> Result<Exit> {
    let axes = sweep.axes();
    let mut files = vec![out.join("sweep.csv")];
    relaysim::sweep::write_csv(&files[0], &axes, rows)?;
    for plot in &sweep.spec.plots {
        relaysim::sweep::plot::draw(plot, &axes, rows, out)
            .map_err(|e| anyhow::anyhow!("plot {}: {e}", plot.file))?;
        files.push(out.join(format!("{}.svg", plot.file)));
        files.push(out.join(format!("{}.png", plot.file)));
    }
    if json {
        let recommendation = match &sweep.spec.recommend {
            Some(spec) => {
                let recs = relaysim::sweep::recommend(spec, &axes, rows);
                let path = out.join("recommendation.txt");
                write_recommendation(&path, &recs)?;
                files.push(path);
                json!({
                    "choose": spec.choose,
                    "by": spec.by,
                    "minimise": spec.minimise,
                    "min_completion_ratio": spec.min_completion_ratio,
                    "recommendations": recs.iter().map(recommendation_json).collect::<Vec<_>>(),
                })
            }
            None => serde_json::Value::Null,
        };
        let document = json!({
            "sweep": sweep.name,
            "cells": rows.len(),
            "total_cells": sweep.cells.len(),
            "seeds": sweep.spec.seeds,
            "out": out.display().to_string(),
            "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "recommendation": recommendation,
        });
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(Exit::Success);
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
        println!(
            "recommendation (lowest {} with completion >= {}):",
            spec.minimise, spec.min_completion_ratio
        );
        for r in &recs {
            println!("  {}", r.text);
        }
        write_recommendation(&out.join("recommendation.txt"), &recs)?;
    }
    Ok(Exit::Success)
}

/// Writes recommendation.txt: one sentence a line.
fn write_recommendation(path: &std::path::Path, recs: &[Recommendation]) -> Result<()> {
    let text: String = recs.iter().map(|r| format!("{}\n", r.text)).collect();
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// One recommendation as JSON: its group (axis → value, in the `by` order), the value
/// recommended (`null` when no cell met the completion bound), the values tied with it, and
/// the sentence.
fn recommendation_json(r: &Recommendation) -> serde_json::Value {
    let group: serde_json::Map<String, serde_json::Value> = r
        .group
        .iter()
        .map(|(axis, value)| (axis.clone(), value.clone().into()))
        .collect();
    json!({ "group": group, "value": r.value, "ties": r.ties, "text": r.text })
}
