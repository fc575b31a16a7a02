//! Why and where a message failed, read back from the headers of a retry copy or a dead
//! letter: what a handler, a dead-letter consumer, `warren dlq` and the test kit all read.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use lapin::types::{AMQPValue, FieldTable};

use crate::amqp::{header_int, header_str, int_value, str_value};
use crate::model::limits::MAX_SHORT_STRING;
use crate::model::{FailureReason, Topology, headers};
use crate::text::{MAX_ERROR_BYTES, truncate};

/// The failure history of a message: why it was dead-lettered, its last error, how often it
/// was retried and redriven, when it first and last failed, where it was first published, and
/// which queue and consumer it failed in.
///
/// Warren writes it into the headers of every retry copy and dead letter (see
/// [`crate::model::headers`]). A message the broker dead-lettered by itself (a quorum queue's
/// delivery limit reached with no warren worker settling it, a TTL or a length limit) carries
/// only the broker's `x-death`, which fills in what it can: the reason, the queue, the route
/// and the time.
///
/// Read from headers anyone could have written: every field is whatever the producer or the
/// last hop put there, bounded (strings as long as a header value, counts saturating), never
/// trusted for control flow by itself.
///
/// ```
/// use warren_runtime::FailureContext;
/// use warren_runtime::model::FailureReason;
///
/// let mut context = FailureContext::default();
/// context.reason = Some(FailureReason::Exhausted);
/// context.last_error = Some("payment service timed out".into());
/// assert_eq!(context.reason.map(|r| r.as_str()), Some("exhausted"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailureContext {
    /// Why it was dead-lettered (`x-failure-reason`, or the broker's `x-death` reason);
    /// `None` on a retry copy, which was not dead-lettered.
    pub reason: Option<FailureReason>,
    /// The last error, as its handler (or decode) reported it, cut to a bounded length.
    pub last_error: Option<String>,
    /// Retries before it failed for the last time.
    pub retry_count: u32,
    /// Times it was redriven from a dead-letter queue back to its queue.
    pub redrive_count: u32,
    /// When a handler first failed on it.
    pub first_failure: Option<SystemTime>,
    /// When it last failed.
    pub last_failure: Option<SystemTime>,
    /// The exchange it was first published to.
    pub original_exchange: Option<String>,
    /// The routing key it was first published with.
    pub original_routing_key: Option<String>,
    /// The queue it failed in: where a redrive returns it.
    pub queue: Option<String>,
    /// The consumer that failed on it.
    pub consumer: Option<String>,
}

impl FailureContext {
    /// The failure context in a message's headers; `None` when they hold none (a message
    /// that never failed). Read in one pass over the table: most messages never failed, and a
    /// dozen lookups of them on each were a twentieth of a worker's decode.
    pub fn from_headers(table: Option<&FieldTable>) -> Option<Self> {
        let text = |value| str_value(value).map(|value| bounded(&value));
        let count =
            |value| int_value(value).map_or(0, |n| u32::try_from(n.max(0)).unwrap_or(u32::MAX));
        let mut context = Self::default();
        let mut deaths = None;
        for (key, value) in table?.inner() {
            match key.as_str() {
                headers::FAILURE_REASON => {
                    context.reason = str_value(value).and_then(|r| r.parse().ok());
                }
                headers::LAST_ERROR => {
                    context.last_error =
                        str_value(value).map(|error| truncate(&error, MAX_ERROR_BYTES));
                }
                headers::RETRY_COUNT => context.retry_count = count(value),
                headers::REDRIVE_COUNT => context.redrive_count = count(value),
                headers::FIRST_FAILURE => context.first_failure = millis(int_value(value)),
                headers::LAST_FAILURE => context.last_failure = millis(int_value(value)),
                headers::ORIGINAL_EXCHANGE => context.original_exchange = text(value),
                headers::ORIGINAL_ROUTING_KEY => context.original_routing_key = text(value),
                headers::FAILED_QUEUE => context.queue = text(value),
                headers::CONSUMER => context.consumer = text(value),
                headers::DEATH => deaths = Some(value),
                _ => {}
            }
        }
        // What only the broker recorded: its most recent dead-lettering, first in `x-death`.
        if context.reason.is_none()
            && let Some(death) = deaths.and_then(last_death)
        {
            context.reason = header_str(Some(death), "reason")
                .as_deref()
                .and_then(FailureReason::from_broker);
            if context.reason.is_some() {
                let field = |key| header_str(Some(death), key).map(|value| bounded(&value));
                context.queue = context.queue.or_else(|| field("queue"));
                context.original_exchange = context.original_exchange.or_else(|| field("exchange"));
                context.original_routing_key =
                    (context.original_routing_key).or_else(|| first_routing_key(death));
                let at = header_int(Some(death), "time").and_then(|s| s.checked_mul(1000));
                context.last_failure = context.last_failure.or_else(|| millis(at));
            }
        }
        (context != Self::default()).then_some(context)
    }

    /// The context of a dead letter another stack wrote, judged by `budget`, the retries of
    /// the queue it died in: the broker says only `rejected` (amqp-contract's `nack` adds no
    /// reason), and the retry count that stack stamped on its copies tells the rest. Retried
    /// as often as the budget allows: `exhausted`. Retried before, and rejected before the
    /// budget was spent: `non-retryable` (poison never is retried, its failure is
    /// deterministic). Never retried, or the budget unknown: still `rejected`, which may be
    /// either poison or a handler that refused it. Any other context is returned as it is.
    pub fn judged(mut self, budget: Option<u32>) -> Self {
        if self.reason != Some(FailureReason::Rejected) || self.retry_count == 0 {
            return self;
        }
        self.reason = match budget {
            Some(budget) if self.retry_count >= budget => Some(FailureReason::Exhausted),
            Some(_) => Some(FailureReason::NonRetryable),
            None => self.reason,
        };
        self
    }
}

/// The retry budget of each queue of a topology, by name: what [`FailureContext::judged`]
/// judges another stack's dead letters by, in `warren dlq` and in a dead-letter consumer.
#[derive(Debug, Clone, Default)]
pub(crate) struct RetryBudgets(BTreeMap<String, u32>);

impl RetryBudgets {
    /// The budgets of `topology`'s queues (namespaced as it is).
    pub(crate) fn of(topology: &Topology) -> Self {
        Self(
            (topology.queues.iter())
                .filter_map(|q| Some((q.name.clone(), q.retry.budget()?)))
                .collect(),
        )
    }

    /// `context` judged by the budget of the queue it died in.
    pub(crate) fn judge(&self, context: FailureContext) -> FailureContext {
        let budget = (context.queue.as_ref()).and_then(|queue| self.0.get(queue).copied());
        context.judged(budget)
    }
}

/// A header string cut to what an AMQP name may hold (255 bytes), on a character boundary:
/// a forged megabyte-long `x-consumer` costs no more than a real one. (The last error is cut
/// to what `x-last-error` keeps, 1 KiB.)
fn bounded(value: &str) -> String {
    if value.len() <= MAX_SHORT_STRING {
        return value.to_owned();
    }
    let mut end = MAX_SHORT_STRING;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].to_owned()
}

/// A time in milliseconds since the Unix epoch, as warren's timestamp headers hold it.
fn millis(value: Option<i64>) -> Option<SystemTime> {
    let millis = u64::try_from(value?).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(millis))
}

/// The most recent entry of the broker's `x-death` (`deaths`; RabbitMQ puts it first).
fn last_death(deaths: &AMQPValue) -> Option<&FieldTable> {
    match deaths {
        AMQPValue::FieldArray(deaths) => match deaths.as_slice().first()? {
            AMQPValue::FieldTable(death) => Some(death),
            _ => None,
        },
        _ => None,
    }
}

fn first_routing_key(death: &FieldTable) -> Option<String> {
    match death.inner().get("routing-keys")? {
        AMQPValue::FieldArray(keys) => match keys.as_slice().first()? {
            AMQPValue::LongString(key) => Some(bounded(&String::from_utf8_lossy(key.as_bytes()))),
            AMQPValue::ShortString(key) => Some(bounded(key.as_str())),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};

    use super::FailureContext;
    use crate::model::{FailureReason, headers};

    /// Another stack's `rejected` dead letter, judged by the budget of 3 of the queue it
    /// died in: only its retry count tells exhausted from refused, and only a count does.
    #[test]
    fn a_rejected_dead_letter_is_judged_by_its_retries_and_its_queue_s_budget() {
        let rejected = |retry_count| FailureContext {
            reason: Some(FailureReason::Rejected),
            retry_count,
            ..FailureContext::default()
        };
        let judged = |retries, budget| rejected(retries).judged(budget).reason;
        assert_eq!(judged(3, Some(3)), Some(FailureReason::Exhausted));
        assert_eq!(judged(1, Some(3)), Some(FailureReason::NonRetryable));
        assert_eq!(
            judged(0, Some(3)),
            Some(FailureReason::Rejected),
            "poison, or refused"
        );
        assert_eq!(
            judged(3, None),
            Some(FailureReason::Rejected),
            "no budget known"
        );
        let warren = FailureContext {
            reason: Some(FailureReason::Validation),
            ..rejected(3)
        };
        assert_eq!(
            warren.clone().judged(Some(3)),
            warren,
            "warren's own say why"
        );
    }

    fn text(value: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(value))
    }

    #[test]
    fn warren_headers_read_back() {
        let mut table = FieldTable::default();
        for (key, value) in [
            (headers::FAILURE_REASON, text("non-retryable")),
            (headers::LAST_ERROR, text("card declined")),
            (headers::RETRY_COUNT, AMQPValue::LongLongInt(2)),
            (headers::REDRIVE_COUNT, AMQPValue::LongInt(1)),
            (headers::FIRST_FAILURE, AMQPValue::LongLongInt(1_000)),
            (headers::FAILED_QUEUE, text("payments")),
            (headers::CONSUMER, text("charge")),
            (headers::ORIGINAL_EXCHANGE, text("orders")),
            (headers::ORIGINAL_ROUTING_KEY, text("order.placed")),
        ] {
            table.insert(ShortString::from(key), value);
        }
        let context = FailureContext::from_headers(Some(&table)).expect("a context");
        assert_eq!(context.reason, Some(FailureReason::NonRetryable));
        assert_eq!(context.last_error.as_deref(), Some("card declined"));
        assert_eq!((context.retry_count, context.redrive_count), (2, 1));
        assert_eq!(context.queue.as_deref(), Some("payments"));
        assert_eq!(context.consumer.as_deref(), Some("charge"));
        assert_eq!(
            context.first_failure,
            Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1))
        );
        assert_eq!(FailureContext::from_headers(None), None);
        assert_eq!(
            FailureContext::from_headers(Some(&FieldTable::default())),
            None
        );
    }

    /// A dead letter of the broker's own: only `x-death`, most recent first.
    #[test]
    fn the_broker_record_fills_in() {
        let mut death = FieldTable::default();
        death.insert(ShortString::from("reason"), text("delivery_limit"));
        death.insert(ShortString::from("queue"), text("payments"));
        death.insert(ShortString::from("exchange"), text("orders"));
        death.insert(ShortString::from("time"), AMQPValue::Timestamp(5));
        let mut keys = FieldArray::default();
        keys.push(text("order.placed"));
        death.insert(
            ShortString::from("routing-keys"),
            AMQPValue::FieldArray(keys),
        );
        let mut older = FieldTable::default();
        older.insert(ShortString::from("reason"), text("expired"));
        let mut deaths = FieldArray::default();
        deaths.push(AMQPValue::FieldTable(death));
        deaths.push(AMQPValue::FieldTable(older));
        let mut table = FieldTable::default();
        table.insert(ShortString::from("x-death"), AMQPValue::FieldArray(deaths));
        let context = FailureContext::from_headers(Some(&table)).expect("a context");
        assert_eq!(context.reason, Some(FailureReason::DeliveryLimit));
        assert_eq!(context.queue.as_deref(), Some("payments"));
        assert_eq!(
            context.original_routing_key.as_deref(),
            Some("order.placed")
        );
        assert_eq!(
            context.last_failure,
            Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(5))
        );
    }

    /// Forged values cost their bound: names are cut to 255 bytes, counts saturate, a
    /// reason warren does not know reads as none.
    #[test]
    fn forged_values_are_bounded() {
        let mut table = FieldTable::default();
        table.insert(
            ShortString::from(headers::CONSUMER),
            text(&"é".repeat(10_000)),
        );
        table.insert(
            ShortString::from(headers::RETRY_COUNT),
            AMQPValue::LongLongInt(i64::MAX),
        );
        table.insert(ShortString::from(headers::FAILURE_REASON), text("bogus"));
        let context = FailureContext::from_headers(Some(&table)).expect("a context");
        assert!(context.consumer.expect("kept").len() <= 255);
        assert_eq!(context.retry_count, u32::MAX);
        assert_eq!(context.reason, None);
    }
}
