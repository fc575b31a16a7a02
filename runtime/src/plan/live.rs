//! What a migration must know that AMQP cannot tell, read through the management API
//! (`crate::management`): every binding the queue has (one the contract does not declare,
//! made by hand or by another stack, would be gone once the queue is declared again, and
//! what it routed dropped), the queues left in place whose dead letters come to it, and
//! whether a queue named like its holding queue is one warren made.

use std::collections::{BTreeMap, BTreeSet};

use crate::ErrorChain;
use crate::management::{LiveQueue, Management};
use crate::model::{Binding, Destination, HOLDING_FOR};

/// Why a migration cannot go on without the management API.
const WITHOUT_MANAGEMENT: &str = "warren reads a queue's bindings (those of exchanges outside \
     the contract too) through the management API before it deletes the queue, and AMQP cannot \
     list them: give the API (`warren plan --management URL`; by default the AMQP URL's host on \
     port 15672 with its credentials)";

/// The management API's view of the virtual host, read once per plan.
pub(super) struct Live<'a> {
    management: Option<&'a Management>,
    /// Its queues by name, or why they could not be read.
    queues: Result<BTreeMap<String, LiveQueue>, String>,
}

/// What the plan says of one queue it migrates, read from the broker.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Bindings to it that neither version of the contract declares.
    pub foreign_bindings: Vec<Binding>,
    /// The queues left in place whose dead letters come to it, each as a line.
    pub dead_lettering: Vec<String>,
    /// Why it cannot be migrated now, when it cannot.
    pub blocked: Option<String>,
}

impl<'a> Live<'a> {
    /// Reads the virtual host's queues through `management`, when given.
    pub(super) async fn read(management: Option<&'a Management>) -> Live<'a> {
        let queues = match management {
            None => Err(WITHOUT_MANAGEMENT.to_owned()),
            Some(api) => match api.queues().await {
                Ok(queues) => Ok(queues.into_iter().map(|q| (q.name.clone(), q)).collect()),
                Err(error) => Err(format!(
                    "the management API cannot be read ({}), and AMQP cannot list a queue's \
                     bindings",
                    ErrorChain(&error)
                )),
            },
        };
        Self { management, queues }
    }

    /// `Ok` when `holding`, which exists, is the holding queue warren declared for `queue`;
    /// otherwise why warren will not use it.
    pub(super) fn holding_is_warrens(&self, queue: &str, holding: &str) -> Result<(), String> {
        let queues = self.queues.as_ref().map_err(|why| {
            format!(
                "a queue named like its holding queue (`{holding}`) exists, and whether warren \
                 made it cannot be told: {why}"
            )
        })?;
        let holds_for = queues
            .get(holding)
            .and_then(|q| q.arguments.get(HOLDING_FOR))
            .and_then(|value| value.as_str());
        match holds_for {
            Some(of) if of == queue => Ok(()),
            _ => Err(format!(
                "a queue named like its holding queue (`{holding}`) exists, and warren did not \
                 declare it (it has no `{HOLDING_FOR}` argument naming `{queue}`): its messages \
                 are not this queue's to move; rename or delete it, then plan again"
            )),
        }
    }

    /// What the broker says of `queue` before it is migrated: its bindings beyond
    /// `contract` (those to `holding` as well, where a migration stopped half way), and
    /// the queues outside `own` (the queue, its wait queues, its holding queue) that
    /// dead-letter into it.
    pub(super) async fn found(
        &self,
        queue: &str,
        holding: &str,
        contract: &[&Binding],
        own: &BTreeSet<String>,
    ) -> Found {
        let foreign_bindings = match self.foreign_bindings(queue, holding, contract).await {
            Ok(bindings) => bindings,
            Err(why) => {
                return Found {
                    blocked: Some(why),
                    ..Found::default()
                };
            }
        };
        let sources: BTreeSet<&str> = contract
            .iter()
            .copied()
            .chain(&foreign_bindings)
            .map(|b| b.exchange.as_str())
            .collect();
        let (dead_lettering, blocked) = self.dead_lettering_into(queue, &sources, own);
        Found {
            foreign_bindings,
            dead_lettering,
            blocked,
        }
    }

    async fn foreign_bindings(
        &self,
        queue: &str,
        holding: &str,
        contract: &[&Binding],
    ) -> Result<Vec<Binding>, String> {
        let api = self.management.ok_or(WITHOUT_MANAGEMENT)?;
        let mut foreign: Vec<Binding> = Vec::new();
        for name in [queue, holding] {
            let live = api.queue_bindings(name).await.map_err(|error| {
                format!(
                    "its bindings cannot be read ({}), and warren would drop those it does not \
                     know of",
                    ErrorChain(&error)
                )
            })?;
            for live in live {
                // Bound to the holding queue, it is the queue's binding all the same.
                let binding = Binding {
                    destination: Destination::Queue(queue.to_owned()),
                    ..live.binding
                };
                if !contract.contains(&&binding) && !foreign.contains(&binding) {
                    foreign.push(binding);
                }
            }
        }
        Ok(foreign)
    }

    /// The queues (not in `own`) that dead-letter into `queue`, through the default
    /// exchange by its name or through one of `sources`, each as a line; and why the plan
    /// must wait, when one holds messages it would dead-letter into nowhere while the queue
    /// is away (the default exchange cannot be bound to the holding queue).
    fn dead_lettering_into(
        &self,
        queue: &str,
        sources: &BTreeSet<&str>,
        own: &BTreeSet<String>,
    ) -> (Vec<String>, Option<String>) {
        let Ok(queues) = &self.queues else {
            return (Vec::new(), None);
        };
        let mut lines = Vec::new();
        let mut blocked = None;
        for live in queues.values().filter(|q| !own.contains(&q.name)) {
            let Some(exchange) = live.dead_letter_exchange.as_deref() else {
                continue;
            };
            let by_name =
                exchange.is_empty() && live.dead_letter_routing_key.as_deref() == Some(queue);
            if by_name {
                lines.push(format!(
                    "queue `{}` ({} message(s)) dead-letters into it by its name through the \
                     default exchange",
                    live.name, live.messages
                ));
                if live.messages > 0 && blocked.is_none() {
                    blocked = Some(format!(
                        "queue `{}` dead-letters into it by its name through the default \
                         exchange and holds {} message(s): what it dead-letters while the queue \
                         is deleted and declared again would be dropped; empty it first, then \
                         plan again",
                        live.name, live.messages
                    ));
                }
            } else if sources.contains(exchange) {
                lines.push(format!(
                    "queue `{}` ({} message(s)) dead-letters into exchange `{exchange}`, bound \
                     to it: its dead letters wait in the holding queue while it moves",
                    live.name, live.messages
                ));
            }
        }
        (lines, blocked)
    }
}
