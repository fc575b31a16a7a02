//! AMQP field values walked without recursion and without building them.
//!
//! lapin's parser (`amq-protocol-types`) builds header tables recursively on the connection's
//! I/O thread: a header nested a few hundred levels deep overflows that thread's stack and
//! aborts the process, and any value it cannot parse (an unknown type tag, a key that is not
//! UTF-8, a length past its table) closes the whole connection. This walk accepts exactly what
//! that parser accepts, within [`MAX_DEPTH`], in time linear in the bytes and with a stack of
//! at most [`MAX_DEPTH`] entries, so hostile headers can be judged before lapin sees them.

pub(crate) use crate::amqp::MAX_DEPTH;

/// What is wrong with a field value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flaw {
    /// A length runs past the end of its table, array or frame.
    Truncated,
    /// A type tag lapin does not know.
    UnknownType(u8),
    /// A table key or short string is not UTF-8.
    NotUtf8,
    /// Tables and arrays nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl std::fmt::Display for Flaw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated => f.write_str("a length runs past its end"),
            Self::UnknownType(tag) => write!(f, "unknown field type 0x{tag:02x}"),
            Self::NotUtf8 => f.write_str("a key or short string is not UTF-8"),
            Self::TooDeep => write!(f, "nested deeper than {MAX_DEPTH} levels"),
        }
    }
}

/// The value's type tag read, where it ends, and whether it opens a table or an array.
struct Extent {
    end: usize,
    container: Option<bool>,
}

/// The extent of the value at `data[at..limit]` without looking inside it: a table or an
/// array is known by its length prefix.
fn extent(data: &[u8], at: usize, limit: usize) -> Result<Extent, Flaw> {
    let tag = *data[..limit].get(at).ok_or(Flaw::Truncated)?;
    let body = at + 1;
    let fixed = match tag {
        b'V' => 0,
        b't' | b'b' | b'B' => 1,
        b's' | b'U' | b'u' => 2,
        b'I' | b'i' | b'f' => 4,
        b'D' => 5,
        b'L' | b'l' | b'd' | b'T' => 8,
        b'S' | b'x' | b'A' | b'F' => {
            let len = u32_at(data, body, limit)?;
            let end = advance(body + 4, len, limit)?;
            let container = match tag {
                b'F' => Some(true),
                b'A' => Some(false),
                _ => None,
            };
            return Ok(Extent { end, container });
        }
        other => return Err(Flaw::UnknownType(other)),
    };
    Ok(Extent {
        end: advance(body, fixed, limit)?,
        container: None,
    })
}

/// The length of the field value at the start of `data` (its type tag first), checked all
/// the way down. `depth` is the level of the table holding it (1 for the headers table).
pub(crate) fn value_len(data: &[u8], depth: usize) -> Result<usize, Flaw> {
    // The tables and arrays entered so far: where each ends, and whether it is a table (whose
    // items are key-value pairs) or an array (whose items are values).
    let mut open: Vec<(usize, bool)> = Vec::new();
    let mut at = 0;
    loop {
        let limit = open.last().map_or(data.len(), |&(end, _)| end);
        let value = extent(data, at, limit)?;
        match value.container {
            Some(table) => {
                if depth + open.len() + 1 > MAX_DEPTH {
                    return Err(Flaw::TooDeep);
                }
                at += 5;
                open.push((value.end, table));
            }
            None => at = value.end,
        }
        // Leave every container that just ended; step over the next key of a table.
        loop {
            let Some(&(end, table)) = open.last() else {
                return Ok(at);
            };
            if at == end {
                open.pop();
                continue;
            }
            if table {
                at = key_end(data, at, end)?;
            }
            break;
        }
    }
}

/// Where the short-string key at `data[at..]` ends, within `limit`.
pub(crate) fn key_end(data: &[u8], at: usize, limit: usize) -> Result<usize, Flaw> {
    let len = *data[..limit].get(at).ok_or(Flaw::Truncated)?;
    let end = advance(at + 1, u32::from(len), limit)?;
    std::str::from_utf8(&data[at + 1..end]).map_err(|_| Flaw::NotUtf8)?;
    Ok(end)
}

/// One entry of a table, as the bytes it was sent with.
pub(crate) struct Entry<'a> {
    /// The key, when it is UTF-8.
    pub key: Result<&'a str, Flaw>,
    /// The encoded value (type tag first), with what is wrong inside it, if anything.
    pub value: &'a [u8],
    pub flaw: Option<Flaw>,
}

/// The entries of a table's content (`data` without its length prefix), each judged on its
/// own. Stops with `Err` where an entry's extent cannot be known (a truncated key or an
/// unknown type tag at the top): what follows cannot be told apart from garbage.
pub(crate) fn entries(data: &[u8]) -> impl Iterator<Item = Result<Entry<'_>, Flaw>> {
    let mut at = 0;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || at >= data.len() {
            return None;
        }
        let entry = (|| {
            let len = usize::from(*data.get(at).ok_or(Flaw::Truncated)?);
            let key_bytes = data.get(at + 1..at + 1 + len).ok_or(Flaw::Truncated)?;
            let start = at + 1 + len;
            let value_extent = extent(data, start, data.len())?;
            let value = &data[start..value_extent.end];
            let flaw = match value_len(value, 1) {
                Ok(n) if n == value.len() => None,
                Ok(_) => Some(Flaw::Truncated),
                Err(flaw) => Some(flaw),
            };
            at = value_extent.end;
            Ok(Entry {
                key: std::str::from_utf8(key_bytes).map_err(|_| Flaw::NotUtf8),
                value,
                flaw,
            })
        })();
        failed = entry.is_err();
        Some(entry)
    })
}

fn u32_at(data: &[u8], at: usize, limit: usize) -> Result<u32, Flaw> {
    let bytes = data[..limit].get(at..at + 4).ok_or(Flaw::Truncated)?;
    Ok(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

fn advance(at: usize, len: u32, limit: usize) -> Result<usize, Flaw> {
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| at.checked_add(len))
        .ok_or(Flaw::Truncated)?;
    if end > limit {
        return Err(Flaw::Truncated);
    }
    Ok(end)
}
