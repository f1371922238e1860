//! How much of a CEP-22 transfer, or of a CEP-41 stream, a peer has out at once.
//!
//! Without a bound, a server makes every frame of a transfer the moment it answers, so a
//! 1 GiB result is a second gibibyte of frames (and their events) in flight at once. A real
//! sender cannot do that either: its socket's send buffer fills and it waits, or it awaits
//! each publish (the TypeScript SDK). Here each transfer's next frame is made only while its
//! frames published and not yet answered by every relay come to less than
//! [`SEND_WINDOW_BYTES`] (counted as frame text, so an escape-heavy payload's frames can be
//! four times its size; the frame that crosses the bound still goes) and number fewer than
//! [`MAX_FRAMES_OUT`] (the publish tallies a peer keeps, all its publications together: a
//! tally forgotten is never answered, so several concurrent transfers of very small frames can
//! still lose some and wait out [`ANSWER_WAIT`] for them). A frame not answered (a relay that sends
//! no `OK`, or one that is down) stops counting after [`ANSWER_WAIT`], so the window never
//! closes for good; over such a relay a large transfer goes out 16 MiB per 10 s.
//!
//! A response whose frames come to less than 16 MiB never fills its window, so it goes out
//! exactly as before; each transfer has its own window, so concurrent transfers do not wait
//! for each other.
//!
//! A client's upload has one too, counted the same way: its frames are made only while
//! there is room, so a 1 GiB request is not a second gibibyte of frames in flight at once.
//!
//! A stream has a window of its own too: while it is full, the tool's next `write` waits (its
//! pings and close still go out). Without it a tool writing at `interval = "0s"` made every
//! chunk in one instant, 1,000,000 chunks of 1 MiB a terabyte of frames in flight; with it a
//! writer that outruns its relays holds about 16 MiB out, as a writer behind a full socket
//! send buffer does.

use nostr::prelude::EventId;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Bytes of one transfer's or stream's frames a peer has published and not yet had answered,
/// at most (the frame that crosses it still goes).
pub const SEND_WINDOW_BYTES: usize = 16 << 20;
/// Frames one transfer or stream has out and not yet answered, at most.
pub const MAX_FRAMES_OUT: usize = 4096;
/// How long a published frame counts against the window without its relays' answers.
pub const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Frames out and not yet answered.
#[derive(Debug, Default)]
pub(crate) struct SendWindow {
    /// Bytes of each frame out, by event id.
    out: BTreeMap<EventId, usize>,
    /// When each went out, oldest first (ids already answered are skipped when met).
    order: VecDeque<(Duration, EventId)>,
    bytes: usize,
}

impl SendWindow {
    /// Bytes that may still go out before the window is full.
    pub(crate) fn room(&self) -> usize {
        SEND_WINDOW_BYTES.saturating_sub(self.bytes)
    }

    /// Frames that may still go out before the window is full.
    pub(crate) fn frames_room(&self) -> usize {
        MAX_FRAMES_OUT.saturating_sub(self.out.len())
    }

    /// Whether another frame may go out now.
    pub(crate) fn has_room(&self) -> bool {
        self.room() > 0 && self.frames_room() > 0
    }

    /// A frame of `bytes` went out as event `id` at `now`.
    pub(crate) fn sent(&mut self, id: EventId, bytes: usize, now: Duration) {
        if self.out.insert(id, bytes).is_none() {
            self.bytes += bytes;
            self.order.push_back((now, id));
        }
    }

    /// Every relay answered event `id` (accepted or not).
    pub(crate) fn answered(&mut self, id: &EventId) {
        if let Some(bytes) = self.out.remove(id) {
            self.bytes -= bytes;
        }
    }

    /// Frames out longer than [`ANSWER_WAIT`] at `now` stop counting.
    pub(crate) fn expire(&mut self, now: Duration) {
        while let Some(&(at, id)) = self.order.front() {
            if self.out.contains_key(&id) && at + ANSWER_WAIT > now {
                break;
            }
            self.order.pop_front();
            self.answered(&id);
        }
    }

    /// When the window next opens by itself: only while it is full.
    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        if self.has_room() {
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
    fn many_small_frames_fill_the_window_too() {
        let mut w = SendWindow::default();
        for n in 0..MAX_FRAMES_OUT {
            assert!(w.frames_room() > 0);
            w.sent(EventId::from_byte_array(hash(n)), 1, Duration::ZERO);
        }
        assert_eq!(w.frames_room(), 0);
        assert!(w.poll_timeout().is_some());
        w.answered(&EventId::from_byte_array(hash(0)));
        assert_eq!(w.frames_room(), 1);
    }

    fn hash(n: usize) -> [u8; 32] {
        let mut bytes = [0; 32];
        bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
        bytes
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
