//! Retries held in a wait queue, seen before a customer notices.
//!
//! A ttl-backoff retry waits in a wait queue until its TTL expires, and the broker
//! dead-letters it back to its queue. On RabbitMQ 3.10 a quorum wait queue whose leader
//! changed may stop dead-lettering (its at-least-once dead-letter process does not resume:
//! issue 15 measured 2 to 336 retries held); nothing fails, the retries just never come
//! back. So, for each consumer of a ttl-backoff queue, the worker looks at its wait queues
//! every [`crate::Worker::wait_queue_check`] interval: a passive declare counts a wait
//! queue's messages, and when it holds any, the oldest (its head: one TTL for the whole
//! queue, so the head expires first) is read with `basic.get` and returned at once. Its
//! `x-last-failure-timestamp`, written when the retry copy was made, says how long it has
//! waited; past its delay and a grace as long again (at least [`MIN_GRACE`]), the wait queue
//! is reported: a warning in the log, the consumer's health
//! ([`crate::health::ConsumerHealth::overdue_retries`]) and
//! [`crate::metrics::WAIT_QUEUE_OVERDUE`].
//!
//! Reading the head is a delivery: on a quorum wait queue it counts in its delivery count,
//! which warren gives no limit there. A retry whose header is missing (not a copy warren
//! made) is not judged.

use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicGetOptions, BasicRejectOptions, QueueDeclareOptions};
use lapin::types::{FieldTable, ShortString};
use tokio::sync::watch;

use crate::Connection;
use crate::amqp::header_int;
use crate::health::{ConsumerState, OverdueRetries};
use crate::model::{QueueRole, Topology, headers};

/// The shortest grace past a wait queue's delay before a retry counts as overdue: a busy
/// broker dead-letters a little late, and a copy's timestamp is taken just before it is
/// published.
const MIN_GRACE: Duration = Duration::from_secs(10);

/// One wait queue watched: its name, its delay, and its gauge.
struct Watched {
    name: String,
    delay: Duration,
    gauge: metrics::Gauge,
}

/// The wait queues of `queue` in `topology`, with their delays.
pub(super) fn wait_queues_of(topology: &Topology, queue: &str) -> Vec<(String, Duration)> {
    topology
        .queues
        .iter()
        .filter_map(|wait| match &wait.role {
            QueueRole::Wait { queue: of, delay } if of == queue => {
                Some((wait.name.clone(), *delay))
            }
            _ => None,
        })
        .collect()
}

/// Watches `waits` (the wait queues of `queue`, with their delays) for the consumer whose
/// health is `health`, every `every`, until `shutdown`.
pub(super) async fn watch(
    connection: Connection,
    queue: String,
    waits: Vec<(String, Duration)>,
    health: Arc<ConsumerState>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), crate::WorkerError> {
    let consumer = health.name();
    let queue = queue.as_str();
    let waits: Vec<Watched> = waits
        .into_iter()
        .map(|(name, delay)| Watched {
            gauge: crate::metrics::wait_queue_overdue(consumer, queue, &name),
            name,
            delay,
        })
        .collect();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return Ok(()),
        }
        let mut found = Vec::new();
        for wait in &waits {
            match oldest(&connection, &wait.name).await {
                Ok(Some((messages, waited))) => {
                    let due = wait.delay + wait.delay.max(MIN_GRACE);
                    let overdue = waited.saturating_sub(due);
                    wait.gauge.set(overdue.as_secs_f64());
                    if overdue > Duration::ZERO {
                        tracing::warn!(
                            consumer,
                            queue,
                            wait_queue = %wait.name,
                            messages,
                            ?overdue,
                            "a wait queue holds retries past their time: its dead-lettering has stopped (docs/operations.md, \"Retries held in a wait queue\")"
                        );
                        found.push(OverdueRetries {
                            wait_queue: wait.name.clone(),
                            messages,
                            overdue_ms: u64::try_from(overdue.as_millis()).unwrap_or(u64::MAX),
                        });
                    }
                }
                Ok(None) => wait.gauge.set(0.0),
                // Not connected, the queue missing: the worker's own health says so.
                Err(error) => {
                    tracing::debug!(consumer, wait_queue = %wait.name, %error, "wait queue not checked")
                }
            }
        }
        health.overdue(found);
    }
}

/// How many messages `wait` holds and how long its oldest has waited; `None` when it is
/// empty or its oldest says nothing of when it was made.
async fn oldest(
    connection: &Connection,
    wait: &str,
) -> Result<Option<(u32, Duration)>, lapin::Error> {
    let channel = connection.create_channel().await?;
    let result = read_head(&channel, wait).await;
    // Closing the channel also returns a message still held.
    let _ = channel.close(200, ShortString::from("checked")).await;
    result
}

async fn read_head(
    channel: &lapin::Channel,
    wait: &str,
) -> Result<Option<(u32, Duration)>, lapin::Error> {
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let declared = channel
        .queue_declare(ShortString::from(wait), passive, FieldTable::default())
        .await?;
    let messages = declared.message_count();
    if messages == 0 {
        return Ok(None);
    }
    let Some(head) = channel
        .basic_get(ShortString::from(wait), BasicGetOptions { no_ack: false })
        .await?
    else {
        return Ok(None);
    };
    let made = header_int(
        head.delivery.properties.headers().as_ref(),
        headers::LAST_FAILURE,
    );
    head.delivery
        .acker
        .reject(BasicRejectOptions { requeue: true })
        .await?;
    let now = crate::clock::unix_millis();
    // A timestamp in the future (a forged header, clocks apart) has waited for nothing.
    Ok(made.map(|made| {
        let waited = u64::try_from(now.saturating_sub(made)).unwrap_or(0);
        (messages, Duration::from_millis(waited))
    }))
}
