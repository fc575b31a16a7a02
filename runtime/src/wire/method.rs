//! Method frames: the server's `connection.tune` (for the negotiated `frame_max`), and the
//! methods whose short strings lapin requires to be UTF-8 although RabbitMQ sends any bytes:
//! a producer's exchange and routing key (RabbitMQ routes any bytes), and the reply text of a
//! close (RabbitMQ cuts it at 255 bytes, possibly inside a character of a long name).

/// A short string field, or so many fixed bytes.
#[derive(Clone, Copy)]
enum Field {
    Short,
    Fixed(usize),
}

use Field::{Fixed, Short};

const CLASS_CONNECTION: u16 = 10;
const CLASS_CHANNEL: u16 = 20;
const CLASS_BASIC: u16 = 60;
const METHOD_TUNE: u16 = 30;

/// The methods judged, by class and method id, and their fields.
const JUDGED: [(u16, u16, &[Field]); 5] = [
    // basic.deliver: consumer tag, delivery tag, redelivered, exchange, routing key.
    (CLASS_BASIC, 60, &[Short, Fixed(8), Fixed(1), Short, Short]),
    // basic.get-ok: delivery tag, redelivered, exchange, routing key, message count.
    (
        CLASS_BASIC,
        71,
        &[Fixed(8), Fixed(1), Short, Short, Fixed(4)],
    ),
    // basic.return: reply code, reply text, exchange, routing key.
    (CLASS_BASIC, 50, &[Fixed(2), Short, Short, Short]),
    // connection.close and channel.close: reply code, reply text, class, method.
    (CLASS_CONNECTION, 50, &[Fixed(2), Short, Fixed(2), Fixed(2)]),
    (CLASS_CHANNEL, 40, &[Fixed(2), Short, Fixed(2), Fixed(2)]),
];

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

/// The `frame_max` the server proposes, when `frame` is its `connection.tune`.
pub(super) fn tune_frame_max(frame: &[u8]) -> Option<u32> {
    if u16_at(frame, 1)? != 0
        || u16_at(frame, 7)? != CLASS_CONNECTION
        || u16_at(frame, 9)? != METHOD_TUNE
    {
        return None;
    }
    Some(u32::from_be_bytes(frame.get(13..17)?.try_into().ok()?))
}

/// `frame` (a whole method frame) with its short strings made UTF-8, when it is one of the
/// methods judged and one of them is not; `None` to pass it on as it is.
pub(super) fn judge(frame: &[u8]) -> Option<Vec<u8>> {
    let (class, method) = (u16_at(frame, 7)?, u16_at(frame, 9)?);
    let (_, _, fields) = JUDGED
        .into_iter()
        .find(|(c, m, _)| (*c, *m) == (class, method))?;
    let arguments = frame.get(11..frame.len().checked_sub(1)?)?;
    // Pass on as it is unless every field is there and a short string is not UTF-8: a
    // frame malformed otherwise is the broker's, for lapin to report.
    let mut at = 0;
    let mut broken = false;
    for field in fields {
        match field {
            Fixed(n) => at += n,
            Short => {
                let len = usize::from(*arguments.get(at)?);
                let text = arguments.get(at + 1..at + 1 + len)?;
                broken |= std::str::from_utf8(text).is_err();
                at += 1 + len;
            }
        }
    }
    if !broken || at > arguments.len() {
        return None;
    }
    let mut out = frame[..11].to_vec();
    let mut at = 0;
    for field in fields {
        match field {
            Fixed(n) => {
                out.extend_from_slice(&arguments[at..at + n]);
                at += n;
            }
            Short => {
                let len = usize::from(arguments[at]);
                let text = String::from_utf8_lossy(&arguments[at + 1..at + 1 + len]);
                let text = crate::text::truncate(&text, usize::from(u8::MAX));
                out.push(u8::try_from(text.len()).unwrap_or(u8::MAX));
                out.extend_from_slice(text.as_bytes());
                at += 1 + len;
            }
        }
    }
    out.extend_from_slice(&arguments[at..]);
    let size = u32::try_from(out.len() - 7).unwrap_or(u32::MAX);
    out[3..7].copy_from_slice(&size.to_be_bytes());
    out.push(0xCE);
    Some(out)
}
