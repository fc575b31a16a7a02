//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): the `traceparent` and
//! `tracestate` headers, read strictly. They arrive from any producer, so a value that is not
//! exactly what the recommendation allows is ignored as if absent: it never becomes a span's
//! parent and is never passed on.

use std::fmt;

use std::collections::BTreeMap;

use lapin::types::{AMQPValue, ShortString};

use crate::model::headers;

/// A `traceparent` of version `00`: `00-{32 hex}-{16 hex}-{2 hex}`, 55 characters.
const TRACEPARENT_LEN: usize = 55;
/// The longest `tracestate` passed on: the recommendation lets a vendor drop a longer one.
pub(crate) const MAX_TRACESTATE_LEN: usize = 512;
/// The most list members a `tracestate` may hold.
const MAX_TRACESTATE_MEMBERS: usize = 32;

/// A parsed `traceparent`: the trace, the span that published the message, and the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraceParent {
    /// The trace id, never all zeros.
    pub trace_id: [u8; 16],
    /// The id of the span the message was published in, never all zeros.
    pub parent_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a version-`00` `traceparent`, or `None` for anything else: another length or
    /// version, upper-case or non-hex digits, misplaced dashes, an all-zero trace or parent
    /// id. Later versions are refused too: warren cannot know what they mean, and a producer
    /// speaking one also understands a trace restarted here.
    pub(super) fn parse(text: &str) -> Option<Self> {
        // The length first, so a huge value costs nothing more.
        let bytes = text.as_bytes();
        if bytes.len() != TRACEPARENT_LEN {
            return None;
        }
        if bytes.get(2) != Some(&b'-')
            || bytes.get(35) != Some(&b'-')
            || bytes.get(52) != Some(&b'-')
        {
            return None;
        }
        let [version] = hex::<1>(bytes.get(0..2)?)?;
        if version != 0 {
            return None;
        }
        let trace_id = hex::<16>(bytes.get(3..35)?)?;
        let parent_id = hex::<8>(bytes.get(36..52)?)?;
        let [flags] = hex::<1>(bytes.get(53..55)?)?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// The trace id as 32 lower-case hex digits, as trace back-ends show it.
    pub(super) fn trace_id_hex(&self) -> String {
        let mut text = String::with_capacity(32);
        push_hex(&mut text, &self.trace_id);
        text
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::with_capacity(TRACEPARENT_LEN);
        text.push_str("00-");
        push_hex(&mut text, &self.trace_id);
        text.push('-');
        push_hex(&mut text, &self.parent_id);
        text.push('-');
        push_hex(&mut text, &[self.flags]);
        f.write_str(&text)
    }
}

/// `N` bytes from exactly `2 * N` lower-case hex digits.
fn hex<const N: usize>(digits: &[u8]) -> Option<[u8; N]> {
    if digits.len() != 2 * N {
        return None;
    }
    let digit = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let [high, low] = pair else { return None };
        *byte = (digit(*high)? << 4) | digit(*low)?;
    }
    Some(out)
}

fn push_hex(text: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

/// Whether `text` may travel as a `tracestate`: at most 512 characters of printable ASCII in
/// at most 32 non-empty comma-separated members. Its members are opaque to warren (an
/// OpenTelemetry SDK checks their keys); this only keeps a forged one bounded and printable.
pub(crate) fn valid_tracestate(text: &str) -> bool {
    text.len() <= MAX_TRACESTATE_LEN
        && text.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && text.split(',').count() <= MAX_TRACESTATE_MEMBERS
        && text.split(',').all(|member| !member.trim().is_empty())
}

/// The trace context a message's headers carry: its `traceparent` if it parses, with its
/// `tracestate` if that is valid too. Values longer than a `traceparent` or the longest
/// `tracestate` are refused before they are copied.
pub(crate) fn read(
    table: Option<&BTreeMap<ShortString, AMQPValue>>,
) -> Option<(TraceParent, Option<String>)> {
    let table = table?;
    let bounded = |key, max| {
        let bytes = match table.get(key)? {
            AMQPValue::ShortString(s) => s.as_str().as_bytes(),
            AMQPValue::LongString(s) => s.as_bytes(),
            _ => return None,
        };
        if bytes.len() > max {
            return None;
        }
        std::str::from_utf8(bytes).ok()
    };
    let parent = TraceParent::parse(bounded(headers::TRACEPARENT, TRACEPARENT_LEN)?)?;
    let state = bounded(headers::TRACESTATE, MAX_TRACESTATE_LEN)
        .filter(|s| valid_tracestate(s))
        .map(str::to_owned);
    Some((parent, state))
}

#[cfg(test)]
mod tests {
    use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

    use super::{TraceParent, read, valid_tracestate};

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_parses_and_prints_back() {
        let parent = TraceParent::parse(GOOD).expect("the recommendation's example");
        assert_eq!(parent.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            parent.parent_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert_eq!(parent.flags, 1);
        assert_eq!(parent.to_string(), GOOD);
        let unsampled = GOOD.replace("-01", "-00");
        assert_eq!(
            TraceParent::parse(&unsampled).map(|p| p.flags),
            Some(0),
            "flags other than sampled are kept"
        );
    }

    #[test]
    fn hostile_traceparents_are_refused() {
        let hostile = [
            "",
            "00",
            // Another version: warren speaks 00 only; ff is forbidden anyway.
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // A later version's longer form.
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            // All-zero ids.
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            // Upper case, non-hex, signs and spaces where digits go.
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7- 1",
            // Dashes misplaced, same length.
            "00-4bf92f3577b34da6a3ce929d0e0e47360-0f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            // Short and long.
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",
            // Multi-byte characters making up the length.
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
        ];
        for text in hostile {
            assert_eq!(TraceParent::parse(text), None, "{text:?}");
        }
        assert_eq!(TraceParent::parse(&"0".repeat(1 << 20)), None);
    }

    #[test]
    fn tracestate_is_bounded_and_printable() {
        assert!(valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
        assert!(
            !valid_tracestate(&"a=b,".repeat(200)),
            "over 512 characters"
        );
        let members: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        assert!(!valid_tracestate(&members.join(",")), "over 32 members");
        assert!(!valid_tracestate("a=b\n,c=d"), "control characters");
        assert!(!valid_tracestate("a=é"), "not ASCII");
        assert!(!valid_tracestate("a=b,,c=d"), "an empty member");
    }

    #[test]
    fn read_takes_only_strings_within_bounds() {
        let mut table = FieldTable::default();
        let set = |table: &mut FieldTable, key: &str, value: AMQPValue| {
            table.insert(ShortString::from(key), value);
        };
        let read = |table: &FieldTable| read(Some(table.inner()));
        assert_eq!(super::read(None), None);
        set(&mut table, "traceparent", AMQPValue::LongLongInt(7));
        assert_eq!(read(&table), None, "not a string");
        let long = format!("{GOOD}{}", " ".repeat(100_000));
        set(
            &mut table,
            "traceparent",
            AMQPValue::LongString(LongString::from(long)),
        );
        assert_eq!(read(&table), None, "too long to be one");
        set(
            &mut table,
            "traceparent",
            AMQPValue::LongString(LongString::from(GOOD)),
        );
        set(
            &mut table,
            "tracestate",
            AMQPValue::LongString(LongString::from("x".repeat(600))),
        );
        let (parent, state) = read(&table).expect("a valid traceparent");
        assert_eq!(parent.to_string(), GOOD);
        assert_eq!(
            state, None,
            "an oversized tracestate is dropped, the parent kept"
        );
        set(
            &mut table,
            "tracestate",
            AMQPValue::ShortString(ShortString::from("a=b")),
        );
        assert_eq!(read(&table).and_then(|(_, s)| s).as_deref(), Some("a=b"));
    }
}
