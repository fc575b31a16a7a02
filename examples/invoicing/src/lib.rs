//! The invoicing example: a second team's service. Its contract (`warren.yaml`) imports the
//! orders contract, binds its own queue to the orders team's `orders` exchange and consumes
//! `orders::order_placed`; `build.rs` compiles it.
//!
//! Everything `include_generated!` includes is generated: `types` (its own payloads, and
//! aliases of the orders crate's types for what it imports), `messages`, `Publishers`,
//! `consumers`, `Handlers` and `topology()`, which declares only what invoicing owns and
//! checks the imported `orders` exchange on the broker.

warren_runtime::include_generated!("invoicing");

/// The invoicing handler, as the service writes it.
pub mod handlers {
    use warren_example_orders::types::{OrderHeaders, OrderPlaced};
    use warren_runtime::{Delivery, HandlerError};

    use crate::Publishers;
    use crate::types::InvoiceIssued;

    /// Issues one invoice per order placed.
    #[derive(Clone)]
    pub struct Invoicing {
        /// Where invoices are announced.
        pub publishers: Publishers,
    }

    impl crate::consumers::InvoiceOrder for Invoicing {
        // The orders crate's own `OrderPlaced`: the type the orders team publishes with.
        async fn handle(
            &self,
            delivery: Delivery<OrderPlaced, OrderHeaders>,
        ) -> Result<(), HandlerError> {
            let order = delivery.payload();
            let invoice = InvoiceIssued::new(
                format!("INV-{}", order.order_id),
                std::time::SystemTime::now().into(),
                order.order_id,
                order.total.clone(),
            );
            self.publishers
                .issue_invoice("eu", &invoice)
                .await
                .map_err(HandlerError::retryable)
        }
    }
}
