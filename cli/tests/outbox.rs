//! `warren outbox relay` against the real broker and a real SQLite file (the relay itself is
//! proved on PostgreSQL and SQLite in tests/broker/tests/outbox.rs): what a service's
//! transaction wrote through the generated publishers is published by the command; `--once`
//! exits 0 when nothing waits, 1 naming the error while a row waits, 2 when it cannot start.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use sqlx::SqlitePool;
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Publishers, headers, job, topology};
use warren_runtime::outbox::Outbox;
use warren_testkit::{Deployed, TestBroker};

/// `warren outbox relay --once` on the SQLite file `database`, table `table`, with `extra`.
fn relay_once(database: &Path, table: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["outbox", "relay", "--once", "--table", table])
        .arg("--database-url")
        .arg(format!("sqlite:{}", database.display()))
        .arg("--url")
        .arg(warren_testkit::amqp_url())
        .args(extra)
        .output()
        .expect("warren runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes the jobs `ids` to `routing` (`outbox`, bound to a queue, or `nowhere`) through
/// the generated publishers, in one committed transaction.
async fn write(
    pool: &SqlitePool,
    outbox: &Outbox<sqlx::Sqlite>,
    publishers: &Publishers,
    ids: &[&str],
    routed: bool,
) {
    let mut tx = pool.begin().await.expect("a transaction");
    let writing = publishers.through(outbox.writer(&mut tx));
    for id in ids {
        let job = job(id, JobBehaviour::Ok);
        if routed {
            writing.submit("outbox", &job, &headers()).await
        } else {
            writing.nowhere(&job, &headers()).await
        }
        .expect("written");
    }
    drop(writing);
    tx.commit().await.expect("committed");
}

/// The ids of the jobs in queue `outbox`, taken: waits for `n`, so asking for one more than
/// expected proves there are no more.
async fn taken(deployed: &Deployed, n: usize) -> Vec<String> {
    deployed
        .take_dead_letters("outbox", n, Duration::from_secs(10))
        .await
        .iter()
        .map(|message| {
            let body: serde_json::Value = serde_json::from_slice(&message.body).expect("json");
            body["id"].as_str().expect("a job id").to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_what_committed_and_says_what_still_waits() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("cli-outbox", &topology()).await;
    let folder = tempfile::tempdir().expect("a temporary folder");
    let database = folder.path().join("service.db");
    let pool = SqlitePool::connect(&format!("sqlite:{}?mode=rwc", database.display()))
        .await
        .expect("SQLite opens");
    let table = "service_outbox";

    // The table is missing: the relay cannot start, and says so.
    let missing = relay_once(&database, table, &[]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
    assert!(stderr(&missing).contains(table), "{}", stderr(&missing));
    // `--migrate` creates it; nothing waits.
    let empty = relay_once(&database, table, &["--migrate"]);
    assert_eq!(empty.status.code(), Some(0), "{}", stderr(&empty));
    assert!(
        stderr(&empty).contains("published 0; 0 waiting"),
        "{}",
        stderr(&empty)
    );

    // What the service's transaction committed is published (in no particular order: the
    // publisher gives these messages no ordering key).
    let outbox = Outbox::new(pool.clone(), deployed.topology())
        .table(table)
        .expect("a plain identifier");
    let publishers = Publishers::new(deployed.publisher().await);
    write(
        &pool,
        &outbox,
        &publishers,
        &["first", "second", "third"],
        true,
    )
    .await;
    let relayed = relay_once(&database, table, &[]);
    assert_eq!(relayed.status.code(), Some(0), "{}", stderr(&relayed));
    assert!(
        stderr(&relayed).contains("published 3; 0 waiting"),
        "{}",
        stderr(&relayed)
    );
    let mut published = taken(&deployed, 4).await;
    published.sort();
    assert_eq!(published, ["first", "second", "third"]);

    // A message no queue takes is not dropped: it waits, and `--once` says why.
    write(&pool, &outbox, &publishers, &["lost-nowhere"], false).await;
    let waiting = relay_once(&database, table, &[]);
    assert_eq!(waiting.status.code(), Some(1), "{}", stderr(&waiting));
    assert!(
        stderr(&waiting).contains("1 row is still waiting; the last error:")
            && stderr(&waiting).contains("to no queue"),
        "{}",
        stderr(&waiting)
    );
    assert_eq!(outbox.backlog().await.expect("the backlog").pending, 1);

    pool.close().await;
    deployed.cleanup().await;
}

#[test]
fn a_database_url_of_another_kind_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args([
            "outbox",
            "relay",
            "--once",
            "--database-url",
            "mysql://db/orders",
        ])
        .arg("--url")
        .arg(warren_testkit::amqp_url())
        .output()
        .expect("warren runs");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is neither a `postgres://` nor a `sqlite:` URL"),
        "{}",
        stderr(&output)
    );
}
