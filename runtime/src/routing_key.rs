//! Routing keys built from a contract's template and typed placeholder values.

use crate::{PublishError, ShortField};

/// A piece of a routing-key template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPart<'a> {
    /// Text written in the contract.
    Literal(&'static str),
    /// The value of the placeholder `name`.
    Value {
        /// The placeholder's name, for errors.
        name: &'static str,
        /// Its value.
        value: &'a str,
    },
}

/// A routing key, assembled from its template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingKey(String);

impl RoutingKey {
    /// Joins `parts`. A placeholder's value must not be empty (it would change the key's word
    /// structure), and the key must fit AMQP's 255 bytes.
    pub fn build(parts: &[KeyPart<'_>]) -> Result<Self, PublishError> {
        let mut key = String::new();
        for part in parts {
            match part {
                KeyPart::Literal(text) => key.push_str(text),
                KeyPart::Value { name, value } => {
                    if value.is_empty() {
                        return Err(PublishError::EmptyPlaceholder { placeholder: name });
                    }
                    key.push_str(value);
                }
            }
        }
        if key.len() > crate::model::limits::MAX_SHORT_STRING {
            return Err(PublishError::TooLong {
                field: ShortField::RoutingKey,
                bytes: key.len(),
            });
        }
        Ok(Self(key))
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::{KeyPart, RoutingKey};
    use crate::{PublishError, ShortField};

    #[test]
    fn joins_literals_and_values() {
        let key = RoutingKey::build(&[
            KeyPart::Literal("order."),
            KeyPart::Value {
                name: "region",
                value: "eu.west",
            },
            KeyPart::Literal(".placed"),
        ])
        .unwrap();
        assert_eq!(key.as_str(), "order.eu.west.placed");
    }

    #[test]
    fn refuses_empty_values_and_long_keys() {
        let empty = RoutingKey::build(&[KeyPart::Value {
            name: "region",
            value: "",
        }]);
        assert!(matches!(
            empty,
            Err(PublishError::EmptyPlaceholder {
                placeholder: "region"
            })
        ));
        let long = "x".repeat(256);
        let too_long = RoutingKey::build(&[KeyPart::Value {
            name: "id",
            value: &long,
        }]);
        assert!(matches!(
            too_long,
            Err(PublishError::TooLong {
                field: ShortField::RoutingKey,
                bytes: 256
            })
        ));
    }
}
