//! The orders demo: declares the contract's topology on a broker, runs the worker, places
//! orders through the outbox (`warren_example_orders::place`), ships them through the inbox,
//! and prints what was handled, retried and dead-lettered, with reasons (read by the
//! contract's dead-letter consumer), and the shipments: each order once.
//!
//! ```sh
//! cargo run -p warren-example-orders              # against amqp://127.0.0.1:5672, SQLite
//! AMQP_URL=amqp://user:pass@host/vhost cargo run -p warren-example-orders
//! AMQP_URL=amqp://u:p@rabbit-1/%2f,amqp://u:p@rabbit-2/%2f cargo run -p warren-example-orders
//! DATABASE_URL=postgres://postgres@127.0.0.1/test cargo run -p warren-example-orders
//! ```
//!
//! Everything it declares lives under a `demo.<id>.` namespace and is deleted at the end; its
//! tables are in a SQLite file of its own, or a PostgreSQL schema of its own, removed too.
//!
//! While it runs, it serves its metrics for Prometheus at `http://127.0.0.1:9464/metrics`,
//! and the worker's health at `/health` (JSON; 503 until ready) and `/live` (`METRICS_ADDR`
//! moves them; `DEMO_LINGER_SECS=60` keeps the worker running a minute, to look at them):
//!
//! ```sh
//! DEMO_LINGER_SECS=60 cargo run -p warren-example-orders &
//! curl -s localhost:9464/metrics | grep warren_handled_total
//! curl -s localhost:9464/health
//! ```

mod serve;

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{PgPool, Pool, SqlitePool};

use warren_example_orders::handlers::Quotes;
use warren_example_orders::store::Store;
use warren_example_orders::types::error::ConversionError;
use warren_example_orders::types::{
    Address, AddressLine1, CountryCode, Currency, LineItem, Money, OrderCancelled,
    OrderCancelledReason, OrderHeaders, OrderPlaced, QuoteRequest,
};
use warren_example_orders::{Handlers, Publishers, RpcClients, consumers, place, topology};
use warren_runtime::inbox::{Inbox, InboxTransaction};
use warren_runtime::outbox::Outbox;
use warren_runtime::{
    Connection, Delivery, FailureContext, HandlerError, HealthHandle, Publisher, RpcClient,
    RpcError, Topology, Worker,
};

/// What the handlers saw, per order id.
#[derive(Default)]
struct Log {
    attempts: BTreeMap<String, u32>,
    handled: Vec<String>,
    dead: Vec<String>,
}

#[derive(Clone, Default)]
struct Shop(Arc<Mutex<Log>>);

impl Shop {
    fn attempt(&self, id: &str) -> u32 {
        let mut log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = log.attempts.entry(id.to_owned()).or_default();
        *n += 1;
        *n
    }

    fn handled(&self, what: String) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .handled
            .push(what);
    }
}

/// Fulfilment through the inbox: each order's shipment is written in the transaction in which
/// the inbox records the message, so an order whose handler fails after writing it (the flaky
/// customers' first attempt), or that is delivered twice, is still shipped once.
struct Fulfil<DB: Store> {
    shop: Shop,
    inbox: Inbox<DB>,
}

impl<DB: Store> consumers::FulfilOrder for Fulfil<DB> {
    type Database = DB;

    fn inbox(&self) -> Inbox<DB> {
        self.inbox.clone()
    }

    async fn handle(
        &self,
        delivery: Delivery<OrderPlaced, OrderHeaders>,
        transaction: &mut InboxTransaction<DB>,
    ) -> Result<(), HandlerError> {
        let order = delivery.payload();
        let id = order.order_id.to_string();
        let attempt = self.shop.attempt(&id);
        if order.customer_id == "blocked" {
            return Err(HandlerError::non_retryable(
                "customer `blocked` may not order",
            ));
        }
        DB::insert_shipment(transaction, &id).await?;
        if order.customer_id.starts_with("flaky") && attempt == 1 {
            // After the write: it is rolled back with the inbox's record, and the retry
            // writes it again.
            return Err(HandlerError::retryable(std::io::Error::other(
                "warehouse timed out",
            )));
        }
        // A retried delivery carries its failure history: here, why the last attempt failed.
        let last_error = delivery
            .failure()
            .and_then(|failure| failure.last_error.as_deref())
            .map(|error| format!(" (last error: {error})"))
            .unwrap_or_default();
        self.shop.handled(format!(
            "fulfilled order …{} for {} after {} attempt(s), retry count {}{last_error}",
            short(&id),
            order.customer_id,
            attempt,
            delivery.retry_count()
        ));
        Ok(())
    }
}

impl consumers::BillOrders for Shop {
    async fn handle_batch(
        &self,
        batch: Vec<Delivery<OrderPlaced, OrderHeaders>>,
    ) -> Result<(), HandlerError> {
        let total: u64 = batch.iter().map(|d| d.payload().total.amount_minor).sum();
        self.handled(format!(
            "billed a batch of {} orders, {total} cents",
            batch.len()
        ));
        Ok(())
    }
}

impl consumers::NotifyCancellation for Shop {
    async fn handle(&self, delivery: Delivery<OrderCancelled>) -> Result<(), HandlerError> {
        let cancelled = delivery.payload();
        self.handled(format!(
            "told the customer order …{} was cancelled ({})",
            short(&cancelled.order_id.to_string()),
            cancelled.reason
        ));
        Ok(())
    }
}

/// Logs every dead letter with why it died: what an alert or a store of failures reads.
impl consumers::ReadDeadLetters for Shop {
    async fn handle(
        &self,
        failure: FailureContext,
        dead_letter: consumers::ReadDeadLettersMessage,
    ) -> Result<(), HandlerError> {
        use consumers::ReadDeadLettersMessage as Dead;
        let what = match dead_letter {
            Dead::OrderPlaced(order) => format!(
                "order …{} of {}",
                short(&order.payload().order_id.to_string()),
                order.payload().customer_id
            ),
            Dead::OrderCancelled(cancelled) => format!(
                "cancellation of order …{}",
                short(&cancelled.payload().order_id.to_string())
            ),
            Dead::QuoteRequest(request) => {
                format!("a quote of {} skus", request.payload().skus.len())
            }
            Dead::Raw(raw) => format!(
                "a `{}` message, {} bytes, none of the queue's ({})",
                raw.kind.as_deref().unwrap_or("?"),
                raw.body_len,
                raw.poison_detail
            ),
        };
        let line = format!(
            "{what}: reason {}, from consumer {} on queue {}, after {} retries, error \"{}\"",
            failure.reason.map_or("-", |r| r.as_str()),
            failure.consumer.as_deref().unwrap_or("-"),
            failure.queue.as_deref().unwrap_or("-"),
            failure.retry_count,
            failure.last_error.as_deref().unwrap_or("-"),
        );
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dead
            .push(line);
        Ok(())
    }
}

/// The distinctive end of an order id.
fn short(id: &str) -> &str {
    id.get(id.len().saturating_sub(4)..).unwrap_or(id)
}

/// An order, built with the generated builders (`build.rs` turns them on): each field is
/// converted into its type as it is set (`"EUR"` must match the currency pattern, `2` must be
/// above zero), and `try_into` fails when a required field is missing.
fn order(n: u32, customer: &str) -> Result<OrderPlaced, Box<dyn std::error::Error>> {
    // Each type's `new` takes its required properties, in field order; optional ones are
    // set on the value. Code built this way keeps compiling when a schema gains an optional
    // property, where a struct literal (which names every field) does not.
    let eur = |amount_minor: u64| -> Result<Money, ConversionError> {
        Ok(Money::new(amount_minor, Currency::try_from("EUR")?))
    };
    let quantity = NonZeroU64::new(2).ok_or("a quantity is not zero")?;
    let item = LineItem::new(quantity, "TEA-0001".to_owned(), eur(450)?);
    let address = Address::new(
        "Lyon".to_owned(),
        CountryCode::try_from("FR")?,
        AddressLine1::try_from("1 Main St")?,
    );
    let order_id = format!("0190a0b0-0000-7000-8000-{n:012}").parse()?;
    Ok(OrderPlaced::new(
        customer.to_owned(),
        vec![item],
        order_id,
        SystemTime::now().into(),
        address,
        eur(900)?,
    ))
}

/// Log lines on stderr, as the README advises: warren's spans (its OpenTelemetry attributes)
/// kept out of them, the service's own spans and every event kept.
fn logging() {
    use tracing_subscriber::filter::{LevelFilter, filter_fn};
    use tracing_subscriber::prelude::*;
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter_fn(|meta| {
            !(meta.is_span() && meta.target().starts_with("warren_runtime"))
                && LevelFilter::INFO >= *meta.level()
        }));
    tracing_subscriber::registry().with(lines).init();
}

/// The database the demo writes its orders, shipments, inbox and outbox to: SQLite, in a file
/// of its own, unless `DATABASE_URL` names a PostgreSQL, where it works in a schema of its
/// own. Both are removed at the end.
enum Database {
    Sqlite(SqlitePool, PathBuf),
    Postgres(PgPool, String),
}

impl Database {
    async fn open() -> Result<Self, Box<dyn std::error::Error>> {
        let run = format!("orders_demo_{}", std::process::id());
        match std::env::var("DATABASE_URL") {
            Ok(url) if url.starts_with("postgres") => {
                let admin = PgPool::connect(&url).await?;
                sqlx::query(&format!("CREATE SCHEMA {run}"))
                    .execute(&admin)
                    .await?;
                admin.close().await;
                let options = PgConnectOptions::from_str(&url)?.options([("search_path", &run)]);
                Ok(Self::Postgres(PgPool::connect_with(options).await?, run))
            }
            Ok(url) => Err(format!("DATABASE_URL `{url}` is not a postgres:// URL").into()),
            Err(_) => {
                let path = std::env::temp_dir().join(format!("{run}.sqlite"));
                let options = SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true);
                Ok(Self::Sqlite(SqlitePool::connect_with(options).await?, path))
            }
        }
    }

    async fn remove(self) -> Result<(), Box<dyn std::error::Error>> {
        match self {
            Self::Sqlite(pool, path) => {
                pool.close().await;
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Self::Postgres(pool, schema) => {
                sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
                    .execute(&pool)
                    .await?;
                pool.close().await;
            }
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    logging();
    // First: publishers and workers register their metrics when they start.
    let metrics = serve::install()?;
    // One URL, or a cluster's nodes, comma-separated: tried in turn when one fails.
    let connection = Connection::builder("warren-orders-demo")
        .urls(&url)
        .connect()
        .await?;
    let namespace = format!("demo.{}.", std::process::id());
    let topology = topology().namespaced(&namespace);
    warren_runtime::declare(&connection, &topology).await?;
    println!(
        "declared {} exchanges and {} queues under `{namespace}`",
        topology.exchanges.len(),
        topology.queues.len()
    );
    let database = Database::open().await?;
    let demo = Demo {
        connection: &connection,
        topology: &topology,
        metrics: &metrics,
    };
    let outcome = match &database {
        Database::Sqlite(pool, path) => {
            println!(
                "orders, shipments, inbox and outbox in SQLite at {}",
                path.display()
            );
            demo.run(pool).await
        }
        Database::Postgres(pool, schema) => {
            println!("orders, shipments, inbox and outbox in PostgreSQL, schema `{schema}`");
            demo.run(pool).await
        }
    };
    database.remove().await?;
    warren_runtime::delete(&connection, &topology).await?;
    connection.close().await?;
    outcome
}

/// What the demo runs on.
struct Demo<'a> {
    connection: &'a Connection,
    topology: &'a Topology,
    metrics: &'a PrometheusHandle,
}

impl Demo<'_> {
    async fn run<DB: Store>(&self, pool: &Pool<DB>) -> Result<(), Box<dyn std::error::Error>> {
        let (connection, topology) = (self.connection, self.topology);
        DB::create_tables(pool).await?;
        let inbox = Inbox::new(pool.clone());
        inbox.migrate().await?;
        let outbox = Outbox::new(pool.clone(), topology);
        outbox.migrate().await?;

        let shop = Shop::default();
        let publisher = Publisher::new(connection, topology).await?;
        let mut worker = Worker::new(connection.clone(), topology.clone());
        // The relay publishes what `place` committed, beside the consumers.
        worker.relay(outbox.relay(publisher.clone()).spawn());
        let stop = worker.shutdown_handle();
        let health = worker.health_handle();
        serve_endpoints(self.metrics, &health).await;
        let handlers = Handlers {
            bill_orders: shop.clone(),
            fulfil_order: Fulfil {
                shop: shop.clone(),
                inbox,
            },
            notify_cancellation: shop.clone(),
            quote_price: Quotes,
            read_dead_letters: shop.clone(),
        };
        let running = tokio::spawn(handlers.run(worker));

        let publishers = Publishers::new(publisher);
        place_orders(pool, &outbox, &publishers).await?;
        quote(connection, topology).await?;

        // Transient failures come back after 500 ms (the first ttl-backoff tier).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let linger = std::env::var("DEMO_LINGER_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(linger)).await;
        report(&health, self.metrics, &outbox).await?;
        stop.shutdown();
        running.await??;
        print_log(&shop);
        println!("\nshipments (each order once, though the flaky ones were written twice):");
        for (order_id, count) in DB::shipments(pool).await? {
            println!("  order …{}: {count}", short(&order_id));
        }
        Ok(())
    }
}

/// Places six orders through the outbox, each with its event in one transaction (what an
/// HTTP endpoint calls), the first a second time, which the database refuses, and publishes a
/// cancellation directly.
async fn place_orders<DB: Store>(
    pool: &Pool<DB>,
    outbox: &Outbox<DB>,
    publishers: &Publishers,
) -> Result<(), Box<dyn std::error::Error>> {
    let headers = OrderHeaders::new("acme".to_owned());
    let customers = [
        "alice",
        "bob",
        "flaky-carol",
        "dave",
        "blocked",
        "flaky-erin",
    ];
    // Each order and its event commit together (the outbox): what an HTTP endpoint calls.
    for (n, customer) in (1..).zip(customers) {
        place(
            pool,
            outbox,
            publishers,
            "eu",
            &order(n, customer)?,
            &headers,
        )
        .await?;
    }
    // Placing an order twice is refused by the database, and so is its event: nothing of
    // the second attempt is stored or published.
    let again = place(
        pool,
        outbox,
        publishers,
        "eu",
        &order(1, "alice")?,
        &headers,
    )
    .await;
    println!(
        "placed {} orders through the outbox; placing the first again: {}",
        customers.len(),
        again.map_or_else(|e| e.to_string(), |()| "placed?".to_owned())
    );
    // The builders (`Config::builders`) convert as they go, and report a required property
    // left unset when `try_into` runs, not when the code compiles.
    let cancelled: OrderCancelled = OrderCancelled::builder()
        .order_id("0190a0b0-0000-7000-8000-000000000002")
        .reason(OrderCancelledReason::CustomerRequest)
        .try_into()?;
    publishers.cancel_order("eu", &cancelled).await?;
    println!("published 1 cancellation directly\n");
    Ok(())
}

/// Serves the metrics and the health, unless the address is taken (a second demo running):
/// that costs the endpoints, not the demo.
async fn serve_endpoints(metrics: &PrometheusHandle, health: &HealthHandle) {
    let address = std::env::var("METRICS_ADDR").unwrap_or_else(|_| "127.0.0.1:9464".into());
    match tokio::net::TcpListener::bind(&address).await {
        Ok(listener) => {
            println!("metrics at http://{address}/metrics, health at http://{address}/health");
            tokio::spawn(serve::serve(listener, metrics.clone(), health.clone()));
        }
        Err(error) => eprintln!("not serving metrics and health on {address}: {error}"),
    }
}

/// A request/reply call: the basket is priced by `Quotes`, served by the same worker; a
/// basket with an unknown SKU comes back as the declared error `unknown_sku`.
async fn quote(
    connection: &Connection,
    topology: &Topology,
) -> Result<(), Box<dyn std::error::Error>> {
    let rpcs = RpcClients::new(RpcClient::new(connection, topology).await?);
    for skus in [vec!["TEA-0001", "MUG-0002"], vec!["TEA-0001", "GHOST-9"]] {
        let request = QuoteRequest::new(
            "eu".to_owned(),
            skus.iter().map(|s| (*s).to_owned()).collect(),
        );
        match rpcs.quote_price("eu", &request).await {
            Ok(quote) => println!(
                "quoted {skus:?}: {} {} cents",
                quote.total.currency.as_str(),
                quote.total.amount_minor
            ),
            Err(RpcError::Declared(error)) => println!("quote of {skus:?} refused: {error}"),
            Err(error) => println!("quote of {skus:?} failed: {error}"),
        }
    }
    Ok(())
}

/// The worker's health, its metrics and the outbox's backlog.
async fn report<DB: Store>(
    health: &HealthHandle,
    metrics: &PrometheusHandle,
    outbox: &Outbox<DB>,
) -> Result<(), Box<dyn std::error::Error>> {
    let snapshot = health.snapshot();
    println!(
        "health: ready {}, live {}, {} consumers subscribed, outbox rows waiting {}",
        snapshot.ready,
        snapshot.live,
        snapshot.consumers.iter().filter(|c| c.subscribed).count(),
        outbox.backlog().await?.pending,
    );
    println!("metrics (handled, retried, dead-lettered, relayed):");
    for line in metrics.render().lines().filter(|line| {
        [
            "warren_handled_total{",
            "warren_retried_total{",
            "warren_dead_lettered_total{",
            "warren_outbox_relayed_total{",
        ]
        .iter()
        .any(|name| line.starts_with(name))
            && !line.ends_with(" 0")
    }) {
        println!("  {line}");
    }
    println!();
    Ok(())
}

/// What the handlers saw.
fn print_log(shop: &Shop) {
    let (handled, dead) = {
        let log = shop.0.lock().unwrap_or_else(|e| e.into_inner());
        (log.handled.clone(), log.dead.clone())
    };
    for line in &handled {
        println!("  {line}");
    }
    println!("\ndead letters:");
    for line in &dead {
        println!("  {line}");
    }
}
