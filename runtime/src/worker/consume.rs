//! The consume loops: one delivery at a time (up to the concurrency) or in batches.

use std::marker::PhantomData;
use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use futures_lite::FutureExt;
use tokio::sync::Semaphore;
use tracing::Instrument as _;

use super::acks::Taken;
use super::breaker::Breaker;
use super::decode::{decode, retries_so_far};
use super::erased::{Dispatch, Dispatched};
use super::lanes::{Lanes, Turn};
use super::policy::Failure;
use super::runner::Runner;
use super::settle::Settler;
use super::{BatchHandler, BatchSpec, ConsumerSpec, Context, Registered, Task};
use crate::codec::Poison;
use crate::rooted::Rooted;
use crate::schema::Validators;
use crate::{Delivery, HandlerError, Message, WorkerError};

/// A consumer handling one delivery at a time (up to its concurrency). Not generic: its
/// message is known to its [`Dispatch`] alone ([`super::erased`]).
pub(super) struct Single {
    spec: ConsumerSpec,
    handler: Arc<dyn Dispatch>,
}

impl Single {
    pub(super) fn new(spec: ConsumerSpec, handler: Arc<dyn Dispatch>) -> Self {
        Self { spec, handler }
    }
}

pub(super) struct Batched<M, H> {
    spec: ConsumerSpec,
    batch: BatchSpec,
    handler: Arc<H>,
    message: PhantomData<fn() -> M>,
}

impl<M, H> Batched<M, H> {
    pub(super) fn new(spec: ConsumerSpec, batch: BatchSpec, handler: H) -> Self {
        Self {
            spec,
            batch,
            handler: Arc::new(handler),
            message: PhantomData,
        }
    }
}

/// Decodes one delivery; poison is settled here and never reaches a handler.
async fn decoded<M: Message>(
    raw: &Taken,
    settler: &Settler,
    validators: Option<&Validators>,
    max_body_bytes: usize,
) -> Option<Delivery<M::Payload, M::Headers>> {
    match decode::<M>(raw, &settler.queue, validators, max_body_bytes) {
        Ok(delivery) => Some(delivery),
        Err(poison) => {
            settle_poison(raw, settler, poison).await;
            None
        }
    }
}

/// Dead-letters `raw`, which did not decode (`poison`), without a handler seeing it.
pub(super) async fn settle_poison(raw: &Taken, settler: &Settler, poison: Poison) {
    let retries = retries_so_far(raw, &settler.queue);
    settler
        .fail(raw, Failure::Poison(poison.reason), retries, &poison.detail)
        .await;
}

/// A handler's outcome, its panic turned into a retryable failure rather than a lost
/// delivery.
pub(super) fn outcome(
    caught: std::thread::Result<Result<(), HandlerError>>,
) -> Result<(), (Failure, String)> {
    match caught {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => {
            let failure = match error.poison_reason() {
                Some(reason) => Failure::Poison(reason),
                None if error.is_retryable() => Failure::Retryable {
                    after: error.retry_delay(),
                },
                None => Failure::NonRetryable,
            };
            Err((failure, error.cause().to_string()))
        }
        Err(panic) => Err((
            Failure::RETRYABLE,
            format!("handler panicked: {}", panic_text(&*panic)),
        )),
    }
}

/// What a panic said.
pub(super) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// Runs the work `make` makes, part of what decodes, handles and settles `raw`, so that a
/// panic in it still settles the delivery; [`Panicked`] when it panicked. A handler's panics
/// are caught by [`run_handler`]: these are warren's own (an overflow on a forged retry count
/// was one), and a delivery left unsettled holds a prefetch slot until its channel closes (ten
/// of them stalled a consumer).
///
/// The work is made here rather than passed in, as [`run_handler`]'s: an `async fn` keeps its
/// arguments in its state beside the future it awaits, so a future passed in is stored twice,
/// and a delivery's future is moved whole on its way to the runtime.
pub(super) async fn settled_even_on_panic<T, W>(
    raw: &Taken,
    settler: &Settler,
    make: impl FnOnce() -> W,
) -> Result<T, Panicked>
where
    W: Future<Output = T>,
{
    match AssertUnwindSafe(make()).catch_unwind().await {
        Ok(done) => Ok(done),
        // Boxed: the rare path keeps out of every delivery's future.
        Err(panic) => Err(Box::pin(after_panic(raw, settler, panic_text(&*panic))).await),
    }
}

/// Settles `raw` after warren panicked on it (`panic`), unless it was settled before.
///
/// The delivery, if nothing settled it yet, is dead-lettered as `internal-error`: requeued, the
/// same bytes would most likely panic again, in a loop. Should that panic too, it is rejected
/// without requeue, and the broker dead-letters it through the queue's dead-letter exchange.
async fn after_panic(raw: &Taken, settler: &Settler, panic: String) -> Panicked {
    let consumer = settler.consumer;
    let queue = settler.queue.name.as_str();
    // Settled before the panic (a panic after the ack, say): at most once, so nothing more.
    if !raw.acks.unsettled(raw.delivery_tag) {
        tracing::error!(
            consumer,
            queue,
            panic,
            "warren panicked after settling a delivery"
        );
        return Panicked {
            settled_here: false,
        };
    }
    tracing::error!(
        consumer,
        queue,
        panic,
        "warren panicked on a delivery; dead-lettering it as `internal-error`"
    );
    let error = format!("warren panicked: {panic}");
    let retries = retries_so_far(raw, &settler.queue);
    let fallback = settler.fail(raw, Failure::Internal, retries, &error);
    if AssertUnwindSafe(fallback).catch_unwind().await.is_ok()
        || !raw.acks.unsettled(raw.delivery_tag)
    {
        return Panicked { settled_here: true };
    }
    tracing::error!(
        consumer,
        queue,
        "dead-lettering panicked too; rejecting the delivery without requeue"
    );
    settler.reject(raw, false).await;
    Panicked { settled_here: true }
}

/// Warren panicked on a delivery ([`settled_even_on_panic`]).
pub(super) struct Panicked {
    /// Whether the delivery was settled after the panic (dead-lettered or rejected), rather
    /// than before it.
    pub settled_here: bool,
}

/// Runs `futures` to completion together, on the calling task.
async fn join_all(futures: impl IntoIterator<Item = impl Future<Output = ()>>) {
    let mut pending: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for slot in &mut pending {
            if let Some(future) = slot {
                if future.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    done = false;
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// Runs the handler's future that `handle` makes, for the deliveries whose `properties` are
/// given (one, or a batch's): timed for the metrics, its panics caught (a retryable failure
/// rather than a lost delivery), its outcome told to the circuit breaker. It runs inside the
/// delivery's own task, so aborting that task at the drain timeout stops the handler too:
/// nothing keeps running while its message is redelivered. The future is made here, not
/// passed in, so that a delivery's future stores it once (see [`settled_even_on_panic`]).
pub(super) async fn run_handler<'a, F>(
    settler: &Settler,
    breaker: Option<&Breaker>,
    properties: impl IntoIterator<Item = &'a lapin::BasicProperties>,
    handle: impl FnOnce() -> F,
) -> Result<(), (Failure, String)>
where
    F: Future<Output = Result<(), HandlerError>>,
{
    for properties in properties {
        settler.observer.handler_started(properties);
    }
    let started = std::time::Instant::now();
    let result = outcome(AssertUnwindSafe(handle()).catch_unwind().await);
    settler.observer.handler_ran(started.elapsed());
    if let Some(breaker) = breaker {
        breaker.record(result.as_ref().err().map(|(failure, _)| *failure));
    }
    result
}

/// The loop of a consumer that handles one delivery at a time (up to its concurrency): for
/// each delivery, `each` makes its work (decode, handler, settle), which runs under the
/// delivery's permit, its in-flight count and its `process` span, started by
/// [`Runner::begin`]: in a task of its own, or polled once here when it is quick. Drains the
/// runner when shutdown is asked or the consumer cannot go on.
///
/// Not generic ([`crate::rooted`]): compiled once, here, whatever consumer runs it; `each`,
/// which the consumer writes for its message and handler types, is what is compiled per
/// consumer.
pub(super) fn one_at_a_time(runner: Runner, each: Each<'_>) -> Rooted<'_, Result<(), WorkerError>> {
    Box::pin(consume_each(runner, each))
}

/// What a consumer does with each delivery it takes: its work (decode, handler, settle),
/// boxed, and run in the span given (instrumented inside the box: a second box around it, to
/// instrument it, was an allocation per delivery).
pub(super) type Each<'a> =
    Box<dyn FnMut(&Runner, Taken, tracing::Span) -> Rooted<'static, ()> + Send + 'a>;

/// [`one_at_a_time`]'s loop.
async fn consume_each(mut runner: Runner, mut each: Each<'_>) -> Result<(), WorkerError> {
    let max_body_bytes = runner.context.settings.max_body_bytes;
    let mut lanes =
        (runner.spec.ordering_key).map(|key| Lanes::new(key, runner.spec.prefetch, max_body_bytes));
    let mut outcome = Ok(());
    while let Some(work) = runner.work().await {
        let raw = match runner.next().await {
            Ok(Some(raw)) => raw,
            Ok(None) => break,
            Err(error) => {
                outcome = Err(error);
                break;
            }
        };
        runner.reap();
        let settler = &runner.settler;
        let span = crate::trace::process(&settler.queue.name, settler.consumer, &raw);
        // The delivery holds its permit until it is settled or only a confirm is awaited
        // ([`Taken::release`]), and counts in flight until it is dropped. Carried by the
        // delivery rather than by a future wrapping its work, which would store that work
        // twice (see [`settled_even_on_panic`]).
        let mut raw = raw;
        let in_flight = settler.observer.in_flight(1);
        match lanes.as_mut().and_then(|lanes| lanes.enter(&raw)) {
            None => {
                raw.hold(Some(work), in_flight);
                let delivery = each(&runner, raw, span);
                runner.begin(delivery);
            }
            Some(turn) => {
                // Waiting for its turn, it gives its permit back (unless it is the breaker's
                // probe, which the loop waits on), and takes one when its turn comes.
                let (work, waits) = match turn.after.is_some() && !work.probes() {
                    true => (None, Some(runner.permits())),
                    false => (Some(work), None),
                };
                raw.hold(work, in_flight);
                // The span covers the wait for its turn too.
                let delivery = in_turn(turn, waits, each(&runner, raw, tracing::Span::none()));
                runner.begin(Box::pin(delivery.instrument(span)));
            }
        }
    }
    runner.drain().await;
    outcome
}

/// Runs `delivery` in its `turn`: once the delivery before it in its key's lane is settled,
/// and, with `permits` (it gave its own back while it waited), once it has taken one; then
/// lets the next of its key start. A lane whose delivery panicked or was aborted at the
/// drain timeout goes on too: its `done` is dropped all the same.
async fn in_turn(turn: Turn, permits: Option<Arc<Semaphore>>, delivery: impl Future<Output = ()>) {
    let Turn { after, done } = turn;
    if let Some(after) = after {
        let _ = after.await;
    }
    let permit = match permits {
        Some(permits) => permits.acquire_owned().await.ok(),
        None => None,
    };
    delivery.await;
    drop((permit, done));
}

impl Registered for Single {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    #[cfg(feature = "trial")]
    fn trial<'a>(&'a self, bench: &'a super::trial::Bench<'a>) -> super::trial::Trying<'a> {
        Box::pin(super::trial::dispatched(&*self.handler, bench))
    }

    fn start(self: Box<Self>, context: Context) -> Task {
        Box::pin(async move {
            let validators = self.handler.validators(&context.settings)?;
            let Some(runner) = Runner::start_validating(self.spec, context, validators).await?
            else {
                return Ok(());
            };
            one_at_a_time(
                runner,
                Box::new(|runner, raw, span| {
                    each_delivery(runner, raw, self.handler.clone(), span)
                }),
            )
            .await
        })
    }
}

/// The work of a one-at-a-time consumer on `raw`: decoded and handled by `handler`, then
/// settled (poison at once), a panic of warren's on the way settled too.
fn each_delivery(
    runner: &Runner,
    raw: Taken,
    handler: Arc<dyn Dispatch>,
    span: tracing::Span,
) -> Rooted<'static, ()> {
    let settler = runner.settler.clone();
    let validators = runner.validators.clone();
    let breaker = runner.breaker.clone();
    let max_body_bytes = runner.context.settings.max_body_bytes;
    Box::pin(
        async move {
            let handled = || async {
                let decoded =
                    handler.dispatch(&raw, &settler.queue, validators.as_deref(), max_body_bytes);
                let Dispatched { retries, handling } = match decoded {
                    Ok(dispatched) => dispatched,
                    Err(poison) => return settle_poison(&raw, &settler, poison).await,
                };
                let properties = [&raw.properties];
                let result =
                    run_handler(&settler, breaker.as_deref(), properties, || handling).await;
                settler.settle(&raw, &result, retries).await;
            };
            let _ = settled_even_on_panic(&raw, &settler, handled).await;
        }
        .instrument(span),
    )
}

impl<M: Message, H: BatchHandler<M>> Registered for Batched<M, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    #[cfg(feature = "trial")]
    fn trial<'a>(&'a self, bench: &'a super::trial::Bench<'a>) -> super::trial::Trying<'a> {
        Box::pin(super::trial::batch::<M, H>(&*self.handler, bench))
    }

    fn start(self: Box<Self>, context: Context) -> Task {
        Box::pin(async move {
            let Some(mut runner) = Runner::start::<M>(self.spec, context).await? else {
                return Ok(());
            };
            let mut outcome = Ok(());
            let mut stopping = false;
            while !stopping {
                let Some(work) = runner.work().await else {
                    break;
                };
                let (raws, deliveries, ended) =
                    gather::<M, H>(&mut runner, &self.batch, &*self.handler).await;
                match ended {
                    Gathered::Full => {}
                    Gathered::Stopped => stopping = true,
                    Gathered::Failed(error) => {
                        outcome = Err(error);
                        stopping = true;
                    }
                }
                if deliveries.is_empty() {
                    continue;
                }
                // A batch cut short by shutdown is still handled: its deliveries are taken.
                runner.reap();
                let settler = runner.settler.clone();
                let span = crate::trace::process_batch(
                    &settler.queue.name,
                    settler.consumer,
                    raws.iter().map(|raw| &raw.raw),
                );
                let in_flight = settler.observer.in_flight(raws.len());
                let batch = Batch {
                    settler,
                    breaker: runner.breaker.clone(),
                    raws,
                };
                let handler = self.handler.clone();
                let handled = async move {
                    batch.handle(&*handler, deliveries).await;
                    drop((work, in_flight));
                };
                runner.begin(Box::pin(handled.instrument(span)));
            }
            runner.drain().await;
            outcome
        })
    }
}

/// Why gathering a batch ended.
enum Gathered {
    /// The batch is full, or its timeout passed.
    Full,
    /// The consumer is stopping.
    Stopped,
    /// The consumer cannot go on.
    Failed(WorkerError),
}

/// Takes deliveries for one batch until it holds `batch.size`, its timeout (from its first
/// message) passes, or the consumer stops: each decoded as it comes, and what is poison or
/// `handler` does not admit ([`BatchHandler::admit`]) settled at once and left out. The taken
/// deliveries and their decoded payloads, in order.
async fn gather<M: Message, H: BatchHandler<M>>(
    runner: &mut Runner,
    batch: &BatchSpec,
    handler: &H,
) -> (Vec<Taken>, Vec<Delivery<M::Payload, M::Headers>>, Gathered) {
    let size = usize::from(batch.size.max(1));
    let mut raws = Vec::with_capacity(size);
    let mut deliveries = Vec::with_capacity(size);
    let deadline = tokio::time::sleep(batch.timeout);
    tokio::pin!(deadline);
    while deliveries.len() < size {
        let next = tokio::select! {
            _ = &mut deadline, if !deliveries.is_empty() => break,
            next = runner.next() => next,
        };
        let raw = match next {
            Ok(Some(raw)) => raw,
            Ok(None) => return (raws, deliveries, Gathered::Stopped),
            Err(error) => return (raws, deliveries, Gathered::Failed(error)),
        };
        if deliveries.is_empty() {
            // The timeout runs from the first message of the batch.
            deadline
                .as_mut()
                .reset(crate::connection::deadline_after(batch.timeout));
        }
        let decoding = || {
            decoded::<M>(
                &raw,
                &runner.settler,
                runner.validators.as_deref(),
                runner.context.settings.max_body_bytes,
            )
        };
        let Ok(Some(delivery)) = settled_even_on_panic(&raw, &runner.settler, decoding).await
        else {
            continue;
        };
        let settler = &runner.settler;
        let admitting = || async {
            let Err((failure, detail)) = outcome(Ok(handler.admit(&delivery))) else {
                return true;
            };
            let retries = delivery.retry_count();
            settler.fail(&raw, failure, retries, &detail).await;
            false
        };
        if let Ok(true) = settled_even_on_panic(&raw, settler, admitting).await {
            deliveries.push(delivery);
            raws.push(raw);
        }
    }
    (raws, deliveries, Gathered::Full)
}

/// A gathered batch, settled together once its handler ran.
struct Batch {
    settler: Arc<Settler>,
    breaker: Option<Arc<Breaker>>,
    raws: Vec<Taken>,
}

impl Batch {
    /// Runs `handler` on `deliveries` (the decoded `raws`), then settles every message of the
    /// batch by the result.
    async fn handle<M: Message, H: BatchHandler<M>>(
        self,
        handler: &H,
        deliveries: Vec<Delivery<M::Payload, M::Headers>>,
    ) {
        let Self {
            settler,
            breaker,
            raws,
        } = self;
        // A batch fails together, but each message is retried or dead-lettered by its own
        // history: with the batch's highest count, one message's retries (or a forged count)
        // spent every other message's.
        let retries: Vec<u32> = deliveries.iter().map(Delivery::retry_count).collect();
        let properties = raws.iter().map(|raw| &raw.properties);
        let handle = || handler.handle_batch(deliveries);
        let handled = run_handler(&settler, breaker.as_deref(), properties, handle);
        // The handler's panics are caught by `guarded`; this catches warren's.
        let result = AssertUnwindSafe(handled)
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| {
                let panic = panic_text(&*panic);
                Err((Failure::Internal, format!("warren panicked: {panic}")))
            });
        // Settled together: a copy that cannot be published yet (its queue deleted) holds its
        // own message, not the rest of the batch.
        let settles = raws.iter().zip(retries).map(|(raw, retries)| {
            let settler = &settler;
            let result = &result;
            async move {
                let settle = || settler.settle(raw, result, retries);
                let _ = settled_even_on_panic(raw, settler, settle).await;
            }
        });
        join_all(settles).await;
    }
}
