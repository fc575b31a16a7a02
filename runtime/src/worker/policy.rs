//! What happens to a delivery that failed: the queue's retry policy applied to one failure.
//! Pure decisions, so the model is testable without a broker.

use std::time::Duration;

use crate::model::{Exhausted, FailureReason, OnPoison, QUORUM_UNLIMITED, Queue, QueueKind, Retry};

/// Dead-lettering `queue`'s delivery for `reason`: to the dead-letter exchange, or, with
/// none, discarded.
pub(crate) fn dead_letter_decision(queue: &Queue, reason: FailureReason) -> Decision {
    if queue.dead_letter.is_some() {
        Decision::DeadLetter { reason }
    } else {
        Decision::Discard { reason }
    }
}

/// Whether the broker counts deliveries for `queue`'s retries (`x-delivery-count`), rather
/// than warren (`x-retry-count` on republished copies).
pub(crate) fn broker_counts(queue: &Queue) -> bool {
    queue.retry.counted_by_broker(queue.kind)
}

/// Why a delivery failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// It could not be decoded or validated (`reason` names how); never retried.
    Poison(FailureReason),
    /// The handler said it can never succeed.
    NonRetryable,
    /// The handler failed (or panicked) and it may succeed later; `after` is the least the
    /// retry should wait, when the handler said (`HandlerError::retry_after`).
    Retryable { after: Option<Duration> },
    /// Warren itself panicked while decoding or settling the delivery: a bug, most likely
    /// repeated on every attempt, so the message is dead-lettered (`internal-error`) whatever
    /// `on_poison` says, for someone to look at.
    Internal,
}

impl Failure {
    /// A retryable failure with no delay asked for: a panic, or a plain retryable error.
    pub(crate) const RETRYABLE: Self = Self::Retryable { after: None };

    /// The failure as a trace's `error.type`: its reason for poison, else what the handler
    /// (or warren) said.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Poison(reason) => reason.as_str(),
            Self::NonRetryable => "non-retryable",
            Self::Retryable { .. } => "retryable",
            Self::Internal => "internal-error",
        }
    }
}

/// What to do with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// `basic.reject(requeue=true)`: back to the queue (counts a delivery on quorum queues);
    /// `exhausted` when the retries are spent and the contract says to requeue anyway.
    Requeue { exhausted: bool },
    /// Publish a copy with `retry_count`, to the default exchange with `routing_key` (the
    /// queue itself, or a wait queue); then ack.
    Retry {
        routing_key: String,
        retry_count: u32,
    },
    /// Publish a copy to the dead-letter exchange with failure context; then ack.
    DeadLetter { reason: FailureReason },
    /// Ack and discard, with a log line: the contract says so.
    Drop { reason: FailureReason },
    /// No dead-letter exchange: `basic.nack(requeue=false)`, and the body is gone.
    Discard { reason: FailureReason },
}

impl Decision {
    /// What is done, as a trace's `warren.outcome`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Self::Requeue { .. } => "requeue",
            Self::Retry { .. } => "retry",
            Self::DeadLetter { .. } => "dead-letter",
            Self::Drop { .. } => "drop",
            Self::Discard { .. } => "discard",
        }
    }

    /// Why, when the message leaves the queue for good.
    pub(crate) fn reason(&self) -> Option<FailureReason> {
        match self {
            Self::Requeue { .. } | Self::Retry { .. } => None,
            Self::DeadLetter { reason } | Self::Drop { reason } | Self::Discard { reason } => {
                Some(*reason)
            }
        }
    }
}

/// Applies `queue`'s policy to a `failure` after `retries` earlier retries. `jitter` is a
/// number in `[0, 1)` (random in production).
pub(crate) fn decide(queue: &Queue, retries: u32, failure: Failure, jitter: f64) -> Decision {
    let dead_letter = |reason| dead_letter_decision(queue, reason);
    let exhausted = |policy: Exhausted| match policy {
        Exhausted::DeadLetter => dead_letter(FailureReason::Exhausted),
        Exhausted::Drop => Decision::Drop {
            reason: FailureReason::Exhausted,
        },
        Exhausted::Requeue => Decision::Requeue { exhausted: true },
    };
    match failure {
        Failure::Poison(reason) => match queue.on_poison {
            OnPoison::Drop => Decision::Drop { reason },
            OnPoison::DeadLetter => dead_letter(reason),
        },
        Failure::NonRetryable => dead_letter(FailureReason::NonRetryable),
        Failure::Internal => dead_letter(FailureReason::InternalError),
        Failure::Retryable { after } => match &queue.retry {
            // No retries: the budget of zero is spent at once.
            Retry::None => dead_letter(FailureReason::Exhausted),
            Retry::ImmediateRequeue {
                max_retries,
                exhausted: when_spent,
            } => {
                if retries >= *max_retries {
                    exhausted(*when_spent)
                } else if queue.kind == QueueKind::Quorum {
                    Decision::Requeue { exhausted: false }
                } else {
                    Decision::Retry {
                        routing_key: queue.name.clone(),
                        retry_count: retries.saturating_add(1),
                    }
                }
            }
            Retry::TtlBackoff(backoff) => {
                if retries >= backoff.max_retries {
                    // `exhausted: requeue` keeps retrying, at the longest delay rather than in
                    // a tight loop.
                    if let (Exhausted::Requeue, Some(longest)) =
                        (backoff.exhausted, backoff.tiers.last())
                    {
                        return Decision::Retry {
                            routing_key: longest.queue.clone(),
                            retry_count: retries.saturating_add(1),
                        };
                    }
                    return exhausted(backoff.exhausted);
                }
                let tier = match after {
                    Some(delay) => backoff.tier_at_least(delay),
                    None => backoff.tier(retries, jitter),
                };
                let Some(tier) = tier else {
                    // Not reached with a topology `Worker::run` accepted: it refuses tiers
                    // that are not the ones `Backoff::new` lays out, and the arithmetic is
                    // the same on every platform. Should it be reached anyway, nothing is
                    // lost and no schedule is guessed: a copy in the dead-letter queue
                    // (`internal-error`) for someone to look at, or, with nowhere to
                    // dead-letter, back to the queue (discarding would lose the body).
                    tracing::error!(
                        queue = queue.name,
                        retries,
                        "no wait tier for this retry's delay: the topology's tiers do not match its backoff"
                    );
                    return match dead_letter(FailureReason::InternalError) {
                        Decision::Discard { .. } => Decision::Requeue { exhausted: false },
                        keep => keep,
                    };
                };
                Decision::Retry {
                    routing_key: tier.queue.clone(),
                    retry_count: retries.saturating_add(1),
                }
            }
            // The broker counts deliveries and dead-letters past `x-delivery-limit`, with only
            // its `x-death`. On the last delivery the limit allows (`x-delivery-count` equal
            // to it), the worker dead-letters the message itself, with the context the other
            // modes give; the broker's limit stays the backstop for a worker that crashes on
            // it. No limit (`QUORUM_UNLIMITED`, a queue with nowhere to dead-letter) or no
            // count believed: back to the queue.
            Retry::QuorumNative => match queue.quorum_delivery_limit() {
                Some(limit) if limit != QUORUM_UNLIMITED && retries >= limit => {
                    dead_letter(FailureReason::Exhausted)
                }
                _ => Decision::Requeue { exhausted: false },
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Decision, Failure, decide};
    use crate::model::{
        Backoff, DeadLetter, DeliveryLimit, Exhausted, FailureReason, OnPoison, Queue, QueueKind,
        Retry,
    };

    fn queue(kind: QueueKind, retry: Retry) -> Queue {
        Queue {
            retry,
            on_poison: OnPoison::DeadLetter,
            dead_letter: Some(DeadLetter::new("dlx", None)),
            ..Queue::new("work", kind)
        }
    }

    fn backoff(exhausted: Exhausted) -> Retry {
        let ms = Duration::from_millis;
        Retry::TtlBackoff(Backoff::new(
            "work",
            3,
            ms(100),
            ms(300),
            2.0,
            false,
            exhausted,
        ))
    }

    #[test]
    fn poison_and_non_retryable_are_never_retried() {
        let q = queue(QueueKind::Quorum, backoff(Exhausted::DeadLetter));
        assert_eq!(
            decide(&q, 0, Failure::Poison(FailureReason::Validation), 0.0),
            Decision::DeadLetter {
                reason: FailureReason::Validation
            }
        );
        assert_eq!(
            decide(&q, 0, Failure::NonRetryable, 0.0),
            Decision::DeadLetter {
                reason: FailureReason::NonRetryable
            }
        );
        let mut dropping = q.clone();
        dropping.on_poison = OnPoison::Drop;
        assert_eq!(
            decide(&dropping, 0, Failure::Poison(FailureReason::Decode), 0.0),
            Decision::Drop {
                reason: FailureReason::Decode
            }
        );
        let mut no_dlx = q;
        no_dlx.dead_letter = None;
        assert_eq!(
            decide(&no_dlx, 0, Failure::NonRetryable, 0.0),
            Decision::Discard {
                reason: FailureReason::NonRetryable
            }
        );
    }

    #[test]
    fn ttl_backoff_walks_the_tiers_then_applies_exhausted() {
        let q = queue(QueueKind::Quorum, backoff(Exhausted::Drop));
        let tiers: Vec<_> = (0..3)
            .map(|n| match decide(&q, n, Failure::RETRYABLE, 0.0) {
                Decision::Retry {
                    routing_key,
                    retry_count,
                    ..
                } => (routing_key, retry_count),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            tiers,
            [
                ("work.wait.100ms".to_owned(), 1),
                ("work.wait.200ms".to_owned(), 2),
                ("work.wait.300ms".to_owned(), 3)
            ]
        );
        assert_eq!(
            decide(&q, 3, Failure::RETRYABLE, 0.0),
            Decision::Drop {
                reason: FailureReason::Exhausted
            }
        );
    }

    #[test]
    fn immediate_requeue_uses_reject_on_quorum_and_copies_on_classic() {
        let retry = Retry::ImmediateRequeue {
            max_retries: 2,
            exhausted: Exhausted::DeadLetter,
        };
        let quorum = queue(QueueKind::Quorum, retry.clone());
        assert_eq!(
            decide(&quorum, 1, Failure::RETRYABLE, 0.0),
            Decision::Requeue { exhausted: false }
        );
        assert_eq!(
            decide(&quorum, 2, Failure::RETRYABLE, 0.0),
            Decision::DeadLetter {
                reason: FailureReason::Exhausted
            }
        );
        let classic = queue(QueueKind::Classic, retry);
        assert_eq!(
            decide(&classic, 0, Failure::RETRYABLE, 0.0),
            Decision::Retry {
                routing_key: "work".into(),
                retry_count: 1
            }
        );
    }

    /// A count of `u32::MAX` (a forged `x-retry-count: 4294967295`) overflowed `retries + 1` on
    /// the `exhausted: requeue` path: a panic in a debug build, and the delivery unsettled.
    #[test]
    fn counts_saturate() {
        let q = queue(QueueKind::Classic, backoff(Exhausted::Requeue));
        assert_eq!(
            decide(&q, u32::MAX, Failure::RETRYABLE, 0.0),
            Decision::Retry {
                routing_key: "work.wait.300ms".into(),
                retry_count: u32::MAX
            }
        );
        assert_eq!(
            decide(&q, u32::MAX, Failure::Internal, 0.0),
            Decision::DeadLetter {
                reason: FailureReason::InternalError
            }
        );
    }

    #[test]
    fn no_retry_mode_dead_letters_retryable_failures() {
        let q = queue(QueueKind::Quorum, Retry::None);
        assert_eq!(
            decide(&q, 0, Failure::RETRYABLE, 0.0),
            Decision::DeadLetter {
                reason: FailureReason::Exhausted
            }
        );
    }

    /// quorum-native: requeued until the delivery the limit allows last (`x-delivery-count`
    /// equal to the limit), which the worker dead-letters itself, with its context, before
    /// the broker would with only `x-death`.
    #[test]
    fn quorum_native_dead_letters_the_last_allowed_delivery() {
        let mut q = queue(QueueKind::Quorum, Retry::QuorumNative);
        q.delivery_limit = DeliveryLimit::Count(2);
        let outcomes: Vec<_> = (0..4)
            .map(|n| decide(&q, n, Failure::RETRYABLE, 0.0))
            .collect();
        let requeue = Decision::Requeue { exhausted: false };
        let dead = Decision::DeadLetter {
            reason: FailureReason::Exhausted,
        };
        assert_eq!(
            outcomes,
            [requeue.clone(), requeue.clone(), dead.clone(), dead]
        );
        // The derived limit (none set): 1, so the first redelivery is the last.
        q.delivery_limit = DeliveryLimit::Derived;
        assert_eq!(decide(&q, 0, Failure::RETRYABLE, 0.0), requeue);
        assert_eq!(
            decide(&q, 1, Failure::RETRYABLE, 0.0),
            Decision::DeadLetter {
                reason: FailureReason::Exhausted
            }
        );
        // Nowhere to dead-letter: no limit, requeued for good, never discarded.
        q.dead_letter = None;
        assert_eq!(decide(&q, u32::MAX, Failure::RETRYABLE, 0.0), requeue);
        // An explicit limit of "unlimited" is no limit either.
        let mut unlimited = queue(QueueKind::Quorum, Retry::QuorumNative);
        unlimited.delivery_limit = DeliveryLimit::Count(crate::model::QUORUM_UNLIMITED);
        assert_eq!(
            decide(&unlimited, u32::MAX, Failure::RETRYABLE, 0.0),
            requeue
        );
    }

    /// A topology whose tiers do not match its backoff (edited by hand; `Worker::run` refuses
    /// it, so this is defence in depth) has no wait queue for the delay a retry wants: it is
    /// dead-lettered as warren's own error, not retried on a schedule the contract did not
    /// ask for, and never discarded.
    #[test]
    fn a_missing_tier_is_an_internal_error() {
        let mut q = queue(QueueKind::Quorum, backoff(Exhausted::DeadLetter));
        if let Retry::TtlBackoff(backoff) = &mut q.retry {
            backoff.tiers.remove(1);
        }
        assert_eq!(
            decide(&q, 1, Failure::RETRYABLE, 0.0),
            Decision::DeadLetter {
                reason: FailureReason::InternalError
            }
        );
        // With nowhere to dead-letter, it goes back to the queue rather than being lost.
        q.dead_letter = None;
        assert_eq!(
            decide(&q, 1, Failure::RETRYABLE, 0.0),
            Decision::Requeue { exhausted: false }
        );
    }

    /// A handler's `retry_after` picks the ttl-backoff tier (the shortest at least that long,
    /// else the longest) and spends a retry like any other; a queue that cannot wait retries
    /// as it always does.
    #[test]
    fn a_delay_the_handler_asks_for_picks_the_wait_tier() {
        let after = |ms| Failure::Retryable {
            after: Some(Duration::from_millis(ms)),
        };
        let q = queue(QueueKind::Quorum, backoff(Exhausted::DeadLetter));
        let Retry::TtlBackoff(b) = &q.retry else {
            panic!("a backoff queue");
        };
        let names: Vec<String> = b.tiers.iter().map(|t| t.queue.clone()).collect();
        let retry = |routing_key: &str, retry_count| Decision::Retry {
            routing_key: routing_key.to_owned(),
            retry_count,
        };
        assert_eq!(decide(&q, 0, after(1), 0.0), retry(&names[0], 1));
        assert_eq!(
            decide(&q, 0, after(u64::MAX), 0.0),
            retry(names.last().unwrap(), 1)
        );
        let spent = b.max_retries;
        assert_eq!(
            decide(&q, spent, after(1), 0.0),
            Decision::DeadLetter {
                reason: FailureReason::Exhausted
            }
        );
        let requeue = queue(
            QueueKind::Quorum,
            Retry::ImmediateRequeue {
                max_retries: 2,
                exhausted: Exhausted::DeadLetter,
            },
        );
        assert_eq!(
            decide(&requeue, 0, after(5000), 0.0),
            decide(&requeue, 0, Failure::RETRYABLE, 0.0)
        );
    }
}
