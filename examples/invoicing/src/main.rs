//! The invoicing demo: the second team's service in its own binary. It shows the deploy
//! order two teams live with: invoicing refuses to start before the orders team's exchange
//! exists (naming the owner), then, once orders is deployed, invoices every order the orders
//! service publishes.
//!
//! ```sh
//! cargo run -p warren-example-invoicing              # against amqp://127.0.0.1:5672
//! ```
//!
//! Everything it declares lives under a `demo.<id>.` namespace and is deleted at the end.

use std::time::Duration;

use warren_example_invoicing::handlers::Invoicing;
use warren_example_invoicing::{Handlers, Publishers, topology};
use warren_example_orders::types::{OrderHeaders, OrderPlaced};
use warren_runtime::lapin::options::BasicGetOptions;
use warren_runtime::lapin::types::ShortString;
use warren_runtime::{Connection, Publisher, Worker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let connection = Connection::connect(&url, "warren-invoicing-demo").await?;
    let namespace = format!("demo.{}.", std::process::id());
    let invoicing = topology().namespaced(&namespace);
    let orders = warren_example_orders::topology().namespaced(&namespace);

    // Invoicing deploys before orders: refused, and nothing of its own is declared.
    if let Err(error) = warren_runtime::declare(&connection, &invoicing).await {
        println!("before the orders team deploys: {error}");
    }
    // The orders team deploys its contract; now invoicing starts.
    warren_runtime::declare(&connection, &orders).await?;
    warren_runtime::declare(&connection, &invoicing).await?;
    println!("orders deployed; invoicing declared only what it owns");

    // Where invoices go: in production another team's queue; here one the demo binds.
    let channel = connection.create_channel().await?;
    let invoices = ShortString::from(format!("{namespace}demo.invoices"));
    channel
        .queue_declare(invoices.clone(), Default::default(), Default::default())
        .await?;
    channel
        .queue_bind(
            invoices.clone(),
            ShortString::from(format!("{namespace}invoicing")),
            ShortString::from("invoice.#"),
            Default::default(),
            Default::default(),
        )
        .await?;

    let handler = Invoicing {
        publishers: Publishers::new(Publisher::new(&connection, &invoicing).await?),
    };
    let worker = Worker::new(connection.clone(), invoicing.clone());
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(
        Handlers {
            invoice_order: handler,
        }
        .run(worker),
    );

    // The orders service publishes with its own generated publisher.
    let orders_publishers =
        warren_example_orders::Publishers::new(Publisher::new(&connection, &orders).await?);
    let order: OrderPlaced = serde_json_order()?;
    let headers = OrderHeaders::new("acme".to_owned());
    orders_publishers
        .place_order("eu", &order, &headers)
        .await?;
    println!("the orders service placed order {}", order.order_id);

    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.shutdown();
    running.await??;
    while let Some(message) = channel
        .basic_get(invoices.clone(), BasicGetOptions { no_ack: true })
        .await?
    {
        println!(
            "invoice issued: {}",
            String::from_utf8_lossy(&message.delivery.data)
        );
    }
    channel.queue_delete(invoices, Default::default()).await?;
    warren_runtime::delete(&connection, &invoicing).await?;
    warren_runtime::delete(&connection, &orders).await?;
    connection.close().await?;
    Ok(())
}

/// An order as the orders service would build it, from its JSON.
fn serde_json_order() -> Result<OrderPlaced, Box<dyn std::error::Error>> {
    let json = r#"{
        "order_id": "0190a0b0-0000-7000-8000-000000000001",
        "customer_id": "alice",
        "items": [{ "sku": "TEA-0001", "quantity": 2, "unit_price": { "amount_minor": 450, "currency": "EUR" } }],
        "total": { "amount_minor": 900, "currency": "EUR" },
        "shipping_address": { "line1": "1 Main St", "city": "Lyon", "country": "FR" },
        "placed_at": "2026-12-01T09:00:00Z"
    }"#;
    Ok(serde_json::from_str(json)?)
}
