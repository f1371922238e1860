//! Reading a JSON text held in pieces whose one long string is kept in segments: a 1 GiB
//! request reassembled by a CEP-22 receiver is read without ever being whole, and its long
//! argument reaches the tool as a [`Segmented`] text, each input piece freed once read.
//!
//! The text is read once, front to back. Everything outside the first string value of at least
//! `long_from` bytes goes into a small skeleton; that string's escaped bytes are cut, at places
//! where no escape or character is split, into pieces of about [`SEGMENT`] bytes, each decoded
//! by [`super::json_read`]'s string reader as it is cut. In the skeleton the string's place
//! holds [`LONG_STRING`], and the skeleton is read by [`super::json_read::parse`]. The value
//! that comes out holds the mark where the long string was; [`put_back`] puts the string in
//! when a consumer wants it whole.

use super::json_read;
use crate::segmented::{Segmented, SEGMENT};
use serde::de::Error as _;
use serde_json::Value;

/// What the place of a long string holds in a value read here, and of a long argument in a
/// request written around it (`peer::segmented_json`). Its JSON form ends in a control
/// character's escape right before the closing quote.
pub const LONG_STRING: &str = "\u{1}relaysim long argument\u{1}";

/// The JSON form of [`LONG_STRING`], quotes included, as `json_text::write_escaped` writes it
/// (a test checks): what a request written around its long argument
/// (`peer::segmented_json::request_json`) and a skeleton read here hold in its place.
pub const LONG_STRING_JSON: &str = "\"\\u0001relaysim long argument\\u0001\"";

/// [`LONG_STRING_JSON`] without its quotes.
fn long_string_unquoted() -> &'static str {
    &LONG_STRING_JSON[1..LONG_STRING_JSON.len() - 1]
}

/// Where the reader is in the text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// Outside any string.
    Outside,
    /// Inside a string, on plain characters.
    Plain,
    /// Just after a backslash.
    Escape,
    /// Inside a `\u` escape, this many hex digits still to come.
    Hex(u8),
}

/// The long string being cut out.
#[derive(Default)]
struct Long {
    /// Escaped bytes not yet decoded.
    pending: Vec<u8>,
    /// Decoded pieces so far.
    decoded: Segmented,
}

impl Long {
    /// Decodes what is pending (it ends where no escape or character is split).
    fn cut(&mut self) -> Option<()> {
        if self.pending.is_empty() {
            return Some(());
        }
        let mut quoted = Vec::with_capacity(self.pending.len() + 2);
        quoted.push(b'"');
        quoted.append(&mut self.pending);
        quoted.push(b'"');
        let quoted = String::from_utf8(quoted).ok()?;
        match json_read::parse(&quoted).ok()? {
            Value::String(piece) => {
                self.decoded.push(piece);
                Some(())
            }
            _ => None,
        }
    }
}

/// Reads `pieces` (one JSON text cut anywhere between characters) into a value and, when it
/// has a string value of at least `long_from` bytes (escaped), that string in segments, its
/// place in the value holding [`LONG_STRING`]. Each piece is freed once read.
///
/// The value is what [`json_read::parse`] gives for the text whole, but for that one string;
/// the error of a text that is not JSON says less than serde_json's (no line or column).
pub fn parse_pieces(
    pieces: Vec<String>,
    long_from: usize,
) -> serde_json::Result<(Value, Option<Segmented>)> {
    parse_pieces_cut(pieces, long_from, SEGMENT)
}

/// [`parse_pieces`], the long string cut into pieces of about `segment` bytes.
fn parse_pieces_cut(
    pieces: Vec<String>,
    long_from: usize,
    segment: usize,
) -> serde_json::Result<(Value, Option<Segmented>)> {
    let not_json = || serde_json::Error::custom("the reassembled text is not valid JSON");
    let mut skeleton: Vec<u8> = Vec::new();
    let mut long: Option<Long> = None;
    let mut taking = false;
    let mut string_start = 0;
    let mut at = At::Outside;
    for piece in pieces {
        let bytes = piece.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match at {
                At::Outside => {
                    let b = bytes[i];
                    skeleton.push(b);
                    if b == b'"' {
                        at = At::Plain;
                        string_start = skeleton.len();
                    }
                    i += 1;
                }
                At::Plain => {
                    let run = memchr::memchr2(b'"', b'\\', &bytes[i..]).unwrap_or(bytes.len() - i);
                    let plain = &bytes[i..i + run];
                    if taking {
                        let l = long.as_mut().expect("a long string is being taken");
                        let mut rest = plain;
                        // Cut only where a plain character follows: never inside an escape, a
                        // surrogate pair or a character.
                        while !rest.is_empty() && l.pending.len() + rest.len() >= segment {
                            // Cut at a character boundary within the run (or before it).
                            let mut k = segment.saturating_sub(l.pending.len()).min(rest.len());
                            while k > 0 && k < rest.len() && rest[k] & 0xc0 == 0x80 {
                                k -= 1;
                            }
                            l.pending.extend_from_slice(&rest[..k]);
                            l.cut().ok_or_else(not_json)?;
                            rest = &rest[k..];
                            if k == 0 && l.pending.is_empty() {
                                // Nothing fits before the boundary: take the character whole.
                                let mut n = 1;
                                while n < rest.len() && rest[n] & 0xc0 == 0x80 {
                                    n += 1;
                                }
                                l.pending.extend_from_slice(&rest[..n]);
                                rest = &rest[n..];
                            }
                        }
                        l.pending.extend_from_slice(rest);
                    } else {
                        skeleton.extend_from_slice(plain);
                        if run > 0 && long.is_none() && skeleton.len() - string_start >= long_from {
                            // Long enough: from here on this string goes to the segments.
                            let mut l = Long {
                                pending: skeleton.split_off(string_start),
                                ..Long::default()
                            };
                            if l.pending.len() >= segment {
                                l.cut().ok_or_else(not_json)?;
                            }
                            long = Some(l);
                            taking = true;
                        }
                    }
                    i += run;
                    if i < bytes.len() {
                        let b = bytes[i];
                        i += 1;
                        if b == b'"' {
                            at = At::Outside;
                            if taking {
                                taking = false;
                                let l = long.as_mut().expect("a long string is being taken");
                                l.cut().ok_or_else(not_json)?;
                                skeleton.extend_from_slice(long_string_unquoted().as_bytes());
                            }
                            skeleton.push(b'"');
                        } else {
                            at = At::Escape;
                            push(&mut skeleton, &mut long, taking, b);
                        }
                    }
                }
                At::Escape => {
                    let b = bytes[i];
                    i += 1;
                    push(&mut skeleton, &mut long, taking, b);
                    at = if b == b'u' { At::Hex(4) } else { At::Plain };
                }
                At::Hex(n) => {
                    let b = bytes[i];
                    i += 1;
                    push(&mut skeleton, &mut long, taking, b);
                    at = if n == 1 { At::Plain } else { At::Hex(n - 1) };
                }
            }
        }
    }
    if at != At::Outside || taking {
        return Err(not_json());
    }
    let skeleton = String::from_utf8(skeleton).map_err(|_| not_json())?;
    let Some(long) = long else {
        return json_read::parse(&skeleton).map(|v| (v, None));
    };
    // The mark must stand for the long string alone: the same text elsewhere in the skeleton
    // would be taken for it, so such a text is refused (relaysim's own requests never hold it).
    if skeleton.matches(LONG_STRING_JSON).count() != 1 {
        return Err(serde_json::Error::custom(
            "the reassembled text holds relaysim's long-string mark",
        ));
    }
    let value = json_read::parse(&skeleton)?;
    match marks(&value) {
        // A key after all: written back in and read again.
        Marks { in_keys: true, .. } => {
            let mut escaped = Vec::new();
            super::json_text::write_escaped(&mut escaped, &long.decoded.into_string());
            let escaped = String::from_utf8(escaped).map_err(|_| not_json())?;
            let text = skeleton.replacen(LONG_STRING_JSON, &escaped, 1);
            json_read::parse(&text).map(|v| (v, None))
        }
        // A later duplicate key replaced it, as serde_json replaces it: it is gone.
        Marks { in_values: 0, .. } => Ok((value, None)),
        _ => Ok((value, Some(long.decoded))),
    }
}

/// Appends an escape's byte to where the string is going.
fn push(skeleton: &mut Vec<u8>, long: &mut Option<Long>, taking: bool, b: u8) {
    match long {
        Some(l) if taking => l.pending.push(b),
        _ => skeleton.push(b),
    }
}

/// Where [`LONG_STRING`] is in a value.
#[derive(Default)]
struct Marks {
    in_values: usize,
    in_keys: bool,
}

fn marks(value: &Value) -> Marks {
    let mut found = Marks::default();
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s == LONG_STRING => found.in_values += 1,
            Value::Array(items) => stack.extend(items),
            Value::Object(fields) => {
                found.in_keys |= fields.keys().any(|k| k == LONG_STRING);
                stack.extend(fields.values());
            }
            _ => {}
        }
    }
    found
}

/// Puts `long` back into `value` where [`LONG_STRING`] holds its place, whole.
pub fn put_back(value: &mut Value, long: Segmented) {
    let mut long = Some(long);
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s == LONG_STRING => {
                if let Some(text) = long.take() {
                    *s = text.into_string();
                }
                return;
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(fields) => stack.extend(fields.values_mut()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `text` cut into pieces at `cuts` (moved to character boundaries).
    fn pieces(text: &str, cuts: &[usize]) -> Vec<String> {
        let mut out = Vec::new();
        let mut from = 0;
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
        cuts.sort_unstable();
        for mut c in cuts {
            while !text.is_char_boundary(c) {
                c += 1;
            }
            if c > from {
                out.push(text[from..c].to_owned());
                from = c;
            }
        }
        out.push(text[from..].to_owned());
        out
    }

    /// Reads `text` in pieces and checks the value, with the long string put back, against
    /// serde_json's reading of the text whole.
    fn same_as_whole(text: &str, cuts: &[usize], long_from: usize, segment: usize) -> Option<bool> {
        let theirs: Value = serde_json::from_str(text).ok()?;
        let (mut ours, long) = parse_pieces_cut(pieces(text, cuts), long_from, segment).ok()?;
        let took = long.is_some();
        if let Some(long) = long {
            put_back(&mut ours, long);
        }
        assert_eq!(ours.to_string(), theirs.to_string(), "{text:?} at {cuts:?}");
        Some(took)
    }

    #[test]
    fn a_long_string_comes_out_in_segments_and_the_rest_as_read_whole() {
        let long = "a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00".repeat(SEGMENT / 10);
        let text =
            format!(r#"{{"id":1,"params":{{"name":"echo","arguments":{{"text":"{long}"}}}}}}"#);
        let (value, taken) = parse_pieces(pieces(&text, &[5, 70_000, 1_000_001]), 1024).unwrap();
        let taken = taken.expect("the long string is taken");
        assert!(taken.segments().count() > 1, "{taken:?}");
        assert_eq!(value["params"]["arguments"]["text"], LONG_STRING);
        let whole: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            taken.into_string(),
            whole["params"]["arguments"]["text"].as_str().unwrap()
        );
        assert_eq!(
            same_as_whole(&text, &[3, 999_999], 1024, SEGMENT),
            Some(true)
        );
    }

    #[test]
    fn the_mark_s_json_is_what_the_writer_writes() {
        let mut written = Vec::new();
        super::super::json_text::write_escaped(&mut written, LONG_STRING);
        assert_eq!(std::str::from_utf8(&written), Ok(LONG_STRING_JSON));
    }

    #[test]
    fn texts_without_a_long_string_or_not_json_are_read_as_whole() {
        assert_eq!(
            same_as_whole(r#"{"a":"short","b":[1,2]}"#, &[4, 9], 100, 3),
            Some(false)
        );
        // A long key is read back in whole; a duplicate key drops the long string as
        // serde_json does.
        assert_eq!(
            same_as_whole(r#"{"aaaaaaaaaa":"bbbbbbbbbb"}"#, &[3], 4, 3),
            Some(false)
        );
        assert_eq!(
            same_as_whole(r#"{"a":"xxxxxxxxxx","a":2}"#, &[7], 4, 3),
            Some(false)
        );
        for bad in [r#"{"a":"unclosed"#, "{\"a\":\"ctl\u{1}\"}", r#"{"a":"\q"}"#] {
            assert!(parse_pieces(pieces(bad, &[2]), 2).is_err(), "{bad:?}");
        }
        // The mark itself in a text is refused rather than taken for the long string.
        let marked = format!(r#"{{"a":{LONG_STRING_JSON},"b":"{}"}}"#, "x".repeat(50));
        assert!(parse_pieces(pieces(&marked, &[]), 40).is_err());
    }

    proptest! {
        /// Any text of strings with escapes, multi-byte characters and surrogate pairs, cut
        /// anywhere, reads as it does whole.
        #[test]
        fn any_text_cut_anywhere_reads_as_whole(
            parts in prop::collection::vec(prop_oneof![
                Just("\\\"".to_owned()), Just("\\\\".to_owned()), Just("\\n".to_owned()),
                Just("\\u00e9".to_owned()), Just("\\ud83d\\ude00".to_owned()),
                Just("é😀".to_owned()), "[a-z ]{0,20}",
            ], 0..40),
            cuts in prop::collection::vec(any::<usize>(), 0..6),
            long_from in 0usize..64,
            segment in 1usize..32,
        ) {
            let s = parts.concat();
            let text = format!(r#"{{"k":[1,"{s}",{{"x":"{s}"}}],"t":true}}"#);
            prop_assert!(same_as_whole(&text, &cuts, long_from, segment).is_some(), "{}", text);
        }
    }
}
