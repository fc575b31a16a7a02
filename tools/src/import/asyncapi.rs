//! An AsyncAPI 3.0 document with AMQP 0.9.1 bindings as a contract.
//!
//! What each part becomes:
//! - a channel bound `is: queue` declares its queue (`bindings.amqp.queue`), with warren's
//!   retry, dead-letter and poison policy from `x-warren-*` when the document has them; a
//!   queue whose type the document does not say is `classic`, what RabbitMQ gives a queue
//!   declared without one (other libraries' default);
//! - a channel bound `is: routingKey` declares its exchange (`bindings.amqp.exchange`,
//!   unless `x-warren-external` or the default exchange), and its `x-warren-bindings` are
//!   the exchange's bindings;
//! - `components.messages` are the messages (named by `name`, else after their payload
//!   schema, identical nameless ones merged: FastStream writes one per operation), and
//!   `components.schemas` their schema files;
//! - a `send` operation is a publisher (the channel's exchange, its address the routing
//!   key); a `receive` operation on a queue's channel a consumer, its `x-warren-consumer`
//!   the consumer's settings; FastStream's binding keys (`bindings.amqp.cc` of a receive
//!   operation) bind the queue to the exchange its channel id names (`queue:exchange:name`);
//! - a `send` and a `receive` operation with a `reply`, of one name, are an rpc: the caller's
//!   exchange and key, the server's queue, the reply's messages its response and errors
//!   (by code, from `x-warren-rpc`).
//!
//! Whatever has no place in a contract (servers, security, AMQP properties warren sets
//! itself) is a note, as is every guess. A publisher whose messages reach no queue of the
//! document is marked `external_consumers: true`, since its consumers are elsewhere.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use serde_json::{Map, Value};
use warren_codegen::syntax::{
    ArgumentValue, Binding, Contact, ContractFile, DeadLetter, Exchange, ExchangeKind, Exhausted,
    HeadersMatch, Info, Message, OnPoison, Queue, QueueKind, Retry, RetryCountSource, RetryMode,
};
use warren_model::{DeliveryLimit, headers};

use super::fields::{Fields, Notes, child, local_ref};
use super::schemas::{COMPONENT_SCHEMAS, SchemaFiles};
use super::{ImportError, Imported};

mod operations;

/// Why most of a document's documentation has no place in a contract.
const DOCUMENTATION: &str = "documentation the contract has no place for";
/// Why AsyncAPI's servers have none.
const SERVERS: &str =
    "a contract names no broker: the URL is given when a service starts (`AMQP_URL`)";

/// The contract `document` describes.
pub fn import(document: &Value) -> Result<Imported, ImportError> {
    let Value::Object(_) = document else {
        return Err(ImportError::NotAnObject);
    };
    let mut top = Fields::of(Some(document), "");
    let version = top.str("asyncapi").unwrap_or("none");
    if !version.starts_with("3.") {
        return Err(ImportError::Version {
            found: version.to_owned(),
        });
    }
    let mut reader = Reader::default();
    reader.contract.info = reader.info(top.object("info"));
    if let Some(content_type) = top.str("defaultContentType") {
        reader.default_content_type = content_type.to_owned();
    }
    if top.get("servers").is_some() {
        reader.notes.not_mapped("/servers", SERVERS);
    }
    let mut components = top.object("components");
    reader.schemas(&mut components);
    reader.messages(components.object("messages"));
    components.finish(&mut reader.notes, DOCUMENTATION);
    reader.channels(top.object("channels"));
    reader.operations(top.object("operations"));
    top.finish(&mut reader.notes, DOCUMENTATION);
    reader.rpcs();
    reader.settle_what_the_document_leaves_unsaid();
    Ok(Imported {
        contract: reader.contract,
        schemas: reader.files.files,
        notes: reader.notes.0,
    })
}

/// The import as it is read.
#[derive(Default)]
struct Reader {
    contract: ContractFile,
    notes: Notes,
    files: SchemaFiles,
    default_content_type: String,
    /// Each component message's contract name, by key.
    messages: BTreeMap<String, String>,
    /// Each channel, by id.
    channels: BTreeMap<String, Channel>,
    /// The two halves of each rpc, by name.
    rpc_parts: BTreeMap<String, RpcParts>,
    /// Publishers whose document says where their consumers are (`x-warren-external-consumers`).
    said_external: BTreeSet<String>,
    /// Each binding written, serialized: one listed twice is written once.
    bindings_written: BTreeSet<String>,
    /// The pointer of each publisher's operation and each queue's channel, for notes.
    publisher_at: BTreeMap<String, String>,
    queue_at: BTreeMap<String, String>,
}

/// A channel as operations use it.
#[derive(Debug, Clone, Default)]
struct Channel {
    /// The queue of a queue channel.
    queue: Option<String>,
    /// The exchange of a routing-key channel (`""` the default exchange), and its address.
    exchange: Option<String>,
    address: Option<String>,
    /// The contract message of each of the channel's messages, by id.
    messages: BTreeMap<String, String>,
}

/// What the operations of an rpc say.
#[derive(Debug, Default)]
struct RpcParts {
    pointer: String,
    caller: Option<Target>,
    server_queue: Option<String>,
    server_settings: Option<Value>,
    request: Option<String>,
    replies: Vec<String>,
    extras: Option<Value>,
}

/// Where a send operation publishes.
#[derive(Debug, Clone)]
struct Target {
    exchange: String,
    routing_key: Option<String>,
}

impl Reader {
    fn info(&mut self, mut info: Fields<'_>) -> Option<Info> {
        let text = |fields: &mut Fields<'_>, key| fields.str(key).map(str::to_owned);
        let mut contact = info.object("contact");
        let contact = Contact {
            name: text(&mut contact, "name"),
            email: text(&mut contact, "email"),
            url: text(&mut contact, "url"),
        };
        let contact = (contact != Contact::default()).then_some(contact);
        let read = Info {
            title: text(&mut info, "title"),
            version: text(&mut info, "version"),
            description: text(&mut info, "description"),
            contact,
        };
        info.finish(&mut self.notes, DOCUMENTATION);
        (read != Info::default()).then_some(read)
    }

    /// The schema files: a file for each schema a message names directly.
    fn schemas(&mut self, components: &mut Fields<'_>) {
        let mut roots = BTreeSet::new();
        let messages = components.get("messages").and_then(Value::as_object);
        for message in messages.into_iter().flat_map(Map::values) {
            for part in ["payload", "headers"] {
                let schema = message.get(part).map(unwrapped);
                if let Some(key) = schema.and_then(component_schema) {
                    roots.insert(key);
                }
            }
        }
        let pointer = components.at("schemas");
        let schemas = components.get("schemas").and_then(Value::as_object);
        self.files = SchemaFiles::place(schemas, &roots, &pointer, &mut self.notes);
    }

    /// The contract's messages, from `components.messages`.
    fn messages(&mut self, messages: Fields<'_>) {
        let pointer = messages.pointer.clone();
        // Identical nameless messages are one contract message: FastStream writes one per
        // operation.
        let mut by_shape: BTreeMap<(String, Option<String>, Option<String>), String> =
            BTreeMap::new();
        for (key, value) in messages.entries() {
            let at = child(&pointer, key);
            let Some((name, message)) = self.message(key, value, &at) else {
                continue;
            };
            let shape = (
                message.payload.clone(),
                message.headers.clone(),
                message.content_type.clone(),
            );
            let name = match name {
                Some(name) => name,
                None => {
                    if let Some(existing) = by_shape.get(&shape) {
                        self.messages.insert(key.clone(), existing.clone());
                        continue;
                    }
                    let stem = message.payload.rsplit('/').next().unwrap_or(key);
                    let stem = stem.trim_end_matches(".json");
                    self.unused_name(&snake_case(stem))
                }
            };
            by_shape.insert(shape, name.clone());
            self.messages.insert(key.clone(), name.clone());
            self.contract.messages.insert(name, message);
        }
    }

    /// A message name like `wanted` that no message has yet.
    fn unused_name(&self, wanted: &str) -> String {
        unused_key(&self.contract.messages, wanted, '_')
    }

    /// One component message: its `name` when it has one, and the message.
    fn message(
        &mut self,
        key: &str,
        value: &Value,
        pointer: &str,
    ) -> Option<(Option<String>, Message)> {
        let mut fields = Fields::of(Some(value), pointer);
        let name = fields.str("name").map(str::to_owned);
        let payload = self.message_schema(&mut fields, "payload", key);
        let Some(payload) = payload else {
            self.notes.not_mapped(
                pointer,
                "a message without a `payload` schema: warren types every message's body; add a schema",
            );
            return None;
        };
        let headers = self.message_schema(&mut fields, "headers", &format!("{key}-headers"));
        let content_type = fields
            .str("contentType")
            .unwrap_or(&self.default_content_type);
        let content_type = (!content_type.is_empty() && content_type != "application/json")
            .then(|| content_type.to_owned());
        let description = fields.str("description").map(str::to_owned);
        let external = fields.bool("x-warren-external-producers");
        // The title is the payload's type in warren's own documents, a label elsewhere.
        fields.skip(&["title", "summary"]);
        if fields.get("correlationId").is_some() {
            self.notes.not_mapped(
                &fields.at("correlationId"),
                "warren sets the correlation id itself: an rpc's reply carries its request's",
            );
        }
        fields.finish(&mut self.notes, DOCUMENTATION);
        let message = Message {
            payload,
            headers,
            content_type,
            description,
            external_producers: external.filter(|e| *e),
        };
        Some((name, message))
    }

    /// The file of a message's `part` schema: a component schema's, or a new one for a
    /// schema written in the message.
    fn message_schema(
        &mut self,
        fields: &mut Fields<'_>,
        part: &str,
        name: &str,
    ) -> Option<String> {
        let at = fields.at(part);
        let value = fields.get(part)?;
        if let Value::Object(wrapper) = value
            && let Some(format) = wrapper.get("schemaFormat").and_then(Value::as_str)
            && !is_json_schema(format)
        {
            self.notes.not_mapped(
                &at,
                format!("a {format} schema: warren reads JSON Schema; convert it"),
            );
            return None;
        }
        let schema = unwrapped(value);
        if let Some(key) = component_schema(schema) {
            return self.files.root(&key).or_else(|| {
                self.notes
                    .not_mapped(&at, "its `$ref` names no schema under components.schemas");
                None
            });
        }
        Some(self.files.inline(name, schema, &at, &mut self.notes))
    }

    /// Queues and exchanges from the channels' AMQP bindings.
    fn channels(&mut self, channels: Fields<'_>) {
        let pointer = channels.pointer.clone();
        for (id, value) in channels.entries() {
            let channel = self.channel(value, &child(&pointer, id));
            self.channels.insert(id.clone(), channel);
        }
    }

    fn channel(&mut self, value: &Value, pointer: &str) -> Channel {
        let mut fields = Fields::of(Some(value), pointer);
        let mut channel = Channel {
            address: fields.str("address").map(str::to_owned),
            ..Channel::default()
        };
        let messages_at = fields.at("messages");
        for (id, message) in fields
            .get("messages")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let key = local_ref(message, "#/components/messages/");
            match key.and_then(|k| self.messages.get(&k)) {
                Some(name) => {
                    channel.messages.insert(id.clone(), name.clone());
                }
                None => self.notes.not_mapped(
                    &child(&messages_at, id),
                    "a channel message that is not a `$ref` to components.messages: move it there",
                ),
            }
        }
        fields.skip(&[
            "title",
            "summary",
            "description",
            "parameters",
            "servers",
            "tags",
            "externalDocs",
        ]);
        let mut bindings = fields.object("bindings");
        let mut amqp = bindings.object("amqp");
        match amqp.str("is") {
            Some("queue") => {
                let queue = self.queue(&mut fields, amqp.object("queue"), channel.address.as_deref());
                channel.queue = queue;
            }
            Some("routingKey") => {
                let exchange = self.exchange(&mut fields, amqp.object("exchange"));
                channel.exchange = Some(exchange);
            }
            // An address given at run time, as a reply-to names the caller's: the
            // operations whose reply it is say what it carries.
            None if channel.address.is_none() => {}
            _ => self.notes.not_mapped(
                pointer,
                "a channel with no AMQP binding (`bindings.amqp.is`: `queue` or `routingKey`): warren cannot tell a queue from an exchange",
            ),
        }
        amqp.skip(&["bindingVersion", "is"]);
        amqp.finish(
            &mut self.notes,
            "not an AMQP 0.9.1 channel binding warren knows",
        );
        bindings.finish(&mut self.notes, "a binding of another protocol");
        fields.finish(&mut self.notes, "not a part of a channel warren maps");
        channel
    }

    /// The queue of a queue channel, declared; its name.
    fn queue(
        &mut self,
        channel: &mut Fields<'_>,
        mut amqp: Fields<'_>,
        address: Option<&str>,
    ) -> Option<String> {
        let Some(name) = amqp.str("name").or(address).map(str::to_owned) else {
            self.notes
                .not_mapped(&amqp.pointer, "a queue channel that names no queue");
            return None;
        };
        let mut queue = Queue {
            durable: amqp.bool("durable").filter(|d| !d),
            exclusive: amqp.bool("exclusive").filter(|e| *e),
            auto_delete: amqp.bool("autoDelete").filter(|a| *a),
            ..Queue::default()
        };
        self.vhost(&mut amqp);
        amqp.finish(
            &mut self.notes,
            "not an AMQP 0.9.1 queue setting warren maps",
        );
        queue.kind = match channel.str("x-warren-queue-type").map(QueueKind::from_str) {
            Some(Ok(kind)) => Some(kind),
            Some(Err(_)) | None => {
                self.notes.assumed(
                    &channel.pointer,
                    format!("queue `{name}` is classic: the document does not say its type, and a queue declared without one is classic (write `type: quorum` if it is one)"),
                );
                Some(QueueKind::Classic)
            }
        };
        let mut dead_letter = channel.object("x-warren-dead-letter");
        if let Some(exchange) = dead_letter.str("exchange") {
            queue.dead_letter = Some(DeadLetter {
                exchange: exchange.to_owned(),
                routing_key: dead_letter.str("routingKey").map(str::to_owned),
                queue_argument: dead_letter
                    .bool("queueArgument")
                    .filter(|declared| !declared),
            });
        }
        dead_letter.finish(&mut self.notes, "not a dead-letter setting");
        queue.on_poison = channel
            .str("x-warren-on-poison")
            .and_then(|p| OnPoison::from_str(p).ok());
        let retry = channel.object("x-warren-retry");
        self.retry(retry, &mut queue);
        self.contract.queues.insert(name.clone(), queue);
        self.queue_at.insert(name.clone(), channel.pointer.clone());
        Some(name)
    }

    /// A queue's retry policy from `x-warren-retry`.
    fn retry(&mut self, mut retry: Fields<'_>, queue: &mut Queue) {
        let mode = match retry.str("mode") {
            None => return,
            Some("none") => RetryMode::None,
            Some("immediate-requeue") => RetryMode::ImmediateRequeue,
            Some("ttl-backoff") => RetryMode::TtlBackoff,
            Some("quorum-native") => RetryMode::QuorumNative,
            Some(other) => {
                self.notes.not_mapped(
                    &retry.at("mode"),
                    format!("`{other}` is not a retry mode of warren's"),
                );
                return;
            }
        };
        let policy = Retry {
            mode: Some(mode),
            max_retries: retry.number("maxRetries"),
            initial_delay: retry.duration("initialDelay"),
            max_delay: retry.duration("maxDelay"),
            multiplier: retry.get("multiplier").and_then(Value::as_f64),
            jitter: retry.bool("jitter"),
            exhausted: retry
                .str("exhausted")
                .and_then(|e| Exhausted::from_str(e).ok()),
            counts_from: self.counts_from(&mut retry),
        };
        queue.delivery_limit = match retry.get("deliveryLimit") {
            Some(Value::String(word)) if word == DeliveryLimit::BROKER_DEFAULT => {
                Some(DeliveryLimit::BrokerDefault)
            }
            _ => retry.number("deliveryLimit").map(DeliveryLimit::Count),
        };
        // Computed from the settings above: the contract writes the settings.
        retry.skip(&["delays", "waitQueues"]);
        retry.finish(&mut self.notes, "not a retry setting");
        queue.retry = (mode != RetryMode::None).then_some(policy);
    }

    /// `countsFrom` of `retry`: the other stacks' retry copies a queue believes the counts of,
    /// each `{exchange, header}`, read through [`Fields`] so that an entry without an
    /// exchange, or a key of none, is a note.
    fn counts_from(&mut self, retry: &mut Fields<'_>) -> Vec<RetryCountSource> {
        let at = retry.at("countsFrom");
        let entries = retry.get("countsFrom").and_then(Value::as_array);
        let mut sources = Vec::new();
        for (i, entry) in entries.into_iter().flatten().enumerate() {
            let mut fields = Fields::of(Some(entry), child(&at, &i.to_string()));
            let exchange = fields.str("exchange");
            // Warren's own header is the default, written by leaving it out.
            let header = (fields.str("header"))
                .filter(|header| *header != headers::RETRY_COUNT)
                .map(str::to_owned);
            match exchange {
                Some(exchange) => sources.push(RetryCountSource {
                    exchange: exchange.to_owned(),
                    header,
                }),
                None => self.notes.not_mapped(
                    &fields.pointer,
                    "a retry count source names the exchange its copies come through",
                ),
            }
            fields.finish(&mut self.notes, "not a retry count source setting");
        }
        sources
    }

    /// The exchange of a routing-key channel, declared unless it is the default exchange or
    /// `x-warren-external`; its name.
    fn exchange(&mut self, channel: &mut Fields<'_>, mut amqp: Fields<'_>) -> String {
        let kind = amqp.str("type");
        let name = channel
            .str("x-warren-exchange")
            .or(amqp.str("name"))
            .unwrap_or_default()
            .to_owned();
        let durable = amqp.bool("durable");
        let auto_delete = amqp.bool("autoDelete");
        self.vhost(&mut amqp);
        amqp.finish(
            &mut self.notes,
            "not an AMQP 0.9.1 exchange setting warren maps",
        );
        let external = channel.bool("x-warren-external") == Some(true);
        let bindings_at = channel.at("x-warren-bindings");
        let bindings = channel.get("x-warren-bindings").and_then(Value::as_array);
        let kind = kind.and_then(|k| ExchangeKind::from_str(k).ok());
        for (i, binding) in bindings.into_iter().flatten().enumerate() {
            let binding = self.binding(&name, kind, binding, &format!("{bindings_at}/{i}"));
            // A binding is listed on each channel of its exchange whose key takes it; a set
            // of those written keeps a document of many bindings linear.
            let written = serde_json::to_string(&binding).unwrap_or_default();
            if self.bindings_written.insert(written) {
                self.contract.bindings.push(binding);
            }
        }
        if name.is_empty() || external {
            return name;
        }
        let kind = kind.unwrap_or_else(|| {
            self.notes.assumed(
                &channel.pointer,
                format!(
                    "exchange `{name}` is a topic exchange: the document does not say its type"
                ),
            );
            ExchangeKind::Topic
        });
        let exchange = Exchange {
            kind: Some(kind),
            durable: durable.filter(|d| !d),
            auto_delete: auto_delete.filter(|a| *a),
            ..Exchange::default()
        };
        self.contract
            .exchanges
            .entry(name.clone())
            .or_insert(exchange);
        name
    }

    /// One of `x-warren-bindings`: a binding from `exchange`.
    fn binding(
        &mut self,
        exchange: &str,
        kind: Option<ExchangeKind>,
        value: &Value,
        pointer: &str,
    ) -> Binding {
        let mut fields = Fields::of(Some(value), pointer);
        let mut binding = Binding {
            exchange: exchange.to_owned(),
            queue: fields.str("queue").map(str::to_owned),
            to_exchange: fields.str("exchange").map(str::to_owned),
            routing_key: fields.str("routingKey").map(str::to_owned),
            ..Binding::default()
        };
        let arguments = fields.get("arguments").and_then(Value::as_object);
        for (name, value) in arguments.into_iter().flatten() {
            let Some(argument) = argument(value) else {
                self.notes.not_mapped(
                    &child(&child(pointer, "arguments"), name),
                    "a binding argument is a string, a number or a boolean",
                );
                continue;
            };
            match (kind, name.as_str(), &argument) {
                (Some(ExchangeKind::Headers), "x-match", ArgumentValue::String(m))
                    if m == "any" =>
                {
                    binding.headers_match = Some(HeadersMatch::Any);
                }
                (Some(ExchangeKind::Headers), "x-match", _) => {
                    binding.headers_match = Some(HeadersMatch::All);
                }
                (Some(ExchangeKind::Headers), _, _) => {
                    binding.headers.insert(name.clone(), argument);
                }
                _ => {
                    binding.arguments.insert(name.clone(), argument);
                }
            }
        }
        fields.finish(&mut self.notes, "not a binding setting");
        binding
    }

    /// A vhost other than `/` is a note: a contract is declared in the vhost a service
    /// connects to.
    fn vhost(&mut self, amqp: &mut Fields<'_>) {
        if let Some(vhost) = amqp.str("vhost").filter(|v| *v != "/") {
            self.notes.not_mapped(
                &amqp.at("vhost"),
                format!(
                    "vhost `{vhost}`: a contract is declared in the vhost the service's URL names"
                ),
            );
        }
    }
}

/// The schema of a multi-format schema object, or the schema itself.
fn unwrapped(value: &Value) -> &Value {
    match value {
        Value::Object(map) if map.contains_key("schemaFormat") => {
            map.get("schema").unwrap_or(value)
        }
        other => other,
    }
}

/// The component schema `schema` is a bare `$ref` to.
fn component_schema(schema: &Value) -> Option<String> {
    local_ref(schema, COMPONENT_SCHEMAS)
}

/// Whether a multi-format schema's `schemaFormat` is JSON Schema (or AsyncAPI's own
/// schema object, a superset of draft-07).
fn is_json_schema(format: &str) -> bool {
    format.starts_with("application/schema+json")
        || format.starts_with("application/schema+yaml")
        || format.starts_with("application/vnd.aai.asyncapi")
}

/// A binding argument from its JSON value; `None` for a list, an object or null.
fn argument(value: &Value) -> Option<ArgumentValue> {
    Some(match value {
        Value::Bool(b) => ArgumentValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => ArgumentValue::Int(i),
            None => ArgumentValue::Float(n.as_f64()?),
        },
        Value::String(s) => ArgumentValue::String(s.clone()),
        _ => return None,
    })
}

/// `wanted`, or `wanted` with a number after `separator`, whichever `taken` does not hold.
fn unused_key<V>(taken: &BTreeMap<String, V>, wanted: &str, separator: char) -> String {
    let mut name = wanted.to_owned();
    let mut n = 1;
    while taken.contains_key(&name) {
        n += 1;
        name = format!("{wanted}{separator}{n}");
    }
    name
}

/// A contract name from another tool's key: words in `snake_case`, every character but
/// ASCII letters and digits a word break (`shop.billing:Bill` → `shop_billing_bill`).
fn snake_case(key: &str) -> String {
    let mut name = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && previous_lower {
                name.push('_');
            }
            previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            name.push(c.to_ascii_lowercase());
        } else {
            if !name.ends_with('_') {
                name.push('_');
            }
            previous_lower = false;
        }
    }
    let name = name.trim_matches('_').to_owned();
    if name.is_empty() {
        "unnamed".to_owned()
    } else {
        name
    }
}
