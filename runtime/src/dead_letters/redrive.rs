//! `redrive`: dead letters back to the queue each failed in, with their retry history reset
//! and their redrive count raised.
//!
//! One message at a time: read unacknowledged; if it is to move, a copy is published to its
//! queue (default exchange, `mandatory`, confirmed) and only then is the dead letter acked.
//! Killed at any point, a message is in the dead-letter queue (unacked, so returned), in its
//! queue (confirmed and acked), or, killed between the confirm and the ack, in both: a
//! duplicate, never a loss.
//!
//! Messages that stay (not matching the filter, at the redrive limit, with no known queue)
//! are held unacknowledged up to [`MAX_HELD`] and returned when the pass ends, untouched.
//! Past that bound each is moved to the back of the dead-letter queue instead (a confirmed
//! copy, then the ack), so a pass over a large queue holds a bounded number of messages and
//! still reads every one: it reads at most the depth the queue had when it began.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use lapin::BasicProperties;
use lapin::message::Delivery;
use lapin::types::{AMQPValue, ShortString};

use crate::amqp::header_int;
use crate::error::PublishError;
use crate::failure::FailureContext;
use crate::model::{FailureReason, Namespace, headers};
use crate::publisher::Publisher;
use crate::worker::settle::republished;

use super::scan::Scan;
use super::{DeadLetterError, DeadLetterQueue, Fingerprint};

/// Messages a redrive holds unacknowledged at once (those that stay in the dead-letter
/// queue); past it they are moved to its back. A dry run, which moves nothing, reads at most
/// this many.
pub const MAX_HELD: u32 = 1_000;

/// The longest wait between two moves, whatever the rate.
const MAX_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// Which dead letters to redrive: all that match every criterion set (none set: all).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    reason: Option<FailureReason>,
    consumer: Option<String>,
    error: Option<String>,
    group: Option<String>,
    older_than: Option<Duration>,
    newer_than: Option<Duration>,
}

impl Filter {
    /// Dead-lettered for this reason.
    pub fn reason(mut self, reason: FailureReason) -> Self {
        self.reason = Some(reason);
        self
    }

    /// Failed in this consumer.
    pub fn consumer(mut self, consumer: impl Into<String>) -> Self {
        self.consumer = Some(consumer.into());
        self
    }

    /// Whose last error contains this text.
    pub fn error(mut self, text: impl Into<String>) -> Self {
        self.error = Some(text.into());
        self
    }

    /// Whose failure has the fingerprint of this [`super::Fingerprint::id`] (a group
    /// [`DeadLetterQueue::count`] found).
    pub fn group(mut self, id: impl Into<String>) -> Self {
        self.group = Some(id.into());
        self
    }

    /// Whose last failure (or, without one, first failure) is older than this. A message
    /// with neither time does not match.
    pub fn older_than(mut self, age: Duration) -> Self {
        self.older_than = Some(age);
        self
    }

    /// Whose last failure (or, without one, first failure) is more recent than this.
    pub fn newer_than(mut self, age: Duration) -> Self {
        self.newer_than = Some(age);
        self
    }

    /// Whether a dead letter with this failure context matches, at `now`.
    pub fn matches(&self, context: Option<&FailureContext>, now: SystemTime) -> bool {
        let empty = FailureContext::default();
        let context = context.unwrap_or(&empty);
        let failed_at = context.last_failure.or(context.first_failure);
        let age = failed_at.map(|at| now.duration_since(at).unwrap_or(Duration::ZERO));
        self.reason.is_none_or(|r| context.reason == Some(r))
            && (self.consumer.as_ref()).is_none_or(|c| context.consumer.as_ref() == Some(c))
            && (self.error.as_ref()).is_none_or(|text| {
                (context.last_error.as_ref()).is_some_and(|e| e.contains(text.as_str()))
            })
            && (self.group.as_ref()).is_none_or(|id| *id == Fingerprint::of(Some(context)).id())
            && self
                .older_than
                .is_none_or(|min| age.is_some_and(|age| age > min))
            && self
                .newer_than
                .is_none_or(|max| age.is_some_and(|age| age < max))
    }
}

/// How a redrive runs.
#[derive(Debug, Clone)]
pub struct RedriveOptions {
    max_redrives: u32,
    limit: Option<u64>,
    rate: Option<f64>,
    dry_run: bool,
    targets: Option<BTreeSet<String>>,
    timeout: Duration,
}

impl Default for RedriveOptions {
    fn default() -> Self {
        Self {
            max_redrives: 3,
            limit: None,
            rate: None,
            dry_run: false,
            targets: None,
            timeout: crate::publisher::DEFAULT_PUBLISH_TIMEOUT,
        }
    }
}

impl RedriveOptions {
    /// Redrives a message may have had (`x-redrive-count`) and still be redriven (default
    /// 3): one redriven that often is refused and stays, so nothing loops for ever.
    pub fn max_redrives(mut self, max: u32) -> Self {
        self.max_redrives = max;
        self
    }

    /// Moves at most this many.
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Moves at most this many per second (not a burst: evenly spaced; at least one a day).
    pub fn rate(mut self, per_second: f64) -> Self {
        self.rate = (per_second.is_finite() && per_second > 0.0).then_some(per_second);
        self
    }

    /// Reads and reports what would move, and moves nothing.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// The only queues a message may be sent back to (see
    /// [`redrive_targets`](super::redrive_targets)); a dead letter naming another stays,
    /// counted as [`RedriveSummary::no_queue`]. Without it, any queue but the dead-letter
    /// queue itself: set it whenever the dead letters may come from anyone.
    pub fn targets(mut self, queues: BTreeSet<String>) -> Self {
        self.targets = Some(queues);
        self
    }

    /// The time between two moves at the rate set, if one is: at most [`MAX_PERIOD`], since
    /// a rate such as `1e-300` makes a period no `Duration` (or `Instant`) holds, which would
    /// panic.
    fn period(&self) -> Option<Duration> {
        self.rate.map(|rate| {
            Duration::try_from_secs_f64(1.0 / rate).map_or(MAX_PERIOD, |p| p.min(MAX_PERIOD))
        })
    }

    /// How long one copy may wait for its confirm (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// What a redrive did (or, in a dry run, would do), updated as it goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedriveSummary {
    /// Ready messages when it began.
    pub depth: u32,
    /// How many it reads at most: the depth, or [`MAX_HELD`] in a dry run.
    pub to_scan: u32,
    /// Messages read.
    pub scanned: u32,
    /// Sent back to their queue and removed from the dead-letter queue (in a dry run: those
    /// that would be).
    pub moved: u64,
    /// Left: they do not match the filter.
    pub skipped: u64,
    /// Left: redriven [`RedriveOptions::max_redrives`] times already.
    pub refused: u64,
    /// Left: no queue they failed in (`x-failed-queue`, or the broker's `x-death`), or one
    /// that is not a target, or one the broker could not route to (deleted).
    pub no_queue: u64,
    /// Copies of the messages this run moved that may already be in their queues: each
    /// earlier delivery of a message may have been a redrive killed between its confirm and
    /// its ack, which left a copy (a handler sees it twice). Counted from a quorum queue's
    /// `x-delivery-count` (peeks and counts deliver too); a classic queue counts no
    /// deliveries, only whether there was one (`redelivered`): 1 for a message however many
    /// killed runs moved it. It says nothing of the messages a killed run moved and
    /// acknowledged: that run's count died with it, and each killed run may have left one
    /// more duplicate, so the duplicates are at most this plus one per redrive killed before.
    pub duplicates_possible: u64,
    /// Messages moved to the back of the dead-letter queue because more than [`MAX_HELD`]
    /// stayed.
    pub cycled: u64,
    /// Whether nothing was moved because it was a dry run.
    pub dry_run: bool,
}

/// What happens to one dead letter.
enum Verdict {
    Move(String),
    Skip,
    Refuse,
    NoQueue,
}

impl DeadLetterQueue {
    /// Sends the dead letters that match `filter` back to the queue each failed in, and
    /// returns what it did; `progress` is called after each message read.
    ///
    /// A copy is published to the queue (default exchange, `mandatory`, with confirms) with
    /// the retry history reset (`x-retry-count`, the failure times, error, reason, consumer
    /// and queue, the broker's `x-death` and delivery count) but the original exchange and
    /// routing key kept and `x-redrive-count` raised; the dead letter is acked only after the
    /// confirm. See the module documentation for what a kill costs.
    pub async fn redrive(
        &self,
        filter: &Filter,
        options: &RedriveOptions,
        mut progress: impl FnMut(&RedriveSummary),
    ) -> Result<RedriveSummary, DeadLetterError> {
        let scan = Scan::open(self).await?;
        let publisher = match Publisher::open(&self.connection, Namespace::default()).await {
            Ok(publisher) => publisher.timeout(options.timeout),
            Err(source) => {
                let _ = scan.release().await;
                return Err(self.publish_error(source));
            }
        };
        let mut summary = RedriveSummary {
            depth: scan.depth(),
            to_scan: if options.dry_run {
                scan.depth().min(MAX_HELD)
            } else {
                scan.depth()
            },
            dry_run: options.dry_run,
            ..RedriveSummary::default()
        };
        let run = self.pass(
            &scan,
            &publisher,
            filter,
            options,
            &mut summary,
            &mut progress,
        );
        let result = run.await;
        let released = scan.release().await;
        result.and(released).map(|()| summary)
    }

    async fn pass(
        &self,
        scan: &Scan<'_>,
        publisher: &Publisher,
        filter: &Filter,
        options: &RedriveOptions,
        summary: &mut RedriveSummary,
        progress: &mut impl FnMut(&RedriveSummary),
    ) -> Result<(), DeadLetterError> {
        let period = options.period();
        let mut next_move = tokio::time::Instant::now();
        let mut held = 0u32;
        while summary.scanned < summary.to_scan
            && options.limit.is_none_or(|limit| summary.moved < limit)
        {
            let Some(delivery) = scan.next().await? else {
                break;
            };
            summary.scanned += 1;
            let headers = delivery.properties.headers().as_ref();
            let context = self.context(headers);
            let verdict = self.verdict(context.as_ref(), filter, options);
            if let Verdict::Move(queue) = &verdict {
                if options.dry_run {
                    summary.moved += 1;
                    held += 1;
                    progress(summary);
                    continue;
                }
                if let Some(period) = period {
                    tokio::time::sleep_until(next_move).await;
                    next_move = tokio::time::Instant::now() + period;
                }
                let copy = within(redriven(&delivery, context.as_ref()), publisher.frame_max());
                match publisher.send("", queue, &delivery.data, copy).await {
                    Ok(()) => {
                        scan.ack(delivery.delivery_tag).await?;
                        summary.moved += 1;
                        summary.duplicates_possible += earlier_deliveries(&delivery);
                        progress(summary);
                        continue;
                    }
                    // The queue is gone: the message stays, as one with no queue.
                    Err(PublishError::Unroutable { .. }) => {}
                    Err(source) => return Err(self.publish_error(source)),
                }
                summary.no_queue += 1;
            } else {
                match verdict {
                    Verdict::Skip => summary.skipped += 1,
                    Verdict::Refuse => summary.refused += 1,
                    Verdict::NoQueue | Verdict::Move(_) => summary.no_queue += 1,
                }
            }
            // It stays: held until the pass ends, or past the bound moved to the back.
            if held < MAX_HELD || options.dry_run {
                held += 1;
            } else {
                let copy = within(kept(&delivery, context.as_ref()), publisher.frame_max());
                publisher
                    .send("", &self.name, &delivery.data, copy)
                    .await
                    .map_err(|source| self.publish_error(source))?;
                scan.ack(delivery.delivery_tag).await?;
                summary.cycled += 1;
            }
            progress(summary);
        }
        Ok(())
    }

    fn verdict(
        &self,
        context: Option<&FailureContext>,
        filter: &Filter,
        options: &RedriveOptions,
    ) -> Verdict {
        if !filter.matches(context, SystemTime::now()) {
            return Verdict::Skip;
        }
        if context.is_some_and(|c| c.redrive_count >= options.max_redrives) {
            return Verdict::Refuse;
        }
        match context.and_then(|c| c.queue.as_ref()) {
            Some(queue)
                if *queue != self.name
                    && options.targets.as_ref().is_none_or(|t| t.contains(queue)) =>
            {
                Verdict::Move(queue.clone())
            }
            _ => Verdict::NoQueue,
        }
    }

    fn publish_error(&self, source: PublishError) -> DeadLetterError {
        DeadLetterError::Publish {
            queue: self.name.clone(),
            source,
        }
    }
}

/// How many times `delivery` was delivered before: a quorum queue's `x-delivery-count`
/// (a header anyone may forge on a message of a classic queue; bounded by the broker's own
/// on a quorum queue, which overwrites it), else 1 when `redelivered`.
fn earlier_deliveries(delivery: &Delivery) -> u64 {
    let counted = header_int(
        delivery.properties.headers().as_ref(),
        headers::DELIVERY_COUNT,
    )
    .and_then(|count| u64::try_from(count).ok());
    match counted {
        Some(count) => count,
        None => u64::from(delivery.redelivered),
    }
}

/// `copy` with its headers cut to what a copy's header frame may weigh on a connection of
/// `frame_max` (`wire::fit`, the cut recorded): what a redrive writes out can take a dead
/// letter near `frame_max` over it, and the broker would close the channel publishing it,
/// ending the pass.
fn within(copy: BasicProperties, frame_max: usize) -> BasicProperties {
    let budget = crate::wire::copy_budget(frame_max);
    crate::wire::fit(&copy, budget).unwrap_or(copy)
}

/// The properties of a redriven copy: the dead letter's (but its expiration, user id and
/// publish time), persistent, with the retry history removed and the redrive count raised. The original
/// exchange and routing key stay: where it was first published is still true. A dead letter
/// of the broker's own has them only in the `x-death` removed here: they are written out.
fn redriven(delivery: &Delivery, context: Option<&FailureContext>) -> BasicProperties {
    republished(&delivery.properties, |inner| {
        for key in [
            headers::RETRY_COUNT,
            headers::FIRST_FAILURE,
            headers::LAST_FAILURE,
            headers::LAST_ERROR,
            headers::FAILURE_REASON,
            headers::CONSUMER,
            headers::FAILED_QUEUE,
            // Sent again by the redrive's user, which would vouch for it: a redriven
            // message's latency says nothing of the pipeline, and its stamp may be anyone's.
            headers::PUBLISHED_AT,
        ]
        .into_iter()
        .chain(headers::BROKER)
        {
            inner.remove(key);
        }
        let redrive_count = context.map_or(0, |c| c.redrive_count);
        inner.insert(
            ShortString::from(headers::REDRIVE_COUNT),
            AMQPValue::LongLongInt(i64::from(redrive_count.saturating_add(1))),
        );
        write_out(inner, context, false);
    })
}

/// The properties of a dead letter moved to the back of its queue: its own, headers and all
/// but its publish time, persistent, with what its `x-death` says written out as warren's headers (see
/// [`write_out`]).
fn kept(delivery: &Delivery, context: Option<&FailureContext>) -> BasicProperties {
    republished(&delivery.properties, |inner| {
        // As in `redriven`: the redrive's user would vouch for a stamp it never checked.
        inner.remove(headers::PUBLISHED_AT);
        write_out(inner, context, true)
    })
}

/// Writes where a message was first published (and, with `failure`, where, why and when it
/// failed) as warren's headers, where they are absent: a dead letter of the broker's own has
/// them only in `x-death`, which a redrive removes and which a broker need not keep on a
/// message a client publishes.
fn write_out(
    inner: &mut BTreeMap<ShortString, AMQPValue>,
    context: Option<&FailureContext>,
    failure: bool,
) {
    let Some(context) = context else {
        return;
    };
    let text = |value: Option<&str>| value.map(|v| AMQPValue::LongString(v.into()));
    let mut facts = vec![
        (
            headers::ORIGINAL_EXCHANGE,
            text(context.original_exchange.as_deref()),
        ),
        (
            headers::ORIGINAL_ROUTING_KEY,
            text(context.original_routing_key.as_deref()),
        ),
    ];
    if failure {
        let millis = context
            .last_failure
            .and_then(|at| at.duration_since(SystemTime::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .map(AMQPValue::LongLongInt);
        facts.extend([
            (headers::FAILED_QUEUE, text(context.queue.as_deref())),
            (
                headers::FAILURE_REASON,
                text(context.reason.map(|r| r.as_str())),
            ),
            (headers::LAST_FAILURE, millis),
        ]);
    }
    for (key, value) in facts {
        if let Some(value) = value {
            inner.entry(ShortString::from(key)).or_insert(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::Filter;
    use crate::failure::FailureContext;
    use crate::model::FailureReason;

    /// What only `x-death` said is written out, and what warren's headers say is kept.
    #[test]
    fn broker_facts_are_written_out() {
        use lapin::types::{AMQPValue, ShortString};

        use super::write_out;
        use crate::model::headers;

        let context = FailureContext {
            reason: Some(FailureReason::Rejected),
            queue: Some("work".into()),
            original_exchange: Some("jobs".into()),
            original_routing_key: Some("job.a".into()),
            last_failure: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(5)),
            ..FailureContext::default()
        };
        let text = |s: &str| AMQPValue::LongString(s.into());
        let mut inner = std::collections::BTreeMap::new();
        inner.insert(ShortString::from(headers::ORIGINAL_EXCHANGE), text("kept"));
        let mut route_only = inner.clone();
        write_out(&mut route_only, Some(&context), false);
        assert_eq!(route_only.len(), 2);
        write_out(&mut inner, Some(&context), true);
        let get = |key: &str| inner.get(&ShortString::from(key)).cloned();
        assert_eq!(get(headers::ORIGINAL_EXCHANGE), Some(text("kept")));
        assert_eq!(get(headers::ORIGINAL_ROUTING_KEY), Some(text("job.a")));
        assert_eq!(get(headers::FAILED_QUEUE), Some(text("work")));
        assert_eq!(get(headers::FAILURE_REASON), Some(text("rejected")));
        assert_eq!(
            get(headers::LAST_FAILURE),
            Some(AMQPValue::LongLongInt(5_000))
        );
    }

    /// A broker dead letter (its facts only in `x-death`) within a few hundred bytes of
    /// `frame_max` gains warren's headers when it is kept (moved to the back of its queue):
    /// published as it was, its copy was over the frame, the broker closed the channel and
    /// the redrive pass ended (exit 2). Each copy is now cut to the copy budget.
    #[test]
    fn a_copy_near_frame_max_is_cut_to_fit() {
        use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};

        use super::{kept, redriven, within};
        use crate::wire::{copy_budget, header_frame_len};

        const FRAME_MAX: usize = 131_072;
        let mut death = FieldTable::default();
        for (key, value) in [
            ("reason", "rejected"),
            ("queue", "orders"),
            ("exchange", "jobs"),
        ] {
            death.insert(ShortString::from(key), AMQPValue::LongString(value.into()));
        }
        death.insert(ShortString::from("count"), AMQPValue::LongLongInt(1));
        death.insert(
            ShortString::from("time"),
            AMQPValue::Timestamp(1_700_000_000),
        );
        let mut keys = FieldArray::default();
        keys.push(AMQPValue::LongString("job.created".into()));
        death.insert(
            ShortString::from("routing-keys"),
            AMQPValue::FieldArray(keys),
        );
        let mut deaths = FieldArray::default();
        deaths.push(AMQPValue::FieldTable(death));
        let mut table = FieldTable::default();
        table.insert(ShortString::from("x-death"), AMQPValue::FieldArray(deaths));
        let mut delivery = lapin::message::Delivery::mock(
            1,
            ShortString::from(""),
            ShortString::from("orders.dead"),
            false,
            Vec::new(),
        );
        // Padded to 200 bytes under the frame.
        let with_pad = |table: &FieldTable, pad: usize| {
            let mut table = table.clone();
            table.insert(
                ShortString::from("pad"),
                AMQPValue::LongString(LongString::from("p".repeat(pad))),
            );
            lapin::BasicProperties::default().with_headers(table)
        };
        let bare = header_frame_len(&with_pad(&table, 0));
        delivery.properties = with_pad(&table, FRAME_MAX - 200 - bare);
        assert_eq!(header_frame_len(&delivery.properties), FRAME_MAX - 200);
        let context = FailureContext::from_headers(delivery.properties.headers().as_ref());
        let grown = kept(&delivery, context.as_ref());
        assert!(
            header_frame_len(&grown) > copy_budget(FRAME_MAX),
            "it grew past the budget"
        );
        for copy in [grown, redriven(&delivery, context.as_ref())] {
            let fitted = within(copy, FRAME_MAX);
            assert!(header_frame_len(&fitted) <= copy_budget(FRAME_MAX));
        }
    }

    /// A rate too small for a `Duration` (`--rate 1e-300`) does not panic the redrive: its
    /// period is capped.
    #[test]
    fn a_tiny_rate_has_a_bounded_period() {
        use super::{MAX_PERIOD, RedriveOptions};

        for rate in [1e-300, f64::MIN_POSITIVE, 1e-9] {
            let options = RedriveOptions::default().rate(rate);
            assert_eq!(options.period(), Some(MAX_PERIOD), "{rate}");
        }
        let options = RedriveOptions::default().rate(50.0);
        assert_eq!(options.period(), Some(Duration::from_millis(20)));
        assert_eq!(RedriveOptions::default().period(), None);
    }

    #[test]
    fn filters_combine() {
        let now = SystemTime::now();
        let context = FailureContext {
            reason: Some(FailureReason::Exhausted),
            consumer: Some("charge".into()),
            last_error: Some("payment service timed out".into()),
            last_failure: Some(now - Duration::from_secs(3600)),
            ..FailureContext::default()
        };
        let matches = |filter: Filter| filter.matches(Some(&context), now);
        assert!(matches(Filter::default()));
        assert!(matches(
            Filter::default()
                .reason(FailureReason::Exhausted)
                .consumer("charge")
                .error("timed out")
                .older_than(Duration::from_secs(60))
                .newer_than(Duration::from_secs(7200))
        ));
        assert!(!matches(
            Filter::default().reason(FailureReason::Validation)
        ));
        assert!(!matches(Filter::default().consumer("ship")));
        assert!(!matches(Filter::default().error("declined")));
        assert!(!matches(
            Filter::default().older_than(Duration::from_secs(7200))
        ));
        assert!(!matches(
            Filter::default().newer_than(Duration::from_secs(60))
        ));
        // No context at all: only the empty filter matches.
        assert!(Filter::default().matches(None, now));
        assert!(
            !Filter::default()
                .older_than(Duration::ZERO)
                .matches(None, now)
        );
    }
}
