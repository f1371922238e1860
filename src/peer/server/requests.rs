//! What a request does: the MCP methods, the tool calls and the jobs (progress, delayed answers, stream chunks) they schedule.

use super::*;
use crate::peer::behaviour::AcceptWait;
use crate::segmented::Segmented;

impl ContextVmServer {
    pub(super) fn on_request(
        &mut self,
        client: PublicKey,
        request_event: EventId,
        id: RequestId,
        method: String,
        params: Option<Value>,
        long: Option<Segmented>,
    ) {
        self.events.push_back(ServerEvent::Request {
            client,
            method: method.clone(),
        });
        let mut params = params.unwrap_or(Value::Null);
        // A tool call's long argument goes to the tool in segments; anything else takes it
        // whole.
        let long = match long {
            Some(long) if method != "tools/call" => {
                crate::nip01::json_segmented::put_back(&mut params, long);
                None
            }
            long => long,
        };
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .and_then(|v| match v {
                Value::String(s) => Some(ProgressToken::String(s.clone())),
                Value::Number(n) => n.as_i64().map(ProgressToken::Number),
                _ => None,
            });
        self.next_call += 1;
        let call_id = self.next_call;
        self.calls.insert(
            call_id,
            Call {
                client,
                request_event,
                request_id: id.clone(),
                token: token.clone(),
                stream: None,
            },
        );
        let now = self.now;
        if method == "tools/call" && self.tools.long_running(&params) {
            self.open_resumable(call_id, &id);
        }
        let immediate = match method.as_str() {
            "initialize" => Ok(json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "relaysim-server", "version": env!("CARGO_PKG_VERSION") },
            })),
            "tools/list" => Ok(self.tools.list()),
            stream_msg::RESUME => self.resume(client, &params),
            stream_msg::POLL => StreamRef::from_params(&params)
                .map_err(|e| error(stream_msg::codes::INVALID_PARAMS, e.to_string()))
                .and_then(|r| {
                    self.store
                        .poll(&client, &r, now)
                        .map(|p| p.to_value())
                        .map_err(|e| error(e.code(), e.to_string()))
                }),
            stream_msg::POLL_ALL => {
                let cursor = params.get("cursor").and_then(Value::as_str);
                let (page, next) = self.store.poll_all(&client, cursor, now);
                let mut result = json!({
                    "streams": page.iter().map(|p| p.to_value()).collect::<Vec<_>>(),
                });
                if let Some(c) = next {
                    result["nextCursor"] = c.into();
                }
                Ok(result)
            }
            "tools/call" => match self.tools.call_with_long(params, long) {
                ToolAction::Respond(answer) => {
                    answer.map_err(|(code, message)| error(code, message))
                }
                ToolAction::RespondText { text, meta } => {
                    self.respond_text(call_id, text, meta);
                    return;
                }
                ToolAction::Later {
                    after,
                    progress_every,
                    result,
                } => {
                    if let (Some(every), Some(_)) = (progress_every, &token) {
                        let total = (after.as_micros() / every.as_micros().max(1)) as u64;
                        if total > 0 {
                            self.schedule(now + every, Job::Progress(call_id, 1, total, every));
                        }
                    }
                    self.schedule(now + after, Job::Respond(call_id, Ok(result)));
                    return;
                }
                ToolAction::Stream {
                    chunks,
                    chunk_bytes,
                    interval,
                } => match token {
                    None => Err(error(
                        codes::INVALID_PARAMS,
                        "stream needs a progressToken".into(),
                    )),
                    Some(token) => {
                        let supports = self.clients.get(&client).is_some_and(|c| c.0.open_stream);
                        let wait = match self.config.behaviour.stream_accept {
                            AcceptWait::WhenUnknown => !supports,
                            AcceptWait::Never => false,
                        };
                        let config = WriterConfig {
                            wait_for_accept: wait,
                            ..self.config.writer.clone()
                        };
                        let resumable = self.calls.get(&call_id).and_then(|c| c.stream.clone());
                        let config = match (&resumable, self.config.streams.resume_interval.max) {
                            (Some(_), Some(max)) => WriterConfig {
                                probe_timeout: config.probe_timeout.max(Duration::from_secs(max)),
                                ..config
                            },
                            _ => config,
                        };
                        let writer = self
                            .config
                            .implementation
                            .stream_writer(token.clone(), config);
                        self.streams.insert(
                            (client, token),
                            Stream {
                                call: call_id,
                                writer,
                                written: 0,
                                chunks,
                                chunk_bytes,
                                interval,
                                responded: false,
                                resumable,
                                write_waiting: false,
                                window: Default::default(),
                                window_waiting: false,
                            },
                        );
                        self.schedule(now, Job::WriteChunk(call_id));
                        return;
                    }
                },
            },
            _ => Err(error(
                codes::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            )),
        };
        self.respond(call_id, immediate);
    }

    pub(super) fn run_job(&mut self, job: Job) {
        match job {
            Job::Respond(call, response) => self.respond(call, response),
            Job::Progress(call_id, k, total, every) => {
                let Some(call) = self.calls.get(&call_id) else {
                    return; // answered already
                };
                let Some(token) = call.token.clone() else {
                    return;
                };
                let (client, origin, stream) =
                    (call.client, call.request_event, call.stream.clone());
                let note = Message::Notification {
                    method: "notifications/progress".into(),
                    params: Some(json!({
                        "progressToken": token.to_value(),
                        "progress": k,
                        "total": total,
                    })),
                };
                self.publish_message(
                    &client,
                    Some(&origin),
                    Vec::new(),
                    note.to_json(),
                    stream.as_deref(),
                    None,
                );
                if k < total {
                    let at = self.now + every;
                    self.schedule(at, Job::Progress(call_id, k + 1, total, every));
                }
            }
            Job::WriteChunk(call) => {
                let now = self.now;
                let request = match self.calls.get(&call) {
                    Some(c) => c.request_id.clone(),
                    None => return,
                };
                let core = &self.core;
                let lanes = self.config.behaviour.publish_wait != PublishWait::Immediate;
                let Some((client, stream)) = self
                    .streams
                    .iter_mut()
                    .find(|(_, s)| s.call == call)
                    .map(|((c, _), s)| (c, s))
                else {
                    return;
                };
                if lanes && core.lane_busy(&lane_of(client, stream.writer.token())) {
                    stream.write_waiting = true;
                    return;
                }
                stream.window.expire(now);
                if stream.written < stream.chunks && !stream.window.has_room() {
                    stream.window_waiting = true;
                    return;
                }
                let mut wrote = false;
                if stream.written < stream.chunks {
                    wrote = true;
                    let text = stream_chunk_text(stream.written, stream.chunk_bytes);
                    if let Ok(index) = stream.writer.write(text, now) {
                        stream.written += 1;
                        self.events.push_back(ServerEvent::ChunkWritten {
                            client: *client,
                            token: stream.writer.token().clone(),
                            request: request.clone(),
                            index,
                        });
                    }
                }
                if stream.written == stream.chunks && wrote && lanes {
                    // `close` takes the writer's lock too: it waits for the last chunk's
                    // publish, so it has no progress before then.
                    self.schedule(now, Job::WriteChunk(call));
                } else if stream.written == stream.chunks {
                    let _ = stream.writer.close(now);
                } else if !matches!(stream.writer.state(), WriterState::Failed(_)) {
                    let at = now + stream.interval;
                    self.schedule(at, Job::WriteChunk(call));
                }
            }
        }
    }
}
