//! The runtime warren-generated code runs on.
//!
//! Connect, declare a contract's topology, publish, and run its consumers:
//!
//! ```no_run
//! use warren_runtime::{Connection, Publisher, Topology, Worker};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Your crate calls the generated `topology()`; an empty topology stands in for it here.
//! let topology = Topology::default();
//! let url = "amqp://guest:guest@127.0.0.1:5672/%2f";
//! let connection = Connection::connect(url, "billing").await?; // reconnects by itself
//! // Exchanges, queues with their arguments, bindings, retry and dead-letter queues; declared
//! // again by itself after the connection is lost and restored.
//! warren_runtime::declare(&connection, &topology).await?;
//!
//! // The generated `Publishers::new(publisher)` wraps this with one method per publisher.
//! let publisher = Publisher::new(&connection).await?;
//!
//! let worker = Worker::new(connection, topology);
//! let stop = worker.shutdown_handle(); // `stop.shutdown()` drains handlers and ends `run`
//! // The generated `Handlers { .. }.run(worker)` registers one handler per consumer first.
//! worker.run().await?;
//! # Ok(())
//! # }
//! ```
//!
//! A contract (`warren.yaml` plus JSON Schema files) is turned into Rust by `warren-codegen`;
//! the generated code names only this crate. It provides:
//! - [`Message`]: what the generated marker type of each message says about it (name,
//!   content type, payload and headers types, JSON Schemas);
//! - [`Delivery`], [`HandlerError`]: what a handler receives and returns. A handler decides
//!   *whether* a failure can ever succeed ([`HandlerError::retryable`] or
//!   [`HandlerError::non_retryable`]); the queue's retry policy decides *how* retries happen;
//! - [`model`]: the description of exchanges, queues (with their arguments), bindings and
//!   retry infrastructure that generated `topology()` functions return;
//! - [`Publisher`]: publishes typed payloads with confirms and `mandatory`;
//! - [`Worker`], [`Handler`], [`BatchHandler`]: run consumers.

#[path = "fuzz.rs"]
#[doc(hidden)]
pub mod __fuzz;
mod amqp;
mod connection;
mod declare;
mod delivery;
mod error;
mod message;
mod publisher;
mod routing_key;
mod schema;
mod sync;
mod wire;
mod worker;

pub use connection::{Connection, ConnectionBuilder};
pub use declare::{DeclareError, declare, delete, verify};
pub use delivery::Delivery;
pub use error::{HandlerError, PublishError, WorkerError};
pub use message::{Message, NoHeaders};
pub use model::Topology;
pub use publisher::{Compression, DEFAULT_PUBLISH_TIMEOUT, Publication, PublishOptions, Publisher};
pub use routing_key::{KeyPart, RoutingKey};
pub use schema::SchemaError;
pub use worker::{
    BatchHandler, BatchSpec, CircuitBreaker, ConsumerSpec, DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES, Handler, ShutdownHandle, Worker,
};

/// The topology model shared with the generator: exchanges, queues, bindings, retry
/// policies and their arithmetic, header names and failure reasons.
pub use warren_model as model;

/// The AMQP client warren runs on, for connections and channels you create yourself.
pub use lapin;

/// What generated code refers to, so a user's crate depends on `warren-runtime` alone.
/// Not a stable API.
#[doc(hidden)]
pub mod __codegen {
    pub use chrono;
    pub use regress;
    pub use serde;
    pub use serde_json;
    pub use uuid;
}
