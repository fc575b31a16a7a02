//! A process of the ledger (`contracts/ledger/`) on PostgreSQL, run as a child by
//! `tests/exactly_once.rs`, which kills it with `kill -9` at moments of its choosing.
//!
//! ```text
//! ledger consume                    the generated inbox consumers, until killed
//! ledger hold-after-commit <id>     consumer `apply` by hand, which holds entry <id>'s delivery
//!                                   unacknowledged once its transaction committed, for the test
//!                                   to kill the process between the two
//! ledger relay                      an outbox relay, until killed
//! ```
//!
//! From the environment: `AMQP_URL`, `DATABASE_URL`, `LEDGER_NAMESPACE` (the test deployed
//! the contract under it; nothing is declared here), `LEDGER_INBOX`, `LEDGER_EFFECTS` and
//! `LEDGER_OUTBOX` (the tables). It prints `ready` once it consumes (or relays). When its
//! stdin closes a worker shuts down, its deliveries drained and acknowledged, and a relay
//! exits: so a test can stop it cleanly, and one that dies leaves nothing behind.

use std::io::Write;
use std::time::Duration;

use sqlx::PgPool;
use warren_broker_tests::bookkeeper::Bookkeeper;
use warren_broker_tests::database::TestDatabase;
use warren_broker_tests::ledger::{self, messages, types::Entry};
use warren_runtime::inbox::{Inbox, InboxConsumer};
use warren_runtime::model::ConsumerSpec;
use warren_runtime::outbox::Outbox;
use warren_runtime::{Connection, Delivery, HandlerError, Publisher, Topology, Worker};

const USAGE: &str = "usage: ledger consume | ledger hold-after-commit <id> | ledger relay";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set: {USAGE}"))
}

fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// Consumer `apply` by hand, through `InboxConsumer::once`: once entry `hold_after`'s
/// transaction commits, its handler never returns, so the worker never acks it.
struct HoldAfterCommit {
    inbox: InboxConsumer<sqlx::Postgres>,
    effects: String,
    hold_after: String,
}

impl warren_runtime::codegen::Handler<messages::Entry> for HoldAfterCommit {
    async fn handle(&self, delivery: Delivery<Entry>) -> Result<(), HandlerError> {
        let id = delivery.payload().id.to_string();
        let effects = self.effects.clone();
        let attempt = i64::from(delivery.retry_count());
        let written = id.clone();
        self.inbox
            .once(&delivery, move |tx| {
                Box::pin(async move {
                    sqlx::Postgres::insert_effect(&mut **tx, &effects, &written, attempt).await?;
                    Ok(())
                })
            })
            .await?;
        if id == self.hold_after {
            say(&format!("holding {id} unacknowledged after its commit"));
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

/// Calls `then` once stdin closes.
fn on_stdin_closed(then: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        then();
    });
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let connection = Connection::connect(&env("AMQP_URL"), "ledger")
        .await
        .expect("the broker answers");
    let topology = ledger::topology().namespaced(&env("LEDGER_NAMESPACE"));
    let pool = PgPool::connect(&env("DATABASE_URL"))
        .await
        .expect("the database answers");
    let inbox = Inbox::new(pool.clone())
        .table(&env("LEDGER_INBOX"))
        .expect("a plain table name");
    let effects = env("LEDGER_EFFECTS");
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["consume"] => {
            let mut worker = Worker::new(connection, topology);
            Bookkeeper::new(inbox, &effects)
                .handlers()
                .register(&mut worker);
            run(worker).await;
        }
        ["hold-after-commit", id] => {
            let handler = HoldAfterCommit {
                inbox: inbox.consumer("apply").key_pointer("/id"),
                effects,
                hold_after: id.to_owned(),
            };
            let spec = ConsumerSpec {
                name: "apply",
                queue: "entries",
                prefetch: 50,
                concurrency: 8,
                circuit_breaker: None,
                ordering_key: None,
            };
            let mut worker = Worker::new(connection, topology);
            warren_runtime::codegen::add(
                &mut worker,
                messages::Entry,
                spec,
                warren_runtime::codegen::Erased::new(handler),
            );
            run(worker).await;
        }
        ["relay"] => relay(connection, topology, pool).await,
        _ => panic!("{USAGE}"),
    }
}

/// Runs `worker`, saying `ready` once it consumes, until stdin closes.
async fn run(worker: Worker) {
    let shutdown = worker.shutdown_handle();
    on_stdin_closed(move || shutdown.shutdown());
    let health = worker.health_handle();
    tokio::spawn(async move {
        while !health.snapshot().ready {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        say("ready");
    });
    let outcome = worker.run().await;
    say(&format!("stopped {outcome:?}"));
}

/// Relays the outbox until killed: its publishes time out
/// within 2 s, so a row a killed relay claimed is another's 7 s later.
async fn relay(connection: Connection, topology: Topology, pool: PgPool) {
    let outbox = Outbox::new(pool, &topology)
        .table(&env("LEDGER_OUTBOX"))
        .expect("a plain table name");
    let publisher = Publisher::new(&connection, &topology)
        .await
        .expect("a publishing channel")
        .timeout(Duration::from_secs(2));
    let relay = outbox
        .relay(publisher)
        .batch(50)
        .lease(Duration::ZERO)
        .spawn();
    say("ready");
    // Until killed, or its stdin closes.
    on_stdin_closed(|| std::process::exit(0));
    std::future::pending::<()>().await;
    drop(relay);
}
