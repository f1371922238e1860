//! How much of its CEP-22 transfers a server has out at once.
//!
//! Without a bound, a server makes every frame of a transfer the moment it answers, so a
//! 1 GiB result is a second gibibyte of frames (and their events) in flight at once. A real
//! client cannot do that either: its socket's send buffer fills and it waits, or it awaits
//! each publish (the TypeScript SDK). Here a transfer's next frame is made only while the
//! bytes of frames published and not yet answered by every relay are under
//! [`SEND_WINDOW_BYTES`]. A frame no relay answers (a relay that sends no `OK`) stops counting
//! after [`ANSWER_WAIT`], so the window never closes for good.
//!
//! Transfers of up to 16 MiB never fill the window, so they go out exactly as before: the
//! window only changes the timing of larger ones.

use nostr::prelude::EventId;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Bytes of transfer frames a server has published and not yet had answered, at most.
pub const SEND_WINDOW_BYTES: usize = 16 << 20;
/// How long a published frame counts against the window without its relays' answers.
pub const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Frames out and not yet answered.
#[derive(Debug, Default)]
pub(super) struct SendWindow {
    /// Bytes of each frame out, by event id.
    out: BTreeMap<EventId, usize>,
    /// When each went out, oldest first (ids already answered are skipped when met).
    order: VecDeque<(Duration, EventId)>,
    bytes: usize,
}

impl SendWindow {
    /// Bytes that may still go out before the window is full.
    pub(super) fn room(&self) -> usize {
        SEND_WINDOW_BYTES.saturating_sub(self.bytes)
    }

    /// A frame of `bytes` went out as event `id` at `now`.
    pub(super) fn sent(&mut self, id: EventId, bytes: usize, now: Duration) {
        if self.out.insert(id, bytes).is_none() {
            self.bytes += bytes;
            self.order.push_back((now, id));
        }
    }

    /// Every relay answered event `id` (accepted or not).
    pub(super) fn answered(&mut self, id: &EventId) {
        if let Some(bytes) = self.out.remove(id) {
            self.bytes -= bytes;
        }
    }

    /// Frames out longer than [`ANSWER_WAIT`] at `now` stop counting.
    pub(super) fn expire(&mut self, now: Duration) {
        while let Some(&(at, id)) = self.order.front() {
            if self.out.contains_key(&id) && at + ANSWER_WAIT > now {
                break;
            }
            self.order.pop_front();
            self.answered(&id);
        }
    }

    /// When the window next opens by itself: only while it is full.
    pub(super) fn poll_timeout(&self) -> Option<Duration> {
        if self.room() > 0 {
            return None;
        }
        self.order
            .iter()
            .find(|(_, id)| self.out.contains_key(id))
            .map(|(at, _)| *at + ANSWER_WAIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> EventId {
        EventId::from_byte_array([n; 32])
    }

    #[test]
    fn answers_open_the_window_again() {
        let mut w = SendWindow::default();
        w.sent(id(1), SEND_WINDOW_BYTES / 2, Duration::ZERO);
        w.sent(id(2), SEND_WINDOW_BYTES / 2, Duration::ZERO);
        assert_eq!(w.room(), 0);
        w.answered(&id(1));
        assert_eq!(w.room(), SEND_WINDOW_BYTES / 2);
        // A second answer, or one for a frame never sent, changes nothing.
        w.answered(&id(1));
        w.answered(&id(3));
        assert_eq!(w.room(), SEND_WINDOW_BYTES / 2);
    }

    #[test]
    fn frames_nobody_answers_stop_counting_after_the_wait() {
        let mut w = SendWindow::default();
        w.sent(id(1), SEND_WINDOW_BYTES, Duration::from_secs(1));
        assert_eq!(w.poll_timeout(), Some(Duration::from_secs(1) + ANSWER_WAIT));
        w.expire(Duration::from_secs(1) + ANSWER_WAIT - Duration::from_millis(1));
        assert_eq!(w.room(), 0);
        w.expire(Duration::from_secs(1) + ANSWER_WAIT);
        assert_eq!(w.room(), SEND_WINDOW_BYTES);
        assert_eq!(w.poll_timeout(), None);
    }
}
