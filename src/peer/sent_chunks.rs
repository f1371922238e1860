//! Chunks this thread's peers published, kept by the very event that carries them, so the peer
//! that receives that event takes the frame instead of reading it back from the text.
//!
//! A chunk's text is its data escaped twice over (inside the frame's JSON, inside the event's
//! content), and reading it back was the largest single cost of a simulated CEP-22 transfer
//! (13 % of a `strfry-1mib-escape` run). Where relaysim wrote the chunk itself, the frame it
//! wrote is at hand, and [`chunk_text::read`] of its text gives that same frame back (property
//! tested in `chunk_text`), so taking it instead changes nothing a peer does: the verified
//! signature memo (`nip01::verified`) skips re-verifying the simulator's own signatures the
//! same way. Anything else — an event from another implementation, a copy of the event, a
//! second delivery of it — is read from its text as before.
//!
//! An entry is found only by the address of the shared event it was signed into, and holds
//! that event, so no other event can be at that address while the entry lives (events in an
//! `Arc` never change). Entries go when taken or, oldest first, when they hold more than
//! [`MAX_BYTES`] of data or [`MAX_ENTRIES`] chunks; a miss only costs the read.

use super::kept::Kept;
use crate::protocol::chunk_text::{self, ProgressFrame};
use crate::protocol::cvm::MAX_SAFE_INTEGER;
use crate::protocol::open_stream::{StreamBody, StreamFrame};
use crate::protocol::oversized::{TransferBody, TransferFrame};
use nostr::prelude::Event;
use std::cell::RefCell;
use std::sync::Arc;

/// Bytes kept at most, counting each chunk's data and the content of the event kept with it:
/// more than a server's send window (16 MiB of frames) holds in flight.
pub const MAX_BYTES: usize = 64 << 20;

/// Chunks kept at most.
pub const MAX_ENTRIES: usize = 1 << 16;

/// The text of a frame about to be signed, and the frame itself when it is a chunk.
#[derive(Debug)]
pub struct FrameText {
    /// The frame's JSON text: the event's content.
    pub text: String,
    chunk: Option<ProgressFrame>,
}

impl FrameText {
    /// Text that is not a chunk frame (or need not be remembered).
    pub fn text(text: String) -> Self {
        FrameText { text, chunk: None }
    }

    /// A CEP-22 frame's text, keeping the frame when it is a chunk [`chunk_text::read`] reads.
    pub fn transfer(frame: TransferFrame) -> Self {
        let text = frame.to_json();
        let readable = matches!(frame.body, TransferBody::Chunk { .. })
            && frame.message.is_none()
            && frame.progress <= MAX_SAFE_INTEGER;
        let chunk = readable.then_some(ProgressFrame::Transfer(frame));
        FrameText { text, chunk }
    }

    /// A CEP-41 frame's text, keeping the frame when it is a chunk [`chunk_text::read`] reads.
    pub fn stream(frame: StreamFrame) -> Self {
        let text = frame.to_json();
        let readable = matches!(
            frame.body,
            StreamBody::Chunk { chunk_index, .. } if chunk_index <= MAX_SAFE_INTEGER
        ) && frame.message.is_none()
            && frame.progress <= MAX_SAFE_INTEGER;
        let chunk = readable.then_some(ProgressFrame::Stream(frame));
        FrameText { text, chunk }
    }

    /// Splits into the text to sign and what [`remember`] keeps once it is signed.
    pub fn into_parts(self) -> (String, Option<ProgressFrame>) {
        (self.text, self.chunk)
    }
}

/// Keeps `chunk` as the frame `event` carries; `event` must be the one signed with the
/// chunk's [`FrameText`] text as its content. Nothing is kept for `None`.
pub fn remember(event: &Arc<Event>, chunk: Option<ProgressFrame>) {
    let Some(chunk) = chunk.filter(|_| super::memo_scope::is_open()) else {
        return;
    };
    debug_assert_eq!(
        chunk_text::read(&event.content).as_ref(),
        Some(&chunk),
        "a remembered chunk is what its text reads as"
    );
    // The data kept, and the event's content it keeps alive.
    let size = data_len(&chunk) + event.content.len();
    SENT.with(|s| {
        s.borrow_mut()
            .keep(address(event), (Arc::clone(event), chunk), size)
    });
}

/// The chunk frame `event` carries, if its content is a chunk in relaysim's shape: the
/// remembered frame when this is the very event it was signed into, else read from the text.
/// Always what [`chunk_text::read`] of the content returns.
pub fn read_event(event: &Event) -> Option<ProgressFrame> {
    SENT.with(|s| s.borrow_mut().take(&address(event)))
        .map(|(_, chunk)| chunk)
        .or_else(|| chunk_text::read(&event.content))
}

/// Forgets every chunk.
pub(crate) fn forget_all() {
    SENT.with(|s| s.borrow_mut().clear());
}

thread_local! {
    static SENT: RefCell<Kept<usize, (Arc<Event>, ProgressFrame)>> =
        RefCell::new(Kept::new(MAX_BYTES, MAX_ENTRIES));
}

/// The key of an event: its address, its own while the entry holds the event.
fn address(event: &Event) -> usize {
    std::ptr::from_ref(event) as usize
}

fn data_len(chunk: &ProgressFrame) -> usize {
    match chunk {
        ProgressFrame::Transfer(TransferFrame {
            body: TransferBody::Chunk { data },
            ..
        })
        | ProgressFrame::Stream(StreamFrame {
            body: StreamBody::Chunk { data, .. },
            ..
        }) => data.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nip01::Identity;
    use crate::peer::memo_scope::SentMemos;
    use crate::protocol::jsonrpc::RequestId;

    fn chunk(data: &str) -> TransferFrame {
        TransferFrame {
            token: RequestId::String("t".into()),
            progress: 3,
            message: None,
            body: TransferBody::Chunk { data: data.into() },
        }
    }

    fn signed(out: FrameText) -> (Arc<Event>, Option<ProgressFrame>) {
        let (text, chunk) = out.into_parts();
        let me = Identity::derive(1, "server");
        (me.sign_shared(25910, 1, Vec::new(), text), chunk)
    }

    #[test]
    fn the_receiver_of_the_very_event_takes_the_frame_once_and_reads_any_other_copy() {
        let _world = SentMemos::open();
        let (event, kept) = signed(FrameText::transfer(chunk("a \"quoted\" \\ chunk")));
        remember(&event, kept.clone());
        let expected = chunk_text::read(&event.content);
        assert!(expected.is_some());
        assert_eq!(kept, expected);
        assert_eq!(SENT.with(|s| s.borrow().held().0), 1);
        // A copy at another address is read from its text.
        let copy = Event::clone(&event);
        assert_eq!(read_event(&copy), expected);
        assert_eq!(SENT.with(|s| s.borrow().held().0), 1, "not taken by a copy");
        // The very event takes it; a second delivery reads the text.
        assert_eq!(read_event(&event), expected);
        assert_eq!(SENT.with(|s| s.borrow().held().0), 0, "taken");
        assert_eq!(read_event(&event), expected);
    }

    #[test]
    fn only_chunks_are_kept() {
        let start = TransferFrame {
            body: TransferBody::Accept,
            ..chunk("")
        };
        assert!(FrameText::transfer(start).into_parts().1.is_none());
        let with_message = TransferFrame {
            message: Some("m".into()),
            ..chunk("x")
        };
        assert!(FrameText::transfer(with_message).into_parts().1.is_none());
        assert!(FrameText::text("{}".into()).into_parts().1.is_none());
        let stream_chunk = StreamFrame {
            token: RequestId::Number(7),
            progress: 2,
            message: None,
            body: StreamBody::Chunk {
                chunk_index: 1,
                data: "d".into(),
            },
        };
        let (event, kept) = signed(FrameText::stream(stream_chunk));
        assert_eq!(kept, chunk_text::read(&event.content));
    }

    #[test]
    fn the_oldest_chunks_go_once_the_data_kept_passes_its_bound() {
        let _world = SentMemos::open();
        // Each entry counts its data and its event's content (the data and the frame around
        // it): a little over a quarter of the bound.
        let big = "x".repeat(MAX_BYTES / 8);
        let events: Vec<Arc<Event>> = (0..5)
            .map(|_| {
                let (event, kept) = signed(FrameText::transfer(chunk(&big)));
                remember(&event, kept);
                event
            })
            .collect();
        SENT.with(|s| {
            let s = s.borrow();
            assert_eq!(s.held().0, 3, "three quarters fit, a fourth would not");
            assert!(s.held().1 <= MAX_BYTES);
            assert!(!s.holds(&address(&events[0])));
            assert!(s.holds(&address(&events[4])));
        });
        // The forgotten ones still read from their text.
        assert_eq!(read_event(&events[0]), chunk_text::read(&events[0].content));
    }

    #[test]
    fn nothing_is_kept_outside_a_world_and_all_is_forgotten_when_it_ends() {
        let (event, kept) = signed(FrameText::transfer(chunk("c")));
        remember(&event, kept.clone());
        assert_eq!(SENT.with(|s| s.borrow().held().0), 0, "no world open");
        let world = SentMemos::open();
        remember(&event, kept);
        assert_eq!(SENT.with(|s| s.borrow().held().0), 1);
        drop(world);
        assert_eq!(
            SENT.with(|s| s.borrow().held().0),
            0,
            "forgotten with the world"
        );
    }

    #[test]
    fn a_chunk_whose_numbers_json_would_not_read_exactly_is_not_kept() {
        let unsafe_progress = TransferFrame {
            progress: MAX_SAFE_INTEGER + 1,
            ..chunk("x")
        };
        assert!(FrameText::transfer(unsafe_progress)
            .into_parts()
            .1
            .is_none());
        let unsafe_index = StreamFrame {
            token: RequestId::Number(7),
            progress: 2,
            message: None,
            body: StreamBody::Chunk {
                chunk_index: MAX_SAFE_INTEGER + 1,
                data: "d".into(),
            },
        };
        let (event, kept) = signed(FrameText::stream(unsafe_index));
        assert!(kept.is_none());
        assert_eq!(
            chunk_text::read(&event.content),
            None,
            "read refuses it too"
        );
    }
}
