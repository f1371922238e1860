//! When this thread's peers keep what they send for the peer that receives it
//! (`sent_chunks`, `sent_messages`).
//!
//! Only where events pass between peers as they are — the des world, which hands the signer's
//! own shared event to its relays and on to the receiver — can a receiver find what was kept
//! for it; peers whose events cross a wire (live, turmoil) receive parsed copies and never
//! would. So a des world opens a [`SentMemos`] scope for as long as it lives: while one is
//! open on a thread, its peers keep what they send; when the last closes, everything kept is
//! forgotten, so nothing outlives the world that could have used it. Whether a memo is open
//! never changes what a peer does, only how much parsing it skips (a test runs a world both
//! ways and compares).

use std::cell::Cell;

thread_local! {
    static OPEN: Cell<u32> = const { Cell::new(0) };
    /// Set by tests that run a world with its memos off.
    static SUPPRESSED: Cell<bool> = const { Cell::new(false) };
}

/// While alive, this thread's peers keep what they send for its receivers.
#[derive(Debug)]
pub struct SentMemos(());

impl SentMemos {
    /// Opens the scope (scopes nest: memos stay on until the last one closes).
    pub fn open() -> Self {
        OPEN.with(|open| open.set(open.get().saturating_add(1)));
        SentMemos(())
    }
}

impl Drop for SentMemos {
    fn drop(&mut self) {
        let left = OPEN.with(|open| {
            let left = open.get().saturating_sub(1);
            open.set(left);
            left
        });
        if left == 0 {
            super::sent_chunks::forget_all();
            super::sent_messages::forget_all();
        }
    }
}

/// Whether a scope is open on this thread: peers keep what they send.
pub(crate) fn is_open() -> bool {
    OPEN.with(|open| open.get() > 0) && !SUPPRESSED.with(Cell::get)
}

/// Runs `f` with this thread's memos off, even in the worlds it opens, for tests that
/// compare a run with and without them.
#[cfg(test)]
pub(crate) fn without<T>(f: impl FnOnce() -> T) -> T {
    SUPPRESSED.with(|s| s.set(true));
    super::sent_chunks::forget_all();
    super::sent_messages::forget_all();
    let result = f();
    SUPPRESSED.with(|s| s.set(false));
    result
}
