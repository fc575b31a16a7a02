//! Changing what is deployed: compare a live broker with a contract's topology, say what a
//! deploy will create, what the broker refuses to change in place and how it will be
//! migrated, and what the previous version leaves behind; then carry it out without losing a
//! message (`warren plan`, docs/operations.md, "Changing a retry policy").
//!
//! RabbitMQ never changes a queue's arguments in place: declaring a queue again with another
//! `x-delivery-limit`, `x-queue-type` or dead-letter target fails with `PRECONDITION_FAILED`.
//! Policies can override a few of them, but only through the management API or `rabbitmqctl`
//! (warren speaks AMQP alone), and for the one retries hinge on, a quorum queue's delivery
//! limit, RabbitMQ 3.10 takes the *smaller* of the policy and the argument, so a policy can
//! never raise it. So a queue whose arguments change is moved: its messages (those waiting in
//! its wait queues too) go to a holding queue, the queue is declared again with its new
//! arguments, and they come back ([`Plan::apply`]).
//!
//! Everything is found over AMQP: passive declares say whether a queue or exchange exists
//! and how many messages and consumers a queue has, and a declare with the new arguments on
//! a throwaway channel says whether the broker accepts them (it is a no-op when they are the
//! same). AMQP cannot list queues, so the wait queues an older version of the contract had
//! are known only from that version ([`Plan::compute`]'s `old`).

mod migrate;
mod probe;
mod render;

use std::collections::BTreeSet;

pub use migrate::HOLDING_SUFFIX;

use crate::model::{QueueRole, Topology};
use crate::{Connection, DeclareError, PublishError, TopologyEntity};

/// What is on the broker for one queue: how many messages it holds, ready to be delivered,
/// and how many consumers read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueState {
    /// Messages ready in the queue (not those delivered and not yet acknowledged).
    pub messages: u32,
    /// Consumers subscribed to it.
    pub consumers: u32,
}

/// What a deploy does to one queue or exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// It does not exist: it is declared.
    Create,
    /// It exists as the contract declares it: nothing to do.
    Unchanged,
    /// It exists with arguments the broker refuses to change in place: its messages, and
    /// those of its wait queues, are moved to its holding queue, it is deleted and declared
    /// again, and they are moved back.
    Migrate {
        /// The argument the broker named as different, when it named one.
        argument: Option<String>,
        /// The broker's refusal, as it worded it (or why a migration is under way).
        detail: String,
        /// A migration was started before and not finished (its holding queue exists):
        /// applying goes on from where it stopped.
        resume: bool,
    },
    /// A wait queue the new version no longer has: its messages are moved into `into` (the
    /// queue they would return to, or its holding queue) at once, then it is deleted.
    Drain {
        /// Where its messages go.
        into: String,
    },
    /// A wait queue of the old version that is already gone.
    Gone,
    /// A queue of the old version that the new one no longer declares: left as it is
    /// (warren never deletes a contract's queue, nor its messages).
    Left,
    /// It cannot be changed safely now: applying the plan does nothing until this is fixed.
    Blocked {
        /// Why, and what to do.
        reason: String,
    },
}

/// One queue or exchange of a [`Plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// A queue or an exchange.
    pub kind: TopologyEntity,
    /// Its name on the broker (namespace included).
    pub name: String,
    /// For a wait queue, the queue whose retries wait in it.
    pub wait_queue_of: Option<String>,
    /// What is on the broker, for a queue that exists.
    pub state: Option<QueueState>,
    /// What the deploy does to it.
    pub action: Action,
}

/// What deploying a topology onto a live broker does, found by [`Plan::compute`] and carried
/// out by [`Plan::apply`].
///
/// ```no_run
/// # async fn run(connection: warren_runtime::Connection, old: warren_runtime::Topology, new: warren_runtime::Topology) -> Result<(), warren_runtime::plan::PlanError> {
/// use warren_runtime::plan::Plan;
/// // Both versions namespaced as deployed; the old one tells which wait queues existed.
/// let plan = Plan::compute(&connection, &new, Some(&old)).await?; // changes nothing
/// println!("{plan}");
/// if plan.blocked().is_empty() && !plan.is_noop() {
///     // The old version's workers are stopped by now.
///     let applied = plan.apply(&connection).await?;
///     println!("{} messages moved", applied.moved);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Plan {
    /// Every exchange and queue of the new topology, then what the old one leaves behind,
    /// in that order.
    pub items: Vec<Item>,
    new: Topology,
    old: Option<Topology>,
}

/// What [`Plan::apply`] did, step by step, in the words an operator reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Each step, in order.
    pub steps: Vec<String>,
    /// Messages moved in all (a message moved out and back counts twice).
    pub moved: u64,
}

/// Why computing or applying a plan failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The plan has blocked items; nothing was changed.
    #[error("the plan is blocked, nothing was changed: {}", .0.join("; "))]
    Blocked(Vec<String>),
    /// The channel to move messages with could not be opened.
    #[error("cannot open a publishing channel to move messages with")]
    Publisher(#[source] PublishError),
    /// Declaring or deleting failed.
    #[error(transparent)]
    Declare(#[from] DeclareError),
    /// A broker operation failed (the channel's error says which).
    #[error("{what} failed")]
    Broker {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: lapin::Error,
    },
    /// A message could not be moved: it stays, unacknowledged then returned, in `from`.
    #[error("moving a message from `{from}` to `{to}` failed; it is still in `{from}`")]
    Move {
        /// The queue it was read from.
        from: String,
        /// The queue it was published to.
        to: String,
        /// Why.
        #[source]
        source: PublishError,
    },
    /// A queue to delete still held messages (published to it while it was emptied).
    #[error("`{queue}` is not empty, so it was not deleted; run the plan again")]
    NotEmpty {
        /// The queue.
        queue: String,
    },
}

impl Plan {
    /// Compares the broker behind `connection` with `new` (namespaced as deployed), and, when
    /// given, with the version deployed before, `old` (namespaced the same way): what the
    /// broker has, what `new` changes, and how. Changes nothing on the broker: the probes
    /// are passive declares, and declares with `new`'s arguments on throwaway channels of
    /// queues and exchanges that exist (a no-op when the broker accepts them).
    pub async fn compute(
        connection: &Connection,
        new: &Topology,
        old: Option<&Topology>,
    ) -> Result<Self, PlanError> {
        new.validate().map_err(DeclareError::from)?;
        let mut items = Vec::new();
        for exchange in &new.exchanges {
            items.push(probe::exchange(connection, exchange).await?);
        }
        for queue in &new.queues {
            items.push(probe::queue(connection, queue, old.is_some()).await?);
        }
        if let Some(old) = old {
            let migrating: BTreeSet<String> = items
                .iter()
                .filter(|item| matches!(item.action, Action::Migrate { .. }))
                .map(|item| item.name.clone())
                .collect();
            for queue in old.queues.iter().filter(|q| new.queue(&q.name).is_none()) {
                items.push(probe::obsolete(connection, queue, new, &migrating).await?);
            }
        }
        // A wait queue is emptied with its queue: one whose queue cannot move yet waits too.
        let blocked: BTreeSet<String> = items
            .iter()
            .filter(|item| matches!(item.action, Action::Blocked { .. }))
            .map(|item| item.name.clone())
            .collect();
        for item in &mut items {
            if let Some(owner) = item.wait_queue_of.as_ref().filter(|o| blocked.contains(*o))
                && matches!(item.action, Action::Migrate { .. } | Action::Drain { .. })
            {
                item.action = Action::Blocked {
                    reason: format!("its queue `{owner}` is blocked"),
                };
            }
        }
        Ok(Self {
            items,
            new: new.clone(),
            old: old.cloned(),
        })
    }

    /// Whether applying would change anything on the broker.
    pub fn is_noop(&self) -> bool {
        self.items
            .iter()
            .all(|item| matches!(item.action, Action::Unchanged | Action::Gone | Action::Left))
    }

    /// The items that keep the plan from being applied, each as one line.
    pub fn blocked(&self) -> Vec<String> {
        self.items
            .iter()
            .filter_map(|item| match &item.action {
                Action::Blocked { reason } => {
                    Some(format!("{} `{}`: {reason}", item.kind, item.name))
                }
                _ => None,
            })
            .collect()
    }

    /// Carries the plan out: declares what is new; migrates every queue whose arguments
    /// changed (its messages and its wait queues' moved to a holding queue with confirmed
    /// publishes, each acknowledged only once its copy is confirmed; the queue deleted,
    /// declared again with its bindings; the messages moved back; the holding queue
    /// deleted); declares the whole new topology; moves the messages of wait queues the new
    /// version no longer has back into their queue, and deletes them once empty.
    ///
    /// Refuses, changing nothing, when an item is blocked (a queue to migrate still has
    /// consumers: stop the old workers first). Killed half way, nothing is lost (a message
    /// is acknowledged in its old queue only once confirmed in its new one, so at worst it is
    /// in both), and computing the plan again finds the holding queue and goes on.
    pub async fn apply(&self, connection: &Connection) -> Result<Applied, PlanError> {
        let blocked = self.blocked();
        if !blocked.is_empty() {
            return Err(PlanError::Blocked(blocked));
        }
        migrate::apply(self, connection).await
    }

    /// The new topology this plan deploys.
    pub fn topology(&self) -> &Topology {
        &self.new
    }

    /// The wait queues of `queue` in the new and the old topology.
    fn wait_queues_of(&self, queue: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .new
            .queues
            .iter()
            .chain(self.old.iter().flat_map(|old| &old.queues))
            .filter(|q| matches!(&q.role, QueueRole::Wait { queue: of, .. } if of == queue))
            .map(|q| q.name.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}
