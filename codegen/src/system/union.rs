//! The system as one topology: every contract's exchanges, queues, bindings, publishers and
//! consumers by name, each remembering its contract, and one exchange graph over all of them.
//!
//! This is the one place that decides which names of two contracts are the same thing. Today
//! a name is the broker's name (an exchange or queue is global on a broker); once contracts
//! import each other, an imported name maps to its owner's here.

use std::collections::BTreeMap;

use super::Member;
use crate::diagnostics::{Place, YamlPath};
use crate::model::{
    Binding, Consumer, Destination, Exchange, ExchangeKind, Publisher, Queue, QueueRole,
};
use crate::routing::{self, Edge, Graph, Reach};

/// Which contract of the system: an index into the members.
pub(crate) type Id = usize;

/// Every contract of the system together.
pub(crate) struct Union<'a> {
    pub members: &'a [Member],
    /// Every declaration of each exchange, in member order.
    pub exchanges: BTreeMap<&'a str, Vec<(Id, &'a Exchange)>>,
    /// Every declaration of each queue (declared queues, not wait queues), in member order.
    pub queues: BTreeMap<&'a str, Vec<(Id, &'a Queue)>>,
    /// Bindings by destination queue: (contract, index in its `bindings`, binding).
    pub bound_to: BTreeMap<&'a str, Vec<(Id, usize, &'a Binding)>>,
    /// Consumers by the queue they read.
    pub consumers: BTreeMap<&'a str, Vec<(Id, &'a Consumer)>>,
    /// Publishers by the exchange they publish to.
    pub publishers: BTreeMap<&'a str, Vec<(Id, &'a Publisher)>>,
    /// Every publisher with where its messages go in the system.
    pub routes: Vec<(Id, &'a Publisher, Reach)>,
    /// The exchange graph of the whole system: an exchange as its first contract declares
    /// it, with the bindings of every contract.
    pub graph: Graph,
}

impl<'a> Union<'a> {
    /// Puts `members` together and routes every publisher once. Bindings are indexed by
    /// exchange (`routing::Graph`), so the cost grows with the system, not with its square.
    pub(crate) fn new(members: &'a [Member]) -> Self {
        let mut exchanges: BTreeMap<&str, Vec<(Id, &Exchange)>> = BTreeMap::new();
        let mut queues: BTreeMap<&str, Vec<(Id, &Queue)>> = BTreeMap::new();
        let mut bound_to: BTreeMap<&str, Vec<(Id, usize, &Binding)>> = BTreeMap::new();
        let mut consumers: BTreeMap<&str, Vec<(Id, &Consumer)>> = BTreeMap::new();
        let mut publishers: BTreeMap<&str, Vec<(Id, &Publisher)>> = BTreeMap::new();
        for (id, member) in members.iter().enumerate() {
            let contract = &member.checked.contract;
            for exchange in &contract.topology.exchanges {
                exchanges
                    .entry(&exchange.name)
                    .or_default()
                    .push((id, exchange));
            }
            for queue in &contract.topology.queues {
                if queue.role == QueueRole::Declared {
                    queues.entry(&queue.name).or_default().push((id, queue));
                }
            }
            for (index, binding) in contract.topology.bindings.iter().enumerate() {
                if let Destination::Queue(queue) = &binding.destination {
                    bound_to
                        .entry(queue)
                        .or_default()
                        .push((id, index, binding));
                }
            }
            for publisher in contract.publishers.values() {
                publishers
                    .entry(&publisher.exchange)
                    .or_default()
                    .push((id, publisher));
            }
            for consumer in contract.consumers.values() {
                consumers
                    .entry(&consumer.queue)
                    .or_default()
                    .push((id, consumer));
            }
        }
        let graph = graph(members, &exchanges, &queues);
        let routes = members
            .iter()
            .enumerate()
            .flat_map(|(id, member)| {
                let graph = &graph;
                member
                    .checked
                    .contract
                    .publishers
                    .values()
                    .map(move |publisher| {
                        (
                            id,
                            publisher,
                            graph.route(&publisher.exchange, &publisher.routing_key),
                        )
                    })
            })
            .collect();
        Self {
            members,
            exchanges,
            queues,
            bound_to,
            consumers,
            publishers,
            routes,
            graph,
        }
    }

    /// The contract file of `id`, as the user named it.
    pub(crate) fn file(&self, id: Id) -> &std::path::Path {
        self.members[id].loaded.path()
    }

    /// The place of `path` in contract `id`.
    pub(crate) fn place(&self, id: Id, path: &YamlPath) -> Place {
        self.members[id].loaded.place(path)
    }
}

/// The path of entry `name` of a contract section: `queues` → `orders`.
pub(crate) fn entry(section: &str, name: &str) -> YamlPath {
    YamlPath::root().key(section).key(name)
}

/// The graph of every exchange (as its first contract declares it), every queue, and every
/// binding of every contract.
fn graph(
    members: &[Member],
    exchanges: &BTreeMap<&str, Vec<(Id, &Exchange)>>,
    queues: &BTreeMap<&str, Vec<(Id, &Queue)>>,
) -> Graph {
    let kind = |name: &str| {
        exchanges
            .get(name)
            .and_then(|all| all.first())
            .map(|(_, e)| e.kind)
    };
    let nodes = exchanges.iter().filter_map(|(name, all)| {
        let (_, exchange) = all.first()?;
        Some((
            (*name).to_owned(),
            exchange.kind,
            exchange.alternate_exchange.clone(),
        ))
    });
    let bindings = members.iter().flat_map(|member| {
        member
            .checked
            .contract
            .topology
            .bindings
            .iter()
            .map(|binding| {
                // The model writes a missing key as `""`; routing wants no key where the
                // exchange ignores keys.
                let key = matches!(
                    kind(&binding.exchange),
                    Some(ExchangeKind::Topic | ExchangeKind::Direct)
                )
                .then(|| binding.routing_key.clone());
                let to = match &binding.destination {
                    Destination::Queue(queue) => routing::Destination::Queue(queue.clone()),
                    Destination::Exchange(exchange) => {
                        routing::Destination::Exchange(exchange.clone())
                    }
                };
                (binding.exchange.clone(), Edge { key, to })
            })
    });
    Graph::new(nodes, queues.keys().map(|q| (*q).to_owned()), bindings)
}
