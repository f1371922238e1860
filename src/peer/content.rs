//! Payload text of the content classes workloads and tools use.

use crate::segmented::{Segmented, SEGMENT};
use rand::Rng;
use std::fmt;
use std::str::FromStr;

/// What the payload text is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentClass {
    /// Letters, digits and spaces.
    Ascii,
    /// Mostly `"` and `\`, which cost four bytes each once published.
    EscapeHeavy,
    /// Two-, three- and four-byte UTF-8 characters.
    Utf8,
    /// Any Unicode scalar values, control characters included.
    Random,
}

impl ContentClass {
    /// Every class, by its name in scenarios.
    pub const NAMES: [&'static str; 4] = ["ascii", "escape-heavy", "utf8", "random"];
}

impl FromStr for ContentClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ascii" => Ok(ContentClass::Ascii),
            "escape-heavy" => Ok(ContentClass::EscapeHeavy),
            "utf8" => Ok(ContentClass::Utf8),
            "random" => Ok(ContentClass::Random),
            other => Err(format!(
                "unknown content class {other:?}: expected ascii, escape-heavy, utf8 or random"
            )),
        }
    }
}

impl fmt::Display for ContentClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ContentClass::Ascii => "ascii",
            ContentClass::EscapeHeavy => "escape-heavy",
            ContentClass::Utf8 => "utf8",
            ContentClass::Random => "random",
        })
    }
}

/// About `size` bytes of text of a content class, drawn from `rng`.
pub fn payload_text(content: ContentClass, size: usize, rng: &mut impl Rng) -> String {
    payload_segments(content, size, rng).into_string()
}

/// [`payload_text`] in segments of about [`SEGMENT`] bytes, so a very large payload can be
/// freed a segment at a time as it is serialised (the same text, drawn the same way).
pub fn payload_segments(content: ContentClass, size: usize, rng: &mut impl Rng) -> Segmented {
    // One loop per class, so the class is not matched again for every character; the ASCII
    // classes push bytes. Every class draws from `rng` exactly as it always has, so a seed's
    // payload is the same text.
    match content {
        ContentClass::Ascii => ascii_segments(
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ",
            size,
            rng,
        ),
        ContentClass::EscapeHeavy => ascii_segments(b"\"\\\"\\a\n", size, rng),
        ContentClass::Utf8 => chars_segments(size, || {
            ['é', 'ß', '€', '中', '😀', '🦀'][rng.random_range(0..6)]
        }),
        ContentClass::Random => chars_segments(size, || loop {
            if let Some(c) = char::from_u32(rng.random_range(0..0x11_0000)) {
                break c;
            }
        }),
    }
}

/// [`ascii_text`] of `size` bytes, a segment at a time.
fn ascii_segments(alphabet: &[u8], size: usize, rng: &mut impl Rng) -> Segmented {
    let mut text = Segmented::new();
    let mut left = size;
    while left > 0 {
        let piece = left.min(SEGMENT);
        text.push(ascii_text(alphabet, piece, rng));
        left -= piece;
    }
    text
}

/// `size` bytes drawn uniformly from the ASCII `alphabet`.
///
/// Each byte is `alphabet[rng.random_range(0..alphabet.len())]`, drawn as rand 0.9 draws it
/// (Canon's method on one `u32`, and a second `u32` in the rare case the first is biased),
/// written out here so the loop is a multiply and a table lookup per byte rather than the
/// general range sampler's checks: a seventh of a `strfry-1mib-escape` run went to drawing its
/// payload. `a_seed_draws_the_same_payload_as_it_always_has` checks it against
/// `random_range`, byte for byte and to the rng's state after.
fn ascii_text(alphabet: &[u8], size: usize, rng: &mut impl Rng) -> String {
    debug_assert!(alphabet.is_ascii() && !alphabet.is_empty());
    let range = u32::try_from(alphabet.len()).expect("a short alphabet");
    let mut text = vec![0u8; size];
    for byte in &mut text {
        let wide = u64::from(rng.next_u32()) * u64::from(range);
        let (mut index, low) = ((wide >> 32) as u32, wide as u32);
        if low > range.wrapping_neg() {
            let again = (u64::from(rng.next_u32()) * u64::from(range)) >> 32;
            index += u32::from(low.checked_add(again as u32).is_none());
        }
        *byte = alphabet[index as usize];
    }
    String::from_utf8(text).expect("an ASCII alphabet")
}

/// Characters from `draw` until the text holds at least `size` bytes, in segments of about
/// [`SEGMENT`] bytes.
fn chars_segments(size: usize, mut draw: impl FnMut() -> char) -> Segmented {
    let mut text = Segmented::new();
    let mut segment = String::with_capacity(size.min(SEGMENT) + 4);
    let mut total = 0;
    while total < size {
        let ch = draw();
        segment.push(ch);
        total += ch.len_utf8();
        if segment.len() >= SEGMENT {
            text.push(std::mem::replace(
                &mut segment,
                String::with_capacity((size - total).min(SEGMENT) + 4),
            ));
        }
    }
    text.push(segment);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// The per-character loop `payload_text` replaced: what a seed's payload has always been.
    fn drawn_char_by_char(content: ContentClass, size: usize, rng: &mut impl Rng) -> String {
        let mut text = String::new();
        while text.len() < size {
            text.push(match content {
                ContentClass::Ascii => {
                    const A: &[u8] =
                        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
                    A[rng.random_range(0..A.len())] as char
                }
                ContentClass::EscapeHeavy => {
                    ['"', '\\', '"', '\\', 'a', '\n'][rng.random_range(0..6)]
                }
                ContentClass::Utf8 => ['é', 'ß', '€', '中', '😀', '🦀'][rng.random_range(0..6)],
                ContentClass::Random => loop {
                    if let Some(c) = char::from_u32(rng.random_range(0..0x11_0000)) {
                        break c;
                    }
                },
            });
        }
        text
    }

    #[test]
    fn a_seed_draws_the_same_payload_as_it_always_has() {
        for content in [
            ContentClass::Ascii,
            ContentClass::EscapeHeavy,
            ContentClass::Utf8,
            ContentClass::Random,
        ] {
            for (seed, size) in [(1, 0), (2, 1), (3, 7), (4, 4096), (5, 2 * SEGMENT + 5)] {
                let mut a = ChaCha8Rng::seed_from_u64(seed);
                let mut b = ChaCha8Rng::seed_from_u64(seed);
                assert_eq!(
                    payload_text(content, size, &mut a),
                    drawn_char_by_char(content, size, &mut b),
                    "{content} seed {seed} size {size}"
                );
                // The stream goes on from the same place too.
                assert_eq!(a.random::<u64>(), b.random::<u64>());
            }
        }
    }

    /// Words from a script, then zeros: an rng whose draws a test chooses.
    struct Scripted(std::vec::IntoIter<u32>);

    impl rand::RngCore for Scripted {
        fn next_u32(&mut self) -> u32 {
            self.0.next().unwrap_or(0)
        }
        fn next_u64(&mut self) -> u64 {
            u64::from(self.next_u32()) | u64::from(self.next_u32()) << 32
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            dest.iter_mut().for_each(|b| *b = self.next_u32() as u8);
        }
    }

    #[test]
    fn a_biased_draw_takes_a_second_word_as_random_range_does() {
        // Words just under a multiple of 2^32 / len are the biased ones (the low half of
        // word × len lands in the top len values), each followed by a word that does and one
        // that does not carry into the index.
        for alphabet in [
            &b"\"\\\"\\a\n"[..],
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ",
        ] {
            let len = alphabet.len() as u64;
            let mut words = Vec::new();
            for j in 1..len {
                let biased = (((j << 32) - 1) / len) as u32;
                if (u64::from(biased) * len) as u32 > (len as u32).wrapping_neg() {
                    words.extend([biased, u32::MAX, biased, 0, 7, biased - 1]);
                }
            }
            assert!(
                words.len() >= 6 * (len as usize / 2),
                "most multiples give a biased word"
            );
            let size = words.len();
            let mut ours = Scripted(words.clone().into_iter());
            let mut theirs = Scripted(words.into_iter());
            let expected: Vec<u8> = (0..size)
                .map(|_| alphabet[theirs.random_range(0..alphabet.len())])
                .collect();
            assert_eq!(ascii_text(alphabet, size, &mut ours).as_bytes(), expected);
            assert_eq!(ours.0.len(), theirs.0.len(), "as many words drawn");
        }
    }
}
