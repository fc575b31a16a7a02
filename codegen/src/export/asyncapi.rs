//! The contract as an AsyncAPI 3.0.0 document, with the AMQP 0.9.1 bindings (0.3.0).
//!
//! - a channel per exchange and publisher routing key (`is: routingKey`, the key as the
//!   address, its `{placeholders}` as parameters), or one with no address for an exchange
//!   nobody here publishes to; the bindings from it, which the AMQP binding cannot express,
//!   as `x-warren-bindings`;
//! - a channel per declared queue (`is: queue`), with warren's retry and dead-letter policy
//!   as `x-warren-retry` and `x-warren-dead-letter` (wait queues are part of the retry
//!   policy, not channels);
//! - a `send` operation per publisher, a `receive` operation per consumer;
//! - per rpc (request/reply): a `send` operation on its requests' exchange channel and a
//!   `receive` operation for its server on its queue's channel, both with a `reply` on a
//!   channel of its own with no address (RabbitMQ's direct reply-to names the caller's
//!   channel at run time; the reply's address is the request's `replyTo`) carrying the
//!   response and the declared errors; the timeout and the errors by code as `x-warren-rpc`;
//! - `components.messages`, each payload and headers schema a multi-format schema
//!   (`schemaFormat: application/schema+json;version=draft-2020-12`), since warren's bundled
//!   schemas are JSON Schema 2020-12 (`$defs`), not AsyncAPI's draft-07 dialect.
//!
//! Keys are made from names (ASCII letters, digits, `.`, `-`, `_`; the rest `_`, with a
//! suffix when two collide); the names themselves are kept as plain-string values
//! (`address`, `title`, `name`, the bindings), never in a `description`, which AsyncAPI
//! tools render as Markdown: a name cannot inject markup. A message's own `description` is
//! the contract author's documentation and is passed through. Maps are written in a fixed
//! order, so the same contract always gives the same bytes.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use warren_model::{DurationLabel, Exhausted, Retry};

use crate::model::{Contract, Queue};

use super::{Ids, Ownership, Scope, binding_label};

/// The `schemaFormat` of every payload and headers schema.
pub const SCHEMA_FORMAT: &str = "application/schema+json;version=draft-2020-12";
/// The AMQP binding version written.
pub const AMQP_BINDING_VERSION: &str = "0.3.0";

/// The document's `info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// `info.title`.
    pub title: String,
    /// `info.version`: the API's version, not AsyncAPI's.
    pub version: String,
    /// `info.description`, when given.
    pub description: Option<String>,
}

/// The AsyncAPI 3.0.0 document of `contract`.
pub fn document(contract: &Contract, info: &Info) -> Value {
    let scope = Scope::of(contract);
    let mut ids = Ids::default();
    let message_ids: BTreeMap<&str, String> = contract
        .messages
        .keys()
        .map(|name| (name.as_str(), ids.id("", name)))
        .collect();
    let message_ref = |name: &str| {
        message_ids
            .get(name)
            .map(|id| json!({ "$ref": format!("#/components/messages/{id}") }))
    };

    let mut channels = Map::new();
    let mut operations = Map::new();

    // Reply channels: one per rpc, with no address (direct reply-to names the caller's
    // channel at run time), carrying its response and declared errors.
    let mut replies: BTreeMap<&str, Value> = BTreeMap::new();
    for rpc in contract.rpcs.values() {
        let channel_id = ids.id("reply.", &rpc.name);
        let mut messages = Map::new();
        let mut references = Vec::new();
        let answers = std::iter::once(&rpc.response).chain(rpc.errors.values());
        for message in answers {
            if let (Some(id), Some(reference)) =
                (message_ids.get(message.as_str()), message_ref(message))
                && messages.insert(id.clone(), reference).is_none()
            {
                references
                    .push(json!({ "$ref": format!("#/channels/{channel_id}/messages/{id}") }));
            }
        }
        let mut channel = Map::new();
        channel.insert("address".into(), Value::Null);
        channel.insert(
            "title".into(),
            json!(format!("replies of rpc {}", rpc.name)),
        );
        channel.insert("messages".into(), Value::Object(messages));
        channels.insert(channel_id.clone(), Value::Object(channel));
        replies.insert(
            rpc.name.as_str(),
            json!({
                "address": {
                    "location": "$message.header#/replyTo",
                    "description": "RabbitMQ's direct reply-to: the request's reply-to property names the caller's channel.",
                },
                "channel": { "$ref": format!("#/channels/{channel_id}") },
                "messages": references,
            }),
        );
    }
    // What an rpc is beyond its messages: its timeout and its declared errors by code.
    let rpc_extension = |rpc: &crate::model::Rpc| {
        json!({
            "timeout": rpc.timeout.to_string(),
            "errors": rpc.errors,
        })
    };

    // Exchange channels: one per (exchange, routing key) of a publisher or an rpc's requests.
    let mut keys: BTreeMap<&str, BTreeMap<&str, Vec<Sender<'_>>>> = BTreeMap::new();
    for publisher in contract.publishers.values() {
        keys.entry(publisher.exchange.as_str())
            .or_default()
            .entry(publisher.routing_key_text.as_str())
            .or_default()
            .push(Sender::Publisher(publisher));
    }
    for rpc in contract.rpcs.values() {
        keys.entry(rpc.target.exchange.as_str())
            .or_default()
            .entry(rpc.target.routing_key_text.as_str())
            .or_default()
            .push(Sender::Rpc(rpc));
    }
    for (name, view) in &scope.exchanges {
        let exchange_label = if name.is_empty() {
            "default"
        } else {
            name.as_str()
        };
        let mut amqp = Map::new();
        amqp.insert("is".into(), json!("routingKey"));
        let mut exchange = Map::new();
        exchange.insert("name".into(), json!(name));
        let kind = match view.ownership {
            Ownership::Default => Some("default"),
            _ => view.kind.map(|k| k.as_str()),
        };
        if let Some(kind) = kind {
            exchange.insert("type".into(), json!(kind));
        }
        if let Some(declared) = contract.topology.exchange(name) {
            exchange.insert("durable".into(), json!(declared.durable));
            exchange.insert("autoDelete".into(), json!(declared.auto_delete));
        }
        exchange.insert("vhost".into(), json!("/"));
        amqp.insert("exchange".into(), Value::Object(exchange));
        amqp.insert("bindingVersion".into(), json!(AMQP_BINDING_VERSION));
        let bindings: Vec<Value> = contract
            .topology
            .bindings
            .iter()
            .filter(|b| &b.exchange == name)
            .map(|b| {
                let (kind, to) = match &b.destination {
                    crate::model::Destination::Queue(q) => ("queue", q),
                    crate::model::Destination::Exchange(e) => ("exchange", e),
                };
                let mut binding = Map::new();
                binding.insert(kind.into(), json!(to));
                if let Some(label) = binding_label(b) {
                    binding.insert("match".into(), json!(label));
                }
                Value::Object(binding)
            })
            .collect();
        let extras = |channel: &mut Map<String, Value>| {
            channel.insert("bindings".into(), json!({ "amqp": amqp.clone() }));
            channel.insert("x-warren-exchange".into(), json!(name));
            if view.ownership == Ownership::External {
                channel.insert("x-warren-external".into(), json!(true));
            }
            if !bindings.is_empty() {
                channel.insert("x-warren-bindings".into(), Value::Array(bindings.clone()));
            }
        };
        let Some(by_key) = keys.get(name.as_str()) else {
            let mut channel = Map::new();
            channel.insert("address".into(), Value::Null);
            channel.insert("title".into(), json!(format!("exchange {exchange_label}")));
            extras(&mut channel);
            channels.insert(ids.id("exchange.", name), Value::Object(channel));
            continue;
        };
        for (key, publishers) in by_key {
            let channel_id = ids.id("exchange.", &format!("{name}/{key}"));
            let mut messages = Map::new();
            for publisher in publishers {
                if let (Some(id), Some(reference)) = (
                    message_ids.get(publisher.message()),
                    message_ref(publisher.message()),
                ) {
                    messages.insert(id.clone(), reference);
                }
            }
            let mut channel = Map::new();
            channel.insert("address".into(), json!(key));
            channel.insert(
                "title".into(),
                json!(format!("exchange {exchange_label}, routing key {key}")),
            );
            channel.insert("messages".into(), Value::Object(messages));
            let placeholders: Vec<&str> = publishers
                .first()
                .map(|p| p.routing_key().placeholders().collect())
                .unwrap_or_default();
            if !placeholders.is_empty() {
                let parameters: Map<String, Value> = placeholders
                    .iter()
                    .map(|p| {
                        (
                            (*p).to_owned(),
                            json!({ "description": "Routing key word(s) filled in when publishing." }),
                        )
                    })
                    .collect();
                channel.insert("parameters".into(), Value::Object(parameters));
            }
            extras(&mut channel);
            for sender in publishers {
                let Some(id) = message_ids.get(sender.message()) else {
                    continue;
                };
                let mut operation = Map::new();
                operation.insert("action".into(), json!("send"));
                operation.insert(
                    "channel".into(),
                    json!({ "$ref": format!("#/channels/{channel_id}") }),
                );
                operation.insert("title".into(), json!(sender.name()));
                operation.insert(
                    "messages".into(),
                    json!([{ "$ref": format!("#/channels/{channel_id}/messages/{id}") }]),
                );
                operation.insert(
                    "bindings".into(),
                    json!({ "amqp": { "deliveryMode": 2, "mandatory": true, "bindingVersion": AMQP_BINDING_VERSION } }),
                );
                match sender {
                    Sender::Publisher(publisher) => {
                        if let Some(compression) = publisher.compression {
                            operation.insert("x-warren-compression".into(), json!(compression));
                        }
                    }
                    Sender::Rpc(rpc) => {
                        if let Some(reply) = replies.get(rpc.name.as_str()) {
                            operation.insert("reply".into(), reply.clone());
                        }
                        operation.insert("x-warren-rpc".into(), rpc_extension(rpc));
                    }
                }
                operations.insert(ids.id("send.", sender.name()), Value::Object(operation));
            }
            channels.insert(channel_id, Value::Object(channel));
        }
    }

    // Queue channels, with their consumers' receive operations.
    for queue in &scope.queues {
        let channel_id = ids.id("queue.", &queue.name);
        let consumers: Vec<_> = contract
            .consumers
            .values()
            .filter(|c| c.queue == queue.name)
            .collect();
        // An rpc's server consumes its queue as a consumer does, answering each request.
        let servers: Vec<&crate::model::Rpc> = contract
            .rpcs
            .values()
            .filter(|r| r.server.queue == queue.name)
            .collect();
        let consumers: Vec<&crate::model::Consumer> = consumers
            .into_iter()
            .chain(servers.iter().map(|r| &r.server))
            .collect();
        let mut messages = Map::new();
        for consumer in &consumers {
            if let (Some(id), Some(reference)) = (
                message_ids.get(consumer.message.as_str()),
                message_ref(&consumer.message),
            ) {
                messages.insert(id.clone(), reference);
            }
        }
        let mut channel = Map::new();
        channel.insert("address".into(), json!(queue.name));
        channel.insert("title".into(), json!(format!("queue {}", queue.name)));
        channel.insert("messages".into(), Value::Object(messages));
        channel.insert(
            "bindings".into(),
            json!({ "amqp": {
                "is": "queue",
                "queue": {
                    "name": queue.name,
                    "durable": queue.durable,
                    "exclusive": queue.exclusive,
                    "autoDelete": queue.auto_delete,
                    "vhost": "/",
                },
                "bindingVersion": AMQP_BINDING_VERSION,
            } }),
        );
        channel.insert("x-warren-queue-type".into(), json!(queue.kind.as_str()));
        channel.insert("x-warren-retry".into(), retry(queue));
        if let Some(dead_letter) = &queue.dead_letter {
            let mut value = Map::new();
            value.insert("exchange".into(), json!(dead_letter.exchange));
            if let Some(key) = &dead_letter.routing_key {
                value.insert("routingKey".into(), json!(key));
            }
            channel.insert("x-warren-dead-letter".into(), Value::Object(value));
        }
        channel.insert("x-warren-on-poison".into(), json!(queue.on_poison.as_str()));
        for consumer in &consumers {
            let Some(id) = message_ids.get(consumer.message.as_str()) else {
                continue;
            };
            let mut operation = Map::new();
            operation.insert("action".into(), json!("receive"));
            operation.insert(
                "channel".into(),
                json!({ "$ref": format!("#/channels/{channel_id}") }),
            );
            operation.insert("title".into(), json!(consumer.name));
            operation.insert(
                "messages".into(),
                json!([{ "$ref": format!("#/channels/{channel_id}/messages/{id}") }]),
            );
            operation.insert(
                "bindings".into(),
                json!({ "amqp": { "ack": true, "bindingVersion": AMQP_BINDING_VERSION } }),
            );
            let mut settings = Map::new();
            settings.insert("prefetch".into(), json!(consumer.prefetch));
            settings.insert("concurrency".into(), json!(consumer.concurrency));
            if let Some(batch) = &consumer.batch {
                settings.insert(
                    "batch".into(),
                    json!({ "size": batch.size, "timeout": batch.timeout.to_string() }),
                );
            }
            if let Some(breaker) = &consumer.circuit_breaker {
                settings.insert(
                    "circuitBreaker".into(),
                    json!({ "failures": breaker.failures, "coolDown": breaker.cool_down.to_string() }),
                );
            }
            if consumer.dead_letters {
                settings.insert("deadLetters".into(), json!(true));
            }
            operation.insert("x-warren-consumer".into(), Value::Object(settings));
            if let Some(rpc) = servers.iter().find(|r| r.name == consumer.name) {
                if let Some(reply) = replies.get(rpc.name.as_str()) {
                    operation.insert("reply".into(), reply.clone());
                }
                operation.insert("x-warren-rpc".into(), rpc_extension(rpc));
            }
            operations.insert(ids.id("receive.", &consumer.name), Value::Object(operation));
        }
        channels.insert(channel_id, Value::Object(channel));
    }

    let mut messages = Map::new();
    for (name, message) in &contract.messages {
        let Some(id) = message_ids.get(name.as_str()) else {
            continue;
        };
        let mut value = Map::new();
        value.insert("name".into(), json!(name));
        value.insert("title".into(), json!(message.payload.type_name));
        if let Some(description) = &message.description {
            value.insert("description".into(), json!(description));
        }
        value.insert("contentType".into(), json!(message.content_type));
        if let Some(headers) = &message.headers {
            value.insert(
                "headers".into(),
                json!({ "schemaFormat": SCHEMA_FORMAT, "schema": headers.schema }),
            );
        }
        value.insert(
            "payload".into(),
            json!({ "schemaFormat": SCHEMA_FORMAT, "schema": message.payload.schema }),
        );
        messages.insert(id.clone(), Value::Object(value));
    }

    let mut info_value = Map::new();
    info_value.insert("title".into(), json!(info.title));
    info_value.insert("version".into(), json!(info.version));
    if let Some(description) = &info.description {
        info_value.insert("description".into(), json!(description));
    }
    json!({
        "asyncapi": "3.0.0",
        "info": info_value,
        "defaultContentType": crate::model::DEFAULT_CONTENT_TYPE,
        "channels": channels,
        "operations": operations,
        "components": { "messages": messages },
    })
}

/// What sends to an exchange channel: a publisher, or an rpc's caller.
enum Sender<'a> {
    Publisher(&'a crate::model::Publisher),
    Rpc(&'a crate::model::Rpc),
}

impl Sender<'_> {
    fn name(&self) -> &str {
        match self {
            Self::Publisher(p) => &p.name,
            Self::Rpc(r) => &r.name,
        }
    }

    /// The message sent: an rpc's request.
    fn message(&self) -> &str {
        match self {
            Self::Publisher(p) => &p.message,
            Self::Rpc(r) => &r.request,
        }
    }

    fn routing_key(&self) -> &crate::model::KeyTemplate {
        match self {
            Self::Publisher(p) => &p.routing_key,
            Self::Rpc(r) => &r.target.routing_key,
        }
    }
}

/// A queue's retry policy as `x-warren-retry`: the mode and its settings, and for
/// ttl-backoff each wait tier's delay.
fn retry(queue: &Queue) -> Value {
    let exhausted = |e: Exhausted| json!(e.as_str());
    match &queue.retry {
        Retry::None => json!({ "mode": "none" }),
        Retry::ImmediateRequeue {
            max_retries,
            exhausted: e,
        } => {
            json!({ "mode": "immediate-requeue", "maxRetries": max_retries, "exhausted": exhausted(*e) })
        }
        Retry::TtlBackoff(backoff) => json!({
            "mode": "ttl-backoff",
            "maxRetries": backoff.max_retries,
            "initialDelay": DurationLabel(backoff.initial_delay).to_string(),
            "maxDelay": DurationLabel(backoff.max_delay).to_string(),
            "multiplier": backoff.multiplier,
            "jitter": backoff.jitter,
            "exhausted": exhausted(backoff.exhausted),
            "delays": (0..backoff.max_retries.min(warren_model::MAX_WAIT_TIERS as u32))
                .map(|attempt| DurationLabel(backoff.delay(attempt)).to_string())
                .collect::<Vec<_>>(),
            "waitQueues": backoff.tiers.iter().map(|t| json!({
                "name": t.queue,
                "delay": DurationLabel(t.delay).to_string(),
            })).collect::<Vec<_>>(),
        }),
        Retry::QuorumNative => {
            let mut value = Map::new();
            value.insert("mode".into(), json!("quorum-native"));
            if let Some(limit) = queue.quorum_delivery_limit() {
                value.insert("deliveryLimit".into(), json!(limit));
            }
            Value::Object(value)
        }
    }
}
