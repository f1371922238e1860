//! What each action does: a message reaching a relay or a peer, a reconnection, an outage, a
//! workload call; then what relays and peers have to send, and what clients report.

use super::{Action, Observation, PeerId, SentCopy, SubscriptionStep, Way, World};
use crate::nip01::{ClientMessage, RelayMessage};
use crate::peer::client::{CallId, ClientEvent};
use crate::relay::impair::Ordering;

impl World {
    pub(super) fn run(&mut self, action: Action) {
        let now = self.now;
        if let Some(until) = self.held_by_partition(&action) {
            self.hold(until, action);
            return;
        }
        match action {
            Action::ToRelay {
                relay,
                peer,
                conn,
                message,
                processed: false,
                mut copy,
            } if self.relay_takes_time(relay, &message) => {
                self.order.received(&mut copy);
                let done = self.handled_at(relay, peer, &message);
                self.schedule(
                    done,
                    Action::ToRelay {
                        relay,
                        peer,
                        conn,
                        message,
                        processed: true,
                        copy,
                    },
                );
            }
            Action::ToRelay {
                relay,
                peer,
                conn,
                message,
                processed,
                mut copy,
            } => {
                let live = self.link_live(relay, peer, conn);
                if live {
                    if let ClientMessage::Event(e) = &message {
                        if !processed {
                            self.order.received(&mut copy);
                        }
                        self.order.handled(relay, e.id, copy);
                        for planner in &mut self.planners {
                            planner.relay_received(relay, e);
                        }
                    }
                    self.relays[relay]
                        .relay
                        .handle_client_message(conn, message, now);
                } else {
                    let event = match &message {
                        ClientMessage::Event(e) => Some(e.id),
                        _ => None,
                    };
                    self.observe(Observation::Lost {
                        relay,
                        peer,
                        way: Way::Up,
                        event,
                    });
                }
            }
            Action::ToPeer {
                relay,
                peer,
                conn,
                message,
                replay,
                copy,
            } => {
                let live = self.link_live(relay, peer, conn);
                if !live {
                    let event = match &message {
                        RelayMessage::Event { event, .. } => Some(event.id),
                        _ => None,
                    };
                    self.observe(Observation::Lost {
                        relay,
                        peer,
                        way: Way::Down,
                        event,
                    });
                    return;
                }
                self.observe_incoming(relay, peer, &message, replay, copy);
                let name = self.relays[relay].name.clone();
                self.peer_mut(peer)
                    .handle_relay_message(&name, message, now);
            }
            Action::Wire {
                relay,
                peer,
                message,
            } => self.send_up(relay, peer, message),
            // A hosted program reconnects on its own schedule: the outage is over, and its
            // next attempt is let through.
            Action::Reconnect { relay, peer } if self.hosted_peers.contains(&peer) => {
                self.held_off.remove(&(relay, peer));
            }
            Action::Reconnect { relay, peer } => {
                if !self.links.get(&(relay, peer)).is_some_and(|l| l.connected) {
                    self.connect(relay, peer);
                }
            }
            Action::DropConnection {
                relay,
                peer,
                down_for,
                random,
            } => {
                if self.outage_begins(relay, Some(peer), "connection-drop", down_for) {
                    if self.hosted_peers.contains(&peer) {
                        self.held_off.insert((relay, peer), now + down_for);
                    }
                    self.disconnect(relay, peer, "outage");
                    self.schedule(now + down_for, Action::Reconnect { relay, peer });
                }
                if random {
                    self.schedule_random_drop(relay, peer, now + down_for);
                }
            }
            Action::PartitionStart {
                relay,
                peer,
                duration,
            } => {
                if self.outage_begins(relay, Some(peer), "partition", duration) {
                    if let Some(link) = self.links.get_mut(&(relay, peer)) {
                        link.stalled_until = link.stalled_until.max(now + duration);
                    }
                }
            }
            Action::RelayRestart {
                relay,
                down_for,
                random,
            } if !self.outage_begins(relay, None, "relay-restart", down_for) => {
                self.reschedule_restart(relay, now, down_for, random);
            }
            Action::RelayRestart {
                relay,
                down_for,
                random,
            } => {
                self.relays[relay].relay.restart();
                self.relays[relay].down_until = Some(now + down_for);
                let mut peers: Vec<PeerId> = self
                    .links
                    .keys()
                    .filter(|(r, _)| *r == relay)
                    .map(|(_, p)| *p)
                    .collect();
                // In peer order, whatever the map's.
                peers.sort_unstable();
                for peer in peers {
                    if let Some(link) = self.links.get_mut(&(relay, peer)) {
                        if link.connected {
                            link.connected = false;
                            self.observe(Observation::Disconnected {
                                relay,
                                peer,
                                reason: "relay-restart",
                            });
                            self.tell_hosted_lost(relay, peer);
                        }
                    }
                    self.schedule(now + down_for, Action::Reconnect { relay, peer });
                }
                while self.relays[relay].relay.poll_dropped().is_some() {}
                self.reschedule_restart(relay, now, down_for, random);
            }
            Action::Consume { client, call } => {
                // One chunk, then the next read one interval later, for as long as the
                // stream may still hold chunks.
                let read = self.read_one(client, call);
                let ended = !self.clients[client].1.stream_alive(call);
                if read || !ended {
                    if let Some(every) = self.consume_every.get(&(client, call)).copied() {
                        self.schedule(now + every, Action::Consume { client, call });
                    }
                }
            }
            Action::Call { client, call }
                if self.hosted_peers.contains(&PeerId::Client(client)) =>
            {
                let id = self.hosted_calls;
                self.hosted_calls += 1;
                let called = call.called(client, id);
                let stream = matches!(call.tool, crate::peer::tools::ToolCall::Stream { .. });
                if let crate::peer::tools::ToolCall::Stream { chunk_bytes, .. } = call.tool {
                    self.stream_chunk_bytes.insert((client, id), chunk_bytes);
                }
                let progress = call.progress || stream;
                let (name, arguments) = call.tool.into_arguments();
                self.peer_mut(PeerId::Client(client));
                if let Some(hosted) = self.clients[client].1.hosted() {
                    hosted.call(id, name, arguments, progress, stream, now);
                }
                self.observe(called);
            }
            Action::Call { client, call } => {
                let consume_every = call.consume_every;
                let (id, chunk_bytes, called) =
                    call.start_observed(client, self.client(client), now);
                if let Some(bytes) = chunk_bytes {
                    self.stream_chunk_bytes.insert((client, id), bytes);
                }
                if let Some(every) = consume_every {
                    self.consume_every.insert((client, id), every);
                }
                self.observe(called);
            }
        }
    }

    pub(super) fn observe_incoming(
        &mut self,
        relay: usize,
        peer: PeerId,
        message: &RelayMessage,
        replay: bool,
        copy: SentCopy,
    ) {
        match message {
            RelayMessage::Event { event, .. } => {
                let published = self.order.made_at(&event.id).unwrap_or(self.now);
                let impairments = &self.relays[relay].impairments;
                let datagram = impairments.relay_to_peer.ordering == Ordering::Datagram
                    || impairments.peer_to_relay.ordering == Ordering::Datagram;
                let mut arrival =
                    self.order
                        .delivered(peer, relay, (event.id, copy), replay, datagram);
                if matches!(
                    self.relays[relay].relay.profile().intake,
                    crate::relay::profile::Intake::BatchCommit { .. }
                ) {
                    arrival = arrival.at_batch_writer();
                }
                let latency = self.now.saturating_sub(published);
                self.observe(Observation::Delivered {
                    relay,
                    peer,
                    event: event.id,
                    latency,
                    reordered: arrival.reordered,
                    duplicate: arrival.duplicate,
                    via: arrival.via,
                });
            }
            RelayMessage::Ok {
                id,
                accepted,
                message,
            } => {
                let observation = Observation::Verdict {
                    relay,
                    peer,
                    event: *id,
                    accepted: *accepted,
                    message: message.clone(),
                };
                self.observe(observation);
            }
            RelayMessage::Notice { message } => {
                let observation = Observation::Notice {
                    relay,
                    peer,
                    message: message.clone(),
                };
                self.observe(observation);
            }
            RelayMessage::Auth { challenge } => {
                let observation = Observation::Auth {
                    relay,
                    peer,
                    challenge: challenge.clone(),
                };
                self.observe(observation);
            }
            RelayMessage::Eose { sub } => self.observe(Observation::Subscription {
                relay,
                peer,
                sub: sub.clone(),
                step: SubscriptionStep::StoredSent,
            }),
            RelayMessage::Closed { sub, message } => self.observe(Observation::Subscription {
                relay,
                peer,
                sub: sub.clone(),
                step: SubscriptionStep::Refused {
                    message: message.clone(),
                },
            }),
        }
    }

    /// Moves every message the peers and relays have to send onto the impaired links, and
    /// reports what the clients did.
    pub(super) fn flush(&mut self) {
        loop {
            let mut moved = false;
            // Only touched peers can have output; in peer order, as a scan would serve them.
            let mut cursor = None;
            while let Some(peer) = self.touched.next_transmit(cursor) {
                cursor = Some(peer);
                while let Some((relay_name, message)) = self.peer_unmarked(peer).poll_transmit() {
                    moved = true;
                    let Some(relay) = self.relay_index(&relay_name) else {
                        continue;
                    };
                    self.emit(relay, peer, message);
                }
            }
            for relay in 0..self.relays.len() {
                while let Some((conn, message, replay)) =
                    self.relays[relay].relay.poll_transmit_tagged()
                {
                    moved = true;
                    let Some(&peer) = self.owners.get(&(relay, conn)) else {
                        continue;
                    };
                    self.send_down(relay, peer, conn, message, replay);
                }
                while let Some((conn, event, reason)) = self.relays[relay].relay.poll_withheld() {
                    if let Some(&peer) = self.owners.get(&(relay, conn)) {
                        self.observe(Observation::Withheld {
                            relay,
                            peer,
                            event,
                            reason,
                        });
                    }
                }
                while let Some(conn) = self.relays[relay].relay.poll_dropped() {
                    moved = true;
                    if let Some(&peer) = self.owners.get(&(relay, conn)) {
                        if let Some(link) = self.links.get_mut(&(relay, peer)) {
                            if link.conn == conn && link.connected {
                                link.connected = false;
                                self.observe(Observation::Disconnected {
                                    relay,
                                    peer,
                                    reason: "relay-closed",
                                });
                                self.tell_hosted_lost(relay, peer);
                                let at = self.now + self.reconnect.after_close;
                                self.schedule(at, Action::Reconnect { relay, peer });
                            }
                        }
                    }
                }
            }
            moved |= self.serve_link_requests();
            moved |= self.drain_clients();
            moved |= self.drain_servers();
            self.observe_program_lines();
            if !moved {
                return;
            }
        }
    }

    pub(super) fn drain_clients(&mut self) -> bool {
        let mut moved = false;
        let mut cursor = None;
        while let Some(peer) = self.touched.next_events(cursor, PeerId::Client(0)) {
            cursor = Some(peer);
            let PeerId::Client(client) = peer else {
                continue;
            };
            self.touched.polled(peer);
            while let Some(event) = self.clients[client].1.poll_event() {
                moved = true;
                match &event {
                    ClientEvent::StreamOpened { call } => {
                        match self.consume_every.get(&(client, *call)) {
                            // A slow consumer reads on its own schedule.
                            Some(every) => {
                                let at = self.now + *every;
                                self.schedule(
                                    at,
                                    Action::Consume {
                                        client,
                                        call: *call,
                                    },
                                );
                            }
                            None => {
                                self.open_streams.insert((client, *call));
                            }
                        }
                    }
                    ClientEvent::StreamEnded { call, .. } => {
                        if !self.consume_every.contains_key(&(client, *call)) {
                            self.read_stream(client, *call);
                        }
                        self.open_streams.remove(&(client, *call));
                    }
                    _ => {}
                }
                self.observe(Observation::Client { client, event });
            }
            let open: Vec<CallId> = self
                .open_streams
                .iter()
                .filter(|(c, _)| *c == client)
                .map(|(_, call)| *call)
                .collect();
            for call in open {
                moved |= self.read_stream(client, call);
            }
        }
        moved
    }

    pub(super) fn drain_servers(&mut self) -> bool {
        let mut moved = false;
        let mut cursor = None;
        while let Some(peer) = self.touched.next_events(cursor, PeerId::Server(0)) {
            cursor = Some(peer);
            let PeerId::Server(server) = peer else {
                continue;
            };
            self.touched.polled(peer);
            while let Some(event) = self.servers[server].1.poll_event() {
                moved = true;
                if let crate::peer::server::ServerEvent::StreamStats(stats) = event {
                    self.observe(Observation::StreamStore { server, stats });
                    continue;
                }
                if let crate::peer::server::ServerEvent::UploadFailed {
                    client,
                    token,
                    cause,
                    ..
                } = &event
                {
                    let client = self.client_keys.get(client).copied();
                    let call = client.and_then(|c| Some((c, self.clients[c].1.call_of(token)?)));
                    if let Some((client, call)) = call {
                        let cause = cause.clone();
                        self.observe(Observation::ServerFailed {
                            client,
                            call,
                            cause,
                        });
                    }
                    continue;
                }
                if let crate::peer::server::ServerEvent::ChunkWritten {
                    client,
                    request,
                    index,
                    ..
                } = event
                {
                    let client = self.client_keys.get(&client).copied();
                    // A call's id is its request's JSON-RPC id.
                    let call = request.as_number();
                    if let (Some(client), Some(call)) = (client, call) {
                        self.observe(Observation::ChunkWritten {
                            client,
                            call,
                            index,
                        });
                    }
                }
            }
        }
        moved
    }

    pub(super) fn read_one(&mut self, client: usize, call: CallId) -> bool {
        let Some(chunk) = self.clients[client].1.read_stream(call) else {
            return false;
        };
        let intact = self
            .stream_chunk_bytes
            .get(&(client, call))
            .is_some_and(|b| {
                chunk.data == crate::peer::tools::stream_chunk_text(chunk.chunk_index, *b)
            });
        self.observe(Observation::ChunkRead {
            client,
            call,
            index: chunk.chunk_index,
            bytes: chunk.data.len(),
            intact,
        });
        true
    }

    /// Reads every chunk released so far; true if there was any.
    pub(super) fn read_stream(&mut self, client: usize, call: CallId) -> bool {
        let mut read = false;
        while self.read_one(client, call) {
            read = true;
        }
        read
    }
}
