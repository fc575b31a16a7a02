//! Drives the worker's decode path without a broker, for the `decode` fuzz target and the
//! property test that stands in for it in CI. **Not a stable API**: hidden from the docs,
//! changed whenever the fuzzer needs it.
//!
//! A delivery is decoded as one fixed message type whose schemas use what generated ones do
//! (formats, patterns, bounds, `additionalProperties: false`, a headers schema), so bytes
//! that get past JSON parsing go on through validation and typed deserialization.

use lapin::BasicProperties;
use lapin::types::ShortString;
use serde::{Deserialize, Serialize};

use crate::Message;
use crate::model::Compression;
use crate::model::{DeadLetter, OnPoison, Queue, QueueKind, Retry};
use crate::schema::Validators;
use crate::text::{MAX_ERROR_BYTES, truncate};
use crate::worker::dead_letter;
use crate::worker::decode::{decode as decode_delivery, original_route, retries_so_far};

/// The fixed message type's payload, as typify would generate it from [`PAYLOAD_SCHEMA`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Job {
    id: uuid::Uuid,
    at: chrono::DateTime<chrono::Utc>,
    #[serde(default)]
    count: Option<u32>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    note: Option<String>,
}

/// The fixed message type's headers.
#[derive(Debug, Serialize, Deserialize)]
struct JobHeaders {
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    priority: Option<u8>,
}

const PAYLOAD_SCHEMA: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$ref": "#/$defs/Job",
  "$defs": {
    "Job": {
      "type": "object",
      "additionalProperties": false,
      "required": ["id", "at"],
      "properties": {
        "id": { "type": "string", "format": "uuid" },
        "at": { "type": "string", "format": "date-time" },
        "count": { "type": "integer", "minimum": 0, "maximum": 4294967295 },
        "tags": {
          "type": "array", "maxItems": 8,
          "items": { "type": "string", "pattern": "^[a-z][a-z0-9-]*$" }
        },
        "note": { "type": "string", "maxLength": 200 }
      }
    }
  }
}"##;

const HEADERS_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "tenant": { "type": "string", "minLength": 1, "pattern": "^[a-z]+$" },
    "priority": { "type": "integer", "minimum": 0, "maximum": 9 }
  }
}"#;

struct JobMessage;

impl Message for JobMessage {
    type Payload = Job;
    type Headers = JobHeaders;
    const NAME: &'static str = "job";
    const CONTENT_TYPE: &'static str = "application/json";
    const PAYLOAD_SCHEMA: &'static str = PAYLOAD_SCHEMA;
    const HEADERS_SCHEMA: Option<&'static str> = Some(HEADERS_SCHEMA);
}

/// A body that passes the payload schema as long as `count`, `tags` and `note` do, so
/// fuzzers reach validation and deserialization without having to invent a UUID.
pub fn sample_body(count: Option<i64>, tags: &[String], note: Option<&str>) -> Vec<u8> {
    let mut body = serde_json::json!({
        "id": "0190b6c4-7a1e-7cc3-9f43-1d2e3f405162",
        "at": "2024-07-01T12:00:00Z",
        "tags": tags,
    });
    if let Some(count) = count {
        body["count"] = count.into();
    }
    if let Some(note) = note {
        body["note"] = note.into();
    }
    body.to_string().into_bytes()
}

/// `body` compressed as a publisher with `compression` sends it.
pub fn compress(compression: Compression, body: &[u8]) -> Vec<u8> {
    // Writing into a `Vec` cannot fail; an empty body would only make the input poison.
    crate::codec::compress(compression, body).unwrap_or_default()
}

/// The worker's decode path for message `M` on a plain queue, its validators compiled once:
/// what a delivery costs to decode, measured without a broker (`warren-bench decode`).
pub struct Decoder<M> {
    validators: std::sync::Arc<Validators>,
    queue: Queue,
    message: std::marker::PhantomData<M>,
}

impl<M: Message> Decoder<M> {
    /// Compiles `M`'s schemas.
    pub fn new() -> Result<Self, String> {
        Ok(Self {
            validators: Validators::of::<M>().map_err(|e| e.to_string())?,
            queue: Queue::new("bench", QueueKind::Quorum),
            message: std::marker::PhantomData,
        })
    }

    /// `raw` decoded as the worker decodes it (with its default cap on bodies), validated
    /// (unless `validate` is false) and typed; the poison reason and detail when it is refused.
    pub fn decode(
        &self,
        raw: &lapin::message::Delivery,
        validate: bool,
    ) -> Result<crate::Delivery<M::Payload, M::Headers>, String> {
        let validators = validate.then_some(&*self.validators);
        let cap = crate::worker::DEFAULT_MAX_BODY_BYTES;
        decode_delivery::<M>(raw, &self.queue, validators, cap)
            .map_err(|poison| format!("{}: {}", poison.reason, poison.detail))
    }
}

/// Decodes a delivery of `body` with `properties` (content type and encoding, headers,
/// message id…) as the fixed message type, with `max_body_bytes` as the worker's cap.
/// Returns the poison reason and detail when the message is refused. Must never panic.
pub fn decode(
    body: Vec<u8>,
    properties: BasicProperties,
    max_body_bytes: usize,
    redelivered: bool,
) -> Result<(), String> {
    let validators = Validators::of::<JobMessage>().map_err(|e| e.to_string())?;
    let mut raw = lapin::message::Delivery::mock(
        1,
        ShortString::from("jobs"),
        ShortString::from("job.created"),
        redelivered,
        body,
    );
    raw.properties = properties;
    let queue = Queue {
        retry: Retry::None,
        on_poison: OnPoison::DeadLetter,
        // No routing key: a dead letter goes out under the message's original one.
        dead_letter: Some(DeadLetter::new("jobs.dlx", None)),
        ..Queue::new("jobs", QueueKind::Classic)
    };
    let decoded = decode_delivery::<JobMessage>(&raw, &queue, Some(&validators), max_body_bytes);
    // What settling then reads from the same delivery without a broker: the retry count,
    // the `x-last-error` text, and the route of a dead-letter copy, which goes to lapin as
    // short strings. `ShortString::from` panics past
    // [`crate::model::limits::MAX_SHORT_STRING`] bytes, so a route that the
    // worker could not publish to fails here, as it would in the worker.
    let _ = retries_so_far(&raw, &queue);
    let (exchange, routing_key) = original_route(&raw, &queue);
    let _ = (
        ShortString::from(exchange.unwrap_or_default()),
        ShortString::from(routing_key.unwrap_or_default()),
    );
    // A dead-letter consumer reads the same bytes, never refusing them: it must not panic
    // either, and a raw body stays within the cap.
    let letter = dead_letter::<JobMessage>(
        &raw,
        &queue,
        Some(&validators),
        max_body_bytes,
        &Default::default(),
    );
    if letter
        .raw()
        .is_some_and(|raw| raw.body.len() > max_body_bytes)
    {
        return Err("a raw dead letter's body exceeds the cap".to_owned());
    }
    decoded.map(drop).map_err(|poison| {
        let detail = truncate(&poison.detail, MAX_ERROR_BYTES);
        format!("{}: {detail}", poison.reason)
    })
}

#[cfg(test)]
mod tests {
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

    use super::{compress, decode, sample_body};
    use crate::model::Compression;

    fn json() -> BasicProperties {
        BasicProperties::default().with_content_type(ShortString::from("application/json"))
    }

    #[test]
    fn the_sample_body_decodes_plain_and_compressed() {
        let body = sample_body(Some(3), &["a-1".to_owned()], Some("hi"));
        assert_eq!(decode(body.clone(), json(), 1 << 20, false), Ok(()));
        for compression in [Compression::Gzip, Compression::Deflate] {
            let properties = json().with_content_encoding(ShortString::from(compression.as_str()));
            assert_eq!(
                decode(compress(compression, &body), properties, 1 << 20, true),
                Ok(())
            );
        }
    }

    #[test]
    fn bad_inputs_are_poison_not_panics() {
        let body = sample_body(Some(-1), &[], None);
        let refused = decode(body, json(), 1 << 20, false).unwrap_err();
        assert!(refused.starts_with("validation: "), "{refused}");
        let mut headers = FieldTable::default();
        headers.insert(
            ShortString::from("priority"),
            AMQPValue::LongString(LongString::from("high")),
        );
        let refused = decode(
            sample_body(None, &[], None),
            json().with_headers(headers),
            1 << 20,
            false,
        )
        .unwrap_err();
        assert!(refused.starts_with("validation: headers"), "{refused}");
    }
}
