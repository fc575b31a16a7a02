//! The effects scenario: what the inbox and the outbox cost, on PostgreSQL (`DATABASE_URL`,
//! else the test command's `postgres://postgres@127.0.0.1:5432/test`).
//!
//! - **Inbox**: a queue filled with `n` messages first, then consumed by a handler that writes
//!   one row per message in a transaction of its own (`apply_plain`), and by the same write
//!   through the inbox, in the transaction it opens and records the message in
//!   (`apply_inbox`); the same concurrency and pool. Timed from the worker's start to the
//!   last message handled; ratios against the plain handler.
//! - **Outbox**: `n` messages published by the generated publishers, 1,000 confirms in
//!   flight, against the same messages written into an outbox first and then published by
//!   one relay, and by two sharing the table, running as in a worker, until all are.
//!   Ratios against publishing directly.
//!
//! Everything runs in interleaved rounds; tables of the run's own are dropped afterwards.

use std::time::{Duration, Instant};

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use warren_runtime::inbox::{Inbox, InboxTransaction};
use warren_runtime::outbox::{DEFAULT_BATCH, Outbox};
use warren_runtime::{Connection, Delivery, HandlerError, Publisher, Topology, Worker};

use crate::{Count, ROUNDS, Result, Round, Row, WINDOW, order, print, windowed};

// The generated API is wider than this scenario uses (`Handlers`, `Publishers::with`).
#[allow(dead_code)]
mod contract {
    include!(concat!(env!("OUT_DIR"), "/effects.rs"));
}

use contract::{Publishers, consumers, types};

/// Handlers at once, on either side: the consumers' concurrency in the contract, and as many
/// pooled connections, so that neither side waits for a connection.
const CONNECTIONS: u32 = 16;
/// Messages written into the outbox per transaction before a relay round is timed.
const WRITE_CHUNK: usize = 1000;

/// The PostgreSQL the scenario writes to.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The tables of this run, named after its namespace.
struct Tables {
    plain: String,
    inboxed: String,
    inbox: String,
    outbox: String,
}

impl Tables {
    fn new() -> Self {
        let suffix = std::process::id();
        Self {
            plain: format!("bench_plain_{suffix}"),
            inboxed: format!("bench_inboxed_{suffix}"),
            inbox: format!("bench_inbox_{suffix}"),
            outbox: format!("bench_outbox_{suffix}"),
        }
    }

    async fn create(&self, pool: &PgPool) -> Result<()> {
        for effects in [&self.plain, &self.inboxed] {
            let create = format!(
                "CREATE TABLE IF NOT EXISTS {effects} (order_id TEXT NOT NULL, total BIGINT NOT NULL)"
            );
            sqlx::query(&create).execute(pool).await?;
        }
        Ok(())
    }

    /// Empties every table between rounds.
    async fn truncate(&self, pool: &PgPool) -> Result<()> {
        let tables = [&self.plain, &self.inboxed, &self.inbox, &self.outbox];
        let truncate = format!("TRUNCATE {}", tables.map(String::as_str).join(", "));
        sqlx::query(&truncate).execute(pool).await?;
        Ok(())
    }

    async fn drop(&self, pool: &PgPool) -> Result<()> {
        for table in [&self.plain, &self.inboxed, &self.inbox, &self.outbox] {
            sqlx::query(&format!("DROP TABLE IF EXISTS {table}"))
                .execute(pool)
                .await?;
        }
        Ok(())
    }
}

/// The effect both handlers write: one row per order.
async fn write_effect(
    connection: &mut sqlx::PgConnection,
    table: &str,
    order: &types::BenchOrder,
) -> std::result::Result<(), sqlx::Error> {
    sqlx::query(&format!(
        "INSERT INTO {table} (order_id, total) VALUES ($1, $2)"
    ))
    .bind(order.order_id.as_str())
    .bind(i64::try_from(order.total_minor).unwrap_or(i64::MAX))
    .execute(connection)
    .await?;
    Ok(())
}

/// The plain handler: its own transaction, one row.
#[derive(Clone)]
struct Plain {
    pool: PgPool,
    table: String,
    progress: Count,
}

impl consumers::ApplyPlain for Plain {
    async fn handle(
        &self,
        delivery: Delivery<types::BenchOrder>,
    ) -> std::result::Result<(), HandlerError> {
        let mut transaction = self.pool.begin().await?;
        write_effect(&mut transaction, &self.table, delivery.payload()).await?;
        transaction.commit().await?;
        self.progress.seen();
        Ok(())
    }
}

/// The same write through the inbox's transaction.
#[derive(Clone)]
struct Inboxed {
    inbox: Inbox<sqlx::Postgres>,
    table: String,
    progress: Count,
}

impl consumers::ApplyInbox for Inboxed {
    type Database = sqlx::Postgres;

    fn inbox(&self) -> Inbox<sqlx::Postgres> {
        self.inbox.clone()
    }

    async fn handle(
        &self,
        delivery: Delivery<types::BenchOrder>,
        transaction: &mut InboxTransaction<sqlx::Postgres>,
    ) -> std::result::Result<(), HandlerError> {
        write_effect(transaction, &self.table, delivery.payload()).await?;
        // Counted before the inbox commits: the time is taken once the worker stopped, after
        // its last commit.
        self.progress.seen();
        Ok(())
    }
}

/// The benchmark's orders as this contract's type (the same schema, generated twice).
fn orders(n: usize) -> Result<Vec<types::BenchOrder>> {
    (0..n)
        .map(|i| Ok(serde_json::from_value(serde_json::to_value(order(i))?)?))
        .collect()
}

/// Publishes `orders` to `queue` through the generated publishers, each with its message id
/// (which the inbox records), [`WINDOW`] confirms in flight.
async fn fill(
    publishers: &Publishers,
    queue: &'static str,
    orders: &[types::BenchOrder],
) -> Result<()> {
    windowed(orders.iter().map(|order| {
        let (publishers, order) = (publishers.clone(), order.clone());
        async move { publishers.to_queue(queue, &order).await }
    }))
    .await
}

/// A worker running `register`'s consumer until `progress` says all were handled; the time
/// from its start until it stopped (its handlers done, their transactions committed).
async fn consume(
    connection: &Connection,
    topology: &Topology,
    progress: &Count,
    register: impl FnOnce(&mut Worker),
) -> Result<Duration> {
    let mut worker = Worker::new(connection.clone(), topology.clone());
    register(&mut worker);
    let stop = worker.shutdown_handle();
    let started = Instant::now();
    let running = tokio::spawn(worker.run());
    progress.all_seen().await;
    stop.shutdown();
    running.await??;
    Ok(started.elapsed())
}

/// Writes `orders` into `outbox`, a chunk per transaction.
async fn write_outbox(
    pool: &PgPool,
    outbox: &Outbox<sqlx::Postgres>,
    publishers: &Publishers,
    orders: &[types::BenchOrder],
) -> Result<()> {
    for chunk in orders.chunks(WRITE_CHUNK) {
        let mut transaction = pool.begin().await?;
        let writing = publishers.through(outbox.writer(&mut transaction));
        for order in chunk {
            writing.to_queue("relayed", order).await?;
        }
        drop(writing);
        transaction.commit().await?;
    }
    Ok(())
}

/// `relays` relays of `batch` rows sharing `outbox`, running as a worker runs them
/// (`Relay::spawn`), until they published `n` rows; the time from their start.
async fn relay(
    outbox: &Outbox<sqlx::Postgres>,
    publisher: &Publisher,
    relays: usize,
    batch: u32,
    n: usize,
) -> Result<Duration> {
    let started = Instant::now();
    let running: Vec<_> = (0..relays)
        .map(|_| outbox.relay(publisher.clone()).batch(batch).spawn())
        .collect();
    loop {
        let health: Vec<_> = running.iter().map(|relay| relay.health()).collect();
        if let Some(error) = health.iter().find_map(|h| h.last_error.clone()) {
            return Err(format!("a row was not published: {error}").into());
        }
        if health.iter().map(|h| h.published).sum::<u64>() >= n as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = started.elapsed();
    for relay in running {
        relay.stop().await;
    }
    Ok(elapsed)
}

/// Runs the scenario and prints its tables, the effects contract declared in `namespace`
/// and deleted after. Without a PostgreSQL that answers it fails, unless `optional` (as in
/// `all`), when it says so and measures nothing.
pub async fn bench(
    connection: &Connection,
    namespace: &str,
    n: usize,
    optional: bool,
) -> Result<()> {
    let url = database_url();
    let pool = match PgPoolOptions::new()
        .max_connections(CONNECTIONS)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&url)
        .await
    {
        Ok(pool) => pool,
        Err(error) => {
            let unanswered = format!("PostgreSQL at {url} (DATABASE_URL) does not answer: {error}");
            if optional {
                println!(
                    "
effects: not measured, {unanswered}"
                );
                return Ok(());
            }
            return Err(format!("effects: {unanswered}").into());
        }
    };
    let topology = contract::topology().namespaced(namespace);
    warren_runtime::declare(connection, &topology).await?;
    let tables = Tables::new();
    let outcome = run(connection, &topology, &pool, &tables, n).await;
    tables.drop(&pool).await?;
    warren_runtime::delete(connection, &topology).await?;
    pool.close().await;
    outcome
}

async fn run(
    connection: &Connection,
    topology: &Topology,
    pool: &PgPool,
    tables: &Tables,
    n: usize,
) -> Result<()> {
    tables.create(pool).await?;
    let inbox = Inbox::new(pool.clone()).table(&tables.inbox)?;
    inbox.migrate().await?;
    let outbox = Outbox::new(pool.clone(), topology).table(&tables.outbox)?;
    outbox.migrate().await?;
    let publishers = Publishers::new(Publisher::new(connection, topology).await?);
    let orders = orders(n)?;
    let context = Context {
        connection,
        topology,
        pool,
        tables,
        publishers: &publishers,
        orders: &orders,
    };
    bench_inbox(&context, &inbox).await?;
    bench_outbox(&context, &outbox).await
}

/// What both halves measure with.
struct Context<'a> {
    connection: &'a Connection,
    topology: &'a Topology,
    pool: &'a PgPool,
    tables: &'a Tables,
    publishers: &'a Publishers,
    orders: &'a [types::BenchOrder],
}

impl Context<'_> {
    /// Empties the tables and `queue` after a round.
    async fn clean(&self, queue: &str) -> Result<()> {
        self.tables.truncate(self.pool).await?;
        crate::backlog::purge(self.connection, &self.topology.qualified(queue)).await
    }
}

async fn bench_inbox(context: &Context<'_>, inbox: &Inbox<sqlx::Postgres>) -> Result<()> {
    let n = context.orders.len();
    println!(
        "\ninbox on PostgreSQL ({n} messages queued first, each writing one row, concurrency \
         {CONNECTIONS}, {CONNECTIONS} connections; median of {ROUNDS} rounds; ratios against the \
         plain handler):"
    );
    let sides = [
        ("plain handler, its own transaction", "effects-plain"),
        ("inbox: recorded, then the same write", "effects-inbox"),
    ];
    let (connection, topology) = (context.connection, context.topology);
    let mut rounds: [Vec<Round>; 2] = Default::default();
    for _ in 0..ROUNDS {
        for ((_, queue), measured) in sides.iter().zip(&mut rounds) {
            fill(context.publishers, queue, context.orders).await?;
            let progress = Count::new(n);
            let round = if *queue == "effects-plain" {
                let plain = Plain {
                    pool: context.pool.clone(),
                    table: context.tables.plain.clone(),
                    progress: progress.clone(),
                };
                Round::measure(consume(connection, topology, &progress, |worker| {
                    consumers::register::apply_plain(worker, plain);
                }))
                .await?
            } else {
                let inboxed = Inboxed {
                    inbox: inbox.clone(),
                    table: context.tables.inboxed.clone(),
                    progress: progress.clone(),
                };
                Round::measure(consume(connection, topology, &progress, |worker| {
                    consumers::register::apply_inbox(worker, inboxed);
                }))
                .await?
            };
            measured.push(round);
            context.clean(queue).await?;
        }
    }
    let rows: Vec<Row> = sides
        .iter()
        .zip(rounds)
        .map(|((name, _), measured)| Row::measured(name, measured, n))
        .collect();
    print(&rows, sides[0].0);
    Ok(())
}

async fn bench_outbox(context: &Context<'_>, outbox: &Outbox<sqlx::Postgres>) -> Result<()> {
    let n = context.orders.len();
    println!(
        "\noutbox on PostgreSQL ({n} messages; the relays' rows written first, timed from the \
         relays' start until all are published; median of {ROUNDS} rounds; ratios against \
         publishing directly):"
    );
    // Leaked: the rows' names are static, and these are made once per run.
    let direct: &'static str =
        format!("confirmed publish (warren publisher, {WINDOW} in flight)").leak();
    let one: &'static str = format!("one relay, batch {DEFAULT_BATCH} (the default)").leak();
    let sides: [(&'static str, usize, u32); 4] = [
        (direct, 0, 0),
        (one, 1, DEFAULT_BATCH),
        ("one relay, batch 100", 1, 100),
        (
            "two relays sharing the table, default batch",
            2,
            DEFAULT_BATCH,
        ),
    ];
    let publisher = Publisher::new(context.connection, context.topology).await?;
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); sides.len()];
    for _ in 0..ROUNDS {
        for ((_, relays, batch), measured) in sides.iter().zip(&mut rounds) {
            let round = if *relays == 0 {
                Round::measure(async {
                    let started = Instant::now();
                    fill(context.publishers, "relayed", context.orders).await?;
                    Ok(started.elapsed())
                })
                .await?
            } else {
                write_outbox(context.pool, outbox, context.publishers, context.orders).await?;
                Round::measure(relay(outbox, &publisher, *relays, *batch, n)).await?
            };
            measured.push(round);
            context.clean("relayed").await?;
        }
    }
    let rows: Vec<Row> = sides
        .iter()
        .zip(rounds)
        .map(|((name, _, _), measured)| Row::measured(name, measured, n))
        .collect();
    print(&rows, direct);
    Ok(())
}
