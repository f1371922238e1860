//! Problems in scenario files: where they are (file, line, column, the line's text) and what
//! would fix them. Validation records every problem it finds and reports them together, so a
//! user fixes a file in one pass instead of one error per run.

use std::cell::{OnceCell, RefCell};
use std::fmt;
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A problem in a scenario file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The line's text, when known.
    pub source_line: Option<String>,
    /// The key or item concerned.
    pub key: String,
    /// What is wrong and what was expected.
    pub message: String,
    /// A likely fix (a misspelled key or name).
    pub suggestion: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)?;
        } else {
            write!(f, ": `{}`: {}", self.key, self.message)?;
        }
        if let (Some(text), Some(line), Some(col)) = (&self.source_line, self.line, self.column) {
            let gutter = line.to_string().len();
            write!(f, "\n {line} | {text}\n {:gutter$} | {:>col$}", "", "^")?;
        }
        if let Some(s) = &self.suggestion {
            write!(f, "\nhelp: did you mean `{s}`?")?;
        }
        Ok(())
    }
}

/// Every problem found in one scenario file, in file order (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// The first problem (the one a quick fix starts with).
    pub fn first(&self) -> &Diagnostic {
        &self.0[0]
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        if self.0.len() > 1 {
            write!(f, "\n{} problems in {}", self.0.len(), self.0[0].file)?;
        }
        Ok(())
    }
}

/// Why a scenario cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: cannot read")]
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a valid scenario: every problem found.
    #[error("{0}")]
    Invalid(Diagnostics),
}

impl ScenarioError {
    /// The problems, when the file was read but is not valid.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            ScenarioError::Invalid(d) => &d.0,
            ScenarioError::Io { .. } => &[],
        }
    }
}

/// The closest candidate to `word`, if close enough to be a likely typo.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min()
        .map(|(_, c)| c.to_owned())
}

/// The validation context: the file's name and text, a map from key paths to where they are
/// written, and the problems found so far.
pub(crate) struct Ctx<'a> {
    file: &'a str,
    source: &'a str,
    /// The document with spans, parsed only when a problem needs a place (valid files, and
    /// every sweep cell, are parsed once).
    document: OnceCell<Option<Spanned<DeTable<'a>>>>,
    found: RefCell<Vec<Diagnostic>>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(file: &'a str, source: &'a str) -> Self {
        Ctx {
            file,
            source,
            document: OnceCell::new(),
            found: RefCell::new(Vec::new()),
        }
    }

    /// A problem at `span`, or, without one, where the key path `key` (`relays[0].down.loss`)
    /// is written (the nearest enclosing table when the key itself is absent).
    pub(crate) fn at(
        &self,
        span: Option<Range<usize>>,
        key: &str,
        message: String,
        suggestion: Option<String>,
    ) -> ScenarioError {
        let span = span.or_else(|| self.locate(key));
        ScenarioError::Invalid(Diagnostics(vec![
            self.diagnostic(span, key, message, suggestion)
        ]))
    }

    /// A problem at the value `s`.
    pub(crate) fn spanned<T>(
        &self,
        s: &Spanned<T>,
        key: &str,
        message: String,
        suggestion: Option<String>,
    ) -> ScenarioError {
        self.at(Some(s.span()), key, message, suggestion)
    }

    /// A TOML syntax or type error, with the closest key or variant when one was misspelled.
    pub(crate) fn toml(&self, e: toml::de::Error) -> ScenarioError {
        let message = e.message().trim().to_owned();
        // serde's "unknown field `x`, expected one of `a`, `b`": suggest the closest.
        let mut suggestion = None;
        let mut key = String::new();
        if let Some(rest) = message
            .strip_prefix("unknown field `")
            .or_else(|| message.strip_prefix("unknown variant `"))
        {
            if let Some((word, expected)) = rest.split_once('`') {
                key = word.to_owned();
                let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
                suggestion = closest(word, candidates);
            }
        }
        self.at(e.span(), &key, message, suggestion)
    }

    /// Records `error`'s problems and goes on.
    pub(crate) fn record(&self, error: ScenarioError) {
        match error {
            ScenarioError::Invalid(d) => self.found.borrow_mut().extend(d.0),
            ScenarioError::Io { path, source } => self.found.borrow_mut().push(Diagnostic {
                file: path,
                line: None,
                column: None,
                source_line: None,
                key: String::new(),
                message: source.to_string(),
                suggestion: None,
            }),
        }
    }

    /// Runs one check; a problem is recorded and `None` returned, so validation goes on.
    pub(crate) fn attempt<T>(&self, check: impl FnOnce() -> Result<T, ScenarioError>) -> Option<T> {
        check().map_err(|e| self.record(e)).ok()
    }

    /// Every problem recorded, in file order; `Ok` when there were none.
    pub(crate) fn finish(self) -> Result<(), ScenarioError> {
        let mut found = self.found.into_inner();
        if found.is_empty() {
            return Ok(());
        }
        // File order; problems without a place last, in the order they were found.
        found.sort_by_key(|d| (d.line.is_none(), d.line, d.column));
        Err(ScenarioError::Invalid(Diagnostics(found)))
    }

    fn diagnostic(
        &self,
        span: Option<Range<usize>>,
        key: &str,
        message: String,
        suggestion: Option<String>,
    ) -> Diagnostic {
        let (line, column, source_line) = match span {
            Some(span) => {
                let before = &self.source[..span.start.min(self.source.len())];
                let line = before.matches('\n').count() + 1;
                let line_start = before.rfind('\n').map_or(0, |i| i + 1);
                let column = before[line_start..].chars().count() + 1;
                let text = self.source[line_start..]
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                (Some(line), Some(column), Some(text))
            }
            None => (None, None, None),
        };
        Diagnostic {
            file: self.file.to_owned(),
            line,
            column,
            source_line,
            key: key.to_owned(),
            message,
            suggestion,
        }
    }

    /// Where the key path `key` is written: the deepest part of it found in the document.
    fn locate(&self, key: &str) -> Option<Range<usize>> {
        let document = self
            .document
            .get_or_init(|| DeTable::parse(self.source).ok())
            .as_ref()?;
        if key.is_empty() {
            return None;
        }
        let mut table = document.get_ref();
        let mut best = None;
        let mut rest: Vec<&str> = key.split('.').collect();
        while !rest.is_empty() {
            // A dotted remainder may be one quoted key (`"relay_delivery_latency.p99" = ...`).
            let joined = rest.join(".");
            if let Some(v) = table.get(joined.as_str()) {
                return Some(v.span());
            }
            let (name, index) = split_index(rest.remove(0));
            let Some(mut value) = table.get(name) else {
                return best;
            };
            if let Some(i) = index {
                let DeValue::Array(items) = value.get_ref() else {
                    return Some(value.span());
                };
                let Some(item) = items.get(i) else {
                    return Some(value.span());
                };
                value = item;
            }
            best = Some(value.span());
            match value.get_ref() {
                DeValue::Table(t) => table = t,
                _ => break,
            }
        }
        best
    }
}

/// `relays[2]` → (`relays`, Some(2)); `down` → (`down`, None).
fn split_index(segment: &str) -> (&str, Option<usize>) {
    match segment.strip_suffix(']').and_then(|s| s.split_once('[')) {
        Some((name, i)) => (name, i.parse().ok()),
        None => (segment, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths_are_found_in_the_text() {
        let text =
            "[[relays]]\nname = \"a\"\n[[relays]]\nname = \"b\"\n[relays.down]\nloss = 2.0\n\
                    [expect.latency]\n\"relay_delivery_latency.p99\" = \"1s\"\n";
        let ctx = Ctx::new("t.toml", text);
        let line = |key: &str| match ctx.at(None, key, String::new(), None) {
            ScenarioError::Invalid(d) => d.first().line,
            _ => None,
        };
        assert_eq!(line("relays[1].down.loss"), Some(6));
        assert_eq!(line("relays[1].name"), Some(4));
        // An absent key points at the nearest enclosing table (its header).
        assert_eq!(line("relays[1].down.delay"), Some(5));
        assert_eq!(line("expect.latency.relay_delivery_latency.p99"), Some(8));
        assert_eq!(line("nowhere"), None);
    }

    #[test]
    fn every_recorded_problem_is_reported_in_file_order() {
        let text = "a = 1\nb = 2\n";
        let ctx = Ctx::new("t.toml", text);
        ctx.record(ctx.at(None, "b", "second".into(), None));
        ctx.record(ctx.at(None, "a", "first".into(), None));
        let Err(ScenarioError::Invalid(d)) = ctx.finish() else {
            panic!("problems were recorded");
        };
        let messages: Vec<&str> = d.0.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(messages, ["first", "second"]);
        assert!(d.to_string().ends_with("2 problems in t.toml"));
    }
}
