//! References: every name used must be declared.

use super::{Checker, Kind, dead_letter_of, entry};
use crate::check::{shown, suggest};
use crate::diagnostics::{Code, YamlPath};
use crate::imports::SEPARATOR;

impl Checker<'_> {
    /// Every name used must be declared.
    pub(in crate::check) fn references(&mut self) {
        let file = self.file;
        let exchange = Kind::Exchange;
        for (name, e) in &file.exchanges {
            if let Some(alternate) = &e.alternate_exchange {
                let path = entry("exchanges", name).key("alternate_exchange");
                self.declared(exchange, alternate, &path);
            }
        }
        for (name, queue) in &file.queues {
            if let Some(dl) = dead_letter_of(queue)
                && !dl.exchange.is_empty()
            {
                let path = entry("queues", name).join(&dl.field);
                self.declared(exchange, &dl.exchange, &path);
            }
        }
        for (i, binding) in file.bindings.iter().enumerate() {
            let path = YamlPath::root().key("bindings").index(i);
            if binding.exchange.is_empty() {
                self.error(
                    Code::BadBinding,
                    &path.key("exchange"),
                    "the default exchange `\"\"` cannot be bound".to_owned(),
                    "it routes by queue name already; bind a declared exchange",
                );
            } else {
                self.declared(exchange, &binding.exchange, &path.key("exchange"));
            }
            if let Some(queue) = &binding.queue {
                self.declared(Kind::Queue, queue, &path.key("queue"));
            }
            if let Some(to) = &binding.to_exchange {
                self.declared(exchange, to, &path.key("to_exchange"));
            }
        }
        for (name, publisher) in &file.publishers {
            let path = entry("publishers", name);
            if !publisher.exchange.is_empty() {
                self.declared(exchange, &publisher.exchange, &path.key("exchange"));
            }
            self.declared(Kind::Message, &publisher.message, &path.key("message"));
        }
        for (name, consumer) in &file.consumers {
            let path = entry("consumers", name);
            self.declared(Kind::Queue, &consumer.queue, &path.key("queue"));
            for (message, at) in consumer.consumed_at(&path) {
                self.declared(Kind::Message, message, &at);
            }
        }
        for (name, rpc) in &file.rpcs {
            let path = entry("rpcs", name);
            self.declared(Kind::Queue, &rpc.queue, &path.key("queue"));
            if let Some(target) = rpc.exchange.as_deref().filter(|e| !e.is_empty()) {
                self.declared(exchange, target, &path.key("exchange"));
            }
            self.declared(Kind::Message, &rpc.request, &path.key("request"));
            self.declared(Kind::Message, &rpc.response, &path.key("response"));
            for (code, message) in &rpc.errors {
                self.declared(Kind::Message, message, &path.key("errors").key(code));
            }
        }
    }

    /// Reports `name` at `path` unless a `kind` of that name is declared or imported.
    fn declared(&mut self, kind: Kind, name: &str, path: &YamlPath) {
        let file = self.file;
        let declared = match kind {
            Kind::Exchange => self.exchange(name).is_some(),
            Kind::Queue => file.queues.contains_key(name),
            Kind::Message => {
                file.messages.contains_key(name) || self.imports.messages.contains_key(name)
            }
        };
        // A qualified name left as written named nothing an import has: resolving the imports
        // reported it already.
        if declared || name.contains(SEPARATOR) {
            return;
        }
        let names: Vec<&String> = match kind {
            Kind::Exchange => file.exchanges.keys().collect(),
            Kind::Queue => file.queues.keys().collect(),
            Kind::Message => file.messages.keys().collect(),
        };
        let (what, section) = kind.words();
        let help = match suggest(name, names) {
            Some(close) => {
                format!("did you mean `{close}`? Otherwise declare `{name}` under `{section}`")
            }
            None => format!("declare `{name}` under `{section}`, or fix the name"),
        };
        self.error(
            kind.unknown_code(),
            path,
            format!("{what} `{}` is not declared", shown(name)),
            help,
        );
    }
}
