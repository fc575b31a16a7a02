//! Warren's metrics, through the [`metrics`](https://docs.rs/metrics) facade: every metric
//! name, label key, label value and description is here, once, so the code that records
//! them and `docs/operations.md` cannot drift apart.
//!
//! Warren records; the application chooses where metrics go by installing a recorder (the
//! Prometheus exporter `metrics-exporter-prometheus`, an OpenTelemetry bridge, a test's
//! recording sink) **before** it creates its publishers and workers: they register their
//! handles when they start, and a handle registered with no recorder installed stays a no-op.
//! With no recorder at all, recording costs a branch per metric and allocates nothing.
//!
//! ```no_run
//! // With metrics-exporter-prometheus, say, installed first:
//! // PrometheusBuilder::new().install_recorder()?;
//! warren_runtime::metrics::describe(); // descriptions and units, for the exporter's HELP lines
//! ```
//!
//! Label values come from the contract and the topology (consumer, queue and exchange names,
//! outcomes, retry modes, failure reasons: bounded sets), never from a message: a producer
//! cannot create series by sending messages.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ::metrics::{
    Counter, Gauge, Histogram, SharedString, Unit, counter, describe_counter, describe_gauge,
    describe_histogram, gauge, histogram,
};
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};

use crate::PublishError;
use crate::amqp::header_int;
use crate::model::{FailureReason, Queue, Retry, headers};
use crate::sync::lock;

/// Messages published through a [`crate::Publisher`] and sent to the broker (counter; label
/// `exchange`). Each ends confirmed, returned or failed.
pub const PUBLISHED: &str = "warren_published_total";
/// Published messages the broker confirmed and routed to at least one queue (counter; label
/// `exchange`).
pub const CONFIRMED: &str = "warren_publish_confirmed_total";
/// Published messages the broker returned as unroutable: no queue bound for their routing
/// key (counter; label `exchange`).
pub const RETURNED: &str = "warren_publish_returned_total";
/// Publishes that failed, by why (counter; labels `exchange`, `error`); returned messages
/// count here too, as `error="unroutable"`.
pub const PUBLISH_FAILED: &str = "warren_publish_failed_total";
/// Deliveries a consumer received (counter; labels `consumer`, `queue`).
pub const CONSUMED: &str = "warren_consumed_total";
/// Deliveries settled, by outcome (counter; labels `consumer`, `queue`, `outcome`).
pub const HANDLED: &str = "warren_handled_total";
/// Failed deliveries sent round again, by retry mode (counter; labels `consumer`, `queue`,
/// `mode`).
pub const RETRIED: &str = "warren_retried_total";
/// Deliveries dead-lettered by the worker, by failure reason (counter; labels `consumer`,
/// `queue`, `reason`).
pub const DEAD_LETTERED: &str = "warren_dead_lettered_total";
/// How long handlers ran, per delivery or per batch (histogram, seconds; labels `consumer`,
/// `queue`).
pub const HANDLER_DURATION: &str = "warren_handler_duration_seconds";
/// From publish to handler start (histogram, seconds; labels `consumer`, `queue`).
pub const END_TO_END_LATENCY: &str = "warren_end_to_end_latency_seconds";
/// Deliveries taken and not yet settled (gauge; labels `consumer`, `queue`).
pub const IN_FLIGHT: &str = "warren_in_flight";
/// The circuit breaker's state: 0 closed, 1 open, 2 half-open (gauge; labels `consumer`,
/// `queue`); only for consumers with a breaker.
pub const CIRCUIT_BREAKER_STATE: &str = "warren_circuit_breaker_state";

/// How long the oldest retry in a wait queue is past the time it should have gone back to
/// its queue (gauge, seconds; labels `consumer`, `queue`, `wait_queue`; 0 when none is):
/// above 0, the wait queue's dead-lettering has stopped (on a cluster, after its leader
/// changed) and the retries it holds wait for an operator.
pub const WAIT_QUEUE_OVERDUE: &str = "warren_wait_queue_overdue_seconds";

/// RPC calls made through an [`crate::RpcClient`], by how they ended (counter; labels
/// `operation`, `outcome`: one of [`RPC_OUTCOMES`]).
pub const RPC_CALLS: &str = "warren_rpc_calls_total";
/// How long RPC calls took, from the request's publish to the reply (or the error), whatever
/// their outcome (histogram, seconds; label `operation`).
pub const RPC_CALL_DURATION: &str = "warren_rpc_call_duration_seconds";
/// Replies an [`crate::RpcClient`] dropped because no call waited for them: they came after
/// their call timed out, or were never for a call of this client (counter; no label: a
/// reply's correlation id is not a bounded set).
pub const RPC_LATE_REPLIES: &str = "warren_rpc_late_replies_total";
/// Replies an RPC server sent and the broker confirmed, by status (counter; labels
/// `consumer`, `queue`, `status`: `ok`, `error` or `failed`).
pub const RPC_REPLIES: &str = "warren_rpc_replies_total";
/// Messages an inbox consumer acknowledged without running their effects, because its inbox
/// had recorded their key already: redeliveries and duplicates (counter; label `consumer`;
/// the `postgres` feature's `inbox`).
pub const INBOX_DUPLICATES: &str = "warren_inbox_duplicates_total";
/// Outbox rows a relay published, the broker confirmed, and the relay marked sent (counter;
/// label `table`).
pub const OUTBOX_RELAYED: &str = "warren_outbox_relayed_total";
/// Outbox rows a relay claimed and could not publish, due again after a backoff (counter;
/// label `table`).
pub const OUTBOX_RETRIED: &str = "warren_outbox_retried_total";
/// Outbox rows not yet published, as a running relay last read them (gauge; label `table`).
pub const OUTBOX_PENDING: &str = "warren_outbox_pending";
/// How long the oldest unpublished outbox row has waited, in seconds; 0 when none waits
/// (gauge; label `table`).
pub const OUTBOX_LAG: &str = "warren_outbox_lag_seconds";

/// The label keys.
pub mod labels {
    /// The consumer's name in the contract.
    pub const CONSUMER: &str = "consumer";
    /// The queue, as declared (with the topology's namespace).
    pub const QUEUE: &str = "queue";
    /// The exchange published to, as the contract names it (`amq.default` for the default
    /// exchange).
    pub const EXCHANGE: &str = "exchange";
    /// What became of a delivery: one of [`super::Outcome`]'s spellings.
    pub const OUTCOME: &str = "outcome";
    /// The queue's retry mode: `immediate-requeue`, `ttl-backoff` or `quorum-native`.
    pub const MODE: &str = "mode";
    /// Why a message was dead-lettered: a [`crate::model::FailureReason`].
    pub const REASON: &str = "reason";
    /// Why a publish failed: one of [`super::PUBLISH_ERRORS`].
    pub const ERROR: &str = "error";
    /// An RPC operation's name in the contract.
    pub const OPERATION: &str = "operation";
    /// What an RPC reply held: a [`crate::model::rpc::ReplyStatus`].
    pub const STATUS: &str = "status";
    /// A wait queue of a ttl-backoff queue (with the topology's namespace).
    pub const WAIT_QUEUE: &str = "wait_queue";
    /// An outbox's table.
    pub const TABLE: &str = "table";
}

/// The values of the `outcome` label of [`RPC_CALLS`], one per way a call ends: the
/// response, a declared error, a `failed` reply, no reply in time, a reply that is no valid
/// answer, a request not sent or not confirmed, the channel lost while waiting.
pub const RPC_OUTCOMES: [&str; 7] = [
    "ok",
    "error",
    "failed",
    "timeout",
    "invalid-reply",
    "publish-error",
    "connection-lost",
];

/// The values of the `error` label of [`PUBLISH_FAILED`].
pub const PUBLISH_ERRORS: [&str; 8] = [
    "invalid",
    "unroutable",
    "nacked",
    "timeout",
    "blocked",
    "not-connected",
    "unconfirmed",
    "other",
];

/// How the default exchange (`""`) is labelled.
pub const DEFAULT_EXCHANGE_LABEL: &str = "amq.default";

/// What became of a delivery: the `outcome` label of [`HANDLED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Handled and acknowledged.
    Ack,
    /// Failed and sent round again: a retry copy, or a requeue counted as a retry.
    Retry,
    /// Dead-lettered with failure context.
    DeadLetter,
    /// Acknowledged and dropped, as the contract says.
    Drop,
    /// Rejected without a dead-letter exchange: the broker discards it.
    Discard,
    /// Retries spent, and requeued anyway, as the contract says (`exhausted: requeue`).
    Requeue,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Self; 6] = [
        Self::Ack,
        Self::Retry,
        Self::DeadLetter,
        Self::Drop,
        Self::Discard,
        Self::Requeue,
    ];

    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ack => "ack",
            Self::Retry => "retry",
            Self::DeadLetter => "dead-letter",
            Self::Drop => "drop",
            Self::Discard => "discard",
            Self::Requeue => "requeue",
        }
    }
}

/// The `mode` label of a queue's retries; `None` when it never retries.
pub fn retry_mode(retry: &Retry) -> Option<&'static str> {
    match retry {
        Retry::None => None,
        Retry::ImmediateRequeue { .. } => Some("immediate-requeue"),
        Retry::TtlBackoff(_) => Some("ttl-backoff"),
        Retry::QuorumNative => Some("quorum-native"),
    }
}

/// What a metric records, for its description.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric's kind, unit and description (the HELP line), in the order of the constants.
const DESCRIPTIONS: &[(&str, Kind, Option<Unit>, &str)] = &[
    (
        PUBLISHED,
        Kind::Counter,
        Some(Unit::Count),
        "Messages published and sent to the broker (label: exchange)",
    ),
    (
        CONFIRMED,
        Kind::Counter,
        Some(Unit::Count),
        "Published messages the broker confirmed and routed (label: exchange)",
    ),
    (
        RETURNED,
        Kind::Counter,
        Some(Unit::Count),
        "Published messages returned as unroutable (label: exchange)",
    ),
    (
        PUBLISH_FAILED,
        Kind::Counter,
        Some(Unit::Count),
        "Publishes that failed, by error (labels: exchange, error)",
    ),
    (
        CONSUMED,
        Kind::Counter,
        Some(Unit::Count),
        "Deliveries received (labels: consumer, queue)",
    ),
    (
        HANDLED,
        Kind::Counter,
        Some(Unit::Count),
        "Deliveries settled, by outcome: ack, retry, dead-letter, drop, discard, requeue (labels: consumer, queue, outcome)",
    ),
    (
        RETRIED,
        Kind::Counter,
        Some(Unit::Count),
        "Failed deliveries sent round again, by retry mode (labels: consumer, queue, mode)",
    ),
    (
        DEAD_LETTERED,
        Kind::Counter,
        Some(Unit::Count),
        "Deliveries dead-lettered, by failure reason (labels: consumer, queue, reason)",
    ),
    (
        HANDLER_DURATION,
        Kind::Histogram,
        Some(Unit::Seconds),
        "Handler run time, per delivery or batch (labels: consumer, queue)",
    ),
    (
        END_TO_END_LATENCY,
        Kind::Histogram,
        Some(Unit::Seconds),
        "From publish to handler start, retries included (labels: consumer, queue)",
    ),
    (
        IN_FLIGHT,
        Kind::Gauge,
        Some(Unit::Count),
        "Deliveries taken and not yet settled (labels: consumer, queue)",
    ),
    (
        RPC_CALLS,
        Kind::Counter,
        Some(Unit::Count),
        "RPC calls, by outcome: ok, error, failed, timeout, invalid-reply, publish-error, connection-lost (labels: operation, outcome)",
    ),
    (
        RPC_CALL_DURATION,
        Kind::Histogram,
        Some(Unit::Seconds),
        "RPC call duration, request to reply, whatever the outcome (label: operation)",
    ),
    (
        RPC_LATE_REPLIES,
        Kind::Counter,
        Some(Unit::Count),
        "RPC replies dropped because no call waited for them (late, or stray)",
    ),
    (
        INBOX_DUPLICATES,
        Kind::Counter,
        Some(Unit::Count),
        "Messages an inbox consumer acknowledged without running their effects again",
    ),
    (
        RPC_REPLIES,
        Kind::Counter,
        Some(Unit::Count),
        "RPC replies sent and confirmed, by status: ok, error, failed (labels: consumer, queue, status)",
    ),
    (
        WAIT_QUEUE_OVERDUE,
        Kind::Gauge,
        Some(Unit::Seconds),
        "How long the oldest retry in a wait queue is overdue; above 0 its dead-lettering stopped (labels: consumer, queue, wait_queue)",
    ),
    (
        CIRCUIT_BREAKER_STATE,
        Kind::Gauge,
        None,
        "Circuit breaker: 0 closed, 1 open, 2 half-open (labels: consumer, queue)",
    ),
    (
        OUTBOX_RELAYED,
        Kind::Counter,
        Some(Unit::Count),
        "Outbox rows published, confirmed and marked sent (table)",
    ),
    (
        OUTBOX_RETRIED,
        Kind::Counter,
        Some(Unit::Count),
        "Outbox rows not published, due again after a backoff (table)",
    ),
    (
        OUTBOX_PENDING,
        Kind::Gauge,
        Some(Unit::Count),
        "Outbox rows not yet published (table)",
    ),
    (
        OUTBOX_LAG,
        Kind::Gauge,
        Some(Unit::Seconds),
        "How long the oldest unpublished outbox row has waited (table)",
    ),
];

/// Registers every metric's unit and description with the installed recorder (the HELP
/// lines of a Prometheus exporter). Call it once the recorder is installed; calling it again
/// is harmless. Workers and publishers call it when they start.
pub fn describe() {
    for &(name, kind, unit, help) in DESCRIPTIONS {
        match (kind, unit) {
            (Kind::Counter, Some(unit)) => describe_counter!(name, unit, help),
            (Kind::Counter, None) => describe_counter!(name, help),
            (Kind::Gauge, Some(unit)) => describe_gauge!(name, unit, help),
            (Kind::Gauge, None) => describe_gauge!(name, help),
            (Kind::Histogram, Some(unit)) => describe_histogram!(name, unit, help),
            (Kind::Histogram, None) => describe_histogram!(name, help),
        }
    }
}

/// The [`WAIT_QUEUE_OVERDUE`] gauge of `consumer`'s wait queue `wait_queue` of `queue`.
pub(crate) fn wait_queue_overdue(consumer: &'static str, queue: &str, wait_queue: &str) -> Gauge {
    gauge!(
        WAIT_QUEUE_OVERDUE,
        labels::CONSUMER => consumer,
        labels::QUEUE => queue.to_owned(),
        labels::WAIT_QUEUE => wait_queue.to_owned()
    )
}

/// One consumer's metric handles, registered once when it starts: recording a delivery
/// builds no key and allocates nothing.
pub(crate) struct ConsumerMetrics {
    consumed: Counter,
    handled: [Counter; Outcome::ALL.len()],
    retried: Counter,
    /// One per [`FailureReason::ALL`], in its order.
    dead_lettered: Vec<Counter>,
    handler_duration: Histogram,
    latency: Histogram,
    in_flight: Gauge,
    breaker: Gauge,
}

impl ConsumerMetrics {
    /// Registers the handles of `consumer` reading `queue`.
    pub(crate) fn new(consumer: &'static str, queue: &Queue, breaker: bool) -> Self {
        let queue_name = SharedString::from(queue.name.clone());
        let base = || {
            [
                (labels::CONSUMER, SharedString::const_str(consumer)),
                (labels::QUEUE, queue_name.clone()),
            ]
        };
        let with = |key: &'static str, value: &'static str| {
            let [a, b] = base();
            [a, b, (key, SharedString::const_str(value))]
        };
        let labelled = |pairs: &[(&'static str, SharedString)]| -> Vec<::metrics::Label> {
            pairs
                .iter()
                .map(|(k, v)| ::metrics::Label::new(*k, v.clone()))
                .collect()
        };
        let retried = match retry_mode(&queue.retry) {
            Some(mode) => counter!(RETRIED, labelled(&with(labels::MODE, mode))),
            None => Counter::noop(),
        };
        Self {
            consumed: counter!(CONSUMED, labelled(&base())),
            handled: Outcome::ALL.map(|outcome| {
                counter!(HANDLED, labelled(&with(labels::OUTCOME, outcome.as_str())))
            }),
            retried,
            dead_lettered: FailureReason::ALL
                .iter()
                .map(|reason| {
                    counter!(
                        DEAD_LETTERED,
                        labelled(&with(labels::REASON, reason.as_str()))
                    )
                })
                .collect(),
            handler_duration: histogram!(HANDLER_DURATION, labelled(&base())),
            latency: histogram!(END_TO_END_LATENCY, labelled(&base())),
            in_flight: gauge!(IN_FLIGHT, labelled(&base())),
            breaker: if breaker {
                gauge!(CIRCUIT_BREAKER_STATE, labelled(&base()))
            } else {
                Gauge::noop()
            },
        }
    }

    /// A delivery was received.
    pub(crate) fn consumed(&self) {
        self.consumed.increment(1);
    }

    /// A delivery was settled with `outcome`; `retried` when it goes round again.
    pub(crate) fn handled(&self, outcome: Outcome) {
        let index = Outcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or_default();
        if let Some(counter) = self.handled.get(index) {
            counter.increment(1);
        }
        if matches!(outcome, Outcome::Retry | Outcome::Requeue) {
            self.retried.increment(1);
        }
    }

    /// A delivery was dead-lettered for `reason`.
    pub(crate) fn dead_lettered(&self, reason: FailureReason) {
        self.handled(Outcome::DeadLetter);
        let index = FailureReason::ALL.iter().position(|r| *r == reason);
        if let Some(counter) = index.and_then(|i| self.dead_lettered.get(i)) {
            counter.increment(1);
        }
    }

    /// A handler (or batch handler) ran for `elapsed`.
    pub(crate) fn handler_duration(&self, elapsed: Duration) {
        self.handler_duration.record(elapsed.as_secs_f64());
    }

    /// A handler starts on a message with `properties`: records how long ago it was
    /// published, if that can be told and believed.
    pub(crate) fn handler_started(&self, properties: &BasicProperties) {
        if let Some(latency) = latency(properties, SystemTime::now()) {
            self.latency.record(latency.as_secs_f64());
        }
    }

    /// `n` deliveries are in flight until the guard is dropped (settled, or their task
    /// aborted).
    pub(crate) fn in_flight(&self, n: usize) -> InFlight {
        let n = n as f64;
        self.in_flight.increment(n);
        InFlight {
            gauge: self.in_flight.clone(),
            n,
        }
    }

    /// The circuit breaker's state, as its gauge value.
    pub(crate) fn breaker(&self, value: f64) {
        self.breaker.set(value);
    }
}

/// Deliveries counted in flight until dropped.
pub(crate) struct InFlight {
    gauge: Gauge,
    n: f64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gauge.decrement(self.n);
    }
}

/// The newest publish time believed: a little ahead of this host's clock is skew, more is a
/// forged or broken header.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);
/// The oldest publish time believed: older is a forged or broken header, or a message
/// redriven from a dead-letter queue long after, which says nothing about the pipeline.
const MAX_LATENCY: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long ago a message was published, at `now`: from warren's
/// [`headers::PUBLISHED_AT`] (milliseconds), else the AMQP timestamp (whole seconds).
/// `None` when neither is there or believable (in the future beyond clock skew, or older
/// than a week: a clock gone wrong). Whose publish times are believed at all is
/// [`crate::publish_time::Trust`]'s to say, before this is asked.
pub(crate) fn latency(properties: &BasicProperties, now: SystemTime) -> Option<Duration> {
    let published = match header_int(properties.headers().as_ref(), headers::PUBLISHED_AT) {
        Some(millis) => Duration::from_millis(u64::try_from(millis).ok()?),
        None => Duration::from_secs((*properties.timestamp())?),
    };
    let published = SystemTime::UNIX_EPOCH.checked_add(published)?;
    let latency = match now.duration_since(published) {
        Ok(latency) => latency,
        Err(ahead) if ahead.duration() <= MAX_CLOCK_SKEW => Duration::ZERO,
        Err(_) => return None,
    };
    (latency <= MAX_LATENCY).then_some(latency)
}

/// Sets [`headers::PUBLISHED_AT`] in a message's header `table` to now, for the consumers' end-to-end
/// latency.
pub(crate) fn stamp(table: &mut FieldTable) {
    table.insert(
        ShortString::from(headers::PUBLISHED_AT),
        AMQPValue::LongLongInt(crate::clock::unix_millis()),
    );
}

/// The handles of one RPC operation's calls.
struct OperationMetrics {
    /// One per [`RPC_OUTCOMES`], in its order.
    calls: [Counter; RPC_OUTCOMES.len()],
    duration: Histogram,
}

/// An RPC client's metric handles: per operation, registered on first use (the contract's
/// operations: a bounded set) and reused, and the late replies.
pub(crate) struct CallMetrics {
    operations: Mutex<HashMap<&'static str, Arc<OperationMetrics>>>,
    late: Counter,
}

impl CallMetrics {
    pub(crate) fn new() -> Self {
        Self {
            operations: Mutex::default(),
            late: counter!(RPC_LATE_REPLIES),
        }
    }

    /// A call of `operation` ended with `outcome` (one of [`RPC_OUTCOMES`]) after `elapsed`.
    pub(crate) fn call(&self, operation: &'static str, outcome: &'static str, elapsed: Duration) {
        let metrics = {
            let mut operations = lock(&self.operations);
            operations
                .entry(operation)
                .or_insert_with(|| {
                    Arc::new(OperationMetrics {
                        calls: RPC_OUTCOMES.map(|outcome| {
                            counter!(RPC_CALLS, labels::OPERATION => operation, labels::OUTCOME => outcome)
                        }),
                        duration: histogram!(RPC_CALL_DURATION, labels::OPERATION => operation),
                    })
                })
                .clone()
        };
        let index = RPC_OUTCOMES.iter().position(|o| *o == outcome);
        if let Some(counter) = index.and_then(|i| metrics.calls.get(i)) {
            counter.increment(1);
        }
        metrics.duration.record(elapsed.as_secs_f64());
    }

    /// A reply no call waited for was dropped.
    pub(crate) fn late(&self) {
        self.late.increment(1);
    }
}

/// An RPC server's reply counters, registered when it starts.
pub(crate) struct ReplyMetrics {
    /// One per [`ReplyStatus::ALL`](crate::model::rpc::ReplyStatus), in its order.
    replies: Vec<Counter>,
}

impl ReplyMetrics {
    /// The counters of server `consumer` reading `queue`.
    pub(crate) fn new(consumer: &'static str, queue: &Queue) -> Self {
        use crate::model::rpc::ReplyStatus;
        Self {
            replies: ReplyStatus::ALL
                .iter()
                .map(|status| {
                    counter!(
                        RPC_REPLIES,
                        labels::CONSUMER => consumer,
                        labels::QUEUE => queue.name.clone(),
                        labels::STATUS => status.as_str()
                    )
                })
                .collect(),
        }
    }

    /// A reply of `status` was sent and confirmed.
    pub(crate) fn replied(&self, status: crate::model::rpc::ReplyStatus) {
        use crate::model::rpc::ReplyStatus;
        let index = ReplyStatus::ALL.iter().position(|s| *s == status);
        if let Some(counter) = index.and_then(|i| self.replies.get(i)) {
            counter.increment(1);
        }
    }
}

/// The publish counters of one exchange.
struct ExchangeCounters {
    published: Counter,
    confirmed: Counter,
    returned: Counter,
    failed: [Counter; PUBLISH_ERRORS.len()],
}

impl ExchangeCounters {
    fn new(exchange: &str) -> Self {
        let exchange = if exchange.is_empty() {
            DEFAULT_EXCHANGE_LABEL.to_owned()
        } else {
            exchange.to_owned()
        };
        let label = || exchange.clone();
        Self {
            published: counter!(PUBLISHED, labels::EXCHANGE => label()),
            confirmed: counter!(CONFIRMED, labels::EXCHANGE => label()),
            returned: counter!(RETURNED, labels::EXCHANGE => label()),
            failed: PUBLISH_ERRORS
                .map(|error| counter!(PUBLISH_FAILED, labels::EXCHANGE => label(), labels::ERROR => error)),
        }
    }
}

/// A publisher's counters, registered on first use per exchange (the contract's exchanges: a
/// bounded set) and reused.
#[derive(Default)]
pub(crate) struct PublishMetrics {
    exchanges: Mutex<HashMap<String, Arc<ExchangeCounters>>>,
}

impl PublishMetrics {
    /// Records the result of one publish to `exchange` (as the contract names it).
    pub(crate) fn record(&self, exchange: &str, result: &Result<(), PublishError>) {
        let counters = {
            let mut exchanges = lock(&self.exchanges);
            match exchanges.get(exchange) {
                Some(counters) => counters.clone(),
                None => {
                    let counters = Arc::new(ExchangeCounters::new(exchange));
                    exchanges.insert(exchange.to_owned(), counters.clone());
                    counters
                }
            }
        };
        let error = match result {
            Ok(()) => {
                counters.published.increment(1);
                counters.confirmed.increment(1);
                return;
            }
            Err(error) => error,
        };
        let (kind, sent) = match error {
            PublishError::Serialize { .. }
            | PublishError::Invalid { .. }
            | PublishError::Schema(_)
            | PublishError::HeadersNotAnObject { .. }
            | PublishError::EmptyPlaceholder { .. }
            | PublishError::TooLong { .. }
            | PublishError::TooLarge { .. }
            | PublishError::Compress(_)
            | PublishError::OrderingKey { .. } => ("invalid", false),
            PublishError::Unroutable { .. } => ("unroutable", true),
            PublishError::Nacked { .. } => ("nacked", true),
            PublishError::Timeout(_) => ("timeout", true),
            PublishError::Blocked { .. } => ("blocked", true),
            PublishError::NotConnected(_) => ("not-connected", false),
            PublishError::Unconfirmed(_) => ("unconfirmed", true),
            _ => ("other", false),
        };
        if sent {
            counters.published.increment(1);
        }
        if kind == "unroutable" {
            counters.returned.increment(1);
        }
        let index = PUBLISH_ERRORS.iter().position(|e| *e == kind);
        if let Some(counter) = index.and_then(|i| counters.failed.get(i)) {
            counter.increment(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn with_header(value: AMQPValue) -> BasicProperties {
        let mut table = FieldTable::default();
        table.insert(ShortString::from(headers::PUBLISHED_AT), value);
        BasicProperties::default().with_headers(table)
    }

    #[test]
    fn every_metric_is_described_once_and_documented_for_operators() {
        let operations = include_str!("../../docs/operations.md");
        let mut names: Vec<&str> = DESCRIPTIONS.iter().map(|(name, ..)| *name).collect();
        for name in &names {
            assert!(
                operations.contains(&format!("`{name}`")),
                "{name} is missing from docs/operations.md's metrics table"
            );
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DESCRIPTIONS.len(), "a metric described twice");
    }

    #[test]
    fn latency_prefers_the_millisecond_header_and_refuses_absurd_values() {
        let now = at(1_800_000_000);
        let millis = 1_800_000_000_000 - 250;
        let properties = with_header(AMQPValue::LongLongInt(millis)).with_timestamp(1);
        assert_eq!(latency(&properties, now), Some(Duration::from_millis(250)));
        // The AMQP timestamp, in seconds, when there is no header.
        let seconds = BasicProperties::default().with_timestamp(1_800_000_000 - 3);
        assert_eq!(latency(&seconds, now), Some(Duration::from_secs(3)));
        // Forged: far in the future, negative, ancient, or not a number.
        let future = with_header(AMQPValue::LongLongInt(1_900_000_000_000));
        assert_eq!(latency(&future, now), None);
        assert_eq!(latency(&with_header(AMQPValue::LongLongInt(-5)), now), None);
        assert_eq!(latency(&with_header(AMQPValue::LongLongInt(0)), now), None);
        assert_eq!(
            latency(&with_header(AMQPValue::LongLongInt(i64::MAX)), now),
            None
        );
        let text = with_header(AMQPValue::LongString("soon".into()));
        assert_eq!(latency(&text, now), None);
        assert_eq!(latency(&BasicProperties::default(), now), None);
        // A little ahead is clock skew: zero.
        let skewed = with_header(AMQPValue::LongLongInt(1_800_000_000_000 + 5_000));
        assert_eq!(latency(&skewed, now), Some(Duration::ZERO));
        let huge = BasicProperties::default().with_timestamp(u64::MAX);
        assert_eq!(latency(&huge, now), None);
    }

    #[test]
    fn stamping_keeps_the_other_headers() {
        let mut table = FieldTable::default();
        table.insert(
            ShortString::from("tenant"),
            AMQPValue::LongString("acme".into()),
        );
        stamp(&mut table);
        let headers = table;
        assert!(headers.inner().contains_key("tenant"));
        assert!(header_int(Some(&headers), super::headers::PUBLISHED_AT).is_some());
    }
}
