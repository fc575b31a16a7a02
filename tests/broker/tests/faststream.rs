//! A Python service and a Rust one on one broker, through one contract: the FastStream
//! service of `tests/py/shop.py` publishes orders with its own publisher (FastStream and
//! aio-pika, its wire format), and warren's consumer generated from the contract `warren
//! import asyncapi` wrote from that service's AsyncAPI document (`contracts/shop/`) handles
//! every one, typed, as the team moving the billing consumer from Python to Rust runs it.
//! That the checked-in contract is what the import makes of the document FastStream writes
//! today is tests/tests/import.rs's to prove.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use warren_broker_tests::amqp_url;
use warren_broker_tests::shop::{self, types::OrderPlaced};
use warren_runtime::{Delivery, HandlerError};
use warren_testkit::{TestBroker, wait_until};

/// Orders the FastStream service publishes.
const ORDERS: usize = 6;

/// Records the orders the billing consumer handled.
#[derive(Clone, Default)]
struct Billed(Arc<Mutex<Vec<OrderPlaced>>>);

impl shop::consumers::Bill for Billed {
    async fn handle(&self, delivery: Delivery<OrderPlaced>) -> Result<(), HandlerError> {
        let mut billed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        billed.push(delivery.payload().clone());
        Ok(())
    }
}

impl Billed {
    fn count(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Runs the FastStream service: it publishes `ORDERS` orders to the exchange under `space`.
fn faststream_publishes(space: &str) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = manifest.join("../py/.venv/bin/python");
    let script = manifest.join("../py/shop.py");
    let output = Command::new(&python)
        .arg(&script)
        .args(["publish", &amqp_url(), &ORDERS.to_string(), space])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{} should run (build-support/scripts/test.sh installs tests/py/.venv): {e}",
                python.display()
            )
        });
    assert!(
        output.status.success(),
        "the FastStream service failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn the_consumer_imported_from_faststream_handles_what_faststream_publishes() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("faststream", &shop::topology()).await;
    let billed = Billed::default();
    let handlers = shop::Handlers {
        bill: billed.clone(),
    };
    let mut running = deployed.run_worker(|worker| handlers.register(worker));

    // FastStream publishes only once the exchange is there (it declares it passively).
    faststream_publishes(deployed.namespace());
    wait_until("every order handled", Duration::from_secs(60), || {
        billed.count() >= ORDERS
    })
    .await;
    running.stop().await.expect("the worker stops cleanly");

    let mut billed = billed.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    billed.sort_by_key(|order| order.total_cents);
    let expected: Vec<(String, u64, Option<String>)> = (0..ORDERS)
        .map(|i| {
            let note = (i % 2 == 1).then(|| format!("note {i}"));
            (format!("o-{i}"), 100 * i as u64, note)
        })
        .collect();
    let seen: Vec<(String, u64, Option<String>)> = billed
        .into_iter()
        .map(|o| (o.order_id, o.total_cents, o.note))
        .collect();
    assert_eq!(
        seen, expected,
        "every order FastStream published, once, typed"
    );
    deployed.cleanup().await;
}
