//! Warren's metrics, recorded by a sink of the test's own on the real broker: a message
//! handled, one retried then handled (by each retry mode), one poison dead-lettered, publishes
//! confirmed and one returned, a circuit breaker opening and closing, RPC calls ending each
//! way and a late reply.
//!
//! A `metrics` recorder is global to the process: this test binary holds this one test only,
//! so the recorder it installs sees nothing of any other test. Label values are filtered by
//! the test's namespace all the same.

use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::ShortString;
use metrics::Unit;
use warren_broker_tests::rpc::{clients, request, slow};
use warren_broker_tests::types::QuoteRequestBehaviour;
use warren_broker_tests::{Harness, headers, job, types::JobBehaviour};
use warren_runtime::metrics as names;
use warren_runtime::{CallOptions, PublishError, RpcError};

#[path = "support/sink.rs"]
mod sink;
use sink::{Labels, Sink};

async fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "still not: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_is_recorded_with_its_labels() {
    let sink = Sink::default();
    // Before the publisher and the worker start: they register their handles then.
    metrics::set_global_recorder(sink.clone()).expect("the only recorder of this binary");
    let h = Harness::start("metrics").await;
    let queue = |name: &str| h.name(name);
    let (none, backoff, requeue, native, outage) = (
        queue("none"),
        queue("backoff"),
        queue("requeue"),
        queue("native"),
        queue("outage"),
    );
    // A consumer's labels, and more.
    let at = |consumer: &'static str, queue: &str| -> Labels {
        vec![
            ("consumer", consumer.to_owned()),
            ("queue", queue.to_owned()),
        ]
    };
    let count = |name: &str, base: &Labels, more: &[(&str, &str)]| {
        let mut labels: Vec<(&str, &str)> = base.iter().map(|(k, v)| (*k, v.as_str())).collect();
        labels.extend_from_slice(more);
        sink.count(name, &labels)
    };
    let one = |name: &str, base: &Labels| {
        let labels: Vec<(&str, &str)> = base.iter().map(|(k, v)| (*k, v.as_str())).collect();
        sink.one(name, &labels)
    };

    // Handled at once; retried once (ttl-backoff, immediate-requeue on a quorum queue, and
    // quorum-native), then handled; poison, dead-lettered.
    h.submit("none", job("ok", JobBehaviour::Ok)).await;
    let mut flaky = job("flaky", JobBehaviour::Retryable);
    flaky.succeed_on_attempt = Some(1);
    h.submit("backoff", flaky.clone()).await;
    flaky.id = "flaky-requeue".try_into().expect("an id");
    h.submit("requeue", flaky.clone()).await;
    flaky.id = "flaky-native".try_into().expect("an id");
    h.submit("native", flaky).await;
    let json = BasicProperties::default().with_content_type(ShortString::from("application/json"));
    h.publish_raw("job.none", b"{ not json", json).await;
    // Returned: nothing is bound to its routing key.
    let returned = h
        .publishers
        .nowhere(&job("lost", JobBehaviour::Ok), &headers())
        .await
        .expect_err("unroutable");
    assert!(
        matches!(returned, PublishError::Unroutable { .. }),
        "{returned}"
    );

    let run_none = at("run_none", &none);
    let run_backoff = at("run_backoff", &backoff);
    let run_requeue = at("run_requeue", &requeue);
    let run_native = at("run_native", &native);
    eventually("every message settled", || {
        count(names::HANDLED, &run_none, &[]) == 2
            && count(names::HANDLED, &run_backoff, &[]) == 2
            && count(names::HANDLED, &run_requeue, &[]) == 2
            && count(names::HANDLED, &run_native, &[]) == 2
    })
    .await;

    // Publishes, by the contract's exchange name.
    let jobs: Labels = vec![("exchange", "jobs".to_owned())];
    assert_eq!(count(names::PUBLISHED, &jobs, &[]), 5);
    assert_eq!(count(names::CONFIRMED, &jobs, &[]), 4);
    assert_eq!(count(names::RETURNED, &jobs, &[]), 1);
    assert_eq!(
        count(names::PUBLISH_FAILED, &jobs, &[("error", "unroutable")]),
        1
    );
    assert_eq!(
        count(names::PUBLISH_FAILED, &jobs, &[]),
        1,
        "no other failure"
    );

    // The handled message and the poison one.
    assert_eq!(count(names::CONSUMED, &run_none, &[]), 2);
    assert_eq!(count(names::HANDLED, &run_none, &[("outcome", "ack")]), 1);
    assert_eq!(
        count(names::HANDLED, &run_none, &[("outcome", "dead-letter")]),
        1
    );
    assert_eq!(
        count(names::DEAD_LETTERED, &run_none, &[("reason", "decode")]),
        1
    );
    assert_eq!(
        count(names::DEAD_LETTERED, &run_none, &[]),
        1,
        "one dead letter in all"
    );
    assert_eq!(
        count(names::RETRIED, &run_none, &[]),
        0,
        "a queue with no retries"
    );
    let dead = h.dead_letters(1, Duration::from_secs(5)).await;
    assert_eq!(
        dead.len(),
        1,
        "the counted dead letter is in the dead-letter queue"
    );

    // Retried once each, by their queue's mode, then handled.
    for (run, mode) in [
        (&run_backoff, "ttl-backoff"),
        (&run_requeue, "immediate-requeue"),
        (&run_native, "quorum-native"),
    ] {
        assert_eq!(count(names::CONSUMED, run, &[]), 2, "{mode}");
        assert_eq!(
            count(names::HANDLED, run, &[("outcome", "retry")]),
            1,
            "{mode}"
        );
        assert_eq!(
            count(names::HANDLED, run, &[("outcome", "ack")]),
            1,
            "{mode}"
        );
        assert_eq!(count(names::RETRIED, run, &[("mode", mode)]), 1, "{mode}");
        assert_eq!(count(names::RETRIED, run, &[]), 1, "{mode}: no other mode");
    }

    // Histograms: one handler run per attempt; latencies from the millisecond header, so
    // well under a minute here (in seconds, not milliseconds read as seconds).
    let samples = |name: &str, base: &Labels| {
        let cell = one(name, base);
        let values = cell.samples.lock().unwrap_or_else(|e| e.into_inner());
        values.clone()
    };
    assert_eq!(samples(names::HANDLER_DURATION, &run_backoff).len(), 2);
    assert_eq!(
        samples(names::HANDLER_DURATION, &run_none).len(),
        1,
        "poison never reaches the handler"
    );
    let latencies = samples(names::END_TO_END_LATENCY, &run_backoff);
    assert_eq!(latencies.len(), 2);
    assert!(
        latencies.iter().all(|s| (0.0..60.0).contains(s)),
        "{latencies:?}"
    );
    // The retry waited 200 ms in its wait queue: end-to-end latency includes it.
    assert!(latencies.iter().any(|s| *s >= 0.2), "{latencies:?}");

    // A publish time anyone could write is not believed: before, 300 messages stamped six
    // days ago set a consumer's median latency to six and a half days. These are published
    // without a `user_id` the broker checked; each fails once (its retry copy must not carry
    // the claim on as warren's own) and is then handled.
    let six_days_ago = std::time::SystemTime::now()
        .checked_sub(Duration::from_secs(6 * 24 * 3600))
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| i64::try_from(d.as_millis()).expect("a time"))
        .expect("a time");
    const FORGED: usize = 20;
    for i in 0..FORGED {
        let mut forged = job(&format!("forged-{i}"), JobBehaviour::Retryable);
        forged.succeed_on_attempt = Some(1);
        let mut table = lapin::types::FieldTable::default();
        table.insert(
            ShortString::from(warren_runtime::model::headers::PUBLISHED_AT),
            lapin::types::AMQPValue::LongLongInt(six_days_ago),
        );
        let properties = BasicProperties::default()
            .with_content_type(ShortString::from("application/json"))
            .with_headers(table);
        let body = serde_json::to_vec(&forged).expect("JSON");
        h.publish_raw("job.backoff", &body, properties).await;
    }
    eventually("the forged messages are handled", || {
        count(names::HANDLED, &run_backoff, &[("outcome", "ack")]) == 1 + FORGED as u64
    })
    .await;
    assert_eq!(
        count(names::HANDLED, &run_backoff, &[("outcome", "retry")]),
        1 + FORGED as u64,
        "each was retried once"
    );
    let latencies = samples(names::END_TO_END_LATENCY, &run_backoff);
    assert_eq!(
        latencies.len(),
        2,
        "only the warren publisher's message, twice: {latencies:?}"
    );

    // In flight: up while handled, back to zero once settled.
    let in_flight = one(names::IN_FLIGHT, &run_backoff);
    let history = in_flight
        .gauge
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    assert!(history.contains(&1.0), "{history:?}");
    assert_eq!(history.last(), Some(&0.0), "{history:?}");

    // The circuit breaker (3 failures, 1 s cool-down): open during an outage, then a probe
    // after the cool-down, handled, closes it.
    h.recorder.set_outage(true);
    for i in 0..3 {
        h.submit("outage", job(&format!("down-{i}"), JobBehaviour::Ok))
            .await;
    }
    let run_outage = at("run_outage", &outage);
    let breaker = one(names::CIRCUIT_BREAKER_STATE, &run_outage);
    let states = || {
        breaker
            .gauge
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    };
    eventually("the breaker opens", || states().last() == Some(&1.0)).await;
    let health = h.connection.health();
    assert!(health.connected);
    h.recorder.set_outage(false);
    h.submit("outage", job("back", JobBehaviour::Ok)).await;
    eventually("the breaker closes", || states().last() == Some(&0.0)).await;
    assert_eq!(states(), [1.0, 2.0, 0.0], "open, half-open, closed");
    assert_eq!(
        count(
            names::DEAD_LETTERED,
            &run_outage,
            &[("reason", "exhausted")]
        ),
        3,
        "the failures before it opened"
    );

    // RPC: the harness's worker serves `quote_price` (its server is one of `Handlers`), and
    // a client's calls end each way but one.
    let (client, rpcs) = clients(&h).await;
    rpcs.quote_price(&request("q-ok", QuoteRequestBehaviour::Ok), &headers())
        .await
        .expect("a response");
    let declared = rpcs
        .quote_price(
            &request("q-error", QuoteRequestBehaviour::Declared),
            &headers(),
        )
        .await;
    assert!(matches!(declared, Err(RpcError::Declared(_))));
    let failed = rpcs
        .quote_price(
            &request("q-failed", QuoteRequestBehaviour::Fatal),
            &headers(),
        )
        .await;
    assert!(matches!(failed, Err(RpcError::Failed { .. })));
    let late = rpcs
        .with(CallOptions::default().timeout(Duration::from_millis(200)))
        .quote_price(&slow("q-late", Duration::from_millis(600)), &headers())
        .await;
    assert!(matches!(late, Err(RpcError::Timeout(_))));
    let operation: Labels = vec![("operation", "quote_price".to_owned())];
    for outcome in ["ok", "error", "failed", "timeout"] {
        assert_eq!(
            count(names::RPC_CALLS, &operation, &[("outcome", outcome)]),
            1,
            "{outcome}"
        );
    }
    assert_eq!(
        count(names::RPC_CALLS, &operation, &[]),
        4,
        "no other outcome"
    );
    assert_eq!(samples(names::RPC_CALL_DURATION, &operation).len(), 4);
    let replies = at("quote_price", &queue("quotes"));
    eventually("the late reply is dropped", || {
        sink.count(names::RPC_LATE_REPLIES, &[]) == 1
            && count(names::RPC_REPLIES, &replies, &[("status", "ok")]) == 2
    })
    .await;
    assert_eq!(
        count(names::RPC_REPLIES, &replies, &[("status", "error")]),
        1
    );
    assert_eq!(
        count(names::RPC_REPLIES, &replies, &[("status", "failed")]),
        1
    );
    assert_eq!(client.late_replies(), 1);

    // Every metric is described, with its unit.
    let described = sink
        .described
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for name in [
        names::PUBLISHED,
        names::CONFIRMED,
        names::RETURNED,
        names::PUBLISH_FAILED,
        names::CONSUMED,
        names::HANDLED,
        names::RETRIED,
        names::DEAD_LETTERED,
        names::HANDLER_DURATION,
        names::END_TO_END_LATENCY,
        names::IN_FLIGHT,
        names::CIRCUIT_BREAKER_STATE,
        names::RPC_CALLS,
        names::RPC_CALL_DURATION,
        names::RPC_LATE_REPLIES,
        names::RPC_REPLIES,
    ] {
        assert!(described.contains_key(name), "{name} is described");
    }
    assert_eq!(described[names::HANDLER_DURATION].0, Some(Unit::Seconds));
    assert_eq!(described[names::RPC_CALL_DURATION].0, Some(Unit::Seconds));
    h.stop().await.expect("the worker stops cleanly");
}
