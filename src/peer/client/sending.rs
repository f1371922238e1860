//! Sending calls: requests (with capability tags until the server confirms them), CEP-22 uploads when a request is too large for one event.

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

    pub(super) fn send_request(
        &mut self,
        method: &str,
        params: Value,
        token: Option<ProgressToken>,
        is_initialize: bool,
    ) -> CallId {
        let id = self.next_id;
        self.next_id += 1;
        let now = self.now;
        let text = Message::Request {
            id: RequestId::Number(id as i64),
            method: method.into(),
            params: Some(params),
        }
        .to_json();
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
        text: String,
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
        // A request no event can carry goes to CEP-22 without being signed and serialised whole
        // first (for a large upload, a copy of it and a pass over every byte saved). The
        // envelope's ten-digit `created_at` may be up to nine digits wider than this event's,
        // and the capability tags only add, so past `budget + 9` it cannot fit.
        if let Some(token) = token.clone().filter(|_| {
            self.frame_envelope
                .published_size_exceeds(&text, self.config.budget + 9)
        }) {
            self.pending_tags = tags;
            self.upload(id, token, text);
            self.pump();
            return;
        }
        let server = self.config.server;
        let event = self.core.sign(&server, None, tags, text.clone(), now);
        if self.core.json_len(&event) <= self.config.budget {
            let event_id = self.core.publish(event);
            let call = self.calls.get_mut(&id).expect("just inserted");
            call.request_event = Some(event_id);
            call.request_text = token.is_some().then_some(text);
        } else if let Some(token) = token {
            self.pending_tags = event.tags.iter().skip(1).cloned().collect();
            self.upload(id, token, text);
        } else {
            self.fail_call(id, CallFailure::RequestTooLarge);
        }
        self.pump();
    }

    /// Sends a request as a CEP-22 transfer, waiting for `accept` unless the server is known to
    /// support CEP-22.
    pub(super) fn upload(&mut self, call: CallId, token: ProgressToken, text: String) {
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
            text.into(),
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
}
