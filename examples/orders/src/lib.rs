//! The orders example: the contract in `warren.yaml`, compiled by `build.rs`.
//!
//! Everything `include_generated!` includes is generated: `types` (payloads), `messages`,
//! `Publishers`, `rpcs` (the request/reply operations) and `RpcClients`, `consumers` (one
//! handler trait per consumer and rpc server), `Handlers` and `topology()`.
//!
//! Written by hand: [`place`], which records an order and its `order_placed` event in one
//! transaction (the outbox), [`handlers`], among them [`handlers::Fulfilment`], which ships
//! each order once (the inbox), and [`store`], the service's own tables on SQLite or
//! PostgreSQL.

warren_runtime::include_generated!("orders");

use warren_runtime::PublishError;
use warren_runtime::outbox::Outbox;

/// The service's own tables, `orders` and `shipments`, on SQLite or PostgreSQL. The inbox's
/// and the outbox's tables are warren's (`Inbox::migrate`, `Outbox::migrate`).
pub mod store {
    use std::future::Future;

    use sqlx::Pool;
    use warren_runtime::database::Backend;

    /// The example's statements on either database.
    pub trait Store: Backend {
        /// Creates tables `orders` and `shipments` when they do not exist.
        fn create_tables(pool: &Pool<Self>)
        -> impl Future<Output = Result<(), sqlx::Error>> + Send;
        /// Records order `order_id` of `customer` through `connection`.
        fn insert_order(
            connection: &mut Self::Connection,
            order_id: &str,
            customer: &str,
        ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
        /// Records the shipment of order `order_id` through `connection`.
        fn insert_shipment(
            connection: &mut Self::Connection,
            order_id: &str,
        ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
        /// How many shipments each order has, by order id.
        fn shipments(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<Vec<(String, i64)>, sqlx::Error>> + Send;
    }

    // The same SQL on both: `$1` placeholders are numbered parameters in SQLite too.
    macro_rules! store {
        ($db:ty) => {
            impl Store for $db {
                async fn create_tables(pool: &Pool<Self>) -> Result<(), sqlx::Error> {
                    for create in [
                        "CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, customer_id TEXT NOT NULL)",
                        "CREATE TABLE IF NOT EXISTS shipments (order_id TEXT NOT NULL)",
                    ] {
                        sqlx::query(create).execute(pool).await?;
                    }
                    Ok(())
                }

                async fn insert_order(
                    connection: &mut Self::Connection,
                    order_id: &str,
                    customer: &str,
                ) -> Result<(), sqlx::Error> {
                    sqlx::query("INSERT INTO orders (order_id, customer_id) VALUES ($1, $2)")
                        .bind(order_id)
                        .bind(customer)
                        .execute(connection)
                        .await?;
                    Ok(())
                }

                async fn insert_shipment(
                    connection: &mut Self::Connection,
                    order_id: &str,
                ) -> Result<(), sqlx::Error> {
                    sqlx::query("INSERT INTO shipments (order_id) VALUES ($1)")
                        .bind(order_id)
                        .execute(connection)
                        .await?;
                    Ok(())
                }

                async fn shipments(pool: &Pool<Self>) -> Result<Vec<(String, i64)>, sqlx::Error> {
                    sqlx::query_as(
                        "SELECT order_id, count(*) FROM shipments GROUP BY order_id ORDER BY order_id",
                    )
                    .fetch_all(pool)
                    .await
                }
            }
        };
    }

    store!(sqlx::Sqlite);
    store!(sqlx::Postgres);
}

/// Why an order was not placed: nothing of it was stored, and no event will be published.
#[derive(Debug)]
pub enum PlaceError {
    /// The database refused or could not be reached.
    Database(sqlx::Error),
    /// The event was refused before it was stored (it breaks its schema, say).
    Event(PublishError),
}

impl std::fmt::Display for PlaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Database(error) => write!(f, "the order was not stored: {error}"),
            Self::Event(error) => write!(f, "the order's event was refused: {error}"),
        }
    }
}

impl std::error::Error for PlaceError {}

impl From<sqlx::Error> for PlaceError {
    fn from(error: sqlx::Error) -> Self {
        Self::Database(error)
    }
}

impl From<PublishError> for PlaceError {
    fn from(error: PublishError) -> Self {
        Self::Event(error)
    }
}

/// Places `order` in `region`: records it in table `orders` and writes its `order_placed`
/// event into `outbox`, in one transaction, so both commit or neither does. The relay
/// publishes the event once the transaction committed (`Worker::relay`, or `warren outbox
/// relay`). What an HTTP endpoint, or any other caller, would call.
pub async fn place<DB: store::Store>(
    pool: &sqlx::Pool<DB>,
    outbox: &Outbox<DB>,
    publishers: &Publishers,
    region: &str,
    order: &types::OrderPlaced,
    headers: &types::OrderHeaders,
) -> Result<(), PlaceError> {
    let mut transaction = pool.begin().await?;
    DB::insert_order(
        &mut transaction,
        &order.order_id.to_string(),
        &order.customer_id,
    )
    .await?;
    // Validated exactly as a publish is; written into this transaction, not sent.
    publishers
        .through(outbox.writer(&mut transaction))
        .place_order(region, order, headers)
        .await?;
    transaction.commit().await?;
    Ok(())
}

/// Example handlers, as a service would write them.
pub mod handlers {
    use warren_runtime::inbox::{Inbox, InboxTransaction};
    use warren_runtime::{Delivery, FailureContext, HandlerError, RpcHandlerError};

    use crate::consumers::ReadDeadLettersMessage;
    use crate::rpcs::QuotePriceError;
    use crate::store::Store;
    use crate::types::{
        Currency, Money, OrderCancelled, OrderHeaders, OrderPlaced, PriceQuote, QuoteError,
        QuoteRequest,
    };

    /// Ships orders, each once: the shipment is written through the transaction in which
    /// the inbox records the message (`inbox: true` in the contract).
    pub struct Fulfilment<DB: Store> {
        /// The inbox, on the database table `shipments` is in.
        pub inbox: Inbox<DB>,
    }

    impl<DB: Store> crate::consumers::FulfilOrder for Fulfilment<DB> {
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
            if order.items.is_empty() {
                // Deterministic: retrying cannot help.
                return Err(HandlerError::non_retryable("an order without items"));
            }
            // A database error is retryable: it rolls back, and the retry ships it.
            DB::insert_shipment(transaction, &order.order_id.to_string()).await?;
            Ok(())
        }
    }

    /// Bills orders in batches.
    pub struct Billing;

    impl crate::consumers::BillOrders for Billing {
        async fn handle_batch(
            &self,
            batch: Vec<Delivery<OrderPlaced, OrderHeaders>>,
        ) -> Result<(), HandlerError> {
            let _total: u64 = batch.iter().map(|d| d.payload().total.amount_minor).sum();
            Ok(())
        }
    }

    /// Tells customers about cancellations.
    pub struct Notifications;

    impl crate::consumers::NotifyCancellation for Notifications {
        async fn handle(&self, delivery: Delivery<OrderCancelled>) -> Result<(), HandlerError> {
            let _reason = delivery.payload().reason;
            Ok(())
        }
    }

    /// Logs every dead letter with why it died.
    pub struct DeadLetters;

    impl crate::consumers::ReadDeadLetters for DeadLetters {
        async fn handle(
            &self,
            failure: FailureContext,
            dead_letter: ReadDeadLettersMessage,
        ) -> Result<(), HandlerError> {
            let what = match dead_letter {
                ReadDeadLettersMessage::OrderPlaced(_) => "an order",
                ReadDeadLettersMessage::OrderCancelled(_) => "a cancellation",
                ReadDeadLettersMessage::QuoteRequest(_) => "a quote request",
                ReadDeadLettersMessage::Raw(_) => "poison",
            };
            eprintln!(
                "dead letter ({what}): reason {:?}, consumer {:?}, queue {:?}, error {:?}",
                failure.reason.map(|r| r.as_str()),
                failure.consumer,
                failure.queue,
                failure.last_error,
            );
            Ok(())
        }
    }

    /// Prices baskets from a fixed catalogue (prices in euro cents).
    pub struct Quotes;

    impl Quotes {
        /// The price of one `sku`, when the catalogue has it.
        fn price(sku: &str) -> Option<u64> {
            match sku {
                "TEA-0001" => Some(450),
                "MUG-0002" => Some(1200),
                _ => None,
            }
        }
    }

    impl crate::consumers::QuotePrice for Quotes {
        async fn handle(
            &self,
            request: Delivery<QuoteRequest>,
        ) -> Result<PriceQuote, RpcHandlerError<QuotePriceError>> {
            let mut total: u64 = 0;
            for sku in &request.payload().skus {
                let Some(price) = Self::price(sku) else {
                    // A declared error: the caller gets it typed, and the request is not retried.
                    return Err(QuotePriceError::UnknownSku(QuoteError::new(sku.clone())).into());
                };
                total = total.saturating_add(price);
            }
            let currency = Currency::try_from("EUR")
                .map_err(|e| HandlerError::non_retryable(e.to_string()))?;
            Ok(PriceQuote::new(Money::new(total, currency)))
        }
    }

    /// A service running fulfilment alone registers that one consumer on its worker; the
    /// others run elsewhere. (`build.rs` may instead generate for a choice of consumers,
    /// `Config::consumer`, and `Handlers` then needs those alone.)
    pub fn fulfilment_only<DB: Store>(worker: &mut warren_runtime::Worker, inbox: Inbox<DB>) {
        crate::consumers::register::fulfil_order(worker, Fulfilment { inbox });
    }

    /// Every handler the contract needs: leaving one out does not compile.
    pub fn all<DB: Store>(
        inbox: Inbox<DB>,
    ) -> crate::Handlers<Billing, Fulfilment<DB>, Notifications, Quotes, DeadLetters> {
        crate::Handlers {
            fulfil_order: Fulfilment { inbox },
            bill_orders: Billing,
            notify_cancellation: Notifications,
            quote_price: Quotes,
            read_dead_letters: DeadLetters,
        }
    }
}
