//! What was dead-lettered, and why: a dead-letter queue read through the runtime's own
//! reading (`warren_runtime::dead_letters`, behind `warren dlq`), whole.

use std::time::{Duration, Instant};

use warren_runtime::dead_letters::DeadLetterQueue;
use warren_runtime::lapin::BasicProperties;
use warren_runtime::lapin::message::Delivery;
use warren_runtime::lapin::types::{AMQPValue, FieldTable};
use warren_runtime::{DEFAULT_MAX_BODY_BYTES, FailureContext, Message};

use crate::Deployed;
use crate::deployed::recovering;

/// A message read from a dead-letter queue: why it died ([`QueuedDeadLetter::context`]), its
/// headers and body as the queue holds them. (What a dead-letter *consumer* of the contract
/// receives is the runtime's typed delivery; this is what a test reads from the queue.)
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueuedDeadLetter {
    /// Its failure history, read by [`FailureContext::from_headers`] from warren's headers or
    /// the broker's `x-death`; `None` when its headers say nothing about a failure (it was
    /// published straight to the dead-letter queue).
    pub context: Option<FailureContext>,
    /// Its headers, as the broker holds them.
    pub headers: FieldTable,
    /// Its body, as sent (compressed, if it was published compressed).
    pub body: Vec<u8>,
    /// The exchange it was dead-lettered through (empty: the default exchange).
    pub exchange: String,
    /// The routing key it was dead-lettered with.
    pub routing_key: String,
    /// Its properties (content type and encoding, message id, headers...).
    pub properties: BasicProperties,
}

impl QueuedDeadLetter {
    fn new(delivery: Delivery) -> Self {
        let headers = delivery.properties.headers().clone().unwrap_or_default();
        Self {
            context: FailureContext::from_headers(Some(&headers)),
            headers,
            body: delivery.data,
            exchange: delivery.exchange.to_string(),
            routing_key: delivery.routing_key.to_string(),
            properties: delivery.properties,
        }
    }

    /// Why it was dead-lettered (`exhausted`, `non-retryable`, `validation`...), as the
    /// header says it; `None` without one.
    pub fn reason(&self) -> Option<&'static str> {
        Some(self.context.as_ref()?.reason?.as_str())
    }

    /// The last error its handler (or decoding) reported.
    pub fn last_error(&self) -> Option<&str> {
        self.context.as_ref()?.last_error.as_deref()
    }

    /// How many times it was retried before it died (`x-retry-count`, or the broker's count
    /// on a quorum queue); 0 for a message dead-lettered on its first attempt, or without a
    /// failure history.
    pub fn retry_count(&self) -> u32 {
        self.context
            .as_ref()
            .map_or(0, |context| context.retry_count)
    }

    /// Header `key` as text: strings as they are, numbers in decimal, anything else in its
    /// debug form. `None` when it has no such header.
    pub fn header(&self, key: &str) -> Option<String> {
        Some(match self.headers.inner().get(key)? {
            AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
            AMQPValue::ShortString(s) => s.to_string(),
            AMQPValue::LongLongInt(i) => i.to_string(),
            AMQPValue::LongInt(i) => i.to_string(),
            AMQPValue::ShortInt(i) => i.to_string(),
            AMQPValue::ShortShortInt(i) => i.to_string(),
            AMQPValue::LongUInt(i) => i.to_string(),
            AMQPValue::ShortUInt(i) => i.to_string(),
            AMQPValue::ShortShortUInt(i) => i.to_string(),
            AMQPValue::Boolean(b) => b.to_string(),
            other => format!("{other:?}"),
        })
    }

    /// Its payload decoded as message `M` (the generated `messages::OrderPlaced`, say),
    /// decompressed first if it was sent compressed. Not validated against the schema: a
    /// dead letter is often there precisely because it does not fit it.
    ///
    /// # Errors
    ///
    /// Why it does not decode: an unknown content encoding, a body that inflates past the
    /// worker's default cap, or JSON that does not fit `M`'s payload type.
    pub fn payload<M: Message>(&self) -> Result<M::Payload, String> {
        let body = self.decompressed()?;
        serde_json::from_slice(&body).map_err(|e| format!("not a {} payload: {e}", M::NAME))
    }

    /// The body inflated as the worker inflates it (`gzip`, `deflate`), bounded by the
    /// worker's default body cap, so a zip bomb among the dead letters costs a test no more
    /// than it would cost the worker.
    fn decompressed(&self) -> Result<std::borrow::Cow<'_, [u8]>, String> {
        let encoding = self.properties.content_encoding().as_ref();
        warren_runtime::dead_letters::inflate(
            &self.body,
            encoding.map(|e| e.as_str()),
            DEFAULT_MAX_BODY_BYTES,
        )
    }
}

impl Deployed {
    /// Takes the dead letters in `queue` (a contract name), waiting until there are `n` or
    /// `timeout` passes; returns those found, oldest first, so a test asserts on how many came.
    /// Each is acknowledged as it is read: they are gone from the queue after.
    pub async fn take_dead_letters(
        &self,
        queue: &str,
        n: usize,
        timeout: Duration,
    ) -> Vec<QueuedDeadLetter> {
        let queue = self.dead_letter_queue(queue);
        let deadline = Instant::now() + timeout;
        let mut found = Vec::new();
        while found.len() < n {
            let wanted = n - found.len();
            let taken = recovering("taking dead letters", || queue.take(wanted)).await;
            if taken.is_empty() {
                if Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(crate::wait::POLL).await;
            }
            found.extend(taken.into_iter().map(QueuedDeadLetter::new));
        }
        found
    }

    /// Reads up to `max` dead letters in `queue` (a contract name) without taking them: they
    /// are all returned to the queue, in order, before this returns (marked redelivered).
    ///
    /// Each return is a delivery: on a quorum queue with a delivery limit that dead-letters or
    /// drops, peeking spends it. Warren gives a dead-letter queue (no dead-letter exchange of
    /// its own) no such limit; peek those, not work queues.
    pub async fn peek_dead_letters(&self, queue: &str, max: usize) -> Vec<QueuedDeadLetter> {
        let before = self.ready(queue).await;
        let dead_letters = self.dead_letter_queue(queue);
        let read = recovering("peeking at dead letters", || dead_letters.read(max)).await;
        // A quorum queue applies a requeue through its log, after the channel says it is done:
        // wait (a little) until the queue counts them again, so a test that counts next sees
        // them there.
        let deadline = Instant::now() + RETURNED;
        while self.ready(queue).await < before && Instant::now() < deadline {
            tokio::time::sleep(crate::wait::POLL).await;
        }
        read.into_iter().map(QueuedDeadLetter::new).collect()
    }

    /// Counts the messages in dead-letter queue `queue` (a contract name) without reading them.
    pub async fn count_dead_letters(&self, queue: &str) -> u32 {
        self.ready(queue).await
    }

    /// Queue `queue` (a contract name) as the runtime reads a dead-letter queue.
    fn dead_letter_queue(&self, queue: &str) -> DeadLetterQueue {
        DeadLetterQueue::new(self.connection(), self.name(queue))
    }
}

/// How long a peek waits for the messages it returned to count as ready again.
const RETURNED: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use std::io::Write;

    use warren_runtime::lapin::BasicProperties;
    use warren_runtime::lapin::types::{AMQPValue, FieldTable, ShortString};
    use warren_runtime::model::{FailureReason, headers};
    use warren_runtime::{DEFAULT_MAX_BODY_BYTES, Message, NoHeaders};

    use super::QueuedDeadLetter;

    /// A message whose payload is any JSON.
    struct AnyJson;

    impl Message for AnyJson {
        type Payload = serde_json::Value;
        type Headers = NoHeaders;
        const NAME: &'static str = "any_json";
        const CONTENT_TYPE: &'static str = "application/json";
        const PAYLOAD_SCHEMA: &'static str = "{}";
        const HEADERS_SCHEMA: Option<&'static str> = None;
    }

    fn dead(body: Vec<u8>, encoding: Option<&str>, headers: FieldTable) -> QueuedDeadLetter {
        let mut properties = BasicProperties::default().with_headers(headers.clone());
        if let Some(encoding) = encoding {
            properties = properties.with_content_encoding(ShortString::from(encoding));
        }
        QueuedDeadLetter {
            context: warren_runtime::FailureContext::from_headers(Some(&headers)),
            headers,
            body,
            exchange: String::new(),
            routing_key: String::new(),
            properties,
        }
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn payloads_decode_plain_gzip_and_deflate() {
        let body = br#"{"id":"42"}"#;
        for (bytes, encoding) in [
            (body.to_vec(), None),
            (gzip(body), Some("gzip")),
            (zlib(body), Some("deflate")),
            (gzip(body), Some("GZIP")),
        ] {
            let payload = dead(bytes, encoding, FieldTable::default())
                .payload::<AnyJson>()
                .unwrap();
            assert_eq!(payload["id"], "42", "{encoding:?}");
        }
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_cap() {
        let bomb = gzip(&vec![b' '; DEFAULT_MAX_BODY_BYTES + 1]);
        let error = dead(bomb, Some("gzip"), FieldTable::default())
            .payload::<AnyJson>()
            .unwrap_err();
        assert!(error.contains("inflates past"), "{error}");
        let error = dead(b"{}".to_vec(), Some("br"), FieldTable::default())
            .payload::<AnyJson>()
            .unwrap_err();
        assert!(error.contains("unknown content encoding `br`"), "{error}");
        let error = dead(b"{ not json".to_vec(), None, FieldTable::default())
            .payload::<AnyJson>()
            .unwrap_err();
        assert!(error.contains("not a any_json payload"), "{error}");
    }

    #[test]
    fn reason_error_and_headers_read_as_text() {
        let mut table = FieldTable::default();
        table.insert(
            ShortString::from(headers::FAILURE_REASON),
            AMQPValue::LongString("non-retryable".into()),
        );
        table.insert(
            ShortString::from(headers::LAST_ERROR),
            AMQPValue::LongString("no such customer".into()),
        );
        table.insert(
            ShortString::from(headers::RETRY_COUNT),
            AMQPValue::LongLongInt(2),
        );
        table.insert(ShortString::from("flag"), AMQPValue::Boolean(true));
        let message = dead(b"{}".to_vec(), None, table);
        assert_eq!(message.reason(), Some("non-retryable"));
        assert_eq!(
            message.context.as_ref().and_then(|c| c.reason),
            Some(FailureReason::NonRetryable)
        );
        assert_eq!(message.last_error(), Some("no such customer"));
        assert_eq!(message.header(headers::RETRY_COUNT).as_deref(), Some("2"));
        assert_eq!(message.header("flag").as_deref(), Some("true"));
        assert_eq!(message.header("missing"), None);
        // A message that never failed has no context.
        let plain = dead(b"{}".to_vec(), None, FieldTable::default());
        assert!(plain.context.is_none() && plain.reason().is_none());
    }
}
