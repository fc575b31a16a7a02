//! The retry path: how many messages per second go through a failure and its retry, and how
//! close ttl-backoff redeliveries come to their schedule.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use warren_runtime::{Connection, Delivery, HandlerError, Topology, Worker};

use crate::{Count, Handlers, Result, Round, consumers, order, publishers, types, windowed};

/// A handler that fails each message's first `fails` attempts (retryable), then succeeds,
/// recording when every attempt started.
#[derive(Clone)]
pub struct Failing(Arc<State>);

pub struct State {
    fails: u32,
    n: usize,
    attempts: Mutex<HashMap<String, Vec<Instant>>>,
    succeeded: Mutex<usize>,
    done: Notify,
}

impl Failing {
    /// For consumers that get no messages in a scenario.
    pub fn idle() -> Self {
        Self::new(0, usize::MAX)
    }

    fn new(fails: u32, n: usize) -> Self {
        Self(Arc::new(State {
            fails,
            n,
            attempts: Mutex::default(),
            succeeded: Mutex::new(0),
            done: Notify::new(),
        }))
    }

    fn handle(
        &self,
        delivery: &Delivery<types::BenchOrder>,
    ) -> std::result::Result<(), HandlerError> {
        let state = &self.0;
        let id = delivery.payload().order_id.to_string();
        state
            .attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id)
            .or_default()
            .push(Instant::now());
        if delivery.retry_count() < state.fails {
            return Err(HandlerError::retryable(std::io::Error::other(
                "failing on purpose",
            )));
        }
        let mut succeeded = state.succeeded.lock().unwrap_or_else(|e| e.into_inner());
        *succeeded += 1;
        if *succeeded == state.n {
            state.done.notify_one();
        }
        Ok(())
    }
}

macro_rules! failing_consumer {
    ($($consumer:ident),*) => {
        $(
            impl consumers::$consumer for Failing {
                async fn handle(
                    &self,
                    delivery: Delivery<types::BenchOrder>,
                ) -> std::result::Result<(), HandlerError> {
                    Failing::handle(self, &delivery)
                }
            }
        )*
    };
}

failing_consumer!(RetryRequeue, RetryBackoff, RetryTiming, RetryTimingJitter);

/// Publishes `n` orders to `queue` of `topology` (default exchange), `WINDOW` at a time.
async fn publish(
    connection: &Connection,
    topology: &Topology,
    queue: &str,
    n: usize,
) -> Result<()> {
    let publishers = publishers(connection, topology).await?;
    windowed((0..n).map(|i| {
        let publishers = publishers.clone();
        let queue = queue.to_owned();
        async move { publishers.to_queue(&queue, &order(i)).await }
    }))
    .await
}

/// A worker on `topology` running `failing` on every retry consumer.
struct Running {
    stop: warren_runtime::ShutdownHandle,
    task: tokio::task::JoinHandle<std::result::Result<(), warren_runtime::WorkerError>>,
}

impl Running {
    fn start(connection: &Connection, topology: &Topology, failing: &Failing) -> Self {
        let worker = Worker::new(connection.clone(), topology.clone());
        let stop = worker.shutdown_handle();
        let idle = Count::idle();
        let handlers = Handlers {
            burn_1: idle.clone(),
            burn_2: idle.clone(),
            burn_4: idle.clone(),
            consume_backlog: idle.clone(),
            consume_order: idle,
            retry_requeue: failing.clone(),
            retry_backoff: failing.clone(),
            retry_timing: failing.clone(),
            retry_timing_jitter: failing.clone(),
            // Idle: nothing calls it in this scenario.
            price_order: crate::rpc::Pricer,
        };
        let task = tokio::spawn(handlers.run(worker));
        Self { stop, task }
    }

    async fn stop(self) -> Result<()> {
        self.stop.shutdown();
        self.task.await??;
        Ok(())
    }
}

/// Waits until `failing` saw all its successes, for at most `timeout`.
async fn succeeded(failing: &Failing, timeout: Duration) -> Result<()> {
    tokio::time::timeout(timeout, failing.0.done.notified())
        .await
        .map_err(|_| format!("not every message succeeded within {timeout:?}").into())
}

/// The rounds of `n` messages through one failure and one retry on `queue`: their plain
/// confirmed publish, then the retry path alone, from a worker's start on the filled queue
/// to the last success.
pub async fn throughput(
    connection: &Connection,
    topology: &Topology,
    queue: &str,
    n: usize,
) -> Result<(Round, Round)> {
    let failing = Failing::new(1, n);
    let publishing = Round::measure(async {
        let started = Instant::now();
        publish(connection, topology, queue, n).await?;
        Ok(started.elapsed())
    })
    .await?;
    let mut running = None;
    let retrying = Round::measure(async {
        let started = Instant::now();
        running = Some(Running::start(connection, topology, &failing));
        succeeded(&failing, Duration::from_secs(600)).await?;
        Ok(started.elapsed())
    })
    .await?;
    if let Some(running) = running {
        running.stop().await?;
    }
    Ok((publishing, retrying))
}

/// What the timing scenario measured: errors of the redelivery delays against the schedule.
pub struct Timing {
    pub delays: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

/// Fails each of `n` messages three times on a ttl-backoff queue scheduled 200, 400, 800 ms,
/// and measures each redelivery's delay against its schedule. With `jitter`, a delay
/// anywhere in `[d/2, d]` is on time, and the error is how far outside that window it fell.
pub async fn timing(
    connection: &Connection,
    topology: &Topology,
    queue: &str,
    n: usize,
    jitter: bool,
) -> Result<Timing> {
    let failing = Failing::new(3, n);
    // Published to a running worker, as messages reach a service: the cohort fails as it
    // arrives rather than all at once.
    let running = Running::start(connection, topology, &failing);
    publish(connection, topology, queue, n).await?;
    succeeded(&failing, Duration::from_secs(120)).await?;
    running.stop().await?;
    let schedule = [200u64, 400, 800].map(Duration::from_millis);
    let mut errors = Vec::new();
    let attempts = failing.0.attempts.lock().unwrap_or_else(|e| e.into_inner());
    for times in attempts.values() {
        for (k, pair) in times.windows(2).enumerate().take(schedule.len()) {
            let actual = pair[1] - pair[0];
            let due = schedule[k];
            let earliest = if jitter { due / 2 } else { due };
            let error = if actual > due {
                actual - due
            } else {
                earliest.saturating_sub(actual)
            };
            errors.push(error);
        }
    }
    errors.sort();
    let at = |q: f64| {
        errors
            .get(((errors.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    Ok(Timing {
        delays: errors.len(),
        p50: at(0.5),
        p99: at(0.99),
        max: errors.last().copied().unwrap_or_default(),
    })
}
