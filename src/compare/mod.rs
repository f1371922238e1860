//! Implementations side by side: one scenario, the same seeds, every pairing of server and
//! client implementations, compared call by call. What differs between implementations is the
//! headline.
//!
//! An implementation is a behaviour preset with its engines: `relaysim`, and with the
//! `contextvm-sdk` feature `ts-sdk` and `rust-sdk` (the SDKs' transports around the
//! contextvm-sdk crate's engines), so a pairing pairs whole implementations.

#[cfg(feature = "live")]
pub mod ts_sdk;

use crate::scenario::Scenario;
use crate::stats::{Outcome, Report};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// Which implementation (behaviour preset or the scenario's own `[behaviours.NAME]` table,
/// and its engines) each side runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pairing {
    /// The servers' preset or table.
    pub server: String,
    /// The clients' preset or table.
    pub client: String,
}

impl Pairing {
    /// `server/client`, as the tables name it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.server, self.client)
    }
}

/// The presets this build can run: the SDK presets need the SDK's engines.
pub fn presets() -> Vec<&'static str> {
    crate::peer::behaviour::PRESETS
        .into_iter()
        .filter(|name| *name == "relaysim" || cfg!(feature = "contextvm-sdk"))
        .collect()
}

/// How one workload fared under one pairing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadResult {
    /// Calls made.
    pub calls: usize,
    /// Calls completed.
    pub completed: usize,
    /// Failure causes and their counts.
    pub causes: BTreeMap<String, usize>,
    /// Latency of the completed calls (call to result), sorted. Failed calls are left out: a
    /// pairing that fails fast must not look fast.
    pub latencies: Vec<Duration>,
}

impl WorkloadResult {
    /// Its line in a workload table, labelled `label`.
    fn table_row(&self, label: &str) -> String {
        let ms = |d: Option<Duration>| {
            d.map_or("-".to_owned(), |d| {
                crate::stats::output::human_us(micros(d))
            })
        };
        let causes: Vec<String> = self
            .causes
            .iter()
            .map(|(c, n)| format!("{c}×{n}"))
            .collect();
        format!(
            "{:<30} {:>10} {:>12} {:>12}  {}",
            label,
            format!("{}/{}", self.completed, self.calls),
            ms(self.quantile(0.5)),
            ms(self.quantile(0.99)),
            causes.join(", ")
        )
    }

    /// Its fields in `--json`: calls, completed, causes, and the p50 and p99 of the completed
    /// calls in microseconds (`null` when none completed).
    fn json_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let serde_json::Value::Object(fields) = serde_json::json!({
            "calls": self.calls,
            "completed": self.completed,
            "causes": self.causes,
            "p50_us": self.quantile(0.5).map(micros),
            "p99_us": self.quantile(0.99).map(micros),
        }) else {
            unreachable!("a json! object literal is an object")
        };
        fields
    }

    /// Its cells in `compare.csv` after server, client and workload:
    /// `calls,completed,failed,causes,p50_us,p99_us`. Causes are `cause:count` joined by `;`;
    /// a `;` inside a cause (another program's own words may hold one) becomes `,`.
    fn csv_cells(&self) -> [String; 6] {
        let us = |d: Option<Duration>| d.map_or(String::new(), |d| micros(d).to_string());
        let causes: Vec<String> = self
            .causes
            .iter()
            .map(|(c, n)| format!("{}:{n}", c.replace(';', ",")))
            .collect();
        [
            self.calls.to_string(),
            self.completed.to_string(),
            (self.calls - self.completed).to_string(),
            causes.join(";"),
            us(self.quantile(0.5)),
            us(self.quantile(0.99)),
        ]
    }

    /// The latency at quantile `q` (0..=1), nearest rank.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.latencies.is_empty() {
            return None;
        }
        let rank =
            ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        Some(self.latencies[rank - 1])
    }

    /// `completed/calls`, with the causes of the rest.
    pub fn summary(&self) -> String {
        let mut s = format!("{}/{}", self.completed, self.calls);
        for (cause, n) in &self.causes {
            let _ = write!(s, " {cause}×{n}");
        }
        s
    }
}

/// One scenario run under every pairing.
#[derive(Debug)]
pub struct Comparison {
    /// The scenario's name.
    pub scenario: String,
    /// Its workloads' names.
    pub workloads: Vec<String>,
    /// The seeds every pairing ran.
    pub seeds: Vec<u64>,
    /// Each pairing's report.
    pub reports: Vec<(Pairing, Report)>,
    /// The real TypeScript SDK's row (`compare --ts-sdk`), when it ran.
    pub ts_sdk: Option<ForeignRow>,
}

/// A row from a program run through live relays (today: the TypeScript SDK), beside the
/// pairings: one wall-clock run, so its counts are calls, not seeds × calls.
#[derive(Debug, Clone)]
pub struct ForeignRow {
    /// Its label in the tables.
    pub label: String,
    /// Per workload: how it fared, or `None` when the program has no such call.
    pub results: Vec<Option<WorkloadResult>>,
    /// Why workloads were left out.
    pub skipped: BTreeMap<usize, String>,
}

impl ForeignRow {
    /// Completed calls / calls over every workload it ran.
    pub fn completion_ratio(&self) -> f64 {
        let (calls, completed) = self
            .results
            .iter()
            .flatten()
            .fold((0, 0), |(c, k), r| (c + r.calls, k + r.completed));
        if calls == 0 {
            0.0
        } else {
            completed as f64 / calls as f64
        }
    }

    /// Failure causes and their counts over every workload it ran.
    pub fn failures(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for r in self.results.iter().flatten() {
            for (cause, n) in &r.causes {
                *out.entry(cause.clone()).or_default() += *n as u64;
            }
        }
        out
    }
}

/// Every pairing of the presets in this build, relaysim/relaysim first.
pub fn pairings() -> Vec<Pairing> {
    let all = presets();
    let mut out = Vec::new();
    for server in &all {
        for client in &all {
            out.push(Pairing {
                server: (*server).to_owned(),
                client: (*client).to_owned(),
            });
        }
    }
    out
}

/// The pairings `scenario` is compared under: every preset of this build, and the scenario's
/// own `[behaviours.NAME]` tables beside them, each on the sides it fits (a table that sets
/// servers' knobs is no client's). A custom behaviour is compared, never replaced.
pub fn pairings_for(scenario: &Scenario) -> Vec<Pairing> {
    use crate::peer::behaviour::Role;
    // Presets and tables alike, each on the sides it fits with engines this build has.
    let names: Vec<String> = presets()
        .into_iter()
        .map(str::to_owned)
        .chain(scenario.behaviour_tables())
        .collect();
    let side = |role| {
        names
            .iter()
            .filter(|n| scenario.can_run_behaviour(n, role))
            .cloned()
            .collect::<Vec<_>>()
    };
    let clients = side(Role::Client);
    side(Role::Server)
        .into_iter()
        .flat_map(|server| {
            clients.iter().map(move |client| Pairing {
                server: server.clone(),
                client: client.clone(),
            })
        })
        .collect()
}

/// Runs `scenario` `runs` times from `first_seed` under every pairing, `jobs` runs at once;
/// `progress` is called after each run. The result does not depend on `jobs`.
pub fn compare(
    scenario: &Scenario,
    first_seed: u64,
    runs: u32,
    jobs: usize,
    mut progress: impl FnMut(),
) -> Comparison {
    let reports = pairings_for(scenario)
        .into_iter()
        .map(|pairing| {
            let s = scenario
                .with_presets(&pairing.server, &pairing.client)
                .expect("pairings name presets this build runs");
            (
                pairing,
                s.run_seeds_on(first_seed, runs, jobs, |_| progress()),
            )
        })
        .collect();
    Comparison {
        scenario: scenario.name.clone(),
        workloads: scenario.workload_names(),
        seeds: (0..runs as u64).map(|k| first_seed + k).collect(),
        reports,
        ts_sdk: None,
    }
}

/// The pairing name of a program on both sides (`relaysim compare --program`).
pub const PROGRAM: &str = "program";

/// Adds to `comparison` the row of `scenario` with every peer running `program`, hosted by
/// `hosts` (the real code beside the presets that model it), over the same seeds.
pub fn add_program_row(
    comparison: &mut Comparison,
    scenario: &Scenario,
    program: &str,
    hosts: std::sync::Arc<dyn crate::sim::hosted::ProgramHosts>,
    jobs: usize,
    mut progress: impl FnMut(),
) {
    let s = scenario.with_program(program, hosts);
    let first = comparison.seeds.first().copied().unwrap_or(scenario.seed);
    let runs = comparison.seeds.len() as u32;
    let report = s.run_seeds_on(first, runs, jobs, |_| progress());
    let pairing = Pairing {
        server: PROGRAM.to_owned(),
        client: PROGRAM.to_owned(),
    };
    comparison.reports.push((pairing, report));
}

impl Comparison {
    /// The workloads where the `preset` pairing (on both sides) and the program row complete a
    /// different number of calls, each with the two summaries: where the model of the code
    /// and the code disagree.
    pub fn preset_against_program(&self, preset: &str) -> Vec<(String, String, String)> {
        let find = |name: &str| {
            self.reports
                .iter()
                .position(|(p, _)| p.server == name && p.client == name)
        };
        let (Some(model), Some(real)) = (find(preset), find(PROGRAM)) else {
            return Vec::new();
        };
        (0..self.workloads.len())
            .filter_map(|w| {
                let results = self.workload(w);
                let (a, b) = (&results[model].1, &results[real].1);
                // Whether the calls end alike: a program's causes are named apart (its own
                // words: `program-timeout`, `program-error`), so only completions compare.
                let key = |r: &WorkloadResult| (r.calls, r.completed);
                (key(a) != key(b)).then(|| (self.workloads[w].clone(), a.summary(), b.summary()))
            })
            .collect()
    }

    /// How workload `index` fared under each pairing.
    pub fn workload(&self, index: usize) -> Vec<(Pairing, WorkloadResult)> {
        self.reports
            .iter()
            .map(|(pairing, report)| {
                let items: Vec<_> = report.items().filter(|i| i.workload == index).collect();
                let mut causes = BTreeMap::new();
                for i in &items {
                    if let Some(family) = i.outcome.family() {
                        *causes.entry(family.to_owned()).or_default() += 1;
                    }
                }
                let mut latencies: Vec<Duration> = items
                    .iter()
                    .filter(|i| i.outcome == Outcome::Completed)
                    .filter_map(|i| i.latency)
                    .collect();
                latencies.sort();
                let result = WorkloadResult {
                    calls: items.len(),
                    completed: items
                        .iter()
                        .filter(|i| i.outcome == Outcome::Completed)
                        .count(),
                    causes,
                    latencies,
                };
                (pairing.clone(), result)
            })
            .collect()
    }

    /// The workloads whose outcomes (calls, completed count and failure causes) differ
    /// between pairings, with each pairing's summary.
    pub fn differences(&self) -> Vec<(String, Vec<(Pairing, String)>)> {
        (0..self.workloads.len())
            .filter_map(|w| {
                let results = self.workload(w);
                let key = |r: &WorkloadResult| (r.calls, r.completed, r.causes.clone());
                let first = results.first().map(|(_, r)| key(r));
                let same = results.iter().all(|(_, r)| Some(key(r)) == first);
                (!same).then(|| {
                    let summaries = results
                        .iter()
                        .map(|(p, r)| (p.clone(), r.summary()))
                        .collect();
                    (self.workloads[w].clone(), summaries)
                })
            })
            .collect()
    }

    /// The side-by-side tables `relaysim compare` prints.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let seeds: Vec<String> = self.seeds.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "scenario {}  seeds {}  pairings (server/client): {}",
            self.scenario,
            seeds.join(","),
            self.reports
                .iter()
                .map(|(p, _)| p.label())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<30} {:>10}  {:<40}",
            "pairing", "completion", "failure causes"
        );
        let completion_row =
            |out: &mut String, label: &str, ratio: f64, failures: BTreeMap<String, u64>| {
                let causes: Vec<String> =
                    failures.iter().map(|(c, n)| format!("{c}×{n}")).collect();
                let _ = writeln!(
                    out,
                    "{:<30} {:>9.1}%  {}",
                    label,
                    ratio * 100.0,
                    causes.join(", ")
                );
            };
        for (pairing, report) in &self.reports {
            completion_row(
                &mut out,
                &pairing.label(),
                report.completion_ratio(),
                report.failures(),
            );
        }
        if let Some(row) = &self.ts_sdk {
            completion_row(&mut out, &row.label, row.completion_ratio(), row.failures());
        }
        for (w, name) in self.workloads.iter().enumerate() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "{:<30} {:>10} {:>12} {:>12}  failure causes",
                format!("workload {name}"),
                "completed",
                "ok p50",
                "ok p99"
            );
            for (pairing, r) in self.workload(w) {
                let _ = writeln!(out, "{}", r.table_row(&pairing.label()));
            }
            if let Some(row) = &self.ts_sdk {
                let line = match row.results.get(w).and_then(Option::as_ref) {
                    Some(r) => r.table_row(&row.label),
                    None => format!(
                        "{:<30} {:>10}  {}",
                        row.label,
                        "not run",
                        row.skipped.get(&w).map_or("", String::as_str)
                    ),
                };
                let _ = writeln!(out, "{line}");
            }
        }
        if self.ts_sdk.is_some() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "{}: the pinned @contextvm/sdk through the scenario's relays served live, one \
                 wall-clock run, calls one after another (not among the differences below)",
                self.ts_sdk.as_ref().map_or("", |row| row.label.as_str())
            );
        }
        let _ = writeln!(out);
        let differences = self.differences();
        if differences.is_empty() {
            let _ = writeln!(
                out,
                "no differences: every pairing ended every workload alike"
            );
        } else {
            let _ = writeln!(out, "differences:");
            for (workload, summaries) in differences {
                let list: Vec<String> = summaries
                    .iter()
                    .map(|(p, s)| format!("{} {s}", p.label()))
                    .collect();
                let _ = writeln!(out, "  {workload}: {}", list.join("; "));
            }
        }
        let has = |name: &str| self.reports.iter().any(|(p, _)| p.server == name);
        if has(PROGRAM) && !has("ts-sdk") {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "no ts-sdk preset row to hold the program against: build with --features contextvm-sdk"
            );
        } else if has(PROGRAM) {
            let _ = writeln!(out);
            let disagreements = self.preset_against_program("ts-sdk");
            if disagreements.is_empty() {
                let _ = writeln!(
                    out,
                    "the ts-sdk preset and the real program complete the same calls of every workload"
                );
            } else {
                let _ = writeln!(
                    out,
                    "where the ts-sdk preset and the real program complete different calls:"
                );
                for (workload, model, real) in disagreements {
                    let _ = writeln!(out, "  {workload}: preset {model}; program {real}");
                }
            }
        }
        out
    }

    /// The comparison as one JSON document (`relaysim compare --json`): the scenario, its
    /// seeds, each pairing's completion ratio and failures, each workload's results under
    /// every pairing (latency quantiles of the completed calls in microseconds, `null` when
    /// none completed), and the workloads whose outcomes differ, with each pairing's summary.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let pairings: Vec<serde_json::Value> = self
            .reports
            .iter()
            .map(|(pairing, report)| {
                json!({
                    "pairing": pairing.label(),
                    "server": pairing.server,
                    "client": pairing.client,
                    "completion_ratio": report.completion_ratio(),
                    "failures": report.failures(),
                })
            })
            .collect();
        let workloads: Vec<serde_json::Value> = self
            .workloads
            .iter()
            .enumerate()
            .map(|(w, name)| {
                let results: Vec<serde_json::Value> = self
                    .workload(w)
                    .into_iter()
                    .map(|(pairing, r)| {
                        let mut fields = serde_json::Map::new();
                        fields.insert("pairing".into(), pairing.label().into());
                        fields.insert("server".into(), pairing.server.into());
                        fields.insert("client".into(), pairing.client.into());
                        fields.extend(r.json_fields());
                        serde_json::Value::Object(fields)
                    })
                    .collect();
                json!({ "workload": name, "pairings": results })
            })
            .collect();
        // Objects keep their insertion order (workloads, then pairings, in run order).
        let differences: serde_json::Map<String, serde_json::Value> = self
            .differences()
            .into_iter()
            .map(|(workload, summaries)| {
                let per_pairing: serde_json::Map<String, serde_json::Value> = summaries
                    .into_iter()
                    .map(|(p, s)| (p.label(), s.into()))
                    .collect();
                (workload, per_pairing.into())
            })
            .collect();
        let mut document = json!({
            "scenario": self.scenario,
            "seeds": self.seeds,
            "pairings": pairings,
            "workloads": workloads,
            "differences": differences,
        });
        if let Some(row) = &self.ts_sdk {
            let per_workload: Vec<serde_json::Value> = self
                .workloads
                .iter()
                .enumerate()
                .map(
                    |(w, name)| match row.results.get(w).and_then(Option::as_ref) {
                        Some(r) => {
                            let mut fields = serde_json::Map::new();
                            fields.insert("workload".into(), name.as_str().into());
                            fields.extend(r.json_fields());
                            serde_json::Value::Object(fields)
                        }
                        None => json!({ "workload": name, "not_run": row.skipped.get(&w) }),
                    },
                )
                .collect();
            document["ts_sdk"] = json!({
                "label": row.label,
                "completion_ratio": row.completion_ratio(),
                "failures": row.failures(),
                "workloads": per_workload,
            });
        }
        document
    }

    /// Writes `compare.csv` into `dir` (created if needed): one row per pairing and workload,
    /// `server,client,workload,calls,completed,failed,causes,p50_us,p99_us` (latencies of the
    /// completed calls).
    pub fn write_csv(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut w = csv::Writer::from_path(dir.join("compare.csv"))?;
        w.write_record([
            "server",
            "client",
            "workload",
            "calls",
            "completed",
            "failed",
            "causes",
            "p50_us",
            "p99_us",
        ])?;
        for (index, name) in self.workloads.iter().enumerate() {
            let mut rows: Vec<(String, String, WorkloadResult)> = self
                .workload(index)
                .into_iter()
                .map(|(p, r)| (p.server, p.client, r))
                .collect();
            if let Some(row) = &self.ts_sdk {
                if let Some(r) = row.results.get(index).and_then(Option::as_ref) {
                    rows.push((row.label.clone(), row.label.clone(), r.clone()));
                }
            }
            for (server, client, r) in rows {
                let mut record = vec![server, client, name.clone()];
                record.extend(r.csv_cells());
                w.write_record(record)?;
            }
        }
        w.flush()
    }
}

/// A duration in whole microseconds (saturating).
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
