//! Warren on a three-node RabbitMQ cluster of the test's own (ports 5811 to 5813, never the
//! shared broker): a stream of confirmed publishes, some failing transiently under
//! ttl-backoff and some for good, while the node leading the work queue is killed, then the
//! node the worker is connected to, each brought back to rejoin. Nothing confirmed may be
//! lost.
//!
//! The stream has at least `WARREN_CLUSTER_MESSAGES` messages (default 20,000), and goes on
//! until both faults are over.
//!
//! It prints its figures (`cargo test -p warren-broker-tests --test cluster -- --nocapture`);
//! docs/reliability.md reports them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use warren_broker_tests::{Harness, PrivateCluster, headers, job, job_ids, types, until_settled};
use warren_runtime::{Connection, ErrorChain};

/// The cluster's first AMQP port: nodes 0, 1 and 2 listen on it and the next two.
const BASE_PORT: u16 = 5811;
/// One in this many fails its first attempt (a transient failure, retried by ttl-backoff).
const TRANSIENT_EVERY: usize = 10;
/// One in this many fails for good, and must end in the dead-letter queue.
const FATAL_EVERY: usize = 50;
/// How many times a producer publishes one message before it gives up.
const PUBLISH_ATTEMPTS: usize = 50;
/// Publishes in flight at once.
const PUBLISHERS: usize = 32;
/// The publishing pace: message `n` is not published before `n · PACE` from the start, so
/// that the stream lasts across both kills and rejoins.
const PACE: Duration = Duration::from_micros(2_000);

/// How many messages the stream has.
fn messages() -> usize {
    std::env::var("WARREN_CLUSTER_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000)
}

/// What job `n` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Handled at the first attempt.
    Ok,
    /// Fails once (retryable), then is handled.
    Transient,
    /// Fails for good: dead-lettered.
    Fatal,
}

fn fate(n: usize) -> Fate {
    if n % FATAL_EVERY == FATAL_EVERY / 2 {
        Fate::Fatal
    } else if n.is_multiple_of(TRANSIENT_EVERY) {
        Fate::Transient
    } else {
        Fate::Ok
    }
}

fn cluster_job(n: usize) -> types::Job {
    let id = format!("k{n}");
    match fate(n) {
        Fate::Ok => job(&id, types::JobBehaviour::Ok),
        Fate::Transient => types::Job {
            succeed_on_attempt: Some(1),
            ..job(&id, types::JobBehaviour::Retryable)
        },
        Fate::Fatal => job(&id, types::JobBehaviour::Fatal),
    }
}

/// Prints the test's queues on the cluster: depth, unacknowledged, leader and members online.
fn print_queues(cluster: &PrivateCluster, namespace: &str) {
    let listed = cluster.ctl(
        0,
        &[
            "-q",
            "list_queues",
            "name",
            "type",
            "messages",
            "messages_unacknowledged",
            "leader",
            "online",
        ],
    );
    for line in listed.lines().filter(|l| l.contains(namespace)) {
        println!("before the worker stops: {}", line.replace(namespace, ""));
    }
}

/// The number of a job id.
fn number(id: &str) -> usize {
    id[1..].parse().expect("a cluster job id")
}

/// What the publishing side saw.
#[derive(Default)]
struct Published {
    /// Confirmed by the broker, and when: each must be handled or dead-lettered.
    confirmed: BTreeMap<String, Instant>,
    /// Publishes that failed and were made again.
    retried: usize,
    /// Messages never confirmed in [`PUBLISH_ATTEMPTS`] attempts.
    given_up: usize,
    /// Why, for each kind of failure: how many, the first error's text, and when the first
    /// and the last happened (after the start).
    errors: BTreeMap<String, (usize, String, Duration, Duration)>,
}

/// One fault and what it cost.
#[derive(Debug)]
struct Fault {
    what: &'static str,
    node: usize,
    /// Messages published when it struck.
    after: usize,
    at: Instant,
    /// How long the node took to come back and rejoin.
    rejoined_in: Duration,
    /// How long after that until every replica of the cluster's queues was online again.
    replicas_in: Duration,
}

/// The node whose URL `connection` is on now, if it is up.
fn node_of(cluster: &PrivateCluster, connection: &Connection) -> Option<usize> {
    // The URL past its user info, which health shows with the password hidden.
    let host = |url: &str| url.rsplit('@').next().map(str::to_owned);
    let on = host(&connection.health().url?)?;
    (0..PrivateCluster::NODES).find(|&n| host(&cluster.url(n)).as_ref() == Some(&on))
}

/// The members of quorum queue `queue` that node `n` lists (`list_queues name members`),
/// and those online.
fn members(cluster: &PrivateCluster, n: usize, queue: &str) -> (usize, usize) {
    let listed = cluster.ctl(
        n,
        &[
            "-q",
            "list_queues",
            "name",
            "members",
            "online",
            "--formatter",
            "json",
        ],
    );
    let queues: serde_json::Value = serde_json::from_str(&listed).expect("list_queues is JSON");
    let entry = queues
        .as_array()
        .and_then(|all| all.iter().find(|q| q["name"].as_str() == Some(queue)))
        .unwrap_or_else(|| panic!("queue {queue} is listed: {listed}"));
    let count = |key: &str| entry[key].as_array().map_or(0, Vec::len);
    (count("members"), count("online"))
}

/// Kills node `node` with `kill -9`, leaves it down for a moment, brings it back and waits
/// until it has rejoined and every replica of `replicated` is online again: what an operator
/// waits for (`rabbitmq-queues check_if_node_is_quorum_critical`) before touching another
/// node, since a quorum queue with two of its three replicas away takes nothing.
async fn kill_and_rejoin(
    cluster: &Arc<PrivateCluster>,
    what: &'static str,
    node: usize,
    after: usize,
    replicated: &[String],
) -> Fault {
    let killer = cluster.clone();
    tokio::task::spawn_blocking(move || killer.kill(node))
        .await
        .expect("the node is killed");
    let at = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let starter = cluster.clone();
    let back = Instant::now();
    tokio::task::spawn_blocking(move || starter.up(node))
        .await
        .expect("the node comes back");
    let rejoined_in = back.elapsed();
    let online = Instant::now();
    loop {
        let all = replicated
            .iter()
            .all(|queue| members(cluster, node, queue) == (3, 3));
        if all {
            break;
        }
        assert!(
            online.elapsed() < Duration::from_secs(60),
            "the replicas on node {node} are back within a minute"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Fault {
        what,
        node,
        after,
        at,
        rejoined_in,
        replicas_in: online.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_messages_survive_a_leader_and_a_worker_node_killed() {
    // Warren's warnings (connections lost, consumers cancelled), shown with a failure.
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_test_writer()
        .try_init();
    let messages = messages();
    let cluster = Arc::new(
        tokio::task::spawn_blocking(|| PrivateCluster::start(BASE_PORT))
            .await
            .expect("the cluster forms"),
    );
    let urls = cluster.urls();
    // Declared through node 1, so the work queue's leader (`leader_locator: client-local`)
    // is there; the worker connects to node 0: killing the leader's node leaves the worker
    // connected, and killing the worker's node is another fault.
    let deploy = [urls[1].clone(), urls[2].clone(), urls[0].clone()];
    let mut health = None;
    let (mut harness, worker_connection) =
        Harness::start_on_cluster(&deploy, &urls, "cluster", |worker| {
            health = Some(worker.health_handle());
            worker.publish_timeout(Duration::from_secs(10))
        })
        .await;
    let health = health.expect("the worker was configured");
    let queue = harness.name("cluster");
    assert_eq!(
        cluster.leader_of(&queue),
        Some(1),
        "declared through node 1"
    );
    // Replicated on every node, and so are its wait queues and its dead-letter queue.
    let replicated: Vec<String> = harness
        .topology
        .queues
        .iter()
        .map(|q| q.name.clone())
        .filter(|name| name == &queue || name.starts_with(&format!("{queue}.")))
        .collect();
    assert!(
        replicated.len() > 2,
        "the queue, its wait queues, its dead letters: {replicated:?}"
    );
    for replicated in &replicated {
        assert_eq!(
            members(&cluster, 0, replicated),
            (3, 3),
            "{replicated} has a replica on each node"
        );
    }
    assert_eq!(node_of(&cluster, &worker_connection), Some(0));
    let started = Instant::now();

    // Publish the stream, `PUBLISHERS` at a time, recording what was confirmed and when.
    let published = Arc::new(Mutex::new(Published::default()));
    let next = Arc::new(AtomicUsize::new(0));
    // The stream goes on past `messages` until the faults are over, however long the nodes
    // take to come back: each fault must strike while messages flow.
    let faults_over = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..PUBLISHERS {
        let publishers = harness.publishers.clone();
        let published = published.clone();
        let next = next.clone();
        let faults_over = faults_over.clone();
        tasks.spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= messages && faults_over.load(Ordering::SeqCst) {
                    return;
                }
                let due = started + PACE * u32::try_from(n).expect("a small n");
                tokio::time::sleep_until(due.into()).await;
                let job = cluster_job(n);
                // As a producer that must not lose a message does: publish again until the
                // broker confirms (a refusal while a queue elects its leader, a connection
                // lost with the outcome unknown), at the cost of a duplicate now and then.
                for attempt in 1..=PUBLISH_ATTEMPTS {
                    let result = publishers.submit("cluster", &job, &headers()).await;
                    let mut published = published.lock().await;
                    match result {
                        Ok(()) => {
                            published
                                .confirmed
                                .insert(job.id.to_string(), Instant::now());
                            break;
                        }
                        Err(error) => {
                            published.retried += 1;
                            if attempt == PUBLISH_ATTEMPTS {
                                published.given_up += 1;
                            }
                            let kind = format!("{error:?}").chars().take(24).collect();
                            let now = started.elapsed();
                            let seen = published
                                .errors
                                .entry(kind)
                                .or_insert_with(|| (0, ErrorChain(&error).to_string(), now, now));
                            seen.0 += 1;
                            seen.3 = now;
                        }
                    }
                    drop(published);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
    }
    let published_so_far = |target: usize| {
        let next = next.clone();
        async move {
            while next.load(Ordering::SeqCst) < target {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            target
        }
    };

    // (a) The node leading the work queue, while the worker stays connected elsewhere.
    let after = published_so_far(messages / 5).await;
    let leader = cluster
        .leader_of(&queue)
        .expect("the work queue has a leader");
    let mut faults = vec![kill_and_rejoin(&cluster, "leader", leader, after, &replicated).await];
    // (b) The node the worker is connected to (it may have become the leader meanwhile).
    let after = published_so_far(messages / 2).await;
    let worker_node = node_of(&cluster, &worker_connection).expect("the worker is connected");
    println!(
        "before the second kill: the work queue's leader is on {:?}",
        cluster.leader_of(&queue)
    );
    faults.push(kill_and_rejoin(&cluster, "worker's node", worker_node, after, &replicated).await);
    // A few more seconds of messages through the mended cluster.
    tokio::time::sleep(Duration::from_secs(3)).await;
    faults_over.store(true, Ordering::SeqCst);
    while tasks.join_next().await.is_some() {}
    let published = Arc::try_unwrap(published)
        .ok()
        .expect("the publishers are done")
        .into_inner();
    let publish_time = started.elapsed();

    // Every confirmed message is handled (its handler succeeded) or, failing for good,
    // dead-lettered.
    let recorder = harness.recorder.clone();
    let handled = |id: &str| {
        let attempts = recorder.attempts(id).len();
        match fate(number(id)) {
            Fate::Ok => attempts >= 1,
            Fate::Transient => attempts >= 2,
            Fate::Fatal => false,
        }
    };
    let missing_now = || -> Vec<String> {
        published
            .confirmed
            .keys()
            .filter(|id| !handled(id))
            .filter(|id| fate(number(id)) != Fate::Fatal || recorder.attempts(id).is_empty())
            .cloned()
            .collect()
    };
    let mut missing = until_settled(&missing_now).await;
    // Retries the broker holds: on RabbitMQ 3.10 a wait queue whose leader changed may keep
    // expired messages without dead-lettering them back (its at-least-once dead-letter worker
    // does not resume; rabbitmq-server#12625, #16652), or hold them expired and unconfirmed
    // for three minutes. They are not lost: they count in the wait queue's depth or its
    // `messages_dlx`. Moving the queue's leadership again (restarting the RabbitMQ
    // application on the node that leads it) releases them.
    let held = || harness.held_retries("cluster", |args| cluster.ctl(0, args));
    let held_before = held().await;
    let mut released = None;
    if !missing.is_empty() && !held_before.is_empty() {
        let leaders: BTreeSet<usize> = held_before
            .keys()
            .filter_map(|name| cluster.leader_of(name))
            .collect();
        for node in leaders {
            let restarter = cluster.clone();
            tokio::task::spawn_blocking(move || {
                restarter.ctl(node, &["stop_app"]);
                restarter.ctl(node, &["start_app"]);
            })
            .await
            .expect("the node's application restarts");
        }
        let moved = Instant::now();
        missing = until_settled(&missing_now).await;
        released = Some(moved.elapsed());
    }
    let held_after = held().await;
    // The dead letters: every message failing for good, and any missing one that might be
    // there (its retries spent across the kills).
    let fatal = published
        .confirmed
        .keys()
        .filter(|id| fate(number(id)) == Fate::Fatal)
        .count();
    let expected: BTreeSet<&String> = published
        .confirmed
        .keys()
        .filter(|id| fate(number(id)) == Fate::Fatal)
        .chain(&missing)
        .collect();
    // Gathered until every expected id is found or the dead-letter queue stays empty: a
    // loaded machine drains a quorum queue on three nodes slowly, and a fixed 30 s counted
    // the last dead letters, still in the queue, as lost.
    let mut dead: BTreeSet<String> = BTreeSet::new();
    loop {
        let wanted = expected.iter().filter(|id| !dead.contains(**id)).count();
        if wanted == 0 {
            break;
        }
        let taken = harness
            .deployed
            .take_dead_letters("cluster.dead", wanted, Duration::from_secs(1))
            .await;
        let none_taken = taken.is_empty();
        dead.extend(job_ids(&taken));
        if none_taken && harness.deployed.ready("cluster.dead").await == 0 {
            break;
        }
    }
    // The retries still held in wait queues, by id (taken: the test is over): a message is
    // lost only when it is in no queue once everything settled.
    let namespace = harness.name("");
    let held_ids: BTreeSet<String> = harness
        .take_held_retries("cluster")
        .await
        .into_values()
        .flatten()
        .collect();
    // What the worker still holds unsettled (a copy it cannot publish) returns to the work
    // queue as it stops: never handled, and not lost either.
    let unsettled = |id: &&String| !handled(id) && !dead.contains(*id) && !held_ids.contains(*id);
    let not_found = published.confirmed.keys().filter(unsettled).count();
    if not_found > 0 {
        print_queues(&cluster, &namespace);
    }
    let left: BTreeSet<String> = harness
        .stop_worker_and_take_left("cluster", not_found)
        .await
        .into_iter()
        .collect();
    let lost: Vec<&String> = published
        .confirmed
        .keys()
        .filter(unsettled)
        .filter(|id| !left.contains(*id))
        .collect();

    // Duplicates: attempts beyond what each confirmed message needed.
    let mut duplicates = 0;
    for id in published.confirmed.keys() {
        let needed = match fate(number(id)) {
            Fate::Ok | Fate::Fatal => 1,
            Fate::Transient => 2,
        };
        duplicates += recorder.attempts(id).len().saturating_sub(needed);
    }
    // The cost of each fault: from the kill until the first message published after it was
    // handled (publishing and consuming both working again), and the longest pause in
    // handling after it.
    let mut handled_at: Vec<(Instant, Instant)> = published
        .confirmed
        .iter()
        .flat_map(|(id, confirmed)| {
            recorder
                .attempts(id)
                .into_iter()
                .map(move |attempt| (attempt.at, *confirmed))
        })
        .collect();
    handled_at.sort();
    let costs: Vec<String> = faults
        .iter()
        .map(|fault| {
            let first_new = handled_at
                .iter()
                .find(|(at, confirmed)| *at >= fault.at && *confirmed >= fault.at)
                .map(|(at, _)| at.duration_since(fault.at));
            let mut pause = Duration::ZERO;
            let mut last = fault.at;
            // While messages keep coming: after the stream ends, a pause says nothing.
            let stream_ended = started + publish_time;
            let during = handled_at
                .iter()
                .filter(|(at, _)| *at >= fault.at && *at <= stream_ended);
            for (at, _) in during {
                pause = pause.max(at.duration_since(last));
                last = *at;
            }
            format!(
                "{} (node {}, after {} published, {:.1?} after the start): first new message handled {first_new:.1?} \
                 after the kill, longest pause in handling {pause:.1?}, node rejoined in {:.1?} \
                 and its replicas {:.1?} later",
                fault.what,
                fault.node,
                fault.after,
                fault.at.duration_since(started),
                fault.rejoined_in,
                fault.replicas_in
            )
        })
        .collect();
    println!(
        "cluster: {} published in {publish_time:.1?}: {} confirmed, {} given up, {} \
         publishes made again ({:?}); {}; retries held by the broker in wait queues {held_before:?}, \
         released by moving their leaders: {released:?}, still held {held_after:?}; never settled \
         (left in the work queue) {}, lost {}, dead-lettered {} (of {fatal} failing for good), duplicate deliveries {duplicates}; \
         all accounted for {:.1?} after the start",
        next.load(Ordering::SeqCst)
            .min(published.confirmed.len() + published.given_up),
        published.confirmed.len(),
        published.given_up,
        published.retried,
        published.errors,
        costs.join("; "),
        left.len(),
        lost.len(),
        dead.len(),
        started.elapsed(),
    );
    let consumer = |snapshot: &warren_runtime::health::WorkerHealth| {
        snapshot
            .consumers
            .iter()
            .find(|c| c.name == "run_cluster")
            .cloned()
    };
    println!(
        "the cluster consumer at the end: {:?}",
        consumer(&health.snapshot())
    );
    for id in lost.iter().take(10) {
        let confirmed = published.confirmed[*id];
        let since: Vec<String> = faults
            .iter()
            .map(|f| format!("{:?}", confirmed.checked_duration_since(f.at)))
            .collect();
        println!(
            "lost {id}: {:?}, attempts {:?}, confirmed after the faults by {since:?}",
            fate(number(id)),
            recorder
                .attempts(id)
                .iter()
                .map(|a| (
                    a.retry_count,
                    a.at.duration_since(started),
                    a.message_id.clone()
                ))
                .collect::<Vec<_>>()
        );
    }
    // Every confirmed message is handled, dead-lettered, or (a broker fault, above) held
    // in a wait queue, where it was found: none is gone.
    assert!(
        lost.is_empty(),
        "{} confirmed messages were lost (in no queue; {} held in wait queues), e.g. {:?}",
        lost.len(),
        held_ids.len(),
        lost.iter().take(10).collect::<Vec<_>>()
    );
    assert!(
        left.is_empty(),
        "{} confirmed messages were never settled: the worker held them (a copy it could not \
         publish) or never received them, e.g. {:?}",
        left.len(),
        left.iter().take(10).collect::<Vec<_>>()
    );
    assert!(
        published.confirmed.len() >= messages / 2,
        "most publishes are confirmed despite the kills"
    );
    for fault in &faults {
        assert!(
            handled_at
                .iter()
                .any(|(at, confirmed)| *at >= fault.at && *confirmed >= fault.at),
            "messages published after the {} was killed were handled",
            fault.what
        );
    }
    // Both killed nodes are members again, online.
    assert_eq!(
        members(&cluster, 0, &queue),
        (3, 3),
        "every replica is back"
    );
    harness.stop().await.expect("the worker stops cleanly");
}
