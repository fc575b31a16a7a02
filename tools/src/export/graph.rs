//! The topology as a graph of nodes and labelled edges, which [`super::mermaid`] and
//! [`super::dot`] only write out in their syntax: what is drawn is decided here once.
//!
//! Node IDs are generated (`p0`, `x1`, `q2`…), never made from names, and labels are plain
//! text: each renderer escapes them for its own syntax.

use std::collections::BTreeMap;

use warren_codegen::contract::{Contract, Destination};

use super::{Ownership, Scope, binding_label, retry_summary};

/// What a node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A publisher.
    Publisher,
    /// An exchange.
    Exchange,
    /// A queue.
    Queue,
    /// A consumer.
    Consumer,
    /// A queue's retry schedule, as one note.
    Retry,
}

/// A node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Generated ID, safe in every syntax.
    pub id: String,
    /// What it stands for.
    pub kind: NodeKind,
    /// Label lines, as plain text (not escaped).
    pub lines: Vec<String>,
    /// Declared by another contract.
    pub external: bool,
}

/// How an edge is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeStyle {
    /// A message flow: publishing, routing, consuming.
    Flow,
    /// Dead-lettering (dashed).
    DeadLetter,
    /// A note attached to a node (dotted, no arrow).
    Note,
}

/// An edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// Source node ID.
    pub from: String,
    /// Target node ID.
    pub to: String,
    /// Label, as plain text (not escaped); never empty (Mermaid refuses `|""|`).
    pub label: Option<String>,
    /// How it is drawn.
    pub style: EdgeStyle,
}

/// A drawable topology.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Graph {
    /// Nodes: publishers, exchanges, queues with their retry notes, consumers.
    pub nodes: Vec<Node>,
    /// Edges, in a stable order.
    pub edges: Vec<Edge>,
}

/// The graph of `contract`: publishers → exchanges → (bindings) → queues → consumers, each
/// queue's dead-letter flow, and each retrying queue's schedule as one note. An rpc is a
/// caller (drawn as a publisher of its requests) and a server (drawn as a consumer of its
/// queue), with the reply as an edge from the server back to the caller.
pub fn graph(contract: &Contract) -> Graph {
    let scope = Scope::of(contract);
    let mut drawing = Drawing {
        contract,
        graph: Graph::default(),
        exchange_ids: BTreeMap::new(),
        queue_ids: BTreeMap::new(),
    };
    drawing.exchanges(&scope);
    drawing.queues(&scope);
    drawing.senders();
    drawing.bindings();
    drawing.dead_letters(&scope);
    drawing.consumers();
    drawing.rpc_servers();
    drawing.graph
}

/// A graph being drawn, and the node IDs of the exchanges and queues drawn so far.
struct Drawing<'a> {
    contract: &'a Contract,
    graph: Graph,
    exchange_ids: BTreeMap<&'a str, String>,
    queue_ids: BTreeMap<&'a str, String>,
}

impl<'a> Drawing<'a> {
    /// Every exchange the contract names, its own, imported or external.
    fn exchanges(&mut self, scope: &'a Scope<'_>) {
        for (i, (name, view)) in scope.exchanges.iter().enumerate() {
            let id = format!("x{i}");
            let mut lines = vec![match view.ownership {
                Ownership::Default => "(default exchange)".to_owned(),
                _ => name.clone(),
            }];
            match (view.ownership, view.kind) {
                (Ownership::External, _) => lines.push("external".to_owned()),
                (Ownership::Own, Some(kind)) => lines.push(kind.as_str().to_owned()),
                _ => {}
            }
            self.graph.nodes.push(Node {
                id: id.clone(),
                kind: NodeKind::Exchange,
                lines,
                external: view.ownership == Ownership::External,
            });
            self.exchange_ids.insert(name.as_str(), id);
        }
    }

    /// Every queue, with its retry schedule as a note.
    fn queues(&mut self, scope: &'a Scope<'_>) {
        for (i, queue) in scope.queues.iter().enumerate() {
            let id = format!("q{i}");
            self.graph.nodes.push(Node {
                id: id.clone(),
                kind: NodeKind::Queue,
                lines: vec![queue.name.clone(), queue.kind.as_str().to_owned()],
                external: false,
            });
            if let Some(summary) = retry_summary(queue) {
                let note = format!("r{i}");
                self.graph.nodes.push(Node {
                    id: note.clone(),
                    kind: NodeKind::Retry,
                    lines: vec![summary],
                    external: false,
                });
                self.graph.edges.push(Edge {
                    from: id.clone(),
                    to: note,
                    label: None,
                    style: EdgeStyle::Note,
                });
            }
            self.queue_ids.insert(queue.name.as_str(), id);
        }
    }

    /// Publishers, and rpc callers drawn as publishers of their requests.
    fn senders(&mut self) {
        let senders = self
            .contract
            .publishers
            .values()
            .enumerate()
            .map(|(i, p)| {
                let lines = vec![p.name.clone(), p.message.clone()];
                (
                    format!("p{i}"),
                    lines,
                    &p.publication.exchange,
                    &p.publication.routing_key,
                )
            })
            // Callers are numbered after the publishers, servers after the consumers: every ID
            // is one letter and a number.
            .chain(self.contract.rpcs.values().enumerate().map(|(i, r)| {
                let lines = vec![
                    format!("{} (rpc caller)", r.name),
                    format!("{} → {}", r.request, r.response),
                ];
                (
                    caller_id(self.contract, i),
                    lines,
                    &r.target.exchange,
                    &r.target.routing_key,
                )
            }));
        for (id, lines, exchange_name, key) in senders {
            self.graph.nodes.push(Node {
                id: id.clone(),
                kind: NodeKind::Publisher,
                lines,
                external: false,
            });
            if let Some(exchange) = self.exchange_ids.get(exchange_name.as_str()) {
                self.graph.edges.push(Edge {
                    from: id,
                    to: exchange.clone(),
                    label: Some(key.clone()).filter(|key| !key.is_empty()),
                    style: EdgeStyle::Flow,
                });
            }
            // The default exchange routes a key to the queue of that name.
            if exchange_name.is_empty()
                && let (Some(from), Some(to)) =
                    (self.exchange_ids.get(""), self.queue_ids.get(key.as_str()))
            {
                let edge = Edge {
                    from: from.clone(),
                    to: to.clone(),
                    label: Some(key.clone()),
                    style: EdgeStyle::Flow,
                };
                if !self.graph.edges.contains(&edge) {
                    self.graph.edges.push(edge);
                }
            }
        }
    }

    /// The bindings, exchange to queue or exchange.
    fn bindings(&mut self) {
        for binding in &self.contract.topology.bindings {
            let to = match &binding.destination {
                Destination::Queue(queue) => self.queue_ids.get(queue.as_str()),
                Destination::Exchange(exchange) => self.exchange_ids.get(exchange.as_str()),
            };
            if let (Some(from), Some(to)) = (self.exchange_ids.get(binding.exchange.as_str()), to) {
                self.graph.edges.push(Edge {
                    from: from.clone(),
                    to: to.clone(),
                    label: binding_label(binding),
                    style: EdgeStyle::Flow,
                });
            }
        }
    }

    /// Each queue's dead-letter flow to its dead-letter exchange.
    fn dead_letters(&mut self, scope: &'a Scope<'_>) {
        for queue in &scope.queues {
            if let (Some(dead_letter), Some(from)) =
                (&queue.dead_letter, self.queue_ids.get(queue.name.as_str()))
                && let Some(to) = self.exchange_ids.get(dead_letter.exchange.as_str())
            {
                self.graph.edges.push(Edge {
                    from: from.clone(),
                    to: to.clone(),
                    label: Some(match &dead_letter.routing_key {
                        Some(key) => format!("dead letters, as {key}"),
                        None => "dead letters".to_owned(),
                    }),
                    style: EdgeStyle::DeadLetter,
                });
            }
        }
    }

    /// The consumers, each reading its queue.
    fn consumers(&mut self) {
        for (i, consumer) in self.contract.consumers.values().enumerate() {
            let id = format!("c{i}");
            self.graph.nodes.push(Node {
                id: id.clone(),
                kind: NodeKind::Consumer,
                lines: std::iter::once(consumer.spec.name.clone())
                    .chain(consumer.messages.iter().map(|m| m.message.clone()))
                    .collect(),
                external: false,
            });
            if let Some(queue) = self.queue_ids.get(consumer.spec.queue.as_str()) {
                self.graph.edges.push(Edge {
                    from: queue.clone(),
                    to: id,
                    label: None,
                    style: EdgeStyle::Flow,
                });
            }
        }
    }

    /// Rpc servers, drawn as consumers of their queues, each replying to its callers
    /// (through direct reply-to: no exchange or queue of the contract).
    fn rpc_servers(&mut self) {
        for (i, rpc) in self.contract.rpcs.values().enumerate() {
            let id = format!("c{}", self.contract.consumers.len() + i);
            self.graph.nodes.push(Node {
                id: id.clone(),
                kind: NodeKind::Consumer,
                lines: vec![format!("{} (rpc server)", rpc.name), rpc.request.clone()],
                external: false,
            });
            if let Some(queue) = self.queue_ids.get(rpc.server.spec.queue.as_str()) {
                self.graph.edges.push(Edge {
                    from: queue.clone(),
                    to: id.clone(),
                    label: None,
                    style: EdgeStyle::Flow,
                });
            }
            self.graph.edges.push(Edge {
                from: id,
                to: caller_id(self.contract, i),
                label: Some(format!("reply: {}", rpc.response)),
                style: EdgeStyle::Flow,
            });
        }
    }
}

/// The node ID of the caller of the `i`th rpc: numbered after the publishers.
fn caller_id(contract: &Contract, i: usize) -> String {
    format!("p{}", contract.publishers.len() + i)
}
