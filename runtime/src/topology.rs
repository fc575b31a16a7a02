//! The description of a contract's topology: what a generated `topology()` returns and what
//! the runtime declares.
//!
//! Every queue carries its resolved declaration arguments (`x-queue-type`,
//! `x-dead-letter-exchange`, `x-delivery-limit`, TTLs, lengths…) and its retry policy; the
//! wait queues of `ttl-backoff` retries are queues of their own, listed with the rest.

use std::collections::BTreeMap;
use std::time::Duration;

/// Declaration arguments, by name.
pub type Arguments = BTreeMap<String, ArgValue>;

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

/// Every exchange, queue and binding of a contract.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    /// Exchanges, by name order.
    pub exchanges: Vec<Exchange>,
    /// Queues, by name order, wait queues included.
    pub queues: Vec<Queue>,
    /// Bindings, in contract order.
    pub bindings: Vec<Binding>,
    /// The prefix every name carries (empty unless [`Topology::namespaced`] was used).
    pub namespace: String,
}

impl Topology {
    /// The same topology with every exchange and queue name prefixed with `prefix`, and every
    /// reference to them (bindings, dead-letter targets, wait queues, alternate exchanges)
    /// rewritten to match. Several services or test runs can then share one broker without
    /// seeing each other's messages; a worker built on the result consumes the prefixed
    /// queues, and a [`crate::Publisher`] built on it publishes to its exchanges.
    pub fn namespaced(&self, prefix: &str) -> Self {
        let name = |n: &str| format!("{prefix}{n}");
        let exchange_ref = |n: &str| if n.is_empty() { String::new() } else { name(n) };
        let mut topology = self.clone();
        topology.namespace = format!("{prefix}{}", self.namespace);
        for exchange in &mut topology.exchanges {
            exchange.name = name(&exchange.name);
            if let Some(ArgValue::String(alternate)) =
                exchange.arguments.get_mut("alternate-exchange")
            {
                *alternate = name(alternate);
            }
        }
        for queue in &mut topology.queues {
            queue.name = name(&queue.name);
            let mut to_default_exchange = false;
            if let Some(ArgValue::String(dlx)) = queue.arguments.get_mut("x-dead-letter-exchange") {
                to_default_exchange = dlx.is_empty();
                *dlx = exchange_ref(dlx);
            }
            if to_default_exchange
                && let Some(ArgValue::String(key)) =
                    queue.arguments.get_mut("x-dead-letter-routing-key")
            {
                // Through the default exchange, the key is a queue name.
                *key = name(key);
            }
            if let Some(dead_letter) = &mut queue.dead_letter {
                if dead_letter.exchange.is_empty() {
                    dead_letter.routing_key = dead_letter.routing_key.as_deref().map(name);
                }
                dead_letter.exchange = exchange_ref(&dead_letter.exchange);
            }
            if let Retry::TtlBackoff(backoff) = &mut queue.retry {
                for tier in &mut backoff.tiers {
                    tier.queue = name(&tier.queue);
                }
            }
            queue.wait_queue_of = queue.wait_queue_of.as_deref().map(name);
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

    /// The queue named `name`.
    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queues.iter().find(|q| q.name == name)
    }

    /// The exchange named `name`.
    pub fn exchange(&self, name: &str) -> Option<&Exchange> {
        self.exchanges.iter().find(|e| e.name == name)
    }
}

/// The kind of an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeKind {
    /// Topic patterns.
    Topic,
    /// Exact keys.
    Direct,
    /// Every bound queue.
    Fanout,
    /// Header matching.
    Headers,
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
    /// Declaration arguments (`alternate-exchange`…).
    pub arguments: Arguments,
}

/// The kind of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// Replicated quorum queue.
    Quorum,
    /// Classic queue.
    Classic,
    /// Stream.
    Stream,
}

/// A queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: QueueKind,
    /// Survives a broker restart.
    pub durable: bool,
    /// Owned by one connection.
    pub exclusive: bool,
    /// Deleted with its last consumer.
    pub auto_delete: bool,
    /// Declaration arguments, `x-queue-type` and dead-lettering included.
    pub arguments: Arguments,
    /// Where dead letters go.
    pub dead_letter: Option<DeadLetter>,
    /// How failed deliveries are retried.
    pub retry: Retry,
    /// What happens to messages that cannot be decoded or validated.
    pub on_poison: OnPoison,
    /// For a ttl-backoff wait queue, the queue its messages return to.
    pub wait_queue_of: Option<String>,
}

/// A queue's dead-letter target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The exchange (`""` is the default exchange).
    pub exchange: String,
    /// The routing key dead letters get; `None` keeps their own.
    pub routing_key: Option<String>,
}

/// A queue's retry policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Retry {
    /// No retries: a retryable failure is dead-lettered like a non-retryable one.
    None,
    /// Return failed messages to the queue at once.
    ImmediateRequeue {
        /// Retries after the first delivery.
        max_retries: u32,
        /// What happens when they are spent.
        exhausted: Exhausted,
    },
    /// Park failed messages in wait queues.
    TtlBackoff(Backoff),
    /// The broker counts deliveries against `x-delivery-limit`.
    QuorumNative {
        /// The delivery limit.
        delivery_limit: u32,
    },
}

/// A ttl-backoff schedule: the delay before retry `n` (from 0) is
/// `min(initial_delay × multiplier^n, max_delay)`, before jitter.
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    /// Retries after the first delivery.
    pub max_retries: u32,
    /// Delay before the first retry.
    pub initial_delay: Duration,
    /// Upper bound of the delay.
    pub max_delay: Duration,
    /// Factor between consecutive delays.
    pub multiplier: f64,
    /// Spread the retries of messages that failed together.
    pub jitter: bool,
    /// What happens when retries are spent.
    pub exhausted: Exhausted,
    /// The wait queues, one per distinct delay, shortest first.
    pub tiers: Vec<WaitTier>,
}

impl Backoff {
    /// The delay before retry `attempt` (from 0), before jitter:
    /// `min(initial_delay × multiplier^attempt, max_delay)`, in whole milliseconds (the same
    /// arithmetic the generator used to name the tiers).
    pub fn delay(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt).unwrap_or(i32::MAX);
        let millis = self.initial_delay.as_millis() as f64 * self.multiplier.powi(exponent);
        if !millis.is_finite() || millis >= self.max_delay.as_millis() as f64 {
            self.max_delay
        } else {
            Duration::from_millis(millis.round() as u64)
        }
    }

    /// The wait tier of retry `attempt` (from 0). Without jitter, the tier of
    /// [`Backoff::delay`]; with jitter, `random` (in `[0, 1)`) picks one of the
    /// [`JITTER_BUCKETS`] of that delay, each a wait queue of its own. A delay the topology
    /// has no tier for falls back to the longest tier not above it.
    pub fn tier(&self, attempt: u32, random: f64) -> Option<&WaitTier> {
        let base = self.delay(attempt);
        let wanted = if self.jitter {
            let index = (random.clamp(0.0, 1.0) * JITTER_BUCKETS.len() as f64) as usize;
            jitter_bucket(base, JITTER_BUCKETS[index.min(JITTER_BUCKETS.len() - 1)])
        } else {
            base
        };
        self.tiers
            .iter()
            .rev()
            .find(|tier| tier.delay <= wanted)
            .or_else(|| self.tiers.first())
    }
}

/// Jitter buckets, as fractions of a delay: with jitter on, a retry due after `d` waits
/// `d`, `5/6 d`, `2/3 d` or `1/2 d`, chosen at random, in a wait queue per bucket. (The
/// generator derives the same wait queues; per-message TTLs cannot do this, since a queue only
/// expires the message at its head and a cohort would leave together anyway.)
pub const JITTER_BUCKETS: [(u64, u64); 4] = [(1, 1), (5, 6), (2, 3), (1, 2)];

/// The delay of jitter bucket `(numerator, denominator)` of `base`, in whole milliseconds.
pub fn jitter_bucket(base: Duration, (numerator, denominator): (u64, u64)) -> Duration {
    let millis = base.as_millis() * u128::from(numerator) / u128::from(denominator);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// One delay tier of a ttl-backoff queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitTier {
    /// The wait queue.
    pub queue: String,
    /// Its message TTL.
    pub delay: Duration,
}

/// What happens once retries are spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// Dead-letter the message.
    DeadLetter,
    /// Acknowledge and drop it, with a log line.
    Drop,
    /// Return it to the queue, with a warning.
    Requeue,
}

/// What happens to a message that cannot be decoded or validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnPoison {
    /// Dead-letter it, with the reason in its headers.
    DeadLetter,
    /// Acknowledge and drop it, with a log line.
    Drop,
}

/// A binding.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// Source exchange.
    pub exchange: String,
    /// Destination.
    pub destination: Destination,
    /// Binding key.
    pub routing_key: String,
    /// Binding arguments (`x-match` and header values on headers exchanges).
    pub arguments: Arguments,
}

/// A binding's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A queue.
    Queue(String),
    /// An exchange.
    Exchange(String),
}
