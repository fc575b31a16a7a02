//! Many worker processes, one queue, on a three-node RabbitMQ cluster of the test's own (ports
//! 5831 to 5833, never the shared broker): worker processes (`src/bin/cluster_worker.rs`), each
//! connected to another node first, share a queue under a stream of confirmed publishes while
//! one of them is killed with `kill -9`; on a `single_active_consumer` queue only one of them
//! handles at a time, and another takes over when it dies, or when its node does (another
//! node than the queue's leader's, or the leader's).
//!
//! The tests share the cluster (the first starts it, the last one done stops it) and run one
//! after the other: two cores cannot time a takeover with two streams at once. Each prints its
//! figures (`cargo test -p warren-broker-tests --test cluster_workers -- --nocapture`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use warren_broker_tests::{Publishers, headers, job, topology, types};
use warren_runtime::PublishError;
use warren_testkit::{Deployed, PrivateCluster, TestBroker, try_wait_until};

/// The cluster's first AMQP port: nodes 0, 1 and 2 listen on it and the next two.
const BASE_PORT: u16 = 5831;
/// Worker processes per test, one per node.
const WORKERS: usize = PrivateCluster::NODES;
/// Publishes in flight at once.
const PUBLISHERS: usize = 16;

/// The cluster the tests share, while one of them holds it.
static CLUSTER: Mutex<Weak<PrivateCluster>> = Mutex::new(Weak::new());
/// Held by the test running: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The shared cluster, started if no test holds it.
async fn cluster() -> Arc<PrivateCluster> {
    tokio::task::spawn_blocking(|| {
        let mut shared = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cluster) = shared.upgrade() {
            return cluster;
        }
        let cluster = Arc::new(PrivateCluster::start(BASE_PORT));
        *shared = Arc::downgrade(&cluster);
        cluster
    })
    .await
    .expect("the cluster forms")
}

/// Microseconds since the Unix epoch: the clock the worker processes stamp their lines with.
fn micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_micros()
}

/// A span of microseconds, readable.
fn span(from: u128, to: u128) -> Duration {
    Duration::from_micros(u64::try_from(to.saturating_sub(from)).unwrap_or(u64::MAX))
}

/// The host and port of an AMQP URL: health shows the URL with its password hidden.
fn host(url: &str) -> &str {
    url.rsplit('@').next().unwrap_or(url)
}

/// What a worker process said, on one line of its stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Said {
    /// Its consumer is subscribed, on the node at this URL.
    Subscribed(String),
    /// Its consumer lost its subscription, and why.
    Unsubscribed(String),
    /// It began this job.
    Began(String),
    /// It handled this job, having begun it at this time (its clock), its connection up then
    /// or not, the delivery flagged redelivered or not.
    Handled {
        id: String,
        started: u128,
        connected: bool,
        redelivered: bool,
    },
    /// The worker ended (it should not).
    Stopped(String),
}

/// One line of a worker process.
#[derive(Debug, Clone)]
struct Line {
    worker: usize,
    /// When the process wrote it (its own clock, [`micros`]).
    at: u128,
    said: Said,
}

/// `line` as a worker process writes it (`<what> <micros> <rest>`), from worker `worker`.
fn parse(worker: usize, line: &str) -> Option<Line> {
    let mut parts = line.splitn(3, ' ');
    let what = parts.next()?;
    let at = parts.next()?.parse().ok()?;
    let rest = parts.next().unwrap_or_default().to_owned();
    let said = match what {
        "subscribed" => Said::Subscribed(rest),
        "unsubscribed" => Said::Unsubscribed(rest),
        "began" => Said::Began(rest),
        "handled" => {
            // `<job id> <name> <began micros> <connected> <redelivered>`
            let fields: Vec<&str> = rest.split(' ').collect();
            Said::Handled {
                id: (*fields.first()?).to_owned(),
                started: fields.get(2)?.parse().ok()?,
                connected: fields.get(3)? == &"true",
                redelivered: fields.get(4)? == &"true",
            }
        }
        "stopped" => Said::Stopped(rest),
        _ => return None,
    };
    Some(Line { worker, at, said })
}

/// A job a worker process handled.
#[derive(Debug, Clone)]
struct Handled {
    /// When it was done (the processes' clock, [`micros`]).
    at: u128,
    worker: usize,
    id: String,
    /// When it began.
    started: u128,
    /// Whether the process's connection was up when it began.
    connected: bool,
    /// Whether the broker flagged the delivery redelivered.
    redelivered: bool,
}

/// The worker processes of a test, killed when dropped (a failed test too).
struct Workers {
    children: Vec<Option<Child>>,
    lines: Arc<Mutex<Vec<Line>>>,
}

impl Workers {
    fn new() -> Self {
        Self {
            children: Vec::new(),
            lines: Arc::default(),
        }
    }

    /// Starts a worker process running `consumer` of the contract deployed as `deployed`,
    /// connected to `urls` (the first that answers), each job taking `handle_ms`; returns
    /// its number, once its consumer is subscribed.
    async fn spawn(
        &mut self,
        deployed: &Deployed,
        consumer: &str,
        urls: &[String],
        handle_ms: u64,
    ) -> usize {
        let worker = self.children.len();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cluster_worker"))
            .arg(consumer)
            .arg(deployed.namespace())
            .arg(format!("w{worker}"))
            .arg(handle_ms.to_string())
            .args(urls)
            // Held open until the child is dropped: the worker exits when it closes, so even
            // a test process killed outright leaves no worker behind.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the worker process starts");
        let stdout = child.stdout.take().expect("its stdout is piped");
        let stderr = child.stderr.take().expect("its stderr is piped");
        self.children.push(Some(child));
        let lines = self.lines.clone();
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                match parse(worker, &text) {
                    Some(line) => lines.lock().unwrap_or_else(|e| e.into_inner()).push(line),
                    None => eprintln!("worker w{worker} said: {text}"),
                }
            }
        });
        std::thread::spawn(move || {
            for text in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("worker w{worker}: {text}");
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.subscribed(worker).is_none() {
            assert!(
                Instant::now() < deadline,
                "worker w{worker} subscribed within 30 s: {:?}",
                self.of(worker)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        worker
    }

    /// Every line so far, in the order written.
    fn all(&self) -> Vec<Line> {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone();
        lines.sort_by_key(|line| line.at);
        lines
    }

    /// Worker `worker`'s lines so far.
    fn of(&self, worker: usize) -> Vec<Line> {
        self.all()
            .into_iter()
            .filter(|line| line.worker == worker)
            .collect()
    }

    /// The node URL worker `worker` last subscribed on, if it did.
    fn subscribed(&self, worker: usize) -> Option<String> {
        self.of(worker)
            .into_iter()
            .rev()
            .find_map(|line| match line.said {
                Said::Subscribed(url) => Some(url),
                _ => None,
            })
    }

    /// Every job handled so far, in the order handled.
    fn handled(&self) -> Vec<Handled> {
        self.all()
            .into_iter()
            .filter_map(|line| match line.said {
                Said::Handled {
                    id,
                    started,
                    connected,
                    redelivered,
                } => Some(Handled {
                    at: line.at,
                    worker: line.worker,
                    id,
                    started,
                    connected,
                    redelivered,
                }),
                _ => None,
            })
            .collect()
    }

    /// The jobs worker `worker` began and did not finish: in flight when it was killed.
    fn unfinished(&self, worker: usize) -> BTreeSet<String> {
        let mut begun = BTreeSet::new();
        for line in self.of(worker) {
            match line.said {
                Said::Began(id) => {
                    begun.insert(id);
                }
                Said::Handled { id, .. } => {
                    begun.remove(&id);
                }
                _ => {}
            }
        }
        begun
    }

    /// `kill -9` of worker `worker`; returns when (on the workers' clock), once it is gone.
    fn kill(&mut self, worker: usize) -> u128 {
        let mut child = self.children[worker]
            .take()
            .expect("the worker process runs");
        let at = micros();
        child.kill().expect("the worker process is killed");
        let _ = child.wait();
        at
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in self.children.iter_mut().filter_map(Option::take) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The node URLs with node `first`'s first, the others after in turn.
fn from_node(cluster: &PrivateCluster, first: usize) -> Vec<String> {
    (0..PrivateCluster::NODES)
        .map(|n| cluster.url((first + n) % PrivateCluster::NODES))
        .collect()
}

/// What the publishing side saw.
#[derive(Default)]
struct Published {
    /// Confirmed by the broker: each must be handled.
    confirmed: BTreeSet<String>,
    /// Failed with an unknown outcome: may or may not arrive.
    unknown: usize,
    /// Not sent (no connection within the timeout).
    not_sent: usize,
}

/// A stream of `count` confirmed publishes of jobs `<prefix><n>` to `target`, job `n` not
/// before `n · pace` from the start; `next` counts those started. An open-ended one goes on
/// past `count` until [`Stream::end`]: a fault must strike while jobs flow, however long a
/// loaded machine takes to kill and restart a node.
struct Stream {
    tasks: tokio::task::JoinSet<()>,
    published: Arc<Mutex<Published>>,
    next: Arc<AtomicUsize>,
    ended: Arc<AtomicBool>,
}

impl Stream {
    fn start(
        publishers: &Publishers,
        target: &'static str,
        prefix: &'static str,
        count: usize,
        pace: Duration,
    ) -> Self {
        Self::started(publishers, target, prefix, count, pace, true)
    }

    /// Like [`Stream::start`], going on past `count` until [`Stream::end`].
    fn open_ended(
        publishers: &Publishers,
        target: &'static str,
        prefix: &'static str,
        count: usize,
        pace: Duration,
    ) -> Self {
        Self::started(publishers, target, prefix, count, pace, false)
    }

    fn started(
        publishers: &Publishers,
        target: &'static str,
        prefix: &'static str,
        count: usize,
        pace: Duration,
        bounded: bool,
    ) -> Self {
        let started = Instant::now();
        let published = Arc::new(Mutex::new(Published::default()));
        let next = Arc::new(AtomicUsize::new(0));
        let ended = Arc::new(AtomicBool::new(bounded));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..PUBLISHERS {
            let publishers = publishers.clone();
            let published = published.clone();
            let next = next.clone();
            let ended = ended.clone();
            tasks.spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= count && ended.load(Ordering::SeqCst) {
                        return;
                    }
                    let due = started + pace * u32::try_from(n).expect("a small n");
                    tokio::time::sleep_until(due.into()).await;
                    let job = job(&format!("{prefix}{n}"), types::JobBehaviour::Ok);
                    let result = publishers.submit(target, &job, &headers()).await;
                    let mut published = published.lock().unwrap_or_else(|e| e.into_inner());
                    match result {
                        Ok(()) => {
                            published.confirmed.insert(job.id.to_string());
                        }
                        Err(PublishError::NotConnected(_)) => published.not_sent += 1,
                        Err(_) => published.unknown += 1,
                    }
                }
            });
        }
        Self {
            tasks,
            published,
            next,
            ended,
        }
    }

    /// Waits until `n` publishes have started.
    async fn reached(&self, n: usize) {
        while self.next.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for the end of the stream (ending an open-ended one), and says what was
    /// published.
    async fn end(mut self) -> Published {
        self.ended.store(true, Ordering::SeqCst);
        while self.tasks.join_next().await.is_some() {}
        std::mem::take(&mut *self.published.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Waits until every job in `confirmed` was handled (within a minute), and returns those that
/// were not.
async fn unhandled(workers: &Workers, confirmed: &BTreeSet<String>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let handled: BTreeSet<String> = workers.handled().into_iter().map(|h| h.id).collect();
        let missing: Vec<String> = confirmed.difference(&handled).cloned().collect();
        if missing.is_empty() || Instant::now() > deadline {
            return missing;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How often each job was handled beyond its first time, in all.
fn duplicates(handled: &[Handled]) -> (usize, BTreeMap<String, Vec<usize>>) {
    let mut by_id: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for h in handled {
        by_id.entry(h.id.clone()).or_default().push(h.worker);
    }
    by_id.retain(|_, workers| workers.len() > 1);
    let extra = by_id.values().map(|workers| workers.len() - 1).sum();
    (extra, by_id)
}

/// Jobs handled by each worker in `[from, to)`.
fn spread(handled: &[Handled], from: u128, to: u128) -> Vec<usize> {
    (0..WORKERS)
        .map(|w| {
            handled
                .iter()
                .filter(|h| h.worker == w && h.at >= from && h.at < to)
                .count()
        })
        .collect()
}

/// The contract deployed on the cluster through node 0 (where quorum queues with
/// `leader_locator: client-local` get their leader), and publishers through it.
async fn deploy(cluster: &PrivateCluster, test: &str) -> (Deployed, Publishers) {
    let broker = TestBroker::at_nodes(&from_node(cluster, 0)).await;
    let deployed = broker.deploy(test, &topology()).await;
    let publishers = Publishers::new(deployed.publisher().await);
    (deployed, publishers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_processes_share_a_queue_and_lose_nothing_when_one_is_killed() {
    /// Jobs published.
    const MESSAGES: usize = 3_000;
    /// The pace of the stream: about 330 jobs a second, for 9 s.
    const PACE: Duration = Duration::from_millis(3);
    /// How long each job takes: some are in flight, unacknowledged, when a worker dies.
    const HANDLE_MS: u64 = 50;

    let cluster = cluster().await;
    let _turn = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let (deployed, publishers) = deploy(&cluster, "workers").await;
    let mut workers = Workers::new();
    for node in 0..WORKERS {
        let worker = workers
            .spawn(
                &deployed,
                "run_cluster",
                &from_node(&cluster, node),
                HANDLE_MS,
            )
            .await;
        assert_eq!(
            workers.subscribed(worker).as_deref().map(host),
            Some(host(&cluster.url(node))),
            "worker w{worker} is on node {node}"
        );
    }
    let ready_in = started.elapsed();
    let stream_started = micros();
    let stream = Stream::start(&publishers, "cluster", "s", MESSAGES, PACE);

    // Midway, one of them dies with its prefetched and in-flight deliveries.
    stream.reached(MESSAGES / 2).await;
    let killed = 1;
    let killed_at = workers.kill(killed);
    let published = stream.end().await;
    let missing = unhandled(&workers, &published.confirmed).await;

    let handled = workers.handled();
    let before = spread(&handled, stream_started, killed_at);
    let after = spread(&handled, killed_at, u128::MAX);
    let (extra, duplicated) = duplicates(&handled);
    // Only what the killed process held comes back: each duplicate is a job it handled
    // (its ack lost with it) and another process handled again.
    let foreign: Vec<(&String, &Vec<usize>)> = duplicated
        .iter()
        .filter(|(_, by)| !by.contains(&killed))
        .collect();
    // What the killed process had begun and not finished: handled by the others.
    let in_flight = workers.unfinished(killed);
    let redelivered = handled
        .iter()
        .filter(|h| h.worker != killed && h.redelivered)
        .count();
    println!(
        "shared queue: {MESSAGES} published: {} confirmed, {} unknown outcome, {} not sent; \
         3 worker processes (one per node) ready in {ready_in:.1?}; w{killed} killed after {} \
         published; handled per process before the kill {before:?}, after {after:?}; lost {}, \
         duplicate deliveries {extra} (of {} jobs: handled by the killed process, its ack lost); \
         {} in flight in the killed process, {redelivered} deliveries flagged redelivered to the \
         others; all handled {:.1?} after the start",
        published.confirmed.len(),
        published.unknown,
        published.not_sent,
        MESSAGES / 2,
        missing.len(),
        duplicated.len(),
        in_flight.len(),
        started.elapsed(),
    );
    assert!(
        missing.is_empty(),
        "{} confirmed jobs were never handled, e.g. {:?}",
        missing.len(),
        missing.iter().take(10).collect::<Vec<_>>()
    );
    assert_eq!(
        published.confirmed.len(),
        MESSAGES,
        "no node failed: every publish is confirmed"
    );
    assert!(
        before.iter().all(|&n| n > 0),
        "every process took a share before the kill: {before:?}"
    );
    assert!(
        after
            .iter()
            .enumerate()
            .all(|(w, &n)| (w == killed) == (n == 0)),
        "the survivors, and only they, handled after the kill: {after:?}"
    );
    assert!(
        foreign.is_empty(),
        "only the killed process's jobs come back: {foreign:?}"
    );
    drop(workers);
    deployed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_active_consumer_is_taken_over_when_its_process_or_its_node_dies() {
    /// Jobs published.
    const MESSAGES: usize = 3_000;
    /// The pace of the stream: 250 jobs a second, for 12 s.
    const PACE: Duration = Duration::from_millis(4);
    /// How long each job takes (4 at a time: up to 800 a second).
    const HANDLE_MS: u64 = 5;
    /// `run_single`'s prefetch in the contract: what a process can hold when its node dies.
    const PREFETCH: usize = 20;
    /// How long a takeover may take at most before the test gives up on it.
    const TAKEOVER: Duration = Duration::from_secs(120);

    let cluster = cluster().await;
    let _turn = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let (deployed, publishers) = deploy(&cluster, "single").await;
    // One after the other: the first to subscribe is the active one, the others wait.
    let mut workers = Workers::new();
    for node in 0..WORKERS {
        workers
            .spawn(
                &deployed,
                "run_single",
                &from_node(&cluster, node),
                HANDLE_MS,
            )
            .await;
    }
    let ready_in = started.elapsed();
    let stream_started = micros();
    let stream = Stream::open_ended(&publishers, "cluster-single", "a", MESSAGES, PACE);

    // (1) The active process dies.
    stream.reached(MESSAGES / 4).await;
    let active: BTreeSet<usize> = workers.handled().iter().map(|h| h.worker).collect();
    assert_eq!(
        active.len(),
        1,
        "one process handles: {active:?} (the first subscribed is w0)"
    );
    let first = *active.first().expect("one active process");
    let process_killed_at = workers.kill(first);

    // (2) The node of the process that took over dies, and comes back.
    stream.reached(MESSAGES / 2).await;
    let handled = workers.handled();
    let second = handled
        .iter()
        .find(|h| h.at > process_killed_at)
        .map(|h| h.worker)
        .expect("another process took over");
    let node = (0..PrivateCluster::NODES)
        .find(|&n| workers.subscribed(second).as_deref().map(host) == Some(host(&cluster.url(n))))
        .expect("the second is on a node of the cluster");
    let leader = cluster.leader_of(&deployed.name("cluster-single"));
    let killer = cluster.clone();
    let node_killed_at = micros();
    tokio::task::spawn_blocking(move || killer.kill(node))
        .await
        .expect("the node is killed");
    // The script returns once the node's process is gone: from the kill command until then,
    // the node may still deliver.
    let node_gone_at = micros();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let starter = cluster.clone();
    let back = Instant::now();
    tokio::task::spawn_blocking(move || starter.up(node))
        .await
        .expect("the node comes back");
    let rejoined_in = back.elapsed();
    // Jobs flow until a third process has taken over, however long the kill took.
    let taken_over = || {
        workers
            .handled()
            .iter()
            .any(|h| h.at > node_killed_at && h.worker != second)
    };
    let waited = try_wait_until(TAKEOVER, taken_over).await;
    let published = stream.end().await;
    let missing = unhandled(&workers, &published.confirmed).await;
    // Counted now that its last lines were surely read from the pipe.
    let in_flight = workers.unfinished(first);
    let handled = workers.handled();
    let (extra, duplicated) = duplicates(&handled);
    // Who handled in each period: one process only, each time another.
    let by = |from: u128, to: u128| -> BTreeSet<usize> {
        handled
            .iter()
            .filter(|h| h.at >= from && h.at < to)
            .map(|h| h.worker)
            .collect()
    };
    // The process whose node died may still finish the jobs it had begun (their acks are
    // lost with the connection): it is not counted as handling after the kill.
    let late: Vec<&Handled> = handled
        .iter()
        .filter(|h| h.worker == second && h.at >= node_killed_at)
        .collect();
    // Of those, the ones it began with its connection already down: deliveries it had
    // prefetched, handled though their acks could no longer be sent.
    let begun_disconnected = late.iter().filter(|h| !h.connected).count();
    let begun_after = late.iter().filter(|h| h.started > node_gone_at).count();
    let mut periods = [
        by(stream_started, process_killed_at),
        by(process_killed_at, node_killed_at),
        by(node_killed_at, u128::MAX),
    ];
    periods[2].remove(&second);
    let takeover = |after: u128, from: usize| {
        handled
            .iter()
            .find(|h| h.at > after && h.worker != from)
            .map(|h| span(after, h.at))
    };
    let process_takeover = takeover(process_killed_at, first);
    let node_takeover = takeover(node_killed_at, second);
    let third = periods[2].first().copied();
    // The process on the killed node: when it subscribed again, elsewhere.
    let resubscribed = workers
        .of(second)
        .iter()
        .find(|l| l.at > node_killed_at && matches!(l.said, Said::Subscribed(_)))
        .map(|l| (span(node_killed_at, l.at), l.said.clone()));
    let counts = spread(&handled, stream_started, u128::MAX);
    println!(
        "single active consumer: {MESSAGES} published: {} confirmed, {} unknown outcome, {} not \
         sent; 3 worker processes (one per node) ready in {ready_in:.1?}; handled by \
         {periods:?} (before the process kill, before the node kill, after); w{first} killed \
         ({} jobs in flight): w{second} took over in {process_takeover:.1?}; its node {node} \
         killed (the queue's leader on {leader:?}): {third:?} took over in {node_takeover:.1?}, \
         w{second} subscribed again after {resubscribed:?} and finished {} jobs after the kill \
         (the last {:.1?} after; {begun_after} begun after the node was gone, {:.1?} after the \
         kill command, {begun_disconnected} with its connection known down), the node rejoined \
         in {rejoined_in:.1?}; handled per process {counts:?}; lost {}, duplicate deliveries \
         {extra} (of {} jobs: {:?}); all handled {:.1?} after the start",
        published.confirmed.len(),
        published.unknown,
        published.not_sent,
        in_flight.len(),
        late.len(),
        late.last().map(|h| span(node_killed_at, h.at)),
        span(node_killed_at, node_gone_at),
        missing.len(),
        duplicated.len(),
        duplicated.iter().take(5).collect::<Vec<_>>(),
        started.elapsed(),
    );
    assert!(
        missing.is_empty(),
        "{} confirmed jobs were never handled, e.g. {:?}",
        missing.len(),
        missing.iter().take(10).collect::<Vec<_>>()
    );
    assert!(
        waited,
        "another process took over within {TAKEOVER:?} of the node kill"
    );
    assert_eq!(
        (published.unknown, published.not_sent),
        (0, 0),
        "a node other than the publisher's failed: every publish is confirmed"
    );
    for (period, handlers) in periods.iter().enumerate() {
        assert_eq!(
            handlers.len(),
            1,
            "one process at a time handles: {periods:?} (period {period})"
        );
    }
    assert!(
        periods[0] != periods[1] && periods[1] != periods[2],
        "another process takes over each time: {periods:?}"
    );
    // Counted, not timed: once its node was gone, it could only begin what it held already.
    assert!(
        begun_after <= PREFETCH,
        "w{second} only finished what it had begun or prefetched when its node died \
         ({begun_after} begun after, prefetch {PREFETCH}): {late:?}"
    );
    drop(workers);
    deployed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_active_consumer_is_taken_over_when_the_queue_leader_s_node_dies() {
    /// Jobs published.
    const MESSAGES: usize = 2_000;
    /// The pace of the stream: 250 jobs a second, for 8 s.
    const PACE: Duration = Duration::from_millis(4);
    /// How long each job takes (4 at a time: up to 800 a second).
    const HANDLE_MS: u64 = 5;
    /// `run_single`'s prefetch in the contract: what a process can hold when its node dies.
    const PREFETCH: usize = 20;
    /// How long a takeover may take at most before the test gives up on it.
    const TAKEOVER: Duration = Duration::from_secs(120);

    let cluster = cluster().await;
    let _turn = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    // Declared through node 0, where the queue's leader is then; published through node 1,
    // which stays up.
    let broker = TestBroker::at_nodes(&from_node(&cluster, 0)).await;
    let deployed = broker.deploy("leader", &topology()).await;
    let urls = from_node(&cluster, 1);
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let publishing = warren_testkit::test_connection("publisher", &urls)
        .await
        .expect("node 1 answers");
    let publishers = Publishers::new(
        warren_runtime::Publisher::new(&publishing, deployed.topology())
            .await
            .expect("a publisher on node 1"),
    );
    let queue = deployed.name("cluster-single");
    let leader = cluster.leader_of(&queue).expect("the queue has a leader");
    // The active one, the first to subscribe, on the leader's node.
    let mut workers = Workers::new();
    for n in 0..WORKERS {
        workers
            .spawn(
                &deployed,
                "run_single",
                &from_node(&cluster, (leader + n) % PrivateCluster::NODES),
                HANDLE_MS,
            )
            .await;
    }
    let ready_in = started.elapsed();
    let stream_started = micros();
    let stream = Stream::open_ended(&publishers, "cluster-single", "l", MESSAGES, PACE);

    stream.reached(MESSAGES / 3).await;
    let killer = cluster.clone();
    let killed_at = micros();
    tokio::task::spawn_blocking(move || killer.kill(leader))
        .await
        .expect("the node is killed");
    let gone_at = micros();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let new_leader = cluster.leader_of(&queue);
    let starter = cluster.clone();
    let back = Instant::now();
    tokio::task::spawn_blocking(move || starter.up(leader))
        .await
        .expect("the node comes back");
    let rejoined_in = back.elapsed();
    // Jobs flow until another process has taken over, however long the kill took.
    let taken_over = || {
        workers
            .handled()
            .iter()
            .any(|h| h.at > killed_at && h.worker != 0)
    };
    let waited = try_wait_until(TAKEOVER, taken_over).await;
    let published = stream.end().await;
    let missing = unhandled(&workers, &published.confirmed).await;
    let handled = workers.handled();
    let (extra, duplicated) = duplicates(&handled);
    let by = |from: u128, to: u128| -> BTreeSet<usize> {
        handled
            .iter()
            .filter(|h| h.at >= from && h.at < to)
            .map(|h| h.worker)
            .collect()
    };
    // What w0 finished after the kill command: begun before its node was gone.
    let late: Vec<&Handled> = handled
        .iter()
        .filter(|h| h.worker == 0 && h.at >= killed_at)
        .collect();
    let mut periods = [by(stream_started, killed_at), by(killed_at, u128::MAX)];
    let w0_after = periods[1].remove(&0);
    let takeover = handled
        .iter()
        .find(|h| h.at > killed_at && h.worker != 0)
        .map(|h| span(killed_at, h.at));
    let resubscribed = workers
        .of(0)
        .iter()
        .find(|l| l.at > killed_at && matches!(l.said, Said::Subscribed(_)))
        .map(|l| (span(killed_at, l.at), l.said.clone()));
    println!(
        "single active consumer, its queue leader's node killed: {MESSAGES} published: {} \
         confirmed, {} unknown outcome, {} not sent; 3 worker processes ready in \
         {ready_in:.1?}, the active one w0 on the leader's node {leader}; handled by \
         {periods:?} (before the kill, after; w0 finishing its last jobs after: {w0_after}); node {leader} killed ({:.1?} \
         until gone): the leader moved to {new_leader:?}, {:?} took over in {takeover:.1?}, \
         w0 finished {} jobs after the kill command and subscribed again after \
         {resubscribed:?}, the node rejoined in {rejoined_in:.1?}; handled per process {:?}; \
         lost {}, duplicate deliveries {extra} (of {} jobs); all handled {:.1?} after the start",
        published.confirmed.len(),
        published.unknown,
        published.not_sent,
        span(killed_at, gone_at),
        periods[1],
        late.len(),
        spread(&handled, stream_started, u128::MAX),
        missing.len(),
        duplicated.len(),
        started.elapsed(),
    );
    assert!(
        waited,
        "another process took over within {TAKEOVER:?} of the kill"
    );
    assert!(
        missing.is_empty(),
        "{} confirmed jobs were never handled, e.g. {:?}",
        missing.len(),
        missing.iter().take(10).collect::<Vec<_>>()
    );
    assert!(
        published.confirmed.len() >= MESSAGES / 2,
        "most publishes are confirmed despite the kill"
    );
    assert_eq!(periods[0], BTreeSet::from([0]), "w0 handled alone first");
    assert_eq!(
        periods[1].len(),
        1,
        "one other process took over: {periods:?}"
    );
    // Counted, not timed: once its node was gone, it could only begin what it held already.
    let begun_after = late.iter().filter(|h| h.started > gone_at).count();
    assert!(
        begun_after <= PREFETCH,
        "w0 only finished what it had begun or prefetched when its node died \
         ({begun_after} begun after, prefetch {PREFETCH}): {late:?}"
    );
    drop(workers);
    deployed.cleanup().await;
    let _ = publishing.close().await;
}
