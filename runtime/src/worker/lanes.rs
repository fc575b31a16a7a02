//! Per-key order (`ordering_key` in the contract): deliveries with the same key are handled
//! one at a time, in the order the consumer took them, while deliveries of other keys run up
//! to the consumer's concurrency.
//!
//! Each key has a lane: the consume loop reads a delivery's key as it takes it, and chains the
//! delivery behind the last one of its key, which it may start only once that one is settled
//! (acknowledged, or its retry or dead-letter copy confirmed). A delivery waiting for its turn
//! holds no concurrency permit: it takes one when its turn comes, so a busy key never stalls
//! the others. The prefetch bounds how many wait.
//!
//! A key is read from a header, or from the payload at a JSON pointer (the body parsed once
//! more for it, within the worker's body cap). A delivery whose key cannot be read (no such
//! header, a body that is not JSON, nothing at the pointer) has no lane and runs as on an
//! unordered consumer: it is most likely poison, and its decode dead-letters it.
//!
//! Keys are held as hashes with a per-process random seed: a producer's keys, however long or
//! many, cost one map entry per unsettled delivery, and keys that collide only share a lane.

use std::collections::HashMap;
use std::hash::BuildHasher;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;

use crate::amqp::amqp_to_json;
use crate::codec::decompress;
use crate::model::OrderingKey;

/// How deep a header value is read into JSON for its key, as the decode path reads headers.
const HEADER_DEPTH: usize = 8;

/// The lanes of one consumer.
pub(super) struct Lanes {
    key: OrderingKey,
    max_body_bytes: usize,
    /// The last delivery taken of each key (by hash): its sender is dropped once it is settled.
    last: HashMap<u64, oneshot::Receiver<()>>,
    /// Past this many entries, those of settled deliveries are dropped.
    prune_above: usize,
    seed: std::collections::hash_map::RandomState,
}

/// A delivery's place in its key's lane.
pub(super) struct Turn {
    /// Resolves once the delivery before it in its lane is settled; `None`: it may start now.
    pub after: Option<oneshot::Receiver<()>>,
    /// Dropped once this delivery is settled, which starts the next of its key.
    pub done: oneshot::Sender<()>,
}

impl Lanes {
    /// The lanes of a consumer ordering by `key`, with `prefetch` deliveries at most unsettled
    /// and bodies up to `max_body_bytes`.
    pub(super) fn new(key: OrderingKey, prefetch: u16, max_body_bytes: usize) -> Self {
        Self {
            key,
            max_body_bytes,
            last: HashMap::new(),
            prune_above: 2 * usize::from(prefetch.max(1)) + 16,
            seed: Default::default(),
        }
    }

    /// `raw`'s turn in its key's lane; `None` when it has no key, and so no lane.
    pub(super) fn enter(&mut self, raw: &lapin::message::Delivery) -> Option<Turn> {
        let key = key_of(self.key, raw, self.max_body_bytes)?;
        let hash = self.seed.hash_one(key);
        if self.last.len() > self.prune_above {
            self.last.retain(|_, last| unsettled(last));
        }
        let (done, settled) = oneshot::channel();
        let mut after = self.last.insert(hash, settled);
        after.take_if(|previous| !unsettled(previous));
        Some(Turn { after, done })
    }
}

/// Whether the delivery `last` stands for is not settled yet: its sender, never used to
/// send, is still held (`Empty`), not dropped (`Closed`).
fn unsettled(last: &mut oneshot::Receiver<()>) -> bool {
    matches!(last.try_recv(), Err(TryRecvError::Empty))
}

/// The key of `raw` as text, read where `key` says; `None` when it has none.
fn key_of(
    key: OrderingKey,
    raw: &lapin::message::Delivery,
    max_body_bytes: usize,
) -> Option<String> {
    let value = match key {
        OrderingKey::Header(name) => {
            let table = raw.properties.headers().as_ref()?;
            amqp_to_json(table.inner().get(name)?, HEADER_DEPTH)
        }
        OrderingKey::Payload(pointer) => {
            if raw.data.len() > max_body_bytes {
                return None;
            }
            let encoding = raw.properties.content_encoding().as_ref();
            let body = decompress(&raw.data, encoding.map(|e| e.as_str()), max_body_bytes).ok()?;
            let mut payload: Value = serde_json::from_slice(&body).ok()?;
            payload.pointer_mut(pointer)?.take()
        }
    };
    match value {
        Value::Null => None,
        Value::String(text) => Some(text),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

    use super::{Lanes, key_of};
    use crate::model::{Compression, OrderingKey};

    fn delivery(body: &[u8], properties: BasicProperties) -> lapin::message::Delivery {
        let mut raw = lapin::message::Delivery::mock(
            1,
            ShortString::from("shop"),
            ShortString::from("order"),
            false,
            body.to_vec(),
        );
        raw.properties = properties;
        raw
    }

    fn tenant(value: AMQPValue) -> BasicProperties {
        let mut table = FieldTable::default();
        table.insert(ShortString::from("tenant"), value);
        BasicProperties::default().with_headers(table)
    }

    /// A key is the header's or the payload value's text (compressed bodies inflated); a
    /// message without one, or whose body is not JSON, has none.
    #[test]
    fn keys_are_read_from_a_header_or_the_payload() {
        let header = OrderingKey::Header("tenant");
        let text = tenant(AMQPValue::LongString(LongString::from("acme")));
        assert_eq!(
            key_of(header, &delivery(b"", text), 1024).as_deref(),
            Some("acme")
        );
        let number = tenant(AMQPValue::LongLongInt(42));
        assert_eq!(
            key_of(header, &delivery(b"", number), 1024).as_deref(),
            Some("42")
        );
        assert_eq!(
            key_of(header, &delivery(b"", BasicProperties::default()), 1024),
            None
        );

        let pointer = OrderingKey::Payload("/customer/id");
        let body = br#"{"customer": {"id": "c-7"}, "total": 3}"#;
        let plain = delivery(body, BasicProperties::default());
        assert_eq!(key_of(pointer, &plain, 1024).as_deref(), Some("c-7"));
        let gzip = crate::codec::compress(Compression::Gzip, body).expect("compressed");
        let compressed = delivery(
            &gzip,
            BasicProperties::default().with_content_encoding(ShortString::from("gzip")),
        );
        assert_eq!(key_of(pointer, &compressed, 1024).as_deref(), Some("c-7"));
        for refused in [
            &b"not json"[..],
            br#"{"customer": {}}"#,
            br#"{"customer": {"id": null}}"#,
        ] {
            let raw = delivery(refused, BasicProperties::default());
            assert_eq!(key_of(pointer, &raw, 1024), None, "{refused:?}");
        }
        assert_eq!(key_of(pointer, &plain, 8), None, "past the body cap");
    }

    /// A delivery waits for the last one of its key, and only until that one is settled;
    /// other keys do not wait; settled entries are dropped once the map outgrows the prefetch.
    #[test]
    fn a_key_waits_for_its_previous_delivery_only() {
        let mut lanes = Lanes::new(OrderingKey::Header("tenant"), 2, 1024);
        let of = |name: &str| delivery(b"", tenant(AMQPValue::LongString(LongString::from(name))));
        let first = lanes.enter(&of("a")).expect("a key");
        assert!(first.after.is_none(), "an idle lane starts at once");
        let mut second = lanes.enter(&of("a")).expect("a key");
        let other = lanes.enter(&of("b")).expect("a key");
        assert!(other.after.is_none(), "another key does not wait");
        let waiting = second.after.as_mut().expect("behind the first");
        assert!(
            waiting
                .try_recv()
                .is_err_and(|e| e == super::TryRecvError::Empty)
        );
        drop(first.done);
        assert!(
            waiting
                .try_recv()
                .is_err_and(|e| e == super::TryRecvError::Closed)
        );
        drop((second.done, other.done));
        assert!(
            lanes.enter(&of("a")).expect("a key").after.is_none(),
            "settled: at once"
        );
        assert!(lanes.enter(&of("c")).is_some());
        for n in 0..64 {
            drop(lanes.enter(&of(&n.to_string())));
        }
        assert!(
            lanes.last.len() <= lanes.prune_above + 1,
            "{}",
            lanes.last.len()
        );
        assert!(
            lanes
                .enter(&delivery(b"", BasicProperties::default()))
                .is_none(),
            "no key"
        );
    }
}
