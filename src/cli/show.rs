//! `relaysim show`: a trace as a picture (SVG and PNG), and what it shows in words.

use super::Exit;
use anyhow::{Context as _, Result};
use relaysim::show::{Timeline, Window};
use relaysim::trace::Trace;

#[derive(clap::Args, Debug)]
pub(super) struct ShowArgs {
    /// The trace (from `run --trace`, `shrink`, `record`, `serve --trace`).
    trace: std::path::PathBuf,
    /// Where to write the picture, without extension (a `.png` or `.svg` one is taken off):
    /// `.svg` and `.png` are written (default: the trace's path without `.jsonl`).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Show from this time on (`1.5s`, `300ms`; default: the start).
    #[arg(long, value_parser = parse_time)]
    from: Option<u64>,
    /// Show up to this time (default: the end).
    #[arg(long, value_parser = parse_time)]
    to: Option<u64>,
    /// Show only this call's life (its number, as in the trace's `call` fields).
    #[arg(long, conflicts_with_all = ["from", "to"])]
    call: Option<u64>,
    /// Print what the picture shows as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// A time into the run, in microseconds.
fn parse_time(text: &str) -> Result<u64, String> {
    humantime::parse_duration(text)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .map_err(|e| format!("{e} (write a time such as 1.5s, 300ms or 2min)"))
}

pub(super) fn show(args: ShowArgs) -> Result<Exit> {
    let trace = Trace::from_file(&args.trace)?;
    let timeline = Timeline::new(
        &trace,
        Window {
            from_us: args.from,
            to_us: args.to,
            call: args.call,
        },
    )?;
    let stem = match args.out.clone() {
        // `--out x.png` or `x.svg` names the picture itself: its stem, not `x.png.png`.
        Some(mut p) if p.extension().is_some_and(|e| e == "png" || e == "svg") => {
            p.set_extension("");
            p
        }
        Some(p) => p,
        None => {
            let mut p = args.trace.clone();
            if p.extension().is_some_and(|e| e == "jsonl") {
                p.set_extension("");
            }
            p
        }
    };
    // Appended, not replaced: `lossy.min` becomes `lossy.min.svg`, not `lossy.svg`.
    let with = |ext: &str| {
        let mut name = stem.clone().into_os_string();
        name.push(ext);
        std::path::PathBuf::from(name)
    };
    let svg = with(".svg");
    let png = with(".png");
    super::create_parent(&svg)?;
    relaysim::show::draw::write(&timeline, &svg, &png)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("cannot draw {}", svg.display()))?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&timeline.to_json(&svg, &png))?
        );
    } else {
        print!("{}", timeline.summary());
        println!("picture written to {} and {}", svg.display(), png.display());
    }
    Ok(Exit::Success)
}
