//! A relay profile in words: each knob and its value, for `relaysim profiles` and for NIP-11
//! readers. Only reads a profile; what the knobs do is in `profile.rs` and `docs/relays.md`.

use super::impair::{Delay, Direction, Ordering};
use super::profile::{
    FrameOversizeReaction, Intake, OversizeReaction, RateAction, RateScope, Refill, RelayProfile,
    SizeMeasure, StoreExpiry,
};
use std::time::Duration;

/// One knob of a profile and its value in words.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fact {
    /// The knob (`max_event_bytes`, `ephemeral`, ...).
    pub knob: &'static str,
    /// Its value in words.
    pub value: String,
}

fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn delay(d: &Delay) -> String {
    match d {
        Delay::Zero => "none".into(),
        other => format!("{other:?}"),
    }
}

fn direction(d: &Direction) -> String {
    if *d == Direction::default() {
        return "perfect".into();
    }
    let mut parts = vec![format!("delay {}", delay(&d.delay))];
    if let Some(b) = d.bandwidth {
        parts.push(format!("bandwidth {b} B/s"));
    }
    if d.ordering == Ordering::Datagram {
        parts.push(format!(
            "datagram mode: reorder {}, duplicate {}, loss {:?}",
            d.reorder, d.duplicate, d.loss
        ));
    }
    parts.join(", ")
}

impl RelayProfile {
    /// Every knob of the profile in words, in a fixed order.
    pub fn facts(&self) -> Vec<Fact> {
        let mut out = Vec::new();
        let mut put = |knob: &'static str, value: String| out.push(Fact { knob, value });
        put(
            "max_event_bytes",
            match self.max_event_bytes {
                None => "none".into(),
                Some(n) => format!(
                    "{n} ({}); over it: {}",
                    match self.size_measure {
                        SizeMeasure::EventJson => "measured on the event JSON",
                        SizeMeasure::EventMessage => "measured on the whole EVENT message",
                        SizeMeasure::ContentChars => "characters of the content",
                    },
                    match &self.oversize {
                        OversizeReaction::OkFalse(m) => format!("OK false {m:?}"),
                        OversizeReaction::Notice(m) => format!("NOTICE {m:?} and no OK"),
                    }
                ),
            },
        );
        put(
            "max_message_bytes",
            match self.max_message_bytes {
                None => "none".into(),
                Some(n) => format!(
                    "{n}; over it: {}",
                    match &self.frame_oversize {
                        FrameOversizeReaction::Drop => "connection dropped".to_owned(),
                        FrameOversizeReaction::NoticeThenDrop(m) =>
                            format!("NOTICE {m:?}, then connection dropped"),
                    }
                ),
            },
        );
        let e = &self.ephemeral;
        put(
            "ephemeral",
            [
                Some(match (e.store_for, e.expiry) {
                    (Some(d), StoreExpiry::AfterArrival) => format!(
                        "stored {} (re-sends answered duplicate, replayed to new REQs)",
                        secs(d)
                    ),
                    (Some(d), StoreExpiry::AfterCreatedAt { sweep_every }) => format!(
                        "stored until {} after created_at, swept every {} (the newest never; \
                         re-sends answered duplicate, replayed to new REQs)",
                        secs(d),
                        secs(sweep_every)
                    ),
                    (None, _) => "live only (not stored, not de-duplicated)".into(),
                }),
                Some(if e.send_ok { "OK sent" } else { "no OK sent" }.to_owned()),
                e.mute_without_listener
                    .then(|| "refused when nobody listens".to_owned()),
                e.reject_older_than
                    .map(|d| format!("refused when older than {}", secs(d))),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; "),
        );
        put(
            "store_regular",
            match self.store_regular {
                true => format!(
                    "stored for good (re-sends answered {:?}, replayed to new REQs)",
                    self.duplicate_answer.1
                ),
                false => "live only (not stored, not de-duplicated)".into(),
            },
        );
        put(
            "reject_newer_than",
            self.reject_newer_than.map_or("none".into(), secs),
        );
        put(
            "allowed_kinds",
            self.allowed_kinds
                .as_ref()
                .map_or("all".into(), |k| format!("{k:?}")),
        );
        if !self.refused_content.is_empty() {
            put(
                "refused_content",
                self.refused_content
                    .iter()
                    .map(|r| format!("{:?}: OK false {:?}", r.containing, r.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
        put(
            "rate_limit",
            match &self.rate_limit {
                None => "none".into(),
                Some(r) => format!(
                    "{}, burst {}, per {}, {}; when empty: {}",
                    if r.refill_per_sec < 1.0 {
                        format!(
                            "{} events/min",
                            (r.refill_per_sec * 60.0 * 1000.0).round() / 1000.0
                        )
                    } else {
                        format!("{} events/s", r.refill_per_sec)
                    },
                    r.capacity,
                    match r.scope {
                        RateScope::Connection => "connection",
                        RateScope::Pubkey => "author",
                        RateScope::Ip => "client address",
                        RateScope::Server => "relay",
                    },
                    match r.refill {
                        Refill::Smooth => "refilled smoothly".to_owned(),
                        Refill::Ticks { every } => format!(
                            "refilled by {} every {} on one relay-wide timer",
                            (r.refill_per_sec * every.as_secs_f64() * 1000.0).round() / 1000.0,
                            humantime::format_duration(every)
                        ),
                        Refill::WholeSeconds => "whole tokens for the whole seconds since the \
                                                 last accepted event, one taken before checking"
                            .to_owned(),
                    },
                    match &r.action {
                        RateAction::Reject(m) => format!("OK false {m:?}"),
                        RateAction::Delay => "held until a token is free".into(),
                        RateAction::Drop => "dropped silently".into(),
                    }
                ),
            },
        );
        put(
            "max_subscriptions",
            if self.max_subscriptions == usize::MAX {
                "none".into()
            } else {
                format!(
                    "{}{}",
                    self.max_subscriptions,
                    self.too_many_subscriptions_notice
                        .as_ref()
                        .map_or(" (CLOSED past it)".into(), |m| format!(
                            " (NOTICE {m:?} past it)"
                        ))
                )
            },
        );
        put(
            "duplicate",
            format!(
                "a stored event sent again: OK {} {:?}",
                self.duplicate_answer.0, self.duplicate_answer.1
            ),
        );
        put(
            "over_the_limit",
            if self.refuses_subscription_after_replay {
                "refused after its stored events and EOSE".into()
            } else {
                "refused at once".into()
            },
        );
        put(
            "restricted_read",
            if self.restricted_read_kinds.is_empty() {
                "none".into()
            } else {
                let kinds: Vec<String> = self
                    .restricted_read_kinds
                    .iter()
                    .map(u16::to_string)
                    .collect();
                format!(
                    "kinds {} need NIP-42 AUTH to read (an AUTH challenge, then CLOSED \
                     auth-required)",
                    kinds.join(", ")
                )
            },
        );
        put(
            "max_limit",
            self.max_limit.map_or("none".into(), |n| n.to_string()),
        );
        put(
            "max_subscription_id",
            if self.max_subscription_id == usize::MAX {
                "none".into()
            } else {
                self.max_subscription_id.to_string()
            },
        );
        put(
            "max_filters",
            self.max_filters.map_or("none".into(), |n| n.to_string()),
        );
        put(
            "delivery_batch",
            self.delivery_batch.map_or("none".into(), secs),
        );
        put("processing", secs(self.processing));
        put(
            "intake",
            match &self.intake {
                Intake::Serial => "serial (nothing overtakes)".into(),
                Intake::Concurrent { handling, per_kib } => format!(
                    "concurrent: handling {}, plus {} per KiB",
                    delay(handling),
                    secs(*per_kib)
                ),
                Intake::BatchCommit {
                    per_batch,
                    per_event,
                } => format!(
                    "batch commit: one writer commits what queued since its last commit, \
                     sorted by (created_at, id), in {} plus {} per event",
                    secs(*per_batch),
                    secs(*per_event)
                ),
            },
        );
        put(
            "keepalive",
            match &self.keepalive {
                None => "none (never pings, never closes a quiet connection)".into(),
                Some(k) => format!(
                    "ping every {}{}; closed when silent {} ({})",
                    secs(k.ping_every),
                    if k.on_relay_clock {
                        " on the relay's clock (all connections at once)"
                    } else {
                        " from each connection's start"
                    },
                    secs(k.silent_after),
                    if k.pongs_only {
                        "only pongs count"
                    } else {
                        "any frame counts"
                    }
                ),
            },
        );
        put("peer_to_relay", direction(&self.impairments.peer_to_relay));
        put("relay_to_peer", direction(&self.impairments.relay_to_peer));
        put(
            "outages",
            if self.impairments.outages == Default::default() {
                "none".into()
            } else {
                format!("{:?}", self.impairments.outages)
            },
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(p: &RelayProfile, knob: &str) -> String {
        p.facts()
            .into_iter()
            .find(|f| f.knob == knob)
            .unwrap()
            .value
    }

    #[test]
    fn facts_say_what_the_profile_sets() {
        let strfry = RelayProfile::strfry();
        assert!(fact(&strfry, "max_event_bytes").starts_with("65536"));
        assert!(fact(&strfry, "ephemeral")
            .contains("stored until 5m after created_at, swept every 9s (the newest never"));
        assert!(fact(&RelayProfile::nostr_relay_py(), "ephemeral").contains("stored 5m"));
        assert!(fact(&strfry, "keepalive").contains("ping every 55s on the relay's clock"));
        let damus = RelayProfile::damus();
        assert!(fact(&damus, "rate_limit").contains("per client address"));
        assert!(fact(&damus, "rate_limit").starts_with("6 events/min"));
        assert!(fact(&damus, "rate_limit").contains("whole seconds since the last accepted"));
        let sane = RelayProfile::khatru_sane_defaults();
        assert!(fact(&sane, "rate_limit").contains("refilled by 2 every 3m"));
        assert!(fact(&sane, "refused_content").contains("base64 media"));
        assert_eq!(fact(&RelayProfile::khatru(), "max_subscriptions"), "none");
        assert_eq!(fact(&RelayProfile::ideal(), "rate_limit"), "none");
        assert!(fact(&RelayProfile::khatru(), "intake").starts_with("concurrent"));
        assert!(fact(&RelayProfile::khatru(), "ephemeral").contains("refused when nobody listens"));
        assert_ne!(fact(&RelayProfile::mobile(), "relay_to_peer"), "perfect");
    }
}
