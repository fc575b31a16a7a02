//! The `warren.yaml` format: serde types exactly as a contract is written, public so that
//! a tool writing a contract (`warren import asyncapi`) writes this format and no copy of it.
//!
//! These types are the *syntax* of a contract. They keep every optional field optional so the
//! checks can tell "not written" from "written with the default value"; defaults are applied
//! when a checked contract is built into its IR, [`crate::contract`]. The JSON Schema of this format
//! (`schemas/warren.schema.json`) is generated from these types with `schemars`.

mod arguments;
mod delivery_limit;
mod duration;
mod spelled;

use std::collections::BTreeMap;

use crate::diagnostics::YamlPath;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use duration::Duration;
use spelled::SpelledSchema;
/// An argument value: the model's, read from a contract as a bare scalar (`arguments.rs`).
pub use warren_model::ArgValue as ArgumentValue;
/// The model's enums, read from a contract through their `FromStr` (`spelled.rs`).
pub use warren_model::{Compression, ExchangeKind, Exhausted, LeaderLocator, OnPoison, QueueKind};

/// A whole `warren.yaml` file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "warren contract")]
pub struct ContractFile {
    /// What the contract says about itself, for the documents written from it (AsyncAPI's
    /// `info`): its title, version, description and who owns it. Nothing here changes the
    /// generated code or the broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Info>,
    /// Contracts this one uses, by the name it calls them (`orders: ../orders/warren.yaml`),
    /// each path relative to this file. Their exchanges and messages are then written
    /// `orders::orders` and `orders::order_placed`: bind this contract's queues to them,
    /// publish and consume their messages. What is imported is never declared here; it is
    /// checked on the broker at start-up, and the imported contract's folder and schema roots
    /// become roots this contract's schemas may `$ref` into.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub imports: BTreeMap<String, String>,
    /// Folders, relative to this file, from which payload and headers schemas may be read
    /// besides the contract's own folder (for example a shared `common/` folder or a git
    /// submodule). A `$ref` that resolves outside every root is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema_roots: Vec<String>,
    /// Exchanges by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exchanges: BTreeMap<String, Exchange>,
    /// Queues by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub queues: BTreeMap<String, Queue>,
    /// Bindings from an exchange to a queue or to another exchange.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<Binding>,
    /// Message types by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub messages: BTreeMap<String, Message>,
    /// Publishers by name; each becomes one typed publish method.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub publishers: BTreeMap<String, Publisher>,
    /// Consumers by name; each becomes one handler trait.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub consumers: BTreeMap<String, Consumer>,
    /// Request/reply operations by name; each becomes a client method on `RpcClients` and a
    /// server trait registered like a consumer's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rpcs: BTreeMap<String, Rpc>,
}

/// What a contract says about itself (`info:`), for the documents written from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Info {
    /// The contract's title (`Orders`); the AsyncAPI export uses its folder's name without
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The version of the API the contract describes (`2.1.0`), not of warren.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What the contract is for, in Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who owns the contract: whom another team asks about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact: Option<Contact>,
}

/// Who owns a contract.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Contact {
    /// The owning team or person (`Orders team`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An address to write to (`orders@example.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// A page about the contract or its team (`https://wiki.example.com/orders`): an
    /// `http` or `https` URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// An exchange.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// Exchange type (default `topic`).
    #[serde(
        default,
        with = "spelled",
        rename = "type",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<SpelledSchema<ExchangeKind>>")]
    pub kind: Option<ExchangeKind>,
    /// Survives a broker restart (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durable: Option<bool>,
    /// Deleted when its last binding is removed (default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_delete: Option<bool>,
    /// Only other exchanges may publish to it (default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal: Option<bool>,
    /// Exchange that receives messages this exchange cannot route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternate_exchange: Option<String>,
    /// Extra `x-` arguments passed to `exchange.declare` as they are.
    #[serde(
        default,
        with = "arguments",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    #[schemars(with = "arguments::Schema")]
    pub arguments: BTreeMap<String, ArgumentValue>,
}

/// What happens when a queue's length limit is reached (`x-overflow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Overflow {
    /// Drop (or dead-letter) the oldest message.
    DropHead,
    /// Refuse new publishes (nack under confirms).
    RejectPublish,
    /// Refuse new publishes and dead-letter them.
    RejectPublishDlx,
}

/// A queue.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Queue {
    /// Queue type (default `quorum`).
    #[serde(
        default,
        with = "spelled",
        rename = "type",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<SpelledSchema<QueueKind>>")]
    pub kind: Option<QueueKind>,
    /// Survives a broker restart (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durable: Option<bool>,
    /// Used by one connection only and deleted when it closes (default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<bool>,
    /// Deleted when its last consumer goes (default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_delete: Option<bool>,
    /// Where messages go when they are dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetter>,
    /// How failed deliveries are retried (default: not at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// Quorum queues: deliveries after which the broker dead-letters a message
    /// (`x-delivery-limit`; N allows N+1 deliveries), or `broker-default` to declare none, as
    /// other stacks do (default: one above the retry budget).
    #[serde(
        default,
        with = "delivery_limit",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<delivery_limit::DeliveryLimitSchema>")]
    pub delivery_limit: Option<warren_model::DeliveryLimit>,
    /// How long a message may wait in the queue (`x-message-ttl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ttl: Option<Duration>,
    /// Delete the queue after it has been unused this long (`x-expires`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Duration>,
    /// Maximum number of ready messages (`x-max-length`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// Maximum total body size of ready messages (`x-max-length-bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length_bytes: Option<u64>,
    /// Behaviour when a length limit is reached (`x-overflow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow: Option<Overflow>,
    /// Only one consumer receives at a time; the others stand by (`x-single-active-consumer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_active_consumer: Option<bool>,
    /// Classic queues: number of priority levels (`x-max-priority`, 1 to 255).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority: Option<u8>,
    /// Quorum queues on a cluster: how many nodes hold a replica when the queue is created
    /// (`x-quorum-initial-group-size`; default: every node of the cluster). Its wait queues
    /// get the same. An odd number: a group of 3 survives one node down, 5 two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_group_size: Option<u16>,
    /// Quorum queues on a cluster: where a new queue's leader goes (`x-queue-leader-locator`:
    /// `client-local`, RabbitMQ's default, or `balanced`). Its wait queues get the same.
    #[serde(default, with = "spelled", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<SpelledSchema<LeaderLocator>>")]
    pub leader_locator: Option<LeaderLocator>,
    /// What to do with messages that cannot be decoded or fail their schema
    /// (default `dead-letter`).
    #[serde(default, with = "spelled", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<SpelledSchema<OnPoison>>")]
    pub on_poison: Option<OnPoison>,
    /// Extra `x-` arguments passed to `queue.declare` as they are.
    #[serde(
        default,
        with = "arguments",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    #[schemars(with = "arguments::Schema")]
    pub arguments: BTreeMap<String, ArgumentValue>,
}

impl Queue {
    /// Where the queue dead-letters: `dead_letter.exchange`, else a string
    /// `x-dead-letter-exchange` argument. The checks and the model both ask here, so they agree
    /// on whether a queue has somewhere to dead-letter.
    pub(crate) fn dead_letter_exchange(&self) -> Option<&str> {
        match (
            &self.dead_letter,
            self.arguments.get("x-dead-letter-exchange"),
        ) {
            (Some(dead_letter), _) => Some(&dead_letter.exchange),
            (None, Some(ArgumentValue::String(exchange))) => Some(exchange),
            (None, _) => None,
        }
    }

    /// The queue's priority levels: `max_priority`, else an integer `x-max-priority`
    /// argument in 1..=255 (what the broker would take).
    pub(crate) fn max_priority(&self) -> Option<u8> {
        self.max_priority
            .or_else(|| match self.arguments.get("x-max-priority") {
                Some(ArgumentValue::Int(n)) => u8::try_from(*n).ok().filter(|n| *n > 0),
                _ => None,
            })
    }

    /// The routing key of dead letters, read as [`Queue::dead_letter_exchange`] reads the
    /// exchange: `dead_letter.routing_key`, else, when the exchange is a raw argument too, a
    /// string `x-dead-letter-routing-key` argument.
    pub(crate) fn dead_letter_routing_key(&self) -> Option<&str> {
        match (&self.dead_letter, self.dead_letter_exchange()) {
            (Some(dead_letter), _) => dead_letter.routing_key.as_deref(),
            (None, Some(_)) => match self.arguments.get("x-dead-letter-routing-key") {
                Some(ArgumentValue::String(key)) => Some(key),
                _ => None,
            },
            (None, None) => None,
        }
    }
}

/// A queue's dead-letter target.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeadLetter {
    /// The dead-letter exchange (`x-dead-letter-exchange`); `""` is the default exchange.
    pub exchange: String,
    /// Routing key for dead letters (`x-dead-letter-routing-key`); when absent, each message
    /// keeps its own routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// Whether the queue is declared with this target (default `true`). `false` for a queue
    /// another stack declares without a dead-letter exchange: warren's worker still sends
    /// its dead letters here, with their failure context, and the queue is declared as the
    /// other stack declares it, so neither side's declaration is refused; what RabbitMQ
    /// dead-letters itself (expired, over a length limit, rejected by the other stack) is
    /// dropped, as it was before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_argument: Option<bool>,
}

/// How retries happen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RetryMode {
    /// No retries: a retryable failure is dead-lettered like a non-retryable one.
    #[default]
    None,
    /// Return the message to the queue at once.
    ImmediateRequeue,
    /// Park the message in a wait queue for an exponentially growing delay.
    TtlBackoff,
    /// Let the broker count deliveries against the queue's `delivery_limit`.
    QuorumNative,
}

/// A queue's retry policy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// The retry mechanism (default `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RetryMode>,
    /// Retries after the first delivery (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// `ttl-backoff`: delay before the first retry (default `1s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay: Option<Duration>,
    /// `ttl-backoff`: upper bound of the delay (default `30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delay: Option<Duration>,
    /// `ttl-backoff`: factor between consecutive delays (default 2): 1 for a constant delay,
    /// else at least 1.01.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    /// `ttl-backoff`: spread retries of messages that failed together (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<bool>,
    /// What happens when retries are spent (default `dead-letter`).
    #[serde(default, with = "spelled", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<SpelledSchema<Exhausted>>")]
    pub exhausted: Option<Exhausted>,
    /// Other stacks' retry copies whose retry count warren believes besides its own, so that
    /// their worker and warren's on one queue share one budget (`classic` `immediate-requeue`
    /// and `ttl-backoff`, which count in a header).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counts_from: Vec<RetryCountSource>,
}

/// Where another stack's retry copies come from: amqp-contract 2.4 sends them back through
/// its `retry-exchange`, with `x-retry-count`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryCountSource {
    /// The exchange the copies reach the queue through.
    pub exchange: String,
    /// The header holding their retry count (default `x-retry-count`, warren's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
}

/// How a headers-exchange binding combines its header values (`x-match`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HeadersMatch {
    /// Every listed header must match.
    #[default]
    All,
    /// At least one listed header must match.
    Any,
}

/// A binding from an exchange to a queue, or to another exchange.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// The source exchange.
    pub exchange: String,
    /// The destination queue (exactly one of `queue` and `to_exchange`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The destination exchange (exactly one of `queue` and `to_exchange`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_exchange: Option<String>,
    /// Binding key: a pattern with `*` (one word) and `#` (zero or more words) on a topic
    /// exchange, the exact key on a direct exchange; unused by fanout and headers exchanges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// Headers exchanges: the header values to match.
    #[serde(
        default,
        with = "arguments",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    #[schemars(with = "arguments::Schema")]
    pub headers: BTreeMap<String, ArgumentValue>,
    /// Headers exchanges: whether `all` (default) or `any` of `headers` must match.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub headers_match: Option<HeadersMatch>,
    /// Extra binding arguments passed as they are.
    #[serde(
        default,
        with = "arguments",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    #[schemars(with = "arguments::Schema")]
    pub arguments: BTreeMap<String, ArgumentValue>,
}

/// A message type.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// JSON Schema file of the payload (JSON or YAML), relative to the contract.
    pub payload: String,
    /// JSON Schema file of the application headers, relative to the contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<String>,
    /// Content type of the body (default `application/json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// What the message means; becomes documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Producers outside warren's contracts publish it too (another stack, a hand-written
    /// producer): `warren diff` then assumes they may send properties the schema does not
    /// declare, as it does for a message none of the contracts it was given publishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_producers: Option<bool>,
}

/// A publisher: one message type sent to one exchange with one routing key.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Publisher {
    /// The exchange to publish to; `""` is the default exchange.
    pub exchange: String,
    /// The routing key; `{name}` placeholders become typed parameters of the publish method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// The message type published.
    pub message: String,
    /// Compress bodies before publishing.
    #[serde(default, with = "spelled", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<SpelledSchema<Compression>>")]
    pub compression: Option<Compression>,
    /// The queues that receive these messages are declared by someone else: skip the check
    /// that the routing key reaches a queue of this contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_consumers: Option<bool>,
    /// Where in the payload the ordering key is, as a JSON pointer (`/customer_id`):
    /// messages written to an outbox with the same key are relayed in the order they were
    /// written, each after the one before it was confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
}

/// A consumer: one handler for the messages of one queue.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Consumer {
    /// The queue consumed.
    pub queue: String,
    /// The message type the queue carries (or `messages`, when it carries several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The messages the queue carries, when it carries several: the handler's trait has a
    /// method for each. A list of names, each delivery recognised by the `type` property
    /// warren's publishers set; or a map from each name to how a delivery without a `type`
    /// (another stack's) is recognised as it: `{ routing_key: "order.*.placed" }` or
    /// `{ header: { event: placed } }`. A delivery recognised as none is dead-lettered
    /// (`unknown-message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<ConsumedMessages>,
    /// Unacknowledged deliveries the broker may send ahead (`basic.qos`, default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<u16>,
    /// Handlers running at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u16>,
    /// Hand messages to the handler in batches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Batch>,
    /// Stop taking deliveries for a while after consecutive retryable failures, such as during
    /// a downstream outage (default: never stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_breaker: Option<CircuitBreaker>,
    /// A dead-letter consumer: the queue receives dead letters, and every one of them reaches
    /// the handler with its failure history, typed as `message` when it decodes and
    /// validates, raw when it does not (poison is never dropped or dead-lettered again).
    /// A failed handler returns the dead letter to its queue, or lets the broker dead-letter
    /// it through the queue's own dead-letter exchange (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letters: Option<bool>,
    /// Effects exactly once: the handler runs inside a database transaction in which the
    /// message was recorded first (the runtime's inbox, `postgres` or `sqlite` feature); a
    /// message recorded before is acknowledged without running it again (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox: Option<bool>,
    /// What the inbox records a message by when it has no message id: a JSON pointer into
    /// the payload (`/order_id`). Without one, a message without an id is dead-lettered
    /// (reason `unidentified`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox_key: Option<String>,
    /// Keep each key's messages in order: messages with the same key are handled one at a
    /// time, in the order they arrived, while other keys run up to `concurrency`. A JSON
    /// pointer into the payload (`/customer_id`) or `{ header: tenant }`. A retried message
    /// gives up its place (default: no order beyond `concurrency: 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<OrderingKey>,
}

/// The messages of a consumer of several.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ConsumedMessages {
    /// Their names, each delivery recognised by its `type` property.
    Names(Vec<String>),
    /// Each name with how a delivery without a `type` is recognised as it.
    Selected(BTreeMap<String, Selector>),
}

/// How a consumer of several recognises one of its messages on a delivery without a `type`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    /// A topic pattern the routing key it was published with matches (`order.*.placed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// A header and the value it has (one entry: `{ event: placed }`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<BTreeMap<String, String>>,
}

impl Consumer {
    /// Every message the consumer takes, by name, each with its selector when the contract
    /// gives one: `message`, or each of `messages`, in the contract's order.
    pub fn consumed(&self) -> Vec<(&str, Option<&Selector>)> {
        match (&self.message, &self.messages) {
            (Some(message), _) => vec![(message.as_str(), None)],
            (None, Some(ConsumedMessages::Names(names))) => {
                names.iter().map(|name| (name.as_str(), None)).collect()
            }
            (None, Some(ConsumedMessages::Selected(selected))) => (selected.iter())
                .map(|(name, selector)| (name.as_str(), Some(selector)))
                .collect(),
            (None, None) => Vec::new(),
        }
    }

    /// The message of a consumer of one; the first of a consumer of several.
    pub fn first_message(&self) -> &str {
        self.consumed().first().map_or("", |(name, _)| name)
    }

    /// Each message the consumer takes with where it is named, the consumer being at
    /// `path`: `message`, `messages[i]` or `messages.<name>`.
    pub(crate) fn consumed_at(&self, path: &YamlPath) -> Vec<(&str, YamlPath)> {
        if let Some(message) = &self.message {
            return vec![(message.as_str(), path.key("message"))];
        }
        match &self.messages {
            Some(ConsumedMessages::Names(names)) => (names.iter().enumerate())
                .map(|(index, name)| (name.as_str(), path.key("messages").index(index)))
                .collect(),
            Some(ConsumedMessages::Selected(selected)) => (selected.keys())
                .map(|name| (name.as_str(), path.key("messages").key(name.as_str())))
                .collect(),
            None => Vec::new(),
        }
    }
}

/// Where a consumer reads the key that orders its messages.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum OrderingKey {
    /// The payload value at this JSON pointer (`/customer_id`).
    Payload(String),
    /// An AMQP header's value.
    Header(HeaderKey),
}

/// An ordering key read from an AMQP header.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderKey {
    /// The header's name (`tenant`).
    pub header: String,
}

/// A request/reply operation: a caller publishes a request and waits for its reply, which a
/// server consuming `queue` sends back through RabbitMQ's direct reply-to.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rpc {
    /// What the operation does; becomes documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The queue the server consumes requests from.
    pub queue: String,
    /// The exchange requests are published to, with `routing_key`; without both, requests
    /// go through the default exchange with the queue's name as key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<String>,
    /// The routing key of requests on `exchange`; `{name}` placeholders become parameters
    /// of the client method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// The request message.
    pub request: String,
    /// The response message.
    pub response: String,
    /// The errors the server may answer with instead of a response: code (a `snake_case`
    /// name) to message.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, String>,
    /// How long a caller waits for the reply (default `30s`); requests nobody took by then
    /// expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// The server's prefetch (`basic.qos`, default 10), as a consumer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<u16>,
    /// Requests the server handles at once (default 1), as a consumer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u16>,
    /// The server's circuit breaker, as a consumer's (default: never stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_breaker: Option<CircuitBreaker>,
}

impl Rpc {
    /// The rpc's server as the consumer it is to the queue: the checks and the model apply
    /// the consumer rules (settings, poison, what the queue receives) to it through this, so
    /// they are written once.
    pub(crate) fn server(&self) -> Consumer {
        Consumer {
            queue: self.queue.clone(),
            message: Some(self.request.clone()),
            messages: None,
            prefetch: self.prefetch,
            concurrency: self.concurrency,
            batch: None,
            circuit_breaker: self.circuit_breaker.clone(),
            dead_letters: None,
            inbox: None,
            inbox_key: None,
            ordering_key: None,
        }
    }
}

/// Batch delivery settings of a consumer.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    /// Most messages in one batch.
    pub size: u16,
    /// Longest wait for a batch to fill before it is handled as it is.
    pub timeout: Duration,
}

/// The circuit breaker of a consumer: after `failures` consecutive retryable failures the
/// consumer takes no new deliveries for `cool_down`, then lets one through as a probe.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CircuitBreaker {
    /// Consecutive retryable failures (handler errors and panics) that open the breaker
    /// (at least 1).
    pub failures: u32,
    /// How long the breaker stays open before one message is let through as a probe.
    pub cool_down: Duration,
}

/// The spelling of each enum value the format alone has, for messages and generated arguments.
macro_rules! spelled {
    ($($ty:ident { $($variant:ident => $text:literal),* $(,)? })*) => {
        $(impl $ty {
            /// The value as written in a contract.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),*
                }
            }
        })*
    };
}

spelled! {
    Overflow {
        DropHead => "drop-head",
        RejectPublish => "reject-publish",
        RejectPublishDlx => "reject-publish-dlx",
    }
    RetryMode {
        None => "none",
        ImmediateRequeue => "immediate-requeue",
        TtlBackoff => "ttl-backoff",
        QuorumNative => "quorum-native",
    }
    HeadersMatch { All => "all", Any => "any" }
}

impl ContractFile {
    /// The contract as `warren.yaml` text, its sections in the format's order.
    pub fn to_yaml(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        yaml_serde::to_string(self).unwrap_or_default()
    }
}

/// The JSON Schema of the contract format, as checked in at `schemas/warren.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(ContractFile);
    // Serializing a schemars schema to a string cannot fail: it holds only JSON values.
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
