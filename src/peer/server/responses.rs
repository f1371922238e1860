//! How answers reach the client: a direct response, a CEP-22 transfer when it is too large for one event, an error; the capability tags that go with them.

use super::*;
use crate::peer::sent_chunks::{self, FrameText};
use crate::peer::sent_messages;
use crate::protocol::envelope::Envelope;

impl ContextVmServer {
    /// Publishes `text` to `client`, on resumable stream `stream` when given (recorded there and
    /// tagged with its sequence number).
    pub(super) fn publish_message(
        &mut self,
        client: &PublicKey,
        reply_to: Option<&EventId>,
        tags: Vec<nostr::prelude::Tag>,
        text: String,
        stream: Option<&str>,
        lane: Option<&str>,
    ) -> EventId {
        let text = FrameText::text(text);
        self.publish_outgoing(client, reply_to, tags, text, stream, lane)
    }

    /// As [`Self::publish_message`], remembering a chunk frame as the event it is signed into
    /// (`peer::sent_chunks`).
    pub(super) fn publish_outgoing(
        &mut self,
        client: &PublicKey,
        reply_to: Option<&EventId>,
        mut tags: Vec<nostr::prelude::Tag>,
        text: FrameText,
        stream: Option<&str>,
        lane: Option<&str>,
    ) -> EventId {
        let (text, chunk) = text.into_parts();
        let recorded = stream.and_then(|id| self.store.record(id, &text));
        if let Some(seq) = recorded {
            tags.push(stream_tag(stream.expect("recorded"), seq, None));
        }
        let event = self.core.sign(client, reply_to, tags, text, self.now);
        // A client reads an event of a resumable stream the general way, never taking it.
        if recorded.is_none() {
            sent_chunks::remember(&event, chunk);
        }
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
        // A receiver in this process takes the message rather than parse it again, if it goes
        // as CEP-22 from relaysim's own sender (`peer::sent_messages`); a message too large to
        // keep is serialised consuming it, as its value would only double what is held (a
        // small one kept for a direct response goes at the end of this call).
        let (text, typed) = if self.config.implementation == crate::peer::RELAYSIM
            && sent_messages::may_fit(&message)
        {
            let text = message.to_json();
            let typed = sent_messages::fits(text.len()).then_some(message);
            (text, typed)
        } else {
            (message.into_json(), None)
        };
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
            self.send_oversized(call, text, typed);
            return;
        }
        let event = self.core.sign(
            &call.client,
            Some(&call.request_event),
            tags.clone(),
            text.clone(),
            self.now,
        );
        let published_size = crate::nip01::verified::json_len(&event);
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
            self.send_oversized(call, text, typed);
        }
    }

    /// Sends `text`, the serialised response to `call`, as a CEP-22 transfer; `typed`, the
    /// message it serialises, is kept for the receiver by the digest its `start` announces.
    pub(super) fn send_oversized(&mut self, call: Call, text: String, typed: Option<Message>) {
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
                        typed,
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
