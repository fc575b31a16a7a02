//! Conversions between warren's values and AMQP field tables.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use serde_json::{Map, Value};

use crate::model::{ArgValue, Arguments, headers};

/// The application headers of a message as warren edits them, for a copy it sends: by name,
/// in order.
pub(crate) type Headers = std::collections::BTreeMap<ShortString, AMQPValue>;

/// The deepest nesting of tables and arrays accepted in headers, the headers table itself
/// being level 1. RabbitMQ's own `x-death` reaches 4; a few hundred levels overflow a thread's
/// default stack in lapin's recursive parser. The connection's guard (`crate::wire`) cuts
/// deeper headers before lapin parses them; conversions here stop at it too.
pub(crate) const MAX_DEPTH: usize = 32;

/// What RabbitMQ's `NOT_FOUND` says of a durable queue that exists but whose node is down: a
/// classic queue on a cluster node that stopped, `home node 'rabbit@b' of durable queue 'q'
/// in vhost '/' is down or inaccessible`, or, while that node is going down, `queue 'q' in
/// vhost '/' process is stopped by supervisor` (seen on 3.10.8 in the cluster test: read as
/// gone, it stopped the whole worker). The broker has no other signal for it.
const NODE_DOWN: [&str; 2] = [
    "is down or inaccessible",
    "process is stopped by supervisor",
];

/// Why the broker said a queue or exchange is not there (`NOT_FOUND`), if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotFound {
    /// It does not exist (never declared, or deleted).
    Gone,
    /// It exists, on a cluster node that is down: it is back with its node.
    NodeDown,
}

/// Whether, and why, `error` is the broker's `NOT_FOUND`.
pub(crate) fn not_found(error: &lapin::Error) -> Option<NotFound> {
    let lapin::ErrorKind::ProtocolError(amqp) = error.kind() else {
        return None;
    };
    if amqp.kind()
        != &lapin::protocol::AMQPErrorKind::Soft(lapin::protocol::AMQPSoftError::NOTFOUND)
    {
        return None;
    }
    let message = amqp.get_message().as_str();
    Some(if NODE_DOWN.iter().any(|phrase| message.contains(phrase)) {
        NotFound::NodeDown
    } else {
        NotFound::Gone
    })
}

/// Declaration arguments as an AMQP field table.
pub(crate) fn arguments(arguments: &Arguments) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in arguments {
        let value = match value {
            ArgValue::Bool(b) => AMQPValue::Boolean(*b),
            ArgValue::Int(i) => AMQPValue::LongLongInt(*i),
            ArgValue::Float(f) => AMQPValue::Double(*f),
            ArgValue::String(s) => AMQPValue::LongString(LongString::from(s.as_str())),
        };
        table.insert(ShortString::from(key.as_str()), value);
    }
    table
}

/// A JSON object (a serialized headers type) as an AMQP field table. `null` values are left
/// out: an absent optional header is not sent.
pub(crate) fn json_to_table(object: &Map<String, Value>) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in object {
        if let Some(value) = json_to_amqp(value) {
            table.insert(ShortString::from(key.as_str()), value);
        }
    }
    table
}

fn json_to_amqp(value: &Value) -> Option<AMQPValue> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => AMQPValue::Boolean(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => AMQPValue::LongLongInt(i),
            (None, Some(f)) => AMQPValue::Double(f),
            (None, None) => AMQPValue::LongString(LongString::from(n.to_string())),
        },
        Value::String(s) => AMQPValue::LongString(LongString::from(s.as_str())),
        Value::Array(items) => {
            let mut array = FieldArray::default();
            for item in items.iter().filter_map(json_to_amqp) {
                array.push(item);
            }
            AMQPValue::FieldArray(array)
        }
        Value::Object(map) => AMQPValue::FieldTable(json_to_table(map)),
    })
}

/// The application headers of a message as a JSON object, leaving out `x-` headers, which
/// belong to the broker and to warren's retry bookkeeping, and the trace context headers,
/// which belong to the transport: a headers schema that allows no other property still
/// validates a traced message.
pub(crate) fn table_to_json(table: &FieldTable) -> Map<String, Value> {
    table
        .inner()
        .iter()
        .filter(|(key, _)| {
            !key.as_str().starts_with("x-") && !headers::TRACE.contains(&key.as_str())
        })
        .map(|(key, value)| (key.as_str().to_owned(), amqp_to_json(value, 1)))
        .collect()
}

/// `value`, held by a table at `depth`, as JSON. Recursive, so bounded: the connection's guard
/// already cuts headers nested deeper than [`MAX_DEPTH`], and deeper levels would read as
/// `null` here rather than recurse.
pub(crate) fn amqp_to_json(value: &AMQPValue, depth: usize) -> Value {
    if depth >= MAX_DEPTH && matches!(value, AMQPValue::FieldArray(_) | AMQPValue::FieldTable(_)) {
        return Value::Null;
    }
    let nested = |value| amqp_to_json(value, depth + 1);
    match value {
        AMQPValue::Boolean(b) => Value::Bool(*b),
        AMQPValue::ShortShortInt(i) => Value::from(*i),
        AMQPValue::ShortShortUInt(i) => Value::from(*i),
        AMQPValue::ShortInt(i) => Value::from(*i),
        AMQPValue::ShortUInt(i) => Value::from(*i),
        AMQPValue::LongInt(i) => Value::from(*i),
        AMQPValue::LongUInt(i) => Value::from(*i),
        AMQPValue::LongLongInt(i) => Value::from(*i),
        AMQPValue::Timestamp(t) => Value::from(*t),
        AMQPValue::Float(f) => Value::from(f64::from(*f)),
        AMQPValue::Double(f) => Value::from(*f),
        AMQPValue::DecimalValue(d) => {
            Value::from(f64::from(d.value) / 10f64.powi(i32::from(d.scale)))
        }
        AMQPValue::ShortString(s) => Value::String(s.as_str().to_owned()),
        AMQPValue::LongString(s) => {
            Value::String(String::from_utf8_lossy(s.as_bytes()).into_owned())
        }
        AMQPValue::ByteArray(bytes) => {
            Value::String(String::from_utf8_lossy(bytes.as_slice()).into_owned())
        }
        AMQPValue::FieldArray(items) => Value::Array(items.as_slice().iter().map(nested).collect()),
        AMQPValue::FieldTable(table) => Value::Object(
            table
                .inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), nested(v)))
                .collect(),
        ),
        AMQPValue::Void => Value::Null,
    }
}

/// An integer header (`x-retry-count`, `x-delivery-count`), whatever integer type the
/// broker or a client used.
pub(crate) fn header_int(table: Option<&FieldTable>, key: &str) -> Option<i64> {
    int_value(table?.inner().get(key)?)
}

/// A string header.
pub(crate) fn header_str(table: Option<&FieldTable>, key: &str) -> Option<String> {
    str_value(table?.inner().get(key)?)
}

/// A header's value as an integer ([`header_int`]).
pub(crate) fn int_value(value: &AMQPValue) -> Option<i64> {
    match value {
        AMQPValue::ShortShortInt(i) => Some(i64::from(*i)),
        AMQPValue::ShortShortUInt(i) => Some(i64::from(*i)),
        AMQPValue::ShortInt(i) => Some(i64::from(*i)),
        AMQPValue::ShortUInt(i) => Some(i64::from(*i)),
        AMQPValue::LongInt(i) => Some(i64::from(*i)),
        AMQPValue::LongUInt(i) => Some(i64::from(*i)),
        AMQPValue::LongLongInt(i) => Some(*i),
        AMQPValue::Timestamp(t) => i64::try_from(*t).ok(),
        _ => None,
    }
}

/// A header's value as a string ([`header_str`]).
pub(crate) fn str_value(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    /// A classic queue on a node going down is reported two ways; either is the node, not
    /// a deleted queue (read as deleted, the second stopped a whole worker on a cluster).
    #[test]
    fn a_queue_whose_node_is_down_is_not_gone() {
        use lapin::protocol::{AMQPError, AMQPErrorKind, AMQPSoftError};

        use super::{NotFound, not_found};
        let error = |text: &str| {
            lapin::Error::from(lapin::ErrorKind::ProtocolError(AMQPError::new(
                AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND),
                text.into(),
            )))
        };
        for text in [
            "NOT_FOUND - home node 'rabbit@b' of durable queue 'q' in vhost '/' is down or inaccessible",
            "NOT_FOUND - queue 'q' in vhost '/' process is stopped by supervisor",
        ] {
            assert_eq!(not_found(&error(text)), Some(NotFound::NodeDown), "{text}");
        }
        assert_eq!(
            not_found(&error("NOT_FOUND - no queue 'q' in vhost '/'")),
            Some(NotFound::Gone)
        );
    }
}
