//! A transfer's reassembled text, chunk by chunk in progress order: one string, or for a very
//! large transfer pieces of about a segment each, so that reading it frees it piece by piece
//! (`nip01::json_segmented`) and a gigabyte request is never held twice at the server.

use super::Digest;
use crate::segmented::SEGMENT;
use std::collections::BTreeMap;
use std::ops::Range;

/// Declared sizes from which a text is kept in pieces. Below it one string, read in place
/// (`json_read::parse_owned`), costs nothing extra; the CEP-22 transfers of ordinary runs are
/// all below it.
pub(super) const PIECES_FROM: u64 = 64 << 20;

/// Bytes a transfer's declared size reserves at most before any chunk arrives.
pub(super) const MAX_RESERVED: u64 = 2 << 30;

/// An empty text with room for `declared` bytes (at most [`MAX_RESERVED`]), or less room if
/// the system will not give it: the text grows as chunks arrive either way.
pub(super) fn reserved(declared: u64) -> String {
    let mut text = String::new();
    let room = usize::try_from(declared.min(MAX_RESERVED)).unwrap_or(usize::MAX);
    if text.try_reserve_exact(room).is_err() {
        // Too large for this platform or this system's memory: no room up front.
        text = String::new();
    }
    text
}

/// The assembled text, and where each chunk sits in it.
pub(super) struct Assembly {
    pieces: Vec<String>,
    /// Bytes a piece grows to before the next starts (`usize::MAX`: one piece).
    piece_limit: usize,
    len: usize,
    /// Each chunk's piece and bytes in it, by progress.
    spans: BTreeMap<u64, (usize, Range<usize>)>,
}

/// What a completed assembly hands over.
pub(super) enum Assembled {
    /// One string.
    Whole(String),
    /// Pieces, in order.
    Pieces(Vec<String>),
}

impl Assembly {
    /// Room for a text of `declared` bytes: reserved whole (room is not memory until written,
    /// and growing by doubling would hold and copy up to twice the text), or in pieces from
    /// [`PIECES_FROM`] when `pieces` says so.
    pub(super) fn new(declared: u64, pieces: bool) -> Self {
        let (pieces, piece_limit) = if pieces && declared >= PIECES_FROM {
            (Vec::new(), SEGMENT)
        } else {
            (vec![reserved(declared)], usize::MAX)
        };
        Assembly {
            pieces,
            piece_limit,
            len: 0,
            spans: BTreeMap::new(),
        }
    }

    /// Bytes assembled.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Chunks assembled.
    pub(super) fn chunks(&self) -> usize {
        self.spans.len()
    }

    /// Appends chunk `progress`.
    pub(super) fn append(&mut self, progress: u64, data: &str) {
        let full = self
            .pieces
            .last()
            .is_none_or(|p| !p.is_empty() && p.len() + data.len() > self.piece_limit);
        if full {
            self.pieces.push(String::with_capacity(
                data.len().max(self.piece_limit.min(SEGMENT)),
            ));
        }
        let index = self.pieces.len() - 1;
        let piece = &mut self.pieces[index];
        let at = piece.len();
        piece.push_str(data);
        self.spans.insert(progress, (index, at..piece.len()));
        self.len += data.len();
    }

    /// Puts chunk `progress` in front of every other (a chunk in the accept slot).
    pub(super) fn prepend(&mut self, progress: u64, data: &str) {
        let shift = data.len();
        if self.piece_limit == usize::MAX {
            let piece = self.pieces.first_mut().expect("one piece");
            piece.insert_str(0, data);
            for (_, span) in self.spans.values_mut() {
                *span = span.start + shift..span.end + shift;
            }
            self.spans.insert(progress, (0, 0..shift));
        } else {
            self.pieces.insert(0, data.to_owned());
            for (index, _) in self.spans.values_mut() {
                *index += 1;
            }
            self.spans.insert(progress, (0, 0..shift));
        }
        self.len += shift;
    }

    /// The lowest progress assembled.
    pub(super) fn first_chunk(&self) -> Option<u64> {
        self.spans.keys().next().copied()
    }

    /// Chunk `progress`'s data, if assembled.
    pub(super) fn chunk(&self, progress: u64) -> Option<&str> {
        let (index, span) = self.spans.get(&progress)?;
        Some(&self.pieces[*index][span.clone()])
    }

    /// The digest of the whole text.
    pub(super) fn digest(&self) -> Digest {
        Digest::of_parts(self.pieces.iter().map(String::as_str))
    }

    /// The text.
    pub(super) fn into_text(self) -> Assembled {
        if self.piece_limit == usize::MAX {
            Assembled::Whole(self.pieces.into_iter().next().unwrap_or_default())
        } else {
            Assembled::Pieces(self.pieces)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_declaration_assembles_in_pieces_with_the_accept_slot_in_front() {
        for declared in [10, PIECES_FROM] {
            let mut a = Assembly::new(declared, true);
            let chunk = "x".repeat(SEGMENT / 3 + 1);
            for p in 3..9 {
                a.append(p, &chunk);
            }
            a.prepend(2, "first");
            assert_eq!(a.chunk(2), Some("first"));
            assert_eq!(a.chunk(5), Some(chunk.as_str()));
            assert_eq!(a.chunks(), 7);
            assert_eq!(a.len(), 6 * chunk.len() + 5);
            let whole = format!("first{}", chunk.repeat(6));
            assert_eq!(a.digest(), Digest::of(&whole));
            match a.into_text() {
                Assembled::Whole(text) => {
                    assert!(declared < PIECES_FROM);
                    assert_eq!(text, whole);
                }
                Assembled::Pieces(pieces) => {
                    assert!(declared >= PIECES_FROM);
                    assert!(pieces.len() > 2, "{}", pieces.len());
                    assert!(pieces.iter().all(|p| p.len() <= SEGMENT));
                    assert_eq!(pieces.concat(), whole);
                }
            }
        }
    }

    #[test]
    fn a_declared_size_reserves_room_up_to_the_cap_and_never_panics() {
        assert!(reserved(10).capacity() >= 10);
        assert!(reserved(u64::MAX).capacity() <= MAX_RESERVED as usize);
        assert!(reserved(u64::MAX).is_empty());
    }
}
