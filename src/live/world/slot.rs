//! One relay of a live deployment: its model, its links' directions, its counters, and how
//! long its intake takes over each message.

use crate::live::report::LiveRelayCounters;
use crate::nip01::ClientMessage;
use crate::relay::impair::{Direction, LinkState};
use crate::relay::{Intake, Relay, RelayProfile};
use crate::rng::SeededStreams;
use std::time::Duration;

/// One relay of the deployment.
pub(crate) struct RelaySlot {
    pub name: String,
    pub relay: Relay,
    pub(super) up: Direction,
    pub(super) down: Direction,
    pub(super) counters: LiveRelayCounters,
    pub(super) restart_rng: Option<LinkState>,
    /// Serial intake: when the relay is done with the events before.
    busy_until: Duration,
    /// Concurrent intake: draws of handling times.
    intake_rng: LinkState,
}

/// Bytes of stored events a live relay keeps (oldest evicted first).
const LIVE_STORED_BYTES: usize = 64 << 20;

impl RelaySlot {
    pub(crate) fn new(name: String, profile: RelayProfile, streams: &SeededStreams) -> Self {
        let mut relay = Relay::new(profile.clone());
        // A live relay's store lives in this process's memory (strfry's is on disk): a
        // quarter of the simulator's bound, so `serve` stays within its memory bound.
        relay.set_store_bounds(crate::relay::MAX_STORED_EVENTS, LIVE_STORED_BYTES);
        RelaySlot {
            counters: LiveRelayCounters::new(&name, &profile.name),
            intake_rng: LinkState::new(streams.stream(&format!("live/intake/{name}"))),
            name,
            up: profile.impairments.peer_to_relay.clone(),
            down: profile.impairments.relay_to_peer.clone(),
            relay,
            restart_rng: None,
            busy_until: Duration::ZERO,
        }
    }

    /// When the relay is done reading `message`, which arrived `now`, if its intake takes
    /// time: after the events before it (serial intake with a processing time), or after its
    /// own drawn handling time (concurrent intake, as khatru's goroutine per message), so it
    /// can finish before a message that arrived earlier. `None`: it acts at once.
    pub(super) fn intake_done(
        &mut self,
        message: &ClientMessage,
        now: Duration,
    ) -> Option<Duration> {
        let profile = self.relay.profile();
        match profile.intake.clone() {
            // A batch-commit intake spends its time in the relay's own writer.
            Intake::Serial | Intake::BatchCommit { .. } => {
                let event = matches!(message, ClientMessage::Event(_));
                if !event || profile.processing.is_zero() {
                    return None;
                }
                self.busy_until = self.busy_until.max(now) + profile.processing;
                Some(self.busy_until)
            }
            Intake::Concurrent { handling, per_kib } => {
                let bytes = match message {
                    ClientMessage::Event(e) => e.as_json().len(),
                    _ => CONTROL_BYTES,
                };
                let took =
                    self.intake_rng.sample(&handling) + per_kib.mul_f64(bytes as f64 / 1024.0);
                Some(now + took)
            }
        }
    }
}

/// What the concurrent intake counts a REQ or CLOSE as, in bytes (as the des world does).
const CONTROL_BYTES: usize = 100;
