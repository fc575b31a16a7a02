//! What the broker has: a queue or exchange, asked by a passive declare on a channel of its
//! own (a `NOT_FOUND` closes the channel it happens on), and the retry topology a consumer
//! needs before it consumes.
//!
//! A consumer whose wait queues or dead-letter exchange are missing would run, and each
//! failed message would be held: its retry copy routed nowhere (a publish to a missing wait
//! queue is unroutable), its dead letter refused, until the worker stops. That happens when
//! the queue was declared by another stack, or by hand, and warren's `declare` never ran
//! for it; the worker refuses to start instead, naming what is missing.

use std::collections::BTreeSet;

use lapin::options::{ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::types::{FieldTable, ShortString};

use super::wait_watch::wait_queues_of;
use crate::model::{Queue, Topology};
use crate::{Connection, WorkerError, amqp};

/// What a passive declare says of a queue or an exchange.
pub(super) enum Presence {
    /// It is there.
    Exists,
    /// Deleted.
    Gone,
    /// On a cluster node that is down.
    NodeDown,
    /// The question could not be asked.
    Unknown,
}

/// Whether `queue` exists.
pub(super) async fn queue_presence(connection: &Connection, queue: &str) -> Presence {
    probe(connection, |channel| async move {
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(ShortString::from(queue), passive, FieldTable::default())
            .await
            .map(drop)
    })
    .await
}

/// Whether `exchange` exists.
async fn exchange_presence(connection: &Connection, exchange: &str) -> Presence {
    probe(connection, |channel| async move {
        let passive = ExchangeDeclareOptions {
            passive: true,
            ..ExchangeDeclareOptions::default()
        };
        channel
            .exchange_declare(
                ShortString::from(exchange),
                // A passive declare ignores the kind.
                lapin::ExchangeKind::Direct,
                passive,
                FieldTable::default(),
            )
            .await
    })
    .await
}

/// The answer to `ask`, on a channel of its own.
async fn probe<F, A>(connection: &Connection, ask: F) -> Presence
where
    F: FnOnce(lapin::Channel) -> A,
    A: Future<Output = Result<(), lapin::Error>>,
{
    let Ok(channel) = connection.create_channel().await else {
        return Presence::Unknown;
    };
    match ask(channel.clone()).await {
        Ok(()) => {
            let _ = channel.close(200, ShortString::from("checked")).await;
            Presence::Exists
        }
        Err(error) => match amqp::not_found(&error) {
            Some(amqp::NotFound::Gone) => Presence::Gone,
            Some(amqp::NotFound::NodeDown) => Presence::NodeDown,
            None => Presence::Unknown,
        },
    }
}

/// Refuses to start when the broker lacks a wait queue or dead-letter exchange of one of
/// the consumers' `queues` (of `topology`), naming every one: each failed message would be
/// held.
pub(super) async fn refuse_missing_retry_topology(
    connection: &Connection,
    topology: &Topology,
    queues: impl Iterator<Item = &Queue>,
) -> Result<(), WorkerError> {
    let mut lacking = Vec::new();
    let mut missing = BTreeSet::new();
    let mut checked = BTreeSet::new();
    for queue in queues {
        if !checked.insert(queue.name.as_str()) {
            continue;
        }
        let absent = missing_retry_topology(connection, topology, queue).await;
        if !absent.is_empty() {
            lacking.push(queue.name.clone());
            missing.extend(absent);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(WorkerError::MissingRetryTopology {
        queues: lacking,
        missing: missing.into_iter().collect(),
    })
}

/// What `queue` (of `topology`) retries and dead-letters through that the broker does not
/// have, each described: its wait queues and its dead-letter exchange. Only what the broker
/// says is gone counts: a node that is down, or a question that could not be asked (the
/// connection is still coming up), is the consumer's own recovery to handle.
async fn missing_retry_topology(
    connection: &Connection,
    topology: &Topology,
    queue: &Queue,
) -> Vec<String> {
    let mut missing = Vec::new();
    for (wait, _) in wait_queues_of(topology, &queue.name) {
        if let Presence::Gone = queue_presence(connection, &wait).await {
            missing.push(format!("wait queue `{wait}` of `{}`", queue.name));
        }
    }
    let exchange = queue.dead_letter.as_ref().map(|d| d.exchange.as_str());
    if let Some(exchange) = exchange.filter(|e| !e.is_empty())
        && let Presence::Gone = exchange_presence(connection, exchange).await
    {
        missing.push(format!(
            "dead-letter exchange `{exchange}` of `{}`",
            queue.name
        ));
    }
    missing
}
