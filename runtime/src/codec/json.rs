//! A message body as JSON, both ways: bounded before it is parsed, validated against its
//! message's schema, turned into its type, and, publishing, validated before it is sent.

use super::document::Document;
use crate::error::MessagePart;
use crate::model::FailureReason;
use crate::schema::Validators;
use crate::text::{MAX_ERROR_BYTES, truncate};
use crate::{Message, PublishError};

/// Why a message is poison: the `x-failure-reason` and a description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Poison {
    pub reason: FailureReason,
    pub detail: String,
}

/// A description is cut to what a dead letter's `x-last-error` keeps: a parse error may quote a
/// string of the body, and the body may be megabytes.
pub(crate) fn poison(reason: FailureReason, detail: impl AsRef<str>) -> Poison {
    Poison {
        reason,
        detail: truncate(detail.as_ref(), MAX_ERROR_BYTES),
    }
}

/// `body` (decompressed) as a payload of message `M`, validated against its schema: what a
/// worker does with a body, for an RPC reply or a declared error's body (`crate::rpc`).
pub(crate) fn payload<M: Message>(
    body: &[u8],
    validators: &Validators,
    max_body_bytes: usize,
) -> Result<M::Payload, Poison> {
    bounded(body, max_body_bytes)?;
    typed(&validated(body, validators)?)
}

/// Refuses a body holding more JSON values than `max_body_bytes` allows (see
/// [`BYTES_PER_ITEM`]) before it is parsed.
pub(crate) fn bounded(body: &[u8], max_body_bytes: usize) -> Result<(), Poison> {
    let max_items = (max_body_bytes / BYTES_PER_ITEM).max(MIN_ITEMS);
    if more_items_than(body, max_items) {
        return Err(poison(
            FailureReason::TooLarge,
            format!(
                "a JSON body of more than the {max_items} values allowed by the \
                 {max_body_bytes}-byte cap (one per {BYTES_PER_ITEM} bytes of it)"
            ),
        ));
    }
    Ok(())
}

/// `body` parsed as JSON, once, in place: what the payload is validated and typed from.
pub(crate) fn parsed(body: &[u8]) -> Result<Document<'_>, Poison> {
    Document::parse(body)
        .map_err(|e| poison(FailureReason::Decode, format!("body is not JSON: {e}")))
}

/// `body` parsed as JSON and valid against the payload schema of `validators`.
pub(crate) fn validated<'a>(
    body: &'a [u8],
    validators: &Validators,
) -> Result<Document<'a>, Poison> {
    let payload = parsed(body)?;
    if let Some(errors) = validators.payload_errors(&payload) {
        return Err(poison(FailureReason::Validation, errors));
    }
    Ok(payload)
}

/// A parsed (and validated) payload as its type.
pub(crate) fn typed<P: serde::de::DeserializeOwned>(payload: &Document<'_>) -> Result<P, Poison> {
    P::deserialize(payload.root()).map_err(|e| {
        poison(
            FailureReason::Decode,
            format!("payload does not fit its type: {e}"),
        )
    })
}

/// A body of the worker's cap holds at most one JSON value (or object member) per this many
/// bytes of the cap. Parsed into a [`Document`], a value takes 24 bytes in its arena and as
/// many again while its container is open (an object's member 48, and a member costs two of
/// the budget, its `:` and its `,`), each arena up to twice that as it grows; and `[1,1,…]`
/// spends 2 bytes on each (as a `serde_json::Value`, 8 MB of it took 290 MB). With this budget
/// a parsed body takes at most 6 times the cap, however small it was as sent: a body may be as
/// dense as it likes as long as it is small.
const BYTES_PER_ITEM: usize = 16;

/// However small the cap, this many values are allowed (6 MiB parsed at most), so a body
/// under a small cap is never refused for its density.
const MIN_ITEMS: usize = 64 * 1024;

/// Whether `body` has more than `max` JSON values and object members, counted as an upper
/// bound (one for every `,`, `:`, `[` and `{` outside strings, plus the root) by a scan of its
/// bytes before anything is parsed, only for a body long enough to hold that many, and only
/// until the count passes `max`.
fn more_items_than(body: &[u8], max: usize) -> bool {
    if body.len() <= max {
        return false;
    }
    let mut items = 1usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in body {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b',' | b':' | b'[' | b'{' => {
                    items += 1;
                    // Refused as soon as it is over: a refused body costs the limit, not its
                    // whole length.
                    if items > max {
                        return true;
                    }
                }
                _ => {}
            }
        }
    }
    false
}

/// `payload` of message `M` as its JSON body, validated against its schema: read back as a
/// worker reads it, so that what is sent is what was validated.
pub(crate) fn validated_payload<M: Message>(
    validators: &Validators,
    payload: &M::Payload,
) -> Result<Vec<u8>, PublishError> {
    let serialize = |source| PublishError::Serialize {
        message: M::NAME,
        part: MessagePart::Payload,
        source,
    };
    let body = serde_json::to_vec(payload).map_err(serialize)?;
    let document = Document::parse(&body).map_err(serialize)?;
    if let Some(errors) = validators.payload_errors(&document) {
        return Err(PublishError::Invalid {
            message: M::NAME,
            part: MessagePart::Payload,
            errors,
        });
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::{more_items_than, validated_payload};
    use crate::schema::Validators;
    use crate::{Message, NoHeaders, PublishError};

    /// A message of any JSON.
    struct Anything;

    impl Message for Anything {
        type Payload = serde_json::Value;
        type Headers = NoHeaders;
        const NAME: &'static str = "anything";
        const PAYLOAD_SCHEMA: &'static str = r#"{"type": ["object", "array"]}"#;
    }

    /// What is sent is what was validated, read as a worker reads it: a body a worker would
    /// refuse as not JSON (nested 128 levels deep, past serde_json's limit) is not sent either.
    #[test]
    fn a_publisher_validates_the_body_it_sends() {
        let validators = Validators::of::<Anything>().expect("compiles");
        // Arrays in arrays, `depth` levels.
        let nested = |depth: usize| {
            (1..depth).fold(serde_json::json!([]), |inner, _| serde_json::json!([inner]))
        };
        let body = validated_payload::<Anything>(&validators, &nested(127)).expect("sent");
        assert_eq!(body, ("[".repeat(127) + &"]".repeat(127)).into_bytes());
        let refused = validated_payload::<Anything>(&validators, &nested(128));
        assert!(
            matches!(&refused, Err(PublishError::Serialize { source, .. }) if source.to_string().contains("recursion limit")),
            "{refused:?}"
        );
        let invalid = validated_payload::<Anything>(&validators, &serde_json::json!("text"));
        assert!(
            matches!(invalid, Err(PublishError::Invalid { .. })),
            "{invalid:?}"
        );
    }

    #[test]
    fn items_are_counted_outside_strings_and_only_in_long_bodies() {
        assert!(more_items_than(br#"[1,2,[3],{"a":4}]"#, 7));
        assert!(!more_items_than(br#"[1,2,[3],{"a":4}]"#, 8));
        // Commas, colons and brackets in strings (escaped quotes included) are not items.
        assert!(more_items_than(br#"["a,b:[{","c\",d"]"#, 2));
        // A body no longer than the budget is not scanned.
        assert!(!more_items_than(b"[1,1,1]", 7));
        let bomb = format!("[{}1]", "1,".repeat(99_999));
        assert!(more_items_than(bomb.as_bytes(), 50_000));
    }
}
