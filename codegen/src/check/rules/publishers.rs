//! Publishers: routing keys, their placeholders, and whether they reach a queue.

use std::collections::BTreeMap;

use super::{Checker, entry, pointer_problem};
use crate::check::Scope;
use crate::check::list;
use crate::diagnostics::{Code, YamlPath};
use crate::naming::{Role, role_ident};
use crate::routing::KeyTemplate;
use crate::syntax::{ExchangeKind, Publisher};

impl Checker<'_> {
    /// Routing keys, their placeholders, and whether they reach a queue.
    pub(in crate::check) fn publishers(&mut self) {
        let file = self.file;
        for (name, publisher) in &file.publishers {
            let path = entry("publishers", name);
            let exchange = self.exchange(&publisher.exchange);
            let kind = exchange.map(|e| e.kind.unwrap_or_default());
            if exchange.is_some_and(|e| e.internal == Some(true)) {
                self.error(
                    Code::InternalExchange,
                    &path.key("exchange"),
                    format!("publisher `{name}` publishes to internal exchange `{}`, which refuses publishes (the broker closes the channel)", publisher.exchange),
                    "publish to an exchange bound to it, or make it `internal: false`",
                );
            }
            if let Some(pointer) = &publisher.ordering_key
                && let Err(why) = pointer_problem(pointer)
            {
                self.error(
                    Code::BadOrderingKey,
                    &path.key("ordering_key"),
                    format!("publisher `{name}`'s ordering key `{pointer}` {why}"),
                    "write a JSON pointer into the payload, such as `/customer_id` (`~1` for a `/` in a property name, `~0` for a `~`)",
                );
            }
            let needs_key = publisher.exchange.is_empty()
                || matches!(kind, Some(ExchangeKind::Topic | ExchangeKind::Direct));
            if publisher.routing_key.is_none() && needs_key {
                let kind_text = kind.map_or("default", ExchangeKind::as_str);
                self.error(
                    Code::MissingRoutingKey,
                    &path,
                    format!("publisher `{name}` publishes to a {kind_text} exchange without a `routing_key`"),
                    "add `routing_key`; `{placeholders}` become parameters of the publish method",
                );
                continue;
            }
            let text = publisher.routing_key.as_deref().unwrap_or_default();
            if self.key_template(&path, text, Role::Placeholder).is_none() {
                continue;
            }
            let unknown_exchange = kind.is_none() && !publisher.exchange.is_empty();
            // In a system, another contract may bind the queue: `crate::system` decides.
            if publisher.external_consumers == Some(true)
                || unknown_exchange
                || self.scope == Scope::InSystem
            {
                continue;
            }
            self.unroutable_publisher(name, publisher, text, &path);
        }
    }

    /// A publisher whose messages reach no queue: RabbitMQ confirms and drops them.
    fn unroutable_publisher(
        &mut self,
        name: &str,
        publisher: &Publisher,
        text: &str,
        path: &YamlPath,
    ) {
        let file = self.file;
        let Some(reach) = self.routes.get(name) else {
            return;
        };
        if reach.is_routable() {
            return;
        }
        let target = if publisher.exchange.is_empty() {
            "the default exchange".to_owned()
        } else {
            format!("exchange `{}`", publisher.exchange)
        };
        let help = if publisher.exchange.is_empty() {
            format!(
                "on the default exchange the routing key must be a queue name; declared queues: {}",
                list(file.queues.keys().map(String::as_str))
            )
        } else {
            format!(
                "bindings seen: {}. Bind a queue with a matching key, or set `external_consumers: true` if another service declares the queue",
                self.graph.bindings_seen(reach)
            )
        };
        self.error(
            Code::UnroutablePublisher,
            &path.key("routing_key"),
            if text.is_empty() {
                format!("publisher `{name}` publishes to {target}, which routes its messages to no queue: RabbitMQ would confirm each publish and drop the message")
            } else {
                format!("publisher `{name}` sends `{text}` to {target}, which routes it to no queue: RabbitMQ would confirm the publish and drop the message")
            },
            help,
        );
    }

    /// Placeholders become parameters of the publish (or client) method, in `role`: distinct
    /// Rust identifiers (one named like the method's own `payload` is escaped to `payload_`,
    /// see [`Role`]).
    /// The routing key `text` of the publisher or rpc at `path`, parsed, its placeholders
    /// checked as `role`; `None` (reported) when it does not parse.
    pub(super) fn key_template(
        &mut self,
        path: &YamlPath,
        text: &str,
        role: Role,
    ) -> Option<KeyTemplate> {
        match KeyTemplate::parse(text) {
            Ok(template) => {
                self.placeholders(path, &template, role);
                Some(template)
            }
            Err(problem) => {
                self.error(
                    Code::BadRoutingKey,
                    &path.key("routing_key"),
                    problem,
                    "placeholders look like `{region}`",
                );
                None
            }
        }
    }

    pub(super) fn placeholders(&mut self, path: &YamlPath, template: &KeyTemplate, role: Role) {
        let path = path.key("routing_key");
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for placeholder in template.placeholders() {
            let id = match role_ident(placeholder, role) {
                Ok(id) => id.text,
                Err(problem) => {
                    self.error(
                        Code::BadRoutingKey,
                        &path,
                        format!("placeholder `{{{placeholder}}}` cannot become a parameter of the {} method: {problem}", if role == Role::Placeholder { "publish" } else { "client" }),
                        "name placeholders with ASCII letters, digits and `_`",
                    );
                    continue;
                }
            };
            if let Some(first) = seen.insert(id.clone(), placeholder) {
                let message = if first == placeholder {
                    format!("placeholder `{{{placeholder}}}` appears twice")
                } else {
                    format!(
                        "placeholders `{{{first}}}` and `{{{placeholder}}}` would both become the parameter `{id}`"
                    )
                };
                self.error(
                    Code::BadRoutingKey,
                    &path,
                    message,
                    "give each placeholder its own name",
                );
            }
        }
    }
}
