//! Topology rules: what a live broker refuses to redeclare, queues and wait queues dropped
//! while they may hold messages, bindings removed, and routing keys that now reach other
//! queues (followed offline by [`warren_codegen::Routes`] over each version's bindings).

use std::collections::{BTreeMap, BTreeSet};

use warren_model::{ArgValue, Arguments, Destination, Exchange, Queue, QueueRole, Topology};

use super::{Context, Party, PartyKind, Rule, at, queued};
use warren_codegen::contract::Contract;
use warren_codegen::diagnostics::YamlPath;

/// Every topology change from `cx.old` to `cx.new`.
pub(super) fn compare(cx: &mut Context<'_>) {
    queues(cx);
    exchanges(cx);
    bindings(cx);
    routes(cx);
}

fn by_name<T>(items: &[T], name: impl Fn(&T) -> &str) -> BTreeMap<&str, &T> {
    items.iter().map(|item| (name(item), item)).collect()
}

fn shown(value: Option<&ArgValue>) -> String {
    match value {
        None => "unset".to_owned(),
        Some(ArgValue::Bool(b)) => b.to_string(),
        Some(ArgValue::Int(n)) => n.to_string(),
        Some(ArgValue::Float(x)) => x.to_string(),
        Some(ArgValue::String(s)) => format!("\"{s}\""),
    }
}

/// The queue arguments RabbitMQ compares when a queue is declared again
/// (`rabbit_amqqueue:declare_args/0` on 3.10, plus the quorum delivery limit): one that
/// differs, or is set on one side only, fails the declaration with PRECONDITION_FAILED.
/// Any other argument is taken on the first declaration and ignored afterwards.
const COMPARED_QUEUE_ARGUMENTS: &[&str] = &[
    "x-queue-type",
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-dead-letter-strategy",
    "x-delivery-limit",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-in-memory-length",
    "x-max-in-memory-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-version",
    "x-single-active-consumer",
    "x-quorum-initial-group-size",
    "x-initial-cluster-size",
    "x-max-age",
    "x-stream-max-segment-size-bytes",
    "x-queue-leader-locator",
    "x-queue-master-locator",
];

/// The exchange arguments RabbitMQ compares on redeclare.
const COMPARED_EXCHANGE_ARGUMENTS: &[&str] = &[warren_model::argument::ALTERNATE_EXCHANGE];

/// Differences of a declaration: those the broker refuses on redeclare, and those of
/// arguments it ignores then.
#[derive(Default)]
struct Declaration {
    refused: Vec<String>,
    ignored: Vec<String>,
}

/// The declaration properties (all compared) and arguments that differ, as
/// `what: old → new`.
fn declaration_changes(
    flags: &[(&str, bool, bool)],
    old: &Arguments,
    new: &Arguments,
    compared: &[&str],
) -> Declaration {
    let mut out = Declaration {
        refused: flags
            .iter()
            .filter(|(_, a, b)| a != b)
            .map(|(what, a, b)| format!("{what}: {a} → {b}"))
            .collect(),
        ignored: Vec::new(),
    };
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for key in keys {
        let (a, b) = (old.get(key), new.get(key));
        if a != b {
            let change = format!("`{key}`: {} → {}", shown(a), shown(b));
            if compared.contains(&key.as_str()) {
                out.refused.push(change);
            } else {
                out.ignored.push(change);
            }
        }
    }
    out
}

/// Lists the arguments a broker ignores on redeclare: safe, but without effect on a queue or
/// exchange that exists.
fn ignored(cx: &mut Context<'_>, rule: Rule, location: &str, what: &str, changes: Vec<String>) {
    for change in changes {
        cx.push(
            rule,
            location.to_owned(),
            format!("{what} {change}"),
            Vec::new(),
            "the broker does not compare this argument on redeclare, so where it exists it \
             keeps the old value: set it by policy, or recreate it, for the change to apply",
        );
    }
}

fn deploy(name: &str) -> Party {
    Party {
        kind: PartyKind::Deploy,
        name: name.to_owned(),
        contract: String::new(),
    }
}

/// Where a queue is written in the contract: its own entry, or its owner's retry policy.
fn queue_location(queue: &Queue) -> String {
    match &queue.role {
        QueueRole::Declared => at("queues", &queue.name),
        QueueRole::Wait { queue: owner, .. } => format!("{}.retry", at("queues", owner)),
    }
}

fn queues(cx: &mut Context<'_>) {
    let old = by_name(&cx.old.topology.queues, |q| &q.name);
    let new = by_name(&cx.new.topology.queues, |q| &q.name);
    let names: BTreeSet<&str> = old.keys().chain(new.keys()).copied().collect();
    for name in names {
        match (old.get(name), new.get(name)) {
            (None, Some(queue)) => cx.push(
                Rule::QueueAdded,
                queue_location(queue),
                match &queue.role {
                    QueueRole::Declared => format!("queue `{name}` added"),
                    QueueRole::Wait { .. } => format!("wait queue `{name}` added"),
                },
                Vec::new(),
                "declared on the next deploy",
            ),
            (Some(queue), None) => match &queue.role {
                QueueRole::Declared => cx.push(
                    Rule::QueueRemoved,
                    queue_location(queue),
                    format!("queue `{name}` removed{}", renamed(cx, name)),
                    vec![queued(name)],
                    "it may still hold messages (and keep receiving them through bindings on \
                     the broker, which a deploy does not remove): stop publishing to it, let \
                     its consumers drain it, then delete it; to rename it, declare the new \
                     queue beside it and move consumers over first",
                ),
                QueueRole::Wait { queue: owner, .. } => cx.push(
                    Rule::WaitQueueRemoved,
                    queue_location(queue),
                    format!("wait queue `{name}` of `{owner}` removed"),
                    vec![queued(name)],
                    "retries may be waiting in it: `warren plan --url URL warren.yaml \
                     --against REV --apply` moves them back to their queue at once and \
                     deletes it; by hand, keep it on the broker until it is empty (each \
                     message returns to its queue after the delay), then delete it",
                ),
            },
            (Some(a), Some(b)) => queue_pair(cx, a, b),
            (None, None) => {}
        }
    }
}

/// When a consumer of the removed queue `name` reads a new queue now: that it was renamed.
fn renamed(cx: &Context<'_>, name: &str) -> String {
    cx.old
        .consumers
        .values()
        .filter(|c| c.spec.queue == name)
        .find_map(|c| {
            let moved = cx.new.consumers.get(&c.spec.name)?;
            let is_new = cx.old.topology.queue(&moved.spec.queue).is_none();
            is_new.then(|| {
                format!(
                    " (renamed to `{}`? consumer `{}` reads it now)",
                    moved.spec.queue, c.spec.name
                )
            })
        })
        .unwrap_or_default()
}

fn queue_pair(cx: &mut Context<'_>, old: &Queue, new: &Queue) {
    let name = &new.name;
    let changes = declaration_changes(
        &[
            ("durable", old.durable, new.durable),
            ("exclusive", old.exclusive, new.exclusive),
            ("auto-delete", old.auto_delete, new.auto_delete),
        ],
        &old.declare_arguments(),
        &new.declare_arguments(),
        COMPARED_QUEUE_ARGUMENTS,
    );
    let what = format!("queue `{name}`");
    ignored(
        cx,
        Rule::QueueArgumentIgnored,
        &queue_location(new),
        &what,
        changes.ignored,
    );
    // `warren plan --apply` moves the queue (a declared queue with its wait queues'
    // retries) through a holding queue and declares it again.
    let advice = "the broker refuses to redeclare a queue with other properties or arguments \
         (PRECONDITION_FAILED, and the channel closes): `warren plan --url URL warren.yaml \
         --against REV --apply`, with the old version's workers stopped, migrates it without \
         losing a message (they wait in a holding queue while it is declared again, its \
         bindings kept, those made by hand included); by hand, declare a queue under a new \
         name beside it and move consumers over, then delete the old one once drained";
    for change in changes.refused {
        cx.push(
            Rule::QueueRedeclare,
            queue_location(new),
            format!("queue `{name}` {change}"),
            vec![deploy(name)],
            advice,
        );
    }
    if old.role == QueueRole::Declared && (old.retry != new.retry || old.on_poison != new.on_poison)
    {
        cx.push(
            Rule::QueueBehaviour,
            queue_location(new),
            format!("queue `{name}`'s retry or poison handling changed"),
            Vec::new(),
            "applied by the worker, not declared on the broker (any argument or wait queue it \
             changes is listed on its own)",
        );
    }
}

fn exchanges(cx: &mut Context<'_>) {
    let old = by_name(&cx.old.topology.exchanges, |e| &e.name);
    let new = by_name(&cx.new.topology.exchanges, |e| &e.name);
    let names: BTreeSet<&str> = old.keys().chain(new.keys()).copied().collect();
    for name in names {
        let location = at("exchanges", name);
        match (old.get(name), new.get(name)) {
            (None, Some(_)) => cx.push(
                Rule::ExchangeAdded,
                location,
                format!("exchange `{name}` added"),
                Vec::new(),
                "declared on the next deploy",
            ),
            (Some(_), None) => {
                let breaks: Vec<Party> = publishers_to(cx, cx.old, name)
                    .into_iter()
                    .chain(publishers_to(cx, cx.new, name))
                    .collect();
                cx.push(
                    Rule::ExchangeRemoved,
                    location,
                    format!("exchange `{name}` removed"),
                    breaks,
                    "publishers to it (here or in other services) get a channel error once it \
                     is deleted, and its bindings go with it: move every publisher first",
                );
            }
            (Some(a), Some(b)) => exchange_pair(cx, a, b),
            (None, None) => {}
        }
    }
}

/// The publishers of `contract` that publish to `exchange`, as the roles know them.
fn publishers_to(cx: &Context<'_>, contract: &Contract, exchange: &str) -> Vec<Party> {
    contract
        .publishers
        .values()
        .filter(|p| p.publication.exchange == exchange)
        .flat_map(|p| {
            cx.roles
                .publishers(&p.message)
                .into_iter()
                .filter(|party| party.name == p.name)
        })
        .collect()
}

fn exchange_pair(cx: &mut Context<'_>, old: &Exchange, new: &Exchange) {
    let name = &new.name;
    let mut changes = Vec::new();
    if old.kind != new.kind {
        changes.push(format!(
            "type: {} → {}",
            old.kind.as_str(),
            new.kind.as_str()
        ));
    }
    let declaration = declaration_changes(
        &[
            ("durable", old.durable, new.durable),
            ("auto-delete", old.auto_delete, new.auto_delete),
            ("internal", old.internal, new.internal),
        ],
        &old.declare_arguments(),
        &new.declare_arguments(),
        COMPARED_EXCHANGE_ARGUMENTS,
    );
    changes.extend(declaration.refused);
    let what = format!("exchange `{name}`");
    let location = at("exchanges", name);
    ignored(
        cx,
        Rule::ExchangeArgumentIgnored,
        &location,
        &what,
        declaration.ignored,
    );
    for change in changes {
        cx.push(
            Rule::ExchangeRedeclare,
            at("exchanges", name),
            format!("exchange `{name}` {change}"),
            vec![deploy(name)],
            "the broker refuses to redeclare an exchange with another type, properties or \
             arguments (PRECONDITION_FAILED): declare a new exchange, bind it to the old one \
             (or the queues to both), move publishers over, then delete the old one",
        );
    }
}

/// A binding as one comparable, printable line.
fn binding_text(exchange: &str, to: &Destination, key: &str, arguments: &Arguments) -> String {
    let to = match to {
        Destination::Queue(q) => format!("queue `{q}`"),
        Destination::Exchange(e) => format!("exchange `{e}`"),
    };
    let mut text = format!("`{exchange}` → {to} with key `{key}`");
    if !arguments.is_empty() {
        let pairs: Vec<String> = arguments
            .iter()
            .map(|(k, v)| format!("{k}={}", shown(Some(v))))
            .collect();
        text.push_str(&format!(" ({})", pairs.join(", ")));
    }
    text
}

/// Each binding as text, with where it is in the contract (`bindings[i]`) and the queue it
/// delivers to.
fn binding_set(topology: &Topology) -> BTreeMap<String, (String, Option<String>)> {
    topology
        .bindings
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let queue = match &b.destination {
                Destination::Queue(q) => Some(q.clone()),
                Destination::Exchange(_) => None,
            };
            let location = YamlPath::root().key("bindings").index(i).to_string();
            (
                binding_text(&b.exchange, &b.destination, &b.routing_key, &b.arguments),
                (location, queue),
            )
        })
        .collect()
}

fn bindings(cx: &mut Context<'_>) {
    let old = binding_set(&cx.old.topology);
    let new = binding_set(&cx.new.topology);
    for (text, (location, queue)) in &old {
        if new.contains_key(text) {
            continue;
        }
        let breaks = match queue {
            Some(q) if cx.new.topology.queue(q).is_some() => cx.roles.queue_consumers(q),
            _ => Vec::new(),
        };
        let advice = if breaks.is_empty() {
            "nobody reads its queue in the new version (a removed queue is listed on its own)"
        } else {
            "its queue's consumers stop receiving these messages; a deploy never unbinds, so \
             remove the binding on the broker yourself (until then messages keep arriving)"
        };
        cx.push(
            Rule::BindingRemoved,
            location.clone(),
            format!("binding {text} removed"),
            breaks,
            advice,
        );
    }
    for (text, (location, _)) in new.iter().filter(|(t, _)| !old.contains_key(*t)) {
        cx.push(
            Rule::BindingAdded,
            location.clone(),
            format!("binding {text} added"),
            Vec::new(),
            "declared on the next deploy; any publisher whose route changes is listed",
        );
    }
}

fn routes(cx: &mut Context<'_>) {
    for (name, new) in &cx.new.publishers {
        let Some(old) = cx.old.publishers.get(name) else {
            continue;
        };
        let before = cx
            .routes
            .old
            .queues(&old.publication.exchange, &old.routing_key);
        let after = cx
            .routes
            .new
            .queues(&new.publication.exchange, &new.routing_key);
        if before == after {
            continue;
        }
        let lost: Vec<&String> = before.difference(&after).collect();
        let gained: Vec<&String> = after.difference(&before).collect();
        let list = |queues: &[&String]| {
            let names: Vec<String> = queues.iter().map(|q| format!("`{q}`")).collect();
            names.join(", ")
        };
        let mut summary = format!("publisher `{name}`'s messages");
        if !gained.is_empty() {
            summary.push_str(&format!(" now reach {}", list(&gained)));
        }
        if !lost.is_empty() {
            if !gained.is_empty() {
                summary.push_str(" and");
            }
            summary.push_str(&format!(" no longer reach {}", list(&lost)));
        }
        // A consumer that moved to a queue the key reaches now (a renamed queue) still gets
        // the messages.
        let moved = |party: &Party| {
            cx.new
                .consumers
                .get(&party.name)
                .is_some_and(|c| after.contains(&c.spec.queue))
        };
        let breaks: Vec<Party> = lost
            .iter()
            .flat_map(|q| cx.roles.queue_consumers(q))
            .filter(|party| !moved(party))
            .collect();
        let advice = if breaks.is_empty() {
            "every consumer still receives its messages"
        } else {
            "consumers of the queues it no longer reaches stop receiving its messages: keep a \
             binding for them, or move those consumers first"
        };
        cx.push(
            Rule::Routing,
            at("publishers", name),
            summary,
            breaks,
            advice,
        );
    }
}
