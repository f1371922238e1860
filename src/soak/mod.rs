//! Soak: many random scenarios, each run end to end, checked for what must never happen.
//!
//! Each run draws a whole deployment from its own seeded stream: one to three relays of any
//! built-in profile, relay→peer and peer→relay delays of every distribution, bandwidth,
//! concurrent intake, the datagram stress mode (reordering, duplicates, loss, burst loss),
//! outages of every kind (restart, connection drop, partition, for one peer or all) and random
//! drops; peers of every behaviour preset and implementation built in, with publish pipelines,
//! clock skew, shared addresses and resumable streams; any mix of workloads and contents.
//!
//! Failures are results (a relay may well defeat a call). What is checked is what no relay
//! may cause:
//! - an integrity violation: a delivery that differs from what was sent (a corrupt, missing,
//!   repeated or reordered chunk handed to the application);
//! - a failure without a cause;
//! - a reordering or duplicate that names no mechanism (`*.unexplained`), or one blamed on a
//!   datagram link where the deployment has none;
//! - a panic anywhere in the stack;
//! - a run that is not deterministic (every [`SoakConfig::determinism_every`]-th run is run
//!   twice and its traces compared byte for byte);
//! - a generated scenario the validator refuses (a bug of the generator or the validator).
//!
//! The same seed and run count give the same [`SoakReport`] for any job count.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use crate::scenario::Scenario;
use crate::stats::{Outcome, RunReport};

mod generate;
pub use generate::generate;

/// Runs of one soak (`--runs`).
pub const MAX_SOAK_RUNS: u64 = 10_000_000;

/// What to soak.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// Scenarios to generate and run.
    pub runs: u64,
    /// The soak's seed: scenario `i` is drawn from its stream `soak/i`.
    pub seed: u64,
    /// Threads (results do not depend on it).
    pub jobs: usize,
    /// Every this many runs (from the first), the run is repeated and the two traces must be
    /// identical; 0 never.
    pub determinism_every: u64,
    /// Runs whose peers are all a real program instead of relaysim's models; `None`: none.
    pub programs: Option<SoakPrograms>,
}

/// The soak's program runs: every `every`-th run (from the first) has every peer run `program`
/// (as `compare --program` runs a scenario), hosted by `hosts`. Such a run is checked as any
/// other, and where it falls on a determinism check, the program's run is repeated too.
#[derive(Debug, Clone)]
pub struct SoakPrograms {
    /// A shipped program's name (`ts-sdk`) or a path to one.
    pub program: String,
    /// Every this many runs (at least 1).
    pub every: u64,
    /// Where the program runs.
    pub hosts: std::sync::Arc<dyn crate::sim::hosted::ProgramHosts>,
}

impl SoakConfig {
    /// The program run `index` runs with its every peer, if it is a program run.
    fn program_of(&self, index: u64) -> Option<&SoakPrograms> {
        self.programs
            .as_ref()
            .filter(|p| p.every > 0 && index.is_multiple_of(p.every))
    }
}

/// One generated scenario.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The scenario file's text (it carries its run seed, so `relaysim run` on it reproduces
    /// the run).
    pub toml: String,
    /// Some relay link uses the datagram stress mode.
    pub datagram: bool,
}

/// What a run did that must never happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Deliveries that differed from what was sent.
    Integrity(u64),
    /// A call failed with an empty cause.
    UntypedFailure,
    /// A disturbance counter without a mechanism, or a datagram-link one without such a link.
    Unexplained(String),
    /// The stack panicked; the panic's message.
    Panic(String),
    /// Two runs of the same scenario and seed wrote different traces.
    Nondeterministic,
    /// The validator refused the generated scenario; its message.
    Invalid(String),
}

impl Violation {
    /// A short name for tables: `integrity`, `untyped-failure`, `unexplained`, `panic`,
    /// `nondeterministic`, `invalid-scenario`.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::Integrity(_) => "integrity",
            Violation::UntypedFailure => "untyped-failure",
            Violation::Unexplained(_) => "unexplained",
            Violation::Panic(_) => "panic",
            Violation::Nondeterministic => "nondeterministic",
            Violation::Invalid(_) => "invalid-scenario",
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Integrity(n) => write!(f, "{n} integrity violation(s)"),
            Violation::UntypedFailure => f.write_str("a call failed without a cause"),
            Violation::Unexplained(c) => write!(f, "disturbance without a mechanism: {c}"),
            Violation::Panic(m) => write!(f, "panic: {m}"),
            Violation::Nondeterministic => f.write_str("two runs wrote different traces"),
            Violation::Invalid(m) => write!(f, "generated scenario refused: {m}"),
        }
    }
}

/// One run's violations, with the scenario that caused them.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The run's index in the soak.
    pub index: u64,
    /// The scenario (with its seed), to reproduce with `relaysim run`.
    pub toml: String,
    /// The program its every peer ran, for a program run (reproduced with `relaysim compare
    /// FILE --program PROGRAM`).
    pub program: Option<String>,
    /// What went wrong.
    pub violations: Vec<Violation>,
}

/// A soak's results. Everything in it depends only on the seed and the run count.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// Runs done.
    pub runs: u64,
    /// Runs repeated for the determinism check.
    pub determinism_checked: u64,
    /// Runs with a datagram-mode link.
    pub datagram_runs: u64,
    /// Runs whose every peer was a real program.
    pub program_runs: u64,
    /// The program those runs ran (a shipped name, or the absolute path the CLI made).
    pub program: Option<String>,
    /// Calls over all runs.
    pub calls: u64,
    /// Calls that completed.
    pub completed: u64,
    /// Failed calls by cause family.
    pub failures: BTreeMap<String, u64>,
    /// Disturbances and other counters summed over all runs.
    pub counters: BTreeMap<String, u64>,
    /// Runs with a violation, in run order.
    pub findings: Vec<Finding>,
}

impl SoakReport {
    /// Violations by kind over all runs.
    pub fn violations(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for f in &self.findings {
            for v in &f.violations {
                *out.entry(v.kind()).or_default() += 1;
            }
        }
        out
    }

    /// The report as one JSON document: every field, the violations by kind, and each
    /// finding's run index and violations (as text; the scenario itself is left to
    /// `soak --out`).
    pub fn to_json(&self) -> serde_json::Value {
        let findings: Vec<serde_json::Value> = self
            .findings
            .iter()
            .map(|f| {
                let violations: Vec<String> = f.violations.iter().map(|v| v.to_string()).collect();
                serde_json::json!({ "index": f.index, "program": f.program, "violations": violations })
            })
            .collect();
        serde_json::json!({
            "runs": self.runs,
            "determinism_checked": self.determinism_checked,
            "datagram_runs": self.datagram_runs,
            "program_runs": self.program_runs,
            "program": self.program,
            "calls": self.calls,
            "completed": self.completed,
            "failures": self.failures,
            "counters": self.counters,
            "violations": self.violations(),
            "findings": findings,
        })
    }

    /// The report as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "soak: {} runs ({} with a datagram-mode link), {} repeated to check determinism",
            self.runs, self.datagram_runs, self.determinism_checked
        );
        if self.program_runs > 0 {
            let _ = writeln!(
                s,
                "program runs: {} (every peer the program {})",
                self.program_runs,
                self.program.as_deref().unwrap_or_default()
            );
        }
        let ratio = if self.calls == 0 {
            1.0
        } else {
            self.completed as f64 / self.calls as f64
        };
        let _ = writeln!(
            s,
            "calls: {} ({} completed, {:.1} %)",
            self.calls,
            self.completed,
            ratio * 100.0
        );
        if !self.failures.is_empty() {
            let _ = writeln!(s, "failures by cause (results, not violations):");
            for (cause, n) in &self.failures {
                let _ = writeln!(s, "  {cause:<34} {n}");
            }
        }
        let shown = ["reordered", "duplicated", "lost", "disconnects", "rejected"];
        let disturbances: Vec<String> = shown
            .iter()
            .filter_map(|k| self.counters.get(*k).map(|n| format!("{k} {n}")))
            .collect();
        if !disturbances.is_empty() {
            let _ = writeln!(s, "disturbances: {}", disturbances.join(", "));
        }
        let violations = self.violations();
        let total: u64 = violations.values().sum();
        let _ = writeln!(s, "violations: {total}");
        for (kind, n) in &violations {
            let _ = writeln!(s, "  {kind:<20} {n}");
        }
        for f in self.findings.iter().take(20) {
            let what: Vec<String> = f.violations.iter().map(|v| v.to_string()).collect();
            // A program run's violation may be the program's own doing (its SDK's bug).
            let program = f
                .program
                .as_ref()
                .map(|p| format!(" (every peer the program {p})"))
                .unwrap_or_default();
            let _ = writeln!(s, "  run {}{program}: {}", f.index, what.join("; "));
        }
        if self.findings.len() > 20 {
            let _ = writeln!(s, "  … and {} more runs", self.findings.len() - 20);
        }
        s
    }
}

/// Wall-clock measurements of a soak: not deterministic, reported apart from [`SoakReport`].
#[derive(Debug, Clone, Default)]
pub struct SoakResources {
    /// The slowest run: its index and wall time.
    pub slowest: Option<(u64, Duration)>,
    /// Wall time of all runs together (summed over threads).
    pub busy: Duration,
}

/// Runs the soak, calling `progress` after each run (from the calling thread, in order).
pub fn soak(config: &SoakConfig, mut progress: impl FnMut(u64)) -> (SoakReport, SoakResources) {
    let mut report = SoakReport::default();
    let mut resources = SoakResources::default();
    let count = usize::try_from(config.runs.min(MAX_SOAK_RUNS)).unwrap_or(usize::MAX);
    crate::parallel::map_ordered(
        count,
        config.jobs,
        |i| {
            let started = Instant::now();
            let outcome = run_one(config, i as u64);
            (outcome, started.elapsed())
        },
        |i, (outcome, took)| {
            let index = i as u64;
            resources.busy += took;
            if resources.slowest.is_none_or(|(_, t)| took > t) {
                resources.slowest = Some((index, took));
            }
            report.absorb(index, outcome);
            progress(index + 1);
        },
    );
    (report, resources)
}

/// What one run gave.
struct RunOutcome {
    generated: Generated,
    program: Option<String>,
    report: Option<RunReport>,
    repeated: bool,
    violations: Vec<Violation>,
}

impl SoakReport {
    fn absorb(&mut self, index: u64, o: RunOutcome) {
        self.runs += 1;
        self.datagram_runs += u64::from(o.generated.datagram);
        self.program_runs += u64::from(o.program.is_some());
        if self.program.is_none() {
            self.program.clone_from(&o.program);
        }
        self.determinism_checked += u64::from(o.repeated);
        if let Some(run) = &o.report {
            for item in &run.items {
                self.calls += 1;
                match &item.outcome {
                    Outcome::Completed => self.completed += 1,
                    Outcome::Failed(c) => {
                        *self
                            .failures
                            .entry(crate::stats::family(c).to_owned())
                            .or_default() += 1
                    }
                }
            }
            for (k, v) in &run.counters {
                *self.counters.entry(k.clone()).or_default() += v;
            }
        }
        if !o.violations.is_empty() {
            self.findings.push(Finding {
                index,
                toml: o.generated.toml,
                program: o.program,
                violations: o.violations,
            });
        }
    }
}

/// Generates, runs and checks run `index`.
fn run_one(config: &SoakConfig, index: u64) -> RunOutcome {
    let generated = generate(config.seed, index);
    let programs = config.program_of(index);
    let program = programs.map(|p| p.program.clone());
    let scenario = match Scenario::from_toml_str(&generated.toml, &format!("soak-{index}.toml")) {
        Ok(s) => match programs {
            Some(p) => s.with_program(&p.program, p.hosts.clone()),
            None => s,
        },
        Err(e) => {
            let violations = vec![Violation::Invalid(e.to_string())];
            return RunOutcome {
                generated,
                program,
                report: None,
                repeated: false,
                violations,
            };
        }
    };
    let repeated = config.determinism_every > 0 && index.is_multiple_of(config.determinism_every);
    let seed = scenario.seed;
    let attempt = std::panic::catch_unwind(AssertUnwindSafe(|| {
        if repeated {
            let events = crate::trace::EventsMode::Full;
            let (report, first) = scenario.run_traced(seed, events);
            let (_, second) = scenario.run_traced(seed, events);
            (report, first != second)
        } else {
            (scenario.run(seed), false)
        }
    }));
    let (report, differed) = match attempt {
        Ok(r) => r,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_owned());
            return RunOutcome {
                generated,
                program,
                report: None,
                repeated,
                violations: vec![Violation::Panic(message)],
            };
        }
    };
    let violations = check(&report, generated.datagram, differed);
    RunOutcome {
        generated,
        program,
        report: Some(report),
        repeated,
        violations,
    }
}

/// What a finished run must never show.
fn check(report: &RunReport, datagram: bool, nondeterministic: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    if report.integrity_violations > 0 {
        out.push(Violation::Integrity(report.integrity_violations));
    }
    if report
        .items
        .iter()
        .any(|i| matches!(&i.outcome, Outcome::Failed(c) if c.trim().is_empty()))
    {
        out.push(Violation::UntypedFailure);
    }
    for (name, n) in &report.counters {
        let unexplained = name.ends_with(".unexplained");
        let phantom_datagram = !datagram && name.ends_with(".datagram-link");
        if *n > 0 && (unexplained || phantom_datagram) {
            out.push(Violation::Unexplained(format!("{name} = {n}")));
        }
    }
    if nondeterministic {
        out.push(Violation::Nondeterministic);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generated_scenario_is_valid() {
        for index in 0..300 {
            let g = generate(11, index);
            if let Err(e) = Scenario::from_toml_str(&g.toml, "soak.toml") {
                panic!("run {index}: {e}\n{}", g.toml);
            }
        }
    }

    #[test]
    fn generation_depends_only_on_seed_and_index() {
        assert_eq!(generate(3, 7).toml, generate(3, 7).toml);
        assert_ne!(generate(3, 7).toml, generate(3, 8).toml);
        assert_ne!(generate(3, 7).toml, generate(4, 7).toml);
    }

    #[test]
    fn the_generator_draws_every_entry_of_every_catalogue() {
        let all: String = (0..2000).map(|i| generate(5, i).toml).collect();
        let quoted = |key: &str, names: &[&str]| {
            names
                .iter()
                .map(|n| format!("{key} = \"{n}\""))
                .collect::<Vec<_>>()
        };
        let mut needles = Vec::new();
        needles.extend(quoted("profile", &crate::relay::RelayProfile::FAMILIES));
        needles.extend(quoted(
            "content",
            &crate::peer::content::ContentClass::NAMES,
        ));
        needles.extend(quoted("kind", &crate::relay::impair::OutageKind::NAMES));
        needles.extend(quoted("kind", &crate::scenario::workloads::KINDS));
        needles.extend(quoted("mode", &crate::relay::profile::Intake::MODES[1..]));
        let built: Vec<&str> = crate::implementations::NAMES
            .into_iter()
            .filter(|n| crate::implementations::parse(n).is_ok())
            .collect();
        needles.extend(quoted("impl", &built));
        needles.extend(
            crate::peer::behaviour::PRESETS
                .iter()
                .filter(|p| **p != "relaysim")
                .map(|p| format!("behaviour = \"{p}\"")),
        );
        needles.extend(
            crate::scenario::relays::DATAGRAM_KNOBS
                .iter()
                .map(|k| format!("\n{k} = ")),
        );
        for needle in needles {
            assert!(
                all.contains(&needle),
                "no generated scenario has {needle:?}"
            );
        }
    }

    #[test]
    fn the_generator_reaches_every_mechanism() {
        let all: String = (0..300).map(|i| generate(5, i).toml).collect();
        for needle in [
            "ordering = \"datagram\"",
            "kind = \"relay-restart\"",
            "kind = \"connection-drop\"",
            "kind = \"partition\"",
            "mode = \"concurrent\"",
            "bandwidth",
            "burst_loss",
            "connection_drop_every",
            "behaviour = \"ts-sdk\"",
            "behaviour = \"rust-sdk\"",
            "resumable_streams = true",
            "dist = \"pareto\"",
            "dist = \"empirical\"",
            "kind = \"slow\"",
            "profile = \"mobile\"",
        ] {
            assert!(all.contains(needle), "no generated scenario has {needle}");
        }
    }

    #[test]
    fn checks_flag_what_must_never_happen() {
        let mut run = RunReport {
            seed: 1,
            items: Vec::new(),
            histograms: BTreeMap::new(),
            counters: BTreeMap::new(),
            integrity_violations: 0,
            program_errors: Vec::new(),
            program_lines: BTreeMap::new(),
        };
        assert!(check(&run, false, false).is_empty());
        run.integrity_violations = 2;
        run.counters.insert("reordered.unexplained".into(), 1);
        run.counters.insert("duplicated.datagram-link".into(), 3);
        let kinds: Vec<_> = check(&run, false, true).iter().map(|v| v.kind()).collect();
        assert_eq!(
            kinds,
            [
                "integrity",
                "unexplained",
                "unexplained",
                "nondeterministic"
            ]
        );
        // A datagram link may duplicate.
        run.counters.remove("reordered.unexplained");
        run.integrity_violations = 0;
        assert!(check(&run, true, false).is_empty());
    }

    #[test]
    fn a_small_soak_is_clean_and_the_same_for_any_job_count() {
        let config = |jobs| SoakConfig {
            runs: 12,
            seed: 2,
            jobs,
            determinism_every: 4,
            programs: None,
        };
        let (one, _) = soak(&config(1), |_| {});
        let (two, _) = soak(&config(2), |_| {});
        assert_eq!(one.text(), two.text());
        assert_eq!(one.runs, 12);
        assert_eq!(one.determinism_checked, 3);
        assert!(one.calls > 0);
        assert!(one.findings.is_empty(), "{}", one.text());
    }
}
