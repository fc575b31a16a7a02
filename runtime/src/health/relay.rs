//! Health of an outbox relay (`warren_runtime::outbox`, the `postgres` and `sqlite`
//! features): what waits, how long the oldest has waited, and why the last row failed.

use serde::Serialize;

/// A snapshot of a relay's health: `outbox::RelayHandle::health`, and each relay a worker
/// runs, in [`super::WorkerHealth::relays`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RelayHealth {
    /// The outbox table.
    pub table: String,
    /// Rows not yet published, as last read (every second).
    pub pending: u64,
    /// How long the oldest of them has waited, in milliseconds (`None`: none waits).
    pub lag_ms: Option<u64>,
    /// Rows published since the relay started.
    pub published: u64,
    /// The last round's failure (the database's, or the last row's publish), cleared by a
    /// round in which everything claimed was published.
    pub last_error: Option<String>,
}
