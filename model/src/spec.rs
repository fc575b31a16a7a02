//! What generated code hands the runtime for each consumer, publisher and rpc of a contract:
//! how a consumer consumes ([`ConsumerSpec`], with its [`BatchSpec`], [`CircuitBreaker`] and
//! [`OrderingKey`])
//! and where a message goes ([`Publication`], [`RpcTarget`], with its [`Compression`]).
//!
//! The generator fills these in from a contract and writes them into generated code through
//! `quote::ToTokens` (the `tokens` feature), the runtime reads them: one definition, so a
//! field added here fails to compile in the one place that does not write or read it.
//!
//! Names are a type parameter: the generator holds `String`s, generated code `&'static
//! str` (the default), and a publish fills in the routing key it built at run time.

use std::time::Duration;

use crate::spelled::spelled;

/// How one consumer of a contract consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerSpec<S = &'static str> {
    /// The consumer's name in the contract.
    pub name: S,
    /// The queue it reads (before any namespace).
    pub queue: S,
    /// Unacknowledged deliveries the broker may send ahead.
    pub prefetch: u16,
    /// Deliveries (or batches) handled at once: on a multi-thread runtime, handlers running
    /// in parallel, whether they await or not (see `docs/runtime.md`).
    pub concurrency: u16,
    /// Pauses consuming during a downstream outage; `None` never pauses.
    pub circuit_breaker: Option<CircuitBreaker>,
    /// Messages with the same key are handled one at a time, in the order they arrived,
    /// while messages of other keys run up to `concurrency`. `None`: no order is kept
    /// beyond what `concurrency: 1` gives.
    pub ordering_key: Option<OrderingKey<S>>,
}

/// How a consumer of several messages recognises one of them on a delivery that carries no
/// `type` property (warren's publishers set it; another stack may not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageSelector<S = &'static str> {
    /// The routing key the message was published with matches this topic pattern
    /// (`order.*.placed`; `*` one word, `#` zero or more).
    RoutingKey(S),
    /// The header (first) has this value (second), as text.
    Header(S, S),
}

impl<S> ConsumerSpec<S> {
    /// Consumer `name` of `queue`, with its prefetch and concurrency, no circuit breaker and
    /// no ordering key: how generated code starts each consumer's spec, adding only what the
    /// contract sets.
    pub const fn new(name: S, queue: S, prefetch: u16, concurrency: u16) -> Self {
        Self {
            name,
            queue,
            prefetch,
            concurrency,
            circuit_breaker: None,
            ordering_key: None,
        }
    }

    /// With a circuit breaker.
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.circuit_breaker = Some(breaker);
        self
    }

    /// With an ordering key.
    pub fn ordering_key(mut self, key: OrderingKey<S>) -> Self {
        self.ordering_key = Some(key);
        self
    }
}

/// Where a consumer reads the key that orders its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderingKey<S = &'static str> {
    /// The payload value at a JSON pointer (`/customer_id`).
    Payload(S),
    /// An AMQP header's value (`tenant`).
    Header(S),
}

/// A consumer's outage guard. During a downstream outage every message fails, and "retry,
/// then dead-letter" would empty the queue into the dead-letter queue. After `failures`
/// consecutive retryable failures (handler errors marked retryable, and panics) the breaker
/// opens: the consumer takes no new deliveries for `cool_down`, then lets one through as a
/// probe. A handled probe closes the breaker; a failed one opens it for another cool-down.
/// Messages that failed are still settled by the queue's retry policy; messages not yet
/// taken wait in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreaker {
    /// Consecutive retryable failures that open the breaker (at least 1).
    pub failures: u32,
    /// How long the breaker stays open before the probe.
    pub cool_down: Duration,
}

/// How a batch consumer gathers its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSpec {
    /// Most messages per batch.
    pub size: u16,
    /// Longest wait for a batch to fill before it is handled as it is.
    pub timeout: Duration,
}

spelled! {
    /// Body compression, as a publisher in the contract declares it; its spelling is the
    /// `content-encoding` it is sent with.
    pub enum Compression {
        /// gzip (`content-encoding: gzip`).
        Gzip => "gzip",
        /// zlib deflate (`content-encoding: deflate`).
        Deflate => "deflate",
    }
}

/// The placeholder a word of a routing key stands for, `{name}` giving `name`; `None` for a
/// literal word. A contract's key holds each placeholder as a whole dot-separated word
/// (`order.{region}.placed`): the generator refuses any other use of braces in a key with
/// placeholders, and a publish fills each in with the value of its method's parameter.
pub fn key_placeholder(word: &str) -> Option<&str> {
    word.strip_prefix('{')?.strip_suffix('}')
}

/// The content type of a message whose contract names none.
pub const DEFAULT_CONTENT_TYPE: &str = "application/json";

/// Where and how one message is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publication<S = &'static str> {
    /// The exchange (`""` is the default exchange).
    pub exchange: S,
    /// The routing key as the contract writes it, `{placeholders}` and all (see
    /// [`key_placeholder`]); a publish fills them in.
    pub routing_key: S,
    /// Body compression.
    pub compression: Option<Compression>,
    /// The highest `max_priority` of the queues the publication can reach (`None`: none
    /// declares one), which a publish's priority is checked against.
    pub max_priority: Option<u8>,
    /// Where in the payload the ordering key is (a JSON pointer): messages written to an
    /// outbox with the same key are relayed in the order they were written. `None`: in no
    /// particular order.
    pub ordering_key: Option<S>,
}

impl<S> Publication<S> {
    /// A publication to `exchange` with `routing_key`, uncompressed, with no priority and no
    /// ordering key.
    pub const fn to(exchange: S, routing_key: S) -> Self {
        Self {
            exchange,
            routing_key,
            compression: None,
            max_priority: None,
            ordering_key: None,
        }
    }
}

/// Where an rpc's requests go and how long a call waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcTarget<S = &'static str> {
    /// The exchange (`""` is the default exchange, with the request queue's name as key).
    pub exchange: S,
    /// The routing key, as [`Publication::routing_key`].
    pub routing_key: S,
    /// The contract's timeout.
    pub timeout: Duration,
    /// The highest `max_priority` of the queues the requests reach (`None`: no priorities).
    pub max_priority: Option<u8>,
}
