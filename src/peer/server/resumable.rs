//! MCP resumable streams on the server: opening one for a long call, ending it, answering stream/resume.

use super::*;

impl ContextVmServer {
    /// Opens a resumable stream for call `call_id` if its client advertised them, and
    /// announces it with `notifications/stream/create`.
    pub(super) fn open_resumable(&mut self, call_id: u64, request_id: &RequestId) {
        let Some(call) = self.calls.get(&call_id) else {
            return;
        };
        let (client, request_event) = (call.client, call.request_event);
        let wants = self
            .clients
            .get(&client)
            .is_some_and(|c| c.0.resumable_streams);
        if !wants {
            return;
        }
        let Some(create) = self
            .store
            .create(client, Some(request_id.clone()), self.now)
        else {
            return; // the store is full: this call goes without one
        };
        let note = Message::Notification {
            method: stream_msg::CREATE.into(),
            params: Some(create.to_params()),
        };
        self.stream_origin
            .insert(create.stream_id.clone(), (client, request_event));
        if let Some(call) = self.calls.get_mut(&call_id) {
            call.stream = Some(create.stream_id);
        }
        let event = self.core.sign(
            &client,
            Some(&request_event),
            Vec::new(),
            note.to_json(),
            self.now,
        );
        self.core.publish(event);
    }

    /// Ends resumable stream `stream`: its `notifications/stream/end` is its last message.
    pub(super) fn end_resumable(&mut self, stream: &str) {
        let Some((seq, text)) = self.store.end(stream, self.now) else {
            return;
        };
        let Some(&(client, origin)) = self.stream_origin.get(stream) else {
            return;
        };
        let tags = vec![stream_tag(stream, seq, None)];
        let event = self.core.sign(&client, Some(&origin), tags, text, self.now);
        self.core.publish(event);
    }

    /// `stream/resume`: publishes the held messages after `lastSequence` again, marked as this
    /// replay, then answers with how many.
    pub(super) fn resume(
        &mut self,
        client: PublicKey,
        params: &Value,
    ) -> Result<Value, ErrorObject> {
        let r = StreamRef::from_params(params)
            .map_err(|e| error(stream_msg::codes::INVALID_PARAMS, e.to_string()))?;
        let replay = self
            .store
            .resume(&client, &r, self.now)
            .map_err(|e| error(e.code(), e.to_string()))?;
        let origin = self.stream_origin.get(&r.stream_id).map(|o| o.1);
        let mut bytes = 0u64;
        for m in &replay.messages {
            bytes += m.text.len() as u64;
            let tags = vec![stream_tag(&r.stream_id, m.seq, Some(replay.number))];
            let event = self
                .core
                .sign(&client, origin.as_ref(), tags, m.text.clone(), self.now);
            self.core.publish(event);
        }
        self.events.push_back(ServerEvent::Replayed {
            client,
            messages: replay.messages.len() as u64,
            bytes,
        });
        let mut answer = json!({ "streamId": r.stream_id, "replayed": replay.messages.len() });
        if replay.more {
            // Paged: the client asks again from the last sequence it got.
            answer["more"] = true.into();
            answer["through"] = replay.messages.last().map_or(0, |m| m.seq).into();
        }
        Ok(answer)
    }
}
