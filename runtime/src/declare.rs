//! Declaring a topology on the broker, checking it, and removing it.

use lapin::ErrorKind;
use lapin::options::{
    ExchangeBindOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::ShortString;

use std::collections::BTreeSet;

use crate::error::Chain;
use crate::model::{Destination, Exchange, ExchangeKind, Topology, TopologyError};
use crate::{Connection, amqp};

/// What part of a topology a [`DeclareError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TopologyEntity {
    /// An exchange.
    Exchange,
    /// A queue.
    Queue,
    /// A binding (named by its source exchange).
    Binding,
}

impl std::fmt::Display for TopologyEntity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Exchange => "exchange",
            Self::Queue => "queue",
            Self::Binding => "binding",
        })
    }
}

/// Why declaring or checking a topology failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeclareError {
    /// The queue or exchange exists with other arguments or flags (`PRECONDITION_FAILED`).
    #[error("{kind} `{name}` already exists with {}", argument.as_ref().map_or("different settings".to_owned(), |a| format!("a different `{a}`")))]
    Mismatch {
        /// A queue or an exchange.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// The argument that differs, when the broker named it.
        argument: Option<String>,
        /// The broker's refusal, its message naming what differs.
        #[source]
        source: lapin::Error,
    },
    /// A passive check found the queue or exchange missing (`NOT_FOUND`).
    #[error("{kind} `{name}` does not exist")]
    Missing {
        /// A queue or an exchange.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// The broker's answer.
        #[source]
        source: lapin::Error,
    },
    /// The queue exists, but on a cluster node that is down (a classic queue's node): it
    /// cannot be declared or checked until its node is back. Declaring a topology passes over
    /// such a queue (and its bindings) with a warning rather than failing on it: it is there
    /// already, and no declare can bring its node back.
    #[error("{kind} `{name}` is on a cluster node that is down")]
    NodeDown {
        /// A queue.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// The broker's answer.
        #[source]
        source: lapin::Error,
    },
    /// Any other broker or connection failure.
    #[error("declaring {kind} `{name}` failed")]
    Broker {
        /// A queue, an exchange or a binding.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// The error.
        #[source]
        source: lapin::Error,
    },
    /// An exchange the topology imports from the contract that owns it is not on the broker
    /// as that contract declares it. Nothing of the importing contract was declared: deploy
    /// (or fix) the owning contract first, or ask its team.
    #[error("{kind} `{name}`, which this contract imports from {contract}, {problem}")]
    Imported {
        /// The owning contract, as the importing contract names it, with its path.
        contract: String,
        /// An exchange.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// Whether it is missing or different.
        problem: ImportProblem,
        /// The broker's answer.
        #[source]
        source: lapin::Error,
    },
    /// The channel to declare on could not be opened.
    #[error("cannot open a channel to declare on")]
    Channel(#[source] lapin::Error),
    /// The topology contradicts itself ([`Topology::validate`]): nothing was declared.
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// What is wrong with an imported exchange on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImportProblem {
    /// It does not exist (`NOT_FOUND`).
    Missing,
    /// It exists with other flags or arguments than its owner declares (`PRECONDITION_FAILED`);
    /// the argument when the broker named it.
    Differs(Option<String>),
}

impl std::fmt::Display for ImportProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => f.write_str("does not exist on the broker (is the owner deployed?)"),
            Self::Differs(None) => {
                f.write_str("exists on the broker with other settings than its owner declares")
            }
            Self::Differs(Some(argument)) => write!(
                f,
                "exists on the broker with another `{argument}` than its owner declares"
            ),
        }
    }
}

/// How to declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Declare,
    Check,
}

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

/// Declares `topology` on a connection being recovered, before it is announced.
pub(crate) async fn declare_on(
    connection: &lapin::Connection,
    topology: &Topology,
) -> Result<(), DeclareError> {
    apply(connection, topology, Mode::Declare).await
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

/// Declares or checks `topology` on a channel of `connection`, then closes the channel.
async fn apply(
    connection: &lapin::Connection,
    topology: &Topology,
    mode: Mode,
) -> Result<(), DeclareError> {
    let mut channel = connection.create_channel().await.map_err(channel_error)?;
    let broker = |kind: TopologyEntity, name: &str| {
        let name = name.to_owned();
        move |source| DeclareError::Broker { kind, name, source }
    };
    // What others own first: a contract whose imports are missing declares nothing, so a
    // half-deployed system fails at start-up with the owner's name, not later with a
    // publish that the broker drops or a binding it refuses.
    for import in &topology.imports {
        for exchange in &import.exchanges {
            check_imported(&channel, &import.contract, exchange).await?;
        }
    }
    let passive = mode == Mode::Check;
    for exchange in &topology.exchanges {
        declare_exchange(&channel, exchange, passive)
            .await
            .map_err(|e| classify(TopologyEntity::Exchange, &exchange.name, e))?;
    }
    let mut down: BTreeSet<&str> = BTreeSet::new();
    for queue in &topology.queues {
        let options = QueueDeclareOptions {
            passive,
            durable: queue.durable,
            exclusive: queue.exclusive,
            auto_delete: queue.auto_delete,
            nowait: false,
        };
        let declared = channel
            .queue_declare(
                ShortString::from(queue.name.as_str()),
                options,
                amqp::arguments(&queue.declare_arguments()),
            )
            .await
            .map_err(|e| classify(TopologyEntity::Queue, &queue.name, e));
        match declared {
            Ok(_) => {}
            Err(error @ DeclareError::NodeDown { .. }) => {
                tracing::warn!(queue = %queue.name, error = %Chain(&error), "a queue's cluster node is down; passing over it (it is back with its node)");
                down.insert(&queue.name);
                // The refusal closed the channel: the rest goes on a fresh one.
                channel = connection.create_channel().await.map_err(channel_error)?;
            }
            Err(error) => return Err(error),
        }
    }
    if mode == Mode::Declare {
        let bindings = topology.bindings.iter().filter(|binding| {
            !matches!(&binding.destination, Destination::Queue(queue) if down.contains(queue.as_str()))
        });
        for binding in bindings {
            let key = ShortString::from(binding.routing_key.as_str());
            let source = ShortString::from(binding.exchange.as_str());
            let arguments = amqp::arguments(&binding.arguments);
            let result = match &binding.destination {
                Destination::Queue(queue) => {
                    channel
                        .queue_bind(
                            ShortString::from(queue.as_str()),
                            source,
                            key,
                            QueueBindOptions::default(),
                            arguments,
                        )
                        .await
                }
                Destination::Exchange(to) => {
                    channel
                        .exchange_bind(
                            ShortString::from(to.as_str()),
                            source,
                            key,
                            ExchangeBindOptions::default(),
                            arguments,
                        )
                        .await
                }
            };
            result.map_err(broker(TopologyEntity::Binding, &binding.exchange))?;
        }
    }
    let _ = channel.close(200, ShortString::from("declared")).await;
    Ok(())
}

/// Declares (or, `passive`, checks) one exchange.
pub(crate) async fn declare_exchange(
    channel: &lapin::Channel,
    exchange: &Exchange,
    passive: bool,
) -> Result<(), lapin::Error> {
    let kind = match exchange.kind {
        ExchangeKind::Topic => lapin::ExchangeKind::Topic,
        ExchangeKind::Direct => lapin::ExchangeKind::Direct,
        ExchangeKind::Fanout => lapin::ExchangeKind::Fanout,
        ExchangeKind::Headers => lapin::ExchangeKind::Headers,
    };
    let options = ExchangeDeclareOptions {
        passive,
        durable: exchange.durable,
        auto_delete: exchange.auto_delete,
        internal: exchange.internal,
        nowait: false,
    };
    channel
        .exchange_declare(
            ShortString::from(exchange.name.as_str()),
            kind,
            options,
            amqp::arguments(&exchange.declare_arguments()),
        )
        .await
}

/// Checks an exchange another contract owns: a passive declare says whether it exists
/// (and never creates it); a passive declare cannot see its type or arguments, so an
/// existing one is then declared again exactly as its owner declares it, which the broker
/// accepts as a no-op when they agree and refuses (`PRECONDITION_FAILED`) when they differ.
async fn check_imported(
    channel: &lapin::Channel,
    contract: &str,
    exchange: &Exchange,
) -> Result<(), DeclareError> {
    let imported = |error: lapin::Error| {
        let problem = match classify(TopologyEntity::Exchange, &exchange.name, error) {
            DeclareError::Missing { source, .. } => (ImportProblem::Missing, source),
            DeclareError::Mismatch {
                argument, source, ..
            } => (ImportProblem::Differs(argument), source),
            other => return other,
        };
        DeclareError::Imported {
            contract: contract.to_owned(),
            kind: TopologyEntity::Exchange,
            name: exchange.name.clone(),
            problem: problem.0,
            source: problem.1,
        }
    };
    declare_exchange(channel, exchange, true)
        .await
        .map_err(imported)?;
    declare_exchange(channel, exchange, false)
        .await
        .map_err(imported)
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

fn channel_error(source: lapin::Error) -> DeclareError {
    DeclareError::Channel(source)
}

/// Turns the broker's `PRECONDITION_FAILED` and `NOT_FOUND` into errors that say what and
/// where, instead of a bare channel error.
pub(crate) fn classify(kind: TopologyEntity, name: &str, error: lapin::Error) -> DeclareError {
    if let ErrorKind::ProtocolError(amqp_error) = error.kind() {
        match amqp_error.kind() {
            AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED) => {
                let argument = amqp_error
                    .get_message()
                    .as_str()
                    .split_once("inequivalent arg '")
                    .and_then(|(_, rest)| rest.split_once('\''))
                    .map(|(argument, _)| argument.to_owned());
                return DeclareError::Mismatch {
                    kind,
                    name: name.to_owned(),
                    argument,
                    source: error,
                };
            }
            AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) => {
                let name = name.to_owned();
                return match amqp::not_found(&error) {
                    Some(amqp::NotFound::NodeDown) => DeclareError::NodeDown {
                        kind,
                        name,
                        source: error,
                    },
                    _ => DeclareError::Missing {
                        kind,
                        name,
                        source: error,
                    },
                };
            }
            _ => {}
        }
    }
    DeclareError::Broker {
        kind,
        name: name.to_owned(),
        source: error,
    }
}
