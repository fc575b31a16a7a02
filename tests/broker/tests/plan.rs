//! Changing a deployed retry policy (`warren_runtime::plan`, `warren plan`): version 1 of a
//! topology is deployed and filled, its queues and its wait queues; version 2 changes the
//! retries (a mode, `max_retries`, the delays, a delivery limit); the plan says what it will
//! do and changes nothing; applied, it migrates what the broker refuses to change; a worker
//! of version 2 then handles or dead-letters every message, and none is lost.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lapin::BasicProperties;
use lapin::options::{
    BasicConsumeOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Recorder, amqp_url, consumers, job, raw_headers, topology};
use warren_runtime::model::{Backoff, DeliveryLimit, Destination, Exhausted, Retry, Topology};
use warren_runtime::plan::{Action, Plan};
use warren_runtime::{Connection, Worker};
use warren_testkit::management;

const WAIT: Duration = Duration::from_secs(60);

/// The queues under test.
const QUEUES: [&str; 4] = ["backoff", "native", "short-long", "dead"];

fn backoff(queue: &str, max_retries: u32, initial: u64, max: u64) -> Retry {
    Retry::TtlBackoff(Backoff::new(
        queue,
        max_retries,
        Duration::from_millis(initial),
        Duration::from_millis(max),
        2.0,
        false,
        Exhausted::DeadLetter,
    ))
}

/// The test contract's exchanges, `QUEUES` with the retry policies `policy` gives (and their
/// wait queues), and their bindings.
fn version(policy: impl Fn(&str) -> (Retry, Option<u32>)) -> Topology {
    let base = topology();
    let mut queues = Vec::new();
    for name in QUEUES {
        let mut queue = base.queue(name).expect("a queue of the contract").clone();
        if name != "dead" {
            let (retry, limit) = policy(name);
            queue.retry = retry;
            queue.delivery_limit = limit.map_or(DeliveryLimit::Derived, DeliveryLimit::Count);
        }
        let waits = queue.wait_queues();
        queues.push(queue);
        queues.extend(waits);
    }
    let bindings = base
        .bindings
        .iter()
        .filter(|b| matches!(&b.destination, Destination::Queue(q) if QUEUES.contains(&q.as_str())))
        .cloned()
        .collect();
    Topology::new(base.exchanges.clone(), queues, bindings)
}

/// Version 1: long waits, so retries are still waiting when version 2 is deployed.
fn v1() -> Topology {
    version(|name| match name {
        // Quorum: `x-delivery-limit` 4; waits of 5 and 10 minutes.
        "backoff" => (backoff(name, 3, 300_000, 600_000), None),
        // Quorum: the broker counts, `x-delivery-limit` 2.
        "native" => (Retry::QuorumNative, Some(2)),
        // Classic (no delivery limit): only its wait queues change.
        _ => (backoff(name, 2, 300_000, 600_000), None),
    })
}

/// Version 2: every retry setting changed.
fn v2() -> Topology {
    version(|name| match name {
        // max_retries 3 → 1 (`x-delivery-limit` 4 → 2), delays 5 min, 10 min → 200 ms.
        "backoff" => (backoff(name, 1, 200, 200), None),
        // quorum-native → ttl-backoff, `x-delivery-limit` 2 → 3, new wait queues.
        "native" => (backoff(name, 2, 200, 400), None),
        // Delays 5 min, 10 min → 300 ms.
        _ => (backoff(name, 1, 300, 300), None),
    })
}

struct Broker {
    connection: Connection,
    channel: lapin::Channel,
    namespace: String,
}

impl Broker {
    async fn connect(test: &str) -> Self {
        let connection = Connection::connect(&amqp_url(), &format!("warren-test-{test}"))
            .await
            .expect("the test broker answers at AMQP_URL");
        let channel = connection.create_channel().await.expect("a channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        let namespace = format!("test.{test}.{}.", uuid::Uuid::now_v7().simple());
        Self {
            connection,
            channel,
            namespace,
        }
    }

    fn name(&self, name: &str) -> String {
        format!("{}{name}", self.namespace)
    }

    /// Publishes job `id` with `behaviour` to `exchange` (namespaced unless the default one)
    /// with `routing_key` and `extra` headers, confirmed.
    async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        id: &str,
        behaviour: JobBehaviour,
        extra: &[(&str, AMQPValue)],
    ) {
        let mut headers = raw_headers();
        for (key, value) in extra {
            headers.insert(ShortString::from(*key), value.clone());
        }
        let body = serde_json::to_vec(&job(id, behaviour)).expect("json");
        let exchange = if exchange.is_empty() {
            String::new()
        } else {
            self.name(exchange)
        };
        let confirmation = self
            .channel
            .basic_publish(
                ShortString::from(exchange),
                ShortString::from(routing_key),
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                &body,
                BasicProperties::default()
                    .with_content_type(ShortString::from("application/json"))
                    .with_delivery_mode(2)
                    .with_headers(headers),
            )
            .await
            .expect("published")
            .await
            .expect("confirmed");
        assert!(
            matches!(confirmation, lapin::Confirmation::Ack(None)),
            "routed and confirmed: {confirmation:?}"
        );
    }

    /// Puts job `id` in wait queue `wait` of `queue` as a worker's retry copy would be.
    async fn park(&self, queue: &str, wait: &str, id: &str, behaviour: JobBehaviour, retries: i64) {
        let text = |s: &str| AMQPValue::LongString(LongString::from(s));
        self.publish(
            "",
            &self.name(wait),
            id,
            behaviour,
            &[
                ("x-retry-count", AMQPValue::LongLongInt(retries)),
                ("x-original-exchange", text(&self.name("jobs"))),
                ("x-original-routing-key", text(&format!("job.{queue}"))),
                ("x-last-error", text("failed under version 1")),
            ],
        )
        .await;
    }

    /// Ready messages in queue `name` (namespaced), or `None` when it does not exist.
    async fn ready(&self, name: &str) -> Option<u32> {
        let channel = self.connection.create_channel().await.expect("a channel");
        let declared = channel
            .queue_declare(
                ShortString::from(self.name(name)),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await;
        match declared {
            Ok(queue) => {
                let _ = channel.close(200, ShortString::from("counted")).await;
                Some(queue.message_count())
            }
            Err(_) => None,
        }
    }

    /// The job ids dead-lettered so far, with how often each was.
    async fn dead(&self, into: &mut BTreeMap<String, usize>) {
        let queue = ShortString::from(self.name("dead"));
        while let Some(message) = self
            .channel
            .basic_get(queue.clone(), BasicGetOptions { no_ack: true })
            .await
            .expect("basic.get")
        {
            let job: serde_json::Value =
                serde_json::from_slice(&message.delivery.data).expect("a job");
            let id = job["id"].as_str().expect("an id").to_owned();
            *into.entry(id).or_default() += 1;
        }
    }
}

/// A worker of version 1 reading `backoff`, once the broker reports it. Hold the consumer:
/// dropping lapin's consumer cancels it.
async fn old_worker(
    broker: &Broker,
    new: &Topology,
    old: &Topology,
) -> (lapin::Channel, lapin::Consumer) {
    let reader = broker.connection.create_channel().await.expect("a channel");
    let consumer = reader
        .basic_consume(
            ShortString::from(broker.name("backoff")),
            ShortString::from("v1-worker"),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consuming");
    // A quorum queue registers a consumer after it said `consume-ok`, and reports it when
    // its leader has: as a long-running worker of version 1 would be, it is seen.
    let mut seen = false;
    for _ in 0..100 {
        let plan = Plan::compute(&broker.connection, new, Some(old), Some(&management()))
            .await
            .expect("a plan");
        let backoff = plan.items.iter().find(|i| i.name == broker.name("backoff"));
        if backoff
            .and_then(|i| i.state)
            .is_some_and(|s| s.consumers == 1)
        {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen, "the broker reports the consumer");
    (reader, consumer)
}

fn actions(plan: &Plan, namespace: &str) -> BTreeMap<String, Action> {
    plan.items
        .iter()
        .map(|item| {
            let name = item.name.strip_prefix(namespace).unwrap_or(&item.name);
            (name.to_owned(), item.action.clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_retry_policy_is_deployed_without_losing_a_message() {
    let broker = Broker::connect("plan").await;
    let ns = broker.namespace.clone();
    let (old, new) = (v1().namespaced(&ns), v2().namespaced(&ns));
    old.validate().expect("version 1 is consistent");
    new.validate().expect("version 2 is consistent");
    warren_runtime::declare(&broker.connection, &old)
        .await
        .expect("version 1 declares");

    // A worker of version 1 still reads `backoff` (before anything is published, so it holds
    // no message): the plan is blocked, and applying it changes nothing.
    let (reader, _consumer) = old_worker(&broker, &new, &old).await;
    let plan = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    let blocked = plan.blocked();
    assert_eq!(
        blocked.len(),
        3,
        "the queue and its two wait queues: {blocked:?}\n{plan}"
    );
    assert!(blocked[0].contains("consumer"), "{blocked:?}");
    assert!(matches!(
        plan.apply(&broker.connection).await,
        Err(warren_runtime::plan::PlanError::Blocked(_))
    ));
    reader
        .close(200, ShortString::from("version 1 stopped"))
        .await
        .expect("closed");

    // Version 1, filled: messages in every queue, retries waiting in its wait queues.
    let mut ok = BTreeSet::new();
    let mut failing = BTreeSet::new();
    for queue in ["backoff", "native", "short-long"] {
        for i in 0..6 {
            let id = format!("{queue}-{i}");
            let behaviour = if i < 4 {
                ok.insert(id.clone());
                JobBehaviour::Ok
            } else {
                failing.insert(id.clone());
                JobBehaviour::Retryable
            };
            broker
                .publish("jobs", &format!("job.{queue}"), &id, behaviour, &[])
                .await;
        }
    }
    // A producer's forged retry count on a fresh message: not believed before the move, and
    // not after it either.
    broker
        .publish(
            "jobs",
            "job.backoff",
            "backoff-forged",
            JobBehaviour::Retryable,
            &[("x-retry-count", AMQPValue::LongLongInt(99))],
        )
        .await;
    failing.insert("backoff-forged".to_owned());
    for (queue, waits) in [
        ("backoff", ["backoff.wait.5m", "backoff.wait.10m"]),
        ("short-long", ["short-long.wait.5m", "short-long.wait.10m"]),
    ] {
        for (n, wait) in waits.iter().enumerate() {
            let retries = i64::try_from(n).expect("small") + 1;
            let id = format!("{wait}-ok");
            broker
                .park(queue, wait, &id, JobBehaviour::Ok, retries)
                .await;
            ok.insert(id);
            let id = format!("{wait}-failing");
            broker
                .park(queue, wait, &id, JobBehaviour::Retryable, retries)
                .await;
            failing.insert(id);
        }
    }
    let before: BTreeMap<String, Option<u32>> = {
        let mut counts = BTreeMap::new();
        for queue in &old.queues {
            let name = queue
                .name
                .strip_prefix(&ns)
                .unwrap_or(&queue.name)
                .to_owned();
            counts.insert(name.clone(), broker.ready(&name).await);
        }
        counts
    };
    assert_eq!(before["backoff"], Some(7));
    assert_eq!(before["backoff.wait.10m"], Some(2));

    // The plan, with the old workers stopped: what it will do, and nothing done.
    let plan = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    let text = plan.to_string();
    let actions = actions(&plan, &ns);
    let migrate = |name: &str, argument: &str| {
        assert!(
            matches!(&actions[name], Action::Migrate { argument: Some(a), resume: false, .. } if a == argument),
            "{name}: {:?}\n{text}",
            actions[name]
        );
    };
    migrate("backoff", "x-delivery-limit");
    migrate("native", "x-delivery-limit");
    // Quorum queues, deleted without the broker's `if-empty`: the plan says to stop
    // publishers by name first; their wait queues (only workers publish to them) are not
    // marked.
    let json = plan.json();
    let marked: Vec<&str> = json["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|item| item["stop_publishers_by_name"] == true)
        .filter_map(|item| item["name"].as_str()?.strip_prefix(&ns))
        .collect();
    assert_eq!(marked, ["backoff", "native"], "{text}");
    assert_eq!(
        text.matches("! stop whatever publishes to it by name")
            .count(),
        2,
        "{text}"
    );
    for name in ["jobs", "jobs.dlx", "short-long", "dead"] {
        assert_eq!(actions[name], Action::Unchanged, "{name}\n{text}");
    }
    for name in [
        "backoff.wait.200ms",
        "native.wait.200ms",
        "native.wait.400ms",
        "short-long.wait.300ms",
    ] {
        assert_eq!(actions[name], Action::Create, "{name}\n{text}");
    }
    for name in ["backoff.wait.5m", "backoff.wait.10m"] {
        assert_eq!(
            actions[name],
            Action::Drain {
                into: broker.name("backoff.warren-holding")
            },
            "{text}"
        );
    }
    for name in ["short-long.wait.5m", "short-long.wait.10m"] {
        assert_eq!(
            actions[name],
            Action::Drain {
                into: broker.name("short-long")
            },
            "{text}"
        );
    }
    assert!(text.contains("MIGRATE"), "{text}");
    assert!(text.contains("received '2' but current is '4'"), "{text}");
    assert!(
        text.contains("2 to migrate, 4 to drain and delete"),
        "{text}"
    );
    for (name, count) in &before {
        assert_eq!(
            broker.ready(name).await,
            *count,
            "planning changed `{name}`"
        );
    }
    assert_eq!(
        broker.ready("backoff.wait.200ms").await,
        None,
        "nothing created"
    );
    assert_eq!(broker.ready("backoff.warren-holding").await, None);

    // Applied.
    let applied = plan.apply(&broker.connection).await.expect("applied");
    // Out and back: 7 + 2 + 2 from `backoff`'s queue and wait queues, 6 from `native`;
    // once: 4 from `short-long`'s old wait queues.
    assert_eq!(applied.moved, (7 + 4 + 6) * 2 + 4, "{:?}", applied.steps);
    assert_eq!(broker.ready("backoff").await, Some(11));
    assert_eq!(broker.ready("native").await, Some(6));
    assert_eq!(broker.ready("short-long").await, Some(10));
    for gone in [
        "backoff.wait.5m",
        "backoff.wait.10m",
        "short-long.wait.5m",
        "short-long.wait.10m",
        "backoff.warren-holding",
        "native.warren-holding",
    ] {
        assert_eq!(broker.ready(gone).await, None, "`{gone}` was deleted");
    }
    // Planned again: nothing left to do; the broker now takes version 2 as it is.
    let again = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    assert!(again.is_noop(), "{again}");
    warren_runtime::verify(&broker.connection, &new)
        .await
        .expect("version 2 is there");

    // A worker of version 2: every message handled or dead-lettered.
    let recorder = Recorder::default();
    let mut worker = Worker::new(broker.connection.clone(), new.clone());
    consumers::register::run_backoff(&mut worker, recorder.clone());
    consumers::register::run_native(&mut worker, recorder.clone());
    consumers::register::run_short_long(&mut worker, recorder.clone());
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let mut dead = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        broker.dead(&mut dead).await;
        let handled = ok.iter().all(|id| !recorder.attempts(id).is_empty());
        if (handled && dead.len() >= failing.len()) || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.shutdown();
    running.await.expect("joined").expect("a clean shutdown");

    let lost: Vec<&String> = ok
        .iter()
        .filter(|id| recorder.attempts(id).is_empty())
        .chain(failing.iter().filter(|id| !dead.contains_key(*id)))
        .collect();
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert_eq!(
        dead.keys().cloned().collect::<BTreeSet<_>>(),
        failing,
        "exactly the failing jobs are dead-lettered"
    );
    assert!(dead.values().all(|n| *n == 1), "each once: {dead:?}");
    // The new policies apply: version 2's retries, counted from what the messages carried.
    let tries = |id: &str| recorder.attempts(id).len();
    assert_eq!(tries("backoff-4"), 2, "max_retries 1: one try, one retry");
    assert_eq!(
        tries("backoff-forged"),
        2,
        "a forged count is still not believed"
    );
    assert_eq!(tries("native-4"), 3, "ttl-backoff, max_retries 2");
    assert_eq!(tries("short-long-4"), 2);
    assert_eq!(
        tries("backoff.wait.10m-failing"),
        1,
        "it had retried twice under version 1: version 2's budget is spent"
    );
    for queue in ["backoff", "native", "short-long"] {
        assert_eq!(broker.ready(queue).await, Some(0));
    }
    warren_runtime::delete(&broker.connection, &new)
        .await
        .expect("deleted");
}

/// A migration killed after the queue was emptied into its holding queue and deleted is
/// found by the next plan and finished: the held messages reach the new queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_killed_half_way_is_finished_by_the_next_plan() {
    let broker = Broker::connect("plan-resume").await;
    let ns = broker.namespace.clone();
    let (old, new) = (v1().namespaced(&ns), v2().namespaced(&ns));
    warren_runtime::declare(&broker.connection, &new)
        .await
        .expect("version 2 declares");
    // Where a killed run left it: `native` deleted, its messages in the holding queue, which
    // is marked as holding for it.
    let holding = broker.name("native.warren-holding");
    let channel = broker.connection.create_channel().await.expect("a channel");
    let mut quorum = FieldTable::default();
    quorum.insert(
        ShortString::from("x-queue-type"),
        AMQPValue::LongString("quorum".into()),
    );
    // As warren declares it: no delivery limit (the largest), and its mark.
    quorum.insert(
        ShortString::from("x-delivery-limit"),
        AMQPValue::LongLongInt(2_147_483_647),
    );
    quorum.insert(
        ShortString::from(warren_runtime::model::HOLDING_FOR),
        AMQPValue::LongString(broker.name("native").into()),
    );
    channel
        .queue_declare(
            ShortString::from(holding.as_str()),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            quorum,
        )
        .await
        .expect("the holding queue");
    channel
        .queue_delete(ShortString::from(broker.name("native")), Default::default())
        .await
        .expect("deleted");
    for i in 0..5 {
        broker
            .publish("", &holding, &format!("held-{i}"), JobBehaviour::Ok, &[])
            .await;
    }
    let plan = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    let native = plan
        .items
        .iter()
        .find(|item| item.name == broker.name("native"))
        .expect("native is planned");
    assert!(
        matches!(native.action, Action::Migrate { resume: true, .. }),
        "{plan}"
    );
    assert!(plan.to_string().contains("RESUMING"), "{plan}");
    let applied = plan.apply(&broker.connection).await.expect("applied");
    assert_eq!(applied.moved, 5, "{:?}", applied.steps);
    assert_eq!(broker.ready("native").await, Some(5));
    assert_eq!(broker.ready("native.warren-holding").await, None);
    let again = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    assert!(again.is_noop(), "{again}");
    warren_runtime::delete(&broker.connection, &new)
        .await
        .expect("deleted");
}

/// A queue type change (classic → quorum) changes its wait queues' type too: same names,
/// other arguments. The queue and its wait queues are emptied into the holding queue,
/// deleted, declared anew, and every message comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_type_change_migrates_the_queue_and_its_wait_queues() {
    let broker = Broker::connect("plan-type").await;
    let ns = broker.namespace.clone();
    let policy = |name: &str| (backoff(name, 2, 300_000, 600_000), None);
    let old = version(policy).namespaced(&ns);
    let mut new = version(policy);
    for queue in &mut new.queues {
        if queue.name.starts_with("short-long") {
            queue.kind = warren_runtime::model::QueueKind::Quorum;
        }
    }
    let new = new.namespaced(&ns);
    warren_runtime::declare(&broker.connection, &old)
        .await
        .expect("version 1 declares");
    for i in 0..3 {
        broker
            .publish(
                "jobs",
                "job.short-long",
                &format!("queued-{i}"),
                JobBehaviour::Ok,
                &[],
            )
            .await;
    }
    for wait in ["short-long.wait.5m", "short-long.wait.10m"] {
        broker
            .park(
                "short-long",
                wait,
                &format!("{wait}-0"),
                JobBehaviour::Ok,
                1,
            )
            .await;
    }
    let plan = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    let actions = actions(&plan, &ns);
    assert!(
        matches!(&actions["short-long"], Action::Migrate { argument: Some(a), .. } if a == "x-queue-type"),
        "{plan}"
    );
    // The broker names the first argument it finds different (`x-overflow` here).
    for name in ["short-long.wait.5m", "short-long.wait.10m"] {
        assert!(
            matches!(
                &actions[name],
                Action::Migrate {
                    argument: Some(_),
                    ..
                }
            ),
            "{name}: {plan}"
        );
    }
    // A classic queue's delete is `if-empty`: a publish by name racing it stops the plan,
    // it is not lost, and the plan does not ask for publishers to stop.
    assert!(!plan.to_string().contains("! stop whatever"), "{plan}");
    let applied = plan.apply(&broker.connection).await.expect("applied");
    assert_eq!(applied.moved, 5 * 2, "{:?}", applied.steps);
    assert_eq!(broker.ready("short-long").await, Some(5));
    assert_eq!(broker.ready("short-long.wait.5m").await, Some(0));
    assert_eq!(broker.ready("short-long.wait.10m").await, Some(0));
    let again = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    assert!(again.is_noop(), "{again}");
    warren_runtime::delete(&broker.connection, &new)
        .await
        .expect("deleted");
}

/// A worker of the old version that starts after the plan was computed is found when it is
/// applied: the migration refuses before it binds a holding queue, which would otherwise stay
/// bound beside the queue those workers read, taking a copy of every message published until
/// someone applies again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_after_the_plan_leaves_no_holding_queue_bound() {
    let broker = Broker::connect("plan-race").await;
    let ns = broker.namespace.clone();
    let (old, new) = (v1().namespaced(&ns), v2().namespaced(&ns));
    warren_runtime::declare(&broker.connection, &old)
        .await
        .expect("version 1 declares");
    let plan = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    assert!(plan.blocked().is_empty(), "nobody reads yet:\n{plan}");
    assert!(matches!(
        actions(&plan, &ns).get("backoff"),
        Some(Action::Migrate { .. })
    ));

    let (reader, _consumer) = old_worker(&broker, &new, &old).await;

    let applied = plan.apply(&broker.connection).await;
    assert!(
        matches!(applied, Err(warren_runtime::plan::PlanError::Blocked(_))),
        "{applied:?}"
    );
    let holding = format!("backoff{}", warren_runtime::plan::HOLDING_SUFFIX);
    assert_eq!(
        broker.ready(&holding).await,
        None,
        "no holding queue was declared (and bound) for a queue still read"
    );
    reader
        .close(200, ShortString::from("done"))
        .await
        .expect("closed");
}

/// Another stack's retries, bound by hand: a headers exchange `retry-exchange` bound to the
/// migrated quorum queue, and a wait queue of that stack (TTL, dead-lettering into
/// `retry-exchange`) holding retries; and a second exchange, `tap`, bound by hand. The plan
/// lists both bindings and names the wait queue; applied, it binds them to the holding queue
/// and to the queue again. Before, the queue came back with the contract's bindings only,
/// and the retries falling due afterwards were routed nowhere and dropped by the broker (3
/// of 10 lost in the amqp-contract 2.4 scenario); now every message arrives and the tap
/// still routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_outside_the_contract_survive_a_migration_and_nothing_is_lost() {
    use lapin::ExchangeKind;
    use lapin::options::{ExchangeDeclareOptions, QueueBindOptions};
    const READY: usize = 14;
    const WAITING: usize = 6;
    let broker = Broker::connect("plan-foreign").await;
    let ns = broker.namespace.clone();
    let (old, new) = (v1().namespaced(&ns), v2().namespaced(&ns));
    warren_runtime::declare(&broker.connection, &old)
        .await
        .expect("version 1 declares");
    let queue = broker.name("backoff");
    let text = |s: &str| AMQPValue::LongString(LongString::from(s));
    let channel = broker.connection.create_channel().await.expect("a channel");
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    // The other stack's retry exchange, bound on a header naming the queue.
    let retry_exchange = broker.name("retry-exchange");
    channel
        .exchange_declare(
            ShortString::from(retry_exchange.as_str()),
            ExchangeKind::Headers,
            durable,
            FieldTable::default(),
        )
        .await
        .expect("the foreign exchange");
    let mut matching = FieldTable::default();
    matching.insert(ShortString::from("x-match"), text("all"));
    matching.insert(ShortString::from("x-retry-queue"), text(&queue));
    channel
        .queue_bind(
            ShortString::from(queue.as_str()),
            ShortString::from(retry_exchange.as_str()),
            ShortString::from(""),
            QueueBindOptions::default(),
            matching,
        )
        .await
        .expect("bound by hand");
    // Its wait queue: retries expire into the retry exchange after 4 s.
    let wait = broker.name("orders.process-wait");
    let mut wait_arguments = FieldTable::default();
    wait_arguments.insert(
        ShortString::from("x-message-ttl"),
        AMQPValue::LongLongInt(4_000),
    );
    wait_arguments.insert(
        ShortString::from("x-dead-letter-exchange"),
        text(&retry_exchange),
    );
    channel
        .queue_declare(
            ShortString::from(wait.as_str()),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            wait_arguments,
        )
        .await
        .expect("the foreign wait queue");
    // A tap: a second exchange bound by hand.
    let tap = broker.name("tap");
    channel
        .exchange_declare(
            ShortString::from(tap.as_str()),
            ExchangeKind::Fanout,
            durable,
            FieldTable::default(),
        )
        .await
        .expect("the tap exchange");
    channel
        .queue_bind(
            ShortString::from(queue.as_str()),
            ShortString::from(tap.as_str()),
            ShortString::from(""),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("the tap bound by hand");
    for n in 0..READY {
        broker
            .publish(
                "jobs",
                "job.backoff",
                &format!("ready-{n}"),
                JobBehaviour::Ok,
                &[],
            )
            .await;
    }
    for n in 0..WAITING {
        let header = [("x-retry-queue", text(&queue))];
        broker
            .publish("", &wait, &format!("retry-{n}"), JobBehaviour::Ok, &header)
            .await;
    }

    let plan = Plan::compute(&broker.connection, &new, Some(&old), Some(&management()))
        .await
        .expect("a plan");
    let Some(Action::Migrate {
        foreign_bindings,
        dead_lettering,
        ..
    }) = actions(&plan, &ns).get("backoff").cloned()
    else {
        panic!("backoff migrates:\n{plan}");
    };
    let mut sources: Vec<&str> = foreign_bindings
        .iter()
        .map(|b| b.exchange.as_str())
        .collect();
    sources.sort_unstable();
    assert_eq!(sources, [retry_exchange.as_str(), tap.as_str()], "{plan}");
    assert!(
        dead_lettering.iter().any(|line| line.contains(&wait)),
        "the wait queue left in place is named: {dead_lettering:?}"
    );
    let shown = plan.to_string();
    assert!(shown.contains("outside the contract"), "{shown}");

    let applied = plan.apply(&broker.connection).await.expect("applied");
    println!("{}", applied.steps.join("\n"));
    // Every retry falls due (into the holding queue while the queue was away, or into the
    // queue): all are there once the wait queue is empty.
    let expected = u32::try_from(READY + WAITING).expect("small");
    let mut settled = false;
    for _ in 0..600 {
        let waiting = broker.ready("orders.process-wait").await;
        let ready = broker.ready("backoff").await;
        if waiting == Some(0) && ready == Some(expected) {
            settled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let holding = format!("backoff{}", warren_runtime::plan::HOLDING_SUFFIX);
    assert!(
        settled,
        "every message is in the queue: {:?} of {expected} ({:?} waiting, holding queue {:?})",
        broker.ready("backoff").await,
        broker.ready("orders.process-wait").await,
        broker.ready(&holding).await
    );
    assert_eq!(
        broker.ready(&holding).await,
        None,
        "the holding queue is gone"
    );
    // The tap still reaches the queue.
    broker
        .publish("tap", "anything", "tapped", JobBehaviour::Ok, &[])
        .await;
    assert_eq!(broker.ready("backoff").await, Some(expected + 1));
    let _ = channel
        .queue_delete(ShortString::from(wait.as_str()), Default::default())
        .await;
    for exchange in [&retry_exchange, &tap] {
        let _ = channel
            .exchange_delete(ShortString::from(exchange.as_str()), Default::default())
            .await;
    }
    let _ = warren_runtime::delete(&broker.connection, &new).await;
}

/// A queue someone else named like a holding queue (here classic, `x-max-length` 1,
/// `drop-head`) was taken for one: the next plan said RESUMING, and applying moved the
/// queue's 100 messages into it, where its length limit dropped 99 ("Done: 101 message(s)
/// moved"). Now warren knows its own holding queues by their `x-warren-holding-for`
/// argument, read through the management API: this one blocks the plan, and nothing moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_named_like_a_holding_queue_is_never_used_as_one() {
    const MESSAGES: usize = 20;
    let broker = Broker::connect("plan-fake-holding").await;
    let ns = broker.namespace.clone();
    let (old, new) = (v1().namespaced(&ns), v2().namespaced(&ns));
    warren_runtime::declare(&broker.connection, &old)
        .await
        .expect("version 1 declares");
    let fake = broker.name("backoff.warren-holding");
    let mut bounded = FieldTable::default();
    bounded.insert(ShortString::from("x-max-length"), AMQPValue::LongLongInt(1));
    bounded.insert(
        ShortString::from("x-overflow"),
        AMQPValue::LongString("drop-head".into()),
    );
    let channel = broker.connection.create_channel().await.expect("a channel");
    channel
        .queue_declare(
            ShortString::from(fake.as_str()),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            bounded,
        )
        .await
        .expect("a queue named like a holding queue");
    for n in 0..MESSAGES {
        broker
            .publish(
                "jobs",
                "job.backoff",
                &format!("m-{n}"),
                JobBehaviour::Ok,
                &[],
            )
            .await;
    }
    for (version, label) in [(&new, "a change"), (&old, "nothing to change")] {
        let plan = Plan::compute(&broker.connection, version, Some(&old), Some(&management()))
            .await
            .expect("a plan");
        let backoff = actions(&plan, &ns).get("backoff").cloned();
        assert!(
            matches!(&backoff, Some(Action::Blocked { reason }) if reason.contains("did not declare")),
            "{label}: {backoff:?}\n{plan}"
        );
        let applied = plan.apply(&broker.connection).await;
        assert!(
            matches!(applied, Err(warren_runtime::plan::PlanError::Blocked(_))),
            "{applied:?}"
        );
    }
    let expected = u32::try_from(MESSAGES).expect("small");
    assert_eq!(
        broker.ready("backoff").await,
        Some(expected),
        "nothing moved"
    );
    assert_eq!(broker.ready("backoff.warren-holding").await, Some(0));
    let _ = channel
        .queue_delete(ShortString::from(fake.as_str()), Default::default())
        .await;
    let _ = warren_runtime::delete(&broker.connection, &old).await;
}
