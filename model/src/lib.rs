//! The one model of a warren contract's topology, shared by the generator (`warren-codegen`)
//! and the runtime (`warren-runtime`), so the two cannot drift apart.
//!
//! It holds each fact once: the exchanges, queues and bindings of a contract ([`Topology`]),
//! the retry arithmetic (backoff delays, jitter buckets, wait tiers and their names), the
//! `x-` arguments a queue is declared with (derived from its typed fields by
//! [`Queue::declare_arguments`]), the AMQP limits warren checks against ([`limits`]), the
//! headers warren writes ([`headers`]), why a message was dead-lettered
//! ([`FailureReason`]), and what generated code hands the runtime for each consumer,
//! publisher and rpc ([`ConsumerSpec`], [`Publication`], [`RpcTarget`]).
//!
//! The generator builds a [`Topology`] from a contract and writes it into generated code
//! (through `quote::ToTokens`, behind the `tokens` feature); the runtime declares it and
//! applies its retry policies. Only the standard library is needed.
//!
//! ```
//! use std::time::Duration;
//! use warren_model::{Backoff, Exhausted, Queue, QueueKind, Retry, Topology};
//!
//! // A quorum queue retried after 1s, 2s and 4s (no jitter), dead-lettering after that.
//! let backoff = Backoff::new(
//!     "orders",
//!     3,
//!     Duration::from_secs(1),
//!     Duration::from_secs(30),
//!     2.0,
//!     false,
//!     Exhausted::DeadLetter,
//! );
//! let mut orders = Queue::new("orders", QueueKind::Quorum);
//! orders.retry = Retry::TtlBackoff(backoff);
//! let mut queues = orders.wait_queues();
//! queues.insert(0, orders);
//! let topology = Topology::new(Vec::new(), queues, Vec::new());
//! assert_eq!(topology.validate(), Ok(()));
//!
//! let names: Vec<&str> = topology.queues.iter().map(|q| q.name.as_str()).collect();
//! assert_eq!(names, ["orders", "orders.wait.1s", "orders.wait.2s", "orders.wait.4s"]);
//! // What the broker is told: the wait queue's TTL comes from its delay.
//! let wait = topology.queue("orders.wait.2s").expect("declared");
//! assert_eq!(
//!     wait.declare_arguments()["x-message-ttl"],
//!     warren_model::ArgValue::Int(2000),
//! );
//! ```

#![deny(missing_docs)]

mod duration;
pub mod headers;
pub mod limits;
mod reason;
mod retry;
pub mod rpc;
mod spec;
mod spelled;
#[cfg(feature = "tokens")]
mod tokens;
mod topic;
mod topology;

pub use duration::{DURATION_UNITS, DurationLabel};
pub use reason::FailureReason;
pub use retry::{
    Backoff, DEFAULT_INITIAL_DELAY, DEFAULT_JITTER, DEFAULT_MAX_DELAY, DEFAULT_MAX_RETRIES,
    DEFAULT_MULTIPLIER, Exhausted, JITTER_BUCKETS, MAX_WAIT_TIERS, MIN_MULTIPLIER,
    QUORUM_UNLIMITED, Retry, WaitTier, backoff_delay, delay_tiers, jitter_bucket, wait_queue_name,
};
pub use spec::{
    BatchSpec, CircuitBreaker, Compression, ConsumerSpec, DEFAULT_CONTENT_TYPE, MessageSelector,
    OrderingKey, Publication, RpcTarget, key_placeholder,
};
pub use spelled::UnknownName;
pub use topic::topic_matches;
pub use topology::argument;
pub use topology::{
    ArgValue, Arguments, Binding, DeadLetter, DeliveryLimit, Destination, Exchange, ExchangeKind,
    HOLDING_FOR, HOLDING_SUFFIX, Import, LeaderLocator, Namespace, OnPoison, Queue, QueueKind,
    QueueRole, RetryCountSource, Topology, TopologyError, arguments, holding_queue_name,
};
