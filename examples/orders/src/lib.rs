//! The orders example: the contract in `warren.yaml`, compiled by `build.rs`.
//!
//! Everything below `include!` is generated: `types` (payloads), `messages`, `Publishers`,
//! `rpcs` (the request/reply operations) and `RpcClients`, `consumers` (one handler trait per
//! consumer and rpc server), `Handlers` and `topology()`.

include!(concat!(env!("OUT_DIR"), "/orders.rs"));

/// Example handlers, as a service would write them.
pub mod handlers {
    use warren_runtime::{DeadLetter, Delivery, HandlerError, RpcHandlerError};

    use crate::rpcs::QuotePriceError;
    use crate::types::{
        Currency, Money, OrderCancelled, OrderHeaders, OrderPlaced, PriceQuote, QuoteError,
        QuoteRequest,
    };

    /// Ships orders.
    pub struct Fulfilment;

    impl crate::consumers::FulfilOrder for Fulfilment {
        async fn handle(
            &self,
            delivery: Delivery<OrderPlaced, OrderHeaders>,
        ) -> Result<(), HandlerError> {
            let order = delivery.payload();
            if order.items.is_empty() {
                // Deterministic: retrying cannot help.
                return Err(HandlerError::non_retryable("an order without items"));
            }
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
            dead_letter: DeadLetter<OrderPlaced, OrderHeaders>,
        ) -> Result<(), HandlerError> {
            let failure = dead_letter.failure();
            eprintln!(
                "dead letter ({}): reason {:?}, consumer {:?}, queue {:?}, error {:?}",
                if dead_letter.raw().is_some() {
                    "poison"
                } else {
                    "typed"
                },
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
    pub fn fulfilment_only(worker: &mut warren_runtime::Worker) {
        crate::consumers::register::fulfil_order(worker, Fulfilment);
    }

    /// Every handler the contract needs: leaving one out does not compile.
    pub fn all() -> crate::Handlers<Billing, Fulfilment, Notifications, Quotes, DeadLetters> {
        crate::Handlers {
            fulfil_order: Fulfilment,
            bill_orders: Billing,
            notify_cancellation: Notifications,
            quote_price: Quotes,
            read_dead_letters: DeadLetters,
        }
    }
}
