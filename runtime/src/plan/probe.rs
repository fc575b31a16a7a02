//! Finding what the broker has, over AMQP alone: a passive declare says whether a queue or
//! exchange exists (and a queue's message and consumer counts); a declare with the new
//! arguments says whether the broker accepts them. Either may close its channel, so each
//! runs on a channel of its own.

use std::collections::BTreeSet;

use lapin::ErrorKind;
use lapin::options::QueueDeclareOptions;
use lapin::types::ShortString;

use super::{Action, Item, PlanError, QueueState};
use crate::declare::{classify, declare_exchange, declare_queue};
use crate::model::{Exchange, Queue, QueueRole, Topology, holding_queue_name};
use crate::{Connection, DeclareError, TopologyEntity};

/// The longest broker refusal kept in a plan: the broker's own text, but a plan is read by
/// people and the text names arbitrary argument values.
const MAX_DETAIL: usize = 300;

/// A fresh channel. Probes close channels on purpose (a passive declare of a missing queue,
/// a declare the broker refuses), and lapin may hand a new channel the error of the last
/// one closed under the same id while its close is under way: a few tries, a moment apart.
pub(super) async fn channel(connection: &Connection) -> Result<lapin::Channel, PlanError> {
    let mut tries = 0;
    loop {
        match connection.create_channel().await {
            Ok(channel) => return Ok(channel),
            Err(error) if tries >= 4 || !connection.is_connected() => {
                return Err(DeclareError::Channel(error).into());
            }
            Err(_) => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

async fn close(channel: lapin::Channel) {
    let _ = channel.close(200, ShortString::from("probed")).await;
}

/// The broker's words for why it refused, bounded.
pub(super) fn refusal(error: &lapin::Error) -> String {
    let text = match error.kind() {
        ErrorKind::ProtocolError(amqp) => amqp.get_message().to_string(),
        _ => error.to_string(),
    };
    crate::text::truncate(&text, MAX_DETAIL)
}

/// The queue's counts, or `None` when it does not exist.
pub(super) async fn state(
    connection: &Connection,
    name: &str,
) -> Result<Option<QueueState>, PlanError> {
    let channel = channel(connection).await?;
    let options = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    match channel
        .queue_declare(ShortString::from(name), options, Default::default())
        .await
    {
        Ok(queue) => {
            close(channel).await;
            Ok(Some(QueueState {
                messages: queue.message_count(),
                consumers: queue.consumer_count(),
            }))
        }
        Err(error) => match classify(TopologyEntity::Queue, name, error) {
            DeclareError::Missing { .. } => Ok(None),
            other => Err(other.into()),
        },
    }
}

/// Whether the broker accepts `queue` declared as the new version declares it: `Ok(None)`
/// when it does (a no-op on a queue that exists alike), `Ok(Some((argument, refusal)))`
/// when it refuses.
pub(super) async fn accepts(
    connection: &Connection,
    queue: &Queue,
) -> Result<Option<(Option<String>, String)>, PlanError> {
    let channel = channel(connection).await?;
    let declared = declare_queue(&channel, queue, false).await;
    match declared {
        Ok(_) => {
            close(channel).await;
            Ok(None)
        }
        Err(error) => match classify(TopologyEntity::Queue, &queue.name, error) {
            DeclareError::Mismatch {
                argument, source, ..
            } => Ok(Some((argument, refusal(&source)))),
            other => Err(other.into()),
        },
    }
}

/// One exchange of the new version: created when missing; an exchange the broker refuses to
/// declare as the new version does blocks the plan (warren does not move exchanges: deleting
/// one drops its bindings, and what is published meanwhile).
pub(super) async fn exchange(
    connection: &Connection,
    exchange: &Exchange,
) -> Result<Item, PlanError> {
    let item = |action| Item {
        kind: TopologyEntity::Exchange,
        name: exchange.name.clone(),
        wait_queue_of: None,
        state: None,
        action,
    };
    let passive = channel(connection).await?;
    match declare_exchange(&passive, exchange, true).await {
        Ok(()) => close(passive).await,
        Err(error) => {
            return match classify(TopologyEntity::Exchange, &exchange.name, error) {
                DeclareError::Missing { .. } => Ok(item(Action::Create)),
                other => Err(other.into()),
            };
        }
    }
    let active = channel(connection).await?;
    match declare_exchange(&active, exchange, false).await {
        Ok(()) => {
            close(active).await;
            Ok(item(Action::Unchanged))
        }
        Err(error) => match classify(TopologyEntity::Exchange, &exchange.name, error) {
            DeclareError::Mismatch { source, .. } => Ok(item(Action::Blocked {
                reason: format!(
                    "the broker refuses to change it in place ({}); warren does not migrate \
                     exchanges: delete it by hand when nothing publishes to it, then plan again",
                    refusal(&source)
                ),
            })),
            other => Err(other.into()),
        },
    }
}

/// One queue of the new version (wait queues included).
pub(super) async fn queue(
    connection: &Connection,
    queue: &Queue,
    old_known: bool,
) -> Result<Item, PlanError> {
    let declared = queue.role == QueueRole::Declared;
    let state = state(connection, &queue.name).await?;
    let holding = holding_queue_name(&queue.name);
    let resuming = declared && holding.len() <= crate::model::limits::MAX_SHORT_STRING && {
        state_exists(connection, &holding).await?
    };
    let resume = |detail: &str| Action::Migrate {
        argument: None,
        detail: detail.to_owned(),
        resume: true,
        foreign_bindings: Vec::new(),
        dead_lettering: Vec::new(),
    };
    let action = match state {
        None if resuming => resume(
            "a migration stopped half way: the queue was deleted and its messages are in its \
             holding queue",
        ),
        None => Action::Create,
        Some(state) => match accepts(connection, queue).await? {
            None if resuming => resume(
                "a migration stopped half way: its holding queue still exists and holds \
                 messages to move back",
            ),
            None => Action::Unchanged,
            Some((argument, detail)) => {
                if declared && holding.len() > crate::model::limits::MAX_SHORT_STRING {
                    Action::Blocked {
                        reason: format!(
                            "the broker refuses to change it in place ({detail}), and its name \
                             is too long for a holding queue (`{HOLDING}` added)",
                            HOLDING = super::HOLDING_SUFFIX
                        ),
                    }
                } else if state.consumers > 0 {
                    Action::Blocked {
                        reason: format!(
                            "the broker refuses to change it in place ({detail}), and {} \
                             consumer(s) still read it: stop the workers of the old version, \
                             then apply",
                            state.consumers
                        ),
                    }
                } else if !old_known {
                    Action::Blocked {
                        reason: format!(
                            "the broker refuses to change it in place ({detail}); to migrate it \
                             the previous contract is needed (`--from` or `--against`), since \
                             its wait queues must be emptied with it and AMQP cannot list them"
                        ),
                    }
                } else {
                    Action::Migrate {
                        argument,
                        detail,
                        resume: resuming,
                        foreign_bindings: Vec::new(),
                        dead_lettering: Vec::new(),
                    }
                }
            }
        },
    };
    Ok(queue_item(queue, state, action))
}

/// For a wait queue, the queue whose retries wait in it.
fn owner(queue: &Queue) -> Option<String> {
    match &queue.role {
        QueueRole::Wait { queue, .. } => Some(queue.clone()),
        QueueRole::Declared => None,
    }
}

/// The plan's line for `queue`.
fn queue_item(queue: &Queue, state: Option<QueueState>, action: Action) -> Item {
    Item {
        kind: TopologyEntity::Queue,
        name: queue.name.clone(),
        wait_queue_of: owner(queue),
        state,
        action,
    }
}

async fn state_exists(connection: &Connection, name: &str) -> Result<bool, PlanError> {
    Ok(state(connection, name).await?.is_some())
}

/// A queue of the old version that the new one does not declare.
pub(super) async fn obsolete(
    connection: &Connection,
    queue: &Queue,
    new: &Topology,
    migrating: &BTreeSet<String>,
) -> Result<Item, PlanError> {
    let state = state(connection, &queue.name).await?;
    let wait_queue_of = owner(queue);
    let action = match (&state, &wait_queue_of) {
        (None, _) => Action::Gone,
        (Some(_), Some(owner)) if migrating.contains(owner) => Action::Drain {
            into: holding_queue_name(owner),
        },
        (Some(_), Some(owner)) if new.queue(owner).is_some() => Action::Drain {
            into: owner.clone(),
        },
        (Some(_), _) => Action::Left,
    };
    Ok(queue_item(queue, state, action))
}
