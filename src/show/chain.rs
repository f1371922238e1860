//! A failure's cause chain, read off a trace: what the network or relay did (losses, outages,
//! refusals), what the client made of it (its failure and what the cause means), and where
//! each publisher stopped. `relaysim transfer` prints it; every line is a fact of the trace,
//! in time order, so a reader can follow the chain without guessing.

use crate::stats::output::human_us;
use crate::trace::{Line, Trace};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Losses listed one by one; past this many they are counted.
const LISTED_LOSSES: usize = 5;

/// What a trace says led to its failures.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CauseChain {
    /// Each lost message: time, what it was (the publisher's n-th event, from 1, when the
    /// trace names it), and where it was lost.
    pub losses: Vec<(u64, String)>,
    /// Outages that happened: time and description.
    pub outages: Vec<(u64, String)>,
    /// Events the relay refused: how many, the first time and message.
    pub refusals: Option<(usize, u64, String)>,
    /// Each failure a client reported: time, client, call, cause.
    pub failures: Vec<(u64, String, u64, String)>,
    /// Per publisher: events published and the time of the last.
    pub publishers: BTreeMap<String, (usize, u64)>,
}

/// What a failure cause means, for the cause families a receiver or client reports.
pub fn meaning(cause: &str) -> Option<&'static str> {
    let family = cause
        .trim_start_matches("failed:")
        .trim_start_matches("download-")
        .trim_start_matches("upload-")
        .trim_start_matches("stream-");
    Some(match family {
        "buffer" => "the receiver's reorder buffer reached its bound: frames after a missing one kept arriving and had to be held until the missing one came, and it never came",
        "gap-at-end" => "positions before `end` were still missing when the grace period ran out",
        "timeout" => "no answer within the call's timeout",
        "hard-timeout" => "the transfer's hard timeout ran out",
        "sequence" => "a frame broke the transfer's order or contradicted an earlier one",
        "digest-mismatch" => "the reassembled text does not hash to the declared digest",
        "aborted-by-peer" => "the sender aborted the transfer",
        "policy" => "the receiver's admission policy refused the transfer",
        _ => return None,
    })
}

impl CauseChain {
    /// Reads the chain off `trace`.
    pub fn of(trace: &Trace) -> CauseChain {
        let mut chain = CauseChain::default();
        // Each publisher's events in the order it first sent them, to name a lost one.
        let mut nth: BTreeMap<&str, (String, usize)> = BTreeMap::new();
        for line in &trace.lines {
            match line {
                Line::Published { t, peer, id, .. } => {
                    let entry = chain.publishers.entry(peer.clone()).or_default();
                    if !nth.contains_key(id.as_str()) {
                        entry.0 += 1;
                        nth.insert(id.as_str(), (peer.clone(), entry.0));
                    }
                    entry.1 = *t;
                }
                Line::Lost {
                    t,
                    relay,
                    peer,
                    way,
                    id,
                } => {
                    let what = id.as_deref().and_then(|id| nth.get(id)).map_or_else(
                        || "a message".to_owned(),
                        |(author, n)| format!("{author}'s event {n}"),
                    );
                    let path = if way == "up" {
                        format!("{peer} -> {relay}")
                    } else {
                        format!("{relay} -> {peer}")
                    };
                    chain.losses.push((*t, format!("{what} lost on {path}")));
                }
                Line::Outage {
                    t,
                    relay,
                    peer,
                    kind,
                    duration_us,
                    suppressed: false,
                    ..
                } => {
                    let whom = peer
                        .as_ref()
                        .map_or_else(|| relay.clone(), |p| format!("{p} at {relay}"));
                    chain.outages.push((
                        *t,
                        format!("{kind} of {whom} for {}", human_us(*duration_us)),
                    ));
                }
                Line::Verdict {
                    t,
                    accepted: false,
                    message,
                    ..
                } => match &mut chain.refusals {
                    Some((n, _, _)) => *n += 1,
                    None => chain.refusals = Some((1, *t, message.clone())),
                },
                Line::Client {
                    t,
                    client,
                    call,
                    event,
                } if super::is_failure(event) => {
                    chain
                        .failures
                        .push((*t, client.clone(), *call, event.clone()));
                }
                _ => {}
            }
        }
        chain
    }

    /// The chain in words, one fact per line, in time order.
    pub fn text(&self) -> String {
        let mut facts: Vec<(u64, String)> = Vec::new();
        for (t, what) in self.losses.iter().take(LISTED_LOSSES) {
            facts.push((*t, what.clone()));
        }
        if self.losses.len() > LISTED_LOSSES {
            let (t, _) = self.losses[LISTED_LOSSES];
            facts.push((
                t,
                format!(
                    "… and {} more lost messages, the last at {}",
                    self.losses.len() - LISTED_LOSSES,
                    human_us(self.losses.last().map_or(t, |l| l.0))
                ),
            ));
        }
        for (t, what) in &self.outages {
            facts.push((*t, what.clone()));
        }
        if let Some((n, t, message)) = &self.refusals {
            facts.push((
                *t,
                format!("the relay refused {n} event(s), the first with {message:?}"),
            ));
        }
        for (t, client, call, cause) in &self.failures {
            let why = meaning(cause).map_or(String::new(), |m| format!(": {m}"));
            facts.push((*t, format!("{client} failed call {call} with {cause}{why}")));
        }
        let first_failure = self.failures.iter().map(|f| f.0).min();
        for (peer, (count, last)) in &self.publishers {
            let after = match first_failure {
                Some(f) if *last >= f => {
                    format!(", {} after the first failure", human_us(last - f))
                }
                Some(f) => format!(", {} before the first failure", human_us(f - last)),
                None => String::new(),
            };
            facts.push((
                *last,
                format!("{peer} published its last event ({count} in all){after}"),
            ));
        }
        facts.sort_by_key(|(t, _)| *t);
        let mut out = String::new();
        for (t, what) in facts {
            let _ = writeln!(out, "  {:>10}  {what}", human_us(t));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_chunk_is_named_and_followed_by_the_failure_it_caused() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("traces/lossy-download.shrunk.jsonl");
        let chain = CauseChain::of(&Trace::from_file(&path).unwrap());
        assert_eq!(chain.losses.len(), 1);
        assert!(
            chain.losses[0].1.starts_with("server's event ")
                && chain.losses[0].1.ends_with("lost on strfry -> client"),
            "{:?}",
            chain.losses
        );
        assert_eq!(chain.failures.len(), 1);
        assert_eq!(chain.failures[0].3, "failed:download-gap-at-end");
        let text = chain.text();
        let lost = text.find("lost on").unwrap();
        let failed = text.find("failed call 1").unwrap();
        assert!(lost < failed, "the loss comes before the failure:\n{text}");
        assert!(text.contains("grace period"), "{text}");
        assert!(text.contains("server published its last event"), "{text}");
    }

    #[test]
    fn an_outage_and_the_relays_refusals_are_in_the_chain() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("traces/khatru-drop-mid-stream.shrunk.jsonl");
        let text = CauseChain::of(&Trace::from_file(&path).unwrap()).text();
        assert!(
            text.contains("connection-drop of client at khatru for"),
            "{text}"
        );
        assert!(text.contains("the relay refused 40 event(s)"), "{text}");
        assert!(text.contains("mute: no one was listening"), "{text}");
    }

    #[test]
    fn causes_have_meanings() {
        assert!(meaning("download-buffer")
            .unwrap()
            .contains("reorder buffer"));
        assert!(meaning("failed:download-gap-at-end").is_some());
        assert_eq!(meaning("something-new"), None);
    }
}
