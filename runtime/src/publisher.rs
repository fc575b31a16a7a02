//! Publishing typed payloads with publisher confirms.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation};

use crate::schema::Validators;
use crate::{Connection, Message, PublishError, amqp};

/// How long a publish waits for the broker's confirm by default.
pub const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Body compression, as a publisher in the contract declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// gzip, sent with `content-encoding: gzip`.
    Gzip,
    /// zlib deflate, sent with `content-encoding: deflate`.
    Deflate,
}

impl Compression {
    /// The `content-encoding` value.
    pub fn encoding(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Deflate => "deflate",
        }
    }

    pub(crate) fn compress(self, body: &[u8]) -> std::io::Result<Vec<u8>> {
        let level = flate2::Compression::default();
        match self {
            Self::Gzip => {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
                encoder.write_all(body)?;
                encoder.finish()
            }
            Self::Deflate => {
                let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), level);
                encoder.write_all(body)?;
                encoder.finish()
            }
        }
    }
}

/// Where and how one message is published: what a generated publish method fills in from
/// the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publication<'a> {
    /// The exchange (`""` is the default exchange).
    pub exchange: &'a str,
    /// The routing key.
    pub routing_key: &'a str,
    /// Body compression.
    pub compression: Option<Compression>,
}

/// Per-message properties a caller may set instead of the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishOptions {
    /// The message id; by default a new UUID v7 (time-ordered). Consumers deduplicate on it,
    /// so set it to a business key when the same fact may be published twice.
    pub message_id: Option<String>,
    /// The timestamp, in seconds since the Unix epoch; by default now.
    pub timestamp: Option<u64>,
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
}

/// Publishes typed messages on a channel in confirm mode. Cheap to clone: clones share the
/// channel.
#[derive(Clone)]
pub struct Publisher {
    channel: Channel,
    namespace: Arc<str>,
    timeout: Duration,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("channel", &self.channel.id())
            .field("namespace", &self.namespace)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Publisher {
    /// Opens a publishing channel on `connection` and puts it in confirm mode.
    pub async fn new(connection: &Connection) -> Result<Self, PublishError> {
        let channel = connection.lapin().create_channel().await?;
        Self::from_channel(channel).await
    }

    /// Uses `channel` for publishing, putting it in confirm mode.
    pub async fn from_channel(channel: Channel) -> Result<Self, PublishError> {
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Self {
            channel,
            namespace: Arc::from(""),
            timeout: DEFAULT_PUBLISH_TIMEOUT,
        })
    }

    /// Prefixes exchange names (and queue names used as keys on the default exchange) with
    /// `namespace`, matching a topology built with [`crate::Topology::namespaced`].
    pub fn namespaced(mut self, namespace: &str) -> Self {
        self.namespace = Arc::from(namespace);
        self
    }

    /// How long to wait for the broker's confirm before giving up with
    /// [`PublishError::Timeout`] (default 30 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Publishes `payload` and `headers` as message `M` with a fresh message id and the
    /// current time. See [`Publisher::publish_with`].
    pub async fn publish<M: Message>(
        &self,
        publication: Publication<'_>,
        payload: &M::Payload,
        headers: &M::Headers,
    ) -> Result<(), PublishError> {
        self.publish_with::<M>(publication, payload, headers, &PublishOptions::default())
            .await
    }

    /// Publishes `payload` and `headers` as message `M`: validated against the message's JSON
    /// Schemas (nothing is sent when they are invalid), persistent, `mandatory`, with its
    /// content type and optional compression, and waits for the broker's confirm. Succeeds
    /// only when the broker confirmed the message and did not return it as unroutable.
    pub async fn publish_with<M: Message>(
        &self,
        publication: Publication<'_>,
        payload: &M::Payload,
        headers: &M::Headers,
        options: &PublishOptions,
    ) -> Result<(), PublishError> {
        let serialize = |what, source| PublishError::Serialize {
            message: M::NAME,
            what,
            source,
        };
        let validators = Validators::of::<M>()?;
        let payload = serde_json::to_value(payload).map_err(|e| serialize("payload", e))?;
        if let Some(errors) = validators.payload_errors(&payload) {
            return Err(PublishError::Invalid {
                message: M::NAME,
                what: "payload",
                errors,
            });
        }
        let headers = serde_json::to_value(headers).map_err(|e| serialize("headers", e))?;
        let headers = match headers {
            serde_json::Value::Object(map) => serde_json::Value::Object(map),
            serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
            _ => return Err(PublishError::HeadersNotAnObject { message: M::NAME }),
        };
        if let Some(errors) = validators.headers_errors(&headers) {
            return Err(PublishError::Invalid {
                message: M::NAME,
                what: "headers",
                errors,
            });
        }
        let mut body = serde_json::to_vec(&payload).map_err(|e| serialize("payload", e))?;
        let message_id = options
            .message_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let mut properties = BasicProperties::default()
            .with_content_type(ShortString::from(M::CONTENT_TYPE))
            .with_delivery_mode(2)
            .with_type(ShortString::from(M::NAME))
            .with_message_id(ShortString::from(message_id))
            .with_timestamp(options.timestamp.unwrap_or_else(unix_seconds));
        if let serde_json::Value::Object(headers) = &headers
            && !headers.is_empty()
        {
            properties = properties.with_headers(amqp::json_to_table(headers));
        }
        if let Some(compression) = publication.compression {
            body = compression
                .compress(&body)
                .map_err(PublishError::Compress)?;
            properties =
                properties.with_content_encoding(ShortString::from(compression.encoding()));
        }
        let (exchange, routing_key) = self.resolve(publication.exchange, publication.routing_key);
        self.send(&exchange, &routing_key, &body, properties).await
    }

    /// Whether the publishing channel is still open.
    pub fn is_open(&self) -> bool {
        self.channel.status().connected()
    }

    /// Applies the namespace: exchanges are prefixed, and so is the key on the default
    /// exchange, where it names a queue.
    fn resolve(&self, exchange: &str, routing_key: &str) -> (String, String) {
        if exchange.is_empty() {
            (String::new(), format!("{}{routing_key}", self.namespace))
        } else {
            (
                format!("{}{exchange}", self.namespace),
                routing_key.to_owned(),
            )
        }
    }

    /// Publishes raw bytes, `mandatory`, and waits for the confirm (bounded by the timeout).
    pub(crate) async fn send(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), PublishError> {
        let confirmed = async {
            self.channel
                .basic_publish(
                    ShortString::from(exchange),
                    ShortString::from(routing_key),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    body,
                    properties,
                )
                .await?
                .await
        };
        let confirmation = tokio::time::timeout(self.timeout, confirmed)
            .await
            .map_err(|_| PublishError::Timeout(self.timeout))??;
        let route = || (exchange.to_owned(), routing_key.to_owned());
        match confirmation {
            Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
            Confirmation::Ack(Some(_)) => {
                let (exchange, routing_key) = route();
                Err(PublishError::Unroutable {
                    exchange,
                    routing_key,
                })
            }
            Confirmation::Nack(_) => {
                let (exchange, routing_key) = route();
                Err(PublishError::Nacked {
                    exchange,
                    routing_key,
                })
            }
        }
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
