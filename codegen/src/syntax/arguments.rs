//! How a contract writes argument values (`x-` arguments, header-match values): the model's
//! [`ArgValue`], read and written as a bare YAML scalar.
//!
//! serde's untagged shape needs an enum of its own; this private one is only that shape, with
//! exhaustive conversions both ways, and the name and docs the format's JSON Schema shows.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use warren_model::ArgValue;

/// A scalar argument value (`x-` arguments and header-match values).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum ArgumentValue {
    /// `true` or `false`.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string.
    String(String),
}

impl From<ArgumentValue> for ArgValue {
    fn from(value: ArgumentValue) -> Self {
        match value {
            ArgumentValue::Bool(b) => Self::Bool(b),
            ArgumentValue::Int(i) => Self::Int(i),
            ArgumentValue::Float(f) => Self::Float(f),
            ArgumentValue::String(s) => Self::String(s),
        }
    }
}

impl From<&ArgValue> for ArgumentValue {
    fn from(value: &ArgValue) -> Self {
        match value {
            ArgValue::Bool(b) => Self::Bool(*b),
            ArgValue::Int(i) => Self::Int(*i),
            ArgValue::Float(f) => Self::Float(*f),
            ArgValue::String(s) => Self::String(s.clone()),
        }
    }
}

/// The JSON Schema of a map of arguments.
pub(crate) type Schema = BTreeMap<String, ArgumentValue>;

/// `#[serde(with = "arguments")]`: a map of arguments, read.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, ArgValue>, D::Error> {
    let map = BTreeMap::<String, ArgumentValue>::deserialize(deserializer)?;
    Ok(map.into_iter().map(|(k, v)| (k, v.into())).collect())
}

/// `#[serde(with = "arguments")]`: a map of arguments, written.
pub(crate) fn serialize<S: Serializer>(
    map: &BTreeMap<String, ArgValue>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let map: BTreeMap<&String, ArgumentValue> = map.iter().map(|(k, v)| (k, v.into())).collect();
    map.serialize(serializer)
}
