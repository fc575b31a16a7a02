//! Consumers: their settings, what their queues receive, and poison messages.

use std::collections::{BTreeMap, BTreeSet};

use super::{Checker, dead_letter_of, entry, has_dead_letter_exchange, pointer_problem};
use crate::check::list;
use crate::diagnostics::{Code, YamlPath};
use crate::routing::KeyTemplate;
use crate::syntax::{ConsumedMessages, Consumer, OnPoison, OrderingKey, Queue, QueueKind};

impl Checker<'_> {
    /// Consumer settings, what their queues receive, and what happens to poison messages.
    pub(in crate::check) fn consumers(&mut self) {
        let file = self.file;
        let mut by_queue: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, consumer) in &file.consumers {
            let path = entry("consumers", name);
            by_queue.entry(&consumer.queue).or_default().push(name);
            self.consumer_settings(consumer, &path);
            self.inbox(name, consumer, &path);
            self.ordering(name, consumer, &path);
            self.several(name, consumer, &path);
            let Some(queue) = file.queues.get(&consumer.queue) else {
                continue;
            };
            if consumer.dead_letters == Some(true) {
                // Poison reaches a dead-letter consumer raw: it is never lost to decoding.
                self.dead_letter_consumer(name, consumer, &path);
            } else {
                self.poison_loss(&format!("consumer `{name}`"), consumer, queue, &path);
            }
            let at = match consumer.message {
                Some(_) => path.key("message"),
                None => path.key("messages"),
            };
            let who = format!("consumer `{name}`");
            let expects: Vec<&str> = consumer.consumed().iter().map(|(m, _)| *m).collect();
            self.message_mismatch(&who, &at, &consumer.queue, &expects);
        }
        self.conflicting_consumers(by_queue);
    }

    /// The inbox: a key only with it, a key that is a JSON pointer, not on a dead-letter
    /// consumer.
    fn inbox(&mut self, name: &str, consumer: &Consumer, path: &YamlPath) {
        let inbox = consumer.inbox == Some(true);
        if let Some(pointer) = &consumer.inbox_key {
            if !inbox {
                self.error(
                    Code::BadInbox,
                    &path.key("inbox_key"),
                    format!("consumer `{name}` names an `inbox_key` but has no inbox"),
                    "add `inbox: true`, or remove `inbox_key`",
                );
            }
            if let Err(why) = pointer_problem(pointer) {
                self.error(
                    Code::BadInbox,
                    &path.key("inbox_key"),
                    format!("consumer `{name}`'s inbox key `{pointer}` {why}"),
                    "write a JSON pointer into the payload, such as `/order_id` (`~1` for a `/` in a property name, `~0` for a `~`)",
                );
            }
        }
        if inbox && consumer.dead_letters == Some(true) {
            self.error(
                Code::BadInbox,
                &path.key("inbox"),
                format!("dead-letter consumer `{name}` has an inbox: a dead letter is a copy under the id of the message that failed, which its own consumer's inbox may hold already"),
                "remove `inbox: true`; record what the dead letters cause in the handler's own transaction",
            );
        }
    }

    /// `message` or `messages`, one of them: at least two messages, each once, each with a
    /// selector of one kind; handled one delivery at a time.
    fn several(&mut self, name: &str, consumer: &Consumer, path: &YamlPath) {
        let fix =
            "write `message: <name>` for one message, or `messages: [<name>, <name>]` for several";
        let several = match (&consumer.message, &consumer.messages) {
            (Some(_), None) => return,
            (None, None) => {
                let what = format!("consumer `{name}` names no message");
                return self.error(Code::BadConsumer, path, what, fix);
            }
            (Some(_), Some(_)) => {
                let what = format!("consumer `{name}` names both `message` and `messages`");
                return self.error(Code::BadConsumer, &path.key("messages"), what, fix);
            }
            (None, Some(several)) => several,
        };
        let at = path.key("messages");
        let consumed = consumer.consumed();
        if consumed.len() < 2 {
            let count = match consumed.len() {
                0 => "no message",
                _ => "only one message",
            };
            let what = format!("consumer `{name}` lists {count} under `messages`");
            self.error(Code::BadConsumer, &at, what, fix);
        }
        if let ConsumedMessages::Names(names) = several {
            let mut seen = BTreeSet::new();
            for (index, message) in names.iter().enumerate() {
                if !seen.insert(message) {
                    let what = format!("consumer `{name}` lists message `{message}` twice");
                    self.error(
                        Code::BadConsumer,
                        &at.index(index),
                        what,
                        "list each message once",
                    );
                }
            }
        }
        for (message, selector) in &consumed {
            let Some(selector) = selector else { continue };
            let problem = match (&selector.routing_key, &selector.header) {
                (Some(_), Some(_)) => Some("names both a `routing_key` and a `header`"),
                (None, None) => Some("names neither a `routing_key` nor a `header`"),
                (Some(pattern), None)
                    if pattern.is_empty()
                        || pattern.len() > warren_model::limits::MAX_SHORT_STRING =>
                {
                    Some("has a routing key pattern that is empty or past AMQP's 255 bytes")
                }
                (None, Some(header)) if header.len() != 1 => {
                    Some("names a `header` map of other than one entry")
                }
                _ => None,
            };
            if let Some(problem) = problem {
                self.error(
                    Code::BadConsumer,
                    &at.key(*message),
                    format!("consumer `{name}`'s selector of message `{message}` {problem}"),
                    "select a message without a `type` by `routing_key: \"order.*.placed\"` or by `header: { event: placed }`",
                );
            }
        }
        let kind = match consumer {
            c if c.batch.is_some() => Some("a batch consumer"),
            c if c.inbox == Some(true) => Some("an inbox consumer"),
            _ => None,
        };
        if let Some(kind) = kind {
            self.error(
                Code::BadConsumer,
                &at,
                format!("consumer `{name}` takes several messages and is {kind}: a consumer of several handles one delivery at a time"),
                "give each message a consumer of its own, or drop `batch` or `inbox`",
            );
        }
        if consumer.dead_letters == Some(true) {
            self.dead_letters_of_several(name, consumer, several, &at);
        }
    }

    /// A dead-letter consumer of several: its dead letters are told apart by their `type` (or
    /// the first message they decode as), so selectors mean nothing; its enum's `Raw` variant
    /// is taken.
    fn dead_letters_of_several(
        &mut self,
        name: &str,
        consumer: &Consumer,
        several: &ConsumedMessages,
        at: &YamlPath,
    ) {
        if let ConsumedMessages::Selected(_) = several {
            self.error(
                Code::BadConsumer,
                at,
                format!("dead-letter consumer `{name}` gives its messages selectors: a dead letter is typed by its `type`, or as the first message it decodes as"),
                "list the messages without selectors: `messages: [a, b]`",
            );
        }
        for (message, _) in consumer.consumed() {
            let taken = crate::naming::role_ident(message, crate::naming::Role::Message)
                .is_ok_and(|ident| ident.text == "Raw");
            if taken {
                self.error(
                    Code::BadConsumer,
                    at,
                    format!("dead-letter consumer `{name}` lists message `{message}`, whose variant would be `Raw`, the variant of the dead letters that are none of them"),
                    "rename the message",
                );
            }
        }
    }

    /// The ordering key: a JSON pointer or a header name a broker can carry, and not on a
    /// batch consumer, whose batches are its unit of work.
    fn ordering(&mut self, name: &str, consumer: &Consumer, path: &YamlPath) {
        let Some(key) = &consumer.ordering_key else {
            return;
        };
        let at = path.key("ordering_key");
        let problem = match key {
            OrderingKey::Payload(pointer) => pointer_problem(pointer)
                .err()
                .map(|why| format!("consumer `{name}`'s ordering key `{pointer}` {why}")),
            OrderingKey::Header(key) if key.header.is_empty() => Some(format!(
                "consumer `{name}`'s ordering key names an empty header"
            )),
            OrderingKey::Header(key)
                if key.header.len() > warren_model::limits::MAX_SHORT_STRING =>
            {
                Some(format!(
                    "consumer `{name}`'s ordering key names a header of {} bytes, past AMQP's 255",
                    key.header.len()
                ))
            }
            OrderingKey::Header(_) => None,
        };
        if let Some(problem) = problem {
            self.error(
                Code::BadOrderingKey,
                &at,
                problem,
                "write a JSON pointer into the payload, such as `/customer_id` (`~1` for a `/` in a property name, `~0` for a `~`), or `{ header: tenant }`",
            );
        }
        if consumer.batch.is_some() {
            self.error(
                Code::BadOrderingKey,
                &at,
                format!("batch consumer `{name}` has an ordering key: a batch is handled as one, with its messages in arrival order"),
                "remove `ordering_key`, or `batch` to handle each key's messages one at a time",
            );
        }
    }

    /// Prefetch, concurrency, batch and circuit breaker: values that could never work.
    pub(super) fn consumer_settings(&mut self, consumer: &Consumer, path: &YamlPath) {
        let prefetch = consumer
            .prefetch
            .unwrap_or(crate::contract::DEFAULT_PREFETCH);
        if consumer.prefetch == Some(0) {
            self.error(
                Code::BadConsumer,
                &path.key("prefetch"),
                "`prefetch: 0` means unlimited: the broker would push the whole queue into the worker".to_owned(),
                "set a bound such as 10 (the default)",
            );
        }
        if consumer.concurrency == Some(0) {
            self.error(
                Code::BadConsumer,
                &path.key("concurrency"),
                "`concurrency` must be at least 1".to_owned(),
                "use 1 to handle one message at a time",
            );
        }
        if let Some(concurrency) = consumer
            .concurrency
            .filter(|c| prefetch > 0 && *c > prefetch)
        {
            self.warn(
                Code::ConcurrencyAbovePrefetch,
                &path.key("concurrency"),
                format!("`concurrency: {concurrency}` exceeds `prefetch: {prefetch}`, so some handlers would always be idle"),
                "raise `prefetch` to at least the concurrency",
            );
        }
        if let Some(batch) = &consumer.batch {
            if batch.size == 0 {
                self.error(
                    Code::BadConsumer,
                    &path.key("batch").key("size"),
                    "a batch holds at least 1 message".to_owned(),
                    "set `size` to 1 or more",
                );
            } else if prefetch > 0 && batch.size > prefetch {
                self.error(
                    Code::BadConsumer,
                    &path.key("batch").key("size"),
                    format!(
                        "a batch of {} can never fill with `prefetch: {prefetch}`",
                        batch.size
                    ),
                    format!("raise `prefetch` to at least {}", batch.size),
                );
            }
            if batch.timeout.as_millis() == 0 {
                self.error(
                    Code::BadConsumer,
                    &path.key("batch").key("timeout"),
                    "the batch `timeout` must be longer than 0".to_owned(),
                    "use e.g. `200ms`",
                );
            }
        }
        if let Some(breaker) = &consumer.circuit_breaker {
            if breaker.failures == 0 {
                self.error(
                    Code::BadConsumer,
                    &path.key("circuit_breaker").key("failures"),
                    "the circuit breaker `failures` must be at least 1".to_owned(),
                    "use e.g. 5 to open it after five retryable failures in a row",
                );
            }
            if breaker.cool_down.as_millis() == 0 {
                self.error(
                    Code::BadConsumer,
                    &path.key("circuit_breaker").key("cool_down"),
                    "the circuit breaker `cool_down` must be longer than 0".to_owned(),
                    "use e.g. `30s`",
                );
            }
        }
    }

    /// A dead-letter consumer handles one dead letter at a time, from a queue that some
    /// queue's dead-letter exchange routes into.
    fn dead_letter_consumer(&mut self, name: &str, consumer: &Consumer, path: &YamlPath) {
        if consumer.batch.is_some() {
            self.error(
                Code::BadConsumer,
                &path.key("batch"),
                format!("dead-letter consumer `{name}` cannot take batches: each dead letter is settled on its own"),
                "remove `batch`, or `dead_letters: true`",
            );
        }
        let fed_by: Vec<&str> = self
            .file
            .queues
            .iter()
            .filter(|(source, _)| *source != &consumer.queue)
            .filter(|(source, queue)| self.dead_letters_into(source, queue, &consumer.queue))
            .map(|(source, _)| source.as_str())
            .collect();
        // Told of every message it would take raw: a dead-letter queue receives the failures
        // of every queue that dead-letters into it, not only those of the message it names.
        self.untyped_dead_letters(name, consumer, &fed_by, path);
        if fed_by.is_empty() {
            self.warn(
                Code::NoDeadLetters,
                &path.key("dead_letters"),
                format!("dead-letter consumer `{name}` reads queue `{}`, which no queue of this contract dead-letters into", consumer.queue),
                format!("bind queue `{}` to the `dead_letter` exchange of the queues whose failures it should read, or drop `dead_letters: true`", consumer.queue),
            );
        }
    }

    /// Warns of the messages whose dead letters reach a dead-letter consumer's queue from the
    /// queues in `fed_by` (what their consumers and rpc servers read) and that it does not
    /// list: they reach its handler raw.
    fn untyped_dead_letters(
        &mut self,
        name: &str,
        consumer: &Consumer,
        fed_by: &[&str],
        path: &YamlPath,
    ) {
        let file = self.file;
        let listed: BTreeSet<&str> = consumer.consumed().iter().map(|(m, _)| *m).collect();
        let mut untyped: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let consumed = file.consumers.values().flat_map(|c| {
            let queue = c.queue.as_str();
            c.consumed()
                .into_iter()
                .map(move |(message, _)| (queue, message))
        });
        let requests = (file.rpcs.values()).map(|r| (r.queue.as_str(), r.request.as_str()));
        for (queue, message) in consumed.chain(requests) {
            if fed_by.contains(&queue) && !listed.contains(message) {
                untyped.entry(message).or_default().insert(queue);
            }
        }
        if untyped.is_empty() {
            return;
        }
        let missing: Vec<String> = (untyped.iter())
            .map(|(message, queues)| format!("`{message}` (from {})", list(queues.iter().copied())))
            .collect();
        let all: Vec<&str> = listed.iter().chain(untyped.keys()).copied().collect();
        let at = match consumer.message {
            Some(_) => path.key("message"),
            None => path.key("messages"),
        };
        self.warn(
            Code::UntypedDeadLetters,
            &at,
            format!(
                "dead-letter consumer `{name}` reads dead letters of messages it does not list, which reach its handler raw: {}",
                missing.join(", ")
            ),
            format!("list every message its queue receives, to get each typed: `messages: [{}]`", all.join(", ")),
        );
    }

    /// Whether queue `source`'s dead letters reach queue `target`: through its dead-letter
    /// exchange with its dead-letter routing key, or, without one, with the keys of the
    /// messages known to reach `source` (any binding from the exchange to `target` when none
    /// is known).
    fn dead_letters_into(&self, source: &str, queue: &Queue, target: &str) -> bool {
        let Some(dl) = dead_letter_of(queue) else {
            return false;
        };
        let keys: Vec<KeyTemplate> = match &dl.routing_key {
            Some(key) => KeyTemplate::parse(key).into_iter().collect(),
            None => self
                .reaching
                .get(source)
                .into_iter()
                .flatten()
                .filter_map(|p| self.file.publishers.get(*p))
                .filter_map(|p| {
                    KeyTemplate::parse(p.routing_key.as_deref().unwrap_or_default()).ok()
                })
                .collect(),
        };
        if keys.is_empty() {
            return self.file.bindings.iter().any(|binding| {
                binding.exchange == dl.exchange && binding.queue.as_deref() == Some(target)
            });
        }
        keys.iter().any(|key| {
            let reach = self.graph.route(&dl.exchange, key);
            reach.queues.contains(target) || reach.maybe.contains(target)
        })
    }

    /// A consumed queue must dead-letter messages that cannot be decoded or validated, unless
    /// told to drop them. `who` names the consumer (or rpc server) in the message.
    pub(super) fn poison_loss(
        &mut self,
        who: &str,
        consumer: &Consumer,
        queue: &Queue,
        path: &YamlPath,
    ) {
        if queue.on_poison.unwrap_or_default() == OnPoison::DeadLetter
            && !has_dead_letter_exchange(queue)
        {
            let stream = queue.kind == Some(QueueKind::Stream);
            self.error(
                Code::PoisonLoss,
                &path.key("queue"),
                format!("{who} reads queue `{}`, which has no dead-letter exchange: messages that cannot be decoded or validated would be lost", consumer.queue),
                if stream {
                    "streams cannot dead-letter; set `on_poison: drop` on the queue to discard them knowingly".to_owned()
                } else {
                    format!("set `dead_letter` on queue `{}`, or `on_poison: drop` to discard them knowingly", consumer.queue)
                },
            );
        }
    }

    /// Consumers of one queue must expect one message type.
    fn conflicting_consumers(&mut self, by_queue: BTreeMap<&str, Vec<&str>>) {
        for (queue, consumers) in by_queue {
            // Each consumer's messages, as a sorted list: competing consumers expect the same.
            let messages: BTreeSet<String> = consumers
                .iter()
                .filter_map(|c| self.file.consumers.get(*c))
                .map(|c| {
                    let expects: BTreeSet<&str> = c.consumed().iter().map(|(m, _)| *m).collect();
                    expects.into_iter().collect::<Vec<_>>().join("`, `")
                })
                .collect();
            if messages.len() > 1 {
                let path = entry("consumers", consumers[consumers.len() - 1]).key("message");
                self.error(
                    Code::ConflictingConsumers,
                    &path,
                    format!(
                        "consumers {} of queue `{queue}` expect different messages ({})",
                        list(consumers.iter().copied()),
                        list(messages.iter().map(String::as_str))
                    ),
                    "a queue carries one message type; give each message its own queue",
                );
            }
        }
    }

    /// A consumer (`who`, its message at `path`) expecting one message type on a queue that
    /// publishers fill with another. Only routes known to reach the queue count: a headers
    /// binding may not match.
    pub(super) fn message_mismatch(
        &mut self,
        who: &str,
        path: &YamlPath,
        queue: &str,
        expects: &[&str],
    ) {
        let file = self.file;
        let reaching = self.reaching.get(queue).cloned().unwrap_or_default();
        for publisher in reaching {
            let Some(p) = file.publishers.get(publisher) else {
                continue;
            };
            if !expects.contains(&p.message.as_str()) {
                let expected = match expects {
                    [one] => format!("`{one}`"),
                    several => format!("one of `{}`", several.join("`, `")),
                };
                self.error(
                    Code::MessageMismatch,
                    path,
                    format!("{who} expects {expected}, but publisher `{publisher}` sends `{}` to its queue `{queue}`", p.message),
                    "make the consumer and the publisher use the same message, list it under the consumer's `messages`, or route them to different queues",
                );
            }
        }
    }
}
