//! The message properties a caller sets through `PublishOptions`, as the broker delivers them,
//! and the values it would refuse, refused before anything is sent.

use std::time::Duration;

use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Publishers, headers, job, topology};
use warren_runtime::model::limits::MAX_EXPIRATION_MILLIS;
use warren_runtime::{PublishError, PublishOptions, ShortField};
use warren_testkit::TestBroker;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn options_reach_the_broker_and_refused_values_are_never_sent() {
    let broker = TestBroker::from_env().await;
    // No worker: the test reads the queue itself.
    let deployed = broker.deploy("properties", &topology()).await;
    let publishers = Publishers::new(deployed.publisher().await);

    let options = PublishOptions::default()
        .message_id("props-1")
        .correlation_id("checkout-7")
        .reply_to("replies")
        .expiration(Duration::from_secs(60))
        .priority(7);
    publishers
        .with(options)
        .submit("none", &job("props-1", JobBehaviour::Ok), &headers())
        .await
        .expect("published and confirmed");
    let read = deployed.take_dead_letters("none", 1, WAIT).await;
    let properties = &read[0].properties;
    let text = |value: &Option<warren_runtime::lapin::types::ShortString>| {
        value.as_ref().map(|v| v.to_string())
    };
    assert_eq!(text(properties.message_id()).as_deref(), Some("props-1"));
    assert_eq!(
        text(properties.correlation_id()).as_deref(),
        Some("checkout-7")
    );
    assert_eq!(text(properties.reply_to()).as_deref(), Some("replies"));
    assert_eq!(text(properties.expiration()).as_deref(), Some("60000"));
    assert_eq!(*properties.priority(), Some(7));

    // What the broker would refuse (closing the publishing channel) is an error here, and
    // nothing reaches the queue; the publisher goes on.
    let too_long = Duration::from_millis(MAX_EXPIRATION_MILLIS + 1);
    let refused = publishers
        .with(PublishOptions::default().expiration(too_long))
        .submit("none", &job("props-2", JobBehaviour::Ok), &headers())
        .await;
    assert!(
        matches!(refused, Err(PublishError::ExpirationTooLong { millis }) if millis == u128::from(MAX_EXPIRATION_MILLIS) + 1),
        "{refused:?}"
    );
    let refused = publishers
        .with(PublishOptions::default().correlation_id("c".repeat(256)))
        .submit("none", &job("props-3", JobBehaviour::Ok), &headers())
        .await;
    assert!(
        matches!(
            refused,
            Err(PublishError::TooLong {
                field: ShortField::CorrelationId,
                bytes: 256
            })
        ),
        "{refused:?}"
    );
    // Direct reply-to from a channel that does not consume it: the broker would close the
    // channel ("fast reply consumer does not exist").
    let refused = publishers
        .with(PublishOptions::default().reply_to("amq.rabbitmq.reply-to"))
        .submit("none", &job("props-5", JobBehaviour::Ok), &headers())
        .await;
    assert!(
        matches!(refused, Err(PublishError::DirectReplyTo)),
        "{refused:?}"
    );
    // The longest accepted expiration goes through.
    publishers
        .with(PublishOptions::default().expiration(Duration::from_millis(MAX_EXPIRATION_MILLIS)))
        .submit("none", &job("props-4", JobBehaviour::Ok), &headers())
        .await
        .expect("the longest expiration RabbitMQ takes is published");
    let read = deployed.take_dead_letters("none", 1, WAIT).await;
    assert!(String::from_utf8_lossy(&read[0].body).contains("props-4"));
    assert_eq!(deployed.ready("none").await, 0, "nothing else was sent");
    deployed.cleanup().await;
}
