//! A timeline in words and as JSON: what `relaysim show` prints beside the picture.

use super::{human, Span, Timeline, MAX_MARKS};
use std::collections::BTreeMap;

impl Timeline {
    /// What the picture shows as JSON (`relaysim show --json`), with where it was written.
    pub fn to_json(&self, svg: &std::path::Path, png: &std::path::Path) -> serde_json::Value {
        let span = |s: &Span| {
            let mut span = serde_json::json!({
                "lane": self.lanes[s.lane].name,
                "from_us": s.from_us,
                "to_us": s.to_us,
                "label": s.label,
            });
            if let Some(why) = &s.why {
                span["why"] = why.as_str().into();
            }
            span
        };
        serde_json::json!({
            "title": self.title,
            "lanes": self.lanes.iter().map(|l| &l.name).collect::<Vec<_>>(),
            "from_us": self.from_us,
            "to_us": self.to_us,
            "counts": self.counts.iter().map(|(k, n)| (k.word(), *n)).collect::<BTreeMap<_, _>>(),
            "elided": self.elided,
            "outages": self.outages.iter().map(span).collect::<Vec<_>>(),
            "failing_calls": self.failing_calls.iter().map(span).collect::<Vec<_>>(),
            "svg": svg.display().to_string(),
            "png": png.display().to_string(),
        })
    }

    /// What the picture shows, in words: counts by kind, outages, failing calls.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title);
        let _ = writeln!(
            out,
            "lanes: {}",
            self.lanes
                .iter()
                .map(|l| l.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            out,
            "shown: {} to {}",
            human(self.from_us),
            human(self.to_us)
        );
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(k, n)| format!("{n} {}", k.word()))
            .collect();
        let _ = writeln!(out, "marks: {}", counts.join(", "));
        if self.elided > 0 {
            let _ = writeln!(
                out,
                "{} marks past the first {MAX_MARKS} are not drawn; narrow the window with --from/--to or --call",
                self.elided
            );
        }
        for o in &self.outages {
            let _ = writeln!(
                out,
                "{} on {} at {}",
                o.label,
                self.lanes[o.lane].name,
                human(o.from_us)
            );
        }
        for f in &self.failing_calls {
            let _ = writeln!(
                out,
                "failing call on {}: {} (from {} to {})",
                self.lanes[f.lane].name,
                f.label,
                human(f.from_us),
                human(f.to_us)
            );
            if let Some(why) = &f.why {
                let _ = writeln!(out, "  why: {why}");
            }
        }
        out
    }
}
