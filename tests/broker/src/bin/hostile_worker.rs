//! A worker that hostile producers aim at, run as a child process by `tests/hostile.rs`: a
//! message that kills the process then fails that test instead of killing the test binary.
//!
//! It declares the test contract, starts a worker, publishes (over a raw socket) messages whose
//! headers lapin cannot survive, then a valid job, and checks that the worker handled the job
//! and dead-lettered every hostile message with its reason. Exits 0 when it all holds.

use std::time::Duration;

use warren_broker_tests::raw::{RawProducer, encode};
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, amqp_url, cut_detail, header, job};

#[tokio::main]
async fn main() {
    let harness = Harness::start("hostile-child").await;
    let exchange = harness.name("jobs");
    let body = |id: &str| format!(r#"{{"id": "{id}", "behaviour": "ok", "amount": 1}}"#);
    let tenant = || (&b"tenant"[..], encode::text("acme"));
    // Each with the headers of a valid job besides the hostile one.
    let hostile: Vec<(&str, Vec<u8>)> = vec![
        // Each aborted the process in lapin's recursive parser (depths 300 to 20,000).
        (
            "deep-300",
            encode::properties(&[tenant(), (b"trace", encode::nested(300))]),
        ),
        (
            "deep-20000",
            encode::properties(&[tenant(), (b"trace", encode::nested(20_000))]),
        ),
        // Closed the connection: lapin cannot parse it. (RabbitMQ itself refuses other
        // tables lapin cannot parse, such as an unknown field type.)
        (
            "key-not-utf8",
            encode::properties(&[tenant(), (b"\xff\xfe", encode::text("x"))]),
        ),
    ];
    let count = hostile.len();
    let url = amqp_url();
    let published = tokio::task::spawn_blocking({
        let exchange = exchange.clone();
        move || -> std::io::Result<()> {
            let mut producer = RawProducer::connect(&url)?;
            for (id, properties) in hostile {
                producer.publish(&exchange, b"job.none", &properties, body(id).as_bytes())?;
            }
            Ok(())
        }
    })
    .await
    .expect("the producer thread");
    published.expect("the broker takes every hostile message");
    println!("published {count} hostile messages to {exchange}");

    harness.submit("none", job("after", JobBehaviour::Ok)).await;
    let handled = harness
        .recorder
        .wait_attempts("after", 1, Duration::from_secs(20))
        .await;
    assert_eq!(
        handled.len(),
        1,
        "the worker handles a valid job after them"
    );

    let dead = harness.dead_letters(count, Duration::from_secs(20)).await;
    assert_eq!(dead.len(), count, "every hostile message is dead-lettered");
    for message in &dead {
        let reason = header(message, "x-failure-reason");
        println!("dead letter: reason {reason:?}, {}", cut_detail(message));
        assert_eq!(reason.as_deref(), Some("malformed-headers"));
        assert_eq!(
            header(message, "tenant").as_deref(),
            Some("acme"),
            "sound headers kept"
        );
    }
    assert!(
        harness.recorder.attempts("deep-300").is_empty(),
        "the handler never sees a message whose headers were cut"
    );
    harness.stop().await.expect("the worker stops cleanly");
    println!("the worker survived every hostile header");
}
