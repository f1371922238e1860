//! How a relay answers a REQ: subscription-id and subscription-count limits, kinds it will not
//! let an unauthenticated connection read, and the replay of stored events before EOSE.

use super::{ConnId, Relay};
use crate::nip01::RelayMessage;
use nostr::prelude::{Event, EventId, Filter, MatchEventOptions};
use std::sync::Arc;
use std::time::Duration;

impl Relay {
    pub(super) fn on_req(&mut self, conn: ConnId, sub: String, filter: Filter, now: Duration) {
        if !self.profile.accepts_subscription_id(&sub) {
            // strfry throws "invalid subscription id length" from `SubId` (src/Subscription.h)
            // and RelayIngester.cpp answers CLOSED with the id it read, or a NOTICE when it
            // read none (measured at f8a56a85: CLOSED for 65 and 72 characters).
            let message = "ERROR: bad req: invalid subscription id length".to_owned();
            let answer = if sub.is_empty() {
                RelayMessage::Notice { message }
            } else {
                RelayMessage::Closed { sub, message }
            };
            self.send(conn, answer);
            return;
        }
        if self.reads_only_restricted_kinds(&filter) {
            // strfry's ReadRestrictor::isFilterGroupFullyRestricted; RelayIngester.cpp sends
            // an AUTH challenge first if the connection has no auth session yet.
            self.challenge(conn);
            self.send(
                conn,
                RelayMessage::Closed {
                    sub,
                    message: "ERROR: auth-required: requested filter requires authentication"
                        .into(),
                },
            );
            return;
        }
        let c = self
            .connections
            .get_mut(&conn)
            .expect("checked by the caller");
        let over_limit = !c.subscriptions.contains_key(&sub)
            && c.subscriptions.len() >= self.profile.max_subscriptions;
        let refusal = over_limit.then(|| match &self.profile.too_many_subscriptions_notice {
            Some(notice) => RelayMessage::Notice {
                message: notice.clone(),
            },
            None => RelayMessage::Closed {
                sub: sub.clone(),
                message: "rate-limited: too many subscriptions".into(),
            },
        });
        if let Some(refusal) = refusal.clone() {
            if !self.profile.refuses_subscription_after_replay {
                self.send(conn, refusal);
                return;
            }
        } else if let Some((old, _)) = c
            .subscriptions
            .insert(sub.clone(), (filter.clone(), self.counters.accepted))
        {
            // A REQ with an existing id replaces it.
            self.index.remove(&(conn, sub.clone()), &old);
        }
        if refusal.is_none() {
            self.index.insert((conn, sub.clone()), &filter);
        }
        // Stored events (ephemeral ones still within their lifetime, regular ones where the
        // profile keeps them) are replayed before EOSE, newest first: strfry's DBScan sorts by
        // created_at descending, ties by newest insert first (hoytech/strfry src/DBQuery.h,
        // `DBScan::scan`; here ties between the two kinds go ephemeral first). Events accepted
        // after the query began come live after EOSE, not twice (`sub.latestEventId`,
        // modelled in `broadcast`).
        self.expire_stored(now);
        let mut replay: Vec<Arc<Event>> = self
            .stored_newest_first()
            .filter(|e| filter.match_event(e, MatchEventOptions::default()))
            .cloned()
            .collect();
        replay.sort_by_key(|e| std::cmp::Reverse(e.created_at));
        // `limit` counts stored events only, capped by the relay's own maximum.
        let limit = [filter.limit, self.profile.max_limit]
            .into_iter()
            .flatten()
            .min();
        if let Some(limit) = limit {
            replay.truncate(limit);
        }
        // strfry's scan applies the limit; its restrictor then drops what the reader may not
        // see (ReqWorker's `onEvent`), so withheld events use up the limit too.
        let (replay, unreadable): (Vec<Arc<Event>>, Vec<Arc<Event>>) =
            replay.into_iter().partition(|e| self.readable(e));
        for event in unreadable {
            self.withhold(conn, event.id);
        }
        for event in replay {
            self.counters.delivered += 1;
            let message = RelayMessage::Event {
                sub: sub.clone(),
                event,
            };
            self.outbox.push_back((conn, message, true));
        }
        self.send(conn, RelayMessage::Eose { sub });
        // strfry: the query worker answered; the live monitor then refuses the subscription.
        if let Some(refusal) = refusal {
            self.send(conn, refusal);
        }
    }

    /// Whether every kind `filter` asks for is one an unauthenticated connection cannot read
    /// (a filter without kinds asks for all).
    fn reads_only_restricted_kinds(&self, filter: &Filter) -> bool {
        let restricted = &self.profile.restricted_read_kinds;
        !restricted.is_empty()
            && filter.kinds.as_ref().is_some_and(|kinds| {
                !kinds.is_empty() && kinds.iter().all(|k| restricted.contains(&k.as_u16()))
            })
    }

    /// Sends `conn` a NIP-42 challenge unless it had one: 22 characters of strfry's
    /// alphabet (`SessionToken::Generator`, 128 bits), drawn here from the relay's count of
    /// challenges so that a run gives the same ones every time.
    fn challenge(&mut self, conn: ConnId) {
        let Some(c) = self.connections.get_mut(&conn) else {
            return;
        };
        if std::mem::replace(&mut c.challenged, true) {
            return;
        }
        self.challenges_sent += 1;
        let challenge = challenge_text(self.challenges_sent);
        self.send(conn, RelayMessage::Auth { challenge });
    }

    /// Notes that `conn` was not sent `event`, which a subscription of it matched, because it
    /// may not read its kind.
    pub(super) fn withhold(&mut self, conn: ConnId, event: EventId) {
        self.counters.withheld += 1;
        self.withheld.push_back((conn, event, "auth-required"));
    }

    /// Whether an unauthenticated connection (every connection of relaysim's) may read
    /// `event` (strfry's ReadRestrictor::shouldSendToSubscriber).
    pub(super) fn readable(&self, event: &Event) -> bool {
        !self
            .profile
            .restricted_read_kinds
            .contains(&event.kind.as_u16())
    }
}

/// The `n`th challenge: SHA-256 of the count, each byte taken to one of 62 characters.
fn challenge_text(n: u64) -> String {
    use sha2::{Digest, Sha256};
    const ALPHABET: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let digest = Sha256::new()
        .chain_update(b"relaysim nip-42 challenge")
        .chain_update(n.to_le_bytes())
        .finalize();
    digest[..22]
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}
