//! The per-consumer circuit breaker: pause consuming during a downstream outage.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::observe::Observer;
use super::policy::Failure;
use crate::health::BreakerState;
use crate::model::CircuitBreaker;
use crate::sync::lock;

/// The breaker's state, shared by the consume loop and the delivery tasks that report to it.
pub(super) struct Breaker {
    settings: CircuitBreaker,
    consumer: &'static str,
    state: Mutex<State>,
    /// Told of every change of state (metrics, health).
    observer: std::sync::Arc<Observer>,
}

#[derive(Debug, Default)]
struct State {
    /// Retryable failures in a row.
    consecutive: u32,
    /// When the breaker is open: when the cool-down ends.
    open_until: Option<Instant>,
}

impl Breaker {
    pub(super) fn new(
        settings: CircuitBreaker,
        consumer: &'static str,
        observer: std::sync::Arc<Observer>,
    ) -> Self {
        Self {
            settings,
            consumer,
            observer,
            state: Mutex::new(State::default()),
        }
    }

    /// Counts one handled message (or batch): a success closes the breaker, a retryable
    /// failure counts towards opening it. Non-retryable failures and poison say nothing about
    /// the downstream and count neither way.
    pub(super) fn record(&self, outcome: Option<Failure>) {
        let mut state = lock(&self.state);
        match outcome {
            None => {
                if state.open_until.take().is_some() {
                    tracing::info!(
                        consumer = self.consumer,
                        "circuit breaker closed: a message was handled"
                    );
                    self.observer.breaker(BreakerState::Closed);
                }
                state.consecutive = 0;
            }
            Some(Failure::Retryable { .. }) => {
                state.consecutive = state.consecutive.saturating_add(1);
                if state.consecutive >= self.settings.failures.max(1) {
                    if state.open_until.is_none() {
                        tracing::warn!(
                            consumer = self.consumer,
                            failures = state.consecutive,
                            cool_down = ?self.settings.cool_down,
                            "circuit breaker open: consecutive retryable failures; consuming pauses"
                        );
                    }
                    // A failed probe (or a straggler failing) starts a new cool-down.
                    state.open_until =
                        Some(crate::connection::deadline_after(self.settings.cool_down));
                    self.observer.breaker(BreakerState::Open);
                }
            }
            Some(Failure::NonRetryable | Failure::Poison(_) | Failure::Internal) => {}
        }
    }

    /// When the breaker is open, the end of its cool-down.
    pub(super) fn open_until(&self) -> Option<Instant> {
        lock(&self.state).open_until
    }

    /// The cool-down ended and one probe is let through.
    pub(super) fn half_open(&self) {
        self.observer.breaker(BreakerState::HalfOpen);
    }

    /// The cool-down, for logs.
    pub(super) fn cool_down(&self) -> Duration {
        self.settings.cool_down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(failures: u32) -> Breaker {
        Breaker::new(
            CircuitBreaker {
                failures,
                cool_down: Duration::from_secs(60),
            },
            "test",
            std::sync::Arc::new(Observer::detached()),
        )
    }

    #[test]
    fn opens_after_consecutive_retryable_failures_and_closes_on_success() {
        let breaker = breaker(3);
        breaker.record(Some(Failure::RETRYABLE));
        breaker.record(Some(Failure::RETRYABLE));
        breaker.record(None);
        breaker.record(Some(Failure::RETRYABLE));
        breaker.record(Some(Failure::RETRYABLE));
        assert!(breaker.open_until().is_none(), "a success reset the count");
        breaker.record(Some(Failure::NonRetryable));
        assert!(
            breaker.open_until().is_none(),
            "non-retryable failures do not count"
        );
        breaker.record(Some(Failure::RETRYABLE));
        assert!(breaker.open_until().is_some());
        breaker.record(None);
        assert!(breaker.open_until().is_none());
    }
}
