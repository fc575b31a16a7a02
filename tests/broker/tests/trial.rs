//! A trial (`warren_testkit::Trial`, no broker) and a running worker on the real broker
//! decide the same, case by case: the same bytes, properties and route go to both, handled
//! by the same recording handler, and what the trial says the worker does (ack, a retry copy
//! to a wait queue, a retry in place, a requeue, a dead letter with its reason and headers)
//! is what the worker on the broker did.

use std::collections::BTreeMap;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use tokio::sync::mpsc;
use warren_broker_tests::types::{self, JobBehaviour};
use warren_broker_tests::{Harness, Recorder, handlers, job, raw_headers};
use warren_runtime::model::{QueueRole, headers};
use warren_runtime::trial::{Arrival, Verdict};
use warren_testkit::Trial;

const WAIT: Duration = Duration::from_secs(30);

/// The failure context a copy carries, compared between the two paths (the times in it,
/// `x-first-failure` and `x-last-failure`, differ by when each ran).
const COMPARED: [&str; 8] = [
    headers::RETRY_COUNT,
    headers::FAILURE_REASON,
    headers::LAST_ERROR,
    headers::CONSUMER,
    headers::FAILED_QUEUE,
    headers::ORIGINAL_EXCHANGE,
    headers::ORIGINAL_ROUTING_KEY,
    "tenant",
];

/// One delivery of the table: its job (or raw body), the queue it is routed to, and how
/// many retries came before it.
struct Case {
    id: &'static str,
    /// The queue, as the contract names it; its consumer is `run_<queue>`.
    queue: &'static str,
    body: Vec<u8>,
    content_type: &'static str,
    /// `Some(n)`: sent as warren's retry copy after `n` retries.
    retries: Option<u32>,
}

impl Case {
    fn job(id: &'static str, queue: &'static str, edit: impl FnOnce(&mut types::Job)) -> Self {
        let mut job = job(id, JobBehaviour::Retryable);
        edit(&mut job);
        let body = serde_json::to_vec(&job).expect("a job serializes");
        Self::raw(id, queue, body, "application/json")
    }

    fn raw(
        id: &'static str,
        queue: &'static str,
        body: Vec<u8>,
        content_type: &'static str,
    ) -> Self {
        Self {
            id,
            queue,
            body,
            content_type,
            retries: None,
        }
    }

    fn retried(mut self, retries: u32) -> Self {
        self.retries = Some(retries);
        self
    }

    fn consumer(&self) -> String {
        format!("run_{}", self.queue.replace('-', "_"))
    }

    /// Its consumer as the recorder names it: the generated trait's name (`RunBackoff`).
    fn handler(&self) -> String {
        let words = self.consumer();
        let words = words.split('_').map(|word| {
            let (first, rest) = word.split_at(1);
            first.to_uppercase() + rest
        });
        words.collect()
    }

    /// The properties both paths receive: the job headers, the retry count of a retry copy.
    fn properties(&self) -> BasicProperties {
        let mut table = raw_headers();
        if let Some(retries) = self.retries {
            table.insert(
                ShortString::from(headers::RETRY_COUNT),
                AMQPValue::LongLongInt(i64::from(retries)),
            );
        }
        BasicProperties::default()
            .with_content_type(ShortString::from(self.content_type))
            .with_message_id(ShortString::from(self.id))
            .with_delivery_mode(2)
            .with_headers(table)
    }

    /// The route it is published with: through the contract's exchange by the queue's
    /// binding key, or, a retry copy, through the default exchange to the queue itself.
    fn route(&self, h: &Harness) -> (String, String) {
        match self.retries {
            Some(_) => (String::new(), h.name(self.queue)),
            None => (h.name("jobs"), format!("job.{}", self.queue)),
        }
    }
}

/// What a worker did with a delivery, as seen on the broker.
#[derive(Debug, PartialEq)]
enum Seen {
    /// A copy arrived in a wait queue or in the dead-letter queue (their names on the
    /// broker), with this routing key and failure context.
    Copy {
        queue: String,
        routing_key: String,
        context: BTreeMap<String, String>,
    },
    /// The handler ran again, after this many retries, with no copy seen: requeued, or
    /// retried in place through the queue itself.
    Again { retry_count: u32 },
    /// Nothing more: acknowledged (handled, or dropped as the contract says).
    Nothing,
}

/// What the worker on the broker is seen to do when a trial gave `verdict` on `case`.
fn expected(verdict: &Verdict, case: &Case, h: &Harness) -> Seen {
    let queue = h.name(case.queue);
    match verdict {
        Verdict::Acked | Verdict::Dropped { .. } => Seen::Nothing,
        Verdict::Retried {
            routing_key,
            retry_count,
            ..
        } if *routing_key == queue => Seen::Again {
            retry_count: *retry_count,
        },
        Verdict::Retried { routing_key, .. } => Seen::Copy {
            queue: routing_key.clone(),
            routing_key: routing_key.clone(),
            context: context(verdict.copy_headers()),
        },
        Verdict::Requeued { .. } => Seen::Again {
            retry_count: case.retries.unwrap_or(0) + 1,
        },
        Verdict::DeadLettered { routing_key, .. } => Seen::Copy {
            queue: h.name("dead"),
            routing_key: routing_key.clone(),
            context: context(verdict.copy_headers()),
        },
        other => panic!("no case of the table is {other:?}"),
    }
}

/// The compared headers of a copy, as text.
fn context(table: Option<&FieldTable>) -> BTreeMap<String, String> {
    let Some(table) = table else {
        return BTreeMap::new();
    };
    COMPARED
        .iter()
        .filter_map(|key| {
            let value = match table.inner().get(*key)? {
                AMQPValue::LongString(text) => text.to_string(),
                AMQPValue::LongLongInt(n) => n.to_string(),
                other => format!("{other:?}"),
            };
            Some(((*key).to_owned(), value))
        })
        .collect()
}

/// A copy taken from a tapped queue: the queue, its routing key and its compared context.
type Copied = (String, String, BTreeMap<String, String>);

/// Consumes every wait queue of the contract and the dead-letter queue `dead`, so a copy is
/// seen as it arrives (before a wait queue's TTL sends it on), and sends each on. Hold the
/// channel: the taps end with it.
async fn tap(h: &Harness) -> (lapin::Channel, mpsc::UnboundedReceiver<Copied>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let channel = h.connection.create_channel().await.expect("a channel");
    channel
        .basic_qos(100, BasicQosOptions::default())
        .await
        .expect("qos");
    let waits = (h.topology.queues.iter())
        .filter(|queue| matches!(queue.role, QueueRole::Wait { .. }))
        .map(|queue| queue.name.clone());
    for queue in waits.chain([h.name("dead")]) {
        let mut consumer = channel
            .basic_consume(
                ShortString::from(queue.as_str()),
                ShortString::from(format!("tap-{queue}")),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("tap on {queue}: {e}"));
        let sender = sender.clone();
        tokio::spawn(async move {
            use futures_lite::StreamExt as _;
            while let Some(Ok(delivery)) = consumer.next().await {
                let copied = (
                    queue.clone(),
                    delivery.routing_key.to_string(),
                    context(delivery.properties.headers().as_ref()),
                );
                if sender.send(copied).is_err() {
                    break;
                }
            }
        });
    }
    (channel, receiver)
}

/// Publishes `case` to the broker and waits for what the worker does: the first copy a tap
/// sees, or the handler's second attempt; `Nothing` once the first attempt ran and
/// `expecting` is nothing (checked again, with the worker stopped, at the end).
async fn observe(
    h: &Harness,
    taps: &mut mpsc::UnboundedReceiver<Copied>,
    case: &Case,
    expecting: &Seen,
) -> Seen {
    let (exchange, routing_key) = case.route(h);
    let exchange = if exchange.is_empty() { "" } else { "jobs" };
    h.publish_raw_to(exchange, &routing_key, &case.body, case.properties())
        .await;
    let recorder = &h.recorder;
    // The case's own consumer's attempts: a sibling queue bound alike sees the job too.
    let consumer = case.handler();
    let attempts = || {
        let mut all = recorder.attempts(case.id);
        all.retain(|attempt| attempt.consumer == consumer);
        all
    };
    let at_least = |n| recorder.wait(WAIT, move || attempts().len() >= n);
    if *expecting == Seen::Nothing {
        at_least(1).await;
        assert_eq!(attempts().len(), 1, "{}: handled", case.id);
        return Seen::Nothing;
    }
    tokio::select! {
        copied = taps.recv() => {
            let (queue, routing_key, context) = copied.expect("the taps run");
            Seen::Copy { queue, routing_key, context }
        }
        () = at_least(2) => match attempts().get(1) {
            Some(second) => Seen::Again { retry_count: second.retry_count },
            None => panic!("{}: neither a copy nor a second attempt within {WAIT:?}", case.id),
        },
    }
}

/// The trial's verdict on `case`, on a worker that never connects, running the same
/// handler on the harness's topology.
async fn verdict(trial: &Trial, h: &Harness, case: &Case) -> Verdict {
    let (exchange, routing_key) = case.route(h);
    let mut arrival = Arrival::raw(case.body.clone(), case.properties());
    // A retry copy arrives through the default exchange by itself (`Arrival::retried`).
    arrival = match case.retries {
        Some(retries) => arrival.retried(retries),
        None => arrival.via(exchange, routing_key),
    };
    trial.arrive(&case.consumer(), &arrival).await
}

fn table() -> Vec<Case> {
    let ok = |job: &mut types::Job| job.behaviour = JobBehaviour::Ok;
    let fatal = |job: &mut types::Job| job.behaviour = JobBehaviour::Fatal;
    let then_ok = |job: &mut types::Job| job.succeed_on_attempt = Some(1);
    let json = |amount: i64| format!(r#"{{"id": "x", "behaviour": "ok", "amount": {amount}}}"#);
    vec![
        Case::job("handled", "none", ok),
        Case::job("refused", "none", fatal),
        Case::job("no-retries", "none", |_| {}),
        Case::job("first-retry", "backoff", |_| {}),
        Case::job("third-retry", "backoff", |_| {}).retried(2),
        Case::job("spent", "backoff", |_| {}).retried(3),
        Case::job("asks-to-wait", "short-long", |job| {
            job.retry_after_ms = Some(1000)
        }),
        Case::job("in-place", "requeue-classic", then_ok),
        Case::job("requeued", "requeue", then_ok),
        Case::job("dropped", "drop", |_| {}).retried(1),
        Case::raw(
            "out-of-bounds",
            "none",
            json(1001).into_bytes(),
            "application/json",
        ),
        Case::raw(
            "not-json",
            "none",
            b"{not json".to_vec(),
            "application/json",
        ),
        Case::raw("text", "none", json(1).into_bytes(), "text/plain"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_and_a_worker_on_the_broker_decide_alike() {
    let mut h = Harness::start("trial").await;
    let (_tapping, mut taps) = tap(&h).await;
    let mut trial = Trial::new(h.topology.clone());
    handlers(&Recorder::default()).register(trial.worker());

    let cases = table();
    let mut kinds = Vec::new();
    for case in &cases {
        let verdict = verdict(&trial, &h, case).await;
        let expecting = expected(&verdict, case, &h);
        let seen = observe(&h, &mut taps, case, &expecting).await;
        assert_eq!(seen, expecting, "{}: the trial said {verdict:?}", case.id);
        kinds.push(format!("{}: {verdict:?}", case.id));
    }
    // Every kind of verdict the table is for was reached (a table that drifted into acks
    // alone would prove nothing).
    let said = kinds.join("\n");
    for kind in ["Acked", "Retried", "Requeued", "DeadLettered", "Dropped"] {
        assert!(said.contains(kind), "no case was {kind}:\n{said}");
    }

    // With the worker stopped (what it held returned to its queue), nothing was left
    // behind, and no copy came that the table did not expect.
    h.shutdown_worker().await.expect("the worker stops");
    for case in &cases {
        assert_eq!(
            h.ready(case.queue).await,
            0,
            "{} left in {}",
            case.id,
            case.queue
        );
    }
    assert!(taps.try_recv().is_err(), "no copy beyond the table's");
    h.stop().await.expect("cleaned up");
}
