//! What the kit's [`PrivateCluster`] promises a chaos test: three nodes that form one cluster,
//! a quorum queue's leader it can find, a node it can kill -9 and bring back, and a queue
//! that stays usable through a surviving node meanwhile.

use std::time::{Duration, Instant};

use warren_runtime::lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use warren_runtime::lapin::types::{AMQPValue, FieldTable};
use warren_runtime::lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use warren_testkit::{PrivateCluster, wait_until};

/// AMQP ports 5801-5803 (and distribution ports 25801-25803): no other test's.
const BASE_PORT: u16 = 5801;
const QUEUE: &str = "kit-cluster-proof";
const WAIT: Duration = Duration::from_secs(30);

/// A confirming channel on `url`, and its connection (which must outlive it).
async fn channel(url: &str) -> (Connection, Channel) {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| panic!("{url} accepts AMQP: {e}"));
    let channel = connection.create_channel().await.expect("a channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    (connection, channel)
}

async fn publish(channel: &Channel, body: &[u8]) {
    let confirmation = channel
        .basic_publish(
            "".into(),
            QUEUE.into(),
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            body,
            BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .expect("published")
        .await
        .expect("confirmed");
    assert!(confirmation.is_ack(), "the broker took {body:?}");
}

/// Runs the blocking `f` (a `rabbitmqctl` call, a node starting) without stalling the
/// runtime's other tasks (lapin's connections).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_queue_fails_over_when_its_leader_is_killed_and_the_node_rejoins() {
    let t0 = Instant::now();
    let cluster = blocking(|| PrivateCluster::start(BASE_PORT));
    let formed = t0.elapsed();
    assert_eq!(cluster.urls().len(), PrivateCluster::NODES);
    // (`start` waited until every node saw every other; one node's view shows it.)
    assert_eq!(
        blocking(|| cluster.running_nodes(0)),
        [0, 1, 2],
        "node 0 sees every node running"
    );

    // A quorum queue with a member on every node, declared through node 0.
    let (connection, first) = channel(&cluster.url(0)).await;
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    arguments.insert("x-quorum-initial-group-size".into(), AMQPValue::LongInt(3));
    first
        .queue_declare(
            QUEUE.into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            arguments,
        )
        .await
        .expect("the quorum queue is declared");
    publish(&first, b"before").await;
    let mut leader = None;
    wait_until("the queue has a leader", WAIT, || {
        leader = blocking(|| cluster.leader_of(QUEUE));
        leader.is_some()
    })
    .await;
    let old_leader = leader.expect("a leader");
    assert_eq!(
        blocking(|| cluster.leader_of("no-such-queue")),
        None,
        "a queue that does not exist has no leader"
    );

    // kill -9 of the leader's node: the other two elect a new one.
    let killed_at = Instant::now();
    blocking(|| cluster.kill(old_leader));
    assert!(!cluster.is_alive(old_leader));
    let mut new_leader = None;
    wait_until("another node leads the queue", WAIT, || {
        new_leader = blocking(|| cluster.leader_of(QUEUE));
        new_leader.is_some_and(|n| n != old_leader)
    })
    .await;
    let new_leader = new_leader.expect("a new leader");
    let failed_over = killed_at.elapsed();
    // The channel on node 0 is gone with node 0; either way, use a survivor.
    drop((first, connection));

    // Through a survivor (a follower, when there is one, so the publish and the get cross
    // the cluster): what was confirmed before the kill is still there, and the queue
    // takes and gives new messages.
    let survivor = (0..PrivateCluster::NODES)
        .find(|&n| n != old_leader && n != new_leader)
        .unwrap_or(new_leader);
    let (connection, channel) = channel(&cluster.url(survivor)).await;
    publish(&channel, b"after").await;
    let mut bodies = Vec::new();
    for _ in 0..2 {
        let message = channel
            .basic_get(QUEUE.into(), BasicGetOptions { no_ack: false })
            .await
            .expect("basic.get")
            .expect("a message");
        message
            .delivery
            .ack(BasicAckOptions::default())
            .await
            .expect("acked");
        bodies.push(String::from_utf8_lossy(&message.delivery.data).into_owned());
    }
    assert_eq!(bodies, ["before", "after"]);

    // The killed node comes back on its data dir and rejoins.
    let up_at = Instant::now();
    blocking(|| cluster.up(old_leader));
    let rejoined = up_at.elapsed();
    for n in 0..PrivateCluster::NODES {
        assert_eq!(
            blocking(|| cluster.running_nodes(n)),
            [0, 1, 2],
            "node {n} sees every node running again"
        );
    }
    assert!(blocking(|| cluster.leader_of(QUEUE)).is_some());

    let _ = connection.close(200, "done".into()).await;
    eprintln!(
        "cluster formed in {formed:?}; leader node {old_leader} killed, node {new_leader} \
         led after {failed_over:?}; node {old_leader} rejoined in {rejoined:?}; {:?} in all",
        t0.elapsed()
    );
}
