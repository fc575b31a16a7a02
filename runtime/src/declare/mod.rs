//! Declaring a topology on the broker, checking it, and removing it: the public functions on
//! a warren [`Connection`], over the lapin-level declares of `broker.rs` (which a reconnecting
//! connection runs on its new link before announcing it), with the errors of `error.rs`.

mod broker;
mod error;

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::types::ShortString;

use broker::{Mode, apply};
pub(crate) use broker::{declare_exchange, declare_on, declare_queue};
use error::channel_error;
pub(crate) use error::classify;
pub use error::{DeclareError, ImportProblem, TopologyEntity};

use crate::Connection;
use crate::model::Topology;

/// Declares every exchange, queue (wait queues included, with their arguments) and binding
/// of `topology`. Idempotent: declaring what already exists with the same settings is a
/// no-op; a difference is a [`DeclareError::Mismatch`] naming the queue and the argument.
///
/// The connection remembers the topology and declares it again after every reconnect,
/// before publishers and workers resume, so a broker that lost it (a non-durable queue, a
/// node rebuilt from scratch) has it back before the first message.
///
/// ```no_run
/// # async fn run(connection: warren_runtime::Connection, topology: warren_runtime::Topology) {
/// use warren_runtime::{DeclareError, TopologyEntity};
/// match warren_runtime::declare(&connection, &topology).await {
///     Ok(()) => {}
///     Err(DeclareError::Mismatch { kind: TopologyEntity::Queue, name, argument, .. }) => {
///         eprintln!("queue {name} was declared before with another {argument:?}");
///     }
///     Err(other) => eprintln!("{other}"),
/// }
/// # }
/// ```
pub async fn declare(connection: &Connection, topology: &Topology) -> Result<(), DeclareError> {
    topology.validate()?;
    // Remembered first, so a reconnect racing with this declare still re-declares it; and
    // forgotten if it fails, so a topology the broker refuses cannot block every reconnect.
    connection.remember(topology);
    let result = match link(connection) {
        Ok(link) => apply(&link, topology, Mode::Declare).await,
        Err(error) => Err(channel_error(error)),
    };
    if result.is_err() {
        connection.forget(topology);
    }
    result
}

/// Declares `topology` once, without remembering it for reconnects: for tools
/// (`warren plan`) that deploy a topology they do not run.
pub(crate) async fn declare_once(
    connection: &Connection,
    topology: &Topology,
) -> Result<(), DeclareError> {
    let link = link(connection).map_err(channel_error)?;
    apply(&link, topology, Mode::Declare).await
}

/// Checks that every exchange and queue of `topology` exists, without creating or changing
/// anything (passive declares). Bindings cannot be checked this way and are not.
///
/// ```no_run
/// # async fn run(connection: warren_runtime::Connection, topology: warren_runtime::Topology) -> Result<(), warren_runtime::DeclareError> {
/// // A service that may not declare (the platform team does) checks at start-up instead.
/// warren_runtime::verify(&connection, &topology).await?;
/// # Ok(()) }
/// ```
pub async fn verify(connection: &Connection, topology: &Topology) -> Result<(), DeclareError> {
    topology.validate()?;
    let link = link(connection).map_err(channel_error)?;
    apply(&link, topology, Mode::Check).await
}

/// Deletes every queue and exchange of `topology`, messages included, and stops declaring it
/// on reconnect. Meant for tests and for tearing down a namespace; it does not ask twice.
///
/// ```no_run
/// # async fn run(connection: warren_runtime::Connection, topology: warren_runtime::Topology) -> Result<(), warren_runtime::DeclareError> {
/// let scratch = topology.namespaced("test.run-7.");
/// warren_runtime::declare(&connection, &scratch).await?;
/// // … the test …
/// warren_runtime::delete(&connection, &scratch).await?;
/// # Ok(()) }
/// ```
pub async fn delete(connection: &Connection, topology: &Topology) -> Result<(), DeclareError> {
    connection.forget(topology);
    let channel = connection.create_channel().await.map_err(channel_error)?;
    for queue in &topology.queues {
        channel
            .queue_delete(
                ShortString::from(queue.name.as_str()),
                QueueDeleteOptions::default(),
            )
            .await
            .map_err(|e| classify(TopologyEntity::Queue, &queue.name, e))?;
    }
    for exchange in &topology.exchanges {
        channel
            .exchange_delete(
                ShortString::from(exchange.name.as_str()),
                ExchangeDeleteOptions::default(),
            )
            .await
            .map_err(|e| classify(TopologyEntity::Exchange, &exchange.name, e))?;
    }
    let _ = channel.close(200, ShortString::from("deleted")).await;
    Ok(())
}

/// The current link of `connection`, to declare on.
fn link(connection: &Connection) -> Result<std::sync::Arc<lapin::Connection>, lapin::Error> {
    connection
        .lapin()
        .ok_or_else(|| connection.unavailable().into_lapin())
}
