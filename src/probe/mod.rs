//! `relaysim probe`: a battery of bounded probes that characterises a running NIP-01 relay on
//! what ContextVM traffic depends on — the answer to an ephemeral event and to its re-send,
//! replay of stored events to a new subscription, the order in which one connection's bursts
//! reach a subscriber (with and without waiting for OKs, in one `created_at` second or rising,
//! back to back or spaced), size limits and what an oversized event gets, subscription-id and
//! subscription-count limits, gating of gift wraps (kind 1059) and their storage (a regular
//! kind: the answer to a re-send, the replay to a new REQ), and publish→OK and
//! publish→delivery latency. [`differences`] lists where two reports disagree, so a real
//! relay's report can be held against the one `serve --profile P` gives.
//!
//! Every probe is bounded in count (the burst size is capped) and in time (each answer is
//! awaited at most [`ProbeConfig::wait`]); events are tagged with a `p` value no one else uses,
//! so a probe reads only its own events. The wall clock and fresh keys come from the caller:
//! real relays check `created_at` against their clock.

mod battery;
mod conn;
mod diff;

pub use diff::differences;

use battery::{burst, gift_wrap, replay, resend, subscription_ids, subscription_limit};
use conn::{Conn, Heard};
use nostr::prelude::{Event, PublicKey, Tag};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use crate::nip01::Identity;

/// The kind probes publish: ContextVM's.
const KIND: u16 = 25910;
/// The most events one burst sends.
pub const MAX_BURST: usize = 1000;
/// The most subscriptions the subscription-count probe opens on one connection.
const MAX_SUBSCRIPTIONS_TRIED: usize = 260;
/// Content sizes of the size probe: around strfry's 64 KiB event and 128 KiB frame limits,
/// nostr-rs-relay's 128/256 KiB, khatru's 500 KB and relay.damus.io's 1,000,000 bytes.
pub const SIZES: [usize; 7] = [
    60_000, 70_000, 125_000, 140_000, 300_000, 600_000, 1_100_000,
];
/// Subscription-id lengths tried (NIP-01 allows 1–64).
const SUB_ID_LENGTHS: [usize; 3] = [64, 65, 72];

/// What to probe and how.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The relay's `ws://` URL.
    pub url: String,
    /// Unix seconds now, as the relay's clock should read.
    pub now_secs: u64,
    /// Makes this probe's keys and tags its own (use fresh randomness per probe: a storing
    /// relay keeps the last probe's events).
    pub nonce: u64,
    /// Events per burst (at most [`MAX_BURST`]).
    pub burst: usize,
    /// How long to wait for any one answer.
    pub wait: Duration,
    /// How long the keepalive probe listens on quiet connections (`None`: not run; a relay
    /// pings every 55 s or more, so it takes that long).
    pub keepalive: Option<Duration>,
}

/// What quiet connections saw of a relay's keepalive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Keepalive {
    /// How long the probe listened, in seconds.
    pub waited_s: u64,
    /// Seconds from connecting to the first WebSocket ping, on a connection that sent one
    /// REQ and then only answered pings (`None`: no ping in the wait).
    pub first_ping_s: Option<f64>,
    /// Whether the relay closed that connection within the wait.
    pub answering_closed: bool,
    /// Whether the relay closed a connection that sent one REQ and then read nothing (so
    /// answered no ping) within the wait.
    pub silent_closed: bool,
}

/// A relay's answer to one event, in words (what `differences` compares).
pub type Answer = String;

/// How one burst of events from one connection reached a subscriber on another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Burst {
    /// Which burst: `same-second` (back to back, one `created_at`, no waiting for OKs),
    /// `await-ok` (each sent after the previous one's OK), `rising-created-at` (back to
    /// back, `created_at` one second apart), `spaced-5ms` (back to back 5 ms apart, one
    /// `created_at`).
    pub name: String,
    /// Events sent.
    pub sent: usize,
    /// Events the subscriber got.
    pub delivered: usize,
    /// Whether they arrived in the order sent.
    pub in_order: bool,
    /// Adjacent deliveries in the wrong order.
    pub inversions: usize,
    /// OKs the publisher got (`true` or not).
    pub oks: usize,
    /// Whether the OKs came back in the order sent.
    pub oks_in_order: bool,
    /// Milliseconds from the first send to the last OK (not compared: the machine's).
    pub last_ok_ms: Option<f64>,
    /// The burst's events the relay refused (`OK false`), by the relay's words: a rate
    /// limit shows here (compared by its words; how many depends on the relay's clock).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<String, usize>,
}

/// A new subscription's replay of stored events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    /// Of the two events published just before, how many the new REQ got before EOSE.
    pub replayed: usize,
    /// Whether the newer came first (when both came).
    pub newest_first: bool,
    /// What ended the replay: `eose`, `closed: ...`, `notice: ...`, `nothing`.
    pub ended_by: String,
}

/// Latency figures (medians, milliseconds); not compared between relays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Publish → OK, each event awaiting its OK.
    pub publish_to_ok_ms: Option<f64>,
    /// Publish → delivery to another connection, events 5 ms apart.
    pub publish_to_delivery_ms: Option<f64>,
}

/// Everything one probe run found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The relay probed.
    pub url: String,
    /// The answer to a kind-25910 (ephemeral) event.
    pub ephemeral: Answer,
    /// The answer to the same event sent again.
    pub resend: Answer,
    /// Whether a subscriber got the re-sent event a second time.
    pub resend_delivered_again: bool,
    /// What a new subscription gets of two events published just before.
    pub replay: Replay,
    /// The bursts.
    pub bursts: Vec<Burst>,
    /// Content bytes → the answer to an event of that size, on a fresh connection.
    pub sizes: Vec<(usize, Answer)>,
    /// Subscription-id length → the answer to a REQ with it.
    pub subscription_ids: Vec<(usize, Answer)>,
    /// The first subscription (counting from 1) on one connection the relay refused, and
    /// how; `None` if it took all it was offered.
    pub subscription_limit: Option<(usize, Answer)>,
    /// The answer to a REQ for kind 1059 (gift wraps), and whether a kind-1059 event
    /// published meanwhile reached that subscription live.
    pub gift_wrap_req: Answer,
    /// Whether a kind-1059 event reached the unauthenticated gift-wrap subscription.
    pub gift_wrap_delivered: bool,
    /// The answer to that gift wrap sent again: kind 1059 is a regular kind, so a relay that
    /// stores regular events says `duplicate:` (`None` in a recorded report without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gift_wrap_resend: Option<Answer>,
    /// What a new REQ for gift wraps got of it: `replayed` or `not replayed`, and how the REQ
    /// ended (`None` in a recorded report without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gift_wrap_replay: Option<Answer>,
    /// Whether that gift wrap reached a subscription for kinds 1059 and 25910 together, which
    /// a relay gating gift wraps keeps but may not send them to (`None` in a recorded report
    /// without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gift_wrap_mixed_delivered: Option<bool>,
    /// The keepalive probe's findings (`None` when not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive: Option<Keepalive>,
    /// Latency medians (reported, not compared).
    pub latency: Latency,
}

/// Why a probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The relay could not be reached.
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// Where.
        url: String,
        /// Why.
        reason: String,
    },
    /// A burst larger than allowed.
    #[error("a burst of {0} events is over the probe's cap of {MAX_BURST}")]
    BurstTooLarge(usize),
}

/// The probe's identities and the tag that makes its events its own.
struct Probe {
    config: ProbeConfig,
    author: Identity,
    /// The `p` value every event carries, a key no one else has.
    target: PublicKey,
    n: u64,
}

impl Probe {
    fn deadline(&self) -> Instant {
        Instant::now() + self.config.wait
    }

    /// A signed event of `kind` to the probe's target, `content_bytes` long, created
    /// `ahead` seconds after the probe's `now`.
    fn event(&mut self, kind: u16, content_bytes: usize, ahead: u64) -> Event {
        self.n += 1;
        let mut content = format!("relaysim probe {} ", self.n);
        content.extend(std::iter::repeat_n(
            'x',
            content_bytes.saturating_sub(content.len()),
        ));
        self.author.sign(
            kind,
            self.config.now_secs + ahead,
            vec![Tag::public_key(self.target)],
            content,
        )
    }

    fn req(&self, sub: &str, kind: u16, limit: Option<usize>) -> String {
        self.req_kinds(sub, &[kind], limit)
    }

    fn req_kinds(&self, sub: &str, kinds: &[u16], limit: Option<usize>) -> String {
        let mut filter = serde_json::json!({ "kinds": kinds, "#p": [self.target.to_hex()] });
        if let Some(l) = limit {
            filter["limit"] = l.into();
        }
        serde_json::json!(["REQ", sub, filter]).to_string()
    }

    async fn open(&self) -> Result<Conn, ProbeError> {
        Conn::open(&self.config.url, self.deadline()).await
    }

    /// A fresh connection subscribed to the probe's events of `kind`, after its EOSE.
    async fn subscriber(&self, sub: &str, kind: u16) -> Result<(Conn, Vec<Heard>), ProbeError> {
        self.subscriber_of(sub, &[kind]).await
    }

    /// A fresh connection subscribed to the probe's events of `kinds`, after its EOSE.
    async fn subscriber_of(
        &self,
        sub: &str,
        kinds: &[u16],
    ) -> Result<(Conn, Vec<Heard>), ProbeError> {
        let mut c = self.open().await?;
        c.send(self.req_kinds(sub, kinds, None)).await;
        let heard = c
            .until(self.deadline(), self.config.wait, |h| {
                matches!(h, Heard::Eose(_) | Heard::Closed { .. })
            })
            .await;
        Ok((c, heard))
    }
}

/// Sends `event` on `conn` and returns its answer (waiting at most `wait`).
async fn publish(conn: &mut Conn, event: &Event, wait: Duration) -> Answer {
    conn.send(event_message(event)).await;
    let id = event.id.to_hex();
    let heard = conn
        .until(Instant::now() + wait, wait, |h| match h {
            Heard::Ok { id: i, .. } => *i == id || i.is_empty(),
            Heard::Notice(_) => true,
            _ => false,
        })
        .await;
    answer(&heard)
}

fn event_message(event: &Event) -> String {
    format!("[\"EVENT\",{}]", crate::nip01::event_json::text(event))
}

/// The last telling thing in `heard`, in words.
fn answer(heard: &[Heard]) -> Answer {
    for h in heard.iter().rev() {
        match h {
            Heard::Ok {
                accepted, message, ..
            } => return format!("ok {accepted}: {message}"),
            Heard::Notice(m) => return format!("notice: {m}"),
            Heard::Closed { message, .. } => return format!("closed: {message}"),
            Heard::Gone => return "connection closed".into(),
            _ => {}
        }
    }
    "no answer".into()
}

/// Runs every probe against `config.url`.
pub async fn probe(config: ProbeConfig) -> Result<ProbeReport, ProbeError> {
    if config.burst > MAX_BURST {
        return Err(ProbeError::BurstTooLarge(config.burst));
    }
    let author = Identity::derive(config.nonce, "probe-author");
    let target = Identity::derive(config.nonce, "probe-target").public_key();
    let mut p = Probe {
        config,
        author,
        target,
        n: 0,
    };
    let (ephemeral, resend, resend_delivered_again) = resend(&mut p).await?;
    let replay = replay(&mut p).await?;
    let mut bursts = Vec::new();
    let mut latency = Latency::default();
    for name in ["same-second", "await-ok", "rising-created-at", "spaced-5ms"] {
        let (b, ms) = burst(&mut p, name).await?;
        match name {
            "await-ok" => latency.publish_to_ok_ms = ms,
            "spaced-5ms" => latency.publish_to_delivery_ms = ms,
            _ => {}
        }
        bursts.push(b);
    }
    let mut sizes = Vec::new();
    for bytes in SIZES {
        let mut c = p.open().await?;
        let e = p.event(KIND, bytes, 0);
        sizes.push((bytes, publish(&mut c, &e, p.config.wait).await));
        c.close().await;
    }
    let subscription_ids = subscription_ids(&p).await?;
    let subscription_limit = subscription_limit(&p).await?;
    let gift = gift_wrap(&mut p).await?;
    let keepalive = match p.config.keepalive {
        Some(wait) => Some(battery::keepalive(&p, wait).await?),
        None => None,
    };
    Ok(ProbeReport {
        url: p.config.url.clone(),
        ephemeral,
        resend,
        resend_delivered_again,
        replay,
        bursts,
        sizes,
        subscription_ids,
        subscription_limit,
        gift_wrap_req: gift.req,
        gift_wrap_delivered: gift.delivered,
        gift_wrap_resend: Some(gift.resend),
        gift_wrap_replay: Some(gift.replay),
        gift_wrap_mixed_delivered: Some(gift.mixed_delivered),
        keepalive,
        latency,
    })
}

impl ProbeReport {
    /// The report as text, a behaviour a line.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let mut line = |what: &str, value: String| {
            let _ = writeln!(out, "  {what:<34} {value}");
        };
        line("ephemeral event (kind 25910)", self.ephemeral.clone());
        line("the same event again", self.resend.clone());
        line("  delivered again", self.resend_delivered_again.to_string());
        line(
            "new subscription, 2 events before",
            format!(
                "{} replayed{}, ended by {}",
                self.replay.replayed,
                if self.replay.newest_first {
                    ", newest first"
                } else {
                    ""
                },
                self.replay.ended_by
            ),
        );
        for b in &self.bursts {
            line(
                &format!("burst {}", b.name),
                format!(
                    "{}/{} delivered, {} ({} inversions); {} OKs, {}{}",
                    b.delivered,
                    b.sent,
                    if b.in_order { "in order" } else { "REORDERED" },
                    b.inversions,
                    b.oks,
                    if b.oks_in_order {
                        "in order"
                    } else {
                        "REORDERED"
                    },
                    b.last_ok_ms
                        .map_or(String::new(), |ms| format!(", last after {ms} ms")),
                ) + &b
                    .refused
                    .iter()
                    .map(|(words, n)| format!("; refused {n}: {words:?}"))
                    .collect::<String>(),
            );
        }
        for (bytes, answer) in &self.sizes {
            line(&format!("{bytes}-byte content"), answer.clone());
        }
        for (len, answer) in &self.subscription_ids {
            line(&format!("{len}-character subscription id"), answer.clone());
        }
        line(
            "subscriptions on one connection",
            match &self.subscription_limit {
                Some((n, answer)) => format!("#{n} refused: {answer}"),
                None => format!("all {MAX_SUBSCRIPTIONS_TRIED} taken"),
            },
        );
        line("REQ for kind 1059", self.gift_wrap_req.clone());
        line(
            "  kind 1059 delivered",
            self.gift_wrap_delivered.to_string(),
        );
        if let Some(answer) = &self.gift_wrap_resend {
            line("  the same gift wrap again", answer.clone());
        }
        if let Some(answer) = &self.gift_wrap_replay {
            line("  new REQ for kind 1059", answer.clone());
        }
        if let Some(delivered) = self.gift_wrap_mixed_delivered {
            line("  to a REQ for kinds 1059, 25910", delivered.to_string());
        }
        if let Some(k) = &self.keepalive {
            line(
                "keepalive (listened)",
                format!("{} s: {}", k.waited_s, k.words()),
            );
        }
        let ms = |m: Option<f64>| m.map_or("-".into(), |m| format!("{m} ms"));
        line("publish -> OK (median)", ms(self.latency.publish_to_ok_ms));
        line(
            "publish -> delivery (median)",
            ms(self.latency.publish_to_delivery_ms),
        );
        format!("{}\n{out}", self.url)
    }
}

impl Keepalive {
    /// What it saw, in words, with the first ping in whole seconds.
    pub fn words(&self) -> String {
        self.told(|s| format!("first ping after {s:.0} s"))
    }

    /// What `differences` compares: whether a ping came, not when (a relay that pings on its
    /// own clock pings a new connection at a moment of that clock's choosing).
    pub fn compared(&self) -> String {
        self.told(|_| "a ping".into())
    }

    fn told(&self, ping: impl Fn(f64) -> String) -> String {
        format!(
            "{}; answering pings: {}; reading nothing: {}",
            match self.first_ping_s {
                Some(s) => ping(s),
                None => "no ping".into(),
            },
            if self.answering_closed {
                "closed"
            } else {
                "kept open"
            },
            if self.silent_closed {
                "closed"
            } else {
                "kept open"
            },
        )
    }
}
