//! Effects exactly once, proved by killing: on the real broker and PostgreSQL, ledger
//! entries whose handler writes one row each (`src/bin/ledger.rs`, run as child processes
//! and killed with `kill -9`).
//!
//! - 10,000 entries through a worker killed three times: once between an entry's committed
//!   transaction and its ack (the worker holds it there), twice at random points.
//! - Entries written to an outbox and relayed by a relay killed mid-run, on a private broker
//!   restarted (`kill -9`) while relaying, to the inbox consumers downstream.
//!
//! Every entry's effect is in the database exactly once, and nothing is left in a queue.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sqlx::PgPool;
use warren_broker_tests::database::{self, Tables, TestDatabase};
use warren_broker_tests::ledger::{self, types::Entry};
use warren_runtime::outbox::Outbox;
use warren_testkit::{Deployed, PrivateBroker, TestBroker, wait_until_async};

/// Entries through the killed worker.
const ENTRIES: usize = 10_000;
/// Entries through the killed relay.
const RELAYED: usize = 3_000;
/// The private broker the relay test restarts (never the shared one).
const PRIVATE_PORT: u16 = 5851;
const WAIT: Duration = Duration::from_secs(180);

/// A random number in `range`, printed so that a failing run can be told apart.
fn random_in(range: std::ops::Range<usize>) -> usize {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    range.start + (random as usize) % (range.end - range.start)
}

fn entry(id: &str) -> Entry {
    Entry {
        id: id.try_into().expect("a non-empty id"),
        fail_first: None,
    }
}

/// A `ledger` process in `mode`, on `url`, with the tables of `tables`; returns once it says
/// `ready` (or that it holds an entry, which it may say first).
fn start_ledger(
    mode: &[&str],
    url: &str,
    deployed: &Deployed,
    tables: &Tables<sqlx::Postgres>,
    outbox: &str,
) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args(mode)
        .env("AMQP_URL", url)
        .env("DATABASE_URL", database::postgres_url())
        .env("LEDGER_NAMESPACE", deployed.namespace())
        .env("LEDGER_INBOX", &tables.inbox_table)
        .env("LEDGER_EFFECTS", &tables.effects)
        .env("LEDGER_OUTBOX", outbox)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the ledger process starts");
    let stdout = child.stdout.take().expect("its stdout");
    let mut lines = BufReader::new(stdout).lines();
    let said = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(
        said == "ready" || said.starts_with("holding"),
        "ledger {mode:?} said {said:?}"
    );
    // The rest of what it says, shown with the test's output and read so its pipe never
    // fills.
    let name = mode.join(" ");
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            println!("ledger {name}: {line}");
        }
    });
    child
}

/// `kill -9` of `child`, waited for: how it ended.
fn kill(mut child: Child) -> std::process::ExitStatus {
    // Held open until it is dead: a closed stdin would stop it cleanly first.
    let _stdin = child.stdin.take();
    let _ = child.kill();
    child.wait().expect("an exit status")
}

/// Stops `child` cleanly (its stdin closed: a worker drains and acknowledges what it holds),
/// waited for.
async fn stop(mut child: Child) {
    drop(child.stdin.take());
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("waited")
        .expect("an exit status");
    assert!(status.success(), "stopped cleanly: {status:?}");
}

/// How many rows of the effects table, and of how many entries.
async fn written(pool: &PgPool, effects: &str) -> (i64, usize) {
    let rows = sqlx::Postgres::effects(pool, effects).await;
    (rows.values().sum(), rows.len())
}

async fn wait_for_rows(pool: &PgPool, effects: &str, rows: usize) {
    wait_until_async(&format!("{rows} effects written"), WAIT, || async {
        written(pool, effects).await.1 >= rows
    })
    .await;
}

/// Every entry `prefix{0..n}` once, and nothing else.
async fn assert_each_once(pool: &PgPool, effects: &str, prefix: &str, n: usize) {
    let rows = sqlx::Postgres::effects(pool, effects).await;
    let expected: BTreeMap<String, i64> = (0..n).map(|i| (format!("{prefix}{i}"), 1)).collect();
    let twice: Vec<_> = rows.iter().filter(|(_, count)| **count != 1).collect();
    assert!(
        twice.is_empty(),
        "effects written more than once: {twice:?}"
    );
    assert_eq!(rows.len(), expected.len(), "every entry's effect");
    assert_eq!(rows, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_effects_once_through_three_kills() {
    let broker = TestBroker::from_env().await;
    let deployed = broker.deploy("kill", &ledger::topology()).await;
    let pool = database::postgres().await;
    let tables = Tables::create(&deployed, &pool).await;
    let publishers = ledger::Publishers::new(deployed.publisher().await);
    let publishing = (0..4).map(|lane| {
        let publishers = publishers.clone();
        tokio::spawn(async move {
            for i in (lane..ENTRIES).step_by(4) {
                publishers
                    .record(&entry(&format!("k{i}")))
                    .await
                    .expect("published");
            }
        })
    });
    for lane in publishing.collect::<Vec<_>>() {
        lane.await.expect("a publishing task");
    }
    let url = warren_testkit::amqp_url();
    let effects = tables.effects.clone();

    // 1. Killed between an entry's commit and its ack: the worker holds the delivery once
    // its effect is written, and is killed once the effect is seen.
    let held = format!("k{}", random_in(1_000..3_000));
    let started = |mode: &[&str]| start_ledger(mode, &url, &deployed, &tables, "unused");
    let holding = started(&["hold-after-commit", held.as_str()]);
    wait_until_async(&format!("{held}'s effect committed"), WAIT, || async {
        sqlx::Postgres::effects(&pool, &effects)
            .await
            .contains_key(&held)
    })
    .await;
    assert_eq!(kill(holding).signal(), Some(9), "killed with SIGKILL");

    // 2 and 3. Killed at random points.
    for range in [4_000..6_000, 7_000..9_000] {
        let at = random_in(range);
        println!("killing the worker after {at} effects (held {held} first)");
        let worker = started(&["consume"]);
        wait_for_rows(&pool, &effects, at).await;
        kill(worker);
    }

    // The last worker finishes.
    let worker = started(&["consume"]);
    wait_for_rows(&pool, &effects, ENTRIES).await;
    deployed.wait_until_ready("entries", 0, WAIT).await;
    stop(worker).await;
    assert_each_once(&pool, &effects, "k", ENTRIES).await;
    // Stopped after draining: nothing came back to the queue, nothing died.
    assert_eq!(
        deployed.ready("entries").await,
        0,
        "every entry acknowledged"
    );
    assert_eq!(
        deployed.count_dead_letters("dead").await,
        0,
        "no dead letters"
    );
    tables.drop(&pool).await;
    deployed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayed_through_a_killed_relay_and_a_restarted_broker_each_effect_happens_once() {
    let broker = tokio::task::spawn_blocking(|| PrivateBroker::start(PRIVATE_PORT))
        .await
        .expect("the private broker starts");
    let url = broker.url();
    let test_broker = TestBroker::at(&url).await;
    let deployed = test_broker.deploy("relay-kill", &ledger::topology()).await;
    let pool = database::postgres().await;
    let tables = Tables::create(&deployed, &pool).await;
    let outbox_table = database::table("outbox", &deployed);
    let outbox = Outbox::new(pool.clone(), deployed.topology())
        .table(&outbox_table)
        .expect("a plain table name");
    outbox.migrate().await.expect("the outbox's table");
    let publishers = ledger::Publishers::new(deployed.publisher().await);
    for chunk in 0..RELAYED / 100 {
        let mut tx = pool.begin().await.expect("a transaction");
        let writing = publishers.through(outbox.writer(&mut tx));
        for i in chunk * 100..(chunk + 1) * 100 {
            writing
                .record(&entry(&format!("r{i}")))
                .await
                .expect("written");
        }
        drop(writing);
        tx.commit().await.expect("committed");
    }
    let effects = tables.effects.clone();
    let started = |mode: &[&str]| start_ledger(mode, &url, &deployed, &tables, &outbox_table);
    let worker = started(&["consume"]);
    let relay = started(&["relay"]);

    // The relay killed mid-run: what it claimed and did not mark sent is published again
    // after its lease, by the next relay.
    let at = random_in(500..1_000);
    println!("killing the relay after {at} effects");
    wait_for_rows(&pool, &effects, at).await;
    kill(relay);
    let relay = started(&["relay"]);

    // The broker killed and started again while relaying.
    let at = random_in(1_500..2_200);
    println!("restarting the broker after {at} effects");
    wait_for_rows(&pool, &effects, at).await;
    let broker = tokio::task::spawn_blocking(move || {
        broker.kill();
        broker.up();
        broker
    })
    .await
    .expect("the broker restarts");

    wait_for_rows(&pool, &effects, RELAYED).await;
    wait_until_async("the outbox drained", WAIT, || async {
        outbox.backlog().await.is_ok_and(|b| b.pending == 0)
    })
    .await;
    deployed.wait_until_ready("entries", 0, WAIT).await;
    stop(relay).await;
    stop(worker).await;
    assert_each_once(&pool, &effects, "r", RELAYED).await;
    assert_eq!(
        deployed.ready("entries").await,
        0,
        "every entry acknowledged"
    );
    assert_eq!(
        deployed.count_dead_letters("dead").await,
        0,
        "no dead letters"
    );
    tables.drop(&pool).await;
    sqlx::Postgres::run(&pool, &format!("DROP TABLE {outbox_table}")).await;
    drop(broker);
}
