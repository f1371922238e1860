//! `relaysim validate`: check scenario, sweep and trace files without running anything.

use super::Exit;
use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub(super) struct ValidateArgs {
    /// Scenario (`.toml`), sweep (`.toml` with `[[axes]]`) or trace (`.jsonl`) files.
    #[arg(required = true)]
    files: Vec<std::path::PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// What a file turned out to be, and whether it is valid.
struct Checked {
    kind: &'static str,
    result: Result<String, String>,
}

fn check(path: &std::path::Path) -> Checked {
    if path.extension().is_some_and(|e| e == "jsonl") {
        return Checked {
            kind: "trace",
            result: relaysim::Trace::from_file(path)
                .map(|t| {
                    let (name, driver) = match &t.lines[0] {
                        relaysim::trace::Line::Header {
                            scenario, driver, ..
                        } => (scenario.clone(), driver.clone()),
                        _ => Default::default(),
                    };
                    let (_, seed, _, _) = t.header();
                    format!(
                        "{} lines, scenario {name:?}, seed {seed}, driver {driver}, {} calls",
                        t.lines.len(),
                        t.outcomes().len()
                    )
                })
                .map_err(|e| e.to_string()),
        };
    }
    // A sweep names its base scenario and has axes; anything else is a scenario.
    let is_sweep = relaysim::limits::read_text(path, relaysim::limits::MAX_SPEC_FILE_BYTES)
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .is_some_and(|t| t.contains_key("axes"));
    if is_sweep {
        Checked {
            kind: "sweep",
            result: relaysim::Sweep::from_file(path)
                .map(|s| format!("{} cells x {} seeds", s.cells.len(), s.spec.seeds))
                .map_err(|e| format!("{:#}", anyhow::Error::from(e))),
        }
    } else {
        Checked {
            kind: "scenario",
            result: relaysim::Scenario::from_file(path)
                .map(|s| {
                    format!(
                        "{:?}: {} workloads, {} runs from seed {}",
                        s.name,
                        s.workloads.len(),
                        s.runs,
                        s.seed
                    )
                })
                .map_err(|e| format!("{:#}", anyhow::Error::from(e))),
        }
    }
}

pub(super) fn validate(args: ValidateArgs) -> Result<Exit> {
    let checked: Vec<(&std::path::PathBuf, Checked)> =
        args.files.iter().map(|f| (f, check(f))).collect();
    let invalid = checked.iter().filter(|(_, c)| c.result.is_err()).count();
    if args.json {
        let list: Vec<serde_json::Value> = checked
            .iter()
            .map(|(f, c)| match &c.result {
                Ok(what) => serde_json::json!({
                    "file": f.display().to_string(), "kind": c.kind, "valid": true, "summary": what,
                }),
                Err(e) => serde_json::json!({
                    "file": f.display().to_string(), "kind": c.kind, "valid": false, "error": e,
                }),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        for (f, c) in &checked {
            match &c.result {
                Ok(what) => println!("ok       {} ({}): {what}", f.display(), c.kind),
                Err(e) => println!("INVALID  {} ({}):\n{}", f.display(), c.kind, indent(e)),
            }
        }
    }
    if invalid > 0 {
        bail!("{invalid} of {} files are invalid", checked.len());
    }
    Ok(Exit::Success)
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
