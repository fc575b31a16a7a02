//! The health of a worker and its connection, as an orchestrator's probes would read it:
//! before the worker runs, while it runs, through a broker killed and restarted (on a private
//! node), after a consumer's queue is deleted, and after shutdown.

use std::time::Duration;

use warren_broker_tests::{Harness, PrivateBroker, consumers, job, types::JobBehaviour};
use warren_runtime::HealthHandle;
use warren_runtime::health::{WorkerHealth, WorkerPhase};
use warren_runtime::lapin::options::QueueDeleteOptions;
use warren_runtime::lapin::types::ShortString;

/// The broker node of this test binary alone.
const PORT: u16 = 5817;

/// Waits until `health`'s snapshot satisfies `done`, and returns it.
async fn until(
    what: &str,
    health: &HealthHandle,
    done: impl Fn(&WorkerHealth) -> bool,
) -> WorkerHealth {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let snapshot = health.snapshot();
        if done(&snapshot) {
            return snapshot;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still not {what}: {snapshot:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_is_ready_once_subscribed_and_again_after_the_broker_restarts() {
    let broker = tokio::task::spawn_blocking(|| PrivateBroker::start(PORT))
        .await
        .expect("the broker starts");
    let mut handle = None;
    // Consumers of classic queues: a quorum queue's `basic.consume` can go unanswered for good
    // after a `kill -9` of a RabbitMQ 3.10 node (which the health view then shows: that
    // consumer is never subscribed again).
    let h = Harness::start_registering_at(&broker.url(), "health", |recorder, worker| {
        consumers::register::run_none(worker, recorder.clone());
        // A dead-letter consumer, among the others: every kind is listed and watched (one
        // added unwatched once shifted the health of those after it, and the last consumer
        // was never started).
        consumers::register::read_dead(worker, recorder.clone());
        consumers::register::run_requeue_classic(worker, recorder.clone());
        consumers::register::run_outage(worker, recorder.clone());
        let before = worker.health();
        assert!(!before.ready, "not ready before it runs");
        assert!(before.live, "alive while starting");
        assert_eq!(before.phase, WorkerPhase::NotStarted);
        assert!(before.connection.connected);
        assert_eq!(before.consumers.len(), 4, "listed, not subscribed yet");
        assert!(before.consumers.iter().all(|c| !c.subscribed));
        handle = Some(worker.health_handle());
    })
    .await;
    let health = handle.expect("the worker was configured");

    let running = until("ready", &health, |s| s.ready).await;
    assert!(running.live);
    assert_eq!(running.phase, WorkerPhase::Running);
    let names: Vec<_> = running.consumers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["run_none", "read_dead", "run_requeue_classic", "run_outage"]
    );
    assert!(running.consumers.iter().all(|c| c.subscribed));
    let read_dead = running.consumers.iter().find(|c| c.name == "read_dead");
    assert_eq!(
        read_dead.map(|c| c.queue.clone()),
        Some(h.name("dead-read"))
    );
    let run_none = running
        .consumers
        .iter()
        .find(|c| c.name == "run_none")
        .expect("listed");
    assert_eq!(run_none.queue, h.name("none"));
    assert_eq!(run_none.breaker, None, "no breaker");
    let run_outage = running.consumers.iter().find(|c| c.name == "run_outage");
    assert_eq!(
        run_outage.and_then(|c| c.breaker),
        Some(warren_runtime::health::BreakerState::Closed)
    );
    // What a service serves its orchestrator.
    let json = serde_json::to_value(&running).expect("serializes");
    assert_eq!(json["ready"], true);
    assert_eq!(json["phase"], "running");
    assert_eq!(json["consumers"][0]["subscribed"], true);

    // The broker dies: not ready (still alive: it reconnects by itself).
    tokio::task::block_in_place(|| broker.kill());
    // The lapin connection reads as down as soon as its socket fails; the supervisor records
    // why a moment later (under load, seconds): the state waited for is both.
    let down = until("unready, saying why the link was lost", &health, |s| {
        !s.ready && !s.connection.connected && s.connection.last_error.is_some()
    })
    .await;
    assert!(down.live, "a worker reconnecting is alive");
    assert_eq!(down.connection.url, None, "on no node while down");
    let lost = until("unsubscribed", &health, |s| {
        s.consumers.iter().all(|c| !c.subscribed)
    })
    .await;
    assert!(lost.consumers.iter().all(|c| c.last_error.is_some()));

    // Back: ready again, and a message goes through.
    tokio::task::block_in_place(|| broker.up());
    let back = until("ready again", &health, |s| s.ready).await;
    assert!(back.connection.connected);
    assert!(back.connection.reconnects >= 1, "{:#?}", back.connection);
    assert_eq!(back.connection.reconnect_attempts, 0, "connected");
    assert_eq!(
        back.connection.url.as_deref(),
        Some(broker.url().replace("guest:guest", "guest:***").as_str()),
        "the node it is on, its password hidden"
    );
    assert_eq!(h.connection.health(), back.connection);
    h.submit("none", job("after", JobBehaviour::Ok)).await;
    let attempts = h
        .recorder
        .wait_attempts("after", 1, Duration::from_secs(10))
        .await;
    assert_eq!(attempts.len(), 1);

    // Shut down: neither ready nor alive.
    h.stop().await.expect("the worker stops cleanly");
    let stopped = health.snapshot();
    assert_eq!(stopped.phase, WorkerPhase::Stopped);
    assert!(!stopped.ready && !stopped.live);
    assert!(stopped.last_error.is_none(), "a clean stop: {stopped:#?}");
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_whose_queue_is_deleted_is_not_subscribed_and_the_worker_fails() {
    let mut handle = None;
    let h = Harness::start_registering("health-gone", |recorder, worker| {
        consumers::register::run_none(worker, recorder.clone());
        handle = Some(worker.health_handle());
    })
    .await;
    let health = handle.expect("registered");
    until("ready", &health, |s| s.ready).await;

    let channel = h.connection.create_channel().await.expect("a channel");
    channel
        .queue_delete(
            ShortString::from(h.name("none")),
            QueueDeleteOptions::default(),
        )
        .await
        .expect("deleted");
    let failed = until("failed", &health, |s| s.phase == WorkerPhase::Failed).await;
    assert!(!failed.ready && !failed.live, "{failed:#?}");
    let consumer = &failed.consumers[0];
    assert_eq!(consumer.name, "run_none");
    assert!(!consumer.subscribed);
    let why = consumer
        .last_error
        .as_ref()
        .expect("why it is not subscribed");
    assert!(why.message.contains("queue is gone"), "{why:?}");
    let worker_error = failed.last_error.as_ref().expect("why the worker failed");
    assert!(
        worker_error.message.contains(&h.name("none")),
        "{worker_error:?}"
    );
    assert!(
        failed.connection.connected,
        "the connection is fine: only the consumer is"
    );
    assert!(h.stop().await.is_err(), "the worker reports the lost queue");
}
