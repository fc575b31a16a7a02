//! Request/reply: round trips per second and their latency, warren's generated code (the
//! contract's rpcs `price_order` and `price_order_lapin`: `RpcClients` and a server of the
//! `consumers::PriceOrder` trait) against the hand-written lapin code over RabbitMQ's direct
//! reply-to that a team would otherwise write, with one call and with 64 calls in flight.
//!
//! Both sides send the same order and answer with the same quote, each through its own
//! classic request queue, in the same run and in interleaved rounds.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicPublishOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel};
use tokio::sync::oneshot;
use warren_runtime::model::headers;
use warren_runtime::rpc::{DIRECT_REPLY_TO, NoErrors, ReplyStatus};
use warren_runtime::{
    Connection, Delivery, HandlerError, RpcClient, RpcHandlerError, Topology, Worker,
};

use crate::{ROUNDS, Result, RpcClients, consumers, order, types};

/// The warren side's request queue (rpc `price_order`'s).
const WARREN_QUEUE: &str = "rpc-warren";
/// The lapin side's request queue (rpc `price_order_lapin`'s).
const LAPIN_QUEUE: &str = "rpc-lapin";
/// The calls in flight of each measured case.
const IN_FLIGHT: [usize; 2] = [1, 64];
/// How long one lapin call may wait for its reply before the round fails: the rpcs'
/// `timeout` in the contract, which warren's calls wait.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The lapin server takes this many requests ahead (a consumer's prefetch) and answers as
/// many at once: the `prefetch` and `concurrency` of rpc `price_order` in the contract.
const SERVER_PREFETCH: u16 = 100;

/// What both servers answer: the order's total, recomputed from its lines.
fn price(order: &types::BenchOrder) -> std::result::Result<types::BenchQuote, String> {
    let total_minor = order
        .items
        .iter()
        .map(|item| item.quantity.get().saturating_mul(item.price_minor))
        .fold(0u64, u64::saturating_add);
    let lines = u64::try_from(order.items.len()).map_err(|e| e.to_string())?;
    Ok(types::BenchQuote {
        order_id: order
            .order_id
            .as_str()
            .try_into()
            .map_err(|e: types::error::ConversionError| e.to_string())?,
        total_minor,
        currency: order
            .currency
            .to_string()
            .parse()
            .map_err(|e: types::error::ConversionError| e.to_string())?,
        lines: NonZeroU64::new(lines).ok_or("an order without lines")?,
    })
}

/// The warren server's handler: the server of rpc `price_order`.
pub struct Pricer;

impl consumers::PriceOrder for Pricer {
    async fn handle(
        &self,
        request: Delivery<types::BenchOrder>,
    ) -> std::result::Result<types::BenchQuote, RpcHandlerError<NoErrors>> {
        price(request.payload()).map_err(|e| HandlerError::non_retryable(e).into())
    }
}

/// One side's figures for one round.
struct Round {
    elapsed: Duration,
    /// Every call's latency, sorted.
    latencies: Vec<Duration>,
    /// The CPU this process spent on the round: client and server, whichever sides they are.
    cpu: Option<Duration>,
}

impl Round {
    fn percentile(&self, q: f64) -> Duration {
        let last = self.latencies.len().saturating_sub(1);
        self.latencies
            .get(((last as f64) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    }
}

type CallResult = std::result::Result<(), String>;

/// Makes `n` calls, `in_flight` at a time (each in-flight slot a task making calls one after
/// another), timing each.
async fn drive<C, F>(n: usize, in_flight: usize, call: C) -> Result<Round>
where
    C: Fn(usize) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = CallResult> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let cpu = crate::cpu::used();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..in_flight.min(n) {
        let next = next.clone();
        let call = call.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, String>(latencies);
                }
                let sent = Instant::now();
                call(i).await?;
                latencies.push(sent.elapsed());
            }
        });
    }
    let mut latencies = Vec::with_capacity(n);
    while let Some(done) = tasks.join_next().await {
        latencies.extend(done??);
    }
    let elapsed = started.elapsed();
    let cpu = crate::cpu::since(cpu);
    latencies.sort();
    Ok(Round {
        elapsed,
        latencies,
        cpu,
    })
}

/// Hand-written direct reply-to client: one channel consumes `amq.rabbitmq.reply-to`
/// (no acks) and publishes the requests; a reader task hands each reply to the call waiting
/// on its correlation id.
#[derive(Clone)]
struct LapinClient {
    channel: Channel,
    pending: Arc<Mutex<HashMap<String, oneshot::Sender<Vec<u8>>>>>,
    next_id: Arc<AtomicU64>,
}

impl LapinClient {
    async fn new(connection: &lapin::Connection) -> Result<Self> {
        let channel = connection.create_channel().await?;
        let mut replies = channel
            .basic_consume(
                ShortString::from(DIRECT_REPLY_TO),
                ShortString::from("rpc-client"),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await?;
        let pending: Arc<Mutex<HashMap<String, oneshot::Sender<Vec<u8>>>>> = Arc::default();
        let waiting = pending.clone();
        tokio::spawn(async move {
            while let Some(Ok(reply)) = replies.next().await {
                let Some(id) = reply.properties.correlation_id() else {
                    continue;
                };
                let call = waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(id.as_str());
                if let Some(call) = call {
                    // The call may have given up: its reply is dropped.
                    let _ = call.send(reply.data);
                }
            }
        });
        Ok(Self {
            channel,
            pending,
            next_id: Arc::default(),
        })
    }

    /// Sends `body` to `queue` (its full name) and waits for the reply.
    async fn call(
        &self,
        queue: &str,
        body: &[u8],
    ) -> std::result::Result<types::BenchQuote, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).to_string();
        let (reply, replied) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), reply);
        let properties = BasicProperties::default()
            .with_content_type(ShortString::from("application/json"))
            .with_correlation_id(ShortString::from(id.as_str()))
            .with_reply_to(ShortString::from(DIRECT_REPLY_TO));
        let sent = self
            .channel
            .basic_publish(
                ShortString::from(""),
                ShortString::from(queue),
                BasicPublishOptions::default(),
                body,
                properties,
            )
            .await;
        if let Err(error) = sent {
            self.forget(&id);
            return Err(error.to_string());
        }
        let data = match tokio::time::timeout(CALL_TIMEOUT, replied).await {
            Ok(Ok(data)) => data,
            Ok(Err(_)) => return Err("the reply reader stopped".to_owned()),
            Err(_) => {
                self.forget(&id);
                return Err(format!("no reply within {CALL_TIMEOUT:?}"));
            }
        };
        serde_json::from_slice(&data).map_err(|e| e.to_string())
    }

    fn forget(&self, id: &str) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}

/// Hand-written server: consumes the request queue, answers each request to its reply-to
/// on the default exchange with its correlation id, then acks it (no confirms). Runs until
/// its channel closes.
async fn lapin_server(connection: &lapin::Connection, queue: &str) -> Result<Channel> {
    let (channel, mut requests) =
        crate::lapin_consumer(connection, queue, SERVER_PREFETCH, "rpc-server").await?;
    let publishing = channel.clone();
    tokio::spawn(async move {
        // Each request answered in a task of its own, as warren's server handles several at
        // once: the prefetch bounds how many.
        while let Some(Ok(request)) = requests.next().await {
            let publishing = publishing.clone();
            tokio::spawn(async move {
                if let Err(error) = answer(&publishing, &request).await {
                    eprintln!("lapin rpc server: {error}");
                }
                // A lost channel ends the consumer too; nothing to do here.
                let _ = request.ack(BasicAckOptions::default()).await;
            });
        }
    });
    Ok(channel)
}

/// The one header warren's reply protocol adds to a response (`x-rpc-status: ok`), so the
/// hand-written server answers warren's client too (the mixed cases). Built per reply, as
/// hand-written code would.
fn replied_ok() -> FieldTable {
    let mut table = FieldTable::default();
    table.insert(
        ShortString::from(headers::RPC_STATUS),
        AMQPValue::LongString(LongString::from(ReplyStatus::Ok.as_str())),
    );
    table
}

/// The lapin server's answer to `request`: its quote, to its reply-to on the default exchange
/// with its correlation id.
async fn answer(channel: &Channel, request: &lapin::message::Delivery) -> CallResult {
    let order: types::BenchOrder =
        serde_json::from_slice(&request.data).map_err(|e| e.to_string())?;
    let body = serde_json::to_vec(&price(&order)?).map_err(|e| e.to_string())?;
    let properties = &request.properties;
    let (Some(reply_to), Some(id)) = (properties.reply_to(), properties.correlation_id()) else {
        return Err("a request without reply-to or correlation id".to_owned());
    };
    channel
        .basic_publish(
            ShortString::from(""),
            reply_to.clone(),
            BasicPublishOptions::default(),
            &body,
            BasicProperties::default()
                .with_content_type(ShortString::from("application/json"))
                .with_correlation_id(id.clone())
                .with_headers(replied_ok()),
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Whose code makes or answers the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Lapin,
    Warren,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Self::Lapin => "lapin",
            Self::Warren => "warren",
        }
    }
}

/// One case of the table: a client, a server and the calls in flight.
struct Case {
    client: Side,
    server: Side,
    in_flight: usize,
    rounds: Vec<Round>,
}

impl Case {
    fn name(&self) -> String {
        let pair = match (self.client, self.server) {
            (Side::Lapin, Side::Lapin) => "lapin direct reply-to".to_owned(),
            (Side::Warren, Side::Warren) => "warren RpcClient + server".to_owned(),
            (client, server) => format!("{} client, {} server", client.name(), server.name()),
        };
        format!("{pair}, {} in flight", self.in_flight)
    }
}

/// The clients of both sides and what they send.
#[derive(Clone)]
struct Clients {
    lapin: LapinClient,
    warren: RpcClients,
    /// Each order as the lapin client sends it, serialized ahead (warren's client serializes
    /// and validates as part of its call).
    bodies: Arc<Vec<Vec<u8>>>,
    orders: Arc<Vec<types::BenchOrder>>,
    /// The lapin server's queue by its full name.
    lapin_queue: Arc<str>,
    /// The warren server's queue by its full name (the warren client sends where the
    /// contract says, in its namespace).
    warren_queue: Arc<str>,
}

impl Clients {
    /// Call `i` from `client` to `server`, its answer checked.
    async fn call(&self, client: Side, server: Side, i: usize) -> CallResult {
        let order = &self.orders[i];
        let quote = match client {
            Side::Lapin => {
                let queue = match server {
                    Side::Lapin => &self.lapin_queue,
                    Side::Warren => &self.warren_queue,
                };
                self.lapin.call(queue, &self.bodies[i]).await?
            }
            Side::Warren => match server {
                Side::Lapin => self.warren.price_order_lapin(order).await,
                Side::Warren => self.warren.price_order(order).await,
            }
            .map_err(|e| e.to_string())?,
        };
        check(order, &quote)
    }
}

/// Runs the scenario: `n` calls per round for each case, `ROUNDS` interleaved rounds.
pub async fn bench(
    connection: &Connection,
    plain: &lapin::Connection,
    topology: &Topology,
    n: usize,
) -> Result<()> {
    let body_len = serde_json::to_vec(&order(0))?.len();
    println!(
        "\nrpc ({n} calls per case and round, {body_len}-byte requests, classic request queues, \
         median of {ROUNDS} rounds; ratios against lapin on both sides with as many calls in flight):"
    );
    // The servers run for the whole scenario, each on its own queue.
    let server_channel = lapin_server(plain, &topology.qualified(LAPIN_QUEUE)).await?;
    let mut worker = Worker::new(connection.clone(), topology.clone());
    consumers::register::price_order(&mut worker, Pricer);
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());

    let clients = Clients {
        lapin: LapinClient::new(plain).await?,
        warren: RpcClients::new(RpcClient::new(connection, topology).await?),
        bodies: Arc::new(
            (0..n)
                .map(|i| serde_json::to_vec(&order(i)))
                .collect::<std::result::Result<_, _>>()?,
        ),
        orders: Arc::new((0..n).map(order).collect()),
        lapin_queue: topology.qualified(LAPIN_QUEUE).into(),
        warren_queue: topology.qualified(WARREN_QUEUE).into(),
    };
    // Both sides alone first, then each client against the other's server: which side
    // a difference comes from.
    let pairs = [
        (Side::Lapin, Side::Lapin),
        (Side::Warren, Side::Warren),
        (Side::Lapin, Side::Warren),
        (Side::Warren, Side::Lapin),
    ];
    let mut cases: Vec<Case> = IN_FLIGHT
        .iter()
        .flat_map(|&in_flight| {
            pairs.map(|(client, server)| Case {
                client,
                server,
                in_flight,
                rounds: Vec::new(),
            })
        })
        .collect();
    let outcome = async {
        for _ in 0..ROUNDS {
            for case in &mut cases {
                let clients = clients.clone();
                let (client, server) = (case.client, case.server);
                let round = drive(n, case.in_flight, move |i| {
                    let clients = clients.clone();
                    async move { clients.call(client, server, i).await }
                })
                .await?;
                case.rounds.push(round);
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    }
    .await;
    stop.shutdown();
    running.await??;
    server_channel.close(200, ShortString::from("done")).await?;
    outcome?;
    print(&mut cases, n);
    Ok(())
}

/// Whether `quote` answers `order`: a round trip that returned someone else's reply is a bug,
/// not a fast call.
fn check(order: &types::BenchOrder, quote: &types::BenchQuote) -> CallResult {
    if quote.order_id.as_str() == order.order_id.as_str() {
        Ok(())
    } else {
        Err(format!(
            "order {} was answered for {}",
            order.order_id.as_str(),
            quote.order_id.as_str()
        ))
    }
}

/// One line per case: the median round's rate, its p50 and p99, its CPU per call (client and
/// server together: both run in this process), the ratio to the lapin case with as many
/// calls in flight, and the spread of the rounds' rates.
fn print(cases: &mut [Case], n: usize) {
    let rate = |round: &Round| n as f64 / round.elapsed.as_secs_f64();
    let cpu = |round: &Round| {
        round.cpu.map_or(String::new(), |cpu| {
            format!("  {:>6.1} µs CPU/call", cpu.as_secs_f64() * 1e6 / n as f64)
        })
    };
    let medians: Vec<(f64, Duration, Duration, f64, f64, String)> = cases
        .iter_mut()
        .map(|case| {
            case.rounds.sort_by_key(|round| round.elapsed);
            let fastest = case.rounds.first().map_or(0.0, rate);
            let slowest = case.rounds.last().map_or(0.0, rate);
            match case.rounds.get(case.rounds.len() / 2) {
                Some(median) => (
                    rate(median),
                    median.percentile(0.5),
                    median.percentile(0.99),
                    slowest,
                    fastest,
                    cpu(median),
                ),
                None => (0.0, Duration::ZERO, Duration::ZERO, 0.0, 0.0, String::new()),
            }
        })
        .collect();
    for (case, (rps, p50, p99, slowest, fastest, cpu)) in cases.iter().zip(&medians) {
        let (rps, p50, p99) = (*rps, *p50, *p99);
        let base = cases
            .iter()
            .zip(&medians)
            .find(|(other, _)| {
                (other.client, other.server) == (Side::Lapin, Side::Lapin)
                    && other.in_flight == case.in_flight
            })
            .map_or(rps, |(_, m)| m.0);
        println!(
            "  {:<42} {:>9.0} calls/s {:>6.2}x  p50 {:>7.2} ms  p99 {:>7.2} ms{cpu}  (rounds {slowest:.0} to {fastest:.0})",
            case.name(),
            rps,
            rps / base,
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
        );
    }
}
