//! Errors: what handlers return, and what publishing and running workers can fail with.

use std::fmt;
use std::time::Duration;

use crate::model::FailureReason;

type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a handler failed, and whether trying again could ever help.
///
/// The handler decides *whether* a failure is worth retrying; the queue's retry policy in the
/// contract decides *how*:
///
/// | returned | outcome |
/// |---|---|
/// | `Ok(())` | acknowledged |
/// | [`HandlerError::non_retryable`] | dead-lettered at once, whatever the retry mode |
/// | [`HandlerError::retryable`], or any error converted with `?` | the queue's retry mode decides |
/// | [`HandlerError::retry_after`] | retried, no sooner than the delay where the queue can wait (ttl-backoff) |
///
/// Any error converts into a retryable `HandlerError` with `?`, so an unclassified failure
/// is retried. Mark the deterministic ones (a business rule refusing the message) with
/// [`HandlerError::non_retryable`].
///
/// ```
/// use warren_runtime::HandlerError;
///
/// fn charge(amount: i64) -> Result<(), HandlerError> {
///     if amount < 0 {
///         // Dead-lettered at once: no retry makes a negative amount valid.
///         return Err(HandlerError::non_retryable("a negative amount"));
///     }
///     // Any other error is retryable through `?`.
///     std::fs::read("/nonexistent/ledger")?;
///     Ok(())
/// }
///
/// let refused = charge(-1).unwrap_err();
/// assert!(!refused.is_retryable());
/// assert_eq!(refused.cause().to_string(), "a negative amount");
/// assert!(charge(5).unwrap_err().is_retryable());
/// ```
pub struct HandlerError {
    retryable: bool,
    /// The least a retry waits, as the handler asked ([`HandlerError::retry_after`]).
    retry_after: Option<Duration>,
    cause: Source,
    /// Set when warren itself refuses the message before the handler's work (an inbox
    /// consumer's message without a key): settled as poison is, with this reason.
    poison: Option<FailureReason>,
}

impl HandlerError {
    /// A failure that may succeed later (a downstream service is down, a lock timed out).
    pub fn retryable(cause: impl Into<Source>) -> Self {
        Self {
            retryable: true,
            retry_after: None,
            cause: cause.into(),
            poison: None,
        }
    }

    /// A failure that may succeed after `delay` (an HTTP 429 or 503 with `Retry-After`, a
    /// rate limit): retried as [`HandlerError::retryable`] is, counting as a retry of the
    /// queue's budget. On a `ttl-backoff` queue the retry waits in the shortest wait tier at
    /// least `delay` long, or the longest when none is (`max_delay` caps it); `immediate-requeue`
    /// and `quorum-native` queues have nowhere to wait, so the message comes back at once
    /// and the worker warns, once per consumer. [`crate::parse_retry_after`] reads the header.
    pub fn retry_after(delay: Duration, cause: impl Into<Source>) -> Self {
        Self {
            retry_after: Some(delay),
            ..Self::retryable(cause)
        }
    }

    /// A failure that can never succeed (the order does not exist, the amount is negative):
    /// the message is dead-lettered at once.
    pub fn non_retryable(cause: impl Into<Source>) -> Self {
        Self {
            retryable: false,
            retry_after: None,
            cause: cause.into(),
            poison: None,
        }
    }

    /// A message refused for `reason` before any handler's work, settled as poison is
    /// (dead-lettered, or dropped under `on_poison: drop`), never retried.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn poison(reason: FailureReason, cause: impl Into<Source>) -> Self {
        Self {
            retryable: false,
            retry_after: None,
            cause: cause.into(),
            poison: Some(reason),
        }
    }

    /// The reason warren refused the message for ([`HandlerError::poison`]), if it did.
    pub(crate) fn poison_reason(&self) -> Option<FailureReason> {
        self.poison
    }

    /// Whether the queue's retry policy may try again.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The least a retry should wait ([`HandlerError::retry_after`]).
    pub fn retry_delay(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The error the handler failed with.
    ///
    /// (Not named `source`: `HandlerError` is not itself a [`std::error::Error`], since any
    /// error converts into it with `?`, and a method of that name would read as
    /// [`std::error::Error::source`], the error *behind* an error. This is the failure
    /// itself; its own `source()` chain is the standard one.)
    pub fn cause(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.cause.as_ref()
    }

    /// Takes the error the handler failed with.
    pub fn into_cause(self) -> Source {
        self.cause
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        Self::retryable(error)
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerError")
            .field("retryable", &self.retryable)
            .field("retry_after", &self.retry_after)
            .field("cause", &self.cause)
            .field("poison", &self.poison)
            .finish()
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.retryable {
            "retryable"
        } else {
            "non-retryable"
        };
        write!(f, "{kind}: {}", self.cause)
    }
}

/// Which part of a message an error is about.
///
/// ```
/// use warren_runtime::{MessagePart, PublishError};
/// fn bad_headers(error: &PublishError) -> bool {
///     matches!(error, PublishError::Invalid { part: MessagePart::Headers, .. })
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessagePart {
    /// The payload (the body).
    Payload,
    /// The headers.
    Headers,
}

impl fmt::Display for MessagePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Payload => "payload",
            Self::Headers => "headers",
        })
    }
}

/// Which AMQP short string (at most
/// [`MAX_SHORT_STRING`](crate::model::limits::MAX_SHORT_STRING) bytes) was too long, in
/// [`PublishError::TooLong`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShortField {
    /// The message id.
    MessageId,
    /// The correlation id.
    CorrelationId,
    /// The reply-to address.
    ReplyTo,
    /// The exchange name, namespace included.
    ExchangeName,
    /// The routing key (on the default exchange, namespace included).
    RoutingKey,
}

impl fmt::Display for ShortField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MessageId => "message id",
            Self::CorrelationId => "correlation id",
            Self::ReplyTo => "reply-to address",
            Self::ExchangeName => "exchange name",
            Self::RoutingKey => "routing key",
        })
    }
}

/// Why a publish did not succeed. Every variant means the broker did not confirm the message
/// as routed to a queue.
///
/// Some failures leave the outcome unknown (the message may have been routed); only those are
/// worth publishing again, and only where consumers deduplicate on the message id:
///
/// ```
/// use warren_runtime::PublishError;
///
/// fn worth_another_try(error: &PublishError) -> bool {
///     matches!(
///         error,
///         PublishError::NotConnected(_)
///             | PublishError::Timeout(_)
///             | PublishError::Blocked { .. }
///             | PublishError::Unconfirmed(_)
///     )
/// }
/// assert!(worth_another_try(&PublishError::Timeout(std::time::Duration::from_secs(30))));
/// assert!(!worth_another_try(&PublishError::TooLong {
///     field: warren_runtime::ShortField::RoutingKey,
///     bytes: 300,
/// }));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The payload or headers could not be serialized.
    #[error("cannot serialize the {part} of message `{message}`")]
    Serialize {
        /// The message name.
        message: &'static str,
        /// The payload or the headers.
        part: MessagePart,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The payload or headers break the message's JSON Schema; nothing was sent.
    #[error("the {part} of message `{message}` breaks its schema: {errors}")]
    Invalid {
        /// The message name.
        message: &'static str,
        /// The payload or the headers.
        part: MessagePart,
        /// Every violation, with its JSON pointer.
        errors: String,
    },
    /// The message's schema does not compile.
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),
    /// The broker did not confirm in time: the message may or may not have been routed.
    #[error("no confirm from the broker within {0:?}: the outcome is unknown")]
    Timeout(std::time::Duration),
    /// The broker blocked the connection (a memory or disk alarm) and the publish timed out
    /// waiting: the message may still be sent and routed once the alarm clears.
    #[error(
        "the broker blocked the connection ({reason}) and nothing was confirmed within {timeout:?}: the outcome is unknown"
    )]
    Blocked {
        /// The broker's reason, such as `low on memory`.
        reason: String,
        /// The publish timeout.
        timeout: std::time::Duration,
    },
    /// The connection was down, and did not come back within the publish timeout: the
    /// message was not sent.
    #[error("not connected to the broker within {0:?}: the message was not sent")]
    NotConnected(std::time::Duration),
    /// The channel or connection failed after the message was handed to it and before the
    /// broker confirmed it: it may or may not have been routed. Publishing it again is safe
    /// only where consumers deduplicate (on the message id).
    #[error("the broker did not confirm the message, the outcome is unknown")]
    Unconfirmed(#[source] lapin::Error),
    /// The headers type did not serialize to a JSON object.
    #[error("the headers of message `{message}` must serialize to a JSON object")]
    HeadersNotAnObject {
        /// The message name.
        message: &'static str,
    },
    /// A routing-key placeholder was given an empty value.
    #[error("routing key placeholder `{{{placeholder}}}` was given an empty value")]
    EmptyPlaceholder {
        /// The placeholder's name.
        placeholder: &'static str,
    },
    /// The message id, correlation id, reply-to address, (namespaced) exchange name or routing
    /// key is longer than an AMQP short string holds
    /// ([`MAX_SHORT_STRING`](crate::model::limits::MAX_SHORT_STRING) bytes); nothing was sent.
    #[error(
        "the {field} is {bytes} bytes; AMQP allows at most {}",
        crate::model::limits::MAX_SHORT_STRING
    )]
    TooLong {
        /// Which one.
        field: ShortField,
        /// Its length.
        bytes: usize,
    },
    /// The expiration is longer than RabbitMQ accepts
    /// ([`MAX_EXPIRATION_MILLIS`](crate::model::limits::MAX_EXPIRATION_MILLIS)); nothing was
    /// sent (the broker would have closed the publishing channel).
    #[error(
        "an expiration of {millis} ms is longer than RabbitMQ accepts ({} ms, about 49 days)",
        crate::model::limits::MAX_EXPIRATION_MILLIS
    )]
    ExpirationTooLong {
        /// The expiration asked for, in milliseconds.
        millis: u128,
    },
    /// The reply-to is RabbitMQ's direct reply-to (`amq.rabbitmq.reply-to`), which the broker
    /// accepts only on a channel consuming from it, and otherwise refuses by closing the
    /// channel; nothing was sent.
    #[error(
        "reply-to `amq.rabbitmq.reply-to` (direct reply-to) needs a publishing channel that consumes the replies; a publisher's channel does not"
    )]
    DirectReplyTo,
    /// The priority is above the highest `max_priority` of the queues the message reaches,
    /// or none of them declares `max_priority`; nothing was sent. (The broker would have
    /// taken it, counting it as the maximum or ignoring it: a priority the contract does not
    /// provide for is a mistake worth hearing about.)
    #[error("{}", priority_refused(*priority, *max_priority))]
    Priority {
        /// The priority asked for.
        priority: u8,
        /// The highest `max_priority` of the queues reached; `None` where none declares one.
        max_priority: Option<u8>,
    },
    /// The body is larger than the receiving side accepts (an RPC server's reply above its
    /// worker's [`max_body_bytes`](crate::Worker::max_body_bytes), which callers apply
    /// too); nothing was sent.
    #[error("the body is {bytes} bytes, above the {limit}-byte cap")]
    TooLarge {
        /// The body's size.
        bytes: usize,
        /// The cap.
        limit: usize,
    },
    /// Compressing the body failed.
    #[error("cannot compress the body")]
    Compress(#[source] std::io::Error),
    /// The broker returned the message: it matched no queue.
    #[error(
        "the broker routed the message to no queue (exchange `{exchange}`, routing key `{routing_key}`)"
    )]
    Unroutable {
        /// The exchange published to.
        exchange: String,
        /// The routing key used.
        routing_key: String,
    },
    /// The broker refused the message (`basic.nack`).
    #[error("the broker refused the message (exchange `{exchange}`, routing key `{routing_key}`)")]
    Nacked {
        /// The exchange published to.
        exchange: String,
        /// The routing key used.
        routing_key: String,
    },
    /// Opening the publishing channel failed; the message was not sent.
    #[error("cannot open a publishing channel")]
    Broker(#[from] lapin::Error),
    /// A message written to an outbox has no ordering key where its publisher says.
    #[error(
        "message `{message}` cannot be written to the outbox: its ordering key at `{pointer}` is missing: {why}"
    )]
    OrderingKey {
        /// The message name.
        message: &'static str,
        /// The publisher's `ordering_key` pointer.
        pointer: String,
        /// What is wrong with the value there.
        why: String,
    },
    /// The outbox's database refused the row, or could not be reached: nothing was stored,
    /// and the caller's transaction should not commit as if it had been.
    #[error("the outbox's database refused the message")]
    Outbox(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The text of [`PublishError::Priority`]: what was asked, what the queues allow, and how to
/// make them agree.
fn priority_refused(priority: u8, max_priority: Option<u8>) -> String {
    match max_priority {
        Some(max) => format!(
            "priority {priority} is above {max}, the highest `max_priority` of the queues the \
             message reaches: use a priority of at most {max}, or raise the queue's \
             `max_priority` in the contract"
        ),
        None => format!(
            "priority {priority} was set, but no queue the message reaches declares \
             `max_priority`: declare `max_priority` on the queue (a classic queue) in the \
             contract, or send without a priority"
        ),
    }
}

/// Why a worker stopped.
///
/// ```no_run
/// # async fn run(worker: warren_runtime::Worker) {
/// use warren_runtime::WorkerError;
/// match worker.run().await {
///     Ok(()) => {} // shut down through its `ShutdownHandle`
///     // The queue was deleted under the consumer: redeploying will not help by itself.
///     Err(WorkerError::Cancelled { consumer, queue }) => {
///         eprintln!("{consumer}: queue {queue} is gone");
///     }
///     Err(other) => eprintln!("worker stopped: {other}"),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The consumer's queue is not in the worker's topology.
    #[error("consumer `{consumer}` reads queue `{queue}`, which the topology does not declare")]
    UnknownQueue {
        /// The consumer.
        consumer: String,
        /// Its queue.
        queue: String,
    },
    /// The consumer was registered on the worker twice (by `Handlers` and by its own
    /// `consumers::register` function, say): two loops would share its queue, its prefetch
    /// and its concurrency limit without either knowing. Refused before anything is consumed.
    #[error("consumer `{consumer}` is registered twice on one worker")]
    DuplicateConsumer {
        /// The consumer.
        consumer: String,
    },
    /// A message's schema does not compile.
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),
    /// The channel for retry and dead-letter copies could not be opened.
    #[error("cannot open the publishing channel for retry and dead-letter copies")]
    Publisher(#[source] PublishError),
    /// The broker cancelled a consumer and its queue is gone (deleted). A cancel whose queue
    /// still exists, and a lost channel or connection, are recovered from instead.
    #[error("consumer `{consumer}` of queue `{queue}` was cancelled by the broker")]
    Cancelled {
        /// The consumer.
        consumer: String,
        /// Its queue.
        queue: String,
    },
    /// The broker lacks what consumers' queues retry and dead-letter through (a wait queue,
    /// a dead-letter exchange): every failed message would be held, its retry copy or dead
    /// letter routed nowhere. A queue another stack declared, without warren's `declare`, is
    /// the usual cause. Refused before anything is consumed.
    #[error(
        "the broker lacks what queue(s) {} retry or dead-letter through: {}; declare the \
         topology first (`warren_runtime::declare`, or `warren plan --apply`)",
        queues.join(", "),
        missing.join(", ")
    )]
    MissingRetryTopology {
        /// The queues whose consumers cannot retry or dead-letter.
        queues: Vec<String>,
        /// What is missing, each named with the queue it serves.
        missing: Vec<String>,
    },
    /// A consumer task panicked (or was cancelled, as its runtime shut down).
    #[error("a consumer task failed")]
    Panicked(#[source] tokio::task::JoinError),
    /// The channel or connection failed.
    #[error("the channel or connection failed")]
    Broker(#[from] lapin::Error),
    /// The topology contradicts itself ([`crate::model::Topology::validate`]): raw
    /// arguments a typed field sets, or wait tiers that are not its retry policy's. Refused
    /// before anything is consumed.
    #[error(transparent)]
    Topology(#[from] crate::model::TopologyError),
}

/// An error and its sources, `: `-separated, for log lines: warren's errors say what failed
/// and leave the why to [`std::error::Error::source`] (the Rust API guidelines' convention),
/// so a log line shows the whole chain. Exported as [`crate::ErrorChain`].
///
/// ```
/// let error = std::io::Error::other("the broker is gone");
/// let failed = warren_runtime::PublishError::Compress(error);
/// assert_eq!(
///     warren_runtime::ErrorChain(&failed).to_string(),
///     "cannot compress the body: the broker is gone"
/// );
/// ```
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}
