//! Publishing typed payloads with publisher confirms.

use std::io::Write as _;

use lapin::Confirmation;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Connection};

use crate::{Message, PublishError, headers};

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

    fn compress(self, body: &[u8]) -> std::io::Result<Vec<u8>> {
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

/// Publishes typed messages on a channel in confirm mode. Cheap to clone: clones share the
/// channel.
#[derive(Clone)]
pub struct Publisher {
    channel: Channel,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("channel", &self.channel.id())
            .finish()
    }
}

impl Publisher {
    /// Opens a publishing channel on `connection` and puts it in confirm mode.
    pub async fn new(connection: &Connection) -> Result<Self, PublishError> {
        let channel = connection.create_channel().await?;
        Self::from_channel(channel).await
    }

    /// Uses `channel` for publishing, putting it in confirm mode.
    pub async fn from_channel(channel: Channel) -> Result<Self, PublishError> {
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Self { channel })
    }

    /// Publishes `payload` and `headers` as message `M`, persistent and `mandatory`, and waits
    /// for the broker's confirm. Succeeds only when the broker confirmed the message and did
    /// not return it as unroutable.
    pub async fn publish<M: Message>(
        &self,
        publication: Publication<'_>,
        payload: &M::Payload,
        headers: &M::Headers,
    ) -> Result<(), PublishError> {
        let serialize = |what, source| PublishError::Serialize {
            message: M::NAME,
            what,
            source,
        };
        let mut body = serde_json::to_vec(payload).map_err(|e| serialize("payload", e))?;
        let mut properties = BasicProperties::default()
            .with_content_type(ShortString::from(M::CONTENT_TYPE))
            .with_delivery_mode(2)
            .with_type(ShortString::from(M::NAME))
            .with_message_id(ShortString::from(uuid::Uuid::new_v4().to_string()))
            .with_timestamp(unix_seconds());
        match serde_json::to_value(headers).map_err(|e| serialize("headers", e))? {
            serde_json::Value::Object(map) => {
                if !map.is_empty() {
                    properties = properties.with_headers(headers::to_field_table(&map));
                }
            }
            serde_json::Value::Null => {}
            _ => return Err(PublishError::HeadersNotAnObject { message: M::NAME }),
        }
        if let Some(compression) = publication.compression {
            body = compression
                .compress(&body)
                .map_err(PublishError::Compress)?;
            properties =
                properties.with_content_encoding(ShortString::from(compression.encoding()));
        }
        let confirm = self
            .channel
            .basic_publish(
                ShortString::from(publication.exchange),
                ShortString::from(publication.routing_key),
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                &body,
                properties,
            )
            .await?
            .await?;
        let failed = |nacked: bool| {
            let (exchange, routing_key) = (
                publication.exchange.to_owned(),
                publication.routing_key.to_owned(),
            );
            if nacked {
                PublishError::Nacked {
                    exchange,
                    routing_key,
                }
            } else {
                PublishError::Unroutable {
                    exchange,
                    routing_key,
                }
            }
        };
        match confirm {
            Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
            Confirmation::Ack(Some(_)) => Err(failed(false)),
            Confirmation::Nack(_) => Err(failed(true)),
        }
    }
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
