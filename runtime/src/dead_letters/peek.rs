//! `peek`: the first dead letters, with their headers, failure context and body, left in the
//! queue.

use lapin::message::Delivery;
use serde_json::{Map, Value};

use crate::amqp::amqp_to_json;
use crate::failure::FailureContext;

use super::scan::Scan;
use super::{DeadLetterError, DeadLetterQueue, Fingerprint};

/// Messages one peek reads at most: each is held whole in memory until the peek ends.
pub const MAX_PEEK: usize = 100;

/// Bytes of a body a peek keeps; [`Peeked::body_bytes`] says how long it was.
pub const MAX_PEEK_BODY: usize = 4096;

/// A dead letter as a peek saw it. It is still in the queue.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Peeked {
    /// The routing key it was dead-lettered with.
    pub routing_key: String,
    /// The exchange it was dead-lettered through (`""`: the default exchange, or a direct
    /// publish to the queue).
    pub exchange: String,
    /// Already delivered before this peek (by another peek, a count, a crashed consumer).
    pub redelivered: bool,
    /// Its `message-id`, if it has one.
    pub message_id: Option<String>,
    /// Its content type, if it has one.
    pub content_type: Option<String>,
    /// Every header, warren's and the broker's included, as JSON.
    pub headers: Map<String, Value>,
    /// Why and where it failed, read from the headers; `None` when they say nothing.
    pub failure: Option<FailureContext>,
    /// The first [`MAX_PEEK_BODY`] bytes of its body.
    pub body: Vec<u8>,
    /// The length of its whole body.
    pub body_bytes: usize,
}

impl DeadLetterQueue {
    /// The first `n` dead letters (at most [`MAX_PEEK`]), left in the queue as
    /// [`read`](Self::read) leaves them, each body cut to [`MAX_PEEK_BODY`] bytes.
    pub async fn peek(&self, n: usize) -> Result<Vec<Peeked>, DeadLetterError> {
        let read = self.read(n.min(MAX_PEEK)).await?;
        Ok(read
            .iter()
            .map(|delivery| Peeked::of(delivery, self))
            .collect())
    }
}

impl DeadLetterQueue {
    /// The first `n` dead letters (at most [`MAX_PEEK`]) of the failure group `group` (a
    /// [`Fingerprint::id`]), among the first `scan_limit` of the queue, left in the queue as
    /// [`read`](Self::read) leaves them. Only the matching ones are kept in memory.
    pub async fn peek_group(
        &self,
        group: &str,
        n: usize,
        scan_limit: u32,
    ) -> Result<Vec<Peeked>, DeadLetterError> {
        let scan = Scan::open(self).await?;
        let wanted = n.min(MAX_PEEK);
        let limit = scan.depth().min(scan_limit);
        let mut found = Vec::new();
        let read = async {
            for _ in 0..limit {
                if found.len() >= wanted {
                    break;
                }
                let Some(delivery) = scan.next().await? else {
                    break;
                };
                let context = self.context(delivery.properties.headers().as_ref());
                if Fingerprint::of(context.as_ref()).id() == group {
                    found.push(Peeked::of(&delivery, self));
                }
            }
            Ok(())
        }
        .await;
        let released = scan.release().await;
        read.and(released).map(|()| found)
    }
}

impl Peeked {
    /// What a peek of `queue` shows of `delivery`.
    fn of(delivery: &Delivery, queue: &DeadLetterQueue) -> Self {
        let properties = &delivery.properties;
        let headers = properties.headers().as_ref();
        Self {
            routing_key: delivery.routing_key.to_string(),
            exchange: delivery.exchange.to_string(),
            redelivered: delivery.redelivered,
            message_id: properties.message_id().as_ref().map(|s| s.to_string()),
            content_type: properties.content_type().as_ref().map(|s| s.to_string()),
            headers: headers
                .map(|table| {
                    table
                        .inner()
                        .iter()
                        .map(|(k, v)| (k.to_string(), amqp_to_json(v, 1)))
                        .collect()
                })
                .unwrap_or_default(),
            failure: queue.context(headers),
            body: delivery.data[..delivery.data.len().min(MAX_PEEK_BODY)].to_vec(),
            body_bytes: delivery.data.len(),
        }
    }
}
