//! The right to start one unit of work, held until the work is settled.

use tokio::sync::{OwnedSemaphorePermit, oneshot};

/// The right to start one unit of work (a delivery, or a batch): a concurrency permit, and
/// while the breaker probes, the token whose drop tells the loop the probe is done. Hold it
/// until the work is settled (the runner hands it out, the delivery's acks keep it).
pub(super) struct Work {
    _permit: OwnedSemaphorePermit,
    _probe: Option<oneshot::Sender<()>>,
}

impl Work {
    /// Holding `permit`, and `probe` while the breaker probes.
    pub(super) fn new(permit: OwnedSemaphorePermit, probe: Option<oneshot::Sender<()>>) -> Self {
        Self {
            _permit: permit,
            _probe: probe,
        }
    }

    /// Whether this is the breaker's probe: the loop waits for its outcome, so it is held
    /// until the work is settled, even while the work waits its turn.
    pub(super) fn probes(&self) -> bool {
        self._probe.is_some()
    }
}
