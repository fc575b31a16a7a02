//! The contract as an AsyncAPI 3.0.0 document, with the AMQP 0.9.1 bindings (0.3.0).
//!
//! - a channel per exchange and publisher routing key (`is: routingKey`, the key as the
//!   address, its `{placeholders}` as parameters), with the bindings from the exchange that
//!   key may take, which the AMQP binding cannot express, as `x-warren-bindings` (each
//!   destination with its routing key and arguments); and one with no address listing the
//!   bindings no such key takes, or every binding of an exchange nobody here publishes to;
//! - a channel per declared queue (`is: queue`) with every message that may arrive in it
//!   (its consumers', those the contract's publishers and rpc callers route there, those
//!   dead-lettered into it), and warren's retry and dead-letter policy as `x-warren-retry`
//!   and `x-warren-dead-letter` (wait queues are part of the retry policy, not channels);
//! - a `send` operation per publisher, a `receive` operation per consumer;
//! - per rpc (request/reply): a `send` operation on its requests' exchange channel and a
//!   `receive` operation for its server on its queue's channel, both with a `reply` on a
//!   channel of its own with no address (RabbitMQ's direct reply-to names the caller's
//!   channel at run time; the reply's address is the request's `replyTo`) carrying the
//!   response and the declared errors; the timeout and the errors by code as `x-warren-rpc`;
//! - `components.messages`, each payload and headers schema a `$ref` into
//!   `components.schemas`, which holds every definition of the contract's schemas once, each
//!   `$ref` between them pointing there too: a `$ref` resolves against the whole document,
//!   so it must name a place in it (the bundle's own `#/$defs/…` do not exist in the
//!   document, and the official parser refuses the document over them). The schemas are
//!   plain schema objects, AsyncAPI's default format, which every AsyncAPI tool reads
//!   (modelina drops `required` from a payload wrapped as a JSON Schema 2020-12
//!   multi-format schema): warren's bundles are JSON Schema 2020-12, whose common keywords
//!   mean what they mean in AsyncAPI's draft-07 dialect, and the few that draft-07 lacks
//!   (`prefixItems`, `dependentRequired`, `unevaluatedProperties`…) are kept for the tools
//!   that know them.
//!
//! Keys are made from names (ASCII letters, digits, `.`, `-`, `_`; the rest `_`, with a
//! suffix when two collide); the names themselves are kept as plain-string values
//! (`address`, `title`, `name`, the bindings), never in a `description`, which AsyncAPI
//! tools render as Markdown: a name cannot inject markup. A message's own `description` is
//! the contract author's documentation and is passed through. Maps are written in a fixed
//! order, so the same contract always gives the same bytes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use warren_model::{ArgValue, DeliveryLimit, DurationLabel, Exhausted, Retry};

use warren_codegen::Routes;
pub use warren_codegen::contract::Contact;
use warren_codegen::contract::{
    Consumer, Contract, DEFAULT_CONTENT_TYPE, Destination, KeyTemplate, Publisher, Queue, Rpc,
};

use super::{ExchangeView, Ids, Ownership, Scope};

/// Where the document keeps the contract's schema definitions.
const SCHEMAS: &str = "#/components/schemas/";
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
    /// `info.contact`: who owns the contract, when it says.
    pub contact: Option<Contact>,
}

/// The version of a contract that does not say which it is.
pub const DEFAULT_VERSION: &str = "1.0.0";

impl Info {
    /// What `contract`'s own `info:` says, each field it leaves out defaulted: the title to
    /// `untitled` (the CLI gives the contract's folder name), the version to
    /// [`DEFAULT_VERSION`].
    pub fn of(contract: &Contract, untitled: &str) -> Self {
        let info = &contract.info;
        Self {
            title: info.title.clone().unwrap_or_else(|| untitled.to_owned()),
            version: info
                .version
                .clone()
                .unwrap_or_else(|| DEFAULT_VERSION.to_owned()),
            description: info.description.clone(),
            contact: info.contact.clone(),
        }
    }
}

/// The AsyncAPI 3.0.0 document of `contract`.
pub fn document(contract: &Contract, info: &Info) -> Value {
    let scope = Scope::of(contract);
    let mut writer = Writer::new(contract);
    for rpc in contract.rpcs.values() {
        writer.reply_channel(rpc);
    }
    let senders = senders(contract);
    for (name, view) in &scope.exchanges {
        writer.exchange_channels(name, view, senders.get(name.as_str()));
    }
    for queue in &scope.queues {
        writer.queue_channel(queue);
    }
    writer.finish(info)
}

/// The document as it is written: ids are given in the order channels and operations are
/// written, so that order is part of the output's stability.
struct Writer<'a> {
    contract: &'a Contract,
    ids: Ids,
    /// Each message's id under `components.messages`.
    message_ids: BTreeMap<&'a str, String>,
    channels: Map<String, Value>,
    operations: Map<String, Value>,
    /// Each rpc's `reply` object, shared by its send and its receive operation.
    replies: BTreeMap<&'a str, Value>,
    /// Where the contract's messages go, offline.
    routes: Routes,
    /// The messages that may arrive in each declared queue: routed there by a publisher or
    /// an rpc caller of the contract, or dead-lettered there from a queue they arrive in.
    arriving: BTreeMap<String, BTreeSet<&'a str>>,
}

/// Who sends to each exchange, by routing key as written: publishers and rpc callers.
type Senders<'a> = BTreeMap<&'a str, BTreeMap<&'a str, Vec<Sender<'a>>>>;

/// The senders of `contract`, by exchange and routing key.
fn senders<'a>(contract: &'a Contract) -> Senders<'a> {
    let mut senders: Senders<'a> = BTreeMap::new();
    let mut add = |exchange: &'a str, key: &'a str, sender| {
        senders
            .entry(exchange)
            .or_default()
            .entry(key)
            .or_default()
            .push(sender);
    };
    for publisher in contract.publishers.values() {
        add(
            &publisher.publication.exchange,
            &publisher.publication.routing_key,
            Sender::Publisher(publisher),
        );
    }
    for rpc in contract.rpcs.values() {
        add(
            &rpc.target.exchange,
            &rpc.target.routing_key,
            Sender::Rpc(rpc),
        );
    }
    senders
}

/// The messages that may arrive in each declared queue of `contract`: where its publishers'
/// and rpc callers' routes end, then where each such queue dead-letters them (with its
/// dead-letter key, or the key they were sent with), and where the consumers' own messages
/// are dead-lettered from the queues they consume.
fn arriving<'a>(contract: &'a Contract, routes: &Routes) -> BTreeMap<String, BTreeSet<&'a str>> {
    let mut arriving: BTreeMap<String, BTreeSet<&'a str>> = BTreeMap::new();
    // Each message with the key it travels with; a consumer's own message may come from
    // outside the contract, with a key nobody here knows.
    let mut sent: Vec<(&'a str, Option<&'a KeyTemplate>, BTreeSet<String>)> = Vec::new();
    for publisher in contract.publishers.values() {
        let exchange = &publisher.publication.exchange;
        let queues = routes.queues(exchange, &publisher.routing_key);
        sent.push((&publisher.message, Some(&publisher.routing_key), queues));
    }
    for rpc in contract.rpcs.values() {
        let queues = routes.queues(&rpc.target.exchange, &rpc.routing_key);
        sent.push((&rpc.request, Some(&rpc.routing_key), queues));
    }
    let consumed = contract
        .consumers
        .values()
        .flat_map(|c| (c.messages.iter()).map(|m| (m.message.as_str(), &c.spec.queue)))
        .chain(
            contract
                .rpcs
                .values()
                .map(|r| (r.request.as_str(), &r.server.spec.queue)),
        );
    for (message, queue) in consumed {
        sent.push((message, None, BTreeSet::from([queue.clone()])));
    }
    for (message, key, queues) in &sent {
        for queue in queues {
            arriving.entry(queue.clone()).or_default().insert(message);
            let Some(dead_letter) = contract
                .topology
                .queue(queue)
                .and_then(|q| q.dead_letter.as_ref())
            else {
                continue;
            };
            let dead_key = dead_letter.routing_key.as_deref().map(KeyTemplate::literal);
            let Some(dead_key) = dead_key.as_ref().or(*key) else {
                continue;
            };
            for target in routes.queues(&dead_letter.exchange, dead_key) {
                arriving.entry(target).or_default().insert(message);
            }
        }
    }
    arriving
}

impl<'a> Writer<'a> {
    fn new(contract: &'a Contract) -> Self {
        let mut ids = Ids::default();
        let message_ids = contract
            .messages
            .keys()
            .map(|name| (name.as_str(), ids.id("", name)))
            .collect();
        let routes = Routes::of(contract);
        let arriving = arriving(contract, &routes);
        Self {
            contract,
            ids,
            message_ids,
            channels: Map::new(),
            operations: Map::new(),
            replies: BTreeMap::new(),
            routes,
            arriving,
        }
    }

    /// `message`'s id and a `$ref` to it in `components.messages`.
    fn message_ref(&self, message: &str) -> Option<(String, Value)> {
        let id = self.message_ids.get(message)?;
        let reference = json!({ "$ref": format!("#/components/messages/{id}") });
        Some((id.clone(), reference))
    }

    /// An rpc's reply channel, with no address (direct reply-to names the caller's channel
    /// at run time), carrying its response and declared errors.
    fn reply_channel(&mut self, rpc: &'a Rpc) {
        let channel_id = self.ids.id("reply.", &rpc.name);
        let mut messages = Map::new();
        let mut references = Vec::new();
        let answers = std::iter::once(&rpc.response).chain(rpc.errors.values());
        for message in answers {
            if let Some((id, reference)) = self.message_ref(message)
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
        self.channels
            .insert(channel_id.clone(), Value::Object(channel));
        self.replies.insert(
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

    /// An exchange's channels: one per routing key its `senders` use, and one with no
    /// address for the bindings none of those keys takes (all of them when nobody here
    /// sends to the exchange), so that every binding is in the document.
    fn exchange_channels(
        &mut self,
        name: &str,
        view: &ExchangeView,
        senders: Option<&BTreeMap<&str, Vec<Sender<'a>>>>,
    ) {
        let extras = self.exchange_extras(name, view);
        let label = if name.is_empty() { "default" } else { name };
        let bound = self.contract.topology.bindings.iter();
        let mut untaken: BTreeSet<usize> =
            (0..bound.filter(|b| b.exchange == name).count()).collect();
        for (key, senders) in senders.into_iter().flatten() {
            let channel_id = self.ids.id("exchange.", &format!("{name}/{key}"));
            let mut channel = self.key_channel(label, key, senders);
            channel.extend(extras.clone());
            let taken: BTreeSet<usize> = senders
                .first()
                .and_then(|sender| self.routes.bindings_taken(name, sender.routing_key()))
                .into_iter()
                .flatten()
                .collect();
            untaken.retain(|i| !taken.contains(i));
            if let Some(bindings) = self.bindings_listed(name, &taken) {
                channel.insert("x-warren-bindings".into(), bindings);
            }
            for sender in senders {
                self.send_operation(&channel_id, sender);
            }
            self.channels.insert(channel_id, Value::Object(channel));
        }
        if senders.is_some() && untaken.is_empty() {
            return;
        }
        let mut channel = Map::new();
        channel.insert("address".into(), Value::Null);
        let title = if senders.is_some() {
            format!("exchange {label}, other routing keys")
        } else {
            format!("exchange {label}")
        };
        channel.insert("title".into(), json!(title));
        channel.extend(extras);
        if let Some(bindings) = self.bindings_listed(name, &untaken) {
            channel.insert("x-warren-bindings".into(), bindings);
        }
        let channel_id = self.ids.id("exchange.", name);
        self.channels.insert(channel_id, Value::Object(channel));
    }

    /// What every channel of an exchange carries: its AMQP binding, its name, whether it is
    /// external, and the bindings from it (which the AMQP binding cannot express).
    fn exchange_extras(&self, name: &str, view: &ExchangeView) -> Map<String, Value> {
        let mut exchange = Map::new();
        exchange.insert("name".into(), json!(name));
        let kind = match view.ownership {
            Ownership::Default => Some("default"),
            _ => view.kind.map(|k| k.as_str()),
        };
        if let Some(kind) = kind {
            exchange.insert("type".into(), json!(kind));
        }
        if let Some(declared) = self.contract.topology.exchange(name) {
            exchange.insert("durable".into(), json!(declared.durable));
            exchange.insert("autoDelete".into(), json!(declared.auto_delete));
        }
        exchange.insert("vhost".into(), json!("/"));
        let amqp = json!({
            "is": "routingKey",
            "exchange": exchange,
            "bindingVersion": AMQP_BINDING_VERSION,
        });
        let mut extras = Map::new();
        extras.insert("bindings".into(), json!({ "amqp": amqp }));
        extras.insert("x-warren-exchange".into(), json!(name));
        if view.ownership == Ownership::External {
            extras.insert("x-warren-external".into(), json!(true));
        }
        extras
    }

    /// The bindings from `exchange` at `positions` among its bindings, as
    /// `x-warren-bindings` lists them (the AMQP binding cannot express them): each
    /// destination with its routing key and arguments as declared, so that `warren import
    /// asyncapi` reads them back exactly. `None` for no bindings.
    fn bindings_listed(&self, exchange: &str, positions: &BTreeSet<usize>) -> Option<Value> {
        let bindings: Vec<Value> = self
            .contract
            .topology
            .bindings
            .iter()
            .filter(|b| b.exchange == exchange)
            .enumerate()
            .filter(|(i, _)| positions.contains(i))
            .map(|(_, b)| {
                let (kind, to) = match &b.destination {
                    Destination::Queue(q) => ("queue", q),
                    Destination::Exchange(e) => ("exchange", e),
                };
                let mut binding = Map::new();
                binding.insert(kind.into(), json!(to));
                if !b.routing_key.is_empty() {
                    binding.insert("routingKey".into(), json!(b.routing_key));
                }
                if !b.arguments.is_empty() {
                    let arguments: Map<String, Value> = b
                        .arguments
                        .iter()
                        .map(|(name, value)| (name.clone(), argument(value)))
                        .collect();
                    binding.insert("arguments".into(), Value::Object(arguments));
                }
                Value::Object(binding)
            })
            .collect();
        (!bindings.is_empty()).then_some(Value::Array(bindings))
    }

    /// The channel of one routing key of exchange `label`: its address, the messages its
    /// `senders` send, and its `{placeholders}` as parameters.
    fn key_channel(&self, label: &str, key: &str, senders: &[Sender<'_>]) -> Map<String, Value> {
        let mut messages = Map::new();
        for sender in senders {
            if let Some((id, reference)) = self.message_ref(sender.message()) {
                messages.insert(id, reference);
            }
        }
        let mut channel = Map::new();
        channel.insert("address".into(), json!(key));
        channel.insert(
            "title".into(),
            json!(format!("exchange {label}, routing key {key}")),
        );
        channel.insert("messages".into(), Value::Object(messages));
        let placeholders: Vec<&str> = senders
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
        channel
    }

    /// A publisher's or an rpc caller's `send` operation on `channel_id`.
    fn send_operation(&mut self, channel_id: &str, sender: &Sender<'_>) {
        let Some(id) = self.message_ids.get(sender.message()) else {
            return;
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
                if let Some(compression) = publisher.publication.compression {
                    operation.insert("x-warren-compression".into(), json!(compression.as_str()));
                }
                if publisher.external_consumers {
                    operation.insert("x-warren-external-consumers".into(), json!(true));
                }
                if let Some(pointer) = &publisher.publication.ordering_key {
                    operation.insert("x-warren-ordering-key".into(), json!(pointer));
                }
            }
            Sender::Rpc(rpc) => self.rpc_extras(&mut operation, rpc),
        }
        // A publisher and an rpc may share a name; their operations may not.
        let prefix = match sender {
            Sender::Publisher(_) => "send.",
            Sender::Rpc(_) => "call.",
        };
        let operation_id = self.ids.id(prefix, sender.name());
        self.operations
            .insert(operation_id, Value::Object(operation));
    }

    /// What an rpc's operations carry beyond their messages: the reply, and the timeout and
    /// declared errors by code as `x-warren-rpc`.
    fn rpc_extras(&self, operation: &mut Map<String, Value>, rpc: &Rpc) {
        if let Some(reply) = self.replies.get(rpc.name.as_str()) {
            operation.insert("reply".into(), reply.clone());
        }
        operation.insert(
            "x-warren-rpc".into(),
            json!({ "timeout": DurationLabel(rpc.target.timeout).to_string(), "errors": rpc.errors }),
        );
    }

    /// A declared queue's channel, with its retry and dead-letter policy, and a `receive`
    /// operation for each of its consumers and rpc servers.
    fn queue_channel(&mut self, queue: &Queue) {
        let channel_id = self.ids.id("queue.", &queue.name);
        let contract = self.contract;
        // An rpc's server consumes its queue as a consumer does, answering each request.
        let servers: Vec<&Rpc> = contract
            .rpcs
            .values()
            .filter(|r| r.server.spec.queue == queue.name)
            .collect();
        let consumers: Vec<&Consumer> = contract
            .consumers
            .values()
            .filter(|c| c.spec.queue == queue.name)
            .chain(servers.iter().map(|r| &r.server))
            .collect();
        let consumed =
            (consumers.iter()).flat_map(|c| c.messages.iter().map(|m| m.message.as_str()));
        let arriving = self
            .arriving
            .get(&queue.name)
            .into_iter()
            .flatten()
            .copied();
        let mut messages = Map::new();
        for message in consumed.chain(arriving) {
            if let Some((id, reference)) = self.message_ref(message) {
                messages.insert(id, reference);
            }
        }
        let mut channel = Map::new();
        channel.insert("address".into(), json!(queue.name));
        channel.insert("title".into(), json!(format!("queue {}", queue.name)));
        channel.insert("messages".into(), Value::Object(messages));
        channel.extend(queue_extras(queue));
        for consumer in consumers {
            let server = servers
                .iter()
                .find(|r| r.name == consumer.spec.name)
                .copied();
            self.receive_operation(&channel_id, consumer, server);
        }
        self.channels.insert(channel_id, Value::Object(channel));
    }

    /// A consumer's (or an rpc `server`'s) `receive` operation on `channel_id`.
    fn receive_operation(&mut self, channel_id: &str, consumer: &Consumer, server: Option<&Rpc>) {
        let ids: Vec<&String> = (consumer.messages.iter())
            .filter_map(|m| self.message_ids.get(m.message.as_str()))
            .collect();
        if ids.is_empty() {
            return;
        }
        let mut operation = Map::new();
        operation.insert("action".into(), json!("receive"));
        operation.insert(
            "channel".into(),
            json!({ "$ref": format!("#/channels/{channel_id}") }),
        );
        operation.insert("title".into(), json!(consumer.spec.name));
        let references: Vec<Value> = (ids.iter())
            .map(|id| json!({ "$ref": format!("#/channels/{channel_id}/messages/{id}") }))
            .collect();
        operation.insert("messages".into(), Value::Array(references));
        operation.insert(
            "bindings".into(),
            json!({ "amqp": { "ack": true, "bindingVersion": AMQP_BINDING_VERSION } }),
        );
        operation.insert("x-warren-consumer".into(), consumer_settings(consumer));
        if let Some(rpc) = server {
            self.rpc_extras(&mut operation, rpc);
        }
        // A consumer and an rpc may share a name; their operations may not.
        let prefix = if server.is_some() {
            "serve."
        } else {
            "receive."
        };
        let operation_id = self.ids.id(prefix, &consumer.spec.name);
        self.operations
            .insert(operation_id, Value::Object(operation));
    }

    /// The whole document: `info`, the channels and operations written, and every message
    /// under `components.messages`.
    fn finish(self, info: &Info) -> Value {
        let mut info_value = Map::new();
        info_value.insert("title".into(), json!(info.title));
        info_value.insert("version".into(), json!(info.version));
        if let Some(description) = &info.description {
            info_value.insert("description".into(), json!(description));
        }
        if let Some(contact) = &info.contact {
            let fields = [
                ("name", &contact.name),
                ("email", &contact.email),
                ("url", &contact.url),
            ];
            let contact: Map<String, Value> = fields
                .into_iter()
                .filter_map(|(key, value)| Some((key.to_owned(), json!(value.as_deref()?))))
                .collect();
            info_value.insert("contact".into(), Value::Object(contact));
        }
        json!({
            "asyncapi": "3.0.0",
            "info": info_value,
            "defaultContentType": DEFAULT_CONTENT_TYPE,
            "channels": self.channels,
            "operations": self.operations,
            "components": {
                "messages": self.component_messages(),
                "schemas": self.contract.schemas.definitions_under(SCHEMAS),
            },
        })
    }

    /// Every message with its payload and headers schemas, by id.
    fn component_messages(&self) -> Map<String, Value> {
        let mut messages = Map::new();
        for (name, message) in &self.contract.messages {
            let Some(id) = self.message_ids.get(name.as_str()) else {
                continue;
            };
            let mut value = Map::new();
            value.insert("name".into(), json!(name));
            value.insert("title".into(), json!(message.payload.type_name));
            if let Some(description) = &message.description {
                value.insert("description".into(), json!(description));
            }
            value.insert("contentType".into(), json!(message.content_type));
            let schema = |type_name: &str| json!({ "$ref": format!("{SCHEMAS}{type_name}") });
            if let Some(headers) = &message.headers {
                value.insert("headers".into(), schema(&headers.type_name));
            }
            value.insert("payload".into(), schema(&message.payload.type_name));
            if message.external_producers {
                value.insert("x-warren-external-producers".into(), json!(true));
            }
            messages.insert(id.clone(), Value::Object(value));
        }
        messages
    }
}

/// What a queue's channel carries besides its messages: its AMQP binding, type, retry,
/// dead-letter and poison policy.
fn queue_extras(queue: &Queue) -> Map<String, Value> {
    let mut extras = Map::new();
    extras.insert(
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
    extras.insert("x-warren-queue-type".into(), json!(queue.kind.as_str()));
    extras.insert("x-warren-retry".into(), retry(queue));
    if let Some(dead_letter) = &queue.dead_letter {
        let mut value = Map::new();
        value.insert("exchange".into(), json!(dead_letter.exchange));
        if let Some(key) = &dead_letter.routing_key {
            value.insert("routingKey".into(), json!(key));
        }
        if !dead_letter.queue_argument {
            value.insert("queueArgument".into(), json!(false));
        }
        extras.insert("x-warren-dead-letter".into(), Value::Object(value));
    }
    extras.insert("x-warren-on-poison".into(), json!(queue.on_poison.as_str()));
    extras
}

/// A binding argument as its JSON value.
fn argument(value: &ArgValue) -> Value {
    match value {
        ArgValue::Bool(b) => json!(b),
        ArgValue::Int(i) => json!(i),
        ArgValue::Float(f) => json!(f),
        ArgValue::String(s) => json!(s),
    }
}

/// A consumer's settings as `x-warren-consumer`.
fn consumer_settings(consumer: &Consumer) -> Value {
    let mut settings = Map::new();
    settings.insert("prefetch".into(), json!(consumer.spec.prefetch));
    settings.insert("concurrency".into(), json!(consumer.spec.concurrency));
    if let Some(batch) = &consumer.batch {
        settings.insert(
            "batch".into(),
            json!({ "size": batch.size, "timeout": DurationLabel(batch.timeout).to_string() }),
        );
    }
    if let Some(breaker) = &consumer.spec.circuit_breaker {
        settings.insert(
            "circuitBreaker".into(),
            json!({ "failures": breaker.failures, "coolDown": DurationLabel(breaker.cool_down).to_string() }),
        );
    }
    if consumer.dead_letters {
        settings.insert("deadLetters".into(), json!(true));
    }
    Value::Object(settings)
}

/// What sends to an exchange channel: a publisher, or an rpc's caller.
enum Sender<'a> {
    Publisher(&'a Publisher),
    Rpc(&'a Rpc),
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

    fn routing_key(&self) -> &KeyTemplate {
        match self {
            Self::Publisher(p) => &p.routing_key,
            Self::Rpc(r) => &r.routing_key,
        }
    }
}

/// A queue's retry policy as `x-warren-retry`: the mode and its settings, for ttl-backoff
/// each wait tier's delay, `deliveryLimit: broker-default` on a queue that declares none,
/// and `countsFrom`, the other stacks' retry copies whose counts are believed.
fn retry(queue: &Queue) -> Value {
    let mut value = retry_policy(queue);
    let Value::Object(settings) = &mut value else {
        return value;
    };
    if queue.delivery_limit == DeliveryLimit::BrokerDefault {
        settings.insert("deliveryLimit".into(), json!(DeliveryLimit::BROKER_DEFAULT));
    }
    if !queue.retry_counts_from.is_empty() {
        let sources: Vec<Value> = queue
            .retry_counts_from
            .iter()
            .map(|s| json!({ "exchange": s.exchange, "header": s.header }))
            .collect();
        settings.insert("countsFrom".into(), Value::Array(sources));
    }
    value
}

/// The policy part of [`retry`]: the mode and its settings.
fn retry_policy(queue: &Queue) -> Value {
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
