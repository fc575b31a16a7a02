//! The consume loop of an RPC server (`crate::rpc`): the one-at-a-time loop of any consumer
//! (decode, handler, circuit breaker, health, metrics, spans, the queue's retry policy), with
//! a reply to the caller, and the server's rules of the `rpc` module docs.
//!
//! Replies go through the consumer's copies publisher (confirm mode) to the default exchange,
//! not `mandatory`: a caller that gave up has no channel left to receive its reply, and that
//! is no failure of the server. A request is acknowledged only once its reply is confirmed;
//! a reply that cannot be published (the channel down, no confirm in time) returns the
//! request to its queue, to be handled again, as a copy that was not confirmed does, and one
//! the broker refuses (its queue full) dead-letters it.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use lapin::BasicProperties;
use lapin::types::ShortString;
use tracing::Instrument as _;

use super::acks::Taken;
use super::breaker::Breaker;
use super::consume::{Panicked, one_at_a_time, run_handler, settled_even_on_panic};
use super::decode::{decode, retries_so_far};
use super::policy::{Decision, Failure, dead_letter_decision};
use super::reply_nodes::{NodeCheck, ReplyNodes};
use super::runner::Runner;
use super::settle::Settler;
use super::{ConsumerSpec, Context, Registered, Task};
use crate::amqp::header_int;
use crate::clock::unix_millis;
use crate::error::Chain;
use crate::metrics::{Outcome as Settled, ReplyMetrics};
use crate::model::Queue;
use crate::model::{FailureReason, headers};
use crate::publisher::Routing;
use crate::rpc::reply_to::{ReplyAddress, classify};
use crate::rpc::{Answer, DeclaredErrors, Operation, RpcHandler, RpcHandlerError, encode_payload};
use crate::schema::Validators;
use crate::text::{MAX_ERROR_BYTES, truncate};
use crate::{HandlerError, Message, PublishError};

pub(super) struct Server<O, H> {
    spec: ConsumerSpec,
    handler: Arc<H>,
    operation: PhantomData<fn() -> O>,
}

impl<O, H> Server<O, H> {
    pub(super) fn new(spec: ConsumerSpec, handler: H) -> Self {
        Self {
            spec,
            handler: Arc::new(handler),
            operation: PhantomData,
        }
    }
}

/// Where a request's reply goes: its `reply-to` (on the default exchange) and its
/// correlation id, both AMQP short strings as they came, and the node a direct reply-to
/// address names.
struct ReplyTo {
    address: ShortString,
    correlation_id: ShortString,
    /// The node hash of a direct reply-to address, checked before anything is sent to it.
    node: Option<u64>,
}

impl ReplyTo {
    /// Where the reply to a request with `properties` goes; the error says why it cannot
    /// be answered.
    fn of(properties: &BasicProperties) -> Result<Self, String> {
        let present =
            |value: &Option<ShortString>| value.clone().filter(|value| !value.as_str().is_empty());
        let missing = |what| {
            format!("an RPC request needs a reply-to and a correlation id; this one has no {what}")
        };
        let address = present(properties.reply_to()).ok_or_else(|| missing("reply-to"))?;
        let correlation_id =
            present(properties.correlation_id()).ok_or_else(|| missing("correlation id"))?;
        let node = match classify(address.as_str()) {
            Ok(ReplyAddress::Direct { node }) => Some(node),
            Ok(ReplyAddress::Queue) => None,
            Err(why) => {
                let address = truncate(address.as_str(), MAX_ADDRESS_SHOWN);
                return Err(format!(
                    "its reply-to `{address}` cannot be answered: {why} (RabbitMQ closes the connection of a publisher replying to it)"
                ));
            }
        };
        Ok(Self {
            address,
            correlation_id,
            node,
        })
    }
}

/// How much of a refused reply-to an error quotes.
const MAX_ADDRESS_SHOWN: usize = 96;

/// Why a request with `properties` must not be worked on: its caller's deadline passed.
fn past_deadline(properties: &BasicProperties) -> Option<String> {
    let deadline = header_int(properties.headers().as_ref(), headers::DEADLINE)?;
    let now = unix_millis();
    (deadline < now).then(|| {
        format!(
            "the caller's deadline passed {} ms before the request was taken",
            now.saturating_sub(deadline)
        )
    })
}

/// An RPC handler's result as the breaker and the queue's policy read it: an answer (its
/// response, or one of its declared errors: the handler did its job) is a success.
fn answered<R, E>(result: Result<R, RpcHandlerError<E>>) -> Result<Result<R, E>, HandlerError> {
    match result {
        Ok(response) => Ok(Ok(response)),
        Err(RpcHandlerError::Declared(error)) => Ok(Err(error)),
        Err(RpcHandlerError::Failed(error)) => Err(error),
    }
}

/// The reply to a request its handler `answered`: how it is sent and its body; or, when the
/// answer breaks its schema or is larger than `max_body_bytes`, why (a bug of the server).
///
/// The cap: callers read replies under the same cap by default, and the broker closes the
/// channel of a message above its own `max_message_size`, which would return the request to
/// be answered (and refused) again until its deadline.
fn reply_of<O: Operation>(
    answered: Result<<O::Response as Message>::Payload, O::Error>,
    max_body_bytes: usize,
) -> Result<(Answer<'static>, Vec<u8>), String> {
    let (answer, body) = match answered {
        Ok(response) => {
            let answer = Answer::Ok {
                message: <O::Response as Message>::NAME,
                content_type: <O::Response as Message>::CONTENT_TYPE,
            };
            (answer, encode_payload::<O::Response>(&response))
        }
        Err(declared) => {
            let answer = Answer::Error {
                code: declared.code(),
                message: declared.message_name(),
                content_type: declared.content_type(),
            };
            (answer, declared.encode())
        }
    };
    let within_cap = body.and_then(|body| match body.len() > max_body_bytes {
        true => Err(PublishError::TooLarge {
            bytes: body.len(),
            limit: max_body_bytes,
        }),
        false => Ok(body),
    });
    within_cap.map(|body| (answer, body)).map_err(|error| {
        let error = format!("the server's answer is invalid: {}", Chain(&error));
        truncate(&error, MAX_ERROR_BYTES)
    })
}

/// What serving one request needs.
struct Serving<H> {
    settler: Arc<Settler>,
    validators: Option<Arc<Validators>>,
    breaker: Option<Arc<Breaker>>,
    handler: Arc<H>,
    max_body_bytes: usize,
    replies: Arc<ReplyMetrics>,
    reply_nodes: Arc<ReplyNodes>,
}

/// How a request past its caller's deadline is settled, whatever the queue's `on_poison`
/// says: dead-lettered as `expired`, as the broker does with one that expired waiting.
fn expired(queue: &Queue) -> (Failure, Decision) {
    let reason = FailureReason::Expired;
    (Failure::Poison(reason), dead_letter_decision(queue, reason))
}

/// The failure of a handler whose success carried no answer, which its future sets whenever
/// it succeeds.
fn no_answer() -> (Failure, String) {
    let error = "the RPC handler ended with no answer";
    (Failure::Internal, error.to_owned())
}

/// Why a reply was not sent.
enum NotSent {
    /// The request's channel is gone: the broker redelivers it, and it is answered then.
    ChannelGone,
    /// The broker refused it (a nack: the queue it reached is full, with `x-overflow:
    /// reject-publish`): sent again, it would most likely be refused again.
    Refused(PublishError),
    /// Publishing it failed.
    Failed(PublishError),
}

/// The reason of a dead-lettering (or dropping, or discarding) `outcome`: the request will
/// not be handled again, and its caller is told. `None` when it is retried.
fn terminal(outcome: &Decision) -> Option<FailureReason> {
    match outcome {
        Decision::DeadLetter { reason }
        | Decision::Drop { reason }
        | Decision::Discard { reason } => Some(*reason),
        Decision::Requeue { .. } | Decision::Retry { .. } => None,
    }
}

/// What a `failed` reply tells the caller of a request that failed with `failure` (`error`
/// in full) and was settled by `outcome`: why its request is poison (the caller's own
/// bytes), or only the reason otherwise. A handler's error, or what broke a response's
/// schema, is the server's own business, which any producer allowed to send a request must
/// not read: it goes to the dead letter and the log, where the call's correlation id finds it.
fn told<'a>(failure: Failure, outcome: &Decision, error: &'a str) -> Cow<'a, str> {
    if let Failure::Poison(_) = failure {
        return error.into();
    }
    let reason = terminal(outcome).unwrap_or(FailureReason::NonRetryable);
    let kept = match outcome {
        Decision::DeadLetter { .. } => "it was dead-lettered with the server's error",
        _ => "the server logged its error",
    };
    format!("the server could not handle the request ({reason}); {kept}, under this call's correlation id").into()
}

impl<H> Serving<H> {
    /// Serves one request of operation `O`, settling it whatever happens.
    async fn serve<O: Operation>(&self, raw: &Taken)
    where
        H: RpcHandler<O>,
    {
        let settler = &self.settler;
        let retries = retries_so_far(raw, &settler.queue);
        let Some(reply_to) = self.admit(raw, retries).await else {
            return;
        };
        let validators = self.validators.as_deref();
        let delivery =
            match decode::<O::Request>(raw, &settler.queue, validators, self.max_body_bytes) {
                Ok(delivery) => delivery,
                Err(poison) => {
                    let failure = Failure::Poison(poison.reason);
                    let outcome = settler.decide(failure, retries);
                    // Told at once rather than left to time out, whatever the policy does
                    // with the request (poison is never retried).
                    return self
                        .give_up(raw, &reply_to, failure, outcome, retries, &poison.detail)
                        .await;
                }
            };
        let (failure, error) = match self.handled::<O>(raw, delivery).await {
            Ok(answered) => {
                return match reply_of::<O>(answered, self.max_body_bytes) {
                    Ok((answer, body)) => self.answer(raw, &reply_to, answer, body, retries).await,
                    Err(error) => self.broken(raw, &reply_to, &error, retries).await,
                };
            }
            Err(failed) => failed,
        };
        let outcome = settler.decide(failure, retries);
        if terminal(&outcome).is_some() {
            return self
                .give_up(raw, &reply_to, failure, outcome, retries, &error)
                .await;
        }
        settler
            .fail_as(raw, failure, outcome, retries, &error)
            .await;
    }

    /// Where a request may be answered, before any work: `None`, with the request settled,
    /// when it must not be worked on (its caller's deadline passed) or cannot be answered
    /// (its reply-to is not an address, or names a node that is not running).
    async fn admit(&self, raw: &Taken, retries: u32) -> Option<ReplyTo> {
        let settler = &self.settler;
        // First: a caller that gave up is owed no work, and no retry of it.
        if let Some(error) = past_deadline(&raw.properties) {
            let (failure, outcome) = expired(&settler.queue);
            settler
                .fail_as(raw, failure, outcome, retries, &error)
                .await;
            return None;
        }
        let reply_to = match ReplyTo::of(&raw.properties) {
            Ok(reply_to) => reply_to,
            Err(error) => {
                let failure = Failure::Poison(FailureReason::Decode);
                settler.fail(raw, failure, retries, &error).await;
                return None;
            }
        };
        if let Err((failure, error)) = self.reachable(&reply_to).await {
            settler.fail(raw, failure, retries, &error).await;
            return None;
        }
        Some(reply_to)
    }

    /// Runs the handler on `delivery`: its response, one of its declared errors (an answer
    /// too: the handler did its job, and the breaker counts it as such), or its failure.
    async fn handled<O: Operation>(
        &self,
        raw: &Taken,
        delivery: crate::Delivery<
            <O::Request as Message>::Payload,
            <O::Request as Message>::Headers,
        >,
    ) -> Result<Result<<O::Response as Message>::Payload, O::Error>, (Failure, String)>
    where
        H: RpcHandler<O>,
    {
        let mut answer = None;
        let handle = || async {
            answer = Some(answered(self.handler.handle(delivery).await)?);
            Ok(())
        };
        let properties = [&raw.properties];
        run_handler(&self.settler, self.breaker.as_deref(), properties, handle).await?;
        answer.ok_or_else(no_answer)
    }

    /// Whether a reply to `reply_to` can be published without costing the connection: a
    /// direct reply-to address must name a running node (`reply_nodes`). A node that does
    /// not run makes the request poison (its caller can never read a reply); a probe that
    /// could not tell makes it a retryable failure, retried by the queue's policy.
    async fn reachable(&self, reply_to: &ReplyTo) -> Result<(), (Failure, String)> {
        let Some(node) = reply_to.node else {
            return Ok(());
        };
        let address = reply_to.address.as_str();
        match self.reply_nodes.check(node, address).await {
            NodeCheck::Running => Ok(()),
            NodeCheck::NotRunning => Err((
                Failure::Poison(FailureReason::Decode),
                format!(
                    "its reply-to names node hash {node}, which no running node has (the caller's node left the cluster, or the address is forged); RabbitMQ closes the connection of a publisher replying to it"
                ),
            )),
            NodeCheck::Unknown(why) => Err((
                Failure::RETRYABLE,
                format!("whether the node of its reply-to (hash {node}) runs is unknown: {why}"),
            )),
        }
    }

    /// Sends the answer and acknowledges the request once the broker confirmed it; returns
    /// the request to its queue when the reply was not confirmed.
    async fn answer(
        &self,
        raw: &Taken,
        reply_to: &ReplyTo,
        answer: Answer<'_>,
        body: Vec<u8>,
        retries: u32,
    ) {
        let settler = &self.settler;
        match self.reply(raw, reply_to, answer, &body).await {
            Ok(()) => {
                crate::trace::handled(retries);
                settler.observer.handled(Settled::Ack);
                settler.ack(raw);
            }
            Err(NotSent::ChannelGone) => {}
            // Returned to its queue, the request would be handled again at once, its reply
            // refused again, in a loop without end: dead-lettered instead, unanswered.
            Err(NotSent::Refused(error)) => {
                let error = format!(
                    "the reply's queue `{}` refused the reply: {}",
                    reply_to.address.as_str(),
                    Chain(&error)
                );
                let failure = Failure::NonRetryable;
                let outcome = settler.decide(failure, retries);
                self.give_up(raw, reply_to, failure, outcome, retries, &error)
                    .await;
            }
            Err(NotSent::Failed(error)) => {
                tracing::warn!(
                    consumer = settler.consumer,
                    queue = %settler.queue.name,
                    error = %Chain(&error),
                    "the reply was not confirmed; the request returns to its queue"
                );
                settler.observer.handled(Settled::Retry);
                settler.reject(raw, true).await;
            }
        }
    }

    /// The handler's answer breaks its schema, a bug of the server: its caller gets a
    /// `failed` reply, and the request is dead-lettered (`non-retryable`).
    async fn broken(&self, raw: &Taken, reply_to: &ReplyTo, error: &str, retries: u32) {
        tracing::error!(
            consumer = self.settler.consumer,
            error,
            "an RPC handler's answer breaks its schema"
        );
        let failure = Failure::NonRetryable;
        let outcome = self.settler.decide(failure, retries);
        self.give_up(raw, reply_to, failure, outcome, retries, error)
            .await;
    }

    /// Settles a request that will not be answered by `outcome` (a terminal one: dead-letter,
    /// drop or discard), then tells its caller why. Only once the request is settled (its
    /// dead letter confirmed): one still held when its channel closed (its dead letter not
    /// published yet) is redelivered and may be answered then, and a caller told it failed
    /// might act on that.
    async fn give_up(
        &self,
        raw: &Taken,
        reply_to: &ReplyTo,
        failure: Failure,
        outcome: Decision,
        retries: u32,
        error: &str,
    ) {
        let reason = terminal(&outcome).unwrap_or(FailureReason::NonRetryable);
        let detail = told(failure, &outcome, error);
        self.settler
            .fail_as(raw, failure, outcome, retries, error)
            .await;
        if !raw.acks.unsettled(raw.delivery_tag) {
            self.fail_caller(raw, reply_to, reason, &detail).await;
        }
    }

    /// Tells the caller the server cannot answer, best effort: its request is settled already
    /// ([`Serving::give_up`]), whether this reply goes out or not.
    async fn fail_caller(
        &self,
        raw: &Taken,
        reply_to: &ReplyTo,
        reason: FailureReason,
        detail: &str,
    ) {
        let detail = truncate(detail, MAX_ERROR_BYTES);
        let answer = Answer::Failed { reason };
        if let Err(NotSent::Failed(error) | NotSent::Refused(error)) =
            self.reply(raw, reply_to, answer, detail.as_bytes()).await
        {
            tracing::warn!(
                consumer = self.settler.consumer,
                error = %Chain(&error),
                "the `failed` reply was not confirmed; its caller will time out"
            );
        }
    }

    /// Publishes a reply to `reply_to` and waits for its confirm.
    async fn reply(
        &self,
        raw: &Taken,
        reply_to: &ReplyTo,
        answer: Answer<'_>,
        body: &[u8],
    ) -> Result<(), NotSent> {
        // Its channel, not its acker: a request discarded (`basic.nack`) has used its acker
        // and is still owed its `failed` reply.
        if raw.acker.poisoned() {
            // The broker redelivers the request; it is answered then, once.
            return Err(NotSent::ChannelGone);
        }
        let properties = crate::rpc::reply_properties(&reply_to.correlation_id, answer);
        let properties = crate::trace::inject(&tracing::Span::current(), properties);
        let status = answer.status();
        let address = reply_to.address.as_str();
        let span = tracing::debug_span!("reply", status = status.as_str());
        // The default exchange only: a reply-to is a queue name (or direct reply-to's
        // pseudo-queue), never an exchange the caller could point a server at.
        let sent = self
            .settler
            .publisher
            .send_to("", address, body, properties, Routing::Optional, || {
                raw.release()
            })
            .instrument(span)
            .await;
        match sent {
            Ok(()) => {
                self.replies.replied(status);
                Ok(())
            }
            Err(error @ PublishError::Nacked { .. }) => Err(NotSent::Refused(error)),
            Err(error) => Err(NotSent::Failed(error)),
        }
    }
}

/// Tries `handler` on the bench's request, as [`Serving::serve`] serves it, without a broker:
/// the node of a direct reply-to address is taken as running (there is none to ask).
#[cfg(feature = "trial")]
async fn tried<O: Operation, H: RpcHandler<O>>(
    handler: &H,
    bench: &super::trial::Bench<'_>,
) -> Result<super::trial::Handled, super::trial::TrialError> {
    use super::trial::{Handled, Reply, Settles, handled};
    let raw = bench.raw;
    if let Some(error) = past_deadline(&raw.properties) {
        let (failure, outcome) = expired(bench.queue);
        return Ok(Handled::failed(
            bench,
            (failure, error),
            Settles::As(outcome),
        ));
    }
    let reply_to = match ReplyTo::of(&raw.properties) {
        Ok(reply_to) => reply_to,
        Err(error) => {
            let failure = Failure::Poison(FailureReason::Decode);
            return Ok(Handled::failed(bench, (failure, error), Settles::Policy));
        }
    };
    let settings = bench.settings;
    let validators = settings.validators::<O::Request>()?;
    let decoded = decode::<O::Request>(
        raw,
        bench.queue,
        validators.as_deref(),
        settings.max_body_bytes,
    );
    let mut answer = None;
    let slot = &mut answer;
    let handle = move |delivery| async move {
        *slot = Some(answered(handler.handle(delivery).await)?);
        Ok(())
    };
    let tried = handled(bench, decoded, handle).await;
    if tried.result.is_err() {
        return Ok(tried);
    }
    let Some(answer) = answer else {
        return Ok(Handled::failed(bench, no_answer(), Settles::Policy));
    };
    match reply_of::<O>(answer, settings.max_body_bytes) {
        Ok((answer, body)) => {
            let properties = crate::rpc::reply_properties(&reply_to.correlation_id, answer);
            let reply = Reply {
                reply_to: reply_to.address.to_string(),
                properties,
                body,
            };
            Ok(Handled {
                settles: Settles::Reply(Box::new(reply)),
                ..tried
            })
        }
        Err(error) => {
            let failure = (Failure::NonRetryable, error);
            Ok(Handled::failed(bench, failure, Settles::Policy))
        }
    }
}

impl<O: Operation, H: RpcHandler<O>> Registered for Server<O, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    #[cfg(feature = "trial")]
    fn trial<'a>(&'a self, bench: &'a super::trial::Bench<'a>) -> super::trial::Trying<'a> {
        Box::pin(tried::<O, H>(&self.handler, bench))
    }

    fn start(self: Box<Self>, context: Context) -> Task {
        Box::pin(async move {
            let replies = Arc::new(ReplyMetrics::new(self.spec.name, &context.queue));
            let reply_nodes = Arc::new(ReplyNodes::new(context.copies.clone()));
            let Some(runner) = Runner::start::<O::Request>(self.spec, context).await? else {
                return Ok(());
            };
            one_at_a_time(
                runner,
                Box::new(|runner, raw, span| {
                    let serving = Serving {
                        settler: runner.settler.clone(),
                        validators: runner.validators.clone(),
                        breaker: runner.breaker.clone(),
                        handler: self.handler.clone(),
                        max_body_bytes: runner.context.settings.max_body_bytes,
                        replies: replies.clone(),
                        reply_nodes: reply_nodes.clone(),
                    };
                    Box::pin(
                        async move {
                            let served = || serving.serve::<O>(&raw);
                            let panicked =
                                settled_even_on_panic(&raw, &serving.settler, served).await;
                            // Dead-lettered after a panic of warren's own: its caller is told, as
                            // after any dead-lettering, rather than left to time out.
                            if let (Err(Panicked { settled_here: true }), Ok(reply_to)) =
                                (panicked, ReplyTo::of(&raw.properties))
                                && serving.reachable(&reply_to).await.is_ok()
                            {
                                let detail =
                                    "the server could not handle the request (internal-error)";
                                let reason = FailureReason::InternalError;
                                serving.fail_caller(&raw, &reply_to, reason, detail).await;
                            }
                        }
                        .instrument(span),
                    )
                }),
            )
            .await
        })
    }
}
