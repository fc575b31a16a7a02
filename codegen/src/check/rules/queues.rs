//! Queues: properties by queue type, and arguments their typed fields already set.

use super::{Checker, entry};
use crate::diagnostics::{Code, YamlPath};
use crate::syntax::{Overflow, Queue, QueueKind};
use warren_model::DeliveryLimit;

/// Queue arguments that a typed field sets; writing them in `arguments` too is ambiguous.
const TYPED_QUEUE_ARGUMENTS: &[(&str, &str)] = &[
    ("x-queue-type", "type"),
    ("x-dead-letter-exchange", "dead_letter.exchange"),
    ("x-dead-letter-routing-key", "dead_letter.routing_key"),
    ("x-delivery-limit", "delivery_limit"),
    ("x-message-ttl", "message_ttl"),
    ("x-expires", "expires"),
    ("x-max-length", "max_length"),
    ("x-max-length-bytes", "max_length_bytes"),
    ("x-overflow", "overflow"),
    ("x-single-active-consumer", "single_active_consumer"),
    ("x-max-priority", "max_priority"),
    ("x-quorum-initial-group-size", "initial_group_size"),
    ("x-queue-leader-locator", "leader_locator"),
];

impl Checker<'_> {
    /// Queue properties by queue type, retry sanity, and arguments the typed fields set.
    pub(in crate::check) fn queues(&mut self) {
        for (name, queue) in &self.file.queues {
            let path = entry("queues", name);
            self.queue_type_rules(name, queue, &path);
            self.retry_rules(name, queue, &path);
            for (argument, field) in TYPED_QUEUE_ARGUMENTS {
                if queue.arguments.contains_key(*argument) && typed_field_set(queue, argument) {
                    let unset_key = *argument == "x-dead-letter-routing-key"
                        && queue
                            .dead_letter
                            .as_ref()
                            .is_some_and(|d| d.routing_key.is_none());
                    let message = if unset_key {
                        format!(
                            "`{argument}` is set here, but `dead_letter` sets the dead-letter target, and without `{field}` dead letters keep their own key"
                        )
                    } else {
                        format!("`{argument}` is set both here and by `{field}`")
                    };
                    self.error(
                        Code::DuplicateArgument,
                        &path.key("arguments").key(*argument),
                        message,
                        format!("keep only `{field}`"),
                    );
                }
            }
            if queue.expires.is_some_and(|e| e.as_millis() == 0) {
                self.error(
                    Code::BadDuration,
                    &path.key("expires"),
                    "`expires` must be longer than 0".to_owned(),
                    "RabbitMQ refuses `x-expires: 0`; remove it to keep the queue",
                );
            }
            if queue.overflow.is_some()
                && queue.max_length.is_none()
                && queue.max_length_bytes.is_none()
            {
                self.warn(
                    Code::OverflowWithoutLimit,
                    &path.key("overflow"),
                    "`overflow` has no effect without `max_length` or `max_length_bytes`"
                        .to_owned(),
                    "set a length limit, or remove `overflow`",
                );
            }
        }
    }

    fn queue_type_rules(&mut self, name: &str, queue: &Queue, path: &YamlPath) {
        let kind = queue.kind.unwrap_or_default();
        let kind_name = kind.as_str();
        let flags = [
            ("exclusive", queue.exclusive == Some(true)),
            ("auto_delete", queue.auto_delete == Some(true)),
            ("durable", queue.durable == Some(false)),
        ];
        if kind != QueueKind::Classic {
            for (field, bad) in flags {
                if bad {
                    let value = if field == "durable" { "false" } else { "true" };
                    self.error(
                        Code::BadQueueProperty,
                        &path.key(field),
                        format!("{kind_name} queue `{name}` cannot be `{field}: {value}`"),
                        format!("{kind_name} queues are always durable, shared and kept; use `type: classic` for a temporary queue"),
                    );
                }
            }
        }
        if queue.delivery_limit.is_some() && kind != QueueKind::Quorum {
            self.error(
                Code::BadQueueProperty,
                &path.key("delivery_limit"),
                format!(
                    "`delivery_limit` applies to quorum queues, and `{name}` is a {kind_name} queue"
                ),
                "remove `delivery_limit`, or make the queue `type: quorum`",
            );
        } else if queue.delivery_limit == Some(DeliveryLimit::BrokerDefault) {
            self.warn(
                Code::BrokerDeliveryLimit,
                &path.key("delivery_limit"),
                format!(
                    "queue `{name}` declares no delivery limit, so the broker's applies: none on \
                     RabbitMQ 3.x, 20 on 4.x, past which RabbitMQ dead-letters a message \
                     (or drops it, without a dead-letter exchange) with no failure context"
                ),
                "keep it to match a queue another stack declares without one; on a queue \
                 warren owns, remove `delivery_limit` (warren then derives one from the retry \
                 budget)",
            );
        }
        self.replication_rules(name, queue, path);
        if queue.max_priority.is_some() && kind != QueueKind::Classic {
            self.error(
                Code::BadQueueProperty,
                &path.key("max_priority"),
                format!(
                    "`max_priority` applies to classic queues, and `{name}` is a {kind_name} queue"
                ),
                "remove `max_priority`, or make the queue `type: classic`",
            );
        }
        let levels = warren_model::limits::PRIORITY_LEVELS;
        if queue.max_priority.is_some_and(|p| !levels.contains(&p)) {
            self.error(
                Code::BadQueueProperty,
                &path.key("max_priority"),
                format!(
                    "`max_priority` must be between {} and {}",
                    levels.start(),
                    levels.end()
                ),
                "remove it for a queue without priorities",
            );
        }
        if kind == QueueKind::Quorum && queue.overflow == Some(Overflow::RejectPublishDlx) {
            self.error(
                Code::BadQueueProperty,
                &path.key("overflow"),
                "quorum queues do not support `overflow: reject-publish-dlx`".to_owned(),
                "use `drop-head` or `reject-publish`",
            );
        }
        if kind == QueueKind::Stream {
            for (field, set) in [
                ("retry", queue.retry.is_some()),
                ("dead_letter", queue.dead_letter.is_some()),
                ("message_ttl", queue.message_ttl.is_some()),
            ] {
                if set {
                    self.error(
                        Code::BadQueueProperty,
                        &path.key(field),
                        format!("stream queue `{name}` takes no `{field}`: streams keep messages and never dead-letter or requeue"),
                        format!("remove `{field}`, or use a quorum queue"),
                    );
                }
            }
        }
    }
}

impl Checker<'_> {
    /// Where a quorum queue's replicas live: settings of quorum queues only, and a group
    /// size that survives what it should.
    fn replication_rules(&mut self, name: &str, queue: &Queue, path: &YamlPath) {
        let kind = queue.kind.unwrap_or_default();
        if kind != QueueKind::Quorum {
            let kind_name = kind.as_str();
            for (field, set) in [
                ("initial_group_size", queue.initial_group_size.is_some()),
                ("leader_locator", queue.leader_locator.is_some()),
            ] {
                if set {
                    self.error(
                        Code::BadQueueProperty,
                        &path.key(field),
                        format!(
                            "`{field}` places the replicas of a quorum queue, and `{name}` is a {kind_name} queue"
                        ),
                        format!("remove `{field}`, or make the queue `type: quorum`"),
                    );
                }
            }
            return;
        }
        let at = path.key("initial_group_size");
        match queue.initial_group_size {
            Some(0) => self.error(
                Code::BadQueueProperty,
                &at,
                "`initial_group_size` must be at least 1".to_owned(),
                "use 3 (or 5) to survive the loss of one node (or two), or remove it for a replica on every node",
            ),
            Some(1) => self.warn(
                Code::UnreplicatedQueue,
                &at,
                format!("quorum queue `{name}` has one replica: while its node is down the queue is unavailable, and lost with the node's disk"),
                "use 3 (or 5) replicas, or remove `initial_group_size` for one on every node",
            ),
            Some(size) if size % 2 == 0 => self.warn(
                Code::UnreplicatedQueue,
                &at,
                format!(
                    "quorum queue `{name}` has {size} replicas, which survive no more nodes down than {} would: a majority of {size} is {}",
                    size - 1,
                    size / 2 + 1
                ),
                format!("use {} (or {})", size - 1, size + 1),
            ),
            _ => {}
        }
    }
}

fn typed_field_set(queue: &Queue, argument: &str) -> bool {
    match argument {
        "x-queue-type" => queue.kind.is_some(),
        "x-dead-letter-exchange" => queue.dead_letter.is_some(),
        // With `dead_letter` set, the typed field is the whole target: a missing
        // `routing_key` means "keep the message's own key", which a raw key would contradict.
        "x-dead-letter-routing-key" => queue.dead_letter.is_some(),
        "x-delivery-limit" => {
            queue.delivery_limit.is_some() || queue.kind.unwrap_or_default() == QueueKind::Quorum
        }
        "x-message-ttl" => queue.message_ttl.is_some(),
        "x-expires" => queue.expires.is_some(),
        "x-max-length" => queue.max_length.is_some(),
        "x-max-length-bytes" => queue.max_length_bytes.is_some(),
        "x-overflow" => queue.overflow.is_some(),
        "x-single-active-consumer" => queue.single_active_consumer.is_some(),
        "x-max-priority" => queue.max_priority.is_some(),
        "x-quorum-initial-group-size" => queue.initial_group_size.is_some(),
        "x-queue-leader-locator" => queue.leader_locator.is_some(),
        _ => false,
    }
}
