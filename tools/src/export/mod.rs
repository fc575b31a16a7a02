//! Exports of a checked contract for people and other tools: an AsyncAPI 3.0 document
//! ([`asyncapi`]) and a drawing of the topology ([`mermaid`], [`dot`], both over one
//! [`graph`]).
//!
//! Everything here reads the model ([`warren_codegen::contract::Contract`]), never the contract file, so
//! an export says what the generated code does. Which exchanges belong to the contract and
//! which are only named by it is decided once, in [`Scope`].

pub mod asyncapi;
pub mod dot;
pub mod graph;
pub mod mermaid;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use warren_model::{DurationLabel, Exhausted};

use warren_codegen::contract::{Contract, Destination, ExchangeKind, Queue, QueueRole, Retry};

/// Whether the contract declares an exchange or only names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ownership {
    /// Declared by this contract.
    Own,
    /// Named by this contract (a binding, publisher or dead-letter target) but declared
    /// elsewhere: by an imported contract.
    External,
    /// The broker's default exchange (`""`), which nobody declares.
    Default,
}

/// An exchange as an export shows it: its name, kind and whose it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeView {
    /// The exchange's name (`""` for the default exchange).
    pub name: String,
    /// Its kind, when the contract knows it (the default exchange is direct).
    pub kind: Option<ExchangeKind>,
    /// Whose it is.
    pub ownership: Ownership,
}

/// The exchanges and queues an export shows, and which of them are this contract's: the one
/// place that decides it, so imported (owned-elsewhere) exchanges are drawn and exported
/// as external by every output alike.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope<'a> {
    /// Every exchange the contract declares or names, by name.
    pub exchanges: BTreeMap<String, ExchangeView>,
    /// The declared queues (wait queues are part of their queue's retry policy), in the
    /// topology's order.
    pub queues: Vec<&'a Queue>,
}

impl<'a> Scope<'a> {
    /// The scope of `contract`.
    pub fn of(contract: &'a Contract) -> Self {
        let topology = &contract.topology;
        let mut exchanges: BTreeMap<String, ExchangeView> = topology
            .exchanges
            .iter()
            .map(|e| {
                let view = ExchangeView {
                    name: e.name.clone(),
                    kind: Some(e.kind),
                    ownership: Ownership::Own,
                };
                (e.name.clone(), view)
            })
            .collect();
        let queues: Vec<&Queue> = topology
            .queues
            .iter()
            .filter(|q| q.role == QueueRole::Declared)
            .collect();
        let mut named: BTreeSet<&str> = BTreeSet::new();
        for binding in &topology.bindings {
            named.insert(&binding.exchange);
            if let Destination::Exchange(to) = &binding.destination {
                named.insert(to);
            }
        }
        named.extend(
            contract
                .publishers
                .values()
                .map(|p| p.publication.exchange.as_str()),
        );
        named.extend(contract.rpcs.values().map(|r| r.target.exchange.as_str()));
        named.extend(
            queues
                .iter()
                .filter_map(|q| q.dead_letter.as_ref().map(|d| d.exchange.as_str())),
        );
        for name in named {
            if exchanges.contains_key(name) {
                continue;
            }
            let view = if name.is_empty() {
                ExchangeView {
                    name: String::new(),
                    kind: Some(ExchangeKind::Direct),
                    ownership: Ownership::Default,
                }
            } else {
                ExchangeView {
                    name: name.to_owned(),
                    kind: None,
                    ownership: Ownership::External,
                }
            };
            exchanges.insert(name.to_owned(), view);
        }
        Self { exchanges, queues }
    }
}

/// A queue's retry policy in one line, as a diagram labels it:
/// `ttl-backoff: 5 retries, 500ms → 8s (×2, jitter), 11 wait queues, then dead-letter`.
/// `None` when the queue does not retry.
pub fn retry_summary(queue: &Queue) -> Option<String> {
    let then = |exhausted: Exhausted| match exhausted {
        Exhausted::DeadLetter if queue.dead_letter.is_none() => "then dropped".to_owned(),
        other => format!("then {other}"),
    };
    let retries = |n: u32| {
        if n == 1 {
            "1 retry".to_owned()
        } else {
            format!("{n} retries")
        }
    };
    match &queue.retry {
        Retry::None => None,
        Retry::ImmediateRequeue {
            max_retries,
            exhausted,
        } => Some(format!(
            "immediate-requeue: {}, {}",
            retries(*max_retries),
            then(*exhausted)
        )),
        Retry::TtlBackoff(backoff) => {
            let mut text = format!("ttl-backoff: {}", retries(backoff.max_retries));
            if backoff.max_retries > 0 {
                let first = backoff.delay(0);
                let last = backoff.delay(backoff.max_retries - 1);
                let _ = write!(text, ", {}", DurationLabel(first));
                if last != first {
                    let _ = write!(text, " → {}", DurationLabel(last));
                }
                let mut how = Vec::new();
                if last != first {
                    how.push(format!("×{}", backoff.multiplier));
                }
                if backoff.jitter {
                    how.push("jitter".to_owned());
                }
                if !how.is_empty() {
                    let _ = write!(text, " ({})", how.join(", "));
                }
            }
            let tiers = backoff.tiers.len();
            let _ = write!(
                text,
                ", {tiers} wait queue{}, {}",
                if tiers == 1 { "" } else { "s" },
                then(backoff.exhausted)
            );
            Some(text)
        }
        Retry::QuorumNative => Some(match queue.quorum_delivery_limit() {
            Some(limit) if limit < warren_model::QUORUM_UNLIMITED => {
                format!("quorum-native: delivery limit {limit}")
            }
            _ => "quorum-native: no delivery limit".to_owned(),
        }),
    }
}

/// A binding's match as a label: its routing key, or on a headers exchange its header
/// match (`all: region=eu`); `None` when there is nothing to say (a fanout binding).
pub fn binding_label(binding: &warren_model::Binding) -> Option<String> {
    let mut headers: Vec<String> = Vec::new();
    let mut mode = None;
    for (name, value) in &binding.arguments {
        let value = match value {
            warren_model::ArgValue::Bool(b) => b.to_string(),
            warren_model::ArgValue::Int(i) => i.to_string(),
            warren_model::ArgValue::Float(f) => f.to_string(),
            warren_model::ArgValue::String(s) => s.clone(),
        };
        if name == "x-match" {
            mode = Some(value);
        } else {
            headers.push(format!("{name}={value}"));
        }
    }
    if mode.is_some() || !headers.is_empty() {
        let mode = mode.unwrap_or_else(|| "all".to_owned());
        return Some(format!("{mode}: {}", headers.join(", ")));
    }
    (!binding.routing_key.is_empty()).then(|| binding.routing_key.clone())
}

/// Stable identifiers made from names, for the places (AsyncAPI keys, diagram node IDs)
/// that take only a few characters: each name gets `prefix` and its ASCII letters, digits,
/// `.`, `-` and `_`, the rest written `_`, and a `-2`, `-3`… when two names would collide.
/// The same names in the same order always get the same identifiers.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    taken: BTreeSet<String>,
    given: BTreeMap<(String, String), String>,
}

impl Ids {
    /// The identifier of `name` under `prefix`, the same each time it is asked.
    pub(crate) fn id(&mut self, prefix: &str, name: &str) -> String {
        let key = (prefix.to_owned(), name.to_owned());
        if let Some(id) = self.given.get(&key) {
            return id.clone();
        }
        let slug: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let base = if slug.is_empty() {
            prefix.to_owned()
        } else {
            format!("{prefix}{slug}")
        };
        let mut id = base.clone();
        let mut n = 2;
        while self.taken.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        self.taken.insert(id.clone());
        self.given.insert(key, id.clone());
        id
    }
}
