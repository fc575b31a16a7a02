//! What a dead-letter consumer receives: a dead letter's failure history, and the message
//! itself, typed when it decodes as the consumer's message, raw when it does not.

use crate::model::FailureReason;
use crate::{Delivery, FailureContext};

/// A message read from a dead-letter queue by a dead-letter consumer (`dead_letters: true` in
/// the contract): why and where it failed ([`DeadLetter::failure`]), and the message, typed
/// or raw ([`DeadLetter::message`]).
///
/// Every dead letter reaches the handler, poison included: a body that does not decode or
/// validate as the consumer's message comes raw, with the reason it did not. A dead-letter
/// consumer never drops or dead-letters one again for its content.
///
/// ```
/// use warren_runtime::{DeadLetter, DeadMessage, Delivery, FailureContext, NoHeaders, RawMessage};
/// use warren_runtime::model::FailureReason;
///
/// let mut failure = FailureContext::default();
/// failure.reason = Some(FailureReason::Exhausted);
/// let typed = DeadLetter::new(failure.clone(), DeadMessage::Typed(Delivery::new(42, NoHeaders {})));
/// assert_eq!(typed.typed().map(|d| *d.payload()), Some(42));
///
/// failure.reason = Some(FailureReason::Decode);
/// let raw = RawMessage::new(b"{not json".to_vec(), FailureReason::Decode, "body is not JSON");
/// let poison: DeadLetter<i32> = DeadLetter::new(failure, DeadMessage::Raw(raw));
/// assert_eq!(poison.raw().map(|r| r.body.as_slice()), Some(&b"{not json"[..]));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter<P, H = crate::NoHeaders> {
    failure: FailureContext,
    message: DeadMessage<P, H>,
}

impl<P, H> DeadLetter<P, H> {
    /// A dead letter of `message` that failed as `failure` says, as a handler test builds one.
    pub fn new(failure: FailureContext, message: DeadMessage<P, H>) -> Self {
        Self { failure, message }
    }

    /// Why and where it failed, read from its headers (warren's, or the broker's `x-death`
    /// for a message the broker dead-lettered by itself): empty when it carries none. Anyone
    /// who can publish to the dead-letter queue can write these headers: read them to
    /// report, not to decide what is safe.
    pub fn failure(&self) -> &FailureContext {
        &self.failure
    }

    /// The message: typed, or raw when it is poison.
    pub fn message(&self) -> &DeadMessage<P, H> {
        &self.message
    }

    /// The typed delivery, when the message decoded and validated as the consumer's message.
    pub fn typed(&self) -> Option<&Delivery<P, H>> {
        match &self.message {
            DeadMessage::Typed(delivery) => Some(delivery),
            DeadMessage::Raw(_) => None,
        }
    }

    /// The raw message, when it did not decode or validate.
    pub fn raw(&self) -> Option<&RawMessage> {
        match &self.message {
            DeadMessage::Typed(_) => None,
            DeadMessage::Raw(raw) => Some(raw),
        }
    }

    /// Takes the failure history and the message.
    pub fn into_parts(self) -> (FailureContext, DeadMessage<P, H>) {
        (self.failure, self.message)
    }
}

/// The message of a [`DeadLetter`].
#[derive(Debug, Clone, PartialEq)]
pub enum DeadMessage<P, H = crate::NoHeaders> {
    /// It decoded and validated as the consumer's message (and its AMQP `type` property, if
    /// set, names that message).
    Typed(Delivery<P, H>),
    /// It did not: poison, handed over as it came.
    Raw(RawMessage),
}

/// A dead letter that did not decode or validate as the consumer's message: its body and
/// properties as they came, and why it was not typed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawMessage {
    /// The body as delivered (still compressed if it was), cut to the worker's
    /// `max_body_bytes`.
    pub body: Vec<u8>,
    /// The length of the body as delivered: more than `body.len()` when it was cut.
    pub body_len: usize,
    /// The `content-type` property.
    pub content_type: Option<String>,
    /// The `content-encoding` property.
    pub content_encoding: Option<String>,
    /// The `message-id` property.
    pub message_id: Option<String>,
    /// The AMQP `type` property: the message name warren's publishers set.
    pub kind: Option<String>,
    /// The exchange it was first published to, else the one it was delivered through.
    pub exchange: String,
    /// The routing key it was first published with, else the one it was delivered with.
    pub routing_key: String,
    /// Why it did not decode: `decode`, `validation`, `content-type`, `too-large` or
    /// `malformed-headers`.
    pub poison: FailureReason,
    /// What was wrong with it, cut to a bounded length.
    pub poison_detail: String,
}

impl RawMessage {
    /// A raw message of `body` that did not decode for `poison` (`detail` says how), with no
    /// properties and no route, as a handler test builds one.
    pub fn new(body: Vec<u8>, poison: FailureReason, detail: impl Into<String>) -> Self {
        Self {
            body_len: body.len(),
            body,
            content_type: None,
            content_encoding: None,
            message_id: None,
            kind: None,
            exchange: String::new(),
            routing_key: String::new(),
            poison,
            poison_detail: detail.into(),
        }
    }

    /// Whether `body` holds only the start of the body, which was longer than the cap.
    pub fn truncated(&self) -> bool {
        self.body_len > self.body.len()
    }
}
