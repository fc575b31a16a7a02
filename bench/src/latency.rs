//! End-to-end latency at a steady rate: from the moment a message is handed to the
//! publisher to the moment its handler starts, for hand-written lapin (publisher with a
//! window of confirms, consumer with `multiple` acks) and for warren (the generated
//! publisher, the worker), each alone on the queue, at the same pace.
//!
//! Each message carries its number as its message id; the handler looks up when it was
//! handed to the publisher. Both sides run in this process, so one clock serves both ends.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use lapin::BasicProperties;
use lapin::options::{BasicAckOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use tokio::sync::{Notify, Semaphore};
use warren_runtime::{Connection, Delivery, HandlerError, PublishOptions, Topology, Worker};

use crate::{ROUNDS, Result, WINDOW, consumers, order, publishers, types};

/// The steady rate, messages per second (issue 16: latency at 2,000 msg/s).
const RATE: u64 = 2_000;

/// When each message was handed to its publisher, and how long it took to reach its
/// handler: nanoseconds since `origin`, one slot per message.
struct Clock {
    origin: Instant,
    sent: Vec<AtomicU64>,
    latency: Vec<AtomicU64>,
    seen: AtomicUsize,
    done: Notify,
}

impl Clock {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Self {
            origin: Instant::now(),
            sent: (0..n).map(|_| AtomicU64::new(0)).collect(),
            latency: (0..n).map(|_| AtomicU64::new(0)).collect(),
            seen: AtomicUsize::new(0),
            done: Notify::new(),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Message `i` is handed to the publisher now.
    fn sent(&self, i: usize) {
        self.sent[i].store(self.now(), Ordering::Relaxed);
    }

    /// The message whose id is `id` reached its handler now.
    fn arrived(&self, id: Option<&str>) {
        let Some(i) = id.and_then(|id| id.parse::<usize>().ok()) else {
            return;
        };
        let Some(sent) = self.sent.get(i) else {
            return;
        };
        let latency = self.now().saturating_sub(sent.load(Ordering::Relaxed));
        self.latency[i].store(latency.max(1), Ordering::Relaxed);
        if self.seen.fetch_add(1, Ordering::Relaxed) + 1 == self.sent.len() {
            self.done.notify_one();
        }
    }

    /// p50, p99 and the maximum of the latencies.
    fn percentiles(&self) -> [Duration; 3] {
        let mut all: Vec<u64> = self
            .latency
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .filter(|&l| l > 0)
            .collect();
        all.sort_unstable();
        let at = |q: f64| {
            let index = ((all.len() as f64 - 1.0) * q).round() as usize;
            Duration::from_nanos(all.get(index).copied().unwrap_or_default())
        };
        [at(0.5), at(0.99), at(1.0)]
    }
}

/// `start + i / RATE`: when message `i` is due.
fn due(start: Instant, i: usize) -> Instant {
    start + Duration::from_nanos(1_000_000_000 / RATE * i as u64)
}

/// Hand-written lapin: a paced publisher with a window of confirms, and a consumer acking
/// every 50 with `multiple`.
async fn lapin_side(
    connection: &lapin::Connection,
    queue: &str,
    n: usize,
) -> Result<[Duration; 3]> {
    let clock = Clock::new(n);
    let (channel, mut consumer) = crate::lapin_consumer(connection, queue, 200, "latency").await?;
    let receiving = {
        let clock = clock.clone();
        tokio::spawn(async move {
            let mut seen = 0usize;
            while let Some(Ok(delivery)) = consumer.next().await {
                let id = delivery
                    .properties
                    .message_id()
                    .as_ref()
                    .map(ShortString::as_str);
                clock.arrived(id);
                seen += 1;
                if seen.is_multiple_of(50) || seen == n {
                    let _ = delivery.ack(BasicAckOptions { multiple: true }).await;
                }
                if seen == n {
                    break;
                }
            }
        })
    };
    let publishing = connection.create_channel().await?;
    publishing
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let body = serde_json::to_vec(&order(0))?;
    let start = Instant::now();
    let mut pending = VecDeque::with_capacity(crate::WINDOW);
    for i in 0..n {
        tokio::time::sleep_until(due(start, i).into()).await;
        if pending.len() == WINDOW
            && let Some(confirm) = pending.pop_front()
        {
            let _: lapin::Confirmation = confirm.await?;
        }
        clock.sent(i);
        let properties = BasicProperties::default()
            .with_content_type(ShortString::from("application/json"))
            .with_delivery_mode(2)
            .with_message_id(ShortString::from(i.to_string()));
        pending.push_back(
            publishing
                .basic_publish(
                    ShortString::from(""),
                    ShortString::from(queue),
                    BasicPublishOptions::default(),
                    &body,
                    properties,
                )
                .await?,
        );
    }
    for confirm in pending {
        confirm.await?;
    }
    receiving.await?;
    channel.close(200, ShortString::from("done")).await?;
    publishing.close(200, ShortString::from("done")).await?;
    Ok(clock.percentiles())
}

/// The handler of the warren side: notes when each message arrived.
#[derive(Clone)]
struct Arrivals(Arc<Clock>);

impl consumers::ConsumeOrder for Arrivals {
    async fn handle(
        &self,
        delivery: Delivery<types::BenchOrder>,
    ) -> std::result::Result<(), HandlerError> {
        self.0.arrived(delivery.message_id());
        Ok(())
    }
}

/// Warren: the generated publisher, paced, up to `WINDOW` in flight, and the worker.
async fn warren_side(
    connection: &Connection,
    topology: &Topology,
    n: usize,
) -> Result<[Duration; 3]> {
    let clock = Clock::new(n);
    let worker = Worker::new(connection.clone(), topology.clone());
    let stop = worker.shutdown_handle();
    let running = tokio::spawn(crate::handlers(Arrivals(clock.clone())).run(worker));
    let publishers = publishers(connection, topology).await?;
    let payload = order(0);
    let window = Arc::new(Semaphore::new(WINDOW));
    let mut tasks = tokio::task::JoinSet::new();
    let start = Instant::now();
    for i in 0..n {
        tokio::time::sleep_until(due(start, i).into()).await;
        let permit = window.clone().acquire_owned().await?;
        let publishers = publishers.with(PublishOptions {
            message_id: Some(i.to_string()),
            ..PublishOptions::default()
        });
        let payload = payload.clone();
        clock.sent(i);
        tasks.spawn(async move {
            let result = publishers.publish_order(&payload).await;
            drop(permit);
            result
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    tokio::time::timeout(Duration::from_secs(60), clock.done.notified())
        .await
        .map_err(|_| "not every message reached the handler within a minute")?;
    stop.shutdown();
    running.await??;
    Ok(clock.percentiles())
}

/// `warren-bench latency [messages]`: p50, p99 and max of each side, median of the rounds.
pub async fn bench(
    connection: &Connection,
    plain: &lapin::Connection,
    topology: &Topology,
    n: usize,
) -> Result<()> {
    println!(
        "\nlatency, handed to the publisher to handler start, at a steady {RATE} msg/s ({n} messages, median of {ROUNDS} rounds):"
    );
    let queue = topology.qualified("bench");
    let (mut lapin, mut warren) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        lapin.push(lapin_side(plain, &queue, n).await?);
        crate::purge(connection, topology).await?;
        warren.push(warren_side(connection, topology, n).await?);
        crate::purge(connection, topology).await?;
    }
    let median = |rounds: &mut Vec<[Duration; 3]>, which: usize| {
        let mut values: Vec<Duration> = rounds.iter().map(|r| r[which]).collect();
        values.sort();
        values[values.len() / 2]
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let base = [0, 1, 2].map(|w| median(&mut lapin, w));
    for (name, rounds) in [
        ("lapin, hand-written", &mut lapin),
        ("warren publisher + worker", &mut warren),
    ] {
        let [p50, p99, max] = [0, 1, 2].map(|w| median(rounds, w));
        println!(
            "  {name:<46} p50 {:>7.2} ms {:>5.2}x   p99 {:>7.2} ms {:>5.2}x   max {:>8.2} ms",
            ms(p50),
            ms(p50) / ms(base[0]),
            ms(p99),
            ms(p99) / ms(base[1]),
            ms(max),
        );
    }
    Ok(())
}
