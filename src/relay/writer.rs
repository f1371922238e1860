//! A relay's single writer thread that commits accepted events in batches, each batch sorted by
//! `(created_at, id)` before it is written: strfry's (hoytech/strfry @ f8a56a85,
//! `src/apps/relay/RelayWriter.cpp` takes everything queued since its last commit with
//! `pop_all`; `src/events.cpp` `writeEvents` sorts the batch). The OKs and the live
//! deliveries of a batch follow the sorted order, so events one connection sent back to back
//! within one `created_at` second, without waiting for their OKs, leave the relay shuffled by
//! id: the writer was busy with the first commit while the rest queued. Spaced out, or each
//! awaiting its OK, every batch holds one event and nothing changes order.

use super::ConnId;
use nostr::prelude::{Event, EventId};
use std::sync::Arc;
use std::time::Duration;

/// The writer's queue and the batch it is committing.
#[derive(Debug, Default)]
pub(super) struct BatchWriter {
    /// Accepted events waiting for the next commit, in the order they were handed over.
    queue: Vec<(ConnId, Arc<Event>)>,
    /// The batch being committed, sorted.
    committing: Vec<(ConnId, Arc<Event>)>,
    /// When the batch being committed is written.
    done_at: Option<Duration>,
    /// The ids queued or being committed (looked up only, never iterated).
    pending: rustc_hash::FxHashSet<EventId>,
}

/// How long a commit takes: a fixed cost per batch and a cost per event in it.
#[derive(Debug, Clone, Copy)]
pub(super) struct CommitCost {
    pub(super) per_batch: Duration,
    pub(super) per_event: Duration,
}

impl BatchWriter {
    /// Hands an accepted event to the writer at `now`; an idle writer starts a batch of it.
    pub(super) fn push(
        &mut self,
        conn: ConnId,
        event: Arc<Event>,
        now: Duration,
        cost: CommitCost,
    ) {
        self.pending.insert(event.id);
        self.queue.push((conn, event));
        if self.done_at.is_none() {
            self.start(now, cost);
        }
    }

    /// Takes everything queued into a batch, sorted as strfry's `writeEvents` sorts it.
    fn start(&mut self, now: Duration, cost: CommitCost) {
        if self.queue.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.queue);
        batch.sort_by_key(|(_, e)| (e.created_at, e.id));
        let n = u32::try_from(batch.len()).unwrap_or(u32::MAX);
        self.done_at = Some(now + cost.per_batch + cost.per_event.saturating_mul(n));
        self.committing = batch;
    }

    /// When the batch being committed is written.
    pub(super) fn poll_timeout(&self) -> Option<Duration> {
        self.done_at
    }

    /// The batch written by `now`, in its sorted order; the writer starts on what queued
    /// meanwhile.
    pub(super) fn finish(&mut self, now: Duration, cost: CommitCost) -> Vec<(ConnId, Arc<Event>)> {
        if self.done_at.is_none_or(|t| t > now) {
            return Vec::new();
        }
        self.done_at = None;
        let batch = std::mem::take(&mut self.committing);
        for (_, e) in &batch {
            self.pending.remove(&e.id);
        }
        self.start(now, cost);
        batch
    }

    /// Whether `id` is queued or being committed.
    pub(super) fn holds(&self, id: &EventId) -> bool {
        self.pending.contains(id)
    }

    /// The relay stopped: nothing queued or uncommitted is written.
    pub(super) fn clear(&mut self) {
        self.queue.clear();
        self.committing.clear();
        self.pending.clear();
        self.done_at = None;
    }
}
