//! The model's enums as the contract format reads them: each value's spelling and its parser
//! live in `warren-model` (`as_str`, `FromStr`); what is added here is what only the format
//! needs, a description of each value for the format's JSON Schema, and serde glue.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use schemars::JsonSchema;
use schemars::r#gen::SchemaGenerator;
use schemars::schema::{InstanceType, Metadata, Schema, SchemaObject, SubschemaValidation};
use serde::{Deserializer, Serializer};
use warren_model::{
    Compression, ExchangeKind, Exhausted, LeaderLocator, OnPoison, QueueKind, UnknownName,
};

/// A model enum written as a word in a contract.
pub(crate) trait Spelled: Copy + FromStr<Err = UnknownName> + 'static {
    /// Its name in the format's JSON Schema.
    const SCHEMA_NAME: &'static str;
    /// What the field means, for the JSON Schema.
    const DESCRIPTION: &'static str;
    /// Every value, in order.
    fn all() -> &'static [Self];
    /// Every spelling, in the same order.
    fn names() -> &'static [&'static str];
    /// The value's spelling.
    fn spelling(self) -> &'static str;
    /// What the value means, for the JSON Schema.
    fn describe(self) -> &'static str;
}

/// `Spelled` for model enums, with a description per value; the `match` is exhaustive, so a
/// value added to the model without a description here fails to compile.
macro_rules! described {
    ($($ty:ident: $description:literal { $($variant:ident => $text:literal),* $(,)? })*) => {
        $(impl Spelled for $ty {
            const SCHEMA_NAME: &'static str = stringify!($ty);
            const DESCRIPTION: &'static str = $description;
            fn all() -> &'static [Self] {
                Self::ALL
            }
            fn names() -> &'static [&'static str] {
                Self::NAMES
            }
            fn spelling(self) -> &'static str {
                self.as_str()
            }
            fn describe(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),*
                }
            }
        })*
    };
}

described! {
    ExchangeKind: "The kind of an exchange, which decides how routing keys are matched." {
        Topic => "Routing keys are dot-separated words matched against patterns with `*` and `#`.",
        Direct => "The routing key must equal the binding key.",
        Fanout => "Every bound queue gets every message.",
        Headers => "Messages are matched on their headers, not their routing key.",
    }
    QueueKind: "The kind of a queue." {
        Quorum => "Replicated, durable, with delivery counting (the default).",
        Classic => "The classic single-node queue.",
        Stream => "An append-only log; consumers read by offset.",
    }
    LeaderLocator: "Which node of a cluster a new quorum queue's leader is placed on (`x-queue-leader-locator`)." {
        ClientLocal => "The node of the connection that declares it (RabbitMQ's default).",
        Balanced => "The node with the fewest leaders, so that queues spread over the cluster.",
    }
    OnPoison: "What the worker does with a message it cannot decode or validate." {
        DeadLetter => "Send it to the queue's dead-letter exchange (the default; requires one).",
        Drop => "Acknowledge and discard it, with a log line.",
    }
    Compression: "Body compression applied by a publisher." {
        Gzip => "gzip (`content-encoding: gzip`).",
        Deflate => "zlib deflate (`content-encoding: deflate`).",
    }
    Exhausted: "What happens once the retries are spent." {
        DeadLetter => "Dead-letter the message (the default).",
        Drop => "Acknowledge and discard it, with a log line.",
        Requeue => "Return it to the queue again, with a warning; it may loop forever.",
    }
}

/// The JSON Schema of a [`Spelled`] enum: one string constant per value, each described, as
/// schemars writes a derived enum of unit variants.
pub(crate) struct SpelledSchema<T>(PhantomData<T>);

impl<T: Spelled> JsonSchema for SpelledSchema<T> {
    fn schema_name() -> String {
        T::SCHEMA_NAME.to_owned()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let one_of = T::all()
            .iter()
            .map(|value| {
                SchemaObject {
                    metadata: Some(Box::new(Metadata {
                        description: Some(value.describe().to_owned()),
                        ..Default::default()
                    })),
                    instance_type: Some(InstanceType::String.into()),
                    enum_values: Some(vec![value.spelling().into()]),
                    ..Default::default()
                }
                .into()
            })
            .collect();
        SchemaObject {
            metadata: Some(Box::new(Metadata {
                description: Some(T::DESCRIPTION.to_owned()),
                ..Default::default()
            })),
            subschemas: Some(Box::new(SubschemaValidation {
                one_of: Some(one_of),
                ..Default::default()
            })),
            ..Default::default()
        }
        .into()
    }
}

/// `#[serde(with = "spelled")]` for an optional [`Spelled`] field: read through the model's
/// `FromStr`, with serde's message for an unknown variant.
pub(crate) fn deserialize<'de, D: Deserializer<'de>, T: Spelled>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    struct Word<T>(PhantomData<T>);
    impl<'de, T: Spelled> serde::de::Visitor<'de> for Word<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "one of ")?;
            for (i, name) in T::names().iter().enumerate() {
                let separator = if i == 0 { "" } else { ", " };
                write!(f, "{separator}`{name}`")?;
            }
            Ok(())
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            text.parse()
                .map(Some)
                .map_err(|_| E::unknown_variant(text, T::names()))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_str(self)
        }
    }
    deserializer.deserialize_option(Word(PhantomData))
}

/// The serializing half of `#[serde(with = "spelled")]`.
pub(crate) fn serialize<S: Serializer, T: Spelled>(
    value: &Option<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.serialize_str(value.spelling()),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use warren_model::ExchangeKind;

    /// What the format declared before the model held the enum: serde's derive.
    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Derived {
        Topic,
        Direct,
        Fanout,
        Headers,
    }

    #[derive(Debug, Deserialize)]
    struct ViaDerive {
        #[serde(default)]
        kind: Option<Derived>,
    }

    #[derive(Debug, Deserialize)]
    struct ViaModel {
        #[serde(default, with = "super")]
        kind: Option<ExchangeKind>,
    }

    /// Reading through the model's `FromStr` accepts and refuses what the derive did, with the
    /// same message for an unknown word (the checks' fixtures pin it).
    #[test]
    fn reads_as_the_derive_did() {
        for value in [
            "topic", "headers", "topics", "Topic", "5", "true", "~", "''", "[topic]",
        ] {
            let yaml = format!("kind: {value}");
            let derived = yaml_serde::from_str::<ViaDerive>(&yaml);
            let model = yaml_serde::from_str::<ViaModel>(&yaml);
            match (&derived, &model) {
                (Ok(d), Ok(m)) => assert_eq!(
                    d.kind.as_ref().map(|k| format!("{k:?}")),
                    m.kind.map(|k| format!("{k:?}")),
                    "{value}"
                ),
                (Err(d), Err(m)) => {
                    if value.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                        assert_eq!(d.to_string(), m.to_string(), "{value}");
                    }
                }
                _ => panic!("{value}: derive {derived:?}, model {model:?}"),
            }
        }
    }
}
