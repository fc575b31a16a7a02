//! The runtime against a real RabbitMQ, through code generated from `contracts/warren.yaml`.
//!
//! Every test starts a [`Harness`], built on the public test kit (`warren-testkit`, which
//! every test here exercises): its own connection, the contract's topology deployed under a
//! namespace of its own (so tests share one broker without seeing each other's messages), a
//! worker running one recording handler for every consumer and rpc server, and typed
//! publishers. The handler does what each job's `behaviour` says and records every attempt;
//! as the server of the rpcs, it answers as [`rpc::Quoter`] does.

warren_runtime::include_generated!("jobs");

pub mod bookkeeper;
pub mod database;
pub mod raw;
pub mod rpc;

/// The contract `warren import asyncapi` wrote from the FastStream service of
/// `tests/py/shop.py` (`contracts/shop/`), generated as any contract is.
pub mod shop {
    warren_runtime::include_generated!("shop");
}

/// Ledger entries whose consumers write through the inbox (`contracts/ledger/`): the
/// effects-exactly-once tests and the worker they kill.
pub mod ledger {
    warren_runtime::include_generated!("ledger");
}

/// The queues of a service amqp-contract declared (`contracts/shared/`), described as they
/// are on the broker, so warren and amqp-contract can both declare them.
pub mod shared {
    warren_runtime::include_generated!("shared");
}

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use tokio::sync::Semaphore;
use warren_runtime::model::{FailureReason, QueueRole};
use warren_runtime::{
    Connection, DeadLetter, Delivery, FailureContext, HandlerError, RpcHandlerError, Worker,
    WorkerError,
};
use warren_testkit::{Changes, Deployed, RunningWorker, TestBroker};
pub use warren_testkit::{PrivateBroker, PrivateCluster, QueuedDeadLetter, amqp_url};

/// One attempt a handler saw.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// When the handler started.
    pub at: Instant,
    /// The consumer that ran.
    pub consumer: &'static str,
    /// The delivery's retry count.
    pub retry_count: u32,
    /// The delivery's message id.
    pub message_id: Option<String>,
    /// The tenant header.
    pub tenant: String,
    /// The delivery's failure history.
    pub failure: Option<FailureContext>,
}

struct State {
    attempts: Mutex<HashMap<String, Vec<Attempt>>>,
    batches: Mutex<Vec<Vec<String>>>,
    changed: Changes,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    gate: Semaphore,
    outage: AtomicBool,
    dead_letters: Mutex<Vec<DeadLetter<types::Job, types::JobHeaders>>>,
    /// The notes `run_mixed` handled, by id.
    notes: Mutex<Vec<String>>,
    /// The dead letters `read_mixed_dead` read: what each was, and why it died.
    mixed_dead: Mutex<Vec<(String, Option<FailureReason>)>>,
    quoter: rpc::Quoter,
}

impl Default for State {
    fn default() -> Self {
        Self {
            attempts: Mutex::default(),
            batches: Mutex::default(),
            changed: Changes::default(),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            gate: Semaphore::new(0),
            outage: AtomicBool::new(false),
            dead_letters: Mutex::default(),
            notes: Mutex::default(),
            mixed_dead: Mutex::default(),
            quoter: rpc::Quoter::default(),
        }
    }
}

/// The handler of every consumer: records each attempt, then behaves as the job says; and
/// of every rpc server, answering as its [`rpc::Quoter`] does.
#[derive(Clone, Default)]
pub struct Recorder(Arc<State>);

/// [`Handlers`] with every consumer and rpc server of the test contract handled by a
/// [`Recorder`].
pub type Recorded = Handlers<
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
    Recorder,
>;

/// Every consumer and rpc server of the test contract handled by `recorder`.
pub fn handlers(recorder: &Recorder) -> Recorded {
    Handlers {
        run_backoff: recorder.clone(),
        run_batch: recorder.clone(),
        run_bounded: recorder.clone(),
        run_drop: recorder.clone(),
        run_forever: recorder.clone(),
        run_backoff_forever: recorder.clone(),
        run_jitter: recorder.clone(),
        run_native: recorder.clone(),
        run_none: recorder.clone(),
        run_requeue: recorder.clone(),
        run_requeue_classic: recorder.clone(),
        run_short_long: recorder.clone(),
        run_spin: recorder.clone(),
        run_outage: recorder.clone(),
        run_chaos: recorder.clone(),
        run_cluster: recorder.clone(),
        run_single: recorder.clone(),
        run_sibling: recorder.clone(),
        read_dead: recorder.clone(),
        run_failing: recorder.clone(),
        run_priority: recorder.clone(),
        run_ordered: recorder.clone(),
        run_mixed: recorder.clone(),
        read_mixed_dead: recorder.clone(),
        quote_price: recorder.clone(),
        rush_quote: recorder.clone(),
        lossy_quote: recorder.clone(),
    }
}

impl Recorder {
    fn record(
        &self,
        consumer: &'static str,
        delivery: &Delivery<types::Job, types::JobHeaders>,
    ) -> usize {
        let attempt = Attempt {
            at: Instant::now(),
            consumer,
            retry_count: delivery.retry_count(),
            message_id: delivery.message_id().map(str::to_owned),
            tenant: delivery.headers().tenant.clone(),
            failure: delivery.failure().cloned(),
        };
        let mut attempts = self.0.attempts.lock().unwrap_or_else(|e| e.into_inner());
        let list = attempts
            .entry(delivery.payload().id.to_string())
            .or_default();
        list.push(attempt);
        // Attempts by this consumer only: a sibling queue sees the same job.
        let index = list.iter().filter(|a| a.consumer == consumer).count() - 1;
        drop(attempts);
        self.0.changed.notify();
        index
    }

    async fn run(
        &self,
        consumer: &'static str,
        delivery: Delivery<types::Job, types::JobHeaders>,
    ) -> Result<(), HandlerError> {
        let attempt = self.record(consumer, &delivery);
        if consumer == "RunSibling" {
            // The sibling only counts what reaches it.
            return Ok(());
        }
        if consumer == "RunOutage" && self.0.outage.load(Ordering::SeqCst) {
            return Err(HandlerError::retryable(std::io::Error::other(
                "the downstream service is down",
            )));
        }
        let job = delivery.payload();
        let succeed_now = job
            .succeed_on_attempt
            .is_some_and(|n| attempt >= n as usize);
        match job.behaviour {
            _ if succeed_now => Ok(()),
            types::JobBehaviour::Ok => Ok(()),
            types::JobBehaviour::Retryable => {
                let error = std::io::Error::other(format!(
                    "attempt {attempt} of {} failed",
                    job.id.as_str()
                ));
                Err(match job.retry_after_ms {
                    Some(ms) => HandlerError::retry_after(
                        Duration::from_millis(u64::try_from(ms).unwrap_or_default()),
                        error,
                    ),
                    None => HandlerError::retryable(error),
                })
            }
            types::JobBehaviour::Fatal => Err(HandlerError::non_retryable(format!(
                "job {} can never succeed",
                job.id.as_str()
            ))),
            types::JobBehaviour::Panic => panic!("handler panicked on purpose"),
            types::JobBehaviour::Hold => {
                let now = self.0.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.0.max_in_flight.fetch_max(now, Ordering::SeqCst);
                self.0.changed.notify();
                let permit = self.0.gate.acquire().await;
                drop(permit);
                self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
            types::JobBehaviour::Spin => {
                // Busy for 50 ms without awaiting, as CPU-bound work is: only the worker can
                // run several of these at once, by giving each a task of its own.
                let now = self.0.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.0.max_in_flight.fetch_max(now, Ordering::SeqCst);
                let started = Instant::now();
                while started.elapsed() < Duration::from_millis(50) {
                    std::hint::spin_loop();
                }
                self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
                self.0.changed.notify();
                Ok(())
            }
            types::JobBehaviour::Slow => {
                tokio::time::sleep(Duration::from_millis(600)).await;
                Ok(())
            }
        }
    }

    /// The server of the rpcs: what it saw.
    pub fn quoter(&self) -> &rpc::Quoter {
        &self.0.quoter
    }

    /// Every attempt at job `id`.
    pub fn attempts(&self, id: &str) -> Vec<Attempt> {
        let attempts = self.0.attempts.lock().unwrap_or_else(|e| e.into_inner());
        attempts.get(id).cloned().unwrap_or_default()
    }

    /// Waits until job `id` has at least `n` attempts, or `timeout` passes.
    pub async fn wait_attempts(&self, id: &str, n: usize, timeout: Duration) -> Vec<Attempt> {
        self.wait(timeout, || self.attempts(id).len() >= n).await;
        self.attempts(id)
    }

    /// Waits until `done` holds or `timeout` passes.
    pub async fn wait(&self, timeout: Duration, done: impl Fn() -> bool) {
        self.0.changed.wait_until(timeout, done).await;
    }

    /// Handlers holding now, and the most there ever were.
    pub fn in_flight(&self) -> (usize, usize) {
        (
            self.0.in_flight.load(Ordering::SeqCst),
            self.0.max_in_flight.load(Ordering::SeqCst),
        )
    }

    /// Starts or ends a downstream outage: while it lasts, the outage consumer fails every
    /// message with a retryable error.
    pub fn set_outage(&self, down: bool) {
        self.0.outage.store(down, Ordering::SeqCst);
    }

    /// Every job that has at least one attempt by `consumer`.
    pub fn handled_by(&self, consumer: &str) -> usize {
        let attempts = self.0.attempts.lock().unwrap_or_else(|e| e.into_inner());
        attempts
            .values()
            .filter(|list| list.iter().any(|a| a.consumer == consumer))
            .count()
    }

    /// Waits until the dead-letter consumer has seen `n` dead letters, or `timeout` passes,
    /// and returns those it saw.
    pub async fn wait_dead_letters(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Vec<DeadLetter<types::Job, types::JobHeaders>> {
        let seen = || {
            self.0
                .dead_letters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        };
        self.wait(timeout, || seen().len() >= n).await;
        seen()
    }

    /// How many times the dead-letter consumer saw job `id`.
    pub fn dead_letters_of(&self, id: &str) -> usize {
        let letters = self
            .0
            .dead_letters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        letters
            .iter()
            .filter(|l| l.typed().is_some_and(|d| d.payload().id.as_str() == id))
            .count()
    }

    /// Lets `n` held handlers finish.
    pub fn release(&self, n: usize) {
        self.0.gate.add_permits(n);
    }

    /// The batches the batch consumer saw, as job ids.
    pub fn batches(&self) -> Vec<Vec<String>> {
        self.0
            .batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

macro_rules! handle_with_recorder {
    ($($consumer:ident),* $(,)?) => {
        $(
            impl consumers::$consumer for Recorder {
                async fn handle(
                    &self,
                    delivery: Delivery<types::Job, types::JobHeaders>,
                ) -> Result<(), HandlerError> {
                    self.run(stringify!($consumer), delivery).await
                }
            }
        )*
    };
}

handle_with_recorder!(
    RunNone,
    RunRequeue,
    RunRequeueClassic,
    RunBackoff,
    RunJitter,
    RunShortLong,
    RunNative,
    RunDrop,
    RunForever,
    RunBackoffForever,
    RunSibling,
    RunBounded,
    RunSpin,
    RunOutage,
    RunChaos,
    RunCluster,
    RunSingle,
    RunFailing,
    RunPriority,
    RunOrdered,
);

/// Jobs as every consumer handles them; notes recorded.
impl consumers::RunMixed for Recorder {
    async fn job(
        &self,
        delivery: Delivery<types::Job, types::JobHeaders>,
    ) -> Result<(), HandlerError> {
        self.run("RunMixed", delivery).await
    }

    async fn note(
        &self,
        delivery: Delivery<types::Note, types::JobHeaders>,
    ) -> Result<(), HandlerError> {
        let id = delivery.payload().id.to_string();
        self.0
            .notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(id);
        self.0.changed.notify();
        if delivery.payload().text.as_str() == "refuse" {
            return Err(HandlerError::non_retryable("a note to refuse"));
        }
        Ok(())
    }
}

/// Records each dead letter as what it was: `job <id>`, `note <id>` or `raw`.
impl consumers::ReadMixedDead for Recorder {
    async fn handle(
        &self,
        failure: FailureContext,
        message: consumers::ReadMixedDeadMessage,
    ) -> Result<(), HandlerError> {
        let what = match message {
            consumers::ReadMixedDeadMessage::Job(job) => {
                format!("job {}", job.payload().id.as_str())
            }
            consumers::ReadMixedDeadMessage::Note(note) => {
                format!("note {}", note.payload().id.as_str())
            }
            consumers::ReadMixedDeadMessage::Raw(_) => "raw".to_owned(),
        };
        let mut dead = self.0.mixed_dead.lock().unwrap_or_else(|e| e.into_inner());
        dead.push((what, failure.reason));
        drop(dead);
        self.0.changed.notify();
        Ok(())
    }
}

impl Recorder {
    /// The dead letters `read_mixed_dead` read so far: what each was, and why it died.
    pub fn mixed_dead(&self) -> Vec<(String, Option<FailureReason>)> {
        let dead = self.0.mixed_dead.lock().unwrap_or_else(|e| e.into_inner());
        dead.clone()
    }

    /// The notes handled so far, by id.
    pub fn notes(&self) -> Vec<String> {
        self.0
            .notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl consumers::ReadDead for Recorder {
    async fn handle(
        &self,
        dead_letter: DeadLetter<types::Job, types::JobHeaders>,
    ) -> Result<(), HandlerError> {
        // A job whose id starts with `dl-fail` fails the dead-letter handler the first time.
        let fail = dead_letter.typed().is_some_and(|d| {
            let id = d.payload().id.as_str();
            let seen = self.dead_letters_of(id);
            id.starts_with("dl-fail") && seen == 0
        });
        self.0
            .dead_letters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dead_letter);
        self.0.changed.notify();
        if fail {
            return Err(HandlerError::retryable(std::io::Error::other(
                "the dead-letter store is down",
            )));
        }
        Ok(())
    }
}

impl consumers::QuotePrice for Recorder {
    async fn handle(
        &self,
        request: Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, RpcHandlerError<rpcs::QuotePriceError>> {
        consumers::QuotePrice::handle(&self.0.quoter, request).await
    }
}

impl consumers::RushQuote for Recorder {
    async fn handle(
        &self,
        request: Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, RpcHandlerError<warren_runtime::NoErrors>> {
        consumers::RushQuote::handle(&self.0.quoter, request).await
    }
}

impl consumers::LossyQuote for Recorder {
    async fn handle(
        &self,
        request: Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, RpcHandlerError<warren_runtime::NoErrors>> {
        consumers::LossyQuote::handle(&self.0.quoter, request).await
    }
}

impl consumers::RunBatch for Recorder {
    async fn handle_batch(
        &self,
        batch: Vec<Delivery<types::Job, types::JobHeaders>>,
    ) -> Result<(), HandlerError> {
        let ids = batch.iter().map(|d| d.payload().id.to_string()).collect();
        self.0
            .batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ids);
        let mut failed = false;
        for delivery in &batch {
            let attempt = self.record("RunBatch", delivery);
            let job = delivery.payload();
            let succeed_now = job
                .succeed_on_attempt
                .is_some_and(|n| attempt >= n as usize);
            failed |= job.behaviour == types::JobBehaviour::Retryable && !succeed_now;
        }
        if failed {
            return Err(HandlerError::retryable(std::io::Error::other(
                "the batch failed",
            )));
        }
        Ok(())
    }
}

/// A test's own broker state: connection, namespaced topology, worker, publishers.
///
/// Dropped without [`Harness::stop`] (a test that failed), its worker is stopped and its
/// queues and exchanges removed all the same (by the kit), so the shared broker does not
/// collect queues run after run.
pub struct Harness {
    /// The connection.
    pub connection: Connection,
    /// The topology, namespaced for this test.
    pub topology: warren_runtime::Topology,
    /// Typed publishers.
    pub publishers: Publishers,
    /// The handler of every consumer.
    pub recorder: Recorder,
    // Declared before `deployed`: dropped first, the worker stops before its queues go.
    worker: RunningWorker,
    /// The topology as the kit deployed it.
    pub deployed: Deployed,
    broker: TestBroker,
    _slot: Option<tokio::sync::SemaphorePermit<'static>>,
}

static SLOTS: Semaphore = Semaphore::const_new(3);

impl Harness {
    /// The running worker.
    pub fn worker(&self) -> &RunningWorker {
        &self.worker
    }

    /// Declares the contract under a fresh namespace and starts a worker on it.
    pub async fn start(test: &str) -> Self {
        Self::start_with(test, |worker| worker).await
    }

    /// Like [`Harness::start`], with the worker adjusted by `configure`.
    pub async fn start_with(test: &str, configure: impl FnOnce(Worker) -> Worker) -> Self {
        // A few harnesses at a time: each declares a whole topology, and a small broker
        // creating dozens of queues at once slows everything down.
        let slot = SLOTS
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let mut harness = Self::start_at(&amqp_url(), test, configure).await;
        harness._slot = Some(slot);
        harness
    }

    /// Like [`Harness::start`], with the worker running only the consumers `register` adds to
    /// it (through the generated `consumers::register` functions, handled by the recorder),
    /// rather than every consumer of the contract.
    pub async fn start_registering(
        test: &str,
        register: impl FnOnce(&Recorder, &mut Worker),
    ) -> Self {
        let slot = SLOTS
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let mut harness = Self::start_on(&amqp_url(), test, |worker| worker, register).await;
        harness._slot = Some(slot);
        harness
    }

    /// Like [`Harness::start_registering`], on the broker at `url` (a private one, say).
    pub async fn start_registering_at(
        url: &str,
        test: &str,
        register: impl FnOnce(&Recorder, &mut Worker),
    ) -> Self {
        Self::start_on(url, test, |worker| worker, register).await
    }

    /// Like [`Harness::start_with`], on the broker at `url` (a private one, say). Its
    /// connection reconnects quickly: within a second of the broker answering again.
    pub async fn start_at(url: &str, test: &str, configure: impl FnOnce(Worker) -> Worker) -> Self {
        Self::start_on(url, test, configure, |recorder, worker| {
            handlers(recorder).register(worker);
        })
        .await
    }

    /// Like [`Harness::start_at`], on a cluster: the contract is declared through
    /// `deploy` (a quorum queue with `leader_locator: client-local` gets its leader on the
    /// node of the first of them that answers), where the publishers publish too, and the
    /// worker runs on a connection of its own through `worker` (the first that answers, the
    /// others in turn when its node fails), whose health says which node it is on.
    pub async fn start_on_cluster(
        deploy: &[String],
        worker: &[String],
        test: &str,
        configure: impl FnOnce(Worker) -> Worker,
    ) -> (Self, Connection) {
        let urls: Vec<&str> = worker.iter().map(String::as_str).collect();
        let connection = warren_testkit::test_connection("warren-test-worker", &urls)
            .await
            .expect("a worker connection to the cluster");
        let worker_connection = connection.clone();
        let harness = Self::deploy_on(
            TestBroker::at_nodes(deploy).await,
            test,
            move |deployed| configure(Worker::new(connection, deployed.topology().clone())),
            |recorder, worker| handlers(recorder).register(worker),
        )
        .await;
        (harness, worker_connection)
    }

    /// Deploys the contract under a fresh namespace on the broker at `url`, and starts a
    /// worker configured by `configure` with the consumers `register` adds.
    async fn start_on(
        url: &str,
        test: &str,
        configure: impl FnOnce(Worker) -> Worker,
        register: impl FnOnce(&Recorder, &mut Worker),
    ) -> Self {
        let broker = TestBroker::at(url).await;
        Self::deploy_on(
            broker,
            test,
            |deployed| configure(deployed.worker()),
            register,
        )
        .await
    }

    /// Deploys the contract under a fresh namespace through `broker`, and starts the worker
    /// `worker` makes with the consumers `register` adds.
    async fn deploy_on(
        broker: TestBroker,
        test: &str,
        worker: impl FnOnce(&Deployed) -> Worker,
        register: impl FnOnce(&Recorder, &mut Worker),
    ) -> Self {
        let deployed = broker.deploy(test, &topology()).await;
        let publishers = Publishers::new(deployed.publisher().await);
        let recorder = Recorder::default();
        let mut worker = worker(&deployed);
        register(&recorder, &mut worker);
        let worker = deployed.start(worker);
        Self {
            connection: broker.connection().clone(),
            topology: deployed.topology().clone(),
            publishers,
            recorder,
            worker,
            deployed,
            broker,
            _slot: None,
        }
    }

    /// A namespaced name.
    pub fn name(&self, name: &str) -> String {
        self.deployed.name(name)
    }

    /// Publishes a job through the generated publisher.
    pub async fn submit(&self, target: &str, job: types::Job) {
        self.publishers
            .submit(target, &job, &headers())
            .await
            .expect("the job is published and confirmed");
    }

    /// Publishes raw bytes to the contract's exchange, bypassing every check, as a faulty
    /// or hostile producer would. The job headers are added to any in `properties`.
    pub async fn publish_raw(&self, routing_key: &str, body: &[u8], properties: BasicProperties) {
        self.publish_raw_to("jobs", routing_key, body, properties)
            .await;
    }

    /// Like [`Harness::publish_raw`], to `exchange` as the contract names it (`""`, the
    /// default exchange, routes to the queue named by `routing_key`, as warren's retry copies
    /// go).
    pub async fn publish_raw_to(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) {
        let mut headers = raw_headers();
        for (key, value) in properties.headers().iter().flat_map(|h| h.inner()) {
            headers.insert(key.clone(), value.clone());
        }
        let properties = properties.with_headers(headers).with_delivery_mode(2);
        self.deployed
            .publish_raw(exchange, routing_key, body, properties)
            .await;
    }

    /// Takes the dead letters, waiting until there are `n` or `timeout` passes.
    pub async fn dead_letters(&self, n: usize, timeout: Duration) -> Vec<QueuedDeadLetter> {
        self.deployed.take_dead_letters("dead", n, timeout).await
    }

    /// Ready messages in queue `name`.
    pub async fn ready(&self, name: &str) -> u32 {
        self.deployed.ready(name).await
    }

    /// The wait queues of `queue`, as the contract names them, with their delays.
    fn wait_queues_of(&self, queue: &str) -> Vec<(String, Duration)> {
        let of = self.name(queue);
        let namespace = self.deployed.namespace();
        self.topology
            .queues
            .iter()
            .filter_map(|wait| match &wait.role {
                QueueRole::Wait { queue, delay } if *queue == of => {
                    let name = wait.name.strip_prefix(namespace).unwrap_or(&wait.name);
                    Some((name.to_owned(), *delay))
                }
                _ => None,
            })
            .collect()
    }

    /// The wait queue of `queue` (a contract name) whose retries wait `delay`, as the
    /// contract names it.
    pub fn wait_queue(&self, queue: &str, delay: Duration) -> String {
        self.wait_queues_of(queue)
            .into_iter()
            .find_map(|(name, waits)| (waits == delay).then_some(name))
            .unwrap_or_else(|| panic!("`{queue}` has a wait queue of {delay:?}"))
    }

    /// The wait queues of `queue` (a contract name) holding retries, by their names on the
    /// broker, with how many: ready in them, and expired there but not yet dead-lettered
    /// back ([`quorum_queue_depths`], through `ctl`, `rabbitmqctl` on the broker).
    pub async fn held_retries(
        &self,
        queue: &str,
        ctl: impl FnOnce(&[&str]) -> String,
    ) -> BTreeMap<String, usize> {
        let depths = tokio::task::block_in_place(|| quorum_queue_depths(ctl));
        let mut held = BTreeMap::new();
        for (wait, _) in self.wait_queues_of(queue) {
            let name = self.name(&wait);
            let expired = depths.get(&name).map_or(0, |(_, expired)| *expired);
            let retries = self.ready(&wait).await as usize + expired;
            if retries > 0 {
                held.insert(name, retries);
            }
        }
        held
    }

    /// The retries waiting in the wait queues of `queue` (a contract name), taken from them
    /// (the test is over): the job ids each wait queue that holds any held. A retry the
    /// broker keeps past its delay is not lost, but held (RabbitMQ 3.10 may stop a quorum wait
    /// queue's dead-lettering); a test tells the two apart with this.
    pub async fn take_held_retries(&self, queue: &str) -> BTreeMap<String, Vec<String>> {
        let mut held = BTreeMap::new();
        for (wait, _) in self.wait_queues_of(queue) {
            let depth = self.ready(&wait).await;
            if depth == 0 {
                continue;
            }
            let taken = self
                .deployed
                .take_dead_letters(&wait, depth as usize, Duration::from_secs(1))
                .await;
            held.insert(wait, job_ids(&taken));
        }
        held
    }

    /// Stops the worker and takes up to `n` messages left in `queue` (a contract name), by
    /// job id: what the worker still held (unacknowledged) returns there as it stops. A
    /// confirmed message found here was never settled, which is not a loss; a test tells the
    /// two apart with this.
    pub async fn stop_worker_and_take_left(&mut self, queue: &str, n: usize) -> Vec<String> {
        self.shutdown_worker()
            .await
            .expect("the worker stops cleanly");
        if n == 0 {
            return Vec::new();
        }
        let left = self
            .deployed
            .take_dead_letters(queue, n, Duration::from_secs(5))
            .await;
        job_ids(&left)
    }

    /// Waits until the worker has ended by itself (failed, or its consumers all gone), at
    /// most `timeout`; whether it has.
    pub async fn worker_ended(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.worker.is_finished() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.worker.is_finished()
    }

    /// Stops the worker only, keeping the queues and their messages.
    pub async fn shutdown_worker(&mut self) -> Result<(), WorkerError> {
        self.worker.stop().await
    }

    /// Stops the worker, and removes the test's queues and exchanges.
    pub async fn stop(mut self) -> Result<(), WorkerError> {
        let outcome = self.worker.stop().await;
        self.deployed.cleanup().await;
        self.broker.close().await;
        outcome
    }
}

/// The headers of every test job, as a raw AMQP table for publishes that bypass warren.
pub fn raw_headers() -> FieldTable {
    let mut table = FieldTable::default();
    table.insert(
        ShortString::from("tenant"),
        AMQPValue::LongString("acme".into()),
    );
    table
}

/// Waits until `missing` is empty, or has not shrunk for 30 seconds (two minutes at most),
/// and returns what is still missing.
pub async fn until_settled(missing: &impl Fn() -> Vec<String>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = (usize::MAX, Instant::now());
    loop {
        let now = missing();
        if now.is_empty() || Instant::now() >= deadline {
            return now;
        }
        if now.len() < last.0 {
            last = (now.len(), Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(30) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The quorum queues of the broker `ctl` reaches (`rabbitmqctl` with the arguments given),
/// each with the messages it holds: those in it (ready or unacknowledged), and those expired
/// but not yet dead-lettered (`messages_dlx`). RabbitMQ's at-least-once dead-lettering keeps
/// an expired message, out of reach of AMQP and of `list_queues`, until the queue it goes to
/// confirms it, and publishes it again only after `dead_letter_worker_publisher_confirm_timeout`
/// (three minutes by default): a retry whose way back a killed node interrupted waits there.
/// A queue whose figures the node cannot give (a replica restarting) is left out.
pub fn quorum_queue_depths(
    ctl: impl FnOnce(&[&str]) -> String,
) -> BTreeMap<String, (usize, usize)> {
    let listed = ctl(&[
        "eval",
        "lists:foreach(fun(Q) -> try {resource, _, queue, N} = amqqueue:get_name(Q), \
         [{messages, M}, {messages_dlx, D}] = rabbit_amqqueue:info(Q, [messages, messages_dlx]), \
         io:format(\"~s\\t~p\\t~p~n\", [N, M, D]) catch _:_ -> ok end end, \
         [Q || Q <- rabbit_amqqueue:list(), amqqueue:get_type(Q) =:= rabbit_quorum_queue]).",
    ]);
    listed
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let name = fields.next()?;
            let count = |field: Option<&str>| field?.trim().parse::<usize>().ok();
            let depths = (count(fields.next())?, count(fields.next())?);
            Some((name.to_owned(), depths))
        })
        .collect()
}

/// The job ids of `messages` (those whose body is a job).
pub fn job_ids(messages: &[QueuedDeadLetter]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| {
            let body: serde_json::Value = serde_json::from_slice(&message.body).ok()?;
            Some(body["id"].as_str()?.to_owned())
        })
        .collect()
}

/// The headers every test job carries.
pub fn headers() -> types::JobHeaders {
    types::JobHeaders {
        tenant: "acme".to_owned(),
        priority: None,
    }
}

/// A job with `id` and `behaviour`.
pub fn job(id: &str, behaviour: types::JobBehaviour) -> types::Job {
    types::Job {
        id: id.try_into().expect("a non-empty id"),
        behaviour,
        succeed_on_attempt: None,
        retry_after_ms: None,
        amount: 10,
        sku: None,
        tags: Vec::new(),
    }
}

/// A header of a dead letter, as text.
pub fn header(message: &QueuedDeadLetter, key: &str) -> Option<String> {
    message.header(key)
}

/// What the connection's guard says it cut from `message`'s headers.
pub fn cut_detail(message: &QueuedDeadLetter) -> String {
    match message.headers.inner().get("x-headers-cut") {
        Some(AMQPValue::FieldTable(cut)) => match cut.inner().get("detail") {
            Some(AMQPValue::LongString(detail)) => detail.to_string(),
            other => format!("{other:?}"),
        },
        other => format!("no x-headers-cut table: {other:?}"),
    }
}
