//! Peers whose transport is a program of the user's (the real TypeScript SDK, say), run by a
//! host in virtual time and driven by the des world like any other peer.
//!
//! The world knows a host only through [`ProgramHost`]: a world of peers is started, then the
//! host is stepped — "time is now T; here are the inputs" — and answers with what the programs
//! did and when their next timer is due. It is the same call/poll shape as every other peer,
//! so the world stays free of I/O: the process that runs the programs (`node_host`) is handed
//! in by the driver through [`ProgramHosts`]. The line protocol the host speaks is
//! `interop/node-host/PROTOCOL.md`.
//!
//! A program opens its own WebSockets and reconnects on its own schedule: a hosted peer asks
//! the world for a connection ([`LinkRequest`]), which the world opens when the relay can be
//! reached (and refuses while it is down or the peer's connection is held off by an outage),
//! and every frame it sends or receives is the NIP-01 text that crosses the relay.

use crate::nip01::wire;
use crate::nip01::{ClientMessage, RelayMessage, RelayName};
use crate::peer::client::{CallFailure, CallId, ClientEvent};
use crate::protocol::open_stream::StreamChunk;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

/// An input to a host, for one of its peers (by index in the world's list).
#[derive(Debug, Clone, PartialEq)]
pub enum HostInput {
    /// The connection the peer asked for is open.
    Open {
        /// The peer.
        peer: usize,
        /// Its socket.
        socket: u64,
    },
    /// A relay's text frame.
    Message {
        /// The peer.
        peer: usize,
        /// Its socket.
        socket: u64,
        /// The NIP-01 relay message.
        text: String,
    },
    /// The network or the relay closed the connection (or refused it).
    Close {
        /// The peer.
        peer: usize,
        /// Its socket.
        socket: u64,
    },
    /// A tool call for a client peer.
    Call {
        /// The peer.
        peer: usize,
        /// The world's id of the call.
        call: CallId,
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: Value,
        /// Attach a progress token.
        progress: bool,
        /// A CEP-41 streaming call.
        stream: bool,
    },
    /// Start a peer that waits to be started.
    Start {
        /// The peer.
        peer: usize,
    },
}

/// What a host's programs did.
#[derive(Debug, Clone, PartialEq)]
pub enum HostOutput {
    /// A program opened a WebSocket to `url`.
    Connect {
        /// The peer.
        peer: usize,
        /// Its socket.
        socket: u64,
        /// The URL.
        url: String,
    },
    /// A program sent a text frame.
    Send {
        /// The peer.
        peer: usize,
        /// Its socket.
        socket: u64,
        /// The NIP-01 client message.
        text: String,
    },
    /// A program closed a socket.
    Close {
        /// The peer.
        peer: usize,
        /// Its socket.
        socket: u64,
    },
    /// A peer started (`Ok`), or failed to (its program's error text).
    Ready {
        /// The peer.
        peer: usize,
        /// Whether it started, or why not.
        result: Result<(), String>,
    },
    /// A call ended: its result and, for a streaming call, the stream's chunks; or the
    /// program's own error text.
    Outcome {
        /// The peer.
        peer: usize,
        /// The world's id of the call.
        call: CallId,
        /// The result and chunks, or the error text.
        result: Result<(Value, Option<Vec<String>>), String>,
    },
    /// A line a program logged through `env.log` (the host reports only those).
    Log {
        /// The peer.
        peer: usize,
        /// The line.
        text: String,
    },
    /// Something the host found wrong (a program touched the real clock, threw, ran away):
    /// the run cannot be trusted.
    Error {
        /// The peer to blame, if any.
        peer: Option<usize>,
        /// What.
        error: String,
    },
}

/// What a host answers to a start or a step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostReply {
    /// What happened, in order.
    pub outputs: Vec<HostOutput>,
    /// When the world's next program timer is due.
    pub next_timer: Option<Duration>,
}

/// How a hosted peer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostedStart {
    /// At the start of the world.
    AtOnce,
    /// When the world says (a client, once the servers are ready).
    WhenAsked,
}

/// One peer of a hosted world.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedPeerSpec {
    /// `server` or `client`: the program's function that starts it.
    pub role: &'static str,
    /// The peer's name.
    pub name: String,
    /// Its secret key (hex), from the world's seed and its name.
    pub secret_key: String,
    /// For a client: the server's public key (hex).
    pub server_pubkey: Option<String>,
    /// The URLs of its relays.
    pub relays: Vec<String>,
    /// Options for the program, as they are (`env.options`).
    pub options: Value,
    /// When it starts.
    pub start: HostedStart,
}

/// A world of hosted peers, as a host starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedWorld {
    /// The run's seed (every peer's randomness derives from it and the peer's name).
    pub seed: u64,
    /// Unix milliseconds at virtual time zero.
    pub epoch_ms: u64,
    /// The peers, in the order inputs and outputs name them.
    pub peers: Vec<HostedPeerSpec>,
}

/// A host of programs for one world at a time.
pub trait ProgramHost {
    /// Starts `world` (dropping any earlier one) at virtual time zero.
    fn start(&mut self, world: &HostedWorld) -> Result<HostReply, String>;
    /// Fires the timers due at or before `now`, applies `inputs` in order, and answers.
    fn step(&mut self, now: Duration, inputs: Vec<HostInput>) -> Result<HostReply, String>;
}

/// Where the worlds of a run get their hosts (the driver's processes).
pub trait ProgramHosts: Send + Sync + std::fmt::Debug {
    /// A host running `program` (a shipped program's name, or a path relative to `base`),
    /// ready for a world.
    fn host(&self, program: &str, base: &Path) -> Result<Box<dyn ProgramHost>, String>;
}

/// The URL a hosted peer is given for the world's relay number `relay`.
pub fn relay_url(relay: usize) -> String {
    format!("ws://r{relay}.relaysim.invalid/")
}

/// Program lines (`env.log`) a world keeps per run, for its trace, its report and the
/// explanations of failed calls; lines past it are counted.
pub const MAX_LINES: usize = 4096;

/// A connection a hosted peer's program asks for, or gives up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkRequest {
    /// Open a connection to the relay.
    Open(RelayName),
    /// Close the connection to the relay.
    Close(RelayName),
}

/// What one hosted peer has been given by the host and not yet taken by the world.
#[derive(Debug, Default)]
struct Queued {
    links: VecDeque<LinkRequest>,
    sends: VecDeque<(RelayName, ClientMessage)>,
    events: VecDeque<ClientEvent>,
    /// Sockets the program opened, by relay name, and the relay of each socket.
    socket_of: BTreeMap<RelayName, u64>,
    relay_of: BTreeMap<u64, RelayName>,
    /// Stream chunks of finished streaming calls, not yet read.
    chunks: BTreeMap<CallId, VecDeque<StreamChunk>>,
    ready: Option<Result<(), String>>,
}

/// The host of a world's hosted peers, shared by them: a step for one peer fires every peer's
/// due timers, so outputs for any of them may come back.
pub struct SharedHost {
    host: Option<Box<dyn ProgramHost>>,
    /// Why the host can no longer be used, once it failed.
    failed: Option<String>,
    /// Errors the host reported, for the run's report.
    errors: Vec<String>,
    /// Exceptions and rejections the programs left unhandled: their own behaviour (the SDK
    /// throws from an event handler), counted, not a fault of the run.
    unhandled: u64,
    /// What the programs logged and the world has not yet taken: when, which peer (its
    /// index in the host's world), the line.
    fresh_lines: Vec<(Duration, usize, String)>,
    /// Lines logged so far, taken or not; the first [`MAX_LINES`] are kept.
    lines_logged: usize,
    /// Lines logged past [`MAX_LINES`].
    lines_not_kept: u64,
    now: Duration,
    next_timer: Option<Duration>,
    peers: Vec<Queued>,
    /// The relay names of each relay URL the peers were given.
    relay_names: BTreeMap<String, RelayName>,
    /// Peers that start when asked and have not been.
    waiting: Vec<usize>,
    specs: Vec<HostedPeerSpec>,
}

impl std::fmt::Debug for SharedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedHost")
            .field("failed", &self.failed)
            .field("now", &self.now)
            .field("next_timer", &self.next_timer)
            .finish()
    }
}

impl SharedHost {
    /// A host for a world's hosted peers, before any is added.
    pub fn new() -> Rc<RefCell<SharedHost>> {
        Rc::new(RefCell::new(SharedHost {
            host: None,
            failed: None,
            errors: Vec::new(),
            unhandled: 0,
            fresh_lines: Vec::new(),
            lines_logged: 0,
            lines_not_kept: 0,
            now: Duration::ZERO,
            next_timer: None,
            peers: Vec::new(),
            relay_names: BTreeMap::new(),
            waiting: Vec::new(),
            specs: Vec::new(),
        }))
    }

    /// Adds a peer; returns its index in the host's world.
    pub fn add_peer(&mut self, spec: HostedPeerSpec) -> usize {
        self.peers.push(Queued::default());
        if spec.start == HostedStart::WhenAsked {
            self.waiting.push(self.specs.len());
        }
        self.specs.push(spec);
        self.specs.len() - 1
    }

    /// Starts the world of the peers added so far on `host` (or records why there is no
    /// host): `relay_names` maps each relay URL given to the peers to the relay's name.
    pub fn start(
        &mut self,
        host: Result<Box<dyn ProgramHost>, String>,
        seed: u64,
        epoch_ms: u64,
        relay_names: BTreeMap<String, RelayName>,
    ) {
        self.relay_names = relay_names;
        let world = HostedWorld {
            seed,
            epoch_ms,
            peers: self.specs.clone(),
        };
        match host {
            Ok(mut host) => {
                let reply = host.start(&world);
                self.host = Some(host);
                self.take(reply);
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            self.errors.push(why.clone());
            self.failed = Some(why);
        }
        self.host = None;
        self.next_timer = None;
    }

    /// Steps the host at `now` with `inputs`.
    fn step(&mut self, now: Duration, inputs: Vec<HostInput>) {
        self.now = self.now.max(now);
        let Some(host) = self.host.as_mut() else {
            return;
        };
        let reply = host.step(self.now, inputs);
        self.take(reply);
    }

    /// Sorts a reply's outputs into the peers' queues.
    fn take(&mut self, reply: Result<HostReply, String>) {
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => return self.fail(format!("host: {e}")),
        };
        self.next_timer = reply.next_timer;
        for output in reply.outputs {
            self.sort(output);
        }
        // Clients that wait start once every peer that starts at once is ready.
        let servers_ready = (0..self.peers.len())
            .filter(|i| !self.waiting.contains(i))
            .all(|i| self.peers[i].ready.is_some());
        if servers_ready && !self.waiting.is_empty() && self.host.is_some() {
            let starts = std::mem::take(&mut self.waiting)
                .into_iter()
                .map(|peer| HostInput::Start { peer })
                .collect();
            let now = self.now;
            self.step(now, starts);
        }
    }

    fn sort(&mut self, output: HostOutput) {
        match output {
            HostOutput::Connect { peer, socket, url } => {
                let Some(relay) = self.relay_names.get(&url).cloned() else {
                    self.errors.push(format!(
                        "peer {peer} connected to {url}, not a relay of the world"
                    ));
                    return;
                };
                let q = &mut self.peers[peer];
                q.socket_of.insert(relay.clone(), socket);
                q.relay_of.insert(socket, relay.clone());
                q.links.push_back(LinkRequest::Open(relay));
            }
            HostOutput::Send { peer, socket, text } => {
                let q = &mut self.peers[peer];
                let Some(relay) = q.relay_of.get(&socket).cloned() else {
                    return;
                };
                // A frame the relay model does not take (AUTH, COUNT, malformed) goes nowhere,
                // as a relay would ignore or refuse it.
                if let Some(message) = wire::to_model(&text) {
                    q.sends.push_back((relay, message));
                }
            }
            HostOutput::Close { peer, socket } => {
                let q = &mut self.peers[peer];
                if let Some(relay) = q.relay_of.remove(&socket) {
                    if q.socket_of.get(&relay) == Some(&socket) {
                        q.socket_of.remove(&relay);
                        q.links.push_back(LinkRequest::Close(relay));
                    }
                }
            }
            HostOutput::Ready { peer, result } => {
                self.peers[peer].ready = Some(result);
            }
            HostOutput::Outcome { peer, call, result } => {
                let q = &mut self.peers[peer];
                match result {
                    Ok((value, chunks)) => {
                        if let Some(chunks) = chunks {
                            q.events.push_back(ClientEvent::StreamOpened { call });
                            q.chunks.insert(
                                call,
                                chunks
                                    .into_iter()
                                    .enumerate()
                                    .map(|(i, data)| StreamChunk {
                                        chunk_index: i as u64,
                                        data,
                                    })
                                    .collect(),
                            );
                            q.events.push_back(ClientEvent::StreamEnded {
                                call,
                                outcome: Ok(()),
                            });
                        }
                        q.events.push_back(ClientEvent::Response {
                            call,
                            response: Ok(value),
                        });
                    }
                    Err(text) => q.events.push_back(ClientEvent::Failed {
                        call,
                        failure: CallFailure::Program(text),
                    }),
                }
            }
            HostOutput::Log { peer, text } => {
                if self.lines_logged < MAX_LINES {
                    self.lines_logged += 1;
                    self.fresh_lines
                        .push((self.now, peer, super::program_lines::cut_line(text)));
                } else {
                    self.lines_not_kept += 1;
                }
            }
            HostOutput::Error { error, .. }
                if error.starts_with("unhandled rejection:")
                    || error.starts_with("uncaught exception:") =>
            {
                self.unhandled += 1;
            }
            HostOutput::Error { peer, error } => {
                let who = peer.map_or(String::new(), |p| format!("peer {p}: "));
                self.errors.push(format!("{who}{error}"));
            }
        }
    }

    /// What the host found wrong during the run (empty for a run that can be trusted).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// What the programs logged since the last call: when, which peer (its index in the
    /// host's world, the order peers were added in), the line.
    pub fn take_lines(&mut self) -> Vec<(Duration, usize, String)> {
        std::mem::take(&mut self.fresh_lines)
    }

    /// Lines the programs logged past the first [`MAX_LINES`], not kept.
    pub fn lines_not_kept(&self) -> u64 {
        self.lines_not_kept
    }

    /// Exceptions and rejections the programs left unhandled.
    pub fn unhandled(&self) -> u64 {
        self.unhandled
    }
}

/// One hosted peer: the world's handle on it, sharing the host with the world's other hosted
/// peers.
#[derive(Debug)]
pub struct HostedPeer {
    index: usize,
    public_key: nostr::prelude::PublicKey,
    shared: Rc<RefCell<SharedHost>>,
    /// Calls the world made, not yet ended.
    open_calls: BTreeMap<CallId, ()>,
}

impl HostedPeer {
    /// Peer number `index` of the world `shared` hosts, whose key is `public_key`.
    pub fn new(
        index: usize,
        public_key: nostr::prelude::PublicKey,
        shared: Rc<RefCell<SharedHost>>,
    ) -> Self {
        HostedPeer {
            index,
            public_key,
            shared,
            open_calls: BTreeMap::new(),
        }
    }

    /// Its public key.
    pub fn public_key(&self) -> nostr::prelude::PublicKey {
        self.public_key
    }

    /// The next connection the program asks for or gives up.
    pub fn poll_link(&mut self) -> Option<LinkRequest> {
        self.shared.borrow_mut().peers[self.index].links.pop_front()
    }

    /// The world refused the connection to `relay` (down, or held off): the program sees its
    /// socket close.
    pub fn refused(&mut self, relay: &str, now: Duration) {
        self.lost(relay, now);
    }

    /// The connection to `relay` was lost.
    pub fn lost(&mut self, relay: &str, now: Duration) {
        let mut shared = self.shared.borrow_mut();
        let q = &mut shared.peers[self.index];
        let Some(socket) = q.socket_of.remove(relay) else {
            return;
        };
        q.relay_of.remove(&socket);
        let peer = self.index;
        shared.step(now, vec![HostInput::Close { peer, socket }]);
    }

    /// Makes a tool call, as a client.
    pub fn call(
        &mut self,
        call: CallId,
        name: &str,
        arguments: Value,
        progress: bool,
        stream: bool,
        now: Duration,
    ) {
        self.open_calls.insert(call, ());
        let mut shared = self.shared.borrow_mut();
        if let Some(why) = shared.failed.clone() {
            shared.peers[self.index]
                .events
                .push_back(ClientEvent::Failed {
                    call,
                    failure: CallFailure::Program(why),
                });
            return;
        }
        let input = HostInput::Call {
            peer: self.index,
            call,
            name: name.to_owned(),
            arguments,
            progress,
            stream,
        };
        shared.step(now, vec![input]);
    }

    /// The next event of a client's calls.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        let event = self.shared.borrow_mut().peers[self.index]
            .events
            .pop_front()?;
        if let ClientEvent::Response { call, .. } | ClientEvent::Failed { call, .. } = &event {
            self.open_calls.remove(call);
        }
        Some(event)
    }

    /// The next chunk of a streaming call, once it has ended.
    pub fn read_stream(&mut self, call: CallId) -> Option<StreamChunk> {
        let mut shared = self.shared.borrow_mut();
        let chunks = shared.peers[self.index].chunks.get_mut(&call)?;
        let chunk = chunks.pop_front();
        if chunks.is_empty() {
            shared.peers[self.index].chunks.remove(&call);
        }
        chunk
    }

    /// Whether a streaming call may still have chunks to read.
    pub fn stream_alive(&self, call: CallId) -> bool {
        self.shared.borrow().peers[self.index]
            .chunks
            .contains_key(&call)
            || self.open_calls.contains_key(&call)
    }
}

impl crate::peer::Peer for HostedPeer {
    fn connected(&mut self, relay: &str, now: Duration) {
        let mut shared = self.shared.borrow_mut();
        let Some(&socket) = shared.peers[self.index].socket_of.get(relay) else {
            return;
        };
        let peer = self.index;
        shared.step(now, vec![HostInput::Open { peer, socket }]);
    }

    fn handle_relay_message(&mut self, relay: &str, message: RelayMessage, now: Duration) {
        let mut shared = self.shared.borrow_mut();
        let Some(&socket) = shared.peers[self.index].socket_of.get(relay) else {
            return;
        };
        let peer = self.index;
        let text = wire::to_wire(&message);
        shared.step(now, vec![HostInput::Message { peer, socket, text }]);
    }

    fn poll_transmit(&mut self) -> Option<(RelayName, ClientMessage)> {
        self.shared.borrow_mut().peers[self.index].sends.pop_front()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        let shared = self.shared.borrow();
        let q = &shared.peers[self.index];
        // Output waiting to be taken is due now.
        if !q.links.is_empty() || !q.sends.is_empty() || !q.events.is_empty() {
            return Some(shared.now);
        }
        shared.next_timer
    }

    fn handle_timeout(&mut self, now: Duration) {
        let mut shared = self.shared.borrow_mut();
        if shared.next_timer.is_some_and(|t| t <= now) {
            shared.step(now, Vec::new());
        }
    }

    fn set_epoch_secs(&mut self, _secs: u64) {}
}
