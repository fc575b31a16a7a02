//! Settling deliveries: ack, requeue, or publish a retry or dead-letter copy (with confirms,
//! then ack the original). Every delivery is settled at most once, on its own channel: each path
//! here sends one ack, reject or nack, and the fallback for a panic (`consume.rs`) only settles
//! a delivery still unsettled. One whose channel closed first is not settled at all: the broker
//! redelivers it.

use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::options::{BasicNackOptions, BasicRejectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use tracing::Instrument as _;

use super::acks::Taken;
use super::decode::{original_route, retry_count_header};
use super::policy::{Decision, Failure, broker_counts, dead_letter_decision, decide};
use crate::PublishError;
use crate::Publisher;
use crate::amqp::Headers;
use crate::clock::unix_millis;
use crate::connection::backoff;
use crate::error::Chain;
use crate::metrics::Outcome as Settled;
use crate::model::{FailureReason, Queue, Retry, headers};
use crate::publish_time::Trust;
use crate::publisher::Routing;
use crate::text::{MAX_ERROR_BYTES, truncate};
use crate::trace;

/// The first pause before publishing a copy again after it failed, and the longest.
const COPY_RETRY_MIN: Duration = Duration::from_secs(1);
const COPY_RETRY_MAX: Duration = Duration::from_secs(30);
/// Failed attempts at one copy between two warnings.
const COPY_WARN_EVERY: u32 = 10;

/// Settles the deliveries of one consumer.
pub(in crate::worker) struct Settler {
    pub queue: Arc<Queue>,
    /// Where a dead letter goes, through the default exchange, when the queue's dead-letter
    /// exchange routes its key nowhere (`Context::dead_letter_queue`).
    pub dead_letter_queue: Option<String>,
    pub consumer: &'static str,
    /// A confirm-mode channel of the consumer's own, for retry and dead-letter copies.
    pub publisher: Publisher,
    /// The consumer's metrics and health.
    pub observer: Arc<super::observe::Observer>,
    /// Whether the worker warned that this queue cannot wait a handler's `retry_after`.
    pub warned_retry_after: std::sync::atomic::AtomicBool,
}

impl Settler {
    /// Acknowledges a handled delivery, coalesced with others of its channel.
    pub(super) fn ack(&self, raw: &Taken) {
        raw.acks.ack(raw.delivery_tag);
    }

    /// Logs a settle that was not sent. lapin sends nothing for a delivery whose channel is
    /// gone (`Ok(false)`): its tag means nothing on any other channel, and the broker has
    /// already returned the message to its queue.
    fn settled(&self, result: Result<bool, lapin::Error>, what: &'static str) {
        match result {
            Ok(true) => {}
            Ok(false) => tracing::info!(
                consumer = self.consumer,
                what,
                "the delivery's channel closed before it was settled; the broker redelivers it"
            ),
            Err(error) => tracing::warn!(
                consumer = self.consumer,
                what,
                error = %Chain(&error),
                "settling failed; the message will be redelivered"
            ),
        }
    }

    /// Settles a delivery by its handler's result: ack, or the queue's policy for the failure.
    pub(super) async fn settle(
        &self,
        raw: &Taken,
        result: &Result<(), (Failure, String)>,
        retries: u32,
    ) {
        match result {
            Ok(()) => {
                trace::handled(retries);
                self.observer.handled(Settled::Ack);
                self.ack(raw);
            }
            Err((failure, error)) => self.fail(raw, *failure, retries, error).await,
        }
    }

    /// Applies the queue's policy to a failed delivery, after `retries` earlier retries.
    pub(super) async fn fail(&self, raw: &Taken, failure: Failure, retries: u32, error: &str) {
        let outcome = self.decide(failure, retries);
        self.fail_as(raw, failure, outcome, retries, error).await;
    }

    /// What the queue's policy does with a `failure` after `retries` earlier retries.
    pub(super) fn decide(&self, failure: Failure, retries: u32) -> Decision {
        if let Failure::Retryable { after: Some(delay) } = failure {
            self.warn_retry_after_unwaited(delay);
        }
        decide(&self.queue, retries, failure, fastrand::f64())
    }

    /// Warns, once, that the handler asked a retry to wait and the queue has nowhere to: only
    /// ttl-backoff queues have wait queues (and a queue without retries dead-letters anyway).
    /// The difference is never silent.
    fn warn_retry_after_unwaited(&self, delay: Duration) {
        use std::sync::atomic::Ordering;
        let unwaited = matches!(
            self.queue.retry,
            Retry::ImmediateRequeue { .. } | Retry::QuorumNative
        );
        if !unwaited || self.warned_retry_after.swap(true, Ordering::Relaxed) {
            return;
        }
        tracing::warn!(
            consumer = self.consumer,
            queue = self.queue.name,
            retry_after = ?delay,
            mode = crate::metrics::retry_mode(&self.queue.retry),
            "the handler asked a retry to wait, and this queue's retries do not wait (only \
             ttl-backoff has wait queues): retried at once; logged once per consumer"
        );
    }

    /// Settles a delivery that failed with `failure` by `outcome` (decided by
    /// [`Settler::decide`]), after `retries` earlier retries.
    pub(super) async fn fail_as(
        &self,
        raw: &Taken,
        failure: Failure,
        outcome: Decision,
        retries: u32,
        error: &str,
    ) {
        trace::failed(failure.as_str(), retries);
        if !raw.acker.usable() {
            // Its channel is gone and the broker redelivers it: a retry or dead-letter copy
            // now would only add a duplicate.
            return self.settled(Ok(false), "fail");
        }
        // Boxed: the copy's publish is most of a delivery's future, which is moved whole
        // several times on its way to the runtime (23 KB of it for every delivery, when
        // only failures need it); a failure can spare one allocation.
        Box::pin(self.apply(raw, outcome, retries, error)).await;
    }

    /// Carries out `outcome` for `raw`.
    pub(super) async fn apply(&self, raw: &Taken, outcome: Decision, retries: u32, error: &str) {
        trace::settled(outcome.as_str(), outcome.reason());
        match outcome {
            Decision::Requeue { exhausted } => self.requeue(raw, exhausted, retries, error).await,
            Decision::Retry {
                routing_key,
                retry_count,
            } => {
                let retried = self.retry(raw, &routing_key, retry_count, error).await;
                if !retried {
                    // A copy over the frame size would close the connection it is published
                    // on, and retrying cannot make the message smaller.
                    let too_large = dead_letter_decision(&self.queue, FailureReason::TooLarge);
                    Box::pin(self.apply(raw, too_large, retries, error)).await;
                }
            }
            Decision::DeadLetter { reason } => {
                self.dead_letter(raw, reason, retries, error).await;
            }
            Decision::Drop { reason } => self.drop_as_told(raw, reason, error),
            Decision::Discard { reason } => self.discard(raw, reason, error).await,
        }
    }

    /// Returns `raw` to its queue: a retry in place, or (`exhausted`) the contract's
    /// `exhausted: requeue` once the retries are spent.
    async fn requeue(&self, raw: &Taken, exhausted: bool, retries: u32, error: &str) {
        let (consumer, queue) = (self.consumer, self.queue.name.as_str());
        if exhausted {
            tracing::warn!(
                consumer,
                queue,
                retries,
                error,
                "retries spent; requeued again as the contract says (`exhausted: requeue`)"
            );
        }
        let counted = if exhausted {
            Settled::Requeue
        } else {
            Settled::Retry
        };
        self.observer.handled(counted);
        // reject, not nack: from RabbitMQ 4.3 only a reject counts as a delivery attempt on
        // quorum queues, and the retry count relies on it.
        self.reject(raw, true).await;
    }

    /// Publishes a retry copy of `raw` to `routing_key` (its queue or a wait queue) and acks
    /// the original once the copy is confirmed; `false`, with nothing done, when the copy
    /// would not fit in a frame.
    async fn retry(&self, raw: &Taken, routing_key: &str, retry_count: u32, error: &str) -> bool {
        let queue = self.queue.name.as_str();
        let span = trace::copy(trace::CopyKind::Retry, queue, "", routing_key);
        let Some(properties) = self.copier().retry_copy(raw, retry_count, error, &span) else {
            trace::abandoned(&span, FailureReason::TooLarge.as_str());
            return false;
        };
        self.observer.handled(Settled::Retry);
        self.republish(raw, ("", routing_key), properties, None)
            .instrument(span)
            .await;
        true
    }

    /// Publishes a dead-letter copy of `raw` (its headers cut to the frame when they must
    /// be) to the queue's dead-letter exchange, or rejects it without one.
    async fn dead_letter(&self, raw: &Taken, reason: FailureReason, retries: u32, error: &str) {
        let (consumer, queue) = (self.consumer, self.queue.name.as_str());
        let Some((exchange, routing_key)) = self.copier().dead_letter_route(raw) else {
            self.observer.handled(Settled::Discard);
            return self.reject(raw, false).await;
        };
        self.observer.dead_lettered(reason);
        let reason = reason.as_str();
        let span = trace::copy(trace::CopyKind::DeadLetter, queue, &exchange, &routing_key);
        let (properties, cut) =
            (self.copier()).dead_letter_copy(raw, retries, error, reason, &span);
        if cut {
            tracing::warn!(
                consumer,
                queue,
                reason,
                "headers cut to fit the dead letter in a frame"
            );
        }
        tracing::warn!(consumer, queue, reason, error, "dead-lettered");
        let route = (exchange.as_str(), routing_key.as_str());
        let fallback = self.dead_letter_queue.as_deref();
        self.republish(raw, route, properties, fallback)
            .instrument(span)
            .await;
    }

    /// Acks and drops `raw`, as the contract says (`on_poison: drop`, `exhausted: drop`).
    fn drop_as_told(&self, raw: &Taken, reason: FailureReason, error: &str) {
        self.gone(
            Settled::Drop,
            reason,
            error,
            "dropped as the contract says; the message is gone",
        );
        self.ack(raw);
    }

    /// Nacks `raw` without requeue on a queue with no dead-letter exchange: the broker
    /// discards it.
    async fn discard(&self, raw: &Taken, reason: FailureReason, error: &str) {
        let what = "no dead-letter exchange: the message is discarded and its body is gone";
        self.gone(Settled::Discard, reason, error, what);
        let nacked = raw
            .acker
            .nack(BasicNackOptions {
                multiple: false,
                requeue: false,
            })
            .await;
        raw.acks.settled(raw.delivery_tag);
        self.settled(nacked, "nack");
    }

    /// Counts a message that leaves for good as `settled`, and says so, with why.
    fn gone(&self, settled: Settled, reason: FailureReason, error: &str, what: &str) {
        self.observer.handled(settled);
        tracing::warn!(
            consumer = self.consumer,
            queue = self.queue.name.as_str(),
            reason = reason.as_str(),
            error,
            "{what}"
        );
    }

    /// Publishes a copy with confirms and acks the original only once it is confirmed.
    ///
    /// The outcome is already decided when a copy cannot be published (its exchange or wait
    /// queue was deleted, a broker alarm outlasts the publish timeout): so the copy alone is
    /// tried again, with a growing pause, while the original stays unacknowledged. Returning
    /// the original to its queue instead would run its handler again for a result already
    /// known, every second, for as long as the fault lasts.
    ///
    /// A dead letter whose key its exchange routes nowhere is no such fault: a key from the
    /// message (its own, or the `x-original-routing-key` of a copy) need not be one the
    /// dead-letter exchange's bindings match, and trying again never changes that. Held,
    /// `prefetch` such messages stopped the consumer for good. It goes to `fallback` (the
    /// queue's dead-letter queue in the topology) through the default exchange instead. The delivery gives its concurrency
    /// back once the copy is sent ([`Taken::release`]: copies are confirmed many at once, not
    /// one per handler slot) but stays unacknowledged, so a consumer whose every copy fails
    /// stops at its prefetch rather than spinning. If the delivery's channel closes, the
    /// broker redelivers it and the copy is abandoned.
    async fn republish(
        &self,
        raw: &Taken,
        route: (&str, &str),
        properties: BasicProperties,
        mut fallback: Option<&str>,
    ) {
        let (mut exchange, mut routing_key) = route;
        let mut attempt: u32 = 0;
        loop {
            if attempt > 0 && !raw.acker.usable() {
                // Its channel closed while the copy waited: the broker redelivers the
                // original, and a copy now would be a duplicate.
                return self.settled(Ok(false), "copy");
            }
            let sent = self
                .publisher
                .send_to(
                    exchange,
                    routing_key,
                    &raw.data,
                    properties.clone(),
                    Routing::Mandatory,
                    || raw.release(),
                )
                .await;
            let error = match sent {
                Ok(()) => {
                    if attempt > 0 {
                        tracing::info!(
                            consumer = self.consumer,
                            exchange,
                            routing_key,
                            attempts = attempt + 1,
                            "the retry or dead-letter copy is published at last; the message is acknowledged"
                        );
                    }
                    return self.ack(raw);
                }
                Err(error) => error,
            };
            if let (PublishError::Unroutable { .. }, Some(queue)) = (&error, fallback.take()) {
                tracing::warn!(
                    consumer = self.consumer,
                    exchange,
                    routing_key,
                    dead_letter_queue = queue,
                    "the dead letter's key is routed nowhere by its exchange; sent to the dead-letter queue directly"
                );
                (exchange, routing_key) = ("", queue);
                continue;
            }
            let pause = backoff(attempt, COPY_RETRY_MIN, COPY_RETRY_MAX);
            if attempt.is_multiple_of(COPY_WARN_EVERY) {
                tracing::error!(consumer = self.consumer, exchange, routing_key, error = %Chain(&error), attempt, ?pause, "cannot publish the retry or dead-letter copy; the message is held and the copy tried again");
            }
            attempt = attempt.saturating_add(1);
            tokio::time::sleep(pause).await;
        }
    }

    /// Rejects `raw`, to its queue (`requeue`) or to the broker's dead-lettering.
    pub(super) async fn reject(&self, raw: &Taken, requeue: bool) {
        let rejected = raw.acker.reject(BasicRejectOptions { requeue }).await;
        // Only now, with the reject sent, may a multiple ack cover tags above it.
        raw.acks.settled(raw.delivery_tag);
        self.settled(rejected, "reject");
    }

    /// Who writes this consumer's copies, within the frame of the copies' connection.
    pub(super) fn copier(&self) -> Copier<'_> {
        Copier {
            queue: &self.queue,
            consumer: self.consumer,
            trust: &self.observer.trust,
            budget: crate::wire::copy_budget(self.publisher.frame_max()),
        }
    }
}

/// Who writes a consumer's retry and dead-letter copies: what a copy's headers say besides
/// the message's own. The worker's settler and a trial ([`crate::Worker::trial`]) build
/// copies through it alike.
pub(super) struct Copier<'a> {
    /// The queue the message failed in.
    pub queue: &'a Queue,
    /// The consumer it failed in.
    pub consumer: &'a str,
    /// Whose publish times the consumer believes (a copy keeps only a believed one).
    pub trust: &'a Trust,
    /// The most a copy's content header frame may weigh on the connection it goes out on.
    pub budget: usize,
}

impl Copier<'_> {
    /// The properties of retry `retry_count`'s copy of `raw`; `None` when they do not fit in
    /// a frame: retrying cannot make the message smaller, so it is dead-lettered as
    /// `too-large` instead.
    pub(super) fn retry_copy(
        &self,
        raw: &lapin::message::Delivery,
        retry_count: u32,
        error: &str,
        span: &tracing::Span,
    ) -> Option<BasicProperties> {
        let properties = self.properties(raw, retry_count, error, None, span);
        crate::wire::fit(&properties, self.budget)
            .is_none()
            .then_some(properties)
    }

    /// The properties of the dead letter of `raw`, dead for `reason`, its headers cut to fit
    /// a frame when they must be; `true` when they were.
    pub(super) fn dead_letter_copy(
        &self,
        raw: &lapin::message::Delivery,
        retries: u32,
        error: &str,
        reason: &str,
        span: &tracing::Span,
    ) -> (BasicProperties, bool) {
        let properties = self.properties(raw, retries, error, Some(reason), span);
        match crate::wire::fit(&properties, self.budget) {
            Some(cut) => (cut, true),
            None => (properties, false),
        }
    }

    /// The properties of a copy: the original's, persistent, with failure context in its
    /// headers (and the failure reason on a dead letter), and the trace context of `span`,
    /// the span publishing it.
    fn properties(
        &self,
        raw: &lapin::message::Delivery,
        retry_count: u32,
        error: &str,
        reason: Option<&str>,
        span: &tracing::Span,
    ) -> BasicProperties {
        let (exchange, routing_key) = original_route(raw, self.queue);
        let now = unix_millis();
        // The first failure is kept only where warren (or a stack the queue believes) wrote
        // it: on retry copies. A producer's value on a first delivery is not history.
        let first_failure_believed =
            !broker_counts(self.queue) && retry_count_header(raw, self.queue).is_some();
        republished(&raw.properties, |table| {
            let text = |s: &str| AMQPValue::LongString(LongString::from(s));
            // What is unknown is left out, never guessed.
            for (key, value) in [
                (headers::ORIGINAL_EXCHANGE, &exchange),
                (headers::ORIGINAL_ROUTING_KEY, &routing_key),
            ] {
                match value {
                    Some(value) => table.insert(ShortString::from(key), text(value)),
                    None => table.remove(key),
                };
            }
            let mut set = |key: &str, value: AMQPValue| {
                table.insert(ShortString::from(key), value);
            };
            set(
                headers::RETRY_COUNT,
                AMQPValue::LongLongInt(i64::from(retry_count)),
            );
            set(headers::LAST_ERROR, text(&truncate(error, MAX_ERROR_BYTES)));
            set(headers::CONSUMER, text(self.consumer));
            set(headers::FAILED_QUEUE, text(&self.queue.name));
            set(headers::LAST_FAILURE, AMQPValue::LongLongInt(now));
            match reason {
                Some(reason) => set(headers::FAILURE_REASON, text(reason)),
                // A producer's `x-failure-reason` on a retry copy would make the copy look
                // like a dead letter, its retry count unbelieved, and its retries endless.
                None => drop(table.remove(headers::FAILURE_REASON)),
            }
            table.remove(headers::DELIVERY_COUNT);
            self.trust.keep_in_copy(&raw.properties, table);
            if !first_failure_believed {
                table.remove(headers::FIRST_FAILURE);
            }
            table
                .entry(ShortString::from(headers::FIRST_FAILURE))
                .or_insert_with(|| AMQPValue::LongLongInt(now));
            trace::propagate(span, table);
        })
    }

    /// The exchange and routing key a dead letter of `raw` is published to: the queue's
    /// dead-letter exchange, with its routing key or the message's original one (a route
    /// another stack did not record is unknown: `""`, which a `#` binding matches). `None`
    /// when the queue has no dead-letter exchange.
    pub(super) fn dead_letter_route(
        &self,
        raw: &lapin::message::Delivery,
    ) -> Option<(String, String)> {
        let dead_letter = self.queue.dead_letter.as_ref()?;
        let routing_key = (dead_letter.routing_key.clone())
            .or_else(|| original_route(raw, self.queue).1)
            .unwrap_or_default();
        Some((dead_letter.exchange.clone(), routing_key))
    }
}

/// The properties of a copy of a message whose properties are `from`: built afresh, property
/// by property (see [`restore`]), persistent, with `from`'s headers as `edit` leaves them.
/// Every copy warren publishes of a message it read (retry and dead-letter copies, redriven
/// dead letters, messages a migration moves) is built here.
pub(crate) fn republished(
    from: &BasicProperties,
    edit: impl FnOnce(&mut Headers),
) -> BasicProperties {
    let mut headers = from
        .headers()
        .as_ref()
        .map(|table| table.inner().clone())
        .unwrap_or_default();
    edit(&mut headers);
    restore(from, BasicProperties::default())
        .with_headers(FieldTable::from(headers))
        .with_delivery_mode(2)
}

/// Copies every property but the expiration, the headers, the delivery mode and the user id
/// (which the broker checks against the connection) of `from` onto `to`.
fn restore(from: &BasicProperties, mut to: BasicProperties) -> BasicProperties {
    if let Some(v) = from.content_type() {
        to = to.with_content_type(v.clone());
    }
    if let Some(v) = from.content_encoding() {
        to = to.with_content_encoding(v.clone());
    }
    if let Some(v) = from.message_id() {
        to = to.with_message_id(v.clone());
    }
    if let Some(v) = from.timestamp() {
        to = to.with_timestamp(*v);
    }
    if let Some(v) = from.kind() {
        to = to.with_type(v.clone());
    }
    if let Some(v) = from.correlation_id() {
        to = to.with_correlation_id(v.clone());
    }
    if let Some(v) = from.app_id() {
        to = to.with_app_id(v.clone());
    }
    if let Some(v) = from.reply_to() {
        to = to.with_reply_to(v.clone());
    }
    if let Some(v) = from.priority() {
        to = to.with_priority(*v);
    }
    to
}
