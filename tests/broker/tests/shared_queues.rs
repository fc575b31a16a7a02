//! Queues another stack declared, shared with warren: amqp-contract 2.4 declares its quorum
//! queues with no `x-delivery-limit`, and warren, which derives one from the retry budget,
//! was refused the redeclare (`PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit'`)
//! whichever side declared first. A contract saying `delivery_limit: broker-default`
//! (`contracts/shared/`) declares them as they are; amqp-contract's declaration is made with
//! amqplib by `tests/js/amqp-contract.mjs`, and so is a retry amqp-contract began, which
//! warren's worker carries on with the count amqp-contract left (`retry.counts_from`).

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::types::ShortString;
use warren_broker_tests::shared::types::OrderCreated;
use warren_broker_tests::{amqp_url, shared};
use warren_runtime::dead_letters::{DeadLetterQueue, Filter, RedriveOptions};
use warren_runtime::model::{DeliveryLimit, FailureReason, Topology};
use warren_runtime::{Delivery, HandlerError};
use warren_testkit::TestBroker;

/// Runs `tests/js/amqp-contract.mjs` with `args`; panics with its output when it fails.
fn amqp_contract(args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../js/amqp-contract.mjs");
    let output = Command::new("node")
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run Node.js `node` ({e}): build-support/scripts/test.sh installs it and \
                 tests/js's packages"
            )
        });
    assert!(
        output.status.success(),
        "amqp-contract's side failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The contract's topology under a namespace of this test's own.
fn namespaced(test: &str) -> (String, Topology) {
    let namespace = format!("test.{test}.{}.", uuid::Uuid::now_v7().simple());
    let topology = shared::topology().namespaced(&namespace);
    (namespace, topology)
}

/// Deletes what either side declared under the namespace.
async fn remove(broker: &TestBroker, topology: &Topology) {
    let channel = broker
        .connection()
        .create_channel()
        .await
        .expect("a channel");
    for queue in &topology.queues {
        let _ = channel
            .queue_delete(
                ShortString::from(queue.name.as_str()),
                QueueDeleteOptions::default(),
            )
            .await;
    }
    for exchange in &topology.exchanges {
        let _ = channel
            .exchange_delete(
                ShortString::from(exchange.name.as_str()),
                ExchangeDeleteOptions::default(),
            )
            .await;
    }
}

#[tokio::test]
async fn a_contract_declares_quorum_queues_amqp_contract_declared_and_the_other_way_round() {
    let broker = TestBroker::from_env().await;
    let url = amqp_url();

    // amqp-contract first, then warren.
    let (namespace, topology) = namespaced("shared-after");
    amqp_contract(&["declare", &url, &namespace]);
    warren_runtime::declare(broker.connection(), &topology)
        .await
        .expect("warren declares the queues amqp-contract declared");
    // Warren's own derived limit is what the broker refused.
    let mut derived = topology.clone();
    for queue in &mut derived.queues {
        queue.delivery_limit = DeliveryLimit::Derived;
    }
    let refused = warren_runtime::declare(broker.connection(), &derived)
        .await
        .expect_err("a derived limit differs from amqp-contract's none");
    let shown = warren_runtime::ErrorChain(&refused).to_string();
    assert!(
        shown.contains("PRECONDITION_FAILED") && shown.contains("x-delivery-limit"),
        "{shown}"
    );
    remove(&broker, &topology).await;

    // Warren first, then amqp-contract.
    let (namespace, topology) = namespaced("shared-before");
    warren_runtime::declare(broker.connection(), &topology)
        .await
        .expect("warren declares");
    amqp_contract(&["declare", &url, &namespace]);
    remove(&broker, &topology).await;
}

/// Fails every order, retryably, and counts its attempts.
#[derive(Clone, Default)]
struct Failing(Arc<Mutex<Vec<u32>>>);

impl shared::consumers::ProcessOrder for Failing {
    async fn handle(&self, delivery: Delivery<OrderCreated>) -> Result<(), HandlerError> {
        let mut attempts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        attempts.push(delivery.retry_count());
        Err(HandlerError::retryable("the payment service is down"))
    }
}

/// A message amqp-contract had retried twice comes back through its retry exchange while
/// warren's worker runs the queue (the cut-over of docs/migrating.md): the queue's
/// `counts_from` names that exchange, so warren believes the count and spends only what is
/// left of the budget of 3 (it used to start again from 0, 5 attempts in all instead of 4),
/// and its dead letter keeps amqp-contract's original routing key and its first failure,
/// with no original exchange, which amqp-contract did not record.
#[tokio::test]
async fn a_retry_amqp_contract_began_keeps_its_count_under_warren() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("handover", &shared::topology()).await;
    let failing = Failing::default();
    // The dead letters are the test's to take: only the work queue's consumer runs.
    let mut worker = deployed.worker();
    shared::consumers::register::process_order(&mut worker, failing.clone());
    let mut running = deployed.start(worker);

    amqp_contract(&["retry-copy", &amqp_url(), deployed.namespace(), "o-1", "2"]);
    let dead = deployed
        .take_dead_letters("orders.dead", 1, Duration::from_secs(60))
        .await;
    running.stop().await.expect("the worker stops cleanly");
    assert_eq!(dead.len(), 1, "dead-lettered once its budget was spent");
    let attempts = failing.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(
        attempts,
        [2, 3],
        "the two retries amqp-contract left, counted on"
    );
    let dead = &dead[0];
    assert_eq!(dead.reason(), Some("exhausted"));
    assert_eq!(dead.header("x-retry-count").as_deref(), Some("3"));
    assert_eq!(
        dead.header("x-original-routing-key").as_deref(),
        Some("order.created")
    );
    assert_eq!(
        dead.header("x-original-exchange"),
        None,
        "unknown, not its retry exchange"
    );
    assert!(dead.header("x-first-failure-timestamp").is_some());
    deployed.cleanup().await;
}

/// amqp-contract's dead letters say only `rejected` (the broker's `x-death`: its `nack` adds
/// no reason), and `warren dlq` read every one so, so `redrive --reason exhausted` selected
/// none. Judged by the queue's retry budget, the count amqp-contract stamped tells them
/// apart: retried 3 times of 3, exhausted; retried once and rejected, non-retryable; never
/// retried, still rejected (poison, or a handler that refused it: the record cannot say).
#[tokio::test]
async fn amqp_contract_s_dead_letters_are_told_apart_by_the_queue_s_budget() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("foreign-dlq", &shared::topology()).await;
    amqp_contract(&[
        "dead-letter",
        &amqp_url(),
        deployed.namespace(),
        "spent:3",
        "refused:1",
        "first:0",
    ]);
    deployed
        .wait_until_ready("orders.dead", 3, Duration::from_secs(30))
        .await;
    let name = deployed.name("orders.dead");
    let plain = DeadLetterQueue::new(broker.connection(), &name);
    let judged = plain.clone().judging_by(deployed.topology());

    // What a read held is returned when its channel closes: each read waits for all three.
    let all_back = || deployed.wait_until_ready("orders.dead", 3, Duration::from_secs(30));
    let counted = plain.count(100).await.expect("counted");
    assert_eq!(counted.by_reason.entries(), [("rejected", 3)]);
    all_back().await;
    let counted = judged.count(100).await.expect("counted");
    assert_eq!(
        counted.by_reason.entries(),
        [("exhausted", 1), ("non-retryable", 1), ("rejected", 1)]
    );
    assert_eq!(
        counted.by_queue.entries(),
        [(deployed.name("orders.process").as_str(), 3)]
    );

    all_back().await;
    let exhausted = Filter::default().reason(FailureReason::Exhausted);
    let summary = judged
        .redrive(&exhausted, &RedriveOptions::default(), |_| {})
        .await
        .expect("redriven");
    assert_eq!(summary.moved, 1, "the exhausted one alone");
    // The others were read and left: back in the queue once the read's channel is closed.
    let left = deployed
        .wait_until_ready("orders.dead", 2, Duration::from_secs(30))
        .await;
    assert_eq!(left, 2);
    assert_eq!(
        deployed.ready("orders.process").await,
        1,
        "back in its queue"
    );
    deployed.cleanup().await;
}
