//! Typed request/reply (RPC) over RabbitMQ's direct reply-to.
//!
//! An operation of a contract (`rpcs:` in `warren.yaml`) has a request message, a response
//! message and optional declared errors, each a [`Message`] with its JSON Schema. The
//! generator emits one marker type per operation implementing [`Operation`], a client method
//! per operation on the generated `RpcClients` (over an [`RpcClient`]), and a server trait
//! per operation, registered on a [`crate::Worker`] like a consumer.
//!
//! # The wire protocol
//!
//! - **Request**: published (validated first, `mandatory`, with a confirm) to the operation's
//!   exchange and routing key (the default exchange and the queue's name when the contract
//!   gives only a queue); `reply-to` is [`DIRECT_REPLY_TO`], `correlation-id` a fresh UUID,
//!   `expiration` the call's timeout (the broker expires a request nobody took in time) and
//!   [`x-deadline`](crate::model::headers::DEADLINE) the instant the caller gives up.
//! - **Reply**: published by the server to the default exchange with the request's
//!   `reply-to` as key and its `correlation-id`, with
//!   [`x-rpc-status`](crate::model::headers::RPC_STATUS) saying what the body holds
//!   ([`ReplyStatus`]): the response (`ok`), a declared error and its code (`error`,
//!   [`x-rpc-error`](crate::model::headers::RPC_ERROR)), or why the server could not answer
//!   (`failed`, [`x-rpc-failure`](crate::model::headers::RPC_FAILURE), a short text body).
//!
//! # The server's rules
//!
//! The request queue's retry policy applies as to any consumer, with these additions:
//! - a request past its deadline is not handled: its caller gave up. It is dead-lettered as
//!   `expired` (as the broker does with one that expired waiting), so a retry never runs
//!   after the caller stopped waiting. The deadline is read on the caller's clock: the
//!   clocks of callers' and servers' hosts must agree (a server whose clock runs ahead
//!   expires requests early);
//! - a request that cannot be decoded or validated, or has no `reply-to` or `correlation-id`,
//!   is dead-lettered as poison, and its caller (where it named one) gets a `failed` reply at
//!   once rather than a timeout;
//! - a request whose `reply-to` starts like a direct reply-to address but is not one RabbitMQ
//!   can decode, or names a node hash no running node has (a forgery, or a caller whose node
//!   left the cluster), is dead-lettered as poison (`decode`) before it is handled, and
//!   nothing is sent to it: RabbitMQ 3.10 answers a publish to such an address by closing the
//!   publisher's whole connection (541). The first request naming a node is checked by a
//!   probe on a connection of the server's own, which pays for a bad one; what it learns
//!   is believed for ten seconds, and forgotten when the server's connection reconnects;
//! - a handler's response or declared error is validated against its schema before it is
//!   sent; one that breaks it, or is larger than the worker's
//!   [`max_body_bytes`](crate::Worker::max_body_bytes) (which callers apply to replies by
//!   default, and beyond the broker's `max_message_size` it would close the channel), is a
//!   bug of the server: the caller gets a `failed` reply and the request is dead-lettered
//!   (`non-retryable`, the violations in its last error);
//! - a retryable failure is retried by the queue's policy with no reply; when the retries are
//!   spent (or the failure is non-retryable) the request is dead-lettered and the caller gets
//!   a `failed` reply;
//! - the request is acknowledged only once its reply is confirmed by the broker (or, for a
//!   dead-lettered one, its dead-letter copy). A reply that cannot be published or is not
//!   confirmed (the channel down, no confirm within the worker's publish timeout) returns the
//!   request to its queue, to be handled again: a server is at-least-once, like any consumer.
//!   A reply the broker refuses (a nack: a caller's reply queue full, with `x-overflow:
//!   reject-publish`) dead-letters the request (`non-retryable`): handled again at once, its
//!   reply would only be refused again, in a loop.
//!   A `failed` reply goes out once the request is settled (its dead-letter copy confirmed),
//!   never before: a request held meanwhile may yet be redelivered and answered. It is best
//!   effort: the request is dead-lettered whether it went out or not. Its text says why a
//!   poison request is poison (the caller's own bytes), and otherwise only the reason: a
//!   handler's error is the server's business, not every producer's, and stays in the dead
//!   letter and the log, where the call's correlation id finds it. A request warren itself
//!   panicked on is dead-lettered (`internal-error`) and its caller told so.
//!
//! Replies are published by the consumer's channel for copies (in confirm mode), to the
//! default exchange only, never `mandatory`: a caller that gave up has no channel left to
//! receive its reply, and the broker drops it (as it drops a reply to a direct reply-to
//! address whose channel is gone). A `reply-to` naming a queue is allowed (classic RPC, where the caller
//! reads its replies from a queue of its own). So any producer allowed to publish to a
//! server's request queue can make it publish replies (`failed` ones included) to any queue
//! of the virtual host, through the default exchange: grant write access to request queues
//! (and `amq.default`) accordingly.
//!
//! Requests and replies are transient (delivery mode 1): both are worth something only
//! while their caller waits, which does not outlive a broker restart. A server's retry and
//! dead-letter copies are persistent, as any copy, and keep the request's `reply-to`,
//! `correlation-id` and `x-deadline` (not its `expiration`: the deadline is what a retry is
//! checked against).
//!
//! # The client's rules
//!
//! Many calls share one channel: each waits for the reply with its correlation id. A reply
//! that comes after its call timed out (or for no call of this client) is dropped, logged and
//! counted ([`RpcClient::late_replies`], [`crate::metrics::RPC_LATE_REPLIES`]), never handed
//! to another call. When the channel or connection is lost, the calls waiting on it fail with
//! [`RpcError::ConnectionLost`] (their replies could no longer arrive: direct reply-to is
//! bound to the channel), and the next call opens a new channel.
//!
//! The channel is the one requests are published on (the broker accepts a direct reply-to
//! only from the channel consuming it), so a request the broker refuses by closing the
//! channel (an exchange that does not exist) fails every call waiting on it with
//! `ConnectionLost`. Exchanges come from the contract and are declared with it: that takes
//! a topology not declared, or deleted under a running client.

mod client;
mod declared;
mod reply;
pub(crate) mod reply_to;

#[cfg(feature = "trial")]
pub(crate) use client::{outgoing as request_outgoing, read_answer};
pub(crate) use reply::{Answer, properties as reply_properties};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use crate::model::rpc::{DEFAULT_TIMEOUT, DIRECT_REPLY_TO, ReplyStatus};
use crate::model::{FailureReason, RpcTarget};
use crate::routing_key;
use crate::schema::Validators;
use crate::{
    Connection, DEFAULT_MAX_BODY_BYTES, Delivery, HandlerError, Message, PublishError, Topology,
};

/// An operation of a contract: what the generated marker type of each RPC says about it.
pub trait Operation: Send + Sync + 'static {
    /// The request message.
    type Request: Message;
    /// The response message.
    type Response: Message;
    /// The declared errors: a generated enum with one variant per code, or [`NoErrors`].
    type Error: DeclaredErrors;
    /// The operation's name in the contract.
    const NAME: &'static str;
}

/// The declared errors of an operation: a generated enum with one variant per error code,
/// each holding the payload of the code's message.
pub trait DeclaredErrors:
    std::fmt::Debug + std::fmt::Display + Sized + Send + Sync + 'static
{
    /// The code of this error, as the contract spells it.
    fn code(&self) -> &'static str;

    /// The error's body: its payload serialized and validated against its message's schema
    /// (through [`encode_payload`]).
    fn encode(&self) -> Result<Vec<u8>, PublishError>;

    /// The error a reply with `code` holds, decoded and validated (through
    /// [`decode_payload`]); `None` for a code the operation does not declare.
    fn decode(code: &str, body: &[u8]) -> Option<Result<Self, String>>;

    /// The name of the message this error's payload is ([`Message::NAME`]), sent as the
    /// reply's `type`. Generated; by default none, and the reply carries no `type`.
    fn message_name(&self) -> Option<&'static str> {
        None
    }

    /// The content type of the message this error's payload is
    /// ([`Message::CONTENT_TYPE`]), sent as the reply's `content-type`. Generated; by
    /// default none, and the reply carries none.
    fn content_type(&self) -> Option<&'static str> {
        None
    }
}

/// The errors of an operation that declares none: a value of it cannot exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoErrors {}

impl std::fmt::Display for NoErrors {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

impl std::error::Error for NoErrors {}

impl DeclaredErrors for NoErrors {
    fn code(&self) -> &'static str {
        match *self {}
    }

    fn encode(&self) -> Result<Vec<u8>, PublishError> {
        match *self {}
    }

    fn decode(_: &str, _: &[u8]) -> Option<Result<Self, String>> {
        None
    }
}

/// What a call of operation `O` returns: the response, or why there is none.
pub type CallResult<O> =
    Result<<<O as Operation>::Response as Message>::Payload, RpcError<<O as Operation>::Error>>;

/// Why a call returned no response.
#[derive(Debug, thiserror::Error)]
pub enum RpcError<E> {
    /// The server answered with one of the operation's declared errors.
    #[error("the server answered with a declared error: {0}")]
    Declared(E),
    /// No reply came within the timeout: the request may or may not have been handled (it
    /// is not handled after this, see the server's rules).
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The server could not answer: the request did not decode or validate there, the
    /// handler failed for good, or its answer broke its schema.
    #[error("the server could not answer ({reason}): {detail}")]
    Failed {
        /// Why.
        reason: FailureReason,
        /// Why the request is poison, where it is (its decode or validation errors), else only
        /// that the server could not handle it: a handler's error stays on the server, in the
        /// dead letter and the log. Cut to a bounded length.
        detail: String,
    },
    /// The reply did not decode or validate as the response or a declared error.
    #[error("the reply is not a valid answer: {0}")]
    InvalidReply(String),
    /// The request was not sent, or not confirmed: invalid, unroutable (no server queue),
    /// refused, or the connection was down.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// The channel or connection was lost while the call waited: the request may have been
    /// handled, its reply can no longer arrive.
    #[error("the connection was lost before the reply came")]
    ConnectionLost,
}

/// What a server handler returns instead of a response.
#[derive(Debug)]
pub enum RpcHandlerError<E> {
    /// One of the operation's declared errors: validated, sent to the caller as its reply,
    /// and the request acknowledged (never retried).
    Declared(E),
    /// A failure, retried or dead-lettered by the request queue's policy as any handler's;
    /// the caller gets a `failed` reply once the request is dead-lettered.
    Failed(HandlerError),
}

impl<E> From<HandlerError> for RpcHandlerError<E> {
    fn from(error: HandlerError) -> Self {
        Self::Failed(error)
    }
}

/// Per-call settings a caller may set instead of the contract's, passed to the generated
/// `RpcClients::with(options)`, which adds them to any set before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// How long to wait for the reply, instead of the operation's timeout; at most about
    /// 49 days ([`crate::model::limits::MAX_EXPIRATION_MILLIS`]).
    pub timeout: Option<Duration>,
    /// The request's message id; by default a new UUID v7.
    pub message_id: Option<String>,
    /// The request's priority, on a request queue declared with `max_priority`.
    pub priority: Option<u8>,
}

impl CallOptions {
    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the message id.
    pub fn message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = Some(priority);
        self
    }

    /// These options, with each setting `over` has taking the place of this one's.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use warren_runtime::CallOptions;
    /// let base = CallOptions::default().timeout(Duration::from_secs(1));
    /// let both = base.overridden_by(CallOptions::default().priority(3));
    /// assert_eq!(both, CallOptions::default().timeout(Duration::from_secs(1)).priority(3));
    /// ```
    #[must_use]
    pub fn overridden_by(self, over: CallOptions) -> Self {
        Self {
            timeout: over.timeout.or(self.timeout),
            message_id: over.message_id.or(self.message_id),
            priority: over.priority.or(self.priority),
        }
    }
}

/// Calls operations and waits for their replies, on one channel that consumes RabbitMQ's
/// direct reply-to. Cheap to clone: clones share the channel and its calls.
///
/// Many calls share the channel at once, each waiting for the reply with its correlation id.
/// When the channel or its connection is lost, the calls waiting on it fail with
/// [`RpcError::ConnectionLost`], and the next call opens a new channel (waiting, within its
/// timeout, for the connection to come back).
///
/// ```no_run
/// # async fn run(topology: warren_runtime::Topology) -> Result<(), Box<dyn std::error::Error>> {
/// use warren_runtime::{Connection, RpcClient};
/// let connection = Connection::connect("amqp://guest:guest@localhost:5672/%2f", "checkout").await?;
/// let client = RpcClient::new(&connection, &topology).await?.max_body_bytes(1 << 20);
/// // Then the generated `RpcClients::new(client)`, with one method per operation.
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RpcClient {
    shared: Arc<client::Shared>,
    max_body_bytes: usize,
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcClient")
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl RpcClient {
    /// A client on `connection` for the operations of `topology` (in its namespace), its
    /// channel opened and consuming replies at once (waiting up to
    /// [`crate::DEFAULT_PUBLISH_TIMEOUT`] for the connection), so that a broker refusing it
    /// is reported here rather than at the first call.
    pub async fn new(connection: &Connection, topology: &Topology) -> Result<Self, PublishError> {
        crate::metrics::describe();
        let shared = client::Shared::new(connection, topology.namespace().clone());
        shared.open(crate::DEFAULT_PUBLISH_TIMEOUT).await?;
        Ok(Self {
            shared: Arc::new(shared),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        })
    }

    /// The largest reply body accepted, as sent and inflated (default 64 MiB); a larger one
    /// is an [`RpcError::InvalidReply`].
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// How many replies this client (and its clones) dropped because no call waited for
    /// them: they came after their call timed out, or were not for a call of this client.
    /// Also counted by the [`crate::metrics::RPC_LATE_REPLIES`] metric.
    pub fn late_replies(&self) -> u64 {
        self.shared.late_replies()
    }
}

/// Handles the requests of operation `O`. Generated server traits are adapted to this.
pub trait RpcHandler<O: Operation>: Send + Sync + 'static {
    /// Handles one request, returning the response or why there is none.
    fn handle(
        &self,
        request: Delivery<<O::Request as Message>::Payload, <O::Request as Message>::Headers>,
    ) -> impl Future<Output = Result<<O::Response as Message>::Payload, RpcHandlerError<O::Error>>> + Send;
}

/// Calls operation `O` (its marker, `_operation`) on `client`, to `target` with the routing
/// key's placeholders filled in by `values`: what generated client methods call
/// (`warren_runtime::codegen::call`); not a stable API.
///
/// The request is validated against its schemas (nothing is sent when it is invalid), then
/// published as the module docs say; the call's timeout (the options', else the target's)
/// covers the publish, its confirm and the reply.
pub async fn call<O: Operation>(
    client: &RpcClient,
    _operation: O,
    target: RpcTarget,
    values: &[&str],
    request: &<O::Request as Message>::Payload,
    headers: &<O::Request as Message>::Headers,
    options: &CallOptions,
) -> Result<<O::Response as Message>::Payload, RpcError<O::Error>> {
    let key = routing_key::filled(target.routing_key, values)?;
    let target = RpcTarget {
        routing_key: key.as_ref(),
        ..target
    };
    client::call::<O>(
        &client.shared,
        client.max_body_bytes,
        target,
        request,
        headers,
        options,
    )
    .await
}

/// `payload` of message `M` serialized and validated against its schema: the body of a
/// declared error (generated [`DeclaredErrors::encode`]); not a stable API.
pub fn encode_payload<M: Message>(payload: &M::Payload) -> Result<Vec<u8>, PublishError> {
    let validators = Validators::of::<M>()?;
    crate::codec::validated_payload::<M>(&validators, payload)
}

/// `body` decoded as a payload of message `M` and validated against its schema (generated
/// [`DeclaredErrors::decode`]), within the limits a worker sets on a body of
/// [`DEFAULT_MAX_BODY_BYTES`]; the error says what is wrong. Not a stable API.
pub fn decode_payload<M: Message>(body: &[u8]) -> Result<M::Payload, String> {
    decode_within::<M>(body, DEFAULT_MAX_BODY_BYTES)
}

/// `body` as a payload of `M`, validated, within the limits of a `max_body_bytes` cap.
pub(crate) fn decode_within<M: Message>(
    body: &[u8],
    max_body_bytes: usize,
) -> Result<M::Payload, String> {
    if body.len() > max_body_bytes {
        return Err(format!(
            "a body of {} bytes, above the {max_body_bytes}-byte cap",
            body.len()
        ));
    }
    let validators = Validators::of::<M>().map_err(|e| crate::error::Chain(&e).to_string())?;
    crate::codec::payload::<M>(body, &validators, max_body_bytes).map_err(|poison| poison.detail)
}
