//! A worker running a test's handlers in the background.

use std::time::Duration;

use warren_runtime::health::WorkerHealth;
use warren_runtime::{HealthHandle, ShutdownHandle, Worker, WorkerError};

/// A [`Worker`] running in the background (see [`crate::Deployed::start`]), until
/// [`RunningWorker::stop`]. Dropped without being stopped, it is shut down and its task
/// aborted: unacknowledged messages return to their queues.
#[derive(Debug)]
pub struct RunningWorker {
    shutdown: ShutdownHandle,
    health: HealthHandle,
    task: Option<tokio::task::JoinHandle<Result<(), WorkerError>>>,
}

impl RunningWorker {
    /// Spawns `worker` on the current Tokio runtime.
    pub fn spawn(worker: Worker) -> Self {
        Self {
            shutdown: worker.shutdown_handle(),
            health: worker.health_handle(),
            task: Some(tokio::spawn(worker.run())),
        }
    }

    /// The worker's health now: each consumer's subscription, breaker, last error and
    /// retries, and its relays'.
    pub fn health(&self) -> WorkerHealth {
        self.health.snapshot()
    }

    /// Waits until consumer `consumer` has sent failures round again `n` times (retry
    /// copies, or requeues counted as retries), and returns how many it has: for a test
    /// whose one failing message is to be retried `n` times before it checks what happened.
    ///
    /// # Panics
    ///
    /// When `timeout` passes first, or the worker has no such consumer.
    pub async fn wait_until_retried(&self, consumer: &str, n: u64, timeout: Duration) -> u64 {
        let retries = || {
            let health = self.health();
            let found = health.consumers.iter().find(|c| c.name == consumer);
            match found {
                Some(health) => health.retries,
                None => panic!("the worker has no consumer `{consumer}`"),
            }
        };
        crate::wait_until(&format!("`{consumer}` retried {n} times"), timeout, || {
            retries() >= n
        })
        .await;
        retries()
    }

    /// Whether it has stopped by itself (its `run` returned: see [`RunningWorker::stop`] for
    /// why).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|task| task.is_finished())
    }

    /// Asks the worker to stop (handlers in flight finish, within its drain timeout) and
    /// returns how its `run` ended. Stopping it again returns `Ok(())`.
    ///
    /// # Panics
    ///
    /// When a handler's panic escaped the worker (it never should: the worker catches them).
    pub async fn stop(&mut self) -> Result<(), WorkerError> {
        self.shutdown.shutdown();
        match self.task.take() {
            Some(task) => match task.await {
                Ok(outcome) => outcome,
                Err(error) => panic!("the worker task ended abnormally: {error}"),
            },
            None => Ok(()),
        }
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        self.shutdown.shutdown();
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
