//! The system rules that follow messages: where each publisher's messages and each rpc's
//! requests go across every contract, who reads them (consumers and rpc servers), and
//! whether both sides agree on their schema.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::union::{Id, Reader, Sender, Union, entry};
use super::{rpcs, schemas};
use crate::check::list;
use crate::contract::KeyTemplate;
use crate::diagnostics::{Code, Diagnostic, Diagnostics, YamlPath};

/// The most related places one diagnostic lists; the rest are counted.
pub(super) const MAX_RELATED: usize = 4;

/// Runs the routing and schema rules. `left_out` are contracts with errors of their own,
/// which the system checks could not see.
pub(super) fn run(union: &Union<'_>, left_out: &[PathBuf], out: &mut Diagnostics) {
    let note = left_out_note(left_out);
    unroutable(union, &note, out);
    unfed(union, &note, out);
    schema_mismatch(union, out);
    rpcs::mismatch(union, out);
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
pub(super) fn more(count: usize) -> String {
    if count > MAX_RELATED {
        format!(", and {} more", count - MAX_RELATED)
    } else {
        String::new()
    }
}

/// A publisher whose messages reach no queue of any contract: an error, or a warning when
/// it says its consumers are outside (`external_consumers: true`).
fn unroutable(union: &Union<'_>, note: &str, out: &mut Diagnostics) {
    for (id, sender, reach) in &union.routes {
        // An rpc's requests reach its queue in its own contract, or its checks refused it.
        let Sender::Publisher(publisher) = sender else {
            continue;
        };
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
        let target = if publisher.publication.exchange.is_empty() {
            "the default exchange".to_owned()
        } else {
            format!("exchange `{}`", publisher.publication.exchange)
        };
        let name = &publisher.name;
        let what = if publisher.publication.routing_key.is_empty() {
            format!("publisher `{name}` publishes to {target}")
        } else {
            format!(
                "publisher `{name}` sends `{}` to {target}",
                publisher.publication.routing_key
            )
        };
        let path = entry("publishers", name).key("routing_key");
        let seen = if publisher.publication.exchange.is_empty() {
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

/// A consumer whose queue no publisher or rpc of the system reaches, dead-letter flows
/// included; an rpc's server whose queue no publisher or rpc but its own reaches (the
/// server's contract holds the rpc whether or not it calls it, so its own requests do not
/// count: a caller's contract must). A warning: producers and callers may live outside the
/// system.
fn unfed(union: &Union<'_>, note: &str, out: &mut Diagnostics) {
    let feeds = Feeds::new(union);
    for (queue, readers) in &union.readers {
        for (id, reader) in readers {
            if feeds.fed(queue, own_rpc(*id, *reader)) {
                continue;
            }
            out.push(unfed_reader(union, queue, *id, *reader, note));
        }
    }
}

/// The warning about `reader` of contract `id`, whose queue `queue` nothing else fills: its
/// bindings, and the senders to their exchanges whose keys they do not match.
fn unfed_reader(
    union: &Union<'_>,
    queue: &str,
    id: Id,
    reader: Reader<'_>,
    note: &str,
) -> Diagnostic {
    let own = own_rpc(id, reader);
    let senders = if own.is_some() {
        "publisher or other rpc"
    } else {
        "publisher or rpc"
    };
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
        format!("it has no binding, and no {senders} names it on the default exchange")
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
    let help = match own {
        Some((_, rpc)) => format!(
            "fine if callers outside these contracts call rpc `{rpc}`; otherwise validate its callers' contracts with this one, or make their requests reach queue `{queue}`{note}"
        ),
        None => format!(
            "fine if producers outside these contracts fill it; otherwise add a publisher whose key matches a binding, or fix the binding{note}"
        ),
    };
    let mut diagnostic = Diagnostic::warning(
        Code::UnfedConsumer,
        union.file(id),
        format!(
            "{} reads queue `{queue}`, which no {senders} of the system reaches ({how})",
            reader.describe()
        ),
    )
    .with_help(help)
    .at(union.place(id, &reader.path().key("queue")));
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
    // The senders to those exchanges, whose keys the bindings do not match (the server's
    // own rpc, which reaches it, left out).
    let exchanges: BTreeSet<&str> = bindings
        .iter()
        .map(|(_, _, b)| b.exchange.as_str())
        .collect();
    let senders = exchanges
        .iter()
        .flat_map(|e| union.senders.get(e).into_iter().flatten())
        .filter(|(other, sender)| !is_rpc(*other, *sender, own));
    for (other, sender) in senders.take(MAX_RELATED) {
        diagnostic = diagnostic.also_at(
            union.file(*other),
            union.place(*other, &sender.path().key("routing_key")),
            format!(
                "{} sends `{}` to exchange `{}` here, which no binding of `{queue}` matches",
                sender.describe(),
                sender.key_text(),
                sender.exchange()
            ),
        );
    }
    diagnostic
}

/// The rpc `reader` of contract `id` serves, as (contract, name): what its own contract's
/// requests come from.
fn own_rpc<'a>(id: Id, reader: Reader<'a>) -> Option<(Id, &'a str)> {
    reader.rpc().map(|rpc| (id, rpc.name.as_str()))
}

/// Whether `sender` of contract `id` is rpc `rpc` (contract, name).
fn is_rpc(id: Id, sender: Sender<'_>, rpc: Option<(Id, &str)>) -> bool {
    rpc.is_some_and(|(rpc_id, name)| id == rpc_id && sender.rpc().is_some_and(|r| r.name == name))
}

/// Who may fill each queue of the system: the publishers and rpcs whose messages reach it,
/// and the queues whose dead letters may land in it.
struct Feeds<'a> {
    /// The senders whose messages reach each queue, or may (a headers binding).
    reached_by: BTreeMap<&'a str, Vec<(Id, Sender<'a>)>>,
    /// For each queue, the queues whose dead letters may reach it: each queue's dead letters
    /// go to its dead-letter exchange with its dead-letter key, or any key when they keep
    /// their own.
    dead_letters_from: BTreeMap<String, BTreeSet<&'a str>>,
}

impl<'a> Feeds<'a> {
    /// Where every sender's messages and every queue's dead letters go, routed once.
    fn new(union: &'a Union<'a>) -> Self {
        let mut reached_by: BTreeMap<&str, Vec<(Id, Sender<'a>)>> = BTreeMap::new();
        for (id, sender, reach) in &union.routes {
            for queue in reach.queues.iter().chain(&reach.maybe) {
                reached_by
                    .entry(queue.as_str())
                    .or_default()
                    .push((*id, *sender));
            }
        }
        // Dead letters without their own key keep the message's, unknown here: any key.
        let any_key = KeyTemplate::parse("{any}").unwrap_or_else(|_| KeyTemplate::empty());
        let mut dead_letters_from: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for (queue, declarations) in &union.queues {
            for (_, declared) in declarations {
                let Some(dead_letter) = &declared.dead_letter else {
                    continue;
                };
                let key = match &dead_letter.routing_key {
                    Some(key) => KeyTemplate::parse(key).unwrap_or_else(|_| any_key.clone()),
                    None => any_key.clone(),
                };
                let reach = union.graph.route(&dead_letter.exchange, &key);
                for to in reach.queues.into_iter().chain(reach.maybe) {
                    dead_letters_from.entry(to).or_default().insert(queue);
                }
            }
        }
        Self {
            reached_by,
            dead_letters_from,
        }
    }

    /// Whether some sender of the system but rpc `except` (contract, name) may fill `queue`:
    /// reaches it, or a queue whose dead letters flow into it. Each queue is followed once.
    fn fed(&self, queue: &str, except: Option<(Id, &str)>) -> bool {
        let mut seen = BTreeSet::new();
        let mut todo = vec![queue];
        while let Some(queue) = todo.pop() {
            if !seen.insert(queue) {
                continue;
            }
            let reached = self.reached_by.get(queue).into_iter().flatten();
            if reached
                .into_iter()
                .any(|(id, sender)| !is_rpc(*id, *sender, except))
            {
                return true;
            }
            todo.extend(self.dead_letters_from.get(queue).into_iter().flatten());
        }
        false
    }
}

/// A publisher or rpc in one contract whose messages reach a queue read in another (by a
/// consumer or an rpc's server), where the two contracts' schemas of the message differ.
/// One diagnostic per reader and sending contract's message, listing its senders. An rpc
/// calling another contract's rpc is left to `rpcs::mismatch`, which compares the whole call.
fn schema_mismatch(union: &Union<'_>, out: &mut Diagnostics) {
    // (reader's contract, section, name, sender's contract, message sent) → the reader and
    // its senders.
    type Key<'a> = (Id, &'static str, &'a str, Id, &'a str);
    let mut found: BTreeMap<Key<'_>, (Reader<'_>, Vec<Sender<'_>>)> = BTreeMap::new();
    // Each pair of messages is compared once, however many senders and readers share it.
    let mut compared: BTreeMap<(Id, &str, Id, &str), Vec<&'static str>> = BTreeMap::new();
    for (sender_id, sender, reach) in &union.routes {
        let sent_by = &union.members[*sender_id].checked.contract;
        let Some(sent) = sent_by.messages.get(sender.message()) else {
            continue;
        };
        // Only routes known to reach the queue count: a headers binding may not match.
        for queue in &reach.queues {
            for (reader_id, reader) in union.readers.get(queue.as_str()).into_iter().flatten() {
                if reader_id == sender_id {
                    // One contract's sender and reader: `message-mismatch` checks them.
                    continue;
                }
                if sender.rpc().is_some() && reader.rpc().is_some() {
                    continue;
                }
                let read_by = &union.members[*reader_id].checked.contract;
                let expecting = expected_of(reader.consumer(), &sent.name);
                let Some(expected) = read_by.messages.get(expecting) else {
                    continue;
                };
                let pair = (
                    *sender_id,
                    sent.name.as_str(),
                    *reader_id,
                    expected.name.as_str(),
                );
                let differ = compared
                    .entry(pair)
                    .or_insert_with(|| schemas::differences(sent, expected));
                if !differ.is_empty() {
                    let key = (
                        *reader_id,
                        reader.section(),
                        reader.consumer().spec.name.as_str(),
                        *sender_id,
                        sent.name.as_str(),
                    );
                    found
                        .entry(key)
                        .or_insert_with(|| (*reader, Vec::new()))
                        .1
                        .push(*sender);
                }
            }
        }
    }
    for ((reader_id, _, _, sender_id, message), (reader, senders)) in found {
        let consumer = reader.consumer();
        let differ = compared
            .get(&(
                sender_id,
                message,
                reader_id,
                expected_of(consumer, message),
            ))
            .cloned()
            .unwrap_or_default();
        let names: Vec<String> = senders.iter().map(|s| s.describe()).collect();
        let sender_file = union.file(sender_id).display().to_string();
        let mut diagnostic = Diagnostic::error(
            Code::SchemaMismatch,
            union.file(reader_id),
            format!(
                "{} expects message `{}`, but {}{} of `{sender_file}` send{} its message `{message}` to queue `{}` with a different {}",
                reader.describe(),
                expected_of(consumer, message),
                names
                    .iter()
                    .take(MAX_RELATED)
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
                more(names.len()),
                if names.len() == 1 { "s" } else { "" },
                consumer.spec.queue,
                differ.join(" and "),
            ),
        )
        .with_help("a producer and its consumers must agree on one schema: make both contracts use the same schema file, or evolve it compatibly and deploy the consumers first")
        .at(union.place(reader_id, &reader.message_path()));
        for (sender, name) in senders.iter().zip(&names).take(MAX_RELATED) {
            diagnostic = diagnostic.also_at(
                union.file(sender_id),
                union.place(sender_id, &sender.message_path()),
                format!("{name} sends `{message}` here"),
            );
        }
        diagnostic = diagnostic.also_at(
            union.file(sender_id),
            union.place(sender_id, &entry("messages", message).key("payload")),
            format!("message `{message}` of `{sender_file}` is declared here"),
        );
        out.push(diagnostic);
    }
}

/// The message `consumer` expects when another contract sends it `sent`: its one message, or,
/// of a consumer of several, the one of the same name (compared unqualified, as the runtime
/// recognises a delivery's `type`), else its first.
fn expected_of<'c>(consumer: &'c crate::contract::Consumer, sent: &str) -> &'c str {
    let unqualified = |name: &str| name.rsplit("::").next().unwrap_or_default().to_owned();
    (consumer.messages.iter())
        .map(|consumed| consumed.message.as_str())
        .find(|name| unqualified(name) == unqualified(sent))
        .unwrap_or_else(|| consumer.message())
}
