//! Test a warren service's handlers and contract against a real RabbitMQ, in your own CI.
//!
//! A test connects to the broker at `AMQP_URL` ([`TestBroker::from_env`]; it fails, loudly,
//! when none answers: it never skips), declares the contract's topology under a namespace of
//! its own ([`TestBroker::deploy`]: tests running at once on one broker never see each
//! other's messages), runs the handlers under test in a worker ([`Deployed::worker`],
//! [`Deployed::start`], or [`Deployed::run_worker`]), publishes with the generated
//! publishers ([`Deployed::publisher`]) and calls its rpcs ([`Deployed::rpc_client`]),
//! waits for what should happen ([`Seen::wait_for`], [`wait_until`],
//! [`Deployed::wait_until_ready`]), reads what was dead-lettered and why
//! ([`Deployed::take_dead_letters`], [`QueuedDeadLetter::context`],
//! [`QueuedDeadLetter::payload`]), and removes its queues and exchanges
//! ([`Deployed::cleanup`]; a test that panics first removes them when its [`Deployed`] is
//! dropped).
//!
//! ```no_run
//! use std::time::{Duration, SystemTime};
//!
//! use warren_example_orders::types::{Address, LineItem, Money, OrderHeaders, OrderPlaced};
//! use warren_example_orders::{Publishers, consumers, messages, topology};
//! use warren_runtime::inbox::{Inbox, InboxTransaction};
//! use warren_runtime::{Delivery, HandlerError};
//! use warren_testkit::{Seen, TestBroker};
//!
//! /// The handler under test: it refuses a blocked customer's orders, for good. Its consumer
//! /// has `inbox: true`, so it is handed the transaction its message is recorded in.
//! #[derive(Clone)]
//! struct Fulfilment {
//!     seen: Seen<String>,
//!     inbox: Inbox<sqlx::Sqlite>,
//! }
//!
//! impl consumers::FulfilOrder for Fulfilment {
//!     type Database = sqlx::Sqlite;
//!     fn inbox(&self) -> Inbox<sqlx::Sqlite> { self.inbox.clone() }
//!     async fn handle(
//!         &self,
//!         delivery: Delivery<OrderPlaced, OrderHeaders>,
//!         _transaction: &mut InboxTransaction<sqlx::Sqlite>,
//!     ) -> Result<(), HandlerError> {
//!         let order = delivery.payload();
//!         self.seen.record(order.customer_id.clone());
//!         if order.customer_id == "blocked" {
//!             return Err(HandlerError::non_retryable("customer `blocked` may not order"));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! // A test in your crate's `tests/`: mark it `#[tokio::test]`.
//! async fn a_blocked_customer_s_order_is_dead_lettered_with_the_reason() {
//!     // AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/%2f; panics if no broker answers.
//!     let broker = TestBroker::from_env().await;
//!     // The contract's topology under `test.fulfilment.<uuid>.`.
//!     let deployed = broker.deploy("fulfilment", &topology()).await;
//!
//!     // The inbox in an in-memory SQLite (one connection: each is a database of its own).
//!     let pool = sqlx::sqlite::SqlitePoolOptions::new().max_connections(1);
//!     let inbox = Inbox::new(pool.connect("sqlite::memory:").await.unwrap());
//!     inbox.migrate().await.unwrap();
//!     let fulfilment = Fulfilment { seen: Seen::default(), inbox };
//!     let mut worker = deployed.worker();
//!     // Only the consumer under test; not the contract's dead-letter reader, which would
//!     // take the dead letter this test reads.
//!     consumers::register::fulfil_order(&mut worker, fulfilment.clone());
//!     let mut running = deployed.start(worker);
//!
//!     let publishers = Publishers::new(deployed.publisher().await);
//!     let headers = OrderHeaders { tenant: "acme".into(), trace_id: None };
//!     publishers.place_order("eu", &order("blocked"), &headers).await.unwrap();
//!
//!     // Until the handler saw it (or a panic saying it did not, after 10 s).
//!     fulfilment.seen.wait_for(1, Duration::from_secs(10)).await;
//!     // Until the dead letter is there; taken (acknowledged) as it is read.
//!     let dead = deployed.take_dead_letters("orders.dead-letters", 1, Duration::from_secs(10)).await;
//!     assert_eq!(dead.len(), 1);
//!     assert_eq!(dead[0].reason(), Some("non-retryable"));
//!     assert_eq!(dead[0].last_error(), Some("customer `blocked` may not order"));
//!     let context = dead[0].context.as_ref().unwrap(); // the whole FailureContext
//!     assert_eq!(context.consumer.as_deref(), Some("fulfil_order"));
//!     assert_eq!(dead[0].payload::<messages::OrderPlaced>().unwrap().customer_id, "blocked");
//!
//!     running.stop().await.unwrap();
//!     deployed.cleanup().await; // also done, best effort, if the test panics before
//! }
//!
//! fn order(customer: &str) -> OrderPlaced {
//!     let eur = |amount_minor: u64| Money::builder().amount_minor(amount_minor).currency("EUR");
//!     let item = LineItem::builder().sku("TEA-0001").quantity(2_u64).unit_price(eur(450));
//!     OrderPlaced::builder()
//!         .order_id("0190a0b0-0000-7000-8000-000000000001")
//!         .customer_id(customer)
//!         .items(vec![item.try_into().unwrap()])
//!         .total(eur(900))
//!         .shipping_address(Address::builder().line1("1 Main St").city("Lyon").country("FR"))
//!         .placed_at(SystemTime::now())
//!         .try_into()
//!         .unwrap()
//! }
//! ```
//!
//! # In CI
//!
//! Start a RabbitMQ (a service container, or Debian's `rabbitmq-server` package), point
//! `AMQP_URL` at it, and run `cargo test`: see `testkit/README.md` in warren's repository.
//!
//! # Without a broker
//!
//! [`Trial`] runs a handler through the worker's own decode, the generated adapter and the
//! queue's retry policy, offline, and says what the worker would do with the delivery
//! (acked, retried with its wait queue, dead-lettered with its reason and headers…): a
//! handler's unit test that needs no RabbitMQ.
//!
//! # A broker of the test's own
//!
//! [`PrivateBroker`] starts a RabbitMQ node on a port of its own, for a test that kills or
//! restarts the broker under its worker; [`PrivateCluster`] starts a three-node cluster, for
//! a test that kills the node holding a quorum queue's leader and watches it fail over.

mod broker;
mod cluster;
mod dead_letters;
mod deployed;
mod private;
mod trial;
mod wait;
mod worker;

pub use broker::{
    AMQP_URL_VAR, DEFAULT_AMQP_URL, MANAGEMENT_URL_VAR, TestBroker, amqp_url, management,
    queue_exists, test_connection,
};
pub use cluster::PrivateCluster;
pub use dead_letters::QueuedDeadLetter;
pub use deployed::Deployed;
pub use private::PrivateBroker;
pub use trial::Trial;
pub use wait::{Changes, Seen, try_wait_until, wait_until, wait_until_async};
pub use worker::RunningWorker;
