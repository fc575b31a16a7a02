//! A dead-letter queue keeps its messages however often they come back.
//!
//! A queue with nowhere to dead-letter, such as the orders example's `orders.dead-letters`,
//! is the end of the line: if the broker's delivery limit dropped what is returned to it, a
//! DLQ consumer that crashes, or an operator who peeks with requeue, would lose the very
//! messages it exists to keep. This declares that queue exactly as the example's generated
//! topology does (under a namespace of its own) and returns its one message three times.

use std::time::Duration;

use lapin::BasicProperties;
use lapin::options::{BasicAckOptions, BasicGetOptions, BasicRejectOptions};
use lapin::types::ShortString;
use warren_broker_tests::amqp_url;
use warren_runtime::Connection;
use warren_runtime::model::Topology;
use warren_testkit::TestBroker;

/// Takes the message from `queue` on a channel of its own, without acknowledging it, or
/// says why not.
async fn take(
    connection: &Connection,
    queue: &str,
    returns: usize,
) -> Result<(lapin::Channel, lapin::message::Delivery), String> {
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| e.to_string())?;
    let message = channel
        .basic_get(ShortString::from(queue), BasicGetOptions { no_ack: false })
        .await
        .map_err(|e| e.to_string())?;
    match message {
        Some(message) => Ok((channel, message.delivery)),
        None => Err(format!(
            "the queue is empty after {returns} returns: the broker dropped the message"
        )),
    }
}

/// The message's body after it came back three times, each the way a dying consumer or a
/// peeking operator returns it.
async fn return_three_times(connection: &Connection, queue: &str) -> Result<Vec<u8>, String> {
    let failed = |e: lapin::Error| e.to_string();
    // 1. The consumer's channel closes before it acks (its task crashed).
    let (channel, _) = take(connection, queue, 0).await?;
    channel
        .close(200, ShortString::from("the DLQ consumer died"))
        .await
        .map_err(|e| format!("closing the channel: {e}"))?;
    // 2. The consumer's connection goes before it acks (its process died).
    let process = Connection::connect(&amqp_url(), "warren-test-dlq-consumer")
        .await
        .map_err(failed)?;
    let (_channel, _delivery) = take(&process, queue, 1).await?;
    process
        .close()
        .await
        .map_err(|e| format!("closing the connection: {e}"))?;
    // 3. An operator peeks and puts it back.
    let (_channel, peeked) = take(connection, queue, 2).await?;
    peeked
        .acker
        .reject(BasicRejectOptions { requeue: true })
        .await
        .map_err(failed)?;
    // Still there: taken for good this time.
    let (_channel, kept) = take(connection, queue, 3).await?;
    kept.acker
        .ack(BasicAckOptions::default())
        .await
        .map_err(failed)?;
    Ok(kept.data)
}

#[tokio::test]
async fn a_dead_letter_returned_three_times_is_still_there() {
    let broker = TestBroker::from_env().await;
    let example = warren_example_orders::topology();
    let dead_letters = example
        .queue("orders.dead-letters")
        .expect("the example declares orders.dead-letters")
        .clone();
    assert!(
        dead_letters.dead_letter.is_none(),
        "the case under test is a queue with nowhere to dead-letter"
    );
    let topology = Topology::new(Vec::new(), vec![dead_letters], Vec::new());
    let deployed = broker.deploy("dlq", &topology).await;
    let queue = deployed.name("orders.dead-letters");
    deployed
        .publish_raw(
            "",
            &queue,
            b"a dead letter",
            BasicProperties::default().with_delivery_mode(2),
        )
        .await;
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        return_three_times(broker.connection(), &queue),
    )
    .await;
    // Removed before asserting, so a failure leaves nothing on the shared broker.
    deployed.cleanup().await;
    broker.close().await;
    let body = outcome
        .expect("the returns finish within 30 s")
        .expect("the dead letter survives three returns");
    assert_eq!(body, b"a dead letter");
}
