//! Sending calls: requests (with capability tags until the server confirms them), CEP-22 uploads when a request is too large for one event (each within its send window), and the pump that publishes what the engines have to send.

use super::*;
use crate::peer::behaviour::AcceptWait;
use crate::protocol::envelope::Envelope;

impl ContextVmClient {
    /// Capability tags for the next request: on every request until the server has answered
    /// one that carried them. Relays reorder, so "the first request" is not necessarily the
    /// first the server sees; a later request without tags can overtake it.
    pub(super) fn capability_tags(&mut self) -> Vec<nostr::prelude::Tag> {
        if self.advertised {
            return Vec::new();
        }
        self.config.capabilities.tags()
    }

    /// The server answered a request that carried our tags: it knows what we support and will
    /// not wait for our accepts any more.
    pub(super) fn advertisement_confirmed(&mut self) {
        if self.advertised {
            return;
        }
        self.advertised = true;
        self.downloads
            .set_send_accept(!self.config.capabilities.oversized_transfer);
        self.streams
            .set_send_accept(!self.config.capabilities.open_stream);
    }

    /// Sends a request; `long` is the text of its long argument, if it has one
    /// ([`crate::peer::tools::request_json`]).
    pub(super) fn send_request(
        &mut self,
        method: &str,
        params: Value,
        long: Option<Segmented>,
        token: Option<ProgressToken>,
        is_initialize: bool,
    ) -> CallId {
        let id = self.next_id;
        self.next_id += 1;
        let now = self.now;
        let request = Message::Request {
            id: RequestId::Number(id as i64),
            method: method.into(),
            params: Some(params),
        };
        let text = match long {
            Some(long) => crate::peer::tools::request_json(&request, long),
            None => Segmented::from(request.to_json()),
        };
        self.calls.insert(
            id,
            PendingCall {
                token: token.clone(),
                request_text: None,
                request_event: None,
                swallowed: None,
                upload_start: None,
                soft_deadline: now + self.config.request_timeout,
                hard_deadline: now + self.config.max_request_timeout,
                is_initialize,
                advertised: false,
                patience: self.config.request_timeout,
            },
        );
        if let Some(t) = &token {
            self.by_token.insert(t.clone(), id);
        }
        if !self.config.stateless && !self.initialized && !is_initialize {
            // MCP requires initialize first: start it if needed and send this call after.
            if self.initializing.is_none() {
                self.initialize(now);
            }
            self.deferred.push((id, text));
            return id;
        }
        self.transmit(id, text, token, is_initialize);
        id
    }

    /// Signs and publishes a request (or starts its CEP-22 upload).
    pub(super) fn transmit(
        &mut self,
        id: CallId,
        text: Segmented,
        token: Option<ProgressToken>,
        is_initialize: bool,
    ) {
        let now = self.now;
        let tags = if is_initialize || self.config.stateless {
            self.capability_tags()
        } else {
            Vec::new()
        };
        if let Some(call) = self.calls.get_mut(&id) {
            call.advertised = !tags.is_empty();
        }
        // A request no event can carry goes to CEP-22, or fails without a progress token,
        // without being signed and serialised whole first (for a large upload, a copy of it
        // and a pass over every byte saved).
        if self.no_event_carries(&text) {
            match token.clone() {
                Some(token) => {
                    self.pending_tags = tags;
                    self.upload(id, token, text);
                }
                None => self.fail_call(id, CallFailure::RequestTooLarge),
            }
            self.pump();
            return;
        }
        let text = text.into_string();
        let server = self.config.server;
        let event = self.core.sign(&server, None, tags, text.clone(), now);
        if self.core.json_len(&event) <= self.config.budget {
            let event_id = self.core.publish(event);
            let call = self.calls.get_mut(&id).expect("just inserted");
            call.request_event = Some(event_id);
            call.request_text = token.is_some().then_some(text);
        } else if let Some(token) = token {
            self.pending_tags = event.tags.iter().skip(1).cloned().collect();
            self.upload(id, token, text.into());
        } else {
            self.fail_call(id, CallFailure::RequestTooLarge);
        }
        self.pump();
    }

    /// Whether the request `text` is too large for any event: the envelope's ten-digit
    /// `created_at` may be up to nine digits wider than the event's, and capability tags only
    /// add, so past `budget + 9` it cannot fit. A text in several segments is measured by its
    /// length where the envelope's cost model allows (its published size is at least that),
    /// without joining it.
    fn no_event_carries(&self, text: &Segmented) -> bool {
        let limit = self.config.budget + 9;
        match text.as_whole() {
            Some(whole) => self.frame_envelope.published_size_exceeds(whole, limit),
            None if self.frame_envelope.cost_model_is_exact() && text.len() > limit => true,
            None => self
                .frame_envelope
                .published_size_exceeds(&text.clone().into_string(), limit),
        }
    }

    /// Sends a request as a CEP-22 transfer, waiting for `accept` unless the server is known to
    /// support CEP-22.
    pub(super) fn upload(&mut self, call: CallId, token: ProgressToken, text: Segmented) {
        // While the server's support is unknown the frames are numbered for the handshake,
        // whether or not the client then waits for the accept.
        let unknown = !self.server_capabilities.oversized_transfer;
        let config = SenderConfig {
            budget: self.config.budget,
            wait_for_accept: match self.config.behaviour.upload_accept {
                AcceptWait::WhenUnknown => unknown,
                AcceptWait::Never => false,
            },
            accept_slot: unknown,
            ..SenderConfig::default()
        };
        let sender = self.config.implementation.transfer_sender(
            token.clone(),
            text,
            config,
            &self.frame_envelope,
        );
        match sender {
            Ok(sender) => {
                self.uploads.insert(token, sender);
            }
            Err(_) => self.fail_call(call, CallFailure::RequestTooLarge),
        }
    }

    /// Publishes what the upload senders and stream sessions have to send.
    pub(super) fn pump(&mut self) {
        self.drain_engines();
        let server = self.config.server;
        let now = self.now;
        // Each frame, and the lane it waits in: an upload's frames wait for each other when the
        // behaviour says so (sdk-behaviour §2.3). An upload's `start` is the event the server
        // answers (its `e` tag), so its call remembers it.
        // An upload's frames are made only while its send window has room (`send_window`).
        let mut frames: Vec<Outgoing> = Vec::new();
        let lanes = self.config.behaviour.publish_wait != PublishWait::Immediate;
        for (token, sender) in self.uploads.iter_mut() {
            let window = self.upload_windows.entry(token.clone()).or_default();
            window.expire(now);
            let (mut room, mut frames_room) = (window.room(), window.frames_room());
            while room > 0 && frames_room > 0 {
                let Some(frame) = sender.poll_transmit(now) else {
                    break;
                };
                let lane = lanes.then(|| format!("upload {}", frame.token.to_value()));
                let start = matches!(frame.body, TransferBody::Start { .. })
                    .then(|| self.by_token.get(&frame.token).copied())
                    .flatten();
                let text = frame.to_json();
                room = room.saturating_sub(text.len());
                frames_room -= 1;
                frames.push((text, lane, start, Some(token.clone())));
            }
        }
        while let Some((_, frame)) = self.streams.poll_transmit() {
            frames.push((frame.to_json(), None, None, None));
        }
        while let Some((_, frame)) = self.downloads.poll_transmit() {
            frames.push((frame.to_json(), None, None, None));
        }
        self.follower.handle_timeout(now);
        while let Some((attempt, request)) = self.follower.poll_transmit() {
            let message = match request {
                FollowerRequest::Resume(r) => Message::Request {
                    id: RequestId::String(format!("resume-{attempt}")),
                    method: stream_msg::RESUME.into(),
                    params: Some(r.to_params()),
                },
                FollowerRequest::Poll(r) => Message::Request {
                    id: RequestId::String(format!("poll-{attempt}")),
                    method: stream_msg::POLL.into(),
                    params: Some(r.to_params()),
                },
                FollowerRequest::Ack(r) => Message::Notification {
                    method: stream_msg::ACK.into(),
                    params: Some(r.to_params()),
                },
            };
            frames.push((message.to_json(), None, None, None));
        }
        for (text, lane, start_of, upload) in frames {
            let bytes = text.len();
            let tags = std::mem::take(&mut self.pending_tags);
            let event = self.core.sign(&server, None, tags, text, now);
            let id = match lane {
                Some(lane) => self.core.publish_in_lane(&lane, event, now),
                None => self.core.publish(event),
            };
            if let Some(call) = start_of.and_then(|c| self.calls.get_mut(&c)) {
                call.upload_start = Some(id);
            }
            if let Some(window) = upload.and_then(|t| self.upload_windows.get_mut(&t)) {
                window.sent(id, bytes, now);
            }
        }
        self.uploads.retain(|_, s| !s.is_done());
        let uploads = &self.uploads;
        self.upload_windows.retain(|t, _| uploads.contains_key(t));
        self.drain_engines();
        // A stream that is done and whose call ended needs no mapping any more.
        let (follower, calls) = (&self.follower, &self.calls);
        self.stream_calls
            .retain(|id, call| !follower.is_finished(id) || calls.contains_key(call));
    }
}

/// A frame's text, the lane it waits in, the call whose upload it starts, and the upload whose
/// window it counts against.
type Outgoing = (
    String,
    Option<String>,
    Option<CallId>,
    Option<ProgressToken>,
);
