//! The generated code of every fixture contract, compiled with warnings denied (and linted
//! by `cargo clippy -D warnings` in CI). The snapshots in `tests/tests/snapshots/` pin the
//! same files' text.
//!
//! With them, the name property's cases (see `build.rs`): every contract of hostile names
//! that validates is compiled here, in [`names`]; [`NAME_CASES`] says what became of each.
//!
//! `missing_docs` is denied too: every public item the generator writes says what it is and
//! where in the contract it came from, the payload types (their fields, variants, builders
//! and setters) included.
//!
//! Contract text in those docs never runs as a doctest (the `hostile-docs` fixture puts
//! fences in names and descriptions, whose prose would fail to compile as Rust): `cargo test
//! --doc` on this crate runs only the doctests written here, on [`chosen`], which prove what
//! must not compile.
#![deny(warnings, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));

/// A generated `topology()`.
pub type TopologyFn = fn() -> warren_runtime::Topology;

/// Every fixture contract (its canonical path) with its generated `topology()`.
pub const TOPOLOGIES: &[(&str, TopologyFn)] = include!(concat!(env!("OUT_DIR"), "/topologies.rs"));

/// The orders example generated for the service serving its rpc `quote_price` alone: the
/// server trait, its `Handlers` field and register function, no client (see `build.rs`).
pub mod rpc_server {
    include!(concat!(env!("OUT_DIR"), "/rpc_server.rs"));
}

/// The orders example generated for a service calling its rpc `quote_price` alone:
/// `RpcClients` with that method, no server and no `Handlers` (see `build.rs`).
pub mod rpc_client {
    include!(concat!(env!("OUT_DIR"), "/rpc_client.rs"));
}

/// The settings fixture (`tests/fixtures/settings`) generated with every generator setting:
/// `Eq` and `Hash` derived, `#[must_use]`, builders, and the contract's `Money` replaced by
/// [`Money`] (see `build.rs`).
pub mod settings {
    include!(concat!(env!("OUT_DIR"), "/settings.rs"));
}

/// The orders example generated for a service that runs two of its three consumers
/// (`fulfil_order` and `bill_orders`) and publishes with one of its two publishers
/// (`place_order`): see `build.rs`. `Handlers` needs a handler for each chosen consumer, and
/// for no other; each can also be registered alone:
///
/// ```no_run
/// use warren_compile_fixtures::chosen::{Handlers, consumers, types};
/// use warren_runtime::inbox::{Inbox, InboxTransaction};
/// use warren_runtime::{Delivery, HandlerError, Worker};
///
/// // `fulfil_order` has `inbox: true`: its handler is handed the inbox's transaction.
/// struct Fulfil(Inbox<sqlx::Sqlite>);
/// impl consumers::FulfilOrder for Fulfil {
///     type Database = sqlx::Sqlite;
///     fn inbox(&self) -> Inbox<sqlx::Sqlite> {
///         self.0.clone()
///     }
///     async fn handle(
///         &self,
///         _: Delivery<types::OrderPlaced, types::OrderHeaders>,
///         _: &mut InboxTransaction<sqlx::Sqlite>,
///     ) -> Result<(), HandlerError> {
///         Ok(())
///     }
/// }
/// struct Bill;
/// impl consumers::BillOrders for Bill {
///     async fn handle_batch(
///         &self,
///         _: Vec<Delivery<types::OrderPlaced, types::OrderHeaders>>,
///     ) -> Result<(), HandlerError> {
///         Ok(())
///     }
/// }
/// fn every_chosen_consumer(worker: &mut Worker, inbox: Inbox<sqlx::Sqlite>) {
///     Handlers { fulfil_order: Fulfil(inbox), bill_orders: Bill }.register(worker);
/// }
/// fn one_consumer_alone(worker: &mut Worker, inbox: Inbox<sqlx::Sqlite>) {
///     consumers::register::fulfil_order(worker, Fulfil(inbox));
/// }
/// async fn place(
///     publishers: &warren_compile_fixtures::chosen::Publishers,
///     order: &types::OrderPlaced,
///     headers: &types::OrderHeaders,
/// ) {
///     let _ = publishers.place_order("eu", order, headers).await;
/// }
/// ```
///
/// Each `compile_fail` below is that code with one thing changed, so it fails for that thing
/// and not for a slip (stable rustdoc does not check the error code it names).
///
/// A chosen consumer without its handler does not compile (E0063: a missing field):
///
/// ```compile_fail,E0063
/// use warren_compile_fixtures::chosen::{Handlers, consumers, types};
/// use warren_runtime::inbox::{Inbox, InboxTransaction};
/// use warren_runtime::{Delivery, HandlerError};
///
/// // `fulfil_order` has `inbox: true`: its handler is handed the inbox's transaction.
/// struct Fulfil(Inbox<sqlx::Sqlite>);
/// impl consumers::FulfilOrder for Fulfil {
///     type Database = sqlx::Sqlite;
///     fn inbox(&self) -> Inbox<sqlx::Sqlite> {
///         self.0.clone()
///     }
///     async fn handle(
///         &self,
///         _: Delivery<types::OrderPlaced, types::OrderHeaders>,
///         _: &mut InboxTransaction<sqlx::Sqlite>,
///     ) -> Result<(), HandlerError> {
///         Ok(())
///     }
/// }
/// fn run(worker: &mut warren_runtime::Worker, inbox: Inbox<sqlx::Sqlite>) {
///     Handlers { fulfil_order: Fulfil(inbox) }.register(worker);
/// }
/// ```
///
/// A consumer left out has no trait (E0405) and no register function:
///
/// ```compile_fail,E0405
/// use warren_compile_fixtures::chosen::consumers;
///
/// struct Notify;
/// impl consumers::NotifyCancellation for Notify {}
/// ```
///
/// A publisher left out has no method (E0599):
///
/// ```compile_fail,E0599
/// use warren_compile_fixtures::chosen::{Publishers, types};
///
/// async fn cancel(publishers: &Publishers, cancelled: &types::OrderCancelled) {
///     let _ = publishers.cancel_order("eu", cancelled).await;
/// }
/// ```
pub mod chosen {
    include!(concat!(env!("OUT_DIR"), "/chosen.rs"));
}

/// The settings fixture generated with no consumer and no publisher (see `build.rs`): its
/// types, message markers and `topology()`, and no `Publishers`, `consumers` or `Handlers`.
pub mod types_only {
    include!(concat!(env!("OUT_DIR"), "/types_only.rs"));
}

/// The payload-shapes fixture with builders (see `build.rs`).
pub mod shapes_built {
    include!(concat!(env!("OUT_DIR"), "/shapes_built.rs"));
}

/// The hostile-names fixture with builders (see `build.rs`).
pub mod names_built {
    include!(concat!(env!("OUT_DIR"), "/names_built.rs"));
}

/// A user's own money type, replacing the settings fixture's generated `Money`: it implements
/// what the generated types derive, and serializes as the schema says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Money {
    /// Minor units (cents).
    pub amount_minor: u64,
    /// ISO 4217 code.
    pub currency: String,
}

/// One contract of the name property and its outcome.
#[derive(Debug)]
pub struct NameCase {
    /// `cover`, `random`, `clash` or `unsupported` (`warren_codegen::__fuzz::NameCaseKind`).
    pub kind: &'static str,
    /// The contract's text.
    pub contract: &'static str,
    /// What validation and generation made of it.
    pub outcome: NameOutcome,
}

/// What became of a name case.
#[derive(Debug)]
pub enum NameOutcome {
    /// It validated; its code is a module of [`names`], so this crate compiling is the proof
    /// that the code compiles.
    Generated,
    /// Validation refused it.
    Refused {
        /// The codes of its errors.
        codes: &'static [&'static str],
        /// The rendered diagnostics.
        report: &'static str,
    },
    /// It validated but generation failed: always a bug.
    Failed(&'static str),
}

include!(concat!(env!("OUT_DIR"), "/names.rs"));
