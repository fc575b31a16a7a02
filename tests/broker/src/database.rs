//! The databases the inbox and outbox tests write to: the PostgreSQL the test command starts
//! (or `DATABASE_URL`), and a fresh SQLite file per test. [`TestDatabase`] runs the tests' own
//! statements on either, so one scenario proves both.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{PgPool, Pool, SqlitePool};
use warren_runtime::database::Backend;
use warren_runtime::inbox::Inbox;
use warren_testkit::Deployed;

/// The PostgreSQL the tests write to: `DATABASE_URL`, else the one
/// build-support/scripts/test.sh starts.
pub fn postgres_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A pool on [`postgres_url`].
pub async fn postgres() -> PgPool {
    let url = postgres_url();
    PgPoolOptions::new()
        .max_connections(8)
        .connect(&url)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {url} answers: {e}"))
}

/// A pool on a new SQLite file named after `deployed`'s namespace, in the system's
/// temporary folder; [`drop_sqlite`] removes it.
pub async fn sqlite(deployed: &Deployed) -> SqlitePool {
    let _ = std::fs::remove_file(sqlite_path(deployed));
    sqlite_opened(deployed, |options| options).await
}

/// A pool on the SQLite file of `deployed` that holds no more pages than it has now:
/// a database that is full, as a disk that is.
pub async fn sqlite_full(deployed: &Deployed) -> SqlitePool {
    let pool = sqlite_opened(deployed, |options| options).await;
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
        .fetch_one(&pool)
        .await
        .expect("the page count");
    pool.close().await;
    sqlite_opened(deployed, |options| {
        options.pragma("max_page_count", pages.to_string())
    })
    .await
}

async fn sqlite_opened(
    deployed: &Deployed,
    configure: impl FnOnce(SqliteConnectOptions) -> SqliteConnectOptions,
) -> SqlitePool {
    let path = sqlite_path(deployed);
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        // Writers wait for each other rather than fail at once: the worker's handlers and
        // the relay write at the same time.
        .busy_timeout(std::time::Duration::from_secs(30));
    SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(configure(options))
        .await
        .unwrap_or_else(|e| panic!("SQLite at {} opens: {e}", path.display()))
}

/// Closes `pool` and removes its file.
pub async fn drop_sqlite(pool: SqlitePool, deployed: &Deployed) {
    pool.close().await;
    let path = sqlite_path(deployed);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn sqlite_path(deployed: &Deployed) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("warren-{}.sqlite", table_suffix(deployed)))
}

/// A table name of the test's own, `prefix` and its namespace: tests running at once share
/// the PostgreSQL database.
pub fn table(prefix: &str, deployed: &Deployed) -> String {
    format!("{prefix}_{}", table_suffix(deployed))
}

fn table_suffix(deployed: &Deployed) -> String {
    deployed
        .namespace()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// A test's inbox and effects tables, created on one database.
pub struct Tables<DB: TestDatabase> {
    /// An inbox on table `inbox_<namespace>`, migrated.
    pub inbox: Inbox<DB>,
    /// The inbox's table.
    pub inbox_table: String,
    /// The effects table, `effects_<namespace>`.
    pub effects: String,
}

impl<DB: TestDatabase> Tables<DB> {
    /// Creates the tables of `deployed`'s test on `pool`; migrating the inbox twice, as a
    /// second start of a service would.
    pub async fn create(deployed: &Deployed, pool: &Pool<DB>) -> Self {
        let (inbox_table, effects) = (table("inbox", deployed), table("effects", deployed));
        let inbox = Inbox::new(pool.clone())
            .table(&inbox_table)
            .expect("a plain identifier");
        inbox.migrate().await.expect("the inbox's table is created");
        inbox
            .migrate()
            .await
            .expect("migrating again changes nothing");
        DB::create_effects(pool, &effects).await;
        Self {
            inbox,
            inbox_table,
            effects,
        }
    }

    /// Drops both tables.
    pub async fn drop(self, pool: &Pool<DB>) {
        for table in [&self.inbox_table, &self.effects] {
            DB::run(pool, &format!("DROP TABLE {table}")).await;
        }
    }
}

/// A future the tests' statements return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The tests' own statements, on either database: an effects table of (job id, attempt) rows.
pub trait TestDatabase: Backend {
    /// Runs `sql`, panicking if it fails.
    fn run<'a>(pool: &'a Pool<Self>, sql: &'a str) -> BoxFuture<'a, ()>;
    /// Inserts the effect (`id`, `attempt`) into table `effects` through `connection`.
    fn insert_effect<'a>(
        connection: &'a mut Self::Connection,
        effects: &'a str,
        id: &'a str,
        attempt: i64,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>>;
    /// How many rows of `effects` each job id has.
    fn effects<'a>(pool: &'a Pool<Self>, effects: &'a str) -> BoxFuture<'a, BTreeMap<String, i64>>;
    /// How many rows `table` holds.
    fn rows<'a>(pool: &'a Pool<Self>, table: &'a str) -> BoxFuture<'a, i64>;

    /// Creates table `effects`.
    fn create_effects<'a>(pool: &'a Pool<Self>, effects: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let create =
                format!("CREATE TABLE {effects} (job_id TEXT NOT NULL, attempt BIGINT NOT NULL)");
            Self::run(pool, &create).await;
        })
    }
}

macro_rules! test_database {
    ($db:ty) => {
        impl TestDatabase for $db {
            fn run<'a>(pool: &'a Pool<Self>, sql: &'a str) -> BoxFuture<'a, ()> {
                Box::pin(async move {
                    sqlx::query(sql)
                        .execute(pool)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"));
                })
            }

            fn insert_effect<'a>(
                connection: &'a mut Self::Connection,
                effects: &'a str,
                id: &'a str,
                attempt: i64,
            ) -> BoxFuture<'a, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    let insert = format!("INSERT INTO {effects} (job_id, attempt) VALUES ($1, $2)");
                    sqlx::query(&insert)
                        .bind(id)
                        .bind(attempt)
                        .execute(connection)
                        .await
                        .map(|_| ())
                })
            }

            fn effects<'a>(
                pool: &'a Pool<Self>,
                effects: &'a str,
            ) -> BoxFuture<'a, BTreeMap<String, i64>> {
                Box::pin(async move {
                    let query = format!("SELECT job_id, count(*) FROM {effects} GROUP BY job_id");
                    sqlx::query_as::<_, (String, i64)>(&query)
                        .fetch_all(pool)
                        .await
                        .expect("the effects are read")
                        .into_iter()
                        .collect()
                })
            }

            fn rows<'a>(pool: &'a Pool<Self>, table: &'a str) -> BoxFuture<'a, i64> {
                Box::pin(async move {
                    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
                        .fetch_one(pool)
                        .await
                        .unwrap_or_else(|e| panic!("{table} is read: {e}"))
                })
            }
        }
    };
}

test_database!(sqlx::Postgres);
test_database!(sqlx::Sqlite);
