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

mod live;
mod migrate;
mod probe;
mod render;

use std::collections::BTreeSet;

pub use crate::model::HOLDING_SUFFIX;

use crate::management::Management;
use crate::model::{Binding, Destination, QueueRole, Topology, holding_queue_name};
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
#[derive(Debug, Clone, PartialEq)]
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
        /// Bindings the broker has to it that neither version of the contract declares
        /// (made by hand, or by another stack): bound to the holding queue while it moves,
        /// and to it again, as the contract's are.
        foreign_bindings: Vec<Binding>,
        /// The queues left in place whose dead letters come to it, each as a line.
        dead_lettering: Vec<String>,
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
#[derive(Debug, Clone, PartialEq)]
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
/// # async fn run(connection: warren_runtime::Connection, old: warren_runtime::Topology, new: warren_runtime::Topology) -> Result<(), Box<dyn std::error::Error>> {
/// use warren_runtime::management::{DEFAULT_PORT, Management};
/// use warren_runtime::plan::Plan;
/// // Where a queue's bindings are read before it is migrated: AMQP cannot list them.
/// let api = Management::for_amqp_url("amqp://guest:guest@localhost:5672/%2f", DEFAULT_PORT)?;
/// // Both versions namespaced as deployed; the old one tells which wait queues existed.
/// let plan = Plan::compute(&connection, &new, Some(&old), Some(&api)).await?; // changes nothing
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
    ///
    /// A queue to migrate needs `management`, the broker's management API: its bindings
    /// (those the contract does not declare too) are read there, listed in the plan and
    /// declared again; without it, or when it cannot be read, the queue is blocked.
    pub async fn compute(
        connection: &Connection,
        new: &Topology,
        old: Option<&Topology>,
        management: Option<&Management>,
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
        let mut plan = Self {
            items,
            new: new.clone(),
            old: old.cloned(),
        };
        plan.read_live(management).await;
        let mut items = std::mem::take(&mut plan.items);
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
        plan.items = items;
        Ok(plan)
    }

    /// Fills in what the management API says of each queue to migrate (its foreign
    /// bindings, the queues dead-lettering into it), or blocks it when that cannot be read;
    /// and blocks a queue whose would-be holding queue is not warren's.
    async fn read_live(&mut self, management: Option<&Management>) {
        let declared_migrations = |item: &Item| {
            item.wait_queue_of.is_none() && matches!(item.action, Action::Migrate { .. })
        };
        if !self.items.iter().any(declared_migrations) {
            return;
        }
        let live = live::Live::read(management).await;
        let mut items = std::mem::take(&mut self.items);
        for item in items.iter_mut().filter(|item| declared_migrations(item)) {
            let holding = holding_queue_name(&item.name);
            let Action::Migrate {
                resume,
                foreign_bindings,
                dead_lettering,
                ..
            } = &mut item.action
            else {
                continue;
            };
            let found =
                if *resume && let Err(reason) = live.holding_is_warrens(&item.name, &holding) {
                    live::Found {
                        blocked: Some(reason),
                        ..live::Found::default()
                    }
                } else {
                    let contract = self.contract_bindings(&item.name);
                    let mut own: BTreeSet<String> =
                        self.wait_queues_of(&item.name).into_iter().collect();
                    own.extend([item.name.clone(), holding.clone()]);
                    live.found(&item.name, &holding, &contract, &own).await
                };
            match found.blocked {
                Some(reason) => item.action = Action::Blocked { reason },
                None => {
                    *foreign_bindings = found.foreign_bindings;
                    *dead_lettering = found.dead_lettering;
                }
            }
        }
        self.items = items;
    }

    /// The bindings of the new and the old version that lead to `queue`, each once.
    fn contract_bindings(&self, queue: &str) -> Vec<&Binding> {
        let mut bindings: Vec<&Binding> = Vec::new();
        let all = self
            .new
            .bindings
            .iter()
            .chain(self.old.iter().flat_map(|old| &old.bindings));
        for binding in all {
            if binding.destination == Destination::Queue(queue.to_owned())
                && !bindings.contains(&binding)
            {
                bindings.push(binding);
            }
        }
        bindings
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
