//! A quorum queue's `delivery_limit`: a number of deliveries, or `broker-default` for none
//! declared (the model's [`DeliveryLimit`]); absent, warren derives it from the retry policy.

use std::fmt;

use schemars::JsonSchema;
use schemars::r#gen::SchemaGenerator;
use schemars::schema::{InstanceType, Metadata, Schema, SchemaObject, SubschemaValidation};
use serde::{Deserializer, Serializer};
use warren_model::DeliveryLimit;

const BROKER_DEFAULT: &str = DeliveryLimit::BROKER_DEFAULT;

/// `#[serde(with = "delivery_limit")]`: a whole number, or `broker-default`.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<DeliveryLimit>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Option<DeliveryLimit>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a number of deliveries, or `{BROKER_DEFAULT}`")
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            u32::try_from(v)
                .map(|limit| Some(DeliveryLimit::Count(limit)))
                .map_err(|_| E::custom(format!("`{v}` is above the largest limit, {}", u32::MAX)))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format!(
                    "`{v}` is negative; write a number of deliveries, or `{BROKER_DEFAULT}`"
                ))),
            }
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            if v == BROKER_DEFAULT {
                Ok(Some(DeliveryLimit::BrokerDefault))
            } else {
                Err(E::custom(format!(
                    "`{v}` is not a delivery limit; write a number of deliveries, or \
                     `{BROKER_DEFAULT}` to declare none (the broker's own default)"
                )))
            }
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_any(self)
        }
    }
    deserializer.deserialize_option(Visitor)
}

/// The serializing half of `#[serde(with = "delivery_limit")]`.
pub(crate) fn serialize<S: Serializer>(
    value: &Option<DeliveryLimit>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(DeliveryLimit::Count(limit)) => serializer.serialize_u32(*limit),
        Some(DeliveryLimit::BrokerDefault) => serializer.serialize_str(BROKER_DEFAULT),
        Some(DeliveryLimit::Derived) | None => serializer.serialize_none(),
    }
}

/// The field in the format's JSON Schema.
pub(crate) struct DeliveryLimitSchema;

impl JsonSchema for DeliveryLimitSchema {
    fn schema_name() -> String {
        "DeliveryLimit".to_owned()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let described = |description: &str, object: SchemaObject| -> Schema {
            SchemaObject {
                metadata: Some(Box::new(Metadata {
                    description: Some(description.to_owned()),
                    ..Default::default()
                })),
                ..object
            }
            .into()
        };
        let count = SchemaObject {
            instance_type: Some(InstanceType::Integer.into()),
            number: Some(Box::new(schemars::schema::NumberValidation {
                minimum: Some(0.0),
                maximum: Some(f64::from(u32::MAX)),
                ..Default::default()
            })),
            ..Default::default()
        };
        let word = SchemaObject {
            instance_type: Some(InstanceType::String.into()),
            enum_values: Some(vec![BROKER_DEFAULT.into()]),
            ..Default::default()
        };
        SchemaObject {
            subschemas: Some(Box::new(SubschemaValidation {
                one_of: Some(vec![
                    described("Deliveries after which the broker dead-letters a message (N allows N+1).", count),
                    described(
                        "Declare no `x-delivery-limit`: the broker's own default applies (none on RabbitMQ 3.x, 20 on 4.x), as on a quorum queue another stack (amqp-contract, FastStream) declared.",
                        word,
                    ),
                ]),
                ..Default::default()
            })),
            ..Default::default()
        }
        .into()
    }
}
