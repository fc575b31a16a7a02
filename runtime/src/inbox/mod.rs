//! Effects exactly once: an inbox that makes redeliveries harmless (the `postgres` feature).
//!
//! Delivery is at-least-once: a handler that commits its database transaction and dies
//! before the ack sees the message again. An [`InboxConsumer`] runs the handler's writes in a
//! transaction in which it first records the message's key for that consumer; a key already
//! recorded means the effects are committed already, so the message is acknowledged without
//! running them again, and counted ([`metrics::INBOX_DUPLICATES`](crate::metrics::INBOX_DUPLICATES)).
//!
//! ```no_run
//! use warren_runtime::inbox::Inbox;
//! use warren_runtime::{Delivery, HandlerError};
//!
//! # async fn run(pool: sqlx::PgPool, delivery: Delivery<serde_json::Value>) -> Result<(), HandlerError> {
//! let inbox = Inbox::new(pool);
//! inbox.migrate().await?; // creates its table once
//! let fulfil = inbox.consumer("fulfil_order");
//! // In the handler: the effect runs at most once per message id, inside the transaction.
//! fulfil
//!     .once(&delivery, |tx| {
//!         Box::pin(async move {
//!             sqlx::query("INSERT INTO shipments (order_id) VALUES ($1)")
//!                 .bind("o-1")
//!                 .execute(&mut **tx)
//!                 .await?;
//!             Ok(())
//!         })
//!     })
//!     .await
//! # }
//! ```
//!
//! What it guarantees: the effects written through the transaction it hands the handler are
//! committed once per (consumer, key), however often the message is delivered, retried or
//! redelivered after a crash, as long as the key's row is kept ([`Inbox::retention`]). What it
//! does not: an effect outside that transaction (an email, an HTTP call) is still
//! at-least-once.
//!
//! The key is the message id (warren's publishers give every message a UUID v7 one, kept on
//! every retry copy), else the payload value at [`InboxConsumer::key_pointer`]. A message
//! with neither is refused as poison, with reason
//! [`Unidentified`](crate::model::FailureReason::Unidentified): dead-lettered (or dropped under
//! `on_poison: drop`), never handled.

mod postgres;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use metrics::Counter;
use serde::Serialize;
use serde_json::Value;
use sqlx::{PgPool, Postgres, Transaction};

use crate::model::FailureReason;
use crate::model::limits::MAX_SHORT_STRING;
use crate::{Delivery, HandlerError};
use postgres::Statements;

/// The inbox's table when none is named ([`Inbox::table`]).
pub const DEFAULT_TABLE: &str = "warren_inbox";
/// How long a recorded key is kept when no retention is set ([`Inbox::retention`]).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The transaction a handler's effects are written through.
pub type InboxTransaction = Transaction<'static, Postgres>;

/// The handler's work on the transaction: a closure returning its boxed future, since the
/// future borrows the transaction (`|tx| Box::pin(async move { … })`).
pub type Effect<'t> = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 't>>;

/// A table of the messages each consumer has handled, in a PostgreSQL database. Cheap to
/// clone: the pool and the statements are shared.
#[derive(Clone)]
pub struct Inbox {
    pool: PgPool,
    statements: Arc<Statements>,
    retention: Duration,
}

/// Why the inbox's own statements failed (its table, its pruning); a handler's failures
/// are [`HandlerError`]s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The table name is not a plain SQL identifier.
    #[error(
        "inbox table `{0}` is not a plain SQL identifier: use lowercase letters, digits and `_`, at most 63, starting with a letter or `_`"
    )]
    Table(String),
    /// The database refused or could not be reached.
    #[error("the inbox's database: {0}")]
    Database(#[from] sqlx::Error),
}

impl Inbox {
    /// An inbox in `pool`'s database, in table [`DEFAULT_TABLE`], keeping keys for
    /// [`DEFAULT_RETENTION`]. Warren never needs a pool of its own: pass the one the
    /// handlers use.
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            statements: Arc::new(Statements::on(DEFAULT_TABLE)),
            retention: DEFAULT_RETENTION,
        }
    }

    /// The table that holds the keys (created by [`Inbox::migrate`]); a plain identifier,
    /// since it is written into the statements.
    pub fn table(mut self, table: &str) -> Result<Self, InboxError> {
        if !postgres::is_identifier(table) {
            return Err(InboxError::Table(table.to_owned()));
        }
        self.statements = Arc::new(Statements::on(table));
        Ok(self)
    }

    /// How long a key is kept after its message was handled ([`Inbox::prune`] removes older
    /// ones). A message delivered again after that is handled again, so keep it longer than
    /// any redelivery can come: above the queue's whole retry schedule, and above how long a
    /// message may wait in a queue.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// Creates the table and its index when they do not exist (idempotent).
    pub async fn migrate(&self) -> Result<(), InboxError> {
        self.statements.migrate(&self.pool).await
    }

    /// Deletes the keys older than the retention; how many.
    pub async fn prune(&self) -> Result<u64, InboxError> {
        self.statements.prune(&self.pool, self.retention).await
    }

    /// Prunes every `period` until the returned handle is dropped, logging a failure and
    /// trying again at the next period.
    pub fn prune_every(&self, period: Duration) -> Pruning {
        let inbox = self.clone();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            loop {
                ticks.tick().await;
                match inbox.prune().await {
                    Ok(removed) => tracing::debug!(removed, "inbox pruned"),
                    Err(error) => tracing::warn!(%error, "inbox pruning failed; tried again later"),
                }
            }
        });
        Pruning(task)
    }

    /// The inbox of consumer `consumer` (its name in the contract): keys are recorded per
    /// consumer, so two consumers of one message each apply it once.
    pub fn consumer(&self, consumer: &str) -> InboxConsumer {
        InboxConsumer {
            inbox: self.clone(),
            consumer: consumer.into(),
            key_pointer: None,
            duplicates: metrics::counter!(
                crate::metrics::INBOX_DUPLICATES,
                crate::metrics::labels::CONSUMER => consumer.to_owned()
            ),
        }
    }
}

/// The pruning task of [`Inbox::prune_every`]; stops when dropped.
pub struct Pruning(tokio::task::JoinHandle<()>);

impl Drop for Pruning {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One consumer's inbox: runs its effects once per message ([`InboxConsumer::once`]).
#[derive(Clone)]
pub struct InboxConsumer {
    inbox: Inbox,
    consumer: Arc<str>,
    key_pointer: Option<String>,
    duplicates: Counter,
}

impl InboxConsumer {
    /// Where in the payload the key is when a message has no id (a JSON pointer such as
    /// `/order_id`): for producers that send none.
    pub fn key_pointer(mut self, pointer: &str) -> Self {
        self.key_pointer = Some(pointer.to_owned());
        self
    }

    /// Runs `effect` in a transaction in which this consumer's key for `delivery` is recorded
    /// first, and commits both; when the key was recorded already, commits nothing, runs
    /// nothing and returns `Ok`, so the message is acknowledged.
    ///
    /// `effect`'s error rolls everything back and is returned as it is, for the queue's
    /// retry policy. The database's own failures (unreachable, a refused commit) are
    /// retryable. A message without a key is refused as poison (reason `unidentified`).
    pub async fn once<P, H, F>(
        &self,
        delivery: &Delivery<P, H>,
        effect: F,
    ) -> Result<(), HandlerError>
    where
        P: Serialize,
        F: for<'t> FnOnce(&'t mut InboxTransaction) -> Effect<'t> + Send,
    {
        let key = self.key(delivery)?;
        let Inbox {
            pool, statements, ..
        } = &self.inbox;
        let mut tx = pool.begin().await?;
        if !statements.record(&mut tx, &self.consumer, &key).await? {
            // Committed before: its effects are in the database. Nothing to undo either.
            drop(tx);
            self.duplicates.increment(1);
            tracing::debug!(
                consumer = &*self.consumer,
                key,
                "already handled: acknowledged"
            );
            return Ok(());
        }
        effect(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The key `delivery` is recorded under: its message id, else the value at the key
    /// pointer (a string as it is, anything else as its JSON text), at most a short string
    /// long as a message id is.
    fn key<P: Serialize, H>(&self, delivery: &Delivery<P, H>) -> Result<String, HandlerError> {
        if let Some(id) = delivery.message_id().filter(|id| !id.is_empty()) {
            return Ok(id.to_owned());
        }
        let unidentified = |why: String| HandlerError::poison(FailureReason::Unidentified, why);
        let Some(pointer) = &self.key_pointer else {
            return Err(unidentified(format!(
                "consumer `{}` records each message by its id, and this one has none (or set a key pointer)",
                self.consumer
            )));
        };
        let payload = serde_json::to_value(delivery.payload())
            .map_err(|e| unidentified(format!("the payload cannot be read for its key: {e}")))?;
        let key = match payload.pointer(pointer) {
            None | Some(Value::Null) => {
                return Err(unidentified(format!(
                    "the message has no id and nothing at `{pointer}`, the key of consumer `{}`",
                    self.consumer
                )));
            }
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        if key.is_empty() || key.len() > MAX_SHORT_STRING {
            return Err(unidentified(format!(
                "the key at `{pointer}` is {} bytes long: a key is 1 to {MAX_SHORT_STRING}",
                key.len()
            )));
        }
        Ok(key)
    }
}
