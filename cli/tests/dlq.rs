//! `warren dlq` against the real broker: dead letters of several reasons and consumers, some
//! written by warren's worker (published here as it publishes them) and some by the broker
//! itself (rejected messages, with only `x-death`), counted, peeked at, redriven with
//! filters, purged; and a redrive killed with SIGKILL half way, which loses nothing.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use warren_runtime::lapin::BasicProperties;
use warren_runtime::lapin::options::QueueDeclareOptions;
use warren_runtime::lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use warren_runtime::model::headers;

use common::{Broker, Failure, contract, url};

fn header<'a>(table: &'a FieldTable, key: &str) -> Option<&'a AMQPValue> {
    table.inner().get(key)
}

fn group(count: &Value, by: &str) -> BTreeMap<String, u64> {
    count[by]
        .as_object()
        .expect("a grouping")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().expect("a count")))
        .collect()
}

fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

/// Nine dead letters: three exhausted in `run_none`, one of them redriven three times
/// already; two refused by `run_sibling`; one naming a queue outside the contract (forged);
/// two rejected by a foreign client, dead-lettered by the broker.
async fn fill(broker: &Broker) {
    let none = broker.name("none");
    let exhausted = |redrives| Failure {
        reason: "exhausted",
        consumer: "run_none",
        queue: none.clone(),
        error: "timeout talking to payments",
        redrives,
    };
    for (id, redrives) in [("ex-1", 0), ("ex-2", 1), ("ex-3", 0), ("ex-max", 3)] {
        broker.dead_letter(id, &exhausted(redrives)).await;
    }
    for id in ["nr-1", "nr-2"] {
        let failure = Failure {
            reason: "non-retryable",
            consumer: "run_sibling",
            queue: broker.name("sibling"),
            error: "card declined",
            redrives: 0,
        };
        broker.dead_letter(id, &failure).await;
    }
    let forged = Failure {
        reason: "validation",
        consumer: "run_none",
        queue: "amq.outside".to_owned(),
        error: "bad payload",
        redrives: 0,
    };
    broker.dead_letter("forged", &forged).await;
    for id in ["rj-1", "rj-2"] {
        broker.rejected(id).await;
    }
    assert_eq!(broker.settle("dead", 9).await, 9);
}

#[tokio::test]
async fn count_peek_redrive_and_purge() {
    let broker = Broker::start("e2e").await;
    fill(&broker).await;

    // Count: exact, by reason, consumer, failed queue and error; the queue is unchanged.
    let counts: Value =
        serde_json::from_str(&broker.ok(&["count", "--format", "json"])).expect("JSON");
    let counts = counts.as_array().expect("one entry per dead-letter queue");
    // Every dead-letter queue of the contract: `dead` (everything), `dead-read` (what
    // `failing` dead-letters, read by a dead-letter consumer), `cluster.dead` (the cluster
    // tests') and `mixed.dead` (what a consumer of several dead-letters), each by name.
    let queues: Vec<&str> = counts.iter().filter_map(|c| c["queue"].as_str()).collect();
    let names = ["dead", "dead-read", "cluster.dead", "mixed.dead"].map(|q| broker.name(q));
    assert_eq!(
        queues.iter().copied().collect::<BTreeSet<_>>(),
        names.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        "the contract's four dead-letter queues"
    );
    let of = |name: &str| {
        counts
            .iter()
            .find(|c| c["queue"].as_str() == Some(name))
            .expect("counted")
    };
    let count = of(&names[0]);
    assert_eq!(of(&names[1])["total"], 0);
    assert_eq!(of(&names[2])["total"], 0);
    assert_eq!(
        (count["total"].as_u64(), count["scanned"].as_u64()),
        (Some(9), Some(9))
    );
    assert_eq!(
        group(count, "by_reason"),
        map(&[
            ("exhausted", 4),
            ("non-retryable", 2),
            ("rejected", 2),
            ("validation", 1)
        ])
    );
    assert_eq!(
        group(count, "by_consumer"),
        map(&[("run_none", 5), ("run_sibling", 2), ("(none)", 2)])
    );
    let none = broker.name("none");
    let sibling = broker.name("sibling");
    assert_eq!(
        group(count, "by_queue"),
        map(&[(&none, 6), (&sibling, 2), ("amq.outside", 1)])
    );
    assert_eq!(
        group(count, "by_error"),
        map(&[
            ("timeout talking to payments", 4),
            ("card declined", 2),
            ("bad payload", 1),
            ("(none)", 2)
        ])
    );
    let table = broker.ok(&["count"]);
    assert!(
        table.contains(": 9 dead letters\n  by reason:\n"),
        "{table}"
    );
    assert!(table.contains("       4  exhausted\n"), "{table}");
    assert_eq!(broker.settle("dead", 9).await, 9);

    // Peek: headers, context and body of the first five; nothing leaves the queue.
    let peeked: Value =
        serde_json::from_str(&broker.ok(&["peek", "-n", "5", "--format", "json"])).expect("JSON");
    let peeked = peeked.as_array().expect("a list");
    assert_eq!(peeked.len(), 5);
    let first = &peeked[0];
    assert_eq!(first["message_id"], "ex-1");
    assert_eq!(first["failure"]["reason"], "exhausted");
    assert_eq!(first["failure"]["consumer"], "run_none");
    assert_eq!(first["failure"]["queue"], none.as_str());
    assert_eq!(first["headers"]["tenant"], "acme");
    assert_eq!(first["body"], r#"{"id":"ex-1"}"#);
    assert_eq!(broker.settle("dead", 9).await, 9);
    let table = broker.ok(&["peek", "-n", "2"]);
    assert!(
        table.contains("reason exhausted, consumer run_none"),
        "{table}"
    );

    // A dry run moves nothing.
    let dry = broker.ok(&["redrive", "--dry-run", "--reason", "exhausted"]);
    assert!(
        dry.contains("(dry run): would move 3, skipped 5 (filter), refused 1"),
        "{dry}"
    );
    assert_eq!(broker.settle("dead", 9).await, 9);
    assert_eq!(broker.ready("none").await, 0);

    // Exhausted in run_none: three go back to `none`, the one at the redrive limit stays.
    let moved = broker.ok(&[
        "redrive",
        "--queue",
        "dead",
        "--reason",
        "exhausted",
        "--consumer",
        "run_none",
    ]);
    assert!(
        moved.contains(": moved 3, skipped 5 (filter), refused 1"),
        "{moved}"
    );
    assert_eq!(broker.settle("dead", 6).await, 6);
    let back = broker.drain("none").await;
    let mut ids: Vec<_> = back.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["ex-1", "ex-2", "ex-3"]);
    for (id, table) in &back {
        let redrives = if id == "ex-2" { 2 } else { 1 };
        assert_eq!(
            header(table, headers::REDRIVE_COUNT),
            Some(&AMQPValue::LongLongInt(redrives)),
            "{id}"
        );
        for gone in [
            headers::RETRY_COUNT,
            headers::FAILURE_REASON,
            headers::LAST_ERROR,
            headers::CONSUMER,
            headers::FAILED_QUEUE,
            headers::FIRST_FAILURE,
            headers::LAST_FAILURE,
        ] {
            assert_eq!(header(table, gone), None, "{id}: {gone}");
        }
        assert!(header(table, headers::ORIGINAL_EXCHANGE).is_some(), "{id}");
        assert!(header(table, "tenant").is_some(), "{id}");
    }

    // The rest: refused by `run_sibling` back to `sibling`, the broker's own rejections back
    // to `none` (their queue read from x-death); the forged queue and the one at the limit
    // stay.
    let rest = broker.ok(&["redrive", "--limit", "100"]);
    assert!(
        rest.contains(
            ": moved 4, skipped 0 (filter), refused 1 (redriven too often), left 1 (no known queue)"
        ),
        "{rest}"
    );
    assert_eq!(broker.settle("dead", 2).await, 2);
    let sibling_ids = broker.drained_ids("sibling").await;
    assert_eq!(sibling_ids, ["nr-1", "nr-2"]);
    let rejected = broker.drain("none").await;
    let mut rejected_ids: Vec<_> = rejected.iter().map(|(id, _)| id.as_str()).collect();
    rejected_ids.sort_unstable();
    assert_eq!(rejected_ids, ["rj-1", "rj-2"]);
    for (id, table) in &rejected {
        assert_eq!(
            header(table, "x-death"),
            None,
            "{id}: the broker's record is reset"
        );
        let text = |s: &str| AMQPValue::LongString(LongString::from(s));
        assert_eq!(
            header(table, headers::ORIGINAL_EXCHANGE),
            Some(&text(&broker.name("jobs"))),
            "{id}: where it was first published, read from x-death, is kept"
        );
        assert_eq!(
            header(table, headers::ORIGINAL_ROUTING_KEY),
            Some(&text("job.none"))
        );
        assert_eq!(
            header(table, headers::REDRIVE_COUNT),
            Some(&AMQPValue::LongLongInt(1))
        );
    }

    // Purge: refused without `--yes` when nothing can be asked, then done.
    let several = broker.run(&["purge", "--yes"]);
    assert_eq!(several.status.code(), Some(2), "one queue at a time");
    assert_eq!(broker.ready("dead").await, 2);
    let refused = broker.run(&["purge", "--queue", "dead"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    assert_eq!(broker.ready("dead").await, 2);
    let purged = broker.ok(&["purge", "--queue", "dead", "--yes"]);
    assert!(purged.contains(": purged 2 messages"), "{purged}");
    assert_eq!(broker.ready("dead").await, 0);

    // A queue the contract does not have is refused before anything is read.
    let unknown = broker.run(&["count", "--queue", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    broker.stop().await;
}

/// Dead letters whose errors differ only in ids and numbers are one failure group: counted
/// as one, and redriven as one by the id `count --groups` gives it, the other group left.
#[tokio::test]
async fn failure_groups_are_counted_and_redriven_by_their_id() {
    let broker = Broker::start("groups").await;
    let none = broker.name("none");
    let orders = [
        (
            "o-1",
            "order 0f8e2a6c-3b1d-4c2e-9a7f-5d6e7f8a9b0c not found after 3 tries",
        ),
        (
            "o-2",
            "order 5b1e9c3d-7a2f-4e6b-8c1d-2e3f4a5b6c7d not found after 12 tries",
        ),
        (
            "o-3",
            "order 9d4c8b2a-1e3f-4a5b-9c6d-7e8f9a0b1c2d not found after 3 tries\n  at fetch",
        ),
    ];
    for (id, error) in orders {
        broker
            .dead_letter(id, &Failure::exhausted(&none, error))
            .await;
    }
    for (id, card) in [("c-1", "4111111111111111"), ("c-2", "5500000000000004")] {
        let error = format!("card {card} declined");
        let failure = Failure {
            reason: "non-retryable",
            consumer: "run_none",
            queue: none.clone(),
            error: &error,
            redrives: 0,
        };
        broker.dead_letter(id, &failure).await;
    }
    assert_eq!(broker.settle("dead", 5).await, 5);

    let counted: Value = serde_json::from_str(
        &broker.ok(&["count", "--groups", "--queue", "dead", "--format", "json"]),
    )
    .expect("JSON");
    let groups = counted[0]["groups"].as_array().expect("groups");
    let summary: Vec<(u64, &str, &str)> = groups
        .iter()
        .map(|g| {
            let field = |key: &str| g[key].as_str().unwrap_or_default();
            (
                g["count"].as_u64().unwrap_or_default(),
                field("reason"),
                field("error"),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (3, "exhausted", "order <uuid> not found after <n> tries"),
            (2, "non-retryable", "card <hex> declined"),
        ]
    );
    assert_eq!(groups[0]["examples"], json!(["o-1", "o-2", "o-3"]));
    let seen = |key: &str| groups[0][key].as_u64().expect("a time");
    assert!(
        seen("first_seen_ms") < seen("last_seen_ms"),
        "{:?}",
        groups[0]
    );
    let id = groups[0]["id"].as_str().expect("an id").to_owned();
    // Pinned, as docs/operations.md shows it: the same in every version.
    assert_eq!(id, "34088f4fcf42");
    let table = broker.ok(&["count", "--groups", "--queue", "dead"]);
    assert!(table.contains(": 5 dead letters in 2 groups\n"), "{table}");
    assert!(
        table.contains(&format!("  {id}         3  ")),
        "the group's id and count: {table}"
    );
    assert!(
        table.contains("exhausted · run_none · order <uuid> not found after <n> tries"),
        "{table}"
    );
    assert_eq!(broker.settle("dead", 5).await, 5);

    let dry = broker.ok(&["redrive", "--dry-run", "--group", &id]);
    assert!(dry.contains("would move 3, skipped 2 (filter)"), "{dry}");
    let moved = broker.ok(&["redrive", "--queue", "dead", "--group", &id]);
    assert!(moved.contains(": moved 3, skipped 2 (filter)"), "{moved}");
    assert_eq!(broker.settle("dead", 2).await, 2);
    let back = broker.drained_ids("none").await;
    assert_eq!(back, ["o-1", "o-2", "o-3"], "exactly the group went back");
    broker.stop().await;
}

#[tokio::test]
async fn a_redrive_killed_half_way_loses_nothing() {
    const N: u32 = 200;
    let broker = Broker::start("kill").await;
    let none = broker.name("none");
    for i in 0..N {
        let failure = Failure::exhausted(&none, "timeout");
        broker.dead_letter(&format!("m{i:03}"), &failure).await;
    }
    assert_eq!(broker.settle("dead", N).await, N);

    // Slowly, so that it is surely half way when killed.
    let mut child = broker
        .warren(&["redrive", "--rate", "20/s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("warren starts");
    // Bounded, generously: a loaded machine may take seconds to start the process.
    for _ in 0..1500 {
        if broker.ready("none").await >= 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // The broker returns what the dead process held once it sees its connection gone.
    let mut split = (0, 0);
    for _ in 0..200 {
        split = (broker.ready("dead").await, broker.ready("none").await);
        if split.0 + split.1 >= N {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (left, moved) = split;
    assert!(
        moved >= 20 && left > 0,
        "killed half way: {left} left, {moved} moved"
    );
    assert!(
        left + moved >= N,
        "nothing lost: {left} left + {moved} moved < {N}"
    );
    assert!(left + moved <= N + 1, "one message at most was in flight");

    // A second redrive finishes the job, and says how many may be duplicates.
    let rerun = broker.ok(&["redrive"]);
    let possible = rerun
        .split("duplicates possible: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map_or(0, |n| n.parse::<u32>().expect("a number"));
    assert_eq!(broker.settle("dead", 0).await, 0);
    let landed = broker.drain("none").await;
    let mut seen = BTreeMap::<String, u32>::new();
    for (id, _) in &landed {
        *seen.entry(id.clone()).or_default() += 1;
    }
    assert_eq!(
        seen.len() as u32,
        N,
        "every message is in its queue: 0 lost"
    );
    let duplicates: u32 = seen.values().map(|n| n - 1).sum();
    assert_eq!(landed.len() as u32, N + duplicates);
    assert!(
        duplicates <= possible,
        "{duplicates} duplicates, {possible} reported possible: {rerun}"
    );
    broker.stop().await;
}

/// Past [`MAX_HELD`] messages that stay, a redrive moves each further one to the back of the
/// dead-letter queue (confirmed, then acked) rather than hold it: it still reads every
/// message, holds a bounded number, and loses none.
#[tokio::test]
async fn past_the_hold_bound_messages_that_stay_go_to_the_back() {
    use warren_runtime::dead_letters::{DeadLetterQueue, Filter, MAX_HELD, RedriveOptions};
    use warren_runtime::model::FailureReason;

    let broker = Broker::start("held").await;
    let none = broker.name("none");
    let stays = MAX_HELD + 5;
    for i in 0..stays + 2 {
        let failure = Failure {
            // The last two are the ones to move, behind more than can be held.
            reason: if i >= stays {
                "exhausted"
            } else {
                "non-retryable"
            },
            consumer: "run_none",
            queue: none.clone(),
            error: "boom",
            redrives: 0,
        };
        broker.dead_letter(&format!("m{i:04}"), &failure).await;
    }
    assert_eq!(broker.settle("dead", stays + 2).await, stays + 2);
    let dlq = DeadLetterQueue::new(&broker.connection, broker.name("dead"));
    let filter = Filter::default().reason(FailureReason::Exhausted);
    let summary = dlq
        .redrive(&filter, &RedriveOptions::default(), |_| {})
        .await
        .expect("the redrive runs");
    assert_eq!(summary.scanned, stays + 2, "every message read once");
    assert_eq!((summary.moved, summary.skipped), (2, u64::from(stays)));
    assert_eq!(summary.cycled, 5, "those past the bound went to the back");
    assert_eq!(broker.settle("dead", stays).await, stays);
    let ids = broker.drained_ids("none").await;
    assert_eq!(ids, [format!("m{stays:04}"), format!("m{:04}", stays + 1)]);
    let left = broker.drain("dead").await;
    let mut left_ids: Vec<_> = left.iter().map(|(id, _)| id.clone()).collect();
    left_ids.sort_unstable();
    left_ids.dedup();
    assert_eq!(left_ids.len() as u32, stays, "none lost, none doubled");
    broker.stop().await;
}

/// `--queue` took any queue of the contract: six `count`s of a quorum work queue with
/// `delivery_limit: 5` dead-lettered its 3 live messages (each read returns them, and each
/// return is a delivery), and `purge` deleted a wait queue's retries in flight. Now only the
/// contract's dead-letter queues are read: the work queue's messages stay, untouched.
#[tokio::test]
async fn only_dead_letter_queues_are_read() {
    let broker = Broker::start("live-queues").await;
    let jobs = broker.name("jobs");
    for n in 0..3 {
        let body = format!(r#"{{"id":"live-{n}"}}"#);
        let props = BasicProperties::default().with_delivery_mode(2);
        broker
            .publish(&jobs, "job.native", body.as_bytes(), props)
            .await;
    }
    for args in [
        &["count", "--queue", "native"][..],
        &["count", "--queue", "native"],
        &["count", "--queue", "native"],
        &["count", "--queue", "native"],
        &["peek", "--queue", "native"],
        &["redrive", "--queue", "native"],
        &["purge", "--queue", "native", "--yes"],
        &["purge", "--queue", "backoff.wait.200ms", "--yes"],
    ] {
        let output = broker.run(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "warren dlq {args:?}: {stderr}"
        );
        assert!(stderr.contains("is not a dead-letter queue"), "{stderr}");
    }
    let native = broker
        .channel
        .queue_declare(
            ShortString::from(broker.name("native")),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("the work queue is there");
    assert_eq!(native.message_count(), 3, "its live messages stay");
    assert!(broker.ok(&["count", "--queue", "dead"]).contains("dead"));
    broker.stop().await;
}

/// A namespace given without its trailing dot names queues the broker does not have: the
/// error says how `--namespace` is applied, not only the broker's `NOT_FOUND`.
#[tokio::test]
async fn a_namespace_without_its_dot_is_explained() {
    let broker = Broker::start("namespace").await;
    let undotted = broker.namespace.trim_end_matches('.').to_owned();
    let output = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["dlq", "count", "--queue", "dead", "--url", &url()])
        .args(["--namespace", &undotted])
        .arg(contract())
        .stdin(Stdio::null())
        .output()
        .expect("warren runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("the broker has no queue `{undotted}dead`"))
            && stderr.contains("is put in front of every contract name as it is")
            && stderr.contains("usually ends with a dot"),
        "{stderr}"
    );
    // With its dot, the same command reads the queue.
    assert!(broker.ok(&["count", "--queue", "dead"]).contains("dead"));
    broker.stop().await;
}
