//! Outcomes written into a trace after it was closed. A live trace's writer closes with the
//! relays, before the calls' outcomes are known (a served command reports them when it exits;
//! relaysim's own live peers when the run ends), so its summary line is written again with
//! them, and with the completion ratio they give. Only the file's last line is read.

use super::{Line, OutcomeLine};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// How far from the end of the file the summary line is looked for: a live writer's summary
/// has no outcomes and is short.
const TAIL: u64 = 1 << 16;

/// Replaces the summary line that ends the trace at `path` with one that carries `outcomes`,
/// keeping its integrity and dropped counts; the completion ratio is theirs (none without
/// outcomes: a trace that knows no outcome claims no ratio).
pub fn set_outcomes(path: &Path, outcomes: Vec<OutcomeLine>) -> std::io::Result<()> {
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned());
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let len = file.metadata()?.len();
    let from = len.saturating_sub(TAIL);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    let body = tail.strip_suffix(b"\n").unwrap_or(&tail);
    let start = match body.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None if from == 0 => 0,
        None => return Err(bad("the trace's last line is longer than 64 KiB")),
    };
    let line: Line = serde_json::from_slice(&body[start..]).map_err(std::io::Error::other)?;
    let Line::Summary {
        integrity_violations,
        dropped,
        ..
    } = line
    else {
        return Err(bad("the trace does not end with its summary line"));
    };
    let completed = outcomes.iter().filter(|o| o.outcome == "completed").count();
    let summary = Line::Summary {
        completion_ratio: (!outcomes.is_empty()).then(|| completed as f64 / outcomes.len() as f64),
        outcomes,
        integrity_violations,
        dropped,
    };
    file.set_len(from + start as u64)?;
    file.seek(SeekFrom::End(0))?;
    let text = serde_json::to_string(&summary).map_err(std::io::Error::other)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.flush()
}

/// A served program's reported outcome as a trace's: `completed`, or failed in its own words
/// under the family a hosted program's failure gets ([`crate::peer::client::program_cause`]).
pub fn program_outcome(words: &str) -> String {
    if words == "completed" {
        return words.to_owned();
    }
    format!(
        "failed:{}: {words}",
        crate::peer::client::program_cause(words)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_trace_gets_its_outcomes_and_an_honest_ratio() {
        let dir = std::env::temp_dir().join(format!("relaysim-outcomes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let header = r#"{"type":"header","format":2,"relaysim":"0","scenario":"s","scenario_hash":"","seed":0,"driver":"live","events":"full"}"#;
        std::fs::write(
            &path,
            format!("{header}\n{{\"type\":\"summary\",\"outcomes\":[],\"integrity_violations\":0,\"dropped\":3}}\n"),
        )
        .unwrap();
        let call = |n: u64, outcome: &str| OutcomeLine {
            workload: "echo".into(),
            client: "ts-client".into(),
            call: n,
            tool: "echo".into(),
            outcome: program_outcome(outcome),
            why: None,
            started_us: None,
            ended_us: None,
        };
        set_outcomes(&path, vec![call(1, "completed"), call(2, "timeout")]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert!(text.starts_with(header));
        assert_eq!(last["completion_ratio"], 0.5);
        assert_eq!(last["dropped"], 3);
        assert_eq!(
            last["outcomes"][1]["outcome"],
            "failed:program-timeout: timeout"
        );
        // The same families as a hosted program's failures.
        assert_eq!(
            program_outcome("initialize: timeout"),
            "failed:program-timeout: initialize: timeout"
        );
        assert_eq!(
            program_outcome("Request timed out"),
            "failed:program-timeout: Request timed out"
        );
        assert_eq!(
            program_outcome("error: boom"),
            "failed:program-error: error: boom"
        );
        // No outcomes: no ratio at all, rather than a claim of 1.0.
        set_outcomes(&path, Vec::new()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.lines().last().unwrap().contains("completion_ratio"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
