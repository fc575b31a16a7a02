//! Durations written as `"250ms"`, `"1s"`, `"5m"` or `"1h"`.

use std::fmt;

use schemars::JsonSchema;
use schemars::r#gen::SchemaGenerator;
use schemars::schema::{InstanceType, Schema, SchemaObject, StringValidation};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use warren_model::{DURATION_UNITS as UNITS, DurationLabel};

/// A duration with a unit, as written in a contract. Stored in whole milliseconds: every
/// duration warren passes to RabbitMQ (TTLs, expiries) is an integer number of milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    millis: u64,
}

const PATTERN: &str = "^[0-9]+(ms|s|m|h)$";

impl Duration {
    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        Self { millis }
    }

    /// The duration in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// Parses `"<digits><unit>"` with unit `ms`, `s`, `m` or `h`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let digits_end = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(digits_end);
        let help = "write a whole number followed by a unit: `250ms`, `1s`, `5m` or `1h`";
        if digits.is_empty() {
            return Err(format!("`{text}` is not a duration; {help}"));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(if unit.is_empty() {
                format!("`{text}` has no unit; {help}")
            } else {
                format!("`{text}` has an unknown unit `{unit}`; {help}")
            });
        };
        digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .map(Self::from_millis)
            .ok_or_else(|| format!("`{text}` is too long a duration"))
    }
}

impl fmt::Display for Duration {
    /// Formats with the largest unit that divides the duration exactly (`1500ms`, `2s`), as
    /// the model names wait queues.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        DurationLabel(std::time::Duration::from(*self)).fmt(f)
    }
}

impl From<Duration> for std::time::Duration {
    fn from(value: Duration) -> Self {
        Self::from_millis(value.millis)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"250ms\", \"1s\", \"5m\" or \"1h\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
                Duration::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "`{v}` has no unit; write `{v}ms` or `{v}s`"
                )))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
                Err(E::custom(format!("`{v}` is not a duration")))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> String {
        "Duration".to_owned()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        SchemaObject {
            instance_type: Some(InstanceType::String.into()),
            string: Some(Box::new(StringValidation {
                pattern: Some(PATTERN.to_owned()),
                ..Default::default()
            })),
            metadata: Some(Box::new(schemars::schema::Metadata {
                description: Some(
                    "A whole number with a unit: `250ms`, `1s`, `5m` or `1h`.".to_owned(),
                ),
                examples: vec!["250ms".into(), "1s".into()],
                ..Default::default()
            })),
            ..Default::default()
        }
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::Duration;

    #[test]
    fn parses_every_unit_and_prints_the_largest_exact_one() {
        for (text, millis, shown) in [
            ("250ms", 250, "250ms"),
            ("1500ms", 1500, "1500ms"),
            ("2000ms", 2000, "2s"),
            ("1s", 1000, "1s"),
            ("5m", 300_000, "5m"),
            ("1h", 3_600_000, "1h"),
            ("0s", 0, "0ms"),
        ] {
            let d = Duration::parse(text).expect(text);
            assert_eq!(d.as_millis(), millis, "{text}");
            assert_eq!(d.to_string(), shown, "{text}");
        }
    }

    #[test]
    fn rejects_missing_or_unknown_units_with_a_hint() {
        assert_eq!(
            Duration::parse("250").unwrap_err(),
            "`250` has no unit; write a whole number followed by a unit: `250ms`, `1s`, `5m` or `1h`"
        );
        assert!(
            Duration::parse("1d")
                .unwrap_err()
                .contains("unknown unit `d`")
        );
        assert!(
            Duration::parse("1.5s")
                .unwrap_err()
                .contains("unknown unit `.5s`")
        );
        assert!(
            Duration::parse("ms")
                .unwrap_err()
                .contains("is not a duration")
        );
        assert!(
            Duration::parse("99999999999999999999h")
                .unwrap_err()
                .contains("too long")
        );
    }
}
