//! What a live deployment did: per relay counters (the relay model's and the links'), and the
//! request/response pairs read off the traffic. `relaysim serve` prints it when it stops,
//! writes it as JSON, and answers it at `GET /stats` while running.

use crate::relay::RelayCounters;
use crate::stats::output::human_us;
use crate::stats::rpc_pairs::PairRow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Counters of one live relay.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LiveRelayCounters {
    /// The relay's name.
    pub relay: String,
    /// Its profile.
    pub profile: String,
    /// WebSocket connections opened.
    pub connections: u64,
    /// Events received by the relay model.
    pub received: u64,
    /// Events accepted.
    pub accepted: u64,
    /// Events accepted with no OK sent (the profile sends none for ephemeral events).
    pub ok_withheld: u64,
    /// Events refused, by the prefix of the reason.
    pub rejected: BTreeMap<String, u64>,
    /// Events a subscription matched but its connection was not sent, not allowed to read
    /// their kind without AUTH (strfry's gift wraps).
    pub withheld: u64,
    /// Events answered `duplicate:` (an id the relay already had, not broadcast again).
    pub answered_duplicate: u64,
    /// Events held back or dropped by a rate limit without a refusal (refusals are counted in
    /// `rejected`, by their prefix: `rate-limited`).
    pub rate_limited: u64,
    /// Event copies delivered to subscribers' sockets.
    pub delivered: u64,
    /// Events a datagram-mode link lost, by way (`up`, `down`).
    pub lost: BTreeMap<String, u64>,
    /// Events a datagram-mode link duplicated, by way.
    pub duplicated: BTreeMap<String, u64>,
    /// Deliveries of an event the reader already had, by mechanism.
    pub duplicate_deliveries: BTreeMap<String, u64>,
    /// First deliveries after a later event of the same author, by mechanism.
    pub reordered_deliveries: BTreeMap<String, u64>,
    /// Outages, by kind.
    pub outages: BTreeMap<String, u64>,
    /// Connections closed for a frame over the message limit.
    pub frames_too_large: u64,
    /// Readers cut off because their queue was full.
    pub cut_off: u64,
    /// Connections the relay model closed.
    pub closed_by_relay: u64,
    /// Connections closed by the keepalive: not heard from (or no pong) for too long.
    pub closed_silent: u64,
}

impl LiveRelayCounters {
    /// Zero counters for relay `relay` with profile `profile`.
    pub fn new(relay: &str, profile: &str) -> Self {
        LiveRelayCounters {
            relay: relay.to_owned(),
            profile: profile.to_owned(),
            ..Default::default()
        }
    }

    /// These counters with the relay model's.
    pub fn with_model(&self, model: &RelayCounters) -> Self {
        LiveRelayCounters {
            received: model.received,
            accepted: model.accepted,
            ok_withheld: model.ok_withheld,
            rejected: model.rejected.clone(),
            withheld: model.withheld,
            answered_duplicate: model.duplicates,
            rate_limited: model.delayed + model.dropped,
            closed_by_relay: model.connections_closed,
            ..self.clone()
        }
    }
}

impl LiveRelayCounters {
    /// These counters under the names a des run's report uses where the meaning is the same
    /// (`events_accepted`, `rejected.PREFIX`, `relay_duplicates`, `delivered`, `lost`,
    /// `duplicated.VIA`, `reordered.VIA`, `outages`), and live-only ones under their own
    /// (`events_received`, `connections`, `rate_limited`, `frames_too_large`, `cut_off`,
    /// `closed_by_relay`, `closed_silent`), added into `into`.
    pub fn add_to_run_counters(&self, into: &mut BTreeMap<String, u64>) {
        let mut add = |name: String, n: u64| {
            if n > 0 {
                *into.entry(name).or_default() += n;
            }
        };
        add("events_received".into(), self.received);
        add("events_accepted".into(), self.accepted);
        // The relay's own silence; the peers' `ok_missing` (OKs they never got, for any
        // reason) is counted beside it from what they saw.
        add("ok_withheld".into(), self.ok_withheld);
        add("withheld".into(), self.withheld);
        for (prefix, n) in &self.rejected {
            add(format!("rejected.{prefix}"), *n);
        }
        add("relay_duplicates".into(), self.answered_duplicate);
        add("delivered".into(), self.delivered);
        add("lost".into(), self.lost.values().sum());
        for (name, table) in [
            ("duplicated", &self.duplicate_deliveries),
            ("reordered", &self.reordered_deliveries),
        ] {
            add(name.into(), table.values().sum());
            for (via, n) in table {
                add(format!("{name}.{via}"), *n);
            }
        }
        add("outages".into(), self.outages.values().sum());
        add("connections".into(), self.connections);
        add("rate_limited".into(), self.rate_limited);
        add("frames_too_large".into(), self.frames_too_large);
        add("cut_off".into(), self.cut_off);
        add("closed_by_relay".into(), self.closed_by_relay);
        add("closed_silent".into(), self.closed_silent);
    }
}

/// Everything a live deployment reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LiveReport {
    /// Time since the relays started, in microseconds.
    pub elapsed_us: u64,
    /// One entry per relay, in the scenario's order.
    pub relays: Vec<LiveRelayCounters>,
    /// Request/response pairs by method.
    pub calls: Vec<PairRow>,
    /// Deliveries of gift-wrapped events, which cannot be paired.
    pub gift_wrapped: u64,
    /// Tokens whose progress a peer wrote again from an earlier point: a second writer, as
    /// when a server runs one request twice (the first [`crate::stats::second_writers::MAX_NAMED`]).
    pub second_writers: Vec<crate::stats::second_writers::SecondWriter>,
    /// Second writers past those named.
    pub second_writers_not_named: u64,
}

fn listed(map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "0".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k} ×{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl LiveReport {
    /// What the relays did that can make a call fail, one clause per relay and kind, in
    /// words (`relay upstream (nostr-rs-relay) accepted 3 events without sending an OK`);
    /// empty when they did none of it.
    pub fn disturbances(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.relays {
            let name = format!("relay {} ({})", r.relay, r.profile);
            let mut say = |n: u64, what: &str| {
                if n > 0 {
                    out.push(format!("{name} {}", what.replace("{n}", &n.to_string())));
                }
            };
            say(r.ok_withheld, "accepted {n} events without sending an OK");
            say(
                r.withheld,
                "withheld {n} events from subscribers not allowed to read their kind without AUTH",
            );
            say(r.rate_limited, "held or dropped {n} events by a rate limit");
            say(
                r.frames_too_large,
                "closed {n} connections for a frame over its limit",
            );
            say(r.cut_off, "cut off {n} slow readers");
            say(r.closed_by_relay, "closed {n} connections");
            say(r.closed_silent, "closed {n} connections for silence");
            let tables = [
                ("refused", &r.rejected),
                ("lost on a link", &r.lost),
                ("duplicated on a link", &r.duplicated),
                ("delivered again", &r.duplicate_deliveries),
                ("delivered out of order", &r.reordered_deliveries),
                ("had outages", &r.outages),
            ];
            for (what, table) in tables {
                if !table.is_empty() {
                    out.push(format!("{name} {what}: {}", listed(table)));
                }
            }
        }
        out.extend(crate::stats::second_writers::clauses(
            &self.second_writers,
            self.second_writers_not_named,
        ));
        out
    }

    /// The report as text for people.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "after {}", human_us(self.elapsed_us));
        for r in &self.relays {
            let _ = writeln!(out, "\nrelay {} ({})", r.relay, r.profile);
            let rows = [
                ("connections", r.connections.to_string()),
                ("events received", r.received.to_string()),
                ("accepted", r.accepted.to_string()),
                ("accepted with no OK sent", r.ok_withheld.to_string()),
                ("rejected", listed(&r.rejected)),
                ("withheld from readers without AUTH", r.withheld.to_string()),
                ("answered duplicate", r.answered_duplicate.to_string()),
                // Refusals by a rate limit are under "rejected"; these got no refusal.
                (
                    "held or dropped by a rate limit",
                    r.rate_limited.to_string(),
                ),
                ("delivered", r.delivered.to_string()),
                ("lost on a link", listed(&r.lost)),
                ("duplicated on a link", listed(&r.duplicated)),
                ("duplicate deliveries", listed(&r.duplicate_deliveries)),
                ("reordered deliveries", listed(&r.reordered_deliveries)),
                ("outages", listed(&r.outages)),
                ("frames too large", r.frames_too_large.to_string()),
                ("slow readers cut off", r.cut_off.to_string()),
                ("closed by the relay", r.closed_by_relay.to_string()),
                ("closed for silence", r.closed_silent.to_string()),
            ];
            for (name, value) in rows {
                let _ = writeln!(out, "  {name:<32} {value}");
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
    use crate::stats::second_writers::SecondWriter;

    #[test]
    fn disturbances_name_withheld_oks_refusals_and_second_writers() {
        let mut relay = LiveRelayCounters::new("upstream", "nostr-rs-relay");
        relay.ok_withheld = 3;
        relay.rejected.insert("rate-limited".into(), 2);
        let report = LiveReport {
            relays: vec![relay],
            second_writers: vec![SecondWriter {
                author: "ts-server".into(),
                token: "3".into(),
                reached: "9".into(),
                again_from: "9".into(),
            }],
            ..Default::default()
        };
        assert_eq!(
            report.disturbances(),
            [
                "relay upstream (nostr-rs-relay) accepted 3 events without sending an OK",
                "relay upstream (nostr-rs-relay) refused: rate-limited ×2",
                "ts-server wrote token 3's progress again from 9 after reaching 9 (a second writer, as when a request runs twice)",
            ]
        );
        assert!(LiveReport::default().disturbances().is_empty());
        assert!(report.text().contains("second writers (a token's progress written again):\n  ts-server token 3: again from 9 after reaching 9"));
    }
}
