//! The consume loops: one delivery at a time (up to the concurrency) or in batches.

use std::marker::PhantomData;
use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use futures_lite::FutureExt;

use super::acks::Taken;
use super::decode::{decode, retries_so_far};
use super::policy::Failure;
use super::runner::Runner;
use super::settle::Settler;
use super::{BatchHandler, BatchSpec, ConsumerSpec, Context, Handler, Registered, Task};
use crate::schema::Validators;
use crate::{Delivery, HandlerError, Message};

pub(super) struct Single<M, H> {
    spec: ConsumerSpec,
    handler: Arc<H>,
    message: PhantomData<fn() -> M>,
}

impl<M, H> Single<M, H> {
    pub(super) fn new(spec: ConsumerSpec, handler: H) -> Self {
        Self {
            spec,
            handler: Arc::new(handler),
            message: PhantomData,
        }
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
            let retries = retries_so_far(raw, &settler.queue);
            settler
                .fail(raw, Failure::Poison(poison.reason), retries, &poison.detail)
                .await;
            None
        }
    }
}

/// Runs a handler future, turning a panic into a retryable failure rather than a lost
/// delivery. It runs inside the delivery's own task, so aborting that task at the drain
/// timeout stops the handler too: nothing keeps running while its message is redelivered.
pub(super) async fn guarded<F>(future: F) -> Result<(), (Failure, String)>
where
    F: std::future::Future<Output = Result<(), HandlerError>>,
{
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => {
            let failure = if error.is_retryable() {
                Failure::Retryable
            } else {
                Failure::NonRetryable
            };
            Err((failure, error.cause().to_string()))
        }
        Err(panic) => Err((
            Failure::Retryable,
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

/// Runs `work`, part of what decodes, handles and settles `raw`, so that a panic in it still
/// settles the delivery; `None` when it panicked. A handler's panics are caught by [`guarded`]:
/// these are warren's own (an overflow on a forged retry count was one), and a delivery left
/// unsettled holds a prefetch slot until its channel closes (ten of them stalled a consumer).
///
/// The delivery, if nothing settled it yet, is dead-lettered as `internal-error`: requeued, the
/// same bytes would most likely panic again, in a loop. Should that panic too, it is rejected
/// without requeue, and the broker dead-letters it through the queue's dead-letter exchange.
async fn settled_even_on_panic<T>(
    raw: &Taken,
    settler: &Settler,
    work: impl Future<Output = T>,
) -> Option<T> {
    let panic = match AssertUnwindSafe(work).catch_unwind().await {
        Ok(done) => return Some(done),
        Err(panic) => panic_text(&*panic),
    };
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
        return None;
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
        return None;
    }
    tracing::error!(
        consumer,
        queue,
        "dead-lettering panicked too; rejecting the delivery without requeue"
    );
    settler.reject(raw, false).await;
    None
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

impl<M: Message, H: Handler<M>> Registered for Single<M, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    fn start(self: Box<Self>, context: Context) -> Task {
        Box::pin(async move {
            let Some(mut runner) = Runner::start::<M>(self.spec, context).await? else {
                return Ok(());
            };
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
                let settler = runner.settler.clone();
                let validators = runner.validators.clone();
                let breaker = runner.breaker.clone();
                let handler = self.handler.clone();
                let max_body_bytes = runner.context.settings.max_body_bytes;
                // Decoding, the handler and settling are the delivery's work, under its permit,
                // started by `begin`: in a task of its own, or polled once here when it is quick.
                runner.begin(async move {
                    let handled = async {
                        let Some(delivery) =
                            decoded::<M>(&raw, &settler, validators.as_deref(), max_body_bytes)
                                .await
                        else {
                            return;
                        };
                        let retries = delivery.retry_count();
                        let result = guarded(async move { handler.handle(delivery).await }).await;
                        if let Some(breaker) = &breaker {
                            breaker.record(result.as_ref().err().map(|(failure, _)| *failure));
                        }
                        settler.settle(&raw, &result, retries).await;
                    };
                    settled_even_on_panic(&raw, &settler, handled).await;
                    drop(work);
                });
            }
            runner.drain().await;
            outcome
        })
    }
}

impl<M: Message, H: BatchHandler<M>> Registered for Batched<M, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    fn start(self: Box<Self>, context: Context) -> Task {
        Box::pin(async move {
            let size = usize::from(self.batch.size.max(1));
            let Some(mut runner) = Runner::start::<M>(self.spec, context).await? else {
                return Ok(());
            };
            let mut outcome = Ok(());
            let mut stopping = false;
            while !stopping {
                let Some(work) = runner.work().await else {
                    break;
                };
                let mut raws = Vec::with_capacity(size);
                let mut deliveries = Vec::with_capacity(size);
                // The timeout runs from the first message of the batch.
                let deadline = tokio::time::sleep(self.batch.timeout);
                tokio::pin!(deadline);
                while deliveries.len() < size {
                    let next = tokio::select! {
                        _ = &mut deadline, if !deliveries.is_empty() => break,
                        next = runner.next() => next,
                    };
                    let raw = match next {
                        Ok(Some(raw)) => raw,
                        Ok(None) => {
                            stopping = true;
                            break;
                        }
                        Err(error) => {
                            outcome = Err(error);
                            stopping = true;
                            break;
                        }
                    };
                    if deliveries.is_empty() {
                        deadline
                            .as_mut()
                            .reset(crate::connection::deadline_after(self.batch.timeout));
                    }
                    let decoding = decoded::<M>(
                        &raw,
                        &runner.settler,
                        runner.validators.as_deref(),
                        runner.context.settings.max_body_bytes,
                    );
                    if let Some(Some(delivery)) =
                        settled_even_on_panic(&raw, &runner.settler, decoding).await
                    {
                        deliveries.push(delivery);
                        raws.push(raw);
                    }
                }
                if deliveries.is_empty() {
                    continue;
                }
                // A batch cut short by shutdown is still handled: its deliveries are taken.
                runner.reap();
                let settler = runner.settler.clone();
                let breaker = runner.breaker.clone();
                let handler = self.handler.clone();
                runner.begin(async move {
                    // A batch fails together, but each message is retried or dead-lettered by its
                    // own history: with the batch's highest count, one message's retries (or a
                    // forged count) spent every other message's.
                    let retries: Vec<u32> = deliveries.iter().map(Delivery::retry_count).collect();
                    let handled = async {
                        let result =
                            guarded(async move { handler.handle_batch(deliveries).await }).await;
                        if let Some(breaker) = &breaker {
                            breaker.record(result.as_ref().err().map(|(failure, _)| *failure));
                        }
                        result
                    };
                    // The handler's panics are caught by `guarded`; this catches warren's.
                    let result = AssertUnwindSafe(handled)
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|panic| {
                            let panic = panic_text(&*panic);
                            Err((Failure::Internal, format!("warren panicked: {panic}")))
                        });
                    // Settled together: a copy that cannot be published yet (its queue
                    // deleted) holds its own message, not the rest of the batch.
                    let settles = raws.iter().zip(retries).map(|(raw, retries)| {
                        let settler = &settler;
                        let result = &result;
                        async move {
                            let settle = settler.settle(raw, result, retries);
                            settled_even_on_panic(raw, settler, settle).await;
                        }
                    });
                    join_all(settles).await;
                    drop(work);
                });
            }
            runner.drain().await;
            outcome
        })
    }
}
