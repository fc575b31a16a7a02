//! The operations of an AsyncAPI document: publishers, consumers and the halves of rpcs,
//! on the channels [`super::Reader::channels`] read.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde_json::Value;
use warren_codegen::diagnostics::{Place, Segment};
use warren_codegen::syntax::{
    Batch, Binding, CircuitBreaker, Compression, ConsumedMessages, Consumer, DeadLetter, OnPoison,
    Publisher, Queue, QueueKind, Rpc,
};
use warren_codegen::{Code, Error, Severity, check_sources};

use super::super::Imported;
use super::super::fields::{Fields, Notes, child, local_ref};
use super::{Channel, Reader, RpcParts, Target, snake_case, unused_key};

impl Reader {
    /// Publishers, consumers and the halves of rpcs, from the operations.
    pub(super) fn operations(&mut self, operations: Fields<'_>) {
        let pointer = operations.pointer.clone();
        for (id, value) in operations.entries() {
            let at = child(&pointer, id);
            let mut fields = Fields::of(Some(value), at.clone());
            let name = fields
                .str("title")
                .map_or_else(|| operation_name(id), str::to_owned);
            let Some((channel_id, channel)) = self.channel_of(&mut fields) else {
                self.notes.not_mapped(&at, "an operation whose `channel` is not a `$ref` to one of the document's channels");
                continue;
            };
            let messages = self.operation_messages(&mut fields, &channel);
            let action = fields.str("action");
            match action {
                Some("send") => self.send(&name, &mut fields, &channel, messages),
                Some("receive") => {
                    self.receive(&name, &channel_id, &mut fields, &channel, messages)
                }
                _ => self.notes.not_mapped(
                    &at,
                    "an operation whose `action` is neither `send` nor `receive`",
                ),
            }
            fields.skip(&["summary", "description", "tags", "externalDocs"]);
            fields.finish(&mut self.notes, "not a part of an operation warren maps");
        }
    }

    /// The channel an operation's (or a reply's) `channel` refers to, with its id.
    fn channel_of(&self, fields: &mut Fields<'_>) -> Option<(String, Channel)> {
        let id = local_ref(fields.get("channel")?, "#/channels/")?;
        let channel = self.channels.get(&id)?.clone();
        Some((id, channel))
    }

    /// The contract messages an operation sends or receives: those it lists, else every
    /// message of its channel.
    fn operation_messages(&mut self, fields: &mut Fields<'_>, channel: &Channel) -> Vec<String> {
        let at = fields.at("messages");
        let Some(listed) = fields.get("messages").and_then(Value::as_array) else {
            return channel.messages.values().cloned().collect();
        };
        let mut messages = Vec::new();
        for (i, reference) in listed.iter().enumerate() {
            let id = reference
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.rsplit_once("/messages/"))
                .map(|(_, id)| warren_codegen::json_pointer::unescape_segment(id));
            match id.and_then(|id| channel.messages.get(&id)) {
                Some(name) => messages.push(name.clone()),
                None => self.notes.not_mapped(
                    &format!("{at}/{i}"),
                    "not a `$ref` to a message of the operation's channel",
                ),
            }
        }
        messages
    }

    /// A send operation: a publisher per message, or an rpc's caller.
    fn send(
        &mut self,
        name: &str,
        fields: &mut Fields<'_>,
        channel: &Channel,
        messages: Vec<String>,
    ) {
        let target = match (&channel.exchange, &channel.queue) {
            (Some(exchange), _) => Target {
                exchange: exchange.clone(),
                routing_key: channel.address.clone(),
            },
            // A send to a queue's channel goes through the default exchange.
            (None, Some(queue)) => Target {
                exchange: String::new(),
                routing_key: Some(queue.clone()),
            },
            (None, None) => {
                self.notes.not_mapped(
                    &fields.pointer,
                    "a send to a channel that is neither an exchange nor a queue",
                );
                return;
            }
        };
        let mut amqp = fields.object("bindings").object("amqp");
        if amqp.get("deliveryMode").and_then(Value::as_u64) == Some(1) {
            self.notes.assumed(
                &amqp.at("deliveryMode"),
                "warren publishes every message persistent (delivery mode 2), with confirms",
            );
        }
        if let Some(keys) = amqp.get("cc").and_then(Value::as_array)
            && keys
                .iter()
                .any(|k| k.as_str() != target.routing_key.as_deref())
        {
            self.notes.not_mapped(
                &amqp.at("cc"),
                "carbon-copy routing keys: a warren publisher sends with its one routing key",
            );
        }
        amqp.skip(&["mandatory", "ack", "bindingVersion"]);
        amqp.finish(&mut self.notes, "an AMQP property warren sets itself");
        if fields.get("reply").is_some() {
            let request = messages.first().cloned();
            self.rpc_operation(name, fields, |parts| {
                parts.caller = Some(target);
                parts.request = request;
            });
            return;
        }
        self.publishers(name, fields, &target, messages);
    }

    /// A send operation's publisher, or one per message when it sends several: a warren
    /// publisher sends one message.
    fn publishers(
        &mut self,
        name: &str,
        fields: &mut Fields<'_>,
        target: &Target,
        messages: Vec<String>,
    ) {
        let compression = fields
            .str("x-warren-compression")
            .and_then(|c| Compression::from_str(c).ok());
        let external = fields.bool("x-warren-external-consumers") == Some(true);
        let ordering_key = fields.str("x-warren-ordering-key").map(str::to_owned);
        let several = messages.len() > 1;
        for message in messages {
            let publisher_name = if several {
                format!("{name}_{message}")
            } else {
                name.to_owned()
            };
            if external {
                self.said_external.insert(publisher_name.clone());
            }
            self.publisher_at
                .insert(publisher_name.clone(), fields.pointer.clone());
            self.contract.publishers.insert(
                publisher_name,
                Publisher {
                    exchange: target.exchange.clone(),
                    routing_key: target.routing_key.clone(),
                    message,
                    compression,
                    external_consumers: external.then_some(true),
                    ordering_key: ordering_key.clone(),
                },
            );
        }
    }

    /// A receive operation: a consumer of the channel's queue, or an rpc's server.
    fn receive(
        &mut self,
        name: &str,
        channel_id: &str,
        fields: &mut Fields<'_>,
        channel: &Channel,
        messages: Vec<String>,
    ) {
        let Some(queue) = channel.queue.clone() else {
            self.notes.not_mapped(&fields.pointer, "a receive from a channel that is not a queue's: add the queue and its binding to the contract");
            return;
        };
        let mut amqp = fields.object("bindings").object("amqp");
        let keys = amqp
            .get("cc")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let cc_at = amqp.at("cc");
        amqp.skip(&["ack", "bindingVersion"]);
        amqp.finish(&mut self.notes, "an AMQP setting warren sets itself");
        self.faststream_bindings(&queue, channel_id, &keys, &cc_at);
        let settings = fields.get("x-warren-consumer").cloned();
        if fields.get("reply").is_some() {
            let request = messages.first().cloned();
            self.rpc_operation(name, fields, |parts| {
                parts.server_queue = Some(queue);
                parts.server_settings = settings;
                parts.request = parts.request.take().or(request);
            });
            return;
        }
        // One message, or several: a consumer of several, each recognised by its `type`.
        let (message, several) = match messages.len() {
            0 => {
                self.notes
                    .not_mapped(&fields.pointer, "a receive operation without a message");
                return;
            }
            1 => (messages.into_iter().next(), None),
            _ => (None, Some(ConsumedMessages::Names(messages))),
        };
        let mut consumer = Consumer {
            queue,
            message,
            messages: several,
            ..Consumer::default()
        };
        self.consumer_settings(
            settings.as_ref(),
            &fields.at("x-warren-consumer"),
            &mut consumer,
        );
        self.contract.consumers.insert(name.to_owned(), consumer);
    }

    /// FastStream's binding keys of a queue (`cc` of its receive operation), bound from the
    /// exchange its channel id names (`queue:exchange:handler`; `_` the default exchange,
    /// which needs no binding).
    fn faststream_bindings(
        &mut self,
        queue: &str,
        channel_id: &str,
        keys: &[Value],
        pointer: &str,
    ) {
        let exchange = channel_id
            .split(':')
            .nth(1)
            .filter(|_| channel_id.starts_with(&format!("{queue}:")));
        for key in keys.iter().filter_map(Value::as_str) {
            let known = self.contract.bindings.iter().any(|b| {
                b.queue.as_deref() == Some(queue) && b.routing_key.as_deref() == Some(key)
            });
            match exchange {
                _ if known => {}
                Some("_") if key == queue => {}
                Some(exchange) if exchange != "_" => {
                    self.notes.assumed(pointer, format!("queue `{queue}` is bound with `{key}` from exchange `{exchange}`, which the channel's id names as FastStream names channels: the AMQP binding does not say"));
                    self.contract.bindings.push(Binding {
                        exchange: exchange.to_owned(),
                        queue: Some(queue.to_owned()),
                        routing_key: Some(key.to_owned()),
                        ..Binding::default()
                    });
                }
                _ => self.notes.not_mapped(pointer, format!("binding key `{key}` of queue `{queue}`: the document does not say from which exchange; add the binding")),
            }
        }
    }

    /// What an operation with a `reply` says of its rpc: `half` fills in the operation's
    /// side, then the reply's messages and `x-warren-rpc` are read (from the first side that
    /// has them).
    fn rpc_operation(
        &mut self,
        name: &str,
        fields: &mut Fields<'_>,
        half: impl FnOnce(&mut RpcParts),
    ) {
        let extras = fields.get("x-warren-rpc").cloned();
        self.rpc_reply(name, fields);
        let parts = self.rpc_part(name, &fields.pointer);
        half(parts);
        if parts.extras.is_none() {
            parts.extras = extras;
        }
    }

    fn rpc_part(&mut self, name: &str, pointer: &str) -> &mut RpcParts {
        let parts = self.rpc_parts.entry(name.to_owned()).or_default();
        if parts.pointer.is_empty() {
            parts.pointer = pointer.to_owned();
        }
        parts
    }

    /// The messages of an operation's reply: the rpc's response and errors.
    fn rpc_reply(&mut self, name: &str, fields: &mut Fields<'_>) {
        let mut reply = fields.object("reply");
        let channel = self
            .channel_of(&mut reply)
            .map(|(_, channel)| channel)
            .unwrap_or_default();
        let replies = self.operation_messages(&mut reply, &channel);
        // Direct reply-to: the address is the request's reply-to, warren's own way.
        reply.skip(&["address"]);
        reply.finish(&mut self.notes, "not a part of a reply warren maps");
        let parts = self.rpc_parts.entry(name.to_owned()).or_default();
        for message in replies {
            if !parts.replies.contains(&message) {
                parts.replies.push(message);
            }
        }
    }

    /// A consumer's settings from `x-warren-consumer`.
    fn consumer_settings(
        &mut self,
        settings: Option<&Value>,
        pointer: &str,
        consumer: &mut Consumer,
    ) {
        let mut fields = Fields::of(settings, pointer);
        consumer.prefetch = fields.number("prefetch");
        consumer.concurrency = fields.number("concurrency");
        let mut batch = fields.object("batch");
        let size = batch.number("size");
        let timeout = batch.duration("timeout");
        if let (Some(size), Some(timeout)) = (size, timeout) {
            consumer.batch = Some(Batch { size, timeout });
        }
        batch.finish(&mut self.notes, "not a batch setting");
        consumer.circuit_breaker = circuit_breaker(&mut fields, &mut self.notes);
        consumer.dead_letters = fields.bool("deadLetters").filter(|d| *d);
        fields.finish(&mut self.notes, "not a consumer setting");
    }

    /// The rpcs, from their operations' halves.
    pub(super) fn rpcs(&mut self) {
        for (name, parts) in std::mem::take(&mut self.rpc_parts) {
            let mut extras = Fields::of(
                parts.extras.as_ref(),
                format!("{}/x-warren-rpc", parts.pointer),
            );
            let errors: BTreeMap<String, String> = extras
                .get("errors")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(code, message)| Some((code.clone(), message.as_str()?.to_owned())))
                .collect();
            let timeout = extras.duration("timeout");
            extras.finish(&mut self.notes, "not an rpc setting");
            // The response comes first, then the errors' messages (warren's own order).
            let response = parts.replies.first().cloned();
            let queue = parts.server_queue.clone().or_else(|| {
                let caller = parts.caller.as_ref()?;
                caller
                    .exchange
                    .is_empty()
                    .then(|| caller.routing_key.clone())?
            });
            let (Some(queue), Some(request), Some(response)) =
                (queue, parts.request.clone(), response)
            else {
                self.notes.not_mapped(&parts.pointer, format!("rpc `{name}`: the document does not say its server's queue, its request or its response; write the rpc in the contract"));
                continue;
            };
            let mut rpc = Rpc {
                queue: queue.clone(),
                request,
                response,
                errors,
                timeout,
                ..Rpc::default()
            };
            if let Some(caller) = parts.caller.filter(|c| {
                !(c.exchange.is_empty() && c.routing_key.as_deref() == Some(queue.as_str()))
            }) {
                rpc.exchange = Some(caller.exchange);
                rpc.routing_key = caller.routing_key;
            }
            let mut server = Consumer::default();
            self.consumer_settings(
                parts.server_settings.as_ref(),
                &format!("{}/x-warren-consumer", parts.pointer),
                &mut server,
            );
            rpc.prefetch = server.prefetch;
            rpc.concurrency = server.concurrency;
            rpc.circuit_breaker = server.circuit_breaker;
            self.contract.rpcs.insert(name, rpc);
        }
    }

    /// What another stack's document leaves unsaid and a contract must say, settled as
    /// that stack behaves, each with a note: a publisher whose messages reach no queue of
    /// the import is `external_consumers: true` (its consumers are another service's), and
    /// a consumed queue with no dead-letter exchange gets a dead-letter queue that only
    /// warren's worker uses ([`Reader::poison_kept`]), so nothing it rejects is lost.
    pub(super) fn settle_what_the_document_leaves_unsaid(&mut self) {
        let imported = Imported {
            contract: self.contract.clone(),
            schemas: self.files.files.clone(),
            notes: Vec::new(),
        };
        let Err(Error::Invalid(diagnostics)) = check_sources(&imported.sources()) else {
            return;
        };
        for diagnostic in diagnostics.iter() {
            if diagnostic.severity != Severity::Error {
                continue;
            }
            let Place::Yaml { path, .. } = &diagnostic.place else {
                continue;
            };
            let [Segment::Key(section), Segment::Key(name), ..] = path.segments() else {
                continue;
            };
            match (diagnostic.code, section.as_str()) {
                (Code::UnroutablePublisher, "publishers") => self.external_consumers(name),
                (Code::PoisonLoss, "consumers") => self.poison_kept(name),
                _ => {}
            }
        }
    }

    fn external_consumers(&mut self, publisher: &str) {
        if self.said_external.contains(publisher) {
            return;
        }
        if let Some(found) = self.contract.publishers.get_mut(publisher) {
            found.external_consumers = Some(true);
            let at = self
                .publisher_at
                .get(publisher)
                .cloned()
                .unwrap_or_default();
            self.notes.assumed(
                &at,
                format!("publisher `{publisher}` sends to queues the document does not have: `external_consumers: true`, another service declares them"),
            );
        }
    }

    /// The consumed queue of `consumer`, which has no dead-letter exchange, given one only
    /// warren's worker uses: messages it cannot decode or validate (and, by its retry
    /// policy, those that fail) go to a dead-letter queue of their own, through the default
    /// exchange, while the queue stays declared as the other stack declares it
    /// (`queue_argument: false`), so neither side's declaration is refused. A stream cannot
    /// be given one: its poison is dropped, as `on_poison: drop` says.
    fn poison_kept(&mut self, consumer: &str) {
        let Some(name) = self
            .contract
            .consumers
            .get(consumer)
            .map(|c| c.queue.clone())
        else {
            return;
        };
        let dead_letters = unused_key(&self.contract.queues, &format!("{name}.dead-letters"), '-');
        let at = self.queue_at.get(&name).cloned().unwrap_or_default();
        let Some(queue) = (self.contract.queues.get_mut(&name)).filter(|q| q.on_poison.is_none())
        else {
            return;
        };
        if queue.kind == Some(QueueKind::Stream) {
            queue.on_poison = Some(OnPoison::Drop);
            return self.notes.assumed(
                &at,
                format!("stream `{name}` cannot dead-letter, so a message its consumer cannot decode or validate is dropped: `on_poison: drop` says so"),
            );
        }
        queue.dead_letter = Some(DeadLetter {
            exchange: String::new(),
            routing_key: Some(dead_letters.clone()),
            queue_argument: Some(false),
        });
        let dead_letter_queue = Queue {
            kind: queue.kind,
            durable: queue.durable,
            ..Queue::default()
        };
        self.contract
            .queues
            .insert(dead_letters.clone(), dead_letter_queue);
        self.notes.assumed(
            &at,
            format!("queue `{name}` has no dead-letter exchange in the document: warren's consumer sends what it cannot decode, validate or handle to queue `{dead_letters}`, with the reason in its headers, and declares `{name}` without one (`queue_argument: false`), as the other service does; a message RabbitMQ dead-letters itself, or the other service rejects, is still dropped"),
        );
    }
}

/// A consumer's circuit breaker from `circuitBreaker`.
fn circuit_breaker(fields: &mut Fields<'_>, notes: &mut Notes) -> Option<CircuitBreaker> {
    let mut breaker = fields.object("circuitBreaker");
    let failures = breaker.number("failures");
    let cool_down = breaker.duration("coolDown");
    breaker.finish(notes, "not a circuit-breaker setting");
    Some(CircuitBreaker {
        failures: failures?,
        cool_down: cool_down?,
    })
}

/// The name of an operation without a title: FastStream's subscriber `queue:exchange:BillSubscribe`
/// is its handler's (`bill`), any other id in `snake_case`.
fn operation_name(id: &str) -> String {
    let handler = match id.split(':').collect::<Vec<_>>().as_slice() {
        [_, _, handler] => handler.strip_suffix("Subscribe").filter(|h| !h.is_empty()),
        _ => None,
    };
    snake_case(handler.unwrap_or(id))
}
