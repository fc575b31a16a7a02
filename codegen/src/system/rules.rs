//! The system rules that follow messages: where each publisher's messages go across every
//! contract, who reads them, and whether both sides agree on their schema.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::schemas;
use super::union::{Id, Union, entry};
use crate::check::list;
use crate::diagnostics::{Code, Diagnostic, Diagnostics, YamlPath};
use crate::model::{KeyTemplate, Publisher};

/// The most related places one diagnostic lists; the rest are counted.
pub(super) const MAX_RELATED: usize = 4;

/// Runs the routing and schema rules. `left_out` are contracts with errors of their own,
/// which the system checks could not see.
pub(super) fn run(union: &Union<'_>, left_out: &[PathBuf], out: &mut Diagnostics) {
    let note = left_out_note(left_out);
    unroutable(union, &note, out);
    unfed(union, &note, out);
    schema_mismatch(union, out);
}

/// What an absence rule adds to its help when some contracts were left out.
fn left_out_note(left_out: &[PathBuf]) -> String {
    if left_out.is_empty() {
        return String::new();
    }
    let names: Vec<String> = left_out.iter().map(|p| p.display().to_string()).collect();
    format!(
        ". Not seen: {}, left out of the system checks for their own errors",
        list(names.iter().take(MAX_RELATED).map(String::as_str)) + &more(names.len())
    )
}

/// `, and 3 more` when `count` is over [`MAX_RELATED`].
fn more(count: usize) -> String {
    if count > MAX_RELATED {
        format!(", and {} more", count - MAX_RELATED)
    } else {
        String::new()
    }
}

/// A publisher whose messages reach no queue of any contract: an error, or a warning when
/// it says its consumers are outside (`external_consumers: true`).
fn unroutable(union: &Union<'_>, note: &str, out: &mut Diagnostics) {
    for (id, publisher, reach) in &union.routes {
        if reach.is_routable() {
            continue;
        }
        let member = &union.members[*id];
        let external = member
            .loaded
            .file
            .publishers
            .get(&publisher.name)
            .is_some_and(|p| p.external_consumers == Some(true));
        let target = if publisher.exchange.is_empty() {
            "the default exchange".to_owned()
        } else {
            format!("exchange `{}`", publisher.exchange)
        };
        let name = &publisher.name;
        let what = if publisher.routing_key_text.is_empty() {
            format!("publisher `{name}` publishes to {target}")
        } else {
            format!(
                "publisher `{name}` sends `{}` to {target}",
                publisher.routing_key_text
            )
        };
        let path = entry("publishers", name).key("routing_key");
        let seen = if publisher.exchange.is_empty() {
            format!(
                "on the default exchange the routing key must be a queue name; the system's queues: {}{}",
                list(union.queues.keys().copied().take(MAX_RELATED)),
                more(union.queues.len())
            )
        } else {
            format!("bindings seen: {}", union.graph.bindings_seen(reach))
        };
        let diagnostic = if external {
            Diagnostic::warning(
                Code::UnconsumedInSystem,
                union.file(*id),
                format!("{what}, marked `external_consumers: true`, but no contract of the system has a queue it reaches"),
            )
            .with_help(format!(
                "{seen}. If its consumers' contract is maintained, validate it with this one{note}"
            ))
        } else {
            Diagnostic::error(
                Code::UnroutablePublisher,
                union.file(*id),
                format!("{what}, which routes it to no queue of any contract of the system: RabbitMQ would confirm the publish and drop the message"),
            )
            .with_help(format!(
                "{seen}. Bind a queue with a matching key in one of the contracts, or set `external_consumers: true` if a service outside the system declares the queue{note}"
            ))
        };
        let mut diagnostic = diagnostic.at(union.place(*id, &path));
        // The other contracts that declare the exchanges it went through: where a binding
        // would go. Taken lazily: an exchange a thousand contracts declare lists four.
        let related = reach
            .visited
            .iter()
            .flat_map(|exchange| {
                let all = union.exchanges.get(exchange.as_str()).into_iter().flatten();
                all.map(move |(other, _)| (*other, exchange))
            })
            .filter(|(other, _)| other != id)
            .take(MAX_RELATED);
        for (other, exchange) in related {
            diagnostic = diagnostic.also_at(
                union.file(other),
                union.place(other, &entry("exchanges", exchange)),
                format!(
                    "exchange `{exchange}` is declared here too, with no binding the key matches"
                ),
            );
        }
        out.push(diagnostic);
    }
}

/// A consumer whose queue no publisher of the system reaches, dead-letter flows included: a
/// warning, since producers may live outside the system.
fn unfed(union: &Union<'_>, note: &str, out: &mut Diagnostics) {
    let fed = fed_queues(union);
    for (queue, consumers) in &union.consumers {
        if fed.contains(*queue) {
            continue;
        }
        let bindings = union
            .bound_to
            .get(queue)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let described: BTreeSet<String> = bindings
            .iter()
            .map(|(_, _, b)| {
                if b.routing_key.is_empty() {
                    format!("`{}`", b.exchange)
                } else {
                    format!("`{}` on `{}`", b.routing_key, b.exchange)
                }
            })
            .collect();
        let how = if described.is_empty() {
            "it has no binding, and no publisher names it on the default exchange".to_owned()
        } else {
            let shown: Vec<&str> = described
                .iter()
                .map(String::as_str)
                .take(MAX_RELATED)
                .collect();
            format!(
                "its bindings: {}{}",
                shown.join(", "),
                more(described.len())
            )
        };
        for (id, consumer) in consumers {
            let mut diagnostic = Diagnostic::warning(
                Code::UnfedConsumer,
                union.file(*id),
                format!(
                    "consumer `{}` reads queue `{queue}`, which no publisher of the system reaches ({how})",
                    consumer.name
                ),
            )
            .with_help(format!(
                "fine if producers outside these contracts fill it; otherwise add a publisher whose key matches a binding, or fix the binding{note}"
            ))
            .at(union.place(*id, &entry("consumers", &consumer.name).key("queue")));
            for (other, index, binding) in bindings.iter().take(MAX_RELATED) {
                diagnostic = diagnostic.also_at(
                    union.file(*other),
                    union.place(*other, &YamlPath::root().key("bindings").index(*index)),
                    format!(
                        "queue `{queue}` is bound here to exchange `{}`",
                        binding.exchange
                    ),
                );
            }
            // The publishers to those exchanges, whose keys the bindings do not match.
            let exchanges: BTreeSet<&str> = bindings
                .iter()
                .map(|(_, _, b)| b.exchange.as_str())
                .collect();
            let senders = exchanges
                .iter()
                .flat_map(|e| union.publishers.get(e).into_iter().flatten());
            for (other, publisher) in senders.take(MAX_RELATED) {
                diagnostic = diagnostic.also_at(
                    union.file(*other),
                    union.place(*other, &entry("publishers", &publisher.name).key("routing_key")),
                    format!(
                        "publisher `{}` sends `{}` to exchange `{}` here, which no binding of `{queue}` matches",
                        publisher.name, publisher.routing_key_text, publisher.exchange
                    ),
                );
            }
            out.push(diagnostic);
        }
    }
}

/// The queues some publisher of the system may fill: those its messages reach, then, from
/// each, where its dead letters go (with its dead-letter key, or any key when the dead
/// letters keep their own). Each queue is followed once.
fn fed_queues(union: &Union<'_>) -> BTreeSet<String> {
    let mut fed = BTreeSet::new();
    let mut todo: Vec<String> = Vec::new();
    for (_, _, reach) in &union.routes {
        todo.extend(reach.queues.iter().chain(&reach.maybe).cloned());
    }
    // Dead letters without their own key keep the message's, unknown here: any key.
    let any_key = KeyTemplate::parse("{any}").unwrap_or_else(|_| KeyTemplate::empty());
    while let Some(queue) = todo.pop() {
        if !fed.insert(queue.clone()) {
            continue;
        }
        let declarations = union.queues.get(queue.as_str()).into_iter().flatten();
        for (_, declared) in declarations {
            let Some(dead_letter) = &declared.dead_letter else {
                continue;
            };
            let key = match &dead_letter.routing_key {
                Some(key) => KeyTemplate::parse(key).unwrap_or_else(|_| any_key.clone()),
                None => any_key.clone(),
            };
            let reach = union.graph.route(&dead_letter.exchange, &key);
            todo.extend(reach.queues.into_iter().chain(reach.maybe));
        }
    }
    fed
}

/// A publisher in one contract whose messages reach a queue consumed in another, where the
/// two contracts' schemas of the message differ. One diagnostic per consumer and sending
/// contract's message, listing its publishers.
fn schema_mismatch(union: &Union<'_>, out: &mut Diagnostics) {
    // (consumer's contract, consumer, publisher's contract, message sent) → its publishers.
    let mut found: BTreeMap<(Id, &str, Id, &str), Vec<&Publisher>> = BTreeMap::new();
    // Each pair of messages is compared once, however many publishers and consumers share it.
    let mut compared: BTreeMap<(Id, &str, Id, &str), Vec<&'static str>> = BTreeMap::new();
    for (sender, publisher, reach) in &union.routes {
        let sent_by = &union.members[*sender].checked.contract;
        let Some(sent) = sent_by.messages.get(&publisher.message) else {
            continue;
        };
        // Only routes known to reach the queue count: a headers binding may not match.
        for queue in &reach.queues {
            for (reader, consumer) in union.consumers.get(queue.as_str()).into_iter().flatten() {
                if reader == sender {
                    // One contract's publisher and consumer: `message-mismatch` checks them.
                    continue;
                }
                let read_by = &union.members[*reader].checked.contract;
                let Some(expected) = read_by.messages.get(&consumer.message) else {
                    continue;
                };
                let pair = (*sender, sent.name.as_str(), *reader, expected.name.as_str());
                let differ = compared
                    .entry(pair)
                    .or_insert_with(|| schemas::differences(sent, expected));
                if !differ.is_empty() {
                    found
                        .entry((*reader, consumer.name.as_str(), *sender, sent.name.as_str()))
                        .or_default()
                        .push(publisher);
                }
            }
        }
    }
    for ((reader, consumer_name, sender, message), publishers) in found {
        let read_by = &union.members[reader].checked.contract;
        let Some(consumer) = read_by.consumers.get(consumer_name) else {
            continue;
        };
        let differ = compared
            .get(&(sender, message, reader, consumer.message.as_str()))
            .cloned()
            .unwrap_or_default();
        let names: Vec<&str> = publishers.iter().map(|p| p.name.as_str()).collect();
        let sender_file = union.file(sender).display().to_string();
        let mut diagnostic = Diagnostic::error(
            Code::SchemaMismatch,
            union.file(reader),
            format!(
                "consumer `{consumer_name}` expects message `{}`, but publisher{} {} of `{sender_file}` send{} its message `{message}` to queue `{}` with a different {}",
                consumer.message,
                if names.len() == 1 { "" } else { "s" },
                list(names.iter().copied().take(MAX_RELATED)) + &more(names.len()),
                if names.len() == 1 { "s" } else { "" },
                consumer.queue,
                differ.join(" and "),
            ),
        )
        .with_help("a producer and its consumers must agree on one schema: make both contracts use the same schema file, or evolve it compatibly and deploy the consumers first")
        .at(union.place(reader, &entry("consumers", consumer_name).key("message")));
        for publisher in publishers.iter().take(MAX_RELATED) {
            diagnostic = diagnostic.also_at(
                union.file(sender),
                union.place(sender, &entry("publishers", &publisher.name).key("message")),
                format!("publisher `{}` sends `{message}` here", publisher.name),
            );
        }
        diagnostic = diagnostic.also_at(
            union.file(sender),
            union.place(sender, &entry("messages", message).key("payload")),
            format!("message `{message}` of `{sender_file}` is declared here"),
        );
        out.push(diagnostic);
    }
}
