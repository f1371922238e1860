//! Reports as text, CSV and JSON.
//!
//! - `summary.csv`: one row per run and workload call: `run,seed,workload,client,call,tool,outcome,cause,latency_us,why`
//!   (`why`: for a call that ran out of time, what it awaited and what the relays refused and
//!   which connections dropped while it was open)
//!   (`cause` carries another implementation's own words after `": "` when it gave them).
//! - `latency.csv`: one row per metric: `metric,count,min_us,p50_us,p90_us,p99_us,p999_us,max_us`.
//! - `failures.csv`: one row per failure cause family: `cause,count`.

use super::{Outcome, Report, METRICS};
use serde_json::json;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Names the workloads of a report (index → name).
pub type WorkloadNames<'a> = &'a [String];

/// Names the clients of a report (index → name).
pub type ClientNames<'a> = &'a [String];

fn client_name(clients: ClientNames, index: usize) -> String {
    clients
        .get(index)
        .cloned()
        .unwrap_or_else(|| index.to_string())
}

/// A duration in microseconds for people: milliseconds below 10 s, then seconds below
/// 10 min, then minutes (CSV files keep microseconds).
pub fn human_us(us: u64) -> String {
    let secs = us as f64 / 1e6;
    if secs < 10.0 {
        format!("{:.1}ms", us as f64 / 1000.0)
    } else if secs < 600.0 {
        format!("{secs:.2}s")
    } else {
        format!("{:.1}min", secs / 60.0)
    }
}

/// The human-readable summary printed by `relaysim run`.
pub fn summary_text(report: &Report, workloads: WorkloadNames) -> String {
    let mut out = String::new();
    let mut seeds: Vec<u64> = report.runs.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    let _ = writeln!(
        out,
        "scenario {}  runs {}  seeds {}",
        report.scenario,
        report.runs.len(),
        seed_ranges(&seeds)
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<28} {:>6} {:>9} {:>7}  failure causes",
        "workload", "calls", "completed", "failed"
    );
    for (index, name) in workloads.iter().enumerate() {
        let items: Vec<_> = report.items().filter(|i| i.workload == index).collect();
        let done = items
            .iter()
            .filter(|i| i.outcome == Outcome::Completed)
            .count();
        let mut causes = std::collections::BTreeMap::<&str, usize>::new();
        for i in &items {
            if let Some(family) = i.outcome.family() {
                *causes.entry(family).or_default() += 1;
            }
        }
        let causes: Vec<String> = causes.iter().map(|(c, n)| format!("{c} ×{n}")).collect();
        let _ = writeln!(
            out,
            "{:<28} {:>6} {:>9} {:>7}  {}",
            name,
            items.len(),
            done,
            items.len() - done,
            causes.join(", ")
        );
    }
    let failing = report.failing_seeds();
    if !failing.is_empty() {
        let _ = writeln!(out, "\nfailing seeds:");
        for ((workload, family), seeds) in &failing {
            let name = workloads.get(*workload).map_or("?", String::as_str);
            let _ = writeln!(out, "  {name:<26} {family:<24} {}", seed_ranges(seeds));
        }
    }
    // Another implementation's own words tell failures of one family apart (a stalled reader
    // from a reordered one).
    let texts = report.failure_texts();
    if !texts.is_empty() {
        // Words often name a call's token, so there can be one line per failed call: the
        // first few are shown, all of them are in summary.csv and the trace.
        const SHOWN: usize = 8;
        let _ = writeln!(out, "\nin the implementation's own words:");
        for (text, n) in texts.iter().take(SHOWN) {
            let _ = writeln!(out, "  {text} ×{n}");
        }
        if texts.len() > SHOWN {
            let _ = writeln!(
                out,
                "  … and {} more (summary.csv has every call's)",
                texts.len() - SHOWN
            );
        }
    }
    // Failed calls: what each awaited, if it ran out of time, and what happened meanwhile.
    let whys: Vec<(u64, &super::Item)> = report
        .runs
        .iter()
        .flat_map(|r| r.items.iter().map(move |i| (r.seed, i)))
        .filter(|(_, i)| i.why.is_some())
        .collect();
    if !whys.is_empty() {
        const SHOWN: usize = 4;
        let _ = writeln!(out, "\nwhy calls failed:");
        for (seed, i) in whys.iter().take(SHOWN) {
            let name = workloads.get(i.workload).map_or("?", String::as_str);
            let cause = match &i.outcome {
                Outcome::Failed(c) => super::family(c),
                Outcome::Completed => "completed",
            };
            let _ = writeln!(
                out,
                "  seed {seed} {name} call {}: {cause}: {}",
                i.call,
                i.why.as_deref().unwrap_or_default()
            );
        }
        if whys.len() > SHOWN {
            let _ = writeln!(
                out,
                "  … and {} more (summary.csv has every call's)",
                whys.len() - SHOWN
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<24} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}  ({})",
        "metric",
        "count",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        if report.wall_clock {
            "wall clock"
        } else {
            "virtual time"
        }
    );
    for metric in METRICS {
        if let Some(row) = report.latency(metric) {
            let _ = writeln!(
                out,
                "{:<24} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
                metric,
                row.count,
                human_us(row.p50),
                human_us(row.p90),
                human_us(row.p99),
                human_us(row.p999),
                human_us(row.max)
            );
        }
    }
    // Streams: how many chunks the server wrote and the client read, per workload.
    let mut delivery = String::new();
    for (index, name) in workloads.iter().enumerate() {
        let (written, read) = report
            .items()
            .filter(|i| i.workload == index)
            .filter_map(|i| i.chunks)
            .fold((0u64, 0u64), |(w, r), (a, b)| (w + a, r + b));
        if written > 0 {
            let ratio = read as f64 / written as f64 * 100.0;
            let _ = writeln!(delivery, "{name:<28} {written:>9} {read:>9} {ratio:>8.1}%");
        }
    }
    if !delivery.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<28} {:>9} {:>9} {:>9}",
            "stream delivery", "written", "read", "ratio"
        );
        out.push_str(&delivery);
    }
    let _ = writeln!(out);
    let all = report.counters();
    let line = |resumable: bool| -> Vec<String> {
        all.iter()
            .filter(|(k, _)| k.starts_with("resumable.") == resumable)
            .map(|(k, v)| format!("{} {v}", k.trim_start_matches("resumable.")))
            .collect()
    };
    let resumable = line(true);
    if !resumable.is_empty() {
        let _ = writeln!(out, "resumable streams: {}", resumable.join(", "));
    }
    let counters = line(false);
    if counters.is_empty() {
        // A live run against relays relaysim does not serve observes calls, not relays.
        let _ = writeln!(out, "relay events: not observed");
    } else {
        let _ = writeln!(out, "relay events: {}", counters.join(", "));
    }
    let _ = writeln!(
        out,
        "completion {:.1}%   integrity violations {}",
        report.completion_ratio() * 100.0,
        report.integrity_violations()
    );
    for (seed, error) in report.program_errors() {
        let _ = writeln!(out, "program error (seed {seed}): {error}");
    }
    program_lines(&mut out, report);
    out
}

/// The lines the program peers logged, most frequent first: the SDK's own warnings and errors,
/// which say what went on in it even when every call completed.
fn program_lines(out: &mut String, report: &Report) {
    const SHOWN: usize = 8;
    let lines = report.program_lines();
    if lines.is_empty() {
        return;
    }
    let total: u64 = lines.values().sum();
    let mut lines: Vec<(&str, u64)> = lines.into_iter().collect();
    // Most frequent first; equal counts in the order of the text, so the block is the same
    // for the same runs.
    lines.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let noun = if total == 1 { "line" } else { "lines" };
    let _ = writeln!(out, "\nthe programs logged ({total} {noun}):");
    for (line, n) in lines.iter().take(SHOWN) {
        let _ = writeln!(out, "  {line} ×{n}");
    }
    if lines.len() > SHOWN {
        let _ = writeln!(
            out,
            "  … and {} more (the trace has each line kept)",
            lines.len() - SHOWN
        );
    }
}

/// Writes `summary.csv`, `latency.csv` and `failures.csv` into `dir` (created if needed).
pub fn write_csv(
    report: &Report,
    workloads: WorkloadNames,
    clients: ClientNames,
    dir: &Path,
) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut w = csv::Writer::from_path(dir.join("summary.csv"))?;
    w.write_record([
        "run",
        "seed",
        "workload",
        "client",
        "call",
        "tool",
        "outcome",
        "cause",
        "latency_us",
        "why",
    ])?;
    for (run_index, run) in report.runs.iter().enumerate() {
        for item in &run.items {
            let (outcome, cause) = match &item.outcome {
                Outcome::Completed => ("completed", String::new()),
                Outcome::Failed(c) => ("failed", c.clone()),
            };
            let name = workloads.get(item.workload).cloned().unwrap_or_default();
            let latency = item
                .latency
                .map(|l| l.as_micros().to_string())
                .unwrap_or_default();
            w.write_record([
                run_index.to_string(),
                run.seed.to_string(),
                name,
                client_name(clients, item.client),
                item.call.to_string(),
                item.tool.to_owned(),
                outcome.to_owned(),
                cause,
                latency,
                item.why.clone().unwrap_or_default(),
            ])?;
        }
    }
    w.flush()?;
    let mut w = csv::Writer::from_path(dir.join("latency.csv"))?;
    w.write_record([
        "metric", "count", "min_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
    ])?;
    for metric in METRICS {
        if let Some(r) = report.latency(metric) {
            w.write_record([metric.to_owned()].into_iter().chain(
                [r.count, r.min, r.p50, r.p90, r.p99, r.p999, r.max].map(|v| v.to_string()),
            ))?;
        }
    }
    w.flush()?;
    let mut w = csv::Writer::from_path(dir.join("failures.csv"))?;
    w.write_record(["cause", "count"])?;
    for (cause, count) in report.failures() {
        w.write_record([cause, count.to_string()])?;
    }
    w.flush()?;
    Ok(())
}

/// The report as one JSON document (`relaysim run --json`).
pub fn to_json(
    report: &Report,
    workloads: WorkloadNames,
    clients: ClientNames,
    expectation_failures: &[String],
) -> serde_json::Value {
    let latency: serde_json::Map<String, serde_json::Value> = METRICS
        .iter()
        .filter_map(|m| {
            report.latency(m).map(|r| {
                (
                    m.to_string(),
                    json!({ "count": r.count, "min_us": r.min, "p50_us": r.p50, "p90_us": r.p90, "p99_us": r.p99, "p999_us": r.p999, "max_us": r.max }),
                )
            })
        })
        .collect();
    let items: Vec<_> = report
        .runs
        .iter()
        .enumerate()
        .flat_map(|(run, r)| {
            r.items.iter().map(move |i| {
                json!({
                    "run": run, "seed": r.seed,
                    "workload": workloads.get(i.workload), "client": client_name(clients, i.client), "call": i.call, "tool": i.tool,
                    "outcome": match &i.outcome { Outcome::Completed => "completed".to_owned(), Outcome::Failed(c) => format!("failed:{c}") },
                    "latency_us": i.latency.map(|l| l.as_micros() as u64),
                    "why": i.why,
                })
            })
        })
        .collect();
    let mut out = json!({
        "scenario": report.scenario,
        "runs": report.runs.len(),
        "completion_ratio": report.completion_ratio(),
        "integrity_violations": report.integrity_violations(),
        "failures": report.failures(),
        "counters": report.counters(),
        "latency": latency,
        "items": items,
        "expectations_failed": expectation_failures,
    });
    let lines = report.program_lines();
    if !lines.is_empty() {
        out["program_lines"] = json!(lines);
    }
    let errors = report.program_errors();
    if !errors.is_empty() {
        out["program_errors"] = errors
            .iter()
            .map(|(seed, e)| json!({ "seed": seed, "error": e }))
            .collect();
    }
    out
}

/// Sorted seeds written as ranges: `1-3, 7, 9-10`.
pub fn seed_ranges(seeds: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seeds.len() {
        let mut j = i;
        while j + 1 < seeds.len() && seeds[j + 1] == seeds[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => seeds[i].to_string(),
            _ => format!("{}-{}", seeds[i], seeds[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_suits_them() {
        assert_eq!(human_us(149_815), "149.8ms");
        assert_eq!(human_us(9_999_900), "9999.9ms");
        assert_eq!(human_us(10_000_000), "10.00s");
        assert_eq!(human_us(149_815_300), "149.82s");
        assert_eq!(human_us(600_000_000), "10.0min");
    }

    #[test]
    fn seeds_read_as_ranges() {
        assert_eq!(seed_ranges(&[1, 2, 3, 7, 9, 10]), "1-3, 7, 9-10");
        assert_eq!(seed_ranges(&[4]), "4");
        assert_eq!(seed_ranges(&[]), "");
    }

    #[test]
    fn program_lines_are_tallied_per_peer_most_frequent_first_and_capped() {
        use crate::sim::world::{Observation, Observer, PeerId};
        let mut names = super::super::why::Names::default();
        names.peers.insert(PeerId::Server(0), "server".into());
        let mut c = super::super::Collector::named(names);
        let logged = |text: String| Observation::Logged {
            peer: PeerId::Server(0),
            text,
        };
        let t = std::time::Duration::from_secs(1);
        c.observe(t, &logged("rare".into()));
        for _ in 0..3 {
            c.observe(t, &logged("often".into()));
        }
        for i in 0..super::super::MAX_PROGRAM_LINES + 10 {
            c.observe(t, &logged(format!("line {i}")));
        }
        c.program_lines_not_kept(5);
        let mut report = Report::new("s");
        report.push(c.finish(1));
        let tally = report.program_lines();
        assert_eq!(tally.len(), super::super::MAX_PROGRAM_LINES + 1);
        assert_eq!(tally["server: often"], 3);
        // The lines past the distinct ones kept, and those the world did not keep.
        assert_eq!(tally[super::super::OTHER_PROGRAM_LINES], 12 + 5);
        let mut text = String::new();
        program_lines(&mut text, &report);
        let first = text.lines().nth(2).unwrap();
        assert!(text.contains("the programs logged (275 lines)"), "{text}");
        assert!(first.contains("(other lines) ×17"), "{text}");
        assert!(text.lines().nth(3).unwrap().contains("server: often ×3"));
        assert!(text.contains("… and 249 more"), "{text}");
    }
}
