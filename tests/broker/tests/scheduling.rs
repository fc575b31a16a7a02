//! Timing and flow: jitter, tiers that do not block each other, prefetch and concurrency,
//! batches, and draining on shutdown.

use std::time::{Duration, Instant};

use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, job};

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jitter_spreads_a_cohort_that_failed_together() {
    let h = Harness::start("jitter").await;
    let ids: Vec<String> = (0..20).map(|i| format!("cohort-{i}")).collect();
    for id in &ids {
        let mut cohort = job(id, JobBehaviour::Retryable);
        cohort.succeed_on_attempt = Some(1);
        h.submit("jitter", cohort).await;
    }
    let mut waits = Vec::new();
    for id in &ids {
        let attempts = h.recorder.wait_attempts(id, 2, WAIT).await;
        assert_eq!(attempts.len(), 2, "{id} retried once");
        waits.push(attempts[1].at - attempts[0].at);
    }
    let shortest = waits.iter().min().copied().unwrap_or_default();
    let longest = waits.iter().max().copied().unwrap_or_default();
    // A 1 s delay with jitter: each retry between 0.5 s and 1 s (plus broker latency), and
    // the cohort does not come back at once.
    assert!(
        shortest >= Duration::from_millis(450),
        "shortest wait {shortest:?}"
    );
    assert!(
        longest <= Duration::from_millis(1700),
        "longest wait {longest:?}"
    );
    assert!(
        longest - shortest >= Duration::from_millis(150),
        "spread {:?}",
        longest - shortest
    );
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_retry_is_not_blocked_behind_a_long_one() {
    let h = Harness::start("tiers").await;
    // `long` fails twice: its second retry waits 3 s. `short` fails once, after `long` is
    // parked, and must come back after its own 200 ms.
    let mut long = job("long", JobBehaviour::Retryable);
    long.succeed_on_attempt = Some(2);
    h.submit("short-long", long).await;
    h.recorder.wait_attempts("long", 2, WAIT).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut short = job("short", JobBehaviour::Retryable);
    short.succeed_on_attempt = Some(1);
    h.submit("short-long", short).await;
    let attempts = h.recorder.wait_attempts("short", 2, WAIT).await;
    assert_eq!(attempts.len(), 2);
    let waited = attempts[1].at - attempts[0].at;
    assert!(
        waited < Duration::from_millis(1200),
        "short retry waited {waited:?}"
    );
    let long = h.recorder.wait_attempts("long", 3, WAIT).await;
    assert_eq!(long.len(), 3);
    assert!(
        long[2].at > attempts[1].at,
        "the long retry came back later"
    );
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_and_concurrency_bound_the_work_in_flight() {
    // `bounded`: prefetch 4, concurrency 2.
    let h = Harness::start("bounds").await;
    for i in 0..20 {
        h.submit("bounded", job(&format!("held-{i}"), JobBehaviour::Hold))
            .await;
    }
    h.recorder
        .wait(WAIT, || h.recorder.in_flight().0 == 2)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.recorder.in_flight(), (2, 2), "two handlers at a time");
    assert_eq!(
        h.ready("bounded").await,
        16,
        "prefetch 4: sixteen still ready in the queue"
    );
    h.recorder.release(20);
    h.recorder
        .wait(WAIT, || {
            (0..20).all(|i| !h.recorder.attempts(&format!("held-{i}")).is_empty())
        })
        .await;
    let handled = (0..20)
        .filter(|i| !h.recorder.attempts(&format!("held-{i}")).is_empty())
        .count();
    assert_eq!(handled, 20);
    assert_eq!(h.recorder.in_flight().1, 2, "never more than two");
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_consumer_gets_batches_and_retries_them_together() {
    let h = Harness::start("batch").await;
    for i in 0..10 {
        h.submit("batch", job(&format!("b{i}"), JobBehaviour::Ok))
            .await;
    }
    h.recorder
        .wait(WAIT, || {
            h.recorder.batches().iter().map(Vec::len).sum::<usize>() == 10
        })
        .await;
    let sizes: Vec<usize> = h.recorder.batches().iter().map(Vec::len).collect();
    assert!(
        sizes.iter().all(|&n| n <= 4),
        "batches of at most 4: {sizes:?}"
    );
    assert_eq!(sizes.iter().sum::<usize>(), 10);
    // A failing batch is retried whole, once (max_retries 1), then succeeds.
    let mut failing = job("bad", JobBehaviour::Retryable);
    failing.succeed_on_attempt = Some(1);
    h.submit("batch", failing).await;
    let attempts = h.recorder.wait_attempts("bad", 2, WAIT).await;
    let counts: Vec<u32> = attempts.iter().map(|a| a.retry_count).collect();
    assert_eq!(counts, [0, 1]);
    assert!(
        h.dead_letters(1, Duration::from_millis(500))
            .await
            .is_empty()
    );
    h.stop().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_in_flight_handlers() {
    let mut h = Harness::start("drain").await;
    h.submit("none", job("in-flight", JobBehaviour::Slow)).await;
    h.recorder.wait_attempts("in-flight", 1, WAIT).await;
    let started = Instant::now();
    h.shutdown_worker().await.expect("clean shutdown");
    // The 600 ms handler finished before the worker stopped, and its message was acked:
    // nothing is back in the queue.
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "shutdown waited for the handler"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.ready("none").await, 0);
    assert_eq!(h.recorder.attempts("in-flight").len(), 1);
    h.stop().await.expect("cleaned up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_slower_than_the_drain_timeout_is_redelivered_not_lost() {
    let mut h = Harness::start_with("drain-timeout", |w| {
        w.with_drain_timeout(Duration::from_millis(100))
    })
    .await;
    h.submit("none", job("too-slow", JobBehaviour::Slow)).await;
    h.recorder.wait_attempts("too-slow", 1, WAIT).await;
    // Stop the worker but keep the queues: the message must be back in its queue.
    h.shutdown_worker().await.expect("clean shutdown");
    let mut ready = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while ready == 0 && Instant::now() < deadline {
        ready = h.ready("none").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ready, 1, "the unacknowledged message returned to its queue");
    h.stop().await.expect("cleaned up");
}
