//! The contract rules, one file per rule family; shared state and helpers here.

mod bindings;
mod broker_drops;
mod consumers;
mod dead_letters;
mod exchanges;
mod info;
mod names;
mod publishers;
mod queues;
mod references;
mod retry;
mod rpcs;

use std::collections::BTreeMap;

use super::Scope;
use crate::diagnostics::{Code, Diagnostic, Diagnostics, YamlPath};
use crate::imports::Imports;
use crate::load::LoadedContract;
use crate::routing::{Graph, KeyTemplate, Reach};
use crate::syntax::{self, ContractFile, Queue};

/// AMQP short strings, which carry every name, hold at most this many bytes.
const MAX_NAME_BYTES: usize = warren_model::limits::MAX_SHORT_STRING;

/// The contract and what the rules share: the exchange graph and every publisher's route.
pub(super) struct Checker<'a> {
    contract: &'a LoadedContract,
    file: &'a ContractFile,
    /// The contracts it imports, and which of their exchanges and messages it uses.
    imports: &'a Imports,
    out: &'a mut Diagnostics,
    graph: Graph,
    /// Where each publisher's messages go, for publishers whose key parses; computed once
    /// and shared by the routability, message and dead-letter checks.
    routes: BTreeMap<&'a str, Reach>,
    /// The other way round: per queue, the publishers known to reach it, in name order.
    reaching: BTreeMap<String, Vec<&'a str>>,
    /// Whether the contract is checked alone or in a system.
    scope: Scope,
}

impl<'a> Checker<'a> {
    pub(super) fn new(
        contract: &'a LoadedContract,
        imports: &'a Imports,
        scope: Scope,
        out: &'a mut Diagnostics,
    ) -> Self {
        let file = &contract.file;
        let graph = crate::routing::contract_graph(file, imports);
        let routes: BTreeMap<&str, Reach> = file
            .publishers
            .iter()
            .filter_map(|(name, p)| {
                let template = KeyTemplate::parse(p.routing_key.as_deref().unwrap_or_default());
                Some((name.as_str(), graph.route(&p.exchange, &template.ok()?)))
            })
            .collect();
        let mut reaching: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (publisher, reach) in &routes {
            for queue in &reach.queues {
                reaching.entry(queue.clone()).or_default().push(publisher);
            }
        }
        Self {
            contract,
            file,
            imports,
            out,
            graph,
            routes,
            reaching,
            scope,
        }
    }

    /// The exchange named `name`: declared here, or imported from its owner.
    fn exchange(&self, name: &str) -> Option<&'a syntax::Exchange> {
        let imports: &'a Imports = self.imports;
        self.file
            .exchanges
            .get(name)
            .or_else(|| imports.exchange(name))
    }

    fn error(&mut self, code: Code, path: &YamlPath, message: String, help: impl Into<String>) {
        let diagnostic = self.contract.error_at(code, path, message).with_help(help);
        self.out.push(diagnostic);
    }

    fn warn(&mut self, code: Code, path: &YamlPath, message: String, help: impl Into<String>) {
        let diagnostic = self
            .contract
            .warning_at(code, path, message)
            .with_help(help);
        self.out.push(diagnostic);
    }

    fn push(&mut self, diagnostic: Diagnostic) {
        self.out.push(diagnostic);
    }
}

/// The path of entry `name` of a contract section: `queues` → `orders`.
fn entry(section: &str, name: &str) -> YamlPath {
    YamlPath::root().key(section).key(name)
}

/// What a name refers to.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Exchange,
    Queue,
    Message,
}

impl Kind {
    /// The noun and the contract section.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Self::Exchange => ("exchange", "exchanges"),
            Self::Queue => ("queue", "queues"),
            Self::Message => ("message", "messages"),
        }
    }

    fn unknown_code(self) -> Code {
        match self {
            Self::Exchange => Code::UnknownExchange,
            Self::Queue => Code::UnknownQueue,
            Self::Message => Code::UnknownMessage,
        }
    }
}

/// A queue's dead-letter target, from `dead_letter` or from raw `x-dead-letter-*` arguments.
struct QueueDeadLetter {
    exchange: String,
    routing_key: Option<String>,
    /// The field that sets the exchange, relative to the queue.
    field: YamlPath,
    /// The field that sets the routing key, relative to the queue.
    key_field: YamlPath,
}

fn dead_letter_of(queue: &Queue) -> Option<QueueDeadLetter> {
    if let Some(dl) = &queue.dead_letter {
        return Some(QueueDeadLetter {
            exchange: dl.exchange.clone(),
            routing_key: dl.routing_key.clone(),
            field: YamlPath::root().key("dead_letter").key("exchange"),
            key_field: YamlPath::root().key("dead_letter").key("routing_key"),
        });
    }
    // Raw arguments are read by the format, for the model and the checks alike.
    Some(QueueDeadLetter {
        exchange: queue.dead_letter_exchange()?.to_owned(),
        routing_key: queue.dead_letter_routing_key().map(str::to_owned),
        field: YamlPath::root()
            .key("arguments")
            .key("x-dead-letter-exchange"),
        key_field: YamlPath::root()
            .key("arguments")
            .key("x-dead-letter-routing-key"),
    })
}

/// A dead-letter exchange set by `dead_letter` or by a raw `x-dead-letter-exchange`.
fn has_dead_letter_exchange(queue: &Queue) -> bool {
    dead_letter_of(queue).is_some()
}

/// Whether RabbitMQ itself can dead-letter from `queue`: a dead-letter exchange the queue is
/// declared with, which `queue_argument: false` withholds (then only the worker uses it).
fn broker_dead_letters(queue: &Queue) -> bool {
    has_dead_letter_exchange(queue)
        && (queue.dead_letter.as_ref()).is_none_or(|dl| dl.queue_argument != Some(false))
}

/// What is wrong with `pointer` as a JSON pointer (RFC 6901) to a value inside a payload.
pub(super) fn pointer_problem(pointer: &str) -> Result<(), &'static str> {
    if !pointer.starts_with('/') {
        return Err("does not start with `/`: a JSON pointer names a value inside the payload");
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err("has a `~` that is not `~0` or `~1`");
        }
    }
    Ok(())
}
