//! Traces: a `tracing` span per publish and per delivery, with OpenTelemetry's messaging
//! semantic-convention attributes, and W3C Trace Context carried in the AMQP headers so that
//! one trace follows a message from its publisher through every retry to its dead letter.
//!
//! The spans (all at `INFO`, target `warren_runtime::trace`):
//! - `publish` (kind producer): a typed publish, named `publish {exchange}`;
//! - `process` (kind consumer): one delivery, decoding to settling, named `process {queue}`;
//!   a root span, or with the `opentelemetry` feature the child of the span that published the
//!   message (its `traceparent`);
//! - `settle` (kind producer): the retry or dead-letter copy of a failed delivery, a child of
//!   its `process` span, named `retry {queue}` or `dead-letter {queue}`. The copy carries this
//!   span's context, so the next attempt's `process` span is its child.
//!
//! Cost: with no subscriber interested, each constructor returns a disabled span after one
//! check of its callsite's cached interest, and nothing else runs: no header is read, no
//! name is formatted, nothing is allocated.

mod context;
#[cfg(feature = "opentelemetry")]
mod otel;

use std::collections::BTreeMap;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use tracing::Span;
use tracing::field::Empty;

use crate::PublishError;
use crate::model::{FailureReason, headers};

use context::TraceParent;

/// `messaging.system` on every span.
const SYSTEM: &str = "rabbitmq";

/// An `INFO` span with the fields every messaging span has (span name and kind, status, system,
/// operation type and name, `error.type`) and then `$fields`. A macro: `tracing` needs every
/// field a span may record listed where it is created.
macro_rules! messaging_span {
    ($(parent: $parent:expr,)? $name:literal, $kind:literal, $op_type:literal, $op_name:expr; $($fields:tt)*) => {
        tracing::info_span!(
            $(parent: $parent,)?
            $name,
            otel.name = Empty,
            otel.kind = $kind,
            otel.status_code = Empty,
            messaging.system = SYSTEM,
            "messaging.operation.type" = $op_type,
            messaging.operation.name = $op_name,
            "error.type" = Empty,
            $($fields)*
        )
    };
}

/// The span of a typed publish to `exchange` with `routing_key`, a child of the current span.
pub(crate) fn publish(
    exchange: &str,
    routing_key: &str,
    properties: &BasicProperties,
    body: usize,
) -> Span {
    let span = messaging_span!(
        "publish", "producer", "send", "publish";
        messaging.destination.name = Empty,
        messaging.rabbitmq.destination.routing_key = Empty,
        messaging.message.id = Empty,
        messaging.message.body.size = int(body),
    );
    if !span.is_disabled() {
        name(&span, "publish", exchange, routing_key);
        route(&span, exchange, routing_key);
        if let Some(id) = properties.message_id() {
            span.record("messaging.message.id", id.as_str());
        }
    }
    span
}

/// The span of an RPC call of `operation` (kind client), a child of the current span, from
/// the request's publish to its reply; the request carries its context ([`inject`]), so the
/// server's `process` span is its child. Its destination is recorded by [`call_sent`].
pub(crate) fn call(operation: &str) -> Span {
    let span = messaging_span!(
        "call", "client", "send", "call";
        messaging.destination.name = Empty,
        messaging.rabbitmq.destination.routing_key = Empty,
        messaging.message.id = Empty,
        messaging.message.conversation_id = Empty,
        warren.rpc.operation = Empty,
        warren.outcome = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("call {operation}").as_str());
        span.record("warren.rpc.operation", operation);
    }
    span
}

/// Records on a [`call`] span where its request goes and its ids.
pub(crate) fn call_sent(
    span: &Span,
    exchange: &str,
    routing_key: &str,
    properties: &BasicProperties,
) {
    if span.is_disabled() {
        return;
    }
    route(span, exchange, routing_key);
    if let Some(id) = properties.message_id() {
        span.record("messaging.message.id", id.as_str());
    }
    if let Some(id) = properties.correlation_id() {
        span.record("messaging.message.conversation_id", id.as_str());
    }
}

/// Records on a [`call`] span how the call ended: its outcome (one of
/// [`crate::metrics::RPC_OUTCOMES`]), and an error status unless it is `ok`.
pub(crate) fn called(span: &Span, outcome: &'static str) {
    if span.is_disabled() {
        return;
    }
    span.record("warren.outcome", outcome);
    if outcome != "ok" {
        fail(span, outcome);
    }
}

/// The span of one delivery from `queue` to `consumer`: a root span, or with the
/// `opentelemetry` feature the child of the span its `traceparent` names.
pub(crate) fn process(queue: &str, consumer: &'static str, raw: &lapin::message::Delivery) -> Span {
    let span = messaging_span!(
        parent: None, "process", "consumer", "process", "process";
        messaging.destination.name = Empty,
        messaging.destination.subscription.name = Empty,
        messaging.rabbitmq.destination.routing_key = Empty,
        messaging.consumer.group.name = consumer,
        messaging.message.id = Empty,
        messaging.message.body.size = int(raw.data.len()),
        messaging.rabbitmq.message.delivery_tag = int(raw.delivery_tag),
        warren.retry_count = Empty,
        warren.outcome = Empty,
        warren.failure_reason = Empty,
        warren.trace_id = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some((parent, _state)) =
        context::read(raw.properties.headers().as_ref().map(FieldTable::inner))
    {
        // Before anything starts the span: its parent cannot change afterwards.
        #[cfg(feature = "opentelemetry")]
        otel::set_parent(&span, &parent, _state.as_deref());
        // The trace the message arrived in, for logs read without an OpenTelemetry back-end.
        span.record("warren.trace_id", parent.trace_id_hex().as_str());
    }
    span.record("otel.name", format!("process {queue}").as_str());
    route(&span, raw.exchange.as_str(), raw.routing_key.as_str());
    span.record("messaging.destination.subscription.name", queue);
    if let Some(id) = raw.properties.message_id() {
        span.record("messaging.message.id", id.as_str());
    }
    span
}

/// The span of a batch of deliveries (`raws`) from `queue` to `consumer`: a root span, linked
/// (with the `opentelemetry` feature) to the span that published each of them. A batch has
/// no one parent; its retry and dead-letter copies are children of this span.
pub(crate) fn process_batch<'a>(
    queue: &str,
    consumer: &'static str,
    raws: impl IntoIterator<Item = &'a lapin::message::Delivery>,
) -> Span {
    let span = messaging_span!(
        parent: None, "process", "consumer", "process", "process";
        messaging.destination.subscription.name = Empty,
        messaging.consumer.group.name = consumer,
        messaging.batch.message_count = Empty,
        warren.outcome = Empty,
        warren.failure_reason = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    let mut count: i64 = 0;
    for raw in raws {
        count = count.saturating_add(1);
        #[cfg(feature = "opentelemetry")]
        if let Some((parent, _)) =
            context::read(raw.properties.headers().as_ref().map(FieldTable::inner))
        {
            otel::link(&span, &parent);
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = raw;
    }
    span.record("otel.name", format!("process {queue}").as_str());
    span.record("messaging.destination.subscription.name", queue);
    span.record("messaging.batch.message_count", count);
    span
}

/// A retry or dead-letter copy of the delivery being settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyKind {
    /// A retry, through a wait queue or straight back to the queue.
    Retry,
    /// A dead letter, to the queue's dead-letter exchange.
    DeadLetter,
}

impl CopyKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::DeadLetter => "dead-letter",
        }
    }
}

/// The span of publishing a `copy` of a delivery from `queue` to `exchange` with
/// `routing_key`, a child of the delivery's `process` span (the current span). The copy's
/// trace context is this span's ([`propagate`]).
pub(crate) fn copy(copy: CopyKind, queue: &str, exchange: &str, routing_key: &str) -> Span {
    let span = messaging_span!(
        "settle", "producer", "send", copy.as_str();
        messaging.destination.name = Empty,
        messaging.rabbitmq.destination.routing_key = Empty,
        warren.outcome = copy.as_str(),
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("{} {queue}", copy.as_str()).as_str());
        route(&span, exchange, routing_key);
    }
    span
}

/// Writes the trace context of `span` (a [`publish`] span) into `properties`: with the
/// `opentelemetry` feature, when the span has an OpenTelemetry context. Otherwise nothing is
/// written: warren makes up no trace ids of its own.
pub(crate) fn inject(span: &Span, properties: BasicProperties) -> BasicProperties {
    #[cfg(feature = "opentelemetry")]
    if !span.is_disabled()
        && let Some(context) = otel::of(span)
    {
        let mut table = properties
            .headers()
            .as_ref()
            .map(|headers| headers.inner().clone())
            .unwrap_or_default();
        write(&mut table, Some(context));
        return properties.with_headers(FieldTable::from(table));
    }
    #[cfg(not(feature = "opentelemetry"))]
    let _ = span;
    properties
}

/// Sets the trace context of a copy's `headers` (the original's, copied): the `span`'s
/// context with the `opentelemetry` feature, so the next attempt is its child; otherwise the
/// original's, passed on unchanged if it is valid. An invalid one is never passed on.
pub(crate) fn propagate(span: &Span, headers: &mut BTreeMap<ShortString, AMQPValue>) {
    #[cfg(feature = "opentelemetry")]
    if !span.is_disabled()
        && let Some(context) = otel::of(span)
    {
        return write(headers, Some(context));
    }
    #[cfg(not(feature = "opentelemetry"))]
    let _ = span;
    let original = context::read(Some(headers));
    write(headers, original);
}

/// Replaces the trace headers of `table` with `context`, or removes them.
fn write(
    table: &mut BTreeMap<ShortString, AMQPValue>,
    context: Option<(TraceParent, Option<String>)>,
) {
    for key in headers::TRACE {
        table.remove(key);
    }
    let Some((parent, state)) = context else {
        return;
    };
    let text = |s: String| AMQPValue::LongString(LongString::from(s));
    table.insert(
        ShortString::from(headers::TRACEPARENT),
        text(parent.to_string()),
    );
    if let Some(state) = state {
        table.insert(ShortString::from(headers::TRACESTATE), text(state));
    }
}

/// Records how a publish on `span` ended: `error.type` and an error status when it failed.
pub(crate) fn published(span: &Span, result: &Result<(), PublishError>) {
    if span.is_disabled() {
        return;
    }
    if let Err(error) = result {
        fail(span, publish_error(error));
    }
}

/// Records on the current (`process`) span that its delivery was handled and acknowledged,
/// after `retries` earlier retries.
pub(crate) fn handled(retries: u32) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    span.record("warren.retry_count", i64::from(retries));
    span.record("warren.outcome", "ack");
}

/// Records on the current (`process`) span how its delivery failed (`error_type`: a failure
/// reason, `retryable`, `non-retryable` or `internal-error`), after `retries` earlier retries:
/// `error.type` and an error status.
pub(crate) fn failed(error_type: &str, retries: u32) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    span.record("warren.retry_count", i64::from(retries));
    fail(&span, error_type);
}

/// Records on the current span what was done with a failed delivery: `warren.outcome` (`what`:
/// `requeue`, `retry`, `dead-letter`, `drop` or `discard`) and `warren.failure_reason`.
pub(crate) fn settled(what: &str, reason: Option<FailureReason>) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    span.record("warren.outcome", what);
    if let Some(reason) = reason {
        span.record("warren.failure_reason", reason.as_str());
    }
}

/// Records on `span` (a `settle` span) that its copy is not published: `reason` took its
/// place (a copy over the frame size is dead-lettered as `too-large` instead).
pub(crate) fn abandoned(span: &Span, reason: &str) {
    if !span.is_disabled() {
        fail(span, reason);
    }
}

/// An integer attribute: as `i64`, which OpenTelemetry exports as a number (a `u64` goes out
/// as text through `tracing-opentelemetry`).
fn int(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

fn fail(span: &Span, error_type: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
}

/// `{operation} {destination}`: the exchange, or the queue for the default exchange (whose
/// name is empty, and whose routing key is a queue's name).
fn name(span: &Span, operation: &str, exchange: &str, routing_key: &str) {
    let destination = if exchange.is_empty() {
        routing_key
    } else {
        exchange
    };
    span.record("otel.name", format!("{operation} {destination}").as_str());
}

fn route(span: &Span, exchange: &str, routing_key: &str) {
    span.record("messaging.destination.name", exchange);
    if !routing_key.is_empty() {
        span.record("messaging.rabbitmq.destination.routing_key", routing_key);
    }
}

/// `error.type` of a publish that failed once sent.
fn publish_error(error: &PublishError) -> &'static str {
    match error {
        PublishError::Timeout(_) => "timeout",
        PublishError::Blocked { .. } => "blocked",
        PublishError::NotConnected(_) => "not-connected",
        PublishError::Unconfirmed(_) => "unconfirmed",
        PublishError::TooLong { .. } => "too-long",
        PublishError::TooLarge { .. } => "too-large",
        PublishError::Unroutable { .. } => "unroutable",
        PublishError::Nacked { .. } => "nacked",
        PublishError::Broker(_) => "broker",
        _ => "publish-error",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use lapin::types::{AMQPValue, LongString, ShortString};
    use tracing::Span;

    use super::propagate;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers(traceparent: &str, tracestate: &str) -> BTreeMap<ShortString, AMQPValue> {
        let mut table = BTreeMap::new();
        for (key, value) in [("traceparent", traceparent), ("tracestate", tracestate)] {
            table.insert(
                ShortString::from(key),
                AMQPValue::LongString(LongString::from(value)),
            );
        }
        table.insert(ShortString::from("tenant"), AMQPValue::LongLongInt(1));
        table
    }

    fn text(table: &BTreeMap<ShortString, AMQPValue>, key: &str) -> Option<String> {
        match table.get(key)? {
            AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
            _ => None,
        }
    }

    /// With no span to take a context from (no subscriber, or no OpenTelemetry layer), a copy
    /// passes the original's trace context on if it is valid, and drops it if not.
    #[test]
    fn copies_pass_on_a_valid_context_and_drop_a_forged_one() {
        let mut valid = headers(GOOD, "a=b");
        propagate(&Span::none(), &mut valid);
        assert_eq!(text(&valid, "traceparent").as_deref(), Some(GOOD));
        assert_eq!(text(&valid, "tracestate").as_deref(), Some("a=b"));

        let mut forged = headers(&GOOD.to_uppercase(), "a=b");
        propagate(&Span::none(), &mut forged);
        assert_eq!(text(&forged, "traceparent"), None);
        assert_eq!(
            text(&forged, "tracestate"),
            None,
            "never without its traceparent"
        );

        let mut bad_state = headers(GOOD, &"x".repeat(1000));
        propagate(&Span::none(), &mut bad_state);
        assert_eq!(text(&bad_state, "traceparent").as_deref(), Some(GOOD));
        assert_eq!(text(&bad_state, "tracestate"), None);
        assert!(bad_state.contains_key("tenant"), "other headers untouched");
    }
}
