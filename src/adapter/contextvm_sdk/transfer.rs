//! The SDK's CEP-22 engines: a receiver per transfer, and the sender's frames in the order its
//! transport sends them, in virtual time.

use super::*;

/// The SDK's CEP-22 receiver: one `OversizedTransferReceiver` per transfer.
pub struct SdkTransferReceiver<P> {
    policy: TransferPolicy,
    timeout: Duration,
    send_accept: bool,
    feed_accept: bool,
    transfers: BTreeMap<(P, ProgressToken), (OversizedTransferReceiver, Duration)>,
    outbox: VecDeque<(P, TransferFrame)>,
    events: VecDeque<ReceiverEvent<P>>,
}

impl<P: Clone + Ord> SdkTransferReceiver<P> {
    /// A receiver with the SDK's default policy. relaysim's `config` only says whether to
    /// answer `start` with `accept`.
    pub fn new(config: ReceiverConfig) -> Self {
        SdkTransferReceiver {
            policy: TransferPolicy {
                transfer_timeout_ms: 0,
                ..TransferPolicy::default()
            },
            timeout: Duration::from_millis(DEFAULT_TRANSFER_TIMEOUT_MS),
            send_accept: config.send_accept,
            feed_accept: config.feed_accept,
            transfers: BTreeMap::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        }
    }
}

impl<P: Clone + Ord + Send> TransferReceiving<P> for SdkTransferReceiver<P> {
    fn handle_frame(&mut self, peer: &P, frame: TransferFrame, now: Duration) {
        let Some(n) = to_sdk(&frame.to_json()) else {
            return;
        };
        let key = (peer.clone(), frame.token.clone());
        let policy = self.policy;
        let fresh = !self.transfers.contains_key(&key);
        let (receiver, _) = self
            .transfers
            .entry(key.clone())
            .or_insert_with(|| (OversizedTransferReceiver::with_policy(policy), now));
        let token = token_text(&frame.token);
        let was_tracking = receiver.is_tracking(&token);
        let result = receiver.process_frame(&n);
        match result {
            Ok(Some(message)) => {
                self.transfers.remove(&key);
                // The SDK hands over a parsed value: it becomes the message without a
                // round trip through text (the text is kept for those who want the bytes).
                let text = serde_json::to_string(&message).unwrap_or_default();
                self.events.push_back(ReceiverEvent::Completed {
                    peer: peer.clone(),
                    token: frame.token,
                    message: Some(text),
                    parsed: serde_json::to_value(&message)
                        .ok()
                        .and_then(|v| Message::from_value(v).ok())
                        .map(Box::new),
                    long: None,
                });
            }
            Ok(None) => {
                let started = !was_tracking && receiver.is_tracking(&token);
                if let (
                    true,
                    TransferBody::Start {
                        total_bytes,
                        total_chunks,
                        ..
                    },
                ) = (started, &frame.body)
                {
                    self.events.push_back(ReceiverEvent::Started {
                        peer: peer.clone(),
                        token: frame.token.clone(),
                        total_bytes: *total_bytes,
                        total_chunks: *total_chunks,
                    });
                    if self.send_accept {
                        // As the SDK's server transport does: send it, and feed it to our own
                        // receiver, which reserves its slot.
                        let accept = TransferFrame {
                            token: frame.token.clone(),
                            progress: 2,
                            message: None,
                            body: TransferBody::Accept,
                        };
                        // A transport that does not feed it (the TS server) leaves the
                        // receiver's frontier at slot 2 while chunks come from slot 3.
                        if self.feed_accept {
                            if let Some(n) = to_sdk(&accept.to_json()) {
                                let _ = receiver.process_frame(&n);
                            }
                        }
                        self.outbox.push_back((peer.clone(), accept));
                    }
                } else if fresh && !receiver.is_tracking(&token) {
                    // A frame for nothing the receiver tracks (dropped by it): hold no state.
                    self.transfers.remove(&key);
                }
            }
            // A second `start` under a token the receiver tracks (a relay's copy, another
            // relay's): the SDK's receiver refuses the frame and leaves the active transfer
            // as it was (sdk-behaviour §2.4), so it goes on here too.
            Err(OversizedTransferError::Sequence(message))
                if was_tracking && message.starts_with("Duplicate start frame") => {}
            Err(e) => {
                self.transfers.remove(&key);
                self.events.push_back(ReceiverEvent::Failed {
                    peer: peer.clone(),
                    token: frame.token,
                    failure: transfer_failure(e),
                });
            }
        }
    }

    fn set_send_accept(&mut self, send_accept: bool) {
        self.send_accept = send_accept;
    }

    fn poll_transmit(&mut self) -> Option<(P, TransferFrame)> {
        self.outbox.pop_front()
    }

    fn poll_event(&mut self) -> Option<ReceiverEvent<P>> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        self.transfers
            .values()
            .map(|(_, started)| *started + self.timeout)
            .min()
    }

    fn handle_timeout(&mut self, now: Duration) {
        let expired: Vec<(P, ProgressToken)> = self
            .transfers
            .iter()
            .filter(|(_, (_, started))| *started + self.timeout <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for (peer, token) in expired {
            self.transfers.remove(&(peer.clone(), token.clone()));
            self.events.push_back(ReceiverEvent::Failed {
                peer,
                token,
                failure: TransferFailure::Timeout,
            });
        }
    }
}

/// The SDK's CEP-22 frames, sent in the order its transport sends them.
pub struct SdkTransferSender {
    start: Option<TransferFrame>,
    chunks: VecDeque<TransferFrame>,
    end: Option<TransferFrame>,
    wait_for_accept: bool,
    accept_timeout: Duration,
    state: SenderState,
}

/// The token the SDK sizes chunks with (a UUID-length placeholder).
const SIZING_TOKEN: &str = "00000000-0000-0000-0000-000000000000";

/// The largest chunk of backslashes (the escaping worst case) whose published frame fits
/// `budget`, in `[1, DEFAULT_CHUNK_SIZE]`, as the SDK's transport chooses it.
fn safe_chunk_size(budget: usize, envelope: &dyn Envelope) -> usize {
    let fits = |n: usize| {
        OversizedFrame::Chunk {
            data: "\\".repeat(n),
        }
        .into_progress_notification(SIZING_TOKEN, 2, None)
        .ok()
        .and_then(|n| serde_json::to_string(&n).ok())
        .is_some_and(|text| envelope.published_size(&text) <= budget)
    };
    let (mut low, mut high, mut best) = (1usize, DEFAULT_CHUNK_SIZE, 1usize);
    while low <= high {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            best = mid;
            low = mid + 1;
        } else {
            high = mid - 1;
        }
    }
    best
}

impl SdkTransferSender {
    /// The SDK's frames for `payload`, chunked to fit `config.budget` under `envelope`.
    pub fn new(
        token: ProgressToken,
        payload: String,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Self, ChunkingError> {
        let chunk = safe_chunk_size(config.budget, envelope);
        let options = OversizedSenderOptions::new(token_text(&token))
            .with_chunk_size(chunk)
            .with_accept_handshake(config.wait_for_accept || config.accept_slot);
        let too_small = || ChunkingError::BudgetTooSmall {
            budget: config.budget,
            what: "contextvm-sdk chunk",
            needed: config.budget + 1,
        };
        let built = build_oversized_frames(&payload, &options).map_err(|_| too_small())?;
        let convert = |n: &JsonRpcNotification| transfer_frame(n).ok_or_else(too_small);
        let chunks = built
            .chunks
            .iter()
            .map(convert)
            .collect::<Result<VecDeque<_>, _>>()?;
        Ok(SdkTransferSender {
            start: Some(convert(&built.start)?),
            chunks,
            end: Some(convert(&built.end)?),
            wait_for_accept: config.wait_for_accept,
            accept_timeout: config.accept_timeout,
            state: SenderState::Starting,
        })
    }
}

impl TransferSending for SdkTransferSender {
    fn handle_frame(&mut self, frame: &TransferFrame) {
        match (&frame.body, &self.state) {
            (TransferBody::Accept, SenderState::AwaitingAccept { .. }) => {
                self.state = SenderState::Sending { next: 0 };
            }
            (TransferBody::Abort { reason }, s)
                if !matches!(s, SenderState::Finished | SenderState::Failed(_)) =>
            {
                self.state = SenderState::Failed(SenderFailure::AbortedByPeer {
                    reason: reason.clone(),
                });
            }
            _ => {}
        }
    }

    fn poll_transmit(&mut self, now: Duration) -> Option<TransferFrame> {
        match self.state {
            SenderState::Starting => {
                self.state = if self.wait_for_accept {
                    SenderState::AwaitingAccept {
                        deadline: now + self.accept_timeout,
                    }
                } else {
                    SenderState::Sending { next: 0 }
                };
                self.start.take()
            }
            SenderState::Sending { next } => match self.chunks.pop_front() {
                Some(chunk) => {
                    self.state = SenderState::Sending { next: next + 1 };
                    Some(chunk)
                }
                None => {
                    self.state = SenderState::Finished;
                    self.end.take()
                }
            },
            _ => None,
        }
    }

    fn state(&self) -> &SenderState {
        &self.state
    }

    fn is_done(&self) -> bool {
        matches!(self.state, SenderState::Finished | SenderState::Failed(_))
    }

    fn poll_timeout(&self) -> Option<Duration> {
        match self.state {
            SenderState::AwaitingAccept { deadline } => Some(deadline),
            _ => None,
        }
    }

    fn handle_timeout(&mut self, now: Duration) {
        if let SenderState::AwaitingAccept { deadline } = self.state {
            if now >= deadline {
                // The SDK gives up without an abort frame.
                self.state = SenderState::Failed(SenderFailure::AcceptTimeout);
            }
        }
    }
}
