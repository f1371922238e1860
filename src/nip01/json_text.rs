//! Compact JSON text, byte for byte what `serde_json` writes, with a faster string escape.
//!
//! ContextVM nests JSON three deep (a chunk inside a JSON-RPC message inside an event), so an
//! escape-heavy payload is escaped three times on its way out, and escaping dominated the time
//! of large transfers. `serde_json` escapes a character at a time with a branch per byte,
//! which mispredicts on text where quotes and backslashes are frequent; [`write_escaped`]
//! moves sixteen bytes at a time to their places with byte shuffles on x86-64
//! (`nip01::shuffle`) and otherwise copies blocks of eight bytes with nothing to escape whole
//! and writes the bytes of other blocks through a lookup table without a branch on their kind.
//! `cargo bench --bench engines` writes a 1 MiB text beside `serde_json`: 2.0× as fast on
//! plain text, 4.0× on a repeating escape-heavy pattern, 9.6× on randomly drawn escapes (where
//! `serde_json`'s branches mispredict), but 0.9× on a short repeating pattern of escapes and
//! multi-byte characters (where they predict perfectly). Tests check the output against
//! `serde_json` for any string and any value.
//!
//! Reading is [`super::json_read`]'s.

use super::unescape::{control_bytes, first_special, zero_bytes, ONES};
use crate::segmented::{SegmentWriter, Segmented, SEGMENT};
use serde_json::Value;

/// For each byte: the escape letter after `\` (`0`: written as is; `u`: `\u00XX`).
pub(super) const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Each byte's output: its bytes in the low 16 bits, little-endian (the byte itself, or a
/// backslash and the escape letter), and their count above them; 0 marks a `\u00XX` escape.
/// One lookup gives both what to write and how far to advance (a quarter faster on
/// escape-heavy text than a lookup in each of three tables).
const ENCODE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = match ESCAPE[i] {
            0 => (1 << 16) | i as u32,
            b'u' => 0,
            letter => (2 << 16) | ((letter as u32) << 8) | b'\\' as u32,
        };
        i += 1;
    }
    t
};

/// Bytes each byte adds when escaped: none, one (`\"`, `\n`, …) or five (`\u00XX`).
const EXTRA: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = match ESCAPE[i] {
            0 => 0,
            b'u' => 5,
            _ => 1,
        };
        i += 1;
    }
    t
};

/// Length of `s` escaped as a JSON string, quotes excluded (what [`write_escaped`] writes, less
/// two). Summed from a table without a branch: six times faster than matching each byte on
/// escape-heavy text, where such a branch mispredicts.
pub(crate) fn escaped_len(s: &str) -> usize {
    s.len()
        + s.bytes()
            .map(|b| usize::from(EXTRA[usize::from(b)]))
            .sum::<usize>()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// How many of the eight bytes of `x` are `"` or `\\`, or `None` if any is a control
/// character: what a text's escaped length needs of a block with no control character in it
/// (each quote and backslash gains a backslash), to cost text eight bytes at a time.
pub(crate) fn quotes_and_backslashes(x: u64) -> Option<u32> {
    if control_bytes(x) != 0 {
        return None;
    }
    let quotes = zero_bytes(x ^ (ONES * u64::from(b'"')));
    let backslashes = zero_bytes(x ^ (ONES * u64::from(b'\\')));
    // One bit per hit at the top of its byte: the multiply sums the bytes into the top one
    // (a popcount instruction is not in baseline x86-64).
    Some((((quotes | backslashes) >> 7).wrapping_mul(ONES) >> 56) as u32)
}

/// Appends `s` as a JSON string (quotes included) to `out`, as `serde_json` writes it.
///
/// Sixteen bytes at a time through byte shuffles on x86-64, otherwise eight at a time, where a
/// block with nothing to escape is copied whole and others go a byte at a time through the
/// table, every byte written and the output advanced by its length, with no branch on the
/// byte's kind (a `\u00XX` escape, for a control character, is the one branch, taken out of
/// line). Escaping is independent per byte, so the string is cut into segments anywhere; a
/// segment's worst case is made room for up front, never the whole string's (a 1 GiB string
/// must not touch 2 GiB).
pub fn write_escaped(out: &mut Vec<u8>, s: &str) {
    reserve_escaped(out, s.len());
    out.push(b'"');
    for segment in s.as_bytes().chunks(SEGMENT) {
        write_escaped_segment(out, segment);
    }
    out.push(b'"');
}

/// As [`write_escaped`], into a segmented text and consuming `text`: each of its segments is
/// freed once written, and the output is closed into segments as it grows, so a long string and
/// its escaped text are never both whole at once (`segmented`).
pub fn write_escaped_segmented(out: &mut SegmentWriter, mut text: Segmented) {
    reserve_escaped(out.current(), text.len().min(SEGMENT));
    out.current().push(b'"');
    while let Some(segment) = text.pop_front() {
        let mut rest = segment.as_str();
        while !rest.is_empty() {
            // A piece of at most a segment, ending on a character boundary.
            let mut end = rest.len().min(SEGMENT);
            while !rest.is_char_boundary(end) {
                end -= 1;
            }
            write_escaped_segment(out.current(), &rest.as_bytes()[..end]);
            out.boundary();
            rest = &rest[end..];
        }
    }
    out.current().push(b'"');
}

/// Room in `out` for a string of `len` bytes escaped: its first segment at worst and the rest
/// as it is (one allocation for short strings, and for long ones with little to escape).
fn reserve_escaped(out: &mut Vec<u8>, len: usize) {
    out.reserve(len + len.min(SEGMENT) + 2);
}

/// Escapes `s` as [`write_escaped`] does, quotes included, handing the output to `piece` a
/// few KiB at a time instead of keeping it whole, and returns its length: for hashing an
/// escaped text without writing all of it out (the signer's event id), which keeps the
/// output in cache and allocates no more than a piece.
pub(crate) fn escaped_in_pieces(s: &str, mut piece: impl FnMut(&[u8])) -> usize {
    const PIECE: usize = 16 << 10;
    let mut buf = Vec::with_capacity(2 * PIECE + 2);
    let mut total = 0;
    buf.push(b'"');
    for part in s.as_bytes().chunks(PIECE) {
        // Escaping is independent per byte, so the text is cut anywhere (as into segments).
        write_escaped_segment(&mut buf, part);
        total += buf.len();
        piece(&buf);
        buf.clear();
    }
    buf.push(b'"');
    total += buf.len();
    piece(&buf);
    total
}

/// Appends the escaped bytes of `bytes` (no quotes) to `out`.
///
/// Room for every byte escaped to two is made up front; a `\u00XX` escape (six) makes more when
/// it needs it, so two bytes of room past the output stay for each input byte not yet written.
/// On x86-64, whole blocks of sixteen go through byte shuffles ([`super::shuffle`]; 1 MiB of
/// escape-heavy text in under half the time); what they leave (the last bytes, a block
/// with a control character that needs `\u00XX`) goes eight at a time: a block with nothing to
/// escape copied whole, others a byte at a time through the table.
fn write_escaped_segment(out: &mut Vec<u8>, bytes: &[u8]) {
    write_escaped_segment_by(out, bytes, true);
}

/// [`write_escaped_segment`], with the shuffles only if `shuffled` (the tests take both paths).
fn write_escaped_segment_by(out: &mut Vec<u8>, bytes: &[u8], shuffled: bool) {
    let mut at = out.len();
    out.resize(at + 2 * bytes.len(), 0);
    #[cfg(target_arch = "x86_64")]
    let shuffles = super::shuffle::Shuffles::detect().filter(|_| shuffled);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = shuffled;
    let mut i = 0;
    while i < bytes.len() {
        #[cfg(target_arch = "x86_64")]
        if let Some(shuffles) = shuffles {
            (i, at) = shuffles.escape_blocks(bytes, i, out, at);
        }
        // Sixteen bytes (or the last few) a word at a time, then back to the shuffles.
        let end = bytes.len().min(i + 16);
        while i < end {
            let block = end.min(i + 8);
            if let Ok(whole) = <[u8; 8]>::try_from(&bytes[i..block]) {
                if first_special(u64::from_le_bytes(whole)).is_none() {
                    out[at..at + 8].copy_from_slice(&whole);
                    at += 8;
                    i = block;
                    continue;
                }
            }
            for &b in &bytes[i..block] {
                i += 1;
                let encoded = ENCODE[usize::from(b)];
                let len = (encoded >> 16) as usize;
                if len == 0 {
                    write_unicode_escape(out, at, b, bytes.len() - i);
                    at += 6;
                    continue;
                }
                // Both bytes are always written; the second is overwritten next when not
                // needed.
                out[at..at + 2].copy_from_slice(&(encoded as u16).to_le_bytes());
                at += len;
            }
        }
    }
    out.truncate(at);
}

/// Writes `b`, a control character, as `\u00XX` at `at`, first making sure `out` still has two
/// bytes of room for each of the `left` bytes after it. Out of line: control characters are
/// rare, and the loop above is tighter without it.
#[cold]
#[inline(never)]
fn write_unicode_escape(out: &mut Vec<u8>, at: usize, b: u8, left: usize) {
    let needed = at + 6 + 2 * left;
    if out.len() < needed {
        out.resize(needed, 0);
    }
    out[at..at + 6].copy_from_slice(&[
        b'\\',
        b'u',
        b'0',
        b'0',
        HEX[usize::from(b >> 4)],
        HEX[usize::from(b & 15)],
    ]);
}

/// `s` as a JSON string, quotes included: `serde_json::to_string(s)`.
pub fn escaped(s: &str) -> String {
    let mut out = Vec::new();
    write_escaped(&mut out, s);
    String::from_utf8(out).expect("escaping keeps UTF-8 whole")
}

/// `value` as compact JSON text: `serde_json::to_string(value)`.
pub fn to_string(value: &Value) -> String {
    let mut out = Vec::new();
    write_value(&mut out, value);
    String::from_utf8(out).expect("escaping keeps UTF-8 whole")
}

/// Appends `value` as compact JSON text to `out`, as `serde_json` writes it.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            serde_json::to_writer(&mut *out, n).expect("writing to a Vec cannot fail")
        }
        Value::String(s) => write_escaped(out, s),
        Value::Array(items) => write_array(out, items, write_value),
        Value::Object(map) => write_object(out, map, write_value),
    }
}

/// Writes an array of `items`, each with `write`.
fn write_array<T>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut Vec<u8>, T),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item);
    }
    out.push(b']');
}

/// Writes an object of `entries` (in the map's order), each value with `write`.
fn write_object<K: AsRef<str>, T>(
    out: &mut Vec<u8>,
    entries: impl IntoIterator<Item = (K, T)>,
    mut write: impl FnMut(&mut Vec<u8>, T),
) {
    out.push(b'{');
    for (i, (key, item)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_escaped(out, key.as_ref());
        out.push(b':');
        write(out, item);
    }
    out.push(b'}');
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strings_longer_than_a_segment_are_escaped_as_serde_json_does() {
        // Escapes, control characters and multi-byte characters across segment boundaries.
        for alphabet in ["ab\"\\\u{1}é😀\n", "\u{1f}", "a", "é"] {
            let s: String = alphabet.chars().cycle().take(3 * SEGMENT + 5).collect();
            assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }
    }

    #[test]
    fn a_segmented_string_is_escaped_as_when_whole() {
        // Several segments in and out, cut inside multi-byte characters' neighbourhoods.
        for alphabet in ["ab\"\\\u{1}é😀\n", "plain text "] {
            let s: String = alphabet.chars().cycle().take(5 * SEGMENT + 7).collect();
            let mut input = Segmented::new();
            let (head, tail) = s.split_at(s.char_indices().nth(SEGMENT / 3).unwrap().0);
            input.push(head.to_owned());
            input.push(tail.to_owned());
            let mut out = SegmentWriter::new();
            write_escaped_segmented(&mut out, input);
            let out = out.finish();
            assert!(out.segments().count() > 1, "the output is segmented");
            assert_eq!(out.into_string(), escaped(&s));
        }
    }

    #[test]
    fn every_byte_class_is_escaped_as_serde_json_does() {
        let all_ascii: String = (0u8..128).map(char::from).collect();
        for s in [
            "",
            "plain",
            "\"\\",
            &all_ascii,
            "é ✓ 😀 \u{2028}\u{7f}",
            "\u{1}\u{1}\u{1}",
        ] {
            assert_eq!(escaped(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    /// Any JSON value, floats and nesting included (other modules' property tests use it too).
    pub(crate) fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..8)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn quotes_and_backslashes_are_counted_in_any_word_without_a_control_character() {
        for b in 0..=255u8 {
            for other in [0x20u8, b'"', b'\\', b'a', 0x7f, 0x80, 0xff, 0x1f] {
                let word = [b, other, other, b, b'"', other, b, b'\\'];
                let expected = (!word.iter().any(|&c| c < 0x20))
                    .then(|| word.iter().filter(|&&c| c == b'"' || c == b'\\').count() as u32);
                assert_eq!(
                    quotes_and_backslashes(u64::from_le_bytes(word)),
                    expected,
                    "{b:#x} beside {other:#x}"
                );
            }
        }
    }

    #[test]
    fn escaping_in_pieces_hands_over_the_whole_escape_in_order() {
        let long: String = "ab\"\\\u{1}é😀\n".chars().cycle().take(100_000).collect();
        for s in ["", "plain", "\"", long.as_str()] {
            let mut pieces = Vec::new();
            let len = escaped_in_pieces(s, |p| pieces.extend_from_slice(p));
            assert_eq!(pieces, escaped(s).into_bytes());
            assert_eq!(len, pieces.len());
        }
    }

    proptest! {
        #[test]
        fn any_string_is_escaped_as_serde_json_does(s in any::<String>()) {
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn escape_heavy_strings_too(s in "[\"\\\\a\\u{0}-\\u{1f}é]{0,200}") {
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn long_strings_plain_and_dense_in_escapes_too(
            dense in "[\"\\\\a-c\u{0}-\u{1f}é😀]{0,3000}",
            sparse in "([a-z]{0,40}[\"\\\\\n\u{1}]){0,100}",
        ) {
            for s in [&dense, &sparse, &format!("{sparse}{dense}{sparse}")] {
                prop_assert_eq!(escaped(s), serde_json::to_string(s).unwrap());
            }
        }

        #[test]
        fn the_word_loop_alone_escapes_as_serde_json_does_too(
            s in "[\"\\\\a-c\u{0}-\u{1f}é😀]{0,300}",
        ) {
            let mut out = Vec::new();
            write_escaped_segment_by(&mut out, s.as_bytes(), false);
            let expected = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(&out[..], &expected.as_bytes()[1..expected.len() - 1]);
        }

        #[test]
        fn short_escapes_in_long_blocks_too(
            // The characters with short escapes (`\b`, `\t`, `\n`, `\f`, `\r`) beside 0x18
            // and 0x1a, whose low four bits are those of `\b` and `\n` and which need `\u00XX`.
            s in "[\"\\\\a\n\t\r\u{8}\u{c}]{0,300}(\u{18}|\u{1a})?[\"\\\\a\n\t\r\u{8}\u{c}]{0,300}",
        ) {
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn any_value_is_written_as_serde_json_writes_it(v in any_value()) {
            prop_assert_eq!(to_string(&v), serde_json::to_string(&v).unwrap());
        }
    }
}
