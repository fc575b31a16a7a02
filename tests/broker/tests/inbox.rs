//! The inbox on a real PostgreSQL and a real broker: every message's effect is in the
//! database once, whether it was delivered twice, failed after writing, or its worker died
//! between the commit and the ack; a message with nothing to record it by is dead-lettered,
//! never handled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lapin::BasicProperties;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use warren_broker_tests::types::{Job, JobBehaviour, JobHeaders};
use warren_broker_tests::{Publishers, consumers, headers, job, raw_headers, topology};
use warren_runtime::inbox::{Inbox, InboxConsumer};
use warren_runtime::{Delivery, HandlerError};
use warren_testkit::{Deployed, TestBroker, wait_until_async};

/// The database the tests write to: `DATABASE_URL`, else the one build-support/scripts/test.sh
/// starts.
fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The handler of `run_requeue_classic`: writes one row per job through the inbox's
/// transaction, and fails as the job's behaviour says on its first attempt.
#[derive(Clone)]
struct Fulfil {
    inbox: InboxConsumer,
    effects: String,
    /// How often the effect ran (and was committed or rolled back).
    ran: Arc<AtomicUsize>,
}

impl consumers::RunRequeueClassic for Fulfil {
    async fn handle(&self, delivery: Delivery<Job, JobHeaders>) -> Result<(), HandlerError> {
        let attempt = delivery.retry_count();
        let behaviour = delivery.payload().behaviour;
        let id = delivery.payload().id.to_string();
        let insert = format!(
            "INSERT INTO {} (job_id, attempt) VALUES ($1, $2)",
            self.effects
        );
        let ran = self.ran.clone();
        self.inbox
            .once(&delivery, move |tx| {
                Box::pin(async move {
                    ran.fetch_add(1, Ordering::SeqCst);
                    sqlx::query(&insert)
                        .bind(&id)
                        .bind(i64::from(attempt))
                        .execute(&mut **tx)
                        .await?;
                    if behaviour == JobBehaviour::Retryable && attempt == 0 {
                        return Err(HandlerError::retryable("failed after its write"));
                    }
                    Ok(())
                })
            })
            .await?;
        if behaviour == JobBehaviour::Panic && attempt == 0 {
            panic!("died between the commit and the ack");
        }
        Ok(())
    }
}

/// Each job id's rows in `effects`.
async fn rows(pool: &PgPool, effects: &str) -> BTreeMap<String, i64> {
    let query = format!("SELECT job_id, count(*) FROM {effects} GROUP BY job_id");
    sqlx::query_as::<_, (String, i64)>(&query)
        .fetch_all(pool)
        .await
        .expect("the effects are read")
        .into_iter()
        .collect()
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
async fn every_effect_is_written_once_however_often_its_message_comes() {
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&database_url())
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} answers: {e}", database_url()));
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("inbox", &topology()).await;
    // The test's own tables, named after its namespace: tests running at once share the database.
    let suffix: String = (deployed.namespace().chars())
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let (inbox_table, effects) = (format!("inbox_{suffix}"), format!("effects_{suffix}"));
    let inbox = Inbox::new(pool.clone())
        .table(&inbox_table)
        .expect("a plain identifier");
    inbox.migrate().await.expect("the inbox's table is created");
    inbox
        .migrate()
        .await
        .expect("migrating again changes nothing");
    let create = format!("CREATE TABLE {effects} (job_id TEXT NOT NULL, attempt BIGINT NOT NULL)");
    sqlx::query(&create)
        .execute(&pool)
        .await
        .expect("the effects table");

    let handler = Fulfil {
        inbox: inbox.consumer("run_requeue_classic"),
        effects: effects.clone(),
        ran: Arc::default(),
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
    publish_raw(&deployed, &twice, Some("0190d6f0-twice")).await;
    publish_raw(&deployed, &twice, Some("0190d6f0-twice")).await;
    publish_raw(&deployed, &job("anonymous", JobBehaviour::Ok), None).await;

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
        || async { rows(&pool, &effects).await.len() >= expected.len() },
    )
    .await;
    // Settled: nothing left in the queue, nothing held by the worker.
    deployed
        .wait_until_ready("requeue-classic", 0, Duration::from_secs(30))
        .await;
    running.stop().await.expect("the worker stops");

    assert_eq!(rows(&pool, &effects).await, expected, "each effect once");
    // The retryable failure's write was rolled back and ran again; the duplicate and the
    // redelivery after the commit ran nothing.
    assert_eq!(handler.ran.load(Ordering::SeqCst), 5);
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

    for table in [&inbox_table, &effects] {
        sqlx::query(&format!("DROP TABLE {table}"))
            .execute(&pool)
            .await
            .expect("the test's table is dropped");
    }
    deployed.cleanup().await;
}
