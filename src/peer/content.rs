//! Payload text of the content classes workloads and tools use.

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
    // One loop per class, so the class is not matched again for every character; the ASCII
    // classes push bytes. Every class draws from `rng` exactly as it always has, so a seed's
    // payload is the same text.
    match content {
        ContentClass::Ascii => ascii_text(
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ",
            size,
            rng,
        ),
        ContentClass::EscapeHeavy => ascii_text(b"\"\\\"\\a\n", size, rng),
        ContentClass::Utf8 => chars_text(size, || {
            ['é', 'ß', '€', '中', '😀', '🦀'][rng.random_range(0..6)]
        }),
        ContentClass::Random => chars_text(size, || loop {
            if let Some(c) = char::from_u32(rng.random_range(0..0x11_0000)) {
                break c;
            }
        }),
    }
}

/// `size` bytes drawn uniformly from the ASCII `alphabet`.
fn ascii_text(alphabet: &[u8], size: usize, rng: &mut impl Rng) -> String {
    debug_assert!(alphabet.is_ascii());
    let text: Vec<u8> = (0..size)
        .map(|_| alphabet[rng.random_range(0..alphabet.len())])
        .collect();
    String::from_utf8(text).expect("an ASCII alphabet")
}

/// Characters from `draw` until the text holds at least `size` bytes.
fn chars_text(size: usize, mut draw: impl FnMut() -> char) -> String {
    let mut text = String::with_capacity(size + 4);
    while text.len() < size {
        text.push(draw());
    }
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
            for (seed, size) in [(1, 0), (2, 1), (3, 7), (4, 4096)] {
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
}
