//! Two teams, two contracts, one broker: the invoicing contract imports the orders contract,
//! binds its own queue to the orders team's exchange and consumes `orders::order_placed`.
//!
//! Declaring invoicing never declares what orders owns: before the orders team deploys, it
//! fails naming the owner and declares nothing of its own; against an `orders` exchange that
//! differs from the orders contract, it fails the same way; once orders is deployed, an order
//! the orders team publishes with its own generated publisher reaches the invoicing handler,
//! typed with the orders crate's own `OrderPlaced`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use warren_broker_tests::amqp_url;
use warren_example_orders::types::{OrderHeaders, OrderPlaced};
use warren_runtime::model::{Exchange, ExchangeKind, Topology};
use warren_runtime::{
    Connection, DeclareError, Delivery, HandlerError, ImportProblem, Publisher, Worker,
};
use warren_testkit::queue_exists;

/// A namespace of this test's own.
fn namespace(what: &str) -> String {
    format!("test.imports.{what}.{}.", std::process::id())
}

/// An order as the orders team publishes it.
fn order() -> OrderPlaced {
    serde_json::from_value(serde_json::json!({
        "order_id": "0190a0b0-0000-7000-8000-000000000042",
        "customer_id": "alice",
        "items": [{ "sku": "TEA-1", "quantity": 1, "unit_price": { "amount_minor": 450, "currency": "EUR" } }],
        "total": { "amount_minor": 450, "currency": "EUR" },
        "shipping_address": { "line1": "1 Main St", "city": "Lyon", "country": "FR" },
        "placed_at": "2026-12-01T00:00:00Z"
    }))
    .expect("a valid order")
}

/// Records the orders the invoicing consumer received.
#[derive(Clone, Default)]
struct Invoiced(Arc<Mutex<Vec<String>>>);

impl warren_example_invoicing::consumers::InvoiceOrder for Invoiced {
    // The orders crate's `OrderPlaced`: `build.rs` takes the imported types from there.
    async fn handle(
        &self,
        delivery: Delivery<OrderPlaced, OrderHeaders>,
    ) -> Result<(), HandlerError> {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.push(format!(
            "{} for {}",
            delivery.payload().order_id,
            delivery.headers().tenant
        ));
        Ok(())
    }
}

#[tokio::test]
async fn an_importing_contract_declares_only_what_it_owns() {
    let connection = Connection::connect(&amqp_url(), "warren-test-imports")
        .await
        .expect("the broker answers");
    let space = namespace("deploy");
    let orders = warren_example_orders::topology().namespaced(&space);
    let invoicing = warren_example_invoicing::topology().namespaced(&space);
    assert!(
        invoicing
            .exchanges
            .iter()
            .all(|e| !e.name.ends_with(".orders")),
        "invoicing declares no orders exchange"
    );

    // 1. Invoicing deploys first: refused, naming the owner, and nothing of its own declared.
    let error = warren_runtime::declare(&connection, &invoicing)
        .await
        .expect_err("the orders exchange is not there yet");
    match &error {
        DeclareError::Imported {
            contract,
            name,
            problem: ImportProblem::Missing,
            ..
        } => {
            assert_eq!(name, &format!("{space}orders"));
            assert_eq!(contract, "`orders` (../orders/warren.yaml)");
        }
        other => panic!("expected a missing import, got {other:?}"),
    }
    assert!(
        error
            .to_string()
            .contains("imports from `orders` (../orders/warren.yaml)"),
        "{error}"
    );
    assert!(!queue_exists(&connection, &format!("{space}invoicing.orders")).await);

    // 2. The orders team deploys; then invoicing does, and starts consuming.
    warren_runtime::declare(&connection, &orders)
        .await
        .expect("orders declares");
    warren_runtime::declare(&connection, &invoicing)
        .await
        .expect("invoicing declares once orders is there");
    warren_runtime::verify(&connection, &invoicing)
        .await
        .expect("and verifies");
    let invoiced = Invoiced::default();
    let worker = Worker::new(connection.clone(), invoicing.clone());
    let stop = worker.shutdown_handle();
    let handlers = warren_example_invoicing::Handlers {
        invoice_order: invoiced.clone(),
    };
    let running = tokio::spawn(handlers.run(worker));

    // 3. The orders team publishes with its own generated publisher.
    let publishers = warren_example_orders::Publishers::new(
        Publisher::new(&connection, &orders)
            .await
            .expect("a publisher"),
    );
    let headers = OrderHeaders {
        tenant: "acme".into(),
        trace_id: None,
    };
    publishers
        .place_order("eu", &order(), &headers)
        .await
        .expect("confirmed");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while invoiced
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_empty()
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.shutdown();
    running
        .await
        .expect("the worker task")
        .expect("the worker stops cleanly");
    assert_eq!(
        *invoiced.0.lock().unwrap_or_else(|e| e.into_inner()),
        ["0190a0b0-0000-7000-8000-000000000042 for acme"]
    );

    // Deleting invoicing leaves what orders owns.
    warren_runtime::delete(&connection, &invoicing)
        .await
        .expect("deleted");
    warren_runtime::verify(&connection, &orders)
        .await
        .expect("the orders topology is untouched");
    warren_runtime::delete(&connection, &orders)
        .await
        .expect("deleted");
}

#[tokio::test]
async fn an_imported_exchange_that_differs_is_refused_naming_its_owner() {
    let connection = Connection::connect(&amqp_url(), "warren-test-imports-differ")
        .await
        .expect("the broker answers");
    let space = namespace("differ");
    // Someone declared `orders` as a fanout exchange, not the orders contract's topic one.
    let impostor = Topology::new(
        vec![Exchange {
            name: "orders".into(),
            kind: ExchangeKind::Fanout,
            durable: true,
            auto_delete: false,
            internal: false,
            alternate_exchange: None,
            arguments: Default::default(),
        }],
        Vec::new(),
        Vec::new(),
    )
    .namespaced(&space);
    warren_runtime::declare(&connection, &impostor)
        .await
        .expect("the impostor declares");
    let invoicing = warren_example_invoicing::topology().namespaced(&space);
    let error = warren_runtime::declare(&connection, &invoicing)
        .await
        .expect_err("the orders exchange differs");
    assert!(
        matches!(
            &error,
            DeclareError::Imported {
                problem: ImportProblem::Differs(_),
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("than its owner declares"),
        "{error}"
    );
    assert!(!queue_exists(&connection, &format!("{space}invoicing.orders")).await);
    warren_runtime::delete(&connection, &impostor)
        .await
        .expect("deleted");
}
