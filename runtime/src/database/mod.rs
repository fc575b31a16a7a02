//! The databases the inbox and the outbox write to (the `postgres` and `sqlite` features),
//! through sqlx: one [`Backend`] per database, each holding its SQL, so that the inbox and
//! the outbox are written once for both.
//!
//! Table names are checked to be plain identifiers ([`TableName`]) before they are written
//! into a statement; every value is a bound parameter.

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

/// A database warren's inbox and outbox run on: `sqlx::Postgres` (feature `postgres`) or
/// `sqlx::Sqlite` (feature `sqlite`). Sealed: the statements are warren's.
pub trait Backend: sqlx::Database + sealed::Statements {}

/// The longest table name: PostgreSQL's longest identifier (`NAMEDATALEN - 1`), and as long
/// as any SQLite needs.
const MAX_IDENTIFIER: usize = 63;

/// A table name that is safe to write into a statement unquoted: lowercase ASCII letters,
/// digits and `_`, not starting with a digit, at most 63 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName(String);

/// A table name that is not a plain identifier ([`TableName::new`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "table `{0}` is not a plain SQL identifier: use lowercase letters, digits and `_`, at most 63, starting with a letter or `_`"
)]
pub struct BadTableName(pub String);

impl TableName {
    /// `name`, when it is a plain identifier.
    pub fn new(name: &str) -> Result<Self, BadTableName> {
        let mut chars = name.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
        let plain = first_ok
            && name.len() <= MAX_IDENTIFIER
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if plain {
            Ok(Self(name.to_owned()))
        } else {
            Err(BadTableName(name.to_owned()))
        }
    }

    /// The name as written into statements.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) use sealed::{BacklogRow, Bind, BoxFuture, ClaimedRow, InboxSql, OutboxSql};

/// What only warren implements and names: public in a private module.
mod sealed {
    use std::future::Future;
    use std::pin::Pin;

    use super::TableName;

    /// A value bound to a statement's parameter.
    #[derive(Debug, Clone, Copy)]
    pub enum Bind<'a> {
        Text(&'a str),
        MaybeText(Option<&'a str>),
        Int(i64),
        Bytes(&'a [u8]),
    }

    /// A future the backends return (boxed: the trait's methods are generic over nothing, and a
    /// box per statement is nothing beside a round trip to the database).
    pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

    /// The inbox's statements on one table. Parameters: `record` (consumer, key); `prune`
    /// (retention in milliseconds).
    #[derive(Debug)]
    pub struct InboxSql {
        pub migrate: Vec<String>,
        pub record: String,
        pub prune: String,
    }

    /// The outbox's statements on one table. Parameters, in order: `insert` (exchange, routing
    /// key, message id, ordering key, properties, body); `claim` (how many, lease in
    /// milliseconds), returning the rows claimed; `sent` (ids as a JSON array); `failed` (id,
    /// delay in milliseconds, error); `prune` (retention in milliseconds); `backlog` none,
    /// returning how many rows wait and the age of the oldest in seconds.
    #[derive(Debug)]
    pub struct OutboxSql {
        pub migrate: Vec<String>,
        pub insert: String,
        pub claim: String,
        pub sent: String,
        pub failed: String,
        pub prune: String,
        pub backlog: String,
    }

    /// One outbox row a relay claimed.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ClaimedRow {
        pub id: i64,
        pub exchange: String,
        pub routing_key: String,
        pub properties: Vec<u8>,
        pub body: Vec<u8>,
        /// How often it was claimed, this time included.
        pub attempts: i64,
    }

    /// The rows waiting in an outbox, and the age of the oldest in seconds (`None`: none wait).
    pub(crate) type BacklogRow = (i64, Option<f64>);

    /// What a [`super::Backend`] provides: its SQL, and the three ways warren runs a
    /// statement on one of its connections. Public in a private module, so only warren
    /// implements it.
    pub trait Statements: sqlx::Database {
        /// The inbox's statements on `table`.
        fn inbox_sql(table: &TableName) -> InboxSql;
        /// The outbox's statements on `table`.
        fn outbox_sql(table: &TableName) -> OutboxSql;
        /// Runs `sql` with `binds`; how many rows it changed.
        fn execute<'c>(
            connection: &'c mut Self::Connection,
            sql: &'c str,
            binds: &'c [Bind<'c>],
        ) -> BoxFuture<'c, Result<u64, sqlx::Error>>;
        /// Runs an outbox `claim` statement.
        fn claim<'c>(
            connection: &'c mut Self::Connection,
            sql: &'c str,
            binds: &'c [Bind<'c>],
        ) -> BoxFuture<'c, Result<Vec<ClaimedRow>, sqlx::Error>>;
        /// Runs an outbox `backlog` statement.
        fn backlog<'c>(
            connection: &'c mut Self::Connection,
            sql: &'c str,
        ) -> BoxFuture<'c, Result<BacklogRow, sqlx::Error>>;
    }
}

/// `$query` with each of `$binds` bound, in order.
macro_rules! bound {
    ($query:expr, $binds:expr) => {{
        let mut query = $query;
        for bind in $binds {
            query = match *bind {
                Bind::Text(text) => query.bind(text),
                Bind::MaybeText(text) => query.bind(text),
                Bind::Int(number) => query.bind(number),
                Bind::Bytes(bytes) => query.bind(bytes),
            };
        }
        query
    }};
}

/// Implements [`Backend`] for `$db`, whose SQL is in module `$sql`: the bodies are the same
/// for every database, the types they are checked against are not.
macro_rules! backend {
    ($db:ty, $sql:ident) => {
        impl sealed::Statements for $db {
            fn inbox_sql(table: &TableName) -> InboxSql {
                $sql::inbox(table)
            }

            fn outbox_sql(table: &TableName) -> OutboxSql {
                $sql::outbox(table)
            }

            fn execute<'c>(
                connection: &'c mut Self::Connection,
                sql: &'c str,
                binds: &'c [Bind<'c>],
            ) -> BoxFuture<'c, Result<u64, sqlx::Error>> {
                Box::pin(async move {
                    let query = bound!(sqlx::query::<$db>(sql), binds);
                    Ok(query.execute(connection).await?.rows_affected())
                })
            }

            fn claim<'c>(
                connection: &'c mut Self::Connection,
                sql: &'c str,
                binds: &'c [Bind<'c>],
            ) -> BoxFuture<'c, Result<Vec<ClaimedRow>, sqlx::Error>> {
                Box::pin(async move {
                    type Row = (i64, String, String, Vec<u8>, Vec<u8>, i64);
                    let query = bound!(sqlx::query_as::<$db, Row>(sql), binds);
                    let rows = query.fetch_all(connection).await?;
                    Ok(rows
                        .into_iter()
                        .map(
                            |(id, exchange, routing_key, properties, body, attempts)| ClaimedRow {
                                id,
                                exchange,
                                routing_key,
                                properties,
                                body,
                                attempts,
                            },
                        )
                        .collect())
                })
            }

            fn backlog<'c>(
                connection: &'c mut Self::Connection,
                sql: &'c str,
            ) -> BoxFuture<'c, Result<BacklogRow, sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query_as::<$db, BacklogRow>(sql)
                        .fetch_one(connection)
                        .await
                })
            }
        }

        impl Backend for $db {}
    };
}

#[cfg(feature = "postgres")]
backend!(sqlx::Postgres, postgres);
#[cfg(feature = "sqlite")]
backend!(sqlx::Sqlite, sqlite);

/// The outbox's indexes on `table`, the same on both databases: the relays read the unsent
/// rows in order, and per ordering key; pruning reads the sent ones by age.
fn outbox_indexes(table: &TableName) -> [String; 3] {
    [
        format!("CREATE INDEX IF NOT EXISTS {table}_unsent ON {table} (id) WHERE sent_at IS NULL"),
        format!(
            "CREATE INDEX IF NOT EXISTS {table}_ordering ON {table} (ordering_key, id) \
             WHERE sent_at IS NULL AND ordering_key IS NOT NULL"
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS {table}_sent ON {table} (sent_at) WHERE sent_at IS NOT NULL"
        ),
    ]
}

/// Runs each statement of `migrate` on `pool`, in order: they create what does not exist yet.
pub(crate) async fn migrate<DB: Backend>(
    pool: &sqlx::Pool<DB>,
    migrate: &[String],
) -> Result<(), sqlx::Error> {
    let mut connection = pool.acquire().await?;
    for statement in migrate {
        DB::execute(&mut *connection, statement, &[]).await?;
    }
    Ok(())
}

/// `duration` in whole milliseconds, as statements take it.
pub(crate) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::TableName;

    #[test]
    fn only_plain_identifiers_are_written_into_statements() {
        for good in ["warren_inbox", "_x", "inbox2"] {
            assert!(TableName::new(good).is_ok(), "{good}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "2x",
            "Inbox",
            "x;drop table y",
            "a b",
            "\"q\"",
            long.as_str(),
        ] {
            assert!(TableName::new(bad).is_err(), "{bad}");
        }
    }
}
