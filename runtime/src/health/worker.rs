//! A worker's health and its consumers': phases, subscriptions, breakers, retries held past
//! their time, and the connections the worker runs on.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::{ConnectionHealth, LastError, RelayHealth};
use crate::Connection;
use crate::sync::lock;

/// Where a circuit breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerState {
    /// Deliveries flow.
    Closed,
    /// Consuming is paused for the cool-down.
    Open,
    /// One probe delivery is let through.
    HalfOpen,
}

impl BreakerState {
    /// The value of the `warren_circuit_breaker_state` gauge: 0, 1 or 2.
    pub fn gauge(self) -> f64 {
        match self {
            Self::Closed => 0.0,
            Self::Open => 1.0,
            Self::HalfOpen => 2.0,
        }
    }

    fn from_u8(value: u8) -> Self {
        match value {
            1 => Self::Open,
            2 => Self::HalfOpen,
            _ => Self::Closed,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            Self::Closed => 0,
            Self::Open => 1,
            Self::HalfOpen => 2,
        }
    }
}

/// Where a worker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkerPhase {
    /// [`crate::Worker::run`] has not been called yet.
    NotStarted,
    /// Running.
    Running,
    /// Shut down on request ([`crate::ShutdownHandle::shutdown`]).
    Stopped,
    /// Ended with an error (see the worker's `last_error`).
    Failed,
}

impl WorkerPhase {
    fn from_u8(value: u8) -> Self {
        match value {
            1 => Self::Running,
            2 => Self::Stopped,
            3 => Self::Failed,
            _ => Self::NotStarted,
        }
    }
}

/// One consumer's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerHealth {
    /// The consumer's name in the contract.
    pub name: String,
    /// The queue it reads (namespaced).
    pub queue: String,
    /// Whether it is subscribed to its queue now (a `basic.consume` is active).
    pub subscribed: bool,
    /// Its circuit breaker's state; `None` when it has none.
    pub breaker: Option<BreakerState>,
    /// Why it last lost or failed to get its subscription, and when.
    pub last_error: Option<LastError>,
    /// Failures it sent round again since the worker started: retry copies, and requeues
    /// counted as retries.
    pub retries: u64,
    /// Wait queues of its queue holding retries longer than their delay allows, as last
    /// checked ([`crate::Worker::wait_queue_check`]): their dead-lettering stopped (on a
    /// cluster, after a wait queue's leader changed), and the retries wait for an operator
    /// (docs/operations.md, "Retries held in a wait queue"). Empty when none does.
    pub overdue_retries: Vec<OverdueRetries>,
}

/// A wait queue holding retries past their time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverdueRetries {
    /// The wait queue (namespaced).
    pub wait_queue: String,
    /// The messages in it when it was checked.
    pub messages: u32,
    /// How long its oldest retry is past the time it should have returned, in milliseconds.
    pub overdue_ms: u64,
}

/// A snapshot of a worker's health: [`HealthHandle::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerHealth {
    /// Whether the worker takes deliveries: it runs, its connection is up, and every consumer
    /// is subscribed. An open circuit breaker does not make it unready: the consumer is
    /// subscribed and pauses on purpose (see `consumers[].breaker`).
    pub ready: bool,
    /// Whether the worker is alive: not yet started or running, and not ended (failed or
    /// stopped). A worker reconnecting is alive and not ready; a failed one should be
    /// restarted.
    pub live: bool,
    /// Where the worker is in its life.
    pub phase: WorkerPhase,
    /// The connection it consumes on.
    pub connection: ConnectionHealth,
    /// The connection retry and dead-letter copies are published on, when it is another
    /// ([`crate::Worker::copies_connection`]).
    pub copies_connection: Option<ConnectionHealth>,
    /// Every registered consumer.
    pub consumers: Vec<ConsumerHealth>,
    /// The outbox relays the worker runs (`Worker::relay`); a relay's backlog does not make
    /// the worker unready: alert on its lag.
    pub relays: Vec<RelayHealth>,
    /// Why the worker failed, when it did.
    pub last_error: Option<LastError>,
}

impl WorkerHealth {
    /// [`WorkerHealth::ready`].
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// [`WorkerHealth::live`].
    pub fn live(&self) -> bool {
        self.live
    }
}

/// A consumer's health as its task updates it.
#[derive(Debug)]
pub(crate) struct ConsumerState {
    name: &'static str,
    queue: String,
    has_breaker: bool,
    subscribed: AtomicBool,
    breaker: AtomicU8,
    last_error: Mutex<Option<LastError>>,
    retries: AtomicU64,
    overdue: Mutex<Vec<OverdueRetries>>,
}

impl ConsumerState {
    pub(crate) fn new(name: &'static str, queue: String, has_breaker: bool) -> Self {
        Self {
            name,
            queue,
            has_breaker,
            subscribed: AtomicBool::new(false),
            breaker: AtomicU8::new(BreakerState::Closed.to_u8()),
            last_error: Mutex::new(None),
            retries: AtomicU64::new(0),
            overdue: Mutex::new(Vec::new()),
        }
    }

    /// The consumer's name in the contract.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The wait queues found holding retries past their time at the last check.
    pub(crate) fn overdue(&self, found: Vec<OverdueRetries>) {
        *lock(&self.overdue) = found;
    }

    /// Subscribed now.
    pub(crate) fn subscribed(&self) {
        self.subscribed.store(true, Ordering::Release);
    }

    /// Not subscribed, for `why` (`None`: stopping, no error).
    pub(crate) fn unsubscribed(&self, why: Option<&str>) {
        self.subscribed.store(false, Ordering::Release);
        if let Some(why) = why {
            self.error(why);
        }
    }

    /// A failure sent round again.
    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Remembers an error.
    pub(crate) fn error(&self, why: &str) {
        *lock(&self.last_error) = Some(LastError::now(why));
    }

    pub(crate) fn breaker(&self, state: BreakerState) {
        self.breaker.store(state.to_u8(), Ordering::Release);
    }

    fn snapshot(&self) -> ConsumerHealth {
        ConsumerHealth {
            name: self.name.to_owned(),
            queue: self.queue.clone(),
            subscribed: self.subscribed.load(Ordering::Acquire),
            breaker: self
                .has_breaker
                .then(|| BreakerState::from_u8(self.breaker.load(Ordering::Acquire))),
            last_error: lock(&self.last_error).clone(),
            retries: self.retries.load(Ordering::Relaxed),
            overdue_retries: lock(&self.overdue).clone(),
        }
    }
}

/// A worker's health as it and its consumers update it.
#[derive(Debug)]
pub(crate) struct WorkerState {
    connection: Connection,
    copies: Mutex<Option<Connection>>,
    phase: AtomicU8,
    consumers: Mutex<Vec<Arc<ConsumerState>>>,
    relays: Mutex<Vec<Arc<Mutex<RelayHealth>>>>,
    last_error: Mutex<Option<LastError>>,
}

impl WorkerState {
    pub(crate) fn new(connection: Connection) -> Self {
        Self {
            connection,
            copies: Mutex::new(None),
            phase: AtomicU8::new(0),
            consumers: Mutex::new(Vec::new()),
            relays: Mutex::new(Vec::new()),
            last_error: Mutex::new(None),
        }
    }

    /// Adds a relay's health, read at each snapshot.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn add_relay(&self, relay: Arc<Mutex<RelayHealth>>) {
        lock(&self.relays).push(relay);
    }

    pub(crate) fn copies(&self, connection: Connection) {
        *lock(&self.copies) = Some(connection);
    }

    /// Adds a consumer, not subscribed yet.
    pub(crate) fn add(&self, consumer: Arc<ConsumerState>) {
        lock(&self.consumers).push(consumer);
    }

    /// The consumers, in the order they were added.
    pub(crate) fn consumers(&self) -> Vec<Arc<ConsumerState>> {
        lock(&self.consumers).clone()
    }

    pub(crate) fn running(&self) {
        self.phase.store(1, Ordering::Release);
    }

    /// The worker ended with `outcome`.
    pub(crate) fn ended(&self, outcome: &Result<(), crate::WorkerError>) {
        match outcome {
            Ok(()) => self.phase.store(2, Ordering::Release),
            Err(error) => {
                let chain = crate::error::Chain(error).to_string();
                *lock(&self.last_error) = Some(LastError::now(&chain));
                self.phase.store(3, Ordering::Release);
            }
        }
        for consumer in self.consumers() {
            consumer.unsubscribed(None);
        }
    }
}

/// A cheap, clonable view of a worker's health, taken with
/// [`crate::Worker::health_handle`] before the worker runs, and read while it does.
#[derive(Debug, Clone)]
pub struct HealthHandle {
    pub(crate) state: Arc<WorkerState>,
}

impl HealthHandle {
    /// The worker's health now.
    pub fn snapshot(&self) -> WorkerHealth {
        let state = &self.state;
        let phase = WorkerPhase::from_u8(state.phase.load(Ordering::Acquire));
        let connection = state.connection.health();
        let copies_connection = lock(&state.copies).as_ref().map(Connection::health);
        let consumers: Vec<ConsumerHealth> =
            state.consumers().iter().map(|c| c.snapshot()).collect();
        let ready = phase == WorkerPhase::Running
            && connection.connected
            && copies_connection.as_ref().is_none_or(|c| c.connected)
            && consumers.iter().all(|c| c.subscribed);
        WorkerHealth {
            ready,
            live: matches!(phase, WorkerPhase::NotStarted | WorkerPhase::Running),
            phase,
            connection,
            copies_connection,
            consumers,
            relays: lock(&state.relays)
                .iter()
                .map(|relay| lock(relay).clone())
                .collect(),
            last_error: lock(&state.last_error).clone(),
        }
    }
}
