//! What every consume loop shares: the subscription (kept alive across lost channels, lost
//! connections and broker cancels), concurrency permits, the circuit breaker's pauses, the
//! in-flight tasks, and the drain at shutdown.

use std::sync::Arc;
use std::time::Duration;

use futures_lite::StreamExt;
use lapin::options::{BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::{FieldTable, ShortString};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinSet;

use super::acks::{Acks, Taken};
use super::breaker::Breaker;
use super::observe::Observer;
use super::presence::{Presence, queue_presence};
use super::settle::Settler;
use super::work::Work;
use super::{ConsumerSpec, Context};
use crate::connection::backoff;
use crate::error::Chain;
use crate::model::Namespace;
use crate::publish_time::Trust;
use crate::rooted::Rooted;
use crate::schema::Validators;
use crate::{Message, Publisher, WorkerError, amqp};

/// The first pause before subscribing again after a failed attempt, and the longest.
const RESUBSCRIBE_MIN: Duration = Duration::from_millis(100);
const RESUBSCRIBE_MAX: Duration = Duration::from_secs(5);
/// How long subscribing may take once the link is up (a channel, its prefetch, the
/// `basic.consume`), and a check of the queue: a broker that never answers (a cluster node
/// stopping while a quorum queue elects its leader was seen to) must not hold a consumer
/// unsubscribed for good. A subscription takes milliseconds.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long polling a unit of work in the consume loop may take before the loop stops doing
/// it: many times what a no-op handler's decode, validation and ack take (a few µs), and short
/// enough that work this long is not worth running one at a time while other threads idle.
const IN_PLACE_LIMIT: Duration = Duration::from_micros(50);
/// How many units of work are spawned unpolled once polls in place ran too long twice in a row
/// (once may be the thread being preempted: on a loaded machine that is a few polls in a
/// thousand, and a spawn costs a fast handler more than the poll saves). Doubled for each
/// further slow trial poll, up to 256 times: a handler that is always slow runs in place one
/// time in thousands.
const SPAWNED_MIN: u32 = 16;
const SPAWNED_DOUBLINGS: u32 = 8;
/// One poll in place in this many is timed while they are quick (every one after a slow one):
/// two clock readings per delivery were a few percent of a fast consumer's CPU. A handler that
/// turns slow runs in place at most this many more times before it is seen.
const TIMED_EVERY: u32 = 8;

/// One `basic.consume` on one channel. Delivery tags belong to the channel: a delivery is
/// only ever settled through its own acker, so nothing of a dead channel is sent on a new one.
struct Subscription {
    channel: lapin::Channel,
    consumer: lapin::Consumer,
    tag: ShortString,
    /// The channel's ack coalescer.
    acks: Acks,
}

/// A consumer's running state.
pub(super) struct Runner {
    pub spec: ConsumerSpec,
    pub context: Context,
    pub settler: Arc<Settler>,
    /// `None` when validation is off.
    pub validators: Option<Arc<Validators>>,
    pub breaker: Option<Arc<Breaker>>,
    pub tasks: JoinSet<()>,
    permits: Arc<Semaphore>,
    /// Units of work still to be spawned without a poll in place (see [`Runner::begin`]).
    spawn_next: u32,
    /// Polls in place in a row that took longer than [`IN_PLACE_LIMIT`].
    slow_polls: u32,
    /// Quick polls in place still to run untimed (see [`TIMED_EVERY`]).
    untimed: u32,
    subscription: Option<Subscription>,
    /// Set while a probe runs: resolves when it is done.
    probe: Option<oneshot::Receiver<()>>,
}

impl Runner {
    /// Compiles the message's schemas, opens the channel for copies and subscribes.
    pub(super) async fn start<M: Message>(
        spec: ConsumerSpec,
        context: Context,
    ) -> Result<Option<Self>, WorkerError> {
        let validators = context.settings.validators::<M>()?;
        Self::start_validating(spec, context, validators).await
    }

    /// Opens the channel for copies and subscribes, decoding with `validators` (`None`:
    /// validation is off, or each message of a consumer of several has its own).
    ///
    /// Not generic ([`crate::rooted`]): compiled here, not where a consumer's types are known.
    pub(super) fn start_validating(
        spec: ConsumerSpec,
        context: Context,
        validators: Option<Arc<Validators>>,
    ) -> Rooted<'static, Result<Option<Self>, WorkerError>> {
        Box::pin(Self::started(spec, context, validators))
    }

    /// [`Runner::start_validating`]'s body.
    async fn started(
        spec: ConsumerSpec,
        context: Context,
        validators: Option<Arc<Validators>>,
    ) -> Result<Option<Self>, WorkerError> {
        let mut stopped = context.shutdown.clone();
        // A worker started while the connection recovers waits for it, like its subscription.
        let publisher = loop {
            let created = tokio::select! {
                _ = stopped.wait_for(|stop| *stop) => return Ok(None),
                created = Publisher::open(&context.copies, Namespace::default()) => created,
            };
            match created {
                Ok(publisher) => break publisher.timeout(context.settings.publish_timeout),
                Err(crate::PublishError::NotConnected(_)) if !context.copies.is_closed() => {}
                Err(error) => return Err(WorkerError::Publisher(error)),
            }
        };
        let observer = Arc::new(Observer::new(
            crate::metrics::ConsumerMetrics::new(
                spec.name,
                &context.queue,
                spec.circuit_breaker.is_some(),
            ),
            context.health.clone(),
            Trust::new(
                vec![
                    context.connection.vouched_user().clone(),
                    context.copies.vouched_user().clone(),
                ],
                context.settings.trusted_publishers.clone(),
            ),
        ));
        let breaker = spec
            .circuit_breaker
            .map(|settings| Arc::new(Breaker::new(settings, spec.name, observer.clone())));
        let mut runner = Self {
            settler: Arc::new(Settler {
                queue: context.queue.clone(),
                dead_letter_queue: context.dead_letter_queue.clone(),
                consumer: spec.name,
                publisher,
                observer,
                warned_retry_after: Default::default(),
            }),
            validators,
            breaker,
            tasks: JoinSet::new(),
            permits: Arc::new(Semaphore::new(usize::from(spec.concurrency.max(1)))),
            spawn_next: 0,
            slow_polls: 0,
            untimed: 0,
            subscription: None,
            probe: None,
            spec,
            context,
        };
        // The first subscription fails loudly (a missing queue is a configuration error);
        // later ones are retried.
        let first = tokio::select! {
            _ = runner.stopped() => return Ok(None),
            first = runner.subscribe_once() => first,
        };
        runner.subscription = Some(first?);
        Ok(Some(runner))
    }

    /// Resolves once shutdown is asked for. A receiver of its own, so that waiting on it
    /// borrows nothing.
    fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut shutdown = self.context.shutdown.clone();
        async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        }
    }

    /// The consumer's concurrency permits: what a delivery that waited for its turn in its
    /// key's lane takes before it starts ([`super::lanes`]).
    pub(super) fn permits(&self) -> Arc<Semaphore> {
        self.permits.clone()
    }

    /// Waits for the right to start the next unit of work: a free permit, a probe in flight,
    /// the breaker's cool-down. `None` on shutdown.
    pub(super) async fn work(&mut self) -> Option<Work> {
        // The permit first: the failures that open the breaker are those of the work that
        // held the permits, so the breaker is read only once they are done.
        if *self.context.shutdown.borrow() {
            return None;
        }
        // A free permit is the common case: taken without setting up a wait for shutdown.
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => tokio::select! {
                _ = self.stopped() => return None,
                permit = self.permits.clone().acquire_owned() => permit.ok()?,
            },
        };
        if let Some(probe) = self.probe.take() {
            // The probe's outcome decides whether to go on or cool down again.
            tokio::select! {
                _ = self.stopped() => return None,
                _ = probe => {}
            }
        }
        let mut probe = None;
        if let Some(breaker) = &self.breaker
            && let Some(until) = breaker.open_until()
        {
            tracing::debug!(consumer = self.spec.name, cool_down = ?breaker.cool_down(), "circuit breaker open; waiting");
            tokio::select! {
                _ = self.stopped() => return None,
                () = tokio::time::sleep_until(until) => {}
            }
            tracing::info!(
                consumer = self.spec.name,
                "circuit breaker half-open: one probe"
            );
            breaker.half_open();
            let (done, receiver) = oneshot::channel();
            self.probe = Some(receiver);
            probe = Some(done);
        }
        Some(Work::new(permit, probe))
    }

    /// The next delivery, subscribing again whenever the subscription is lost. `Ok(None)` on
    /// shutdown; an error when the consumer cannot go on (its queue is gone).
    pub(super) async fn next(&mut self) -> Result<Option<Taken>, WorkerError> {
        loop {
            if *self.context.shutdown.borrow() {
                return Ok(None);
            }
            let Some(subscription) = self.subscription.as_mut() else {
                match self.resubscribe().await? {
                    Some(subscription) => {
                        self.subscription = Some(subscription);
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            // A delivery already buffered is the common case under load: taken without
            // setting up a wait for shutdown (dropping a pending `next()` loses nothing).
            let next = match futures_lite::future::poll_once(subscription.consumer.next()).await {
                Some(next) => next,
                None => {
                    let mut shutdown = self.context.shutdown.clone();
                    tokio::select! {
                        _ = shutdown.wait_for(|stop| *stop) => return Ok(None),
                        next = subscription.consumer.next() => next,
                    }
                }
            };
            match next {
                Some(Ok(raw)) => {
                    self.settler.observer.consumed();
                    subscription.acks.delivered(raw.delivery_tag);
                    let acks = subscription.acks.clone();
                    return Ok(Some(Taken::new(raw, acks)));
                }
                Some(Err(error)) => self.lost(&error.to_string()),
                None if *self.context.shutdown.borrow() => return Ok(None),
                None if subscription.channel.status().connected() => self.cancelled().await?,
                None => self.lost("the channel closed"),
            }
        }
    }

    /// The channel or its connection is gone: deliveries not yet settled return to the
    /// queue on the broker's side, and their handlers' settles are dropped on ours.
    fn lost(&mut self, why: &str) {
        tracing::warn!(consumer = self.spec.name, queue = %self.context.queue.name, why, "subscription lost; subscribing again");
        self.subscription = None;
        self.settler.observer.unsubscribed(Some(why));
    }

    /// The broker cancelled the consumer with its channel still open: the queue was deleted
    /// (or failed over). Subscribe again when the queue is there; report it when it is not.
    async fn cancelled(&mut self) -> Result<(), WorkerError> {
        // Taken before anything is awaited: a caller that drops this future (a batch deadline)
        // must not leave an ended consumer in place, waiting forever.
        let Some(ended) = self.subscription.take() else {
            return Ok(());
        };
        let queue = self.context.queue.name.clone();
        let state = tokio::time::timeout(
            SUBSCRIBE_TIMEOUT,
            queue_presence(&self.context.connection, &queue),
        )
        .await;
        match state.unwrap_or(Presence::Unknown) {
            Presence::Exists => {
                tracing::warn!(consumer = self.spec.name, queue = %queue, "the broker cancelled the consumer; subscribing again");
                // The old channel may still carry unsettled deliveries: keep it open for
                // their settles by consuming on it again rather than replacing it. Should
                // that fail (or this future be dropped), the subscription is already gone
                // and the next call subscribes afresh.
                let pause = backoff(0, RESUBSCRIBE_MIN, RESUBSCRIBE_MAX);
                tokio::time::sleep(pause).await;
                let resuming = consume(&ended.channel, ended.acks.clone(), &self.spec, &queue);
                let resumed = tokio::time::timeout(SUBSCRIBE_TIMEOUT, resuming).await;
                match resumed.unwrap_or_else(|_| Err(WorkerError::Broker(unanswered()))) {
                    Ok(resumed) => {
                        self.settler.observer.subscribed();
                        self.subscription = Some(resumed);
                    }
                    Err(error) => self.lost(&format!("consuming again failed: {error}")),
                }
                Ok(())
            }
            Presence::Gone => {
                tracing::error!(consumer = self.spec.name, queue = %queue, "the broker cancelled the consumer: its queue is gone");
                let why = "the broker cancelled the consumer: its queue is gone";
                self.settler.observer.unsubscribed(Some(why));
                Err(WorkerError::Cancelled {
                    consumer: self.spec.name.to_owned(),
                    queue,
                })
            }
            // Its node down (a classic queue on a cluster), the queue is back with its node:
            // subscribed again then, as after any loss.
            Presence::NodeDown => {
                self.lost("the queue's cluster node is down");
                Ok(())
            }
            Presence::Unknown => {
                self.lost("the channel closed while checking the queue");
                Ok(())
            }
        }
    }

    /// Subscribes again after a loss, with backoff between attempts, waiting for the
    /// connection to come back. `Ok(None)` on shutdown.
    async fn resubscribe(&mut self) -> Result<Option<Subscription>, WorkerError> {
        let mut attempt: u32 = 0;
        loop {
            let result = tokio::select! {
                _ = self.stopped() => return Ok(None),
                result = self.subscribe_once() => result,
            };
            match result {
                Ok(subscription) => {
                    tracing::info!(consumer = self.spec.name, queue = %self.context.queue.name, "subscribed again");
                    return Ok(Some(subscription));
                }
                Err(WorkerError::Broker(error))
                    if amqp::not_found(&error) == Some(amqp::NotFound::Gone) =>
                {
                    let why = format!("subscribing failed: {}", Chain(&error));
                    self.settler.observer.unsubscribed(Some(&why));
                    return Err(WorkerError::Cancelled {
                        consumer: self.spec.name.to_owned(),
                        queue: self.context.queue.name.clone(),
                    });
                }
                Err(error) if self.context.connection.is_closed() => return Err(error),
                Err(error) => {
                    let why = format!("subscribing failed: {}", Chain(&error));
                    self.settler.observer.error(&why);
                    if attempt.is_multiple_of(10) {
                        tracing::warn!(consumer = self.spec.name, error = %Chain(&error), attempt, "subscribing failed; trying again");
                    }
                    let pause = backoff(attempt, RESUBSCRIBE_MIN, RESUBSCRIBE_MAX);
                    attempt += 1;
                    tokio::select! {
                        _ = self.stopped() => return Ok(None),
                        () = tokio::time::sleep(pause) => {}
                    }
                }
            }
        }
    }

    /// Opens a channel on the current link (waiting for one), sets the consumer's prefetch
    /// and starts consuming.
    async fn subscribe_once(&self) -> Result<Subscription, WorkerError> {
        let connection = self
            .context
            .connection
            .current(Duration::MAX)
            .await
            .map_err(|e| WorkerError::Broker(e.into_lapin()))?;
        let subscribing = async {
            let channel = connection.create_channel().await?;
            channel
                .basic_qos(self.spec.prefetch, BasicQosOptions { global: false })
                .await?;
            let acks = Acks::start(channel.clone(), self.spec.prefetch, self.spec.name);
            consume(&channel, acks, &self.spec, &self.context.queue.name).await
        };
        let subscription = tokio::time::timeout(SUBSCRIBE_TIMEOUT, subscribing)
            .await
            .map_err(|_| WorkerError::Broker(unanswered()))??;
        self.settler.observer.subscribed();
        tracing::info!(consumer = self.spec.name, queue = %self.context.queue.name, prefetch = self.spec.prefetch, concurrency = self.spec.concurrency, "consuming");
        Ok(subscription)
    }

    /// Stops consuming, waits for in-flight work up to the drain timeout, closes the channel.
    pub(super) async fn drain(mut self) {
        let name = self.spec.name;
        let timeout = self.context.settings.drain_timeout;
        self.settler.observer.unsubscribed(None);
        // Bounded: a connection blocked by an alarm sends nothing, not even a cancel.
        if let Some(subscription) = &self.subscription {
            let cancel = subscription
                .channel
                .basic_cancel(subscription.tag.clone(), BasicCancelOptions::default());
            let _ = tokio::time::timeout(timeout, cancel).await;
        }
        let drained = tokio::time::timeout(timeout, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                consumer = name,
                in_flight = self.tasks.len(),
                ?timeout,
                "handlers still running at the drain timeout; their messages will be redelivered"
            );
            self.tasks.abort_all();
        }
        if let Some(subscription) = &self.subscription {
            // Handled messages are acked before the channel closes, not redelivered.
            let _ = tokio::time::timeout(timeout, subscription.acks.flush()).await;
            let close = subscription
                .channel
                .close(200, ShortString::from("worker shut down"));
            let _ = tokio::time::timeout(timeout, close).await;
        }
        tracing::info!(consumer = name, "stopped");
    }

    /// Starts the work of one delivery (or batch), so that up to `concurrency` of them run at
    /// once: each in a task of its own, which a multi-thread runtime runs in parallel whether
    /// the handler awaits or not.
    ///
    /// Except when the work is quick: then it is polled once here, and only spawned if it has
    /// to wait. A handler that finishes at once (no I/O, or I/O that was ready) is settled
    /// without a task, a spawn and a hop to another thread: that is most of the cost of a fast
    /// handler. But the consume loop takes nothing new while it polls, so work polled here runs
    /// one at a time: two polls in a row that take longer than [`IN_PLACE_LIMIT`] (a handler
    /// busy without awaiting, large bodies to decode) make the next [`SPAWNED_MIN`] or more
    /// units spawned unpolled (polls are timed one in [`TIMED_EVERY`] while they are quick).
    /// With `concurrency` 1 there is nothing to run beside the work, so it is always polled
    /// here first.
    pub(super) fn begin(&mut self, mut work: Rooted<'static, ()>) {
        let in_place_only = self.spec.concurrency <= 1;
        if !in_place_only && self.spawn_next > 0 {
            self.spawn_next -= 1;
            self.tasks.spawn(work);
            return;
        }
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let timed = !in_place_only && (self.untimed == 0 || self.slow_polls > 0);
        let started = timed.then(std::time::Instant::now);
        // A future that returns `Pending` has registered the no-op waker only; the runtime
        // polls the spawned task at once, which registers the real one.
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            work.as_mut().poll(&mut context)
        }));
        match started {
            Some(started) if started.elapsed() >= IN_PLACE_LIMIT => {
                self.slow_polls = self.slow_polls.saturating_add(1);
                if let Some(doublings) = self.slow_polls.checked_sub(2) {
                    self.spawn_next = SPAWNED_MIN << doublings.min(SPAWNED_DOUBLINGS);
                }
            }
            Some(_) => {
                self.slow_polls = 0;
                self.untimed = TIMED_EVERY - 1;
            }
            None => self.untimed = self.untimed.saturating_sub(1),
        }
        match polled {
            Ok(std::task::Poll::Ready(())) => {}
            Ok(std::task::Poll::Pending) => {
                self.tasks.spawn(work);
            }
            Err(_) => {
                tracing::error!(
                    consumer = self.spec.name,
                    "a settle task panicked; its delivery returns to the queue when the channel closes"
                );
            }
        }
    }

    /// Collects finished tasks so the set does not grow; a task that panicked is a bug worth
    /// a log line (its delivery returns to the queue when the channel closes).
    pub(super) fn reap(&mut self) {
        while let Some(finished) = self.tasks.try_join_next() {
            if let Err(error) = finished
                && error.is_panic()
            {
                tracing::error!(consumer = self.spec.name, %error, "a settle task panicked");
            }
        }
    }
}

async fn consume(
    channel: &lapin::Channel,
    acks: Acks,
    spec: &ConsumerSpec,
    queue: &str,
) -> Result<Subscription, WorkerError> {
    let tag = ShortString::from(format!("{}-{}", spec.name, uuid::Uuid::now_v7()));
    let consumer = channel
        .basic_consume(
            ShortString::from(queue),
            tag.clone(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok(Subscription {
        channel: channel.clone(),
        consumer,
        tag,
        acks,
    })
}

/// The error of a subscription the broker did not answer within [`SUBSCRIBE_TIMEOUT`].
fn unanswered() -> lapin::Error {
    lapin::Error::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("the broker did not answer the subscription within {SUBSCRIBE_TIMEOUT:?}"),
    ))
}
