//! What a handler receives: a [`Delivery`], or, for a dead-letter consumer, a [`DeadLetter`]
//! (`dead_letter.rs`).

mod dead_letter;

pub use dead_letter::{DeadLetter, DeadMessage, RawMessage};

use std::time::Duration;

use crate::FailureContext;

/// A decoded, validated message handed to a handler: its payload and headers, typed, plus
/// what the broker said about the delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery<P, H = crate::NoHeaders> {
    payload: P,
    headers: H,
    exchange: String,
    routing_key: String,
    redelivered: bool,
    retry_count: u32,
    message_id: Option<String>,
    // Short strings (at most 255 bytes on the wire), copied once from the delivery's
    // properties: a delivery holds no copy of the body or the header table.
    correlation_id: Option<String>,
    reply_to: Option<String>,
    priority: Option<u8>,
    expiration: Option<Duration>,
    failure: Option<FailureContext>,
}

impl<P, H> Delivery<P, H> {
    /// A delivery of `payload` with `headers`, as a handler test would build one: no route,
    /// a first attempt, no message id. [`Delivery::builder`] sets those too.
    ///
    /// ```
    /// use warren_runtime::{Delivery, NoHeaders};
    /// let delivery = Delivery::new("payload", NoHeaders {});
    /// assert_eq!(delivery.retry_count(), 0);
    /// ```
    pub fn new(payload: P, headers: H) -> Self {
        Self {
            payload,
            headers,
            exchange: String::new(),
            routing_key: String::new(),
            redelivered: false,
            retry_count: 0,
            message_id: None,
            correlation_id: None,
            reply_to: None,
            priority: None,
            expiration: None,
            failure: None,
        }
    }

    /// The payload.
    pub fn payload(&self) -> &P {
        &self.payload
    }

    /// The headers.
    pub fn headers(&self) -> &H {
        &self.headers
    }

    /// Takes the payload and headers.
    pub fn into_parts(self) -> (P, H) {
        (self.payload, self.headers)
    }

    /// Takes the payload.
    pub fn into_payload(self) -> P {
        self.payload
    }

    /// The exchange the message was published to; empty on another stack's retry copy that
    /// did not record it (the queue's `retry_counts_from`), where it is unknown.
    pub fn exchange(&self) -> &str {
        &self.exchange
    }

    /// The routing key the message was published with; empty where unknown, as
    /// [`Delivery::exchange`].
    pub fn routing_key(&self) -> &str {
        &self.routing_key
    }

    /// Whether the broker delivered this message before (a worker crashed or a connection
    /// dropped before it was settled): the handler may see it twice.
    pub fn redelivered(&self) -> bool {
        self.redelivered
    }

    /// How many retries came before this delivery (0 on the first attempt).
    pub fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// The message id set by the publisher, if any: the key to deduplicate on, since
    /// delivery is at-least-once.
    pub fn message_id(&self) -> Option<&str> {
        self.message_id.as_deref()
    }

    /// The correlation id set by the publisher, if any: what ties this message to another
    /// (a reply to its request, an event to the command that caused it).
    pub fn correlation_id(&self) -> Option<&str> {
        self.correlation_id.as_deref()
    }

    /// Where the publisher expects a reply, if it said: a queue name (or RabbitMQ's direct
    /// reply-to address of the caller's channel).
    pub fn reply_to(&self) -> Option<&str> {
        self.reply_to.as_deref()
    }

    /// The priority the message was published with, if any (on a queue declared with
    /// `max_priority`, the broker delivers higher ones first).
    pub fn priority(&self) -> Option<u8> {
        self.priority
    }

    /// The expiration the message was published with, if any: how long it could wait in a
    /// queue, not how long it has left. Warren's retry copies do not keep it (a retry is not
    /// cut short by the first attempt's deadline), and a value that is not whole milliseconds
    /// RabbitMQ accepts (a number up to
    /// [`MAX_EXPIRATION_MILLIS`](crate::model::limits::MAX_EXPIRATION_MILLIS)) reads as none.
    pub fn expiration(&self) -> Option<Duration> {
        self.expiration
    }

    /// When a handler first failed on this message, for a retried message.
    pub fn first_failure(&self) -> Option<std::time::SystemTime> {
        self.failure
            .as_ref()
            .and_then(|failure| failure.first_failure)
    }

    /// The failure history of a retried message: its last error, when it first and last
    /// failed, its retry count, the route it was first published with, the queue and the
    /// consumer it failed in; `None` on a first attempt.
    ///
    /// Read only from warren's own retry copies (as [`Delivery::retry_count`] is): headers a
    /// producer wrote on a first delivery (a forged `x-last-error`, say) are not history. On
    /// a queue where the broker counts redeliveries (quorum queues requeueing), the message
    /// carries no history of warren's, only the count: [`FailureContext::retry_count`].
    ///
    /// ```
    /// use warren_runtime::{Delivery, FailureContext, NoHeaders};
    /// let mut failure = FailureContext::default();
    /// failure.last_error = Some("payment service timed out".into());
    /// failure.retry_count = 1;
    /// let delivery = Delivery::builder("payload", NoHeaders {})
    ///     .attempt(1, false)
    ///     .failure(failure)
    ///     .build();
    /// let last_error = delivery.failure().and_then(|f| f.last_error.as_deref());
    /// assert_eq!(last_error, Some("payment service timed out"));
    /// ```
    pub fn failure(&self) -> Option<&FailureContext> {
        self.failure.as_ref()
    }

    /// This delivery with `failure` as its history: a dead letter's, read from its headers.
    pub(crate) fn with_failure(mut self, failure: FailureContext) -> Self {
        self.failure = Some(failure);
        self
    }

    /// A delivery of `payload` with `headers` whose broker-side facts (route, attempt,
    /// message id, properties, first failure) are set one by one, as a handler test would
    /// build a retried message or a request expecting a reply:
    ///
    /// ```
    /// use warren_runtime::{Delivery, NoHeaders};
    /// let delivery = Delivery::builder("payload", NoHeaders {})
    ///     .route("orders", "order.eu.placed")
    ///     .attempt(2, false)
    ///     .message_id("order-42")
    ///     .build();
    /// assert_eq!((delivery.retry_count(), delivery.message_id()), (2, Some("order-42")));
    ///
    /// let request = Delivery::builder("payload", NoHeaders {})
    ///     .correlation_id("call-7")
    ///     .reply_to("quotes.replies")
    ///     .priority(5)
    ///     .build();
    /// assert_eq!(request.correlation_id(), Some("call-7"));
    /// assert_eq!((request.reply_to(), request.priority()), (Some("quotes.replies"), Some(5)));
    /// ```
    pub fn builder(payload: P, headers: H) -> DeliveryBuilder<P, H> {
        DeliveryBuilder(Self::new(payload, headers))
    }

    /// This delivery's route, attempt and properties, carrying `payload` and `headers`
    /// instead: the worker reads those from the wire once, whatever the message, and types
    /// the payload and headers afterwards.
    pub(crate) fn carrying<Q, G>(self, payload: Q, headers: G) -> Delivery<Q, G> {
        let Self {
            payload: _,
            headers: _,
            exchange,
            routing_key,
            redelivered,
            retry_count,
            message_id,
            correlation_id,
            reply_to,
            priority,
            expiration,
            failure,
        } = self;
        Delivery {
            payload,
            headers,
            exchange,
            routing_key,
            redelivered,
            retry_count,
            message_id,
            correlation_id,
            reply_to,
            priority,
            expiration,
            failure,
        }
    }
}

/// Builds a [`Delivery`] with its broker-side facts; see [`Delivery::builder`].
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryBuilder<P, H = crate::NoHeaders>(Delivery<P, H>);

impl<P, H> DeliveryBuilder<P, H> {
    /// The exchange and routing key the message was published with.
    pub fn route(mut self, exchange: impl Into<String>, routing_key: impl Into<String>) -> Self {
        self.0.exchange = exchange.into();
        self.0.routing_key = routing_key.into();
        self
    }

    /// How many times the message was retried before this delivery, and whether the broker
    /// flagged it as redelivered.
    pub fn attempt(mut self, retry_count: u32, redelivered: bool) -> Self {
        self.0.retry_count = retry_count;
        self.0.redelivered = redelivered;
        self
    }

    /// The message id.
    pub fn message_id(mut self, message_id: impl Into<String>) -> Self {
        self.0.message_id = Some(message_id.into());
        self
    }

    /// The correlation id.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.0.correlation_id = Some(id.into());
        self
    }

    /// The reply-to address.
    pub fn reply_to(mut self, address: impl Into<String>) -> Self {
        self.0.reply_to = Some(address.into());
        self
    }

    /// The priority.
    pub fn priority(mut self, priority: u8) -> Self {
        self.0.priority = Some(priority);
        self
    }

    /// The expiration the message was published with.
    pub fn expiration(mut self, expiration: Duration) -> Self {
        self.0.expiration = Some(expiration);
        self
    }

    /// When a handler first failed on the message (part of its [`Delivery::failure`]).
    pub fn first_failure(mut self, at: std::time::SystemTime) -> Self {
        self.0
            .failure
            .get_or_insert_with(FailureContext::default)
            .first_failure = Some(at);
        self
    }

    /// The message's failure history ([`Delivery::failure`]), replacing any set before.
    pub fn failure(mut self, failure: FailureContext) -> Self {
        self.0.failure = Some(failure);
        self
    }

    /// The delivery.
    pub fn build(self) -> Delivery<P, H> {
        self.0
    }
}
