//! Queues another stack declared, shared with warren: amqp-contract 2.4 declares its quorum
//! queues with no `x-delivery-limit`, and warren, which derives one from the retry budget,
//! was refused the redeclare (`PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit'`)
//! whichever side declared first. A contract saying `delivery_limit: broker-default`
//! (`contracts/shared/`) declares them as they are; amqp-contract's declaration is made with
//! amqplib by `tests/js/amqp-contract.mjs`, and so is a retry amqp-contract began, which
//! warren's worker carries on with the count amqp-contract left (`retry.counts_from`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::types::ShortString;
use warren_broker_tests::shared::types::OrderCreated;
use warren_broker_tests::{amqp_url, shared};
use warren_runtime::dead_letters::{DeadLetterQueue, Filter, RedriveOptions};
use warren_runtime::model::{DeliveryLimit, FailureReason, Topology};
use warren_runtime::{Delivery, HandlerError};
use warren_testkit::{TestBroker, wait_until};

/// `tests/js/amqp-contract.mjs`.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../js/amqp-contract.mjs")
}

/// Runs `tests/js/amqp-contract.mjs` with `args`; panics with its output when it fails.
fn amqp_contract(args: &[&str]) {
    let output = Command::new("node")
        .arg(script())
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

/// amqp-contract's dead letters of three orders under `namespace`: `spent` after 3 retries
/// (the queue's budget), `refused` after 1, `first` never retried.
fn three_dead_letters(namespace: &str) {
    let orders = ["spent:3", "refused:1", "first:0"];
    amqp_contract(&[&["dead-letter", &amqp_url(), namespace][..], &orders].concat());
}

/// The contract's topology under a namespace of this test's own.
fn namespaced(test: &str) -> (String, Topology) {
    let namespace = format!("test.{test}.{}.", uuid::Uuid::now_v7().simple());
    let topology = shared::topology().namespaced(&namespace);
    (namespace, topology)
}

/// Deletes what amqp-contract declares under `namespace` beside the contract's topology:
/// its wait queue and its wait exchange (`amqp-contract.mjs declare`).
async fn remove_theirs(broker: &TestBroker, namespace: &str) {
    let channel = (broker.connection().create_channel().await).expect("a channel");
    let wait_queue = format!("{namespace}orders.process-wait");
    let deleted = channel
        .queue_delete(ShortString::from(wait_queue), QueueDeleteOptions::default())
        .await;
    deleted.expect("its wait queue deleted");
    let wait_exchange = format!("{namespace}wait-exchange");
    let deleted = channel
        .exchange_delete(
            ShortString::from(wait_exchange),
            ExchangeDeleteOptions::default(),
        )
        .await;
    deleted.expect("its wait exchange deleted");
}

/// Deletes what either side declared under `namespace`, whose contract topology is `topology`.
async fn remove(broker: &TestBroker, namespace: &str, topology: &Topology) {
    warren_runtime::delete(broker.connection(), topology)
        .await
        .expect("the contract's topology deleted");
    remove_theirs(broker, namespace).await;
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
    remove(&broker, &namespace, &topology).await;

    // Warren first, then amqp-contract.
    let (namespace, topology) = namespaced("shared-before");
    warren_runtime::declare(broker.connection(), &topology)
        .await
        .expect("warren declares");
    amqp_contract(&["declare", &url, &namespace]);
    remove(&broker, &namespace, &topology).await;
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
    three_dead_letters(deployed.namespace());
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

/// Orders published to the queue both workers read.
const SHARED_ORDERS: usize = 12;

/// Failing, each attempt recorded with its order.
#[derive(Clone, Default)]
struct FailingOrders(Arc<Mutex<Vec<(String, u32)>>>);

impl shared::consumers::ProcessOrder for FailingOrders {
    async fn handle(&self, delivery: Delivery<OrderCreated>) -> Result<(), HandlerError> {
        let attempt = (delivery.payload().order_id.clone(), delivery.retry_count());
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(attempt);
        Err(HandlerError::retryable("the payment service is down"))
    }
}

/// amqp-contract's worker (`tests/js/amqp-contract.mjs worker`), running beside the test, and
/// the attempts it printed.
struct TheirWorker {
    child: std::process::Child,
    attempts: Arc<Mutex<Vec<(String, u32)>>>,
    reader: std::thread::JoinHandle<()>,
}

impl TheirWorker {
    /// Starts it on the queues under `namespace`, and waits until it consumes.
    async fn start(namespace: &str) -> Self {
        let mut child = Command::new("node")
            .arg(script())
            .args(["worker", &amqp_url(), namespace])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("amqp-contract's worker starts");
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let consuming = Arc::new(Mutex::new(false));
        let stdout = child.stdout.take().expect("its output");
        let reader = {
            let (attempts, consuming) = (attempts.clone(), consuming.clone());
            std::thread::spawn(move || read_attempts(stdout, &attempts, &consuming))
        };
        wait_until(
            "amqp-contract's worker consumes",
            Duration::from_secs(30),
            || *consuming.lock().unwrap_or_else(|e| e.into_inner()),
        )
        .await;
        Self {
            child,
            attempts,
            reader,
        }
    }

    /// The attempts it made so far: each order with its retry count.
    fn attempts(&self) -> Vec<(String, u32)> {
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops it (its stdin closed) and returns every attempt it made.
    fn stop(self) -> Vec<(String, u32)> {
        let Self {
            mut child,
            attempts,
            reader,
        } = self;
        drop(child.stdin.take());
        child.wait().expect("amqp-contract's worker stops");
        reader.join().expect("its output read");
        let attempts = attempts.lock().unwrap_or_else(|e| e.into_inner());
        attempts.clone()
    }
}

/// Reads the worker's lines: `consuming` once, then `attempt ORDER COUNT` per delivery.
fn read_attempts(
    stdout: std::process::ChildStdout,
    attempts: &Mutex<Vec<(String, u32)>>,
    consuming: &Mutex<bool>,
) {
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["consuming"] => *consuming.lock().unwrap_or_else(|e| e.into_inner()) = true,
            ["attempt", order, count] => {
                let count = count.parse::<u32>().expect("a count");
                let mut attempts = attempts.lock().unwrap_or_else(|e| e.into_inner());
                attempts.push(((*order).to_owned(), count));
            }
            _ => {}
        }
    }
}

/// The cut-over itself: amqp-contract's worker and warren's on one queue at once, each
/// retrying what the other began (amqp-contract through its wait queue and retry exchange,
/// warren through its own wait queue), for orders that always fail. Every order gets the
/// queue's budget exactly: one attempt at each count from 0 to 3, whichever worker made it,
/// then one dead letter. Before `counts_from`, warren counted amqp-contract's copies as first
/// deliveries: 4 to 9 attempts where 4 are allowed, one order 62 times.
#[tokio::test]
async fn amqp_contract_and_warren_on_one_queue_keep_one_retry_budget() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("one-budget", &shared::topology()).await;
    amqp_contract(&["declare", &amqp_url(), deployed.namespace()]);
    let theirs = TheirWorker::start(deployed.namespace()).await;
    let ours = FailingOrders::default();
    let mut worker = deployed.worker();
    shared::consumers::register::process_order(&mut worker, ours.clone());
    let mut running = deployed.start(worker);

    let publishers = shared::Publishers::new(deployed.publisher().await);
    for n in 0..SHARED_ORDERS {
        let order = OrderCreated::new(100, format!("o-{n}"));
        publishers.create_order(&order).await.expect("published");
    }
    let mine = || ours.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    wait_until(
        "every order's budget spent",
        Duration::from_secs(120),
        || mine().len() + theirs.attempts().len() >= 4 * SHARED_ORDERS,
    )
    .await;
    let dead = deployed
        .wait_until_ready("orders.dead", SHARED_ORDERS as u32, Duration::from_secs(60))
        .await;
    running.stop().await.expect("the worker stops cleanly");
    let (mine, others) = (mine(), theirs.stop());

    assert_eq!(dead, SHARED_ORDERS as u32, "one dead letter per order");
    let mut by_order: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (order, count) in mine.iter().chain(&others) {
        by_order.entry(order).or_default().push(*count);
    }
    assert_eq!(by_order.len(), SHARED_ORDERS);
    for (order, counts) in &mut by_order {
        counts.sort_unstable();
        assert_eq!(
            counts,
            &[0, 1, 2, 3],
            "order {order}: one attempt per count"
        );
    }
    assert!(
        !mine.is_empty() && !others.is_empty(),
        "both workers took part: {} and {} attempts",
        mine.len(),
        others.len()
    );
    remove_theirs(&broker, deployed.namespace()).await;
    deployed.cleanup().await;
}

/// Records why each dead letter died, by order.
#[derive(Clone, Default)]
struct DeadOrders(Arc<Mutex<BTreeMap<String, Option<FailureReason>>>>);

impl shared::consumers::ReadDeadOrders for DeadOrders {
    async fn handle(
        &self,
        dead_letter: warren_runtime::DeadLetter<OrderCreated>,
    ) -> Result<(), HandlerError> {
        let order = dead_letter.typed().map(|d| d.payload().order_id.clone());
        let reason = dead_letter.failure().reason;
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(order.unwrap_or_default(), reason);
        Ok(())
    }
}

/// A contract's dead-letter consumer judges amqp-contract's dead letters as `warren dlq`
/// does, by the budget of the queue they died in.
#[tokio::test]
async fn a_dead_letter_consumer_judges_amqp_contract_s_dead_letters_too() {
    let broker = TestBroker::from_env().await;
    let deployed = broker
        .deploy("foreign-dlq-consumer", &shared::topology())
        .await;
    let dead = DeadOrders::default();
    let mut worker = deployed.worker();
    shared::consumers::register::read_dead_orders(&mut worker, dead.clone());
    let mut running = deployed.start(worker);
    three_dead_letters(deployed.namespace());
    wait_until(
        "the three dead letters read",
        Duration::from_secs(30),
        || dead.0.lock().unwrap_or_else(|e| e.into_inner()).len() == 3,
    )
    .await;
    running.stop().await.expect("the worker stops cleanly");
    let seen = dead.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let expected = BTreeMap::from([
        ("first".to_owned(), Some(FailureReason::Rejected)),
        ("refused".to_owned(), Some(FailureReason::NonRetryable)),
        ("spent".to_owned(), Some(FailureReason::Exhausted)),
    ]);
    assert_eq!(seen, expected);
    deployed.cleanup().await;
}
