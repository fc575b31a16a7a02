//! Where a checked contract's messages go, offline: the routing graph of its model, for the
//! tools that compare two versions of a contract (`warren diff`).

use std::collections::BTreeSet;

use crate::contract::{Contract, KeyTemplate, QueueRole};
use crate::routing::{Edge, Graph};

/// The routing graph of a checked contract: its declared exchanges, queues and bindings,
/// followed the way the broker routes (topic and direct keys, fanout, headers bindings as
/// "may match", exchange-to-exchange bindings, alternate exchanges).
#[derive(Debug, Clone)]
pub struct Routes {
    graph: Graph,
}

impl Routes {
    /// The routes of `contract`'s own topology.
    pub fn of(contract: &Contract) -> Self {
        let topology = &contract.topology;
        let graph = Graph::new(
            topology
                .exchanges
                .iter()
                .map(|e| (e.name.clone(), e.kind, e.alternate_exchange.clone())),
            topology
                .queues
                .iter()
                .filter(|q| q.role == QueueRole::Declared)
                .map(|q| q.name.clone()),
            topology.bindings.iter().map(|b| {
                let key = Some(b.routing_key.clone());
                let to = b.destination.clone();
                (b.exchange.clone(), Edge { key, to })
            }),
        );
        Self { graph }
    }

    /// The queues a message published to `exchange` (`""`: the default exchange) with `key`
    /// may reach: those it reaches for certain and those a headers binding may route it to.
    pub fn queues(&self, exchange: &str, key: &KeyTemplate) -> BTreeSet<String> {
        let reach = self.graph.route(exchange, key);
        let mut queues = reach.queues;
        queues.extend(reach.maybe);
        queues
    }

    /// Which of the bindings from `exchange` a message published with `key` may take: their
    /// positions among that exchange's bindings in the contract's order (topic and direct
    /// keys matched, every binding of a fanout or headers exchange); `None` when the
    /// exchange is not the contract's own.
    pub fn bindings_taken(&self, exchange: &str, key: &KeyTemplate) -> Option<Vec<usize>> {
        self.graph.taken(exchange, key)
    }
}
