//! The contract rules, one method per concern.

use std::collections::{BTreeMap, BTreeSet};

use super::routing::{Destination, Edge, Graph, KeyTemplate, Reach};
use super::{list, shown, suggest};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::format::{
    ArgumentValue, ContractFile, ExchangeKind, Exhausted, OnPoison, Overflow, Queue, QueueKind,
    RetryMode,
};
use crate::load::LoadedContract;
use crate::model::{RetryPolicy, retry_policy};
use crate::naming::{Role, role_ident};

/// AMQP short strings, which carry every name, hold at most 255 bytes.
const MAX_NAME_BYTES: usize = 255;

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
];

pub(super) struct Checker<'a> {
    contract: &'a LoadedContract,
    file: &'a ContractFile,
    out: &'a mut Diagnostics,
    graph: Graph,
    /// Where each publisher's messages go, for publishers whose key parses; computed once
    /// and shared by the routability, message and dead-letter checks.
    routes: BTreeMap<&'a str, Reach>,
    /// The other way round: per queue, the publishers known to reach it, in name order.
    reaching: BTreeMap<String, Vec<&'a str>>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(contract: &'a LoadedContract, out: &'a mut Diagnostics) -> Self {
        let file = &contract.file;
        let graph = graph(file);
        let routes: BTreeMap<&str, Reach> = file
            .publishers
            .iter()
            .filter_map(|(name, p)| {
                let template = KeyTemplate::parse(p.routing_key.as_deref().unwrap_or_default());
                Some((name.as_str(), graph.route(&p.exchange, &template.ok()?)))
            })
            .collect();
        let mut reaching: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (publisher, reach) in &routes {
            for queue in &reach.queues {
                reaching.entry(queue.clone()).or_default().push(publisher);
            }
        }
        Self {
            contract,
            file,
            out,
            graph,
            routes,
            reaching,
        }
    }

    fn error(&mut self, code: &'static str, path: &str, message: String, help: impl Into<String>) {
        let diagnostic = self.contract.error_at(code, path, message).with_help(help);
        self.out.push(diagnostic);
    }

    fn warn(&mut self, code: &'static str, path: &str, message: String, help: impl Into<String>) {
        let diagnostic = self
            .contract
            .warning_at(code, path, message)
            .with_help(help);
        self.out.push(diagnostic);
    }

    fn push(&mut self, diagnostic: Diagnostic) {
        self.out.push(diagnostic);
    }

    /// Keys written twice: YAML keeps the last one silently, so a second queue `orders`
    /// would replace the first without a word.
    pub(super) fn duplicates(&mut self) {
        for duplicate in self.contract.spans.duplicates() {
            let what = match duplicate.parent.as_str() {
                "exchanges" => "exchange",
                "queues" => "queue",
                "messages" => "message",
                "publishers" => "publisher",
                "consumers" => "consumer",
                _ => "key",
            };
            let diagnostic = Diagnostic::error(
                "duplicate-name",
                self.contract.path(),
                format!(
                    "{what} `{}` is written twice; the second entry would silently replace the first",
                    shown(&duplicate.key)
                ),
            )
            .with_help("rename one of them, or merge them into one entry")
            .at(crate::diagnostics::Place::Yaml {
                path: duplicate.path(),
                span: Some(duplicate.span),
            });
            self.push(diagnostic);
        }
    }

    /// Name syntax: empty, too long for AMQP, or in the broker's reserved `amq.` space; and
    /// derived wait queues, which must fit AMQP's limit and not take a declared queue's name.
    pub(super) fn names(&mut self) {
        let file = self.file;
        let amqp_names = [
            (Kind::Exchange, file.exchanges.keys().collect::<Vec<_>>()),
            (Kind::Queue, file.queues.keys().collect()),
        ];
        for (kind, names) in amqp_names {
            let (what, section) = kind.words();
            for name in names {
                let path = format!("{section}.{name}");
                if name.trim().is_empty() {
                    self.error(
                        "bad-name",
                        &path,
                        format!("{what} name `{name}` is empty"),
                        format!("give every {what} a name"),
                    );
                } else if name.len() > MAX_NAME_BYTES {
                    self.error(
                        "name-too-long",
                        &path,
                        format!(
                            "{what} name is {} bytes; AMQP names hold at most 255",
                            name.len()
                        ),
                        format!("shorten the name of {what} `{}`", shown(name)),
                    );
                } else if name.starts_with("amq.") {
                    self.error(
                        "reserved-name",
                        &path,
                        format!("{what} name `{name}` starts with `amq.`, which RabbitMQ reserves"),
                        format!("choose {what} names without the `amq.` prefix"),
                    );
                }
            }
        }
        for (name, queue) in &file.queues {
            let RetryPolicy::TtlBackoff { tiers, .. } = retry_policy(name, queue) else {
                continue;
            };
            let path = format!("queues.{name}");
            if tiers.len() > crate::model::MAX_WAIT_TIERS {
                self.error(
                    "bad-retry",
                    &format!("{path}.retry"),
                    format!(
                        "this backoff needs more than {} wait queues, one per distinct delay",
                        crate::model::MAX_WAIT_TIERS
                    ),
                    "raise `multiplier`, lower `max_delay`, or lower `max_retries`",
                );
            }
            if let Some(long) = tiers.iter().find(|t| t.queue.len() > MAX_NAME_BYTES) {
                self.error(
                    "name-too-long",
                    &path,
                    format!(
                        "queue `{}` needs a wait queue `{}` of {} bytes; AMQP names hold at most 255",
                        shown(name),
                        shown(&long.queue),
                        long.queue.len()
                    ),
                    "shorten the queue name: wait queues are named `<queue>.wait.<delay>`",
                );
            }
            if let Some(taken) = tiers.iter().find(|t| file.queues.contains_key(&t.queue)) {
                self.error(
                    "wait-queue-clash",
                    &path,
                    format!(
                        "queue `{}` needs a wait queue `{}`, and a queue of that name is declared",
                        shown(name),
                        shown(&taken.queue)
                    ),
                    "rename the declared queue: wait queues are named `<queue>.wait.<delay>`",
                );
            }
        }
        let sections = [
            ("messages", file.messages.keys().collect::<Vec<_>>()),
            ("publishers", file.publishers.keys().collect()),
            ("consumers", file.consumers.keys().collect()),
        ];
        for (section, names) in sections {
            for name in names.into_iter().filter(|n| n.len() > MAX_NAME_BYTES) {
                self.error(
                    "name-too-long",
                    &format!("{section}.{name}"),
                    format!(
                        "name is {} bytes; warren names hold at most 255",
                        name.len()
                    ),
                    "shorten the name",
                );
            }
        }
    }

    /// Every name used must be declared.
    pub(super) fn references(&mut self) {
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
                    "bad-binding",
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

    /// Exchange arguments that the typed fields already set.
    pub(super) fn exchanges(&mut self) {
        for (name, exchange) in &self.file.exchanges {
            if exchange.arguments.contains_key("alternate-exchange")
                && exchange.alternate_exchange.is_some()
            {
                self.error(
                    "duplicate-argument",
                    &format!("exchanges.{name}.arguments.alternate-exchange"),
                    "`alternate-exchange` is set both here and by `alternate_exchange`".to_owned(),
                    "keep only `alternate_exchange`",
                );
            }
            if exchange.alternate_exchange.as_deref() == Some(name.as_str()) {
                self.error(
                    "bad-alternate-exchange",
                    &format!("exchanges.{name}.alternate_exchange"),
                    format!("exchange `{name}` is its own alternate exchange"),
                    "an alternate exchange must be another exchange, usually a fanout bound to an `unrouted` queue",
                );
            }
        }
    }

    /// Queue properties by queue type, retry sanity, and arguments the typed fields set.
    pub(super) fn queues(&mut self) {
        for (name, queue) in &self.file.queues {
            let path = format!("queues.{name}");
            self.queue_type_rules(name, queue, &path);
            self.retry_rules(name, queue, &path);
            for (argument, field) in TYPED_QUEUE_ARGUMENTS {
                if queue.arguments.contains_key(*argument) && typed_field_set(queue, argument) {
                    self.error(
                        "duplicate-argument",
                        &format!("{path}.arguments.{argument}"),
                        format!("`{argument}` is set both here and by `{field}`"),
                        format!("keep only `{field}`"),
                    );
                }
            }
            if queue.expires.is_some_and(|e| e.as_millis() == 0) {
                self.error(
                    "bad-duration",
                    &format!("{path}.expires"),
                    "`expires` must be longer than 0".to_owned(),
                    "RabbitMQ refuses `x-expires: 0`; remove it to keep the queue",
                );
            }
            if queue.overflow.is_some()
                && queue.max_length.is_none()
                && queue.max_length_bytes.is_none()
            {
                self.warn(
                    "overflow-without-limit",
                    &format!("{path}.overflow"),
                    "`overflow` has no effect without `max_length` or `max_length_bytes`"
                        .to_owned(),
                    "set a length limit, or remove `overflow`",
                );
            }
        }
    }

    /// Settings under which RabbitMQ itself discards messages: limits and expirations on a
    /// queue with nowhere to dead-letter, and queues deleted with their messages. Warnings,
    /// since each can be meant; the message says what is lost and when.
    pub(super) fn broker_drops(&mut self) {
        for (name, queue) in &self.file.queues {
            let kind = queue.kind.unwrap_or_default();
            // A stream keeps messages until its retention removes them: that is the design.
            if kind == QueueKind::Stream {
                continue;
            }
            let path = format!("queues.{name}");
            let name = shown(name);
            let raw = |key: &str| {
                queue
                    .arguments
                    .contains_key(key)
                    .then(|| format!("arguments.{key}"))
            };
            let set = |typed: bool, field: &str, key: &str| {
                if typed {
                    Some(field.to_owned())
                } else {
                    raw(key)
                }
            };
            let fix = "set `dead_letter` on the queue so RabbitMQ dead-letters instead of dropping";
            if !has_dead_letter_exchange(queue) {
                // (A raw `x-delivery-limit` on a quorum queue, or a limit on another type,
                // is already an error.)
                if kind == QueueKind::Quorum && queue.delivery_limit.is_some() {
                    let field = "delivery_limit";
                    self.warn(
                        "broker-drops-messages",
                        &format!("{path}.{field}"),
                        format!("queue `{name}` has a delivery limit and no dead-letter exchange: RabbitMQ drops a message returned to it more often than the limit allows (a consumer that crashes on it, a requeue)"),
                        format!("{fix}, or remove the limit (warren then sets none that drops)"),
                    );
                }
                if let Some(field) =
                    set(queue.message_ttl.is_some(), "message_ttl", "x-message-ttl")
                {
                    self.warn(
                        "broker-drops-messages",
                        &format!("{path}.{field}"),
                        format!("queue `{name}` has a message TTL and no dead-letter exchange: RabbitMQ drops every message that waits longer"),
                        format!("{fix}, or remove the TTL"),
                    );
                }
                let limited = set(queue.max_length.is_some(), "max_length", "x-max-length")
                    .or_else(|| {
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
                if let Some(field) = limited.filter(|_| drops_head) {
                    self.warn(
                        "broker-drops-messages",
                        &format!("{path}.{field}"),
                        format!("queue `{name}` has a length limit, drops the oldest message when full (`overflow: drop-head`, the default) and has no dead-letter exchange: RabbitMQ discards them"),
                        format!("{fix}, or set `overflow: reject-publish` so publishers are refused instead"),
                    );
                }
            }
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
                        "broker-drops-messages",
                        &format!("{path}.{field}"),
                        format!(
                            "RabbitMQ deletes queue `{name}` {when}, with every message still in it"
                        ),
                        format!("remove `{field}` if the queue's messages must outlive that"),
                    );
                }
            }
        }
    }

    fn queue_type_rules(&mut self, name: &str, queue: &Queue, path: &str) {
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
                        "bad-queue-property",
                        &format!("{path}.{field}"),
                        format!("{kind_name} queue `{name}` cannot be `{field}: {value}`"),
                        format!("{kind_name} queues are always durable, shared and kept; use `type: classic` for a temporary queue"),
                    );
                }
            }
        }
        if queue.delivery_limit.is_some() && kind != QueueKind::Quorum {
            self.error(
                "bad-queue-property",
                &format!("{path}.delivery_limit"),
                format!(
                    "`delivery_limit` applies to quorum queues, and `{name}` is a {kind_name} queue"
                ),
                "remove `delivery_limit`, or make the queue `type: quorum`",
            );
        }
        if queue.max_priority.is_some() && kind != QueueKind::Classic {
            self.error(
                "bad-queue-property",
                &format!("{path}.max_priority"),
                format!(
                    "`max_priority` applies to classic queues, and `{name}` is a {kind_name} queue"
                ),
                "remove `max_priority`, or make the queue `type: classic`",
            );
        }
        if queue.max_priority == Some(0) {
            self.error(
                "bad-queue-property",
                &format!("{path}.max_priority"),
                "`max_priority` must be between 1 and 255".to_owned(),
                "remove it for a queue without priorities",
            );
        }
        if kind == QueueKind::Quorum && queue.overflow == Some(Overflow::RejectPublishDlx) {
            self.error(
                "bad-queue-property",
                &format!("{path}.overflow"),
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
                        "bad-queue-property",
                        &format!("{path}.{field}"),
                        format!("stream queue `{name}` takes no `{field}`: streams keep messages and never dead-letter or requeue"),
                        format!("remove `{field}`, or use a quorum queue"),
                    );
                }
            }
        }
    }

    fn retry_rules(&mut self, name: &str, queue: &Queue, path: &str) {
        let Some(retry) = &queue.retry else { return };
        let path = format!("{path}.retry");
        let mode = retry.mode.unwrap_or_default();
        let kind = queue.kind.unwrap_or_default();
        let backoff_fields = [
            ("initial_delay", retry.initial_delay.is_some()),
            ("max_delay", retry.max_delay.is_some()),
            ("multiplier", retry.multiplier.is_some()),
            ("jitter", retry.jitter.is_some()),
        ];
        let mode_name = mode.as_str();
        if mode != RetryMode::TtlBackoff {
            for (field, set) in backoff_fields {
                if set {
                    self.error(
                        "bad-retry",
                        &format!("{path}.{field}"),
                        format!("`{field}` only applies to `mode: ttl-backoff`, and this queue uses `{mode_name}`"),
                        format!("remove `{field}`, or set `mode: ttl-backoff`"),
                    );
                }
            }
        }
        match mode {
            RetryMode::None => {
                if retry.max_retries.is_some() || retry.exhausted.is_some() {
                    self.warn(
                        "retry-ignored",
                        &path,
                        "retry settings are ignored with `mode: none` (the default)".to_owned(),
                        "set a `mode`, or remove the other retry settings",
                    );
                }
            }
            RetryMode::QuorumNative => {
                if kind != QueueKind::Quorum {
                    let kind_name = kind.as_str();
                    self.error(
                        "bad-retry",
                        &format!("{path}.mode"),
                        format!("`quorum-native` retries need a quorum queue, and `{name}` is a {kind_name} queue"),
                        "use `immediate-requeue` or `ttl-backoff`, or make the queue `type: quorum`",
                    );
                } else if queue.delivery_limit.is_none() {
                    self.error(
                        "bad-retry",
                        &format!("{path}.mode"),
                        format!("`quorum-native` retries count against the queue's `delivery_limit`, and `{name}` has none"),
                        "set `delivery_limit` on the queue (N allows N+1 deliveries)",
                    );
                }
                if retry.max_retries.is_some() {
                    self.error(
                        "bad-retry",
                        &format!("{path}.max_retries"),
                        "`quorum-native` retries are bounded by the queue's `delivery_limit`, not `max_retries`".to_owned(),
                        "remove `max_retries` and set `delivery_limit` on the queue",
                    );
                }
            }
            RetryMode::ImmediateRequeue | RetryMode::TtlBackoff => {
                if retry.max_retries == Some(0) {
                    self.error(
                        "bad-retry",
                        &format!("{path}.max_retries"),
                        "`max_retries` must be at least 1".to_owned(),
                        "to never retry, use `mode: none`",
                    );
                }
            }
        }
        if mode == RetryMode::ImmediateRequeue && kind == QueueKind::Quorum {
            let retries = retry
                .max_retries
                .unwrap_or(crate::model::DEFAULT_MAX_RETRIES);
            if let Some(limit) = queue.delivery_limit.filter(|limit| *limit <= retries) {
                self.error(
                    "bad-retry",
                    &format!("queues.{name}.delivery_limit"),
                    format!("`delivery_limit: {limit}` lets the broker dead-letter before the {retries} retries are spent, without failure context"),
                    format!("set `delivery_limit` above `max_retries` (at least {}), or remove it", retries.saturating_add(1)),
                );
            }
        }
        if mode == RetryMode::TtlBackoff {
            let initial = retry
                .initial_delay
                .unwrap_or(crate::model::DEFAULT_INITIAL_DELAY);
            let max = retry.max_delay.unwrap_or(crate::model::DEFAULT_MAX_DELAY);
            for (field, value) in [("initial_delay", initial), ("max_delay", max)] {
                if value.as_millis() == 0 {
                    self.error(
                        "bad-retry",
                        &format!("{path}.{field}"),
                        format!("`{field}` must be longer than 0"),
                        "use `immediate-requeue` for retries without delay",
                    );
                }
            }
            if max < initial {
                self.error(
                    "bad-retry",
                    &format!("{path}.max_delay"),
                    format!("`max_delay` ({max}) is shorter than `initial_delay` ({initial})"),
                    format!("raise `max_delay` to at least {initial}, or lower `initial_delay`"),
                );
            }
            if let Some(multiplier) = retry.multiplier
                && (!multiplier.is_finite() || multiplier < 1.0)
            {
                self.error(
                    "bad-retry",
                    &format!("{path}.multiplier"),
                    format!(
                        "`multiplier` must be at least 1 (got {multiplier}); delays never shrink"
                    ),
                    "use 1 for a constant delay, 2 to double it each time",
                );
            }
        }
        if retry.exhausted == Some(Exhausted::Requeue) {
            self.warn(
                "exhausted-requeue",
                &format!("{path}.exhausted"),
                "`exhausted: requeue` returns a message that keeps failing to the queue forever"
                    .to_owned(),
                "use `dead-letter` (the default) unless the failures are known to be temporary",
            );
        }
        let dead_letters = retry.exhausted.unwrap_or_default() == Exhausted::DeadLetter;
        if mode != RetryMode::None && dead_letters && !has_dead_letter_exchange(queue) {
            self.error(
                "exhausted-without-dlx",
                &format!("{path}.exhausted"),
                format!("queue `{name}` dead-letters exhausted messages but has no dead-letter exchange, so they would be lost"),
                "set `dead_letter` on the queue, or `exhausted: drop` to discard them knowingly",
            );
        }
    }

    /// Binding shape by exchange type.
    pub(super) fn bindings(&mut self) {
        for (i, binding) in self.file.bindings.iter().enumerate() {
            let path = format!("bindings[{i}]");
            match (&binding.queue, &binding.to_exchange) {
                (Some(_), Some(_)) => self.error(
                    "bad-binding",
                    &path,
                    "a binding has one destination: `queue` or `to_exchange`, not both".to_owned(),
                    "split it into two bindings",
                ),
                (None, None) => self.error(
                    "bad-binding",
                    &path,
                    "the binding has no destination".to_owned(),
                    "add `queue: <name>` or `to_exchange: <name>`",
                ),
                _ => {}
            }
            let Some(exchange) = self.file.exchanges.get(&binding.exchange) else {
                continue;
            };
            let kind = exchange.kind.unwrap_or_default();
            match kind {
                ExchangeKind::Topic | ExchangeKind::Direct if binding.routing_key.is_none() => {
                    let kind_name = kind.as_str();
                    self.error(
                        "bad-binding",
                        &path,
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
                            "literal-wildcard",
                            &format!("{path}.routing_key"),
                            format!(
                                "`{key}` has `*` or `#` inside a word, where they match literally"
                            ),
                            "wildcards only work as whole words: `orders.*`, not `orders*`",
                        );
                    }
                }
                ExchangeKind::Direct => {
                    let key = binding.routing_key.as_deref().unwrap_or_default();
                    if key.split('.').any(|w| w == "*" || w == "#") {
                        self.warn(
                            "literal-wildcard",
                            &format!("{path}.routing_key"),
                            format!("`{key}` binds a direct exchange, where `*` and `#` are literal characters, not wildcards"),
                            "make the exchange `type: topic`, or bind the exact key",
                        );
                    }
                }
                ExchangeKind::Fanout | ExchangeKind::Headers => {}
            }
            let headers_written = !binding.headers.is_empty() || binding.headers_match.is_some();
            if headers_written && kind != ExchangeKind::Headers {
                self.error(
                    "bad-binding",
                    &format!("{path}.headers"),
                    format!("`headers` and `match` only apply to headers exchanges, and `{}` is not one", binding.exchange),
                    "remove them, or make the exchange `type: headers`",
                );
            }
            if kind == ExchangeKind::Headers && binding.headers.is_empty() {
                self.warn(
                    "headers-binding-matches-all",
                    &path,
                    "a headers binding without `headers` matches every message".to_owned(),
                    "list the header values to match under `headers`",
                );
            }
        }
    }

    /// Routing keys, their placeholders, and whether they reach a queue.
    pub(super) fn publishers(&mut self) {
        let file = self.file;
        for (name, publisher) in &file.publishers {
            let path = format!("publishers.{name}");
            let exchange = file.exchanges.get(&publisher.exchange);
            let kind = exchange.map(|e| e.kind.unwrap_or_default());
            if exchange.is_some_and(|e| e.internal == Some(true)) {
                self.error(
                    "internal-exchange",
                    &format!("{path}.exchange"),
                    format!("publisher `{name}` publishes to internal exchange `{}`, which refuses publishes (the broker closes the channel)", publisher.exchange),
                    "publish to an exchange bound to it, or make it `internal: false`",
                );
            }
            let needs_key = publisher.exchange.is_empty()
                || matches!(kind, Some(ExchangeKind::Topic | ExchangeKind::Direct));
            if publisher.routing_key.is_none() && needs_key {
                let kind_text = kind.map_or("default", ExchangeKind::as_str);
                self.error(
                    "missing-routing-key",
                    &path,
                    format!("publisher `{name}` publishes to a {kind_text} exchange without a `routing_key`"),
                    "add `routing_key`; `{placeholders}` become parameters of the publish method",
                );
                continue;
            }
            let text = publisher.routing_key.as_deref().unwrap_or_default();
            let template = match KeyTemplate::parse(text) {
                Ok(template) => template,
                Err(problem) => {
                    self.error(
                        "bad-routing-key",
                        &format!("{path}.routing_key"),
                        problem,
                        "placeholders look like `{region}`",
                    );
                    continue;
                }
            };
            self.placeholders(&path, &template);
            let unknown_exchange = kind.is_none() && !publisher.exchange.is_empty();
            if publisher.external_consumers == Some(true) || unknown_exchange {
                continue;
            }
            let Some(reach) = self.routes.get(name.as_str()) else {
                continue;
            };
            if reach.is_routable() {
                continue;
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
                    describe_visited(&self.graph, reach)
                )
            };
            self.error(
                "unroutable-publisher",
                &format!("{path}.routing_key"),
                if text.is_empty() {
                    format!("publisher `{name}` publishes to {target}, which routes its messages to no queue: RabbitMQ would confirm each publish and drop the message")
                } else {
                    format!("publisher `{name}` sends `{text}` to {target}, which routes it to no queue: RabbitMQ would confirm the publish and drop the message")
                },
                help,
            );
        }
    }

    /// Placeholders become parameters of the publish method: distinct Rust identifiers (one
    /// named like the method's own `payload` is escaped to `payload_`, see [`Role`]).
    fn placeholders(&mut self, path: &str, template: &KeyTemplate) {
        let path = format!("{path}.routing_key");
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for placeholder in template.placeholders() {
            let id = match role_ident(placeholder, Role::Placeholder) {
                Ok(id) => id.text,
                Err(problem) => {
                    self.error(
                        "bad-routing-key",
                        &path,
                        format!("placeholder `{{{placeholder}}}` cannot become a parameter of the publish method: {problem}"),
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
                    "bad-routing-key",
                    &path,
                    message,
                    "give each placeholder its own name",
                );
            }
        }
    }

    /// Consumer settings, what their queues receive, and what happens to poison messages.
    pub(super) fn consumers(&mut self) {
        let mut by_queue: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, consumer) in &self.file.consumers {
            let path = format!("consumers.{name}");
            by_queue.entry(&consumer.queue).or_default().push(name);
            let prefetch = consumer.prefetch.unwrap_or(crate::model::DEFAULT_PREFETCH);
            if consumer.prefetch == Some(0) {
                self.error(
                    "bad-consumer",
                    &format!("{path}.prefetch"),
                    "`prefetch: 0` means unlimited: the broker would push the whole queue into the worker".to_owned(),
                    "set a bound such as 10 (the default)",
                );
            }
            if consumer.concurrency == Some(0) {
                self.error(
                    "bad-consumer",
                    &format!("{path}.concurrency"),
                    "`concurrency` must be at least 1".to_owned(),
                    "use 1 to handle one message at a time",
                );
            }
            if let Some(concurrency) = consumer
                .concurrency
                .filter(|c| prefetch > 0 && *c > prefetch)
            {
                self.warn(
                    "concurrency-above-prefetch",
                    &format!("{path}.concurrency"),
                    format!("`concurrency: {concurrency}` exceeds `prefetch: {prefetch}`, so some handlers would always be idle"),
                    "raise `prefetch` to at least the concurrency",
                );
            }
            if let Some(batch) = &consumer.batch {
                if batch.size == 0 {
                    self.error(
                        "bad-consumer",
                        &format!("{path}.batch.size"),
                        "a batch holds at least 1 message".to_owned(),
                        "set `size` to 1 or more",
                    );
                } else if prefetch > 0 && batch.size > prefetch {
                    self.error(
                        "bad-consumer",
                        &format!("{path}.batch.size"),
                        format!(
                            "a batch of {} can never fill with `prefetch: {prefetch}`",
                            batch.size
                        ),
                        format!("raise `prefetch` to at least {}", batch.size),
                    );
                }
                if batch.timeout.as_millis() == 0 {
                    self.error(
                        "bad-consumer",
                        &format!("{path}.batch.timeout"),
                        "the batch `timeout` must be longer than 0".to_owned(),
                        "use e.g. `200ms`",
                    );
                }
            }
            if let Some(breaker) = &consumer.circuit_breaker {
                if breaker.failures == 0 {
                    self.error(
                        "bad-consumer",
                        &format!("{path}.circuit_breaker.failures"),
                        "the circuit breaker `failures` must be at least 1".to_owned(),
                        "use e.g. 5 to open it after five retryable failures in a row",
                    );
                }
                if breaker.cool_down.as_millis() == 0 {
                    self.error(
                        "bad-consumer",
                        &format!("{path}.circuit_breaker.cool_down"),
                        "the circuit breaker `cool_down` must be longer than 0".to_owned(),
                        "use e.g. `30s`",
                    );
                }
            }
            let Some(queue) = self.file.queues.get(&consumer.queue) else {
                continue;
            };
            if queue.on_poison.unwrap_or_default() == OnPoison::DeadLetter
                && !has_dead_letter_exchange(queue)
            {
                let stream = queue.kind == Some(QueueKind::Stream);
                self.error(
                    "poison-loss",
                    &format!("{path}.queue"),
                    format!("consumer `{name}` reads queue `{}`, which has no dead-letter exchange: messages that cannot be decoded or validated would be lost", consumer.queue),
                    if stream {
                        "streams cannot dead-letter; set `on_poison: drop` on the queue to discard them knowingly".to_owned()
                    } else {
                        format!("set `dead_letter` on queue `{}`, or `on_poison: drop` to discard them knowingly", consumer.queue)
                    },
                );
            }
            self.message_mismatch(name, &consumer.queue, &consumer.message);
        }
        for (queue, consumers) in by_queue {
            let messages: BTreeSet<&str> = consumers
                .iter()
                .filter_map(|c| self.file.consumers.get(*c).map(|c| c.message.as_str()))
                .collect();
            if messages.len() > 1 {
                let path = format!("consumers.{}.message", consumers[consumers.len() - 1]);
                self.error(
                    "conflicting-consumers",
                    &path,
                    format!(
                        "consumers {} of queue `{queue}` expect different messages ({})",
                        list(consumers.iter().copied()),
                        list(messages.iter().copied())
                    ),
                    "a queue carries one message type; give each message its own queue",
                );
            }
        }
    }

    /// A consumer expecting one message type on a queue that publishers fill with another.
    /// Only routes known to reach the queue count: a headers binding may not match.
    fn message_mismatch(&mut self, consumer: &str, queue: &str, message: &str) {
        let file = self.file;
        let reaching = self.reaching.get(queue).cloned().unwrap_or_default();
        for publisher in reaching {
            let Some(p) = file.publishers.get(publisher) else {
                continue;
            };
            if p.message != message {
                self.error(
                    "message-mismatch",
                    &format!("consumers.{consumer}.message"),
                    format!("consumer `{consumer}` expects `{message}`, but publisher `{publisher}` sends `{}` to its queue `{queue}`", p.message),
                    "make the consumer and the publisher use the same message, or route them to different queues",
                );
            }
        }
    }

    /// A dead-letter exchange must route the dead letters of its queue somewhere.
    pub(super) fn dead_letters(&mut self) {
        let file = self.file;
        for (name, queue) in &file.queues {
            let Some(dl) = dead_letter_of(queue) else {
                continue;
            };
            let path = format!("queues.{name}.{}", dl.field);
            let key_path = if dl.routing_key.is_some() {
                format!("queues.{name}.{}", dl.key_field)
            } else {
                path.clone()
            };
            if dl.exchange.is_empty() {
                match &dl.routing_key {
                    None => self.error(
                        "unroutable-dead-letter",
                        &path,
                        format!("queue `{name}` dead-letters through the default exchange without a routing key, so dead letters keep their own key and reach no queue"),
                        "set `dead_letter.routing_key` to the name of the dead-letter queue",
                    ),
                    Some(key) if !file.queues.contains_key(key) => self.error(
                        "unroutable-dead-letter",
                        &key_path,
                        format!("dead letters of `{name}` go through the default exchange to queue `{key}`, which is not declared"),
                        "declare the dead-letter queue, or fix the name",
                    ),
                    Some(_) => {}
                }
                continue;
            }
            let Some(exchange) = file.exchanges.get(&dl.exchange) else {
                continue;
            };
            // The keys dead letters carry: the configured one, else the keys of the messages
            // known to reach this queue.
            let keys: Vec<(String, KeyTemplate)> = match &dl.routing_key {
                Some(key) => KeyTemplate::parse(key)
                    .map(|t| vec![(key.clone(), t)])
                    .unwrap_or_default(),
                None => self.keys_reaching(name),
            };
            let loss = if keys.is_empty() {
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
            };
            let Some(loss) = loss else { continue };
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
            self.error("unroutable-dead-letter", &path, what, help);
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

    /// Names that become Rust identifiers must give valid, distinct ones. Names are split
    /// into words and re-cased, so `order-placed`, `order_placed` and `OrderPlaced` are one
    /// name to Rust: the later one (in sorted order) is reported, naming the other.
    pub(super) fn identifiers(&mut self) {
        let groups: [(&str, Role, Vec<&String>); 4] = [
            (
                "messages",
                Role::Message,
                self.file.messages.keys().collect(),
            ),
            (
                "publishers",
                Role::Publisher,
                self.file.publishers.keys().collect(),
            ),
            (
                "consumers",
                Role::ConsumerTrait,
                self.file.consumers.keys().collect(),
            ),
            (
                "consumers",
                Role::ConsumerField,
                self.file.consumers.keys().collect(),
            ),
        ];
        for (section, role, names) in groups {
            let noun = role.noun();
            let mut taken: BTreeMap<String, &String> = BTreeMap::new();
            for name in names {
                let path = format!("{section}.{name}");
                match role_ident(name, role) {
                    Err(problem) => {
                        // A consumer's trait and field fail alike: report it once.
                        if role != Role::ConsumerField {
                            self.error(
                                "bad-identifier",
                                &path,
                                format!(
                                    "`{}` cannot become a Rust {noun} name: {problem}",
                                    shown(name)
                                ),
                                "use ASCII letters and digits, starting with a letter",
                            );
                        }
                    }
                    Ok(id) => {
                        if let Some(first) = taken.insert(id.text.clone(), name) {
                            self.error(
                                "identifier-clash",
                                &path,
                                format!(
                                    "{section} `{}` and `{}` would both become the Rust {noun} `{id}`",
                                    shown(first),
                                    shown(name)
                                ),
                                format!(
                                    "Rust names are made of the words of a name, re-cased, so these two are the same name; rename one of them (at `{section}.{}` or here) so their words differ",
                                    shown(first)
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
}

fn describe_visited(graph: &Graph, reach: &Reach) -> String {
    let parts: Vec<String> = reach
        .visited
        .iter()
        .map(|exchange| {
            let keys = graph.binding_keys(exchange);
            if keys.is_empty() {
                format!("none on `{exchange}`")
            } else {
                format!("{} on `{exchange}`", list(keys.iter().map(String::as_str)))
            }
        })
        .collect();
    parts.join("; ")
}

/// How a dead-letter exchange would lose dead letters.
enum Loss {
    /// No binding at all.
    NothingBound,
    /// These keys match no binding.
    Unrouted(Vec<String>),
}

/// What a name refers to.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Exchange,
    Queue,
    Message,
}

impl Kind {
    /// The noun and the contract section.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Self::Exchange => ("exchange", "exchanges"),
            Self::Queue => ("queue", "queues"),
            Self::Message => ("message", "messages"),
        }
    }

    fn unknown_code(self) -> &'static str {
        match self {
            Self::Exchange => "unknown-exchange",
            Self::Queue => "unknown-queue",
            Self::Message => "unknown-message",
        }
    }
}

/// A queue's dead-letter target, from `dead_letter` or from raw `x-dead-letter-*` arguments.
struct QueueDeadLetter {
    exchange: String,
    routing_key: Option<String>,
    /// The field that sets the exchange, relative to the queue.
    field: &'static str,
    /// The field that sets the routing key, relative to the queue.
    key_field: &'static str,
}

fn dead_letter_of(queue: &Queue) -> Option<QueueDeadLetter> {
    if let Some(dl) = &queue.dead_letter {
        return Some(QueueDeadLetter {
            exchange: dl.exchange.clone(),
            routing_key: dl.routing_key.clone(),
            field: "dead_letter.exchange",
            key_field: "dead_letter.routing_key",
        });
    }
    let text = |key: &str| match queue.arguments.get(key) {
        Some(ArgumentValue::String(value)) => Some(value.clone()),
        _ => None,
    };
    Some(QueueDeadLetter {
        exchange: text("x-dead-letter-exchange")?,
        routing_key: text("x-dead-letter-routing-key"),
        field: "arguments.x-dead-letter-exchange",
        key_field: "arguments.x-dead-letter-routing-key",
    })
}

/// A dead-letter exchange set by `dead_letter` or by a raw `x-dead-letter-exchange`.
fn has_dead_letter_exchange(queue: &Queue) -> bool {
    dead_letter_of(queue).is_some()
}

fn typed_field_set(queue: &Queue, argument: &str) -> bool {
    match argument {
        "x-queue-type" => queue.kind.is_some(),
        "x-dead-letter-exchange" => queue.dead_letter.is_some(),
        "x-dead-letter-routing-key" => queue
            .dead_letter
            .as_ref()
            .is_some_and(|d| d.routing_key.is_some()),
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
        _ => false,
    }
}

/// The exchange graph of the contract's declared exchanges and bindings.
fn graph(file: &ContractFile) -> Graph {
    let exchanges = file.exchanges.iter().map(|(name, e)| {
        let alternate =
            e.alternate_exchange
                .clone()
                .or_else(|| match e.arguments.get("alternate-exchange") {
                    Some(ArgumentValue::String(name)) => Some(name.clone()),
                    _ => None,
                });
        (name.clone(), e.kind.unwrap_or_default(), alternate)
    });
    let bindings = file.bindings.iter().filter_map(|binding| {
        let to = match (&binding.queue, &binding.to_exchange) {
            (Some(queue), _) => Destination::Queue(queue.clone()),
            (None, Some(exchange)) => Destination::Exchange(exchange.clone()),
            (None, None) => return None,
        };
        let edge = Edge {
            key: binding.routing_key.clone(),
            to,
        };
        Some((binding.exchange.clone(), edge))
    });
    Graph::new(exchanges, file.queues.keys().cloned(), bindings)
}
