//! A text held as a queue of segments and read once, from the front: each segment is freed as
//! soon as everything in it has been read.
//!
//! A very large transfer passes through a chain of texts, each read once in order while the
//! next is written: the payload while it is serialised, the serialised message while a CEP-22
//! sender cuts it into chunks. As single strings, each would be freed only after its last byte
//! was read, while the next already held most of the payload: two whole copies at once. As
//! segments of about [`SEGMENT`] bytes, what has been read goes back to the allocator as the
//! reading advances, so a 1 GiB download holds about one copy of its payload, with ordinary
//! allocations (as quinn's send buffer holds a stream as a queue of `Bytes`).
//!
//! Offsets are counted from the start of the whole text, including segments already freed.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::ops::Range;

/// The size segments are cut to by writers that produce them.
pub const SEGMENT: usize = 1 << 20;

/// A UTF-8 text as a queue of non-empty segments; every segment boundary is a character
/// boundary.
#[derive(Default, Clone, PartialEq, Eq)]
pub struct Segmented {
    segments: VecDeque<String>,
    /// Offset of the first segment held (the bytes of the freed ones before it).
    start: usize,
    /// Bytes of the whole text, freed segments included.
    len: usize,
}

/// Without the text: a segmented text can be a gigabyte.
impl std::fmt::Debug for Segmented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segmented")
            .field("len", &self.len)
            .field("freed", &self.start)
            .field("segments", &self.segments.len())
            .finish()
    }
}

impl From<String> for Segmented {
    fn from(text: String) -> Self {
        let mut s = Segmented::default();
        s.push(text);
        s
    }
}

impl From<&str> for Segmented {
    fn from(text: &str) -> Self {
        Segmented::from(text.to_owned())
    }
}

impl Segmented {
    /// An empty text.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `text` as a segment (nothing for an empty one).
    pub fn push(&mut self, text: String) {
        if !text.is_empty() {
            self.len += text.len();
            self.segments.push_back(text);
        }
    }

    /// The whole text, when it is held in one segment (or none) and nothing was freed.
    pub fn as_whole(&self) -> Option<&str> {
        match (self.start, self.segments.len()) {
            (0, 0) => Some(""),
            (0, 1) => self.segments.front().map(String::as_str),
            _ => None,
        }
    }

    /// Bytes of the whole text, including what has been freed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the text has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments still held, in order.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().map(String::as_str)
    }

    /// Takes the first segment still held, freeing it from the text.
    pub fn pop_front(&mut self) -> Option<String> {
        let first = self.segments.pop_front()?;
        self.start += first.len();
        Some(first)
    }

    /// The text from offset `from`, at most `max` bytes of it, cut back to a character
    /// boundary: borrowed when it lies in one segment, copied when it spans several. Empty at
    /// the end of the text, and when the first character is longer than `max`.
    ///
    /// # Panics
    /// When `from` lies in a freed segment, past the end, or inside a character.
    pub fn window(&self, from: usize, max: usize) -> Cow<'_, str> {
        assert!(
            from >= self.start && from <= self.len,
            "offset {from} outside {}..={}",
            self.start,
            self.len
        );
        let want = max.min(self.len - from);
        let mut at = self.start;
        let mut pieces: Vec<&str> = Vec::new();
        let mut have = 0;
        for segment in &self.segments {
            let end = at + segment.len();
            if end > from && have < want {
                let lo = from.saturating_sub(at);
                let mut hi = segment.len().min(lo + (want - have));
                // Segments end on character boundaries, so only the last piece is cut back.
                while !segment.is_char_boundary(hi) {
                    hi -= 1;
                }
                pieces.push(&segment[lo..hi]);
                have += hi - lo;
                if hi < segment.len() {
                    break;
                }
            }
            at = end;
            if have == want {
                break;
            }
        }
        match pieces.as_slice() {
            [] => Cow::Borrowed(""),
            [one] => Cow::Borrowed(*one),
            many => Cow::Owned(many.concat()),
        }
    }

    /// A copy of the bytes in `range`, after which every segment that ends at or before
    /// `range.end` is freed: the reader will not come back before it.
    ///
    /// # Panics
    /// When `range` starts in a freed segment, ends past the text, or cuts a character.
    pub fn take(&mut self, range: Range<usize>) -> String {
        let text = self.window(range.start, range.len());
        assert_eq!(text.len(), range.len(), "a range cut a character");
        let text = text.into_owned();
        while self
            .segments
            .front()
            .is_some_and(|s| self.start + s.len() <= range.end)
        {
            self.pop_front();
        }
        text
    }

    /// The whole text as one string.
    ///
    /// # Panics
    /// When a segment has been freed.
    pub fn into_string(mut self) -> String {
        assert_eq!(self.start, 0, "part of the text was freed");
        match self.segments.len() {
            0 => String::new(),
            1 => self.segments.pop_front().expect("one segment"),
            _ => {
                // Each segment freed once copied: the text is held once, not twice.
                let mut whole = String::with_capacity(self.len);
                while let Some(segment) = self.segments.pop_front() {
                    whole.push_str(&segment);
                }
                whole
            }
        }
    }
}

/// Writes a [`Segmented`] text from bytes: bytes go into the current segment, which is closed
/// once it holds [`SEGMENT`] bytes and the writer is at a character boundary.
#[derive(Debug, Default)]
pub struct SegmentWriter {
    done: Segmented,
    current: Vec<u8>,
}

impl SegmentWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The segment being written, to append to; call [`SegmentWriter::boundary`] when what is
    /// written so far ends on a character boundary.
    pub fn current(&mut self) -> &mut Vec<u8> {
        &mut self.current
    }

    /// Says that the bytes written so far end on a character boundary: the current segment is
    /// closed if it is full.
    ///
    /// # Panics
    /// When the bytes written are not UTF-8 (a writer's bug).
    pub fn boundary(&mut self) {
        if self.current.len() >= SEGMENT {
            self.close();
        }
    }

    /// Closes the current segment into a string of its exact size (escaping writers make
    /// room for the worst case, which would otherwise stay allocated), keeping the buffer for
    /// the next segment.
    fn close(&mut self) {
        let segment = std::str::from_utf8(&self.current)
            .expect("segment writers write UTF-8")
            .to_owned();
        self.current.clear();
        self.done.push(segment);
    }

    /// The text written.
    pub fn finish(mut self) -> Segmented {
        self.close();
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn segmented(parts: &[&str]) -> Segmented {
        let mut s = Segmented::new();
        parts.iter().for_each(|p| s.push((*p).to_owned()));
        s
    }

    #[test]
    fn a_window_spans_segments_and_stops_at_a_character_boundary() {
        let s = segmented(&["ab", "cé", "", "😀z"]);
        assert_eq!(s.len(), 10);
        assert_eq!(s.window(0, 2), "ab");
        assert_eq!(s.window(1, 3), "bc");
        assert_eq!(s.window(1, 4), "bcé");
        assert_eq!(s.window(5, 3), "", "the emoji is longer than 3 bytes");
        assert_eq!(s.window(5, 100), "😀z");
        assert_eq!(s.window(10, 5), "");
    }

    #[test]
    fn taking_frees_the_segments_read() {
        let mut s = segmented(&["abc", "def", "ghi"]);
        assert_eq!(s.take(0..2), "ab");
        assert_eq!(
            s.segments().count(),
            3,
            "the first segment is still being read"
        );
        assert_eq!(s.take(2..6), "cdef");
        assert_eq!(s.segments().collect::<Vec<_>>(), ["ghi"]);
        assert_eq!(s.window(6, 9), "ghi");
        assert_eq!(s.len(), 9);
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn a_freed_offset_cannot_be_read() {
        let mut s = segmented(&["abc", "def"]);
        s.take(0..3);
        s.window(1, 1);
    }

    #[test]
    fn the_writer_closes_segments_only_at_boundaries() {
        let mut w = SegmentWriter::new();
        let big = "é".repeat(SEGMENT / 2 + 1);
        w.current().extend_from_slice(big.as_bytes());
        w.boundary();
        w.current().extend_from_slice(b"tail");
        let s = w.finish();
        assert_eq!(s.segments().count(), 2);
        assert_eq!(s.into_string(), big + "tail");
    }

    proptest! {
        #[test]
        fn takes_in_order_give_back_the_text(parts in proptest::collection::vec("\\PC{0,6}", 0..8), cuts in proptest::collection::vec(0usize..40, 0..8)) {
            let whole: String = parts.concat();
            let mut s = Segmented::new();
            parts.iter().for_each(|p| s.push(p.clone()));
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (whole.len() + 1)).filter(|&c| whole.is_char_boundary(c)).collect();
            bounds.push(whole.len());
            bounds.sort_unstable();
            let (mut at, mut rebuilt) = (0, String::new());
            for b in bounds {
                prop_assert_eq!(s.window(at, b - at), &whole[at..b]);
                rebuilt.push_str(&s.take(at..b));
                at = b;
            }
            prop_assert_eq!(rebuilt, whole);
        }
    }
}
