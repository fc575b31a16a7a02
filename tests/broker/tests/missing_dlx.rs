//! The dead-letter exchange deleted while the worker runs.

use std::time::Duration;

use lapin::options::ExchangeDeleteOptions;
use lapin::types::ShortString;
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, header, job};

/// A non-retryable failure whose dead letter cannot be published: the outcome is known, so
/// the handler runs once and only the copy is tried again, until the exchange is back. It
/// used to re-run the handler every second for as long as the exchange was missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_dead_letter_exchange_holds_the_message_without_rerunning_its_handler() {
    let harness = Harness::start("missing-dlx").await;
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
