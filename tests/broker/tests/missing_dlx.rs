//! The dead-letter exchange deleted while the worker runs, and missing (with the wait
//! queues) when it starts.

use std::time::Duration;

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::types::ShortString;
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{
    Harness, Publishers, Recorder, handlers, header, headers, job, topology,
};
use warren_runtime::WorkerError;
use warren_runtime::model::QueueRole;
use warren_testkit::TestBroker;

/// A non-retryable failure whose dead letter cannot be published: the outcome is known, so
/// the handler runs once and only the copy is tried again, until the exchange is back. It
/// used to re-run the handler every second for as long as the exchange was missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_dead_letter_exchange_holds_the_message_without_rerunning_its_handler() {
    let harness = Harness::start("missing-dlx").await;
    // Running first: a worker that starts without its dead-letter exchange refuses to.
    harness
        .submit("none", job("warm-up", JobBehaviour::Ok))
        .await;
    harness
        .recorder
        .wait_attempts("warm-up", 1, Duration::from_secs(10))
        .await;
    let channel = harness
        .connection
        .create_channel()
        .await
        .expect("a channel");
    channel
        .exchange_delete(
            ShortString::from(harness.name("jobs.dlx")),
            ExchangeDeleteOptions::default(),
        )
        .await
        .expect("the dead-letter exchange is deleted");

    harness
        .submit("none", job("doomed", JobBehaviour::Fatal))
        .await;
    harness
        .recorder
        .wait_attempts("doomed", 1, Duration::from_secs(10))
        .await;
    // Long enough for several copy attempts (1 s, then about 2 s, ...).
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        harness.recorder.attempts("doomed").len(),
        1,
        "the handler ran once: its outcome is known"
    );
    assert!(
        harness
            .dead_letters(1, Duration::from_millis(200))
            .await
            .is_empty(),
        "nowhere to dead-letter yet"
    );

    // The exchange back: the held copy goes through on its next attempt.
    warren_runtime::declare(&harness.connection, &harness.topology)
        .await
        .expect("declared again");
    let dead = harness.dead_letters(1, Duration::from_secs(40)).await;
    assert_eq!(dead.len(), 1, "dead-lettered once the exchange is back");
    assert_eq!(
        header(&dead[0], "x-failure-reason").as_deref(),
        Some("non-retryable")
    );
    assert_eq!(harness.recorder.attempts("doomed").len(), 1);
    assert_eq!(harness.ready("none").await, 0, "nothing left behind");
    harness.stop().await.expect("the worker stops cleanly");
}

/// A worker whose queue was declared elsewhere (another stack, by hand) without warren's wait
/// queues and dead-letter exchange: it used to run, and hold every failed message, its retry
/// copy and dead letter routed nowhere. It refuses to start, naming each missing piece, and
/// consumes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_its_retry_topology_refuses_to_start_and_names_what_is_missing() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("no-retry-topology", &topology()).await;
    let channel = broker
        .connection()
        .create_channel()
        .await
        .expect("a channel");
    let waits: Vec<String> = deployed
        .topology()
        .queues
        .iter()
        .filter(|q| matches!(&q.role, QueueRole::Wait { queue, .. } if *queue == deployed.name("backoff")))
        .map(|q| q.name.clone())
        .collect();
    assert!(!waits.is_empty(), "`backoff` has wait queues");
    for wait in &waits {
        channel
            .queue_delete(
                ShortString::from(wait.as_str()),
                QueueDeleteOptions::default(),
            )
            .await
            .expect("a wait queue deleted");
    }
    let dlx = deployed.name("jobs.dlx");
    channel
        .exchange_delete(
            ShortString::from(dlx.as_str()),
            ExchangeDeleteOptions::default(),
        )
        .await
        .expect("the dead-letter exchange deleted");
    let publishers = Publishers::new(deployed.publisher().await);
    publishers
        .submit("backoff", &job("waiting", JobBehaviour::Ok), &headers())
        .await
        .expect("published");

    let recorder = Recorder::default();
    let mut worker = deployed.worker();
    handlers(&recorder).register(&mut worker);
    let refused = worker.run().await.expect_err("the worker refuses to start");
    let WorkerError::MissingRetryTopology { queues, missing } = &refused else {
        panic!("refused for another reason: {refused}");
    };
    assert!(queues.contains(&deployed.name("backoff")), "{queues:?}");
    for wait in &waits {
        assert!(
            missing.iter().any(|m| m.contains(wait.as_str())),
            "{wait} named in {missing:?}"
        );
    }
    assert!(
        missing.iter().any(|m| m.contains(dlx.as_str())),
        "{missing:?}"
    );
    assert!(recorder.attempts("waiting").is_empty(), "nothing consumed");
    assert_eq!(
        deployed.ready("backoff").await,
        1,
        "the message still waits"
    );
    // Once declared, the same worker starts.
    warren_runtime::declare(broker.connection(), deployed.topology())
        .await
        .expect("declared");
    deployed.cleanup().await;
}
