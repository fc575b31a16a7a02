//! What a consumer reports about itself as it runs: its metrics (`crate::metrics`) and its
//! health (`crate::health`), behind one handle so the consume loop, the settler and the
//! breaker each make one call per event.

use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;

use crate::health::{BreakerState, ConsumerState};
use crate::metrics::{ConsumerMetrics, InFlight, Outcome};
use crate::model::FailureReason;
use crate::publish_time::Trust;

/// One consumer's metrics and health.
pub(crate) struct Observer {
    metrics: ConsumerMetrics,
    health: Arc<ConsumerState>,
    /// Whose publish times the end-to-end latency believes.
    pub trust: Trust,
}

impl Observer {
    pub(super) fn new(metrics: ConsumerMetrics, health: Arc<ConsumerState>, trust: Trust) -> Self {
        Self {
            metrics,
            health,
            trust,
        }
    }

    /// An observer of a consumer that is not part of a worker, for unit tests.
    #[cfg(test)]
    pub(super) fn detached() -> Self {
        let queue = crate::model::Queue::new("test", crate::model::QueueKind::Classic);
        Self::new(
            ConsumerMetrics::new("test", &queue, true),
            Arc::new(ConsumerState::new("test", queue.name.clone(), true)),
            Trust::default(),
        )
    }

    /// A delivery arrived.
    pub(super) fn consumed(&self) {
        self.metrics.consumed();
    }

    /// A delivery was settled with `outcome` (dead letters: [`Observer::dead_lettered`]).
    pub(super) fn handled(&self, outcome: Outcome) {
        self.metrics.handled(outcome);
        if outcome == Outcome::Retry {
            self.health.retried();
        }
    }

    /// A delivery was dead-lettered for `reason`.
    pub(super) fn dead_lettered(&self, reason: FailureReason) {
        self.metrics.dead_lettered(reason);
    }

    /// A handler starts on a delivery with `properties`: its end-to-end latency is recorded
    /// when its publish time is believed.
    pub(super) fn handler_started(&self, properties: &BasicProperties) {
        if self.trust.believes(properties) {
            self.metrics.handler_started(properties);
        }
    }

    /// A handler ran for `elapsed`.
    pub(super) fn handler_ran(&self, elapsed: Duration) {
        self.metrics.handler_duration(elapsed);
    }

    /// `n` deliveries in flight until the guard drops.
    pub(super) fn in_flight(&self, n: usize) -> InFlight {
        self.metrics.in_flight(n)
    }

    /// The consumer is subscribed.
    pub(super) fn subscribed(&self) {
        self.health.subscribed();
    }

    /// The consumer lost its subscription (`why`), or gave it up (`None`).
    pub(super) fn unsubscribed(&self, why: Option<&str>) {
        self.health.unsubscribed(why);
    }

    /// Subscribing failed for `why`.
    pub(super) fn error(&self, why: &str) {
        self.health.error(why);
    }

    /// The circuit breaker moved to `state`.
    pub(super) fn breaker(&self, state: BreakerState) {
        self.metrics.breaker(state.gauge());
        self.health.breaker(state);
    }
}
