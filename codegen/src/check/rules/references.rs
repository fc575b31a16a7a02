//! References: every name used must be declared.

use super::{Checker, Kind, dead_letter_of};
use crate::check::{shown, suggest};
use crate::diagnostics::Code;

impl Checker<'_> {
    /// Every name used must be declared.
    pub(in crate::check) fn references(&mut self) {
        let file = self.file;
        let exchange = Kind::Exchange;
        for (name, e) in &file.exchanges {
            if let Some(alternate) = &e.alternate_exchange {
                self.declared(
                    exchange,
                    alternate,
                    &format!("exchanges.{name}.alternate_exchange"),
                );
            }
        }
        for (name, queue) in &file.queues {
            if let Some(dl) = dead_letter_of(queue)
                && !dl.exchange.is_empty()
            {
                self.declared(
                    exchange,
                    &dl.exchange,
                    &format!("queues.{name}.{}", dl.field),
                );
            }
        }
        for (i, binding) in file.bindings.iter().enumerate() {
            if binding.exchange.is_empty() {
                self.error(
                    Code::BadBinding,
                    &format!("bindings[{i}].exchange"),
                    "the default exchange `\"\"` cannot be bound".to_owned(),
                    "it routes by queue name already; bind a declared exchange",
                );
            } else {
                self.declared(
                    exchange,
                    &binding.exchange,
                    &format!("bindings[{i}].exchange"),
                );
            }
            if let Some(queue) = &binding.queue {
                self.declared(Kind::Queue, queue, &format!("bindings[{i}].queue"));
            }
            if let Some(to) = &binding.to_exchange {
                self.declared(exchange, to, &format!("bindings[{i}].to_exchange"));
            }
        }
        for (name, publisher) in &file.publishers {
            if !publisher.exchange.is_empty() {
                self.declared(
                    exchange,
                    &publisher.exchange,
                    &format!("publishers.{name}.exchange"),
                );
            }
            self.declared(
                Kind::Message,
                &publisher.message,
                &format!("publishers.{name}.message"),
            );
        }
        for (name, consumer) in &file.consumers {
            self.declared(
                Kind::Queue,
                &consumer.queue,
                &format!("consumers.{name}.queue"),
            );
            self.declared(
                Kind::Message,
                &consumer.message,
                &format!("consumers.{name}.message"),
            );
        }
    }

    /// Reports `name` at `path` unless a `kind` of that name is declared.
    fn declared(&mut self, kind: Kind, name: &str, path: &str) {
        let file = self.file;
        let declared = match kind {
            Kind::Exchange => file.exchanges.contains_key(name),
            Kind::Queue => file.queues.contains_key(name),
            Kind::Message => file.messages.contains_key(name),
        };
        if declared {
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
