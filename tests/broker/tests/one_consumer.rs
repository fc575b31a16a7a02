//! A worker running one consumer of the contract, registered on its own with the generated
//! `consumers::register` function rather than through `Handlers`: typed delivery, decoding
//! and the queue's retry policy are the same, and no other consumer runs.

use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::ShortString;
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, consumers, handlers, header, job};
use warren_runtime::WorkerError;

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_consumer_registered_alone_handles_retries_and_dead_letters() {
    let h = Harness::start_registering("one-consumer", |recorder, worker| {
        consumers::register::run_requeue_classic(worker, recorder.clone());
    })
    .await;
    // Fails once, then succeeds: retried by the queue's policy (immediate requeue, counted
    // by `x-retry-count` on a classic queue).
    let mut flaky = job("flaky", JobBehaviour::Retryable);
    flaky.succeed_on_attempt = Some(1);
    h.submit("requeue-classic", flaky).await;
    let attempts = h.recorder.wait_attempts("flaky", 2, WAIT).await;
    let counts: Vec<u32> = attempts.iter().map(|a| a.retry_count).collect();
    assert_eq!(counts, [0, 1], "{attempts:?}");
    assert!(attempts.iter().all(|a| a.consumer == "RunRequeueClassic"));
    assert_eq!(attempts[0].tenant, "acme", "typed headers arrive");

    // A body that is not the message is poison: dead-lettered by the consumer's decoding,
    // never handed to the handler.
    let properties =
        BasicProperties::default().with_content_type(ShortString::from("application/json"));
    h.publish_raw("job.requeue-classic", b"{ not json", properties)
        .await;
    let dead = h.dead_letters(1, WAIT).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(
        header(&dead[0], "x-consumer").as_deref(),
        Some("run_requeue_classic")
    );
    assert_eq!(
        header(&dead[0], "x-failure-reason").as_deref(),
        Some("decode")
    );

    // The consumers not registered do not run: what reaches their queues stays there.
    h.submit("none", job("unhandled", JobBehaviour::Ok)).await;
    h.recorder
        .wait_attempts("unhandled", 1, Duration::from_millis(500))
        .await;
    assert!(h.recorder.attempts("unhandled").is_empty());
    assert_eq!(h.ready("none").await, 1);
    // The sibling queue is bound to the same key and has no consumer either: it holds the
    // flaky job once and the poison, untouched.
    assert_eq!(h.ready("sibling").await, 2);
    h.stop().await.expect("clean shutdown");
}

/// Registering a consumer alone and again through `Handlers` would run two loops on one
/// queue, each with the consumer's prefetch and concurrency: the worker refuses to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_registered_twice_is_refused_before_anything_is_consumed() {
    let h = Harness::start_registering("twice", |recorder, worker| {
        consumers::register::run_none(worker, recorder.clone());
        handlers(recorder).register(worker);
    })
    .await;
    h.submit("none", job("waits", JobBehaviour::Ok)).await;
    match h.stop().await {
        Err(WorkerError::DuplicateConsumer { consumer }) => assert_eq!(consumer, "run_none"),
        other => panic!("a duplicate must be refused: {other:?}"),
    }
}
