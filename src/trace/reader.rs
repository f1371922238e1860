//! The trace reader: parsing a trace file with line-precise errors, and what replays need
//! from it (outcomes, recorded plans).

use super::*;
use std::collections::BTreeMap;

/// Why a trace cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("{path}: cannot read")]
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A line is not a valid trace line.
    #[error("{file}:{line}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// A parsed trace.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Every line, header first and summary last.
    pub lines: Vec<Line>,
}

impl Trace {
    /// Reads and checks a trace file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, TraceError> {
        let text = crate::limits::read_text_io(path, crate::limits::MAX_TRACE_FILE_BYTES).map_err(
            |source| TraceError::Io {
                path: path.display().to_string(),
                source,
            },
        )?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses trace text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, TraceError> {
        let err = |line: usize, message: String| TraceError::Invalid {
            file: file.to_owned(),
            line,
            message,
        };
        let mut lines = Vec::new();
        let mut last_time = 0u64;
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let n = i + 1;
            if lines.is_empty() {
                // Check the version before the shape, so a newer format says so.
                let v: serde_json::Value =
                    serde_json::from_str(raw).map_err(|e| err(n, format!("not JSON: {e}")))?;
                if v.get("type").and_then(|t| t.as_str()) != Some("header") {
                    return Err(err(n, "the first line must be the header".into()));
                }
                match v.get("format").and_then(|f| f.as_u64()) {
                    Some(f) if f == FORMAT as u64 => {}
                    // A live format-1 trace records what a real relay did; only its
                    // `delivered` lines lack the (optional) mechanism, so it still reads.
                    Some(1) if v.get("driver").and_then(|d| d.as_str()) == Some("live") => {}
                    Some(1) => {
                        let scenario = v.get("scenario").and_then(|s| s.as_str()).unwrap_or("?");
                        let seed = v.get("seed").and_then(|s| s.as_u64()).unwrap_or(0);
                        return Err(err(n, format!(
                            "trace format 1 was recorded under the old link model, where one \
                             connection could reorder and lose single messages; this relaysim \
                             reads format {FORMAT}. Regenerate it from its scenario \
                             ({scenario:?}, seed {seed}): `relaysim run SCENARIO.toml --seed \
                             {seed} --trace NEW.jsonl` (add `ordering = \"datagram\"` to a \
                             link to keep the old per-message behaviour)"
                        )));
                    }
                    Some(f) if f > FORMAT as u64 => {
                        return Err(err(n, format!("trace format {f} is newer than this relaysim reads ({FORMAT}); upgrade relaysim")))
                    }
                    Some(f) => return Err(err(n, format!("unknown trace format {f}"))),
                    None => {
                        return Err(err(
                            n,
                            match v.get("format") {
                                Some(f) => format!(
                                    "the header's `format` must be a whole number, found {f}"
                                ),
                                None => "the header has no `format`".into(),
                            },
                        ))
                    }
                }
            }
            let line: Line = serde_json::from_str(raw)
                .map_err(|e| err(i + 1, format!("not a trace line: {e}")))?;
            // Observations come in time order, and a link's n-th message cannot be numbered
            // beyond every line seen so far: both keep replays finite and in bounds.
            if let Some(t) = line.time() {
                if t < last_time {
                    return Err(err(
                        i + 1,
                        format!("time goes backwards ({t} after {last_time})"),
                    ));
                }
                last_time = t;
            }
            if let Line::Link { seq, delays_us, .. } = &line {
                if *seq > i as u64 {
                    return Err(err(
                        i + 1,
                        format!("link message number {seq} is out of range"),
                    ));
                }
                if delays_us.len() > crate::limits::MAX_TRACE_COPIES {
                    return Err(err(
                        i + 1,
                        format!(
                            "{} copies of one message; at most {}",
                            delays_us.len(),
                            crate::limits::MAX_TRACE_COPIES
                        ),
                    ));
                }
            }
            if !lines.is_empty() && matches!(line, Line::Header { .. }) {
                return Err(err(i + 1, "a second header".into()));
            }
            if matches!(lines.last(), Some(Line::Summary { .. })) {
                return Err(err(i + 1, "a line after the summary".into()));
            }
            lines.push(line);
        }
        match (lines.first(), lines.last()) {
            (Some(Line::Header { .. }), Some(Line::Summary { .. })) if lines.len() >= 2 => {
                Ok(Trace { lines })
            }
            (None, _) => Err(err(1, "empty trace".into())),
            _ => Err(err(
                text.lines().count(),
                "truncated: the trace has no closing summary line".into(),
            )),
        }
    }

    /// The header's fields: scenario text, seed, events mode, suppressed outages.
    pub fn header(&self) -> (&str, u64, EventsMode, &[u64]) {
        match &self.lines[0] {
            Line::Header {
                scenario_toml,
                seed,
                events,
                suppressed_outages,
                ..
            } => (scenario_toml, *seed, *events, suppressed_outages),
            _ => unreachable!("checked by parse"),
        }
    }

    /// The recorded outcomes.
    pub fn outcomes(&self) -> &[OutcomeLine] {
        match self.lines.last() {
            Some(Line::Summary { outcomes, .. }) => outcomes,
            _ => unreachable!("checked by parse"),
        }
    }
}

/// The first line where two traces differ: (1-based line number, left, right).
pub fn first_difference(a: &str, b: &str) -> Option<(usize, String, String)> {
    let mut la = a.lines();
    let mut lb = b.lines();
    let mut n = 0;
    loop {
        n += 1;
        match (la.next(), lb.next()) {
            (None, None) => return None,
            (x, y) if x == y => continue,
            (x, y) => {
                return Some((
                    n,
                    x.unwrap_or("<end of trace>").to_owned(),
                    y.unwrap_or("<end of trace>").to_owned(),
                ))
            }
        }
    }
}

/// Link decisions by (relay, peer, way) names: the delays of the copies of each message.
pub type NamedPlans = BTreeMap<(String, String, String), Vec<Vec<Duration>>>;

/// The link decisions recorded in a trace.
pub fn plans_of(trace: &Trace) -> NamedPlans {
    let mut plans = NamedPlans::new();
    for line in &trace.lines {
        if let Line::Link {
            relay,
            peer,
            way,
            seq,
            delays_us,
            ..
        } = line
        {
            let list = plans
                .entry((relay.clone(), peer.clone(), way.clone()))
                .or_default();
            let seq = *seq as usize;
            if list.len() <= seq {
                list.resize(seq + 1, Vec::new());
            }
            list[seq] = delays_us
                .iter()
                .map(|d| Duration::from_micros(*d))
                .collect();
        }
    }
    plans
}
