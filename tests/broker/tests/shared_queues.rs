//! Queues another stack declared, shared with warren: amqp-contract 2.4 declares its quorum
//! queues with no `x-delivery-limit`, and warren, which derives one from the retry budget,
//! was refused the redeclare (`PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit'`)
//! whichever side declared first. A contract saying `delivery_limit: broker-default`
//! (`contracts/shared/`) declares them as they are; amqp-contract's declaration is made with
//! amqplib by `tests/js/amqp-contract.mjs`.

use std::path::Path;
use std::process::Command;

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::types::ShortString;
use warren_broker_tests::{amqp_url, shared};
use warren_runtime::model::{DeliveryLimit, Topology};
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
