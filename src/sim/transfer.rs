//! One CEP-22 transfer, end to end, in virtual time: a server's sender publishes each frame as
//! a real signed kind-25910 event, an impaired link delays, duplicates or loses it, and the
//! client's receiver reassembles. The run is a small discrete-event loop (time, sequence) whose
//! clock jumps to the next action, and its report compares what arrived with what was sent.

use super::link::{Impairments, Link};
use crate::nip01::{Identity, EPOCH_SECS};
use crate::peer::content::{payload_text, ContentClass};
use crate::peer::event::ContextVmEvents;
use crate::peer::event::SignedEventEnvelope;
use crate::protocol::jsonrpc::{Message, RequestId};
use crate::protocol::oversized::{
    ChunkingError, OversizedReceiver, OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig,
    TransferFrame,
};
use crate::rng::SeededStreams;
use std::collections::BTreeMap;
use std::time::Duration;

/// A single-transfer run.
#[derive(Debug, Clone)]
pub struct TransferRun {
    /// Bytes of text in the tool result (the serialized message is a little larger).
    pub size: usize,
    /// What the text is made of.
    pub content: ContentClass,
    /// Published-event byte budget of each frame.
    pub budget: usize,
    /// Sender waits for `accept` (stateless bootstrap).
    pub bootstrap: bool,
    /// Run seed.
    pub seed: u64,
    /// Time between two frames leaving the sender.
    pub send_interval: Duration,
    /// What the link does to each event.
    pub impairments: Impairments,
    /// Receiver limits.
    pub receiver: ReceiverConfig,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferReport {
    /// Bytes of the serialized JSON-RPC message.
    pub payload_bytes: usize,
    /// Chunk frames in the transfer.
    pub chunks: usize,
    /// Events the sender published.
    pub events_published: u64,
    /// Copies the link delivered.
    pub deliveries: u64,
    /// Events the link lost.
    pub lost: u64,
    /// Extra copies the link delivered.
    pub duplicated: u64,
    /// Deliveries that arrived after an event published later.
    pub reordered: u64,
    /// Largest published event, in bytes.
    pub largest_event: usize,
    /// Sum of published event sizes.
    pub wire_bytes: u64,
    /// `Ok(virtual time of completion)`, or the receiver's failure: its cause name and text.
    pub outcome: Result<Duration, (String, String)>,
    /// True when what the receiver surfaced differs from what was sent (always false for a
    /// correct receiver; counted separately, never folded into the outcome).
    pub integrity_violation: bool,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The budget cannot hold a frame.
    #[error(transparent)]
    Chunking(#[from] ChunkingError),
}

enum Action {
    ToReceiver(TransferFrame, u64),
    ToSender(TransferFrame),
}

impl TransferRun {
    /// Runs the transfer to its outcome.
    pub fn run(&self) -> Result<TransferReport, RunError> {
        let streams = SeededStreams::new(self.seed);
        let server = Identity::derive(self.seed, "server");
        let client = Identity::derive(self.seed, "client");
        let request = client.contextvm_event(&server.public_key(), None, EPOCH_SECS, "{}".into());
        let envelope = SignedEventEnvelope::measure(
            &server,
            &client.public_key(),
            Some(&request.id),
            EPOCH_SECS,
        );
        let payload = Message::Response {
            id: RequestId::Number(1),
            result: serde_json::json!({
                "content": [{ "type": "text", "text": payload_text(self.content, self.size, &mut streams.stream("workload/payload")) }]
            }),
        }
        .to_json();
        let config = SenderConfig {
            budget: self.budget,
            wait_for_accept: self.bootstrap,
            ..SenderConfig::default()
        };
        let token = RequestId::String("transfer-1".into());
        let mut sender = OversizedSender::new(token, payload.clone(), config, &envelope)?;
        let mut receiver = OversizedReceiver::new(ReceiverConfig {
            send_accept: self.bootstrap || self.receiver.send_accept,
            ..self.receiver.clone()
        });
        let mut down = Link::new(
            self.impairments.clone(),
            streams.stream("link/server->client"),
        );
        let mut up = Link::new(
            self.impairments.clone(),
            streams.stream("link/client->server"),
        );

        let mut report = TransferReport {
            payload_bytes: payload.len(),
            chunks: sender.total_chunks(),
            events_published: 0,
            deliveries: 0,
            lost: 0,
            duplicated: 0,
            reordered: 0,
            largest_event: 0,
            wire_bytes: 0,
            outcome: Err(("no-outcome".into(), String::new())),
            integrity_violation: false,
        };
        let mut queue: BTreeMap<(Duration, u64), Action> = BTreeMap::new();
        let mut seq = 0u64;
        let mut now = Duration::ZERO;
        let mut next_send = Duration::ZERO;
        let mut highest_delivered = None;
        let horizon = Duration::from_secs(3600);
        let mut outcome = None;

        while outcome.is_none() && now <= horizon {
            // The sender publishes at most one frame per interval.
            if now >= next_send {
                if let Some(frame) = sender.poll_transmit(now) {
                    let created_at = EPOCH_SECS + now.as_secs();
                    let text = frame.to_json();
                    let event = server.contextvm_event(
                        &client.public_key(),
                        Some(&request.id),
                        created_at,
                        text,
                    );
                    let size = event.as_json().len();
                    report.largest_event = report.largest_event.max(size);
                    report.wire_bytes += size as u64;
                    let published = report.events_published;
                    report.events_published += 1;
                    let copies = down.schedule();
                    match copies.len() {
                        0 => report.lost += 1,
                        n => report.duplicated += n as u64 - 1,
                    }
                    for delay in copies {
                        // The receiver reads the frame back out of the signed event's content.
                        let parsed = Message::parse(&event.content)
                            .ok()
                            .and_then(|m| TransferFrame::from_message(&m).ok())
                            .expect("our own frames parse");
                        seq += 1;
                        queue.insert((now + delay, seq), Action::ToReceiver(parsed, published));
                    }
                    next_send = now + self.send_interval;
                }
            }
            while let Some((_, frame)) = receiver.poll_transmit() {
                for delay in up.schedule() {
                    seq += 1;
                    queue.insert((now + delay, seq), Action::ToSender(frame.clone()));
                }
            }
            while let Some(event) = receiver.poll_event() {
                match event {
                    ReceiverEvent::Completed { message, .. } => {
                        report.integrity_violation = message != payload;
                        outcome = Some(Ok(now));
                    }
                    ReceiverEvent::Failed { failure, .. } => {
                        outcome = Some(Err((failure.cause().to_owned(), failure.to_string())))
                    }
                    ReceiverEvent::Started { .. } => {}
                }
            }
            if outcome.is_some() {
                break;
            }
            // Jump to the next thing that happens.
            let candidates = [
                queue.keys().next().map(|(t, _)| *t),
                sender.has_pending().then_some(next_send.max(now)),
                sender.poll_timeout(),
                receiver.poll_timeout(),
            ];
            let Some(next) = candidates.into_iter().flatten().min() else {
                break;
            };
            now = now.max(next);
            while let Some(entry) = queue.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                match entry.remove() {
                    Action::ToReceiver(frame, published) => {
                        report.deliveries += 1;
                        if highest_delivered.is_some_and(|h| published < h) {
                            report.reordered += 1;
                        }
                        highest_delivered = highest_delivered.max(Some(published));
                        receiver.handle_frame(&"server", frame, now);
                    }
                    Action::ToSender(frame) => {
                        sender.handle_frame(&frame);
                    }
                }
            }
            sender.handle_timeout(now);
            receiver.handle_timeout(now);
        }
        report.outcome = outcome.unwrap_or_else(|| {
            Err((
                "no-outcome".into(),
                "nothing happened before the horizon".into(),
            ))
        });
        Ok(report)
    }
}
