//! Effects exactly once, publishing half: an outbox that makes a publish part of the
//! caller's database transaction (the `postgres` and `sqlite` features).
//!
//! Committing and then publishing loses the event when the process dies in between;
//! publishing and then committing announces what may never happen. Through an
//! [`OutboxWriter`] the generated publishers write the message into a table in the caller's
//! transaction instead: validated exactly as a publish is, stored only if the transaction
//! commits. A [`Relay`] publishes the stored rows with confirms and marks them sent.
//!
//! ```no_run
//! # async fn run(pool: sqlx::PgPool, topology: warren_runtime::Topology, publisher: warren_runtime::Publisher) -> Result<(), Box<dyn std::error::Error>> {
//! use warren_runtime::outbox::Outbox;
//! let outbox = Outbox::new(pool.clone(), &topology);
//! outbox.migrate().await?; // creates its table once
//! let relay = outbox.relay(publisher).spawn(); // publishes what commits
//!
//! let mut tx = pool.begin().await?;
//! sqlx::query("INSERT INTO orders (id) VALUES ('o-1')").execute(&mut *tx).await?;
//! // With the generated publishers: `publishers.through(outbox.writer(&mut tx)).place_order(…)`.
//! # let _ = &relay;
//! tx.commit().await?; // the order and its event, or neither
//! # Ok(()) }
//! ```
//!
//! What it guarantees: every committed message is published (at least once: a relay that
//! dies after a publish and before marking it sent publishes it again, under the same
//! message id, which an inbox downstream deduplicates); messages of one ordering key
//! (`ordering_key` in the contract) are published in the order they were written. Several
//! relays may share a table: each row is claimed by one of them at a time.

mod relay;

use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use serde_json::Value;
use sqlx::Pool;
use tokio::sync::Mutex;
use tracing::Instrument as _;

use crate::database::{Backend, BadTableName, Bind, OutboxSql, TableName, millis};
use crate::model::limits::MAX_SHORT_STRING;
use crate::model::{Namespace, Publication};
use crate::publisher::{Prepared, prepared};
use crate::sink::{Sink, sealed};
use crate::{Message, PublishError, PublishOptions, Publisher, Topology};

pub use crate::health::RelayHealth;
pub use relay::{DEFAULT_BATCH, DEFAULT_LEASE, DEFAULT_POLL_INTERVAL, Relay, RelayHandle, Relayed};

/// The outbox's table when none is named ([`Outbox::table`]).
pub const DEFAULT_TABLE: &str = "warren_outbox";
/// How long a sent row is kept when no retention is set ([`Outbox::retention`]).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// A table of messages to publish, in a PostgreSQL or SQLite database (`DB`:
/// `sqlx::Postgres` or `sqlx::Sqlite`). Cheap to clone: the pool and the statements are
/// shared.
pub struct Outbox<DB: Backend> {
    pool: Pool<DB>,
    table: TableName,
    statements: Arc<OutboxSql>,
    namespace: Arc<Namespace>,
    retention: Duration,
}

impl<DB: Backend> Clone for Outbox<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            table: self.table.clone(),
            statements: self.statements.clone(),
            namespace: self.namespace.clone(),
            retention: self.retention,
        }
    }
}

impl<DB: Backend> std::fmt::Debug for Outbox<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("table", &self.table)
            .field("namespace", &self.namespace)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

/// Why the outbox's own statements failed (its table, relaying, pruning).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// The table name is not a plain SQL identifier.
    #[error("outbox {0}")]
    Table(#[from] BadTableName),
    /// The database refused or could not be reached.
    #[error("the outbox's database: {0}")]
    Database(#[from] sqlx::Error),
}

impl<DB: Backend> Outbox<DB> {
    /// An outbox in `pool`'s database, in table [`DEFAULT_TABLE`], for the exchanges of
    /// `topology` (with its namespace, as a [`Publisher`] on it has), keeping sent rows for
    /// [`DEFAULT_RETENTION`]. Warren never needs a pool of its own: pass the one the caller's
    /// transactions come from.
    pub fn new(pool: Pool<DB>, topology: &Topology) -> Self {
        let table = TableName::new(DEFAULT_TABLE).expect("the default table name is plain");
        Self {
            pool,
            statements: Arc::new(DB::outbox_sql(&table)),
            table,
            namespace: Arc::new(topology.namespace().clone()),
            retention: DEFAULT_RETENTION,
        }
    }

    /// The table that holds the messages (created by [`Outbox::migrate`]); a plain
    /// identifier, since it is written into the statements.
    pub fn table(mut self, table: &str) -> Result<Self, OutboxError> {
        self.table = TableName::new(table)?;
        self.statements = Arc::new(DB::outbox_sql(&self.table));
        Ok(self)
    }

    /// How long a row is kept after it was sent ([`Outbox::prune`] removes older ones), to
    /// answer "was it published, and when?".
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// Creates the table and its indexes when they do not exist (idempotent).
    pub async fn migrate(&self) -> Result<(), OutboxError> {
        crate::database::migrate(&self.pool, &self.statements.migrate).await?;
        Ok(())
    }

    /// A sink for the generated publishers that writes into `transaction`, one the caller
    /// holds and commits (`publishers.through(outbox.writer(&mut tx))`): what it writes is
    /// published once the transaction commits, and never if it rolls back.
    pub fn writer<'t>(&self, transaction: &'t mut DB::Connection) -> OutboxWriter<'t, DB> {
        OutboxWriter {
            connection: Mutex::new(transaction),
            statements: self.statements.clone(),
            namespace: self.namespace.clone(),
        }
    }

    /// A relay that publishes this outbox's rows through `publisher`; [`Relay::spawn`] runs it.
    pub fn relay(&self, publisher: Publisher) -> Relay<DB> {
        Relay::new(self.clone(), publisher)
    }

    /// Deletes the rows sent longer ago than the retention; how many.
    pub async fn prune(&self) -> Result<u64, OutboxError> {
        let mut connection = self.pool.acquire().await?;
        let retention = [Bind::Int(millis(self.retention))];
        Ok(DB::execute(&mut *connection, &self.statements.prune, &retention).await?)
    }

    /// How many rows wait to be published, and how long the oldest has waited.
    pub async fn backlog(&self) -> Result<Backlog, OutboxError> {
        let mut connection = self.pool.acquire().await?;
        let (pending, oldest) = DB::backlog(&mut *connection, &self.statements.backlog).await?;
        Ok(Backlog {
            pending: u64::try_from(pending).unwrap_or_default(),
            lag: oldest
                .filter(|seconds| seconds.is_finite())
                .map(|seconds| Duration::from_secs_f64(seconds.max(0.0))),
        })
    }
}

/// What waits in an outbox ([`Outbox::backlog`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Backlog {
    /// Rows not yet published.
    pub pending: u64,
    /// How long the oldest of them has waited (`None`: none waits).
    pub lag: Option<Duration>,
}

/// Writes the generated publishers' messages into the caller's transaction
/// ([`Outbox::writer`]). Validated exactly as a publish is: a message that breaks its schema
/// is an error here, and nothing is stored.
pub struct OutboxWriter<'t, DB: Backend> {
    /// Behind a lock because the publishers take `&self`; one write at a time, as a
    /// transaction runs one statement at a time anyway.
    connection: Mutex<&'t mut DB::Connection>,
    statements: Arc<OutboxSql>,
    namespace: Arc<Namespace>,
}

impl<DB: Backend> std::fmt::Debug for OutboxWriter<'_, DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxWriter")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<DB: Backend> sealed::Sealed for OutboxWriter<'_, DB> {}

impl<DB: Backend> Sink for OutboxWriter<'_, DB> {
    async fn send<M: Message>(
        &self,
        publication: Publication<&str>,
        payload: &M::Payload,
        headers: &M::Headers,
        options: &PublishOptions,
    ) -> Result<(), PublishError> {
        let ordering_key = match publication.ordering_key {
            Some(pointer) => Some(ordering_key::<M>(payload, pointer)?),
            None => None,
        };
        // The publish span is the writer's: the consumer's span is its child, however late
        // the relay publishes.
        let (
            Prepared {
                exchange,
                routing_key,
                body,
                properties,
            },
            span,
        ) = prepared::<M>(&self.namespace, publication, payload, headers, options)?.traced();
        let encoded = encode_properties(&properties);
        let message_id = properties.message_id().as_ref().map(|id| id.as_str());
        let binds = [
            Bind::Text(&exchange),
            Bind::Text(&routing_key),
            Bind::MaybeText(message_id),
            Bind::MaybeText(ordering_key.as_deref()),
            Bind::Bytes(&encoded),
            Bind::Bytes(&body),
        ];
        let written = async {
            let mut connection = self.connection.lock().await;
            DB::execute(&mut **connection, &self.statements.insert, &binds)
                .await
                .map(|_| ())
                .map_err(|e| PublishError::Outbox(Box::new(e)))
        }
        .instrument(span.clone())
        .await;
        crate::trace::published(&span, &written);
        written
    }
}

/// The ordering key of `payload` at `pointer`: a string as it is, anything else as its JSON
/// text, at most a short string long. A payload without one is refused: a message written
/// without its key would be relayed out of order unseen.
fn ordering_key<M: Message>(payload: &M::Payload, pointer: &str) -> Result<String, PublishError> {
    let missing = |why: String| PublishError::OrderingKey {
        message: M::NAME,
        pointer: pointer.to_owned(),
        why,
    };
    let value = serde_json::to_value(payload).map_err(|e| missing(e.to_string()))?;
    let key = match value.pointer(pointer) {
        None | Some(Value::Null) => return Err(missing("there is nothing there".into())),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    };
    if key.len() > MAX_SHORT_STRING {
        return Err(missing(format!(
            "it is {} bytes long, above {MAX_SHORT_STRING}",
            key.len()
        )));
    }
    Ok(key)
}

/// `properties` as AMQP writes them in a content header: every property, the headers with
/// their exact AMQP types, in lapin's own encoding.
fn encode_properties(properties: &BasicProperties) -> Vec<u8> {
    use amq_protocol::frame::WriteContext;
    // Writing into a vector cannot fail: it grows.
    lapin::protocol::basic::gen_properties(properties)(WriteContext::from(Vec::new()))
        .map(|context| context.write)
        .unwrap_or_default()
}

/// Properties written by [`encode_properties`]; `None` when `bytes` are not exactly that.
fn decode_properties(bytes: &[u8]) -> Option<BasicProperties> {
    match lapin::protocol::basic::parse_properties(bytes) {
        Ok(([], properties)) => Some(properties),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use lapin::types::{AMQPValue, FieldTable, ShortString};

    use super::*;

    #[test]
    fn stored_properties_read_back_as_they_were_written() {
        let mut headers = FieldTable::default();
        headers.insert(ShortString::from("attempt"), AMQPValue::LongLongInt(-3));
        headers.insert(ShortString::from("flag"), AMQPValue::Boolean(true));
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from("0190d6f0-aaaa"))
            .with_content_type(ShortString::from("application/json"))
            .with_delivery_mode(2)
            .with_timestamp(1_796_000_000)
            .with_priority(4)
            .with_headers(headers);
        let bytes = encode_properties(&properties);
        assert_eq!(decode_properties(&bytes), Some(properties));
        assert_eq!(decode_properties(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode_properties(&[bytes.as_slice(), &[0]].concat()), None);
        assert_eq!(decode_properties(&[0xff, 0xff, 0xff]), None);
    }
}
