//! Health of a worker and of a connection (`worker.rs`, `connection.rs`, each at its own
//! level: a worker's health reads its connections', never the other way): what a service serves its orchestrator (a
//! Kubernetes readiness and liveness probe, say), as plain values that serialize to JSON.
//!
//! ```no_run
//! # async fn run(connection: warren_runtime::Connection, topology: warren_runtime::Topology) -> Result<(), Box<dyn std::error::Error>> {
//! let worker = warren_runtime::Worker::new(connection, topology);
//! let health = worker.health_handle(); // before `run`, which takes the worker
//! tokio::spawn(async move {
//!     // In the service's /health handler:
//!     let snapshot = health.snapshot();
//!     let status = if snapshot.ready { 200 } else { 503 };
//!     let body = serde_json::to_string(&snapshot);
//! #   let _ = (status, body);
//! });
//! worker.run().await?;
//! # Ok(()) }
//! ```

mod connection;
mod relay;
mod worker;

use std::time::SystemTime;

use chrono::{DateTime, Utc};
use serde::Serialize;

pub use connection::ConnectionHealth;
pub(crate) use connection::LinkRecord;
pub use relay::RelayHealth;
pub use worker::{
    BreakerState, ConsumerHealth, HealthHandle, OverdueRetries, WorkerHealth, WorkerPhase,
};
pub(crate) use worker::{ConsumerState, WorkerState};

/// Longest error message kept in a [`LastError`], in bytes.
pub const MAX_HEALTH_ERROR_BYTES: usize = 1024;

/// The last error seen, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastError {
    /// What went wrong, cut to [`MAX_HEALTH_ERROR_BYTES`].
    pub message: String,
    /// When (RFC 3339 in JSON).
    pub at: DateTime<Utc>,
}

impl LastError {
    /// `message`, cut to its bound, at the current time.
    pub(crate) fn now(message: &str) -> Self {
        Self {
            message: crate::text::truncate(message, MAX_HEALTH_ERROR_BYTES),
            at: DateTime::<Utc>::from(SystemTime::now()),
        }
    }
}
