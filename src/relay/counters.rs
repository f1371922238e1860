//! What a relay counts of its own work.

use std::collections::BTreeMap;

/// Counters of what a relay did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayCounters {
    /// Events received.
    pub received: u64,
    /// Events accepted.
    pub accepted: u64,
    /// Events accepted with no OK sent (nostr-rs-relay 0.8's ephemeral events): a publisher
    /// that waits for OKs waits in vain.
    pub ok_withheld: u64,
    /// Events refused, by the prefix of the reason (`invalid`, `rate-limited`, `mute`, ...).
    pub rejected: BTreeMap<String, u64>,
    /// Events answered `duplicate:` (stored events sent again).
    pub duplicates: u64,
    /// Events held back by a rate limit.
    pub delayed: u64,
    /// Events dropped silently by a rate limit.
    pub dropped: u64,
    /// Copies delivered to subscribers.
    pub delivered: u64,
    /// Connections the relay closed.
    pub connections_closed: u64,
    /// Events a subscription matched but could not be sent, its connection not allowed to
    /// read their kind (strfry's `restrictedReadKinds` without AUTH).
    pub withheld: u64,
    /// Stored events evicted before their lifetime ended, to stay within the store's bounds.
    pub evicted: u64,
}
