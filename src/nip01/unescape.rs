//! The byte-level pieces of reading a JSON string ([`super::json_read`]): finding the next byte
//! that needs attention, decoding short escapes through a table, and decoding 64 bytes at once
//! when escapes are dense.
//!
//! ContextVM text nests JSON three deep, so an escape-heavy payload reaches a receiver as runs of
//! backslashes (`\\\"` for one quote in a chunk's data). Decoding that a byte per step carries a
//! dependency from each byte to the next (is this byte escaped?). [`BlockDecoder`] works out which
//! bytes of 64 are escaped at once from a mask of their backslashes — the carry trick of
//! simdjson's `find_escaped` (Langdale and Lemire, "Parsing gigabytes of JSON per second", 2019) —
//! so the byte loop that follows only writes and advances, and the loop-carried state is the
//! output position alone.

/// What each byte writes: `[0]` outside an escape (itself), `[1]` just after a `\\` (what the
/// escape stands for).
pub(super) const DECODE: [[u8; 256]; 2] = {
    let mut t = [[0u8; 256]; 2];
    let mut i = 0;
    while i < 256 {
        t[0][i] = i as u8;
        i += 1;
    }
    t[1][b'"' as usize] = b'"';
    t[1][b'\\' as usize] = b'\\';
    t[1][b'/' as usize] = b'/';
    t[1][b'b' as usize] = 0x08;
    t[1][b'f' as usize] = 0x0c;
    t[1][b'n' as usize] = b'\n';
    t[1][b'r' as usize] = b'\r';
    t[1][b't' as usize] = b'\t';
    t
};

/// Bytes the table loop stops at: outside an escape the closing quote and control characters;
/// just after a `\\`, `u` and anything that is not an escape.
pub(super) const STOP: [[bool; 256]; 2] = {
    let mut t = [[false; 256]; 2];
    let mut i = 0;
    while i < 256 {
        t[0][i] = i < 0x20 || i == b'"' as usize;
        t[1][i] = DECODE[1][i] == 0;
        i += 1;
    }
    t
};

pub(super) const ONES: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Where the first `"`, `\` or control character is in the 8 bytes of `x` (little-endian), if
/// any. The has-zero-byte test may flag bytes above a true hit, never below, so the lowest flag
/// is exact.
pub(super) fn first_special(x: u64) -> Option<usize> {
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let flags = x.wrapping_sub(ONES * 0x20) & !x & HIGH
        | has_zero(x ^ (ONES * u64::from(b'"')))
        | has_zero(x ^ (ONES * u64::from(b'\\')));
    (flags != 0).then(|| flags.trailing_zeros() as usize / 8)
}

/// How many bytes from `from` come before the next `"`, `\` or control character, or `None` if
/// the text ends first.
pub(super) fn plain_run(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let mut blocks = rest.chunks_exact(8);
    for (n, block) in blocks.by_ref().enumerate() {
        if let Some(k) = first_special(u64::from_le_bytes(block.try_into().expect("8 bytes"))) {
            return Some(8 * n + k);
        }
    }
    let tail = blocks.remainder();
    let k = tail
        .iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')?;
    Some(rest.len() - tail.len() + k)
}

/// The high bit of every byte of `x` that is zero, exactly (no borrow between bytes).
pub(super) fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW7) + LOW7) | x) & HIGH
}

/// The high bit of every byte of `x` below 0x20, exactly.
pub(super) fn control_bytes(x: u64) -> u64 {
    !(((x & LOW7) + ONES * 0x60) | x) & HIGH
}

/// One bit per byte from the high bits `high` leaves set: bit `k` for byte `k`. The multiplier
/// moves the bit of byte `k` (at `8k` after the shift) to `56 + k`; no two products share a
/// position, so nothing carries.
fn gather(high: u64) -> u64 {
    ((high >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

/// The bytes of a block that are escaped (follow a backslash that is not itself escaped), from
/// the mask of its backslashes and whether the block before left its last backslash open;
/// and whether this block leaves its own open. Runs of backslashes pair off from their start:
/// a run of odd length escapes the byte after it.
pub(super) fn escaped_bytes(backslash: u64, carried: bool) -> (u64, bool) {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let carried = u64::from(carried);
    // A backslash escaped by the block before opens nothing.
    let backslash = backslash & !carried;
    let follows = backslash << 1 | carried;
    let odd_starts = backslash & !EVEN & !follows;
    // Adding a run's start to the run carries out of its end; the carry out of the top bit is
    // an open backslash at the end of the block.
    let (even_started, open) = odd_starts.overflowing_add(backslash);
    let invert = even_started << 1;
    ((EVEN ^ invert) & follows, open)
}

/// How this machine decodes blocks of 64 bytes: the byte shuffles where the CPU has them,
/// otherwise a word at a time. Chosen once per string, so the choice is not made again for
/// every block.
#[derive(Clone, Copy)]
pub(super) struct BlockDecoder {
    #[cfg(target_arch = "x86_64")]
    shuffles: Option<super::shuffle::Shuffles>,
}

impl BlockDecoder {
    /// This machine's decoder.
    pub(super) fn detect() -> Self {
        BlockDecoder {
            #[cfg(target_arch = "x86_64")]
            shuffles: super::shuffle::Shuffles::detect(),
        }
    }

    /// Decodes the 64 bytes of `block` into `out` when none of them ends the string or needs
    /// more than the table (a closing quote, a control character, `\u`, an invalid escape),
    /// given whether the block before left a backslash open; returns how many bytes it wrote
    /// and whether this block leaves a backslash open. `None` when the block needs the
    /// byte-at-a-time path; `out` may then hold anything.
    pub(super) fn decode_block(
        self,
        block: &[u8; 64],
        carried: bool,
        out: &mut [u8; 64],
    ) -> Option<(usize, bool)> {
        #[cfg(target_arch = "x86_64")]
        if let Some(shuffles) = self.shuffles {
            return shuffles.decode_block(block, carried, out);
        }
        decode_block_by_words(block, carried, out)
    }
}

/// [`BlockDecoder::decode_block`] on any machine, a word at a time.
fn decode_block_by_words(
    block: &[u8; 64],
    carried: bool,
    out: &mut [u8; 64],
) -> Option<(usize, bool)> {
    let mut words = [0u64; 8];
    let mut backslash = 0u64;
    let mut quote = 0u64;
    let mut control = 0u64;
    for (w, word) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        words[w] = x;
        backslash |= gather(zero_bytes(x ^ (ONES * u64::from(b'\\')))) << (8 * w);
        quote |= gather(zero_bytes(x ^ (ONES * u64::from(b'"')))) << (8 * w);
        control |= gather(control_bytes(x)) << (8 * w);
    }
    let (escaped, open) = escaped_bytes(backslash, carried);
    if quote & !escaped | control != 0 {
        return None;
    }
    // Every byte is written at `n`; the output advances past it unless it opens an escape.
    // `\\`, `\"` and `\/` stand for their second byte (the outer layers of nested JSON are
    // all `\\` and `\"`), so the block less its opening backslashes is written first, from
    // the words already read: a word that opens no escape in one store.
    let kept = !(backslash & !escaped);
    let mut n = 0;
    for (w, &x) in words.iter().enumerate() {
        let kept = (kept >> (8 * w)) as u8;
        if kept == u8::MAX {
            // `n <= 8 * w`: the eight bytes fit in the 64.
            out[n..n + 8].copy_from_slice(&x.to_le_bytes());
            n += 8;
            continue;
        }
        for t in 0..8 {
            out[n & 63] = (x >> (8 * t)) as u8;
            n += usize::from(kept >> t) & 1;
        }
    }
    decode_other_escapes(block, escaped & !(backslash | quote), kept, out)?;
    Some((n, open))
}

/// Writes the escapes of `block` other than `\\`, `\"` (and `\/`, which stands for itself too)
/// — `\n`, `\t`, ... one in a line of text — each at its place in `out`: the count of bytes
/// `kept` before it. `others` marks their escaped bytes. `None` at `\u` or anything that is no
/// escape: the block needs the byte-at-a-time path.
pub(super) fn decode_other_escapes(
    block: &[u8; 64],
    mut others: u64,
    kept: u64,
    out: &mut [u8; 64],
) -> Option<()> {
    while others != 0 {
        let k = others.trailing_zeros() as usize;
        others &= others - 1;
        let decoded = DECODE[1][usize::from(block[k])];
        if decoded == 0 {
            return None;
        }
        out[(kept & ((1u64 << k) - 1)).count_ones() as usize] = decoded;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Which bytes are escaped, a byte at a time: the reference [`escaped_bytes`] must match.
    fn escaped_one_by_one(bytes: &[u8], mut open: bool) -> (u64, bool) {
        let mut escaped = 0;
        for (k, &b) in bytes.iter().enumerate() {
            if open {
                escaped |= 1 << k;
                open = false;
            } else {
                open = b == b'\\';
            }
        }
        (escaped, open)
    }

    fn mask_of(bytes: &[u8], byte: u8) -> u64 {
        bytes
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == byte)
            .fold(0, |m, (k, _)| m | 1 << k)
    }

    /// Blocks of backslashes and a few other bytes, so runs of every length meet block edges.
    fn block() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![
                4 => Just(b'\\'),
                1 => Just(b'"'),
                1 => Just(b'n'),
                1 => Just(b'u'),
                1 => Just(b'a'),
                1 => Just(0x1f_u8),
                1 => Just(0xc3_u8),
            ],
            64,
        )
    }

    /// Blocks of what nested JSON holds — short escapes, plain and multi-byte text — with a rare
    /// quote or control character (about one piece in sixty), so about half of the blocks
    /// decode whole and the rest stop where the string loop would.
    fn decodable_block() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![
                40 => Just(&b"\\\\"[..]),
                40 => Just(&b"\\\""[..]),
                20 => Just(&b"\\n"[..]),
                10 => Just(&b"\\t"[..]),
                10 => Just(&b"\\/"[..]),
                40 => Just(&b"a"[..]),
                10 => Just("é".as_bytes()),
                2 => Just(&b"\""[..]),
                1 => Just(&[0x1f_u8][..]),
            ],
            64,
        )
        .prop_map(|pieces| pieces.concat()[..64].to_vec())
    }

    proptest! {
        #[test]
        fn both_decoders_agree_on_blocks_of_escapes(bytes in decodable_block(), open: bool) {
            let block: [u8; 64] = bytes.try_into().unwrap();
            let (mut by_words, mut out) = ([0u8; 64], [0u8; 64]);
            let words = decode_block_by_words(&block, open, &mut by_words);
            let got = BlockDecoder::detect().decode_block(&block, open, &mut out);
            let words = words.map(|(n, open)| (by_words[..n].to_vec(), open));
            prop_assert_eq!(words, got.map(|(n, open)| (out[..n].to_vec(), open)));
        }

        #[test]
        fn escaped_bytes_are_those_a_byte_at_a_time_finds(bytes in block(), open: bool) {
            let backslash = mask_of(&bytes, b'\\');
            prop_assert_eq!(escaped_bytes(backslash, open), escaped_one_by_one(&bytes, open));
        }

        #[test]
        fn a_decoded_block_is_the_table_decode_of_each_byte(bytes in block(), open: bool) {
            let block: [u8; 64] = bytes.clone().try_into().unwrap();
            // Word by word (any machine) and as this machine decodes (shuffles on x86-64).
            let mut by_words = [0u8; 64];
            let mut out = [0u8; 64];
            let words = decode_block_by_words(&block, open, &mut by_words);
            let got = BlockDecoder::detect().decode_block(&block, open, &mut out);
            prop_assert_eq!(words.is_some(), got.is_some());
            if let (Some((n, _)), Some((m, _))) = (words, got) {
                prop_assert_eq!(&by_words[..n], &out[..m]);
            }
            prop_assert_eq!(words.map(|w| w.1), got.map(|g| g.1));
            // A byte at a time through the tables, stopping where the string loop would.
            let mut expected = Vec::new();
            let mut escaped = usize::from(open);
            let mut stopped = false;
            for &b in &bytes {
                if STOP[escaped][usize::from(b)] {
                    stopped = true;
                    break;
                }
                let opens = escaped == 0 && b == b'\\';
                if !opens {
                    expected.push(DECODE[escaped][usize::from(b)]);
                }
                escaped = usize::from(opens);
            }
            match got {
                Some((n, open_after)) => {
                    prop_assert!(!stopped);
                    prop_assert_eq!(&out[..n], &expected[..]);
                    prop_assert_eq!(open_after, escaped == 1);
                }
                None => prop_assert!(stopped),
            }
        }
    }

    #[test]
    fn the_byte_masks_are_exact_next_to_every_byte_value() {
        for b in 0..=255u8 {
            for other in [0u8, 0x1f, 0x20, b'"', b'\\', 0x7f, 0x80, 0xff] {
                let x = u64::from_le_bytes([other, b, other, b, b, other, other, b]);
                let expect = |hit: bool| if hit { 0b1001_1010 } else { 0 };
                let others = |hit: bool| if hit { 0b0110_0101 } else { 0 };
                assert_eq!(
                    gather(control_bytes(x)),
                    expect(b < 0x20) | others(other < 0x20),
                    "{b:#x} beside {other:#x}"
                );
                assert_eq!(
                    gather(zero_bytes(x ^ (ONES * u64::from(b'"')))),
                    expect(b == b'"') | others(other == b'"'),
                    "{b:#x} beside {other:#x}"
                );
            }
        }
    }
}
