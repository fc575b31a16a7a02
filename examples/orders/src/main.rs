//! The orders demo: declares the contract's topology on a broker, runs the worker, publishes
//! orders, and prints what was handled, retried and dead-lettered, with reasons (read by the
//! contract's dead-letter consumer).
//!
//! ```sh
//! cargo run -p warren-example-orders              # against amqp://127.0.0.1:5672
//! AMQP_URL=amqp://user:pass@host/vhost cargo run -p warren-example-orders
//! AMQP_URL=amqp://u:p@rabbit-1/%2f,amqp://u:p@rabbit-2/%2f cargo run -p warren-example-orders
//! ```
//!
//! Everything it declares lives under a `demo.<id>.` namespace and is deleted at the end.
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
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use warren_example_orders::handlers::Quotes;
use warren_example_orders::types::error::ConversionError;
use warren_example_orders::types::{
    Address, AddressLine1, CountryCode, Currency, LineItem, Money, OrderCancelled,
    OrderCancelledReason, OrderHeaders, OrderPlaced, QuoteRequest,
};
use warren_example_orders::{Handlers, Publishers, RpcClients, consumers, topology};
use warren_runtime::{
    Connection, DeadLetter, DeadMessage, Delivery, HandlerError, Publisher, RpcClient, RpcError,
    Worker,
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

impl consumers::FulfilOrder for Shop {
    async fn handle(
        &self,
        delivery: Delivery<OrderPlaced, OrderHeaders>,
    ) -> Result<(), HandlerError> {
        let order = delivery.payload();
        let id = order.order_id.to_string();
        let attempt = self.attempt(&id);
        if order.customer_id == "blocked" {
            return Err(HandlerError::non_retryable(
                "customer `blocked` may not order",
            ));
        }
        if order.customer_id.starts_with("flaky") && attempt == 1 {
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
        self.handled(format!(
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
        dead_letter: DeadLetter<OrderPlaced, OrderHeaders>,
    ) -> Result<(), HandlerError> {
        let failure = dead_letter.failure();
        let what = match dead_letter.message() {
            DeadMessage::Typed(delivery) => format!(
                "order …{} of {}",
                short(&delivery.payload().order_id.to_string()),
                delivery.payload().customer_id
            ),
            DeadMessage::Raw(raw) => format!(
                "a `{}` message, {} bytes, not an order ({})",
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
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

    let shop = Shop::default();
    let worker = Worker::new(connection.clone(), topology.clone());
    let stop = worker.shutdown_handle();
    let health = worker.health_handle();
    let address = std::env::var("METRICS_ADDR").unwrap_or_else(|_| "127.0.0.1:9464".into());
    // A port taken (a second demo running) costs the endpoints, not the demo: what it
    // declared is still deleted at the end.
    match tokio::net::TcpListener::bind(&address).await {
        Ok(listener) => {
            println!("metrics at http://{address}/metrics, health at http://{address}/health");
            tokio::spawn(serve::serve(listener, metrics.clone(), health.clone()));
        }
        Err(error) => eprintln!("not serving metrics and health on {address}: {error}"),
    }
    let handlers = Handlers {
        bill_orders: shop.clone(),
        fulfil_order: shop.clone(),
        notify_cancellation: shop.clone(),
        quote_price: Quotes,
        read_dead_letters: shop.clone(),
    };
    let running = tokio::spawn(handlers.run(worker));

    let publishers = Publishers::new(Publisher::new(&connection, &topology).await?);
    let headers = OrderHeaders::new("acme".to_owned());
    let customers = [
        "alice",
        "bob",
        "flaky-carol",
        "dave",
        "blocked",
        "flaky-erin",
    ];
    for (n, customer) in (1..).zip(customers) {
        publishers
            .place_order("eu", &order(n, customer)?, &headers)
            .await?;
    }
    // The builders (`Config::builders`) convert as they go, and report a required property
    // left unset when `try_into` runs, not when the code compiles.
    let cancelled: OrderCancelled = OrderCancelled::builder()
        .order_id("0190a0b0-0000-7000-8000-000000000002")
        .reason(OrderCancelledReason::CustomerRequest)
        .try_into()?;
    publishers.cancel_order("eu", &cancelled).await?;
    println!("published {} orders and 1 cancellation\n", customers.len());

    // A request/reply call: the basket is priced by `Quotes`, served by the same worker; a
    // basket with an unknown SKU comes back as the declared error `unknown_sku`.
    let rpcs = RpcClients::new(RpcClient::new(&connection, &topology).await?);
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

    // Transient failures come back after 500 ms (the first ttl-backoff tier).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let linger = std::env::var("DEMO_LINGER_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(linger)).await;
    let snapshot = health.snapshot();
    println!(
        "health: ready {}, live {}, {} consumers subscribed",
        snapshot.ready,
        snapshot.live,
        snapshot.consumers.iter().filter(|c| c.subscribed).count()
    );
    println!("metrics (handled, retried, dead-lettered):");
    for line in metrics.render().lines().filter(|line| {
        [
            "warren_handled_total{",
            "warren_retried_total{",
            "warren_dead_lettered_total{",
        ]
        .iter()
        .any(|name| line.starts_with(name))
            && !line.ends_with(" 0")
    }) {
        println!("  {line}");
    }
    println!();
    stop.shutdown();
    running.await??;

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
    warren_runtime::delete(&connection, &topology).await?;
    connection.close().await?;
    Ok(())
}
