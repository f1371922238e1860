//! A sweep's results: the CSV a sweep writes (and a merge reads back), and the recommendation
//! drawn from it.

use super::*;

fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.4}")
    }
}

/// Writes `sweep.csv`: `cell`, one column per axis, the numeric [`COLUMNS`], `failures`.
pub fn write_csv(path: &Path, axes: &[String], rows: &[Row]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut w = csv::Writer::from_path(path)?;
    let header: Vec<String> = std::iter::once("cell".to_owned())
        .chain(axes.iter().cloned())
        .chain(COLUMNS.iter().map(|c| c.to_string()))
        .chain(std::iter::once("failures".to_owned()))
        .collect();
    w.write_record(&header)?;
    for r in rows {
        let record: Vec<String> = std::iter::once(r.cell.to_string())
            .chain(r.params.iter().cloned())
            .chain(
                COLUMNS
                    .iter()
                    .map(|c| fmt_value(r.values.get(*c).copied().unwrap_or(f64::NAN))),
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
    let naxes = header
        .len()
        .checked_sub(2 + COLUMNS.len())
        .ok_or_else(|| invalid("not a sweep.csv".into()))?;
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
        let values = COLUMNS
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
            .get(1 + naxes + COLUMNS.len())
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
    /// The sentence with the numbers behind it.
    pub text: String,
}

/// Picks, per group, the value of `choose` with the lowest `minimise` among cells meeting the
/// completion bound (ties: the first in axis order).
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
        let eligible = members.iter().filter(|r| {
            r.values.get("completion_ratio").copied().unwrap_or(0.0) + 1e-12
                >= spec.min_completion_ratio
        });
        let best = eligible
            .filter(|r| r.values.get(&spec.minimise).is_some_and(|v| !v.is_nan()))
            .min_by(|a, b| {
                a.values[&spec.minimise]
                    .total_cmp(&b.values[&spec.minimise])
                    .then(a.cell.cmp(&b.cell))
            });
        match best {
            Some(r) => out.push(Recommendation {
                value: Some(r.params[choose].clone()),
                text: format!(
                    "{label}: {} = {}{}  ({} {}, completion {:.1}%, {:.1} events and {:.0} bytes per call)",
                    spec.choose,
                    r.params[choose],
                    {
                        // The other free axes of the winning cell, so the advice is complete.
                        let others: Vec<String> = axes
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| *i != choose && !by.contains(i))
                            .map(|(i, a)| format!("{a} = {}", r.params[i]))
                            .collect();
                        if others.is_empty() { String::new() } else { format!(" with {}", others.join(", ")) }
                    },
                    spec.minimise,
                    fmt_value(r.values[&spec.minimise]),
                    r.values["completion_ratio"] * 100.0,
                    r.values["events_per_call"],
                    r.values["bytes_per_call"],
                ),
                group,
            }),
            None => out.push(Recommendation {
                value: None,
                text: format!("{label}: no value of {} reaches a completion ratio of {}", spec.choose, spec.min_completion_ratio),
                group,
            }),
        }
    }
    out
}
