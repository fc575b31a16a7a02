//! Dead letters the worker and the broker made, redriven with `warren_runtime::dead_letters`
//! back to a running worker: a message that can now succeed is handled, one that still fails
//! comes back with its redrive counted, and past `max_redrives` it is refused.

use std::time::Duration;

use warren_broker_tests::{Harness, job, types};
use warren_runtime::dead_letters::{self, DeadLetterQueue, Filter, RedriveOptions};

/// Waits (bounded) until queue `name` holds `n` ready messages, and returns what it holds.
async fn settle(harness: &Harness, name: &str, n: u32) -> u32 {
    for _ in 0..200 {
        if harness.ready(name).await == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    harness.ready(name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redriven_dead_letters_reach_the_worker_again() {
    let harness = Harness::start("dlq_redrive").await;
    // `native` (quorum-native, delivery limit 2) dead-letters a message after its third
    // failed delivery. `healed` is handled at its fourth, after a redrive; `broken` never.
    let mut healed = job("healed", types::JobBehaviour::Retryable);
    healed.succeed_on_attempt = Some(3);
    harness.submit("native", healed).await;
    harness
        .submit("native", job("broken", types::JobBehaviour::Retryable))
        .await;
    assert_eq!(settle(&harness, "dead", 2).await, 2);

    let dlq = DeadLetterQueue::new(&harness.connection, harness.name("dead"));
    assert!(dead_letters::dead_letter_queues(&harness.topology).contains(&harness.name("dead")));
    let counts = dlq.count(100).await.expect("counted");
    assert_eq!((counts.total, counts.scanned), (2, 2));
    assert_eq!(counts.by_queue.get(&harness.name("native")), 2);
    assert_eq!(
        settle(&harness, "dead", 2).await,
        2,
        "counting removes nothing"
    );

    let options = RedriveOptions::default()
        .targets(dead_letters::redrive_targets(&harness.topology))
        .max_redrives(1);
    let summary = dlq
        .redrive(&Filter::default(), &options, |_| {})
        .await
        .expect("redriven");
    assert_eq!(
        (summary.moved, summary.refused, summary.no_queue),
        (2, 0, 0)
    );
    let recorder = &harness.recorder;
    let timeout = Duration::from_secs(20);
    assert_eq!(recorder.wait_attempts("healed", 4, timeout).await.len(), 4);

    // `broken` failed again: back in the dead-letter queue, its redrive counted, and with
    // `max_redrives(1)` refused from now on.
    assert_eq!(settle(&harness, "dead", 1).await, 1);
    let broken = recorder.attempts("broken").len();
    assert!(
        broken > 3,
        "redriven, `broken` was tried again: {broken} attempts"
    );
    let peeked = dlq.peek(10).await.expect("peeked");
    let failure = peeked[0].failure.as_ref().expect("a failure context");
    assert_eq!(failure.redrive_count, 1);
    assert_eq!(
        failure.queue.as_deref(),
        Some(harness.name("native").as_str())
    );
    let again = dlq
        .redrive(&Filter::default(), &options, |_| {})
        .await
        .expect("a second pass");
    assert_eq!((again.moved, again.refused), (0, 1));
    assert_eq!(settle(&harness, "dead", 1).await, 1, "refused, and kept");
    assert_eq!(recorder.attempts("broken").len(), broken);
    assert_eq!(
        recorder.attempts("healed").len(),
        4,
        "handled once, not dead again"
    );
    harness.stop().await.expect("the worker stops cleanly");
}

/// `read` hands back dead letters whole and leaves them; `take` hands back as many as asked
/// and removes those alone; neither reads past the depth it began with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_read_whole_or_taken() {
    let harness = Harness::start("dlq_read_take").await;
    // Bodies past a peek's cut, straight into the dead-letter queue (the default exchange).
    let dead = harness.name("dead");
    for i in 0..3u8 {
        let body = vec![b'a' + i; dead_letters::MAX_PEEK_BODY * 3];
        let properties = warren_runtime::lapin::BasicProperties::default();
        harness.publish_raw_to("", &dead, &body, properties).await;
    }
    assert_eq!(settle(&harness, "dead", 3).await, 3);
    let dlq = DeadLetterQueue::new(&harness.connection, dead);

    let read = dlq.read(10).await.expect("read");
    let bodies: Vec<(u8, usize)> = read.iter().map(|d| (d.data[0], d.data.len())).collect();
    let whole = dead_letters::MAX_PEEK_BODY * 3;
    assert_eq!(bodies, [(b'a', whole), (b'b', whole), (b'c', whole)]);
    assert_eq!(settle(&harness, "dead", 3).await, 3, "a read leaves them");

    let taken = dlq.take(2).await.expect("taken");
    assert_eq!(taken.len(), 2);
    assert_eq!(settle(&harness, "dead", 1).await, 1, "two taken, one left");
    let rest = dlq.take(10).await.expect("the rest taken");
    assert_eq!(rest.len(), 1);
    assert_eq!(settle(&harness, "dead", 0).await, 0);
    harness.stop().await.expect("the worker stops cleanly");
}
