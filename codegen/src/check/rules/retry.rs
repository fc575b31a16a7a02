//! Retry: the settings of a queue's `retry` and how they fit its queue type.

use super::{Checker, entry, has_dead_letter_exchange};
use crate::diagnostics::{Code, YamlPath};
use crate::syntax::{Exhausted, Queue, QueueKind, Retry, RetryMode};
use warren_model::{DeliveryLimit, MIN_MULTIPLIER};

impl Checker<'_> {
    /// The queue's `retry`, checked in steps; `path` is the queue's.
    pub(super) fn retry_rules(&mut self, name: &str, queue: &Queue, path: &YamlPath) {
        let Some(retry) = &queue.retry else { return };
        let path = path.key("retry");
        let mode = retry.mode.unwrap_or_default();
        self.backoff_fields_need_backoff(retry, mode, &path);
        self.retry_mode_fits_queue(name, queue, retry, mode, &path);
        if mode == RetryMode::ImmediateRequeue {
            self.delivery_limit_above_retries(name, queue, retry);
        }
        if mode == RetryMode::TtlBackoff {
            self.backoff_delays(retry, &path);
        }
        self.exhausted(name, queue, retry, mode, &path);
        self.counts_from(name, queue, retry, mode, &path);
    }

    /// `counts_from`: only where warren counts retries in a header, each naming an exchange
    /// and a header, and none an exchange the contract's own publishers send to (a
    /// producer's count would be believed).
    fn counts_from(
        &mut self,
        name: &str,
        queue: &Queue,
        retry: &Retry,
        mode: RetryMode,
        path: &YamlPath,
    ) {
        if retry.counts_from.is_empty() {
            return;
        }
        let kind = queue.kind.unwrap_or_default();
        let counted_by_broker = crate::contract::retry_policy(name, queue).counted_by_broker(kind);
        if mode == RetryMode::None || counted_by_broker {
            let help = if mode == RetryMode::None {
                "remove `counts_from`: nothing is retried"
            } else {
                "remove `counts_from`: the broker's `x-delivery-count` is one count for every worker on the queue already"
            };
            self.error(
                Code::BadRetry,
                &path.key("counts_from"),
                format!("queue `{name}` counts no retries in a header (`{}` on a {} queue), so `counts_from` has nothing to believe", mode.as_str(), kind.as_str()),
                help,
            );
            return;
        }
        for (i, source) in retry.counts_from.iter().enumerate() {
            let at = path.key("counts_from").index(i);
            if source.exchange.is_empty() {
                self.error(
                    Code::BadRetry,
                    &at.key("exchange"),
                    "the default exchange is how warren's own retry copies come, and its counts are believed already".to_owned(),
                    "name the exchange the other stack's retry copies come through (amqp-contract 2.4: its `retry-exchange`)",
                );
            }
            if source.header.as_deref().is_some_and(str::is_empty) {
                self.error(
                    Code::BadRetry,
                    &at.key("header"),
                    "an empty header name holds no count".to_owned(),
                    "name the header, or leave it out for `x-retry-count`",
                );
            }
            let publisher = (self.file.publishers.iter())
                .find(|(_, p)| p.exchange == source.exchange)
                .map(|(publisher, _)| publisher.as_str());
            if let Some(publisher) = publisher {
                self.error(
                    Code::BadRetry,
                    &at.key("exchange"),
                    format!("publisher `{publisher}` sends to `{}`, so a count a producer writes on its messages would be believed", source.exchange),
                    "name only the exchange the other stack's retry copies alone come through",
                );
            }
        }
    }

    /// Delays, multiplier and jitter belong to `ttl-backoff` alone.
    fn backoff_fields_need_backoff(&mut self, retry: &Retry, mode: RetryMode, path: &YamlPath) {
        let backoff_fields = [
            ("initial_delay", retry.initial_delay.is_some()),
            ("max_delay", retry.max_delay.is_some()),
            ("multiplier", retry.multiplier.is_some()),
            ("jitter", retry.jitter.is_some()),
        ];
        let mode_name = mode.as_str();
        if mode != RetryMode::TtlBackoff {
            for (field, set) in backoff_fields {
                if set {
                    self.error(
                        Code::BadRetry,
                        &path.key(field),
                        format!("`{field}` only applies to `mode: ttl-backoff`, and this queue uses `{mode_name}`"),
                        format!("remove `{field}`, or set `mode: ttl-backoff`"),
                    );
                }
            }
        }
    }

    /// What each mode asks of its queue and of `max_retries`.
    fn retry_mode_fits_queue(
        &mut self,
        name: &str,
        queue: &Queue,
        retry: &Retry,
        mode: RetryMode,
        path: &YamlPath,
    ) {
        let kind = queue.kind.unwrap_or_default();
        match mode {
            RetryMode::None => {
                if retry.max_retries.is_some() || retry.exhausted.is_some() {
                    self.warn(
                        Code::RetryIgnored,
                        path,
                        "retry settings are ignored with `mode: none` (the default)".to_owned(),
                        "set a `mode`, or remove the other retry settings",
                    );
                }
            }
            RetryMode::QuorumNative => {
                if kind != QueueKind::Quorum {
                    let kind_name = kind.as_str();
                    self.error(
                        Code::BadRetry,
                        &path.key("mode"),
                        format!("`quorum-native` retries need a quorum queue, and `{name}` is a {kind_name} queue"),
                        "use `immediate-requeue` or `ttl-backoff`, or make the queue `type: quorum`",
                    );
                } else if !matches!(queue.delivery_limit, Some(DeliveryLimit::Count(_))) {
                    self.error(
                        Code::BadRetry,
                        &path.key("mode"),
                        format!("`quorum-native` retries count against the queue's `delivery_limit`, and `{name}` gives no number"),
                        "set `delivery_limit` on the queue to a number (N allows N+1 deliveries)",
                    );
                }
                if retry.max_retries.is_some() {
                    self.error(
                        Code::BadRetry,
                        &path.key("max_retries"),
                        "`quorum-native` retries are bounded by the queue's `delivery_limit`, not `max_retries`".to_owned(),
                        "remove `max_retries` and set `delivery_limit` on the queue",
                    );
                }
            }
            RetryMode::ImmediateRequeue | RetryMode::TtlBackoff => {
                if retry.max_retries == Some(0) {
                    self.error(
                        Code::BadRetry,
                        &path.key("max_retries"),
                        "`max_retries` must be at least 1".to_owned(),
                        "to never retry, use `mode: none`",
                    );
                }
            }
        }
    }

    /// On a quorum queue, `immediate-requeue` retries must be spent before the broker's own
    /// delivery limit dead-letters the message.
    fn delivery_limit_above_retries(&mut self, name: &str, queue: &Queue, retry: &Retry) {
        if queue.kind.unwrap_or_default() == QueueKind::Quorum {
            let retries = retry
                .max_retries
                .unwrap_or(crate::contract::DEFAULT_MAX_RETRIES);
            if let Some(DeliveryLimit::Count(limit)) = queue.delivery_limit
                && limit <= retries
            {
                self.error(
                    Code::BadRetry,
                    &entry("queues", name).key("delivery_limit"),
                    format!("`delivery_limit: {limit}` lets the broker dead-letter before the {retries} retries are spent, without failure context"),
                    format!("set `delivery_limit` above `max_retries` (at least {}), or remove it", retries.saturating_add(1)),
                );
            }
        }
    }

    /// `ttl-backoff` delays: above zero, growing, never shrinking.
    fn backoff_delays(&mut self, retry: &Retry, path: &YamlPath) {
        let initial = retry
            .initial_delay
            .unwrap_or(crate::contract::DEFAULT_INITIAL_DELAY);
        let max = retry
            .max_delay
            .unwrap_or(crate::contract::DEFAULT_MAX_DELAY);
        for (field, value) in [("initial_delay", initial), ("max_delay", max)] {
            if value.as_millis() == 0 {
                self.error(
                    Code::BadRetry,
                    &path.key(field),
                    format!("`{field}` must be longer than 0"),
                    "use `immediate-requeue` for retries without delay",
                );
            }
        }
        if max < initial {
            self.error(
                Code::BadRetry,
                &path.key("max_delay"),
                format!("`max_delay` ({max}) is shorter than `initial_delay` ({initial})"),
                format!("raise `max_delay` to at least {initial}, or lower `initial_delay`"),
            );
        }
        if let Some(multiplier) = retry.multiplier {
            if !multiplier.is_finite() || multiplier < 1.0 {
                self.error(
                    Code::BadRetry,
                    &path.key("multiplier"),
                    format!(
                        "`multiplier` must be at least 1 (got {multiplier}); delays never shrink"
                    ),
                    "use 1 for a constant delay, 2 to double it each time",
                );
            } else if multiplier > 1.0 && multiplier < MIN_MULTIPLIER {
                self.error(
                    Code::BadRetry,
                    &path.key("multiplier"),
                    format!(
                        "`multiplier` {multiplier} grows a delay by less than 1% per retry; it \
                         must be 1 (a constant delay) or at least {MIN_MULTIPLIER}"
                    ),
                    "use 1 for a constant delay, 1.5 or 2 for a growing one",
                );
            }
        }
    }

    /// What happens once retries are spent: forever requeued, or dead-lettered to nowhere.
    fn exhausted(
        &mut self,
        name: &str,
        queue: &Queue,
        retry: &Retry,
        mode: RetryMode,
        path: &YamlPath,
    ) {
        if retry.exhausted == Some(Exhausted::Requeue) {
            self.warn(
                Code::ExhaustedRequeue,
                &path.key("exhausted"),
                "`exhausted: requeue` returns a message that keeps failing to the queue forever"
                    .to_owned(),
                "use `dead-letter` (the default) unless the failures are known to be temporary",
            );
        }
        let dead_letters = retry.exhausted.unwrap_or_default() == Exhausted::DeadLetter;
        if mode != RetryMode::None && dead_letters && !has_dead_letter_exchange(queue) {
            self.error(
                Code::ExhaustedWithoutDlx,
                &path.key("exhausted"),
                format!("queue `{name}` dead-letters exhausted messages but has no dead-letter exchange, so they would be lost"),
                "set `dead_letter` on the queue, or `exhausted: drop` to discard them knowingly",
            );
        }
    }
}
