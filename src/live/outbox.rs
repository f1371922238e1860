//! The messages on their way to one client's socket, bounded in bytes per connection and
//! across the deployment.
//!
//! A reader that lets more than its bound pile up is cut off (strfry drops a connection whose
//! outgoing buffer passes its limit). The per-connection bound alone does not bound the
//! process: 2,048 readers that never read could each hold it. So every queue also draws on one
//! deployment-wide budget: while the budget is spent, a connection holding more than its fair
//! share (the budget over the connection slots) is cut off at its next message, and one
//! holding less may still queue. The bytes queued in all are therefore at most twice the
//! budget, and a prompt reader, whose queue stays short, is never the one cut off.
//!
//! An event delivery is queued as shared parts ([`Outgoing::Event`]) and framed by the
//! connection's writer task: one event fanned out to many readers is then one copy of its text
//! in memory, and the relay model's task never copies it per reader (that copy was a quarter of
//! `serve`'s CPU under the hostile-client load, all of it on the one task every client waits
//! for).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// What a connection's writer sends.
#[derive(Debug, Clone)]
pub(crate) enum Outgoing {
    /// A finished message.
    Message(Message),
    /// `["EVENT", sub, event]` from its parts, framed when written.
    Event {
        /// The subscription id as a JSON string (quoted and escaped).
        sub: Arc<str>,
        /// The event's JSON, shared by every delivery of it.
        event: Arc<str>,
    },
}

impl Outgoing {
    /// A delivery of `event` (its JSON) to subscription `sub`.
    pub(super) fn event(sub: &str, event: Arc<str>) -> Self {
        let sub = serde_json::to_string(sub).unwrap_or_else(|_| "\"\"".into());
        Outgoing::Event {
            sub: sub.into(),
            event,
        }
    }

    /// Bytes of the message's payload.
    pub(super) fn len(&self) -> usize {
        match self {
            Outgoing::Message(m) => m.len(),
            Outgoing::Event { sub, event } => EVENT_FRAMING + sub.len() + event.len(),
        }
    }

    /// The payload as text (an event frame is built here). Byte for byte what
    /// [`crate::nip01::wire::to_wire`] writes for the same message.
    pub(super) fn text(&self) -> String {
        match self {
            Outgoing::Message(m) => m.to_text().unwrap_or_default().to_owned(),
            Outgoing::Event { sub, event } => {
                let mut out = String::with_capacity(self.len());
                out.push_str("[\"EVENT\",");
                out.push_str(sub);
                out.push(',');
                out.push_str(event);
                out.push(']');
                out
            }
        }
    }

    /// The message to write.
    pub(super) fn into_message(self) -> Message {
        match self {
            Outgoing::Message(m) => m,
            event => Message::text(event.text()),
        }
    }
}

/// `["EVENT",` `,` `]`: the bytes of an event frame besides its sub and event.
const EVENT_FRAMING: usize = 11;

/// The bounds every queue of one deployment shares.
#[derive(Debug)]
pub(crate) struct QueueBudget {
    /// Bytes queued over every connection.
    total: AtomicUsize,
    /// The deployment-wide budget.
    max_total: usize,
    /// What one connection may hold while the budget is spent.
    fair_share: usize,
    /// What one connection may hold at all.
    per_connection: usize,
}

impl QueueBudget {
    /// A budget of `max_total` bytes over `slots` connections, each holding at most
    /// `per_connection`.
    pub(super) fn new(max_total: usize, slots: usize, per_connection: usize) -> Arc<Self> {
        Arc::new(QueueBudget {
            total: AtomicUsize::new(0),
            max_total,
            fair_share: max_total / slots.max(1),
            per_connection,
        })
    }

    /// Bytes queued over every connection now.
    pub(super) fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

/// A message in a queue. Its bytes count against the queue and the budget until it is
/// dropped, whether after it was written or unsent with a closed socket, so the counts never
/// drift.
pub(crate) struct Queued {
    message: Option<Outgoing>,
    bytes: usize,
    queued: Arc<AtomicUsize>,
    budget: Arc<QueueBudget>,
}

impl Queued {
    /// The message (once), framed now if it is an event delivery.
    pub(super) fn take(&mut self) -> Option<Message> {
        self.message.take().map(Outgoing::into_message)
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.bytes, Ordering::Relaxed);
        self.budget.total.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// The sending side of one connection's queue.
pub(crate) struct Outbox {
    tx: mpsc::UnboundedSender<Queued>,
    queued: Arc<AtomicUsize>,
    budget: Arc<QueueBudget>,
}

/// A handle on a queue that does not keep it open: the queue closes (and its socket writer
/// ends) when the relay model lets go of it, whoever else still holds one of these (the
/// connection task's keepalive pings).
pub(crate) struct WeakOutbox {
    tx: mpsc::WeakUnboundedSender<Queued>,
    queued: Arc<AtomicUsize>,
    budget: Arc<QueueBudget>,
}

impl WeakOutbox {
    /// The queue, while the relay model still holds it.
    pub(super) fn upgrade(&self) -> Option<Outbox> {
        Some(Outbox {
            tx: self.tx.upgrade()?,
            queued: self.queued.clone(),
            budget: self.budget.clone(),
        })
    }
}

/// Why a message could not be queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OutboxError {
    /// The queue would pass its bound, or its fair share while the budget is spent.
    Full,
    /// The connection's task has ended.
    Closed,
}

impl Outbox {
    /// A queue drawing on `budget`, and its receiving side (for the socket writer).
    pub(super) fn new(budget: Arc<QueueBudget>) -> (Self, mpsc::UnboundedReceiver<Queued>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let outbox = Outbox {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
            budget,
        };
        (outbox, rx)
    }

    /// A handle that does not keep the queue open.
    pub(super) fn downgrade(&self) -> WeakOutbox {
        WeakOutbox {
            tx: self.tx.downgrade(),
            queued: self.queued.clone(),
            budget: self.budget.clone(),
        }
    }

    /// Queues `message`.
    pub(super) fn push(&self, message: Outgoing) -> Result<(), OutboxError> {
        let bytes = message.len();
        let mine = self.queued.load(Ordering::Relaxed) + bytes;
        let spent = self.budget.total() + bytes > self.budget.max_total;
        if mine > self.budget.per_connection || (spent && mine > self.budget.fair_share) {
            return Err(OutboxError::Full);
        }
        self.send(Some(message), bytes)
    }

    /// Queues a close frame (it has no bytes to count, and is never refused for room).
    pub(super) fn close(&self) {
        let _ = self.send(Some(Outgoing::Message(Message::Close(None))), 0);
    }

    fn send(&self, message: Option<Outgoing>, bytes: usize) -> Result<(), OutboxError> {
        if self.tx.is_closed() {
            return Err(OutboxError::Closed);
        }
        self.queued.fetch_add(bytes, Ordering::Relaxed);
        self.budget.total.fetch_add(bytes, Ordering::Relaxed);
        let item = Queued {
            message,
            bytes,
            queued: self.queued.clone(),
            budget: self.budget.clone(),
        };
        // A failed send hands the item back, and dropping it gives its bytes back.
        self.tx.send(item).map_err(|_| OutboxError::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_from_an_event_s_shared_json_is_the_frame_to_wire_writes() {
        use crate::nip01::{event_json::EventJson, Identity, RelayMessage};
        let event =
            Identity::derive(1, "a").sign(25910, 1_700_000_000, vec![], "x \"q\" \n é".into());
        let mut memo = EventJson::default();
        for sub in ["s", "with \"quotes\" and \\ and \u{1}", ""] {
            let expected = crate::nip01::wire::to_wire(&RelayMessage::Event {
                sub: sub.into(),
                event: std::sync::Arc::new(event.clone()),
            });
            let outgoing = Outgoing::event(sub, memo.of(&event, &Default::default()));
            assert_eq!(outgoing.text(), expected);
            assert_eq!(outgoing.len(), expected.len());
            assert_eq!(
                outgoing.into_message().into_text().unwrap().as_str(),
                expected
            );
        }
        // One JSON, shared (the signer's, which its memo keeps).
        assert!(std::sync::Arc::ptr_eq(
            &memo.of(&event, &Default::default()),
            &memo.of(&event, &Default::default())
        ));
    }

    fn text(bytes: usize) -> Outgoing {
        Outgoing::Message(Message::text("x".repeat(bytes)))
    }

    #[test]
    fn one_queue_is_bounded_and_gives_its_bytes_back_when_drained_or_dropped() {
        let budget = QueueBudget::new(1000, 1, 300);
        let (out, mut rx) = Outbox::new(budget.clone());
        out.push(text(200)).unwrap();
        assert_eq!(out.push(text(200)), Err(OutboxError::Full));
        let mut first = rx.try_recv().unwrap();
        assert_eq!(first.take().map(|m| m.len()), Some(200));
        drop(first);
        assert_eq!(budget.total(), 0);
        out.push(text(250)).unwrap();
        out.close();
        drop(rx); // the socket is gone with messages unsent
        assert_eq!(budget.total(), 0);
        assert_eq!(out.push(text(1)), Err(OutboxError::Closed));
        assert_eq!(budget.total(), 0);
    }

    #[test]
    fn with_the_budget_spent_only_queues_over_their_fair_share_are_refused() {
        // 1,000 bytes over 4 slots: a fair share of 250.
        let budget = QueueBudget::new(1000, 4, 10_000);
        let (hog, _hog_rx) = Outbox::new(budget.clone());
        let (prompt, mut prompt_rx) = Outbox::new(budget.clone());
        for _ in 0..10 {
            hog.push(text(100)).unwrap();
        }
        assert_eq!(budget.total(), 1000);
        // The hog holds 1,000 > 250: refused. The prompt reader holds nothing: served, and
        // keeps being served as it reads.
        assert_eq!(hog.push(text(100)), Err(OutboxError::Full));
        for _ in 0..5 {
            prompt.push(text(200)).unwrap();
            drop(prompt_rx.try_recv().unwrap());
        }
        assert_eq!(budget.total(), 1000);
    }

    #[test]
    fn a_weak_handle_does_not_keep_the_queue_open() {
        let (out, mut rx) = Outbox::new(QueueBudget::new(1000, 1, 1000));
        let weak = out.downgrade();
        weak.upgrade().unwrap().push(text(10)).unwrap();
        drop(out);
        assert!(rx.try_recv().is_ok());
        assert!(weak.upgrade().is_none());
        assert!(
            rx.try_recv().is_err(),
            "the queue ended with its last strong handle"
        );
    }
}
