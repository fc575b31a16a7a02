//! Content header frames judged before lapin parses them, and rebuilt when lapin could not
//! survive them: headers too deep for its recursive parser, values it cannot parse, or a
//! frame larger than the connection's `frame_max` (lapin closes the connection on either).
//!
//! A rebuilt frame keeps every property and header that was sound and fits, and records what
//! was cut in [`HEADERS_CUT`]; the worker dead-letters such a message as poison.

use lapin::types::{AMQPValue, FieldTable};

use super::fields::{Flaw, entries, key_end};
use crate::model::FailureReason;
use crate::model::headers::{BROKER, WARREN};

/// The header a rebuilt frame carries: a table with the failure `reason` (`too-large` or
/// `malformed-headers`) and a `detail` saying what was cut.
pub(crate) use crate::model::headers::HEADERS_CUT;

/// The failure reason and detail of a message whose headers the guard cut, from `headers`.
pub(crate) fn headers_cut(headers: Option<&FieldTable>) -> Option<(FailureReason, String)> {
    let AMQPValue::FieldTable(cut) = headers?.inner().get(HEADERS_CUT)? else {
        return Some((
            FailureReason::MalformedHeaders,
            format!("`{HEADERS_CUT}` is not a table"),
        ));
    };
    // `too-large` (cut to fit the frame size), else `malformed-headers` (could not be
    // parsed safely), whatever else a producer wrote there.
    let reason =
        match crate::amqp::header_str(Some(cut), "reason").and_then(|reason| reason.parse().ok()) {
            Some(FailureReason::TooLarge) => FailureReason::TooLarge,
            _ => FailureReason::MalformedHeaders,
        };
    let detail = crate::amqp::header_str(Some(cut), "detail").unwrap_or_default();
    Some((reason, detail))
}

/// Longest `detail` kept in [`HEADERS_CUT`].
pub(super) const MAX_DETAIL_BYTES: usize = 1024;
/// A frame's bytes besides its payload: type, channel, size, end marker.
pub(super) const FRAME_OVERHEAD: usize = 8;
/// A content header's bytes before its properties: class, weight, body size, flags.
pub(super) const HEADER_PREFIX: usize = 14;

/// Whether `key` is a header written by warren or by the broker: cut only once nothing else
/// is left.
pub(super) fn own_header(key: &str) -> bool {
    WARREN.contains(&key) || BROKER.contains(&key)
}

/// A property of the basic class, in wire order (bit 15 first).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    ShortString,
    Table,
    Octet,
    Timestamp,
}

const PROPERTIES: [(&str, Kind); 14] = [
    ("content-type", Kind::ShortString),
    ("content-encoding", Kind::ShortString),
    ("headers", Kind::Table),
    ("delivery-mode", Kind::Octet),
    ("priority", Kind::Octet),
    ("correlation-id", Kind::ShortString),
    ("reply-to", Kind::ShortString),
    ("expiration", Kind::ShortString),
    ("message-id", Kind::ShortString),
    ("timestamp", Kind::Timestamp),
    ("type", Kind::ShortString),
    ("user-id", Kind::ShortString),
    ("app-id", Kind::ShortString),
    ("cluster-id", Kind::ShortString),
];

const HEADERS_BIT: u16 = 1 << 13;

/// One header kept in a rebuilt frame.
struct Kept<'a> {
    key: &'a str,
    /// The encoded value, type tag first.
    value: &'a [u8],
}

impl Kept<'_> {
    fn len(&self) -> usize {
        1 + self.key.len() + self.value.len()
    }
}

/// What was cut, for [`HEADERS_CUT`].
#[derive(Default)]
struct Cuts {
    /// Something could not be parsed safely (else everything cut was cut for size).
    malformed: bool,
    notes: Vec<String>,
    /// Bytes of `notes`, and cuts past them that were only counted.
    noted: usize,
    unnoted: usize,
}

impl Cuts {
    fn malformed(&mut self, what: impl std::fmt::Display, flaw: Flaw) {
        self.malformed = true;
        self.note(format_args!("{what}: {flaw}"));
    }

    /// Notes a cut; past what the detail can hold, only counts it (a table of tiny broken
    /// entries must not cost a string each).
    fn note(&mut self, text: std::fmt::Arguments<'_>) {
        if self.noted <= MAX_DETAIL_BYTES {
            let note = text.to_string();
            self.noted += note.len() + 2;
            self.notes.push(note);
        } else {
            self.unnoted += 1;
        }
    }

    fn detail(&self) -> String {
        let mut detail = format!("cut: {}", self.notes.join("; "));
        if self.unnoted > 0 {
            detail.push_str(&format!("; and {} more", self.unnoted));
        }
        detail
    }
}

/// Judges the content header frame `frame` (all of it, end marker included) against
/// `frame_max`: `None` when lapin can take it as it is, or the frame to pass on instead.
pub(crate) fn judge(frame: &[u8], frame_max: usize) -> Option<Vec<u8>> {
    let payload = frame.get(7..frame.len().saturating_sub(1))?;
    let fits = frame.len() <= frame_max;
    if fits && sound(payload) {
        return None;
    }
    Some(rebuild(frame[1..3].try_into().ok()?, payload, frame_max))
}

/// Whether lapin parses `payload` and builds it within the depth bound: the walk of
/// [`walk`], keeping nothing (this runs for every message).
fn sound(payload: &[u8]) -> bool {
    let Some(flags) = payload.get(12..14) else {
        return false;
    };
    let flags = u16::from_be_bytes([flags[0], flags[1]]);
    let mut at = HEADER_PREFIX;
    for (index, (_, kind)) in PROPERTIES.iter().enumerate() {
        if flags & (1u16 << (15 - index)) == 0 {
            continue;
        }
        let end = match kind {
            Kind::Octet => fixed(payload, at, 1),
            Kind::Timestamp => fixed(payload, at, 8),
            Kind::ShortString => key_end(payload, at, payload.len()),
            Kind::Table => table_extent(payload, at).and_then(|(start, end)| {
                let sound = entries(&payload[start..end]).all(|entry| {
                    entry.is_ok_and(|entry| entry.key.is_ok() && entry.flaw.is_none())
                });
                if sound { Ok(end) } else { Err(Flaw::Truncated) }
            }),
        };
        match end {
            Ok(end) => at = end,
            Err(_) => return false,
        }
    }
    at == payload.len()
}

/// Where the content of the table at `payload[at..]` starts and ends.
fn table_extent(payload: &[u8], at: usize) -> Result<(usize, usize), Flaw> {
    let len = payload
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or(Flaw::Truncated)?;
    let start = at + 4;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| start.checked_add(len))
        .filter(|end| *end <= payload.len())
        .ok_or(Flaw::Truncated)?;
    Ok((start, end))
}

/// The properties of a content header payload, read in order; what is unsound is noted in
/// `cuts` and left out.
struct Walk<'a> {
    /// Sound properties other than the headers: bit and encoded bytes.
    properties: Vec<(u16, &'a [u8])>,
    headers: Vec<Kept<'a>>,
    /// Where reading stopped.
    end: usize,
}

fn walk<'a>(payload: &'a [u8], cuts: &mut Cuts) -> Option<Walk<'a>> {
    let flags = u16::from_be_bytes(payload.get(12..14)?.try_into().ok()?);
    let mut walk = Walk {
        properties: Vec::new(),
        headers: Vec::new(),
        end: HEADER_PREFIX,
    };
    let mut at = HEADER_PREFIX;
    for (index, (name, kind)) in PROPERTIES.iter().enumerate() {
        let bit = 1u16 << (15 - index);
        if flags & bit == 0 {
            continue;
        }
        let end = match kind {
            Kind::Octet => fixed(payload, at, 1),
            Kind::Timestamp => fixed(payload, at, 8),
            Kind::ShortString => key_end(payload, at, payload.len()),
            Kind::Table => table(payload, at, &mut walk.headers, cuts),
        };
        match end {
            Ok(end) => {
                if *kind != Kind::Table {
                    walk.properties.push((bit, &payload[at..end]));
                }
                at = end;
            }
            Err(Flaw::NotUtf8) => {
                // Its extent is known: leave it out and read on.
                cuts.malformed(format_args!("property {name}"), Flaw::NotUtf8);
                at = key_end_unchecked(payload, at)?;
            }
            Err(flaw) => {
                // What follows cannot be told from garbage.
                cuts.malformed(format_args!("property {name} and those after it"), flaw);
                walk.end = payload.len();
                return Some(walk);
            }
        }
    }
    walk.end = at;
    if at != payload.len() {
        cuts.malformed("the properties", Flaw::Truncated);
    }
    Some(walk)
}

fn fixed(payload: &[u8], at: usize, len: usize) -> Result<usize, Flaw> {
    let end = at + len;
    if end > payload.len() {
        return Err(Flaw::Truncated);
    }
    Ok(end)
}

fn key_end_unchecked(payload: &[u8], at: usize) -> Option<usize> {
    Some(at + 1 + usize::from(*payload.get(at)?))
}

/// Reads the headers table at `payload[at..]` into `kept`, leaving out unsound entries.
fn table<'a>(
    payload: &'a [u8],
    at: usize,
    kept: &mut Vec<Kept<'a>>,
    cuts: &mut Cuts,
) -> Result<usize, Flaw> {
    let (start, end) = table_extent(payload, at)?;
    for entry in entries(&payload[start..end]) {
        match entry {
            Ok(entry) => match (entry.key, entry.flaw) {
                (Ok(key), None) => kept.push(Kept {
                    key,
                    value: entry.value,
                }),
                (Ok(key), Some(flaw)) => cuts.malformed(format_args!("header `{key}`"), flaw),
                (Err(flaw), _) => cuts.malformed("a header key", flaw),
            },
            Err(flaw) => cuts.malformed("the headers from there on", flaw),
        }
    }
    Ok(end)
}

/// A sound content header frame on `channel` built from `payload`: its sound parts, cut
/// until the frame fits `frame_max`, and [`HEADERS_CUT`] saying what was cut.
fn rebuild(channel: [u8; 2], payload: &[u8], frame_max: usize) -> Vec<u8> {
    let mut cuts = Cuts::default();
    let (properties, mut headers) = match walk(payload, &mut cuts) {
        Some(walk) => (walk.properties, walk.headers),
        None => {
            cuts.malformed("the properties", Flaw::Truncated);
            (Vec::new(), Vec::new())
        }
    };
    // A marker the message already carried is replaced by this one (a table holds a key once).
    headers.retain(|header| header.key != HEADERS_CUT);
    let fixed: usize = properties.iter().map(|(_, bytes)| bytes.len()).sum();
    // The frame without its headers' entries, and the room left for them after the marker.
    let base = FRAME_OVERHEAD + HEADER_PREFIX + fixed + 4;
    let room = frame_max.saturating_sub(base + marker_len());
    let mut total: usize = headers.iter().map(Kept::len).sum();
    if total > room {
        // Foreign headers first, largest first; warren's and the broker's last.
        let mut order: Vec<usize> = (0..headers.len()).collect();
        order.sort_by_key(|&i| {
            let own = own_header(headers[i].key);
            (own, std::cmp::Reverse(headers[i].len()))
        });
        let mut cut = vec![false; headers.len()];
        for i in order {
            if total <= room {
                break;
            }
            total -= headers[i].len();
            cut[i] = true;
            cuts.note(format_args!(
                "header `{}` ({} bytes) to fit the {frame_max}-byte frame",
                headers[i].key,
                headers[i].value.len()
            ));
        }
        let mut index = 0;
        headers.retain(|_| {
            index += 1;
            !cut[index - 1]
        });
    }
    let mut out = Vec::with_capacity(base + total + marker_len());
    out.push(2);
    out.extend_from_slice(&channel);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(payload.get(..12).unwrap_or(&[0; 12]));
    let mut flags = HEADERS_BIT;
    for (bit, _) in &properties {
        flags |= bit;
    }
    out.extend_from_slice(&flags.to_be_bytes());
    let after_headers = |bit: u16| bit < HEADERS_BIT;
    // Properties before the headers (content type, encoding), the headers, then the rest.
    for (_, bytes) in properties.iter().filter(|(bit, _)| !after_headers(*bit)) {
        out.extend_from_slice(bytes);
    }
    let table_at = out.len();
    out.extend_from_slice(&[0; 4]);
    for header in &headers {
        push_short(&mut out, header.key);
        out.extend_from_slice(header.value);
    }
    push_marker(&mut out, &cuts);
    let table_len = u32::try_from(out.len() - table_at - 4).unwrap_or(u32::MAX);
    out[table_at..table_at + 4].copy_from_slice(&table_len.to_be_bytes());
    for (_, bytes) in properties.iter().filter(|(bit, _)| after_headers(*bit)) {
        out.extend_from_slice(bytes);
    }
    let size = u32::try_from(out.len() - 7).unwrap_or(u32::MAX);
    out[3..7].copy_from_slice(&size.to_be_bytes());
    out.push(0xCE);
    out
}

/// The most bytes [`push_marker`] writes.
fn marker_len() -> usize {
    let entry = |key: &str, value: usize| 1 + key.len() + 1 + 4 + value;
    entry(
        HEADERS_CUT,
        4 + entry("reason", FailureReason::MalformedHeaders.as_str().len())
            + entry("detail", MAX_DETAIL_BYTES),
    )
}

fn push_marker(out: &mut Vec<u8>, cuts: &Cuts) {
    let reason = if cuts.malformed {
        FailureReason::MalformedHeaders.as_str()
    } else {
        FailureReason::TooLarge.as_str()
    };
    let detail = crate::text::truncate(&cuts.detail(), MAX_DETAIL_BYTES);
    push_short(out, HEADERS_CUT);
    out.push(b'F');
    let table_at = out.len();
    out.extend_from_slice(&[0; 4]);
    for (key, value) in [("reason", reason), ("detail", detail.as_str())] {
        push_short(out, key);
        out.push(b'S');
        out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(0).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    let len = u32::try_from(out.len() - table_at - 4).unwrap_or(u32::MAX);
    out[table_at..table_at + 4].copy_from_slice(&len.to_be_bytes());
}

/// A short string: a header key that came in as one (so at most 255 bytes), or one of ours.
fn push_short(out: &mut Vec<u8>, text: &str) {
    out.push(u8::try_from(text.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(text.as_bytes());
}
