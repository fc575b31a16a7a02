//! The kit on the real broker, as a team uses it: the orders example's generated handlers and
//! publishers, a namespaced topology, and the dead letters read back with why they died; and
//! the example's rpc, served by its own handler and called through the generated client.

mod common;

use std::time::Duration;

use common::{headers, order};
use warren_example_orders::rpcs::QuotePriceError;
use warren_example_orders::types::{OrderCancelled, OrderHeaders, OrderPlaced, QuoteRequest};
use warren_example_orders::{Publishers, RpcClients, consumers, handlers, messages, topology};
use warren_runtime::inbox::{Inbox, InboxTransaction};
use warren_runtime::lapin::BasicProperties;
use warren_runtime::lapin::types::ShortString;
use warren_runtime::model::FailureReason;
use warren_runtime::{Delivery, HandlerError, RpcError};
use warren_testkit::{Seen, TestBroker, wait_until};

const WAIT: Duration = Duration::from_secs(30);

/// Fulfilment refuses blocked customers for good; billing fails every batch with a customer
/// `flaky`, retryably; every attempt is recorded.
#[derive(Clone)]
struct Shop {
    fulfilled: Seen<String>,
    billed: Seen<String>,
    /// Fulfilment's inbox (`inbox: true` in the contract), in an in-memory SQLite.
    inbox: Inbox<sqlx::Sqlite>,
}

impl Shop {
    async fn new() -> Self {
        let inbox = common::sqlite_inbox().await;
        Self {
            fulfilled: Seen::default(),
            billed: Seen::default(),
            inbox,
        }
    }
}

impl consumers::FulfilOrder for Shop {
    type Database = sqlx::Sqlite;

    fn inbox(&self) -> Inbox<sqlx::Sqlite> {
        self.inbox.clone()
    }

    async fn handle(
        &self,
        delivery: Delivery<OrderPlaced, OrderHeaders>,
        _transaction: &mut InboxTransaction<sqlx::Sqlite>,
    ) -> Result<(), HandlerError> {
        let order = delivery.payload();
        self.fulfilled.record(order.customer_id.clone());
        if order.customer_id == "blocked" {
            return Err(HandlerError::non_retryable(
                "customer `blocked` may not order",
            ));
        }
        Ok(())
    }
}

impl consumers::BillOrders for Shop {
    async fn handle_batch(
        &self,
        batch: Vec<Delivery<OrderPlaced, OrderHeaders>>,
    ) -> Result<(), HandlerError> {
        let mut flaky = false;
        for delivery in &batch {
            self.billed.record(delivery.payload().customer_id.clone());
            flaky |= delivery.payload().customer_id == "flaky";
        }
        if flaky {
            return Err(HandlerError::retryable(std::io::Error::other(
                "the payment service timed out",
            )));
        }
        Ok(())
    }
}

impl consumers::NotifyCancellation for Shop {
    async fn handle(&self, _delivery: Delivery<OrderCancelled>) -> Result<(), HandlerError> {
        Ok(())
    }
}

#[tokio::test]
async fn dead_letters_say_why_each_order_failed() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("kit-orders", &topology()).await;
    let shop = Shop::new().await;
    let mut worker = deployed.worker();
    // Every consumer but the dead-letter reader, which would take the dead letters read here.
    consumers::register::fulfil_order(&mut worker, shop.clone());
    consumers::register::bill_orders(&mut worker, shop.clone());
    consumers::register::notify_cancellation(&mut worker, shop.clone());
    let mut running = deployed.start(worker);
    let publishers = Publishers::new(deployed.publisher().await);

    publishers
        .place_order("eu", &order(1, "alice"), &headers())
        .await
        .expect("published");
    publishers
        .place_order("eu", &order(2, "blocked"), &headers())
        .await
        .expect("published");
    // Billed first, so the flaky order comes alone in its batches: a batch fails as a whole.
    shop.billed.wait_for(2, WAIT).await;
    // Billing (immediate-requeue, 3 retries) tries it 4 times in all, then dead-letters it.
    publishers
        .place_order("eu", &order(3, "flaky"), &headers())
        .await
        .expect("published");
    shop.fulfilled.wait_for(3, WAIT).await;
    wait_until("billing tried the flaky order 4 times", WAIT, || {
        shop.billed.all().iter().filter(|c| *c == "flaky").count() >= 4
    })
    .await;

    let mut dead = deployed
        .take_dead_letters("orders.dead-letters", 2, WAIT)
        .await;
    assert_eq!(dead.len(), 2, "the blocked order and the flaky one");
    dead.sort_by_key(|d| d.reason());

    // The blocked customer: fulfilment gave up at once.
    let refused = &dead[1];
    let context = refused.context.clone().expect("a failure context");
    assert_eq!(context.reason, Some(FailureReason::NonRetryable));
    assert_eq!(
        refused.last_error(),
        Some("customer `blocked` may not order")
    );
    assert_eq!(context.retry_count, 0);
    assert_eq!(context.consumer.as_deref(), Some("fulfil_order"));
    assert_eq!(context.queue, Some(deployed.name("orders.fulfilment")));
    assert_eq!(context.original_exchange, Some(deployed.name("orders")));
    assert_eq!(
        context.original_routing_key.as_deref(),
        Some("order.eu.placed")
    );
    // Published gzip-compressed (`compression: gzip`): the kit inflates it to decode it.
    let payload = refused
        .payload::<messages::OrderPlaced>()
        .expect("the dead letter decodes as an order");
    assert_eq!(payload.customer_id, "blocked");
    assert_eq!(refused.header("tenant").as_deref(), Some("acme"));

    // The flaky order: billing retried it three times, then it was exhausted.
    let exhausted = &dead[0];
    assert_eq!(exhausted.reason(), Some("exhausted"));
    let context = exhausted.context.clone().expect("a failure context");
    assert_eq!(context.retry_count, 3);
    assert_eq!(context.consumer.as_deref(), Some("bill_orders"));
    assert_eq!(context.queue, Some(deployed.name("orders.billing")));
    assert!(
        exhausted
            .last_error()
            .is_some_and(|e| e.contains("the payment service timed out")),
        "{:?}",
        exhausted.last_error()
    );

    // Nothing else failed, and the queues are empty: alice was fulfilled and billed.
    assert_eq!(deployed.count_dead_letters("orders.dead-letters").await, 0);
    deployed
        .wait_until_ready("orders.fulfilment", 0, WAIT)
        .await;
    running.stop().await.expect("the worker stops cleanly");
    deployed.cleanup().await;
    broker.close().await;
}

#[tokio::test]
async fn peeking_leaves_a_poison_message_where_it_was() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("kit-peek", &topology()).await;
    let shop = Shop::new().await;
    // Fulfilment alone.
    let mut running = deployed.run_worker(|worker| {
        consumers::register::fulfil_order(worker, shop.clone());
    });

    // Not JSON, as a faulty producer sends it: the handler never sees it.
    let properties = BasicProperties::default()
        .with_content_type(ShortString::from("application/json"))
        .with_delivery_mode(2);
    deployed
        .publish_raw("orders", "order.eu.placed", b"{ not json", properties)
        .await;
    deployed
        .wait_until_ready("orders.dead-letters", 1, WAIT)
        .await;

    let peeked = deployed.peek_dead_letters("orders.dead-letters", 10).await;
    assert_eq!(peeked.len(), 1);
    assert_eq!(peeked[0].reason(), Some("decode"));
    assert_eq!(peeked[0].body, b"{ not json");
    let error = peeked[0]
        .payload::<messages::OrderPlaced>()
        .expect_err("not an order");
    assert!(
        error.contains("OrderPlaced") || error.contains("order_placed"),
        "{error}"
    );
    // Still there, and taken now.
    assert_eq!(deployed.count_dead_letters("orders.dead-letters").await, 1);
    let taken = deployed
        .take_dead_letters("orders.dead-letters", 1, WAIT)
        .await;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].body, b"{ not json");
    assert!(shop.fulfilled.is_empty(), "the handler never saw it");

    running.stop().await.expect("the worker stops cleanly");
    deployed.cleanup().await;
    broker.close().await;
}

/// The example's rpc end to end: its own `handlers::Quotes` serves `quote_price` on a worker,
/// and the generated `RpcClients` sends each basket to exchange `orders` with routing key
/// `quote.eu`: a known basket gets its typed quote, one with an unknown SKU the declared
/// error `unknown_sku`, naming that SKU.
#[tokio::test]
async fn quote_price_prices_a_basket_and_names_an_unknown_sku() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("kit-quotes", &topology()).await;
    let mut running = deployed.run_worker(|worker| {
        consumers::register::quote_price(worker, handlers::Quotes);
    });
    let rpcs = RpcClients::new(deployed.rpc_client().await);
    let basket = |skus: &[&str]| QuoteRequest {
        skus: skus.iter().map(|sku| (*sku).to_owned()).collect(),
        region: "eu".to_owned(),
    };

    let quote = rpcs
        .quote_price("eu", &basket(&["TEA-0001", "MUG-0002", "TEA-0001"]))
        .await
        .expect("a quote");
    assert_eq!(quote.total.amount_minor, 450 + 1200 + 450);
    assert_eq!(quote.total.currency.as_str(), "EUR");

    match rpcs
        .quote_price("eu", &basket(&["TEA-0001", "GHOST-9"]))
        .await
    {
        Err(RpcError::Declared(QuotePriceError::UnknownSku(error))) => {
            assert_eq!(error.sku, "GHOST-9");
        }
        other => panic!("expected the declared error `unknown_sku`, got {other:?}"),
    }

    // Both answered: a declared error is a reply, its request acknowledged, not dead-lettered.
    deployed.wait_until_ready("orders.quotes", 0, WAIT).await;
    assert_eq!(deployed.count_dead_letters("orders.dead-letters").await, 0);
    running.stop().await.expect("the worker stops cleanly");
    deployed.cleanup().await;
    broker.close().await;
}
