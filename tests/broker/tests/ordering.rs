//! Per-key order (`ordering_key` in the contract) on the real broker: one key's messages are
//! handled one at a time in the order they arrived, other keys run beside them, and a retried
//! message gives up its place.

use std::time::Duration;

use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, consumers, job};

const WAIT: Duration = Duration::from_secs(30);

/// `run_ordered` (concurrency 4, `ordering_key: /sku`): SKU `AAA` and `CCC` each start with a
/// job that holds until released. While they hold, a `BBB` job is handled, and the jobs queued
/// behind them wait, holding no handler slot. Released, each SKU's jobs run in the order they
/// were published, and `c1`, which fails once, is retried after the `CCC` jobs that came
/// behind it: the retry copy returns to the queue's tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_s_messages_run_in_order_while_other_keys_run_beside_them() {
    let h = Harness::start_registering("ordering", |recorder, worker| {
        consumers::register::run_ordered(worker, recorder.clone());
    })
    .await;
    let submit = |id: &'static str, sku: &str, behaviour| {
        let mut job = job(id, behaviour);
        job.sku = Some(sku.try_into().expect("a SKU"));
        if id == "c1" {
            job.succeed_on_attempt = Some(1);
        }
        h.submit("ordered", job)
    };
    submit("a1", "AAA-0001", JobBehaviour::Hold).await;
    submit("c0", "CCC-0001", JobBehaviour::Hold).await;
    let recorder = &h.recorder;
    recorder.wait(WAIT, || recorder.in_flight().0 == 2).await;
    assert_eq!(recorder.in_flight().0, 2, "a1 and c0 hold");

    submit("a2", "AAA-0001", JobBehaviour::Ok).await;
    submit("c1", "CCC-0001", JobBehaviour::Retryable).await;
    submit("c2", "CCC-0001", JobBehaviour::Ok).await;
    submit("c3", "CCC-0001", JobBehaviour::Ok).await;
    submit("b1", "BBB-0001", JobBehaviour::Ok).await;
    recorder.wait_attempts("b1", 1, WAIT).await;
    for behind in ["a2", "c1", "c2", "c3"] {
        assert!(
            recorder.attempts(behind).is_empty(),
            "{behind} waits behind its SKU's held job, while b1 ran"
        );
    }

    recorder.release(2);
    recorder
        .wait(WAIT, || {
            recorder.attempts("c1").len() == 2
                && ["a2", "c2", "c3"]
                    .iter()
                    .all(|id| recorder.attempts(id).len() == 1)
        })
        .await;
    let order = |ids: &[&'static str]| {
        let mut attempts: Vec<_> = (ids.iter())
            .flat_map(|id| recorder.attempts(id).into_iter().map(|a| (a.at, *id)))
            .collect();
        attempts.sort();
        attempts.into_iter().map(|(_, id)| id).collect::<Vec<_>>()
    };
    assert_eq!(order(&["a1", "a2"]), ["a1", "a2"]);
    assert_eq!(
        order(&["c0", "c1", "c2", "c3"]),
        ["c0", "c1", "c2", "c3", "c1"],
        "in order; the retry after the jobs behind it"
    );
    let retry = &recorder.attempts("c1")[1];
    assert_eq!(retry.retry_count, 1);
    h.stop().await.expect("cleaned up");
}
