//! What a trace says about the traffic itself, whoever the peers were: per peer, how many
//! deliveries arrived, were duplicates or out of order, and how many of its messages links
//! lost; and the JSON-RPC request/response pairs with their latencies
//! ([`RpcPairs`](crate::stats::rpc_pairs::RpcPairs)). The inject replay prints it beside the
//! receivers' outcomes, so a recording of foreign peers (the TypeScript SDK through `serve` or
//! `record`) still says what happened.

use crate::stats::rpc_pairs::{PairRow, RpcPairs};
use crate::trace::{Line, Trace};
use std::collections::BTreeMap;

/// One peer's deliveries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerTraffic {
    /// Events published.
    pub published: u64,
    /// Events delivered to it.
    pub delivered: u64,
    /// Deliveries of an event it already had.
    pub duplicates: u64,
    /// First deliveries after a later event of the same author.
    pub reordered: u64,
    /// Its messages that a link lost (either way).
    pub lost: u64,
}

/// The traffic of a trace; see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traffic {
    /// By peer name.
    pub peers: BTreeMap<String, PeerTraffic>,
    /// Request/response pairs by method.
    pub calls: Vec<PairRow>,
    /// Deliveries of gift-wrapped events, which cannot be read without the recipient's key.
    pub gift_wrapped: u64,
    /// Events the relays refused (`OK false`), by relay, publishing peer and the relay's
    /// words: what a receiver waiting for them never got.
    pub refusals: BTreeMap<(String, String, String), u64>,
    /// Events whose relay's `OK` never reached their publisher (none in the trace: the relay
    /// sent none, or the event or the OK was lost, or the trace ended first), by relay and
    /// publishing peer: a publisher that waits for its OKs waits in vain.
    pub unanswered: BTreeMap<(String, String), u64>,
    /// Tokens whose progress a peer wrote again (a request run twice), the first
    /// [`crate::stats::second_writers::MAX_NAMED`].
    pub second_writers: Vec<crate::stats::second_writers::SecondWriter>,
    /// Second writers past those named.
    pub second_writers_not_named: u64,
}

/// Reads the traffic of `trace` (event bodies are needed for the pairs: `--trace-events
/// full`, the default, and every live trace).
pub fn traffic(trace: &Trace) -> Traffic {
    let mut bodies: BTreeMap<&str, &serde_json::Value> = BTreeMap::new();
    let mut peers: BTreeMap<String, PeerTraffic> = BTreeMap::new();
    let mut pairs = RpcPairs::default();
    let mut refusals = BTreeMap::new();
    // Publications not answered yet, by (relay, id); the publisher beside.
    let mut awaiting: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    let mut writers = crate::stats::second_writers::SecondWriters::default();
    for line in &trace.lines {
        match line {
            Line::Verdict {
                relay,
                peer,
                id,
                accepted,
                message,
                ..
            } => {
                awaiting.remove(&(relay.as_str(), id.as_str()));
                if !accepted {
                    let key = (relay.clone(), peer.clone(), message.clone());
                    *refusals.entry(key).or_default() += 1;
                }
            }
            Line::Published {
                t,
                peer,
                relay,
                id,
                event,
                ..
            } => {
                awaiting.insert((relay.as_str(), id.as_str()), peer.as_str());
                if let Some(e) = event {
                    if bodies.insert(id.as_str(), e).is_none() {
                        pairs.published(*t, e);
                        if let Some(content) = e.get("content").and_then(|c| c.as_str()) {
                            let author = e.get("pubkey").and_then(|k| k.as_str()).unwrap_or(peer);
                            let to = recipient(e).unwrap_or_default();
                            writers.published(author, peer, to, content);
                        }
                    }
                }
                if peer != "external" {
                    peers.entry(peer.clone()).or_default().published += 1;
                }
            }
            Line::Delivered {
                t,
                peer,
                id,
                reordered,
                duplicate,
                ..
            } => {
                let p = peers.entry(peer.clone()).or_default();
                p.delivered += 1;
                p.duplicates += u64::from(*duplicate);
                p.reordered += u64::from(*reordered);
                if let Some(e) = bodies.get(id.as_str()) {
                    pairs.delivered(*t, e);
                }
            }
            Line::Lost { peer, .. } => peers.entry(peer.clone()).or_default().lost += 1,
            _ => {}
        }
    }
    let mut unanswered = BTreeMap::new();
    for ((relay, _), peer) in awaiting {
        *unanswered
            .entry((relay.to_owned(), peer.to_owned()))
            .or_default() += 1;
    }
    Traffic {
        peers,
        calls: pairs.rows(),
        gift_wrapped: pairs.gift_wrapped(),
        refusals,
        unanswered,
        second_writers: writers.found().0.to_vec(),
        second_writers_not_named: writers.found().1,
    }
}

/// An event's first `p` tag.
fn recipient(event: &serde_json::Value) -> Option<&str> {
    event.get("tags")?.as_array()?.iter().find_map(|t| {
        let t = t.as_array()?;
        (t.first()?.as_str()? == "p").then(|| t.get(1)?.as_str())?
    })
}

impl Traffic {
    /// What the relays did that can make a call fail, one clause each, in words: refusals
    /// with the relay's own words, events never answered, tokens written again.
    pub fn disturbances(&self) -> Vec<String> {
        let mut out = Vec::new();
        for ((relay, peer, message), n) in &self.refusals {
            out.push(format!(
                "{relay} refused {n} of {peer}'s events: {message:?}"
            ));
        }
        for ((relay, peer), n) in &self.unanswered {
            out.push(format!(
                "no OK from {relay} reached {peer} for {n} of its events"
            ));
        }
        out.extend(crate::stats::second_writers::clauses(
            &self.second_writers,
            self.second_writers_not_named,
        ));
        out
    }

    /// The traffic as one JSON document: `peers` (by name: published, delivered, duplicates,
    /// reordered, lost), `calls` (per method: requests, answered, answers repeated after the first, and the latency percentiles
    /// of the answered ones in microseconds, `null` when none was answered) and
    /// `gift_wrapped`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let peers: serde_json::Map<String, serde_json::Value> = self
            .peers
            .iter()
            .map(|(name, p)| {
                let counts = json!({
                    "published": p.published,
                    "delivered": p.delivered,
                    "duplicates": p.duplicates,
                    "reordered": p.reordered,
                    "lost": p.lost,
                });
                (name.clone(), counts)
            })
            .collect();
        let calls: Vec<serde_json::Value> = self
            .calls
            .iter()
            .map(|c| {
                let answered = |us: u64| (c.answered > 0).then_some(us);
                json!({
                    "method": c.method,
                    "requests": c.requests,
                    "answered": c.answered,
                    "repeated": c.repeated,
                    "p50_us": answered(c.p50_us),
                    "p90_us": answered(c.p90_us),
                    "p99_us": answered(c.p99_us),
                    "max_us": answered(c.max_us),
                })
            })
            .collect();
        let refusals: Vec<serde_json::Value> = self
            .refusals
            .iter()
            .map(|((relay, peer, message), n)| {
                json!({ "relay": relay, "peer": peer, "message": message, "count": n })
            })
            .collect();
        let unanswered: Vec<serde_json::Value> = self
            .unanswered
            .iter()
            .map(|((relay, peer), n)| json!({ "relay": relay, "peer": peer, "count": n }))
            .collect();
        json!({
            "peers": peers,
            "calls": calls,
            "gift_wrapped": self.gift_wrapped,
            "refusals": refusals,
            "unanswered": unanswered,
            "second_writers": self.second_writers,
            "second_writers_not_named": self.second_writers_not_named,
        })
    }

    /// The traffic as text for people.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<20} {:>9} {:>9} {:>10} {:>9} {:>6}",
            "peer", "published", "delivered", "duplicates", "reordered", "lost"
        );
        for (name, p) in &self.peers {
            let _ = writeln!(
                out,
                "{:<20} {:>9} {:>9} {:>10} {:>9} {:>6}",
                name, p.published, p.delivered, p.duplicates, p.reordered, p.lost
            );
        }
        if !self.refusals.is_empty() {
            let _ = writeln!(out, "\nrefused by the relays (OK false):");
            for ((relay, peer, message), n) in &self.refusals {
                let _ = writeln!(out, "  {relay} refused {n} of {peer}'s events: {message:?}");
            }
        }
        if !self.unanswered.is_empty() {
            let _ = writeln!(out, "\nnever answered (no OK in the trace):");
            for ((relay, peer), n) in &self.unanswered {
                let _ = writeln!(
                    out,
                    "  no OK from {relay} reached {peer} for {n} of its events"
                );
            }
        }
        out.push_str(&crate::stats::second_writers::text(
            &self.second_writers,
            self.second_writers_not_named,
        ));
        let _ = writeln!(out);
        out.push_str(&crate::stats::rpc_pairs::table(
            &self.calls,
            self.gift_wrapped,
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(relay: &str, peer: &str, id: &str) -> Line {
        Line::Published {
            t: 1,
            peer: peer.into(),
            relay: relay.into(),
            id: id.into(),
            bytes: 100,
            event: None,
        }
    }

    fn verdict(relay: &str, peer: &str, id: &str, accepted: bool, message: &str) -> Line {
        Line::Verdict {
            t: 2,
            relay: relay.into(),
            peer: peer.into(),
            id: id.into(),
            accepted,
            message: message.into(),
        }
    }

    #[test]
    fn refusals_and_events_never_answered_are_named_per_relay_and_publisher() {
        let trace = Trace {
            lines: vec![
                published("r1", "server", "a"),
                published("r2", "server", "a"),
                published("r1", "server", "b"),
                published("r1", "client", "c"),
                verdict("r1", "server", "a", true, ""),
                verdict("r1", "server", "b", false, "invalid: too long"),
                // r2 never answers `a`, and r1 never answers `c`.
            ],
        };
        let t = traffic(&trace);
        assert_eq!(
            t.refusals,
            BTreeMap::from([(
                ("r1".into(), "server".into(), "invalid: too long".into()),
                1
            )])
        );
        assert_eq!(
            t.unanswered,
            BTreeMap::from([
                (("r1".into(), "client".into()), 1),
                (("r2".into(), "server".into()), 1),
            ])
        );
        assert_eq!(
            t.disturbances(),
            [
                "r1 refused 1 of server's events: \"invalid: too long\"",
                "no OK from r1 reached client for 1 of its events",
                "no OK from r2 reached server for 1 of its events",
            ]
        );
        assert!(t.text().contains("never answered (no OK in the trace):"));
    }
}
