//! Traces against the real broker: the runtime's spans, exported through
//! `tracing-opentelemetry` to OpenTelemetry's in-memory exporter, form one trace from the
//! publisher through every retry to the dead letter, linked by the `traceparent` header.

use std::sync::OnceLock;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt as _;
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, consumers, header, job};

const WAIT: Duration = Duration::from_secs(15);

/// The exporter every test of this binary shares: a tracing subscriber is set once per
/// process, and the worker's tasks run on every thread. Tests tell their spans apart by
/// their namespace.
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("warren-tests"));
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("the only subscriber of this test binary");
        exporter
    })
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|KeyValue { key: k, .. }| k.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(|v| v.as_str().into_owned())
}

fn int(span: &SpanData, key: &str) -> Option<i64> {
    match attribute(span, key)? {
        Value::I64(i) => Some(*i),
        _ => None,
    }
}

/// The finished spans whose name ends with `suffix` (a namespaced exchange or queue: this
/// test's own), waiting until `done` holds of them or the wait is over.
async fn spans(suffix: &str, done: impl Fn(&[SpanData]) -> bool) -> Vec<SpanData> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let spans: Vec<SpanData> = exporter()
            .get_finished_spans()
            .expect("the exporter is running")
            .into_iter()
            .filter(|span| span.name.ends_with(suffix))
            .collect();
        if done(&spans) || tokio::time::Instant::now() >= deadline {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The one span named `name` whose `key` attribute is `value`.
fn one<'a>(spans: &'a [SpanData], name: &str, key: &str, value: i64) -> &'a SpanData {
    let found: Vec<_> = spans
        .iter()
        .filter(|s| s.name == name && int(s, key) == Some(value))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {name} span with {key} = {value}: {spans:#?}"
    );
    found[0]
}

fn is_child(child: &SpanData, parent: &SpanData) {
    assert_eq!(
        child.parent_span_id,
        parent.span_context.span_id(),
        "{} is a child of {}",
        child.name,
        parent.name
    );
    assert_eq!(
        child.span_context.trace_id(),
        parent.span_context.trace_id()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_follows_a_message_from_its_publisher_through_a_retry() {
    exporter();
    let h = Harness::start_registering("traces-retry", |recorder, worker| {
        consumers::register::run_backoff(worker, recorder.clone());
    })
    .await;
    let mut traced = job("traced", JobBehaviour::Retryable);
    traced.succeed_on_attempt = Some(1);
    h.submit("backoff", traced).await;

    let exchange = h.name("jobs");
    let queue = h.name("backoff");
    // Publish, attempt 1, the retry copy, attempt 2: the last ends once acked.
    let publish_name = format!("publish {exchange}");
    let process_name = format!("process {queue}");
    let retry_name = format!("retry {queue}");
    let spans_of_queue = spans(&queue, |spans| {
        spans
            .iter()
            .any(|s| s.name == process_name && int(s, "warren.retry_count") == Some(1))
    })
    .await;
    let published = spans(&exchange, |s| !s.is_empty()).await;

    let [publish] = published.as_slice() else {
        panic!("one publish span: {published:#?}");
    };
    assert_eq!(publish.name, publish_name);
    assert_eq!(publish.span_kind, SpanKind::Producer);
    assert_eq!(
        publish.parent_span_id,
        SpanId::INVALID,
        "the publisher's root"
    );
    assert_eq!(
        text(publish, "messaging.system").as_deref(),
        Some("rabbitmq")
    );
    assert_eq!(
        text(publish, "messaging.operation.type").as_deref(),
        Some("send")
    );
    assert_eq!(
        text(publish, "messaging.destination.name"),
        Some(exchange.clone())
    );
    assert_eq!(
        text(publish, "messaging.rabbitmq.destination.routing_key").as_deref(),
        Some("job.backoff")
    );
    assert!(text(publish, "messaging.message.id").is_some_and(|id| !id.is_empty()));
    assert!(
        int(publish, "messaging.message.body.size").is_some_and(|n| n > 0),
        "{publish:#?}"
    );

    let first = one(&spans_of_queue, &process_name, "warren.retry_count", 0);
    assert_eq!(first.span_kind, SpanKind::Consumer);
    is_child(first, publish);
    assert!(
        first.parent_span_is_remote,
        "its parent came in the traceparent header"
    );
    assert_eq!(
        text(first, "messaging.operation.type").as_deref(),
        Some("process")
    );
    assert_eq!(
        text(first, "messaging.destination.subscription.name"),
        Some(queue.clone())
    );
    assert_eq!(
        text(first, "messaging.consumer.group.name").as_deref(),
        Some("run_backoff")
    );
    assert!(int(first, "messaging.rabbitmq.message.delivery_tag").is_some());
    assert_eq!(text(first, "error.type").as_deref(), Some("retryable"));
    assert_eq!(text(first, "warren.outcome").as_deref(), Some("retry"));
    assert!(
        matches!(first.status, Status::Error { .. }),
        "{:?}",
        first.status
    );

    let retries: Vec<_> = spans_of_queue
        .iter()
        .filter(|s| s.name == retry_name)
        .collect();
    let [retry] = retries.as_slice() else {
        panic!("one retry span: {spans_of_queue:#?}");
    };
    assert_eq!(retry.span_kind, SpanKind::Producer);
    is_child(retry, first);
    assert_eq!(
        text(retry, "messaging.destination.name").as_deref(),
        Some("")
    );
    assert!(
        text(retry, "messaging.rabbitmq.destination.routing_key")
            .is_some_and(|key| key.starts_with(&queue) && key != queue),
        "published to a wait queue: {retry:#?}"
    );

    let second = one(&spans_of_queue, &process_name, "warren.retry_count", 1);
    is_child(second, retry);
    assert!(second.parent_span_is_remote);
    assert_eq!(text(second, "warren.outcome").as_deref(), Some("ack"));
    assert_eq!(text(second, "error.type"), None);
    assert!(!matches!(second.status, Status::Error { .. }));
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dead_letter_carries_the_trace_of_the_last_attempt() {
    exporter();
    let h = Harness::start_registering("traces-dead", |recorder, worker| {
        consumers::register::run_backoff(worker, recorder.clone());
    })
    .await;
    h.submit("backoff", job("doomed", JobBehaviour::Retryable))
        .await;
    let dead = h.dead_letters(1, WAIT).await;
    let [dead] = dead.as_slice() else {
        panic!("one dead letter");
    };
    let queue = h.name("backoff");
    let process_name = format!("process {queue}");
    let dead_name = format!("dead-letter {queue}");
    let spans = spans(&queue, |spans| {
        let last = |s: &SpanData| s.name == process_name && int(s, "warren.retry_count") == Some(3);
        spans.iter().any(|s| s.name == dead_name) && spans.iter().any(last)
    })
    .await;
    let trace = spans
        .first()
        .map(|s| s.span_context.trace_id())
        .expect("spans of the queue");
    assert!(
        spans.iter().all(|s| s.span_context.trace_id() == trace),
        "one trace"
    );
    // Attempts 0 to 3 (max_retries: 3), each but the first the child of a retry.
    let last = one(&spans, &process_name, "warren.retry_count", 3);
    assert_eq!(text(last, "warren.outcome").as_deref(), Some("dead-letter"));
    assert_eq!(
        text(last, "warren.failure_reason").as_deref(),
        Some("exhausted")
    );
    let [dead_letter] = spans
        .iter()
        .filter(|s| s.name == dead_name)
        .collect::<Vec<_>>()[..]
    else {
        panic!("one dead-letter span: {spans:#?}");
    };
    is_child(dead_letter, last);
    assert_eq!(
        text(dead_letter, "messaging.destination.name"),
        Some(h.name("jobs.dlx"))
    );
    // The dead letter names the dead-letter span as its parent: a consumer of the dead-letter
    // queue continues the same trace.
    let expected = format!(
        "00-{}-{}-01",
        dead_letter.span_context.trace_id(),
        dead_letter.span_context.span_id()
    );
    assert_eq!(header(dead, "traceparent"), Some(expected));
    h.stop().await.expect("clean shutdown");
}

/// Publishes job `id` to the backoff queue bypassing warren, with `traceparent`.
async fn publish_with_traceparent(h: &Harness, id: &str, traceparent: &str) {
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from("traceparent"),
        AMQPValue::LongString(LongString::from(traceparent)),
    );
    headers.insert(
        ShortString::from("tracestate"),
        AMQPValue::LongString(LongString::from("vendor=opaque")),
    );
    let body = serde_json::json!({ "id": id, "behaviour": "ok", "amount": 1 });
    let properties = BasicProperties::default()
        .with_content_type(ShortString::from("application/json"))
        .with_message_id(ShortString::from(id))
        .with_headers(headers);
    h.publish_raw("job.backoff", body.to_string().as_bytes(), properties)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_traceparent_is_continued_and_a_forged_one_ignored() {
    exporter();
    let h = Harness::start_registering("traces-foreign", |recorder, worker| {
        consumers::register::run_backoff(worker, recorder.clone());
    })
    .await;
    let foreign = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    publish_with_traceparent(&h, "foreign", foreign).await;
    // All-zero trace id, upper-case hex, an unknown version: none is a parent.
    let forged = [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ];
    for (i, traceparent) in forged.iter().enumerate() {
        publish_with_traceparent(&h, &format!("forged-{i}"), traceparent).await;
    }
    let queue = h.name("backoff");
    let spans = spans(&queue, |spans| spans.len() >= 4).await;
    let by_id = |id: &str| {
        spans
            .iter()
            .find(|s| text(s, "messaging.message.id").as_deref() == Some(id))
            .unwrap_or_else(|| panic!("the span of {id}: {spans:#?}"))
    };
    let continued = by_id("foreign");
    assert_eq!(
        continued.span_context.trace_id(),
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex")
    );
    assert_eq!(
        continued.parent_span_id,
        SpanId::from_hex("00f067aa0ba902b7").expect("hex")
    );
    assert_eq!(
        continued.span_context.trace_state().get("vendor"),
        Some("opaque")
    );
    for i in 0..forged.len() {
        let root = by_id(&format!("forged-{i}"));
        assert_eq!(
            root.parent_span_id,
            SpanId::INVALID,
            "forged-{i} starts a trace"
        );
        assert_ne!(
            root.span_context.trace_id(),
            continued.span_context.trace_id()
        );
        assert_eq!(
            text(root, "warren.outcome").as_deref(),
            Some("ack"),
            "and is handled"
        );
    }
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_span_links_to_the_publisher_of_each_message() {
    exporter();
    let h = Harness::start_registering("traces-batch", |recorder, worker| {
        consumers::register::run_batch(worker, recorder.clone());
    })
    .await;
    for id in ["b1", "b2", "b3"] {
        h.submit("batch", job(id, JobBehaviour::Ok)).await;
    }
    let queue = h.name("batch");
    let batches = spans(&queue, |spans| {
        let messages: i64 = spans
            .iter()
            .filter_map(|s| int(s, "messaging.batch.message_count"))
            .sum();
        messages == 3
    })
    .await;
    let published = spans(&h.name("jobs"), |s| s.len() == 3).await;
    let mut linked: Vec<SpanId> = Vec::new();
    for batch in &batches {
        assert_eq!(batch.name, format!("process {queue}"));
        assert_eq!(
            batch.parent_span_id,
            SpanId::INVALID,
            "a batch has no one parent"
        );
        assert_eq!(
            text(batch, "messaging.consumer.group.name").as_deref(),
            Some("run_batch")
        );
        linked.extend(batch.links.iter().map(|link| link.span_context.span_id()));
    }
    let mut publishers: Vec<SpanId> = published.iter().map(|s| s.span_context.span_id()).collect();
    linked.sort_by_key(|id| id.to_bytes());
    publishers.sort_by_key(|id| id.to_bytes());
    assert_eq!(linked, publishers, "each message's publish span, once");
    h.stop().await.expect("clean shutdown");
}
