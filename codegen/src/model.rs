//! Stage 4: the checked contract as a plain IR, ready for emit.
//!
//! Nothing here knows about YAML: defaults are applied, queue arguments are resolved to the
//! `x-` arguments RabbitMQ takes, the retry infrastructure (one wait queue per ttl-backoff
//! delay tier) is derived, and messages carry their bundled schemas. Every collection is
//! ordered, so whatever is emitted from the model is deterministic.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::format::{self, RetryMode};
pub use crate::format::{
    ArgumentValue, Compression, Duration, ExchangeKind, Exhausted, OnPoison, QueueKind,
};
use crate::load::LoadedContract;
pub use crate::routing::{KeyTemplate, KeyWord};
use crate::schema::{NodeKey, SchemaBundle};

/// Default prefetch of a consumer.
pub const DEFAULT_PREFETCH: u16 = 10;
/// Default number of retries of the `immediate-requeue` and `ttl-backoff` modes.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// Default first ttl-backoff delay.
pub const DEFAULT_INITIAL_DELAY: Duration = Duration::from_millis(1_000);
/// Default ttl-backoff delay bound.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(30_000);
/// Default ttl-backoff multiplier.
pub const DEFAULT_MULTIPLIER: f64 = 2.0;
/// Default content type of messages.
pub const DEFAULT_CONTENT_TYPE: &str = "application/json";

/// A checked contract.
#[derive(Debug, Clone, PartialEq)]
pub struct Contract {
    /// The contract file as the user named it.
    pub source: PathBuf,
    /// Exchanges by name.
    pub exchanges: BTreeMap<String, Exchange>,
    /// Queues by name, including derived wait queues.
    pub queues: BTreeMap<String, Queue>,
    /// Bindings, in contract order.
    pub bindings: Vec<Binding>,
    /// Messages by name.
    pub messages: BTreeMap<String, Message>,
    /// Publishers by name.
    pub publishers: BTreeMap<String, Publisher>,
    /// Consumers by name.
    pub consumers: BTreeMap<String, Consumer>,
    /// Every payload and headers type, bundled.
    pub schemas: SchemaBundle,
    /// Every file the contract was built from (the contract and each schema file, canonical):
    /// what a build script must watch.
    pub inputs: Vec<PathBuf>,
}

/// An exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// Name.
    pub name: String,
    /// Type.
    pub kind: ExchangeKind,
    /// Survives a broker restart.
    pub durable: bool,
    /// Deleted with its last binding.
    pub auto_delete: bool,
    /// Only exchanges may publish to it.
    pub internal: bool,
    /// Declaration arguments, `alternate-exchange` included.
    pub arguments: BTreeMap<String, ArgumentValue>,
}

/// A queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    /// Name.
    pub name: String,
    /// Type.
    pub kind: QueueKind,
    /// Survives a broker restart.
    pub durable: bool,
    /// Owned by one connection.
    pub exclusive: bool,
    /// Deleted with its last consumer.
    pub auto_delete: bool,
    /// Declaration arguments: `x-queue-type`, dead-lettering, limits, TTLs…
    pub arguments: BTreeMap<String, ArgumentValue>,
    /// Where dead letters go, when the queue has a dead-letter exchange.
    pub dead_letter: Option<DeadLetter>,
    /// How failed deliveries are retried.
    pub retry: RetryPolicy,
    /// What happens to messages that cannot be decoded or validated.
    pub on_poison: OnPoison,
    /// What this queue is for.
    pub role: QueueRole,
}

/// Why a queue exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueRole {
    /// Declared in the contract.
    Declared,
    /// A ttl-backoff wait queue of `queue`: messages wait `delay`, then dead-letter back.
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
    /// The dead-letter exchange; `""` is the default exchange.
    pub exchange: String,
    /// The routing key dead letters get; `None` keeps each message's own key.
    pub routing_key: Option<String>,
}

/// A queue's retry policy, with defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryPolicy {
    /// No retries.
    None,
    /// Return failed messages to the queue at once.
    ImmediateRequeue {
        /// Retries after the first delivery.
        max_retries: u32,
        /// What happens when they are spent.
        exhausted: Exhausted,
    },
    /// Park failed messages in wait queues for growing delays.
    TtlBackoff {
        /// Retries after the first delivery.
        max_retries: u32,
        /// Delay before the first retry.
        initial_delay: Duration,
        /// Upper bound of the delay.
        max_delay: Duration,
        /// Factor between consecutive delays.
        multiplier: f64,
        /// Spread the retries of messages that failed together.
        jitter: bool,
        /// What happens when retries are spent.
        exhausted: Exhausted,
        /// The wait queues, one per distinct delay (jitter buckets included), shortest
        /// first.
        tiers: Vec<WaitTier>,
    },
    /// The broker counts deliveries against `x-delivery-limit` and dead-letters past it.
    QuorumNative {
        /// The queue's delivery limit.
        delivery_limit: u32,
    },
}

/// One delay tier of a ttl-backoff queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitTier {
    /// The wait queue's name.
    pub queue: String,
    /// Its message TTL.
    pub delay: Duration,
}

/// The delay before retry `attempt` (0-based) of a ttl-backoff policy, before jitter:
/// `min(initial × multiplier^attempt, max)`.
pub fn backoff_delay(initial: Duration, max: Duration, multiplier: f64, attempt: u32) -> Duration {
    let exponent = i32::try_from(attempt).unwrap_or(i32::MAX);
    let millis = initial.as_millis() as f64 * multiplier.powi(exponent);
    if !millis.is_finite() || millis >= max.as_millis() as f64 {
        max
    } else {
        Duration::from_millis(millis.round() as u64)
    }
}

/// The name of the wait queue of `queue` for `delay`: `<queue>.wait.<delay>`.
pub fn wait_queue_name(queue: &str, delay: Duration) -> String {
    format!("{queue}.wait.{delay}")
}

/// The `x-delivery-limit` of a quorum queue whose retries never end (`exhausted: requeue`)
/// or that has no dead-letter exchange (where the broker would drop what passes the limit).
/// The largest limit a signed 32-bit argument carries, which every RabbitMQ version takes.
pub const QUORUM_UNLIMITED: u32 = i32::MAX as u32;

/// Jitter buckets: with jitter on, a retry due after `d` waits `d × f` for one of these `f`,
/// chosen at random, each in a wait queue of its own. Per-message TTLs cannot do this: a
/// queue only expires the message at its head, so a cohort would leave together anyway.
pub const JITTER_BUCKETS: [(u64, u64); 4] = [(1, 1), (5, 6), (2, 3), (1, 2)];

/// The delay of jitter bucket `(numerator, denominator)` of `base`, in whole milliseconds.
pub fn jitter_bucket(base: Duration, (numerator, denominator): (u64, u64)) -> Duration {
    let millis = u128::from(base.as_millis()) * u128::from(numerator) / u128::from(denominator);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// Most wait queues one ttl-backoff queue may need; the checks refuse policies above it.
pub const MAX_WAIT_TIERS: usize = 64;

/// The distinct delays of a ttl-backoff policy, shortest first. Stops once the delay reaches
/// `max` (it never grows again) or once there are more than [`MAX_WAIT_TIERS`] tiers, so a
/// huge `max_retries` costs nothing.
pub fn delay_tiers(
    max_retries: u32,
    initial: Duration,
    max: Duration,
    multiplier: f64,
) -> Vec<Duration> {
    let mut tiers: Vec<Duration> = Vec::new();
    for attempt in 0..max_retries {
        let delay = backoff_delay(initial, max, multiplier, attempt);
        if tiers.last() != Some(&delay) {
            tiers.push(delay);
        }
        if delay >= max || multiplier <= 1.0 || tiers.len() > MAX_WAIT_TIERS {
            break;
        }
    }
    tiers.sort();
    tiers.dedup();
    tiers
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
    /// Binding arguments: `x-match` and header values for headers exchanges, plus extras.
    pub arguments: BTreeMap<String, ArgumentValue>,
}

/// A binding's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A queue.
    Queue(String),
    /// An exchange.
    Exchange(String),
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
    /// Target exchange (`""` is the default exchange).
    pub exchange: String,
    /// Routing key with its placeholders.
    pub routing_key: KeyTemplate,
    /// The routing key as written.
    pub routing_key_text: String,
    /// Message type published.
    pub message: String,
    /// Body compression.
    pub compression: Option<Compression>,
}

/// A consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    /// Name in the contract.
    pub name: String,
    /// Queue consumed.
    pub queue: String,
    /// Message type expected.
    pub message: String,
    /// Prefetch (`basic.qos`).
    pub prefetch: u16,
    /// Handlers running at once.
    pub concurrency: u16,
    /// Batch settings, for batch consumers.
    pub batch: Option<Batch>,
    /// Circuit breaker settings; `None` never stops taking deliveries.
    pub circuit_breaker: Option<CircuitBreaker>,
}

/// Batch delivery settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Most messages per batch.
    pub size: u16,
    /// Longest wait for a batch to fill.
    pub timeout: Duration,
}

/// Circuit breaker settings of a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreaker {
    /// Consecutive retryable failures that open the breaker.
    pub failures: u32,
    /// How long the breaker stays open before a probe.
    pub cool_down: Duration,
}

/// Builds the model from a contract that passed every check. `Err` lists what the model
/// cannot represent although the checks let it through: a bug in warren, reported rather than
/// turned into wrong output.
pub(crate) fn build(
    loaded: &LoadedContract,
    schemas: SchemaBundle,
    entries: &BTreeMap<String, (NodeKey, Option<NodeKey>)>,
    type_names: &BTreeMap<NodeKey, String>,
) -> Result<Contract, String> {
    let bugs = std::cell::RefCell::new(Vec::new());
    let bug = |text: String| bugs.borrow_mut().push(text);
    let file = &loaded.file;
    let exchanges = file
        .exchanges
        .iter()
        .map(|(name, e)| (name.clone(), exchange(name, e)))
        .collect();
    let mut queues = BTreeMap::new();
    for (name, q) in &file.queues {
        let declared = queue(name, q);
        for wait in wait_queues(&declared) {
            queues.insert(wait.name.clone(), wait);
        }
        queues.insert(name.clone(), declared);
    }
    let schema_type = |key: &NodeKey| {
        let type_name = type_names.get(key).cloned().unwrap_or_else(|| {
            bug(format!("no Rust type was named for the schema at {key:?}"));
            String::new()
        });
        SchemaType {
            schema: schemas.standalone(&type_name),
            type_name,
        }
    };
    let messages = file
        .messages
        .iter()
        .filter_map(|(name, m)| {
            let Some((payload, headers)) = entries.get(name) else {
                bug(format!("message `{name}` has no bundled schema"));
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
                },
            ))
        })
        .collect();
    let publishers = file
        .publishers
        .iter()
        .map(|(name, p)| {
            let text = p.routing_key.clone().unwrap_or_default();
            let publisher = Publisher {
                name: name.clone(),
                exchange: p.exchange.clone(),
                routing_key: KeyTemplate::parse(&text).unwrap_or_else(|_| {
                    bug(format!(
                        "publisher `{name}`'s routing key `{text}` does not parse"
                    ));
                    KeyTemplate::empty()
                }),
                routing_key_text: text,
                message: p.message.clone(),
                compression: p.compression,
            };
            (name.clone(), publisher)
        })
        .collect();
    let consumers = file
        .consumers
        .iter()
        .map(|(name, c)| {
            let consumer = Consumer {
                name: name.clone(),
                queue: c.queue.clone(),
                message: c.message.clone(),
                prefetch: c.prefetch.unwrap_or(DEFAULT_PREFETCH),
                concurrency: c.concurrency.unwrap_or(1),
                batch: c.batch.as_ref().map(|b| Batch {
                    size: b.size,
                    timeout: b.timeout,
                }),
                circuit_breaker: c.circuit_breaker.as_ref().map(|b| CircuitBreaker {
                    failures: b.failures,
                    cool_down: b.cool_down,
                }),
            };
            (name.clone(), consumer)
        })
        .collect();
    let mut inputs = vec![loaded.paths.contract().to_owned()];
    inputs.extend(schemas.files.iter().cloned());
    let bindings = file
        .bindings
        .iter()
        .filter_map(|b| {
            binding(b).or_else(|| {
                bug(format!("a binding of `{}` has no destination", b.exchange));
                None
            })
        })
        .collect();
    let bugs = bugs.into_inner();
    if !bugs.is_empty() {
        return Err(bugs.join("; "));
    }
    Ok(Contract {
        source: loaded.path().to_owned(),
        exchanges,
        queues,
        bindings,
        messages,
        publishers,
        consumers,
        schemas,
        inputs,
    })
}

fn exchange(name: &str, e: &format::Exchange) -> Exchange {
    let mut arguments = e.arguments.clone();
    if let Some(alternate) = &e.alternate_exchange {
        arguments.insert(
            "alternate-exchange".to_owned(),
            ArgumentValue::String(alternate.clone()),
        );
    }
    Exchange {
        name: name.to_owned(),
        kind: e.kind.unwrap_or_default(),
        durable: e.durable.unwrap_or(true),
        auto_delete: e.auto_delete.unwrap_or(false),
        internal: e.internal.unwrap_or(false),
        arguments,
    }
}

/// The retry policy of a queue with defaults applied.
pub(crate) fn retry_policy(name: &str, q: &format::Queue) -> RetryPolicy {
    let Some(retry) = &q.retry else {
        return RetryPolicy::None;
    };
    let max_retries = retry.max_retries.unwrap_or(DEFAULT_MAX_RETRIES);
    let exhausted = retry.exhausted.unwrap_or_default();
    match retry.mode.unwrap_or_default() {
        RetryMode::None => RetryPolicy::None,
        RetryMode::ImmediateRequeue => RetryPolicy::ImmediateRequeue {
            max_retries,
            exhausted,
        },
        RetryMode::TtlBackoff => {
            let initial_delay = retry.initial_delay.unwrap_or(DEFAULT_INITIAL_DELAY);
            let max_delay = retry.max_delay.unwrap_or(DEFAULT_MAX_DELAY);
            let multiplier = retry.multiplier.unwrap_or(DEFAULT_MULTIPLIER);
            let jitter = retry.jitter.unwrap_or(true);
            let mut delays = delay_tiers(max_retries, initial_delay, max_delay, multiplier);
            if jitter {
                delays = delays
                    .iter()
                    .flat_map(|base| JITTER_BUCKETS.map(|bucket| jitter_bucket(*base, bucket)))
                    .collect();
                delays.sort();
                delays.dedup();
            }
            let tiers = delays
                .into_iter()
                .map(|delay| WaitTier {
                    queue: wait_queue_name(name, delay),
                    delay,
                })
                .collect();
            RetryPolicy::TtlBackoff {
                max_retries,
                initial_delay,
                max_delay,
                multiplier,
                jitter,
                exhausted,
                tiers,
            }
        }
        RetryMode::QuorumNative => RetryPolicy::QuorumNative {
            delivery_limit: q.delivery_limit.unwrap_or_default(),
        },
    }
}

fn queue(name: &str, q: &format::Queue) -> Queue {
    let kind = q.kind.unwrap_or_default();
    let retry = retry_policy(name, q);
    let mut arguments = q.arguments.clone();
    let mut set = |key: &str, value: ArgumentValue| {
        arguments.insert(key.to_owned(), value);
    };
    let text = |s: &str| ArgumentValue::String(s.to_owned());
    let int = |n: u64| ArgumentValue::Int(i64::try_from(n).unwrap_or(i64::MAX));
    set("x-queue-type", text(kind.as_str()));
    if let Some(dl) = &q.dead_letter {
        set("x-dead-letter-exchange", text(&dl.exchange));
        if let Some(key) = &dl.routing_key {
            set("x-dead-letter-routing-key", text(key));
        }
    }
    if kind == QueueKind::Quorum {
        // Always explicit: RabbitMQ 4 defaults the limit to 20 and 3.10 has none. One above
        // the retry budget, so the worker, not the broker, decides when a message is
        // exhausted (and adds the reason). Past the limit RabbitMQ dead-letters the message,
        // or drops it when the queue has nowhere to dead-letter: such a queue (a dead-letter
        // queue itself, typically, where a crashing DLQ consumer or a peek with requeue
        // returns messages) gets no limit that drops, the largest one AMQP carries, and so
        // does `exhausted: requeue`, which asks for no limit at all.
        let dead_letters = q.dead_letter_exchange().is_some();
        let limit = match retry {
            _ if !dead_letters => QUORUM_UNLIMITED,
            RetryPolicy::ImmediateRequeue {
                exhausted: Exhausted::Requeue,
                ..
            }
            | RetryPolicy::TtlBackoff {
                exhausted: Exhausted::Requeue,
                ..
            } => QUORUM_UNLIMITED,
            RetryPolicy::ImmediateRequeue { max_retries, .. }
            | RetryPolicy::TtlBackoff { max_retries, .. } => max_retries.saturating_add(1),
            _ => 1,
        };
        let limit = q.delivery_limit.unwrap_or(limit);
        set("x-delivery-limit", int(u64::from(limit)));
    }
    if let Some(ttl) = q.message_ttl {
        set("x-message-ttl", int(ttl.as_millis()));
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
        set("x-overflow", text(overflow.as_str()));
    }
    if let Some(single) = q.single_active_consumer {
        set("x-single-active-consumer", ArgumentValue::Bool(single));
    }
    if let Some(priority) = q.max_priority {
        set("x-max-priority", int(u64::from(priority)));
    }
    Queue {
        name: name.to_owned(),
        kind,
        durable: q.durable.unwrap_or(true),
        exclusive: q.exclusive.unwrap_or(false),
        auto_delete: q.auto_delete.unwrap_or(false),
        arguments,
        dead_letter: q.dead_letter.as_ref().map(|dl| DeadLetter {
            exchange: dl.exchange.clone(),
            routing_key: dl.routing_key.clone(),
        }),
        retry,
        on_poison: q.on_poison.unwrap_or_default(),
        role: QueueRole::Declared,
    }
}

/// The wait queues of a ttl-backoff queue: each holds messages for its delay, then
/// dead-letters them back to the queue through the default exchange (never through the
/// original exchange, where sibling queues would get copies). They are quorum queues with
/// at-least-once dead-lettering when the main queue is a quorum queue, so the hop back is
/// not at-most-once.
fn wait_queues(main: &Queue) -> Vec<Queue> {
    let RetryPolicy::TtlBackoff { tiers, .. } = &main.retry else {
        return Vec::new();
    };
    tiers
        .iter()
        .map(|tier| {
            let mut arguments = BTreeMap::new();
            let text = |s: &str| ArgumentValue::String(s.to_owned());
            arguments.insert("x-queue-type".to_owned(), text(main.kind.as_str()));
            arguments.insert(
                "x-message-ttl".to_owned(),
                ArgumentValue::Int(i64::try_from(tier.delay.as_millis()).unwrap_or(i64::MAX)),
            );
            arguments.insert("x-dead-letter-exchange".to_owned(), text(""));
            arguments.insert("x-dead-letter-routing-key".to_owned(), text(&main.name));
            if main.kind == QueueKind::Quorum {
                arguments.insert("x-dead-letter-strategy".to_owned(), text("at-least-once"));
                arguments.insert("x-overflow".to_owned(), text("reject-publish"));
            }
            Queue {
                name: tier.queue.clone(),
                kind: main.kind,
                durable: main.durable,
                exclusive: false,
                auto_delete: false,
                arguments,
                dead_letter: Some(DeadLetter {
                    exchange: String::new(),
                    routing_key: Some(main.name.clone()),
                }),
                retry: RetryPolicy::None,
                on_poison: OnPoison::DeadLetter,
                role: QueueRole::Wait {
                    queue: main.name.clone(),
                    delay: tier.delay,
                },
            }
        })
        .collect()
}

/// The binding `b`, or `None` when it names no destination (the checks refuse that).
fn binding(b: &format::Binding) -> Option<Binding> {
    let mut arguments = b.arguments.clone();
    if !b.headers.is_empty() || b.headers_match.is_some() {
        let mode = b.headers_match.unwrap_or_default().as_str();
        arguments.insert("x-match".to_owned(), ArgumentValue::String(mode.to_owned()));
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
    use super::{Duration, backoff_delay, delay_tiers};

    #[test]
    fn backoff_grows_then_caps() {
        let ms = Duration::from_millis;
        let delays: Vec<u64> = (0..6)
            .map(|a| backoff_delay(ms(1000), ms(10_000), 2.0, a).as_millis())
            .collect();
        assert_eq!(delays, [1000, 2000, 4000, 8000, 10_000, 10_000]);
        let tiers: Vec<u64> = delay_tiers(6, ms(1000), ms(10_000), 2.0)
            .into_iter()
            .map(Duration::as_millis)
            .collect();
        assert_eq!(tiers, [1000, 2000, 4000, 8000, 10_000]);
        assert_eq!(backoff_delay(ms(1), ms(5), 1e308, 1000).as_millis(), 5);
    }
}
