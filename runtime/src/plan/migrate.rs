//! Carrying a plan out: moving messages with confirmed publishes (a message is acknowledged
//! where it was only once its copy is confirmed where it goes), migrating a queue through a
//! holding queue, and emptying and deleting the wait queues a new version no longer has.
//!
//! Every step can be run again: declares and binds are idempotent, a move takes what is
//! there, a delete is `if_empty`. So a migration killed half way is finished by computing
//! the plan again (the holding queue is found) and applying it.

use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, LongString, ShortString};
use lapin::{BasicProperties, Confirmation, ErrorKind};

use super::{Action, Applied, Plan, PlanError, probe};
use crate::declare::declare_once;
use crate::model::{
    ArgValue, Binding, Destination, HOLDING_FOR, Namespace, Queue, QueueKind, QueueRole, Topology,
    headers, holding_queue_name,
};
use crate::worker::decode::is_retry_copy;
use crate::worker::settle::republished;
use crate::{Connection, PublishError, Publisher, amqp};

/// Where a moved message was read from, which decides what its headers keep.
#[derive(Debug, Clone, Copy)]
enum Source<'a> {
    /// The queue being migrated.
    Work(&'a str),
    /// A wait queue of this queue.
    Wait(&'a str),
    /// The holding queue, whose messages warren put there.
    Holding,
}

fn broker(what: String) -> impl FnOnce(lapin::Error) -> PlanError {
    move |source| PlanError::Broker { what, source }
}

use probe::channel;

async fn close(channel: lapin::Channel) {
    let _ = channel.close(200, ShortString::from("migrated")).await;
}

fn soft(error: &lapin::Error) -> Option<AMQPSoftError> {
    match error.kind() {
        ErrorKind::ProtocolError(amqp) => match amqp.kind() {
            AMQPErrorKind::Soft(soft) => Some(soft.clone()),
            AMQPErrorKind::Hard(_) => None,
        },
        _ => None,
    }
}

/// Carries out `plan` (already checked for blocked items).
pub(super) async fn apply(plan: &Plan, connection: &Connection) -> Result<Applied, PlanError> {
    let mut applied = Applied::default();
    let new = &plan.new;
    // The exchanges first (and the imported ones checked): a holding queue is bound to them.
    let exchanges =
        Topology::new(new.exchanges.clone(), Vec::new(), Vec::new()).importing(new.imports.clone());
    declare_once(connection, &exchanges).await?;
    let publisher = Publisher::open(connection, Namespace::default())
        .await
        .map_err(PlanError::Publisher)?;
    let migrating = |item: &&super::Item| matches!(item.action, Action::Migrate { .. });
    for item in plan.items.iter().filter(migrating) {
        let Some(queue) = new.queue(&item.name) else {
            continue;
        };
        match &queue.role {
            QueueRole::Declared => {
                let foreign = match &item.action {
                    Action::Migrate {
                        foreign_bindings, ..
                    } => foreign_bindings.as_slice(),
                    _ => &[],
                };
                migrate_queue(plan, connection, &publisher, queue, foreign, &mut applied).await?;
            }
            // Its queue's migration emptied it, deleted it and declared it anew.
            QueueRole::Wait { queue: owner, .. } if migrated(plan, owner) => {}
            QueueRole::Wait { queue: owner, .. } => {
                // Its queue stays: its messages go back to that queue now, and the declare
                // below makes it anew.
                if probe::state(connection, &item.name).await?.is_some() {
                    drain(
                        plan,
                        connection,
                        &publisher,
                        &item.name,
                        owner,
                        owner,
                        &mut applied,
                    )
                    .await?;
                }
            }
        }
    }
    declare_once(connection, new).await?;
    applied
        .steps
        .push("declared every exchange, queue and binding of the new version".to_owned());
    for item in &plan.items {
        let Action::Drain { into } = &item.action else {
            continue;
        };
        // Already emptied with its queue's migration, or deleted by a run before.
        if probe::state(connection, &item.name).await?.is_none() {
            continue;
        }
        let owner = item.wait_queue_of.as_deref().unwrap_or(into);
        // The holding queue is gone once its queue's migration finished: back to the queue.
        let into = if probe::state(connection, into).await?.is_some() {
            into.as_str()
        } else {
            owner
        };
        drain(
            plan,
            connection,
            &publisher,
            &item.name,
            into,
            owner,
            &mut applied,
        )
        .await?;
    }
    Ok(applied)
}

/// Whether the plan migrates queue `name`.
fn migrated(plan: &Plan, name: &str) -> bool {
    plan.items
        .iter()
        .any(|item| item.name == name && matches!(item.action, Action::Migrate { .. }))
}

/// Moves every message of wait queue `wait` (of queue `owner`) into `into`, then deletes it.
async fn drain(
    plan: &Plan,
    connection: &Connection,
    publisher: &Publisher,
    wait: &str,
    into: &str,
    owner: &str,
    applied: &mut Applied,
) -> Result<(), PlanError> {
    let moved = move_all(connection, publisher, wait, into, Source::Wait(owner)).await?;
    applied.record_move(wait, into, moved);
    delete_if_empty(connection, wait, kind_of(plan, wait), applied).await
}

impl Applied {
    fn record_move(&mut self, from: &str, to: &str, moved: u64) {
        self.moved = self.moved.saturating_add(moved);
        self.steps
            .push(format!("moved {moved} message(s) from `{from}` to `{to}`"));
    }
}

/// Migrates one declared queue through its holding queue. `foreign` are the bindings the
/// broker has to it that no version of the contract declares: they move with it.
async fn migrate_queue(
    plan: &Plan,
    connection: &Connection,
    publisher: &Publisher,
    queue: &Queue,
    foreign: &[Binding],
    applied: &mut Applied,
) -> Result<(), PlanError> {
    let name = queue.name.as_str();
    let holding = holding_queue_name(name);
    let mut bindings = plan.contract_bindings(name);
    bindings.extend(foreign);
    // Where the queue is: as the old version declared it (`Some(true)`), as the new one
    // does (`Some(false)`: a migration that got past the redeclare), or gone (`None`).
    let state = probe::state(connection, name).await?;
    let old_arguments = match state {
        Some(_) => Some(probe_refuses(connection, queue).await?),
        None => None,
    };
    // Workers of the old version started since the plan was computed: refused before the
    // holding queue is bound, which would take a copy of every message they are handed.
    if let (Some(state), Some(true)) = (state, old_arguments)
        && state.consumers > 0
    {
        return Err(PlanError::Blocked(vec![format!(
            "queue `{name}`: {} consumer(s) read it; stop the workers of the old version, \
             then apply again",
            state.consumers
        )]));
    }
    // 1. The holding queue, bound as the queue is while the queue is not there as the new
    // version declares it: what is published meanwhile waits there. (Bound before the queue
    // is unbound: a message published in between reaches both, a duplicate, never neither.)
    declare_holding(connection, name, &holding).await?;
    if old_arguments != Some(false) {
        for binding in &bindings {
            bind(connection, &holding, binding, true, applied).await?;
        }
        applied.steps.push(format!(
            "holding queue `{holding}` declared and bound as `{name}` is"
        ));
    }
    // 2. The queue as the old version declared it: unbound, emptied (its wait queues too)
    // into the holding queue, deleted.
    if state.is_some() && old_arguments == Some(true) {
        let old = (name, bindings.as_slice());
        retire_old(plan, connection, publisher, old, &holding, applied).await?;
    }
    // 3. The queue as the new version declares it, with its wait queues and bindings.
    declare_new(plan, connection, queue, foreign, applied).await?;
    // 4. The holding queue unbound, emptied back into the queue, deleted.
    for binding in &bindings {
        bind(connection, &holding, binding, false, applied).await?;
    }
    let moved = move_all(connection, publisher, &holding, name, Source::Holding).await?;
    applied.record_move(&holding, name, moved);
    delete_if_empty(connection, &holding, Some(QueueKind::Quorum), applied).await
}

/// Step 2 of a migration: queue `name` as the old version declared it unbound from
/// `bindings`, its messages and its wait queues' moved into `holding`, then deleted with the
/// wait queues the new version does not keep as they are.
async fn retire_old(
    plan: &Plan,
    connection: &Connection,
    publisher: &Publisher,
    (name, bindings): (&str, &[&Binding]),
    holding: &str,
    applied: &mut Applied,
) -> Result<(), PlanError> {
    for binding in bindings {
        bind(connection, name, binding, false, applied).await?;
    }
    let moved = move_all(connection, publisher, name, holding, Source::Work(name)).await?;
    applied.record_move(name, holding, moved);
    let waits = plan.wait_queues_of(name);
    for wait in &waits {
        if probe::state(connection, wait).await?.is_some() {
            let moved = move_all(connection, publisher, wait, holding, Source::Wait(name)).await?;
            applied.record_move(wait, holding, moved);
        }
    }
    delete_if_empty(connection, name, kind_of(plan, name), applied).await?;
    // Wait queues the new version has as they are stay; the others go, to be declared anew
    // when the new version has them.
    for wait in &waits {
        let keep = match plan.new.queue(wait) {
            Some(declared) => !probe_refuses(connection, declared).await?,
            None => false,
        };
        if !keep {
            delete_if_empty(connection, wait, kind_of(plan, wait), applied).await?;
        }
    }
    Ok(())
}

/// Step 3 of a migration: `queue` declared as the new version declares it, with its wait
/// queues and its bindings, and bound again from `foreign`, the bindings outside the contract.
async fn declare_new(
    plan: &Plan,
    connection: &Connection,
    queue: &Queue,
    foreign: &[Binding],
    applied: &mut Applied,
) -> Result<(), PlanError> {
    let name = queue.name.as_str();
    let mut queues = vec![queue.clone()];
    queues.extend(
        plan.new
            .queues
            .iter()
            .filter(|q| matches!(&q.role, QueueRole::Wait { queue: of, .. } if of == name))
            .cloned(),
    );
    let own_bindings: Vec<Binding> = plan
        .new
        .bindings
        .iter()
        .filter(|b| b.destination == Destination::Queue(name.to_owned()))
        .cloned()
        .collect();
    declare_once(connection, &Topology::new(Vec::new(), queues, own_bindings)).await?;
    applied.steps.push(format!(
        "`{name}` declared with its new arguments and bound"
    ));
    for binding in foreign {
        bind(connection, name, binding, true, applied).await?;
        applied.steps.push(format!(
            "`{name}` bound again from `{}` (a binding outside the contract)",
            binding.exchange
        ));
    }
    Ok(())
}

/// Whether the broker refuses `queue` as the new version declares it.
async fn probe_refuses(connection: &Connection, queue: &Queue) -> Result<bool, PlanError> {
    Ok(probe::accepts(connection, queue).await?.is_some())
}

/// A durable quorum queue, without dead-lettering and with the largest delivery limit (no
/// limit would be RabbitMQ 4's 20), marked as holding for `queue` ([`HOLDING_FOR`]): it holds
/// the messages for as long as the migration takes, replicated. One exception: a message
/// with an expiration of its own (a producer's per-message TTL) keeps it, and should it
/// expire while held it is dropped, where its own queue would have dead-lettered it
/// (docs/operations.md, "What each change costs").
///
/// One declared otherwise is refused: the plan found it warren's (by its mark), so it was
/// changed since, and its messages are not known to be this queue's.
async fn declare_holding(
    connection: &Connection,
    queue: &str,
    holding: &str,
) -> Result<(), PlanError> {
    let holding_queue = Queue::new(holding, QueueKind::Quorum);
    let mut arguments = holding_queue.declare_arguments();
    arguments.insert(HOLDING_FOR.to_owned(), ArgValue::String(queue.to_owned()));
    let channel = channel(connection).await?;
    let declared = channel
        .queue_declare(
            ShortString::from(holding),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            amqp::arguments(&arguments),
        )
        .await;
    match declared {
        Ok(_) => {
            close(channel).await;
            Ok(())
        }
        Err(error) if soft(&error) == Some(AMQPSoftError::PRECONDITIONFAILED) => {
            Err(PlanError::Blocked(vec![format!(
                "holding queue `{holding}` exists, declared otherwise than warren declares it \
                 ({}): warren will not move `{queue}`'s messages into it",
                probe::refusal(&error)
            )]))
        }
        Err(error) => Err(broker(format!("declaring holding queue `{holding}`"))(
            error,
        )),
    }
}

/// Binds (or, `!bind`, unbinds) `queue` as `binding` binds its own queue. A binding from an
/// exchange that no longer exists is skipped: there is nothing to route.
async fn bind(
    connection: &Connection,
    queue: &str,
    binding: &Binding,
    bind: bool,
    applied: &mut Applied,
) -> Result<(), PlanError> {
    let channel = channel(connection).await?;
    let (q, exchange, key) = (
        ShortString::from(queue),
        ShortString::from(binding.exchange.as_str()),
        ShortString::from(binding.routing_key.as_str()),
    );
    let arguments = amqp::arguments(&binding.arguments);
    let result = if bind {
        channel
            .queue_bind(q, exchange, key, Default::default(), arguments)
            .await
    } else {
        channel.queue_unbind(q, exchange, key, arguments).await
    };
    match result {
        Ok(()) => {
            close(channel).await;
            Ok(())
        }
        Err(error) if soft(&error) == Some(AMQPSoftError::NOTFOUND) => {
            applied.steps.push(format!(
                "binding from `{}` to `{queue}` skipped: the exchange or queue does not exist",
                binding.exchange
            ));
            Ok(())
        }
        Err(error) => Err(broker(format!(
            "{} `{queue}` {} `{}`",
            if bind { "binding" } else { "unbinding" },
            if bind { "to" } else { "from" },
            binding.exchange
        ))(error)),
    }
}

/// The kind `queue` was declared with, as the new or the old version says (`None` for a
/// queue neither declares).
/// Whether migrating `queue` deletes it without the broker's `if-empty` guard (it is not a
/// classic queue): a message published to it by name while it is deleted is lost.
pub(super) fn deleted_unguarded(plan: &Plan, queue: &str) -> bool {
    kind_of(plan, queue) != Some(QueueKind::Classic)
}

fn kind_of(plan: &Plan, queue: &str) -> Option<QueueKind> {
    plan.old
        .iter()
        .chain(std::iter::once(&plan.new))
        .find_map(|topology| topology.queue(queue))
        .map(|q| q.kind)
}

/// Deletes `queue` once it is empty and unused; a queue already gone is fine.
///
/// RabbitMQ 3.10's quorum queues refuse `queue.delete` with `if-empty` or `if-unused`, and
/// with a connection error (`NOT_IMPLEMENTED`), so a queue that may be one (any but a
/// classic queue) is checked with a passive declare (no message ready, no consumer) and
/// then deleted. Between the two nothing reaches it: the queue being migrated was unbound
/// and its workers are stopped, a wait queue only gets what those workers send, and the
/// holding queue was unbound before it was emptied. A classic queue gets the broker's own
/// guarantee, `if-empty` and `if-unused`.
async fn delete_if_empty(
    connection: &Connection,
    queue: &str,
    kind: Option<QueueKind>,
    applied: &mut Applied,
) -> Result<(), PlanError> {
    let guarded = kind == Some(QueueKind::Classic);
    if !guarded {
        let not_empty = || PlanError::NotEmpty {
            queue: queue.to_owned(),
        };
        match probe::state(connection, queue).await? {
            None => return Ok(()),
            Some(state) if state.messages > 0 || state.consumers > 0 => return Err(not_empty()),
            Some(_) => {}
        }
        // A quorum queue's counts come from its leader within 250 ms, or read 0 (RabbitMQ
        // 3.10, `rabbit_quorum_queue:stat`): a `basic.get` is the broker's own answer.
        let channel = channel(connection).await?;
        let got = channel
            .basic_get(ShortString::from(queue), BasicGetOptions { no_ack: false })
            .await
            .map_err(broker(format!("reading from `{queue}`")))?;
        // Closing the channel returns a message taken here to the queue.
        close(channel).await;
        if got.is_some() {
            return Err(not_empty());
        }
    }
    let channel = channel(connection).await?;
    let options = QueueDeleteOptions {
        if_unused: guarded,
        if_empty: guarded,
        nowait: false,
    };
    match channel
        .queue_delete(ShortString::from(queue), options)
        .await
    {
        Ok(_) => {
            close(channel).await;
            applied
                .steps
                .push(format!("`{queue}` deleted (it was empty)"));
            Ok(())
        }
        Err(error) if soft(&error) == Some(AMQPSoftError::NOTFOUND) => Ok(()),
        Err(error) if soft(&error) == Some(AMQPSoftError::PRECONDITIONFAILED) => {
            Err(PlanError::NotEmpty {
                queue: queue.to_owned(),
            })
        }
        Err(error) => Err(broker(format!("deleting `{queue}`"))(error)),
    }
}

/// Messages moved per round: read, published, their confirms awaited together, then
/// acknowledged with one `multiple` ack. A failure returns the whole round to where it was
/// read, so a round's messages already confirmed are then duplicates: at most this many.
const MOVE_BATCH: usize = 64;

/// Body bytes a round holds at most before it is published: a round ends at [`MOVE_BATCH`]
/// messages or once its bodies reach this, so large messages move a few at a time (one larger
/// than this moves alone).
const MOVE_BATCH_BYTES: usize = 16 << 20;

/// Whether a round of `messages` messages whose bodies weigh `bytes` takes no more.
fn round_full(messages: usize, bytes: usize) -> bool {
    messages >= MOVE_BATCH || bytes >= MOVE_BATCH_BYTES
}

/// How long a round's confirms may take.
const CONFIRM_TIMEOUT: std::time::Duration = crate::DEFAULT_PUBLISH_TIMEOUT;

/// Moves every message of `from` to the queue `to` (through the default exchange), in
/// rounds of [`MOVE_BATCH`] (or [`MOVE_BATCH_BYTES`]): each message published with confirms and `mandatory`, and
/// acknowledged in `from` only once its copy is confirmed and was routed. Stops when `from`
/// is empty; on an error the round being moved returns to `from` when the channel closes.
async fn move_all(
    connection: &Connection,
    publisher: &Publisher,
    from: &str,
    to: &str,
    source: Source<'_>,
) -> Result<u64, PlanError> {
    let channel = channel(connection).await?;
    let out = match confirm_channel(connection).await {
        Ok(out) => out,
        Err(error) => {
            close(channel).await;
            return Err(error);
        }
    };
    let budget = crate::wire::copy_budget(publisher.frame_max());
    let result = move_on(&channel, &out, budget, from, to, source).await;
    close(channel).await;
    close(out).await;
    result
}

async fn confirm_channel(connection: &Connection) -> Result<lapin::Channel, PlanError> {
    let out = channel(connection).await?;
    out.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(broker("selecting publisher confirms".to_owned()))?;
    Ok(out)
}

async fn move_on(
    channel: &lapin::Channel,
    out: &lapin::Channel,
    budget: usize,
    from: &str,
    to: &str,
    source: Source<'_>,
) -> Result<u64, PlanError> {
    let failed = |error: PublishError| PlanError::Move {
        from: from.to_owned(),
        to: to.to_owned(),
        source: error,
    };
    let mut moved: u64 = 0;
    loop {
        let mut round = Vec::with_capacity(MOVE_BATCH);
        let mut bytes = 0usize;
        while !round_full(round.len(), bytes) {
            let got = channel
                .basic_get(ShortString::from(from), BasicGetOptions { no_ack: false })
                .await
                .map_err(broker(format!("reading from `{from}`")))?;
            match got {
                Some(message) => {
                    bytes = bytes.saturating_add(message.delivery.data.len());
                    round.push(message.delivery);
                }
                None => break,
            }
        }
        let Some(last) = round.last().map(|d| d.delivery_tag) else {
            return Ok(moved);
        };
        let mut confirms = Vec::with_capacity(round.len());
        for delivery in &round {
            let properties = moved_properties(delivery, source);
            let properties = crate::wire::fit(&properties, budget).unwrap_or(properties);
            let confirm = out
                .basic_publish(
                    ShortString::from(""),
                    ShortString::from(to),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    &delivery.data,
                    properties,
                )
                .await
                .map_err(|e| failed(PublishError::Unconfirmed(e)))?;
            confirms.push(confirm);
        }
        for confirm in confirms {
            let confirmation = tokio::time::timeout(CONFIRM_TIMEOUT, confirm)
                .await
                .map_err(|_| failed(PublishError::Timeout(CONFIRM_TIMEOUT)))?
                .map_err(|e| failed(PublishError::Unconfirmed(e)))?;
            let route = || (String::new(), to.to_owned());
            match confirmation {
                Confirmation::Ack(None) | Confirmation::NotRequested => {}
                Confirmation::Ack(Some(_)) => {
                    let (exchange, routing_key) = route();
                    return Err(failed(PublishError::Unroutable {
                        exchange,
                        routing_key,
                    }));
                }
                Confirmation::Nack(_) => {
                    let (exchange, routing_key) = route();
                    return Err(failed(PublishError::Nacked {
                        exchange,
                        routing_key,
                    }));
                }
            }
        }
        channel
            .basic_ack(last, BasicAckOptions { multiple: true })
            .await
            .map_err(broker(format!("acknowledging in `{from}`")))?;
        moved = moved.saturating_add(round.len() as u64);
    }
}

/// The properties a moved message is published with: its own (persistent, without the user
/// id the broker would check against this connection), with headers that keep what the
/// message was once it arrives through the default exchange:
///
/// - the broker's `x-delivery-count` is dropped: it counted deliveries from the old queue,
///   and the new one counts afresh;
/// - read from the queue itself, a message that did not come the way warren's retry copies
///   come (through the default exchange, routed by the queue's name, without a failure
///   reason) loses any `x-retry-count`, which the worker did not believe there and would
///   believe once moved back; and it gets `x-original-exchange` / `x-original-routing-key`
///   from its delivery when it has none, since after the move its delivery says the default
///   exchange;
/// - read from a wait queue, a message with no original route gets the default exchange and
///   its queue's name, where it was on its way to.
fn moved_properties(delivery: &lapin::message::Delivery, source: Source<'_>) -> BasicProperties {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s));
    let original = match source {
        Source::Work(queue) => Some((
            delivery.exchange.to_string(),
            delivery.routing_key.to_string(),
            is_retry_copy(delivery, queue),
        )),
        Source::Wait(queue) => Some((String::new(), queue.to_owned(), true)),
        Source::Holding => None,
    };
    let properties = republished(&delivery.properties, |table| {
        table.remove(headers::DELIVERY_COUNT);
        let Some((exchange, routing_key, retry_copy)) = original else {
            return;
        };
        if !retry_copy {
            table.remove(headers::RETRY_COUNT);
        }
        if !table.contains_key(headers::ORIGINAL_EXCHANGE)
            && !table.contains_key(headers::ORIGINAL_ROUTING_KEY)
        {
            table.insert(
                ShortString::from(headers::ORIGINAL_EXCHANGE),
                text(&exchange),
            );
            table.insert(
                ShortString::from(headers::ORIGINAL_ROUTING_KEY),
                text(&routing_key),
            );
        }
    });
    match delivery.properties.expiration() {
        Some(expiration) => properties.with_expiration(expiration.clone()),
        None => properties,
    }
}

#[cfg(test)]
mod tests;
