//! Broker drops: settings under which RabbitMQ itself discards messages.

use super::{Checker, broker_dead_letters, entry};
use crate::check::shown;
use crate::diagnostics::{Code, YamlPath};
use crate::syntax::{ArgumentValue, Overflow, Queue, QueueKind};
use warren_model::DeliveryLimit;

impl Checker<'_> {
    /// Settings under which RabbitMQ itself discards messages: limits and expirations on a
    /// queue with nowhere to dead-letter, and queues deleted with their messages. Warnings,
    /// since each can be meant; the message says what is lost and when.
    pub(in crate::check) fn broker_drops(&mut self) {
        for (name, queue) in &self.file.queues {
            let kind = queue.kind.unwrap_or_default();
            // A stream keeps messages until its retention removes them: that is the design.
            if kind == QueueKind::Stream {
                continue;
            }
            let path = entry("queues", name);
            let name = shown(name);
            self.drops_without_dead_letters(&name, queue, &path);
            self.deletions(&name, queue, &path);
        }
    }

    /// Limits and expirations that make RabbitMQ drop messages from a queue that has nowhere
    /// to dead-letter them; `name` is already [`shown`].
    fn drops_without_dead_letters(&mut self, name: &str, queue: &Queue, path: &YamlPath) {
        let kind = queue.kind.unwrap_or_default();
        let raw = |key: &str| {
            queue
                .arguments
                .contains_key(key)
                .then(|| path.key("arguments").key(key))
        };
        let set = |typed: bool, field: &str, key: &str| {
            if typed {
                Some(path.key(field))
            } else {
                raw(key)
            }
        };
        // A target only the worker uses (`queue_argument: false`) leaves the broker none.
        let (without, fix) = if queue.dead_letter.is_some() {
            (
                "no dead-letter exchange the broker knows of (`queue_argument: false`)",
                "declare the dead-letter exchange on the queue (remove `queue_argument: false`) so RabbitMQ dead-letters instead of dropping",
            )
        } else {
            (
                "no dead-letter exchange",
                "set `dead_letter` on the queue so RabbitMQ dead-letters instead of dropping",
            )
        };
        if !broker_dead_letters(queue) {
            // (A raw `x-delivery-limit` on a quorum queue, or a limit on another type,
            // is already an error.)
            // (`broker-default` has a warning of its own, which says this too.)
            if kind == QueueKind::Quorum
                && matches!(queue.delivery_limit, Some(DeliveryLimit::Count(_)))
            {
                self.warn(
                    Code::BrokerDropsMessages,
                    &path.key("delivery_limit"),
                    format!("queue `{name}` has a delivery limit and {without}: RabbitMQ drops a message returned to it more often than the limit allows (a consumer that crashes on it, a requeue)"),
                    format!("{fix}, or remove the limit (warren then sets none that drops)"),
                );
            }
            if let Some(at) = set(queue.message_ttl.is_some(), "message_ttl", "x-message-ttl") {
                self.warn(
                    Code::BrokerDropsMessages,
                    &at,
                    format!("queue `{name}` has a message TTL and {without}: RabbitMQ drops every message that waits longer"),
                    format!("{fix}, or remove the TTL"),
                );
            }
            let limited =
                set(queue.max_length.is_some(), "max_length", "x-max-length").or_else(|| {
                    set(
                        queue.max_length_bytes.is_some(),
                        "max_length_bytes",
                        "x-max-length-bytes",
                    )
                });
            let raw_overflow = match queue.arguments.get("x-overflow") {
                Some(ArgumentValue::String(text)) => Some(text.as_str()),
                _ => None,
            };
            let drops_head = match queue.overflow {
                Some(overflow) => overflow == Overflow::DropHead,
                None => raw_overflow.is_none_or(|text| text == "drop-head"),
            };
            if let Some(at) = limited.filter(|_| drops_head) {
                self.warn(
                    Code::BrokerDropsMessages,
                    &at,
                    format!("queue `{name}` has a length limit, drops the oldest message when full (`overflow: drop-head`, the default) and has {without}: RabbitMQ discards them"),
                    format!("{fix}, or set `overflow: reject-publish` so publishers are refused instead"),
                );
            }
        }
    }

    /// Queue settings that delete a queue, and its messages with it: none is dead-lettered.
    fn deletions(&mut self, name: &str, queue: &Queue, path: &YamlPath) {
        let kind = queue.kind.unwrap_or_default();
        // Deleting a queue deletes its messages; none is dead-lettered.
        let deletions = [
            (
                queue.expires.is_some(),
                "expires",
                "once it has been unused that long",
            ),
            // (Other queue types cannot be either: already an error.)
            (
                kind == QueueKind::Classic && queue.auto_delete == Some(true),
                "auto_delete",
                "when its last consumer leaves",
            ),
            (
                kind == QueueKind::Classic && queue.exclusive == Some(true),
                "exclusive",
                "when the connection that declared it closes",
            ),
        ];
        for (on, field, when) in deletions {
            if on {
                self.warn(
                    Code::BrokerDropsMessages,
                    &path.key(field),
                    format!(
                        "RabbitMQ deletes queue `{name}` {when}, with every message still in it"
                    ),
                    format!("remove `{field}` if the queue's messages must outlive that"),
                );
            }
        }
    }
}
