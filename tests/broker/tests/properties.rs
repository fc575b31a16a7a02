//! The message properties a caller sets through `PublishOptions`, as the broker delivers them
//! and a handler's `Delivery` reads them back, and the values it would refuse (or the contract
//! does not provide for), refused before anything is sent.

use std::time::Duration;

use warren_broker_tests::types::{self, JobBehaviour};
use warren_broker_tests::{Publishers, consumers, headers, job, messages, topology};
use warren_runtime::codegen::publish;
use warren_runtime::model::Publication;
use warren_runtime::model::limits::MAX_EXPIRATION_MILLIS;
use warren_runtime::{Delivery, HandlerError, PublishError, PublishOptions, ShortField};
use warren_testkit::{Seen, TestBroker};

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
        .expiration(Duration::from_secs(60));
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
    assert_eq!(*properties.priority(), None);

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

/// What the priority queue's handler read from each delivery.
#[derive(Debug, Clone, PartialEq)]
struct Read {
    id: String,
    priority: Option<u8>,
    correlation_id: Option<String>,
    reply_to: Option<String>,
    expiration: Option<Duration>,
}

#[derive(Clone, Default)]
struct Reader(Seen<Read>);

impl consumers::RunPriority for Reader {
    async fn handle(
        &self,
        delivery: Delivery<types::Job, types::JobHeaders>,
    ) -> Result<(), HandlerError> {
        self.0.record(Read {
            id: delivery.payload().id.to_string(),
            priority: delivery.priority(),
            correlation_id: delivery.correlation_id().map(str::to_owned),
            reply_to: delivery.reply_to().map(str::to_owned),
            expiration: delivery.expiration(),
        });
        Ok(())
    }
}

#[tokio::test]
async fn priorities_are_checked_against_the_queue_then_delivered_highest_first() {
    let broker = TestBroker::from_env().await;
    // No worker yet: the messages wait in the queue, so the broker orders them by priority.
    let deployed = broker.deploy("priority", &topology()).await;
    let publisher = deployed.publisher().await;
    // What the generated `submit_priority` passes once the generator fills in `max_priority`
    // from the queues a publisher reaches (`priority` declares 9); stated here so the test
    // does not depend on it.
    let publication = Publication {
        exchange: "jobs",
        routing_key: "job.priority",
        compression: None,
        max_priority: Some(9),
        ordering_key: None,
    };
    for priority in [1, 9, 5] {
        let id = format!("prio-{priority}");
        let options = PublishOptions::default()
            .message_id(id.as_str())
            .correlation_id(format!("call-{priority}"))
            .reply_to("replies")
            .expiration(Duration::from_secs(600))
            .priority(priority);
        publish(
            &publisher,
            messages::Job,
            publication,
            [],
            &job(&id, JobBehaviour::Ok),
            &headers(),
            &options,
        )
        .await
        .expect("published and confirmed");
    }
    assert_eq!(deployed.wait_until_ready("priority", 3, WAIT).await, 3);

    // Above the queue's maximum, and where no queue reached declares one: refused, unsent.
    let refused = publish(
        &publisher,
        messages::Job,
        publication,
        [],
        &job("prio-10", JobBehaviour::Ok),
        &headers(),
        &PublishOptions::default().priority(10),
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(PublishError::Priority {
                priority: 10,
                max_priority: Some(9)
            })
        ),
        "{refused:?}"
    );
    let message = refused.map_or_else(|e| e.to_string(), |()| String::new());
    assert!(message.contains("priority 10 is above 9"), "{message}");
    let refused = publish(
        &publisher,
        messages::Job,
        Publication {
            max_priority: None,
            ..publication
        },
        [],
        &job("prio-none", JobBehaviour::Ok),
        &headers(),
        &PublishOptions::default().priority(1),
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(PublishError::Priority {
                priority: 1,
                max_priority: None
            })
        ),
        "{refused:?}"
    );
    assert_eq!(deployed.ready("priority").await, 3, "nothing else was sent");

    let reader = Reader::default();
    let mut worker = deployed.run_worker(|worker| {
        consumers::register::run_priority(worker, reader.clone());
    });
    let read = reader.0.wait_for(3, WAIT).await;
    let expected = |priority: u8| Read {
        id: format!("prio-{priority}"),
        priority: Some(priority),
        correlation_id: Some(format!("call-{priority}")),
        reply_to: Some("replies".to_owned()),
        expiration: Some(Duration::from_secs(600)),
    };
    assert_eq!(read, vec![expected(9), expected(5), expected(1)]);
    worker.stop().await.expect("the worker stops cleanly");
    deployed.cleanup().await;
}
