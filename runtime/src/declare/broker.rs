//! Declaring and checking a topology on a lapin connection, one channel at a time: what the
//! public functions (`mod.rs`), a reconnecting connection and `warren plan` share.

use std::collections::BTreeSet;

use lapin::options::{
    ExchangeBindOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::ShortString;

use super::error::{DeclareError, ImportProblem, TopologyEntity, channel_error, classify};
use crate::amqp;
use crate::error::Chain;
use crate::model::{Destination, Exchange, ExchangeKind, Queue, Topology};

/// How to declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Create what is missing.
    Declare,
    /// Passive declares only.
    Check,
}

/// Declares `topology` on a connection being recovered, before it is announced.
pub(crate) async fn declare_on(
    connection: &lapin::Connection,
    topology: &Topology,
) -> Result<(), DeclareError> {
    apply(connection, topology, Mode::Declare).await
}

/// Declares or checks `topology` on a channel of `connection`, then closes the channel.
pub(super) async fn apply(
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
        let declared = declare_queue(&channel, queue, passive)
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

/// Declares (or, `passive`, checks) one queue, with the arguments the topology gives it.
pub(crate) async fn declare_queue(
    channel: &lapin::Channel,
    queue: &Queue,
    passive: bool,
) -> Result<lapin::Queue, lapin::Error> {
    let options = QueueDeclareOptions {
        passive,
        durable: queue.durable,
        exclusive: queue.exclusive,
        auto_delete: queue.auto_delete,
        nowait: false,
    };
    channel
        .queue_declare(
            ShortString::from(queue.name.as_str()),
            options,
            amqp::arguments(&queue.declare_arguments()),
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
