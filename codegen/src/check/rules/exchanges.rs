//! Exchanges: arguments their typed fields already set.

use super::{Checker, entry};
use crate::diagnostics::Code;

impl Checker<'_> {
    /// Exchange arguments that the typed fields already set.
    pub(in crate::check) fn exchanges(&mut self) {
        for (name, exchange) in &self.file.exchanges {
            let path = entry("exchanges", name);
            if exchange.arguments.contains_key("alternate-exchange")
                && exchange.alternate_exchange.is_some()
            {
                self.error(
                    Code::DuplicateArgument,
                    &path.key("arguments").key("alternate-exchange"),
                    "`alternate-exchange` is set both here and by `alternate_exchange`".to_owned(),
                    "keep only `alternate_exchange`",
                );
            }
            if exchange.alternate_exchange.as_deref() == Some(name.as_str()) {
                self.error(
                    Code::BadAlternateExchange,
                    &path.key("alternate_exchange"),
                    format!("exchange `{name}` is its own alternate exchange"),
                    "an alternate exchange must be another exchange, usually a fanout bound to an `unrouted` queue",
                );
            }
        }
    }
}
