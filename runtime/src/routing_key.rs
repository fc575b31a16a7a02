//! Routing keys: a contract's key with its placeholders filled in at publish time.

use std::borrow::Cow;

use crate::{PublishError, ShortField};

/// `template` (a publisher's or rpc's key as the contract writes it, `order.{region}.placed`)
/// with its placeholders filled in by `values`, in order; as it is, unallocated, when there
/// are none (a default exchange's key is a queue's name, never read for braces). A
/// placeholder's value must not be empty (it would change the key's word structure), and the
/// key must fit AMQP's 255 bytes.
pub(crate) fn filled(
    template: &'static str,
    values: &[&str],
) -> Result<Cow<'static, str>, PublishError> {
    if values.is_empty() {
        return Ok(Cow::Borrowed(template));
    }
    let mut values = values.iter();
    let mut key = String::with_capacity(template.len());
    for (i, word) in template.split('.').enumerate() {
        if i > 0 {
            key.push('.');
        }
        match crate::model::key_placeholder(word) {
            Some(name) => match values.next() {
                Some(value) if !value.is_empty() => key.push_str(value),
                _ => return Err(PublishError::EmptyPlaceholder { placeholder: name }),
            },
            None => key.push_str(word),
        }
    }
    if key.len() > crate::model::limits::MAX_SHORT_STRING {
        return Err(PublishError::TooLong {
            field: ShortField::RoutingKey,
            bytes: key.len(),
        });
    }
    Ok(Cow::Owned(key))
}

#[cfg(test)]
mod tests {
    use super::filled;
    use crate::{PublishError, ShortField};

    #[test]
    fn fills_each_placeholder_with_its_value_in_order() {
        let key = filled("order.{region}.{kind}.placed", &["eu.west", "retail"]);
        assert_eq!(key.unwrap(), "order.eu.west.retail.placed");
        // Without values, as written: a queue's name on the default exchange.
        assert_eq!(filled("q.{x}", &[]).unwrap(), "q.{x}");
    }

    #[test]
    fn refuses_empty_or_missing_values_and_long_keys() {
        for values in [&[""][..], &["eu", ""]] {
            assert!(matches!(
                filled("order.{region}.{kind}", values),
                Err(PublishError::EmptyPlaceholder { .. })
            ));
        }
        let long = "x".repeat(256);
        assert!(matches!(
            filled("{id}", &[&long]),
            Err(PublishError::TooLong {
                field: ShortField::RoutingKey,
                bytes: 256
            })
        ));
    }
}
