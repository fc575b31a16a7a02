//! The retry and dead-letter model, queue by queue, against the real broker.

use std::io::Write as _;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use warren_broker_tests::types::{self, JobBehaviour};
use warren_broker_tests::{Harness, header, job};

const WAIT: Duration = Duration::from_secs(15);

fn json_properties() -> BasicProperties {
    BasicProperties::default().with_content_type(ShortString::from("application/json"))
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("compressed");
    encoder.finish().expect("compressed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_goes_to_the_dead_letter_queue_with_its_reason_and_is_never_retried() {
    // A retry queue (with no sibling bound): poison must still get zero retries.
    let h = Harness::start_with("poison", |w| w.max_body_bytes(64 * 1024)).await;
    let valid = serde_json::to_vec(&job("fine", JobBehaviour::Ok)).expect("json");
    let mut out_of_bounds = job("bounds", JobBehaviour::Ok);
    out_of_bounds.amount = 1001;
    let cases: Vec<(&str, Vec<u8>, BasicProperties)> = vec![
        (
            "validation",
            serde_json::to_vec(&out_of_bounds).expect("json"),
            json_properties(),
        ),
        (
            "validation",
            br#"{"id": "x", "behaviour": "ok"}"#.to_vec(),
            json_properties(),
        ),
        ("decode", b"{not json".to_vec(), json_properties()),
        (
            "decode",
            b"definitely not gzip".to_vec(),
            json_properties().with_content_encoding(ShortString::from("gzip")),
        ),
        (
            "too-large",
            gzip(&vec![b' '; 1024 * 1024]),
            json_properties().with_content_encoding(ShortString::from("gzip")),
        ),
        (
            "content-type",
            valid.clone(),
            BasicProperties::default().with_content_type(ShortString::from("text/plain")),
        ),
    ];
    for (_, body, properties) in &cases {
        h.publish_raw("job.requeue", body, properties.clone()).await;
    }
    let dead = h.dead_letters(cases.len(), WAIT).await;
    assert_eq!(
        dead.len(),
        cases.len(),
        "every poison message is dead-lettered"
    );
    let mut reasons: Vec<String> = dead
        .iter()
        .filter_map(|m| header(m, "x-failure-reason"))
        .collect();
    reasons.sort();
    let mut expected: Vec<String> = cases.iter().map(|(r, ..)| (*r).to_owned()).collect();
    expected.sort();
    assert_eq!(reasons, expected);
    for message in &dead {
        assert_eq!(
            header(message, "x-retry-count").as_deref(),
            Some("0"),
            "never retried"
        );
        assert_eq!(
            header(message, "x-consumer").as_deref(),
            Some("run_requeue")
        );
        assert_eq!(
            header(message, "x-original-routing-key").as_deref(),
            Some("job.requeue")
        );
        assert!(header(message, "x-last-error").is_some_and(|e| !e.is_empty()));
    }
    let validation = dead
        .iter()
        .find(|m| header(m, "x-last-error").is_some_and(|e| e.contains("/amount")))
        .expect("the schema error names the field");
    assert!(header(validation, "x-last-error").is_some_and(|e| e.contains("1001")));
    // The valid message body published with the wrong content type never reached a handler
    // either; nothing did.
    assert!(h.recorder.attempts("fine").is_empty());
    assert!(h.recorder.attempts("bounds").is_empty());
    assert_eq!(h.ready("requeue").await, 0, "nothing was requeued");
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_retryable_is_dead_lettered_at_once_under_every_mode() {
    let h = Harness::start("fatal").await;
    let targets = [
        "none",
        "requeue",
        "requeue-classic",
        "backoff",
        "native",
        "drop",
        "forever",
    ];
    for target in targets {
        h.submit(target, job(&format!("fatal-{target}"), JobBehaviour::Fatal))
            .await;
    }
    let dead = h.dead_letters(targets.len(), WAIT).await;
    assert_eq!(dead.len(), targets.len());
    for message in &dead {
        assert_eq!(
            header(message, "x-failure-reason").as_deref(),
            Some("non-retryable")
        );
        assert!(header(message, "x-last-error").is_some_and(|e| e.contains("can never succeed")));
    }
    for target in targets {
        let attempts = h.recorder.attempts(&format!("fatal-{target}"));
        let handled = attempts
            .iter()
            .filter(|a| a.consumer != "RunSibling")
            .count();
        assert_eq!(handled, 1, "{target}: one attempt");
    }
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_none_dead_letters_a_retryable_failure_after_one_attempt() {
    let h = Harness::start("none").await;
    h.submit("none", job("once", JobBehaviour::Retryable)).await;
    let dead = h.dead_letters(1, WAIT).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(
        header(&dead[0], "x-failure-reason").as_deref(),
        Some("exhausted")
    );
    assert_eq!(header(&dead[0], "x-retry-count").as_deref(), Some("0"));
    assert_eq!(h.recorder.attempts("once").len(), 1);
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_requeue_makes_exactly_max_retries_plus_one_attempts() {
    let h = Harness::start("requeue").await;
    h.submit("requeue", job("quorum", JobBehaviour::Retryable))
        .await;
    h.submit("requeue-classic", job("classic", JobBehaviour::Retryable))
        .await;
    let dead = h.dead_letters(2, WAIT).await;
    assert_eq!(dead.len(), 2);
    let quorum = h.recorder.attempts("quorum");
    let counts: Vec<u32> = quorum.iter().map(|a| a.retry_count).collect();
    assert_eq!(
        counts,
        [0, 1, 2, 3],
        "quorum: max_retries 3, counted by x-delivery-count"
    );
    let classic = h.recorder.attempts("classic");
    let counts: Vec<u32> = classic
        .iter()
        .filter(|a| a.consumer == "RunRequeueClassic")
        .map(|a| a.retry_count)
        .collect();
    assert_eq!(
        counts,
        [0, 1, 2],
        "classic: max_retries 2, counted by x-retry-count"
    );
    for message in &dead {
        assert_eq!(
            header(message, "x-failure-reason").as_deref(),
            Some("exhausted")
        );
    }
    let classic_dead = dead
        .iter()
        .find(|m| header(m, "x-consumer").as_deref() == Some("run_requeue_classic"))
        .expect("the classic dead letter");
    assert_eq!(header(classic_dead, "x-retry-count").as_deref(), Some("2"));
    assert!(
        header(classic_dead, "x-last-error").is_some_and(|e| e.contains("attempt 2 of classic"))
    );
    // The sibling bound to the same key got the message once, not once per retry.
    h.recorder
        .wait_attempts("classic", 99, Duration::from_millis(300))
        .await;
    let sibling: Vec<_> = h
        .recorder
        .attempts("classic")
        .into_iter()
        .filter(|a| a.consumer == "RunSibling")
        .collect();
    assert_eq!(sibling.len(), 1, "no duplicate for the sibling queue");
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_backoff_waits_longer_each_time_and_dead_letters_with_the_final_error() {
    let h = Harness::start("backoff").await;
    h.submit("backoff", job("slowly", JobBehaviour::Retryable))
        .await;
    // The worker's health counts the consumer's retries: the three the queue allows.
    let retried = h.worker().wait_until_retried("run_backoff", 3, WAIT).await;
    assert_eq!(retried, 3);
    let dead = h.dead_letters(1, WAIT).await;
    assert_eq!(dead.len(), 1);
    let attempts: Vec<_> = h
        .recorder
        .attempts("slowly")
        .into_iter()
        .filter(|a| a.consumer == "RunBackoff")
        .collect();
    let counts: Vec<u32> = attempts.iter().map(|a| a.retry_count).collect();
    assert_eq!(counts, [0, 1, 2, 3]);
    // Delays 200ms, 400ms, 800ms (no jitter on this queue), measured between attempts.
    for (i, expected) in [200u64, 400, 800].into_iter().enumerate() {
        let waited = attempts[i + 1].at - attempts[i].at;
        let expected = Duration::from_millis(expected);
        assert!(
            waited >= expected.mul_f64(0.9) && waited <= expected + Duration::from_millis(700),
            "retry {i}: waited {waited:?}, configured {expected:?}"
        );
    }
    let message = &dead[0];
    assert_eq!(
        header(message, "x-failure-reason").as_deref(),
        Some("exhausted")
    );
    assert_eq!(header(message, "x-retry-count").as_deref(), Some("3"));
    assert!(
        header(message, "x-last-error").is_some_and(|e| e.contains("attempt 3 of slowly")),
        "the final attempt's error"
    );
    assert_eq!(header(message, "x-original-exchange"), Some(h.name("jobs")));
    assert_eq!(
        header(message, "x-original-routing-key").as_deref(),
        Some("job.backoff")
    );
    assert!(header(message, "x-first-failure-timestamp").is_some_and(|t| t.parse::<i64>().is_ok()));
    // The dead letter keeps the routing key the DLX bindings expect: the original one.
    assert_eq!(message.routing_key.as_str(), "job.backoff");
    // The sibling saw the message once.
    let sibling = h
        .recorder
        .attempts("slowly")
        .iter()
        .filter(|a| a.consumer == "RunSibling")
        .count();
    assert_eq!(sibling, 1);
    h.stop().await.expect("clean shutdown");
}

/// quorum-native: the broker counts deliveries; on the last one its `x-delivery-limit` allows,
/// the worker dead-letters the message itself, with the same context the other modes give
/// (the broker alone would add only its `x-death`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_native_dead_letters_the_last_delivery_with_its_context() {
    let h = Harness::start("native").await;
    h.submit("native", job("limited", JobBehaviour::Retryable))
        .await;
    let dead = h.dead_letters(1, WAIT).await;
    assert_eq!(dead.len(), 1);
    // delivery_limit 2: deliveries 0, 1, 2; the worker dead-letters the last.
    let counts: Vec<u32> = h
        .recorder
        .attempts("limited")
        .iter()
        .map(|a| a.retry_count)
        .collect();
    assert_eq!(counts, [0, 1, 2]);
    let message = &dead[0];
    assert_eq!(
        header(message, "x-failure-reason").as_deref(),
        Some("exhausted")
    );
    assert_eq!(
        header(message, "x-last-error").as_deref(),
        Some("attempt 2 of limited failed")
    );
    assert_eq!(header(message, "x-retry-count").as_deref(), Some("2"));
    assert_eq!(header(message, "x-failed-queue"), Some(h.name("native")));
    assert_eq!(header(message, "x-consumer").as_deref(), Some("run_native"));
    assert!(header(message, "x-last-failure-timestamp").is_some());
    assert_eq!(
        header(message, "x-death"),
        None,
        "dead-lettered by the worker, not by the broker's limit"
    );
    assert_eq!(h.ready("native").await, 0, "settled once, not also kept");
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_drop_and_exhausted_requeue() {
    let h = Harness::start("exhausted").await;
    h.submit("drop", job("dropped", JobBehaviour::Retryable))
        .await;
    let mut forever = job("forever", JobBehaviour::Retryable);
    forever.succeed_on_attempt = Some(4);
    h.submit("forever", forever).await;
    let dropped = h
        .recorder
        .wait_attempts("dropped", 3, Duration::from_secs(2))
        .await;
    assert_eq!(
        dropped.len(),
        2,
        "max_retries 1: two attempts, then dropped"
    );
    let requeued = h.recorder.wait_attempts("forever", 5, WAIT).await;
    assert_eq!(
        requeued.len(),
        5,
        "requeued past max_retries 1 until it succeeded"
    );
    assert!(
        h.dead_letters(1, Duration::from_millis(500))
            .await
            .is_empty(),
        "nothing dead-lettered"
    );
    assert_eq!(h.ready("drop").await + h.ready("forever").await, 0);
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_a_retryable_failure() {
    let h = Harness::start("panic").await;
    h.submit("requeue-classic", job("boom", JobBehaviour::Panic))
        .await;
    let dead = h.dead_letters(1, WAIT).await;
    assert_eq!(dead.len(), 1);
    assert!(
        header(&dead[0], "x-last-error").is_some_and(|e| e.contains("handler panicked on purpose"))
    );
    assert_eq!(
        h.recorder
            .attempts("boom")
            .iter()
            .filter(|a| a.consumer == "RunRequeueClassic")
            .count(),
        3
    );
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_can_go_through_a_connection_of_their_own() {
    let copies =
        warren_runtime::Connection::connect(&warren_broker_tests::amqp_url(), "warren-test-copies")
            .await
            .expect("a second connection");
    let h = Harness::start_with("copies", {
        let copies = copies.clone();
        move |worker| worker.copies_connection(copies)
    })
    .await;
    let mut flaky = job("flaky", JobBehaviour::Retryable);
    flaky.succeed_on_attempt = Some(1);
    h.submit("backoff", flaky).await;
    // The sibling queue sees the job too: three attempts in all.
    let attempts = h.recorder.wait_attempts("flaky", 3, WAIT).await;
    let counts: Vec<u32> = attempts
        .iter()
        .filter(|a| a.consumer == "RunBackoff")
        .map(|a| a.retry_count)
        .collect();
    assert_eq!(counts, [0, 1], "retried once through the copies connection");
    h.stop().await.expect("clean shutdown");
    copies.close().await.expect("closed");
}

/// `job` as a hostile producer sends it: through the contract's exchange, with `headers` it
/// has no business setting.
async fn publish_forged(h: &Harness, routing_key: &str, job: &types::Job, headers: &[(&str, i64)]) {
    let mut table = FieldTable::default();
    for (key, value) in headers {
        table.insert(ShortString::from(*key), AMQPValue::LongLongInt(*value));
    }
    let body = serde_json::to_vec(job).expect("json");
    h.publish_raw(routing_key, &body, json_properties().with_headers(table))
        .await;
}

fn counts(h: &Harness, id: &str, consumer: &str) -> Vec<u32> {
    h.recorder
        .attempts(id)
        .iter()
        .filter(|a| a.consumer == consumer)
        .map(|a| a.retry_count)
        .collect()
}

/// A producer's `x-retry-count: 3` on a first delivery skipped every retry of a `ttl-backoff`
/// queue, and `x-delivery-count: 3` did the same on a quorum queue (RabbitMQ 3.10 keeps the
/// producer's value on a first delivery): counts are believed only where warren or the broker
/// set them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_retry_counts_do_not_spend_the_retries() {
    let h = Harness::start("forged").await;
    let backoff = job("forged-backoff", JobBehaviour::Retryable);
    publish_forged(&h, "job.backoff", &backoff, &[("x-retry-count", 3)]).await;
    let requeue = job("forged-requeue", JobBehaviour::Retryable);
    publish_forged(&h, "job.requeue", &requeue, &[("x-delivery-count", 3)]).await;
    let native = job("forged-native", JobBehaviour::Retryable);
    publish_forged(&h, "job.native", &native, &[("x-delivery-count", 3)]).await;
    let dead = h.dead_letters(3, WAIT).await;
    assert_eq!(
        dead.len(),
        3,
        "each dead-lettered once its retries were spent"
    );
    assert_eq!(
        counts(&h, "forged-backoff", "RunBackoff"),
        [0, 1, 2, 3],
        "ttl-backoff: every retry"
    );
    assert_eq!(
        counts(&h, "forged-requeue", "RunRequeue"),
        [0, 1, 2, 3],
        "quorum immediate-requeue: every retry"
    );
    assert_eq!(
        counts(&h, "forged-native", "RunNative"),
        [0, 1, 2],
        "quorum-native: the handler is told the broker's count"
    );
    let backoff_dead = dead
        .iter()
        .find(|m| header(m, "x-consumer").as_deref() == Some("run_backoff"))
        .expect("the ttl-backoff dead letter");
    assert_eq!(header(backoff_dead, "x-retry-count").as_deref(), Some("3"));
    h.stop().await.expect("clean shutdown");
}

/// `x-retry-count: 4294967295` overflowed `retries + 1` where retries go on past the budget
/// (`ttl-backoff` with `exhausted: requeue`): a panic in a debug build that left the delivery
/// unsettled, and ten of them stalled the consumer. Sent by a producer the count is not
/// believed; sent as warren's own copies are (through the default exchange, to the queue), it
/// is believed and saturates. Either way each message is retried, and the consumer goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_count_of_u32_max_is_settled_and_the_consumer_goes_on() {
    let h = Harness::start("overflow").await;
    let queue = h.name("backoff-forever");
    let ids: Vec<String> = (0..10).map(|i| format!("max-{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let mut flaky = job(id, JobBehaviour::Retryable);
        flaky.succeed_on_attempt = Some(1);
        if i % 2 == 0 {
            let forged = [("x-retry-count", i64::from(u32::MAX))];
            publish_forged(&h, "job.backoff-forever", &flaky, &forged).await;
        } else {
            let mut table = FieldTable::default();
            table.insert(
                ShortString::from("x-retry-count"),
                AMQPValue::LongLongInt(i64::from(u32::MAX)),
            );
            let body = serde_json::to_vec(&flaky).expect("json");
            h.publish_raw_to("", &queue, &body, json_properties().with_headers(table))
                .await;
        }
    }
    h.submit("backoff-forever", job("after", JobBehaviour::Ok))
        .await;
    h.recorder
        .wait(WAIT, || {
            ids.iter().all(|id| h.recorder.attempts(id).len() >= 2)
                && !h.recorder.attempts("after").is_empty()
        })
        .await;
    for (i, id) in ids.iter().enumerate() {
        let expected: &[u32] = if i % 2 == 0 {
            &[0, 1]
        } else {
            &[u32::MAX, u32::MAX]
        };
        assert_eq!(counts(&h, id, "RunBackoffForever"), expected, "{id}");
    }
    assert_eq!(
        h.recorder.attempts("after").len(),
        1,
        "the consumer went on"
    );
    assert_eq!(
        h.ready("backoff-forever").await,
        0,
        "nothing left unsettled"
    );
    assert!(
        h.dead_letters(1, Duration::from_millis(300))
            .await
            .is_empty()
    );
    h.stop().await.expect("clean shutdown");
}

/// A topology whose wait tiers were edited by hand (here one tier's delay) is refused when
/// the worker starts, naming the queue, before it consumes anything: not one message at a
/// time, as each retry failed to find its wait queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edited_wait_tier_is_refused_at_start() {
    use warren_broker_tests::{Recorder, handlers, topology};
    use warren_runtime::model::{Retry, TopologyError};
    use warren_runtime::{Connection, Worker, WorkerError};

    let connection = Connection::connect(&warren_broker_tests::amqp_url(), "warren-test-tiers")
        .await
        .expect("the test broker answers at AMQP_URL");
    let namespace = format!("test.tiers.{}.", uuid::Uuid::now_v7().simple());
    let declared = topology().namespaced(&namespace);
    warren_runtime::declare(&connection, &declared)
        .await
        .expect("the topology declares");
    // One message waits in the queue whose tiers are then edited.
    let backoff = declared.qualified("backoff");
    let channel = connection.create_channel().await.expect("a channel");
    // Confirmed, so the message is in the (quorum) queue before the worker starts.
    channel
        .confirm_select(lapin::options::ConfirmSelectOptions::default())
        .await
        .expect("confirm mode");
    let body = serde_json::to_vec(&job("waiting", JobBehaviour::Ok)).expect("json");
    channel
        .basic_publish(
            ShortString::from(""),
            ShortString::from(backoff.as_str()),
            lapin::options::BasicPublishOptions::default(),
            &body,
            json_properties(),
        )
        .await
        .expect("published")
        .await
        .expect("confirmed");

    let mut edited = declared.clone();
    let queue = edited
        .queues
        .iter_mut()
        .find(|q| q.name == backoff)
        .expect("the backoff queue");
    let Retry::TtlBackoff(policy) = &mut queue.retry else {
        panic!("`backoff` is a ttl-backoff queue");
    };
    policy.tiers[0].delay += Duration::from_millis(1);

    let recorder = Recorder::default();
    let handlers = handlers(&recorder);
    let outcome = tokio::time::timeout(WAIT, handlers.run(Worker::new(connection.clone(), edited)))
        .await
        .expect("refused at once, not left running");
    match outcome {
        Err(WorkerError::Topology(TopologyError::WaitTiers { queue })) => {
            assert_eq!(queue, backoff);
        }
        other => panic!("expected the wait tiers refused, got {other:?}"),
    }
    // Nothing was consumed: the message still waits.
    let left = channel
        .basic_get(
            ShortString::from(backoff.as_str()),
            lapin::options::BasicGetOptions { no_ack: true },
        )
        .await
        .expect("basic.get");
    assert!(left.is_some(), "the message was left in its queue");
    warren_runtime::delete(&connection, &declared)
        .await
        .expect("the topology deletes");
}

/// A hand-built topology with a dead-letter exchange in its raw arguments is refused by
/// `declare` (the worker would think the queue has none); normalized, the raw argument is the
/// typed field and it declares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_dead_letter_argument_is_refused_by_declare() {
    use warren_runtime::model::{ArgValue, Queue, QueueKind, TopologyError};
    use warren_runtime::{Connection, DeclareError, Topology};

    let connection = Connection::connect(&warren_broker_tests::amqp_url(), "warren-test-raw")
        .await
        .expect("the test broker answers at AMQP_URL");
    let namespace = format!("test.raw.{}.", uuid::Uuid::now_v7().simple());
    let mut queue = Queue::new("work", QueueKind::Quorum);
    queue.arguments.insert(
        "x-dead-letter-exchange".into(),
        ArgValue::String(String::new()),
    );
    let raw = Topology::new(Vec::new(), vec![queue.clone()], Vec::new()).namespaced(&namespace);
    match warren_runtime::declare(&connection, &raw).await {
        Err(DeclareError::Topology(TopologyError::ReservedArgument { owner, key })) => {
            assert_eq!(owner, format!("{namespace}work"));
            assert_eq!(key, "x-dead-letter-exchange");
        }
        other => panic!("expected the raw argument refused, got {other:?}"),
    }
    let normalized =
        Topology::new(Vec::new(), vec![queue.normalized()], Vec::new()).namespaced(&namespace);
    assert!(normalized.queues[0].dead_letter.is_some());
    warren_runtime::declare(&connection, &normalized)
        .await
        .expect("the normalized topology declares");
    warren_runtime::delete(&connection, &normalized)
        .await
        .expect("the topology deletes");
}

/// On a cluster a wait queue whose leader changed may stop dead-lettering: its retries never
/// come back, and nothing failed (issue 15 measured 2 to 336 held). A worker now checks its
/// wait queues: a retry held past its delay and a grace as long again is reported in its
/// health and metrics. Here a wait queue of 5 minutes holds a retry made 11 minutes ago (as
/// a stalled wait queue would), and one made now: the first is reported, the second not, and
/// the check takes nothing away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_held_in_a_wait_queue_past_their_time_are_reported() {
    use std::time::SystemTime;
    use warren_broker_tests::{Recorder, consumers, raw_headers};
    use warren_runtime::model::{Backoff, Exhausted, QueueRole, Retry, headers};

    const DELAY: Duration = Duration::from_secs(300);
    let mut topology = warren_broker_tests::topology();
    topology
        .queues
        .retain(|q| !matches!(&q.role, QueueRole::Wait { queue, .. } if queue == "backoff"));
    let backoff = topology
        .queues
        .iter_mut()
        .find(|q| q.name == "backoff")
        .expect("the contract's backoff queue");
    backoff.retry = Retry::TtlBackoff(Backoff::new(
        "backoff",
        1,
        DELAY,
        DELAY,
        2.0,
        false,
        Exhausted::DeadLetter,
    ));
    let waits = backoff.wait_queues();
    topology.queues.extend(waits);
    let broker = warren_testkit::TestBroker::from_env().await;
    let deployed = broker.deploy("wait-watch", &topology).await;
    let mut worker = deployed
        .worker()
        .wait_queue_check(Some(Duration::from_millis(100)));
    consumers::register::run_backoff(&mut worker, Recorder::default());
    let health = worker.health_handle();
    let mut running = deployed.start(worker);

    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64;
    let wait = deployed.name("backoff.wait.5m");
    for (id, made) in [("held", now - 11 * 60_000), ("fresh", now)] {
        let mut table = raw_headers();
        table.insert(
            ShortString::from(headers::LAST_FAILURE),
            AMQPValue::LongLongInt(made),
        );
        table.insert(
            ShortString::from(headers::RETRY_COUNT),
            AMQPValue::LongLongInt(1),
        );
        let body = serde_json::to_vec(&job(id, JobBehaviour::Ok)).expect("json");
        deployed
            .publish_raw("", &wait, &body, json_properties().with_headers(table))
            .await;
    }
    let overdue = || {
        health
            .snapshot()
            .consumers
            .into_iter()
            .find(|c| c.name == "run_backoff")
            .map(|c| c.overdue_retries)
            .unwrap_or_default()
    };
    let seen =
        warren_testkit::try_wait_until(Duration::from_secs(30), || !overdue().is_empty()).await;
    let found = overdue();
    assert!(seen, "the held retry is reported: {:?}", health.snapshot());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].wait_queue, wait);
    assert_eq!(found[0].messages, 2);
    // 11 minutes waited, 10 allowed (the delay, and a grace as long): a minute over, and
    // however long the check took to come.
    assert!(
        (59_000..=150_000).contains(&found[0].overdue_ms),
        "{:?}",
        found[0]
    );
    // Looking took nothing: both retries are still waiting. (While the worker runs, the one
    // it is looking at is briefly not ready: counted once it has stopped.)
    running.stop().await.expect("the worker stops");
    deployed
        .wait_until_ready("backoff.wait.5m", 2, Duration::from_secs(10))
        .await;
    deployed.cleanup().await;
}

/// A handler's `retry_after` (what an HTTP 429's `Retry-After` says): on ttl-backoff the retry
/// waits in the shortest wait tier at least that long, else in the longest, and counts as a
/// retry like any other. On `short-long` (tiers of 200 ms and 3 s), asking for 1 s waits in the
/// 3 s tier, not the first retry's 200 ms, and asking for a minute waits the longest, 3 s. On
/// an immediate-requeue queue, which has nowhere to wait, the retry comes back at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_waits_in_the_shortest_tier_at_least_that_long() {
    let harness = Harness::start("retry-after").await;
    let longest = harness.wait_queue("short-long", Duration::from_secs(3));
    let asking = |id: &str, ms| types::Job {
        retry_after_ms: Some(ms),
        succeed_on_attempt: Some(1),
        ..job(id, JobBehaviour::Retryable)
    };
    let mut waited = Vec::new();
    for (id, ms) in [("after-1s", 1000), ("after-a-minute", 60_000)] {
        harness.submit("short-long", asking(id, ms)).await;
        // Its retry waits in the 3 s tier: seen there while it waits.
        harness
            .deployed
            .wait_until_ready(&longest, 1, Duration::from_secs(30))
            .await;
        let attempts = harness
            .recorder
            .wait_attempts(id, 2, Duration::from_secs(30))
            .await;
        assert_eq!(attempts.len(), 2, "{id}: handled on its retry");
        assert_eq!(attempts[1].retry_count, 1, "{id}: a retry like any other");
        let delay = attempts[1].at - attempts[0].at;
        // The copy is enqueued after the first attempt started, and a TTL never expires early.
        assert!(
            delay >= Duration::from_millis(2950),
            "{id} waited {delay:?}: at least its tier's 3 s"
        );
        waited.push((id, delay));
    }

    harness.submit("requeue", asking("requeued", 60_000)).await;
    let attempts = harness
        .recorder
        .wait_attempts("requeued", 2, Duration::from_secs(30))
        .await;
    assert_eq!(attempts.len(), 2, "retried at once: the queue cannot wait");
    let requeued = attempts[1].at - attempts[0].at;
    println!(
        "retry_after: waited (id, from the first attempt to the retry) {waited:?}; on immediate-requeue \
         the retry came {requeued:?} after"
    );
    harness.stop().await.expect("the worker stops cleanly");
}
