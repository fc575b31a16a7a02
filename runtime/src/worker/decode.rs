//! From the bytes the broker delivered to a typed, validated `Delivery`: decompress (within a
//! size cap), check the content type, parse, validate against the JSON Schema, deserialize.
//! A message that fails any step is poison: deterministic, so it is never retried.

use std::borrow::Cow;
use std::time::Duration;

use serde_json::Value;

use super::policy::broker_counts;
use crate::amqp::{header_int, header_str, table_to_json};
use crate::codec::{Document, Poison, bounded, decompress, parsed, poison, typed, validated};
use crate::model::limits::{MAX_EXPIRATION_MILLIS, MAX_SHORT_STRING};
use crate::model::{FailureReason, Queue, headers};
use crate::schema::Validators;
use crate::{Delivery, FailureContext, Message};

/// How many retries came before this delivery, as counted by warren or the broker: a count a
/// producer wrote is not believed. A forged `x-retry-count: 3` or `x-delivery-count: 3` on a
/// first delivery used to skip every retry, and one in a batch made the whole batch dead-letter.
///
/// - `x-delivery-count` (quorum queues, counted by the broker) only on a redelivery: RabbitMQ
///   overwrites it on every redelivery but leaves a producer's value on the first delivery.
/// - `x-retry-count` only on retry copies ([`retry_count_header`]): warren's own, which reach
///   the queue through the default exchange with the queue's name as routing key (republished
///   by warren, or dead-lettered back by a wait queue), whereas a producer's message arrives
///   through the exchange it was published to; and another stack's, through an exchange the
///   queue's `retry_counts_from` names, in the header it names. A producer allowed to publish
///   to the default exchange (or to such an exchange) can still pose as a retry: deny it write
///   access to `amq.default` where that matters (docs/runtime.md).
///
/// A believed count saturates at `u32::MAX`; the arithmetic on it saturates too (`policy`).
pub(crate) fn retries_so_far(raw: &lapin::message::Delivery, queue: &Queue) -> u32 {
    let (key, believed) = if broker_counts(queue) {
        (headers::DELIVERY_COUNT, raw.redelivered)
    } else {
        match retry_count_header(raw, queue) {
            Some(header) => (header, true),
            None => (headers::RETRY_COUNT, false),
        }
    };
    if !believed {
        return 0;
    }
    header_int(raw.properties.headers().as_ref(), key)
        .map_or(0, |n| u32::try_from(n.max(0)).unwrap_or(u32::MAX))
}

/// Whether `raw` came the way warren's retry copies come: through the default exchange, routed by
/// the name of the queue it was delivered from, and without a failure reason (a dead letter sent
/// through the default exchange to a dead-letter queue comes the same way, and its count is the
/// retries of the queue it died in).
pub(crate) fn is_retry_copy(raw: &lapin::message::Delivery, queue: &str) -> bool {
    raw.exchange.as_str().is_empty()
        && raw.routing_key.as_str() == queue
        && header_str(raw.properties.headers().as_ref(), headers::FAILURE_REASON).is_none()
}

/// The header holding the retry count of `raw` when it is a retry copy of a message of
/// `queue`: warren's own ([`is_retry_copy`], `x-retry-count`), or another stack's, delivered
/// through an exchange the queue's `retry_counts_from` names (in the header it names). `None`
/// for any other delivery, whose count a producer wrote, and for a dead letter.
pub(crate) fn retry_count_header<'q>(
    raw: &lapin::message::Delivery,
    queue: &'q Queue,
) -> Option<&'q str> {
    if is_retry_copy(raw, &queue.name) {
        return Some(headers::RETRY_COUNT);
    }
    // The sources first: most queues name none, and a delivery then costs no header lookup.
    let source =
        (queue.retry_counts_from.iter()).find(|source| source.exchange == raw.exchange.as_str())?;
    let dead_letter = header_str(raw.properties.headers().as_ref(), headers::FAILURE_REASON);
    dead_letter.is_none().then_some(source.header.as_str())
}

/// The exchange and routing key the message was first published with, `None` where unknown.
/// After a retry hop through a wait queue the delivery's own are the default exchange and the
/// queue's name, and the headers saying the original are believed on such a delivery (the
/// way warren's copies and redrives come). On another stack's retry copy
/// ([`retry_count_header`]) the delivery's own are that stack's retry exchange: the headers
/// are believed when it wrote them (amqp-contract writes `x-original-routing-key`), and what
/// it did not write is unknown rather than its retry exchange. On any other delivery the
/// delivery's own route is the original, and a header naming another is a producer's forgery.
///
/// A header value longer than AMQP's 255-byte names is not a route any broker delivered, and
/// publishing a dead-letter copy to it would panic in lapin (`ShortString::from`), so the
/// delivery's own route stands in for it (found while fuzzing the decode path).
pub(crate) fn original_route(
    raw: &lapin::message::Delivery,
    queue: &Queue,
) -> (Option<String>, Option<String>) {
    let table = raw.properties.headers().as_ref();
    let foreign = !raw.exchange.as_str().is_empty() && retry_count_header(raw, queue).is_some();
    let copied = raw.exchange.as_str().is_empty() || foreign;
    let header =
        |key| header_str(table, key).filter(|value| copied && value.len() <= MAX_SHORT_STRING);
    let (exchange, routing_key) = (
        header(headers::ORIGINAL_EXCHANGE),
        header(headers::ORIGINAL_ROUTING_KEY),
    );
    // Neither recorded: the delivery's own route, unless it is another stack's copy. One
    // recorded alone (a copy of one, which warren carries on): the other is unknown.
    if exchange.is_none() && routing_key.is_none() && !foreign {
        return (
            Some(raw.exchange.as_str().to_owned()),
            Some(raw.routing_key.as_str().to_owned()),
        );
    }
    (exchange, routing_key)
}

/// Decodes `raw` as message `M`, validating it against its JSON Schemas unless `validators`
/// is `None` (validation turned off): the envelope admitted, the body read and parsed once, in
/// place (a [`Document`], which the payload is validated against and typed from), the headers
/// validated and typed, then the delivery's route, history and properties attached.
///
/// Only the typing depends on `M`: the rest is compiled once, not for every message of a
/// contract ([`super::erased`]). And only one way of deserializing is compiled for each
/// payload type, validated or not.
pub(crate) fn decode<M: Message>(
    raw: &lapin::message::Delivery,
    queue: &Queue,
    validators: Option<&Validators>,
    max_body_bytes: usize,
) -> Result<Delivery<M::Payload, M::Headers>, Poison> {
    // A message without headers of its own reads none: its delivery's headers (warren's
    // publish time, a trace context) are neither validated nor typed into `NoHeaders`.
    let typed_headers = M::HEADERS_SCHEMA.is_some()
        || std::any::TypeId::of::<M::Headers>() != std::any::TypeId::of::<crate::NoHeaders>();
    let body = body(raw, M::CONTENT_TYPE, max_body_bytes)?;
    let Parts { payload, headers } = parts(raw, &body, validators, typed_headers)?;
    let payload: M::Payload = typed(&payload)?;
    let headers: M::Headers = serde_json::from_value(headers).map_err(|e| {
        poison(
            FailureReason::Decode,
            format!("headers do not fit their type: {e}"),
        )
    })?;
    Ok(delivery_of(raw, queue).carrying(payload, headers))
}

/// A delivery's payload and headers, validated when they were to be.
struct Parts<'a> {
    payload: Document<'a>,
    headers: Value,
}

/// The body of `raw`, a message of `content_type`: admitted, decompressed within the cap, and
/// of no more JSON values than the cap allows.
fn body<'a>(
    raw: &'a lapin::message::Delivery,
    content_type: &str,
    max_body_bytes: usize,
) -> Result<Cow<'a, [u8]>, Poison> {
    admit(raw, content_type, max_body_bytes)?;
    let encoding = (raw.properties.content_encoding().as_ref()).map(|e| e.as_str());
    let body = decompress(&raw.data, encoding, max_body_bytes)?;
    bounded(&body, max_body_bytes)?;
    Ok(body)
}

/// The payload of `body` and the headers of `raw`: parsed and, with `validators`, validated.
/// The headers are read only when `typed_headers` (else an empty object).
fn parts<'a>(
    raw: &lapin::message::Delivery,
    body: &'a [u8],
    validators: Option<&Validators>,
    typed_headers: bool,
) -> Result<Parts<'a>, Poison> {
    let headers = Value::Object(
        (raw.properties.headers().as_ref())
            .filter(|_| typed_headers)
            .map(table_to_json)
            .unwrap_or_default(),
    );
    let Some(validators) = validators else {
        let payload = parsed(body)?;
        return Ok(Parts { payload, headers });
    };
    let payload = validated(body, validators)?;
    if let Some(errors) = validators.headers_errors(&headers) {
        return Err(poison(
            FailureReason::Validation,
            format!("headers: {errors}"),
        ));
    }
    Ok(Parts { payload, headers })
}

/// What is refused before the body is read: headers past their cut, a content type other
/// than the message's `expected` (parameters such as `charset` aside), a body above the cap.
fn admit(
    raw: &lapin::message::Delivery,
    expected: &str,
    max_body_bytes: usize,
) -> Result<(), Poison> {
    let properties = &raw.properties;
    if let Some((reason, detail)) = crate::wire::headers_cut(properties.headers().as_ref()) {
        return Err(poison(reason, detail));
    }
    if let Some(content_type) = properties.content_type() {
        let media = content_type
            .as_str()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim();
        if !media.eq_ignore_ascii_case(expected) {
            return Err(poison(
                FailureReason::ContentType,
                format!("content type `{content_type}`, expected `{expected}`"),
            ));
        }
    }
    if raw.data.len() > max_body_bytes {
        return Err(poison(
            FailureReason::TooLarge,
            format!(
                "body of {} bytes, above the {max_body_bytes}-byte cap",
                raw.data.len()
            ),
        ));
    }
    Ok(())
}

/// What `raw` says of its route, its retries and last failure, and its AMQP properties: a
/// delivery carrying nothing yet, which [`Delivery::carrying`] gives its payload and
/// headers.
fn delivery_of(raw: &lapin::message::Delivery, queue: &Queue) -> Delivery<(), ()> {
    let properties = &raw.properties;
    let (exchange, routing_key) = original_route(raw, queue);
    let retries = retries_so_far(raw, queue);
    let mut delivery = Delivery::builder((), ())
        .route(
            exchange.unwrap_or_default(),
            routing_key.unwrap_or_default(),
        )
        .attempt(retries, raw.redelivered);
    if let Some(id) = properties.message_id() {
        delivery = delivery.message_id(id.as_str());
    }
    if let Some(id) = properties.correlation_id() {
        delivery = delivery.correlation_id(id.as_str());
    }
    if let Some(address) = properties.reply_to() {
        delivery = delivery.reply_to(address.as_str());
    }
    if let Some(priority) = *properties.priority() {
        delivery = delivery.priority(priority);
    }
    if let Some(expiration) = properties
        .expiration()
        .as_ref()
        .and_then(|e| expiration(e.as_str()))
    {
        delivery = delivery.expiration(expiration);
    }
    if let Some(failure) = failure_so_far(raw, queue, retries) {
        delivery = delivery.failure(failure);
    }
    delivery.build()
}

/// An `expiration` property as RabbitMQ takes it: whole milliseconds in decimal digits, at
/// most [`MAX_EXPIRATION_MILLIS`]; anything else (a sign, spaces, a fraction, a number past
/// the bound, which a broker would have refused from a publisher) is none rather than a guess.
/// The text is a short string, so parsing it is bounded.
pub(crate) fn expiration(text: &str) -> Option<Duration> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Digits only, so the only failure left is overflow: past the bound either way.
    let millis: u64 = text.parse().ok()?;
    (millis <= MAX_EXPIRATION_MILLIS).then(|| Duration::from_millis(millis))
}

/// The failure history of `raw`, believed where its retry count is (see [`retries_so_far`]):
/// warren's headers on its own retry copies; on a queue where the broker counts, only the
/// count of a redelivery (nothing else was written on it). A producer's `x-last-error` or
/// `x-first-failure-timestamp` on a first delivery is not history.
pub(crate) fn failure_so_far(
    raw: &lapin::message::Delivery,
    queue: &Queue,
    retries: u32,
) -> Option<FailureContext> {
    if broker_counts(queue) {
        return (retries > 0).then(|| FailureContext {
            retry_count: retries,
            ..FailureContext::default()
        });
    }
    retry_count_header(raw, queue)?;
    let mut failure = FailureContext::from_headers(raw.properties.headers().as_ref())?;
    // The count is the one the worker believed, whatever else the headers say; and a retry
    // copy is no dead letter (the `x-death` of its hop through a wait queue says `expired`).
    failure.retry_count = retries;
    failure.reason = None;
    Some(failure)
}

#[cfg(test)]
mod tests {
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

    use std::time::Duration;

    use super::{expiration, headers, original_route, retries_so_far};
    use crate::model::{Queue, QueueKind, RetryCountSource};

    #[test]
    fn an_expiration_is_read_strictly_and_within_what_rabbitmq_takes() {
        assert_eq!(expiration("60000"), Some(Duration::from_secs(60)));
        assert_eq!(expiration("0"), Some(Duration::ZERO));
        assert_eq!(
            expiration("4294967295"),
            Some(Duration::from_millis(4_294_967_295))
        );
        for refused in [
            "",
            "4294967296",
            "-1",
            "+5",
            " 5",
            "5 ",
            "1.5",
            "1e3",
            "99999999999999999999999",
            "\u{0663}",
        ] {
            assert_eq!(expiration(refused), None, "{refused:?}");
        }
    }

    /// A publisher may set `x-original-*` headers to anything. One longer than an AMQP name
    /// used to become the routing key of the dead-letter copy, and lapin panicked on it; one
    /// on a delivery through an exchange (not a copy's or a redrive's way) named a route the
    /// dead-letter exchange need not know.
    #[test]
    fn only_a_copy_s_original_route_within_amqp_names_is_believed() {
        let route = |delivered_by: &str, exchange: &str, key: &str| {
            let text = |value: &str| AMQPValue::LongString(LongString::from(value));
            let original = [
                (headers::ORIGINAL_EXCHANGE, text(exchange)),
                (headers::ORIGINAL_ROUTING_KEY, text(key)),
            ];
            let raw = delivered(delivered_by, "job.created", &original);
            original_route(&raw, &Queue::new("work", QueueKind::Classic))
        };
        let some = |exchange: &str, key: &str| (Some(exchange.to_owned()), Some(key.to_owned()));
        let long = "k".repeat(256);
        assert_eq!(route("", &long, &long), some("", "job.created"));
        let longest = "k".repeat(255);
        assert_eq!(route("", "orders", &longest), some("orders", &longest));
        assert_eq!(
            route("jobs", "orders", "nope"),
            some("jobs", "job.created"),
            "forged on a delivery through an exchange"
        );
    }

    /// A delivery through `exchange` with `routing_key` and `headers`.
    fn delivered(
        exchange: &str,
        routing_key: &str,
        headers: &[(&str, AMQPValue)],
    ) -> lapin::message::Delivery {
        let mut table = FieldTable::default();
        for (name, value) in headers {
            table.insert(ShortString::from(*name), value.clone());
        }
        let mut raw = lapin::message::Delivery::mock(
            1,
            ShortString::from(exchange),
            ShortString::from(routing_key),
            false,
            Vec::new(),
        );
        raw.properties = BasicProperties::default().with_headers(table);
        raw
    }

    /// Another stack's retry copies (amqp-contract 2.4's, back through its `retry-exchange`)
    /// count when the queue names their exchange: their count is believed, their original
    /// routing key when they recorded it, and the exchange they did not record is unknown
    /// rather than their retry exchange. The same headers through any other exchange are a
    /// producer's, and a dead letter's count is not a retry's.
    #[test]
    fn another_stack_s_retry_copies_count_when_the_queue_names_their_exchange() {
        let mut queue = Queue::new("work", QueueKind::Classic);
        queue.retry_counts_from = vec![RetryCountSource {
            exchange: "retry-exchange".into(),
            header: headers::RETRY_COUNT.into(),
        }];
        let count = (headers::RETRY_COUNT, AMQPValue::LongLongInt(2));
        let key = (
            headers::ORIGINAL_ROUTING_KEY,
            AMQPValue::LongString(LongString::from("order.created")),
        );
        let copy = delivered("retry-exchange", "work", &[count.clone(), key.clone()]);
        assert_eq!(retries_so_far(&copy, &queue), 2);
        assert_eq!(
            original_route(&copy, &queue),
            (None, Some("order.created".to_owned()))
        );
        let unrecorded = delivered("retry-exchange", "work", std::slice::from_ref(&count));
        assert_eq!(original_route(&unrecorded, &queue), (None, None));

        let forged = delivered("orders", "work", &[count.clone(), key]);
        assert_eq!(retries_so_far(&forged, &queue), 0, "a producer's count");
        let reason = (
            headers::FAILURE_REASON,
            AMQPValue::LongString(LongString::from("exhausted")),
        );
        let dead = delivered("retry-exchange", "work", &[count.clone(), reason]);
        assert_eq!(retries_so_far(&dead, &queue), 0, "a dead letter");
        let unnamed = Queue::new("work", QueueKind::Classic);
        assert_eq!(
            retries_so_far(&copy, &unnamed),
            0,
            "not named: not believed"
        );
    }
}
