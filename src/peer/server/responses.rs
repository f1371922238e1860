//! How answers reach the client: a direct response, a CEP-22 transfer when it is too large for one event, an error; the capability tags that go with them.

use super::*;
use crate::peer::tools::text_response_json;
use crate::protocol::envelope::Envelope;
use crate::segmented::Segmented;

impl ContextVmServer {
    /// Publishes `text` to `client`, on resumable stream `stream` when given (recorded there and
    /// tagged with its sequence number).
    pub(super) fn publish_message(
        &mut self,
        client: &PublicKey,
        reply_to: Option<&EventId>,
        mut tags: Vec<nostr::prelude::Tag>,
        text: String,
        stream: Option<&str>,
        lane: Option<&str>,
    ) -> EventId {
        let recorded = stream.and_then(|id| self.store.record(id, &text));
        if let Some(seq) = recorded {
            tags.push(stream_tag(stream.expect("recorded"), seq, None));
        }
        let event = self.core.sign(client, reply_to, tags, text, self.now);
        match lane {
            Some(lane) => self.core.publish_in_lane(lane, event, self.now),
            None => self.core.publish(event),
        }
    }

    /// The lane a call's final response waits in: its stream's, while frames of it are still
    /// waiting, as both SDKs await the `close` publish before flushing the deferred response
    /// (sdk-behaviour §3.6).
    fn response_lane(&self, call: &Call) -> Option<String> {
        if self.config.behaviour.publish_wait == PublishWait::Immediate {
            return None;
        }
        let lane = lane_of(&call.client, call.token.as_ref()?);
        self.core.lane_busy(&lane).then_some(lane)
    }

    pub(super) fn capability_tags(&mut self, client: PublicKey) -> Vec<nostr::prelude::Tag> {
        let entry = self
            .clients
            .entry(client)
            .or_insert((Capabilities::default(), false));
        if entry.1 {
            return Vec::new();
        }
        entry.1 = true;
        self.config.capabilities.tags()
    }

    /// Publishes the final response of a call: directly, as CEP-22, or as a too-large error.
    pub(super) fn respond(&mut self, call_id: u64, response: Result<Value, ErrorObject>) {
        let Some(call) = self.calls.remove(&call_id) else {
            return;
        };
        let message = match response {
            Ok(result) => Message::Response {
                id: call.request_id.clone(),
                result,
            },
            Err(error) => Message::Error {
                id: Some(call.request_id.clone()),
                error,
            },
        };
        self.answer(call, Segmented::from(message.to_json()));
    }

    /// Publishes the final response of a call whose result is one text block given in
    /// segments (a large result: serialised a segment at a time, each freed once written).
    pub(super) fn respond_text(&mut self, call_id: u64, text: Segmented, meta: Option<Value>) {
        let Some(call) = self.calls.remove(&call_id) else {
            return;
        };
        let json = text_response_json(&call.request_id, text, meta.as_ref());
        self.answer(call, json);
    }

    /// Publishes `text`, the serialised final response to `call`: directly, as CEP-22, or as
    /// a too-large error.
    fn answer(&mut self, call: Call, text: Segmented) {
        // A text longer than the budget publishes larger still (its event holds it escaped).
        if text.len() > self.budget {
            self.send_oversized(call, text);
            return;
        }
        let text = text.into_string();
        let tags = self.capability_tags(call.client);
        let room = if call.stream.is_some() {
            STREAM_TAG_ROOM
        } else {
            0
        };
        // The reply envelope is this event without its capability tags and with a ten-digit
        // `created_at`, so its size less nine bytes is a lower bound: a response that cannot
        // fit goes to CEP-22 without being signed and serialised whole (for a 1 MiB result,
        // most of the cost of deciding).
        // `size + room > budget + 9`, rearranged; when `room` alone passes `budget + 9`, any
        // size exceeds the saturated limit of 0, as every event has some (its overhead).
        if self
            .reply_envelope
            .published_size_exceeds(&text, (self.budget + 9).saturating_sub(room))
        {
            self.send_oversized(call, text.into());
            return;
        }
        let event = self.core.sign(
            &call.client,
            Some(&call.request_event),
            tags.clone(),
            text.clone(),
            self.now,
        );
        let published_size = self.core.json_len(&event);
        if published_size + room <= self.budget {
            let client = call.client;
            let lane = self.response_lane(&call);
            let id = match (call.stream.clone(), &lane) {
                (None, None) => self.core.publish(event),
                (None, Some(lane)) => self.core.publish_in_lane(lane, event, self.now),
                (Some(stream), _) => {
                    let id = self.publish_message(
                        &client,
                        Some(&call.request_event),
                        tags,
                        text.clone(),
                        Some(&stream),
                        lane.as_deref(),
                    );
                    self.end_resumable(&stream);
                    id
                }
            };
            if call.token.is_some() {
                self.direct.insert(
                    id,
                    DirectResponse {
                        call,
                        text,
                        published_size,
                    },
                );
            }
            self.events.push_back(ServerEvent::Responded {
                client,
                mode: ResponseMode::Direct,
            });
        } else {
            self.send_oversized(call, text.into());
        }
    }

    /// Sends `text`, the serialised response to `call`, as a CEP-22 transfer.
    pub(super) fn send_oversized(&mut self, call: Call, text: Segmented) {
        let client = call.client;
        let Some(token) = call.token.clone() else {
            self.publish_error(
                &call,
                "response too large to publish and the request had no progressToken".into(),
            );
            self.events.push_back(ServerEvent::Responded {
                client,
                mode: ResponseMode::TooLarge,
            });
            return;
        };
        let supports = self
            .clients
            .get(&client)
            .is_some_and(|c| c.0.oversized_transfer);
        let room = if call.stream.is_some() {
            STREAM_TAG_ROOM
        } else {
            0
        };
        let config = SenderConfig {
            budget: self.budget.saturating_sub(room),
            wait_for_accept: !supports,
            ..SenderConfig::default()
        };
        let sender = self.config.implementation.transfer_sender(
            token.clone(),
            text,
            config,
            &self.reply_envelope,
        );
        match sender {
            Ok(sender) => {
                self.outgoing.insert(
                    (client, token),
                    Outgoing {
                        client,
                        reply_to: call.request_event,
                        sender,
                        resumable: call.stream.clone(),
                        window: Default::default(),
                    },
                );
                self.events.push_back(ServerEvent::Responded {
                    client,
                    mode: ResponseMode::Oversized,
                });
            }
            Err(e) => self.publish_error(&call, e.to_string()),
        }
    }

    /// Publishes a small internal-error response to `call` (when its real response cannot go).
    pub(super) fn publish_error(&mut self, call: &Call, message: String) {
        let small = Message::Error {
            id: Some(call.request_id.clone()),
            error: error(codes::INTERNAL_ERROR, message),
        };
        let lane = self.response_lane(call);
        self.publish_message(
            &call.client,
            Some(&call.request_event),
            Vec::new(),
            small.to_json(),
            call.stream.as_deref(),
            lane.as_deref(),
        );
        if let Some(stream) = &call.stream {
            self.end_resumable(stream);
        }
    }
}
