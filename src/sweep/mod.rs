//! Sweeps: a base scenario run over the cartesian product of parameter axes, several seeds per
//! cell, cells in parallel; a CSV row per cell, plots and a recommendation.
//!
//! An axis names any scenario parameter by its path in the scenario file (`policy.budget`,
//! `relays[0].profile`, `relays[0].down.delay.sigma`, `workloads[0].bytes`) and lists values;
//! each cell is the base scenario with those values set, validated like any scenario. A cell's
//! result depends only on its parameters and seeds, never on how many jobs ran or in which
//! order, so sweeps can be split into shards and merged.

#[cfg(feature = "plots")]
pub mod plot;
mod results;

pub use results::{read_csv, recommend, write_csv, Recommendation};

use crate::scenario::{Scenario, ScenarioError};
use crate::stats::{Outcome, Report};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A sweep file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Name (default: the file name).
    pub name: Option<String>,
    /// What the sweep asks.
    pub description: Option<String>,
    /// The base scenario, relative to the sweep file.
    pub scenario: String,
    /// Runs per cell (seeds `first_seed`, `first_seed + 1`, ...).
    pub seeds: u32,
    /// The first seed (default 1).
    pub first_seed: Option<u64>,
    /// The axes.
    pub axes: Vec<Axis>,
    /// Plots to draw.
    #[serde(default)]
    pub plots: Vec<PlotSpec>,
    /// How to pick a recommended value.
    pub recommend: Option<RecommendSpec>,
}

/// One axis.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// The parameter's path in the scenario file.
    pub param: String,
    /// Its values.
    pub values: Vec<toml::Value>,
}

/// A plot: `y` against `x`, one line per value of `series`, restricted by `filter`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    /// File name without extension (`.svg` and `.png` are written).
    pub file: String,
    /// Title.
    pub title: Option<String>,
    /// The axis on the x axis (numeric values).
    pub x: String,
    /// A column of `sweep.csv` (`transfer_completion_p99_ms`, `failure_rate`, ...).
    pub y: String,
    /// The axis whose values become separate lines.
    pub series: Option<String>,
    /// Only cells with these parameter values.
    #[serde(default)]
    pub filter: BTreeMap<String, toml::Value>,
    /// The x axis's label (default: the axis's key, with its unit).
    #[serde(default)]
    pub x_label: Option<String>,
    /// The y axis's label (default: the column in words, with its unit).
    #[serde(default)]
    pub y_label: Option<String>,
    /// The legend's title (default: the series axis's key).
    #[serde(default)]
    pub series_label: Option<String>,
}

/// How to recommend a value.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecommendSpec {
    /// The axis whose value is recommended.
    pub choose: String,
    /// One recommendation per combination of these axes.
    #[serde(default)]
    pub by: Vec<String>,
    /// The column to minimise.
    pub minimise: String,
    /// Only cells whose completion ratio is at least this.
    pub min_completion_ratio: f64,
}

/// Why a sweep cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A file cannot be read.
    #[error("{path}: cannot read")]
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The sweep file is malformed.
    #[error("{file}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A cell's scenario is invalid.
    #[error("cell {cell} ({params})")]
    Cell {
        /// The cell's index.
        cell: usize,
        /// Its parameters.
        params: String,
        /// The scenario error.
        source: ScenarioError,
    },
}

/// A loaded sweep: the spec, the base scenario text and every cell's parameters.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The name.
    pub name: String,
    /// The spec.
    pub spec: SweepSpec,
    base: toml::Table,
    /// Each cell's parameter values, in axis order.
    pub cells: Vec<Vec<toml::Value>>,
    /// Where the base scenario's file is (a program peer's relative path starts there).
    base_dir: PathBuf,
    /// Where cells with program peers get their hosts.
    hosts: Option<std::sync::Arc<dyn crate::sim::hosted::ProgramHosts>>,
}

/// One cell's results: a row of `sweep.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The cell's index.
    pub cell: usize,
    /// Parameter values as text, in axis order.
    pub params: Vec<String>,
    /// Named numeric columns.
    pub values: BTreeMap<String, f64>,
    /// Failures by cause, `cause=count;...`.
    pub failures: String,
}

/// The low and high ends of `column`'s 95 % interval in a row (NaN when it has none).
pub fn interval(row: &Row, column: &str) -> (f64, f64) {
    let get = |suffix: &str| {
        row.values
            .get(&format!("{column}_{suffix}"))
            .copied()
            .unwrap_or(f64::NAN)
    };
    (get("lo"), get("hi"))
}

/// The numeric columns of a row, in CSV order.
pub const COLUMNS: [&str; 14] = [
    "runs",
    "calls",
    "completion_ratio",
    "failure_rate",
    "transfer_completion_p50_ms",
    "transfer_completion_p90_ms",
    "transfer_completion_p99_ms",
    "stream_completion_p50_ms",
    "stream_completion_p90_ms",
    "stream_completion_p99_ms",
    "final_response_p99_ms",
    "events_per_call",
    "bytes_per_call",
    "relay_rejections",
];

/// The columns with a 95 % interval (`completion_ratio` to `final_response_p99_ms` in
/// [`COLUMNS`]), each followed in the CSV by `<column>_lo` and `<column>_hi` (after every
/// column of [`COLUMNS`]): Wilson score intervals for the rates, order-statistic intervals
/// for the percentiles.
pub const INTERVAL_COLUMNS: &[&str] = COLUMNS.split_at(2).1.split_at(9).0;

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Sets `path` (`a.b[0].c`) in a TOML table.
fn set_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), String> {
    let mut parts: Vec<(String, Option<usize>)> = Vec::new();
    for seg in path.split('.') {
        match seg.split_once('[') {
            Some((key, rest)) => {
                let index: usize = rest
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| format!("bad index in {seg:?}"))?;
                parts.push((key.to_owned(), Some(index)));
            }
            None => parts.push((seg.to_owned(), None)),
        }
    }
    let mut current = table;
    for (i, (key, index)) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match index {
            None if last => {
                current.insert(key.clone(), value);
                return Ok(());
            }
            None => {
                let next = current
                    .entry(key.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                current = next
                    .as_table_mut()
                    .ok_or_else(|| format!("{key:?} is not a table"))?;
            }
            Some(n) => {
                let array = current
                    .get_mut(key)
                    .and_then(toml::Value::as_array_mut)
                    .ok_or_else(|| {
                        format!("{key:?} is not an array of tables in the base scenario")
                    })?;
                let item = array
                    .get_mut(*n)
                    .ok_or_else(|| format!("{key}[{n}] does not exist in the base scenario"))?;
                if last {
                    *item = value;
                    return Ok(());
                }
                current = item
                    .as_table_mut()
                    .ok_or_else(|| format!("{key}[{n}] is not a table"))?;
            }
        }
    }
    Ok(())
}

impl Sweep {
    /// Loads a sweep file and its base scenario.
    pub fn from_file(path: &Path) -> Result<Self, SweepError> {
        let read = |p: &Path| {
            crate::limits::read_text_io(p, crate::limits::MAX_SPEC_FILE_BYTES).map_err(|source| {
                SweepError::Io {
                    path: p.display().to_string(),
                    source,
                }
            })
        };
        let text = read(path)?;
        let file = path.display().to_string();
        let spec: SweepSpec = toml::from_str(&text).map_err(|e| SweepError::Invalid {
            file: file.clone(),
            message: e.to_string(),
        })?;
        let base_path: PathBuf = path.parent().unwrap_or(Path::new(".")).join(&spec.scenario);
        let base_text = read(&base_path)?;
        let name = spec.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let mut sweep = Self::new(name, spec, &base_text, &file)?;
        sweep.base_dir = base_path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Ok(sweep)
    }

    /// A sweep over `base_text` (a scenario) described by `spec`.
    pub fn new(
        name: String,
        spec: SweepSpec,
        base_text: &str,
        file: &str,
    ) -> Result<Self, SweepError> {
        let invalid = |message: String| SweepError::Invalid {
            file: file.to_owned(),
            message,
        };
        let base: toml::Table =
            toml::from_str(base_text).map_err(|e| invalid(format!("base scenario: {e}")))?;
        if spec.seeds == 0 {
            return Err(invalid("`seeds` must be at least 1".into()));
        }
        if spec.axes.iter().any(|a| a.values.is_empty()) {
            return Err(invalid("every axis needs at least one value".into()));
        }
        // Counted before the cells are built: a product of a few long axes is huge.
        use crate::limits::{MAX_SWEEP_CELLS, MAX_SWEEP_RUNS, MAX_SWEEP_SEEDS};
        let cell_count = spec
            .axes
            .iter()
            .try_fold(1u64, |n, a| n.checked_mul(a.values.len() as u64))
            .filter(|n| *n <= MAX_SWEEP_CELLS)
            .ok_or_else(|| {
                let lengths: Vec<String> = spec
                    .axes
                    .iter()
                    .map(|a| a.values.len().to_string())
                    .collect();
                invalid(format!(
                    "{} cells (the product of the axes' lengths); at most {MAX_SWEEP_CELLS}",
                    lengths.join(" × ")
                ))
            })?;
        if spec.seeds > MAX_SWEEP_SEEDS {
            return Err(invalid(format!(
                "`seeds` is {}; at most {MAX_SWEEP_SEEDS} per cell",
                spec.seeds
            )));
        }
        if cell_count * u64::from(spec.seeds) > MAX_SWEEP_RUNS {
            return Err(invalid(format!(
                "{cell_count} cells × {} seeds = {} runs; at most {MAX_SWEEP_RUNS}",
                spec.seeds,
                cell_count * u64::from(spec.seeds)
            )));
        }
        let mut cells: Vec<Vec<toml::Value>> = vec![Vec::new()];
        for axis in &spec.axes {
            cells = cells
                .into_iter()
                .flat_map(|prefix| {
                    axis.values.iter().map(move |v| {
                        let mut c = prefix.clone();
                        c.push(v.clone());
                        c
                    })
                })
                .collect();
        }
        let sweep = Sweep {
            name,
            spec,
            base,
            cells,
            base_dir: PathBuf::from("."),
            hosts: None,
        };
        let axis_names: Vec<&str> = sweep.spec.axes.iter().map(|a| a.param.as_str()).collect();
        for plot in &sweep.spec.plots {
            for p in [Some(&plot.x), plot.series.as_ref()]
                .into_iter()
                .flatten()
                .chain(plot.filter.keys())
            {
                if !axis_names.contains(&p.as_str()) {
                    return Err(invalid(format!(
                        "plot {:?} names {p:?}, which is not an axis",
                        plot.file
                    )));
                }
            }
            if !COLUMNS.contains(&plot.y.as_str()) {
                return Err(invalid(format!(
                    "plot {:?}: y {:?} is not a column; columns: {}",
                    plot.file,
                    plot.y,
                    COLUMNS.join(", ")
                )));
            }
        }
        if let Some(r) = &sweep.spec.recommend {
            for p in std::iter::once(&r.choose).chain(r.by.iter()) {
                if !axis_names.contains(&p.as_str()) {
                    return Err(invalid(format!(
                        "recommend names {p:?}, which is not an axis"
                    )));
                }
            }
            if !COLUMNS.contains(&r.minimise.as_str()) {
                return Err(invalid(format!(
                    "recommend.minimise {:?} is not a column",
                    r.minimise
                )));
            }
        }
        // Validate every cell now: a bad value fails before hours of running.
        for i in 0..sweep.cells.len() {
            sweep.scenario(i)?;
        }
        Ok(sweep)
    }

    /// The axis names.
    pub fn axes(&self) -> Vec<String> {
        self.spec.axes.iter().map(|a| a.param.clone()).collect()
    }

    fn params_text(&self, cell: usize) -> String {
        self.spec
            .axes
            .iter()
            .zip(&self.cells[cell])
            .map(|(a, v)| format!("{}={}", a.param, value_text(v)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The program the base scenario's program peers run, if it has any, and where its
    /// relative path starts.
    pub fn program(&self) -> Result<Option<(String, PathBuf)>, SweepError> {
        if self.cells.is_empty() {
            return Ok(None);
        }
        let scenario = self.scenario(0)?;
        Ok(scenario
            .program()
            .map(|p| (p.to_owned(), scenario.base_dir().to_path_buf())))
    }

    /// Where cells with program peers get their hosts (the driver's processes).
    pub fn set_program_hosts(
        &mut self,
        hosts: std::sync::Arc<dyn crate::sim::hosted::ProgramHosts>,
    ) {
        self.hosts = Some(hosts);
    }

    /// The scenario of one cell.
    pub fn scenario(&self, cell: usize) -> Result<Scenario, SweepError> {
        let mut table = self.base.clone();
        for (axis, value) in self.spec.axes.iter().zip(&self.cells[cell]) {
            set_path(&mut table, &axis.param, value.clone()).map_err(|m| SweepError::Invalid {
                file: self.name.clone(),
                message: format!("axis {:?}: {m}", axis.param),
            })?;
        }
        let text = toml::to_string(&table).expect("a TOML table serializes");
        let mut scenario = Scenario::from_toml_str(&text, &format!("{} cell {cell}", self.name))
            .map_err(|source| SweepError::Cell {
                cell,
                params: self.params_text(cell),
                source,
            })?;
        scenario.set_base_dir(self.base_dir.clone());
        if let Some(hosts) = &self.hosts {
            scenario.set_program_hosts(hosts.clone());
        }
        Ok(scenario)
    }

    /// Runs the cells `shard` selects (`(index, count)`: cells `i` with `i % count == index`),
    /// on `jobs` threads, calling `progress` after each cell. Rows come back in cell order.
    pub fn run(
        &self,
        jobs: usize,
        shard: (usize, usize),
        progress: impl Fn() + Sync,
    ) -> Result<Vec<Row>, SweepError> {
        let mine: Vec<usize> = (0..self.cells.len())
            .filter(|i| i % shard.1 == shard.0)
            .collect();
        let mut rows = Vec::with_capacity(mine.len());
        let mut error = None;
        crate::parallel::map_ordered(
            mine.len(),
            jobs,
            |k| self.run_cell(mine[k]),
            |_, row| {
                progress();
                match row {
                    Ok(row) => rows.push(row),
                    Err(e) => error = error.take().or(Some(e)),
                }
            },
        );
        match error {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    }

    fn run_cell(&self, cell: usize) -> Result<Row, SweepError> {
        let scenario = self.scenario(cell)?;
        let report = scenario.run_seeds(self.spec.first_seed.unwrap_or(1), self.spec.seeds, |_| {});
        Ok(row(
            cell,
            self.cells[cell].iter().map(value_text).collect(),
            &report,
        ))
    }
}

fn row(cell: usize, params: Vec<String>, report: &Report) -> Row {
    let calls = report.items().count();
    let completed = report
        .items()
        .filter(|i| i.outcome == Outcome::Completed)
        .count();
    let counters = report.counters();
    let ms = |metric: &str, q: fn(&crate::stats::LatencyRow) -> u64| {
        report
            .latency(metric)
            .map_or(f64::NAN, |r| q(&r) as f64 / 1000.0)
    };
    let per_call = |n: u64| {
        if calls == 0 {
            0.0
        } else {
            n as f64 / calls as f64
        }
    };
    let mut values = BTreeMap::new();
    let mut put = |k: &str, v: f64| {
        values.insert(k.to_owned(), v);
    };
    put("runs", report.runs.len() as f64);
    put("calls", calls as f64);
    put("completion_ratio", report.completion_ratio());
    put(
        "failure_rate",
        if calls == 0 {
            0.0
        } else {
            (calls - completed) as f64 / calls as f64
        },
    );
    put(
        "transfer_completion_p50_ms",
        ms("transfer_completion", |r| r.p50),
    );
    put(
        "transfer_completion_p90_ms",
        ms("transfer_completion", |r| r.p90),
    );
    put(
        "transfer_completion_p99_ms",
        ms("transfer_completion", |r| r.p99),
    );
    put(
        "stream_completion_p50_ms",
        ms("stream_completion", |r| r.p50),
    );
    put(
        "stream_completion_p90_ms",
        ms("stream_completion", |r| r.p90),
    );
    put(
        "stream_completion_p99_ms",
        ms("stream_completion", |r| r.p99),
    );
    put(
        "final_response_p99_ms",
        ms("final_response_latency", |r| r.p99),
    );
    put(
        "events_per_call",
        per_call(counters.get("events_published").copied().unwrap_or(0)),
    );
    put(
        "bytes_per_call",
        per_call(counters.get("bytes_published").copied().unwrap_or(0)),
    );
    put(
        "relay_rejections",
        counters
            .iter()
            .filter(|(k, _)| k.starts_with("rejected."))
            .map(|(_, v)| *v)
            .sum::<u64>() as f64,
    );
    let (ok_lo, ok_hi) = crate::stats::interval::wilson(completed as u64, calls as u64);
    put("completion_ratio_lo", ok_lo);
    put("completion_ratio_hi", ok_hi);
    put("failure_rate_lo", 1.0 - ok_hi);
    put("failure_rate_hi", 1.0 - ok_lo);
    for (column, metric, q) in [
        ("transfer_completion_p50_ms", "transfer_completion", 0.5),
        ("transfer_completion_p90_ms", "transfer_completion", 0.9),
        ("transfer_completion_p99_ms", "transfer_completion", 0.99),
        ("stream_completion_p50_ms", "stream_completion", 0.5),
        ("stream_completion_p90_ms", "stream_completion", 0.9),
        ("stream_completion_p99_ms", "stream_completion", 0.99),
        ("final_response_p99_ms", "final_response_latency", 0.99),
    ] {
        let (lo, hi) = report
            .histogram(metric)
            .and_then(|h| crate::stats::interval::quantile_interval(&h, q))
            .map_or((f64::NAN, f64::NAN), |(lo, hi)| (lo / 1000.0, hi / 1000.0));
        put(&format!("{column}_lo"), lo);
        put(&format!("{column}_hi"), hi);
    }
    let failures = report
        .failures()
        .iter()
        .map(|(c, n)| format!("{c}={n}"))
        .collect::<Vec<_>>()
        .join(";");
    Row {
        cell,
        params,
        values,
        failures,
    }
}

#[cfg(test)]
mod tests;
