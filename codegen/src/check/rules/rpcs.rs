//! Request/reply operations: where requests go, what replies may hold, error codes, the
//! timeout, and the server, which is a consumer of its queue and checked as one.

use std::collections::BTreeMap;

use super::{Checker, MAX_NAME_BYTES, entry};
use crate::check::shown;
use crate::diagnostics::{Code, YamlPath};
use crate::naming::{self, Role};
use crate::syntax::{ExchangeKind, Rpc};

impl Checker<'_> {
    /// Every rpc: its route, its replies, its errors, its timeout and its server.
    pub(in crate::check) fn rpcs(&mut self) {
        let file = self.file;
        for (name, rpc) in &file.rpcs {
            let path = entry("rpcs", name);
            self.rpc_route(name, rpc, &path);
            self.reply_headers(rpc, &path);
            self.error_codes(name, rpc, &path);
            self.rpc_timeout(rpc, &path);
            // The server is a consumer of its queue: the consumer rules apply to it as they are.
            let server = rpc.server();
            self.consumer_settings(&server, &path);
            if let Some(queue) = file.queues.get(&rpc.queue) {
                let who = format!("the server of rpc `{name}`");
                self.poison_loss(&who, &server, queue, &path);
                let at = path.key("request");
                self.message_mismatch(&who, &at, &rpc.queue, &[rpc.request.as_str()]);
            }
        }
        self.shared_rpc_queues();
    }

    /// `exchange` and `routing_key` go together, and the key must reach the rpc's queue:
    /// a request reaching no server would wait for its timeout (it is published `mandatory`,
    /// so the call fails at once, but the contract can say so before).
    fn rpc_route(&mut self, name: &str, rpc: &Rpc, path: &YamlPath) {
        let (exchange, text) = match (&rpc.exchange, &rpc.routing_key) {
            // The default exchange with the queue's name: reaches the queue by construction.
            (None, None) => return,
            (Some(_), None) => {
                self.error(
                    Code::BadRpc,
                    &path.key("exchange"),
                    format!("rpc `{name}` names an `exchange` without a `routing_key`"),
                    "add the `routing_key` its requests are published with, or remove `exchange` to send them through the default exchange with the queue's name as key",
                );
                return;
            }
            (None, Some(_)) => {
                self.error(
                    Code::BadRpc,
                    &path.key("routing_key"),
                    format!("rpc `{name}` has a `routing_key` without an `exchange`"),
                    "add the `exchange` its requests are published to, or remove `routing_key` to send them through the default exchange with the queue's name as key",
                );
                return;
            }
            (Some(exchange), Some(key)) => (exchange, key),
        };
        let declared = self.exchange(exchange);
        if declared.is_some_and(|e| e.internal == Some(true)) {
            self.error(
                Code::InternalExchange,
                &path.key("exchange"),
                format!("rpc `{name}` publishes its requests to internal exchange `{exchange}`, which refuses publishes (the broker closes the channel)"),
                "publish to an exchange bound to it, or make it `internal: false`",
            );
        }
        let Some(template) = self.key_template(path, text, Role::RpcPlaceholder) else {
            return;
        };
        // An unknown exchange or queue is reported by the references already.
        let known_exchange = exchange.is_empty() || declared.is_some();
        if !known_exchange || !self.file.queues.contains_key(&rpc.queue) {
            return;
        }
        let reach = self.graph.route(exchange, &template);
        self.requests_elsewhere(name, rpc, &reach.queues, path);
        if reach.queues.contains(&rpc.queue) || reach.maybe.contains(&rpc.queue) {
            return;
        }
        let (target, help) = if exchange.is_empty() {
            (
                "the default exchange".to_owned(),
                format!(
                    "on the default exchange the routing key is the queue's name: remove `exchange` and `routing_key`, or bind queue `{}` to an exchange",
                    rpc.queue
                ),
            )
        } else {
            let kind = declared.map(|e| e.kind.unwrap_or_default());
            let seen = self.graph.bindings_seen(&reach);
            let bind = if matches!(kind, Some(ExchangeKind::Topic | ExchangeKind::Direct)) {
                format!(
                    "bind queue `{}` to `{exchange}` with a key matching `{text}`",
                    rpc.queue
                )
            } else {
                format!("bind queue `{}` to `{exchange}`", rpc.queue)
            };
            (
                format!("exchange `{exchange}`"),
                format!(
                    "bindings seen: {seen}. {bind}, or publish requests through the default exchange (no `exchange`, no `routing_key`)"
                ),
            )
        };
        self.error(
            Code::UnroutableRpc,
            &path.key("routing_key"),
            format!(
                "rpc `{name}` sends its requests with `{text}` to {target}, which does not route them to its queue `{}`: no server would receive them",
                rpc.queue
            ),
            help,
        );
    }

    /// Requests that also reach other queues (a wide binding) land before their consumers,
    /// who must then expect the request's message: the rule publishers follow too.
    fn requests_elsewhere(
        &mut self,
        name: &str,
        rpc: &Rpc,
        reached: &std::collections::BTreeSet<String>,
        path: &YamlPath,
    ) {
        let file = self.file;
        for (consumer, c) in &file.consumers {
            let expects = c.consumed();
            if c.queue == rpc.queue
                || !reached.contains(&c.queue)
                || expects.iter().any(|(message, _)| *message == rpc.request)
            {
                continue;
            }
            self.error(
                Code::MessageMismatch,
                &path.key("routing_key"),
                format!(
                    "rpc `{name}`'s requests (`{}`) also reach queue `{}`, whose consumer `{consumer}` expects `{}`",
                    rpc.request, c.queue, c.first_message()
                ),
                "narrow the binding that takes the requests there, or give the rpc a key no other queue's binding matches",
            );
        }
    }

    /// Replies carry no typed headers: the response and error messages must declare none.
    fn reply_headers(&mut self, rpc: &Rpc, path: &YamlPath) {
        let replies = std::iter::once((path.key("response"), &rpc.response)).chain(
            rpc.errors
                .iter()
                .map(|(code, message)| (path.key("errors").key(code), message)),
        );
        let replies: Vec<(YamlPath, &String)> = replies.collect();
        for (at, message) in replies {
            if self.message_has_headers(message) {
                self.error(
                    Code::BadRpc,
                    &at,
                    format!("message `{}` declares a headers schema, and a reply carries no typed headers (only warren's own)", shown(message)),
                    "use a message without `headers` for responses and errors, or move what the headers held into the payload",
                );
            }
        }
    }

    /// Whether message `name` (declared here or imported) has a headers schema.
    fn message_has_headers(&self, name: &str) -> bool {
        match self.file.messages.get(name) {
            Some(message) => message.headers.is_some(),
            None => self
                .imports
                .message(name)
                .is_some_and(|(_, message)| message.headers.is_some()),
        }
    }

    /// Error codes are `snake_case` names (they travel in `x-rpc-error` and become variants
    /// of the errors' enum), distinct once they are variants.
    fn error_codes(&mut self, name: &str, rpc: &Rpc, path: &YamlPath) {
        let mut variants: BTreeMap<String, &str> = BTreeMap::new();
        for code in rpc.errors.keys() {
            let at = path.key("errors").key(code);
            if !is_snake_case(code) || code.len() > MAX_NAME_BYTES {
                self.error(
                    Code::BadErrorCode,
                    &at,
                    format!("error code `{}` of rpc `{name}` is not a `snake_case` name", shown(code)),
                    "write codes with lowercase ASCII letters, digits and `_`, starting with a letter, such as `unknown_sku`",
                );
                continue;
            }
            let Ok(variant) = naming::role_ident(code, Role::ErrorVariant) else {
                continue;
            };
            if let Some(first) = variants.insert(variant.text.clone(), code) {
                self.error(
                    Code::BadErrorCode,
                    &at,
                    format!("error codes `{first}` and `{code}` of rpc `{name}` would both become the variant `{variant}`"),
                    "codes become variants by their words, re-cased; rename one so their words differ",
                );
            }
        }
    }

    /// The timeout is the request's expiration too: above zero and within what RabbitMQ
    /// takes as an expiration.
    fn rpc_timeout(&mut self, rpc: &Rpc, path: &YamlPath) {
        let Some(timeout) = rpc.timeout else { return };
        let max = warren_model::limits::MAX_EXPIRATION_MILLIS;
        if timeout.as_millis() == 0 {
            self.error(
                Code::BadDuration,
                &path.key("timeout"),
                "the rpc `timeout` must be longer than 0".to_owned(),
                "use e.g. `5s`, or leave it out for the default (30s)",
            );
        } else if timeout.as_millis() > max {
            self.error(
                Code::BadDuration,
                &path.key("timeout"),
                format!("the rpc `timeout` is {timeout}, longer than the {max} ms a request's expiration may be"),
                "use a timeout of at most 49 days; a caller rarely waits more than seconds",
            );
        }
    }

    /// A queue an rpc server consumes is its own: a consumer or a second server on it would
    /// take requests it cannot answer. Reported at each rpc whose queue a consumer, or an rpc
    /// before it (in name order), consumes already.
    fn shared_rpc_queues(&mut self) {
        let file = self.file;
        let mut users: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (name, consumer) in &file.consumers {
            users
                .entry(&consumer.queue)
                .or_default()
                .push(format!("consumer `{name}`"));
        }
        for (name, rpc) in &file.rpcs {
            let before = users.entry(&rpc.queue).or_default();
            let others = before.join(", ");
            before.push(format!("rpc `{name}`"));
            if others.is_empty() {
                continue;
            }
            self.error(
                Code::SharedRpcQueue,
                &entry("rpcs", name).key("queue"),
                format!(
                    "queue `{}` of rpc `{name}` is consumed by {others} too: each request must reach the server of `{name}` alone",
                    rpc.queue,
                ),
                format!("give rpc `{name}` a queue of its own"),
            );
        }
    }
}

/// `snake_case`: lowercase ASCII letters, digits and `_`, starting with a letter.
fn is_snake_case(code: &str) -> bool {
    let mut chars = code.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
