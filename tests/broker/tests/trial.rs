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
use warren_broker_tests::{Harness, Recorder, consumers, handlers, job, raw_headers, rpc};
use warren_runtime::model::{FailureReason, QueueRole, headers};
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
        let name = queue.clone();
        forward(&channel, &queue, sender.clone(), move |delivery| {
            let context = context(delivery.properties.headers().as_ref());
            (name.clone(), delivery.routing_key.to_string(), context)
        })
        .await;
    }
    (channel, receiver)
}

/// Consumes `queue` on `channel`, without acks, and sends what `seen` makes of each delivery
/// to `sender` until the channel closes or the receiver is gone.
async fn forward<T: Send + 'static>(
    channel: &lapin::Channel,
    queue: &str,
    sender: mpsc::UnboundedSender<T>,
    seen: impl Fn(&lapin::message::Delivery) -> T + Send + 'static,
) {
    let mut consumer = channel
        .basic_consume(
            ShortString::from(queue),
            ShortString::from(format!("forward-{queue}")),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("consuming {queue}: {e}"));
    tokio::spawn(async move {
        use futures_lite::StreamExt as _;
        while let Some(Ok(delivery)) = consumer.next().await {
            if sender.send(seen(&delivery)).is_err() {
                break;
            }
        }
    });
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

/// One request of the RPC table: its id (also its correlation id), body and what its
/// properties lack or add.
struct Request {
    id: &'static str,
    body: Vec<u8>,
    /// Sent without a correlation id: it cannot be answered.
    uncorrelated: bool,
    /// Its caller's deadline passed before it was sent.
    late: bool,
}

impl Request {
    fn quote(id: &'static str, behaviour: types::QuoteRequestBehaviour) -> Self {
        let body = serde_json::to_vec(&rpc::request(id, behaviour)).expect("serializes");
        Self::raw(id, body)
    }

    fn raw(id: &'static str, body: Vec<u8>) -> Self {
        Self {
            id,
            body,
            uncorrelated: false,
            late: false,
        }
    }

    /// Its properties, replies asked on `reply_to`, as its `retries`-th retry copy.
    fn properties(&self, reply_to: &str, retries: Option<u32>) -> BasicProperties {
        let mut table = raw_headers();
        if self.late {
            table.insert(
                ShortString::from(headers::DEADLINE),
                AMQPValue::LongLongInt(1_000),
            );
        }
        if let Some(retries) = retries {
            table.insert(
                ShortString::from(headers::RETRY_COUNT),
                AMQPValue::LongLongInt(i64::from(retries)),
            );
        }
        let properties = BasicProperties::default()
            .with_content_type(ShortString::from("application/json"))
            .with_message_id(ShortString::from(self.id))
            .with_reply_to(ShortString::from(reply_to))
            .with_headers(table);
        match self.uncorrelated {
            true => properties,
            false => properties.with_correlation_id(ShortString::from(self.id)),
        }
    }
}

/// A reply as both paths are compared on: its correlation id, the `x-rpc-*` headers, type
/// and content type, and its body (an answer's, not a `failed` reply's text).
#[derive(Debug, PartialEq)]
struct ReplySeen {
    correlation_id: Option<String>,
    status: Option<String>,
    code: Option<String>,
    failure: Option<String>,
    kind: Option<String>,
    content_type: Option<String>,
    body: Option<Vec<u8>>,
}

impl ReplySeen {
    fn of(properties: &BasicProperties, body: &[u8]) -> Self {
        let text = |key: &str| {
            let table = properties.headers().as_ref()?;
            match table.inner().get(key)? {
                AMQPValue::LongString(text) => Some(text.to_string()),
                other => Some(format!("{other:?}")),
            }
        };
        let status = text(headers::RPC_STATUS);
        Self {
            correlation_id: properties
                .correlation_id()
                .as_ref()
                .map(|id| id.to_string()),
            body: (status.as_deref() != Some("failed")).then(|| body.to_vec()),
            status,
            code: text(headers::RPC_ERROR),
            failure: text(headers::RPC_FAILURE),
            kind: properties.kind().as_ref().map(|kind| kind.to_string()),
            content_type: (properties.content_type().as_ref()).map(|kind| kind.to_string()),
        }
    }

    /// The `failed` reply a caller of request `id` gets for `reason`.
    fn failed(id: &str, reason: FailureReason) -> Self {
        Self {
            correlation_id: Some(id.to_owned()),
            status: Some("failed".to_owned()),
            code: None,
            failure: Some(reason.as_str().to_owned()),
            kind: None,
            content_type: Some("text/plain; charset=utf-8".to_owned()),
            body: None,
        }
    }
}

/// Where a request ends, as seen from outside the server: how many times its handler ran,
/// the reply its caller got (none, where it cannot be answered) and the dead letter's
/// compared headers (none when it was answered).
#[derive(Debug, PartialEq)]
struct Ended {
    attempts: usize,
    reply: Option<ReplySeen>,
    dead_letter: Option<BTreeMap<String, String>>,
}

/// Where the trial says `request` ends: each verdict that sends it round is followed by a
/// trial of the retry it sends, until it is answered or leaves its queue for good.
async fn trial_ends(
    trial: &Trial,
    quoter: &rpc::Quoter,
    h: &Harness,
    request: &Request,
    reply_to: &str,
) -> Ended {
    let attempts = || served(quoter, request.id);
    let mut retries = None;
    loop {
        let arrival = Arrival::raw(request.body.clone(), request.properties(reply_to, retries))
            .via("", h.name("quotes"));
        let arrival = match retries {
            Some(retries) => arrival.retried(retries),
            None => arrival,
        };
        let verdict = trial.arrive("quote_price", &arrival).await;
        match &verdict {
            Verdict::Replied {
                properties, body, ..
            } => {
                return Ended {
                    attempts: attempts(),
                    reply: Some(ReplySeen::of(properties, body)),
                    dead_letter: None,
                };
            }
            Verdict::Retried { retry_count, .. } if attempts() < 5 => {
                retries = Some(*retry_count);
            }
            Verdict::DeadLettered { reason, .. } => {
                // Told, where it can be: a caller that is still waiting, at an address.
                let told = !request.uncorrelated && *reason != FailureReason::Expired;
                return Ended {
                    attempts: attempts(),
                    reply: told.then(|| ReplySeen::failed(request.id, *reason)),
                    dead_letter: Some(untimed(context(verdict.copy_headers()))),
                };
            }
            other => panic!("{}: no request of the table is {other:?}", request.id),
        }
    }
}

/// Where `request` ends on the broker, sent to the running server: the dead letter, where
/// the trial says there is one, and the reply, where it says one is sent.
async fn broker_ends(
    h: &Harness,
    request: &Request,
    reply_to: &str,
    replies: &mut mpsc::UnboundedReceiver<ReplySeen>,
    taps: &mut mpsc::UnboundedReceiver<Copied>,
    expecting: &Ended,
) -> Ended {
    let properties = request.properties(reply_to, None);
    h.publish_raw_to("", &h.name("quotes"), &request.body, properties)
        .await;
    let dead_letter = match expecting.dead_letter {
        Some(_) => {
            let copied = tokio::time::timeout(WAIT, taps.recv()).await;
            let (_, _, context) = copied
                .unwrap_or_else(|_| panic!("{}: no dead letter within {WAIT:?}", request.id))
                .expect("the taps run");
            Some(untimed(context))
        }
        None => None,
    };
    let reply = match expecting.reply {
        Some(_) => {
            let reply = tokio::time::timeout(WAIT, replies.recv()).await;
            let reply =
                reply.unwrap_or_else(|_| panic!("{}: no reply within {WAIT:?}", request.id));
            Some(reply.expect("the replies are read"))
        }
        None => None,
    };
    Ended {
        attempts: served(h.recorder.quoter(), request.id),
        reply,
        dead_letter,
    }
}

/// A dead letter's compared headers with the numbers in its last error left out: how long
/// ago a late request's deadline passed depends on when each path read it.
fn untimed(mut context: BTreeMap<String, String>) -> BTreeMap<String, String> {
    if let Some(error) = context.get_mut(headers::LAST_ERROR) {
        error.retain(|c| !c.is_ascii_digit());
    }
    context
}

/// How many times `quoter` handled request `id`.
fn served(quoter: &rpc::Quoter, id: &str) -> usize {
    let served = quoter.seen.all();
    served.iter().filter(|served| served.id == id).count()
}

/// Reads the replies sent to a queue of the test's own. Hold the channel: the reading ends
/// with it.
async fn reply_queue(h: &Harness) -> (lapin::Channel, String, mpsc::UnboundedReceiver<ReplySeen>) {
    use lapin::options::QueueDeclareOptions;
    let channel = h.connection.create_channel().await.expect("a channel");
    let options = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    let queue = channel
        .queue_declare(ShortString::from(""), options, FieldTable::default())
        .await
        .expect("a reply queue");
    let name = queue.name().to_string();
    let (sender, receiver) = mpsc::unbounded_channel();
    forward(&channel, &name, sender, |delivery| {
        ReplySeen::of(&delivery.properties, &delivery.data)
    })
    .await;
    (channel, name, receiver)
}

/// An RPC server tried and the same server on the broker end each request alike: the same
/// reply (response, declared error, or `failed` with the same reason) to its caller, the
/// same dead letter, after as many handler runs, a retry included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_and_an_rpc_server_on_the_broker_end_requests_alike() {
    use types::QuoteRequestBehaviour as B;
    let mut h = Harness::start("trial-rpc").await;
    let (_tapping, mut taps) = tap(&h).await;
    let (_replying, reply_to, mut replies) = reply_queue(&h).await;
    let mut trial = Trial::new(h.topology.clone());
    let quoter = rpc::Quoter::default();
    consumers::register::quote_price(trial.worker(), quoter.clone());

    let uncorrelated = Request {
        uncorrelated: true,
        ..Request::quote("no-correlation-id", B::Ok)
    };
    let late = Request {
        late: true,
        ..Request::quote("late", B::Ok)
    };
    let table = [
        Request::quote("answered", B::Ok),
        Request::quote("declared", B::Declared),
        Request::quote("answer-breaks-schema", B::Invalid),
        Request::quote("answer-too-large", B::Huge),
        Request::quote("fatal", B::Fatal),
        Request::quote("retried-then-spent", B::Retryable),
        Request::raw("not-json", b"{not json".to_vec()),
        uncorrelated,
        late,
    ];
    for request in &table {
        let trial_said = trial_ends(&trial, &quoter, &h, request, &reply_to).await;
        let seen = broker_ends(&h, request, &reply_to, &mut replies, &mut taps, &trial_said).await;
        assert_eq!(seen, trial_said, "{}", request.id);
    }

    h.shutdown_worker().await.expect("the worker stops");
    assert_eq!(h.ready("quotes").await, 0, "no request left behind");
    assert!(
        taps.try_recv().is_err(),
        "no dead letter beyond the table's"
    );
    assert!(replies.try_recv().is_err(), "no reply beyond the table's");
    h.stop().await.expect("cleaned up");
}
