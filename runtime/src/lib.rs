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
//! // Publishes to the topology's exchanges, in its namespace, if it has one
//! // (`Topology::namespaced`). The generated `Publishers::new(publisher)` wraps this with one
//! // method per publisher.
//! let publisher = Publisher::new(&connection, &topology).await?;
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
//! - [`FailureContext`], [`DeadLetter`]: a message's failure history, as a retried delivery
//!   ([`Delivery::failure`]) and a dead-letter consumer see it, the latter typed or raw;
//! - [`model`]: the description of exchanges, queues (with their arguments), bindings and
//!   retry infrastructure that generated `topology()` functions return;
//! - [`Publisher`]: publishes typed payloads with confirms and `mandatory`;
//! - [`Worker`]: runs consumers (the generated `Handlers { .. }.run(worker)` adds them);
//! - [`rpc`]: typed request/reply ([`RpcClient`] calls, a server registered on a
//!   [`Worker`] like a consumer);
//! - [`dead_letters`]: count, peek at, redrive and purge a dead-letter queue (what
//!   `warren dlq` runs).
//!
//! # One namespace, set once
//!
//! [`Topology::namespaced`] prefixes every name of a topology, so several services or test
//! runs share a broker unseen by each other. It is the only place a namespace is set:
//! [`declare`], [`Worker::new`] and [`Publisher::new`] all take the topology, and with it
//! its namespace.
//!
//! # Settings: one convention
//!
//! What can be configured is set with consuming setters named after the setting, without a
//! `with_` prefix, each returning `Self` so they chain; where something is opened, a terminal
//! method does it (`connect()`):
//!
//! ```no_run
//! # async fn run(topology: warren_runtime::Topology) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use warren_runtime::{Connection, PublishOptions, Publisher, Worker};
//!
//! let connection = Connection::builder("billing")
//!     .url("amqp://guest:guest@rabbit-1:5672/%2f")
//!     .reconnect_backoff(Duration::from_millis(200), Duration::from_secs(30))
//!     .connect()
//!     .await?;
//! let publisher = Publisher::new(&connection, &topology)
//!     .await?
//!     .timeout(Duration::from_secs(5));
//! let options = PublishOptions::default().message_id("order-42");
//! let worker = Worker::new(connection, topology)
//!     .drain_timeout(Duration::from_secs(10))
//!     .max_body_bytes(1 << 20);
//! # Ok(()) }
//! ```
//!
//! # Not for your code
//!
//! The `codegen` module (hidden from these docs) holds what only generated code names: the
//! consumer and publication settings it fills in from the contract, and the crates typify's
//! output refers to. It is not a stable API.

// The library's surface is what lib.rs exports; inside the private modules an item is
// `pub(crate)`, so `pub` there would be a promise nobody can see.
#![warn(unreachable_pub)]

// Only in builds for fuzzing (the `fuzz/` workspace), the property test standing in for it and
// the decode benchmark: a user's build of the runtime does not contain it.
#[cfg(any(test, feature = "fuzzing"))]
#[path = "fuzz.rs"]
#[doc(hidden)]
pub mod __fuzz;
mod adapters;
mod amqp;
mod base64;
mod clients;
mod clock;
mod codec;
mod confirms;
mod connection;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub mod database;
pub mod dead_letters;
mod declare;
mod delivery;
mod error;
mod failure;
pub mod health;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub mod inbox;
mod include;
pub mod management;
mod message;
pub mod metrics;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub mod outbox;
mod pattern;
pub mod plan;
mod publish_all;
mod publish_time;
mod publisher;
mod retry_after;
mod rooted;
mod routing_key;
pub mod rpc;
mod schema;
mod serde_struct;
mod sink;
mod sync;
mod text;
mod trace;
mod typify;
mod wire;
mod worker;

/// A registered handler tried without a broker ([`Worker::trial`], the `trial` feature):
/// what `warren-testkit`'s `Trial` runs.
#[cfg(feature = "trial")]
pub mod trial {
    pub use crate::worker::trial::{Arrival, TRIAL_REPLY_TO, TrialError, Verdict};
}

pub use connection::{Connection, ConnectionBuilder};
pub use dead_letters::{DeadLetterError, DeadLetterQueue};
pub use declare::{DeclareError, ImportProblem, TopologyEntity, declare, delete, verify};
pub use delivery::{DeadLetter, DeadMessage, RawMessage};
pub use delivery::{Delivery, DeliveryBuilder};
pub use error::{
    Chain as ErrorChain, HandlerError, MessagePart, PublishError, ShortField, WorkerError,
};
pub use failure::FailureContext;
pub use health::HealthHandle;
pub use message::{Message, NoHeaders};
pub use model::Topology;
pub use publish_all::publish_all;
pub use publisher::{DEFAULT_PUBLISH_TIMEOUT, PublishOptions, Publisher};
pub use retry_after::{MAX_RETRY_AFTER, parse_retry_after};
pub use rpc::{CallOptions, NoErrors, RpcClient, RpcError, RpcHandlerError};
pub use schema::SchemaError;
pub use sink::Sink;
pub use worker::{DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_BODY_BYTES, ShutdownHandle, Worker};

/// The topology model shared with the generator: exchanges, queues, bindings, retry
/// policies and their arithmetic, header names and failure reasons.
pub use warren_model as model;

/// The AMQP client warren runs on, for connections and channels you create yourself.
pub use lapin;

/// What generated code refers to and a user does not: the consumer and publication settings
/// a generated file fills in from the contract, and the crates typify's output names, so a
/// user's crate depends on `warren-runtime` alone.
///
/// **Not a stable API.** Only code generated by the `warren-codegen` of the same version
/// may use it; it changes without notice between versions. (As tonic's `codegen` module.)
#[doc(hidden)]
pub mod codegen {
    pub use crate::__warren_adapters as adapters;
    pub use crate::__warren_builder as builder;
    pub use crate::__warren_declared_errors as declared_errors;
    pub use crate::__warren_message as message;
    pub use crate::__warren_publisher as publisher;
    pub use crate::__warren_publishers as publishers;
    pub use crate::__warren_register as register;
    pub use crate::__warren_rpc_clients as rpc_clients;
    pub use crate::__warren_serde_struct as serde_struct;
    pub use crate::__warren_string_enum as string_enum;
    pub use crate::__warren_string_newtype as string_newtype;
    pub use crate::adapters::DeliveryOf;
    /// What [`serde_struct!`] expands to calls: the field names found, a field read, the
    /// fields written.
    pub mod struct_fields {
        pub use crate::serde_struct::{
            Entry, Field, Fields, given_or_missing, next_value, serialize,
        };
    }
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub use crate::inbox::{InboxBatchHandler, InboxHandler, add_inbox, add_inbox_batch};
    pub use crate::rpc::{
        DeclaredErrors, NoErrors, Operation, RpcHandler, call, decode_payload, encode_payload,
    };
    pub use crate::sink::publish;
    pub use crate::typify::ConversionError;
    pub use crate::worker::{
        BatchHandler, DeadLetterHandler, Erased, Handler, Member, Running,
        SeveralDeadLetterHandler, SeveralHandler, add, add_batch, add_dead_letters, add_server,
        add_several, add_several_dead_letters, member, run,
    };

    pub use chrono;
    /// What typify's output names `regress`: a `Regex` matching a constrained string's
    /// `pattern` as `regress` does, without `regress` where it is a plain anchored sequence.
    pub mod regress {
        pub use crate::pattern::Regex;
    }
    pub use serde;
    pub use serde_json;
    pub use uuid;
}
