//! What a moved message's headers keep: the pure part of a move, without a broker.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

use super::{Source, moved_properties};
use crate::amqp::{header_int, header_str};
use crate::model::headers;

fn delivery(
    exchange: &str,
    routing_key: &str,
    pairs: &[(&str, AMQPValue)],
) -> lapin::message::Delivery {
    let mut table = FieldTable::default();
    for (key, value) in pairs {
        table.insert(ShortString::from(*key), value.clone());
    }
    let mut raw = lapin::message::Delivery::mock(
        7,
        ShortString::from(exchange),
        ShortString::from(routing_key),
        false,
        b"{}".to_vec(),
    );
    raw.properties = BasicProperties::default()
        .with_headers(table)
        .with_user_id(ShortString::from("alice"))
        .with_message_id(ShortString::from("m-1"))
        .with_expiration(ShortString::from("60000"));
    raw
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// A producer's message read from the queue: a forged retry count is dropped (the worker did
/// not believe it there, and would once the message comes back through the default
/// exchange), its route is written down, the broker's delivery count goes.
#[test]
fn a_producers_message_keeps_its_route_and_loses_a_forged_count() {
    let raw = delivery(
        "jobs",
        "job.backoff",
        &[
            (headers::RETRY_COUNT, AMQPValue::LongLongInt(3)),
            (headers::DELIVERY_COUNT, AMQPValue::LongLongInt(2)),
            ("tenant", text("acme")),
        ],
    );
    let moved = moved_properties(&raw, Source::Work("t.backoff"));
    let table = moved.headers().as_ref();
    assert_eq!(header_int(table, headers::RETRY_COUNT), None);
    assert_eq!(header_int(table, headers::DELIVERY_COUNT), None);
    assert_eq!(
        header_str(table, headers::ORIGINAL_EXCHANGE).as_deref(),
        Some("jobs")
    );
    assert_eq!(
        header_str(table, headers::ORIGINAL_ROUTING_KEY).as_deref(),
        Some("job.backoff")
    );
    assert_eq!(header_str(table, "tenant").as_deref(), Some("acme"));
    assert_eq!(
        moved.user_id(),
        &None,
        "the broker would refuse another user's id"
    );
    assert_eq!(moved.message_id().as_ref().map(|m| m.as_str()), Some("m-1"));
    assert_eq!(
        moved.expiration().as_ref().map(|e| e.as_str()),
        Some("60000")
    );
    assert_eq!(moved.delivery_mode(), &Some(2));
}

/// A retry copy back from a wait queue keeps its count and the route warren wrote.
#[test]
fn a_retry_copy_keeps_its_count_and_route() {
    let raw = delivery(
        "",
        "t.backoff",
        &[
            (headers::RETRY_COUNT, AMQPValue::LongLongInt(2)),
            (headers::ORIGINAL_EXCHANGE, text("jobs")),
            (headers::ORIGINAL_ROUTING_KEY, text("job.backoff")),
        ],
    );
    let moved = moved_properties(&raw, Source::Work("t.backoff"));
    let table = moved.headers().as_ref();
    assert_eq!(header_int(table, headers::RETRY_COUNT), Some(2));
    assert_eq!(
        header_str(table, headers::ORIGINAL_EXCHANGE).as_deref(),
        Some("jobs")
    );
    // A dead letter routed to a queue through the default exchange is not a retry copy.
    let dead = delivery(
        "",
        "t.backoff",
        &[
            (headers::RETRY_COUNT, AMQPValue::LongLongInt(2)),
            (headers::FAILURE_REASON, text("rejected")),
        ],
    );
    let moved = moved_properties(&dead, Source::Work("t.backoff"));
    assert_eq!(
        header_int(moved.headers().as_ref(), headers::RETRY_COUNT),
        None
    );
}

/// Read from a wait queue, a message keeps its count; one without a route is given its
/// queue's, where it was going back to. From the holding queue nothing changes.
#[test]
fn wait_and_holding_messages_keep_what_warren_wrote() {
    let raw = delivery(
        "",
        "t.backoff.wait.1s",
        &[(headers::RETRY_COUNT, AMQPValue::LongLongInt(1))],
    );
    let moved = moved_properties(&raw, Source::Wait("t.backoff"));
    let table = moved.headers().as_ref();
    assert_eq!(header_int(table, headers::RETRY_COUNT), Some(1));
    assert_eq!(
        header_str(table, headers::ORIGINAL_EXCHANGE).as_deref(),
        Some("")
    );
    assert_eq!(
        header_str(table, headers::ORIGINAL_ROUTING_KEY).as_deref(),
        Some("t.backoff")
    );
    let held = delivery(
        "",
        "t.backoff.warren-holding",
        &[(headers::RETRY_COUNT, AMQPValue::LongLongInt(1))],
    );
    let moved = moved_properties(&held, Source::Holding);
    let table = moved.headers().as_ref();
    assert_eq!(header_int(table, headers::RETRY_COUNT), Some(1));
    assert_eq!(header_str(table, headers::ORIGINAL_EXCHANGE), None);
}

/// A round of a move holds its messages' bodies in memory until their confirms: it ends at
/// [`MOVE_BATCH`](super::MOVE_BATCH) messages, or sooner once their bodies reach
/// [`MOVE_BATCH_BYTES`](super::MOVE_BATCH_BYTES) (64 messages of the broker's largest, 128 MiB
/// each, would be 8 GiB). A single message larger than the bound still moves, alone.
#[test]
fn a_round_is_bounded_by_bytes_as_well_as_messages() {
    use super::{MOVE_BATCH, MOVE_BATCH_BYTES, round_full};

    assert!(!round_full(0, 0));
    assert!(!round_full(MOVE_BATCH - 1, 10));
    assert!(round_full(MOVE_BATCH, 10));
    assert!(round_full(1, MOVE_BATCH_BYTES));
    assert!(round_full(1, 128 << 20));
    assert!(!round_full(1, MOVE_BATCH_BYTES - 1));
}
