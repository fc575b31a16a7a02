//! Running consumers.

use std::future::Future;
use std::time::Duration;

use lapin::Connection;

use crate::{Delivery, HandlerError, Message, Topology, WorkerError};

/// How one consumer of a contract consumes: what a generated `Handlers::register` fills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerSpec {
    /// The consumer's name in the contract.
    pub name: &'static str,
    /// The queue it reads.
    pub queue: &'static str,
    /// Unacknowledged deliveries the broker may send ahead.
    pub prefetch: u16,
    /// Handlers running at once.
    pub concurrency: u16,
}

/// Batch settings of a batch consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSpec {
    /// Most messages per batch.
    pub size: u16,
    /// Longest wait for a batch to fill before it is handled as it is.
    pub timeout: Duration,
}

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
    /// Handles one batch; an error applies to every message of the batch.
    fn handle_batch(
        &self,
        batch: Vec<Delivery<M::Payload, M::Headers>>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

/// Runs a contract's consumers on one connection, each on its own channel.
pub struct Worker {
    connection: Connection,
    topology: Topology,
    consumers: Vec<ConsumerSpec>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("consumers", &self.consumers)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker for `topology` (its queues' retry and dead-letter policies) on `connection`.
    pub fn new(connection: Connection, topology: Topology) -> Self {
        Self {
            connection,
            topology,
            consumers: Vec::new(),
        }
    }

    /// The topology the worker runs against.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The connection the worker consumes on.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Adds a consumer handling messages one at a time.
    pub fn add<M: Message, H: Handler<M>>(&mut self, spec: ConsumerSpec, handler: H) {
        drop(handler);
        self.consumers.push(spec);
    }

    /// Adds a consumer handling messages in batches.
    pub fn add_batch<M: Message, H: BatchHandler<M>>(
        &mut self,
        spec: ConsumerSpec,
        batch: BatchSpec,
        handler: H,
    ) {
        let _ = batch;
        drop(handler);
        self.consumers.push(spec);
    }

    /// Runs every consumer until the worker is shut down or fails.
    pub async fn run(self) -> Result<(), WorkerError> {
        for spec in &self.consumers {
            if self.topology.queue(spec.queue).is_none() {
                return Err(WorkerError::UnknownQueue {
                    consumer: spec.name.to_owned(),
                    queue: spec.queue.to_owned(),
                });
            }
        }
        Err(WorkerError::Unsupported)
    }
}
