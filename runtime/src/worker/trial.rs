//! A registered consumer tried without a broker: one delivery through the consumer's own
//! decode, its handler (through the generated adapter it was registered with) and the
//! queue's retry policy, and what the worker would then do with it, as a [`Verdict`].
//!
//! Nothing here is a copy of the worker's path: decoding is [`decode`], the handler's result
//! is read by [`outcome`], the policy is [`decide`], and a retry or dead-letter copy's headers
//! are written by the settler's own [`Copier`]. Only the last step differs: where the worker
//! publishes, acks or rejects, a trial says what it would publish, ack or reject.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::Duration;

use futures_lite::FutureExt;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};

use super::consume::outcome;
use super::dead_letter_consumer::ByBroker;
use super::decode::{decode, retries_so_far};
use super::erased::Dispatch;
use super::policy::{Decision, Failure, broker_counts, decide};
use super::settle::Copier;
use super::{BatchHandler, Settings, Worker};
use crate::codec::Poison;
use crate::model::limits::MAX_SHORT_STRING;
use crate::model::{Destination, FailureReason, Queue, Retry, headers};
use crate::publisher::{PublishOptions, outgoing};
use crate::rpc::{DEFAULT_TIMEOUT, Operation, request_outgoing};
use crate::{CallOptions, Message, PublishError};

/// One delivery as the broker would hand it to a consumer: body, properties, the exchange
/// and routing key it came through, and whether it is a retry.
///
/// ```
/// # fn run(payload: serde_json::Value) -> Result<(), warren_runtime::PublishError> {
/// use warren_runtime::trial::Arrival;
/// // A message of no contract: a schema-less `serde_json::Value` stands in for a generated one.
/// # struct OrderPlaced;
/// # impl warren_runtime::Message for OrderPlaced {
/// #     type Payload = serde_json::Value;
/// #     type Headers = warren_runtime::NoHeaders;
/// #     const NAME: &'static str = "order_placed";
/// #     const CONTENT_TYPE: &'static str = "application/json";
/// #     const PAYLOAD_SCHEMA: &'static str = "{}";
/// #     const HEADERS_SCHEMA: Option<&'static str> = None;
/// # }
/// let first = Arrival::of(OrderPlaced, &payload, &warren_runtime::NoHeaders {})?;
/// let third_try = first.clone().retried(2); // two retries before it
/// let forged = Arrival::raw(b"{\"id\": 1}".to_vec(), Default::default()).via("orders", "eu");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Arrival {
    body: Vec<u8>,
    properties: BasicProperties,
    /// The exchange and routing key it was published with; `None`: the queue's first binding.
    route: Option<(String, String)>,
    /// As the copy of which retry it arrives (`None`: a first delivery).
    retries: Option<u32>,
}

impl Arrival {
    /// `payload` and `headers` as message `M`, as warren's publishers send it: validated
    /// against the message's schemas (an error, as a publish's, when they do not hold), with
    /// its content type, `type`, message id and headers. It arrives through the first binding
    /// of the consumer's queue unless [`Arrival::via`] says otherwise.
    pub fn of<M: Message>(
        _message: M,
        payload: &M::Payload,
        headers: &M::Headers,
    ) -> Result<Self, PublishError> {
        let options = PublishOptions::default();
        let sent = outgoing::<M>(payload, headers, &options, None, |_| {})?;
        Ok(Self::raw(sent.body, sent.properties))
    }

    /// The request `payload` and `headers` of RPC operation `O`, as the generated client
    /// sends it: validated, with a fresh correlation id and a deadline [`DEFAULT_TIMEOUT`]
    /// from now. Its reply-to is the queue [`TRIAL_REPLY_TO`] (a broker would give the
    /// caller's direct reply-to address instead). It arrives through the first binding of
    /// the server's queue unless [`Arrival::via`] says otherwise.
    pub fn request<O: Operation>(
        _operation: O,
        payload: &<O::Request as Message>::Payload,
        headers: &<O::Request as Message>::Headers,
    ) -> Result<Self, PublishError> {
        let correlation_id = uuid::Uuid::now_v7().to_string();
        let options = CallOptions::default();
        let sent =
            request_outgoing::<O>(payload, headers, &options, DEFAULT_TIMEOUT, &correlation_id)?;
        let properties = (sent.properties).with_reply_to(ShortString::from(TRIAL_REPLY_TO));
        Ok(Self::raw(sent.body, properties))
    }

    /// Any `body` with any `properties`, as another stack (or an attacker) might publish it.
    pub fn raw(body: Vec<u8>, properties: BasicProperties) -> Self {
        Self {
            body,
            properties,
            route: None,
            retries: None,
        }
    }

    /// Arriving through `exchange` with `routing_key`.
    pub fn via(mut self, exchange: impl Into<String>, routing_key: impl Into<String>) -> Self {
        self.route = Some((exchange.into(), routing_key.into()));
        self
    }

    /// Arriving as the worker's own retry after `retries` earlier ones, the way the queue's
    /// policy sends it round: on a queue whose retries warren counts, a copy through the
    /// default exchange carrying `x-retry-count`; on one the broker counts (quorum-native,
    /// immediate-requeue on a quorum queue), a redelivery carrying `x-delivery-count`.
    pub fn retried(mut self, retries: u32) -> Self {
        self.retries = Some(retries);
        self
    }

    /// The delivery as the broker hands it to a consumer of `queue` in `worker`'s topology;
    /// `None` when its route is no AMQP short string, which no broker would deliver.
    fn delivery(&self, queue: &Queue, worker: &Worker) -> Option<lapin::message::Delivery> {
        let (mut exchange, mut routing_key) = match &self.route {
            Some(route) => route.clone(),
            None => first_binding(worker, &queue.name),
        };
        if exchange.len().max(routing_key.len()) > MAX_SHORT_STRING {
            return None;
        }
        let mut properties = self.properties.clone();
        let mut redelivered = false;
        if let Some(retries) = self.retries {
            let header = if broker_counts(queue) {
                redelivered = true;
                headers::DELIVERY_COUNT
            } else {
                // Warren's copies come through the default exchange, routed by the queue's
                // name, their original route in their headers.
                (exchange, routing_key) = (String::new(), queue.name.clone());
                headers::RETRY_COUNT
            };
            let mut table = properties.headers().clone().unwrap_or_default();
            table.insert(
                ShortString::from(header),
                AMQPValue::LongLongInt(i64::from(retries)),
            );
            properties = properties.with_headers(table);
        }
        let mut raw = lapin::message::Delivery::mock(
            1,
            ShortString::from(exchange),
            ShortString::from(routing_key),
            redelivered,
            self.body.clone(),
        );
        raw.properties = properties;
        Some(raw)
    }
}

/// The reply-to of an [`Arrival::request`]: a queue's name, as classic RPC's callers give.
pub const TRIAL_REPLY_TO: &str = "warren.trial.replies";

/// The exchange and binding key of the first binding of `queue` in `worker`'s topology.
fn first_binding(worker: &Worker, queue: &str) -> (String, String) {
    worker
        .topology
        .bindings
        .iter()
        .find(|binding| binding.destination == Destination::Queue(queue.to_owned()))
        .map(|binding| (binding.exchange.clone(), binding.routing_key.clone()))
        .unwrap_or_default()
}

/// What the worker does with a delivery, as a trial found it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Verdict {
    /// The handler succeeded: acknowledged.
    Acked,
    /// An RPC request answered (its response, or one of the operation's declared errors): a
    /// reply published to the default exchange with `reply_to` as its routing key, then the
    /// request acknowledged once the broker confirmed the reply. [`Verdict::answer`] reads
    /// it as the caller does.
    Replied {
        /// Where the reply goes: the request's `reply-to`.
        reply_to: String,
        /// The reply's properties: its status, correlation id and declared error's code.
        properties: BasicProperties,
        /// The reply's body: the response or the declared error, encoded.
        body: Vec<u8>,
    },
    /// Sent round again: a copy published to the default exchange with `routing_key` (a wait
    /// queue, whose TTL is `delay`, on ttl-backoff; the queue itself on immediate-requeue of
    /// a classic queue), then the original acknowledged.
    Retried {
        /// Where the copy goes: a wait queue, or the queue itself.
        routing_key: String,
        /// How long it waits first (its wait queue's TTL); `None`: not at all.
        delay: Option<Duration>,
        /// The copy's `x-retry-count`.
        retry_count: u32,
        /// What the handler (or warren) said.
        error: String,
        /// The copy's properties, failure context in its headers.
        properties: BasicProperties,
    },
    /// Returned to its queue (`basic.reject`, requeue): a retry on a quorum queue, which the
    /// broker counts, or, `exhausted`, the contract's `exhausted: requeue`.
    Requeued {
        /// Whether its retries were spent.
        exhausted: bool,
        /// What the handler (or warren) said.
        error: String,
    },
    /// A copy published to the dead-letter exchange with the failure context (reason
    /// included) in its headers, then the original acknowledged.
    DeadLettered {
        /// Why it died.
        reason: FailureReason,
        /// The dead-letter exchange.
        exchange: String,
        /// The dead letter's routing key.
        routing_key: String,
        /// What the handler (or warren) said.
        error: String,
        /// The dead letter's properties.
        properties: BasicProperties,
    },
    /// Acknowledged and gone, as the contract says (`on_poison: drop`, `exhausted: drop`).
    Dropped {
        /// Why.
        reason: FailureReason,
        /// What the handler (or warren) said.
        error: String,
    },
    /// A dead letter its handler failed on, rejected without requeue: the broker dead-letters
    /// it through its queue's own dead-letter exchange, its headers as they came (a
    /// dead-letter consumer's failures are never copied).
    Rejected {
        /// Why.
        reason: FailureReason,
        /// What the handler (or warren) said.
        error: String,
    },
    /// Rejected without requeue on a queue without a dead-letter exchange: the broker
    /// discards it.
    Discarded {
        /// Why.
        reason: FailureReason,
        /// What the handler (or warren) said.
        error: String,
    },
}

impl Verdict {
    /// Why the message left its queue for good: dead-lettered, dropped or discarded.
    pub fn reason(&self) -> Option<FailureReason> {
        match self {
            Self::DeadLettered { reason, .. }
            | Self::Rejected { reason, .. }
            | Self::Dropped { reason, .. }
            | Self::Discarded { reason, .. } => Some(*reason),
            Self::Acked | Self::Replied { .. } | Self::Retried { .. } | Self::Requeued { .. } => {
                None
            }
        }
    }

    /// The reply of a [`Verdict::Replied`] as a caller of operation `O` reads it (with
    /// [`RpcClient`](crate::RpcClient)'s default body cap): the response, or the declared
    /// error. `None` on any other verdict.
    ///
    /// A request that is dead-lettered, dropped or discarded gets a `failed` reply where it
    /// can be answered (it names a reply-to and a correlation id, and its caller's deadline
    /// had not passed), read by its caller as
    /// [`RpcError::Failed`](crate::rpc::RpcError::Failed) with the verdict's
    /// [`reason`](Verdict::reason); one that is retried gets none.
    pub fn answer<O: crate::rpc::Operation>(&self) -> Option<crate::rpc::CallResult<O>> {
        let Self::Replied {
            properties, body, ..
        } = self
        else {
            return None;
        };
        Some(crate::rpc::read_answer::<O>(
            body,
            properties,
            crate::DEFAULT_MAX_BODY_BYTES,
        ))
    }

    /// What the handler (or warren) said, on every verdict but [`Verdict::Acked`] and
    /// [`Verdict::Replied`].
    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Acked | Self::Replied { .. } => None,
            Self::Retried { error, .. }
            | Self::Requeued { error, .. }
            | Self::DeadLettered { error, .. }
            | Self::Rejected { error, .. }
            | Self::Dropped { error, .. }
            | Self::Discarded { error, .. } => Some(error),
        }
    }

    /// The headers of the copy the worker publishes (a retry or a dead letter).
    pub fn copy_headers(&self) -> Option<&FieldTable> {
        match self {
            Self::Retried { properties, .. } | Self::DeadLettered { properties, .. } => {
                properties.headers().as_ref()
            }
            _ => None,
        }
    }
}

/// Why a trial could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrialError {
    /// No consumer of that name was registered on the worker.
    #[error(
        "no consumer `{consumer}` is registered on the worker; register it first (the generated `consumers::register` functions, or `Handlers`)"
    )]
    UnknownConsumer {
        /// The consumer asked for.
        consumer: String,
    },
    /// The consumer's queue is not in the worker's topology.
    #[error("consumer `{consumer}` reads queue `{queue}`, which the topology does not declare")]
    UnknownQueue {
        /// The consumer.
        consumer: String,
        /// Its queue.
        queue: String,
    },
    /// The arrival's exchange or routing key is longer than AMQP's 255 bytes.
    #[error(
        "the delivery tried on consumer `{consumer}` has an exchange or routing key past AMQP's 255 bytes, which no broker delivers"
    )]
    Route {
        /// The consumer.
        consumer: String,
    },
    /// The message's JSON Schemas do not compile.
    #[error(transparent)]
    Schema(#[from] crate::WorkerError),
}

/// What a trial needs of the worker: the consumer's queue and the settings it decodes by.
pub(super) struct Bench<'a> {
    pub queue: &'a Queue,
    pub consumer: &'static str,
    pub settings: &'a Settings,
    pub raw: &'a lapin::message::Delivery,
}

/// A delivery's failure, or none, and the retries before it: what settling starts from.
pub(super) struct Handled {
    pub result: Result<(), (Failure, String)>,
    pub retries: u32,
    pub settles: Settles,
}

/// How a [`Handled`] delivery is settled.
pub(super) enum Settles {
    /// By the queue's policy ([`decide`]), as any consumer's delivery.
    Policy,
    /// A dead letter's failure: by the broker, never by a copy.
    ByBroker,
    /// A failure by this decision, whatever the policy says (an RPC request past its
    /// caller's deadline).
    As(Decision),
    /// An RPC request answered: by its reply.
    Reply(Box<Reply>),
}

/// An RPC request's reply, as [`Verdict::Replied`] gives it.
pub(super) struct Reply {
    pub reply_to: String,
    pub properties: BasicProperties,
    pub body: Vec<u8>,
}

impl Handled {
    /// The bench's delivery failed with `failure`, `error` saying why, settled by `settles`.
    pub(super) fn failed(
        bench: &Bench<'_>,
        (failure, error): (Failure, String),
        settles: Settles,
    ) -> Self {
        Self {
            result: Err((failure, error)),
            retries: retries_so_far(bench.raw, bench.queue),
            settles,
        }
    }
}

/// What a dead-letter consumer's `handling` of the bench's delivery (its handler's future,
/// given the letter) leaves to settle.
pub(super) async fn dead_letter_handled(
    bench: &Bench<'_>,
    handling: impl Future<Output = Result<(), crate::HandlerError>>,
) -> Handled {
    Handled {
        result: outcome(AssertUnwindSafe(handling).catch_unwind().await),
        retries: retries_so_far(bench.raw, bench.queue),
        settles: Settles::ByBroker,
    }
}

/// The future of a trial, borrowing the consumer and the bench.
pub(super) type Trying<'a> = Pin<Box<dyn Future<Output = Result<Handled, TrialError>> + 'a>>;

/// Tries `handler` (a one-at-a-time consumer's) on the bench's delivery.
pub(super) async fn dispatched(
    handler: &dyn Dispatch,
    bench: &Bench<'_>,
) -> Result<Handled, TrialError> {
    let validators = handler.validators(bench.settings)?;
    let max_body_bytes = bench.settings.max_body_bytes;
    let decoded = handler.dispatch(
        bench.raw,
        bench.queue,
        validators.as_deref(),
        max_body_bytes,
    );
    Ok(handled(bench, decoded, |dispatched| dispatched.handling).await)
}

/// Tries `handler` (a batch consumer of `M`) on the bench's delivery, as a batch of one: the
/// delivery is admitted first ([`BatchHandler::admit`]), as the worker does while gathering.
pub(super) async fn batch<M: Message, H: BatchHandler<M>>(
    handler: &H,
    bench: &Bench<'_>,
) -> Result<Handled, TrialError> {
    let decoded = decode_as::<M>(bench)?;
    if let Ok(delivery) = &decoded
        && let Err(refused) = outcome(Ok(handler.admit(delivery)))
    {
        return Ok(Handled::failed(bench, refused, Settles::Policy));
    }
    Ok(handled(bench, decoded, |delivery| {
        handler.handle_batch(vec![delivery])
    })
    .await)
}

/// The bench's delivery decoded as `M`, as the worker decodes it.
fn decode_as<M: Message>(
    bench: &Bench<'_>,
) -> Result<Result<crate::codegen::DeliveryOf<M>, Poison>, TrialError> {
    let validators = bench.settings.validators::<M>()?;
    let max_body_bytes = bench.settings.max_body_bytes;
    Ok(decode::<M>(
        bench.raw,
        bench.queue,
        validators.as_deref(),
        max_body_bytes,
    ))
}

/// What settling starts from once the bench's `decoded` delivery went to the handler's
/// future `handle` makes of it (its panic caught, as the worker catches it), or, poison,
/// went nowhere. The retries are those the worker believes ([`retries_so_far`], which a
/// decoded delivery's own count is too).
pub(super) async fn handled<T, F>(
    bench: &Bench<'_>,
    decoded: Result<T, Poison>,
    handle: impl FnOnce(T) -> F,
) -> Handled
where
    F: Future<Output = Result<(), crate::HandlerError>>,
{
    let result = match decoded {
        Err(poison) => Err((Failure::Poison(poison.reason), poison.detail)),
        Ok(delivery) => outcome(AssertUnwindSafe(handle(delivery)).catch_unwind().await),
    };
    Handled {
        result,
        retries: retries_so_far(bench.raw, bench.queue),
        settles: Settles::Policy,
    }
}

impl Worker {
    /// Tries the registered consumer `consumer` on `arrival`, without a broker: the delivery
    /// goes through the consumer's decode (content type, size, JSON, schemas), its handler
    /// (through the adapter it was registered with) and its queue's retry policy, exactly as
    /// on a running worker, and the [`Verdict`] says what the worker would do with it. A
    /// retry's wait tier with jitter is picked by `jitter` in `[0, 1)`, random when `None`.
    ///
    /// For tests (the `trial` feature, which `warren-testkit` turns on): build the worker on
    /// [`crate::Connection::detached`]. One-at-a-time and batch consumers are tried (a batch
    /// of one), inbox consumers with their database, consumers of several messages,
    /// dead-letter consumers (whose failures the broker settles: [`Verdict::Rejected`]) and
    /// RPC servers (whose answers are [`Verdict::Replied`]; build their requests with
    /// [`Arrival::request`]). A trial has no broker to ask whether the node a direct
    /// reply-to address names runs: it takes every well-formed address's node as running.
    pub async fn trial(
        &self,
        consumer: &str,
        arrival: &Arrival,
        jitter: Option<f64>,
    ) -> Result<Verdict, TrialError> {
        let registered = (self.consumers.iter())
            .map(|(registered, _)| registered)
            .find(|registered| registered.spec().name == consumer)
            .ok_or_else(|| TrialError::UnknownConsumer {
                consumer: consumer.to_owned(),
            })?;
        let spec = *registered.spec();
        let name = self.topology.qualified(spec.queue);
        let queue = self
            .topology
            .queue(&name)
            .ok_or_else(|| TrialError::UnknownQueue {
                consumer: consumer.to_owned(),
                queue: name.clone(),
            })?;
        let raw = arrival
            .delivery(queue, self)
            .ok_or_else(|| TrialError::Route {
                consumer: consumer.to_owned(),
            })?;
        let bench = Bench {
            queue,
            consumer: spec.name,
            settings: &self.settings,
            raw: &raw,
        };
        let handled = registered.trial(&bench).await?;
        let jitter = jitter.unwrap_or_else(fastrand::f64);
        Ok(verdict(&bench, handled, jitter))
    }
}

/// What the worker does with the bench's delivery after `handled`: the queue's policy
/// ([`decide`]), carried out as the settler would, its copies written by the settler's
/// [`Copier`].
fn verdict(bench: &Bench<'_>, handled: Handled, jitter: f64) -> Verdict {
    let Handled {
        result,
        retries,
        settles,
    } = handled;
    let Err((failure, error)) = result else {
        return match settles {
            Settles::Reply(reply) => Verdict::Replied {
                reply_to: reply.reply_to,
                properties: reply.properties,
                body: reply.body,
            },
            _ => Verdict::Acked,
        };
    };
    let decision = match settles {
        Settles::ByBroker => return by_broker(bench.queue, retries, failure, error),
        Settles::As(decision) => decision,
        Settles::Policy | Settles::Reply(_) => decide(bench.queue, retries, failure, jitter),
    };
    let queue = bench.queue;
    let copier = Copier {
        queue,
        consumer: bench.consumer,
        trust: &Default::default(),
        budget: crate::wire::copy_budget(crate::wire::RABBITMQ_FRAME_MAX),
    };
    let span = tracing::Span::none();
    match decision {
        Decision::Requeue { exhausted } => Verdict::Requeued { exhausted, error },
        Decision::Retry {
            routing_key,
            retry_count,
        } => match copier.retry_copy(bench.raw, retry_count, &error, &span) {
            Some(properties) => Verdict::Retried {
                delay: wait_of(queue, &routing_key),
                properties,
                routing_key,
                retry_count,
                error,
            },
            // Over the frame size: dead-lettered as too large, as the settler does.
            None => dead_lettered(&copier, bench.raw, retries, error, FailureReason::TooLarge),
        },
        Decision::DeadLetter { reason } => {
            dead_lettered(&copier, bench.raw, retries, error, reason)
        }
        Decision::Drop { reason } => Verdict::Dropped { reason, error },
        Decision::Discard { reason } => Verdict::Discarded { reason, error },
    }
}

/// A dead letter's failure, settled by the broker: rejected (the broker dead-letters it
/// through its queue's own dead-letter exchange), dropped or requeued.
fn by_broker(queue: &Queue, retries: u32, failure: Failure, error: String) -> Verdict {
    match super::dead_letter_consumer::by_broker(queue, retries, failure) {
        ByBroker::DeadLetter(reason) => Verdict::Rejected { reason, error },
        ByBroker::Drop(reason) => Verdict::Dropped { reason, error },
        ByBroker::Requeue => Verdict::Requeued {
            exhausted: false,
            error,
        },
    }
}

/// `raw` dead-lettered for `reason` by `copier`: to the queue's dead-letter exchange, or,
/// with none, discarded.
fn dead_lettered(
    copier: &Copier<'_>,
    raw: &lapin::message::Delivery,
    retries: u32,
    error: String,
    reason: FailureReason,
) -> Verdict {
    let Some((exchange, routing_key)) = copier.dead_letter_route(raw) else {
        return Verdict::Discarded { reason, error };
    };
    let span = tracing::Span::none();
    let (properties, _) = copier.dead_letter_copy(raw, retries, &error, reason.as_str(), &span);
    Verdict::DeadLettered {
        reason,
        exchange,
        routing_key,
        error,
        properties,
    }
}

/// The TTL of `queue`'s wait queue `routing_key`; `None` when it is the queue itself.
fn wait_of(queue: &Queue, routing_key: &str) -> Option<Duration> {
    let Retry::TtlBackoff(backoff) = &queue.retry else {
        return None;
    };
    (backoff.tiers.iter())
        .find(|tier| tier.queue == routing_key)
        .map(|tier| tier.delay)
}
