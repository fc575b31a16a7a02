//! The copies warren publishes (retries, dead letters) kept within the connection's frame
//! size: a content header frame over `frame_max` makes the broker close the connection, and
//! every consumer on it loses its deliveries. A producer's headers plus warren's failure
//! context, plus the `x-death` the broker adds later, can cross it.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

use super::header::{FRAME_OVERHEAD, HEADER_PREFIX, HEADERS_CUT, MAX_DETAIL_BYTES, own_header};
use crate::model::FailureReason;

/// Room kept free in a copy's header frame for what the broker adds on its way (an `x-death`
/// entry per queue and reason, and its `x-first-death-*` and `x-last-death-*` headers).
const BROKER_RESERVE: usize = 4096;

/// Room kept free for the `user_id` a publish adds to a copy carrying a publish time
/// (`crate::publish_time::vouched`): a short string.
const USER_ID_RESERVE: usize = 1 + u8::MAX as usize;

/// The most a copy's content header frame may weigh on a connection with `frame_max`.
pub(crate) fn copy_budget(frame_max: usize) -> usize {
    frame_max - (BROKER_RESERVE + USER_ID_RESERVE).min(frame_max / 2)
}

/// The bytes of a content header frame carrying `properties`.
pub(crate) fn header_frame_len(properties: &BasicProperties) -> usize {
    let short = |s: &Option<ShortString>| s.as_ref().map_or(0, |s| 1 + s.as_str().len());
    FRAME_OVERHEAD
        + HEADER_PREFIX
        + short(properties.content_type())
        + short(properties.content_encoding())
        + properties
            .headers()
            .as_ref()
            .map_or(0, |t| 4 + table_len(t))
        + properties.delivery_mode().map_or(0, |_| 1)
        + properties.priority().map_or(0, |_| 1)
        + short(properties.correlation_id())
        + short(properties.reply_to())
        + short(properties.expiration())
        + short(properties.message_id())
        + properties.timestamp().map_or(0, |_| 8)
        + short(properties.kind())
        + short(properties.user_id())
        + short(properties.app_id())
        + short(properties.cluster_id())
}

fn table_len(table: &FieldTable) -> usize {
    table
        .inner()
        .iter()
        .map(|(key, value)| entry_len(key.as_str(), value))
        .sum()
}

fn entry_len(key: &str, value: &AMQPValue) -> usize {
    1 + key.len() + value_len(value)
}

/// The encoded length of `value`, type tag included. Recursive: values reach here from the
/// guarded connection, nested at most `MAX_DEPTH` levels.
fn value_len(value: &AMQPValue) -> usize {
    1 + match value {
        AMQPValue::Void => 0,
        AMQPValue::Boolean(_) | AMQPValue::ShortShortInt(_) | AMQPValue::ShortShortUInt(_) => 1,
        AMQPValue::ShortInt(_) | AMQPValue::ShortUInt(_) => 2,
        AMQPValue::LongInt(_) | AMQPValue::LongUInt(_) | AMQPValue::Float(_) => 4,
        AMQPValue::DecimalValue(_) => 5,
        AMQPValue::LongLongInt(_) | AMQPValue::Double(_) | AMQPValue::Timestamp(_) => 8,
        AMQPValue::ShortString(s) => 1 + s.as_str().len(),
        AMQPValue::LongString(s) => 4 + s.as_bytes().len(),
        AMQPValue::ByteArray(b) => 4 + b.as_slice().len(),
        AMQPValue::FieldArray(items) => 4 + items.as_slice().iter().map(value_len).sum::<usize>(),
        AMQPValue::FieldTable(table) => 4 + table_len(table),
    }
}

/// The [`HEADERS_CUT`] table.
fn marker(reason: &str, detail: &str) -> AMQPValue {
    let mut table = FieldTable::default();
    let text = |s: &str| AMQPValue::LongString(LongString::from(s));
    table.insert(ShortString::from("reason"), text(reason));
    table.insert(
        ShortString::from("detail"),
        text(&crate::text::truncate(detail, MAX_DETAIL_BYTES)),
    );
    AMQPValue::FieldTable(table)
}

/// `properties` with headers cut (foreign ones first, largest first; warren's and the
/// broker's last) until their content header frame fits `budget`, and the cut recorded in
/// [`HEADERS_CUT`]. `None` when they fit as they are.
pub(crate) fn fit(properties: &BasicProperties, budget: usize) -> Option<BasicProperties> {
    let len = header_frame_len(properties);
    if len <= budget {
        return None;
    }
    let mut headers = properties
        .headers()
        .clone()
        .unwrap_or_default()
        .inner()
        .clone();
    // A message cut before (by the connection's guard) keeps that story too.
    let earlier = super::headers_cut(properties.headers().as_ref());
    headers.remove(HEADERS_CUT);
    let marker_room = entry_len(
        HEADERS_CUT,
        &marker(
            FailureReason::TooLarge.as_str(),
            &"-".repeat(MAX_DETAIL_BYTES),
        ),
    );
    let mut order: Vec<(bool, usize, ShortString)> = headers
        .iter()
        .map(|(key, value)| {
            let own = own_header(key.as_str());
            (own, entry_len(key.as_str(), value), key.clone())
        })
        .collect();
    order.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let without = len
        - properties
            .headers()
            .as_ref()
            .map_or(0, |t| 4 + table_len(t));
    let mut total: usize = order.iter().map(|(_, size, _)| size).sum();
    let mut notes = Vec::new();
    for (_, size, key) in order {
        if without + 4 + total + marker_room <= budget {
            break;
        }
        total -= size;
        headers.remove(&key);
        notes.push(format!("header `{key}` ({size} bytes)"));
    }
    let mut detail = format!(
        "cut to fit a {budget}-byte header frame: {}",
        notes.join(", ")
    );
    let mut reason = FailureReason::TooLarge.as_str();
    if let Some((was, before)) = earlier {
        reason = was.as_str();
        detail = format!("{before}; then {detail}");
    }
    headers.insert(ShortString::from(HEADERS_CUT), marker(reason, &detail));
    Some(properties.clone().with_headers(FieldTable::from(headers)))
}
