//! Second writers read off the events that cross a relay: a server that writes a progress
//! token's frames again from an earlier `progress` than it had reached, in events of their
//! own (not copies of one event). That is what a server does when it runs one request twice —
//! a request delivered by two relays to a server that does not deduplicate them, or replayed
//! by a storing relay to a new subscription — and it is what a client reading the token fails
//! with (the TypeScript SDK's `Non-increasing progress for stream N`). Live deployments and
//! recordings name it with it, since their peers report nothing of the kind themselves.
//!
//! Memory is bounded: the newest [`MAX_TOKENS`] tokens are followed; an older one is
//! forgotten, and its writer counted afresh if it comes back.

use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};

/// Tokens followed at once.
pub const MAX_TOKENS: usize = 100_000;
/// The longest token followed, in bytes: tokens come from event content, which anyone can
/// publish, so a longer one is not followed (real tokens are a few characters).
pub const MAX_TOKEN_BYTES: usize = 128;
/// Second writers named one by one; more are counted.
pub const MAX_NAMED: usize = 64;

/// A token whose frames a writer wrote again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SecondWriter {
    /// Who wrote it (the peer's name).
    pub author: String,
    /// The progress token.
    pub token: String,
    /// The `progress` it had reached when a new event went back to an earlier or equal one.
    pub reached: String,
    /// The `progress` of that event.
    pub again_from: String,
}

/// Follows `(author, recipient, token)` progress; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct SecondWriters {
    /// The highest progress per followed token, and its key in `order`.
    reached: BTreeMap<(String, String, String), f64>,
    order: VecDeque<(String, String, String)>,
    /// Tokens already found written again (named once each).
    found: std::collections::BTreeSet<(String, String, String)>,
    named: Vec<SecondWriter>,
    not_named: u64,
}

impl SecondWriters {
    /// `author` (its public key) published a new event (not a copy of one already seen) with
    /// `content`, addressed to `recipient` (its `p` tag); `shown_as` names the author in what
    /// is reported (a peer's name, which a reconnection may change, so it is not the key).
    pub fn published(&mut self, author: &str, shown_as: &str, recipient: &str, content: &str) {
        // Cheap test first: most events are not progress notifications.
        if !content.contains("notifications/progress") {
            return;
        }
        let Ok(message) = serde_json::from_str::<Value>(content) else {
            return;
        };
        if message.get("method").and_then(Value::as_str) != Some("notifications/progress") {
            return;
        }
        let params = message.get("params");
        let token = match params.and_then(|p| p.get("progressToken")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return,
        };
        if token.len() > MAX_TOKEN_BYTES {
            return;
        }
        let Some(progress) = params
            .and_then(|p| p.get("progress"))
            .and_then(Value::as_f64)
        else {
            return;
        };
        let key = (author.to_owned(), recipient.to_owned(), token);
        match self.reached.get_mut(&key) {
            Some(reached) if progress <= *reached => {
                if self.found.insert(key.clone()) {
                    let writer = SecondWriter {
                        author: shown_as.to_owned(),
                        token: key.2.clone(),
                        reached: number(*reached),
                        again_from: number(progress),
                    };
                    if self.named.len() < MAX_NAMED {
                        self.named.push(writer);
                    } else {
                        self.not_named += 1;
                    }
                }
            }
            Some(reached) => *reached = progress,
            None => {
                self.reached.insert(key.clone(), progress);
                self.order.push_back(key);
                while self.reached.len() > MAX_TOKENS {
                    let Some(oldest) = self.order.pop_front() else {
                        break;
                    };
                    self.reached.remove(&oldest);
                    self.found.remove(&oldest);
                }
            }
        }
    }

    /// The tokens written again, in the order they were found (the first [`MAX_NAMED`]),
    /// and how many more.
    pub fn found(&self) -> (&[SecondWriter], u64) {
        (&self.named, self.not_named)
    }
}

/// The block a report prints for `writers` (and `more` not named): empty when there are
/// none.
pub fn text(writers: &[SecondWriter], more: u64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if writers.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\nsecond writers (a token's progress written again):");
    for w in writers {
        let _ = writeln!(
            out,
            "  {} token {}: again from {} after reaching {}",
            w.author, w.token, w.again_from, w.reached
        );
    }
    if more > 0 {
        let _ = writeln!(out, "  … and {more} more");
    }
    out
}

/// One clause per token written again (and one for `more` not named), for a list of what
/// made calls fail.
pub fn clauses(writers: &[SecondWriter], more: u64) -> Vec<String> {
    let mut out: Vec<String> = writers
        .iter()
        .map(|w| {
            format!(
                "{} wrote token {}'s progress again from {} after reaching {} (a second writer, as when a request runs twice)",
                w.author, w.token, w.again_from, w.reached
            )
        })
        .collect();
    if more > 0 {
        out.push(format!("{more} more tokens written again"));
    }
    out
}

/// A progress value as JSON-RPC wrote it: `9`, not `9.0`.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(token: &str, n: u64) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"{token}","progress":{n}}}}}"#
        )
    }

    #[test]
    fn a_token_written_again_from_an_earlier_progress_is_a_second_writer() {
        let mut w = SecondWriters::default();
        for n in 1..=9 {
            w.published("server", "server", "client", &progress("3", n));
        }
        assert!(w.found().0.is_empty(), "rising progress is one writer");
        w.published("server", "server", "client", &progress("3", 9));
        w.published("server", "server", "client", &progress("3", 10));
        w.published("server", "server", "client", &progress("3", 2));
        let (found, more) = w.found();
        assert_eq!(
            found,
            [SecondWriter {
                author: "server".into(),
                token: "3".into(),
                reached: "9".into(),
                again_from: "9".into(),
            }]
        );
        assert_eq!(more, 0, "one token is named once");
    }

    #[test]
    fn tokens_of_other_recipients_or_authors_and_other_messages_are_apart() {
        let mut w = SecondWriters::default();
        w.published("server", "server", "client-a", &progress("1", 5));
        w.published("server", "server", "client-b", &progress("1", 1));
        w.published("other", "other", "client-a", &progress("1", 1));
        w.published("server", "server", "client-a", r#"{"result":{},"id":1}"#);
        w.published(
            "server",
            "server",
            "client-a",
            "not json notifications/progress",
        );
        let long = "t".repeat(MAX_TOKEN_BYTES + 1);
        w.published("server", "server", "client-a", &progress(&long, 5));
        w.published("server", "server", "client-a", &progress(&long, 1));
        assert!(w.found().0.is_empty(), "a long token is not followed");
    }

    #[test]
    fn an_author_is_its_key_whatever_its_connection_is_called() {
        let mut w = SecondWriters::default();
        w.published("key", "client-7", "c", &progress("1", 5));
        w.published("key", "client-9", "c", &progress("1", 2));
        assert_eq!(w.found().0[0].author, "client-9");
    }

    #[test]
    fn followed_tokens_are_bounded() {
        let mut w = SecondWriters::default();
        for i in 0..MAX_TOKENS + 10 {
            w.published("s", "s", "c", &progress(&i.to_string(), 1));
        }
        assert_eq!(w.reached.len(), MAX_TOKENS);
        // The oldest was forgotten: its progress going back is not seen.
        w.published("s", "s", "c", &progress("0", 1));
        assert!(w.found().0.is_empty());
    }
}
