//! The server's pump: after every input, publish what its engines have to send (uploads'
//! accepts, CEP-22 response frames within their send windows, CEP-41 stream frames), then the
//! responses of calls that ended.

use super::{codes, error, lane_of, ContextVmServer, Job, ServerEvent, MIN_BUDGET};
use crate::peer::behaviour::PublishWait;
use crate::peer::core::PublishOutcome;
use crate::peer::tools::text_result;
use crate::protocol::jsonrpc::{ErrorObject, Message, ProgressToken};
use crate::protocol::open_stream::{StreamBody, WriterState};
use crate::protocol::oversized::ReceiverEvent;
use nostr::prelude::{EventId, PublicKey};
use serde_json::Value;

/// Whose window a frame published counts against.
enum Windowed {
    Transfer((PublicKey, ProgressToken)),
    Stream((PublicKey, ProgressToken)),
}

impl ContextVmServer {
    /// Publishes what the engines have to send and finishes streams that ended.
    pub(super) fn pump(&mut self) {
        let now = self.now;
        while let Some((id, outcome)) = self.core.poll_publish_outcome() {
            for o in self.outgoing.values_mut() {
                o.window.answered(&id);
            }
            for s in self.streams.values_mut() {
                s.window.answered(&id);
            }
            let Some(direct) = self.direct.remove(&id) else {
                continue;
            };
            if outcome == PublishOutcome::SizeRejected {
                // The relays' limit is below this event's size, and we do not know by how
                // much: retry (and from now on send) with half of it.
                self.budget = self.budget.min(direct.published_size / 2).max(MIN_BUDGET);
                self.send_oversized(direct.call, direct.text.into());
            }
        }
        // Oversized requests that completed are requests like any other.
        while let Some(event) = self.uploads.poll_event() {
            match event {
                ReceiverEvent::Completed {
                    peer,
                    token,
                    parsed,
                    long,
                    ..
                } => {
                    let origin = self.upload_origin.remove(&(peer, token));
                    match (parsed.map(|m| *m), origin) {
                        (Some(Message::Request { id, method, params }), Some(origin)) => {
                            self.on_request(peer, origin, id, method, params, long)
                        }
                        _ => self.malformed += 1,
                    }
                }
                ReceiverEvent::Failed {
                    peer,
                    token,
                    failure,
                } => {
                    self.upload_origin.remove(&(peer, token.clone()));
                    let family = format!("upload-{}", failure.cause());
                    let cause = match failure.detail() {
                        Some(words) => format!("{family}: {words}"),
                        None => family,
                    };
                    self.events.push_back(ServerEvent::UploadFailed {
                        client: peer,
                        token,
                        cause,
                    });
                }
                ReceiverEvent::Started { .. } => {}
            }
        }
        // Who, in reply to what, the text (with the chunk it is), its resumable stream, and its
        // lane (frames of one transfer or stream wait for each other when the behaviour says so).
        type Out = (
            PublicKey,
            Option<EventId>,
            String,
            Option<String>,
            Option<String>,
        );
        let mut out: Vec<Out> = Vec::new();
        while let Some((client, frame)) = self.uploads.poll_transmit() {
            let origin = self
                .upload_origin
                .get(&(client, frame.token.clone()))
                .copied();
            out.push((client, origin, frame.to_json(), None, None));
        }
        let mut transfers_done: Vec<String> = Vec::new();
        // Without lanes (relaysim's peers) no frame needs one: none is named.
        let lanes = self.config.behaviour.publish_wait != PublishWait::Immediate;
        // A transfer's frames are made only while its send window has room (see
        // `send_window`), and a stream's chunks are written only while its window has; each
        // frame made is noted, with its transfer or stream, to count once published.
        let mut windowed: Vec<(usize, Windowed)> = Vec::new();
        for (key, o) in self.outgoing.iter_mut() {
            o.window.expire(now);
            let (mut room, mut frames) = (o.window.room(), o.window.frames_room());
            while room > 0 && frames > 0 {
                let Some(frame) = o.sender.poll_transmit(now) else {
                    break;
                };
                let lane = lanes.then(|| lane_of(&o.client, &frame.token));
                let text = frame.to_json();
                room = room.saturating_sub(text.len());
                frames -= 1;
                windowed.push((out.len(), Windowed::Transfer(key.clone())));
                out.push((o.client, Some(o.reply_to), text, o.resumable.clone(), lane));
            }
            if o.sender.is_done() {
                transfers_done.extend(o.resumable.clone());
            }
        }
        self.outgoing.retain(|_, o| !o.sender.is_done());
        let mut finished: Vec<(u64, Result<Value, ErrorObject>)> = Vec::new();
        let ping_bypass = self.config.behaviour.ping_bypass;
        let e_tags = self.config.behaviour.writer_e_tags;
        for (key, stream) in self.streams.iter_mut() {
            let client = &key.0;
            stream.window.expire(now);
            let reply_to = self
                .calls
                .get(&stream.call)
                .map(|c| c.request_event)
                .filter(|_| e_tags);
            while let Some(frame) = stream.writer.poll_transmit(now) {
                let bypass = ping_bypass && matches!(frame.body, StreamBody::Ping { .. });
                let lane = (lanes && !bypass).then(|| lane_of(client, &frame.token));
                windowed.push((out.len(), Windowed::Stream(key.clone())));
                out.push((
                    *client,
                    reply_to,
                    frame.to_json(),
                    stream.resumable.clone(),
                    lane,
                ));
            }
            if stream.responded {
                continue;
            }
            match stream.writer.state() {
                WriterState::Closed => {
                    stream.responded = true;
                    let text = format!("streamed {} chunks", stream.written);
                    finished.push((stream.call, Ok(text_result(&text))));
                }
                WriterState::Failed(failure) => {
                    stream.responded = true;
                    finished.push((
                        stream.call,
                        Err(error(
                            codes::INTERNAL_ERROR,
                            format!("stream aborted: {failure}"),
                        )),
                    ));
                }
                _ => {}
            }
        }
        let mut windowed = windowed.into_iter().peekable();
        for (n, (client, reply_to, text, stream, lane)) in out.into_iter().enumerate() {
            let bytes = text.len();
            let id = self.publish_message(
                &client,
                reply_to.as_ref(),
                Vec::new(),
                text,
                stream.as_deref(),
                lane.as_deref(),
            );
            if let Some((_, key)) = windowed.next_if(|(at, _)| *at == n) {
                // A finished transfer's or stream's window went with it: nothing waits on it
                // any more.
                let window = match key {
                    Windowed::Transfer(key) => self.outgoing.get_mut(&key).map(|o| &mut o.window),
                    Windowed::Stream(key) => self.streams.get_mut(&key).map(|s| &mut s.window),
                };
                if let Some(window) = window {
                    window.sent(id, bytes, now);
                }
            }
        }
        // A CEP-22 response's stream ends after its last frame.
        for stream in transfers_done {
            self.end_resumable(&stream);
        }
        // The final response goes out after the close (or abort) frame just published.
        for (call, response) in finished {
            self.respond(call, response);
        }
        let stats = self.store.stats();
        if stats != self.reported_stats {
            // The store frees streams only as it counts them (acknowledged or abandoned): then
            // their origins are needed no more.
            let store = &self.store;
            self.stream_origin.retain(|id, _| store.holds(id));
            self.reported_stats = stats;
            self.events.push_back(ServerEvent::StreamStats(stats));
        }
        self.streams
            .retain(|_, s| !(s.responded && s.writer.is_done()));
        // Writes that waited for their lane go on once it is free: an SDK writer's `write` holds
        // its lock until the frame before it was published.
        let core = &self.core;
        // So do writes that waited for room in the stream's window.
        let free: Vec<u64> = self
            .streams
            .iter_mut()
            .filter(|((client, token), s)| {
                (s.write_waiting && !core.lane_busy(&lane_of(client, token)))
                    || (s.window_waiting && s.window.has_room())
            })
            .map(|(_, s)| {
                s.write_waiting = false;
                s.window_waiting = false;
                s.call
            })
            .collect();
        for call in free {
            self.schedule(now, Job::WriteChunk(call));
        }
    }
}
