//! Typed headers to and from AMQP field tables.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use serde_json::Value;

/// Converts a JSON object (a serialized headers type) into an AMQP field table. `null`
/// values are left out: an absent optional header is not sent.
pub(crate) fn to_field_table(object: &serde_json::Map<String, Value>) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in object {
        if let Some(value) = to_amqp(value) {
            table.insert(ShortString::from(key.as_str()), value);
        }
    }
    table
}

fn to_amqp(value: &Value) -> Option<AMQPValue> {
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
            for item in items.iter().filter_map(to_amqp) {
                array.push(item);
            }
            AMQPValue::FieldArray(array)
        }
        Value::Object(map) => AMQPValue::FieldTable(to_field_table(map)),
    })
}
