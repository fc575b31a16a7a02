//! Publishing typed payloads with publisher confirms.

use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{FieldTable, ShortString};
use tracing::Instrument as _;

use crate::clock::unix_seconds;
use crate::codec::{compress, validated_payload};
use crate::confirms::{ConfirmChannel, Outcome};
use crate::error::{MessagePart, ShortField};
use crate::model::limits::{MAX_EXPIRATION_MILLIS, MAX_SHORT_STRING};
use crate::model::rpc::DIRECT_REPLY_TO;
use crate::model::{Compression, Namespace, Publication};
use crate::schema::Validators;
use crate::sync::lock;
use crate::{Connection, Message, PublishError, Topology, amqp};

/// How long a publish waits for the broker's confirm by default.
pub const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Per-message properties a caller may set instead of the defaults, passed to the generated
/// `Publishers::with(options)`. Checked before anything is sent: a value the broker would
/// refuse (and close the publishing channel for) is a [`PublishError`] instead.
///
/// ```
/// use std::time::Duration;
/// use warren_runtime::PublishOptions;
/// // The business key as message id, so a consumer deduplicates a second publish of it.
/// let options = PublishOptions::default()
///     .message_id("order-42")
///     .timestamp(1_796_000_000)
///     .correlation_id("checkout-7")
///     .expiration(Duration::from_secs(60))
///     .priority(5);
/// assert_eq!(options.message_id.as_deref(), Some("order-42"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishOptions {
    /// The message id; by default a new UUID v7 (time-ordered). Consumers deduplicate on it,
    /// so set it to a business key when the same fact may be published twice.
    pub message_id: Option<String>,
    /// The timestamp, in seconds since the Unix epoch; by default now.
    pub timestamp: Option<u64>,
    /// The correlation id: ties a message to another (a request to its reply, an event to the
    /// command that caused it). At most 255 bytes.
    pub correlation_id: Option<String>,
    /// Where a reply is expected: a queue name. At most 255 bytes. RabbitMQ's direct reply-to
    /// (`amq.rabbitmq.reply-to`) is refused: the broker takes it only from a channel that
    /// consumes the replies.
    pub reply_to: Option<String>,
    /// How long the message may wait in a queue before the broker expires it (dead-lettered
    /// as `expired` where the queue has a dead-letter exchange, else dropped); whole
    /// milliseconds, at most about 49 days. Warren's retry and dead-letter copies do not
    /// keep it: a retry is not cut short by the first attempt's deadline.
    pub expiration: Option<Duration>,
    /// The priority: at most the highest `max_priority` of the queues the publication
    /// reaches, and refused ([`PublishError::Priority`]) where none declares one. The broker
    /// would take any value (counting a higher one as the maximum, ignoring it on a queue
    /// without priorities); refusing it says the contract and the code disagree before a
    /// message is silently ordered otherwise than its publisher meant.
    pub priority: Option<u8>,
}

impl PublishOptions {
    /// Sets the message id.
    pub fn message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Sets the timestamp (seconds since the Unix epoch).
    pub fn timestamp(mut self, seconds: u64) -> Self {
        self.timestamp = Some(seconds);
        self
    }

    /// Sets the correlation id.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// Sets the reply-to address.
    pub fn reply_to(mut self, address: impl Into<String>) -> Self {
        self.reply_to = Some(address.into());
        self
    }

    /// Sets the expiration (see [`PublishOptions::expiration`]).
    pub fn expiration(mut self, expiration: Duration) -> Self {
        self.expiration = Some(expiration);
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = Some(priority);
        self
    }

    /// These options, with each setting `over` has taking the place of this one's (the
    /// generated `Publishers::with` adds options this way).
    ///
    /// ```
    /// # use warren_runtime::PublishOptions;
    /// let base = PublishOptions::default().correlation_id("checkout-7");
    /// let both = base.overridden_by(PublishOptions::default().priority(5));
    /// assert_eq!(both, PublishOptions::default().correlation_id("checkout-7").priority(5));
    /// ```
    #[must_use]
    pub fn overridden_by(self, over: PublishOptions) -> Self {
        Self {
            message_id: over.message_id.or(self.message_id),
            timestamp: over.timestamp.or(self.timestamp),
            correlation_id: over.correlation_id.or(self.correlation_id),
            reply_to: over.reply_to.or(self.reply_to),
            expiration: over.expiration.or(self.expiration),
            priority: over.priority.or(self.priority),
        }
    }

    /// `properties` with the options a caller set beyond the message id and timestamp,
    /// checked first: nothing the broker would refuse is sent. The priority is checked
    /// against the queues reached by [`check_priority`], which needs what only the caller
    /// knows (a publication's or an RPC target's `max_priority`): call it first.
    pub(crate) fn apply(
        &self,
        mut properties: BasicProperties,
    ) -> Result<BasicProperties, PublishError> {
        if let Some(id) = &self.correlation_id {
            short(ShortField::CorrelationId, id)?;
            properties = properties.with_correlation_id(ShortString::from(id.as_str()));
        }
        if let Some(address) = &self.reply_to {
            short(ShortField::ReplyTo, address)?;
            if address.starts_with(DIRECT_REPLY_TO) {
                return Err(PublishError::DirectReplyTo);
            }
            properties = properties.with_reply_to(ShortString::from(address.as_str()));
        }
        if let Some(expiration) = self.expiration {
            let millis = expiration.as_millis();
            if millis > u128::from(MAX_EXPIRATION_MILLIS) {
                return Err(PublishError::ExpirationTooLong { millis });
            }
            properties = properties.with_expiration(ShortString::from(millis.to_string()));
        }
        if let Some(priority) = self.priority {
            properties = properties.with_priority(priority);
        }
        Ok(properties)
    }
}

/// `priority` (as a caller set it, if at all) checked against `max_priority`, the highest
/// `max_priority` of the queues a message reaches (`None`: none declares one): a priority above
/// it, or any priority where no queue declares one, is [`PublishError::Priority`]. The one rule
/// for publishes ([`PublishOptions::priority`]) and calls (`rpc::CallOptions::priority`
/// against `RpcTarget::max_priority`).
pub(crate) fn check_priority(
    priority: Option<u8>,
    max_priority: Option<u8>,
) -> Result<(), PublishError> {
    match priority {
        Some(priority) if max_priority.is_none_or(|max| priority > max) => {
            Err(PublishError::Priority {
                priority,
                max_priority,
            })
        }
        _ => Ok(()),
    }
}

/// Publishes typed messages with confirms. Cheap to clone: clones share one channel.
///
/// The channel is reopened (in confirm mode) whenever it or the connection was lost, so a
/// publisher outlives broker restarts. A publish never reports success it did not get: when
/// the connection drops while a confirm is pending, it fails with
/// [`PublishError::Unconfirmed`], the outcome unknown.
#[derive(Clone)]
pub struct Publisher {
    connection: Connection,
    channel: Arc<ChannelSlot>,
    namespace: Arc<Namespace>,
    timeout: Duration,
    /// Counters per exchange, registered on first use (`crate::metrics`).
    metrics: Arc<crate::metrics::PublishMetrics>,
}

/// The publishing channel, shared by clones, and the lock that serialises reopening it.
#[derive(Default)]
struct ChannelSlot {
    current: std::sync::Mutex<Option<ConfirmChannel>>,
    reopening: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("connection", &self.connection)
            .field("namespace", &self.namespace)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// A publisher on `connection` for the exchanges of `topology`, its channel opened (in
    /// confirm mode) at once so that a broker refusing channels is reported here rather than
    /// at the first publish.
    ///
    /// The topology's namespace ([`Topology::namespaced`]) is the publisher's: exchange names
    /// (and queue names used as keys on the default exchange) are prefixed with it, so the
    /// publisher reaches the exchanges [`crate::declare`] declared and the [`crate::Worker`]
    /// built on the same topology consumes from.
    ///
    /// ```no_run
    /// # async fn run(topology: warren_runtime::Topology) -> Result<(), Box<dyn std::error::Error>> {
    /// use warren_runtime::{Connection, Publisher};
    /// let connection = Connection::connect("amqp://guest:guest@localhost:5672/%2f", "billing").await?;
    /// // The generated `topology()` in your crate; the namespace is set here, once.
    /// let topology = topology.namespaced("staging.");
    /// warren_runtime::declare(&connection, &topology).await?;
    /// let publisher = Publisher::new(&connection, &topology).await?;
    /// // Then the generated `Publishers::new(publisher)`.
    /// # Ok(()) }
    /// ```
    pub async fn new(connection: &Connection, topology: &Topology) -> Result<Self, PublishError> {
        crate::metrics::describe();
        Self::open(connection, topology.namespace().clone()).await
    }

    /// A publisher whose names are prefixed with `namespace`. The worker's retry and
    /// dead-letter copies pass none: their names come from the topology, namespaced already.
    pub(crate) async fn open(
        connection: &Connection,
        namespace: Namespace,
    ) -> Result<Self, PublishError> {
        let publisher = Self {
            connection: connection.clone(),
            channel: Arc::default(),
            namespace: Arc::new(namespace),
            timeout: DEFAULT_PUBLISH_TIMEOUT,
            metrics: Arc::default(),
        };
        publisher
            .channel(crate::connection::deadline_after(publisher.timeout))
            .await?;
        Ok(publisher)
    }

    /// How long a publish may take in all, reconnecting included, before it gives up
    /// (default 30 s): with [`PublishError::NotConnected`] while the connection is down (the
    /// message was not sent), with [`PublishError::Timeout`] or [`PublishError::Blocked`]
    /// when it was sent but not confirmed in time.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Publishes `payload` and `headers` as message `M` ([`prepared`]), and waits for the
    /// broker's confirm. Succeeds only when the broker confirmed the message and did not
    /// return it as unroutable.
    pub(crate) async fn publish_with<M: Message>(
        &self,
        publication: Publication<&str>,
        payload: &M::Payload,
        headers: &M::Headers,
        options: &PublishOptions,
    ) -> Result<(), PublishError> {
        let (
            Prepared {
                exchange,
                routing_key,
                body,
                properties,
            },
            span,
        ) = prepared::<M>(&self.namespace, publication, payload, headers, options)?.traced();
        let sent = self
            .send(&exchange, &routing_key, &body, properties)
            .instrument(span.clone())
            .await;
        crate::trace::published(&span, &sent);
        sent
    }

    /// How long a publish may take in all ([`Publisher::timeout`]).
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn publish_timeout(&self) -> Duration {
        self.timeout
    }

    /// Records the result of a publish to `exchange` (as the contract names it) in the
    /// publish metrics.
    pub(crate) fn record(&self, exchange: &str, result: &Result<(), PublishError>) {
        self.metrics.record(exchange, result);
    }

    /// An open channel in confirm mode: the current one, or a new one on the current link, by
    /// `deadline`. A new channel waits for the broker's answer, which a broker that blocked
    /// the connection (a resource alarm) does not give until the alarm clears.
    async fn channel(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<ConfirmChannel, PublishError> {
        if let Some(channel) = self.open_channel() {
            return Ok(channel);
        }
        tokio::time::timeout_at(deadline, self.reopen(deadline))
            .await
            .map_err(|_| PublishError::NotConnected(self.timeout))?
    }

    /// A new channel on the current link, unless another publish opened one meanwhile.
    async fn reopen(&self, deadline: tokio::time::Instant) -> Result<ConfirmChannel, PublishError> {
        let _reopening = self.channel.reopening.lock().await;
        // Another publish may have reopened it while this one waited.
        if let Some(channel) = self.open_channel() {
            return Ok(channel);
        }
        let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
        let connection = self
            .connection
            .current(wait)
            .await
            .map_err(|_| PublishError::NotConnected(self.timeout))?;
        let channel = ConfirmChannel::open(&connection).await?;
        *lock(&self.channel.current) = Some(channel.clone());
        Ok(channel)
    }

    fn open_channel(&self) -> Option<ConfirmChannel> {
        lock(&self.channel.current)
            .as_ref()
            .filter(|channel| channel.channel().status().connected())
            .cloned()
    }

    /// The `frame_max` negotiated on the current link (RabbitMQ's default while there is
    /// none: nothing is published then anyway).
    pub(crate) fn frame_max(&self) -> usize {
        self.connection
            .lapin()
            .and_then(|c| usize::try_from(c.configuration().frame_max()).ok())
            .unwrap_or(crate::wire::RABBITMQ_FRAME_MAX)
    }

    /// Publishes raw bytes, `mandatory`, and waits for the confirm, all bounded by the
    /// timeout. Nothing is retried once sent: a second copy could duplicate the first.
    pub(crate) async fn send(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), PublishError> {
        let routing = Routing::Mandatory;
        self.send_to(exchange, routing_key, body, properties, routing, || {})
            .await
    }

    /// Publishes raw bytes and waits for the confirm, all bounded by the timeout; `routing`
    /// says whether a message no queue takes is an error. `sent` runs once the message is
    /// written, before its confirm is awaited (not at all if it was never sent): a worker
    /// frees the delivery's concurrency for the next handler then, so that its copies'
    /// confirms are awaited many at once rather than one per handler slot.
    pub(crate) async fn send_to(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
        routing: Routing,
        sent: impl FnOnce(),
    ) -> Result<(), PublishError> {
        // AMQP short strings; lapin would panic on longer ones.
        short(ShortField::ExchangeName, exchange)?;
        short(ShortField::RoutingKey, routing_key)?;
        let deadline = crate::connection::deadline_after(self.timeout);
        let channel = self.channel(deadline).await?;
        let address = Address {
            exchange,
            routing_key,
            routing,
        };
        let properties = crate::publish_time::vouched(properties, self.connection.vouched_user());
        let confirmed = confirmed(&channel, address, body, properties, deadline, sent).await;
        confirmation(confirmed, address, &self.connection, self.timeout)
    }
}

/// Whether a published message must reach a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Routing {
    /// `mandatory`: the broker returns a message no queue takes, and the publish fails
    /// ([`PublishError::Unroutable`]).
    Mandatory,
    /// Not `mandatory`: a message no queue takes is dropped by the broker, and the publish
    /// succeeds (an RPC reply whose caller is gone).
    Optional,
}

/// Where one message is published, as sent (namespaced).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Address<'a> {
    pub exchange: &'a str,
    pub routing_key: &'a str,
    pub routing: Routing,
}

/// Publishes on `channel` and waits for the broker's verdict on this message until
/// `deadline`: `None` when it passed first. `sent` runs once the message is written, before
/// the confirm is awaited. Names must be checked as short strings first.
pub(crate) async fn confirmed(
    channel: &ConfirmChannel,
    address: Address<'_>,
    body: &[u8],
    properties: BasicProperties,
    deadline: tokio::time::Instant,
    sent: impl FnOnce(),
) -> Option<Result<Outcome, lapin::Error>> {
    let route = (address.exchange, address.routing_key);
    let mandatory = address.routing == Routing::Mandatory;
    let confirmed = channel.publish(route, mandatory, body, properties, sent);
    tokio::time::timeout_at(deadline, confirmed).await.ok()
}

/// What a publish's confirm (`None`: none came in `timeout`) means, on `connection`: the
/// one reading of confirms that publishers, worker copies and RPC requests share.
pub(crate) fn confirmation(
    confirmed: Option<Result<Outcome, lapin::Error>>,
    address: Address<'_>,
    connection: &Connection,
    timeout: Duration,
) -> Result<(), PublishError> {
    let outcome = match confirmed {
        Some(Ok(outcome)) => outcome,
        Some(Err(error)) => return Err(PublishError::Unconfirmed(error)),
        None => {
            return Err(match connection.blocked() {
                Some(reason) => PublishError::Blocked { reason, timeout },
                None => PublishError::Timeout(timeout),
            });
        }
    };
    let (exchange, routing_key) = (address.exchange, address.routing_key);
    match outcome {
        Outcome::Routed => Ok(()),
        // Only a `mandatory` message is ever returned.
        Outcome::Returned => Err(PublishError::Unroutable {
            exchange: exchange.to_owned(),
            routing_key: routing_key.to_owned(),
        }),
        Outcome::Nacked => Err(PublishError::Nacked {
            exchange: exchange.to_owned(),
            routing_key: routing_key.to_owned(),
        }),
    }
}

/// The body and properties of a message about to be published.
pub(crate) struct Outgoing {
    pub body: Vec<u8>,
    pub properties: BasicProperties,
}

/// `payload` and `headers` as message `M`, validated against the message's JSON Schemas
/// (nothing is built when they are invalid): its JSON body (compressed by `compression`),
/// and its properties: content type, type, persistent, the message id and timestamp of
/// `options` (or a new UUID v7 and now), the headers (with the publish time, and whatever
/// `headers_also` adds). The other `options` are for the caller to apply
/// ([`PublishOptions::apply`] for a publisher). What publishers and RPC clients share.
pub(crate) fn outgoing<M: Message>(
    payload: &M::Payload,
    headers: &M::Headers,
    options: &PublishOptions,
    compression: Option<Compression>,
    headers_also: impl FnOnce(&mut FieldTable),
) -> Result<Outgoing, PublishError> {
    let serialize = |part, source| PublishError::Serialize {
        message: M::NAME,
        part,
        source,
    };
    let validators = Validators::of::<M>()?;
    let mut body = validated_payload::<M>(&validators, payload)?;
    let headers = serde_json::to_value(headers).map_err(|e| serialize(MessagePart::Headers, e))?;
    let headers = match headers {
        serde_json::Value::Object(map) => serde_json::Value::Object(map),
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        _ => return Err(PublishError::HeadersNotAnObject { message: M::NAME }),
    };
    if let Some(errors) = validators.headers_errors(&headers) {
        return Err(PublishError::Invalid {
            message: M::NAME,
            part: MessagePart::Headers,
            errors,
        });
    }
    let message_id = options
        .message_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    short(ShortField::MessageId, &message_id)?;
    let properties = BasicProperties::default()
        .with_content_type(ShortString::from(M::CONTENT_TYPE))
        .with_delivery_mode(2)
        .with_type(ShortString::from(M::NAME))
        .with_message_id(ShortString::from(message_id))
        .with_timestamp(options.timestamp.unwrap_or_else(unix_seconds));
    let mut table = match &headers {
        serde_json::Value::Object(headers) => amqp::json_to_table(headers),
        _ => FieldTable::default(),
    };
    // Stamped into the table being built, not into a copy of it: one table per publish.
    crate::metrics::stamp(&mut table);
    headers_also(&mut table);
    let mut properties = properties.with_headers(table);
    if let Some(compression) = compression {
        body = compress(compression, &body).map_err(PublishError::Compress)?;
        properties = properties.with_content_encoding(ShortString::from(compression.as_str()));
    }
    Ok(Outgoing { body, properties })
}

/// A message ready to be sent: where to (namespaced), its body and its properties.
pub(crate) struct Prepared {
    pub exchange: String,
    pub routing_key: String,
    pub body: Vec<u8>,
    pub properties: BasicProperties,
}

impl Prepared {
    /// The message with the context of its publish span (a child of the current span)
    /// written into its properties, and the span.
    pub(crate) fn traced(mut self) -> (Self, tracing::Span) {
        let span = crate::trace::publish(
            &self.exchange,
            &self.routing_key,
            &self.properties,
            self.body.len(),
        );
        self.properties = crate::trace::inject(&span, self.properties);
        (self, span)
    }
}

/// `payload` and `headers` as message `M`, published with `publication` in `namespace`:
/// validated against the message's JSON Schemas, its priority checked, nothing built when
/// either is wrong ([`outgoing`]); with every option of `options` applied, and the exchange and
/// routing key namespaced and checked as short strings. What a publish sends to the broker
/// and the outbox stores.
pub(crate) fn prepared<M: Message>(
    namespace: &Namespace,
    publication: Publication<&str>,
    payload: &M::Payload,
    headers: &M::Headers,
    options: &PublishOptions,
) -> Result<Prepared, PublishError> {
    // Before anything is built: a priority the contract does not provide for is the
    // caller's mistake whatever the message holds.
    check_priority(options.priority, publication.max_priority)?;
    let Outgoing { body, properties } =
        outgoing::<M>(payload, headers, options, publication.compression, |_| {})?;
    let properties = options.apply(properties)?;
    let (exchange, routing_key) =
        namespace.publish_target(publication.exchange, publication.routing_key);
    short(ShortField::ExchangeName, &exchange)?;
    short(ShortField::RoutingKey, &routing_key)?;
    Ok(Prepared {
        exchange,
        routing_key,
        body,
        properties,
    })
}

pub(crate) fn short(field: ShortField, text: &str) -> Result<(), PublishError> {
    if text.len() > MAX_SHORT_STRING {
        return Err(PublishError::TooLong {
            field,
            bytes: text.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{PublishError, check_priority};

    #[test]
    fn a_priority_is_checked_against_the_queues_reached() {
        assert!(check_priority(None, None).is_ok());
        assert!(check_priority(None, Some(9)).is_ok());
        assert!(check_priority(Some(0), Some(9)).is_ok());
        assert!(check_priority(Some(9), Some(9)).is_ok());
        let above = check_priority(Some(10), Some(9));
        assert!(
            matches!(
                above,
                Err(PublishError::Priority {
                    priority: 10,
                    max_priority: Some(9)
                })
            ),
            "{above:?}"
        );
        let text = above.map_or_else(|e| e.to_string(), |_| String::new());
        assert!(text.contains("at most 9"), "{text}");
        // No queue declares priorities: even 0 says the code expects what the contract lacks.
        let none = check_priority(Some(0), None);
        assert!(
            matches!(
                none,
                Err(PublishError::Priority {
                    priority: 0,
                    max_priority: None
                })
            ),
            "{none:?}"
        );
        let text = none.map_or_else(|e| e.to_string(), |_| String::new());
        assert!(text.contains("declare `max_priority`"), "{text}");
    }
}
