//! The consume loop of a dead-letter consumer: every message of its queue reaches the
//! handler as a [`DeadLetter`], typed when it decodes as the consumer's message, raw (poison)
//! when it does not. Poison is never dropped or dead-lettered again for its content.
//!
//! A failed handler is settled by the broker, never by a copy: a copy would write the dead
//! letter's consumer and queue over the failure history the queue is there to keep. The
//! queue's policy decides (see [`settle_by_broker`]).

use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_lite::FutureExt;
use tracing::Instrument as _;

use super::acks::Taken;
use super::consume::{one_at_a_time, panic_text, run_handler};
use super::decode::{decode, original_route, retries_so_far};
use super::policy::{Decision, Failure, decide};
use super::runner::Runner;
use super::settle::Settler;
use super::{ConsumerSpec, Context, Registered, Task};
use crate::codec::Poison;
use crate::failure::RetryBudgets;
use crate::metrics::Outcome as Settled;
use crate::model::{FailureReason, Queue};
use crate::schema::Validators;
use crate::text::{MAX_ERROR_BYTES, truncate};
use crate::{
    DeadLetter, DeadMessage, FailureContext, HandlerError, Message, RawMessage, WorkerError,
};

/// Handles the dead letters of one queue, whose messages are `M` when they are not poison.
/// Generated dead-letter consumer traits are adapted to this.
pub trait DeadLetterHandler<M: Message>: Send + Sync + 'static {
    /// Handles one dead letter.
    fn handle(
        &self,
        dead_letter: DeadLetter<M::Payload, M::Headers>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

pub(super) struct DeadLetters<M, H> {
    spec: ConsumerSpec,
    handler: Arc<H>,
    message: PhantomData<fn() -> M>,
}

impl<M, H> DeadLetters<M, H> {
    pub(super) fn new(spec: ConsumerSpec, handler: H) -> Self {
        Self {
            spec,
            handler: Arc::new(handler),
            message: PhantomData,
        }
    }
}

/// `raw` as a dead letter of message `M`: its failure history from its headers, and the
/// message typed when it decodes and validates as `M` and its `type` property (if any) names
/// `M`, raw otherwise. A dead letter another stack wrote is judged by `budgets`
/// ([`FailureContext::judged`]).
pub(crate) fn dead_letter<M: Message>(
    raw: &lapin::message::Delivery,
    queue: &Queue,
    validators: Option<&Validators>,
    max_body_bytes: usize,
    budgets: &RetryBudgets,
) -> DeadLetter<M::Payload, M::Headers> {
    let failure = FailureContext::from_headers(raw.properties.headers().as_ref())
        .map(|failure| budgets.judge(failure))
        .unwrap_or_default();
    let typed = match raw.properties.kind() {
        Some(kind) if !names(kind.as_str(), M::NAME) => Err(Poison {
            reason: FailureReason::Decode,
            detail: truncate(
                &format!("message type `{kind}`, expected `{}`", M::NAME),
                MAX_ERROR_BYTES,
            ),
        }),
        _ => decode::<M>(raw, queue, validators, max_body_bytes),
    };
    let message = match typed {
        Ok(delivery) => DeadMessage::Typed(delivery.with_failure(failure.clone())),
        Err(poison) => DeadMessage::Raw(raw_message(raw, queue, poison, max_body_bytes)),
    };
    DeadLetter::new(failure, message)
}

/// Whether the `type` property `kind` names message `name`. Compared unqualified: a contract
/// that imports a message names it `shop::sale`, and its owner publishes it as `sale`.
pub(super) fn names(kind: &str, name: &str) -> bool {
    unqualified(kind) == unqualified(name)
}

fn unqualified(name: &str) -> &str {
    name.rsplit_once("::").map_or(name, |(_, last)| last)
}

/// The raw message of a poison dead letter, its body cut to `max_body_bytes`.
pub(super) fn raw_message(
    raw: &lapin::message::Delivery,
    queue: &Queue,
    poison: Poison,
    max_body_bytes: usize,
) -> RawMessage {
    let properties = &raw.properties;
    let text = |value: &Option<lapin::types::ShortString>| value.as_ref().map(|v| v.to_string());
    let (exchange, routing_key) = original_route(raw, queue);
    let mut message = RawMessage::new(
        raw.data[..raw.data.len().min(max_body_bytes)].to_vec(),
        poison.reason,
        poison.detail,
    );
    message.body_len = raw.data.len();
    message.content_type = text(properties.content_type());
    message.content_encoding = text(properties.content_encoding());
    message.message_id = text(properties.message_id());
    message.kind = text(properties.kind());
    message.exchange = exchange.unwrap_or_default();
    message.routing_key = routing_key.unwrap_or_default();
    message
}

/// What the broker is asked to do with a dead letter its handler failed on (or warren
/// panicked on), by the queue's policy, so that its headers stay as they came:
/// - a retry (requeue or a retry copy) returns it to its queue (`basic.reject`, requeue),
///   where the broker counts it on a quorum queue;
/// - dead-lettering rejects it without requeue, so the broker dead-letters it through the
///   queue's own dead-letter exchange, adding only its `x-death`;
/// - `exhausted: drop` acks it, as the contract says;
/// - with nowhere to dead-letter, it returns to its queue: a dead letter is never discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ByBroker {
    /// Rejected without requeue, for this reason.
    DeadLetter(FailureReason),
    /// Acknowledged and gone, for this reason.
    Drop(FailureReason),
    /// Rejected with requeue.
    Requeue,
}

/// How the broker settles a dead letter of `queue` that failed with `failure` after
/// `retries` ([`ByBroker`]).
pub(super) fn by_broker(queue: &Queue, retries: u32, failure: Failure) -> ByBroker {
    match decide(queue, retries, failure, 0.0) {
        Decision::DeadLetter { reason } => ByBroker::DeadLetter(reason),
        Decision::Drop { reason } => ByBroker::Drop(reason),
        Decision::Requeue { .. } | Decision::Retry { .. } | Decision::Discard { .. } => {
            ByBroker::Requeue
        }
    }
}

/// Settles a dead letter its handler failed on (or warren panicked on) as [`by_broker`]
/// says.
async fn settle_by_broker(settler: &Settler, raw: &Taken, failure: Failure, error: &str) {
    let retries = retries_so_far(raw, &settler.queue);
    let consumer = settler.consumer;
    let queue = settler.queue.name.as_str();
    match by_broker(&settler.queue, retries, failure) {
        ByBroker::DeadLetter(reason) => {
            tracing::warn!(
                consumer,
                queue,
                reason = reason.as_str(),
                error,
                "dead-letter handler failed; the broker dead-letters the dead letter"
            );
            settler.observer.handled(Settled::DeadLetter);
            settler.reject(raw, false).await;
        }
        ByBroker::Drop(reason) => {
            tracing::warn!(
                consumer,
                queue,
                reason = reason.as_str(),
                error,
                "dead-letter handler failed; dropped as the contract says"
            );
            settler.observer.handled(Settled::Drop);
            settler.ack(raw);
        }
        ByBroker::Requeue => {
            tracing::warn!(
                consumer,
                queue,
                retries,
                error,
                "dead-letter handler failed; the dead letter returns to its queue"
            );
            settler.observer.handled(Settled::Requeue);
            settler.reject(raw, true).await;
        }
    }
}

impl<M: Message, H: DeadLetterHandler<M>> Registered for DeadLetters<M, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    #[cfg(feature = "trial")]
    fn trial<'a>(&'a self, bench: &'a super::trial::Bench<'a>) -> super::trial::Trying<'a> {
        Box::pin(async move {
            let settings = bench.settings;
            let validators = settings.validators::<M>()?;
            let letter = dead_letter::<M>(
                bench.raw,
                bench.queue,
                validators.as_deref(),
                settings.max_body_bytes,
                &settings.budgets,
            );
            Ok(super::trial::dead_letter_handled(bench, self.handler.handle(letter)).await)
        })
    }

    fn start(self: Box<Self>, context: Context) -> Task {
        Box::pin(async move {
            let Some(runner) = Runner::start::<M>(self.spec, context).await? else {
                return Ok(());
            };
            let validators = runner.validators.clone();
            let max_body_bytes = runner.context.settings.max_body_bytes;
            let budgets = runner.context.settings.budgets.clone();
            let handler = self.handler.clone();
            let letter = move |raw: &lapin::message::Delivery, queue: &Queue| {
                dead_letter::<M>(raw, queue, validators.as_deref(), max_body_bytes, &budgets)
            };
            let handle = move |letter| {
                let handler = handler.clone();
                async move { handler.handle(letter).await }
            };
            consume_dead_letters(runner, letter, handle).await
        })
    }
}

/// The consume loop of a dead-letter consumer: each delivery made into the handler's letter
/// by `letter` (never refused: poison comes raw), handed to `handle`, and settled by the
/// broker when it fails ([`settle_by_broker`]).
pub(super) async fn consume_dead_letters<L, F, Fut>(
    runner: Runner,
    letter: impl Fn(&lapin::message::Delivery, &Queue) -> L + Send + Sync + 'static,
    handle: F,
) -> Result<(), WorkerError>
where
    L: Send + 'static,
    F: Fn(L) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    let letter = Arc::new(letter);
    let handle = Arc::new(handle);
    one_at_a_time(
        runner,
        Box::new(move |runner, raw, span| {
            let settler = runner.settler.clone();
            let breaker = runner.breaker.clone();
            let letter = letter.clone();
            let handle = handle.clone();
            Box::pin(
                async move {
                    let handled = async {
                        let letter = letter(&raw, &settler.queue);
                        let handling = || handle(letter);
                        let properties = [&raw.properties];
                        match run_handler(&settler, breaker.as_deref(), properties, handling).await
                        {
                            Ok(()) => {
                                settler.observer.handled(Settled::Ack);
                                settler.ack(&raw);
                            }
                            Err((failure, error)) => {
                                settle_by_broker(&settler, &raw, failure, &error).await;
                            }
                        }
                    };
                    // Warren's own panic: settled by the same rule, never discarded.
                    if let Err(panic) = AssertUnwindSafe(handled).catch_unwind().await
                        && raw.acks.unsettled(raw.delivery_tag)
                    {
                        let error = format!("warren panicked: {}", panic_text(&*panic));
                        tracing::error!(
                            consumer = settler.consumer,
                            error,
                            "warren panicked on a dead letter"
                        );
                        settle_by_broker(&settler, &raw, Failure::Internal, &error).await;
                    }
                }
                .instrument(span),
            )
        }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

    use super::{dead_letter, names};
    use crate::model::{FailureReason, Queue, QueueKind, headers};
    use crate::schema::Validators;
    use crate::worker::decode::{failure_so_far, retries_so_far};
    use crate::{Message, NoHeaders};

    struct Order;

    impl Message for Order {
        type Payload = serde_json::Value;
        type Headers = NoHeaders;
        const NAME: &'static str = "order";
        const CONTENT_TYPE: &'static str = "application/json";
        const PAYLOAD_SCHEMA: &'static str = r#"{"type": "object", "required": ["id"]}"#;
        const HEADERS_SCHEMA: Option<&'static str> = None;
    }

    fn delivery(
        exchange: &str,
        key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> lapin::message::Delivery {
        let mut raw = lapin::message::Delivery::mock(
            1,
            ShortString::from(exchange),
            ShortString::from(key),
            false,
            body.to_vec(),
        );
        raw.properties = properties;
        raw
    }

    fn history(reason: Option<&str>) -> FieldTable {
        let mut table = FieldTable::default();
        let text = |s: &str| AMQPValue::LongString(LongString::from(s));
        table.insert(ShortString::from(headers::LAST_ERROR), text("timed out"));
        table.insert(
            ShortString::from(headers::RETRY_COUNT),
            AMQPValue::LongLongInt(1),
        );
        table.insert(ShortString::from(headers::FAILED_QUEUE), text("orders"));
        if let Some(reason) = reason {
            table.insert(ShortString::from(headers::FAILURE_REASON), text(reason));
        }
        table
    }

    #[test]
    fn a_type_names_a_message_qualified_or_not() {
        assert!(names("sale", "sale"));
        assert!(names("sale", "shop::sale"));
        assert!(names("shop::sale", "sale"));
        assert!(!names("invoice", "shop::sale"));
        assert!(!names("", "sale"));
    }

    /// A history is believed on warren's own retry copy only: a producer's on a first
    /// delivery is not one.
    #[test]
    fn failure_history_is_believed_on_retry_copies_only() {
        let queue = Queue::new("orders", QueueKind::Classic);
        let properties = BasicProperties::default().with_headers(history(None));
        let forged = delivery("shop", "order.placed", b"{}", properties.clone());
        let retries = retries_so_far(&forged, &queue);
        assert_eq!(failure_so_far(&forged, &queue, retries), None);
        let copy = delivery("", "orders", b"{}", properties);
        let retries = retries_so_far(&copy, &queue);
        let failure = failure_so_far(&copy, &queue, retries).expect("a retry copy's history");
        assert_eq!(failure.last_error.as_deref(), Some("timed out"));
        assert_eq!((failure.retry_count, failure.reason), (1, None));
        assert_eq!(failure.queue.as_deref(), Some("orders"));
    }

    /// Every dead letter becomes one: typed when it decodes as the message and its `type`
    /// names it, raw (body cut to the cap) with the reason otherwise.
    #[test]
    fn dead_letters_are_typed_or_raw_never_refused() {
        let queue = Queue::new("dead", QueueKind::Classic);
        let validators = Validators::of::<Order>().expect("schemas compile");
        let properties = BasicProperties::default().with_headers(history(Some("exhausted")));
        let letter = |body: &[u8], properties: BasicProperties, cap| {
            let raw = delivery("dlx", "orders", body, properties);
            dead_letter::<Order>(&raw, &queue, Some(&validators), cap, &Default::default())
        };
        let typed = letter(br#"{"id": 1}"#, properties.clone(), 1024);
        assert_eq!(typed.failure().reason, Some(FailureReason::Exhausted));
        let delivery = typed.typed().expect("typed");
        assert_eq!(delivery.payload()["id"], 1);
        assert_eq!(delivery.failure(), Some(typed.failure()));

        let other = letter(
            br#"{"id": 1}"#,
            properties.clone().with_type(ShortString::from("invoice")),
            1024,
        );
        let raw = other.raw().expect("another message type comes raw");
        assert_eq!(raw.poison, FailureReason::Decode);
        assert_eq!(raw.kind.as_deref(), Some("invoice"));

        let invalid = letter(br#"{"name": 1}"#, properties.clone(), 1024);
        let raw = invalid.raw().expect("a schema breach comes raw");
        assert_eq!(raw.poison, FailureReason::Validation);
        assert_eq!(invalid.failure().last_error.as_deref(), Some("timed out"));

        let large = letter(&[b'x'; 100], properties, 10);
        let raw = large.raw().expect("too large comes raw");
        assert_eq!(raw.poison, FailureReason::TooLarge);
        assert_eq!(
            (raw.body.len(), raw.body_len, raw.truncated()),
            (10, 100, true)
        );
        assert_eq!(
            (raw.exchange.as_str(), raw.routing_key.as_str()),
            ("dlx", "orders")
        );

        let bare = letter(b"not json", BasicProperties::default(), 1024);
        assert_eq!(bare.raw().map(|r| r.poison), Some(FailureReason::Decode));
        assert_eq!(*bare.failure(), crate::FailureContext::default());
    }
}
