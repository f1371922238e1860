//! The relay's store of events: ephemeral ones until the end of their lifetime, regular ones
//! (where the profile keeps them) for good, and eviction of the oldest beyond the store's
//! bounds; and the duplicate answer to an event the relay already has.

use super::profile::StoreExpiry;
use super::ConnId;
use super::Relay;
use crate::nip01::RelayMessage;
use nostr::prelude::Event;
use std::sync::Arc;
use std::time::Duration;

impl Relay {
    /// Stores a committed `event` if the profile keeps its kind: an ephemeral one until
    /// [`Relay::forgotten_at`], a regular one for good (bounded by [`Relay::evict_stored`]).
    pub(super) fn keep(&mut self, event: &Arc<Event>, now: Duration) {
        let id = event.id;
        // One entry per id in the orders: a copy committed twice is stored once.
        if self.stored.contains_key(&id) {
            return;
        }
        let until = if event.kind.is_ephemeral() {
            let Some(ttl) = self.profile.ephemeral.store_for else {
                return;
            };
            let until = self.forgotten_at(event, ttl, now);
            self.stored_order.push_back((until, id));
            until
        } else if self.profile.store_regular {
            self.regular_order.push_back(id);
            Duration::MAX
        } else {
            return;
        };
        self.stored.insert(id, (event.clone(), until));
        self.newest_stored = Some(id);
        self.stored_bytes += event.content.len();
        self.evict_stored();
    }

    /// Answers `event` with the profile's duplicate answer if the relay has it already,
    /// stored or waiting for the writer (strfry's write finds an uncommitted one a duplicate).
    pub(super) fn answered_as_duplicate(&mut self, conn: ConnId, event: &Event) -> bool {
        let stores = match event.kind.is_ephemeral() {
            true => self.profile.ephemeral.store_for.is_some(),
            false => self.profile.store_regular,
        };
        let pending = stores && self.writer.holds(&event.id);
        if !self.stored.contains_key(&event.id) && !pending {
            return false;
        }
        self.counters.duplicates += 1;
        let (accepted, message) = self.profile.duplicate_answer.clone();
        self.send(
            conn,
            RelayMessage::Ok {
                id: event.id,
                accepted,
                message,
            },
        );
        true
    }

    /// The stored events, newest arrival first: ephemeral ones, then regular ones.
    pub(super) fn stored_newest_first(&self) -> impl Iterator<Item = &Arc<Event>> + '_ {
        let ephemeral = self.stored_order.iter().rev().map(|(_, id)| id);
        let regular = self.regular_order.iter().rev();
        ephemeral
            .chain(regular)
            .filter_map(|id| self.stored.get(id))
            .map(|(e, _)| e)
    }

    /// When a stored `event`, arriving at `now`, is forgotten: `ttl` after it arrived, or at
    /// the first sweep that finds its `created_at` more than `ttl` behind the relay's clock
    /// (whose seconds are `epoch_secs` plus the whole seconds of world time).
    pub(super) fn forgotten_at(&self, event: &Event, ttl: Duration, now: Duration) -> Duration {
        match self.profile.ephemeral.expiry {
            StoreExpiry::AfterArrival => now + ttl,
            StoreExpiry::AfterCreatedAt { sweep_every } => {
                // Older as soon as the relay's clock reads `created_at + ttl` (strfry deletes
                // `created <= now - lifetime`); never before it arrived.
                let older_secs =
                    (event.created_at.as_secs() + ttl.as_secs()).saturating_sub(self.epoch_secs);
                let older = Duration::from_secs(older_secs).max(now);
                let every = sweep_every.as_nanos().max(1);
                let sweeps = older.as_nanos().div_ceil(every);
                Duration::from_nanos(u64::try_from(sweeps * every).unwrap_or(u64::MAX))
            }
        }
    }

    pub(super) fn expire_stored(&mut self, now: Duration) {
        if let StoreExpiry::AfterCreatedAt { sweep_every } = self.profile.ephemeral.expiry {
            return self.sweep_stored(now, sweep_every);
        }
        while let Some((at, id)) = self.stored_order.front().copied() {
            if at > now {
                break;
            }
            self.stored_order.pop_front();
            if let Some((e, _)) = self.stored.remove(&id) {
                self.stored_bytes -= e.content.len();
            }
        }
    }

    /// The relay's sweeps up to `now`: every stored event whose time has come is forgotten.
    /// `created_at` does not grow with arrival (a publisher's clock may be skewed), so each
    /// sweep walks the store whole; times of forgetting fall on sweeps ([`Relay::forgotten_at`]),
    /// so one walk stands for every sweep since the last.
    fn sweep_stored(&mut self, now: Duration, sweep_every: Duration) {
        let every = sweep_every.as_nanos().max(1);
        let last_sweep =
            Duration::from_nanos(u64::try_from(now.as_nanos() / every * every).unwrap_or(u64::MAX));
        if last_sweep <= self.swept_until {
            return;
        }
        self.swept_until = last_sweep;
        let stored = &mut self.stored;
        let stored_bytes = &mut self.stored_bytes;
        // strfry never deletes its most recent event, of any kind ("could cause levId
        // re-use", RelayCron.cpp): on a quiet relay the last event stays until another
        // arrives, and a regular event arriving after it frees it.
        let most_recent = self.newest_stored;
        self.stored_order.retain(|&(at, id)| {
            if at > last_sweep || Some(id) == most_recent {
                return true;
            }
            if let Some((e, _)) = stored.remove(&id) {
                *stored_bytes -= e.content.len();
            }
            false
        });
    }

    /// Keeps the stored events within [`MAX_STORED_EVENTS`] and [`MAX_STORED_BYTES`], oldest
    /// first out, ephemeral before regular: a simulated relay must not grow without end under
    /// a flood.
    pub(super) fn evict_stored(&mut self) {
        let (max_events, max_bytes) = self.store_bounds;
        while self.stored.len() > max_events || self.stored_bytes > max_bytes {
            let oldest = match self.stored_order.pop_front() {
                Some((_, id)) => Some(id),
                None => self.regular_order.pop_front(),
            };
            let Some(id) = oldest else {
                break;
            };
            if let Some((e, _)) = self.stored.remove(&id) {
                self.stored_bytes -= e.content.len();
                self.counters.evicted += 1;
            }
        }
    }
}
