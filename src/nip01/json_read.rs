//! Reading JSON text into a `serde_json::Value`, with the same result as `serde_json` and a
//! faster string unescape.
//!
//! ContextVM nests JSON three deep, so a receiver unescapes an escape-heavy payload twice (the
//! chunk inside its frame, then the reassembled message), and `serde_json`'s unescape — a call
//! and several branches per escape — was the largest cost of large transfers. [`parse`] finds
//! the next quote, backslash or control character eight bytes at a time, copies the run before
//! it whole, and decodes escapes through a table, 64 bytes at a time where they are dense
//! ([`super::unescape`]).
//!
//! Only the common shapes are read here: anything unusual (a lone surrogate escape, a float,
//! nesting deeper than [`MAX_DEPTH`], trailing text, any error) hands the whole text to
//! `serde_json`, so results and error messages are always `serde_json`'s. Integers are read
//! here exactly as `serde_json` reads them (`u64`, else `i64`); anything with a fraction or an
//! exponent goes to `serde_json`, whose float parsing is not `str::parse`'s. Duplicate keys
//! keep the last value at the first key's place, as `serde_json::Map::insert` does. Property
//! tests check all of this against `serde_json` for any value and any text.

use super::unescape::{first_special, plain_run, BlockDecoder, DECODE, STOP};
use serde_json::{Map, Number, Value};
use std::ops::Range;

/// Nesting read here before handing over to `serde_json` (whose own limit is 128).
pub const MAX_DEPTH: usize = 100;

/// Reads `text` as one JSON value, exactly as `serde_json::from_str::<Value>` would.
pub fn parse(text: &str) -> serde_json::Result<Value> {
    let mut reader = Reader::new(text, usize::MAX);
    match reader.document() {
        Some(value) => Ok(value),
        None => serde_json::from_str(text),
    }
}

/// Strings at least this long are taken from the text by [`parse_owned`] rather than copied.
pub const STEAL_FROM: usize = 1 << 20;

/// As [`parse`], consuming `text`: the first string value of at least [`STEAL_FROM`] bytes with
/// nothing to unescape becomes the text's own buffer, its bytes moved to the front, instead of
/// a copy. A 1 GiB result (a string in a few bytes of JSON) is then read without a second
/// gigabyte.
pub fn parse_owned(text: String) -> serde_json::Result<Value> {
    parse_owned_stealing_from(text, STEAL_FROM)
}

/// [`parse_owned`] with the length from which a string is taken.
fn parse_owned_stealing_from(text: String, steal_from: usize) -> serde_json::Result<Value> {
    let (mut value, stolen) = {
        let mut reader = Reader::new(&text, steal_from);
        match reader.document() {
            Some(value) => (value, reader.stolen),
            // Whatever serde_json makes of it, from the text as it came.
            None => return serde_json::from_str(&text),
        }
    };
    // The placeholder is gone if a later duplicate key replaced it: then so is the string.
    if let (Some(range), Some(slot)) = (stolen, placeholder(&mut value)) {
        let mut bytes = text.into_bytes();
        bytes.copy_within(range.clone(), 0);
        bytes.truncate(range.len());
        *slot = String::from_utf8(bytes).expect("the bytes of a `&str` slice between two quotes");
    }
    Ok(value)
}

/// The placeholder a stolen string left in `value`: its only string with room but no bytes
/// (every other string read here is either empty without room or holds something).
fn placeholder(value: &mut Value) -> Option<&mut String> {
    match value {
        Value::String(s) if s.is_empty() && s.capacity() > 0 => Some(s),
        Value::Array(items) => items.iter_mut().find_map(placeholder),
        Value::Object(map) => map.values_mut().find_map(placeholder),
        _ => None,
    }
}

/// The JSON string at the start of `text` (which must start with its opening quote), decoded,
/// and the text after its closing quote; `None` where [`parse`] would leave the string to
/// `serde_json` (an error, a lone surrogate). Whatever it returns is what `serde_json` reads.
pub fn string_prefix(text: &str) -> Option<(String, &str)> {
    if !text.starts_with('"') {
        return None;
    }
    let mut reader = Reader::new(text, usize::MAX);
    let decoded = reader.string(false)?;
    Some((decoded, &text[reader.at..]))
}

/// `out` as a string without checking it again: it is valid UTF-8 by construction, made of runs
/// of the input (a `&str`) cut only at ASCII bytes (a backslash and the escape after it), the
/// ASCII characters of the short escapes ([`DECODE`]), and `char::encode_utf8` of each `\u`
/// escape. Checking it again is a pass as long as the string, slow on non-ASCII text: the
/// CEP-22 receiver reads 10 MiB of mixed text at 353 MB/s with the check and 674 MB/s without
/// (`cargo bench --bench vs_sdk`). The property tests compare every string read here with
/// `serde_json`'s, and debug builds check it.
#[allow(unsafe_code)]
fn valid_by_construction(out: Vec<u8>) -> String {
    debug_assert!(std::str::from_utf8(&out).is_ok());
    // SAFETY: see above: every byte sequence written to `out` is whole UTF-8.
    unsafe { String::from_utf8_unchecked(out) }
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    depth: usize,
    /// String values at least this long, with nothing to unescape, are left in the text
    /// ([`parse_owned`]); the first becomes a placeholder and its place is `stolen`.
    steal_from: usize,
    stolen: Option<Range<usize>>,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str, steal_from: usize) -> Self {
        Reader {
            text,
            bytes: text.as_bytes(),
            at: 0,
            depth: 0,
            steal_from,
            stolen: None,
        }
    }
    /// The whole text: one value and nothing after it but whitespace.
    fn document(&mut self) -> Option<Value> {
        let value = self.value()?;
        self.whitespace();
        (self.at == self.bytes.len()).then_some(value)
    }

    fn whitespace(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.whitespace();
        match *self.bytes.get(self.at)? {
            b'"' => self.string(true).map(Value::String),
            b'{' => self.object(),
            b'[' => self.array(),
            b't' => self.literal(b"true", Value::Bool(true)),
            b'f' => self.literal(b"false", Value::Bool(false)),
            b'n' => self.literal(b"null", Value::Null),
            b'-' | b'0'..=b'9' => self.integer(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8], value: Value) -> Option<Value> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| {
            self.at = end;
            value
        })
    }

    /// An integer: `-`, then `0` or a digit run not starting with `0`. Read as `u64`, else
    /// `i64`, as `serde_json` does; out of range is `serde_json`'s (it makes a float).
    fn integer(&mut self) -> Option<Value> {
        let start = self.at;
        let negative = self.bytes[start] == b'-';
        let digits = start + usize::from(negative);
        let mut end = digits;
        while self.bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let count = end - digits;
        if count == 0 || (count > 1 && self.bytes[digits] == b'0') {
            return None;
        }
        // A fraction or an exponent, and `-0` (a float to serde_json), are serde_json's.
        if matches!(self.bytes.get(end), Some(b'.' | b'e' | b'E'))
            || (negative && count == 1 && self.bytes[digits] == b'0')
        {
            return None;
        }
        // Digits and `-` only: ASCII, so this cannot fail.
        let text = std::str::from_utf8(&self.bytes[start..end]).ok()?;
        let number = if negative {
            Number::from(text.parse::<i64>().ok()?)
        } else {
            Number::from(text.parse::<u64>().ok()?)
        };
        self.at = end;
        Some(Value::Number(number))
    }

    fn nested<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        if self.depth == MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let value = read(self);
        self.depth -= 1;
        value
    }

    fn array(&mut self) -> Option<Value> {
        self.nested(|r| {
            r.at += 1;
            let mut items = Vec::new();
            r.whitespace();
            if r.bytes.get(r.at) == Some(&b']') {
                r.at += 1;
                return Some(Value::Array(items));
            }
            loop {
                items.push(r.value()?);
                r.whitespace();
                match *r.bytes.get(r.at)? {
                    b',' => r.at += 1,
                    b']' => {
                        r.at += 1;
                        return Some(Value::Array(items));
                    }
                    _ => return None,
                }
            }
        })
    }

    fn object(&mut self) -> Option<Value> {
        self.nested(|r| {
            r.at += 1;
            r.whitespace();
            if r.bytes.get(r.at) == Some(&b'}') {
                r.at += 1;
                return Some(Value::Object(Map::new()));
            }
            // Entries first, then a map made once at its size: inserting into a growing map
            // rehashed it several times per object.
            let mut entries = Vec::with_capacity(8);
            loop {
                r.whitespace();
                if r.bytes.get(r.at) != Some(&b'"') {
                    return None;
                }
                let key = r.string(false)?;
                r.whitespace();
                if r.bytes.get(r.at) != Some(&b':') {
                    return None;
                }
                r.at += 1;
                let value = r.value()?;
                entries.push((key, value));
                r.whitespace();
                match *r.bytes.get(r.at)? {
                    b',' => r.at += 1,
                    b'}' => {
                        r.at += 1;
                        // In order, so a repeated key keeps the first one's place and the
                        // last one's value, as `serde_json` does.
                        let mut map = Map::with_capacity(entries.len());
                        for (key, value) in entries {
                            map.insert(key, value);
                        }
                        return Some(Value::Object(map));
                    }
                    _ => return None,
                }
            }
        })
    }

    /// A string, its opening quote at `at`.
    ///
    /// Sixty-four bytes at a time while nothing in them ends the string or needs more than the
    /// table ([`BlockDecoder`]: escape-dense text, as a chunk's data is); otherwise eight at a
    /// time: a block with nothing special is copied whole; a block with something goes a byte
    /// at a time through [`DECODE`], every byte written and the output advanced unless the byte
    /// opens an escape, with no branch on the byte's kind. The one branch per byte is on
    /// [`STOP`] (the closing quote, `\u`, anything invalid), which is rarely taken.
    ///
    /// A `value` (not a key) long enough to steal is not copied: it is a placeholder for now
    /// (an empty string with room, which nothing else read here is) and its place is noted.
    fn string(&mut self, value: bool) -> Option<String> {
        let bytes = self.bytes;
        let start = self.at + 1;
        let first = start + plain_run(bytes, start)?;
        if bytes[first] == b'"' {
            // Nothing to unescape (most keys and short values): one copy, or none.
            self.at = first + 1;
            if value && self.stolen.is_none() && first - start >= self.steal_from {
                self.stolen = Some(start..first);
                return Some(String::with_capacity(1));
            }
            return Some(self.text[start..first].to_owned());
        }
        // Written at `j` into zeroed room made ahead; the room grows by at most 1 MiB at a
        // time, so a long string touches little more memory than it holds.
        let mut out = vec![0u8; 2 * (first - start) + 64];
        out[..first - start].copy_from_slice(&bytes[start..first]);
        let mut j = first - start;
        let mut i = first;
        let mut escaped = 0usize;
        // Where the byte-at-a-time path hands back to whole blocks, after a block it had to
        // take (one with the closing quote, `\u` or an error in it).
        let mut bytewise_until = i;
        let decoder = BlockDecoder::detect();
        loop {
            // Room for a whole block, or a `\u` escape after most of an eight-byte one.
            if out.len() < j + 64 {
                out.resize(out.len() + out.len().min(1 << 20), 0);
            }
            if i >= bytewise_until {
                if let Some(block) = bytes.get(i..i + 64) {
                    let block = block.try_into().expect("64 bytes");
                    let room = (&mut out[j..j + 64]).try_into().expect("64 bytes");
                    if let Some((written, open)) = decoder.decode_block(block, escaped == 1, room) {
                        i += 64;
                        j += written;
                        escaped = usize::from(open);
                        continue;
                    }
                    bytewise_until = i + 64;
                }
            }
            let block = &bytes[i..bytes.len().min(i + 8)];
            if block.is_empty() {
                // The text ends inside the string.
                return None;
            }
            if let Ok(whole) = <[u8; 8]>::try_from(block) {
                if escaped == 0 && first_special(u64::from_le_bytes(whole)).is_none() {
                    out[j..j + 8].copy_from_slice(block);
                    i += 8;
                    j += 8;
                    continue;
                }
            }
            let mut stopped = None;
            for (k, &b) in block.iter().enumerate() {
                if STOP[escaped][usize::from(b)] {
                    stopped = Some(i + k);
                    break;
                }
                out[j] = DECODE[escaped][usize::from(b)];
                let opens = usize::from(b == b'\\') & (escaped ^ 1);
                j += opens ^ 1;
                escaped = opens;
            }
            let Some(at) = stopped else {
                i += block.len();
                continue;
            };
            match (escaped, bytes[at]) {
                (0, b'"') => {
                    out.truncate(j);
                    self.at = at + 1;
                    return Some(valid_by_construction(out));
                }
                (1, b'u') => {
                    let ch = self.unicode_escape(at - 1)?;
                    let mut buf = [0; 4];
                    let encoded = ch.encode_utf8(&mut buf).as_bytes();
                    out[j..j + encoded.len()].copy_from_slice(encoded);
                    j += encoded.len();
                    i = at + if u32::from(ch) > 0xffff { 11 } else { 5 };
                    escaped = 0;
                }
                // A control character or an invalid escape: an error, with serde_json's
                // message.
                _ => return None,
            }
        }
    }

    /// The character of a `\uXXXX` escape at `i` (a surrogate pair takes two escapes); a lone
    /// surrogate is `serde_json`'s to report.
    fn unicode_escape(&self, i: usize) -> Option<char> {
        let hex = |at: usize| -> Option<u32> {
            let digits = self.bytes.get(at..at + 4)?;
            digits
                .iter()
                .try_fold(0u32, |acc, &d| Some(acc * 16 + char::from(d).to_digit(16)?))
        };
        let first = hex(i + 2)?;
        match first {
            0xd800..=0xdbff => {
                if self.bytes.get(i + 6..i + 8)? != b"\\u" {
                    return None;
                }
                let second = hex(i + 8)?;
                if !(0xdc00..=0xdfff).contains(&second) {
                    return None;
                }
                char::from_u32(0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00))
            }
            _ => char::from_u32(first),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reads `text` here, and consuming it (taking any string value, or those of 3 bytes and
    /// more, from the text), and checks all three against serde_json.
    fn same_as_serde_json(text: &str) {
        let theirs = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
        for (how, ours) in [
            ("borrowed", parse(text)),
            (
                "any string taken",
                parse_owned_stealing_from(text.into(), 0),
            ),
            (
                "long strings taken",
                parse_owned_stealing_from(text.into(), 3),
            ),
        ] {
            let ours = ours.map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{how}: {text:?}");
            if let (Ok(a), Ok(b)) = (&ours, &theirs) {
                // Key order too (Value's equality ignores it).
                assert_eq!(a.to_string(), b.to_string(), "{how}");
            }
        }
    }

    #[test]
    fn a_long_string_is_taken_from_the_text_and_a_replaced_one_is_dropped() {
        let long = "x".repeat(STEAL_FROM + 3);
        let text = format!(r#"{{"id":1,"result":{{"a":"{long}","b":[15,"{long}"]}}}}"#);
        same_as_serde_json(&text);
        // A float sends the whole text to serde_json, which reads it as it came.
        same_as_serde_json(&text.replace("15", "1.5"));
        let owned = text.clone();
        let buffer = owned.as_ptr();
        let value = parse_owned(owned).unwrap();
        let taken = value["result"]["a"].as_str().unwrap();
        assert_eq!(taken, long);
        assert_eq!(taken.as_ptr(), buffer, "the text's own buffer, not a copy");
        assert_eq!(
            value["result"]["b"][1],
            long.as_str(),
            "only the first is taken"
        );
        // The first long string's key comes again: the taken string is replaced, as serde_json
        // replaces it, and the text is dropped.
        same_as_serde_json(&format!(r#"{{"a":"{long}","a":2}}"#));
        same_as_serde_json(&format!(r#"["", "{long}", "", "\"{long}"]"#));
    }

    #[test]
    fn the_common_shapes_are_read_here() {
        let text =
            r#" {"a":[1,-2,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00y"],"b":{}} "#;
        let mut reader = Reader::new(text, usize::MAX);
        let value = reader.document().expect("read without serde_json");
        assert_eq!(
            value,
            serde_json::json!({"a": [1, -2, true, false, null, "x\"\\/\u{8}\u{c}\n\r\té😀y"], "b": {}})
        );
    }

    #[test]
    fn unusual_text_is_read_as_serde_json_reads_it() {
        for text in [
            "1.5",
            "-0",
            "1e3",
            "18446744073709551616",
            "-9223372036854775809",
            "01",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800\\u0041\"",
            "\"\\x\"",
            "\"a\u{1}b\"",
            "\"a",
            "\"a\\",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\":1,\"a\":2,\"b\":3}",
            "{\"b\":1,\"a\":2,\"b\":3}",
            "[1] x",
            "",
            " ",
            "nul",
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        ] {
            same_as_serde_json(text);
        }
    }

    fn any_value() -> impl Strategy<Value = Value> {
        value_of(prop_oneof![
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            Just(Value::Null)
        ])
    }

    /// Any value whose numbers are integers: what this reader reads without `serde_json`.
    fn any_value_without_floats() -> impl Strategy<Value = Value> {
        value_of(Just(Value::Null))
    }

    fn value_of(extra: impl Strategy<Value = Value> + 'static) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            extra,
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[\"\\\\a\\u{0}-\\u{1f}é😀]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-c\"\\\\]{0,3}", inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// `value` as `serde_json` writes it, compact or pretty.
    fn text_of(value: &Value, pretty: bool) -> String {
        if pretty {
            serde_json::to_string_pretty(value).expect("writes")
        } else {
            serde_json::to_string(value).expect("writes")
        }
    }

    proptest! {
        #[test]
        fn any_value_is_read_back_as_serde_json_reads_it(v in any_value(), pretty in any::<bool>()) {
            same_as_serde_json(&text_of(&v, pretty));
        }

        #[test]
        fn values_without_floats_are_read_here_without_serde_json(v in any_value_without_floats(), pretty in any::<bool>()) {
            let text = text_of(&v, pretty);
            let mut reader = Reader::new(&text, usize::MAX);
            prop_assert_eq!(reader.document(), Some(v));
        }

        #[test]
        fn any_text_is_read_or_refused_as_serde_json_does(
            text in "[\\[\\]{}:,\"\\\\ tfnrule0-9.+\\-a-d/\u{1}é]{0,40}"
        ) {
            same_as_serde_json(&text);
        }

        #[test]
        fn long_strings_of_dense_escapes_are_read_as_serde_json_reads_them(
            pieces in prop::collection::vec(
                prop::sample::select(vec![
                    "\"", "\\", "a", "\n", "é", "\u{1}", "😀", "\u{2028}", "/", "bcdefgh",
                ]),
                0..300,
            ),
            mut raw in prop::collection::vec(
                prop::sample::select(vec![
                    "\\\"", "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "\\/", "x", "\\t",
                ]),
                0..200,
            ),
            bad in prop::option::of((0usize..200, prop::sample::select(vec!["\\q", "\u{1}", "\\ud800"]))),
        ) {
            // Serialised (escapes as serde_json writes them), and written raw (other escapes,
            // and now and then an invalid one or a control character), each string spanning
            // several 64-byte blocks with escapes and block edges falling anywhere.
            let text: String = pieces.concat();
            let once = serde_json::to_string(&text).unwrap();
            same_as_serde_json(&once);
            // Escaped again, as a chunk carries a message's text: runs of backslashes.
            same_as_serde_json(&serde_json::to_string(&once).unwrap());
            if let Some((at, piece)) = bad {
                raw.insert(at.min(raw.len()), piece);
            }
            same_as_serde_json(&format!("[\"{}\", 1]", raw.concat()));
        }

        #[test]
        fn escapes_of_any_code_point_are_read_as_serde_json_reads_them(
            units in prop::collection::vec(any::<u16>(), 0..6)
        ) {
            let text: String = std::iter::once("\"".to_owned())
                .chain(units.iter().map(|u| format!("\\u{u:04x}")))
                .chain(std::iter::once("\"".to_owned()))
                .collect();
            same_as_serde_json(&text);
        }
    }
}
