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

/// The longest header line read: it holds the scenario's text (at most
/// [`crate::limits::MAX_SPEC_FILE_BYTES`]), escaped (at most 6 bytes a byte), and a few fields. A file whose first line
/// runs longer is not a trace, and is refused without reading the rest.
const MAX_HEADER_LINE_BYTES: u64 = 8 * crate::limits::MAX_SPEC_FILE_BYTES + 4096;

/// Checks trace lines one at a time, so a file is read line by line and never held whole.
struct LineChecker<'a> {
    file: &'a str,
    lines: Vec<Line>,
    last_time: u64,
    /// The number of the last line given.
    at: usize,
}

impl<'a> LineChecker<'a> {
    fn new(file: &'a str) -> Self {
        LineChecker {
            file,
            lines: Vec::new(),
            last_time: 0,
            at: 0,
        }
    }

    fn err(&self, line: usize, message: String) -> TraceError {
        TraceError::Invalid {
            file: self.file.to_owned(),
            line,
            message,
        }
    }

    /// Line number `n` (from 1), without its line ending.
    fn line(&mut self, n: usize, raw: &str) -> Result<(), TraceError> {
        self.at = n;
        if raw.trim().is_empty() {
            return Ok(());
        }
        let file = self.file;
        let err = |line: usize, message: String| TraceError::Invalid {
            file: file.to_owned(),
            line,
            message,
        };
        if self.lines.is_empty() {
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
        let line: Line =
            serde_json::from_str(raw).map_err(|e| err(n, format!("not a trace line: {e}")))?;
        // Observations come in time order, and a link's n-th message cannot be numbered
        // beyond every line seen so far: both keep replays finite and in bounds.
        if let Some(t) = line.time() {
            if t < self.last_time {
                return Err(err(
                    n,
                    format!("time goes backwards ({t} after {})", self.last_time),
                ));
            }
            self.last_time = t;
        }
        if let Line::Link { seq, delays_us, .. } = &line {
            if *seq > n as u64 {
                return Err(err(n, format!("link message number {seq} is out of range")));
            }
            if delays_us.len() > crate::limits::MAX_TRACE_COPIES {
                return Err(err(
                    n,
                    format!(
                        "{} copies of one message; at most {}",
                        delays_us.len(),
                        crate::limits::MAX_TRACE_COPIES
                    ),
                ));
            }
        }
        if !self.lines.is_empty() && matches!(line, Line::Header { .. }) {
            return Err(err(n, "a second header".into()));
        }
        if matches!(self.lines.last(), Some(Line::Summary { .. })) {
            return Err(err(n, "a line after the summary".into()));
        }
        self.lines.push(line);
        Ok(())
    }

    fn finish(self) -> Result<Trace, TraceError> {
        match (self.lines.first(), self.lines.last()) {
            (Some(Line::Header { .. }), Some(Line::Summary { .. })) if self.lines.len() >= 2 => {
                Ok(Trace { lines: self.lines })
            }
            (None, _) => Err(self.err(1, "empty trace".into())),
            _ => Err(self.err(
                self.at,
                "truncated: the trace has no closing summary line".into(),
            )),
        }
    }
}

impl Trace {
    /// Reads and checks a trace file, a line at a time: memory holds the lines read, never the
    /// file's text, and a first line longer than a header can be is refused unread.
    pub fn from_file(path: &std::path::Path) -> Result<Self, TraceError> {
        use std::io::{BufRead, Read};
        let name = path.display().to_string();
        let io = |source: std::io::Error| TraceError::Io {
            path: name.clone(),
            source,
        };
        let input = |e: crate::limits::InputError| match e {
            crate::limits::InputError::Io(source) => io(source),
            other => io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                other.to_string(),
            )),
        };
        let max = crate::limits::MAX_TRACE_FILE_BYTES;
        let mut reader = crate::limits::open_regular(path, max).map_err(input)?;
        let mut checker = LineChecker::new(&name);
        let (mut buf, mut total, mut n) = (Vec::new(), 0u64, 0usize);
        loop {
            buf.clear();
            let cap = if n == 0 { MAX_HEADER_LINE_BYTES } else { max };
            let read = (&mut reader)
                .take(cap + 1)
                .read_until(b'\n', &mut buf)
                .map_err(io)? as u64;
            if read == 0 {
                break;
            }
            n += 1;
            total += read;
            if total > max {
                return Err(input(crate::limits::InputError::TooLarge {
                    size: total,
                    max,
                }));
            }
            if read > cap {
                return Err(checker.err(n, format!("longer than {cap} bytes: not a trace line")));
            }
            let raw = std::str::from_utf8(&buf).map_err(|e| {
                let good = std::str::from_utf8(&buf[..e.valid_up_to()]).unwrap_or_default();
                checker.err(
                    n,
                    format!("not UTF-8 text (column {})", good.chars().count() + 1),
                )
            })?;
            checker.line(n, raw.trim_end_matches(['\n', '\r']))?;
        }
        checker.finish()
    }

    /// Parses trace text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, TraceError> {
        let mut checker = LineChecker::new(file);
        for (i, raw) in text.lines().enumerate() {
            checker.line(i + 1, raw)?;
        }
        checker.finish()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "relaysim-trace-{}-{name}.jsonl",
            std::process::id()
        ));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn invalid(path: &std::path::Path) -> (usize, String) {
        match Trace::from_file(path) {
            Err(TraceError::Invalid { line, message, .. }) => (line, message),
            other => panic!("{other:?}"),
        }
    }

    /// A file read a line at a time gives the lines its text gives; a first line longer than
    /// any header is refused before the rest is read; bad bytes are placed by line.
    #[test]
    fn a_trace_file_is_read_a_line_at_a_time_as_its_text_is_parsed() {
        let shipped =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/lossy-download.jsonl");
        let text = std::fs::read_to_string(&shipped).unwrap();
        let whole = Trace::parse(&text, "t").unwrap();
        let read = Trace::from_file(&shipped).unwrap();
        assert_eq!(read.lines.len(), whole.lines.len());
        assert_eq!(format!("{:?}", read.lines), format!("{:?}", whole.lines));
        // With CRLF line endings too.
        let crlf = scratch("crlf", text.replace('\n', "\r\n").as_bytes());
        assert_eq!(
            Trace::from_file(&crlf).unwrap().lines.len(),
            whole.lines.len()
        );

        let endless = scratch("endless", &vec![b'x'; MAX_HEADER_LINE_BYTES as usize + 10]);
        let (line, message) = invalid(&endless);
        assert_eq!(line, 1);
        assert!(message.starts_with("longer than"), "{message}");

        let mut bad = text
            .lines()
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes();
        bad.extend_from_slice(b"\n{\"type\":\xff}\n");
        let (line, message) = invalid(&scratch("bad", &bad));
        assert_eq!((line, message.as_str()), (3, "not UTF-8 text (column 9)"));

        let truncated = text.lines().take(3).collect::<Vec<_>>().join("\n");
        let (line, message) = invalid(&scratch("truncated", truncated.as_bytes()));
        assert_eq!(line, 3);
        assert!(message.starts_with("truncated"), "{message}");
        for name in ["crlf", "endless", "bad", "truncated"] {
            let _ = std::fs::remove_file(scratch(name, b""));
        }
    }
}
