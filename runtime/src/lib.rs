//! The runtime warren-generated code runs on.
//!
//! A contract (`warren.yaml` plus JSON Schema files) is turned into Rust by `warren-codegen`;
//! the generated code names only this crate. It provides:
//! - [`Message`]: what the generated marker type of each message says about it (name,
//!   content type, payload and headers types, JSON Schemas);
//! - [`Delivery`], [`HandlerError`]: what a handler receives and returns. A handler decides
//!   *whether* a failure can ever succeed ([`HandlerError::retryable`] or
//!   [`HandlerError::non_retryable`]); the queue's retry policy decides *how* retries happen;
//! - [`topology`]: the description of exchanges, queues (with their arguments), bindings and
//!   retry infrastructure that generated `topology()` functions return;
//! - [`Publisher`]: publishes typed payloads with confirms and `mandatory`;
//! - [`Worker`], [`Handler`], [`BatchHandler`]: run consumers.

mod delivery;
mod error;
mod headers;
mod message;
mod publisher;
mod routing_key;
pub mod topology;
mod worker;

pub use delivery::Delivery;
pub use error::{HandlerError, PublishError, WorkerError};
pub use message::{Message, NoHeaders};
pub use publisher::{Compression, Publication, Publisher};
pub use routing_key::{KeyPart, RoutingKey};
pub use topology::Topology;
pub use worker::{BatchHandler, BatchSpec, ConsumerSpec, Handler, Worker};

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
