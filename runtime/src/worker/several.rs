//! Consumers of several messages (`messages:` in the contract): each delivery is recognised
//! as one of them, decoded as it, and handed to the handler as one value, the generated enum
//! with a variant per message; the generated trait has one method per message.
//!
//! A delivery is recognised by its `type` property, which warren's publishers set to the
//! message's name (compared unqualified, as a dead-letter consumer compares it); one without a
//! `type` (another stack's) by the selectors the contract gives: a topic pattern its routing
//! key matches, or a header's value. A delivery recognised as none of them is poison,
//! `unknown-message`: it is dead-lettered with the reason and never reaches the handler.

use std::sync::Arc;

use tracing::Instrument as _;

use super::consume::{one_at_a_time, run_handler, settle_poison, settled_even_on_panic};
use super::dead_letter_consumer::{consume_dead_letters, names, raw_message};
use super::decode::{decode, original_route, retries_so_far};
use super::runner::Runner;
use super::{ConsumerSpec, Context, Registered, Task};
use crate::amqp::header_str;
use crate::codec::{Poison, poison};
use crate::codegen::DeliveryOf;
use crate::model::{FailureReason, MessageSelector, Queue, topic_matches};
use crate::schema::{SchemaError, Validators};
use crate::{FailureContext, HandlerError, Message, RawMessage, WorkerError};

/// Handles the messages of a consumer of several as one value `D`: the generated enum, with a
/// variant per message. The generated trait (one method per message) is adapted to this.
pub trait SeveralHandler<D>: Send + Sync + 'static {
    /// Handles one delivery, whichever message it is.
    fn handle(&self, message: D) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

/// How one member decodes a delivery into `D`: raw delivery, queue, validators (`None`:
/// validation off), body cap, and the failure history a dead letter's delivery carries.
type DecodeAs<D> = dyn Fn(
        &lapin::message::Delivery,
        &Queue,
        Option<&Validators>,
        usize,
        Option<&FailureContext>,
    ) -> Result<D, Poison>
    + Send
    + Sync;

/// One message of a consumer of several: its name, how a delivery without a `type` is
/// recognised as it, its schemas, and how it is decoded into the consumer's `D`.
pub struct Member<D> {
    name: &'static str,
    selector: Option<MessageSelector>,
    validators: fn() -> Result<Arc<Validators>, SchemaError>,
    decode: Box<DecodeAs<D>>,
}

/// Message `M` as a member of a consumer of several, recognised without a `type` by
/// `selector`, and wrapped into `D` by `wrap` (the generated enum's variant): what generated
/// code lists (`warren_runtime::codegen::member`); not a stable API.
pub fn member<M: Message, D: 'static>(
    _message: M,
    selector: Option<MessageSelector>,
    wrap: fn(DeliveryOf<M>) -> D,
) -> Member<D> {
    Member {
        name: M::NAME,
        selector,
        validators: Validators::of::<M>,
        decode: Box::new(move |raw, queue, validators, max_body_bytes, failure| {
            let delivery = decode::<M>(raw, queue, validators, max_body_bytes)?;
            Ok(wrap(match failure {
                Some(failure) => delivery.with_failure(failure.clone()),
                None => delivery,
            }))
        }),
    }
}

/// Adds a consumer of several messages, `members`, to `worker`: what the generated
/// `consumers::register` functions of a consumer with `messages:` call
/// (`warren_runtime::codegen::add_several`); not a stable API.
pub fn add_several<D: Send + 'static, H: SeveralHandler<D>>(
    worker: &mut super::Worker,
    spec: ConsumerSpec,
    members: impl IntoIterator<Item = Member<D>>,
    handler: H,
) {
    worker.register(Box::new(Several {
        spec,
        members: Arc::new(members.into_iter().collect()),
        handler: Arc::new(handler),
    }));
}

struct Several<D, H> {
    spec: ConsumerSpec,
    members: Arc<Vec<Member<D>>>,
    handler: Arc<H>,
}

/// The members with their compiled schemas (each `None` with validation off).
struct Decoders<D> {
    members: Arc<Vec<Member<D>>>,
    validators: Vec<Option<Arc<Validators>>>,
    max_body_bytes: usize,
}

impl<D> Decoders<D> {
    /// Compiles each member's schemas when `validate`: a member whose schemas do not compile
    /// stops the worker at start, as a consumer of one message does.
    fn new(
        members: Arc<Vec<Member<D>>>,
        validate: bool,
        max_body_bytes: usize,
    ) -> Result<Self, WorkerError> {
        let validators = (members.iter())
            .map(|member| validate.then(member.validators).transpose())
            .collect::<Result<_, _>>()?;
        Ok(Self {
            members,
            validators,
            max_body_bytes,
        })
    }

    /// `raw` recognised as one of the members and decoded as it.
    fn decode(&self, raw: &lapin::message::Delivery, queue: &Queue) -> Result<D, Poison> {
        let index = recognised(&self.members, raw, queue)?;
        self.decode_as(index, raw, queue, None)
    }

    /// `raw` decoded as member `index`, with a dead letter's `failure` history.
    fn decode_as(
        &self,
        index: usize,
        raw: &lapin::message::Delivery,
        queue: &Queue,
        failure: Option<&FailureContext>,
    ) -> Result<D, Poison> {
        let validators = self.validators[index].as_deref();
        (self.members[index].decode)(raw, queue, validators, self.max_body_bytes, failure)
    }

    /// A dead letter as the member its `type` names, or without one the first member it
    /// decodes and validates as; the poison of the last try when none.
    fn dead_letter(
        &self,
        raw: &lapin::message::Delivery,
        queue: &Queue,
        failure: &FailureContext,
    ) -> Result<D, Poison> {
        if raw.properties.kind().is_some() {
            let index = recognised(&self.members, raw, queue)?;
            return self.decode_as(index, raw, queue, Some(failure));
        }
        let mut last = poison(FailureReason::UnknownMessage, "a consumer of no message");
        for index in 0..self.members.len() {
            match self.decode_as(index, raw, queue, Some(failure)) {
                Ok(message) => return Ok(message),
                Err(poisoned) => last = poisoned,
            }
        }
        Err(last)
    }
}

/// Which of `members` `raw` is: by its `type`, else by the members' selectors, in order.
fn recognised<D>(
    members: &[Member<D>],
    raw: &lapin::message::Delivery,
    queue: &Queue,
) -> Result<usize, Poison> {
    let listed = || {
        let names: Vec<&str> = members.iter().map(|member| member.name).collect();
        names.join("`, `")
    };
    if let Some(kind) = raw.properties.kind() {
        let kind = kind.as_str();
        return (members.iter())
            .position(|member| names(kind, member.name))
            .ok_or_else(|| {
                let detail = format!("message type `{kind}` is none of `{}`", listed());
                poison(FailureReason::UnknownMessage, detail)
            });
    }
    let routing_key = original_route(raw, queue).1;
    let headers = raw.properties.headers().as_ref();
    let selects = |selector: &MessageSelector| match *selector {
        MessageSelector::RoutingKey(pattern) => routing_key
            .as_deref()
            .is_some_and(|key| topic_matches(pattern, key)),
        MessageSelector::Header(name, value) => {
            header_str(headers, name).is_some_and(|text| text == value)
        }
    };
    (members.iter())
        .position(|member| member.selector.as_ref().is_some_and(selects))
        .ok_or_else(|| {
            let key = routing_key.unwrap_or_default();
            let detail = format!(
                "no message type, and neither its routing key `{key}` nor its headers select one of `{}`",
                listed()
            );
            poison(FailureReason::UnknownMessage, detail)
        })
}

impl<D: Send + 'static, H: SeveralHandler<D>> Registered for Several<D, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    #[cfg(feature = "trial")]
    fn trial<'a>(&'a self, bench: &'a super::trial::Bench<'a>) -> super::trial::Trying<'a> {
        Box::pin(async move {
            let settings = bench.settings;
            let members = self.members.clone();
            let decoders = Decoders::new(members, settings.validate, settings.max_body_bytes)?;
            let decoded = decoders.decode(bench.raw, bench.queue);
            let handle = |message| self.handler.handle(message);
            Ok(super::trial::handled(bench, decoded, handle).await)
        })
    }

    fn start(self: Box<Self>, context: Context) -> Task {
        Box::pin(async move {
            let settings = &context.settings;
            let decoders = Arc::new(Decoders::new(
                self.members.clone(),
                settings.validate,
                settings.max_body_bytes,
            )?);
            let Some(runner) = Runner::start_validating(self.spec, context, None).await? else {
                return Ok(());
            };
            one_at_a_time(
                runner,
                Box::new(|runner, raw, span| {
                    let settler = runner.settler.clone();
                    let breaker = runner.breaker.clone();
                    let handler = self.handler.clone();
                    let decoders = decoders.clone();
                    Box::pin(
                        async move {
                            let handled = || async {
                                let message = match decoders.decode(&raw, &settler.queue) {
                                    Ok(message) => message,
                                    Err(poison) => {
                                        return settle_poison(&raw, &settler, poison).await;
                                    }
                                };
                                let retries = retries_so_far(&raw, &settler.queue);
                                let properties = [&raw.properties];
                                let handle = || handler.handle(message);
                                let result =
                                    run_handler(&settler, breaker.as_deref(), properties, handle)
                                        .await;
                                settler.settle(&raw, &result, retries).await;
                            };
                            let _ = settled_even_on_panic(&raw, &settler, handled).await;
                        }
                        .instrument(span),
                    )
                }),
            )
            .await
        })
    }
}

/// Handles the dead letters of a queue that receives several messages: each with its failure
/// history, typed as the message its `type` names (or, without one, the first it decodes as),
/// raw when it is none of them. The generated trait of a dead-letter consumer of several is
/// adapted to this.
pub trait SeveralDeadLetterHandler<D>: Send + Sync + 'static {
    /// Handles one dead letter: why it died, and the message, typed or raw.
    fn handle(
        &self,
        failure: FailureContext,
        message: D,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

/// Adds a dead-letter consumer of several messages, `members`, to `worker`; a dead letter that
/// is none of them reaches `handler` as `raw` makes it: what the generated
/// `consumers::register` functions of a dead-letter consumer with `messages:` call
/// (`warren_runtime::codegen::add_several_dead_letters`); not a stable API.
pub fn add_several_dead_letters<D: Send + 'static, H: SeveralDeadLetterHandler<D>>(
    worker: &mut super::Worker,
    spec: ConsumerSpec,
    members: impl IntoIterator<Item = Member<D>>,
    raw: fn(RawMessage) -> D,
    handler: H,
) {
    worker.register(Box::new(SeveralDeadLetters {
        spec,
        members: Arc::new(members.into_iter().collect()),
        raw,
        handler: Arc::new(handler),
    }));
}

struct SeveralDeadLetters<D, H> {
    spec: ConsumerSpec,
    members: Arc<Vec<Member<D>>>,
    raw: fn(RawMessage) -> D,
    handler: Arc<H>,
}

impl<D: Send + 'static, H: SeveralDeadLetterHandler<D>> Registered for SeveralDeadLetters<D, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    #[cfg(feature = "trial")]
    fn trial<'a>(&'a self, bench: &'a super::trial::Bench<'a>) -> super::trial::Trying<'a> {
        Box::pin(async move {
            let settings = bench.settings;
            let members = self.members.clone();
            let decoders = Decoders::new(members, settings.validate, settings.max_body_bytes)?;
            let budgets = &settings.budgets;
            let (failure, message) =
                letter_of(self.raw, &decoders, budgets, bench.raw, bench.queue);
            let handling = self.handler.handle(failure, message);
            Ok(super::trial::dead_letter_handled(bench, handling).await)
        })
    }

    fn start(self: Box<Self>, context: Context) -> Task {
        Box::pin(async move {
            let settings = &context.settings;
            let max_body_bytes = settings.max_body_bytes;
            let budgets = settings.budgets.clone();
            let decoders = Decoders::new(self.members.clone(), settings.validate, max_body_bytes)?;
            let Some(runner) = Runner::start_validating(self.spec, context, None).await? else {
                return Ok(());
            };
            let raw_of = self.raw;
            let letter = move |raw: &lapin::message::Delivery, queue: &Queue| {
                letter_of(raw_of, &decoders, &budgets, raw, queue)
            };
            let handler = self.handler.clone();
            let handle = move |(failure, message)| {
                let handler = handler.clone();
                async move { handler.handle(failure, message).await }
            };
            consume_dead_letters(runner, letter, handle).await
        })
    }
}

/// A dead letter's failure history (another stack's judged by `budgets`) and its message:
/// typed as one of the members, or made raw by `raw_of`.
fn letter_of<D>(
    raw_of: fn(RawMessage) -> D,
    decoders: &Decoders<D>,
    budgets: &crate::failure::RetryBudgets,
    raw: &lapin::message::Delivery,
    queue: &Queue,
) -> (FailureContext, D) {
    let failure = FailureContext::from_headers(raw.properties.headers().as_ref())
        .map(|failure| budgets.judge(failure))
        .unwrap_or_default();
    let message = (decoders.dead_letter(raw, queue, &failure)).unwrap_or_else(|poisoned| {
        raw_of(raw_message(raw, queue, poisoned, decoders.max_body_bytes))
    });
    (failure, message)
}
