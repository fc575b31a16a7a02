//! The common body read into a [`Document`] by a scanner of its own, without serde: what the
//! worker parses for every delivery, in less time than serde_json's visitor takes to fill the
//! same arenas (the benchmark's order: 414 ns against 716).
//!
//! The scanner reads what serde_json reads and builds the same document from it, with the
//! same [`Builder`]. It only ever answers what serde_json would: anything it does not read
//! exactly as serde_json does, or that serde_json refuses, is left to serde_json ([`scan`]
//! returns `None`), so a body that is not JSON gets serde_json's error and a value read here is
//! the one serde_json would have read. Left to it are:
//! - a fraction, an exponent, an integer of more than 18 digits (serde_json's numbers, each
//!   with its own rounding and overflow rules), and `-0` (which serde_json reads as a float);
//! - an escape it does not know, and a `\u` escape of a surrogate that is not one of a pair;
//! - nesting deeper than [`MAX_DEPTH`] (serde_json's limit is 127);
//! - anything that is not JSON: bytes that are not UTF-8, a control character in a string, a
//!   trailing comma, a leading zero, text after the value.

use std::borrow::Cow;

use serde_json::Number;

use super::parse::Builder;
use super::{Document, Entry, Member};

/// Containers nested deeper than this are left to serde_json, whose limit (and error) stand.
const MAX_DEPTH: usize = 64;

/// The most digits an integer read here has: any 18-digit number fits an `i64` (negated) and a
/// `u64`, so none overflows.
const MAX_DIGITS: usize = 18;

/// `body` read as one JSON value, as serde_json reads it; `None` when serde_json is to read it
/// (see the module docs).
pub(super) fn scan(body: &[u8]) -> Option<Document<'_>> {
    // A body that is JSON is UTF-8 throughout (everything outside its strings is ASCII), and
    // every string then starts and ends at a quote: slicing the text there cuts no character.
    let text = std::str::from_utf8(body).ok()?;
    let mut scanner = Scanner {
        text,
        at: 0,
        builder: Builder::for_body(body.len()),
    };
    scanner.skip_whitespace();
    let root = scanner.value(0)?;
    scanner.skip_whitespace();
    if scanner.at != body.len() {
        return None;
    }
    Some(Document {
        root,
        arenas: scanner.builder.arenas,
    })
}

/// Reads a text from its start, one value at a time, into a builder's arenas.
struct Scanner<'a> {
    text: &'a str,
    /// The offset of the next byte to read.
    at: usize,
    builder: Builder<'a>,
}

impl<'a> Scanner<'a> {
    /// The next byte, not read yet.
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Skips what JSON counts as whitespace (serde_json's four bytes).
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Reads one value, `depth` containers deep.
    #[inline(always)]
    fn value(&mut self, depth: usize) -> Option<Entry<'a>> {
        match self.peek()? {
            b'{' if depth < MAX_DEPTH => self.object(depth + 1),
            b'[' if depth < MAX_DEPTH => self.array(depth + 1),
            b'"' => self.string().map(Entry::String),
            b't' => self.literal("true", Entry::Bool(true)),
            b'f' => self.literal("false", Entry::Bool(false)),
            b'n' => self.literal("null", Entry::Null),
            b'-' | b'0'..=b'9' => self.integer(),
            _ => None,
        }
    }

    /// Reads `word`, which stands for `entry`.
    fn literal(&mut self, word: &str, entry: Entry<'a>) -> Option<Entry<'a>> {
        let rest = self.text.as_bytes().get(self.at..)?;
        rest.starts_with(word.as_bytes()).then(|| {
            self.at += word.len();
            entry
        })
    }

    /// Reads an object (the next byte is its `{`), its members into the builder.
    #[inline(never)]
    fn object(&mut self, depth: usize) -> Option<Entry<'a>> {
        let first = self.builder.open_members.len();
        let mut closed = self.open(b'}')?;
        while !closed {
            self.skip_whitespace();
            if self.peek()? != b'"' {
                return None;
            }
            let name = self.string()?;
            self.skip_whitespace();
            if self.peek()? != b':' {
                return None;
            }
            self.at += 1;
            self.skip_whitespace();
            let value = self.value(depth)?;
            self.builder.open_members.push(Member { name, value });
            closed = self.next_or_close(b'}')?;
        }
        Some(self.builder.close_object(first))
    }

    /// Reads an array (the next byte is its `[`), its items into the builder.
    #[inline(never)]
    fn array(&mut self, depth: usize) -> Option<Entry<'a>> {
        let first = self.builder.open_items.len();
        let mut closed = self.open(b']')?;
        while !closed {
            self.skip_whitespace();
            let item = self.value(depth)?;
            self.builder.open_items.push(item);
            closed = self.next_or_close(b']')?;
        }
        Some(self.builder.close_array(first))
    }

    /// Reads a container's opening byte, and `close` too when it follows: whether the
    /// container is empty.
    fn open(&mut self, close: u8) -> Option<bool> {
        self.at += 1;
        self.skip_whitespace();
        let empty = self.peek()? == close;
        if empty {
            self.at += 1;
        }
        Some(empty)
    }

    /// Reads what follows a container's item: a comma (`false`, another item comes) or the
    /// container's `close` (`true`).
    fn next_or_close(&mut self, close: u8) -> Option<bool> {
        self.skip_whitespace();
        let closed = match self.peek()? {
            b',' => false,
            byte if byte == close => true,
            _ => return None,
        };
        self.at += 1;
        Some(closed)
    }

    /// Reads a string (the next byte is its opening quote): borrowed from the text unless it
    /// holds an escape, as serde_json hands it on.
    ///
    /// Inlined, as [`Scanner::value`] is: a string or a value handed back through memory, in
    /// pieces, and read back whole stalls the processor (its store cannot be forwarded to the
    /// load), which cost a sixth of a parse (500 ns against 414).
    #[inline(always)]
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.at + 1;
        let end = self.plain_run(start)?;
        if self.text.as_bytes()[end] == b'"' {
            self.at = end + 1;
            return Some(Cow::Borrowed(&self.text[start..end]));
        }
        self.at = end;
        self.escaped(start).map(Cow::Owned)
    }

    /// The offset of the first quote or backslash from `from` on; `None` at a control
    /// character (which JSON allows in a string only escaped) or the end of the text.
    #[inline(always)]
    fn plain_run(&self, from: usize) -> Option<usize> {
        let bytes = self.text.as_bytes();
        let mut at = from;
        // Eight bytes at a time: most of a body's bytes are in its strings.
        while let Some(&chunk) = bytes.get(at..).and_then(|rest| rest.first_chunk::<8>()) {
            let stops = stops(u64::from_le_bytes(chunk));
            if stops != 0 {
                at += (stops.trailing_zeros() / 8) as usize;
                return (bytes[at] >= 0x20).then_some(at);
            }
            at += 8;
        }
        let rest = bytes.get(at..)?;
        let found = (rest.iter()).position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)?;
        (rest[found] >= 0x20).then_some(at + found)
    }

    /// Reads the rest of a string that started at `start` and holds an escape at the next
    /// byte: its text with every escape replaced.
    #[inline(never)]
    fn escaped(&mut self, start: usize) -> Option<String> {
        let mut text = String::from(&self.text[start..self.at]);
        loop {
            // At a backslash.
            let escape = *self.text.as_bytes().get(self.at + 1)?;
            self.at += 2;
            match escape {
                b'"' => text.push('"'),
                b'\\' => text.push('\\'),
                b'/' => text.push('/'),
                b'b' => text.push('\u{8}'),
                b'f' => text.push('\u{c}'),
                b'n' => text.push('\n'),
                b'r' => text.push('\r'),
                b't' => text.push('\t'),
                b'u' => text.push(self.unicode_escape()?),
                _ => return None,
            }
            let end = self.plain_run(self.at)?;
            text.push_str(&self.text[self.at..end]);
            self.at = end;
            if self.text.as_bytes()[end] == b'"' {
                self.at += 1;
                return Some(text);
            }
        }
    }

    /// Reads the four hex digits after a `\u` (and, for the first half of a surrogate pair,
    /// the `\u` escape of its second half): the character they stand for.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if !(0xD800..0xDC00).contains(&first) {
            // A lone second half is not a character: serde_json refuses it.
            return char::from_u32(first);
        }
        let rest = self.text.as_bytes().get(self.at..)?;
        if !rest.starts_with(b"\\u") {
            return None;
        }
        self.at += 2;
        let second = self.hex4()?;
        if !(0xDC00..0xE000).contains(&second) {
            return None;
        }
        char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
    }

    /// Reads four hex digits.
    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.at..self.at + 4)?;
        if !digits.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// Reads an integer of at most [`MAX_DIGITS`] digits, as serde_json reads it: a `u64`, or an
    /// `i64` when negative.
    fn integer(&mut self) -> Option<Entry<'a>> {
        let negative = self.peek()? == b'-';
        if negative {
            self.at += 1;
        }
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let digits = &self.text.as_bytes()[start..self.at];
        let leading_zero = digits.len() > 1 && digits[0] == b'0';
        let float = matches!(self.peek(), Some(b'.' | b'e' | b'E'));
        if digits.is_empty() || digits.len() > MAX_DIGITS || leading_zero || float {
            return None;
        }
        let magnitude = (digits.iter()).fold(0u64, |n, digit| n * 10 + u64::from(digit - b'0'));
        if !negative {
            return Some(Entry::Number(Number::from(magnitude)));
        }
        // `-0` is a float to serde_json.
        let magnitude = i64::try_from(magnitude)
            .ok()
            .filter(|magnitude| *magnitude > 0)?;
        Some(Entry::Number(Number::from(-magnitude)))
    }
}

/// Eight copies of a byte, one in each byte of a word.
const fn each_byte(byte: u8) -> u64 {
    u64::from_le_bytes([byte; 8])
}

/// Of the eight bytes of `word` (the first in its lowest byte), a mask whose lowest set bit
/// is the high bit of the first that ends a run of plain string text: a quote, a backslash or
/// a control character. Bits above it may be set falsely (a subtraction's borrow runs on
/// into the next byte), never below it; bytes of multi-byte characters (0x80 and up) never
/// end a run.
fn stops(word: u64) -> u64 {
    const HIGH_BITS: u64 = each_byte(0x80);
    let zero_byte = |x: u64| x.wrapping_sub(each_byte(1)) & !x & HIGH_BITS;
    let below_space = word.wrapping_sub(each_byte(0x20)) & !word & HIGH_BITS;
    zero_byte(word ^ each_byte(b'"')) | zero_byte(word ^ each_byte(b'\\')) | below_space
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::any_value;
    use super::scan;
    use crate::codec::document::Document;

    /// What the scanner reads of `text`, against what serde_json's visitor reads: the same
    /// value and the same arenas whenever the scanner reads it at all.
    fn scanned_alike(text: &[u8]) -> bool {
        let Some(scanned) = scan(text) else {
            return false;
        };
        let parsed = Document::parse_with_serde(text).expect("what the scanner reads is JSON");
        assert_eq!(
            scanned.root().to_value(),
            parsed.root().to_value(),
            "{text:?}"
        );
        assert_eq!(format!("{:?}", scanned.root), format!("{:?}", parsed.root));
        assert_eq!(
            format!("{:?}", scanned.arenas.items),
            format!("{:?}", parsed.arenas.items)
        );
        assert_eq!(
            format!("{:?}", scanned.arenas.members),
            format!("{:?}", parsed.arenas.members)
        );
        true
    }

    #[test]
    fn the_common_bodies_are_scanned_and_the_rest_left_to_serde_json() {
        let scanned = [
            r#"{"order_id":"order-00000001","items":[{"sku":"TEA-0001","quantity":2}],"total":-5}"#,
            r#" { "b" : [ ] , "a" : { } , "c" : [ true , false , null ] } "#,
            r#""esc\"aped\\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \u0000""#,
            r#"{"\u0061":1,"a\n":2,"a":3}"#,
            r#"{"a":1,"a":"two","b":3,"a":[4]}"#,
            "999999999999999999",
            "-999999999999999999",
            "0",
            "\"é ✓\"",
        ];
        for text in scanned {
            assert!(scanned_alike(text.as_bytes()), "not scanned: {text}");
        }
        let left = [
            "-0",
            "1.0",
            "1e2",
            "1E2",
            "1000000000000000000",
            "01",
            "-",
            "[1,]",
            "{\"a\":1,}",
            "[1] x",
            "",
            "nul",
            "tru",
            r#""\ud800""#,
            r#""\ud800\u0041""#,
            r#""\udc00""#,
            r#""\x""#,
            "\"tab\there\"",
            "\"open",
            "{\"a\" 1}",
            "{1:2}",
        ];
        for text in left {
            assert!(!scanned_alike(text.as_bytes()), "scanned: {text}");
        }
        assert!(!scanned_alike(b"\"\xff\""));
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(scanned_alike(deep(64).as_bytes()));
        assert!(!scanned_alike(deep(65).as_bytes()));
    }

    /// The first byte ending a run, found eight at a time, is the one a byte-by-byte search
    /// finds, wherever it is among the eight and whatever follows it.
    #[test]
    fn a_run_ends_at_the_first_quote_backslash_or_control_character() {
        let ends = |byte: u8| byte == b'"' || byte == b'\\' || byte < 0x20;
        let samples = [
            0x00, 0x1f, 0x20, b'"', b'#', b'\\', b'a', 0x7f, 0x80, 0xa0, 0xe2, 0xff,
        ];
        for first in 0..8 {
            for &stop in &samples {
                for &after in &samples {
                    let mut word = [b'a'; 8];
                    word[first] = stop;
                    word[(first + 1) % 8] = after;
                    let found = super::stops(u64::from_le_bytes(word));
                    let expected = word.iter().position(|&byte| ends(byte));
                    let at = (found != 0).then(|| (found.trailing_zeros() / 8) as usize);
                    assert_eq!(at, expected, "{word:?}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn any_value_is_scanned_as_serde_json_reads_it(value in any_value()) {
            let text = serde_json::to_vec(&value).expect("JSON");
            scanned_alike(&text);
            let pretty = serde_json::to_vec_pretty(&value).expect("JSON");
            scanned_alike(&pretty);
        }

        #[test]
        fn any_text_is_scanned_as_serde_json_reads_it(
            text in "[\\[\\]{}\":,0-9a-e\\\\ .+-]{0,24}"
        ) {
            scanned_alike(text.as_bytes());
        }
    }
}
