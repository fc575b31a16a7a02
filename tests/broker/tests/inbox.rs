//! The inbox on a real PostgreSQL and a real broker: every message's effect is in the
//! database once, whether it was delivered twice, failed after writing, or its worker died
//! between the commit and the ack, through the transaction the inbox opens or through one the
//! handler holds; a message with nothing to record it by is dead-lettered, never handled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lapin::BasicProperties;
use sqlx::Pool;
use sqlx::postgres::PgPoolOptions;
use warren_broker_tests::bookkeeper::Bookkeeper;
use warren_broker_tests::database::{self, Tables, TestDatabase};
use warren_broker_tests::ledger::{self, types::Entry};
use warren_broker_tests::types::{Job, JobBehaviour, JobHeaders};
use warren_broker_tests::{Publishers, consumers, headers, job, raw_headers, topology};
use warren_runtime::inbox::{Inbox, InboxConsumer, InboxTransaction, Recorded};
use warren_runtime::{Delivery, HandlerError};
use warren_testkit::{Deployed, QueuedDeadLetter, RunningWorker, TestBroker, wait_until_async};

#[path = "support/sink.rs"]
mod sink;

/// The handler of `run_requeue_classic`: writes one row per job in a transaction the inbox
/// recorded the job in, and fails as the job's behaviour says on its first attempt.
struct Fulfil<DB: TestDatabase> {
    inbox: InboxConsumer<DB>,
    effects: String,
    /// How often the effect ran (and was committed or rolled back).
    ran: Arc<AtomicUsize>,
    /// The pool of the handler's own transactions, which it records each job in
    /// (`InboxConsumer::record`); `None`: the inbox's (`InboxConsumer::once`).
    own: Option<Pool<DB>>,
}

impl<DB: TestDatabase> Clone for Fulfil<DB> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            effects: self.effects.clone(),
            ran: self.ran.clone(),
            own: self.own.clone(),
        }
    }
}

/// What a job's effect needs, owned: the inbox's effect outlives the handler's borrows.
#[derive(Clone)]
struct JobEffect {
    effects: String,
    id: String,
    attempt: u32,
    behaviour: JobBehaviour,
    ran: Arc<AtomicUsize>,
}

impl JobEffect {
    /// Writes the job's row in `tx`; fails after writing as its behaviour says.
    async fn write<DB: TestDatabase>(
        self,
        tx: &mut InboxTransaction<DB>,
    ) -> Result<(), HandlerError> {
        self.ran.fetch_add(1, Ordering::SeqCst);
        DB::insert_effect(&mut **tx, &self.effects, &self.id, i64::from(self.attempt)).await?;
        if self.behaviour == JobBehaviour::Retryable && self.attempt == 0 {
            return Err(HandlerError::retryable("failed after its write"));
        }
        Ok(())
    }
}

impl<DB: TestDatabase> consumers::RunRequeueClassic for Fulfil<DB> {
    async fn handle(&self, delivery: Delivery<Job, JobHeaders>) -> Result<(), HandlerError> {
        let effect = JobEffect {
            effects: self.effects.clone(),
            id: delivery.payload().id.to_string(),
            attempt: delivery.retry_count(),
            behaviour: delivery.payload().behaviour,
            ran: self.ran.clone(),
        };
        match &self.own {
            None => {
                let effect = effect.clone();
                self.inbox
                    .once(&delivery, move |tx| Box::pin(effect.write(tx)))
                    .await?;
            }
            // As a handler with transactions of its own would: an error drops (rolls back)
            // the transaction, the key with the effect.
            Some(pool) => {
                let mut tx = pool.begin().await?;
                if self.inbox.record(&mut tx, &delivery).await? == Recorded::New {
                    effect.clone().write(&mut tx).await?;
                    tx.commit().await?;
                }
            }
        }
        if effect.behaviour == JobBehaviour::Panic && effect.attempt == 0 {
            panic!("died between the commit and the ack");
        }
        Ok(())
    }
}

/// Publishes `job` to the queue as another producer would: with `message_id`, or none.
async fn publish_raw(deployed: &Deployed, job: &Job, message_id: Option<&str>) {
    let body = serde_json::to_vec(job).expect("json");
    let mut properties = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_headers(raw_headers());
    if let Some(id) = message_id {
        properties = properties.with_message_id(id.into());
    }
    deployed
        .publish_raw("jobs", "job.requeue-classic", &body, properties)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_every_effect_is_written_once_however_often_its_message_comes() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("inbox-pg", &topology()).await;
    let pool = database::postgres().await;
    every_effect_once(&deployed, &pool, false).await;
    deployed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_handler_recording_in_its_own_transaction_writes_each_effect_once() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("inbox-pg-own", &topology()).await;
    let pool = database::postgres().await;
    every_effect_once(&deployed, &pool, true).await;
    deployed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_every_effect_is_written_once_however_often_its_message_comes() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("inbox-sqlite", &topology()).await;
    let pool = database::sqlite(&deployed).await;
    every_effect_once(&deployed, &pool, false).await;
    database::drop_sqlite(pool, &deployed).await;
    deployed.cleanup().await;
}

/// Five messages through an inbox consumer on `pool`'s database: one plain, one that fails
/// after its write, one whose worker dies between the commit and the ack, one published twice
/// under one id, one without an id. Recorded in the handler's `own_transaction`s, or in those
/// the inbox opens.
async fn every_effect_once<DB: TestDatabase>(
    deployed: &Deployed,
    pool: &Pool<DB>,
    own_transaction: bool,
) {
    let tables = Tables::create(deployed, pool).await;
    let (inbox, effects) = (&tables.inbox, &tables.effects);

    // The consumer's duplicates counter, kept by a recorder of the test's own: its handle is
    // made with the consumer, so only it records there.
    let recorded = sink::Sink::default();
    let handler = Fulfil {
        inbox: metrics::with_local_recorder(&recorded, || inbox.consumer("run_requeue_classic")),
        effects: effects.clone(),
        ran: Arc::default(),
        own: own_transaction.then(|| pool.clone()),
    };
    let registered = handler.clone();
    let mut running = deployed.run_worker(move |worker| {
        consumers::register::run_requeue_classic(worker, registered);
    });
    let publishers = Publishers::new(deployed.publisher().await);
    for (id, behaviour) in [
        ("plain", JobBehaviour::Ok),
        ("fails-after-writing", JobBehaviour::Retryable),
        ("dies-before-the-ack", JobBehaviour::Panic),
    ] {
        publishers
            .submit("requeue-classic", &job(id, behaviour), &headers())
            .await
            .expect("published and confirmed");
    }
    // One message published twice under one id (a producer that retried a publish whose
    // confirm it never saw), and one with no id at all.
    let twice = job("sent-twice", JobBehaviour::Ok);
    publish_raw(deployed, &twice, Some("0190d6f0-twice")).await;
    publish_raw(deployed, &twice, Some("0190d6f0-twice")).await;
    publish_raw(deployed, &job("anonymous", JobBehaviour::Ok), None).await;

    let dead = deployed
        .take_dead_letters("dead", 1, Duration::from_secs(30))
        .await;
    let expected: BTreeMap<String, i64> = [
        "dies-before-the-ack",
        "fails-after-writing",
        "plain",
        "sent-twice",
    ]
    .into_iter()
    .map(|id| (id.to_owned(), 1))
    .collect();
    wait_until_async(
        "every job's effect written",
        Duration::from_secs(30),
        || async { DB::effects(pool, effects).await.len() >= expected.len() },
    )
    .await;
    // Settled: nothing left in the queue, nothing held by the worker.
    deployed
        .wait_until_ready("requeue-classic", 0, Duration::from_secs(30))
        .await;
    running.stop().await.expect("the worker stops");

    assert_eq!(
        DB::effects(pool, effects).await,
        expected,
        "each effect once"
    );
    // The retryable failure's write was rolled back and ran again; the duplicate and the
    // redelivery after the commit ran nothing, and each was counted.
    assert_eq!(handler.ran.load(Ordering::SeqCst), 5);
    assert_eq!(
        recorded.count(
            warren_runtime::metrics::INBOX_DUPLICATES,
            &[("consumer", "run_requeue_classic")]
        ),
        2,
        "the second `sent-twice` and the redelivery of `dies-before-the-ack`"
    );
    let [unidentified] = dead.as_slice() else {
        panic!("one dead letter, the message without an id: {}", dead.len());
    };
    assert_eq!(unidentified.reason(), Some("unidentified"));
    assert!(
        String::from_utf8_lossy(&unidentified.body).contains("anonymous"),
        "the message without an id"
    );
    assert_eq!(
        inbox.prune().await.expect("pruned"),
        0,
        "nothing is older than a week"
    );
    let pruned = inbox
        .clone()
        .retention(Duration::ZERO)
        .prune()
        .await
        .expect("pruned");
    assert_eq!(pruned, 4, "every key is older than no retention at all");

    tables.drop(pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_generated_inbox_consumers_write_each_effect_once() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("ledger-pg", &ledger::topology()).await;
    let pool = database::postgres().await;
    generated_consumers_once(&deployed, &pool).await;
    deployed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_generated_inbox_consumers_write_each_effect_once() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("ledger-sqlite", &ledger::topology()).await;
    let pool = database::sqlite(&deployed).await;
    generated_consumers_once(&deployed, &pool).await;
    database::drop_sqlite(pool, &deployed).await;
    deployed.cleanup().await;
}

/// Stops `running` once the ledger's queues are empty.
async fn stop_when_drained(deployed: &Deployed, mut running: RunningWorker) {
    for queue in ["entries", "batches"] {
        deployed
            .wait_until_ready(queue, 0, Duration::from_secs(30))
            .await;
    }
    running.stop().await.expect("the worker stops");
}

/// An entry with `id`.
fn entry(id: &str, fail_first: bool) -> Entry {
    Entry {
        id: id.try_into().expect("a non-empty id"),
        fail_first: fail_first.then_some(true),
    }
}

/// The ledger's consumers, as the contract generates them (`inbox: true`): one at a time
/// keyed by id or else `/id`, and in batches keyed by id alone, where an entry without one is
/// dead-lettered by itself and its batch is applied.
async fn generated_consumers_once<DB: TestDatabase>(deployed: &Deployed, pool: &Pool<DB>) {
    let tables = Tables::create(deployed, pool).await;
    let effects = &tables.effects;
    let bookkeeper = Bookkeeper::new(tables.inbox.clone(), effects);
    let handlers = bookkeeper.handlers();
    let running = deployed.run_worker(move |worker| handlers.register(worker));
    let publishers = ledger::Publishers::new(deployed.publisher().await);
    let mut expected = BTreeMap::new();
    for i in 0..10 {
        let id = format!("e{i}");
        publishers
            .record(&entry(&id, i == 3))
            .await
            .expect("published");
        expected.insert(id, 1);
    }
    for i in 0..20 {
        let id = format!("b{i}");
        publishers
            .record_batched(&entry(&id, i == 7))
            .await
            .expect("published");
        expected.insert(id, 1);
    }
    // From a producer that sends no message id: one entry is keyed by its `/id`, the batch
    // consumer has no key for the other.
    let raw = |id: &str| serde_json::to_vec(&entry(id, false)).expect("json");
    let json = || BasicProperties::default().with_content_type("application/json".into());
    for _ in 0..2 {
        deployed
            .publish_raw("ledger", "entry", &raw("keyed-by-id"), json())
            .await;
    }
    expected.insert("keyed-by-id".to_owned(), 1);
    deployed
        .publish_raw("ledger", "batch", &raw("no-key"), json())
        .await;

    let dead = deployed
        .take_dead_letters("dead", 1, Duration::from_secs(30))
        .await;
    wait_until_async(
        "every entry's effect written",
        Duration::from_secs(30),
        || async { DB::effects(pool, effects).await.len() >= expected.len() },
    )
    .await;
    stop_when_drained(deployed, running).await;
    assert_eq!(
        DB::effects(pool, effects).await,
        expected,
        "each effect once"
    );
    // The failures' rolled-back writes: one entry's, and one batch of up to ten.
    let written = bookkeeper.written.load(Ordering::SeqCst);
    assert!(written > expected.len() + 1, "{written}");
    let [unkeyed] = dead.as_slice() else {
        panic!(
            "one dead letter, the batch entry without an id: {}",
            dead.len()
        );
    };
    assert_eq!(unkeyed.reason(), Some("unidentified"));
    tables.drop(pool).await;
}

/// A database that refuses is a retryable failure like any other: the handler's write that
/// breaks a constraint, and a database nobody answers, follow the queue's retry policy
/// (immediate-requeue, 3 retries) and are then dead-lettered as `exhausted`, the database's
/// error in `x-last-error`. Nothing was recorded for them, so a redrive applies them once the
/// database takes them; the entry beside them is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_database_that_refuses_is_retried_then_dead_lettered_never_acked() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("ledger-refuses", &ledger::topology()).await;
    let pool = database::postgres().await;
    let tables = Tables::create(&deployed, &pool).await;
    let effects = &tables.effects;
    sqlx::Postgres::run(
        &pool,
        &format!("ALTER TABLE {effects} ADD CONSTRAINT refused CHECK (job_id <> 'refused')"),
    )
    .await;
    let constrained = Bookkeeper::new(tables.inbox.clone(), effects);
    // Nothing listens on port 1: every connection is refused.
    let nobody = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy("postgres://postgres@127.0.0.1:1/test")
        .expect("a PostgreSQL URL");
    let unreachable = Bookkeeper::new(
        Inbox::new(nobody)
            .table(&tables.inbox_table)
            .expect("a plain identifier"),
        effects,
    );
    let handlers = ledger::Handlers {
        apply: constrained,
        apply_batch: unreachable,
    };
    let running = deployed.run_worker(move |worker| handlers.register(worker));
    let publishers = ledger::Publishers::new(deployed.publisher().await);
    for id in ["accepted", "refused"] {
        publishers
            .record(&entry(id, false))
            .await
            .expect("published");
    }
    publishers
        .record_batched(&entry("unreachable", false))
        .await
        .expect("published");

    let dead = deployed
        .take_dead_letters("dead", 2, Duration::from_secs(60))
        .await;
    stop_when_drained(&deployed, running).await;

    let by_id: BTreeMap<String, &QueuedDeadLetter> = dead
        .iter()
        .map(|letter| {
            let body: serde_json::Value = serde_json::from_slice(&letter.body).expect("json");
            (body["id"].as_str().expect("an entry id").to_owned(), letter)
        })
        .collect();
    let ids: Vec<&str> = by_id.keys().map(String::as_str).collect();
    assert_eq!(
        ids,
        ["refused", "unreachable"],
        "the refused entries are dead-lettered"
    );
    for (id, letter) in &by_id {
        assert_eq!(letter.reason(), Some("exhausted"), "{id}");
        assert_eq!(letter.retry_count(), 3, "{id}");
    }
    let error = |id: &str| by_id[id].last_error().unwrap_or_default().to_owned();
    assert!(
        error("refused").contains("constraint \"refused\""),
        "the constraint's error: {}",
        error("refused")
    );
    assert!(
        error("unreachable").contains("Connection refused")
            || error("unreachable").contains("timed out"),
        "the connection's error: {}",
        error("unreachable")
    );
    assert_eq!(
        sqlx::Postgres::effects(&pool, effects).await,
        BTreeMap::from([("accepted".to_owned(), 1)]),
        "only the accepted entry's effect"
    );
    let recorded = sqlx::Postgres::rows(&pool, &tables.inbox_table).await;
    assert_eq!(recorded, 1, "only the accepted entry is recorded");
    tables.drop(&pool).await;
    deployed.cleanup().await;
}

/// A database that is full: SQLite held to the pages it has (`max_page_count`, as a full disk
/// holds it), where an entry whose effect needs pages of its own (an id of 8 KiB) is refused
/// with `database or disk is full`, retried as the queue says, then dead-lettered as
/// `exhausted`; nothing of it is recorded, and the small entry beside it is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_a_full_database_is_retried_then_dead_lettered_never_acked() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("ledger-full", &ledger::topology()).await;
    let pool = database::sqlite(&deployed).await;
    let tables = Tables::create(&deployed, &pool).await;
    pool.close().await;
    let full = database::sqlite_full(&deployed).await;
    let handlers = Bookkeeper::new(
        Inbox::new(full.clone())
            .table(&tables.inbox_table)
            .expect("a plain identifier"),
        &tables.effects,
    )
    .handlers();
    let running = deployed.run_worker(move |worker| handlers.register(worker));
    let publishers = ledger::Publishers::new(deployed.publisher().await);
    let big = "x".repeat(8 * 1024);
    for id in ["small", big.as_str()] {
        publishers
            .record(&entry(id, false))
            .await
            .expect("published");
    }

    let dead = deployed
        .take_dead_letters("dead", 1, Duration::from_secs(60))
        .await;
    stop_when_drained(&deployed, running).await;
    let [refused] = dead.as_slice() else {
        panic!(
            "the big entry is dead-lettered: {} dead letters",
            dead.len()
        );
    };
    let body: serde_json::Value = serde_json::from_slice(&refused.body).expect("json");
    assert_eq!(body["id"].as_str(), Some(big.as_str()));
    assert_eq!(refused.reason(), Some("exhausted"));
    assert_eq!(refused.retry_count(), 3);
    assert!(
        refused.last_error().is_some_and(|e| e.contains("full")),
        "the database's error: {:?}",
        refused.last_error()
    );
    assert_eq!(
        sqlx::Sqlite::effects(&full, &tables.effects).await,
        BTreeMap::from([("small".to_owned(), 1)]),
        "only the small entry's effect"
    );
    let recorded = sqlx::Sqlite::rows(&full, &tables.inbox_table).await;
    assert_eq!(recorded, 1, "only the small entry is recorded");
    database::drop_sqlite(full, &deployed).await;
    deployed.cleanup().await;
}
