//! What a foreign peers' program reports about its calls: one JSON line per call,
//! `{"peer", "call", "outcome", "latency_ms", "why"?, "started_unix_ms"?, "ended_unix_ms"?}`, appended to the file named by
//! `RELAYSIM_OUTCOMES` (`interop/ts-sdk/peers.mjs` writes them). `serve -- COMMAND` prints
//! them, `compare --ts-sdk` tallies them beside relaysim's pairings.

use std::path::{Path, PathBuf};

/// The environment variable naming the outcome file a command appends to.
pub const OUTCOMES_ENV: &str = "RELAYSIM_OUTCOMES";
/// The environment variable carrying the relays' `ws://` URLs, comma-separated.
pub const RELAYS_ENV: &str = "RELAYSIM_RELAYS";

/// One call a program reported.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct CallOutcome {
    /// The peer that made it.
    pub peer: String,
    /// The call (for the TypeScript program: `echo`, `large`, `stream`).
    pub call: String,
    /// `completed`, or what went wrong in the program's words (`timeout`, `error: …`).
    pub outcome: String,
    /// From the call's start to its outcome, in milliseconds.
    #[serde(default)]
    pub latency_ms: Option<f64>,
    /// For a call that did not complete: what the program knows of why, in its SDK's words
    /// (the transport errors reported while the call was open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// When the call started and ended, on the wall clock (Unix milliseconds): with the
    /// deployment's start, where the call lies on its trace's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub ended_unix_ms: Option<f64>,
}

impl CallOutcome {
    /// The call's start and end on a trace whose clock read 0 at `origin_unix_us` (Unix
    /// microseconds), in microseconds; `None` when the program did not say, or for times
    /// before the origin.
    pub fn on_trace_clock(&self, origin_unix_us: u64) -> (Option<u64>, Option<u64>) {
        let at = |ms: Option<f64>| {
            let us = (ms? * 1000.0).round();
            (us.is_finite() && us >= origin_unix_us as f64).then(|| us as u64 - origin_unix_us)
        };
        (at(self.started_unix_ms), at(self.ended_unix_ms))
    }
}

impl CallOutcome {
    /// Whether the call completed.
    pub fn completed(&self) -> bool {
        self.outcome == "completed"
    }
}

/// Why an outcome file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum OutcomesError {
    /// The file cannot be read (or is too large).
    #[error("cannot read the command's outcomes {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::limits::InputError,
    },
    /// A line is not an outcome.
    #[error(
        "{path}:{line}: expected {{\"peer\", \"call\", \"outcome\", \"latency_ms\"}}: {source}"
    )]
    Line {
        /// The file.
        path: PathBuf,
        /// Its line number (from 1).
        line: usize,
        /// What was wrong.
        source: serde_json::Error,
    },
}

/// An outcome file in a directory of this process's own, for a command run without an output
/// directory: the directory is created anew (never one that exists, which another user could
/// have prepared, e.g. with a symbolic link in it) and removed with the value.
#[derive(Debug)]
pub struct TemporaryOutcomes {
    dir: PathBuf,
}

impl TemporaryOutcomes {
    /// Creates the directory under the system's temporary directory.
    pub fn new() -> std::io::Result<Self> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("relaysim-outcomes-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(TemporaryOutcomes { dir }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The outcome file's path (the file itself is the command's to create).
    pub fn path(&self) -> PathBuf {
        self.dir.join("outcomes.jsonl")
    }
}

impl Drop for TemporaryOutcomes {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads an outcome file; a file that does not exist holds no outcomes (the program reported
/// none).
pub fn read_outcomes(path: &Path) -> Result<Vec<CallOutcome>, OutcomesError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text =
        crate::limits::read_text(path, crate::limits::MAX_TRACE_FILE_BYTES).map_err(|source| {
            OutcomesError::Read {
                path: path.to_owned(),
                source,
            }
        })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|source| OutcomesError::Line {
                path: path.to_owned(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_lines_are_read_and_a_bad_line_is_named() {
        let dir = std::env::temp_dir().join(format!("relaysim-outcomes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("o.jsonl");
        std::fs::write(
            &path,
            "{\"peer\":\"c\",\"call\":\"echo\",\"outcome\":\"completed\",\"latency_ms\":1.5}\n\n\
             {\"peer\":\"c\",\"call\":\"large\",\"outcome\":\"timeout\"}\n",
        )
        .unwrap();
        let read = read_outcomes(&path).unwrap();
        assert_eq!(read.len(), 2);
        assert!(read[0].completed() && !read[1].completed());
        assert_eq!(read[1].latency_ms, None);
        std::fs::write(&path, "{\"peer\":\"c\"}\n").unwrap();
        let e = read_outcomes(&path).unwrap_err().to_string();
        assert!(e.contains("o.jsonl:1: expected"), "{e}");
        assert_eq!(read_outcomes(&dir.join("none.jsonl")).unwrap(), []);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn temporary_outcome_directories_are_fresh_and_removed() {
        let (a, b) = (
            TemporaryOutcomes::new().unwrap(),
            TemporaryOutcomes::new().unwrap(),
        );
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path(), "x").unwrap();
        let dir = a.dir.clone();
        drop(a);
        assert!(!dir.exists());
    }
}
