//! The circuit breaker: during a downstream outage, messages wait in their queue instead of
//! flooding the dead-letter queue.

use std::time::Duration;

use warren_broker_tests::{Harness, job, types};

#[tokio::test]
async fn the_circuit_breaker_pauses_consuming_during_an_outage() {
    // `run_outage`: `circuit_breaker: { failures: 3, cool_down: 1s }` on a queue whose retry
    // mode is `none`, so every failure is dead-lettered at once.
    let harness = Harness::start("outage").await;
    harness.recorder.set_outage(true);
    let ids: Vec<String> = (0..20).map(|i| format!("o{i}")).collect();
    for id in &ids {
        harness
            .submit("outage", job(id, types::JobBehaviour::Ok))
            .await;
    }
    let attempts = || {
        let mut all: Vec<_> = ids
            .iter()
            .flat_map(|id| harness.recorder.attempts(id))
            .collect();
        all.sort_by_key(|a| a.at);
        all
    };
    harness
        .recorder
        .wait(Duration::from_secs(5), || attempts().len() >= 3)
        .await;
    // The breaker is open: nothing else is tried for the cool-down (measured below, after it,
    // by the pause before the probe; a sleep here could outlast the cool-down on a loaded
    // machine and let the probe fail too).
    assert_eq!(attempts().len(), 3, "three failures open the breaker");

    // The downstream comes back; the probe after the cool-down succeeds and the rest follow.
    harness.recorder.set_outage(false);
    harness
        .recorder
        .wait(Duration::from_secs(10), || {
            harness.recorder.handled_by("RunOutage") == ids.len()
        })
        .await;
    let all = attempts();
    assert_eq!(all.len(), ids.len(), "every message tried once: {all:?}");
    let paused = all[3].at - all[2].at;
    assert!(
        paused >= Duration::from_millis(900),
        "the probe waited for the cool-down: {paused:?}"
    );
    let dead = harness.dead_letters(4, Duration::from_secs(2)).await;
    assert_eq!(
        dead.len(),
        3,
        "only the failures before the breaker opened were dead-lettered, not all {}",
        ids.len()
    );
    assert_eq!(harness.ready("outage").await, 0);
    harness.stop().await.expect("the worker stops cleanly");
}
