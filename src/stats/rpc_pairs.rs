//! Request/response pairs read off the events that cross a relay, for traffic whose peers
//! report nothing themselves (a live relay serving the TypeScript SDK, a recording, an inject
//! replay of one).
//!
//! A request is a plain kind-25910 event whose content is a JSON-RPC request (`method` and
//! `id`). Everything the server sends about it carries an `e` tag with the request's event id
//! (responses, progress, CEP-22 frames; the TypeScript SDK's CEP-41 writer frames do not, see
//! `docs/behaviours.md`). A call is *answered* when an event with a JSON-RPC `result` or
//! `error` for it is delivered, or the `end` frame of a CEP-22 transfer (whose result the
//! client reassembles from the frames, so the frames before it count), and its latency runs
//! from the request's publication to that first answer. Later answers (a second relay's copy,
//! a storing relay replaying the response to a new subscription, a second response from a
//! server that ran the request twice) are counted apart, as repeated answers: measured to the
//! last of them, a call that took 164 ms would read as the seconds until a replay.
//! Gift-wrapped events (kinds 1059 and 21059) cannot be read without the recipient's key; they
//! are counted, not paired.
//!
//! Memory is bounded for a relay that runs for days: the newest [`MAX_OPEN_REQUESTS`] requests
//! are followed one by one; an older one is settled as it stands (answered or not, with its
//! latency so far) into its method's row, and a later delivery for it no longer counts. At
//! most [`MAX_METHODS`] methods get rows of their own; requests for any other method share the
//! row [`OTHER_METHODS`].

use hdrhistogram::Histogram;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};

/// The ContextVM event kind.
const CONTEXTVM_KIND: u64 = 25910;
/// Gift-wrap kinds: persistent (NIP-59) and ephemeral (CEP-19).
const GIFT_WRAP_KINDS: [u64; 2] = [1059, 21059];

/// Requests followed one by one; older ones are settled into their method's row.
pub const MAX_OPEN_REQUESTS: usize = 100_000;
/// Methods with a row of their own.
pub const MAX_METHODS: usize = 1_000;
/// The row of requests for methods beyond [`MAX_METHODS`].
pub const OTHER_METHODS: &str = "(other methods)";

#[derive(Debug, Clone)]
struct Request {
    method: String,
    published_us: u64,
    /// The first delivery of an answer to this request.
    answered_us: Option<u64>,
    /// Answers delivered after the first.
    repeated: u64,
}

/// A method's settled requests.
#[derive(Debug, Clone)]
struct Settled {
    requests: u64,
    repeated: u64,
    /// Latencies of the answered ones.
    latency: Histogram<u64>,
}

/// Pairs requests with what answered them; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct RpcPairs {
    requests: BTreeMap<String, Request>,
    /// Request ids in the order they were published, to settle the oldest first.
    order: VecDeque<String>,
    /// Per method: requests settled, and the latencies of those answered.
    settled: BTreeMap<String, Settled>,
    /// Methods seen (bounded by [`MAX_METHODS`]).
    methods: std::collections::BTreeSet<String>,
    /// Deliveries of gift-wrapped events, which cannot be read here.
    gift_wrapped: u64,
}

/// One method's calls.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PairRow {
    /// The JSON-RPC method (`tools/call` carries the tool: `tools/call echo`).
    pub method: String,
    /// Requests published.
    pub requests: u64,
    /// Requests whose `result` or `error` was delivered.
    pub answered: u64,
    /// Answers delivered after a request's first (duplicates, replays, second responses).
    pub repeated: u64,
    /// Latency percentiles of answered requests, in microseconds.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Largest.
    pub max_us: u64,
}

fn kind(event: &Value) -> Option<u64> {
    event.get("kind").and_then(Value::as_u64)
}

/// The event ids an event's `e` tags name.
fn e_tags(event: &Value) -> impl Iterator<Item = &str> {
    event
        .get("tags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tag| match tag.as_array()?.as_slice() {
            [name, id, ..] if name == "e" => id.as_str(),
            _ => None,
        })
}

impl RpcPairs {
    /// A peer published `event` at `t_us`.
    pub fn published(&mut self, t_us: u64, event: &Value) {
        let (Some(kind), Some(id), Some(content)) = (
            kind(event),
            event.get("id").and_then(Value::as_str),
            event.get("content").and_then(Value::as_str),
        ) else {
            return;
        };
        self.published_parts(t_us, kind, id, content);
    }

    /// A peer published, at `t_us`, an event of `kind` with id `id` (hex) and `content`:
    /// [`RpcPairs::published`] without a JSON event.
    pub fn published_parts(&mut self, t_us: u64, kind: u64, id: &str, content: &str) {
        if kind != CONTEXTVM_KIND {
            return;
        }
        let Ok(message) = serde_json::from_str::<Value>(content) else {
            return;
        };
        let (Some(method), Some(_)) = (
            message.get("method").and_then(Value::as_str),
            message.get("id"),
        ) else {
            return; // a notification or a response
        };
        let method = match message
            .get("params")
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
        {
            Some(tool) if method == "tools/call" => format!("tools/call {tool}"),
            _ => method.to_owned(),
        };
        let method = if self.methods.contains(&method) {
            method
        } else if self.methods.len() < MAX_METHODS {
            self.methods.insert(method.clone());
            method
        } else {
            OTHER_METHODS.to_owned()
        };
        if self.requests.contains_key(id) {
            return;
        }
        self.requests.insert(
            id.to_owned(),
            Request {
                method,
                published_us: t_us,
                answered_us: None,
                repeated: 0,
            },
        );
        self.order.push_back(id.to_owned());
        while self.requests.len() > MAX_OPEN_REQUESTS {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(request) = self.requests.remove(&oldest) {
                record(&mut self.settled, &request);
            }
        }
    }

    /// A relay delivered `event` to a subscriber at `t_us`.
    pub fn delivered(&mut self, t_us: u64, event: &Value) {
        let Some(kind) = kind(event) else { return };
        let content = event.get("content").and_then(Value::as_str).unwrap_or("");
        self.delivered_parts(t_us, kind, e_tags(event), content);
    }

    /// A relay delivered, at `t_us`, an event of `kind` whose `e` tags name `tagged` and whose
    /// content is `content`: [`RpcPairs::delivered`] without a parsed event. The content is
    /// only parsed when a tag names a request seen, so traffic that answers nothing costs
    /// no JSON parsing.
    pub fn delivered_parts<'a>(
        &mut self,
        t_us: u64,
        kind: u64,
        tagged: impl Iterator<Item = &'a str>,
        content: &str,
    ) {
        if GIFT_WRAP_KINDS.contains(&kind) {
            self.gift_wrapped += 1;
            return;
        }
        if kind != CONTEXTVM_KIND {
            return;
        }
        let known: Vec<&str> = tagged
            .filter(|id| self.requests.contains_key(*id))
            .collect();
        if known.is_empty() {
            return;
        }
        let answers = serde_json::from_str::<Value>(content).is_ok_and(|m| {
            m.get("result").is_some()
                || m.get("error").is_some()
                || m.get("params")
                    .and_then(|p| p.get("cvm"))
                    .and_then(|c| c.get("frameType"))
                    .and_then(Value::as_str)
                    == Some("end")
        });
        if !answers {
            return;
        }
        for id in known {
            if let Some(request) = self.requests.get_mut(id) {
                match request.answered_us {
                    None => request.answered_us = Some(t_us),
                    Some(_) => request.repeated += 1,
                }
            }
        }
    }

    /// Deliveries of gift-wrapped events, which this reader cannot open.
    pub fn gift_wrapped(&self) -> u64 {
        self.gift_wrapped
    }

    /// Requests followed one by one now (at most [`MAX_OPEN_REQUESTS`]).
    pub fn requests(&self) -> usize {
        self.requests.len()
    }

    /// One row per method, in method order.
    pub fn rows(&self) -> Vec<PairRow> {
        let mut by_method = self.settled.clone();
        for request in self.requests.values() {
            record(&mut by_method, request);
        }
        by_method
            .into_iter()
            .map(|(method, s)| PairRow {
                method: method.to_owned(),
                requests: s.requests,
                answered: s.latency.len(),
                repeated: s.repeated,
                p50_us: s.latency.value_at_quantile(0.5),
                p90_us: s.latency.value_at_quantile(0.9),
                p99_us: s.latency.value_at_quantile(0.99),
                max_us: s.latency.max(),
            })
            .collect()
    }
}

/// Counts `request` in its method's row of `rows`.
fn record(rows: &mut BTreeMap<String, Settled>, request: &Request) {
    let row = rows
        .entry(request.method.clone())
        .or_insert_with(|| Settled {
            requests: 0,
            repeated: 0,
            // One microsecond to a day, three significant figures: fixed bounds, so
            // `saturating_record` clamps instead of needing to resize.
            latency: Histogram::new_with_bounds(1, 86_400_000_000, 3).expect("valid bounds"),
        });
    row.requests += 1;
    row.repeated += request.repeated;
    if let Some(answered) = request.answered_us {
        row.latency
            .saturating_record(answered.saturating_sub(request.published_us).max(1));
    }
}

/// The pairs as a table for people (`-` where nothing was answered), and a line about the
/// gift-wrapped deliveries that could not be read.
pub fn table(rows: &[PairRow], gift_wrapped: u64) -> String {
    use crate::stats::output::human_us;
    use std::fmt::Write as _;
    let mut out = String::new();
    let wrapped = if gift_wrapped > 0 {
        format!("{gift_wrapped} gift-wrapped deliveries cannot be read here\n")
    } else {
        String::new()
    };
    if rows.is_empty() {
        let _ = writeln!(out, "no plain JSON-RPC requests crossed the relays");
        out.push_str(&wrapped);
        return out;
    }
    let _ = writeln!(
        out,
        "{:<28} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "request", "sent", "answered", "again", "p50", "p90", "p99", "max"
    );
    for c in rows {
        let cells = if c.answered == 0 {
            [
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
            ]
        } else {
            [c.p50_us, c.p90_us, c.p99_us, c.max_us].map(human_us)
        };
        let _ = writeln!(
            out,
            "{:<28} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
            c.method, c.requests, c.answered, c.repeated, cells[0], cells[1], cells[2], cells[3]
        );
    }
    if rows.iter().any(|r| r.repeated > 0) {
        let _ = writeln!(
            out,
            "latency runs to a request's first answer; `again`: answers delivered after it \
             (another relay's copy, a replay to a new subscription, a second response)"
        );
    }
    out.push_str(&wrapped);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(id: &str, method: &str, tool: Option<&str>) -> Value {
        let mut body = json!({"jsonrpc": "2.0", "id": 1, "method": method});
        if let Some(tool) = tool {
            body["params"] = json!({"name": tool});
        }
        json!({"id": id, "kind": 25910, "tags": [], "content": body.to_string()})
    }

    fn reply(request: &str, body: Value) -> Value {
        json!({"id": "r", "kind": 25910, "tags": [["e", request]], "content": body.to_string()})
    }

    #[test]
    fn a_call_lasts_until_its_first_answer_and_later_answers_are_counted_apart() {
        let mut pairs = RpcPairs::default();
        pairs.published(1_000, &request("a", "tools/call", Some("large")));
        let result = reply("a", json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        pairs.delivered(5_000, &result);
        pairs.delivered(
            9_000,
            &reply(
                "a",
                json!({"jsonrpc": "2.0", "method": "notifications/progress"}),
            ),
        );
        // A storing relay replays the response to a new subscription seconds later.
        pairs.delivered(6_900_000, &result);
        let rows = pairs.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].method, "tools/call large");
        assert_eq!(
            (rows[0].requests, rows[0].answered, rows[0].repeated),
            (1, 1, 1)
        );
        // From publication (1 ms) to the first answer (5 ms), to three significant figures.
        assert!(
            (3_990..=4_010).contains(&rows[0].max_us),
            "{}",
            rows[0].max_us
        );
        assert!(table(&rows, 0).contains("first answer"));
    }

    #[test]
    fn a_cep22_end_frame_answers_its_call() {
        let mut pairs = RpcPairs::default();
        pairs.published(0, &request("a", "tools/call", Some("large")));
        let frame = |kind: &str| {
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": "2", "cvm": {"type": "oversized-transfer", "frameType": kind}}})
        };
        pairs.delivered(10, &reply("a", frame("chunk")));
        assert_eq!(pairs.rows()[0].answered, 0);
        pairs.delivered(20, &reply("a", frame("end")));
        assert_eq!(pairs.rows()[0].answered, 1);
    }

    #[test]
    fn progress_alone_does_not_answer_and_notifications_are_not_requests() {
        let mut pairs = RpcPairs::default();
        pairs.published(0, &request("a", "initialize", None));
        pairs.published(
            0,
            &json!({"id": "n", "kind": 25910, "tags": [], "content": json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()}),
        );
        pairs.delivered(
            10,
            &reply(
                "a",
                json!({"jsonrpc": "2.0", "method": "notifications/progress"}),
            ),
        );
        let rows = pairs.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].requests, rows[0].answered), (1, 0));
    }

    #[test]
    fn gift_wraps_are_counted_not_read() {
        let mut pairs = RpcPairs::default();
        pairs.delivered(
            0,
            &json!({"id": "g", "kind": 1059, "tags": [], "content": "x"}),
        );
        pairs.delivered(
            0,
            &json!({"id": "h", "kind": 21059, "tags": [], "content": "x"}),
        );
        assert_eq!(pairs.gift_wrapped(), 2);
        assert!(pairs.rows().is_empty());
    }

    /// A relay serving for days: requests past the newest `MAX_OPEN_REQUESTS` are settled
    /// into their rows, so memory stays bounded and every request is still counted.
    #[test]
    fn old_requests_are_settled_and_still_counted() {
        let mut pairs = RpcPairs::default();
        let total = MAX_OPEN_REQUESTS + 10;
        for n in 0..total {
            let id = format!("q{n}");
            pairs.published(n as u64, &request(&id, "ping", None));
            if n == 0 {
                pairs.delivered(
                    50,
                    &reply("q0", json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
                );
            }
        }
        assert_eq!(pairs.requests(), MAX_OPEN_REQUESTS);
        // The first request was settled answered; a late reply to a settled one is ignored.
        pairs.delivered(
            9_999_999,
            &reply("q1", json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
        );
        let rows = pairs.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].requests, total as u64);
        assert_eq!((rows[0].answered, rows[0].max_us), (1, 50));
    }

    #[test]
    fn methods_past_the_bound_share_one_row() {
        let mut pairs = RpcPairs::default();
        for n in 0..MAX_METHODS + 5 {
            pairs.published(0, &request(&format!("q{n}"), &format!("m{n}"), None));
        }
        pairs.published(0, &request("again", "m0", None));
        let rows = pairs.rows();
        assert_eq!(rows.len(), MAX_METHODS + 1);
        let other = rows.iter().find(|r| r.method == OTHER_METHODS).unwrap();
        assert_eq!(other.requests, 5);
        assert_eq!(rows.iter().find(|r| r.method == "m0").unwrap().requests, 2);
    }
}
