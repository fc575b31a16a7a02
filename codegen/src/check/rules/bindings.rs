//! Bindings: their shape by exchange type.

use super::Checker;
use crate::diagnostics::{Code, YamlPath};
use crate::syntax::{Binding, ExchangeKind};

impl Checker<'_> {
    /// Binding shape by exchange type.
    pub(in crate::check) fn bindings(&mut self) {
        for (i, binding) in self.file.bindings.iter().enumerate() {
            let path = YamlPath::root().key("bindings").index(i);
            self.binding_destination(&path, binding);
            let Some(exchange) = self.exchange(&binding.exchange) else {
                continue;
            };
            let kind = exchange.kind.unwrap_or_default();
            self.binding_key(&path, binding, kind);
            self.binding_headers(&path, binding, kind);
        }
    }

    /// A binding goes to one queue or one exchange.
    fn binding_destination(&mut self, path: &YamlPath, binding: &Binding) {
        match (&binding.queue, &binding.to_exchange) {
            (Some(_), Some(_)) => self.error(
                Code::BadBinding,
                path,
                "a binding has one destination: `queue` or `to_exchange`, not both".to_owned(),
                "split it into two bindings",
            ),
            (None, None) => self.error(
                Code::BadBinding,
                path,
                "the binding has no destination".to_owned(),
                "add `queue: <name>` or `to_exchange: <name>`",
            ),
            _ => {}
        }
    }

    /// Topic and direct bindings need a key, with wildcards only where they are wildcards.
    fn binding_key(&mut self, path: &YamlPath, binding: &Binding, kind: ExchangeKind) {
        match kind {
            ExchangeKind::Topic | ExchangeKind::Direct if binding.routing_key.is_none() => {
                let kind_name = kind.as_str();
                self.error(
                    Code::BadBinding,
                    path,
                    format!(
                        "a binding on {kind_name} exchange `{}` needs a `routing_key`",
                        binding.exchange
                    ),
                    if kind == ExchangeKind::Topic {
                        "add `routing_key`, e.g. `orders.*` or `#` for every message"
                    } else {
                        "add the exact `routing_key` to match"
                    },
                );
            }
            ExchangeKind::Topic => {
                let key = binding.routing_key.as_deref().unwrap_or_default();
                if key
                    .split('.')
                    .any(|w| w.len() > 1 && w.contains(['*', '#']))
                {
                    self.warn(
                        Code::LiteralWildcard,
                        &path.key("routing_key"),
                        format!("`{key}` has `*` or `#` inside a word, where they match literally"),
                        "wildcards only work as whole words: `orders.*`, not `orders*`",
                    );
                }
            }
            ExchangeKind::Direct => {
                let key = binding.routing_key.as_deref().unwrap_or_default();
                if key.split('.').any(|w| w == "*" || w == "#") {
                    self.warn(
                        Code::LiteralWildcard,
                        &path.key("routing_key"),
                        format!("`{key}` binds a direct exchange, where `*` and `#` are literal characters, not wildcards"),
                        "make the exchange `type: topic`, or bind the exact key",
                    );
                }
            }
            ExchangeKind::Fanout | ExchangeKind::Headers => {}
        }
    }

    /// `headers` and `match` belong to headers exchanges, and match every message when empty.
    fn binding_headers(&mut self, path: &YamlPath, binding: &Binding, kind: ExchangeKind) {
        let headers_written = !binding.headers.is_empty() || binding.headers_match.is_some();
        if headers_written && kind != ExchangeKind::Headers {
            self.error(
                Code::BadBinding,
                &path.key("headers"),
                format!(
                    "`headers` and `match` only apply to headers exchanges, and `{}` is not one",
                    binding.exchange
                ),
                "remove them, or make the exchange `type: headers`",
            );
        }
        if kind == ExchangeKind::Headers && binding.headers.is_empty() {
            self.warn(
                Code::HeadersBindingMatchesAll,
                path,
                "a headers binding without `headers` matches every message".to_owned(),
                "list the header values to match under `headers`",
            );
        }
    }
}
