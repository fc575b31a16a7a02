//! A Python service and a Rust one on one broker, through one contract: the contract `warren
//! import asyncapi` wrote from the AsyncAPI document of the FastStream service in
//! `tests/py/shop.py` (`contracts/shop/`), as the team moving the billing consumer from
//! Python to Rust runs it. FastStream's publisher sends orders to warren's generated
//! consumer, which handles every valid one, typed, and dead-letters the one FastStream's
//! schema refuses with its reason; warren's generated publisher sends orders to FastStream's
//! subscriber, which declares the queue as warren did (FastStream and aio-pika, its wire
//! format, both ways). That the checked-in contract is what the import makes of the
//! document FastStream writes today is tests/tests/import.rs's to prove.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{FieldTable, ShortString};
use warren_broker_tests::amqp_url;
use warren_broker_tests::shop::{
    self,
    types::{Invoice, OrderPlaced},
};
use warren_runtime::{Delivery, HandlerError};
use warren_testkit::{Deployed, TestBroker, wait_until};

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

/// The FastStream service, `tests/py/shop.py` with `arguments`, under the virtualenv
/// build-support/scripts/test.sh installs.
fn shop(arguments: &[&str]) -> (PathBuf, Command) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = manifest.join("../py/.venv/bin/python");
    let mut command = Command::new(&python);
    command.arg(manifest.join("../py/shop.py")).args(arguments);
    (python, command)
}

/// Runs the FastStream service: it publishes `ORDERS` orders, then one its schema refuses,
/// to the exchange under `space`.
fn faststream_publishes(space: &str) {
    let (python, mut command) = shop(&["publish", &amqp_url(), &ORDERS.to_string(), space]);
    let output = command.output().unwrap_or_else(|e| {
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
    // The order FastStream sent with a negative total, which its own schema refuses: the
    // worker dead-letters it to the queue the import gave `shop.billing`, with the reason,
    // although the queue is declared, as FastStream declares it, without a dead-letter
    // exchange.
    let dead = deployed
        .take_dead_letters("shop.billing.dead-letters", 1, Duration::from_secs(30))
        .await;
    running.stop().await.expect("the worker stops cleanly");
    let [invalid] = dead.as_slice() else {
        panic!("one dead letter, the invalid order: {} found", dead.len());
    };
    assert_eq!(invalid.reason(), Some("validation"));
    let error = invalid.last_error().unwrap_or_default();
    assert!(
        error.contains("total_cents"),
        "the dead letter says what is wrong: {error}"
    );
    assert!(
        String::from_utf8_lossy(&invalid.body).contains("o-invalid"),
        "the body FastStream sent, kept"
    );

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
        "every valid order FastStream published, once, typed; the invalid one never reached the handler"
    );
    deployed.cleanup().await;
}

/// The FastStream service's billing subscriber, running until it is dropped.
struct Serving(Child);

impl Serving {
    /// Starts it on the topology under `space`, and waits until it consumes.
    fn start(space: &str) -> Self {
        let (python, mut command) = shop(&["serve", &amqp_url(), space]);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} should run: {e}", python.display()));
        let stdout = child.stdout.take().expect("its stdout is piped");
        let (lines, said) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let mut serving = Self(child);
        // Its log goes to stdout too: "ready" is the line it prints once it consumes.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut printed = Vec::new();
        loop {
            match said.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if line == "ready" => return serving,
                Ok(line) => printed.push(line),
                Err(waited) => {
                    let status = serving.0.try_wait();
                    panic!(
                        "the FastStream service should say it is ready ({waited}; exit {status:?}), it printed:\n{}",
                        printed.join("\n")
                    )
                }
            }
        }
    }

    /// Stops it (it exits when its stdin closes), and requires a clean exit.
    fn stop(mut self) {
        drop(self.0.stdin.take());
        let status = self.0.wait().expect("the FastStream service is waited for");
        assert!(
            status.success(),
            "the FastStream service exited with {status}"
        );
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Takes `n` invoices from queue `queue`, waiting at most `timeout`.
async fn take_invoices(
    deployed: &Deployed,
    queue: &str,
    n: usize,
    timeout: Duration,
) -> Vec<Invoice> {
    let channel = deployed
        .connection()
        .create_channel()
        .await
        .expect("a channel");
    let deadline = Instant::now() + timeout;
    let mut taken = Vec::new();
    while taken.len() < n && Instant::now() < deadline {
        let got = channel
            .basic_get(ShortString::from(queue), BasicGetOptions { no_ack: true })
            .await
            .expect("basic.get");
        match got {
            Some(message) => taken.push(
                serde_json::from_slice(&message.delivery.data)
                    .unwrap_or_else(|e| panic!("a message of {queue} is not an invoice: {e}")),
            ),
            None => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    taken
}

#[tokio::test]
async fn faststream_consumes_what_the_publisher_generated_from_its_document_sends() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("faststream-serve", &shop::topology()).await;
    // Where FastStream's subscriber sends its invoices: a queue of whoever reads them.
    let invoices = deployed.name("invoices");
    let channel = deployed
        .connection()
        .create_channel()
        .await
        .expect("a channel");
    channel
        .queue_declare(
            ShortString::from(invoices.as_str()),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("the invoices queue is declared");
    // FastStream declares `shop.billing` as it always does, on the queue warren declared
    // from the contract: the broker finds the two declarations equivalent.
    let serving = Serving::start(deployed.namespace());

    let publishers = shop::Publishers::new(deployed.publisher().await);
    for i in 0..ORDERS {
        let order = OrderPlaced::new(format!("r-{i}"), 250 * i as u64);
        publishers
            .place_order(&order)
            .await
            .expect("the order is published, confirmed and routed");
    }
    let mut billed = take_invoices(&deployed, &invoices, ORDERS, Duration::from_secs(60)).await;
    serving.stop();

    billed.sort_by_key(|invoice| invoice.amount);
    let seen: Vec<(String, i64)> = billed
        .into_iter()
        .map(|invoice| (invoice.order_id, invoice.amount))
        .collect();
    let expected: Vec<(String, i64)> = (0..ORDERS)
        .map(|i| (format!("r-{i}"), 250 * i as i64))
        .collect();
    assert_eq!(
        seen, expected,
        "FastStream billed every order warren published, once"
    );
    channel
        .queue_delete(
            ShortString::from(invoices.as_str()),
            QueueDeleteOptions::default(),
        )
        .await
        .expect("the invoices queue is deleted");
    deployed.cleanup().await;
}
