//! What generated code declares is what it declared when the generator still spelled out
//! every wait queue (issue 26): today's `topology()` states each queue's retry policy and
//! the model lays the wait queues out at run time, so the broker must see the very same
//! queues with the very same `x-` arguments as from the old, spelled-out file.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use warren_testkit::{TestBroker, management};

/// The orders example's `topology()` as the generator wrote it before.
mod spelled_out {
    include!("fixtures/orders_topology_spelled_out.rs");
}

/// Every queue the management API lists under `namespace`, by its name without it, with its
/// arguments (the namespace in a value written `<ns>`, so two deployments compare), once
/// all `expected` queues are listed: the API lists a declared queue a moment later.
async fn queue_arguments(namespace: &str, expected: usize) -> BTreeMap<String, String> {
    let api = management();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed: BTreeMap<String, String> = api
            .queues()
            .await
            .expect("the management API answers")
            .into_iter()
            .filter_map(|queue| {
                let name = queue.name.strip_prefix(namespace)?.to_owned();
                let arguments = Value::Object(queue.arguments.into_iter().collect());
                Some((name, arguments.to_string().replace(namespace, "<ns>")))
            })
            .collect();
        if listed.len() >= expected || Instant::now() > deadline {
            return listed;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_broker_gets_the_queues_and_arguments_it_got_when_wait_queues_were_spelled_out() {
    let (old, new) = (spelled_out::topology(), warren_example_orders::topology());
    let waits = new
        .queues
        .iter()
        .filter(|q| q.name.contains(".wait."))
        .count();
    assert!(
        waits >= 16,
        "the example's retries are laid out: {waits} wait queues"
    );
    assert_eq!(
        old, new,
        "the model builds the topology the old file spelled out"
    );

    let broker = TestBroker::from_env().await;
    let before = broker.deploy("declared-old", &old).await;
    let after = broker.deploy("declared-new", &new).await;
    let old_queues = queue_arguments(before.namespace(), old.queues.len()).await;
    let new_queues = queue_arguments(after.namespace(), new.queues.len()).await;
    before.cleanup().await;
    after.cleanup().await;

    assert_eq!(
        old_queues.len(),
        old.queues.len(),
        "every old queue is listed"
    );
    assert_eq!(
        new_queues, old_queues,
        "every queue, its name and its x- arguments, as the broker lists them"
    );
}
