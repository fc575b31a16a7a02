//! Declaration, typed round trips, compression and unroutable publishes.

use std::time::Duration;

use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, job};
use warren_runtime::{
    DeclareError, MessagePart, PublishError, PublishOptions, ShortField, TopologyEntity,
};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_round_trip_through_generated_publisher_and_consumer() {
    let h = Harness::start("round-trip").await;
    h.submit("none", job("plain", JobBehaviour::Ok)).await;
    h.publishers
        .submit_gzip(
            "none",
            &job("zipped", JobBehaviour::Ok),
            &warren_broker_tests::headers(),
        )
        .await
        .expect("compressed publish");
    h.publishers
        .with(PublishOptions::default().message_id("order-42"))
        .submit(
            "none",
            &job("keyed", JobBehaviour::Ok),
            &warren_broker_tests::headers(),
        )
        .await
        .expect("published with a chosen id");
    for id in ["plain", "zipped", "keyed"] {
        let attempts = h.recorder.wait_attempts(id, 1, WAIT).await;
        assert_eq!(attempts.len(), 1, "{id} handled once");
        assert_eq!(attempts[0].consumer, "RunNone");
        assert_eq!(attempts[0].tenant, "acme", "typed headers arrive");
        assert_eq!(attempts[0].retry_count, 0);
    }
    let keyed = h.recorder.attempts("keyed");
    assert_eq!(keyed[0].message_id.as_deref(), Some("order-42"));
    let plain = h.recorder.attempts("plain");
    let id = plain[0]
        .message_id
        .clone()
        .expect("a message id by default");
    assert_eq!(
        uuid::Uuid::parse_str(&id)
            .expect("a UUID")
            .get_version_num(),
        7
    );
    assert!(
        h.dead_letters(1, Duration::from_millis(300))
            .await
            .is_empty()
    );
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unroutable_and_invalid_publishes_are_errors() {
    let h = Harness::start("unroutable").await;
    let unroutable = h
        .publishers
        .nowhere(
            &job("lost", JobBehaviour::Ok),
            &warren_broker_tests::headers(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(unroutable, PublishError::Unroutable { .. }),
        "{unroutable}"
    );
    let mut invalid = job("invalid", JobBehaviour::Ok);
    invalid.amount = 5000;
    let refused = h
        .publishers
        .submit("none", &invalid, &warren_broker_tests::headers())
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            PublishError::Invalid {
                part: MessagePart::Payload,
                ..
            }
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("/amount"), "{refused}");
    let empty = h
        .publishers
        .submit(
            "",
            &job("x", JobBehaviour::Ok),
            &warren_broker_tests::headers(),
        )
        .await;
    assert!(matches!(
        empty,
        Err(PublishError::EmptyPlaceholder {
            placeholder: "target"
        })
    ));
    // An id longer than an AMQP short string is an error, not a panic in the client.
    let long_id = h
        .publishers
        .with(warren_runtime::PublishOptions::default().message_id("x".repeat(256)))
        .submit(
            "none",
            &job("long-id", JobBehaviour::Ok),
            &warren_broker_tests::headers(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            long_id,
            PublishError::TooLong {
                field: ShortField::MessageId,
                bytes: 256
            }
        ),
        "{long_id}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        h.recorder.attempts("invalid").is_empty() && h.recorder.attempts("long-id").is_empty(),
        "nothing was sent"
    );
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declaration_is_idempotent_checks_passively_and_names_mismatches() {
    let h = Harness::start("declare").await;
    warren_runtime::declare(&h.connection, &h.topology)
        .await
        .expect("declaring twice is fine");
    warren_runtime::verify(&h.connection, &h.topology)
        .await
        .expect("everything exists");
    // Wait queues of ttl-backoff are declared with the rest.
    for wait in [
        "backoff.wait.200ms",
        "backoff.wait.400ms",
        "backoff.wait.800ms",
    ] {
        assert_eq!(h.ready(wait).await, 0, "{wait} exists");
    }
    let mut changed = h.topology.clone();
    let queue = changed
        .queues
        .iter_mut()
        .find(|q| q.name == h.name("requeue"))
        .expect("declared");
    queue.delivery_limit = warren_runtime::model::DeliveryLimit::Count(99);
    let error = warren_runtime::declare(&h.connection, &changed)
        .await
        .unwrap_err();
    match &error {
        DeclareError::Mismatch {
            kind,
            name,
            argument,
            ..
        } => {
            assert_eq!(
                (*kind, name.as_str()),
                (TopologyEntity::Queue, h.name("requeue").as_str())
            );
            assert_eq!(argument.as_deref(), Some("x-delivery-limit"));
        }
        other => panic!("expected a mismatch, got {other}"),
    }
    let missing = h.topology.namespaced("nobody.");
    let error = warren_runtime::verify(&h.connection, &missing)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            DeclareError::Missing {
                kind: TopologyEntity::Exchange,
                ..
            }
        ),
        "{error}"
    );
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_cancelled_by_the_broker_stops_the_worker_with_an_error() {
    let h = Harness::start("cancelled").await;
    let channel = h.connection.create_channel().await.expect("a channel");
    channel
        .queue_delete(h.name("sibling").as_str().into(), Default::default())
        .await
        .expect("the queue is deleted");
    // Waited for, not slept on: on a loaded machine the worker may learn of it late.
    assert!(
        h.worker_ended(Duration::from_secs(60)).await,
        "the worker ends when a consumer's queue is deleted"
    );
    let sibling = h.name("sibling");
    // Depending on timing the broker's cancel or its NOT_FOUND reaches the worker first;
    // either way the worker stops with an error naming the queue, never silently.
    let error = h.stop().await.expect_err("the worker fails");
    let named = match &error {
        warren_runtime::WorkerError::Cancelled { consumer, queue } => {
            consumer == "run_sibling" && *queue == sibling
        }
        // The queue is named in the error's chain (its sources), not necessarily in its
        // own message.
        other => std::iter::successors(Some(other as &dyn std::error::Error), |e| e.source())
            .any(|e| e.to_string().contains(&sibling)),
    };
    assert!(named, "{error}");
}

/// Many publishes from one task (`publish_all`): pipelined, their confirms awaited together,
/// each message's result in the order given; an invalid message and an unroutable one fail
/// alone, and every other message is handled once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_all_reports_each_message_and_sends_the_rest() {
    let h = Harness::start("publish-all").await;
    let headers = warren_broker_tests::headers();
    let jobs: Vec<_> = (0..300)
        .map(|n| match n {
            100 => warren_broker_tests::types::Job {
                amount: 5000,
                ..job("invalid", JobBehaviour::Ok)
            },
            _ => job(&format!("many-{n}"), JobBehaviour::Ok),
        })
        .collect();
    let publishes = jobs.iter().enumerate().map(|(n, job)| {
        let (publishers, headers) = (&h.publishers, &headers);
        async move {
            if n == 200 {
                publishers.nowhere(job, headers).await
            } else {
                publishers.submit("none", job, headers).await
            }
        }
    });
    let results = warren_runtime::publish_all(publishes, 64).await;
    assert_eq!(results.len(), jobs.len(), "a result per message");
    for (n, result) in results.iter().enumerate() {
        match n {
            100 => assert!(
                matches!(result, Err(PublishError::Invalid { .. })),
                "{result:?}"
            ),
            200 => assert!(
                matches!(result, Err(PublishError::Unroutable { .. })),
                "{result:?}"
            ),
            _ => assert!(result.is_ok(), "message {n}: {result:?}"),
        }
    }
    for n in (0..300).filter(|n| ![100, 200].contains(n)) {
        let attempts = h
            .recorder
            .wait_attempts(&format!("many-{n}"), 1, WAIT)
            .await;
        assert_eq!(attempts.len(), 1, "many-{n} handled once");
    }
    h.stop().await.expect("the worker stops cleanly");
}

/// Routable and unroutable messages pipelined on one channel: each is told its own outcome.
/// RabbitMQ returns an unroutable message and then confirms it, often in one `multiple` ack
/// with routable ones; lapin hands the returned message to whichever confirm of that ack it
/// resolves first, so an unroutable message could be told it was delivered (and be gone)
/// while a routable one was told it was not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pipelined_publish_is_told_whether_it_was_routed() {
    let h = Harness::start("returned").await;
    let headers = warren_broker_tests::headers();
    let unroutable = |n: usize| n % 3 == 1;
    let jobs: Vec<_> = (0..1500)
        .map(|n| job(&format!("r-{n}"), JobBehaviour::Ok))
        .collect();
    let publishes = jobs.iter().enumerate().map(|(n, job)| {
        let (publishers, headers) = (&h.publishers, &headers);
        async move {
            if unroutable(n) {
                publishers.nowhere(job, headers).await
            } else {
                publishers.submit("none", job, headers).await
            }
        }
    });
    let results = warren_runtime::publish_all(publishes, 256).await;
    let wrong: Vec<String> = results
        .iter()
        .enumerate()
        .filter(|(n, result)| {
            let told_unroutable = matches!(result, Err(PublishError::Unroutable { .. }));
            told_unroutable != unroutable(*n) || (!unroutable(*n) && result.is_err())
        })
        .map(|(n, result)| format!("r-{n}: {result:?}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} publishes told another's outcome, e.g. {:?}",
        wrong.len(),
        results.len(),
        wrong.iter().take(5).collect::<Vec<_>>()
    );
    h.stop().await.expect("the worker stops cleanly");
}
