//! Effects exactly once: an inbox that makes redeliveries harmless (the `postgres` and
//! `sqlite` features).
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

mod handler;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use metrics::Counter;
use serde::Serialize;
use serde_json::Value;
use sqlx::{Pool, Transaction};

use crate::database::{Backend, BadTableName, Bind, InboxSql, TableName, millis};
use crate::model::FailureReason;
use crate::model::limits::MAX_SHORT_STRING;
use crate::{Delivery, HandlerError};

pub use handler::{InboxBatchHandler, InboxHandler, add_inbox, add_inbox_batch};

/// The inbox's table when none is named ([`Inbox::table`]).
pub const DEFAULT_TABLE: &str = "warren_inbox";
/// How long a recorded key is kept when no retention is set ([`Inbox::retention`]).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The transaction a handler's effects are written through.
pub type InboxTransaction<DB> = Transaction<'static, DB>;

/// The handler's work on the transaction: a closure returning its boxed future, since the
/// future borrows the transaction (`|tx| Box::pin(async move { … })`).
pub type Effect<'t> = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 't>>;

/// A table of the messages each consumer has handled, in a PostgreSQL or SQLite database
/// (`DB`: `sqlx::Postgres` or `sqlx::Sqlite`). Cheap to clone: the pool and the statements
/// are shared.
pub struct Inbox<DB: Backend> {
    pool: Pool<DB>,
    statements: Arc<InboxSql>,
    retention: Duration,
}

impl<DB: Backend> Clone for Inbox<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            statements: self.statements.clone(),
            retention: self.retention,
        }
    }
}

/// Why the inbox's own statements failed (its table, its pruning); a handler's failures
/// are [`HandlerError`]s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The table name is not a plain SQL identifier.
    #[error("inbox {0}")]
    Table(#[from] BadTableName),
    /// The database refused or could not be reached.
    #[error("the inbox's database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Whether a message's key was recorded by [`InboxConsumer::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Recorded now: its effects are to be written in the same transaction.
    New,
    /// Recorded by an earlier transaction that committed: its effects are in the database.
    Before,
}

impl<DB: Backend> Inbox<DB> {
    /// An inbox in `pool`'s database, in table [`DEFAULT_TABLE`], keeping keys for
    /// [`DEFAULT_RETENTION`]. Warren never needs a pool of its own: pass the one the
    /// handlers use.
    pub fn new(pool: Pool<DB>) -> Self {
        let table = TableName::new(DEFAULT_TABLE).expect("the default table name is plain");
        Self {
            pool,
            statements: Arc::new(DB::inbox_sql(&table)),
            retention: DEFAULT_RETENTION,
        }
    }

    /// The table that holds the keys (created by [`Inbox::migrate`]); a plain identifier,
    /// since it is written into the statements.
    pub fn table(mut self, table: &str) -> Result<Self, InboxError> {
        self.statements = Arc::new(DB::inbox_sql(&TableName::new(table)?));
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
        crate::database::migrate(&self.pool, &self.statements.migrate).await?;
        Ok(())
    }

    /// Deletes the keys older than the retention; how many.
    pub async fn prune(&self) -> Result<u64, InboxError> {
        let mut connection = self.pool.acquire().await?;
        let retention = [Bind::Int(millis(self.retention))];
        Ok(DB::execute(&mut *connection, &self.statements.prune, &retention).await?)
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
    pub fn consumer(&self, consumer: &str) -> InboxConsumer<DB> {
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
pub struct InboxConsumer<DB: Backend> {
    inbox: Inbox<DB>,
    consumer: Arc<str>,
    key_pointer: Option<String>,
    duplicates: Counter,
}

impl<DB: Backend> Clone for InboxConsumer<DB> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            consumer: self.consumer.clone(),
            key_pointer: self.key_pointer.clone(),
            duplicates: self.duplicates.clone(),
        }
    }
}

impl<DB: Backend> InboxConsumer<DB> {
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
        F: for<'t> FnOnce(&'t mut InboxTransaction<DB>) -> Effect<'t> + Send,
    {
        let mut tx = self.begin().await?;
        if self.record(&mut tx, delivery).await? == Recorded::Before {
            // Committed before: its effects are in the database. Nothing to undo either.
            return Ok(());
        }
        effect(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records this consumer's key for `delivery` in `transaction`, one the caller holds and
    /// commits: [`Recorded::New`] when its effects are to be written there too,
    /// [`Recorded::Before`] (counted as a duplicate) when an earlier transaction committed
    /// them. For handlers that run their own transactions; [`InboxConsumer::once`] opens one.
    ///
    /// On PostgreSQL a concurrent transaction recording the same key makes this wait for its
    /// outcome: `Before` once it commits, `New` if it rolls back.
    pub async fn record<P: Serialize, H>(
        &self,
        transaction: &mut DB::Connection,
        delivery: &Delivery<P, H>,
    ) -> Result<Recorded, HandlerError> {
        let key = self.key(delivery)?;
        let binds = [Bind::Text(&self.consumer), Bind::Text(&key)];
        let inserted = DB::execute(transaction, &self.inbox.statements.record, &binds).await?;
        if inserted == 1 {
            return Ok(Recorded::New);
        }
        self.duplicates.increment(1);
        tracing::debug!(
            consumer = &*self.consumer,
            key,
            "already handled: acknowledged"
        );
        Ok(Recorded::Before)
    }

    /// A transaction on the inbox's pool.
    async fn begin(&self) -> Result<InboxTransaction<DB>, sqlx::Error> {
        self.inbox.pool.begin().await
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
