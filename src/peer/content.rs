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
    let mut text = String::with_capacity(size + 4);
    while text.len() < size {
        let ch = match content {
            ContentClass::Ascii => {
                const A: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
                A[rng.random_range(0..A.len())] as char
            }
            ContentClass::EscapeHeavy => ['"', '\\', '"', '\\', 'a', '\n'][rng.random_range(0..6)],
            ContentClass::Utf8 => ['é', 'ß', '€', '中', '😀', '🦀'][rng.random_range(0..6)],
            ContentClass::Random => loop {
                if let Some(c) = char::from_u32(rng.random_range(0..0x11_0000)) {
                    break c;
                }
            },
        };
        text.push(ch);
    }
    text
}
