//! `warren outbox relay`: publishes what the services' transactions wrote into an outbox
//! table, as a process of its own. The work is `warren_runtime::outbox::Relay`; this is its
//! command line.

use std::time::Duration;

use clap::{Args, Subcommand};
use warren_codegen::diagnostics::escape;
use warren_runtime::database::Backend;
use warren_runtime::outbox::{Outbox, RelayHandle};
use warren_runtime::{Connection, Publisher, Topology};

use crate::Failure;

/// The `warren outbox` subcommands.
#[derive(Debug, Args)]
pub(crate) struct OutboxArgs {
    #[command(subcommand)]
    command: OutboxCommand,
}

#[derive(Debug, Subcommand)]
enum OutboxCommand {
    /// Publish an outbox table's rows, with confirms, until stopped
    ///
    /// Claims the rows that are due (on PostgreSQL with `FOR UPDATE SKIP LOCKED`, so several
    /// relays share a table; per ordering key only the oldest unsent row), publishes them,
    /// and marks them sent once the broker confirmed them; a row that fails is due again
    /// after a backoff, its error kept in the table. Prunes sent rows older than
    /// `--retention`. Stops on Ctrl-C or SIGTERM once its round is done.
    #[command(after_help = "\
Examples:
  warren outbox relay --database-url postgres://app@db/orders --url amqp://rabbit
  warren outbox relay --database-url sqlite:orders.db --once     publish what waits, then exit

Exit status: 0 when stopped (with `--once`: when nothing waits any more), 1 with `--once`
when rows are still waiting (their last error is shown), 2 when the relay cannot start.")]
    Relay(RelayArgs),
}

#[derive(Debug, Args)]
struct RelayArgs {
    /// The broker; by default `AMQP_URL`, else amqp://guest:guest@127.0.0.1:5672/%2f.
    #[arg(long)]
    url: Option<String>,
    /// The database: `postgres://…` or `sqlite:…`; by default `DATABASE_URL`.
    #[arg(long)]
    database_url: Option<String>,
    /// The outbox table.
    #[arg(long, default_value = warren_runtime::outbox::DEFAULT_TABLE)]
    table: String,
    /// Rows claimed and published at once.
    #[arg(long, default_value_t = warren_runtime::outbox::DEFAULT_BATCH, value_name = "ROWS")]
    batch: u32,
    /// Create the table first when it does not exist.
    #[arg(long)]
    migrate: bool,
    /// Publish what is due, then exit: 0 when nothing waits any more.
    #[arg(long)]
    once: bool,
}

/// Runs one `warren outbox` command.
pub(crate) fn run(args: OutboxArgs) -> Result<(), Failure> {
    let OutboxCommand::Relay(relay) = args.command;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(format!("error: cannot start the runtime: {e}\n")))?;
    runtime.block_on(relay_command(relay))
}

async fn relay_command(args: RelayArgs) -> Result<(), Failure> {
    let database = args
        .database_url
        .clone()
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .ok_or_else(|| {
            Failure::usage(
                "error: name the database with `--database-url` or DATABASE_URL\n".into(),
            )
        })?;
    let url = crate::broker_url(args.url.as_deref());
    let connection = Connection::connect(&url, "warren outbox relay")
        .await
        .map_err(|e| Failure::usage(format!("error: cannot connect to the broker: {e}\n")))?;
    let publisher = Publisher::new(&connection, &Topology::default())
        .await
        .map_err(|e| Failure::usage(format!("error: cannot open a publishing channel: {e}\n")))?;
    let unreachable =
        |e: sqlx::Error| Failure::usage(format!("error: cannot open the database: {e}\n"));
    if database.starts_with("postgres://") || database.starts_with("postgresql://") {
        let pool = sqlx::PgPool::connect(&database)
            .await
            .map_err(unreachable)?;
        relay(pool, publisher, &args).await
    } else if database.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(&database)
            .await
            .map_err(unreachable)?;
        relay(pool, publisher, &args).await
    } else {
        Err(Failure::usage(format!(
            "error: `{}` is neither a `postgres://` nor a `sqlite:` URL\n",
            escape(&database)
        )))
    }
}

async fn relay<DB: Backend>(
    pool: sqlx::Pool<DB>,
    publisher: Publisher,
    args: &RelayArgs,
) -> Result<(), Failure> {
    let outbox = Outbox::new(pool, &Topology::default())
        .table(&args.table)
        .map_err(|e| Failure::usage(format!("error: {e}\n")))?;
    let database_failed = |e: warren_runtime::outbox::OutboxError| Failure {
        status: 2,
        message: format!("error: {e}\n"),
    };
    if args.migrate {
        outbox.migrate().await.map_err(database_failed)?;
    }
    let relay = outbox.relay(publisher).batch(args.batch);
    if args.once {
        return drain(&outbox, relay).await;
    }
    eprintln!("relaying outbox table `{}`; Ctrl-C stops", args.table);
    let running = relay.spawn();
    let mut report = tokio::time::interval(Duration::from_secs(10));
    tokio::select! {
        () = stopped() => {}
        () = async { loop { report.tick().await; progress(&running); } } => {}
    }
    progress(&running);
    running.stop().await;
    Ok(())
}

/// Rounds until one claims nothing; 0 when nothing waits then, 1 with the last error when
/// rows wait (in backoff).
async fn drain<DB: Backend>(
    outbox: &Outbox<DB>,
    relay: warren_runtime::outbox::Relay<DB>,
) -> Result<(), Failure> {
    let database_failed = |e: warren_runtime::outbox::OutboxError| Failure {
        status: 2,
        message: format!("error: {e}\n"),
    };
    let mut published = 0;
    let mut last_error = None;
    loop {
        let round = relay.relay_once().await.map_err(database_failed)?;
        published += round.published;
        last_error = round.last_error.or(last_error);
        if round.claimed == 0 {
            break;
        }
    }
    let backlog = outbox.backlog().await.map_err(database_failed)?;
    eprintln!("published {published}; {} waiting", backlog.pending);
    if backlog.pending == 0 {
        return Ok(());
    }
    Err(Failure {
        status: 1,
        message: format!(
            "error: {} still waiting{}\n",
            crate::counted(
                usize::try_from(backlog.pending).unwrap_or(usize::MAX),
                "row is",
                "rows are"
            ),
            last_error.map_or(String::new(), |e| format!(
                "; the last error: {}",
                escape(&e)
            ))
        ),
    })
}

fn progress(relay: &RelayHandle) {
    let health = relay.health();
    let lag = health.lag_ms.map_or("none".to_owned(), |lag| {
        format!("{:.1}s", lag as f64 / 1000.0)
    });
    let error = health
        .last_error
        .map_or(String::new(), |e| format!("; last error: {}", escape(&e)));
    eprintln!(
        "published {}; {} waiting, the oldest for {lag}{error}",
        health.published, health.pending
    );
}

/// Until Ctrl-C or SIGTERM.
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
