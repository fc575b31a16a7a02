//! The kit's [`Trial`] without a broker, as a team's handler tests use it: the orders
//! example's generated handlers tried through the worker's own decode and retry policy, and
//! what the worker would do with each delivery. (`tests/broker/tests/trial.rs` proves, on the
//! broker, that a running worker decides the same.)

mod common;

use std::time::Duration;

use common::{headers, order};
use warren_example_orders::rpcs::{QuotePrice, QuotePriceError};
use warren_example_orders::types::{OrderHeaders, OrderPlaced, QuoteRequest};
use warren_example_orders::{consumers, messages, topology};
use warren_runtime::inbox::{Inbox, InboxTransaction};
use warren_runtime::lapin::BasicProperties;
use warren_runtime::lapin::types::{AMQPValue, ShortString};
use warren_runtime::model::FailureReason;
use warren_runtime::rpc::RpcError;
use warren_runtime::trial::{Arrival, TRIAL_REPLY_TO, TrialError, Verdict};
use warren_runtime::{Delivery, HandlerError, NoHeaders};
use warren_testkit::{Seen, Trial};

/// Fulfilment refuses blocked customers for good and fails `flaky` ones retryably; billing
/// fails every batch holding a `flaky` customer. Every attempt is recorded.
#[derive(Clone)]
struct Shop {
    seen: Seen<String>,
    inbox: Inbox<sqlx::Sqlite>,
}

impl Shop {
    async fn new() -> Self {
        let inbox = common::sqlite_inbox().await;
        Self {
            seen: Seen::default(),
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
        let customer = delivery.payload().customer_id.clone();
        self.seen.record(format!("fulfil {customer}"));
        match customer.as_str() {
            "blocked" => Err(HandlerError::non_retryable(
                "customer `blocked` may not order",
            )),
            "flaky" => Err(HandlerError::retryable(std::io::Error::other(
                "the warehouse timed out",
            ))),
            _ => Ok(()),
        }
    }
}

impl consumers::BillOrders for Shop {
    async fn handle_batch(
        &self,
        batch: Vec<Delivery<OrderPlaced, OrderHeaders>>,
    ) -> Result<(), HandlerError> {
        for delivery in &batch {
            let customer = &delivery.payload().customer_id;
            self.seen.record(format!("bill {customer}"));
            if customer == "flaky" {
                return Err(HandlerError::retryable(std::io::Error::other(
                    "the payment service timed out",
                )));
            }
        }
        Ok(())
    }
}

/// A placed order as the publisher sends it, through the key a region's orders take.
fn placed(n: u32, customer: &str) -> Arrival {
    Arrival::of(messages::OrderPlaced, &order(n, customer), &headers())
        .expect("a valid order publishes")
        .via("orders", "order.eu.placed")
}

fn header(verdict: &Verdict, key: &str) -> Option<String> {
    match verdict.copy_headers()?.inner().get(key)? {
        AMQPValue::LongString(text) => Some(text.to_string()),
        AMQPValue::LongLongInt(n) => Some(n.to_string()),
        other => Some(format!("{other:?}")),
    }
}

async fn trial(shop: &Shop) -> Trial {
    // `jitter(0.0)`: the wait tier of a retry is asserted, so it is not picked at random.
    let mut trial = Trial::new(topology()).jitter(0.0);
    consumers::register::fulfil_order(trial.worker(), shop.clone());
    consumers::register::bill_orders(trial.worker(), shop.clone());
    trial
}

/// Fulfilment (an inbox consumer on a ttl-backoff queue, its inbox in SQLite): a handled
/// order is acked, and the same order again is acked without running the handler (the
/// inbox); a refused one is dead-lettered with the reason and context its dead letter
/// carries; a failing one goes to the first wait queue, and once its retries are spent it is
/// dead-lettered as exhausted.
#[tokio::test]
async fn fulfilment_is_acked_retried_or_dead_lettered_as_the_worker_would() {
    let shop = Shop::new().await;
    let trial = trial(&shop).await;

    // The same message twice (one message id), as a redelivery brings it.
    let alice = placed(1, "alice");
    assert_eq!(trial.arrive("fulfil_order", &alice).await, Verdict::Acked);
    assert_eq!(trial.arrive("fulfil_order", &alice).await, Verdict::Acked);
    assert_eq!(shop.seen.all(), ["fulfil alice"], "the inbox ran it once");

    let refused = trial.arrive("fulfil_order", &placed(2, "blocked")).await;
    let Verdict::DeadLettered {
        reason,
        exchange,
        routing_key,
        ..
    } = &refused
    else {
        panic!("dead-lettered: {refused:?}");
    };
    assert_eq!(*reason, FailureReason::NonRetryable);
    assert_eq!(
        (exchange.as_str(), routing_key.as_str()),
        ("orders.dlx", "orders.fulfilment")
    );
    assert_eq!(refused.error(), Some("customer `blocked` may not order"));
    for (key, value) in [
        ("x-failure-reason", "non-retryable"),
        ("x-consumer", "fulfil_order"),
        ("x-failed-queue", "orders.fulfilment"),
        ("x-original-exchange", "orders"),
        ("x-original-routing-key", "order.eu.placed"),
        ("x-retry-count", "0"),
        ("tenant", "acme"),
    ] {
        assert_eq!(header(&refused, key).as_deref(), Some(value), "{key}");
    }

    let retried = trial.arrive("fulfil_order", &placed(3, "flaky")).await;
    let Verdict::Retried {
        routing_key,
        delay,
        retry_count,
        ..
    } = &retried
    else {
        panic!("retried: {retried:?}");
    };
    assert!(
        routing_key.starts_with("orders.fulfilment.wait."),
        "{routing_key}"
    );
    assert_eq!(*retry_count, 1);
    let delay = delay.expect("a wait queue's delay");
    assert!(
        delay <= Duration::from_millis(500),
        "about the initial delay: {delay:?}"
    );
    assert_eq!(
        header(&retried, "x-last-error").as_deref(),
        Some("the warehouse timed out")
    );
    assert_eq!(
        header(&retried, "x-failure-reason"),
        None,
        "a retry is no dead letter"
    );

    // Its fifth retry failed too: `max_retries: 5` is spent.
    let last = trial
        .arrive("fulfil_order", &placed(3, "flaky").retried(5))
        .await;
    assert_eq!(last.reason(), Some(FailureReason::Exhausted));
    assert_eq!(header(&last, "x-retry-count").as_deref(), Some("5"));
}

/// Billing (a batch consumer, immediate-requeue on a quorum queue, which the broker counts):
/// a failing order is requeued, its retry counted by the broker, until the last delivery the
/// budget allows, which is dead-lettered. Poison never reaches the handler.
#[tokio::test]
async fn billing_requeues_then_dead_letters_and_poison_skips_the_handler() {
    let shop = Shop::new().await;
    let trial = trial(&shop).await;

    let failed = trial.arrive("bill_orders", &placed(4, "flaky")).await;
    assert!(
        matches!(
            failed,
            Verdict::Requeued {
                exhausted: false,
                ..
            }
        ),
        "{failed:?}"
    );
    assert_eq!(failed.error(), Some("the payment service timed out"));
    let spent = trial
        .arrive("bill_orders", &placed(4, "flaky").retried(3))
        .await;
    assert_eq!(spent.reason(), Some(FailureReason::Exhausted));
    assert_eq!(shop.seen.all(), ["bill flaky", "bill flaky"]);

    // Another stack's order without its required fields, and one in the wrong format.
    let json = BasicProperties::default().with_content_type(ShortString::from("application/json"));
    let invalid =
        Arrival::raw(br#"{"order_id": 1}"#.to_vec(), json.clone()).via("orders", "order.eu.placed");
    let verdict = trial.arrive("bill_orders", &invalid).await;
    assert_eq!(verdict.reason(), Some(FailureReason::Validation));
    assert_eq!(
        header(&verdict, "x-failure-reason").as_deref(),
        Some("validation")
    );
    let text = BasicProperties::default().with_content_type(ShortString::from("text/plain"));
    let verdict = trial
        .arrive("bill_orders", &Arrival::raw(b"hello".to_vec(), text))
        .await;
    assert_eq!(verdict.reason(), Some(FailureReason::ContentType));
    assert_eq!(shop.seen.len(), 2, "poison never reached the handler");
}

/// A dead-letter consumer (the orders example's reads a queue with nowhere to dead-letter):
/// its dead letter handled is acked; failed, the broker returns it to its queue, never a copy.
#[tokio::test]
async fn a_dead_letter_is_acked_or_returned_to_its_queue() {
    let mut trial = Trial::new(topology());
    consumers::register::read_dead_letters(trial.worker(), Reader);
    let dead = |customer| placed(7, customer).via("orders.dlx", "orders.fulfilment");
    let read = trial.arrive("read_dead_letters", &dead("alice")).await;
    assert_eq!(read, Verdict::Acked);
    let failed = trial.arrive("read_dead_letters", &dead("flaky")).await;
    assert!(
        matches!(
            failed,
            Verdict::Requeued {
                exhausted: false,
                ..
            }
        ),
        "{failed:?}"
    );
    assert_eq!(failed.error(), Some("the alert store is down"));
}

/// The example's price server tried: a basket it knows is answered with its price, one it
/// does not with the declared error, both as the caller reads them; a request that is not
/// a basket is dead-lettered, and one that names no reply-to cannot be answered at all.
#[tokio::test]
async fn an_rpc_server_answers_with_its_reply() {
    let mut trial = Trial::new(topology());
    consumers::register::quote_price(trial.worker(), warren_example_orders::handlers::Quotes);
    let basket = |skus: &[&str]| QuoteRequest {
        skus: skus.iter().map(|sku| (*sku).to_owned()).collect(),
        region: "eu".to_owned(),
    };
    let quote = async |skus: &[&str]| {
        let request = basket(skus);
        trial
            .request("quote_price", QuotePrice, &request, &NoHeaders {})
            .await
    };

    let priced = quote(&["TEA-0001", "MUG-0002"]).await;
    let Some(Ok(price)) = priced.answer::<QuotePrice>() else {
        panic!("a price: {priced:?}");
    };
    assert_eq!(price.total.amount_minor, 1650);
    let Verdict::Replied { reply_to, .. } = &priced else {
        panic!("replied: {priced:?}");
    };
    assert_eq!(reply_to, TRIAL_REPLY_TO);

    let unknown = quote(&["TEA-0001", "GONE-9999"]).await;
    match unknown.answer::<QuotePrice>() {
        Some(Err(RpcError::Declared(QuotePriceError::UnknownSku(error)))) => {
            assert_eq!(error.sku, "GONE-9999");
        }
        other => panic!("the declared error: {other:?}"),
    }

    // Not a basket (and no reply-to): dead-lettered before the handler, as poison.
    let not_a_basket = placed(1, "alice").via("orders", "quote.eu");
    let poison = trial.arrive("quote_price", &not_a_basket).await;
    assert!(
        matches!(
            poison,
            Verdict::DeadLettered {
                reason: FailureReason::Decode,
                ..
            }
        ),
        "{poison:?}"
    );
    assert_eq!(poison.answer::<QuotePrice>().map(|_| ()), None);
}

/// A consumer that was not registered, or a route no broker delivers, is the test's
/// mistake, said as such.
#[tokio::test]
async fn what_a_trial_cannot_run_is_an_error_naming_it() {
    let shop = Shop::new().await;
    let trial = trial(&shop).await;
    let arrival = placed(5, "alice");
    let unknown = trial.try_arrive("notify_cancellation", &arrival).await;
    assert!(
        matches!(unknown, Err(TrialError::UnknownConsumer { .. })),
        "{unknown:?}"
    );
    // A route no broker delivers is refused, not a panic in lapin.
    let long = placed(6, "alice").via("x".repeat(300), "order.eu.placed");
    let refused = trial.try_arrive("fulfil_order", &long).await;
    assert!(
        matches!(refused, Err(TrialError::Route { .. })),
        "{refused:?}"
    );
}

struct Reader;

/// Stores each dead letter; the store is down for a `flaky` customer's.
impl consumers::ReadDeadLetters for Reader {
    async fn handle(
        &self,
        _failure: warren_runtime::FailureContext,
        dead_letter: consumers::ReadDeadLettersMessage,
    ) -> Result<(), HandlerError> {
        use consumers::ReadDeadLettersMessage as Dead;
        let flaky =
            matches!(&dead_letter, Dead::OrderPlaced(d) if d.payload().customer_id == "flaky");
        if flaky {
            return Err(HandlerError::retryable(std::io::Error::other(
                "the alert store is down",
            )));
        }
        Ok(())
    }
}
