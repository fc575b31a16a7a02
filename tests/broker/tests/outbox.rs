//! The outbox on a real broker, on PostgreSQL and on SQLite: what the caller's transaction
//! commits is published, once, by relays sharing the table, each ordering key in the order it
//! was written; what rolls back or breaks its schema never is; a message no queue takes waits
//! in the outbox, retried, until one does, its wait seen in the health of the worker running
//! the relay and in the relay's metrics.

#[path = "support/sink.rs"]
mod sink;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use sqlx::Pool;
use warren_broker_tests::database::{self, TestDatabase};
use warren_broker_tests::types::{Job, JobBehaviour};
use warren_broker_tests::{Publishers, headers, job, topology};
use warren_runtime::PublishError;
use warren_runtime::lapin::options::{QueueBindOptions, QueueDeclareOptions};
use warren_runtime::lapin::types::FieldTable;
use warren_runtime::metrics::{OUTBOX_LAG, OUTBOX_PENDING, OUTBOX_RELAYED, OUTBOX_RETRIED};
use warren_runtime::outbox::Outbox;
use warren_testkit::{Deployed, TestBroker, wait_until_async};

const SKUS: [&str; 3] = ["AAA-0001", "BBB-0002", "CCC-0003"];
/// Messages written per SKU, in order.
const PER_SKU: usize = 8;
/// Messages written in no particular order.
const UNORDERED: usize = 20;
const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_what_commits_is_published_once_and_in_order() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("outbox-pg", &topology()).await;
    let pool = database::postgres().await;
    relays_what_commits(&deployed, &pool).await;
    deployed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_what_commits_is_published_once_and_in_order() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("outbox-sqlite", &topology()).await;
    let pool = database::sqlite(&deployed).await;
    relays_what_commits(&deployed, &pool).await;
    database::drop_sqlite(pool, &deployed).await;
    deployed.cleanup().await;
}

/// The `n`th job of `sku`.
fn sku_job(sku: &str, n: usize) -> Job {
    Job {
        sku: Some(sku.try_into().expect("a SKU")),
        ..job(&format!("{sku}/{n}"), JobBehaviour::Ok)
    }
}

async fn relays_what_commits<DB: TestDatabase>(deployed: &Deployed, pool: &Pool<DB>) {
    let table = database::table("outbox", deployed);
    let outbox = Outbox::new(pool.clone(), deployed.topology())
        .table(&table)
        .expect("a plain identifier");
    outbox
        .migrate()
        .await
        .expect("the outbox's table is created");
    outbox
        .migrate()
        .await
        .expect("migrating again changes nothing");
    let publishers = Publishers::new(deployed.publisher().await);

    let expected = write_committed(pool, &outbox, &publishers).await;
    // Rolled back: never stored, so never published.
    let mut tx = pool.begin().await.expect("a transaction");
    publishers
        .through(outbox.writer(&mut tx))
        .submit("outbox", &job("rolled-back", JobBehaviour::Ok), &headers())
        .await
        .expect("written");
    tx.rollback().await.expect("rolled back");
    let backlog = outbox.backlog().await.expect("the backlog");
    assert_eq!(backlog.pending, expected.len() as u64);
    assert!(backlog.lag.is_some(), "the oldest row waits");

    // Two relays on one table, five rows a round each: the SKUs' rows pass through both.
    let relays = [
        outbox.relay(deployed.publisher().await).batch(5).spawn(),
        outbox.relay(deployed.publisher().await).batch(5).spawn(),
    ];
    deployed
        .wait_until_ready("outbox", expected.len() as u32, WAIT)
        .await;
    wait_until_async("the outbox drained", WAIT, || async {
        outbox.backlog().await.is_ok_and(|b| b.pending == 0)
    })
    .await;
    // A relay counts a round's rows once it has marked them sent: after the backlog shows it.
    let published = || relays.iter().map(|r| r.health().published).sum::<u64>();
    wait_until_async("the relays' count of what they published", WAIT, || async {
        published() >= expected.len() as u64
    })
    .await;
    assert_eq!(
        published(),
        expected.len() as u64,
        "each row published once"
    );
    for relay in relays {
        relay.stop().await;
    }

    let messages = deployed
        .take_dead_letters("outbox", expected.len(), WAIT)
        .await;
    assert_eq!(
        deployed.ready("outbox").await,
        0,
        "nothing more was published"
    );
    let ids: Vec<String> = messages
        .iter()
        .map(|m| m.payload::<warren_broker_tests::messages::Job>())
        .map(|job| job.expect("a job").id.to_string())
        .collect();
    assert_eq!(
        ids.iter().cloned().collect::<BTreeSet<_>>(),
        expected,
        "what committed, and only that"
    );
    assert_eq!(ids.len(), expected.len(), "no message twice: {ids:?}");
    // Per SKU, in the order written, though two relays published them.
    let mut per_sku: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for id in &ids {
        if let Some((sku, n)) = id.split_once('/') {
            per_sku
                .entry(sku)
                .or_default()
                .push(n.parse().expect("a number"));
        }
    }
    for sku in SKUS {
        assert_eq!(
            per_sku.get(sku).cloned().unwrap_or_default(),
            (0..PER_SKU).collect::<Vec<_>>(),
            "{sku} in order"
        );
    }
    // Published as a publish would have been: type, id, headers, publish time.
    let message_ids: BTreeSet<_> = messages
        .iter()
        .filter_map(|m| m.properties.message_id().as_ref().map(|id| id.to_string()))
        .collect();
    assert_eq!(
        message_ids.len(),
        expected.len(),
        "every message its own id"
    );
    for message in &messages {
        assert_eq!(
            message.properties.kind().as_ref().map(|k| k.as_str()),
            Some("job")
        );
        assert_eq!(message.header("tenant").as_deref(), Some("acme"));
        assert!(
            message
                .header(warren_runtime::model::headers::PUBLISHED_AT)
                .is_some(),
            "{:?}",
            message.headers
        );
    }

    waits_until_a_queue_takes_it(deployed, &outbox, &publishers, pool).await;
    let pruned = outbox
        .clone()
        .retention(Duration::ZERO)
        .prune()
        .await
        .expect("pruned");
    assert_eq!(pruned, expected.len() as u64 + 1, "every sent row");
    DB::run(pool, &format!("DROP TABLE {table}")).await;
}

/// Writes the unordered and the ordered jobs in one transaction, with an invalid job and an
/// ordered job without its key refused in the middle of it, and commits; the ids written.
async fn write_committed<DB: TestDatabase>(
    pool: &Pool<DB>,
    outbox: &Outbox<DB>,
    publishers: &Publishers,
) -> BTreeSet<String> {
    let mut expected = BTreeSet::new();
    let mut tx = pool.begin().await.expect("a transaction");
    let writing = publishers.through(outbox.writer(&mut tx));
    for i in 0..UNORDERED {
        let id = format!("u{i}");
        writing
            .submit("outbox", &job(&id, JobBehaviour::Ok), &headers())
            .await
            .expect("written");
        expected.insert(id);
    }
    for n in 0..PER_SKU {
        for sku in SKUS {
            writing
                .submit_ordered(&sku_job(sku, n), &headers())
                .await
                .expect("written");
            expected.insert(format!("{sku}/{n}"));
        }
    }
    let invalid = Job {
        amount: 5000,
        ..job("invalid", JobBehaviour::Ok)
    };
    let refused = writing.submit("outbox", &invalid, &headers()).await;
    assert!(
        matches!(refused, Err(PublishError::Invalid { .. })),
        "{refused:?}"
    );
    let keyless = writing
        .submit_ordered(&job("no-sku", JobBehaviour::Ok), &headers())
        .await;
    assert!(
        matches!(keyless, Err(PublishError::OrderingKey { .. })),
        "{keyless:?}"
    );
    drop(writing);
    tx.commit().await.expect("committed");
    expected
}

/// A message no queue takes (publisher `nowhere`) stays in the outbox, tried again and again
/// with its error on record, until a queue is bound for it; then it is published. The relay
/// runs in a worker: the worker's health and the relay's metrics show the row waiting, how
/// long, and why, then nothing waiting.
async fn waits_until_a_queue_takes_it<DB: TestDatabase>(
    deployed: &Deployed,
    outbox: &Outbox<DB>,
    publishers: &Publishers,
    pool: &Pool<DB>,
) {
    let mut tx = pool.begin().await.expect("a transaction");
    publishers
        .through(outbox.writer(&mut tx))
        .nowhere(&job("nowhere", JobBehaviour::Ok), &headers())
        .await
        .expect("written");
    tx.commit().await.expect("committed");
    // The relay's metrics, kept by a recorder of the test's own: their handles are made
    // with the relay, so only it records there.
    let recorded = sink::Sink::default();
    let publisher = deployed.publisher().await;
    let relay = metrics::with_local_recorder(&recorded, || {
        outbox
            .relay(publisher)
            .poll_interval(Duration::from_millis(20))
            .spawn()
    });
    let mut health = None;
    let mut worker = deployed.run_worker(|worker| {
        health = Some(worker.health_handle());
        worker.relay(relay);
    });
    let health = health.expect("the worker's health");
    let relay_health = || {
        health
            .snapshot()
            .relays
            .first()
            .cloned()
            .unwrap_or_default()
    };
    wait_until_async("the waiting row in the worker's health", WAIT, || async {
        let relay = relay_health();
        relay.pending == 1
            && relay.lag_ms.is_some_and(|lag| lag > 0)
            && relay
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("to no queue"))
    })
    .await;
    assert!(
        health.snapshot().ready(),
        "a relay's backlog leaves the worker ready"
    );
    let name = relay_health().table;
    let table = [("table", name.as_str())];
    let last = |metric: &str| {
        let cell = recorded.one(metric, &table);
        let values = cell.gauge.lock().expect("the gauge's values");
        values.last().copied()
    };
    assert_eq!(last(OUTBOX_PENDING), Some(1.0), "the pending gauge");
    assert!(
        last(OUTBOX_LAG).is_some_and(|lag| lag > 0.0),
        "the lag gauge"
    );
    assert!(
        recorded.count(OUTBOX_RETRIED, &table) >= 1,
        "its retries counted"
    );
    assert_eq!(outbox.backlog().await.expect("backlog").pending, 1);

    let listener = deployed.name("nowhere-listener");
    let channel = deployed
        .connection()
        .lapin()
        .expect("connected")
        .create_channel()
        .await
        .expect("a channel");
    channel
        .queue_declare(
            listener.as_str().into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("declared");
    channel
        .queue_bind(
            listener.as_str().into(),
            deployed.name("jobs").as_str().into(),
            "nobody.listens".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("bound");
    wait_until_async("the row published once a queue takes it", WAIT, || async {
        outbox.backlog().await.is_ok_and(|b| b.pending == 0)
    })
    .await;
    wait_until_async("nothing waiting in the worker's health", WAIT, || async {
        let relay = relay_health();
        relay.pending == 0 && relay.lag_ms.is_none() && relay.published == 1
    })
    .await;
    worker.stop().await.expect("the worker and its relay stop");
    assert_eq!(last(OUTBOX_PENDING), Some(0.0), "the pending gauge");
    assert_eq!(last(OUTBOX_LAG), Some(0.0), "the lag gauge");
    assert_eq!(recorded.count(OUTBOX_RELAYED, &table), 1, "one row relayed");
    let deleted = channel
        .queue_delete(listener.as_str().into(), Default::default())
        .await
        .expect("the listener is deleted");
    assert_eq!(deleted, 1, "the message reached the listener");
}
