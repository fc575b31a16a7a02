//! What the kit's tests of the orders example share: an order, its headers, and an inbox in
//! an in-memory SQLite.

use std::time::SystemTime;

use sqlx::sqlite::SqlitePoolOptions;
use warren_example_orders::types::{Address, LineItem, Money, OrderHeaders, OrderPlaced};
use warren_runtime::inbox::Inbox;

/// Order `n` of `customer`: one line item, shipped to Lyon.
pub fn order(n: u32, customer: &str) -> OrderPlaced {
    let eur = |amount_minor: u64| Money::builder().amount_minor(amount_minor).currency("EUR");
    let item = LineItem::builder()
        .sku("TEA-0001")
        .quantity(2_u64)
        .unit_price(eur(450))
        .try_into()
        .expect("a valid line item");
    OrderPlaced::builder()
        .order_id(format!("0190a0b0-0000-7000-8000-{n:012}").as_str())
        .customer_id(customer)
        .items(vec![item])
        .total(eur(900))
        .shipping_address(
            Address::builder()
                .line1("1 Main St")
                .city("Lyon")
                .country("FR"),
        )
        .placed_at(SystemTime::now())
        .try_into()
        .expect("a valid order")
}

/// Tenant `acme`'s headers.
pub fn headers() -> OrderHeaders {
    OrderHeaders {
        tenant: "acme".into(),
        trace_id: None,
    }
}

/// An inbox in an in-memory SQLite, its table created.
pub async fn sqlite_inbox() -> Inbox<sqlx::Sqlite> {
    // One connection: each connection to `sqlite::memory:` is a database of its own.
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect("sqlite::memory:")
        .await
        .expect("SQLite opens");
    let inbox = Inbox::new(pool);
    inbox.migrate().await.expect("the inbox's table");
    inbox
}
