//! Why a call failed, beyond its cause: for a call that ran out of time, what it was awaiting
//! and what it last saw; for every failed call, what the relays and connections did while it
//! was open (each refusal's text, each dropped connection). One line beside its cause:
//! `awaiting chunk 23 of 147 (23 read, 40 written, the last at 4.1s); relays refused 3
//! publishes while it was open: "rate-limited: slow down" (server via damus ×3)`.
//!
//! The world reports refusals and drops without saying which call they hurt (a relay refuses
//! an event, not a call), so a call is told those that happened while it was open, by whom.
//! So it is with what program peers log (`env.log`, the SDK's errors as the program passes
//! them on): `the programs logged while it was open: "server error: Duplicate start frame for
//! active transfer (token: 1)" (server ×1)`. Each list is bounded: a run that refuses millions
//! of events keeps the first [`MAX_KEPT`] of each and counts the rest.

use crate::sim::world::PeerId;
use std::collections::BTreeMap;
use std::time::Duration;

/// Refusals and drops kept per run, each.
pub const MAX_KEPT: usize = 4096;
/// Dropped connections listed by name in one call's line.
const DROPS_LISTED: usize = 3;
/// Refusals (and program lines) grouped by text in one call's line (the rest are counted).
const REFUSALS_GROUPED: usize = 256;
/// Characters of one program line kept (a program may log a whole event).
const LINE_CHARS: usize = 300;

/// The first index in `0..len` at which `before` no longer holds (`before` holds for a
/// prefix of the indices).
fn partition(len: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Names of a world's relays and peers (for these lines and for trace lines); one the world
/// did not name is called by its index (`client 0`, `relay 0`).
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Relay names by index.
    pub relays: Vec<String>,
    /// Peer names.
    pub peers: BTreeMap<PeerId, String>,
}

impl Names {
    /// Peer `p`'s name.
    pub fn peer(&self, p: PeerId) -> String {
        self.peers.get(&p).cloned().unwrap_or_else(|| match p {
            PeerId::Client(i) => format!("client {i}"),
            PeerId::Server(i) => format!("server {i}"),
        })
    }

    /// Client `i`'s name.
    pub fn client(&self, i: usize) -> String {
        self.peer(PeerId::Client(i))
    }

    /// Relay `r`'s name.
    pub fn relay(&self, r: usize) -> String {
        self.relays
            .get(r)
            .cloned()
            .unwrap_or_else(|| format!("relay {r}"))
    }
}

#[derive(Debug, Clone)]
struct Refusal {
    at: Duration,
    peer: PeerId,
    relay: usize,
    message: String,
}

/// A publication no relay answered (no OK came).
#[derive(Debug, Clone)]
struct Unanswered {
    at: Duration,
    peer: PeerId,
    relay: usize,
}

#[derive(Debug, Clone)]
struct Drop {
    at: Duration,
    peer: PeerId,
    relay: usize,
    reason: &'static str,
}

#[derive(Debug, Clone)]
struct Logged {
    at: Duration,
    peer: String,
    text: String,
}

/// What a run's relays, connections and programs did, kept to explain the calls that failed.
#[derive(Debug, Clone, Default)]
pub struct RunEvents {
    names: Names,
    refusals: Vec<Refusal>,
    /// Events a relay did not send a subscriber, by the subscriber (the reason as `message`).
    withheld: Vec<Refusal>,
    unanswered: Vec<Unanswered>,
    /// Unanswered publications past [`MAX_KEPT`].
    unanswered_not_kept: u64,
    drops: Vec<Drop>,
    /// Refusals and drops past [`MAX_KEPT`].
    not_kept: u64,
    logged: Vec<Logged>,
    /// Program lines past [`MAX_KEPT`].
    logged_not_kept: u64,
}

/// What a call had when it ran out of time.
pub struct Awaiting {
    /// When it was made.
    pub started: Duration,
    /// When it failed (`None`: the run ended first).
    pub ended: Option<Duration>,
    /// For a stream: chunks the whole stream has, read, written by the server, and when the
    /// last one was read.
    pub stream: Option<StreamProgress>,
    /// Whether a response arrived.
    pub responded: bool,
}

/// How far a stream got.
pub struct StreamProgress {
    /// Chunks it has.
    pub chunks: u64,
    /// Read by the client.
    pub read: u64,
    /// Written by the server (`None`: its server is a program, which does not say).
    pub written: Option<u64>,
    /// The next chunk index the client awaits.
    pub next_index: u64,
    /// When the last chunk was read.
    pub last_read: Option<Duration>,
    /// The stream ended well (every chunk arrived), whatever its reader had read.
    pub ended: bool,
}

impl RunEvents {
    /// Names for the lines.
    pub fn named(names: Names) -> Self {
        RunEvents {
            names,
            ..Default::default()
        }
    }

    /// A relay refused an event of `peer` (`OK false`).
    pub fn refused(&mut self, at: Duration, peer: PeerId, relay: usize, message: &str) {
        let refusal = Refusal {
            at,
            peer,
            relay,
            message: message.to_owned(),
        };
        kept(&mut self.refusals, &mut self.not_kept, refusal);
    }

    /// `relay` did not send `peer` an event its subscription matched, for `reason`.
    pub fn withheld(&mut self, at: Duration, peer: PeerId, relay: usize, reason: &str) {
        let withheld = Refusal {
            at,
            peer,
            relay,
            message: reason.to_owned(),
        };
        kept(&mut self.withheld, &mut self.not_kept, withheld);
    }

    /// `peer`'s connection to `relay` went down.
    pub fn dropped(&mut self, at: Duration, peer: PeerId, relay: usize, reason: &'static str) {
        let drop = Drop {
            at,
            peer,
            relay,
            reason,
        };
        kept(&mut self.drops, &mut self.not_kept, drop);
    }

    /// Program peer `peer` logged `text` at `at` (lines come in time order).
    pub fn logged(&mut self, at: Duration, peer: &str, text: &str) {
        if self.logged.len() < MAX_KEPT {
            let text = match text.char_indices().nth(LINE_CHARS) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text.to_owned(),
            };
            self.logged.push(Logged {
                at,
                peer: peer.to_owned(),
                text,
            });
        } else {
            self.logged_not_kept += 1;
        }
    }

    /// The publications no relay answered: `(when published, peer, relay)`, in any order;
    /// the first [`MAX_KEPT`] by time are kept, the rest counted.
    pub fn unanswered(&mut self, mut list: Vec<(Duration, PeerId, usize)>) {
        list.sort_unstable();
        if list.len() > MAX_KEPT {
            self.unanswered_not_kept += (list.len() - MAX_KEPT) as u64;
            list.truncate(MAX_KEPT);
        }
        self.unanswered = list
            .into_iter()
            .map(|(at, peer, relay)| Unanswered { at, peer, relay })
            .collect();
    }

    /// Peer `p`'s name in the lines.
    pub fn name_of(&self, p: PeerId) -> String {
        self.names.peer(p)
    }

    /// `n` lines the programs logged were not kept by the world.
    pub fn not_logged(&mut self, n: u64) {
        self.logged_not_kept += n;
    }

    /// The line beside a failed call's cause: what it awaited (when it ran out of time,
    /// `awaiting`) and what happened while it was open; `None` when there is nothing to say.
    pub fn explain(&self, call: &Awaiting, awaiting: bool) -> Option<String> {
        // Both lists are in time order (the world reports in time order): a call's window is
        // found by bisection, so a run with many failed calls and many refusals stays cheap.
        let window = |times: &dyn Fn(usize) -> Duration, len: usize| {
            let first = partition(len, |i| times(i) < call.started);
            let end = match call.ended {
                Some(end) => partition(len, |i| times(i) <= end),
                None => len,
            };
            first..end.max(first)
        };
        let ms = |d: Duration| crate::stats::output::human_us(d.as_micros() as u64);
        let mut parts: Vec<String> = Vec::new();
        if awaiting {
            parts.push(self.awaited(call));
        }
        let refusals = &self.refusals[window(&|i| self.refusals[i].at, self.refusals.len())];
        if !refusals.is_empty() {
            parts.push(self.refusals_text(refusals));
        }
        // An event withheld before the call was made is still missing while it is open (the
        // `initialize` a call waits behind, say): every one up to the call's end counts.
        let withheld_window = window(&|i| self.withheld[i].at, self.withheld.len());
        let withheld = &self.withheld[..withheld_window.end];
        if !withheld.is_empty() {
            parts.push(self.withheld_text(withheld));
        }
        let unanswered =
            &self.unanswered[window(&|i| self.unanswered[i].at, self.unanswered.len())];
        if !unanswered.is_empty() {
            let mut whos: Vec<(String, u64)> = Vec::new();
            for u in unanswered {
                let who = format!(
                    "{} via {}",
                    self.names.peer(u.peer),
                    self.names.relay(u.relay)
                );
                match whos.iter_mut().find(|(w, _)| *w == who) {
                    Some((_, n)) => *n += 1,
                    None => whos.push((who, 1)),
                }
            }
            let whos: Vec<String> = whos.iter().map(|(w, n)| format!("{w} ×{n}")).collect();
            parts.push(format!(
                "no OK came for {} publish{} while it was open ({}){}",
                unanswered.len(),
                if unanswered.len() == 1 { "" } else { "es" },
                whos.join(", "),
                if self.unanswered_not_kept > 0 {
                    format!(
                        "; {} later publications without an OK are not listed",
                        self.unanswered_not_kept
                    )
                } else {
                    String::new()
                }
            ));
        }
        let drops = &self.drops[window(&|i| self.drops[i].at, self.drops.len())];
        if !drops.is_empty() {
            let listed: Vec<String> = drops
                .iter()
                .take(DROPS_LISTED)
                .map(|d| {
                    format!(
                        "{}–{} at {} ({})",
                        self.names.peer(d.peer),
                        self.names.relay(d.relay),
                        ms(d.at),
                        d.reason
                    )
                })
                .collect();
            let more = drops.len().saturating_sub(DROPS_LISTED);
            parts.push(format!(
                "connections dropped while it was open: {}{}",
                listed.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        let logged = &self.logged[window(&|i| self.logged[i].at, self.logged.len())];
        if !logged.is_empty() {
            let lines = grouped(logged.iter().map(|l| (l.text.as_str(), l.peer.clone())));
            parts.push(format!(
                "the programs logged while it was open: {}{}",
                lines.join(", "),
                more(logged.len())
            ));
        }
        if parts.is_empty() {
            return None;
        }
        if self.not_kept > 0 {
            parts.push(format!(
                "{} later refusals and drops of the run are not listed",
                self.not_kept
            ));
        }
        if self.logged_not_kept > 0 && !logged.is_empty() {
            parts.push(format!(
                "{} later program lines of the run are not listed",
                self.logged_not_kept
            ));
        }
        Some(parts.join("; "))
    }

    /// What a call that ran out of time was awaiting.
    fn awaited(&self, call: &Awaiting) -> String {
        let ms = |d: Duration| crate::stats::output::human_us(d.as_micros() as u64);
        let mut out = match &call.stream {
            Some(s) if s.ended && s.read < s.chunks => format!(
                "every chunk arrived and the stream ended; its reader had read {} of {}",
                s.read, s.chunks
            ),
            Some(s) if s.read == 0 => match s.written {
                Some(written) => format!(
                    "awaiting the stream's first chunk ({written} of {} written)",
                    s.chunks
                ),
                None => format!("awaiting the stream's first chunk (of {})", s.chunks),
            },
            Some(s) if s.next_index < s.chunks => format!(
                "awaiting chunk {} of {} ({} read{}{})",
                s.next_index,
                s.chunks,
                s.read,
                s.written
                    .map_or(String::new(), |w| format!(", {w} written")),
                s.last_read
                    .map_or(String::new(), |t| format!(", the last at {}", ms(t)))
            ),
            Some(_) if !call.responded => "every chunk read; awaiting the final response".into(),
            Some(_) => "every chunk read and answered; awaiting the stream's close".into(),
            None if call.responded => "awaiting the rest of the answer".into(),
            None => "awaiting the response".into(),
        };
        if call.ended.is_none() {
            out.push_str(" when the run ended");
        }
        out
    }

    /// Refusals grouped by text, then by who and where, in the order first seen; the first
    /// [`REFUSALS_GROUPED`] are grouped, the rest counted.
    fn refusals_text(&self, refusals: &[Refusal]) -> String {
        let texts = self.grouped_by_who(refusals, "via");
        format!(
            "relays refused {} publish{} while it was open: {}{}",
            refusals.len(),
            if refusals.len() == 1 { "" } else { "es" },
            texts.join(", "),
            more(refusals.len())
        )
    }

    /// Withheld events grouped by reason, then by reader and relay.
    fn withheld_text(&self, withheld: &[Refusal]) -> String {
        let texts = self.grouped_by_who(withheld, "from");
        format!(
            "relays withheld {} event{} from subscribers before it ended (a kind the reader \
             may not read without AUTH): {}{}",
            withheld.len(),
            if withheld.len() == 1 { "" } else { "s" },
            texts.join(", "),
            more(withheld.len())
        )
    }
}

impl RunEvents {
    /// `list` grouped by text, then by peer and relay (`server via damus`, with `link`
    /// between them).
    fn grouped_by_who(&self, list: &[Refusal], link: &str) -> Vec<String> {
        grouped(list.iter().map(|r| {
            let who = format!(
                "{} {link} {}",
                self.names.peer(r.peer),
                self.names.relay(r.relay)
            );
            (r.message.as_str(), who)
        }))
    }
}

/// Keeps `item` in `list` while it holds fewer than [`MAX_KEPT`]; otherwise counts it in
/// `not_kept`.
fn kept<T>(list: &mut Vec<T>, not_kept: &mut u64, item: T) {
    if list.len() < MAX_KEPT {
        list.push(item);
    } else {
        *not_kept += 1;
    }
}

/// Texts grouped, then by who, in the order first seen: `"text" (who ×n, other ×m)`; the
/// first [`REFUSALS_GROUPED`] items are grouped (see [`more`] for the rest).
fn grouped<'a>(items: impl Iterator<Item = (&'a str, String)>) -> Vec<String> {
    let mut groups: Vec<(&str, Vec<(String, u64)>)> = Vec::new();
    for (text, who) in items.take(REFUSALS_GROUPED) {
        let group = match groups.iter().position(|(t, _)| *t == text) {
            Some(i) => &mut groups[i].1,
            None => {
                groups.push((text, Vec::new()));
                &mut groups.last_mut().expect("just pushed").1
            }
        };
        match group.iter_mut().find(|(w, _)| *w == who) {
            Some((_, n)) => *n += 1,
            None => group.push((who, 1)),
        }
    }
    groups
        .iter()
        .map(|(text, whos)| {
            let whos: Vec<String> = whos.iter().map(|(w, n)| format!("{w} ×{n}")).collect();
            format!("{text:?} ({})", whos.join(", "))
        })
        .collect()
}

/// `, and N more` for the items of `len` past the grouped ones.
fn more(len: usize) -> String {
    match len.saturating_sub(REFUSALS_GROUPED) {
        0 => String::new(),
        more => format!(", and {more} more"),
    }
}

/// Whether a failure of this family is one where the call ran out of time without being told
/// why, so that what it awaited is worth saying.
pub fn ran_out_of_time(family: &str) -> bool {
    family == "unfinished" || family.ends_with("timeout")
}

#[cfg(test)]
mod tests;
