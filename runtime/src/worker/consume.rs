//! The consume loops: one delivery at a time (up to the concurrency) or in batches.

use std::marker::PhantomData;
use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use futures_lite::{FutureExt, StreamExt};
use lapin::options::{BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::{FieldTable, ShortString};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::decode::{decode, retries_so_far};
use super::policy::Failure;
use super::settle::Settler;
use super::{BatchHandler, BatchSpec, ConsumerSpec, Context, Handler, Registered, Task};
use crate::schema::Validators;
use crate::{Delivery, HandlerError, Message, Publisher, WorkerError};

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

/// A consumer's channels and shared state.
struct Consuming {
    channel: lapin::Channel,
    consumer: lapin::Consumer,
    settler: Arc<Settler>,
    validators: Arc<Validators>,
    tag: ShortString,
}

async fn open<M: Message>(
    spec: &ConsumerSpec,
    context: &Context,
) -> Result<Consuming, WorkerError> {
    let validators = Validators::of::<M>()?;
    let connection = context.connection.lapin();
    let channel = connection.create_channel().await?;
    channel
        .basic_qos(spec.prefetch, BasicQosOptions { global: false })
        .await?;
    let publisher = Publisher::new(&context.connection)
        .await
        .map_err(|e| WorkerError::Publisher(e.to_string()))?
        .with_timeout(context.settings.publish_timeout);
    let tag = ShortString::from(format!("{}-{}", spec.name, uuid::Uuid::now_v7()));
    let consumer = channel
        .basic_consume(
            ShortString::from(context.queue.name.as_str()),
            tag.clone(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    tracing::info!(consumer = spec.name, queue = %context.queue.name, prefetch = spec.prefetch, concurrency = spec.concurrency, "consuming");
    Ok(Consuming {
        channel,
        consumer,
        settler: Arc::new(Settler {
            queue: context.queue.clone(),
            consumer: spec.name,
            publisher,
        }),
        validators,
        tag,
    })
}

/// Decodes one delivery; poison is settled here and never reaches a handler.
async fn decoded<M: Message>(
    raw: &lapin::message::Delivery,
    settler: &Settler,
    validators: &Validators,
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
async fn guarded<F>(future: F) -> Result<(), (Failure, String)>
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
            Err((failure, error.source().to_string()))
        }
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Err((Failure::Retryable, format!("handler panicked: {text}")))
        }
    }
}

/// Stops consuming, waits for in-flight work up to the drain timeout, closes the channel.
async fn drain(consuming: Consuming, mut tasks: JoinSet<()>, context: &Context, name: &str) {
    let _ = consuming
        .channel
        .basic_cancel(consuming.tag.clone(), BasicCancelOptions::default())
        .await;
    let timeout = context.settings.drain_timeout;
    let drained = tokio::time::timeout(timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            consumer = name,
            in_flight = tasks.len(),
            ?timeout,
            "handlers still running at the drain timeout; their messages will be redelivered"
        );
        tasks.abort_all();
    }
    let _ = consuming
        .channel
        .close(200, ShortString::from("worker shut down"))
        .await;
    tracing::info!(consumer = name, "stopped");
}

/// What the consume loop gets next.
enum Event {
    Delivery(Box<lapin::message::Delivery>),
    /// Shutdown was asked for.
    Stop,
    /// The consumer cannot go on.
    Failed(WorkerError),
}

/// Waits for the next delivery, or shutdown. A consumer the broker cancelled (its queue was
/// deleted) or whose channels closed is an error, never a silent stop.
async fn next_event(consuming: &mut Consuming, context: &mut Context, name: &str) -> Event {
    if !consuming.settler.publisher.is_open() {
        return Event::Failed(WorkerError::Publisher(format!(
            "the channel for retry and dead-letter copies of consumer `{name}` closed"
        )));
    }
    let next = tokio::select! {
        _ = context.shutdown.wait_for(|stop| *stop) => return Event::Stop,
        next = consuming.consumer.next() => next,
    };
    match next {
        Some(Ok(raw)) => Event::Delivery(Box::new(raw)),
        Some(Err(error)) => Event::Failed(error.into()),
        None if *context.shutdown.borrow() => Event::Stop,
        None => Event::Failed(WorkerError::Cancelled {
            consumer: name.to_owned(),
            queue: context.queue.name.clone(),
        }),
    }
}

/// Waits for a concurrency permit, or shutdown.
async fn permit(permits: &Arc<Semaphore>, context: &mut Context) -> Option<OwnedSemaphorePermit> {
    tokio::select! {
        _ = context.shutdown.wait_for(|stop| *stop) => None,
        permit = permits.clone().acquire_owned() => permit.ok(),
    }
}

impl<M: Message, H: Handler<M>> Registered for Single<M, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    fn start(self: Box<Self>, mut context: Context) -> Task {
        Box::pin(async move {
            let spec = self.spec;
            let mut consuming = open::<M>(&spec, &context).await?;
            let permits = Arc::new(Semaphore::new(usize::from(spec.concurrency.max(1))));
            let mut tasks = JoinSet::new();
            let mut outcome = Ok(());
            while let Some(permit) = permit(&permits, &mut context).await {
                let raw = match next_event(&mut consuming, &mut context, spec.name).await {
                    Event::Delivery(raw) => raw,
                    Event::Stop => break,
                    Event::Failed(error) => {
                        outcome = Err(error);
                        break;
                    }
                };
                reap(&mut tasks, spec.name);
                let settler = consuming.settler.clone();
                let validators = consuming.validators.clone();
                let handler = self.handler.clone();
                let max_body_bytes = context.settings.max_body_bytes;
                // Decoding (decompression, validation) and settling run in the delivery's
                // task, under its permit, not in the consume loop: a large or poison message
                // does not hold up the next one.
                tasks.spawn(async move {
                    let Some(delivery) =
                        decoded::<M>(&raw, &settler, &validators, max_body_bytes).await
                    else {
                        drop(permit);
                        return;
                    };
                    let retries = delivery.retry_count();
                    match guarded(async move { handler.handle(delivery).await }).await {
                        Ok(()) => settler.ack(&raw).await,
                        Err((failure, error)) => settler.fail(&raw, failure, retries, &error).await,
                    }
                    drop(permit);
                });
            }
            drain(consuming, tasks, &context, spec.name).await;
            outcome
        })
    }
}

impl<M: Message, H: BatchHandler<M>> Registered for Batched<M, H> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    fn start(self: Box<Self>, mut context: Context) -> Task {
        Box::pin(async move {
            let spec = self.spec;
            let size = usize::from(self.batch.size.max(1));
            let mut consuming = open::<M>(&spec, &context).await?;
            let permits = Arc::new(Semaphore::new(usize::from(spec.concurrency.max(1))));
            let mut tasks = JoinSet::new();
            let mut outcome = Ok(());
            let mut stopping = false;
            while !stopping {
                let Some(permit) = permit(&permits, &mut context).await else {
                    break;
                };
                let mut raws = Vec::with_capacity(size);
                let mut deliveries = Vec::with_capacity(size);
                // The timeout runs from the first message of the batch.
                let deadline = tokio::time::sleep(self.batch.timeout);
                tokio::pin!(deadline);
                while deliveries.len() < size {
                    let event = tokio::select! {
                        _ = &mut deadline, if !deliveries.is_empty() => break,
                        event = next_event(&mut consuming, &mut context, spec.name) => event,
                    };
                    let raw = match event {
                        Event::Delivery(raw) => raw,
                        Event::Stop => {
                            stopping = true;
                            break;
                        }
                        Event::Failed(error) => {
                            outcome = Err(error);
                            stopping = true;
                            break;
                        }
                    };
                    if deliveries.is_empty() {
                        deadline
                            .as_mut()
                            .reset(tokio::time::Instant::now() + self.batch.timeout);
                    }
                    if let Some(delivery) = decoded::<M>(
                        &raw,
                        &consuming.settler,
                        &consuming.validators,
                        context.settings.max_body_bytes,
                    )
                    .await
                    {
                        deliveries.push(delivery);
                        raws.push(raw);
                    }
                }
                if deliveries.is_empty() {
                    continue;
                }
                // A batch cut short by shutdown is still handled: its deliveries are taken.
                reap(&mut tasks, spec.name);
                let settler = consuming.settler.clone();
                let handler = self.handler.clone();
                tasks.spawn(async move {
                    // One retry count for the batch: it is retried or dead-lettered together.
                    let retries = deliveries
                        .iter()
                        .map(Delivery::retry_count)
                        .max()
                        .unwrap_or(0);
                    let result =
                        guarded(async move { handler.handle_batch(deliveries).await }).await;
                    for raw in &raws {
                        match &result {
                            Ok(()) => settler.ack(raw).await,
                            Err((failure, error)) => {
                                settler.fail(raw, *failure, retries, error).await
                            }
                        }
                    }
                    drop(permit);
                });
            }
            drain(consuming, tasks, &context, spec.name).await;
            outcome
        })
    }
}

/// Collects finished tasks so the set does not grow; a settle task that panicked is a bug
/// worth a log line (its delivery returns to the queue when the channel closes).
fn reap(tasks: &mut JoinSet<()>, name: &str) {
    while let Some(finished) = tasks.try_join_next() {
        if let Err(error) = finished
            && error.is_panic()
        {
            tracing::error!(consumer = name, %error, "a settle task panicked");
        }
    }
}
