//! Benchmarks warren against hand-written lapin code, side by side on the same broker in the
//! same run, and prints rates and ratios.
//!
//! ```sh
//! cargo run --release -p warren-bench -- all [messages]   # default 100000
//! cargo run --release -p warren-bench -- publish|consume|latency|retry [messages]
//! cargo run --release -p warren-bench --features codegen -- codegen   # also in `all` with it
//! cargo run --release -p warren-bench -- backlog [messages]   # the queue filled first
//! cargo run --release -p warren-bench -- cpu [messages]   # a tenth as many per case
//! cargo run --release -p warren-bench -- rpc [calls]   # `all` makes a twentieth as many
//! cargo run --release -p warren-bench -- effects [messages]   # PostgreSQL; `all`: a tenth
//! cargo run --release -p warren-bench --features codegen -- build-cost [5,200,1000]   # cargo only
//! cargo run --release -p warren-bench -- decode [messages]   # in process, no broker; not in `all`
//! cargo run --release -p warren-bench -- --observe <scenario> [n]   # spans and metrics on
//! ```
//!
//! Scenarios: `publish` (lapin's window searched; the generated publishers from one task and
//! from many), `consume`, `latency` (p50/p99/max at a steady rate), `backlog` (prefetch 1,000,
//! peak memory), `cpu` (a CPU-bound handler at concurrency 1, 2 and 4), `retry`, `rpc`,
//! `effects` (the inbox and the outbox on PostgreSQL, against a plain handler and publishing
//! directly), `codegen`, `decode` (the worker's decode path against `serde_json::from_slice` into
//! the same type, in process), `build-cost` (what the generated code costs a crate's `cargo build`
//! and `cargo check`, against typify's output and a bare tokio binary). Rows show msg/s and this process's CPU per message, with ratios against
//! hand-written lapin in the same run.
//!
//! `--observe` (or `WARREN_BENCH_OBSERVE=1`) installs tracing spans and metrics as
//! `docs/operations.md` recommends (`observe.rs`); the header says which way a run went.
//!
//! Everything is declared under a `bench.<pid>.` namespace and deleted afterwards.

mod backlog;
#[cfg(feature = "codegen")]
mod build_cost;
#[cfg(feature = "codegen")]
mod codegen;
mod cpu;
mod decode;
mod effects;
mod latency;
mod observe;
mod procfs;
mod publish;
mod retry;
mod rpc;
mod scaling;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use lapin::BasicProperties;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::{FieldTable, ShortString};
use tokio::sync::{Notify, Semaphore};
use warren_runtime::{Connection, Delivery, HandlerError, Publisher, Topology, Worker};

include!(concat!(env!("OUT_DIR"), "/bench.rs"));

/// How many publishes may wait for their confirm at once, for both publishers.
const WINDOW: usize = 1000;

fn order(i: usize) -> types::BenchOrder {
    let json = serde_json::json!({
        "order_id": format!("order-{i:08}"),
        "customer": "customer-0042",
        "items": [
            { "sku": "TEA-0001", "quantity": 2, "price_minor": 450 },
            { "sku": "CUP-0002", "quantity": 1, "price_minor": 1200 },
            { "sku": "POT-0003", "quantity": 1, "price_minor": 3500 }
        ],
        "total_minor": 5600,
        "currency": "EUR"
    });
    match serde_json::from_value(json) {
        Ok(order) => order,
        Err(error) => unreachable_order(&error),
    }
}

fn unreachable_order(error: &serde_json::Error) -> types::BenchOrder {
    eprintln!("the benchmark order does not fit its own schema: {error}");
    std::process::exit(2)
}

/// One measured scenario.
struct Row {
    name: &'static str,
    /// The median of the rounds.
    elapsed: Duration,
    messages: usize,
    /// Every round's rate, in msg/s (one when the scenario ran once).
    rates: Vec<f64>,
    /// The median CPU time this process spent on a round, where it was measured.
    cpu: Option<Duration>,
    /// The median CPU time the broker spent on a round, where it runs on this machine.
    broker: Option<Duration>,
}

/// One round of a scenario: how long it took, and the CPU time the process and the broker
/// spent on it.
#[derive(Clone, Copy)]
struct Round {
    elapsed: Duration,
    cpu: Option<Duration>,
    broker: Option<Duration>,
}

impl Round {
    /// Runs `work` (a scenario's round, returning how long it took), and measures the CPU
    /// time this process and the broker spend on it.
    async fn measure(work: impl Future<Output = Result<Duration>>) -> Result<Self> {
        let (before, broker_before) = (cpu::used(), cpu::broker_used());
        let elapsed = work.await?;
        Ok(Self {
            elapsed,
            cpu: cpu::since(before),
            broker: cpu::broker_since(broker_before),
        })
    }
}

impl Row {
    /// The median of `rounds`, in time and in CPU, keeping every round's rate for the
    /// spread.
    fn measured(name: &'static str, rounds: Vec<Round>, messages: usize) -> Self {
        let mut times: Vec<Duration> = rounds.iter().map(|r| r.elapsed).collect();
        times.sort();
        let rates = times
            .iter()
            .map(|d| messages as f64 / d.as_secs_f64())
            .collect();
        Self {
            name,
            elapsed: times[times.len() / 2],
            messages,
            rates,
            cpu: median(rounds.iter().map(|r| r.cpu)),
            broker: median(rounds.iter().map(|r| r.broker)),
        }
    }

    /// The CPU time per message, in microseconds.
    fn cpu_per_message(&self) -> Option<f64> {
        Some(self.cpu?.as_secs_f64() * 1e6 / self.messages as f64)
    }

    /// The broker's CPU time per message, in microseconds.
    fn broker_per_message(&self) -> Option<f64> {
        Some(self.broker?.as_secs_f64() * 1e6 / self.messages as f64)
    }

    fn rate(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64()
    }
}

/// Rounds of the publish and consume scenarios, interleaved so that a slow moment of the
/// shared machine hits every scenario alike; the table shows each scenario's median round.
const ROUNDS: usize = 3;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Empties the benchmark queue between scenarios. The topology is declared once per run:
/// creating and deleting a few dozen quorum queues per scenario strains a small broker
/// (RabbitMQ 3.10 has answered `INTERNAL_ERROR` to such churn).
async fn purge(connection: &Connection, topology: &Topology) -> Result<()> {
    let channel = connection.create_channel().await?;
    channel
        .queue_purge(
            ShortString::from(topology.qualified("bench")),
            lapin::options::QueuePurgeOptions::default(),
        )
        .await?;
    channel.close(200, ShortString::from("purged")).await?;
    Ok(())
}

/// Hand-written lapin publishing with a window of `WINDOW` outstanding confirms.
async fn lapin_publish(connection: &lapin::Connection, queue: &str, n: usize) -> Result<Duration> {
    lapin_publish_window(connection, queue, n, WINDOW).await
}

/// Hand-written lapin publishing with a window of `window` outstanding confirms.
async fn lapin_publish_window(
    connection: &lapin::Connection,
    queue: &str,
    n: usize,
    window: usize,
) -> Result<Duration> {
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|i| serde_json::to_vec(&order(i)))
        .collect::<std::result::Result<_, _>>()?;
    let started = Instant::now();
    let mut pending = VecDeque::with_capacity(window);
    for body in &bodies {
        if pending.len() == window
            && let Some(confirm) = pending.pop_front()
        {
            let _: lapin::Confirmation = confirm.await?;
        }
        let properties = BasicProperties::default()
            .with_content_type(ShortString::from("application/json"))
            .with_delivery_mode(2);
        pending.push_back(
            channel
                .basic_publish(
                    ShortString::from(""),
                    ShortString::from(queue),
                    BasicPublishOptions::default(),
                    body,
                    properties,
                )
                .await?,
        );
    }
    for confirm in pending {
        confirm.await?;
    }
    Ok(started.elapsed())
}

/// The generated publishers of `topology`'s namespace.
async fn publishers(connection: &Connection, topology: &Topology) -> Result<Publishers> {
    Ok(Publishers::new(Publisher::new(connection, topology).await?))
}

/// Runs `publishes`, up to `WINDOW` at once, each as a task of its own; the first error
/// ends the run. A publish is only created once its turn comes.
async fn windowed<F>(publishes: impl Iterator<Item = F>) -> Result<()>
where
    F: std::future::Future<Output = std::result::Result<(), warren_runtime::PublishError>>
        + Send
        + 'static,
{
    windowed_by(WINDOW, publishes).await
}

/// [`windowed`], up to `window` at once.
async fn windowed_by<F>(window: usize, publishes: impl Iterator<Item = F>) -> Result<()>
where
    F: std::future::Future<Output = std::result::Result<(), warren_runtime::PublishError>>
        + Send
        + 'static,
{
    let window = Arc::new(Semaphore::new(window));
    let mut tasks = tokio::task::JoinSet::new();
    for publish in publishes {
        let permit = window.clone().acquire_owned().await?;
        tasks.spawn(async move {
            let result = publish.await;
            drop(permit);
            result
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// A channel of `connection` consuming `queue` (consumer tag `tag`) with `prefetch`
/// deliveries unacknowledged at most, as hand-written lapin code opens one.
async fn lapin_consumer(
    connection: &lapin::Connection,
    queue: &str,
    prefetch: u16,
    tag: &str,
) -> Result<(lapin::Channel, lapin::Consumer)> {
    let channel = connection.create_channel().await?;
    channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await?;
    let consumer = channel
        .basic_consume(
            ShortString::from(queue),
            ShortString::from(tag),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok((channel, consumer))
}

/// The prefetch of the hand-written lapin consumers, the contract's consumers' (`prefetch: 200`
/// in `contract/warren.yaml`).
const PREFETCH: u16 = 200;

/// Hand-written lapin consumer with a prefetch of [`PREFETCH`]; acks each message, or every
/// `batch` with `multiple`.
async fn lapin_consume(
    connection: &lapin::Connection,
    queue: &str,
    n: usize,
    batch: u64,
) -> Result<Duration> {
    lapin_consume_with(connection, queue, n, batch, PREFETCH, false).await
}

/// [`lapin_consume`] with a prefetch of `prefetch`, reading each body into the payload type
/// with `serde_json::from_slice` when `typed` (as a hand-written consumer of JSON does, without
/// validating it).
async fn lapin_consume_with(
    connection: &lapin::Connection,
    queue: &str,
    n: usize,
    batch: u64,
    prefetch: u16,
    typed: bool,
) -> Result<Duration> {
    let (channel, mut consumer) = lapin_consumer(connection, queue, prefetch, "bench").await?;
    // From the first delivery, as the warren worker's clock runs from its first message.
    let mut started = None;
    let mut seen = 0;
    while seen < n {
        let Some(delivery) = consumer.next().await else {
            break;
        };
        started.get_or_insert_with(Instant::now);
        let delivery = delivery?;
        seen += 1;
        if typed {
            std::hint::black_box(serde_json::from_slice::<types::BenchOrder>(&delivery.data)?);
        }
        if batch == 1 {
            delivery.ack(BasicAckOptions::default()).await?;
        } else if (seen as u64).is_multiple_of(batch) || seen == n {
            delivery.ack(BasicAckOptions { multiple: true }).await?;
        }
    }
    let elapsed = started.ok_or("no delivery")?.elapsed();
    channel.close(200, ShortString::from("done")).await?;
    Ok(elapsed)
}

/// A no-op handler that counts.
#[derive(Clone)]
struct Count(Arc<Counted>);

/// What a [`Count`] has seen: how many, when the first, and a notice at the `n`th.
struct Counted {
    seen: AtomicUsize,
    first: std::sync::OnceLock<Instant>,
    done: Notify,
    n: usize,
}

impl consumers::ConsumeOrder for Count {
    async fn handle(
        &self,
        _delivery: Delivery<types::BenchOrder>,
    ) -> std::result::Result<(), HandlerError> {
        self.seen();
        Ok(())
    }
}

impl Count {
    /// A handler that notifies once it has seen `n` messages.
    fn new(n: usize) -> Self {
        Self(Arc::new(Counted {
            seen: AtomicUsize::new(0),
            first: std::sync::OnceLock::new(),
            done: Notify::new(),
            n,
        }))
    }

    /// For consumers that get no messages in a scenario.
    fn idle() -> Self {
        Self::new(usize::MAX)
    }

    /// Counts one message, and notifies when it is the `n`th.
    fn seen(&self) {
        let counted = &*self.0;
        counted.first.get_or_init(Instant::now);
        if counted.seen.fetch_add(1, Ordering::Relaxed) + 1 == counted.n {
            counted.done.notify_one();
        }
    }

    /// Until the `n`th message was seen.
    async fn all_seen(&self) {
        self.0.done.notified().await;
    }

    /// When the first message was seen.
    fn first_seen(&self) -> Option<Instant> {
        self.0.first.get().copied()
    }
}

/// The handler type of every consumer under test in one scenario and idle in the others.
type Idle = Count;

/// Every handler of the bench contract, `consume_order` the one under test: the others are
/// idle (nothing publishes to their queues, or calls the rpc, in the scenarios that consume).
#[allow(clippy::type_complexity)]
fn handlers<C: consumers::ConsumeOrder>(
    consume_order: C,
) -> Handlers<
    Idle,
    Idle,
    Idle,
    Idle,
    C,
    rpc::Pricer,
    retry::Failing,
    retry::Failing,
    retry::Failing,
    retry::Failing,
> {
    Handlers {
        burn_1: Count::idle(),
        burn_2: Count::idle(),
        burn_4: Count::idle(),
        consume_backlog: Count::idle(),
        consume_order,
        retry_requeue: retry::Failing::idle(),
        retry_backoff: retry::Failing::idle(),
        retry_timing: retry::Failing::idle(),
        retry_timing_jitter: retry::Failing::idle(),
        price_order: rpc::Pricer,
    }
}

/// The warren worker, full decode and (unless `validate` is off) JSON Schema validation,
/// no-op handler.
async fn warren_consume(
    connection: &Connection,
    topology: &Topology,
    n: usize,
    validate: bool,
) -> Result<Duration> {
    let count = Count::new(n);
    let worker = Worker::new(connection.clone(), topology.clone()).schema_validation(validate);
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(handlers(count.clone()).run(worker));
    count.all_seen().await;
    // From the first message handled, as the lapin consumers' clocks run from their first
    // delivery: the worker's start (declaring the bench's topology, compiling its validators)
    // is not throughput. Its CPU counts all the same (the scenario's CPU is the whole call).
    let elapsed = count.first_seen().ok_or("no message seen")?.elapsed();
    stop.shutdown();
    running.await??;
    Ok(elapsed)
}

/// The median of readings taken in every round, `None` when one is missing.
fn median(readings: impl Iterator<Item = Option<Duration>>) -> Option<Duration> {
    let mut readings: Vec<Duration> = readings.collect::<Option<_>>()?;
    readings.sort();
    readings.get(readings.len() / 2).copied()
}

fn print(rows: &[Row], baseline: &str) {
    let base_row = rows.iter().find(|r| r.name == baseline);
    let base = base_row.map_or(1.0, Row::rate);
    let base_cpu = base_row.and_then(Row::cpu_per_message);
    for row in rows {
        // Rounds are sorted by time: the first is the fastest.
        let spread = match (row.rates.first(), row.rates.last()) {
            (Some(fastest), Some(slowest)) if row.rates.len() > 1 => {
                format!("  (rounds {slowest:.0} to {fastest:.0})")
            }
            _ => String::new(),
        };
        // This process's CPU per message (the broker's excluded), and its ratio to the
        // baseline's: what each side costs, apart from the share of the cores it got.
        let cpu = match (row.cpu_per_message(), base_cpu) {
            (Some(cpu), Some(base)) => format!("  {cpu:>7.1} µs CPU/msg {:>5.2}x", cpu / base),
            (Some(cpu), None) => format!("  {cpu:>7.1} µs CPU/msg"),
            _ => String::new(),
        };
        // The broker's: beside the process's, which side limits the scenario.
        let broker = row
            .broker_per_message()
            .map(|b| format!("  broker {b:>6.1} µs/msg"))
            .unwrap_or_default();
        println!(
            "  {:<46} {:>8} msgs {:>8.2} s {:>10.0} msg/s {:>6.2}x{cpu}{broker}{spread}",
            row.name,
            row.messages,
            row.elapsed.as_secs_f64(),
            row.rate(),
            row.rate() / base
        );
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let observe = observe::wanted(&args);
    let mut args = args.into_iter().filter(|arg| arg != observe::ARG);
    let scenario = args.next().unwrap_or_else(|| "all".to_owned());
    if let Some(outcome) = generator_scenario(&scenario, &mut args) {
        return outcome;
    }
    if scenario == "decode" {
        let n = args
            .next()
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(200_000);
        return decode::bench(n);
    }
    let n: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let all = scenario == "all";
    let known = [
        "all", "publish", "consume", "latency", "backlog", "cpu", "retry", "rpc", "effects",
        "codegen",
    ];
    if !known.contains(&scenario.as_str()) {
        return Err(format!("unknown scenario `{scenario}`; one of {known:?}").into());
    }
    if all || scenario == "codegen" {
        bench_codegen()?;
        if !all {
            return Ok(());
        }
    }
    // Before any publisher or worker: they register their metric handles when they start.
    let _observing = observe.then(observe::install).transpose()?;
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let connection = Connection::connect(&url, "warren-bench").await?;
    // The hand-written side on a plain lapin connection, as its users would open it: warren's
    // connections read through a guard against hostile frames, and that cost is warren's.
    let plain = lapin::Connection::connect(&url, lapin::ConnectionProperties::default()).await?;
    let namespace = format!("bench.{}.", std::process::id());
    let base = topology().namespaced(&namespace);
    let body_len = serde_json::to_vec(&order(0))?.len();
    println!(
        "\nwarren-bench: {n} messages of {body_len} bytes, quorum queues, confirms, prefetch {PREFETCH}\n{}\n",
        observe::describe(observe)
    );
    warren_runtime::declare(&connection, &base).await?;
    let mut outcome = run_broker_scenarios(&connection, &plain, &base, &scenario, n).await;
    if outcome.is_ok() && (all || scenario == "effects") {
        // A tenth of the messages in `all`: each is a database transaction.
        let messages = if all { (n / 10).max(1) } else { n };
        outcome = effects::bench(&connection, &namespace, messages, all).await;
    }
    warren_runtime::delete(&connection, &base).await?;
    connection.close().await?;
    plain.close(200, ShortString::from("done")).await?;
    outcome
}

async fn run_broker_scenarios(
    connection: &Connection,
    plain: &lapin::Connection,
    topology: &Topology,
    scenario: &str,
    n: usize,
) -> Result<()> {
    let all = scenario == "all";
    if all || scenario == "publish" {
        publish::bench(connection, plain, topology, n).await?;
    }
    if all || scenario == "consume" {
        bench_consume(connection, plain, topology, n).await?;
    }
    if all || scenario == "latency" {
        // At a steady 2,000 msg/s each round takes n / 2,000 s per side: `all` measures
        // 10,000 at most.
        let messages = if all { n.min(10_000) } else { n };
        latency::bench(connection, plain, topology, messages).await?;
    }
    if all || scenario == "backlog" {
        backlog::bench(connection, plain, topology, n).await?;
    }
    if all || scenario == "cpu" {
        scaling::bench(connection, plain, topology, (n / 10).max(1)).await?;
    }
    if all || scenario == "retry" {
        bench_retry(connection, topology, n).await?;
    }
    if all || scenario == "rpc" {
        // A round trip with one call in flight takes the broker's latency twice over: a
        // twentieth of the messages keeps `all` about as long as before.
        let calls = if all { (n / 20).max(1) } else { n };
        rpc::bench(connection, plain, topology, calls).await?;
    }
    Ok(())
}

/// Rounds of the consume scenario: an even number, the scenarios' order reversed every other
/// round, so that each runs early and late equally often. The broker drifts within a round: a
/// consumer run after another was measured 5–10 % slower (the broker spending more per message)
/// than the same consumer run first, and in a fixed order that fell on whichever came last.
const CONSUME_ROUNDS: usize = 4;

async fn bench_consume(
    connection: &Connection,
    plain: &lapin::Connection,
    t: &Topology,
    n: usize,
) -> Result<()> {
    println!(
        "\nconsume (median of {CONSUME_ROUNDS} rounds, the order reversed every other round; ratios against the hand-tuned lapin consumer):"
    );
    let scenarios = [
        ("lapin, ack each", "lapin-ack-each"),
        (
            "lapin, hand-tuned (multiple ack every 50)",
            "lapin-multiple",
        ),
        (
            "lapin, hand-tuned, guarded connection",
            "lapin-multiple-guarded",
        ),
        (
            "lapin, hand-tuned, payload typed by serde_json",
            "lapin-multiple-typed",
        ),
        (
            "warren worker, full validation, no-op handler",
            "warren-consume",
        ),
        (
            "warren worker, validation off, no-op handler",
            "warren-consume-unvalidated",
        ),
    ];
    // `WARREN_BENCH_CONSUMERS=warren-consume,lapin-multiple` runs only those (to profile one).
    let only = std::env::var("WARREN_BENCH_CONSUMERS").ok();
    let scenarios: Vec<_> = scenarios
        .into_iter()
        .filter(|(_, key)| {
            only.as_deref()
                .is_none_or(|only| only.split(',').any(|o| o == *key))
        })
        .collect();
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); scenarios.len()];
    let queue = t.qualified("bench");
    for round in 0..CONSUME_ROUNDS {
        let mut order: Vec<_> = scenarios.iter().zip(&mut rounds).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for ((_, scenario), times) in order {
            // Publishing is not measured: the queue is filled first.
            lapin_publish(plain, &queue, n).await?;
            let guarded = connection.lapin().ok_or("warren's connection is down")?;
            times.push(
                Round::measure(async {
                    match *scenario {
                        "lapin-ack-each" => lapin_consume(plain, &queue, n, 1).await,
                        "lapin-multiple" => lapin_consume(plain, &queue, n, 50).await,
                        // The same consumer through the guard (`warren_runtime` reads hostile
                        // frames through it): what the guard alone costs.
                        "lapin-multiple-guarded" => lapin_consume(&guarded, &queue, n, 50).await,
                        "lapin-multiple-typed" => {
                            lapin_consume_with(plain, &queue, n, 50, PREFETCH, true).await
                        }
                        "warren-consume" => warren_consume(connection, t, n, true).await,
                        _ => warren_consume(connection, t, n, false).await,
                    }
                })
                .await?,
            );
            purge(connection, t).await?;
        }
    }
    let rows: Vec<Row> = scenarios
        .iter()
        .zip(rounds)
        .map(|((name, _), times)| Row::measured(name, times, n))
        .collect();
    print(&rows, "lapin, hand-tuned (multiple ack every 50)");
    Ok(())
}

async fn bench_retry(connection: &Connection, t: &Topology, n: usize) -> Result<()> {
    // A tenth of the messages: each is handled twice and published twice.
    let n = (n / 10).max(1);
    println!(
        "\nretry path ({n} messages, each failing once then succeeding on its retry; the queue filled first, \
         timed from the worker's start to the last success; ratios against publishing the same messages):"
    );
    let mut publishing = Vec::new();
    let mut rows = Vec::new();
    for (name, queue) in [
        ("immediate-requeue (quorum reject)", "retry-requeue"),
        ("ttl-backoff, 10 ms tier", "retry-backoff"),
    ] {
        let (published, retried) = retry::throughput(connection, t, queue, n).await?;
        publishing.push(published);
        rows.push(Row::measured(name, vec![retried], n));
    }
    let baseline = "confirmed publish (warren publisher, 1000 in flight)";
    rows.insert(0, Row::measured(baseline, publishing, n));
    print(&rows, baseline);

    // A cohort of a few hundred failing together: enough for percentiles, few enough that
    // the delays measure the schedule rather than the worker's retry throughput (2,000 at
    // once queue about 150 ms behind each other at ~10,000 retries/s).
    let n = (n / 20).clamp(1, 500);
    println!(
        "\nretry timing ({n} messages failing 3 times under ttl-backoff 200/400/800 ms; error = actual delay outside its schedule):"
    );
    for (name, queue, jitter) in [
        ("jitter off", "retry-timing", false),
        (
            "jitter on (on time anywhere in [d/2, d])",
            "retry-timing-jitter",
            true,
        ),
    ] {
        let timing = retry::timing(connection, t, queue, n, jitter).await?;
        println!(
            "  {:<46} {:>6} delays  p50 {:>6.1} ms  p99 {:>6.1} ms  max {:>6.1} ms",
            name,
            timing.delays,
            timing.p50.as_secs_f64() * 1e3,
            timing.p99.as_secs_f64() * 1e3,
            timing.max.as_secs_f64() * 1e3,
        );
    }
    Ok(())
}

/// The scenarios and child commands of the generator (`build-cost`, the stages `codegen` runs
/// in a child process, and `write-contract`), run when `scenario` is one: `None` for the
/// others.
#[cfg(feature = "codegen")]
fn generator_scenario(
    scenario: &str,
    args: &mut impl Iterator<Item = String>,
) -> Option<Result<()>> {
    for stage in [
        codegen::Stage::Validate,
        codegen::Stage::Generate,
        codegen::Stage::Typify,
        codegen::Stage::TypifyFormatted,
    ] {
        if scenario == stage.command() {
            return Some(match args.next() {
                Some(contract) => codegen::child(std::path::Path::new(&contract), stage),
                None => Err("a child command needs a contract path".into()),
            });
        }
    }
    match scenario {
        "build-cost" => Some(bench_build_cost(args.next())),
        // The classic contract written where a profiler can be pointed at it:
        // `valgrind --tool=callgrind warren-bench generate-child "$(warren-bench write-contract DIR)"`.
        "write-contract" => Some(match args.next() {
            Some(dir) => codegen::write_contract(std::path::Path::new(&dir), codegen::CLASSIC)
                .map(|contract| println!("{}", contract.display())),
            None => Err("write-contract needs a directory".into()),
        }),
        _ => None,
    }
}

/// Without the generator: `build-cost` refused, saying how to build it in.
#[cfg(not(feature = "codegen"))]
fn generator_scenario(scenario: &str, _: &mut impl Iterator<Item = String>) -> Option<Result<()>> {
    (scenario == "build-cost").then(|| Err(WITHOUT_GENERATOR.into()))
}

/// Why the generator's scenarios are missing from this build.
#[cfg(not(feature = "codegen"))]
const WITHOUT_GENERATOR: &str = "built without the generator: `cargo run --release -p warren-bench --features codegen -- codegen` (or `build-cost`). It is a feature because it turns on serde_json's `preserve_order`, which a service's build does not have and which makes every JSON object the worker parses dearer";

/// The `codegen` scenario, missing from this build: said so.
#[cfg(not(feature = "codegen"))]
fn bench_codegen() -> Result<()> {
    println!("codegen: skipped, {WITHOUT_GENERATOR}\n");
    Ok(())
}

/// The `build-cost` scenario on the shapes of `sizes` (messages, comma-separated; by
/// default 5, 200 and 1,000): no broker, only `cargo`.
#[cfg(feature = "codegen")]
fn bench_build_cost(sizes: Option<String>) -> Result<()> {
    let shapes = match sizes {
        None => build_cost::SHAPES.to_vec(),
        Some(sizes) => (sizes.split(','))
            .map(|n| Ok(build_cost::shape_of(n.trim().parse()?)))
            .collect::<Result<Vec<_>>>()?,
    };
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the bench crate sits in the workspace")?;
    build_cost::bench(workspace, &shapes)
}

#[cfg(feature = "codegen")]
fn bench_codegen() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("warren-bench-codegen-{}", std::process::id()));
    let shape = codegen::CLASSIC;
    let contract = codegen::write_contract(&dir.join("classic"), shape)?;
    println!(
        "codegen: `warren generate` on {} message types, {} queues, shared schema files (a child process):",
        shape.messages, shape.queues
    );
    let mut walls = Vec::new();
    let mut peak: f64 = 0.0;
    let mut bytes = 0;
    // The generator against typify alone on the bundled schemas it hands typify, each
    // timed inside its child, interleaved and best of 3.
    let (mut generate, mut typify, mut formatted) = (Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        let generated = codegen::measure(&contract, codegen::Stage::Generate)?;
        walls.push(generated.wall);
        peak = peak.max(generated.peak_rss_mib);
        bytes = generated.bytes;
        generate = generate.min(generated.timed);
        typify = typify.min(codegen::measure(&contract, codegen::Stage::Typify)?.timed);
        let typify_formatted = codegen::measure(&contract, codegen::Stage::TypifyFormatted)?;
        formatted = formatted.min(typify_formatted.timed);
    }
    walls.sort();
    println!(
        "  wall time {:.2} s (best of 3; {:.2} s worst), peak memory {peak:.0} MiB, {:.1} MiB of Rust generated",
        walls[0].as_secs_f64(),
        walls[2].as_secs_f64(),
        bytes as f64 / (1024.0 * 1024.0)
    );
    println!(
        "  generate {:.2} s, typify alone {:.2} s, ratio {:.2}x (in-process times, best of 3; typify: type space and its tokens as text, on the bundled schemas)",
        generate.as_secs_f64(),
        typify.as_secs_f64(),
        generate.as_secs_f64() / typify.as_secs_f64()
    );
    println!(
        "  typify formatted by prettyplease (as typify documents printing a file) {:.2} s, ratio {:.2}x",
        formatted.as_secs_f64(),
        generate.as_secs_f64() / formatted.as_secs_f64()
    );
    println!(
        "codegen scaling: n each of queues, messages, publishers, consumers and bindings (best of 3 validate, one generate):"
    );
    for n in codegen::SCALING {
        let shape = codegen::Shape {
            messages: n,
            queues: n,
        };
        let contract = codegen::write_contract(&dir.join(format!("n{n}")), shape)?;
        let mut validate: Option<codegen::Measured> = None;
        for _ in 0..3 {
            let run = codegen::measure(&contract, codegen::Stage::Validate)?;
            if validate.as_ref().is_none_or(|best| run.wall < best.wall) {
                validate = Some(run);
            }
        }
        let validate = validate.ok_or("no validate run")?;
        let generate = codegen::measure(&contract, codegen::Stage::Generate)?;
        println!(
            "  n = {n:>6}: validate {:>6.2} s, {:>5.0} MiB peak; generate {:>6.2} s, {:>5.0} MiB peak, {:.1} MiB of Rust",
            validate.wall.as_secs_f64(),
            validate.peak_rss_mib,
            generate.wall.as_secs_f64(),
            generate.peak_rss_mib,
            generate.bytes as f64 / (1024.0 * 1024.0)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (reran, elapsed) = codegen::noop_build_reruns(&workspace)?;
    println!(
        "  no-op `cargo build -p warren-example-orders`: {:.2} s, build script rerun: {}",
        elapsed.as_secs_f64(),
        if reran { "YES (a bug)" } else { "no" }
    );
    Ok(())
}
