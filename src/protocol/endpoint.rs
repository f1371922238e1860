//! The endpoint traits: what a peer needs from a CEP-22 or CEP-41 engine, so the engines on
//! either side of a scenario can be relaysim's or another implementation's (see `adapter`),
//! in any pairing. relaysim's engines implement them here by delegation.
//!
//! The currency is relaysim's frame types ([`TransferFrame`], [`StreamFrame`]) and virtual time
//! (`now: Duration` since the start of the run); an adapter converts at the boundary.

use super::envelope::Envelope;
use super::jsonrpc::ProgressToken;
use super::open_stream::{
    OpenStreamRegistry, OpenStreamWriter, RegistryEvent, StreamChunk, StreamFrame, StreamPolicy,
    WriteError, WriterConfig, WriterState,
};
use super::oversized::{
    ChunkingError, OversizedReceiver, OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig,
    SenderState, TransferFrame,
};
use crate::segmented::Segmented;
use std::time::Duration;

/// Builds one implementation's CEP-22 and CEP-41 engines for peers keyed by `P`, so a peer
/// takes its engines without naming them. relaysim's are [`OwnEngines`]; other implementations
/// live in `adapter` and are registered by name at the composition root (`implementations`).
pub trait EngineFactory<P>: Send + Sync {
    /// The implementation's name in scenarios (`impl = "..."`) and reports.
    fn name(&self) -> &'static str;
    /// A CEP-22 receiver.
    fn transfer_receiver(&self, config: ReceiverConfig) -> Box<dyn TransferReceiving<P>>;
    /// A CEP-22 sender of `payload`, every frame publishing within `config.budget` under
    /// `envelope`.
    fn transfer_sender(
        &self,
        token: ProgressToken,
        payload: Segmented,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Box<dyn TransferSending>, ChunkingError>;
    /// A CEP-41 writer.
    fn stream_writer(&self, token: ProgressToken, config: WriterConfig) -> Box<dyn StreamWriting>;
    /// A CEP-41 reader.
    fn stream_reader(&self, policy: StreamPolicy) -> Box<dyn StreamReading<P>>;
}

/// relaysim's own engines.
#[derive(Debug, Clone, Copy, Default)]
pub struct OwnEngines;

impl<P: Clone + Ord + Send + 'static> EngineFactory<P> for OwnEngines {
    fn name(&self) -> &'static str {
        "relaysim"
    }
    fn transfer_receiver(&self, config: ReceiverConfig) -> Box<dyn TransferReceiving<P>> {
        Box::new(OversizedReceiver::new(config))
    }
    fn transfer_sender(
        &self,
        token: ProgressToken,
        payload: Segmented,
        config: SenderConfig,
        envelope: &dyn Envelope,
    ) -> Result<Box<dyn TransferSending>, ChunkingError> {
        Ok(Box::new(OversizedSender::new(
            token, payload, config, envelope,
        )?))
    }
    fn stream_writer(&self, token: ProgressToken, config: WriterConfig) -> Box<dyn StreamWriting> {
        Box::new(OpenStreamWriter::new(token, config))
    }
    fn stream_reader(&self, policy: StreamPolicy) -> Box<dyn StreamReading<P>> {
        Box::new(OpenStreamRegistry::new(policy))
    }
}

/// The receiving side of CEP-22 transfers from peers `P`.
pub trait TransferReceiving<P>: Send {
    /// A frame from `peer`.
    fn handle_frame(&mut self, peer: &P, frame: TransferFrame, now: Duration);
    /// Whether `start` is answered with `accept` (the sender's knowledge of our support).
    fn set_send_accept(&mut self, send_accept: bool);
    /// The next frame to send (`accept`, `abort`).
    fn poll_transmit(&mut self) -> Option<(P, TransferFrame)>;
    /// The next outcome.
    fn poll_event(&mut self) -> Option<ReceiverEvent<P>>;
    /// When [`TransferReceiving::handle_timeout`] next has work.
    fn poll_timeout(&self) -> Option<Duration>;
    /// Runs timers due at `now`.
    fn handle_timeout(&mut self, now: Duration);
}

/// The sending side of one CEP-22 transfer.
pub trait TransferSending: Send {
    /// A frame from the receiver (`accept`, `abort`).
    fn handle_frame(&mut self, frame: &TransferFrame);
    /// The next frame to publish.
    fn poll_transmit(&mut self, now: Duration) -> Option<TransferFrame>;
    /// Where the transfer is.
    fn state(&self) -> &SenderState;
    /// Whether nothing more will be sent.
    fn is_done(&self) -> bool;
    /// When [`TransferSending::handle_timeout`] next has work.
    fn poll_timeout(&self) -> Option<Duration>;
    /// Runs timers due at `now`.
    fn handle_timeout(&mut self, now: Duration);
}

/// The writing side of one CEP-41 stream.
pub trait StreamWriting: Send {
    /// The stream's token.
    fn token(&self) -> &ProgressToken;
    /// Writes a chunk; returns its index.
    fn write(&mut self, data: String, now: Duration) -> Result<u64, WriteError>;
    /// Closes the stream.
    fn close(&mut self, now: Duration) -> Result<(), WriteError>;
    /// A frame from the reader (`accept`, `ping`, `pong`, `abort`).
    fn handle_frame(&mut self, frame: &StreamFrame, now: Duration);
    /// Where the stream is.
    fn state(&self) -> &WriterState;
    /// The next frame to publish.
    fn poll_transmit(&mut self, now: Duration) -> Option<StreamFrame>;
    /// Whether nothing more will be sent.
    fn is_done(&self) -> bool;
    /// When [`StreamWriting::handle_timeout`] next has work.
    fn poll_timeout(&self) -> Option<Duration>;
    /// Runs timers due at `now`.
    fn handle_timeout(&mut self, now: Duration);
}

/// The reading side of CEP-41 streams from peers `P`.
pub trait StreamReading<P>: Send {
    /// A frame from `peer`.
    fn handle_frame(&mut self, peer: &P, frame: StreamFrame, now: Duration);
    /// Whether `start` is answered with `accept`.
    fn set_send_accept(&mut self, send_accept: bool);
    /// Opens the reading session of a stream `peer` is about to write, before its `start`
    /// arrives, as the SDK clients do when they send a streaming request. A frame that beats
    /// `start` then meets a live session instead of none. Readers that create sessions only
    /// on `start` (relaysim's) ignore this.
    fn open(&mut self, _peer: &P, _token: &ProgressToken, _now: Duration) {}
    /// Forgets a session opened by [`StreamReading::open`] whose `start` never came (its call
    /// failed first), so such sessions do not pile up against the reader's stream limit.
    fn release(&mut self, _peer: &P, _token: &ProgressToken) {}
    /// The next chunk of a stream, in order.
    fn read(&mut self, peer: &P, token: &ProgressToken) -> Option<StreamChunk>;
    /// Whether a stream is still held (open, or ended with chunks unread).
    fn holds(&self, peer: &P, token: &ProgressToken) -> bool;
    /// Aborts a stream from the application side.
    fn abort(&mut self, peer: &P, token: &ProgressToken, reason: &str);
    /// Sends a stream's outstanding keepalive probe again (after a resume).
    fn reprobe(&mut self, peer: &P, token: &ProgressToken);
    /// The next frame to send.
    fn poll_transmit(&mut self) -> Option<(P, StreamFrame)>;
    /// The next event.
    fn poll_event(&mut self) -> Option<RegistryEvent<P>>;
    /// When [`StreamReading::handle_timeout`] next has work.
    fn poll_timeout(&self) -> Option<Duration>;
    /// Runs timers due at `now`.
    fn handle_timeout(&mut self, now: Duration);
}

impl<P: Clone + Ord + Send> TransferReceiving<P> for OversizedReceiver<P> {
    fn handle_frame(&mut self, peer: &P, frame: TransferFrame, now: Duration) {
        OversizedReceiver::handle_frame(self, peer, frame, now);
    }
    fn set_send_accept(&mut self, send_accept: bool) {
        OversizedReceiver::set_send_accept(self, send_accept);
    }
    fn poll_transmit(&mut self) -> Option<(P, TransferFrame)> {
        OversizedReceiver::poll_transmit(self)
    }
    fn poll_event(&mut self) -> Option<ReceiverEvent<P>> {
        OversizedReceiver::poll_event(self)
    }
    fn poll_timeout(&self) -> Option<Duration> {
        OversizedReceiver::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Duration) {
        OversizedReceiver::handle_timeout(self, now);
    }
}

impl TransferSending for OversizedSender {
    fn handle_frame(&mut self, frame: &TransferFrame) {
        OversizedSender::handle_frame(self, frame);
    }
    fn poll_transmit(&mut self, now: Duration) -> Option<TransferFrame> {
        OversizedSender::poll_transmit(self, now)
    }
    fn state(&self) -> &SenderState {
        OversizedSender::state(self)
    }
    fn is_done(&self) -> bool {
        OversizedSender::is_done(self)
    }
    fn poll_timeout(&self) -> Option<Duration> {
        OversizedSender::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Duration) {
        OversizedSender::handle_timeout(self, now);
    }
}

impl StreamWriting for OpenStreamWriter {
    fn token(&self) -> &ProgressToken {
        OpenStreamWriter::token(self)
    }
    fn write(&mut self, data: String, now: Duration) -> Result<u64, WriteError> {
        OpenStreamWriter::write(self, data, now)
    }
    fn close(&mut self, now: Duration) -> Result<(), WriteError> {
        OpenStreamWriter::close(self, now)
    }
    fn handle_frame(&mut self, frame: &StreamFrame, now: Duration) {
        OpenStreamWriter::handle_frame(self, frame, now);
    }
    fn state(&self) -> &WriterState {
        OpenStreamWriter::state(self)
    }
    fn poll_transmit(&mut self, now: Duration) -> Option<StreamFrame> {
        OpenStreamWriter::poll_transmit(self, now)
    }
    fn is_done(&self) -> bool {
        OpenStreamWriter::is_done(self)
    }
    fn poll_timeout(&self) -> Option<Duration> {
        OpenStreamWriter::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Duration) {
        OpenStreamWriter::handle_timeout(self, now);
    }
}

impl<P: Clone + Ord + Send> StreamReading<P> for OpenStreamRegistry<P> {
    fn handle_frame(&mut self, peer: &P, frame: StreamFrame, now: Duration) {
        OpenStreamRegistry::handle_frame(self, peer, frame, now);
    }
    fn set_send_accept(&mut self, send_accept: bool) {
        OpenStreamRegistry::set_send_accept(self, send_accept);
    }
    fn read(&mut self, peer: &P, token: &ProgressToken) -> Option<StreamChunk> {
        OpenStreamRegistry::read(self, peer, token)
    }
    fn holds(&self, peer: &P, token: &ProgressToken) -> bool {
        self.session(peer, token).is_some()
    }
    fn abort(&mut self, peer: &P, token: &ProgressToken, reason: &str) {
        OpenStreamRegistry::abort(self, peer, token, reason);
    }
    fn reprobe(&mut self, peer: &P, token: &ProgressToken) {
        OpenStreamRegistry::reprobe(self, peer, token);
    }
    fn poll_transmit(&mut self) -> Option<(P, StreamFrame)> {
        OpenStreamRegistry::poll_transmit(self)
    }
    fn poll_event(&mut self) -> Option<RegistryEvent<P>> {
        OpenStreamRegistry::poll_event(self)
    }
    fn poll_timeout(&self) -> Option<Duration> {
        OpenStreamRegistry::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Duration) {
        OpenStreamRegistry::handle_timeout(self, now);
    }
}
