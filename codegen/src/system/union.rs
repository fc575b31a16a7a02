//! The system as one topology: every contract's exchanges, queues, bindings, senders
//! (publishers and rpc callers) and readers (consumers and rpc servers) by name, each
//! remembering its contract, and one exchange graph over all of them.
//!
//! This is the one place that decides which names of two contracts are the same thing. Today
//! a name is the broker's name (an exchange or queue is global on a broker); once contracts
//! import each other, an imported name maps to its owner's here.

use std::collections::BTreeMap;

use super::Member;
use crate::contract::{
    Binding, Consumer, Destination, Exchange, ExchangeKind, Publisher, Queue, QueueRole, Rpc,
};
use crate::diagnostics::{Place, YamlPath};
use crate::routing::{Edge, Graph, Reach};

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
    /// Consumers and rpc servers by the queue they read.
    pub readers: BTreeMap<&'a str, Vec<(Id, Reader<'a>)>>,
    /// Publishers and rpc callers by the exchange they publish to.
    pub senders: BTreeMap<&'a str, Vec<(Id, Sender<'a>)>>,
    /// Every publisher and rpc with where its messages (or requests) go in the system.
    pub routes: Vec<(Id, Sender<'a>, Reach)>,
    /// The exchange graph of the whole system: an exchange as its first contract declares
    /// it, with the bindings of every contract.
    pub graph: Graph,
}

impl<'a> Union<'a> {
    /// Puts `members` together and routes every publisher and rpc once. Bindings are indexed by
    /// exchange (`routing::Graph`), so the cost grows with the system, not with its square.
    pub(crate) fn new(members: &'a [Member]) -> Self {
        let mut exchanges: BTreeMap<&str, Vec<(Id, &Exchange)>> = BTreeMap::new();
        let mut queues: BTreeMap<&str, Vec<(Id, &Queue)>> = BTreeMap::new();
        let mut bound_to: BTreeMap<&str, Vec<(Id, usize, &Binding)>> = BTreeMap::new();
        let mut readers: BTreeMap<&str, Vec<(Id, Reader<'a>)>> = BTreeMap::new();
        let mut senders: BTreeMap<&str, Vec<(Id, Sender<'a>)>> = BTreeMap::new();
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
            for sender in Sender::all(contract) {
                senders
                    .entry(sender.exchange())
                    .or_default()
                    .push((id, sender));
            }
            for reader in Reader::all(contract) {
                readers
                    .entry(&reader.consumer().spec.queue)
                    .or_default()
                    .push((id, reader));
            }
        }
        let graph = graph(members, &exchanges, &queues);
        let routes = members
            .iter()
            .enumerate()
            .flat_map(|(id, member)| {
                let graph = &graph;
                Sender::all(&member.checked.contract)
                    .map(move |sender| (id, sender, graph.route(sender.exchange(), sender.key())))
            })
            .collect();
        Self {
            members,
            exchanges,
            queues,
            bound_to,
            readers,
            senders,
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

/// What sends messages to an exchange: a publisher, or an rpc's caller sending its requests.
#[derive(Clone, Copy)]
pub(crate) enum Sender<'a> {
    /// A publisher.
    Publisher(&'a Publisher),
    /// An rpc, whose caller publishes its requests.
    Rpc(&'a Rpc),
}

impl<'a> Sender<'a> {
    /// Every publisher of `contract`, then every rpc, each in name order.
    fn all(contract: &'a crate::contract::Contract) -> impl Iterator<Item = Self> {
        let publishers = contract.publishers.values().map(Self::Publisher);
        publishers.chain(contract.rpcs.values().map(Self::Rpc))
    }

    /// Its name in its contract.
    pub(crate) fn name(self) -> &'a str {
        match self {
            Self::Publisher(p) => &p.name,
            Self::Rpc(r) => &r.name,
        }
    }

    /// The message it sends: a publisher's message, an rpc's request.
    pub(crate) fn message(self) -> &'a str {
        match self {
            Self::Publisher(p) => &p.message,
            Self::Rpc(r) => &r.request,
        }
    }

    /// The exchange it publishes to (`""` is the default exchange).
    pub(crate) fn exchange(self) -> &'a str {
        match self {
            Self::Publisher(p) => &p.publication.exchange,
            Self::Rpc(r) => &r.target.exchange,
        }
    }

    /// Its routing key.
    fn key(self) -> &'a crate::contract::KeyTemplate {
        match self {
            Self::Publisher(p) => &p.routing_key,
            Self::Rpc(r) => &r.routing_key,
        }
    }

    /// Its routing key as written (an rpc on the default exchange: its queue's name).
    pub(crate) fn key_text(self) -> &'a str {
        match self {
            Self::Publisher(p) => &p.publication.routing_key,
            Self::Rpc(r) => &r.target.routing_key,
        }
    }

    /// How a diagnostic names it: ``publisher `place_order` ``, ``rpc `quote` ``.
    pub(crate) fn describe(self) -> String {
        match self {
            Self::Publisher(p) => format!("publisher `{}`", p.name),
            Self::Rpc(r) => format!("rpc `{}`", r.name),
        }
    }

    /// Its section of the contract: `publishers` or `rpcs`.
    pub(crate) fn section(self) -> &'static str {
        match self {
            Self::Publisher(_) => "publishers",
            Self::Rpc(_) => "rpcs",
        }
    }

    /// Its entry in the contract: `publishers.<name>` or `rpcs.<name>`.
    pub(crate) fn path(self) -> YamlPath {
        entry(self.section(), self.name())
    }

    /// Where the message it sends is named: `publishers.<name>.message`, `rpcs.<name>.request`.
    pub(crate) fn message_path(self) -> YamlPath {
        self.path().key(match self {
            Self::Publisher(_) => "message",
            Self::Rpc(_) => "request",
        })
    }

    /// The rpc it is, if it is one.
    pub(crate) fn rpc(self) -> Option<&'a Rpc> {
        match self {
            Self::Publisher(_) => None,
            Self::Rpc(r) => Some(r),
        }
    }
}

/// What reads a queue: a consumer, or an rpc's server (a consumer of its request queue).
#[derive(Clone, Copy)]
pub(crate) enum Reader<'a> {
    /// A consumer.
    Consumer(&'a Consumer),
    /// An rpc, whose server reads its queue.
    Server(&'a Rpc),
}

impl<'a> Reader<'a> {
    /// Every consumer of `contract`, then every rpc's server, each in name order.
    fn all(contract: &'a crate::contract::Contract) -> impl Iterator<Item = Self> {
        let consumers = contract.consumers.values().map(Self::Consumer);
        consumers.chain(contract.rpcs.values().map(Self::Server))
    }

    /// It as a consumer: an rpc's server is one, named as the rpc, expecting its request.
    pub(crate) fn consumer(self) -> &'a Consumer {
        match self {
            Self::Consumer(c) => c,
            Self::Server(r) => &r.server,
        }
    }

    /// How a diagnostic names it: ``consumer `bill_order` ``, ``the server of rpc `quote` ``.
    pub(crate) fn describe(self) -> String {
        match self {
            Self::Consumer(c) => format!("consumer `{}`", c.spec.name),
            Self::Server(r) => format!("the server of rpc `{}`", r.name),
        }
    }

    /// Its section of the contract: `consumers` or `rpcs`.
    pub(crate) fn section(self) -> &'static str {
        match self {
            Self::Consumer(_) => "consumers",
            Self::Server(_) => "rpcs",
        }
    }

    /// Its entry in the contract: `consumers.<name>` or `rpcs.<name>` (a server is named as
    /// its rpc).
    pub(crate) fn path(self) -> YamlPath {
        entry(self.section(), &self.consumer().spec.name)
    }

    /// Where the message it expects is named: `consumers.<name>.message`,
    /// `rpcs.<name>.request`.
    pub(crate) fn message_path(self) -> YamlPath {
        self.path().key(match self {
            Self::Consumer(_) => "message",
            Self::Server(_) => "request",
        })
    }

    /// The rpc it serves, if it is a server.
    pub(crate) fn rpc(self) -> Option<&'a Rpc> {
        match self {
            Self::Consumer(_) => None,
            Self::Server(r) => Some(r),
        }
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
                let to = binding.destination.clone();
                (binding.exchange.clone(), Edge { key, to })
            })
    });
    Graph::new(nodes, queues.keys().map(|q| (*q).to_owned()), bindings)
}
