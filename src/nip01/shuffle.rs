//! Escaping and unescaping JSON strings with x86-64 byte shuffles, eight bytes per shuffle.
//!
//! Escape-heavy text has something to escape in nearly every block, so the byte loops of
//! [`super::json_text`] and [`super::unescape`] handle it a byte at a time. A byte shuffle
//! (SSSE3's `pshufb`) moves every byte of a block to its place in one instruction, given where
//! each goes: escaping spreads eight bytes over up to sixteen, leaving a gap before each byte that
//! needs a backslash; unescaping gathers the bytes an escape keeps. Both places depend only on
//! which bytes of the eight are special, so they come from tables of 256 entries made at
//! compile time. The word-at-a-time code stays as the path of other machines and as the
//! reference the tests compare this one with.
//!
//! `cargo bench --bench engines` writes 1 MiB of escape-heavy text at 2.35 GB/s this way against
//! 0.8 GB/s a word at a time, and reads it at 2.9 GB/s against 1.0 GB/s (2 cores of a shared
//! Intel Xeon; `docs/performance.md` has what it does to whole runs).

use std::arch::x86_64::{
    __m128i, _mm_and_si128, _mm_andnot_si128, _mm_cmpeq_epi8, _mm_cvtsi128_si64, _mm_extract_epi64,
    _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_set_epi64x, _mm_shuffle_epi8,
    _mm_srli_si128,
};

/// Proof that this CPU has the instructions the shuffles use (SSSE3, SSE4.1, POPCNT: every
/// x86-64-v2 CPU). Only [`Shuffles::detect`] makes one.
#[derive(Clone, Copy)]
pub(super) struct Shuffles(());

impl Shuffles {
    /// `Some` when the CPU has the instructions (the standard library caches the answer).
    pub(super) fn detect() -> Option<Self> {
        (std::arch::is_x86_feature_detected!("ssse3")
            && std::arch::is_x86_feature_detected!("sse4.1")
            && std::arch::is_x86_feature_detected!("popcnt"))
        .then_some(Shuffles(()))
    }

    /// Escapes whole blocks of sixteen bytes of `bytes` from `i` into `out` at `at`, until
    /// fewer than sixteen are left or a block holds a control character that needs `\u00XX`;
    /// returns where it stopped in each. `out` must hold two bytes of room past `at` for each
    /// byte of `bytes` from `i` (what every block may take at worst).
    pub(super) fn escape_blocks(
        self,
        bytes: &[u8],
        i: usize,
        out: &mut [u8],
        at: usize,
    ) -> (usize, usize) {
        // SAFETY: a `Shuffles` exists only when `detect` found every feature the function
        // enables.
        #[allow(unsafe_code)]
        unsafe {
            escape_blocks(bytes, i, out, at)
        }
    }

    /// [`super::unescape::BlockDecoder::decode_block`], the same answer for any input.
    pub(super) fn decode_block(
        self,
        block: &[u8; 64],
        carried: bool,
        out: &mut [u8; 64],
    ) -> Option<(usize, bool)> {
        // SAFETY: as in `escape_blocks`.
        #[allow(unsafe_code)]
        unsafe {
            decode_block(block, carried, out)
        }
    }
}

/// Sixteen bytes as a vector (one unaligned load, without a pointer).
#[inline]
#[target_feature(enable = "ssse3,sse4.1,popcnt")]
fn vector(bytes: &[u8; 16]) -> __m128i {
    let (low, high) = bytes.split_at(8);
    let word = |b: &[u8]| i64::from_le_bytes(b.try_into().expect("8 bytes"));
    _mm_set_epi64x(word(high), word(low))
}

/// For each mask of eight bits, where each of sixteen output bytes comes from (`0x80`: none,
/// a zero). With `spread`, every byte in order with a gap before each byte whose bit is set
/// (escaping: the gap takes its backslash); without, only the bytes whose bit is set, in order
/// (unescaping: the bytes an escape keeps).
const fn sources(spread: bool) -> [[u8; 16]; 256] {
    let mut from = [[0x80u8; 16]; 256];
    let mut mask = 0;
    while mask < 256 {
        let mut at = 0;
        let mut k = 0;
        while k < 8 {
            let set = mask >> k & 1 == 1;
            if spread || set {
                at += (spread && set) as usize;
                from[mask][at] = k as u8;
                at += 1;
            }
            k += 1;
        }
        mask += 1;
    }
    from
}

static ESCAPE_SPREAD: [[u8; 16]; 256] = sources(true);
static KEEP_GATHER: [[u8; 16]; 256] = sources(false);

/// The backslashes to lay over [`ESCAPE_SPREAD`]'s gaps: each output byte of the escaped eight
/// (8 and one per set bit) that comes from no input byte.
static ESCAPE_BACKSLASHES: [[u8; 16]; 256] = {
    let mut backslashes = [[0u8; 16]; 256];
    let mut mask = 0;
    while mask < 256 {
        let mut at = 0;
        while at < 8 + (mask as u8).count_ones() as usize {
            if ESCAPE_SPREAD[mask][at] == 0x80 {
                backslashes[mask][at] = b'\\';
            }
            at += 1;
        }
        mask += 1;
    }
    backslashes
};

/// The letter of a short escape by a control character's low four bits (`\b`, `\t`, `\n`,
/// `\f`, `\r`; [`super::json_text`]'s table), zero where the character needs `\u00XX`.
const LETTERS: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        if super::json_text::ESCAPE[i] != b'u' {
            t[i] = super::json_text::ESCAPE[i];
        }
        i += 1;
    }
    t
};

/// One bit per lane of `lanes` (bit `k` for byte `k`) that is all ones.
#[inline]
#[target_feature(enable = "ssse3,sse4.1,popcnt")]
fn bits(lanes: __m128i) -> u64 {
    u64::from(_mm_movemask_epi8(lanes) as u16)
}

/// The bytes of `v` below 0x20, as all-ones lanes.
#[inline]
#[target_feature(enable = "ssse3,sse4.1,popcnt")]
fn control_lanes(v: __m128i) -> __m128i {
    let top = _mm_set1_epi8(0x1f);
    _mm_cmpeq_epi8(_mm_max_epu8(v, top), top)
}

#[target_feature(enable = "ssse3,sse4.1,popcnt")]
fn escape_blocks(bytes: &[u8], mut i: usize, out: &mut [u8], mut at: usize) -> (usize, usize) {
    let letters = vector(&LETTERS);
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    while let Some(block) = bytes.get(i..i + 16) {
        let v = vector(block.try_into().expect("16 bytes"));
        let control = control_lanes(v);
        let special = bits(_mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
            control,
        ));
        // A control character's letter (what follows its backslash), looked up by its low
        // four bits; one without a letter (or above 0x0f) needs `\u00XX`, which the byte loop
        // writes.
        let letter = _mm_shuffle_epi8(letters, v);
        let no_letter = bits(_mm_cmpeq_epi8(letter, _mm_set1_epi8(0)));
        let above_0f = !bits(_mm_cmpeq_epi8(
            _mm_max_epu8(v, _mm_set1_epi8(0x0f)),
            _mm_set1_epi8(0x0f),
        ));
        let controls = bits(control);
        if controls & (no_letter | above_0f) != 0 {
            break;
        }
        if special == 0 {
            out[at..at + 16].copy_from_slice(block);
            i += 16;
            at += 16;
            continue;
        }
        // Each control character replaced by its letter; every other byte is its own escape.
        let v = if controls == 0 {
            v
        } else {
            _mm_or_si128(_mm_and_si128(control, letter), _mm_andnot_si128(control, v))
        };
        let room: &mut [u8; 32] = (&mut out[at..at + 32]).try_into().expect("32 bytes");
        let mut n = 0;
        for (half, mask) in [(v, special & 0xff), (_mm_srli_si128::<8>(v), special >> 8)] {
            let mask = mask as usize;
            let escaped = _mm_or_si128(
                _mm_shuffle_epi8(half, vector(&ESCAPE_SPREAD[mask])),
                vector(&ESCAPE_BACKSLASHES[mask]),
            );
            room[n..n + 8].copy_from_slice(&_mm_cvtsi128_si64(escaped).to_le_bytes());
            room[n + 8..n + 16].copy_from_slice(&_mm_extract_epi64::<1>(escaped).to_le_bytes());
            n += 8 + mask.count_ones() as usize;
        }
        i += 16;
        at += n;
    }
    (i, at)
}

#[target_feature(enable = "ssse3,sse4.1,popcnt")]
fn decode_block(block: &[u8; 64], carried: bool, out: &mut [u8; 64]) -> Option<(usize, bool)> {
    let quote_byte = _mm_set1_epi8(b'"' as i8);
    let backslash_byte = _mm_set1_epi8(b'\\' as i8);
    let mut quarters = [_mm_set1_epi8(0); 4];
    let (mut backslash, mut quote, mut control) = (0u64, 0u64, 0u64);
    for (q, bytes) in block.chunks_exact(16).enumerate() {
        let v = vector(bytes.try_into().expect("16 bytes"));
        quarters[q] = v;
        backslash |= bits(_mm_cmpeq_epi8(v, backslash_byte)) << (16 * q);
        quote |= bits(_mm_cmpeq_epi8(v, quote_byte)) << (16 * q);
        control |= bits(control_lanes(v)) << (16 * q);
    }
    let (escaped, open) = super::unescape::escaped_bytes(backslash, carried);
    if quote & !escaped | control != 0 {
        return None;
    }
    // As `decode_block_by_words`: the block less its opening backslashes first (an escape
    // standing for its second byte), then the other short escapes at their places.
    let kept = !(backslash & !escaped);
    let mut n = 0;
    for w in 0..8 {
        let keep = (kept >> (8 * w)) as u8;
        let quarter = quarters[w / 2];
        let half = if w % 2 == 0 {
            quarter
        } else {
            _mm_srli_si128::<8>(quarter)
        };
        let word = _mm_cvtsi128_si64(_mm_shuffle_epi8(
            half,
            vector(&KEEP_GATHER[usize::from(keep)]),
        ));
        // `n <= 8 * w`: the eight bytes fit in the 64.
        out[n..n + 8].copy_from_slice(&word.to_le_bytes());
        n += keep.count_ones() as usize;
    }
    super::unescape::decode_other_escapes(block, escaped & !(backslash | quote), kept, out)?;
    Some((n, open))
}
