//! The service's handlers, on the code warren generates from `warren.yaml` (by build.rs):
//! `types` (the payloads), `messages`, `Publishers`, `consumers` (one trait per consumer),
//! `Handlers` and `topology()`. `cargo doc --open` shows all of it.

warren_runtime::include_generated!("tasks");

// `--features dynamic-linking`: the binary and the tests take warren-runtime from its shared
// library (see Cargo.toml).
#[cfg(feature = "dynamic-linking")]
use warren_dylib as _;

use types::{TaskCreated, TaskCreatedKind};
use warren_runtime::{Delivery, HandlerError};

/// Runs each task by its kind. Replace the bodies with your own work.
///
/// A handler decides *whether* a failure can ever succeed: `HandlerError::retryable` (a
/// timeout, a service down) is retried as the queue's policy says, with growing delays;
/// `HandlerError::non_retryable` (the task can never succeed) goes to the dead-letter queue
/// at once. A message that does not match its schema never reaches the handler.
pub struct Tasks;

impl consumers::RunTasks for Tasks {
    async fn handle(&self, delivery: Delivery<TaskCreated>) -> Result<(), HandlerError> {
        let task = delivery.payload();
        match task.kind {
            TaskCreatedKind::Report => {
                println!(
                    "ran report {} (retry {})",
                    task.task_id,
                    delivery.retry_count()
                );
                Ok(())
            }
            TaskCreatedKind::Export => Err(HandlerError::retryable(std::io::Error::other(
                "the export service timed out",
            ))),
        }
    }
}
