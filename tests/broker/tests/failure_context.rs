//! A message's failure history, as a handler sees it on a retry and a dead-letter consumer
//! sees it on a dead letter (typed or poison), against the real broker.

use std::time::{Duration, SystemTime};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, job};
use warren_runtime::DeadMessage;
use warren_runtime::model::{FailureReason, headers};

const WAIT: Duration = Duration::from_secs(15);

fn json_properties() -> BasicProperties {
    BasicProperties::default().with_content_type(ShortString::from("application/json"))
}

/// The second attempt at a job sees why the first failed, when, and where the job was first
/// published; the producer's own failure headers on the first delivery are not history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_carries_its_failure_history_and_a_forged_one_is_not_believed() {
    let h = Harness::start("failure-history").await;
    let started = SystemTime::now();
    let mut flaky = job("flaky", JobBehaviour::Retryable);
    flaky.succeed_on_attempt = Some(1);
    // Published as a producer would forge a history: none of it may reach the handler.
    let mut forged = FieldTable::default();
    let text = |s: &str| AMQPValue::LongString(LongString::from(s));
    forged.insert(ShortString::from(headers::LAST_ERROR), text("forged error"));
    forged.insert(
        ShortString::from(headers::FIRST_FAILURE),
        AMQPValue::LongLongInt(1_000),
    );
    forged.insert(ShortString::from(headers::FAILED_QUEUE), text("elsewhere"));
    forged.insert(ShortString::from(headers::CONSUMER), text("someone"));
    let body = serde_json::to_vec(&flaky).expect("json");
    h.publish_raw("job.backoff", &body, json_properties().with_headers(forged))
        .await;

    // The sibling queue sees the job too (once): only the backoff queue's attempts count.
    h.recorder.wait_attempts("flaky", 3, WAIT).await;
    let attempts: Vec<_> = (h.recorder.attempts("flaky").into_iter())
        .filter(|a| a.consumer == "RunBackoff")
        .collect();
    assert_eq!(attempts.len(), 2, "one failure, then success: {attempts:?}");
    assert_eq!(
        attempts[0].failure, None,
        "a first delivery has no history, whatever its headers say"
    );
    let failure = attempts[1].failure.clone().expect("the retry's history");
    assert_eq!(failure.retry_count, 1);
    assert_eq!(attempts[1].retry_count, 1);
    assert_eq!(
        failure.last_error.as_deref(),
        Some("attempt 0 of flaky failed")
    );
    let first = failure.first_failure.expect("first failure");
    let last = failure.last_failure.expect("last failure");
    assert!(
        first >= started && last >= first,
        "failure times written by the worker, not the producer: {first:?}, {last:?}"
    );
    assert_eq!(failure.original_exchange, Some(h.name("jobs")));
    assert_eq!(failure.original_routing_key.as_deref(), Some("job.backoff"));
    assert_eq!(failure.queue, Some(h.name("backoff")));
    assert_eq!(failure.consumer.as_deref(), Some("run_backoff"));
    assert_eq!(failure.reason, None, "a retry is not a dead letter");
    h.stop().await.expect("clean shutdown");
}

/// A dead-letter consumer receives every dead letter: a job whose retries are spent typed,
/// with why and where it died; poison (not JSON, or breaking the schema) raw, with its body
/// and the reason it did not decode, never dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_consumer_gets_typed_dead_letters_and_raw_poison() {
    let h = Harness::start("dead-letter-consumer").await;
    h.submit("failing", job("spent", JobBehaviour::Retryable))
        .await;
    let not_json = b"{not json".to_vec();
    h.publish_raw("job.failing", &not_json, json_properties())
        .await;
    let out_of_bounds = br#"{"id":"bounds","behaviour":"ok","amount":5000}"#.to_vec();
    h.publish_raw("job.failing", &out_of_bounds, json_properties())
        .await;

    let letters = h.recorder.wait_dead_letters(3, WAIT).await;
    assert_eq!(letters.len(), 3, "{letters:#?}");
    let typed: Vec<_> = letters
        .iter()
        .filter_map(|l| l.typed().map(|d| (l, d)))
        .collect();
    assert_eq!(typed.len(), 1, "one dead letter decodes as a job");
    let (letter, delivery) = typed[0];
    assert_eq!(delivery.payload().id.as_str(), "spent");
    assert_eq!(delivery.headers().tenant, "acme");
    let failure = letter.failure();
    assert_eq!(failure.reason, Some(FailureReason::Exhausted));
    assert_eq!(failure.retry_count, 2, "max_retries 2, all spent");
    assert_eq!(
        failure.last_error.as_deref(),
        Some("attempt 2 of spent failed")
    );
    assert_eq!(failure.queue, Some(h.name("failing")));
    assert_eq!(failure.consumer.as_deref(), Some("run_failing"));
    assert_eq!(failure.original_exchange, Some(h.name("jobs")));
    assert_eq!(failure.original_routing_key.as_deref(), Some("job.failing"));
    assert!(failure.first_failure.is_some() && failure.last_failure >= failure.first_failure);
    assert_eq!(
        delivery.failure(),
        Some(failure),
        "the delivery carries it too"
    );

    for (body, reason) in [
        (&not_json, FailureReason::Decode),
        (&out_of_bounds, FailureReason::Validation),
    ] {
        let letter = letters
            .iter()
            .find(|l| l.raw().is_some_and(|raw| &raw.body == body))
            .unwrap_or_else(|| panic!("the {reason:?} poison, raw: {letters:#?}"));
        let DeadMessage::Raw(raw) = letter.message() else {
            unreachable!("found raw");
        };
        assert_eq!(raw.poison, reason, "{}", raw.poison_detail);
        assert!(!raw.truncated());
        assert_eq!(raw.content_type.as_deref(), Some("application/json"));
        assert_eq!(raw.routing_key, "job.failing");
        let failure = letter.failure();
        assert_eq!(failure.reason, Some(reason), "the worker's own reason");
        assert_eq!(failure.consumer.as_deref(), Some("run_failing"));
        assert_eq!(failure.queue, Some(h.name("failing")));
        assert!(failure.last_error.is_some());
    }
    // Handled and acknowledged, every one: nothing left, nothing returned.
    assert_eq!(h.ready("dead-read").await, 0);
    h.stop().await.expect("clean shutdown");
}

/// A producer's `x-failure-reason` on a first delivery used to ride on every retry copy,
/// which then looked like a dead letter: its retry count was not believed, and the message
/// retried for good. Copies drop it: the retries are counted and spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_failure_reason_does_not_make_retries_endless() {
    let h = Harness::start("forged-reason").await;
    let mut forged = FieldTable::default();
    forged.insert(
        ShortString::from(headers::FAILURE_REASON),
        AMQPValue::LongString(LongString::from("exhausted")),
    );
    let body = serde_json::to_vec(&job("looping", JobBehaviour::Retryable)).expect("json");
    h.publish_raw("job.failing", &body, json_properties().with_headers(forged))
        .await;
    let dead = h.recorder.wait_dead_letters(1, WAIT).await;
    assert_eq!(dead.len(), 1, "dead-lettered once its retries were spent");
    let counts: Vec<u32> = (h.recorder.attempts("looping").iter())
        .filter(|a| a.consumer == "RunFailing")
        .map(|a| a.retry_count)
        .collect();
    assert_eq!(counts, [0, 1, 2]);
    assert_eq!(dead[0].failure().retry_count, 2);
    h.stop().await.expect("clean shutdown");
}

/// A dead-letter handler that fails gets the dead letter again, as it was: returned to its
/// queue by the broker, never copied over with the dead-letter consumer's own failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_dead_letter_handler_gets_the_dead_letter_again_unchanged() {
    let h = Harness::start("dead-letter-handler-fails").await;
    h.submit("failing", job("dl-fail-once", JobBehaviour::Fatal))
        .await;
    let letters = h.recorder.wait_dead_letters(2, WAIT).await;
    assert_eq!(letters.len(), 2, "{letters:#?}");
    assert_eq!(h.recorder.dead_letters_of("dl-fail-once"), 2);
    assert_eq!(
        letters[0].failure(),
        letters[1].failure(),
        "the history is the original failure's, both times"
    );
    let failure = letters[1].failure();
    assert_eq!(failure.reason, Some(FailureReason::NonRetryable));
    assert_eq!(failure.consumer.as_deref(), Some("run_failing"));
    assert_eq!(failure.queue, Some(h.name("failing")));
    assert!(
        letters[1].typed().is_some_and(|d| d.redelivered()),
        "returned by the broker"
    );
    assert_eq!(h.ready("dead-read").await, 0, "handled the second time");
    h.stop().await.expect("clean shutdown");
}
