//! What comes back from the server: events, CEP-41 stream messages, responses, the engines' results and failures, publish outcomes.

use super::*;
use crate::peer::behaviour::CallRefresh;
use crate::protocol::chunk_text::ProgressFrame;

impl ContextVmClient {
    pub(super) fn fail_call(&mut self, call: CallId, failure: CallFailure) {
        if self.initializing == Some(call) {
            // Calls waiting for initialize fail with it.
            self.initializing = None;
            for (id, _) in std::mem::take(&mut self.deferred) {
                self.fail_call(id, failure.clone());
            }
        }
        if let Some(c) = self.calls.remove(&call) {
            if let Some(t) = c.token {
                self.by_token.remove(&t);
                self.uploads.remove(&t);
                let server = self.config.server;
                self.streams.release(&server, &t);
            }
            self.events.push_back(ClientEvent::Failed { call, failure });
        }
    }

    pub(super) fn touch(&mut self, token: &ProgressToken) {
        if self.config.behaviour.call_refresh != CallRefresh::Token {
            return;
        }
        if let Some(call) = self.by_token.get(token).and_then(|c| self.calls.get_mut(c)) {
            call.soft_deadline = self.now + call.patience;
        }
    }

    pub(super) fn on_event(&mut self, event: &Event) {
        if event.pubkey != self.config.server {
            return;
        }
        self.server_capabilities.learn(Capabilities::of(event));
        if self.config.behaviour.call_refresh == CallRefresh::ETag {
            let now = self.now;
            for e in event.tags.event_ids() {
                let call = self
                    .calls
                    .values_mut()
                    .find(|c| c.request_event == Some(e) || c.upload_start == Some(e));
                if let Some(call) = call {
                    call.soft_deadline = now + call.patience;
                }
            }
        }
        if stream_position(event).is_none() {
            // A chunk read straight from its text is the frame the general path reads.
            if let Some(frame) = crate::protocol::chunk_text::read(&event.content) {
                self.touch(frame.token());
                self.on_frame(frame);
                self.drain_engines();
                return;
            }
        }
        let message = match Message::parse(&event.content) {
            Ok(message) => message,
            Err(_) => {
                self.malformed += 1;
                return;
            }
        };
        let Some((stream, seq)) = stream_position(event) else {
            self.on_message(message);
            return;
        };
        let is_end =
            matches!(&message, Message::Notification { method, .. } if method == stream_msg::END);
        // News of the call, even held: it is alive.
        if let Some(call) = self
            .stream_calls
            .get(&stream)
            .and_then(|c| self.calls.get_mut(c))
        {
            call.soft_deadline = self.now + call.patience;
        }
        match self
            .follower
            .on_message(&stream, seq, is_end, message, self.now)
        {
            Arrival::Release(messages) => {
                for m in messages {
                    self.on_message(m);
                }
            }
            Arrival::Held => {}
            Arrival::Duplicate => self.stream_duplicates += 1,
        }
    }

    /// Stream requests and notifications of resumable streams; true if `message` was one.
    pub(super) fn on_stream_message(&mut self, message: &Message) -> bool {
        match message {
            Message::Notification { method, params } if method == stream_msg::CREATE => {
                let Some(Ok(create)) = params.as_ref().map(StreamCreate::from_params) else {
                    self.malformed += 1;
                    return true;
                };
                self.follower.on_create(&create, self.now);
                let call = match &create.request_id {
                    Some(RequestId::Number(n)) => CallId::try_from(*n).ok(),
                    _ => None,
                };
                if let Some(call) = call {
                    self.stream_calls.insert(create.stream_id.clone(), call);
                    if let (Some(pending), Some(max)) =
                        (self.calls.get_mut(&call), create.resume_interval.max)
                    {
                        // `max` is clamped to a day when read, so this cannot overflow.
                        pending.patience = pending.patience.max(Duration::from_secs(max));
                        pending.soft_deadline = self.now + pending.patience;
                    }
                }
                true
            }
            Message::Notification { method, .. } if method == stream_msg::END => true,
            Message::Response {
                id: RequestId::String(id),
                result,
            } => {
                if let Some(n) = attempt_of(id, "resume-") {
                    let more = result["more"]
                        .as_bool()
                        .unwrap_or(false)
                        .then(|| result["through"].as_u64())
                        .flatten();
                    self.follower.on_resume_answer(n, Ok(more), self.now);
                } else if let Some(n) = attempt_of(id, "poll-") {
                    let poll = PollResult::from_value(result).map_err(|e| e.to_string());
                    self.follower.on_poll_answer(n, poll);
                }
                true
            }
            Message::Error {
                id: Some(RequestId::String(id)),
                error,
            } => {
                if let Some(n) = attempt_of(id, "resume-") {
                    self.follower
                        .on_resume_answer(n, Err(error.message.clone()), self.now);
                } else if let Some(n) = attempt_of(id, "poll-") {
                    self.follower.on_poll_answer(n, Err(error.message.clone()));
                }
                true
            }
            _ => false,
        }
    }

    pub(super) fn on_message(&mut self, message: Message) {
        if self.on_stream_message(&message) {
            self.drain_engines();
            return;
        }
        match message {
            Message::Response { id, result } => self.finish(&id, Ok(result)),
            Message::Error {
                id: Some(id),
                error,
            } => self.finish(&id, Err(error)),
            Message::Notification { .. } => {
                let Some(Ok(params)) = message.into_progress_params() else {
                    return;
                };
                self.touch(&params.progress_token);
                if let Some(frame) = ProgressFrame::from_params(&params) {
                    self.on_frame(frame);
                }
            }
            Message::Request { .. } | Message::Error { id: None, .. } => {}
        }
        self.drain_engines();
    }

    /// A CEP-22 or CEP-41 frame from the server.
    fn on_frame(&mut self, frame: ProgressFrame) {
        let server = self.config.server;
        let now = self.now;
        match frame {
            ProgressFrame::Transfer(frame) => {
                let for_upload = matches!(
                    frame.body,
                    TransferBody::Accept | TransferBody::Abort { .. }
                ) && self.uploads.contains_key(&frame.token);
                if for_upload {
                    if let Some(sender) = self.uploads.get_mut(&frame.token) {
                        sender.handle_frame(&frame);
                    }
                } else {
                    self.downloads.handle_frame(&server, frame, now);
                }
            }
            ProgressFrame::Stream(frame) => {
                // Any token this client issued: the final response may overtake the stream's
                // frames on the relay, so a finished call still takes its stream.
                let ours = self.call_of(&frame.token).is_some();
                if ours {
                    self.streams.handle_frame(&server, frame, now);
                }
            }
        }
    }

    pub(super) fn finish(&mut self, id: &RequestId, response: Result<Value, ErrorObject>) {
        let RequestId::Number(n) = id else { return };
        let Ok(call) = CallId::try_from(*n) else {
            return;
        };
        let Some(pending) = self.calls.remove(&call) else {
            return; // late or duplicate
        };
        if pending.advertised {
            self.advertisement_confirmed();
        }
        if let Some(t) = &pending.token {
            self.by_token.remove(t);
            self.uploads.remove(t);
        }
        if pending.is_initialize {
            self.initialized = true;
            self.initializing = None;
            self.events.push_back(ClientEvent::Initialized {
                capabilities: self.server_capabilities,
            });
            let note = Message::Notification {
                method: "notifications/initialized".into(),
                params: None,
            };
            let server = self.config.server;
            let event = self
                .core
                .sign(&server, None, Vec::new(), note.to_json(), self.now);
            self.core.publish(event);
            for (id, text) in std::mem::take(&mut self.deferred) {
                let token = self.calls.get(&id).and_then(|c| c.token.clone());
                if self.calls.contains_key(&id) {
                    self.transmit(id, text, token, false);
                }
            }
        } else {
            self.events
                .push_back(ClientEvent::Response { call, response });
        }
    }

    /// Moves what the engines produced into events and messages.
    pub(super) fn drain_engines(&mut self) {
        while let Some(event) = self.downloads.poll_event() {
            match event {
                ReceiverEvent::Completed { parsed, long, .. } => match parsed {
                    Some(mut m) => {
                        // A client takes a result whole.
                        if let Some(long) = long {
                            m.put_back(long);
                        }
                        self.on_message(*m)
                    }
                    None => self.malformed += 1,
                },
                ReceiverEvent::Failed { token, failure, .. } => {
                    let Some(call) = self.by_token.get(&token).copied() else {
                        continue;
                    };
                    let failure = CallFailure::Download(failure);
                    match self.calls.get_mut(&call) {
                        Some(pending) if !self.config.behaviour.failures_reach_call => {
                            // Logged, not passed on: the call waits for its timeout.
                            let what = match failure.detail() {
                                Some(words) => format!("{}: {words}", failure.cause()),
                                None => failure.cause(),
                            };
                            pending.swallowed.get_or_insert(what);
                        }
                        _ => self.fail_call(call, failure),
                    }
                }
                ReceiverEvent::Started { .. } => {}
            }
        }
        while let Some(event) = self.streams.poll_event() {
            let (token, ended) = match event {
                RegistryEvent::Opened { token, .. } => (token, None),
                RegistryEvent::Completed { token, .. } => (token, Some(Ok(()))),
                RegistryEvent::Failed { token, failure, .. } => (token, Some(Err(failure))),
            };
            let Some(call) = self.call_of(&token) else {
                continue;
            };
            self.events.push_back(match ended {
                None => ClientEvent::StreamOpened { call },
                Some(outcome) => ClientEvent::StreamEnded { call, outcome },
            });
        }
        let failed: Vec<(ProgressToken, SenderFailure)> = self
            .uploads
            .iter()
            .filter_map(|(t, s)| match s.state() {
                SenderState::Failed(f) if s.is_done() => Some((t.clone(), f.clone())),
                _ => None,
            })
            .collect();
        for (token, failure) in failed {
            if let Some(call) = self.by_token.get(&token).copied() {
                self.fail_call(call, CallFailure::Upload(failure));
            }
        }
        while let Some((id, outcome)) = self.core.poll_publish_outcome() {
            self.on_publish_outcome(id, outcome);
        }
        while let Some(event) = self.follower.poll_event() {
            match event {
                FollowerEvent::Resumed { stream_id, latency } => {
                    let Some(&call) = self.stream_calls.get(&stream_id) else {
                        continue;
                    };
                    // A keepalive ping sent while the connection was down never left.
                    let server = self.config.server;
                    if let Some(token) = self.token_of(call) {
                        self.streams.reprobe(&server, &token);
                    }
                    self.events
                        .push_back(ClientEvent::StreamResumed { call, latency });
                }
                FollowerEvent::ResumeRefused { stream_id, reason } => {
                    if let Some(&call) = self.stream_calls.get(&stream_id) {
                        self.fail_call(call, CallFailure::ResumeRefused(reason));
                    }
                }
            }
        }
    }

    pub(super) fn on_publish_outcome(&mut self, id: EventId, outcome: PublishOutcome) {
        for window in self.upload_windows.values_mut() {
            window.answered(&id);
        }
        let Some((&call, pending)) = self
            .calls
            .iter_mut()
            .find(|(_, c)| c.request_event == Some(id))
        else {
            return;
        };
        match outcome {
            PublishOutcome::Accepted => pending.request_text = None,
            PublishOutcome::SizeRejected => {
                match (pending.token.clone(), pending.request_text.take()) {
                    (Some(token), Some(text)) => self.upload(call, token, text.into()),
                    _ => self.fail_call(call, CallFailure::RequestTooLarge),
                }
            }
            PublishOutcome::Rejected(reason) => self.fail_call(call, CallFailure::Rejected(reason)),
        }
    }
}
