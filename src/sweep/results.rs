//! A sweep's results: the CSV a sweep writes (and a merge reads back), and the recommendation
//! drawn from it.

use super::*;
use std::fmt::Write as _;

fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.4}")
    }
}

/// Every numeric column of `sweep.csv`, in order: [`COLUMNS`], then the low and high end of
/// each of [`INTERVAL_COLUMNS`].
pub(super) fn numeric_columns() -> Vec<String> {
    COLUMNS
        .iter()
        .map(|c| c.to_string())
        .chain(
            INTERVAL_COLUMNS
                .iter()
                .flat_map(|c| [format!("{c}_lo"), format!("{c}_hi")]),
        )
        .collect()
}

/// Writes `sweep.csv`: `cell`, one column per axis, the [`numeric_columns`], `failures`.
pub fn write_csv(path: &Path, axes: &[String], rows: &[Row]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut w = csv::Writer::from_path(path)?;
    let columns = numeric_columns();
    let header: Vec<String> = std::iter::once("cell".to_owned())
        .chain(axes.iter().cloned())
        .chain(columns.iter().cloned())
        .chain(std::iter::once("failures".to_owned()))
        .collect();
    w.write_record(&header)?;
    for r in rows {
        let record: Vec<String> = std::iter::once(r.cell.to_string())
            .chain(r.params.iter().cloned())
            .chain(
                columns
                    .iter()
                    .map(|c| fmt_value(r.values.get(c).copied().unwrap_or(f64::NAN))),
            )
            .chain(std::iter::once(r.failures.clone()))
            .collect();
        w.write_record(&record)?;
    }
    w.flush()
}

/// Reads a `sweep.csv` written by [`write_csv`] (for merging shards): the axes and the rows.
pub fn read_csv(path: &Path) -> Result<(Vec<String>, Vec<Row>), SweepError> {
    let invalid = |message: String| SweepError::Invalid {
        file: path.display().to_string(),
        message,
    };
    let mut r = csv::Reader::from_path(path).map_err(|e| invalid(e.to_string()))?;
    let header: Vec<String> = r
        .headers()
        .map_err(|e| invalid(e.to_string()))?
        .iter()
        .map(str::to_owned)
        .collect();
    let columns = numeric_columns();
    let naxes = header
        .len()
        .checked_sub(2 + columns.len())
        .ok_or_else(|| invalid("not a sweep.csv".into()))?;
    if header[1 + naxes..1 + naxes + columns.len()] != columns[..] {
        return Err(invalid(
            "its columns are not those of this relaysim's sweep.csv (written by another \
             version? run the shards again)"
                .into(),
        ));
    }
    let axes = header[1..1 + naxes].to_vec();
    let mut rows = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.map_err(|e| invalid(format!("row {}: {e}", i + 2)))?;
        let cell = rec
            .get(0)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| invalid(format!("row {}: bad cell index", i + 2)))?;
        let params = (0..naxes)
            .map(|k| rec.get(1 + k).unwrap_or_default().to_owned())
            .collect();
        let values = columns
            .iter()
            .enumerate()
            .map(|(k, c)| {
                (
                    c.to_string(),
                    rec.get(1 + naxes + k)
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(f64::NAN),
                )
            })
            .collect();
        let failures = rec
            .get(1 + naxes + columns.len())
            .unwrap_or_default()
            .to_owned();
        rows.push(Row {
            cell,
            params,
            values,
            failures,
        });
    }
    Ok((axes, rows))
}

/// One recommendation: for a group of parameter values, the best value of the chosen axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    /// The group (`by` axes and their values).
    pub group: Vec<(String, String)>,
    /// The recommended value, or `None` when no cell met the completion bound.
    pub value: Option<String>,
    /// Other values of the chosen axis whose 95 % interval overlaps the best one's: the seeds
    /// run do not tell them apart from it.
    pub ties: Vec<String>,
    /// The sentence with the numbers behind it.
    pub text: String,
}

/// A column's value for people: durations (`*_ms`) in human units, rates in percent.
pub(super) fn human_value(column: &str, v: f64) -> String {
    if v.is_nan() {
        "n/a".to_owned()
    } else if v.is_infinite() {
        // An interval the samples cannot close on this side.
        "unbounded".to_owned()
    } else if column.ends_with("_ms") {
        crate::stats::output::human_us((v * 1000.0).round().max(0.0) as u64)
    } else if column == "completion_ratio" || column == "failure_rate" {
        format!("{:.1}%", v * 100.0)
    } else {
        fmt_value(v)
    }
}

/// `v [lo–hi]` for a column of a row, the interval left out when the column has none.
fn with_interval(column: &str, row: &Row) -> String {
    let v = row.values.get(column).copied().unwrap_or(f64::NAN);
    let (lo, hi) = interval(row, column);
    if lo.is_nan() || hi.is_nan() {
        human_value(column, v)
    } else {
        format!(
            "{} [95% CI {}–{}]",
            human_value(column, v),
            human_value(column, lo),
            human_value(column, hi)
        )
    }
}

/// Picks, per group, the value of `choose` with the lowest `minimise` among cells meeting the
/// completion bound (equal values: the first in axis order), and lists as ties the other
/// eligible cells whose 95 % interval of `minimise` overlaps the winner's (for a column
/// without intervals, those with the same value).
pub fn recommend(spec: &RecommendSpec, axes: &[String], rows: &[Row]) -> Vec<Recommendation> {
    let index = |name: &str| axes.iter().position(|a| a == name);
    let Some(choose) = index(&spec.choose) else {
        return Vec::new();
    };
    let by: Vec<usize> = spec.by.iter().filter_map(|b| index(b)).collect();
    let mut groups: BTreeMap<Vec<String>, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        groups
            .entry(by.iter().map(|&i| r.params[i].clone()).collect())
            .or_default()
            .push(r);
    }
    let value = |r: &Row| r.values.get(&spec.minimise).copied().unwrap_or(f64::NAN);
    let mut out = Vec::new();
    for (key, mut members) in groups {
        members.sort_by_key(|r| r.cell);
        let group: Vec<(String, String)> = by
            .iter()
            .map(|&i| axes[i].clone())
            .zip(key.iter().cloned())
            .collect();
        let label = if group.is_empty() {
            "all cells".to_owned()
        } else {
            group
                .iter()
                .map(|(a, v)| format!("{a}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let eligible: Vec<&Row> = members
            .iter()
            .copied()
            .filter(|r| {
                r.values.get("completion_ratio").copied().unwrap_or(0.0) + 1e-12
                    >= spec.min_completion_ratio
                    && !value(r).is_nan()
            })
            .collect();
        let best = eligible
            .iter()
            .copied()
            .min_by(|a, b| value(a).total_cmp(&value(b)).then(a.cell.cmp(&b.cell)));
        let Some(r) = best else {
            out.push(Recommendation {
                value: None,
                ties: Vec::new(),
                text: format!(
                    "{label}: no value of {} reaches a completion ratio of {}",
                    spec.choose, spec.min_completion_ratio
                ),
                group,
            });
            continue;
        };
        let (_, best_hi) = interval(r, &spec.minimise);
        let tied: Vec<&Row> = eligible
            .iter()
            .copied()
            .filter(|o| o.cell != r.cell)
            .filter(|o| {
                let (lo, _) = interval(o, &spec.minimise);
                if best_hi.is_nan() || lo.is_nan() {
                    value(o) == value(r)
                } else {
                    lo <= best_hi
                }
            })
            .collect();
        // The other free axes of a cell, so the advice is complete.
        let free = |cell: &Row| -> String {
            let others: Vec<String> = axes
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != choose && !by.contains(i))
                .map(|(i, a)| format!("{a} = {}", cell.params[i]))
                .collect();
            if others.is_empty() {
                String::new()
            } else {
                format!(" with {}", others.join(", "))
            }
        };
        let others = free(r);
        let mut text = format!(
            "{label}: {} = {}{others}  ({} {}, completion {}, {:.1} events and {:.0} bytes per call)",
            spec.choose,
            r.params[choose],
            spec.minimise,
            with_interval(&spec.minimise, r),
            with_interval("completion_ratio", r),
            r.values.get("events_per_call").copied().unwrap_or(f64::NAN),
            r.values.get("bytes_per_call").copied().unwrap_or(f64::NAN),
        );
        if !tied.is_empty() {
            /// Ties listed by name; the rest counted.
            const LISTED: usize = 5;
            let mut list: Vec<String> = tied
                .iter()
                .take(LISTED)
                .map(|o| {
                    format!(
                        "{}{} ({})",
                        o.params[choose],
                        free(o),
                        with_interval(&spec.minimise, o)
                    )
                })
                .collect();
            if tied.len() > LISTED {
                list.push(format!("{} more", tied.len() - LISTED));
            }
            if best_hi.is_infinite() {
                let _ = write!(
                    text,
                    "\n    its interval is open above: too few samples per cell to bound {} \
                     (a p99 needs 368, a p90 36, a median 6)",
                    spec.minimise
                );
            }
            let _ = write!(
                text,
                "\n    a tie: {} other cell{} overlap{} its interval, so these seeds do not tell \
                 them apart (more `seeds` in the sweep file would): {} = {}",
                tied.len(),
                if tied.len() == 1 { "" } else { "s" },
                if tied.len() == 1 { "s" } else { "" },
                spec.choose,
                list.join("; ")
            );
        }
        out.push(Recommendation {
            value: Some(r.params[choose].clone()),
            ties: tied.iter().map(|o| o.params[choose].clone()).collect(),
            text,
            group,
        });
    }
    out
}
