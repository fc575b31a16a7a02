//! Running consumers: the worker.
//!
//! Each consumer gets its own channel with its prefetch (`basic.qos`), a semaphore for its
//! concurrency, and a confirm-mode channel for retry and dead-letter copies. A delivery goes
//! through decode (decompress within a cap, content type, JSON, JSON Schema, types) → handler
//! → settle; a delivery that cannot be decoded never reaches the handler and is never
//! retried. See [`crate::HandlerError`] for the retry model.

mod acks;
mod breaker;
mod consume;
mod dead_letter_consumer;
pub(crate) mod decode;
mod erased;
mod lanes;
mod observe;
mod policy;
mod presence;
mod reply_nodes;
mod rpc;
mod runner;
pub(crate) mod settle;
mod several;
#[cfg(feature = "trial")]
pub(crate) mod trial;
mod wait_watch;
mod work;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

pub use dead_letter_consumer::DeadLetterHandler;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use dead_letter_consumer::dead_letter;
pub use erased::Erased;
pub use several::{
    Member, SeveralDeadLetterHandler, SeveralHandler, add_several, add_several_dead_letters, member,
};

use crate::failure::RetryBudgets;
use crate::health::{ConsumerState, HealthHandle, WorkerHealth, WorkerState};
use crate::model::{BatchSpec, ConsumerSpec, Queue, Topology};
use crate::{Connection, Delivery, HandlerError, Message, WorkerError};

/// How long shutdown waits for in-flight handlers by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest body a worker accepts by default, before and after decompression.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Handles messages `M` one at a time. Generated consumer traits are adapted to this.
pub trait Handler<M: Message>: Send + Sync + 'static {
    /// Handles one delivery.
    fn handle(
        &self,
        delivery: Delivery<M::Payload, M::Headers>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

/// Handles messages `M` in batches.
pub trait BatchHandler<M: Message>: Send + Sync + 'static {
    /// Handles one batch; an error applies to every message of the batch, and each is then
    /// retried or dead-lettered by its own retry count.
    fn handle_batch(
        &self,
        batch: Vec<Delivery<M::Payload, M::Headers>>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;

    /// Whether `delivery` may join a batch, checked as it arrives: an error settles it
    /// alone, as any handler error of its own would be (a poison error dead-letters it), and
    /// the batch goes on without it, so one message cannot fail its neighbours. Every
    /// delivery joins by default.
    fn admit(&self, delivery: &Delivery<M::Payload, M::Headers>) -> Result<(), HandlerError> {
        let _ = delivery;
        Ok(())
    }
}

/// Stops a running worker: it stops consuming, waits for in-flight handlers up to its drain
/// timeout, and closes its channels; what was not acknowledged is redelivered by the broker.
///
/// ```no_run
/// # async fn run(connection: warren_runtime::Connection, topology: warren_runtime::Topology) -> Result<(), Box<dyn std::error::Error>> {
/// let worker = warren_runtime::Worker::new(connection, topology);
/// let stop = worker.shutdown_handle();
/// tokio::spawn(async move {
///     // Or on a signal, or at a deploy's request.
///     tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
///     stop.shutdown();
/// });
/// worker.run().await?; // returns once drained
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    sender: Arc<watch::Sender<bool>>,
}

impl ShutdownHandle {
    /// Asks the worker to shut down; [`Worker::run`] returns once it has.
    pub fn shutdown(&self) {
        self.sender.send_replace(true);
    }
}

/// How often wait queues are checked for retries held past their time, by default.
const DEFAULT_WAIT_CHECK: Duration = Duration::from_secs(30);

/// Settings shared by every consumer of a worker.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub drain_timeout: Duration,
    pub max_body_bytes: usize,
    pub publish_timeout: Duration,
    pub validate: bool,
    /// How often the wait queues of ttl-backoff queues are checked for retries held past
    /// their time; `None`: never.
    pub wait_check: Option<Duration>,
    /// Broker users besides the worker's own whose publish times are believed.
    pub trusted_publishers: Arc<BTreeSet<String>>,
    /// The topology's retry budgets, which another stack's dead letters are judged by.
    pub budgets: Arc<RetryBudgets>,
}

impl Settings {
    /// Message `M`'s compiled schemas, or `None` with validation off: what decoding it
    /// validates against.
    pub(crate) fn validators<M: Message>(
        &self,
    ) -> Result<Option<Arc<crate::schema::Validators>>, WorkerError> {
        match self.validate {
            true => Ok(Some(crate::schema::Validators::of::<M>()?)),
            false => Ok(None),
        }
    }
}

/// What a consumer task needs to run.
pub(crate) struct Context {
    pub connection: Connection,
    /// Where retry and dead-letter copies are published (by default `connection`).
    pub copies: Connection,
    /// The consumer's queue, as the topology has it (namespaced); shared, never copied.
    pub queue: Arc<Queue>,
    /// The first queue (by name) the queue's dead-lettering reaches in the topology: where
    /// a dead letter its dead-letter exchange cannot route is sent directly.
    pub dead_letter_queue: Option<String>,
    pub settings: Settings,
    pub shutdown: watch::Receiver<bool>,
    /// The consumer's health, as the worker's [`HealthHandle`] reads it.
    pub health: Arc<ConsumerState>,
}

type Task = Pin<Box<dyn Future<Output = Result<(), WorkerError>> + Send>>;

/// A registered consumer, its message type erased.
trait Registered: Send {
    fn spec(&self) -> &ConsumerSpec;
    fn start(self: Box<Self>, context: Context) -> Task;
    /// Decodes and handles the bench's delivery without a broker ([`Worker::trial`]).
    #[cfg(feature = "trial")]
    fn trial<'a>(&'a self, bench: &'a trial::Bench<'a>) -> trial::Trying<'a>;
}

/// Runs a contract's consumers on one connection, each on channels of its own.
///
/// Built on a topology (its queues' retry and dead-letter policies, and its namespace),
/// configured with setters, given its handlers by the generated `Handlers` (every consumer
/// generated) or by the generated `consumers::register` functions (one consumer each; a
/// consumer registered twice is refused when the worker starts):
///
/// ```no_run
/// # async fn run(connection: warren_runtime::Connection, topology: warren_runtime::Topology) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// let worker = warren_runtime::Worker::new(connection, topology)
///     .drain_timeout(Duration::from_secs(10))
///     .max_body_bytes(1 << 20);
/// // Your crate: `Handlers { fulfil_order: Fulfilment, .. }.run(worker).await?`, which
/// // registers each consumer and then runs; or one consumer at a time, with
/// // `consumers::register::fulfil_order(&mut worker, Fulfilment)`, then:
/// worker.run().await?;
/// # Ok(()) }
/// ```
pub struct Worker {
    connection: Connection,
    copies: Option<Connection>,
    topology: Topology,
    /// Each consumer with its health, in the order they were added.
    consumers: Vec<(Box<dyn Registered>, Arc<ConsumerState>)>,
    settings: Settings,
    shutdown: Arc<watch::Sender<bool>>,
    health: Arc<WorkerState>,
    /// The outbox relays it runs beside its consumers, stopped when it ends.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    relays: Vec<crate::outbox::RelayHandle>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.consumers.iter().map(|(c, _)| c.spec().name).collect();
        f.debug_struct("Worker")
            .field("consumers", &names)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker for `topology` (its queues' retry and dead-letter policies, and its
    /// namespace) on `connection`.
    pub fn new(connection: Connection, topology: Topology) -> Self {
        Self {
            health: Arc::new(WorkerState::new(connection.clone())),
            connection,
            copies: None,
            consumers: Vec::new(),
            #[cfg(any(feature = "postgres", feature = "sqlite"))]
            relays: Vec::new(),
            settings: Settings {
                drain_timeout: DEFAULT_DRAIN_TIMEOUT,
                max_body_bytes: DEFAULT_MAX_BODY_BYTES,
                publish_timeout: crate::DEFAULT_PUBLISH_TIMEOUT,
                validate: true,
                wait_check: Some(DEFAULT_WAIT_CHECK),
                trusted_publishers: Arc::default(),
                budgets: Arc::new(RetryBudgets::of(&topology)),
            },
            topology,
            shutdown: Arc::new(watch::channel(false).0),
        }
    }

    /// How long shutdown waits for in-flight handlers before closing anyway (default 30 s);
    /// their messages are then redelivered.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.settings.drain_timeout = timeout;
        self
    }

    /// How often the wait queues of each consumer's ttl-backoff queue are checked for
    /// retries held past their time (by default every 30 s; `None`: never). One held longer
    /// than its delay and a grace as long again (at least 10 s) means the wait queue's
    /// dead-lettering stopped, as it may on a cluster after the wait queue's leader changed:
    /// it is logged, shown in [`crate::health::ConsumerHealth::overdue_retries`] and in
    /// [`crate::metrics::WAIT_QUEUE_OVERDUE`]. A check is a passive declare per wait queue,
    /// and a `basic.get` of the oldest message, returned at once, when there is one.
    pub fn wait_queue_check(mut self, every: Option<Duration>) -> Self {
        self.settings.wait_check = every;
        self
    }

    /// Broker users whose publish times the end-to-end latency
    /// ([`crate::metrics::END_TO_END_LATENCY`]) believes, besides the users of the worker's
    /// own connections. A publish time is believed only on a message whose `user_id` the
    /// broker checked (it refuses a `user_id` that is not the publisher's user): warren's
    /// publishers set it when the broker takes their URL's user; give another stack's user
    /// here once it sets `user_id` too. Any other message's publish time is a claim anyone
    /// can write, and its latency is not recorded.
    ///
    /// ```no_run
    /// # fn run(worker: warren_runtime::Worker) {
    /// let worker = worker.trusted_publishers(["orders-api", "checkout-node"]);
    /// # }
    /// ```
    pub fn trusted_publishers(
        mut self,
        users: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.settings.trusted_publishers = Arc::new(users.into_iter().map(Into::into).collect());
        self
    }

    /// The largest body accepted, before and after decompression (default 64 MiB); a larger
    /// one is poison (`too-large`).
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.settings.max_body_bytes = bytes;
        self
    }

    /// Publishes retry and dead-letter copies on `connection` instead of the consuming one.
    ///
    /// RabbitMQ blocks a connection that publishes while a memory or disk alarm lasts, and a
    /// blocked connection sends nothing, acks included. With copies on a connection of their
    /// own, an alarm holds up only the copies, and the worker keeps acknowledging what it
    /// handled, which is what drains the queues and clears the alarm. Recommended in
    /// production; the default shares one connection.
    ///
    /// ```no_run
    /// # async fn run(topology: warren_runtime::Topology) -> Result<(), warren_runtime::lapin::Error> {
    /// use warren_runtime::{Connection, Worker};
    /// let url = "amqp://guest:guest@localhost:5672/%2f";
    /// let consuming = Connection::connect(url, "billing-consume").await?;
    /// let publishing = Connection::connect(url, "billing-copies").await?;
    /// let worker = Worker::new(consuming, topology).copies_connection(publishing);
    /// # Ok(()) }
    /// ```
    pub fn copies_connection(mut self, connection: Connection) -> Self {
        self.health.copies(connection.clone());
        self.copies = Some(connection);
        self
    }

    /// How long a retry or dead-letter copy waits for its confirm (default 30 s); without
    /// one, the original is returned to its queue.
    pub fn publish_timeout(mut self, timeout: Duration) -> Self {
        self.settings.publish_timeout = timeout;
        self
    }

    /// Whether deliveries are validated against their JSON Schemas (default on). Off, a body
    /// only has to deserialize into its generated type: constraints the type does not
    /// express (bounds, lengths, patterns, formats) are no longer checked, so a message
    /// breaking them reaches the handler. For producers you trust, when validation is the
    /// measured bottleneck.
    pub fn schema_validation(mut self, validate: bool) -> Self {
        self.settings.validate = validate;
        self
    }

    /// The topology the worker runs against.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The connection the worker consumes on.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// A handle that stops [`Worker::run`].
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            sender: self.shutdown.clone(),
        }
    }

    /// A cheap, clonable handle on the worker's health, to take before [`Worker::run`] (which
    /// takes the worker) and read while it runs: see [`HealthHandle::snapshot`].
    pub fn health_handle(&self) -> HealthHandle {
        HealthHandle {
            state: self.health.clone(),
        }
    }

    /// The worker's health now (not ready: it has not run yet).
    pub fn health(&self) -> WorkerHealth {
        self.health_handle().snapshot()
    }

    /// Adds a consumer, listed in the worker's health (not subscribed yet): every kind of
    /// consumer is added here, so none runs unwatched.
    fn register(&mut self, consumer: Box<dyn Registered>) {
        let spec = consumer.spec();
        let queue = self.topology.qualified(spec.queue);
        let state = Arc::new(ConsumerState::new(
            spec.name,
            queue,
            spec.circuit_breaker.is_some(),
        ));
        self.health.add(state.clone());
        self.consumers.push((consumer, state));
    }

    /// Adds a consumer handling messages one at a time, which `handler` decodes and handles.
    ///
    /// Not generic, so that the consumer's code is compiled here ([`erased`]).
    fn add(&mut self, spec: ConsumerSpec, handler: Arc<dyn erased::Dispatch>) {
        self.register(Box::new(consume::Single::new(spec, handler)));
    }

    /// Adds a dead-letter consumer.
    fn add_dead_letters<M: Message, H: DeadLetterHandler<M>>(
        &mut self,
        spec: ConsumerSpec,
        handler: H,
    ) {
        self.register(Box::new(dead_letter_consumer::DeadLetters::<M, H>::new(
            spec, handler,
        )));
    }

    /// Adds the server of an RPC operation.
    fn add_server<O: crate::rpc::Operation, H: crate::rpc::RpcHandler<O>>(
        &mut self,
        spec: ConsumerSpec,
        handler: H,
    ) {
        self.register(Box::new(rpc::Server::<O, H>::new(spec, handler)));
    }

    /// Adds a consumer handling messages in batches.
    fn add_batch<M: Message, H: BatchHandler<M>>(
        &mut self,
        spec: ConsumerSpec,
        batch: BatchSpec,
        handler: H,
    ) {
        self.register(Box::new(consume::Batched::<M, H>::new(
            spec, batch, handler,
        )));
    }

    /// Runs an outbox relay beside the consumers (`outbox.relay(publisher).spawn()`): its
    /// health is part of the worker's ([`crate::health::WorkerHealth::relays`]), and it is
    /// stopped, its round finished, when the worker's run ends. A worker of relays alone, with
    /// no consumer, runs until it is shut down.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub fn relay(&mut self, relay: crate::outbox::RelayHandle) -> &mut Self {
        self.health.add_relay(relay.shared_health());
        self.relays.push(relay);
        self
    }

    /// Runs every consumer until [`ShutdownHandle::shutdown`] is called or a consumer fails.
    /// On shutdown each consumer stops consuming, drains its in-flight handlers (up to the
    /// drain timeout) and closes its channels.
    pub async fn run(self) -> Result<(), WorkerError> {
        self.running().await
    }

    /// [`Worker::run`]'s body, compiled here ([`crate::rooted`]).
    fn running(self) -> Running {
        Box::pin(async move {
            let health = self.health.clone();
            health.running();
            crate::metrics::describe();
            let outcome = self.run_consumers().await;
            health.ended(&outcome);
            outcome
        })
    }

    async fn run_consumers(self) -> Result<(), WorkerError> {
        // Before anything is consumed: a topology built or edited by hand whose raw arguments
        // contradict its typed fields, or whose wait tiers are not its policy's, is refused
        // here, at start, rather than failing one message at a time.
        self.topology.validate()?;
        // Resolve every queue first: a consumer of an unknown queue stops nothing midway.
        let mut ready = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (consumer, health) in self.consumers {
            let spec = *consumer.spec();
            if !names.insert(spec.name) {
                return Err(WorkerError::DuplicateConsumer {
                    consumer: spec.name.to_owned(),
                });
            }
            let name = self.topology.qualified(spec.queue);
            let queue = self
                .topology
                .queue(&name)
                .cloned()
                .map(Arc::new)
                .ok_or_else(|| WorkerError::UnknownQueue {
                    consumer: spec.name.to_owned(),
                    queue: name.clone(),
                })?;
            ready.push((consumer, queue, health));
        }
        // The queues apart: a registered consumer is not `Sync`, so none is held across the
        // checks' awaits.
        let queues: Vec<Arc<Queue>> = ready.iter().map(|(_, queue, _)| queue.clone()).collect();
        let queues = queues.iter().map(|queue| &**queue);
        presence::refuse_missing_retry_topology(&self.connection, &self.topology, queues).await?;
        let mut tasks = tokio::task::JoinSet::new();
        for (consumer, queue, health) in ready {
            let dead_letter_queue = self.topology.reached_by_dead_letters(&queue).pop_first();
            let context = Context {
                connection: self.connection.clone(),
                copies: self
                    .copies
                    .clone()
                    .unwrap_or_else(|| self.connection.clone()),
                queue,
                dead_letter_queue,
                settings: self.settings.clone(),
                shutdown: self.shutdown.subscribe(),
                health,
            };
            let waits = wait_watch::wait_queues_of(&self.topology, &context.queue.name);
            if let (Some(every), false) = (self.settings.wait_check, waits.is_empty()) {
                tasks.spawn(wait_watch::watch(
                    context.connection.clone(),
                    context.queue.name.clone(),
                    waits,
                    context.health.clone(),
                    every,
                    self.shutdown.subscribe(),
                ));
            }
            tasks.spawn(consumer.start(context));
        }
        let mut outcome = Ok(());
        while let Some(finished) = tasks.join_next().await {
            let result = finished.unwrap_or_else(|e| Err(WorkerError::Panicked(e)));
            if let Err(error) = result {
                // One consumer failing stops the others: the worker is not half running.
                if outcome.is_ok() {
                    self.shutdown.send_replace(true);
                    outcome = Err(error);
                }
            }
        }
        #[cfg(any(feature = "postgres", feature = "sqlite"))]
        {
            // A worker of relays alone runs them until it is shut down, as it would run
            // consumers; it does not end as soon as it starts.
            if names.is_empty() && !self.relays.is_empty() {
                let mut shutdown = self.shutdown.subscribe();
                let _ = shutdown.wait_for(|stopping| *stopping).await;
            }
            // The consumers are done; what they wrote to an outbox is still relayed until now.
            for relay in self.relays {
                relay.stop().await;
            }
        }
        outcome
    }
}

/// Adds a consumer handling messages `M` one at a time to `worker`: what the generated
/// `consumers::register` functions call (`warren_runtime::codegen::add`); not a stable API.
///
/// Each of these functions takes the message's (or operation's) marker as a value, which
/// names its type as a turbofish would, in a line that reads as the others. This one takes
/// the handler as an [`Erased`], whatever its type: the consumer is compiled with the
/// message alone (`runtime/src/worker/erased.rs`).
pub fn add<M: Message>(worker: &mut Worker, _message: M, spec: ConsumerSpec, handler: Erased<M>) {
    worker.add(spec, Arc::new(handler));
}

/// A worker's run, boxed: what the generated `Handlers::run` returns
/// (`warren_runtime::codegen::Running`); not a stable API.
pub type Running = crate::rooted::Rooted<'static, Result<(), WorkerError>>;

/// Runs `worker` (see [`Worker::run`]): what the generated `Handlers::run` returns
/// (`warren_runtime::codegen::run`), a future of a type that names no handler; not a
/// stable API.
pub fn run(worker: Worker) -> Running {
    worker.running()
}

/// Adds a consumer handling messages in batches to `worker`: what the generated
/// `consumers::register` functions call (`warren_runtime::codegen::add_batch`); not a stable
/// API.
pub fn add_batch<M: Message, H: BatchHandler<M>>(
    worker: &mut Worker,
    _message: M,
    spec: ConsumerSpec,
    batch: BatchSpec,
    handler: H,
) {
    worker.add_batch::<M, H>(spec, batch, handler);
}

/// Adds a dead-letter consumer to `worker`: every message of its queue reaches `handler` as a
/// [`crate::DeadLetter`], poison included. What the generated `consumers::register` functions of
/// a `dead_letters: true` consumer call (`warren_runtime::codegen::add_dead_letters`); not a
/// stable API.
pub fn add_dead_letters<M: Message, H: DeadLetterHandler<M>>(
    worker: &mut Worker,
    _message: M,
    spec: ConsumerSpec,
    handler: H,
) {
    worker.add_dead_letters::<M, H>(spec, handler);
}

/// Adds the server of operation `O` to `worker`, consuming the request queue of `spec`:
/// what the generated `consumers::register` functions of an operation call
/// (`warren_runtime::codegen::add_server`); not a stable API.
///
/// The server is a consumer like any other (prefetch, concurrency, circuit breaker, the
/// queue's retry policy, health and metrics), with the rules of [`crate::rpc`]'s docs. A reply
/// goes to the default exchange with the request's `reply-to` as routing key: RabbitMQ's
/// direct reply-to, or the name of a queue the caller reads (classic RPC, allowed), never
/// another exchange.
pub fn add_server<O: crate::rpc::Operation, H: crate::rpc::RpcHandler<O>>(
    worker: &mut Worker,
    _operation: O,
    spec: ConsumerSpec,
    handler: H,
) {
    worker.add_server::<O, H>(spec, handler);
}
