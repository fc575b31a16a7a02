//! What the kit promises a suite of tests sharing one broker: each deployment sees only its own
//! messages, and what a test declared is gone after it, even when it panicked.

use std::time::Duration;

use warren_example_orders::topology;
use warren_runtime::lapin::BasicProperties;
use warren_testkit::TestBroker;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn two_deployments_of_one_contract_do_not_see_each_other() {
    let broker = TestBroker::from_env().await;
    let first = broker.deploy("kit-first", &topology()).await;
    let second = broker.deploy("kit-second", &topology()).await;
    assert_ne!(first.namespace(), second.namespace());
    assert!(first.namespace().starts_with("test.kit-first."));

    first
        .publish_raw(
            "orders",
            "order.eu.placed",
            b"{}",
            BasicProperties::default().with_delivery_mode(2),
        )
        .await;
    // Bound by `order.*.placed`, fulfilment and billing each hold it: in `first` only.
    first.wait_until_ready("orders.fulfilment", 1, WAIT).await;
    first.wait_until_ready("orders.billing", 1, WAIT).await;
    assert_eq!(second.ready("orders.fulfilment").await, 0);
    assert_eq!(second.ready("orders.billing").await, 0);

    first.cleanup().await;
    second.cleanup().await;
    broker.close().await;
}

#[tokio::test]
async fn a_deployment_dropped_without_cleanup_is_removed_all_the_same() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("kit-dropped", &topology()).await;
    let queues: Vec<String> = deployed
        .topology()
        .queues
        .iter()
        .map(|q| q.name.clone())
        .collect();
    assert!(queues.len() >= 4, "the contract's queues and wait queues");
    for queue in &queues {
        assert!(broker.queue_exists(queue).await, "{queue} declared");
    }
    // As a test that panicked before its cleanup drops it.
    drop(deployed);
    for queue in &queues {
        assert!(!broker.queue_exists(queue).await, "{queue} removed");
    }
    broker.close().await;
}

#[tokio::test]
#[should_panic(expected = "rabbitmq-local.sh start")]
async fn no_broker_fails_the_test_saying_how_to_start_one() {
    // Nothing listens on port 1: a test without a broker fails, it is not skipped.
    TestBroker::at("amqp://guest:guest@127.0.0.1:1/%2f").await;
}
