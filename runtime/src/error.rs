//! Errors: what handlers return, and what publishing and running workers can fail with.

use std::fmt;

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
///
/// Any error converts into a retryable `HandlerError` with `?`, so an unclassified failure
/// is retried. Mark the deterministic ones (a business rule refusing the message) with
/// [`HandlerError::non_retryable`].
pub struct HandlerError {
    retryable: bool,
    source: Source,
}

impl HandlerError {
    /// A failure that may succeed later (a downstream service is down, a lock timed out).
    pub fn retryable(source: impl Into<Source>) -> Self {
        Self {
            retryable: true,
            source: source.into(),
        }
    }

    /// A failure that can never succeed (the order does not exist, the amount is negative):
    /// the message is dead-lettered at once.
    pub fn non_retryable(source: impl Into<Source>) -> Self {
        Self {
            retryable: false,
            source: source.into(),
        }
    }

    /// Whether the queue's retry policy may try again.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The underlying error.
    pub fn source(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.source.as_ref()
    }

    /// Takes the underlying error.
    pub fn into_source(self) -> Source {
        self.source
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
            .field("source", &self.source)
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
        write!(f, "{kind}: {}", self.source)
    }
}

/// Why a publish did not succeed. Every variant means the broker did not confirm the message
/// as routed to a queue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The payload or headers could not be serialized.
    #[error("cannot serialize the {what} of message `{message}`: {source}")]
    Serialize {
        /// The message name.
        message: &'static str,
        /// `payload` or `headers`.
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The payload or headers break the message's JSON Schema; nothing was sent.
    #[error("the {what} of message `{message}` breaks its schema: {errors}")]
    Invalid {
        /// The message name.
        message: &'static str,
        /// `payload` or `headers`.
        what: &'static str,
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
    #[error("the broker did not confirm the message, the outcome is unknown: {0}")]
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
    /// The routing key is longer than AMQP's 255 bytes.
    #[error("routing key is {0} bytes; AMQP allows at most 255")]
    RoutingKeyTooLong(usize),
    /// The message id or the (namespaced) exchange name is longer than AMQP's 255 bytes;
    /// nothing was sent.
    #[error("the {what} is {bytes} bytes; AMQP allows at most 255")]
    TooLong {
        /// `message id` or `exchange name`.
        what: &'static str,
        /// Its length.
        bytes: usize,
    },
    /// Compressing the body failed.
    #[error("cannot compress the body: {0}")]
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
    #[error("cannot open a publishing channel: {0}")]
    Broker(#[from] lapin::Error),
}

/// Why a worker stopped.
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
    /// A message's schema does not compile.
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),
    /// The channel for retry and dead-letter copies could not be opened.
    #[error("cannot open the publishing channel: {0}")]
    Publisher(String),
    /// The broker cancelled a consumer and its queue is gone (deleted). A cancel whose queue
    /// still exists, and a lost channel or connection, are recovered from instead.
    #[error("consumer `{consumer}` of queue `{queue}` was cancelled by the broker")]
    Cancelled {
        /// The consumer.
        consumer: String,
        /// Its queue.
        queue: String,
    },
    /// A consumer task panicked.
    #[error("a consumer panicked: {0}")]
    Panicked(String),
    /// The channel or connection failed.
    #[error("broker error: {0}")]
    Broker(#[from] lapin::Error),
}
