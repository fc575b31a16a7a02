//! Exchanges, queues and bindings: what a generated `topology()` returns and what the runtime
//! declares.
//!
//! Each fact has one field. A queue's dead-letter target is [`Queue::dead_letter`], its type
//! [`Queue::kind`], a wait queue's TTL the delay of its [`QueueRole::Wait`]; the `x-`
//! arguments the broker gets are derived from them by [`Queue::declare_arguments`], and
//! [`Queue::arguments`] holds only the arguments no typed field sets.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::retry::{Exhausted, QUORUM_UNLIMITED, Retry};
use crate::spelled::spelled;

/// Declaration arguments, by name.
pub type Arguments = BTreeMap<String, ArgValue>;

/// What a queue's holding queue adds to its name (`orders` → `orders.warren-holding`), where
/// `warren plan` keeps the queue's messages while it deletes and declares it again: a suffix
/// no contract may give a queue (`warren validate` refuses it), found again by a plan
/// computed after a migration was killed half way.
pub const HOLDING_SUFFIX: &str = ".warren-holding";

/// The argument a holding queue is declared with, naming the queue it holds for: RabbitMQ
/// keeps arguments it does not know without comparing them, so it is what tells warren's
/// holding queue from a queue someone else named like one (read through the management API).
pub const HOLDING_FOR: &str = "x-warren-holding-for";

/// The holding queue of `queue`.
pub fn holding_queue_name(queue: &str) -> String {
    format!("{queue}{HOLDING_SUFFIX}")
}

/// Builds [`Arguments`] from pairs, as generated code does.
pub fn arguments<const N: usize>(pairs: [(&str, ArgValue); N]) -> Arguments {
    pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

/// A declaration argument's value.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// `true` or `false`.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string.
    String(String),
}

impl From<&str> for ArgValue {
    fn from(value: &str) -> Self {
        Self::String(value.to_owned())
    }
}

impl From<Duration> for ArgValue {
    /// A duration as RabbitMQ takes TTLs and expiries: whole milliseconds.
    fn from(value: Duration) -> Self {
        Self::Int(i64::try_from(value.as_millis()).unwrap_or(i64::MAX))
    }
}

/// The names of the `x-` arguments warren derives from typed fields.
pub mod argument {
    /// The queue type ([`crate::Queue::kind`]).
    pub const QUEUE_TYPE: &str = "x-queue-type";
    /// The dead-letter exchange ([`crate::Queue::dead_letter`]).
    pub const DEAD_LETTER_EXCHANGE: &str = "x-dead-letter-exchange";
    /// The routing key of dead letters ([`crate::Queue::dead_letter`]).
    pub const DEAD_LETTER_ROUTING_KEY: &str = "x-dead-letter-routing-key";
    /// How a quorum queue dead-letters (wait queues: `at-least-once`).
    pub const DEAD_LETTER_STRATEGY: &str = "x-dead-letter-strategy";
    /// Deliveries of one message a quorum queue allows.
    pub const DELIVERY_LIMIT: &str = "x-delivery-limit";
    /// How long a message may wait in the queue (a wait queue's delay).
    pub const MESSAGE_TTL: &str = "x-message-ttl";
    /// What happens when a length limit is reached.
    pub const OVERFLOW: &str = "x-overflow";
    /// How many nodes of a cluster hold a new quorum queue's replicas; a wait queue takes
    /// its queue's ([`crate::Queue::REPLICATION_ARGUMENTS`]).
    pub const QUORUM_INITIAL_GROUP_SIZE: &str = "x-quorum-initial-group-size";
    /// Where a new quorum queue's leader is placed; a wait queue takes its queue's.
    pub const QUEUE_LEADER_LOCATOR: &str = "x-queue-leader-locator";
    /// An exchange's alternate exchange ([`crate::Exchange::alternate_exchange`]).
    pub const ALTERNATE_EXCHANGE: &str = "alternate-exchange";
}

/// Every exchange, queue and binding of a contract.
///
/// Built by [`Topology::new`] (as generated `topology()` does), with no namespace; a
/// namespace is set only by [`Topology::namespaced`], which rewrites every name with it, so
/// the names and the namespace cannot disagree.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    /// Exchanges, by name order.
    pub exchanges: Vec<Exchange>,
    /// Queues: each declared queue by name order, followed by its wait queues, shortest
    /// delay first.
    pub queues: Vec<Queue>,
    /// Bindings, in contract order.
    pub bindings: Vec<Binding>,
    /// What the contract uses but another contract owns: exchanges it binds to, publishes
    /// to or dead-letters to. They are never declared or deleted here, only checked on the
    /// broker (`warren_runtime::declare` and `verify`), so a mistake names its owner.
    pub imports: Vec<Import>,
    pub(crate) namespace: Namespace,
}

/// The exchanges a contract uses from one contract it imports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Import {
    /// The imported contract, as the importing contract names it (`orders`), with its path
    /// relative to the importing contract (`orders (../orders/warren.yaml)`): what an error
    /// about a missing or different exchange tells the reader to go and look at.
    pub contract: String,
    /// Its exchanges the importing contract uses, declared as the owner declares them.
    pub exchanges: Vec<Exchange>,
}

/// The prefix a namespaced topology's names carry, and the one rule that applies it: to a
/// queue or exchange name, to an exchange reference (where the default exchange `""` is the
/// broker's and stays), and to a publish target (where a key on the default exchange names a
/// queue).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Namespace(String);

impl Namespace {
    /// The prefix (empty for none).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A queue or exchange name in this namespace.
    pub fn name(&self, name: &str) -> String {
        format!("{}{name}", self.0)
    }

    /// A reference to an exchange: prefixed, except the default exchange (`""`).
    pub fn exchange(&self, exchange: &str) -> String {
        if exchange.is_empty() {
            String::new()
        } else {
            self.name(exchange)
        }
    }

    /// Where a message published to `exchange` with `routing_key` goes in this namespace:
    /// the exchange prefixed, or on the default exchange the key (a queue name) prefixed.
    pub fn publish_target(&self, exchange: &str, routing_key: &str) -> (String, String) {
        if exchange.is_empty() {
            (String::new(), self.name(routing_key))
        } else {
            (self.exchange(exchange), routing_key.to_owned())
        }
    }
}

impl Topology {
    /// A topology of these exchanges, queues and bindings, with no namespace.
    pub fn new(exchanges: Vec<Exchange>, queues: Vec<Queue>, bindings: Vec<Binding>) -> Self {
        Self {
            exchanges,
            queues,
            bindings,
            imports: Vec::new(),
            namespace: Namespace::default(),
        }
    }

    /// A topology of these exchanges, the `declared` queues each followed by the wait queues
    /// its retry policy lays out ([`Queue::wait_queues`], shortest delay first), and these
    /// bindings: what generated code builds, stating each queue's policy rather than its
    /// expansions.
    pub fn with_wait_queues(
        exchanges: Vec<Exchange>,
        declared: Vec<Queue>,
        bindings: Vec<Binding>,
    ) -> Self {
        let queues = declared
            .into_iter()
            .flat_map(|queue| {
                let waits = queue.wait_queues();
                std::iter::once(queue).chain(waits)
            })
            .collect();
        Self::new(exchanges, queues, bindings)
    }

    /// The same topology, using `imports` from the contracts that own them.
    pub fn importing(mut self, imports: Vec<Import>) -> Self {
        self.imports = imports;
        self
    }

    /// The prefix every name carries (empty unless [`Topology::namespaced`] was used).
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// `name` (a queue or exchange of the contract, as written there) in this topology's
    /// namespace.
    pub fn qualified(&self, name: &str) -> String {
        self.namespace.name(name)
    }

    /// The same topology with every exchange and queue name prefixed with `prefix`, and every
    /// reference to them (bindings, dead-letter targets, wait queues, alternate exchanges)
    /// rewritten to match. Several services or test runs can then share one broker without
    /// seeing each other's messages. Namespacing twice prefixes twice.
    pub fn namespaced(&self, prefix: &str) -> Self {
        let space = Namespace(prefix.to_owned());
        let name = |n: &str| space.name(n);
        let mut topology = self.clone();
        topology.namespace = Namespace(format!("{prefix}{}", self.namespace.0));
        let imported = topology.imports.iter_mut().flat_map(|i| &mut i.exchanges);
        for exchange in topology.exchanges.iter_mut().chain(imported) {
            exchange.name = name(&exchange.name);
            exchange.alternate_exchange = exchange.alternate_exchange.as_deref().map(name);
        }
        for queue in &mut topology.queues {
            queue.name = name(&queue.name);
            if let Some(dead_letter) = &mut queue.dead_letter {
                if dead_letter.exchange.is_empty() {
                    // Through the default exchange, the key is a queue name.
                    dead_letter.routing_key = dead_letter.routing_key.as_deref().map(name);
                }
                dead_letter.exchange = space.exchange(&dead_letter.exchange);
            }
            if let Retry::TtlBackoff(backoff) = &mut queue.retry {
                for tier in &mut backoff.tiers {
                    tier.queue = name(&tier.queue);
                }
            }
            for source in &mut queue.retry_counts_from {
                source.exchange = space.exchange(&source.exchange);
            }
            if let QueueRole::Wait { queue: of, .. } = &mut queue.role {
                *of = name(of);
            }
        }
        for binding in &mut topology.bindings {
            binding.exchange = name(&binding.exchange);
            binding.destination = match &binding.destination {
                Destination::Queue(q) => Destination::Queue(name(q)),
                Destination::Exchange(e) => Destination::Exchange(name(e)),
            };
        }
        topology
    }

    /// Checks what the typed model cannot hold by its types alone, before anything is
    /// declared or consumed:
    ///
    /// - no queue or exchange carries in [`Queue::arguments`] / [`Exchange::arguments`] an
    ///   argument a typed field sets ([`Queue::RESERVED_ARGUMENTS`],
    ///   [`Exchange::RESERVED_ARGUMENTS`], and `x-message-ttl` on a wait queue): the broker
    ///   would get one value and warren act on another (a dead-letter exchange the worker
    ///   does not know of, an alternate exchange namespacing does not rewrite);
    /// - every ttl-backoff queue's tiers are the ones [`crate::Backoff::new`] lays out for its
    ///   policy ([`crate::Backoff::is_laid_out`]), and each tier's wait queue is in the
    ///   topology, so every retry finds its wait queue.
    ///
    /// A topology built by the generator always passes; one built or edited by hand may not.
    pub fn validate(&self) -> Result<(), TopologyError> {
        for exchange in &self.exchanges {
            if let Some(key) = Exchange::RESERVED_ARGUMENTS
                .iter()
                .find(|key| exchange.arguments.contains_key(**key))
            {
                return Err(TopologyError::ReservedArgument {
                    owner: exchange.name.clone(),
                    key,
                });
            }
        }
        for queue in &self.queues {
            let wait_ttl =
                matches!(queue.role, QueueRole::Wait { .. }).then_some(argument::MESSAGE_TTL);
            if let Some(key) = Queue::RESERVED_ARGUMENTS
                .iter()
                .copied()
                .chain(wait_ttl)
                .find(|key| queue.arguments.contains_key(*key))
            {
                return Err(TopologyError::ReservedArgument {
                    owner: queue.name.clone(),
                    key,
                });
            }
            let Retry::TtlBackoff(backoff) = &queue.retry else {
                continue;
            };
            if !backoff.is_laid_out(&queue.name) {
                return Err(TopologyError::WaitTiers {
                    queue: queue.name.clone(),
                });
            }
            if let Some(tier) = backoff.tiers.iter().find(|tier| {
                !self.queues.iter().any(|q| {
                    q.name == tier.queue
                        && q.role
                            == QueueRole::Wait {
                                queue: queue.name.clone(),
                                delay: tier.delay,
                            }
                })
            }) {
                return Err(TopologyError::MissingWaitQueue {
                    queue: queue.name.clone(),
                    wait_queue: tier.queue.clone(),
                });
            }
        }
        Ok(())
    }

    /// The queues `queue`'s dead-lettering reaches, by name order: through the default
    /// exchange the queue its key names; through an exchange every queue bound to it,
    /// directly or through exchange-to-exchange bindings, whatever the binding key (a dead
    /// letter keeps its own routing key, so any binding may match one).
    pub fn reached_by_dead_letters(&self, queue: &Queue) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        let Some(dead_letter) = &queue.dead_letter else {
            return found;
        };
        if dead_letter.exchange.is_empty() {
            if let Some(key) = &dead_letter.routing_key
                && self.queues.iter().any(|q| &q.name == key)
            {
                found.insert(key.clone());
            }
            return found;
        }
        // Exchanges reached from the dead-letter exchange, each visited once.
        let mut exchanges = vec![dead_letter.exchange.clone()];
        let mut seen = BTreeSet::new();
        while let Some(exchange) = exchanges.pop() {
            if !seen.insert(exchange.clone()) {
                continue;
            }
            for binding in self.bindings.iter().filter(|b| b.exchange == exchange) {
                match &binding.destination {
                    Destination::Queue(q) => {
                        found.insert(q.clone());
                    }
                    Destination::Exchange(e) => exchanges.push(e.clone()),
                }
            }
        }
        found
    }

    /// The queue named `name`.
    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queues.iter().find(|q| q.name == name)
    }

    /// The exchange named `name`, declared here or imported.
    pub fn exchange(&self, name: &str) -> Option<&Exchange> {
        self.exchanges
            .iter()
            .chain(self.imports.iter().flat_map(|i| &i.exchanges))
            .find(|e| e.name == name)
    }

    /// The import that holds exchange `name`, when another contract owns it.
    pub fn owner_of(&self, exchange: &str) -> Option<&Import> {
        self.imports
            .iter()
            .find(|i| i.exchanges.iter().any(|e| e.name == exchange))
    }
}

/// Why [`Topology::validate`] refused a topology.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopologyError {
    /// A queue or exchange holds in its raw arguments one a typed field sets.
    ReservedArgument {
        /// The queue or exchange.
        owner: String,
        /// The argument.
        key: &'static str,
    },
    /// A ttl-backoff queue's wait tiers are not the ones its policy lays out.
    WaitTiers {
        /// The queue.
        queue: String,
    },
    /// A ttl-backoff queue's wait queue is not in the topology.
    MissingWaitQueue {
        /// The queue.
        queue: String,
        /// Its missing wait queue.
        wait_queue: String,
    },
}

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ReservedArgument { owner, key } => write!(
                f,
                "`{owner}` has `{key}` in its raw arguments, which a typed field sets"
            ),
            Self::WaitTiers { queue } => write!(
                f,
                "the wait tiers of queue `{queue}` are not the ones its backoff policy lays out"
            ),
            Self::MissingWaitQueue { queue, wait_queue } => write!(
                f,
                "wait queue `{wait_queue}` of queue `{queue}` is not in the topology"
            ),
        }
    }
}

impl std::error::Error for TopologyError {}

spelled! {
    /// The kind of an exchange, which decides how routing keys are matched.
    #[derive(Default)]
    pub enum ExchangeKind {
        /// Dot-separated words matched against patterns with `*` and `#` (the default).
        #[default]
        Topic => "topic",
        /// The routing key must equal the binding key.
        Direct => "direct",
        /// Every bound queue gets every message.
        Fanout => "fanout",
        /// Messages are matched on their headers, not their routing key.
        Headers => "headers",
    }
}

/// An exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: ExchangeKind,
    /// Survives a broker restart.
    pub durable: bool,
    /// Deleted with its last binding.
    pub auto_delete: bool,
    /// Only exchanges may publish to it.
    pub internal: bool,
    /// The exchange that gets messages this one cannot route (`alternate-exchange`).
    pub alternate_exchange: Option<String>,
    /// Other declaration arguments, as the contract wrote them.
    pub arguments: Arguments,
}

impl Exchange {
    /// The arguments a typed field sets, which [`Exchange::arguments`] must not hold
    /// ([`Topology::validate`]).
    pub const RESERVED_ARGUMENTS: &'static [&'static str] = &[argument::ALTERNATE_EXCHANGE];

    /// The exchange with a raw `alternate-exchange` argument folded into
    /// [`Exchange::alternate_exchange`], its one place: the typed field wins over a raw one,
    /// and a raw string becomes the typed field when none is set. What is left in
    /// [`Exchange::arguments`] then passes [`Topology::validate`] (a raw value that is not a
    /// string stays, and is refused there).
    pub fn normalized(mut self) -> Self {
        let raw = match self.arguments.get(argument::ALTERNATE_EXCHANGE) {
            Some(ArgValue::String(alternate)) => Some(alternate.clone()),
            _ => None,
        };
        if self.alternate_exchange.is_none() {
            self.alternate_exchange = raw;
        }
        if self.alternate_exchange.is_some() {
            self.arguments.remove(argument::ALTERNATE_EXCHANGE);
        }
        self
    }

    /// The arguments the broker is told: [`Exchange::arguments`] and the alternate exchange.
    pub fn declare_arguments(&self) -> Arguments {
        let mut arguments = self.arguments.clone();
        if let Some(alternate) = &self.alternate_exchange {
            arguments.insert(
                argument::ALTERNATE_EXCHANGE.to_owned(),
                alternate.as_str().into(),
            );
        }
        arguments
    }
}

spelled! {
    /// The kind of a queue.
    #[derive(Default)]
    pub enum QueueKind {
        /// Replicated, durable, with delivery counting (the default).
        #[default]
        Quorum => "quorum",
        /// The classic single-node queue.
        Classic => "classic",
        /// An append-only log; consumers read by offset.
        Stream => "stream",
    }
}

spelled! {
    /// Which node of a cluster a new quorum queue's leader is placed on
    /// ([`argument::QUEUE_LEADER_LOCATOR`]).
    pub enum LeaderLocator {
        /// The node of the connection that declares it (RabbitMQ's default).
        ClientLocal => "client-local",
        /// The node with the fewest leaders, so that queues spread over the cluster.
        Balanced => "balanced",
    }
}

spelled! {
    /// What happens to a message that cannot be decoded or validated.
    #[derive(Default)]
    pub enum OnPoison {
        /// Dead-letter it, with the reason in its headers (the default).
        #[default]
        DeadLetter => "dead-letter",
        /// Acknowledge and drop it, with a log line.
        Drop => "drop",
    }
}

/// A quorum queue's delivery limit (`x-delivery-limit`), as the contract says it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeliveryLimit {
    /// One above the retry budget, or none that drops ([`Queue::quorum_delivery_limit`]):
    /// what a queue warren owns gets.
    #[default]
    Derived,
    /// This many deliveries (N allows N+1).
    Count(u32),
    /// No `x-delivery-limit` declared, so the broker's own default applies: none on RabbitMQ
    /// 3.x, 20 on 4.x. How other stacks (amqp-contract, FastStream) declare a quorum queue,
    /// so a contract describing one they declared must say it, or the broker refuses the
    /// redeclare (`PRECONDITION_FAILED … inequivalent arg 'x-delivery-limit'`).
    BrokerDefault,
}

impl DeliveryLimit {
    /// How a contract (and the AsyncAPI export) writes [`DeliveryLimit::BrokerDefault`].
    pub const BROKER_DEFAULT: &'static str = "broker-default";
}

/// Where another stack's retry copies of a queue's messages come from, and the header
/// holding their retry count: deliveries to the queue through `exchange` are retry copies as
/// warren's own are, so their count (and their `x-first-failure-timestamp` and
/// `x-original-routing-key`) is believed, and warren and that stack's worker on one queue
/// share one retry budget. amqp-contract 2.4 sends its copies back through its
/// `retry-exchange`, with `x-retry-count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryCountSource {
    /// The exchange the other stack's retry copies reach the queue through.
    pub exchange: String,
    /// The header holding their retry count (`x-retry-count` by default, as warren's own).
    pub header: String,
}

/// A queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    /// Name.
    pub name: String,
    /// Kind (`x-queue-type`).
    pub kind: QueueKind,
    /// Survives a broker restart.
    pub durable: bool,
    /// Owned by one connection.
    pub exclusive: bool,
    /// Deleted with its last consumer.
    pub auto_delete: bool,
    /// Where dead letters go (`x-dead-letter-exchange`, `x-dead-letter-routing-key`).
    pub dead_letter: Option<DeadLetter>,
    /// A quorum queue's `x-delivery-limit` as the contract set it ([`DeliveryLimit`]); the
    /// broker is told [`Queue::quorum_delivery_limit`].
    pub delivery_limit: DeliveryLimit,
    /// How failed deliveries are retried.
    pub retry: Retry,
    /// Other stacks' retry copies whose counts warren believes besides its own (none by
    /// default: a count a producer wrote is never believed).
    pub retry_counts_from: Vec<RetryCountSource>,
    /// What happens to messages that cannot be decoded or validated.
    pub on_poison: OnPoison,
    /// Why the queue exists: declared in the contract, or a wait queue of one.
    pub role: QueueRole,
    /// Other declaration arguments (TTLs, lengths…), as the contract wrote them.
    pub arguments: Arguments,
}

impl Queue {
    /// The arguments a typed field sets, which [`Queue::arguments`] must not hold
    /// ([`Topology::validate`]; on a wait queue `x-message-ttl` too).
    pub const RESERVED_ARGUMENTS: &'static [&'static str] = &[
        argument::QUEUE_TYPE,
        argument::DEAD_LETTER_EXCHANGE,
        argument::DEAD_LETTER_ROUTING_KEY,
        argument::DELIVERY_LIMIT,
    ];

    /// The arguments that say where a queue's replicas live on a cluster: its wait queues
    /// take them from it ([`Queue::wait_queues`]), since a retry waiting there is as much
    /// worth keeping through a node's loss as the message in the queue.
    pub const REPLICATION_ARGUMENTS: &'static [&'static str] = &[
        argument::QUORUM_INITIAL_GROUP_SIZE,
        argument::QUEUE_LEADER_LOCATOR,
    ];

    /// A declared queue of `kind` with the contract's defaults: durable, shared, kept, no
    /// dead-lettering, no retries.
    pub fn new(name: impl Into<String>, kind: QueueKind) -> Self {
        Self {
            name: name.into(),
            kind,
            durable: true,
            exclusive: false,
            auto_delete: false,
            dead_letter: None,
            delivery_limit: DeliveryLimit::Derived,
            retry: Retry::None,
            retry_counts_from: Vec::new(),
            on_poison: OnPoison::default(),
            role: QueueRole::Declared,
            arguments: Arguments::new(),
        }
    }

    /// The queue with the raw arguments a typed field sets folded into it, so each fact has
    /// one place and [`Topology::validate`] passes:
    ///
    /// - `x-queue-type` is dropped: [`Queue::kind`] alone is the type (as it always was);
    /// - with no [`Queue::dead_letter`], a raw string `x-dead-letter-exchange` becomes it,
    ///   with a raw string `x-dead-letter-routing-key` as its key; with one, the typed field
    ///   is the whole target and raw ones are dropped;
    /// - with a derived [`Queue::delivery_limit`], a raw integer `x-delivery-limit` that fits
    ///   becomes it; a raw one is dropped either way (only a declared quorum queue is given a
    ///   limit, by [`Queue::quorum_delivery_limit`]);
    /// - on a wait queue, `x-message-ttl` is dropped: its delay is its TTL.
    ///
    /// A raw dead-letter exchange that is not a string stays, and is refused by
    /// [`Topology::validate`]. The generator builds every queue through this.
    pub fn normalized(mut self) -> Self {
        let text = |arguments: &Arguments, key: &str| match arguments.get(key) {
            Some(ArgValue::String(value)) => Some(value.clone()),
            _ => None,
        };
        self.arguments.remove(argument::QUEUE_TYPE);
        if self.dead_letter.is_none()
            && let Some(exchange) = text(&self.arguments, argument::DEAD_LETTER_EXCHANGE)
        {
            self.dead_letter = Some(DeadLetter::new(
                exchange,
                text(&self.arguments, argument::DEAD_LETTER_ROUTING_KEY),
            ));
        }
        if self.dead_letter.is_some() {
            self.arguments.remove(argument::DEAD_LETTER_EXCHANGE);
            self.arguments.remove(argument::DEAD_LETTER_ROUTING_KEY);
        }
        if let Some(ArgValue::Int(limit)) = self.arguments.remove(argument::DELIVERY_LIMIT)
            && self.delivery_limit == DeliveryLimit::Derived
            && let Ok(limit) = u32::try_from(limit)
        {
            self.delivery_limit = DeliveryLimit::Count(limit);
        }
        if matches!(self.role, QueueRole::Wait { .. }) {
            self.arguments.remove(argument::MESSAGE_TTL);
        }
        self
    }

    /// The `x-delivery-limit` of a declared quorum queue (`None` for other queues, and for
    /// one whose limit is [`DeliveryLimit::BrokerDefault`]):
    /// [`Queue::delivery_limit`](field@Queue::delivery_limit) as set, else one above the
    /// retry budget, so the worker, not the broker, decides when a message is exhausted (and
    /// adds the reason).
    ///
    /// Explicit unless the contract says otherwise: RabbitMQ 4 defaults the limit to 20 and
    /// 3.10 has none. Past the limit
    /// RabbitMQ dead-letters the message, or drops it when the queue has nowhere to
    /// dead-letter: such a queue (a dead-letter queue itself, typically, where a crashing DLQ
    /// consumer or a peek with requeue returns messages) gets no limit that drops, the
    /// largest one AMQP carries ([`QUORUM_UNLIMITED`]), and so does `exhausted: requeue`,
    /// which asks for no limit at all.
    pub fn quorum_delivery_limit(&self) -> Option<u32> {
        if self.kind != QueueKind::Quorum || self.role != QueueRole::Declared {
            return None;
        }
        let derived = match &self.retry {
            _ if self.broker_dead_letter().is_none() => QUORUM_UNLIMITED,
            Retry::ImmediateRequeue {
                exhausted: Exhausted::Requeue,
                ..
            } => QUORUM_UNLIMITED,
            Retry::TtlBackoff(backoff) if backoff.exhausted == Exhausted::Requeue => {
                QUORUM_UNLIMITED
            }
            Retry::ImmediateRequeue { max_retries, .. } => max_retries.saturating_add(1),
            Retry::TtlBackoff(backoff) => backoff.max_retries.saturating_add(1),
            Retry::None | Retry::QuorumNative => 1,
        };
        match self.delivery_limit {
            DeliveryLimit::Derived => Some(derived),
            DeliveryLimit::Count(limit) => Some(limit),
            DeliveryLimit::BrokerDefault => None,
        }
    }

    /// The dead-letter target the broker knows of ([`DeadLetter::queue_argument`]): where it
    /// sends what it dead-letters itself. `None` when it drops those messages.
    pub fn broker_dead_letter(&self) -> Option<&DeadLetter> {
        self.dead_letter.as_ref().filter(|d| d.queue_argument)
    }

    /// Every argument the broker is told, derived from the typed fields over
    /// [`Queue::arguments`]: `x-queue-type`, dead-lettering, the quorum delivery limit, and
    /// for a wait queue its TTL (and, on quorum queues, at-least-once dead-lettering back and
    /// `reject-publish`, so the hop back is never at-most-once).
    pub fn declare_arguments(&self) -> Arguments {
        let mut arguments = self.arguments.clone();
        let mut set = |key: &str, value: ArgValue| {
            arguments.insert(key.to_owned(), value);
        };
        set(argument::QUEUE_TYPE, self.kind.as_str().into());
        if let Some(dead_letter) = self.broker_dead_letter() {
            set(
                argument::DEAD_LETTER_EXCHANGE,
                dead_letter.exchange.as_str().into(),
            );
            if let Some(key) = &dead_letter.routing_key {
                set(argument::DEAD_LETTER_ROUTING_KEY, key.as_str().into());
            }
        }
        if let Some(limit) = self.quorum_delivery_limit() {
            set(argument::DELIVERY_LIMIT, ArgValue::Int(i64::from(limit)));
        }
        if let QueueRole::Wait { delay, .. } = &self.role {
            set(argument::MESSAGE_TTL, (*delay).into());
            if self.kind == QueueKind::Quorum {
                set(argument::DEAD_LETTER_STRATEGY, "at-least-once".into());
                set(argument::OVERFLOW, "reject-publish".into());
            }
        }
        arguments
    }

    /// The wait queues of a ttl-backoff queue, shortest delay first (none for other
    /// policies): each holds messages for its delay, then dead-letters them back to this
    /// queue through the default exchange (never through the original exchange, where
    /// sibling queues would get copies). They are of this queue's kind, so on a quorum queue
    /// the hop back is at-least-once, and replicated as it is
    /// ([`Queue::REPLICATION_ARGUMENTS`]).
    pub fn wait_queues(&self) -> Vec<Queue> {
        let Retry::TtlBackoff(backoff) = &self.retry else {
            return Vec::new();
        };
        let replication: Arguments = Self::REPLICATION_ARGUMENTS
            .iter()
            .filter_map(|key| Some(((*key).to_owned(), self.arguments.get(*key)?.clone())))
            .collect();
        backoff
            .tiers
            .iter()
            .map(|tier| Queue {
                durable: self.durable,
                dead_letter: Some(DeadLetter::new("", Some(self.name.clone()))),
                role: QueueRole::Wait {
                    queue: self.name.clone(),
                    delay: tier.delay,
                },
                arguments: replication.clone(),
                ..Queue::new(tier.queue.clone(), self.kind)
            })
            .collect()
    }
}

/// Why a queue exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueRole {
    /// Declared in the contract.
    Declared,
    /// A ttl-backoff wait queue of `queue`: messages wait `delay` (its TTL), then
    /// dead-letter back to `queue`.
    Wait {
        /// The queue whose retries wait here.
        queue: String,
        /// How long they wait.
        delay: Duration,
    },
}

/// A queue's dead-letter target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The exchange (`""` is the default exchange).
    pub exchange: String,
    /// The routing key dead letters get; `None` keeps their own.
    pub routing_key: Option<String>,
    /// Whether the queue is declared with it (`x-dead-letter-exchange`), so that the broker
    /// dead-letters there too: messages expired, over a length limit, past the delivery
    /// limit, or rejected by another stack's worker. `false` for a queue another stack
    /// declares without one: only warren's worker sends its dead letters there (it publishes
    /// them itself, with their failure context), and what the broker dead-letters is
    /// dropped, as it was before warren.
    pub queue_argument: bool,
}

impl DeadLetter {
    /// Dead letters to `exchange`, with `routing_key` (or their own), declared on the queue.
    pub fn new(exchange: impl Into<String>, routing_key: Option<String>) -> Self {
        Self {
            exchange: exchange.into(),
            routing_key,
            queue_argument: true,
        }
    }
}

/// A binding.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// Source exchange.
    pub exchange: String,
    /// Destination.
    pub destination: Destination,
    /// Binding key (`""` where the exchange type ignores it).
    pub routing_key: String,
    /// Binding arguments (`x-match` and header values on headers exchanges).
    pub arguments: Arguments,
}

impl Binding {
    /// `exchange` routing to queue `queue` what `routing_key` matches, with no arguments.
    pub fn to_queue(
        exchange: impl Into<String>,
        queue: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        Self::new(exchange, Destination::Queue(queue.into()), routing_key)
    }

    /// `exchange` routing to exchange `to` what `routing_key` matches, with no arguments.
    pub fn to_exchange(
        exchange: impl Into<String>,
        to: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        Self::new(exchange, Destination::Exchange(to.into()), routing_key)
    }

    fn new(
        exchange: impl Into<String>,
        destination: Destination,
        routing_key: impl Into<String>,
    ) -> Self {
        Self {
            exchange: exchange.into(),
            destination,
            routing_key: routing_key.into(),
            arguments: Arguments::new(),
        }
    }
}

/// A binding's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A queue.
    Queue(String),
    /// An exchange.
    Exchange(String),
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{
        ArgValue, Arguments, DeadLetter, DeliveryLimit, Exchange, ExchangeKind, Queue, QueueKind,
        QueueRole, Topology, TopologyError, argument,
    };
    use crate::retry::{Backoff, Exhausted, QUORUM_UNLIMITED, Retry};

    fn backoff_queue(kind: QueueKind, exhausted: Exhausted) -> Queue {
        let mut queue = Queue::new("work", kind);
        queue.dead_letter = Some(DeadLetter::new("dlx", None));
        queue.retry = Retry::TtlBackoff(Backoff::new(
            "work",
            3,
            Duration::from_millis(100),
            Duration::from_millis(300),
            2.0,
            false,
            exhausted,
        ));
        queue
    }

    #[test]
    fn quorum_queues_get_a_limit_above_the_retries() {
        let queue = backoff_queue(QueueKind::Quorum, Exhausted::DeadLetter);
        let arguments = queue.declare_arguments();
        assert_eq!(arguments["x-delivery-limit"], ArgValue::Int(4));
        assert_eq!(arguments["x-queue-type"], ArgValue::String("quorum".into()));
        assert_eq!(
            arguments["x-dead-letter-exchange"],
            ArgValue::String("dlx".into())
        );
        assert!(!arguments.contains_key("x-dead-letter-routing-key"));
        let requeue = backoff_queue(QueueKind::Quorum, Exhausted::Requeue);
        assert_eq!(requeue.quorum_delivery_limit(), Some(QUORUM_UNLIMITED));
        let mut no_dlx = queue.clone();
        no_dlx.dead_letter = None;
        assert_eq!(no_dlx.quorum_delivery_limit(), Some(QUORUM_UNLIMITED));
        let mut set = queue.clone();
        set.delivery_limit = DeliveryLimit::Count(9);
        assert_eq!(set.quorum_delivery_limit(), Some(9));
        // As another stack declares it: no limit at all, the broker's own applies.
        let mut shared = queue.clone();
        shared.delivery_limit = DeliveryLimit::BrokerDefault;
        assert_eq!(shared.quorum_delivery_limit(), None);
        assert!(!shared.declare_arguments().contains_key("x-delivery-limit"));
        let classic = backoff_queue(QueueKind::Classic, Exhausted::DeadLetter);
        assert!(!classic.declare_arguments().contains_key("x-delivery-limit"));
    }

    #[test]
    fn a_dead_letter_target_only_the_worker_uses_is_not_declared() {
        let mut queue = backoff_queue(QueueKind::Quorum, Exhausted::DeadLetter);
        if let Some(dead_letter) = &mut queue.dead_letter {
            dead_letter.routing_key = Some("failed".into());
            dead_letter.queue_argument = false;
        }
        let arguments = queue.declare_arguments();
        assert!(!arguments.contains_key("x-dead-letter-exchange"));
        assert!(!arguments.contains_key("x-dead-letter-routing-key"));
        assert_eq!(queue.broker_dead_letter(), None);
        // The broker would drop a message past a limit it cannot dead-letter.
        assert_eq!(queue.quorum_delivery_limit(), Some(QUORUM_UNLIMITED));
        // Its wait queues still dead-letter back to it through the broker.
        assert!(queue.wait_queues().iter().all(|wait| {
            wait.declare_arguments()
                .contains_key("x-dead-letter-exchange")
        }));
    }

    #[test]
    fn wait_queues_dead_letter_back_after_their_delay() {
        let queue = backoff_queue(QueueKind::Quorum, Exhausted::DeadLetter);
        let waits = queue.wait_queues();
        let names: Vec<&str> = waits.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(
            names,
            ["work.wait.100ms", "work.wait.200ms", "work.wait.300ms"]
        );
        let arguments = waits[1].declare_arguments();
        let text = |s: &str| ArgValue::String(s.into());
        assert_eq!(
            arguments.into_iter().collect::<Vec<_>>(),
            [
                ("x-dead-letter-exchange".to_owned(), text("")),
                ("x-dead-letter-routing-key".to_owned(), text("work")),
                ("x-dead-letter-strategy".to_owned(), text("at-least-once")),
                ("x-message-ttl".to_owned(), ArgValue::Int(200)),
                ("x-overflow".to_owned(), text("reject-publish")),
                ("x-queue-type".to_owned(), text("quorum")),
            ]
        );
    }

    /// A wait queue is replicated as its queue is, and takes none of its other arguments.
    #[test]
    fn wait_queues_are_replicated_as_their_queue() {
        let mut queue = backoff_queue(QueueKind::Quorum, Exhausted::DeadLetter);
        let placed = [
            (argument::QUORUM_INITIAL_GROUP_SIZE, ArgValue::Int(3)),
            (
                argument::QUEUE_LEADER_LOCATOR,
                ArgValue::String("balanced".into()),
            ),
            ("x-max-length", ArgValue::Int(10)),
        ];
        for (key, value) in placed {
            queue.arguments.insert(key.to_owned(), value);
        }
        for wait in queue.wait_queues() {
            let arguments = wait.declare_arguments();
            assert_eq!(
                arguments[argument::QUORUM_INITIAL_GROUP_SIZE],
                ArgValue::Int(3)
            );
            assert_eq!(
                arguments[argument::QUEUE_LEADER_LOCATOR],
                ArgValue::String("balanced".into())
            );
            assert!(!arguments.contains_key("x-max-length"), "{arguments:?}");
        }
    }

    /// Raw arguments a typed field sets are folded into it, so a hand-built topology passes
    /// `validate` once normalized, and is refused before.
    #[test]
    fn raw_arguments_fold_into_typed_fields() {
        let text = |s: &str| ArgValue::String(s.into());
        let mut raw = Queue::new("work", QueueKind::Quorum);
        raw.arguments
            .insert("x-dead-letter-exchange".into(), text("dlx"));
        raw.arguments
            .insert("x-dead-letter-routing-key".into(), text("failed"));
        raw.arguments.insert("x-queue-type".into(), text("classic"));
        raw.arguments
            .insert("x-delivery-limit".into(), ArgValue::Int(7));
        raw.arguments
            .insert("x-max-length".into(), ArgValue::Int(10));
        let refused = Topology::new(Vec::new(), vec![raw.clone()], Vec::new());
        assert_eq!(
            refused.validate(),
            Err(TopologyError::ReservedArgument {
                owner: "work".into(),
                key: "x-queue-type"
            })
        );
        let queue = raw.normalized();
        assert_eq!(
            queue.dead_letter,
            Some(DeadLetter::new("dlx", Some("failed".into())))
        );
        assert_eq!(queue.delivery_limit, DeliveryLimit::Count(7));
        assert_eq!(queue.kind, QueueKind::Quorum);
        assert_eq!(queue.arguments.keys().collect::<Vec<_>>(), ["x-max-length"]);
        // Namespacing now reaches the dead-letter exchange, which a raw argument hid from it.
        let spaced = Topology::new(Vec::new(), vec![queue], Vec::new()).namespaced("t1.");
        assert_eq!(spaced.validate(), Ok(()));
        assert_eq!(
            spaced.queues[0].declare_arguments()["x-dead-letter-exchange"],
            text("t1.dlx")
        );

        let mut exchange = Exchange {
            name: "events".into(),
            kind: ExchangeKind::Topic,
            durable: true,
            auto_delete: false,
            internal: false,
            alternate_exchange: None,
            arguments: Arguments::new(),
        };
        exchange
            .arguments
            .insert("alternate-exchange".into(), text("unrouted"));
        let refused = Topology::new(vec![exchange.clone()], Vec::new(), Vec::new());
        assert!(matches!(
            refused.validate(),
            Err(TopologyError::ReservedArgument {
                key: "alternate-exchange",
                ..
            })
        ));
        let exchange = exchange.normalized();
        assert_eq!(exchange.alternate_exchange.as_deref(), Some("unrouted"));
        assert!(exchange.arguments.is_empty());
    }

    /// Tiers edited by hand, or a wait queue left out, are refused as a whole topology.
    #[test]
    fn validate_refuses_tiers_not_laid_out() {
        let queue = backoff_queue(QueueKind::Quorum, Exhausted::DeadLetter);
        let mut queues = vec![queue.clone()];
        queues.extend(queue.wait_queues());
        let whole = Topology::new(Vec::new(), queues.clone(), Vec::new());
        assert_eq!(whole.validate(), Ok(()));

        let mut missing = whole.clone();
        missing.queues.retain(|q| q.name != "work.wait.200ms");
        assert_eq!(
            missing.validate(),
            Err(TopologyError::MissingWaitQueue {
                queue: "work".into(),
                wait_queue: "work.wait.200ms".into()
            })
        );

        let mut edited = whole;
        if let Retry::TtlBackoff(backoff) = &mut edited.queues[0].retry {
            backoff.tiers[1].delay = Duration::from_millis(201);
        }
        assert_eq!(
            edited.validate(),
            Err(TopologyError::WaitTiers {
                queue: "work".into()
            })
        );
    }

    #[test]
    fn namespacing_rewrites_every_reference() {
        let queue = backoff_queue(QueueKind::Quorum, Exhausted::DeadLetter);
        let mut queues = vec![queue.clone()];
        queues.extend(queue.wait_queues());
        let topology = Topology::new(Vec::new(), queues, Vec::new());
        let spaced = topology.namespaced("t1.");
        assert_eq!(spaced.namespace().as_str(), "t1.");
        assert_eq!(spaced.qualified("work"), "t1.work");
        assert_eq!(
            spaced.namespace().publish_target("", "work"),
            (String::new(), "t1.work".to_owned())
        );
        assert_eq!(
            spaced.namespace().publish_target("jobs", "a.b"),
            ("t1.jobs".to_owned(), "a.b".to_owned())
        );
        assert_eq!(spaced.validate(), Ok(()));
        let wait = spaced.queue("t1.work.wait.100ms").expect("wait queue");
        assert_eq!(
            wait.role,
            QueueRole::Wait {
                queue: "t1.work".into(),
                delay: Duration::from_millis(100)
            }
        );
        assert_eq!(
            wait.declare_arguments()["x-dead-letter-routing-key"],
            ArgValue::String("t1.work".into())
        );
        let main = spaced.queue("t1.work").expect("queue");
        assert_eq!(
            main.dead_letter.as_ref().map(|d| d.exchange.as_str()),
            Some("t1.dlx")
        );
        let Retry::TtlBackoff(backoff) = &main.retry else {
            panic!("ttl-backoff");
        };
        assert_eq!(backoff.tiers[0].queue, "t1.work.wait.100ms");
    }
}
