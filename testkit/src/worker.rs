//! A worker running a test's handlers in the background.

use warren_runtime::{ShutdownHandle, Worker, WorkerError};

/// A [`Worker`] running in the background (see [`crate::Deployed::start`]), until
/// [`RunningWorker::stop`]. Dropped without being stopped, it is shut down and its task
/// aborted: unacknowledged messages return to their queues.
#[derive(Debug)]
pub struct RunningWorker {
    shutdown: ShutdownHandle,
    task: Option<tokio::task::JoinHandle<Result<(), WorkerError>>>,
}

impl RunningWorker {
    /// Spawns `worker` on the current Tokio runtime.
    pub fn spawn(worker: Worker) -> Self {
        let shutdown = worker.shutdown_handle();
        Self {
            shutdown,
            task: Some(tokio::spawn(worker.run())),
        }
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
