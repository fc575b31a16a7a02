//! What happens to a delivery that failed: the queue's retry policy applied to one failure.
//! Pure decisions, so the model is testable without a broker.

use crate::reason;
use crate::topology::{Exhausted, OnPoison, QueueKind, Retry};

/// A queue as the worker needs to know it.
#[derive(Debug, Clone)]
pub(crate) struct QueueInfo {
    /// Its (namespaced) name.
    pub name: String,
    pub kind: QueueKind,
    pub retry: Retry,
    pub on_poison: OnPoison,
    /// Where dead letters go: `dead_letter`, or raw `x-dead-letter-*` arguments.
    pub dead_letter: Option<(String, Option<String>)>,
}

impl QueueInfo {
    /// Dead-lettering for `reason`: to the dead-letter exchange, or, with none, discarded.
    pub fn dead_letter_outcome(&self, reason: &'static str) -> Outcome {
        if self.dead_letter.is_some() {
            Outcome::DeadLetter { reason }
        } else {
            Outcome::Discard { reason }
        }
    }

    /// Whether the broker counts deliveries for this queue's retries (`x-delivery-count`),
    /// rather than warren (`x-retry-count` on republished copies).
    pub fn broker_counts(&self) -> bool {
        matches!(
            (&self.retry, self.kind),
            (Retry::QuorumNative { .. }, _) | (Retry::ImmediateRequeue { .. }, QueueKind::Quorum)
        )
    }
}

/// Why a delivery failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// It could not be decoded or validated (`reason` names how); never retried.
    Poison(&'static str),
    /// The handler said it can never succeed.
    NonRetryable,
    /// The handler failed (or panicked) and it may succeed later.
    Retryable,
    /// Warren itself panicked while decoding or settling the delivery: a bug, most likely
    /// repeated on every attempt, so the message is dead-lettered (`internal-error`) whatever
    /// `on_poison` says, for someone to look at.
    Internal,
}

/// What to do with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
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
    DeadLetter { reason: &'static str },
    /// Ack and discard, with a log line: the contract says so.
    Drop { reason: &'static str },
    /// No dead-letter exchange: `basic.nack(requeue=false)`, and the body is gone.
    Discard { reason: &'static str },
}

/// Applies `queue`'s policy to a `failure` after `retries` earlier retries. `jitter` is a
/// number in `[0, 1)` (random in production).
pub(crate) fn decide(queue: &QueueInfo, retries: u32, failure: Failure, jitter: f64) -> Outcome {
    let dead_letter = |reason| queue.dead_letter_outcome(reason);
    let exhausted = |policy: Exhausted| match policy {
        Exhausted::DeadLetter => dead_letter(reason::EXHAUSTED),
        Exhausted::Drop => Outcome::Drop {
            reason: reason::EXHAUSTED,
        },
        Exhausted::Requeue => Outcome::Requeue { exhausted: true },
    };
    match failure {
        Failure::Poison(reason) => match queue.on_poison {
            OnPoison::Drop => Outcome::Drop { reason },
            OnPoison::DeadLetter => dead_letter(reason),
        },
        Failure::NonRetryable => dead_letter(reason::NON_RETRYABLE),
        Failure::Internal => dead_letter(reason::INTERNAL_ERROR),
        Failure::Retryable => match &queue.retry {
            // No retries: the budget of zero is spent at once.
            Retry::None => dead_letter(reason::EXHAUSTED),
            Retry::ImmediateRequeue {
                max_retries,
                exhausted: when_spent,
            } => {
                if retries >= *max_retries {
                    exhausted(*when_spent)
                } else if queue.kind == QueueKind::Quorum {
                    Outcome::Requeue { exhausted: false }
                } else {
                    Outcome::Retry {
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
                        return Outcome::Retry {
                            routing_key: longest.queue.clone(),
                            retry_count: retries.saturating_add(1),
                        };
                    }
                    return exhausted(backoff.exhausted);
                }
                let Some(tier) = backoff.tier(retries, jitter) else {
                    return exhausted(backoff.exhausted);
                };
                Outcome::Retry {
                    routing_key: tier.queue.clone(),
                    retry_count: retries.saturating_add(1),
                }
            }
            Retry::QuorumNative { .. } => Outcome::Requeue { exhausted: false },
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Failure, Outcome, QueueInfo, decide};
    use crate::topology::{Backoff, Exhausted, OnPoison, QueueKind, Retry, WaitTier};

    fn queue(kind: QueueKind, retry: Retry) -> QueueInfo {
        QueueInfo {
            name: "work".into(),
            kind,
            retry,
            on_poison: OnPoison::DeadLetter,
            dead_letter: Some(("dlx".into(), None)),
        }
    }

    fn backoff(exhausted: Exhausted) -> Retry {
        let ms = Duration::from_millis;
        Retry::TtlBackoff(Backoff {
            max_retries: 3,
            initial_delay: ms(100),
            max_delay: ms(300),
            multiplier: 2.0,
            jitter: false,
            exhausted,
            tiers: vec![
                WaitTier {
                    queue: "work.wait.100ms".into(),
                    delay: ms(100),
                },
                WaitTier {
                    queue: "work.wait.200ms".into(),
                    delay: ms(200),
                },
                WaitTier {
                    queue: "work.wait.300ms".into(),
                    delay: ms(300),
                },
            ],
        })
    }

    #[test]
    fn poison_and_non_retryable_are_never_retried() {
        let q = queue(QueueKind::Quorum, backoff(Exhausted::DeadLetter));
        assert_eq!(
            decide(&q, 0, Failure::Poison("validation"), 0.0),
            Outcome::DeadLetter {
                reason: "validation"
            }
        );
        assert_eq!(
            decide(&q, 0, Failure::NonRetryable, 0.0),
            Outcome::DeadLetter {
                reason: "non-retryable"
            }
        );
        let mut dropping = q.clone();
        dropping.on_poison = OnPoison::Drop;
        assert_eq!(
            decide(&dropping, 0, Failure::Poison("decode"), 0.0),
            Outcome::Drop { reason: "decode" }
        );
        let mut no_dlx = q;
        no_dlx.dead_letter = None;
        assert_eq!(
            decide(&no_dlx, 0, Failure::NonRetryable, 0.0),
            Outcome::Discard {
                reason: "non-retryable"
            }
        );
    }

    #[test]
    fn ttl_backoff_walks_the_tiers_then_applies_exhausted() {
        let q = queue(QueueKind::Quorum, backoff(Exhausted::Drop));
        let tiers: Vec<_> = (0..3)
            .map(|n| match decide(&q, n, Failure::Retryable, 0.0) {
                Outcome::Retry {
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
            decide(&q, 3, Failure::Retryable, 0.0),
            Outcome::Drop {
                reason: "exhausted"
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
            decide(&quorum, 1, Failure::Retryable, 0.0),
            Outcome::Requeue { exhausted: false }
        );
        assert_eq!(
            decide(&quorum, 2, Failure::Retryable, 0.0),
            Outcome::DeadLetter {
                reason: "exhausted"
            }
        );
        let classic = queue(QueueKind::Classic, retry);
        assert_eq!(
            decide(&classic, 0, Failure::Retryable, 0.0),
            Outcome::Retry {
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
            decide(&q, u32::MAX, Failure::Retryable, 0.0),
            Outcome::Retry {
                routing_key: "work.wait.300ms".into(),
                retry_count: u32::MAX
            }
        );
        assert_eq!(
            decide(&q, u32::MAX, Failure::Internal, 0.0),
            Outcome::DeadLetter {
                reason: "internal-error"
            }
        );
    }

    #[test]
    fn no_retry_mode_dead_letters_retryable_failures() {
        let q = queue(QueueKind::Quorum, Retry::None);
        assert_eq!(
            decide(&q, 0, Failure::Retryable, 0.0),
            Outcome::DeadLetter {
                reason: "exhausted"
            }
        );
    }

    #[test]
    fn jitter_picks_a_bucket_wait_queue() {
        let ms = Duration::from_millis;
        let backoff = Backoff {
            max_retries: 1,
            initial_delay: ms(1200),
            max_delay: ms(1200),
            multiplier: 2.0,
            jitter: true,
            exhausted: Exhausted::DeadLetter,
            tiers: [600, 800, 1000, 1200]
                .map(|d| WaitTier {
                    queue: format!("work.wait.{d}ms"),
                    delay: ms(d),
                })
                .to_vec(),
        };
        let picked: Vec<u64> = [0.0, 0.3, 0.6, 0.99]
            .map(|r| backoff.tier(0, r).unwrap().delay.as_millis() as u64)
            .to_vec();
        assert_eq!(picked, [1200, 1000, 800, 600]);
    }
}
