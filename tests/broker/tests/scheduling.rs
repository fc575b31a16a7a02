//! Timing and flow: jitter, tiers that do not block each other, prefetch and concurrency,
//! batches, and draining on shutdown.

use std::time::{Duration, Instant};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, consumers, header, job};

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
    // A 1 s delay with jitter: each retry waits at least 0.5 s (its queue has no wait tier
    // past 1 s, and how late a loaded broker brings one back says nothing of warren), and
    // the cohort does not come back at once.
    assert!(
        shortest >= Duration::from_millis(450),
        "shortest wait {shortest:?}"
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
    // `long`'s second retry parked in the 3 s wait queue before `short` fails.
    let parked = h.wait_queue("short-long", Duration::from_secs(3));
    h.deployed.wait_until_ready(&parked, 1, WAIT).await;
    let mut short = job("short", JobBehaviour::Retryable);
    short.succeed_on_attempt = Some(1);
    h.submit("short-long", short).await;
    let attempts = h.recorder.wait_attempts("short", 2, WAIT).await;
    assert_eq!(attempts.len(), 2);
    // Not blocked: back before `long`, which was parked first (an order, which a loaded
    // machine does not change, rather than a wall time, which it does).
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
    // Waited for: the broker has handed the consumer its prefetch of 4.
    h.deployed.wait_until_ready("bounded", 16, WAIT).await;
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

/// `concurrency` holds for handlers that never await. The consume loop used to poll each
/// delivery's work once in place and spawn it only if it waited, so busy handlers ran inline,
/// one at a time, whatever the concurrency.
#[tokio::test(flavor = "multi_thread", worker_threads = 5)]
async fn handlers_that_never_await_still_run_concurrency_at_a_time() {
    // `spin`: prefetch 8, concurrency 4; each handler is busy for 50 ms.
    let h = Harness::start("spin").await;
    let ids: Vec<String> = (0..16).map(|i| format!("spin-{i}")).collect();
    for id in &ids {
        h.submit("spin", job(id, JobBehaviour::Spin)).await;
    }
    h.recorder
        .wait(WAIT, || {
            h.recorder.in_flight().0 == 0
                && ids.iter().all(|id| !h.recorder.attempts(id).is_empty())
        })
        .await;
    for id in &ids {
        assert_eq!(h.recorder.attempts(id).len(), 1, "{id} handled once");
    }
    let most = h.recorder.in_flight().1;
    // Four workers for handlers, and one for the consume loop and the rest: four at once
    // is what a runtime with a thread to spare gives; three allows for a late start.
    assert!(
        (3..=4).contains(&most),
        "{most} busy handlers at once with concurrency 4"
    );
    h.stop().await.expect("clean shutdown");
}

/// Batches of at most `size`; a failed batch fails together, but each of its messages is
/// retried or dead-lettered by its own history. One message whose retries were spent (or
/// whose producer forged a count) used to make the whole batch dead-letter as `exhausted`,
/// with dead letters claiming retries the others never had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_consumer_gets_batches_and_settles_each_message_by_its_own_history() {
    let mut h = Harness::start("batch").await;
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

    // One batch of four histories (max_retries 1, each failing its first attempt here): a
    // retry copy whose retry is spent, sent as warren sends it (to the wait queue, which
    // dead-letters it back after 200 ms); two fresh messages; one whose producer forged
    // `x-retry-count: 3`. They wait in the queue, all four, before a worker consumes it again:
    // one batch whatever the machine's load (sent to a running worker, a loaded machine spread
    // them over two batches).
    h.shutdown_worker().await.expect("clean shutdown");
    let flaky = |id: &str| {
        let mut flaky = job(id, JobBehaviour::Retryable);
        flaky.succeed_on_attempt = Some(1);
        serde_json::to_vec(&flaky).expect("json")
    };
    // `x-retry-count: n`, or no count at all.
    let count = |n: Option<i64>| {
        let mut table = FieldTable::default();
        if let Some(n) = n {
            table.insert(
                ShortString::from("x-retry-count"),
                AMQPValue::LongLongInt(n),
            );
        }
        BasicProperties::default()
            .with_content_type(ShortString::from("application/json"))
            .with_headers(table)
    };
    let wait_queue = h
        .topology
        .queues
        .iter()
        .map(|q| q.name.clone())
        .find(|name| name.starts_with(&h.name("batch.wait.")))
        .expect("the batch queue's wait queue");
    h.publish_raw_to("", &wait_queue, &flaky("spent"), count(Some(1)))
        .await;
    for id in ["fresh-1", "fresh-2"] {
        h.publish_raw("job.batch", &flaky(id), count(None)).await;
    }
    h.publish_raw("job.batch", &flaky("forged"), count(Some(3)))
        .await;
    h.deployed.wait_until_ready("batch", 4, WAIT).await;
    let recorder = h.recorder.clone();
    let mut worker = h
        .deployed
        .run_worker(|worker| consumers::register::run_batch(worker, recorder));
    let mixed = ["spent", "fresh-1", "fresh-2", "forged"];
    h.recorder
        .wait(WAIT, || {
            mixed[1..]
                .iter()
                .all(|id| h.recorder.attempts(id).len() >= 2)
        })
        .await;
    let batches = h.recorder.batches();
    assert!(
        batches
            .iter()
            .any(|b| mixed.iter().all(|id| b.contains(&(*id).to_owned()))),
        "the four in one batch: {batches:?}"
    );
    let counts = |id: &str| -> Vec<u32> {
        h.recorder
            .attempts(id)
            .iter()
            .map(|a| a.retry_count)
            .collect()
    };
    assert_eq!(counts("spent"), [1], "its retry was spent: dead-lettered");
    for id in &mixed[1..] {
        assert_eq!(counts(id), [0, 1], "{id}: retried once, then handled");
    }
    let dead = h.dead_letters(2, Duration::from_secs(1)).await;
    assert_eq!(dead.len(), 1, "only the spent one is dead-lettered");
    assert_eq!(
        header(&dead[0], "x-failure-reason").as_deref(),
        Some("exhausted")
    );
    assert_eq!(header(&dead[0], "x-retry-count").as_deref(), Some("1"));
    worker.stop().await.expect("clean shutdown");
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
        w.drain_timeout(Duration::from_millis(100))
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
