//! Dead letters: a dead-letter exchange must route its queue's dead letters somewhere.

use super::{Checker, QueueDeadLetter, dead_letter_of, entry};
use crate::check::list;
use crate::diagnostics::{Code, YamlPath};
use crate::routing::KeyTemplate;
use crate::syntax::{Exchange, ExchangeKind};

impl Checker<'_> {
    /// A dead-letter exchange must route the dead letters of its queue somewhere.
    pub(in crate::check) fn dead_letters(&mut self) {
        let file = self.file;
        for (name, queue) in &file.queues {
            let Some(dl) = dead_letter_of(queue) else {
                continue;
            };
            let path = entry("queues", name).join(&dl.field);
            let key_path = if dl.routing_key.is_some() {
                entry("queues", name).join(&dl.key_field)
            } else {
                path.clone()
            };
            if dl.exchange.is_empty() {
                self.dead_letters_by_default_exchange(name, &dl, &path, &key_path);
                continue;
            }
            let Some(exchange) = self.exchange(&dl.exchange) else {
                continue;
            };
            let Some(loss) = self.dead_letter_loss(name, &dl, exchange) else {
                if dl.routing_key.is_none() && !catches_every_key(file, &dl.exchange, exchange) {
                    self.uncaught_keys(name, &dl.exchange, &path);
                }
                continue;
            };
            let path = match loss {
                Loss::NothingBound => path,
                Loss::Unrouted(_) => key_path,
            };
            let what = match loss {
                Loss::NothingBound => format!(
                    "dead-letter exchange `{}` of queue `{name}` has nothing bound: every dead letter would be lost",
                    dl.exchange
                ),
                Loss::Unrouted(keys) => format!(
                    "dead-letter exchange `{}` of queue `{name}` routes dead letters with key {} to no queue: they would be lost",
                    dl.exchange,
                    list(keys.iter().map(String::as_str))
                ),
            };
            let mut help =
                "bind a dead-letter queue to the exchange with a key that matches".to_owned();
            if dl.routing_key.is_none() {
                help.push_str(", or set `dead_letter.routing_key`");
            }
            if exchange.kind.unwrap_or_default() == ExchangeKind::Direct {
                help.push_str(". On a direct exchange `#` is a literal key, not a wildcard");
            }
            self.error(Code::UnroutableDeadLetter, &path, what, help);
        }
    }

    /// Dead letters of queue `name` keep their own keys, which `exchange` does not catch
    /// all of. The contract's publishers' keys route (checked above), but not every message
    /// comes by them: a producer on the default exchange (the queue's name as key), an RPC
    /// request, a key outside the contract. Warren's worker sends a dead letter its exchange
    /// cannot route to the dead-letter queue directly; the broker's own dead-lettering does
    /// not, and drops it.
    fn uncaught_keys(&mut self, name: &str, exchange: &str, path: &YamlPath) {
        self.warn(
            Code::UncaughtDeadLetterKey,
            path,
            format!(
                "dead letters of queue `{name}` keep their own routing key, and dead-letter exchange `{exchange}` does not route every key: one the broker dead-letters itself (delivery limit, expired, overflow) with a key no binding matches is dropped"
            ),
            "bind the dead-letter queue with `#` on a topic exchange (or use a fanout exchange), or set `dead_letter.routing_key`",
        );
    }

    /// Dead letters through the default exchange go to the queue their routing key names.
    fn dead_letters_by_default_exchange(
        &mut self,
        name: &str,
        dl: &QueueDeadLetter,
        path: &YamlPath,
        key_path: &YamlPath,
    ) {
        let file = self.file;
        match &dl.routing_key {
            None => self.error(
                Code::UnroutableDeadLetter,
                path,
                format!("queue `{name}` dead-letters through the default exchange without a routing key, so dead letters keep their own key and reach no queue"),
                "set `dead_letter.routing_key` to the name of the dead-letter queue",
            ),
            Some(key) if !file.queues.contains_key(key) => self.error(
                Code::UnroutableDeadLetter,
                key_path,
                format!("dead letters of `{name}` go through the default exchange to queue `{key}`, which is not declared"),
                "declare the dead-letter queue, or fix the name",
            ),
            Some(_) => {}
        }
    }

    /// How the dead-letter exchange of queue `name` would lose its dead letters, if it would.
    fn dead_letter_loss(
        &self,
        name: &str,
        dl: &QueueDeadLetter,
        exchange: &Exchange,
    ) -> Option<Loss> {
        // The keys dead letters carry: the configured one, else the keys of the messages
        // known to reach this queue.
        let keys: Vec<(String, KeyTemplate)> = match &dl.routing_key {
            Some(key) => KeyTemplate::parse(key)
                .map(|t| vec![(key.clone(), t)])
                .unwrap_or_default(),
            None => self.keys_reaching(name),
        };
        if keys.is_empty() {
            // Nothing is known to reach the queue: at least one binding must exist.
            let bound = self.graph.has_bindings(&dl.exchange);
            (!bound && exchange.alternate_exchange.is_none()).then_some(Loss::NothingBound)
        } else {
            let unrouted: Vec<String> = keys
                .iter()
                .filter(|(_, template)| !self.graph.route(&dl.exchange, template).is_routable())
                .map(|(text, _)| text.clone())
                .collect();
            (!unrouted.is_empty()).then_some(Loss::Unrouted(unrouted))
        }
    }

    /// The routing keys of the publishers whose messages are known to reach `queue`.
    fn keys_reaching(&self, queue: &str) -> Vec<(String, KeyTemplate)> {
        self.reaching
            .get(queue)
            .into_iter()
            .flatten()
            .filter_map(|name| self.file.publishers.get(*name))
            .filter_map(|p| {
                let text = p.routing_key.clone().unwrap_or_default();
                let template = KeyTemplate::parse(&text).ok()?;
                Some((text, template))
            })
            .collect()
    }
}

/// How a dead-letter exchange would lose dead letters.
enum Loss {
    /// No binding at all.
    NothingBound,
    /// These keys match no binding.
    Unrouted(Vec<String>),
}

/// Whether `exchange` (named `name`) routes a message with any key: a fanout exchange, one
/// with an alternate exchange, a headers exchange (whose bindings ignore keys), or a topic
/// exchange with a `#` binding.
fn catches_every_key(file: &crate::syntax::ContractFile, name: &str, exchange: &Exchange) -> bool {
    match exchange.kind.unwrap_or_default() {
        ExchangeKind::Fanout | ExchangeKind::Headers => return true,
        ExchangeKind::Topic => {}
        _ => return exchange.alternate_exchange.is_some(),
    }
    exchange.alternate_exchange.is_some()
        || file
            .bindings
            .iter()
            .any(|b| b.exchange == name && b.routing_key.as_deref() == Some("#"))
}
