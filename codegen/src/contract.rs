//! Stage 4: the checked contract as a plain IR, ready for emit.
//!
//! Nothing here knows about YAML: defaults are applied, and the topology becomes the one
//! model the runtime shares (`warren-model`): a queue's typed fields (type, dead-lettering,
//! retry policy, delivery limit) stay typed and the `x-` arguments RabbitMQ gets are derived
//! from them there; the retry infrastructure (one wait queue per ttl-backoff delay tier) is
//! laid out by the model's own arithmetic; and messages carry their bundled schemas. Every
//! collection is ordered, so whatever is emitted from the model is deterministic.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use warren_model::{
    ArgValue, Arguments, Backoff, BatchSpec, Binding, CircuitBreaker, Compression, ConsumerSpec,
    DeadLetter, Destination, Exchange, ExchangeKind, Exhausted, Import, MAX_WAIT_TIERS,
    MessageSelector, OnPoison, OrderingKey, Publication, Queue, QueueKind, QueueRole, Retry,
    RetryCountSource, RpcTarget, Topology, WaitTier,
};
use warren_model::{argument, headers};

use crate::imports::Imports;
use crate::load::LoadedContract;
pub use crate::routing::{KeyTemplate, KeyWord};
use crate::schema::{NodeKey, SchemaBundle};
pub use crate::syntax::Duration;
use crate::syntax::{self, RetryMode};
pub use crate::syntax::{Contact, Info};

/// Default prefetch of a consumer.
pub const DEFAULT_PREFETCH: u16 = 10;
/// Default number of retries of the `immediate-requeue` and `ttl-backoff` modes (the
/// model's [`warren_model::DEFAULT_MAX_RETRIES`]).
pub const DEFAULT_MAX_RETRIES: u32 = warren_model::DEFAULT_MAX_RETRIES;
/// Default first ttl-backoff delay, as the format writes durations.
pub const DEFAULT_INITIAL_DELAY: Duration =
    Duration::from_millis(warren_model::DEFAULT_INITIAL_DELAY.as_millis() as u64);
/// Default ttl-backoff delay bound, as the format writes durations.
pub const DEFAULT_MAX_DELAY: Duration =
    Duration::from_millis(warren_model::DEFAULT_MAX_DELAY.as_millis() as u64);
pub use warren_model::DEFAULT_CONTENT_TYPE;

/// A checked contract. Its default is the empty contract, which declares nothing: what a
/// contract that did not exist yet is compared as.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contract {
    /// The contract file as the user named it.
    pub source: PathBuf,
    /// What the contract says about itself (`info:`); empty when it says nothing.
    pub info: Info,
    /// Every exchange (by name), queue (declared queues by name, each followed by its wait
    /// queues, shortest delay first) and binding (in contract order): what the generated
    /// `topology()` returns.
    pub topology: Topology,
    /// Messages by name.
    pub messages: BTreeMap<String, Message>,
    /// Publishers by name.
    pub publishers: BTreeMap<String, Publisher>,
    /// Consumers by name.
    pub consumers: BTreeMap<String, Consumer>,
    /// Request/reply operations by name.
    pub rpcs: BTreeMap<String, Rpc>,
    /// Every payload and headers type, bundled.
    pub schemas: SchemaBundle,
    /// Each contract it imports, by the name it gives it (`orders`), as checked on its own.
    pub imports: BTreeMap<String, Arc<Contract>>,
    /// Every file the contract was built from, what a build script must watch: the contract
    /// as its path was given, then each schema file, on disk by its canonical path, in
    /// memory by the name given to [`Sources::file`](crate::Sources::file).
    pub inputs: Vec<PathBuf>,
}

/// A message type.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Name in the contract.
    pub name: String,
    /// Payload type.
    pub payload: SchemaType,
    /// Headers type, when declared.
    pub headers: Option<SchemaType>,
    /// Content type of bodies.
    pub content_type: String,
    /// What the message means.
    pub description: Option<String>,
    /// For a message another contract owns, that contract's name in this one (`orders` for
    /// `orders::order_placed`); `None` for the contract's own.
    pub owner: Option<String>,
    /// Producers outside warren's contracts publish it too (`external_producers: true`).
    pub external_producers: bool,
}

/// A type defined by a bundled schema.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaType {
    /// The Rust type name: the key of its definition in [`Contract::schemas`].
    pub type_name: String,
    /// A self-contained JSON Schema for runtime validation.
    pub schema: serde_json::Value,
}

/// A publisher.
#[derive(Debug, Clone, PartialEq)]
pub struct Publisher {
    /// Name in the contract.
    pub name: String,
    /// Message type published.
    pub message: String,
    /// The routing key with its placeholders (as written: `publication.routing_key`).
    pub routing_key: KeyTemplate,
    /// Where and how it publishes, as generated code hands it to the runtime: the exchange
    /// (`""` is the default exchange), the routing key as written, the body compression and
    /// the highest `max_priority` of the queues its messages can reach.
    pub publication: Publication<String>,
    /// The queues its messages reach are declared by another service (`external_consumers`).
    pub external_consumers: bool,
}

/// A request/reply operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Rpc {
    /// Name in the contract.
    pub name: String,
    /// What the operation does.
    pub description: Option<String>,
    /// The request message.
    pub request: String,
    /// The response message.
    pub response: String,
    /// The declared errors: code → message.
    pub errors: BTreeMap<String, String>,
    /// The requests' routing key with its placeholders (the queue's name on the default
    /// exchange, taken as it is); as written: `target.routing_key`.
    pub routing_key: KeyTemplate,
    /// Where requests go and how long a caller waits, as generated code hands it to the
    /// runtime: the exchange, the routing key as written, the timeout and the highest
    /// `max_priority` of the queues its requests can reach.
    pub target: RpcTarget<String>,
    /// The server: a consumer of the request queue, named and registered as the rpc, whose
    /// message is the request.
    pub server: Consumer,
}

/// A consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    /// How it consumes, as generated code hands it to the runtime: its name in the contract,
    /// its queue, prefetch (`basic.qos`), concurrency and circuit breaker.
    pub spec: ConsumerSpec<String>,
    /// The messages it takes: one, or several (`messages:`), in the contract's order.
    pub messages: Vec<Consumed>,
    /// Batch settings, for batch consumers.
    pub batch: Option<BatchSpec>,
    /// A dead-letter consumer: its handler receives every message of its queue as a
    /// `warren_runtime::DeadLetter`, poison included.
    pub dead_letters: bool,
    /// Handled inside the inbox's transaction (`inbox: true`), keyed by message id or else
    /// the payload value at `inbox_key`.
    pub inbox: Option<InboxKey>,
}

impl Consumer {
    /// Its message; the first of a consumer of several.
    pub fn message(&self) -> &str {
        self.messages
            .first()
            .map_or("", |consumed| &consumed.message)
    }

    /// Whether it takes several messages (`messages:`), each handled by a method of its own.
    pub fn takes_several(&self) -> bool {
        self.messages.len() > 1
    }
}

/// One message a consumer takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Consumed {
    /// The message's name.
    pub message: String,
    /// How a delivery without a `type` is recognised as it (a consumer of several only).
    pub selector: Option<MessageSelector<String>>,
}

/// How an inbox consumer records its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxKey {
    /// The JSON pointer into the payload of the key of a message without an id.
    pub pointer: Option<String>,
}

/// Builds the model from a contract that passed every check. `Err` lists what the model
/// cannot represent although the checks let it through: a bug in warren, reported rather than
/// turned into wrong output.
pub(crate) fn build(
    loaded: &LoadedContract,
    imports: &Imports,
    schemas: SchemaBundle,
    entries: &BTreeMap<String, (NodeKey, Option<NodeKey>)>,
    type_names: &BTreeMap<NodeKey, String>,
) -> Result<Contract, String> {
    let file = &loaded.file;
    let builder = Builder {
        file,
        imports,
        schemas: &schemas,
        // One graph for every route: which queues a publisher's messages and an rpc's
        // requests reach decides their `max_priority`.
        graph: crate::routing::contract_graph(file, imports),
        bugs: std::cell::RefCell::new(Vec::new()),
    };
    let exchanges = file
        .exchanges
        .iter()
        .map(|(name, e)| exchange(name, e))
        .collect();
    let mut queues = Vec::new();
    for (name, q) in &file.queues {
        let declared = queue(name, q);
        let waits = declared.wait_queues();
        queues.push(declared);
        queues.extend(waits);
    }
    let messages = builder.messages(entries, type_names);
    let publishers = builder.publishers();
    let consumers = file
        .consumers
        .iter()
        .map(|(name, c)| (name.clone(), consumer(name, c)))
        .collect();
    let rpcs = builder.rpcs();
    let inputs = builder.inputs(loaded);
    let imported_exchanges = builder.imported_exchanges();
    let bindings = builder.bindings();
    let bugs = builder.bugs.into_inner();
    if !bugs.is_empty() {
        return Err(bugs.join("; "));
    }
    Ok(Contract {
        source: loaded.path().to_owned(),
        info: file.info.clone().unwrap_or_default(),
        topology: Topology::new(exchanges, queues, bindings).importing(imported_exchanges),
        messages,
        publishers,
        consumers,
        rpcs,
        schemas,
        inputs,
        imports: imports
            .contracts
            .iter()
            .map(|(alias, import)| (alias.clone(), import.contract.clone()))
            .collect(),
    })
}

/// What building one contract's model reads, and the bugs it finds on the way.
struct Builder<'a> {
    file: &'a syntax::ContractFile,
    imports: &'a Imports,
    schemas: &'a SchemaBundle,
    graph: crate::routing::Graph,
    /// What the model cannot represent although the checks let it through.
    bugs: std::cell::RefCell<Vec<String>>,
}

impl Builder<'_> {
    /// Records what the model cannot represent: reported when the build ends.
    fn bug(&self, text: String) {
        self.bugs.borrow_mut().push(text);
    }

    /// The highest `max_priority` of the queues `exchange` routes `key` to.
    fn max_priority(&self, exchange: &str, key: &KeyTemplate) -> Option<u8> {
        crate::routing::max_priority(&self.graph.route(exchange, key), self.file, self.imports)
    }

    /// The contract's own messages, then the imported ones it uses, by qualified name.
    fn messages(
        &self,
        entries: &BTreeMap<String, (NodeKey, Option<NodeKey>)>,
        type_names: &BTreeMap<NodeKey, String>,
    ) -> BTreeMap<String, Message> {
        let (file, imports) = (self.file, self.imports);
        let schema_type = |key: &NodeKey| {
            let type_name = type_names.get(key).cloned().unwrap_or_else(|| {
                self.bug(format!("no Rust type was named for the schema at {key:?}"));
                String::new()
            });
            SchemaType {
                schema: self.schemas.standalone(&type_name),
                type_name,
            }
        };
        let imported = imports
            .messages
            .iter()
            .filter_map(|(qualified, (alias, _))| {
                let message = imports.message(qualified).map(|(_, m)| m).or_else(|| {
                    self.bug(format!("imported message `{qualified}` has no owner"));
                    None
                })?;
                Some((qualified, message, Some(alias.clone())))
            });
        file.messages
            .iter()
            .map(|(name, m)| (name, m, None))
            .chain(imported)
            .filter_map(|(name, m, owner)| {
                let Some((payload, headers)) = entries.get(name) else {
                    self.bug(format!("message `{name}` has no bundled schema"));
                    return None;
                };
                Some((
                    name.clone(),
                    Message {
                        name: name.clone(),
                        payload: schema_type(payload),
                        headers: headers.as_ref().map(schema_type),
                        content_type: m
                            .content_type
                            .clone()
                            .unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_owned()),
                        description: m.description.clone(),
                        owner,
                        external_producers: m.external_producers == Some(true),
                    },
                ))
            })
            .collect()
    }

    /// The publishers, each with its parsed routing key and the priority its queues allow.
    fn publishers(&self) -> BTreeMap<String, Publisher> {
        self.file
            .publishers
            .iter()
            .map(|(name, p)| {
                let text = p.routing_key.clone().unwrap_or_default();
                let routing_key = KeyTemplate::parse(&text).unwrap_or_else(|_| {
                    self.bug(format!(
                        "publisher `{name}`'s routing key `{text}` does not parse"
                    ));
                    KeyTemplate::empty()
                });
                let publication = Publication {
                    exchange: p.exchange.clone(),
                    routing_key: text,
                    compression: p.compression,
                    max_priority: self.max_priority(&p.exchange, &routing_key),
                    ordering_key: p.ordering_key.clone(),
                };
                let publisher = Publisher {
                    name: name.clone(),
                    message: p.message.clone(),
                    routing_key,
                    publication,
                    external_consumers: p.external_consumers == Some(true),
                };
                (name.clone(), publisher)
            })
            .collect()
    }

    /// The rpcs, each with its request route (the default exchange by queue name when the
    /// contract gives none) and its server's consumer settings.
    fn rpcs(&self) -> BTreeMap<String, Rpc> {
        self.file
            .rpcs
            .iter()
            .map(|(name, r)| {
                let (exchange, text, routing_key) = match (&r.exchange, &r.routing_key) {
                    (Some(exchange), Some(key)) => {
                        let template = KeyTemplate::parse(key).unwrap_or_else(|_| {
                            self.bug(format!("rpc `{name}`'s routing key `{key}` does not parse"));
                            KeyTemplate::empty()
                        });
                        (exchange.clone(), key.clone(), template)
                    }
                    // The checks refuse one without the other: the default exchange, which
                    // routes by queue name, taken as it is (a queue name may hold braces).
                    _ => (
                        String::new(),
                        r.queue.clone(),
                        KeyTemplate::literal(&r.queue),
                    ),
                };
                let target = RpcTarget {
                    max_priority: self.max_priority(&exchange, &routing_key),
                    exchange,
                    routing_key: text,
                    timeout: r
                        .timeout
                        .map_or(warren_model::rpc::DEFAULT_TIMEOUT, Into::into),
                };
                let rpc = Rpc {
                    name: name.clone(),
                    description: r.description.clone(),
                    request: r.request.clone(),
                    response: r.response.clone(),
                    errors: r.errors.clone(),
                    routing_key,
                    target,
                    server: consumer(name, &r.server()),
                };
                (name.clone(), rpc)
            })
            .collect()
    }

    /// Every file the contract was generated from: its own, its schemas, and its imports'.
    fn inputs(&self, loaded: &LoadedContract) -> Vec<std::path::PathBuf> {
        let mut inputs = vec![loaded.paths.contract().to_owned()];
        inputs.extend(self.schemas.files.iter().cloned());
        // A change to an imported contract or its schemas changes what this one generates.
        for import in self.imports.contracts.values() {
            for input in &import.contract.inputs {
                if !inputs.contains(input) {
                    inputs.push(input.clone());
                }
            }
        }
        inputs
    }

    /// The exchanges the contract uses from each import, as their owners declare them.
    fn imported_exchanges(&self) -> Vec<Import> {
        let imports = self.imports;
        imports
            .contracts
            .values()
            .filter_map(|import| {
                let exchanges: Vec<Exchange> = imports
                    .exchanges
                    .iter()
                    .filter(|(_, alias)| **alias == import.alias)
                    .filter_map(|(name, _)| {
                        let exchange = import.contract.topology.exchange(name).cloned();
                        if exchange.is_none() {
                            self.bug(format!(
                                "imported exchange `{name}` is not in its owner's model"
                            ));
                        }
                        exchange
                    })
                    .collect();
                (!exchanges.is_empty()).then(|| Import {
                    contract: import.owner_as_written(),
                    exchanges,
                })
            })
            .collect()
    }

    /// The contract's bindings.
    fn bindings(&self) -> Vec<Binding> {
        self.file
            .bindings
            .iter()
            .filter_map(|b| {
                binding(b).or_else(|| {
                    self.bug(format!("a binding of `{}` has no destination", b.exchange));
                    None
                })
            })
            .collect()
    }
}

/// Consumer `name` with its defaults applied (an rpc's server too, through
/// [`syntax::Rpc::server`]).
fn consumer(name: &str, c: &syntax::Consumer) -> Consumer {
    let spec = ConsumerSpec {
        name: name.to_owned(),
        queue: c.queue.clone(),
        prefetch: c.prefetch.unwrap_or(DEFAULT_PREFETCH),
        concurrency: c.concurrency.unwrap_or(1),
        circuit_breaker: c.circuit_breaker.as_ref().map(|b| CircuitBreaker {
            failures: b.failures,
            cool_down: b.cool_down.into(),
        }),
        ordering_key: c.ordering_key.as_ref().map(|key| match key {
            syntax::OrderingKey::Payload(pointer) => OrderingKey::Payload(pointer.clone()),
            syntax::OrderingKey::Header(key) => OrderingKey::Header(key.header.clone()),
        }),
    };
    Consumer {
        spec,
        messages: (c.consumed().into_iter())
            .map(|(message, selector)| Consumed {
                message: message.to_owned(),
                selector: selector.and_then(message_selector),
            })
            .collect(),
        batch: c.batch.as_ref().map(|b| BatchSpec {
            size: b.size,
            timeout: b.timeout.into(),
        }),
        dead_letters: c.dead_letters.unwrap_or(false),
        inbox: (c.inbox == Some(true)).then(|| InboxKey {
            pointer: c.inbox_key.clone(),
        }),
    }
}

/// The model's selector for a contract's: its routing key, else its header (a check
/// refuses a selector of neither, or both).
fn message_selector(selector: &syntax::Selector) -> Option<MessageSelector<String>> {
    if let Some(pattern) = &selector.routing_key {
        return Some(MessageSelector::RoutingKey(pattern.clone()));
    }
    let (name, value) = selector.header.as_ref()?.iter().next()?;
    Some(MessageSelector::Header(name.clone(), value.clone()))
}

fn exchange(name: &str, e: &syntax::Exchange) -> Exchange {
    // A raw `alternate-exchange` is folded into the typed field by the model's own rule.
    Exchange {
        name: name.to_owned(),
        kind: e.kind.unwrap_or_default(),
        durable: e.durable.unwrap_or(true),
        auto_delete: e.auto_delete.unwrap_or(false),
        internal: e.internal.unwrap_or(false),
        alternate_exchange: e.alternate_exchange.clone(),
        arguments: e.arguments.clone(),
    }
    .normalized()
}

/// The retry policy of queue `name` with defaults applied, its wait tiers laid out.
pub(crate) fn retry_policy(name: &str, q: &syntax::Queue) -> Retry {
    let Some(retry) = &q.retry else {
        return Retry::None;
    };
    let max_retries = retry.max_retries.unwrap_or(DEFAULT_MAX_RETRIES);
    let exhausted = retry.exhausted.unwrap_or_default();
    match retry.mode.unwrap_or_default() {
        RetryMode::None => Retry::None,
        RetryMode::ImmediateRequeue => Retry::ImmediateRequeue {
            max_retries,
            exhausted,
        },
        RetryMode::TtlBackoff => Retry::TtlBackoff(Backoff::new(
            name,
            max_retries,
            retry.initial_delay.unwrap_or(DEFAULT_INITIAL_DELAY).into(),
            retry.max_delay.unwrap_or(DEFAULT_MAX_DELAY).into(),
            retry.multiplier.unwrap_or(warren_model::DEFAULT_MULTIPLIER),
            retry.jitter.unwrap_or(warren_model::DEFAULT_JITTER),
            exhausted,
        )),
        RetryMode::QuorumNative => Retry::QuorumNative,
    }
}

fn queue(name: &str, q: &syntax::Queue) -> Queue {
    let mut arguments = q.arguments.clone();
    // The arguments no typed field of the model holds: set from the format's typed fields.
    let mut set = |key: &str, value: ArgValue| {
        arguments.insert(key.to_owned(), value);
    };
    let int = |n: u64| ArgValue::Int(i64::try_from(n).unwrap_or(i64::MAX));
    if let Some(ttl) = q.message_ttl {
        set(argument::MESSAGE_TTL, int(ttl.as_millis()));
    }
    if let Some(expires) = q.expires {
        set("x-expires", int(expires.as_millis()));
    }
    if let Some(n) = q.max_length {
        set("x-max-length", int(n));
    }
    if let Some(n) = q.max_length_bytes {
        set("x-max-length-bytes", int(n));
    }
    if let Some(overflow) = q.overflow {
        set(argument::OVERFLOW, overflow.as_str().into());
    }
    if let Some(single) = q.single_active_consumer {
        set("x-single-active-consumer", ArgValue::Bool(single));
    }
    if let Some(priority) = q.max_priority {
        set("x-max-priority", int(u64::from(priority)));
    }
    if let Some(size) = q.initial_group_size {
        set(argument::QUORUM_INITIAL_GROUP_SIZE, int(u64::from(size)));
    }
    if let Some(locator) = q.leader_locator {
        set(argument::QUEUE_LEADER_LOCATOR, locator.as_str().into());
    }
    Queue {
        durable: q.durable.unwrap_or(true),
        exclusive: q.exclusive.unwrap_or(false),
        auto_delete: q.auto_delete.unwrap_or(false),
        dead_letter: q.dead_letter.as_ref().map(|dl| DeadLetter {
            queue_argument: dl.queue_argument.unwrap_or(true),
            ..DeadLetter::new(dl.exchange.clone(), dl.routing_key.clone())
        }),
        delivery_limit: q.delivery_limit.unwrap_or_default(),
        retry: retry_policy(name, q),
        retry_counts_from: q
            .retry
            .iter()
            .flat_map(|r| &r.counts_from)
            .map(|source| RetryCountSource {
                exchange: source.exchange.clone(),
                header: source
                    .header
                    .clone()
                    .unwrap_or_else(|| headers::RETRY_COUNT.to_owned()),
            })
            .collect(),
        on_poison: q.on_poison.unwrap_or_default(),
        arguments,
        ..Queue::new(name, q.kind.unwrap_or_default())
    }
    // Raw `x-` arguments a typed field sets (a raw dead-letter target, which the checks allow
    // without `dead_letter`) are folded into the typed fields by the model's own rule, so
    // the declaration derives them again, byte for byte.
    .normalized()
}

/// The binding `b`, or `None` when it names no destination (the checks refuse that).
fn binding(b: &syntax::Binding) -> Option<Binding> {
    let mut arguments = b.arguments.clone();
    if !b.headers.is_empty() || b.headers_match.is_some() {
        let mode = b.headers_match.unwrap_or_default().as_str();
        arguments.insert("x-match".to_owned(), mode.into());
        arguments.extend(b.headers.clone());
    }
    let destination = match (&b.queue, &b.to_exchange) {
        (Some(queue), _) => Destination::Queue(queue.clone()),
        (None, Some(exchange)) => Destination::Exchange(exchange.clone()),
        (None, None) => return None,
    };
    Some(Binding {
        exchange: b.exchange.clone(),
        destination,
        routing_key: b.routing_key.clone().unwrap_or_default(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{ArgValue, DeadLetter, exchange, queue};
    use crate::syntax::{self, ArgumentValue};

    fn text(s: &str) -> ArgumentValue {
        ArgumentValue::String(s.to_owned())
    }

    /// A dead-letter target written as raw arguments (which the checks allow) becomes the
    /// typed field, its one place; the broker is told the same arguments as before.
    #[test]
    fn raw_dead_letter_arguments_become_the_typed_field() {
        let raw = syntax::Queue {
            arguments: BTreeMap::from([
                ("x-dead-letter-exchange".to_owned(), text("dlx")),
                ("x-dead-letter-routing-key".to_owned(), text("dead")),
                ("x-queue-type".to_owned(), text("classic")),
                ("x-custom".to_owned(), ArgumentValue::Int(7)),
            ]),
            ..syntax::Queue::default()
        };
        let model = queue("work", &raw);
        assert_eq!(
            model.dead_letter,
            Some(DeadLetter::new("dlx", Some("dead".into())))
        );
        assert_eq!(
            model.arguments.keys().collect::<Vec<_>>(),
            ["x-custom"],
            "only what no typed field holds"
        );
        let declared = model.declare_arguments();
        let string = |s: &str| ArgValue::String(s.to_owned());
        assert_eq!(declared["x-dead-letter-exchange"], string("dlx"));
        assert_eq!(declared["x-dead-letter-routing-key"], string("dead"));
        // `type` (default quorum) always won over a raw `x-queue-type`.
        assert_eq!(declared["x-queue-type"], string("quorum"));
        assert_eq!(declared["x-custom"], ArgValue::Int(7));
        // A dead-letter exchange counts for the delivery limit, as it did.
        assert_eq!(declared["x-delivery-limit"], ArgValue::Int(1));
    }

    /// A raw `alternate-exchange` becomes the typed field; the typed one wins over it.
    #[test]
    fn raw_alternate_exchange_becomes_the_typed_field() {
        let mut raw = syntax::Exchange {
            arguments: BTreeMap::from([("alternate-exchange".to_owned(), text("unrouted"))]),
            ..syntax::Exchange::default()
        };
        let model = exchange("events", &raw);
        assert_eq!(model.alternate_exchange.as_deref(), Some("unrouted"));
        assert!(model.arguments.is_empty());
        raw.alternate_exchange = Some("typed".to_owned());
        let model = exchange("events", &raw);
        assert_eq!(
            model.declare_arguments()["alternate-exchange"],
            ArgValue::String("typed".to_owned())
        );
    }
}
