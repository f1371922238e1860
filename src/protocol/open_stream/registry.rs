//! The CEP-41 registry: every stream a peer is reading, keyed by (writer, progress token), with
//! admission, frames that overtake their `start`, and tombstones for ended streams.

use super::frame::{StreamBody, StreamFrame};
use super::policy::{StreamFailure, StreamPolicy};
use super::session::{FrameVerdict, OpenStreamSession, SessionState, StreamChunk};
use crate::protocol::jsonrpc::ProgressToken;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// What the registry tells the application about its streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryEvent<P> {
    /// A stream was admitted.
    Opened {
        /// The writer.
        peer: P,
        /// The stream's token.
        token: ProgressToken,
    },
    /// A stream closed successfully; its chunks are (or were) readable in order.
    Completed {
        /// The writer.
        peer: P,
        /// The stream's token.
        token: ProgressToken,
    },
    /// A stream failed.
    Failed {
        /// The writer.
        peer: P,
        /// The stream's token.
        token: ProgressToken,
        /// Why.
        failure: StreamFailure,
    },
}

struct Entry {
    session: OpenStreamSession,
    reported: bool,
}

/// All open streams a peer reads.
pub struct OpenStreamRegistry<P> {
    policy: StreamPolicy,
    streams: BTreeMap<(P, ProgressToken), Entry>,
    orphans: VecDeque<(P, StreamFrame, Duration)>,
    tombstones: BTreeMap<(P, ProgressToken), ()>,
    tombstone_order: VecDeque<(P, ProgressToken)>,
    outbox: VecDeque<(P, StreamFrame)>,
    events: VecDeque<RegistryEvent<P>>,
    orphans_dropped: u64,
}

impl<P: Ord + Clone> OpenStreamRegistry<P> {
    /// A registry with the given policy.
    pub fn new(policy: StreamPolicy) -> Self {
        OpenStreamRegistry {
            policy,
            streams: BTreeMap::new(),
            orphans: VecDeque::new(),
            tombstones: BTreeMap::new(),
            tombstone_order: VecDeque::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            orphans_dropped: 0,
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> &StreamPolicy {
        &self.policy
    }

    /// Whether new sessions answer `start` with `accept` (see
    /// [`crate::protocol::oversized::OversizedReceiver::set_send_accept`]).
    pub fn set_send_accept(&mut self, send_accept: bool) {
        self.policy.send_accept = send_accept;
    }

    /// Streams that have not ended.
    pub fn active_streams(&self) -> usize {
        self.streams
            .values()
            .filter(|e| !e.session.is_terminal())
            .count()
    }

    /// Frames dropped while waiting for their `start`.
    pub fn orphans_dropped(&self) -> u64 {
        self.orphans_dropped
    }

    /// A stream's session, while the registry holds it.
    pub fn session(&self, peer: &P, token: &ProgressToken) -> Option<&OpenStreamSession> {
        self.streams
            .get(&(peer.clone(), token.clone()))
            .map(|e| &e.session)
    }

    /// Takes one frame from `peer` at `now`.
    pub fn handle_frame(&mut self, peer: &P, frame: StreamFrame, now: Duration) -> FrameVerdict {
        if !frame.in_range() {
            return FrameVerdict::Ignored("number out of range");
        }
        let key = (peer.clone(), frame.token.clone());
        if self.tombstones.contains_key(&key) {
            return FrameVerdict::Ignored("stream has ended");
        }
        if let Some(entry) = self.streams.get_mut(&key) {
            let verdict = entry.session.handle_frame(frame, now);
            self.settle(&key);
            return verdict;
        }
        if !matches!(frame.body, StreamBody::Start { .. }) {
            return self.hold_orphan(peer, frame, now);
        }
        if self.active_streams() >= self.policy.max_concurrent_streams {
            let failure = StreamFailure::TooManyStreams;
            self.outbox.push_back((
                peer.clone(),
                StreamFrame {
                    token: frame.token.clone(),
                    progress: frame.progress + 1,
                    message: None,
                    body: StreamBody::Abort {
                        reason: Some(failure.to_string()),
                    },
                },
            ));
            let (peer, token) = key.clone();
            self.events.push_back(RegistryEvent::Failed {
                peer,
                token,
                failure,
            });
            self.bury(key);
            return FrameVerdict::Accepted;
        }
        let session = OpenStreamSession::new(frame, self.policy.clone(), now);
        self.streams.insert(
            key.clone(),
            Entry {
                session,
                reported: false,
            },
        );
        self.events.push_back(RegistryEvent::Opened {
            peer: key.0.clone(),
            token: key.1.clone(),
        });
        // Frames that overtook the start go in now, in progress order.
        let mut early = Vec::new();
        self.orphans.retain(|(p, f, _)| {
            let mine = *p == key.0 && f.token == key.1;
            if mine {
                early.push(f.clone());
            }
            !mine
        });
        early.sort_by_key(|f| f.progress);
        for f in early {
            if let Some(entry) = self.streams.get_mut(&key) {
                entry.session.handle_frame(f, now);
            }
        }
        self.settle(&key);
        FrameVerdict::Accepted
    }

    fn hold_orphan(&mut self, peer: &P, frame: StreamFrame, now: Duration) -> FrameVerdict {
        if self.policy.max_orphan_frames == 0 {
            self.orphans_dropped += 1;
            return FrameVerdict::Ignored("no stream with this token");
        }
        if self.orphans.len() >= self.policy.max_orphan_frames {
            self.orphans.pop_front();
            self.orphans_dropped += 1;
        }
        self.orphans
            .push_back((peer.clone(), frame, now + self.policy.orphan_ttl));
        FrameVerdict::Ignored("held until its start arrives")
    }

    /// Reports a stream's end once, and forgets it once it is fully read and has nothing to send.
    fn settle(&mut self, key: &(P, ProgressToken)) {
        let Some(entry) = self.streams.get_mut(key) else {
            return;
        };
        if entry.session.is_terminal() && !entry.reported {
            entry.reported = true;
            let (peer, token) = key.clone();
            self.events.push_back(match entry.session.state() {
                SessionState::Failed(failure) => RegistryEvent::Failed {
                    peer,
                    token,
                    failure: failure.clone(),
                },
                _ => RegistryEvent::Completed { peer, token },
            });
        }
        // Frames the session still has to send (its abort) move to the registry's outbox.
        while let Some(frame) = entry.session.poll_transmit() {
            self.outbox.push_back((key.0.clone(), frame));
        }
        if entry.session.is_finished() {
            self.streams.remove(key);
            self.bury(key.clone());
        }
    }

    fn bury(&mut self, key: (P, ProgressToken)) {
        self.orphans
            .retain(|(p, f, _)| !(*p == key.0 && f.token == key.1));
        if self.tombstones.insert(key.clone(), ()).is_none() {
            self.tombstone_order.push_back(key);
        }
        while self.tombstone_order.len() > self.policy.max_tombstones {
            if let Some(old) = self.tombstone_order.pop_front() {
                self.tombstones.remove(&old);
            }
        }
    }

    /// The next chunk of a stream, in order.
    pub fn read(&mut self, peer: &P, token: &ProgressToken) -> Option<StreamChunk> {
        let key = (peer.clone(), token.clone());
        let chunk = self.streams.get_mut(&key)?.session.read();
        self.settle(&key);
        chunk
    }

    /// Aborts a stream from the application side.
    pub fn abort(&mut self, peer: &P, token: &ProgressToken, reason: &str) {
        let key = (peer.clone(), token.clone());
        if let Some(entry) = self.streams.get_mut(&key) {
            entry.session.abort(reason);
            self.settle(&key);
        }
    }

    /// Sends a stream's outstanding keepalive probe again (see [`OpenStreamSession::reprobe`]).
    pub fn reprobe(&mut self, peer: &P, token: &ProgressToken) {
        if let Some(entry) = self.streams.get_mut(&(peer.clone(), token.clone())) {
            entry.session.reprobe();
        }
    }

    /// The next frame to send to a writer.
    pub fn poll_transmit(&mut self) -> Option<(P, StreamFrame)> {
        if let Some(out) = self.outbox.pop_front() {
            return Some(out);
        }
        for ((peer, _), entry) in self.streams.iter_mut() {
            if let Some(frame) = entry.session.poll_transmit() {
                return Some((peer.clone(), frame));
            }
        }
        None
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<RegistryEvent<P>> {
        self.events.pop_front()
    }

    /// When [`OpenStreamRegistry::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let sessions = self
            .streams
            .values()
            .filter_map(|e| e.session.poll_timeout());
        let orphans = self.orphans.iter().map(|(_, _, t)| *t);
        sessions.chain(orphans).min()
    }

    /// Runs every stream's timers and expires orphans.
    pub fn handle_timeout(&mut self, now: Duration) {
        let keys: Vec<_> = self.streams.keys().cloned().collect();
        for key in keys {
            if let Some(entry) = self.streams.get_mut(&key) {
                entry.session.handle_timeout(now);
            }
            self.settle(&key);
        }
        let before = self.orphans.len();
        self.orphans.retain(|(_, _, expiry)| *expiry > now);
        self.orphans_dropped += (before - self.orphans.len()) as u64;
    }
}
