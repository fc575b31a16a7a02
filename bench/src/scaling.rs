//! The cpu scenario: a handler that burns a fixed amount of CPU on each message (about 100 µs
//! of arithmetic, no sleep, no I/O), consumed with `concurrency` 1, 2 and 4 on the
//! multi-thread runtime, by the warren worker (`burn_1`, `burn_2`, `burn_4`, each on its own
//! queue) and by a hand-written lapin consumer that decodes each message and runs its handler
//! in a tokio task of its own, as many at once as the concurrency.
//!
//! What it shows is whether `concurrency` spreads CPU-bound handlers over the runtime's
//! threads: the speedup over concurrency 1. This machine has 2 cores, shared with the broker,
//! so about 1.5-2x is the most to expect.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use lapin::options::BasicAckOptions;
use lapin::types::ShortString;
use tokio::sync::{Notify, Semaphore};
use warren_runtime::{Connection, Delivery, HandlerError, Topology, Worker};

use crate::{ROUNDS, Result, Round, Row, consumers, types};

/// The CPU each message costs its handler.
const BURN: Duration = Duration::from_micros(100);
/// The concurrencies compared, each a consumer of the contract on a queue of its own.
const CONCURRENCY: [usize; 3] = [1, 2, 4];
/// The lapin consumer's prefetch, the contract's for the `burn_*` consumers.
const PREFETCH: u16 = 100;

/// Burns CPU: `iterations` rounds of multiply and rotate that the optimizer cannot skip.
fn burn(iterations: u64, seed: u64) -> u64 {
    let mut x = black_box(seed);
    for i in 0..black_box(iterations) {
        x = (x ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
    black_box(x)
}

/// How many iterations of [`burn`] take [`BURN`] on this machine: the fastest of a few timed
/// runs, the one least disturbed by the other work of the machine.
fn calibrate() -> u64 {
    const TRIAL: u64 = 1_000_000;
    let fastest = (0..5)
        .map(|_| {
            let started = Instant::now();
            burn(TRIAL, 1);
            started.elapsed()
        })
        .min()
        .unwrap_or(BURN);
    let per_iteration = fastest.as_secs_f64() / TRIAL as f64;
    ((BURN.as_secs_f64() / per_iteration.max(1e-12)) as u64).max(1)
}

/// The handler under test: burns, then counts.
#[derive(Clone)]
struct Burner(Arc<State>);

/// What a [`Burner`] shares between its deliveries.
struct State {
    iterations: u64,
    seen: AtomicUsize,
    n: usize,
    done: Notify,
}

impl Burner {
    fn new(iterations: u64, n: usize) -> Self {
        Self(Arc::new(State {
            iterations,
            seen: AtomicUsize::new(0),
            n,
            done: Notify::new(),
        }))
    }

    /// Burns the CPU of one message, then counts it.
    fn handle(&self, order: &types::BenchOrder) {
        let state = &self.0;
        burn(state.iterations, order.order_id.len() as u64);
        if state.seen.fetch_add(1, Ordering::Relaxed) + 1 == state.n {
            state.done.notify_one();
        }
    }
}

macro_rules! burning_consumer {
    ($($consumer:ident),*) => {
        $(
            impl consumers::$consumer for Burner {
                async fn handle(
                    &self,
                    delivery: Delivery<types::BenchOrder>,
                ) -> std::result::Result<(), HandlerError> {
                    Burner::handle(self, delivery.payload());
                    Ok(())
                }
            }
        )*
    };
}

burning_consumer!(Burn1, Burn2, Burn4);

/// Counting, as in the scenarios where nothing is sent to these consumers.
macro_rules! idle_consumer {
    ($($consumer:ident),*) => {
        $(
            impl consumers::$consumer for crate::Count {
                async fn handle(
                    &self,
                    delivery: Delivery<types::BenchOrder>,
                ) -> std::result::Result<(), HandlerError> {
                    consumers::ConsumeOrder::handle(self, delivery).await
                }
            }
        )*
    };
}

idle_consumer!(Burn1, Burn2, Burn4);

/// The warren worker with the one consumer of `concurrency`, until it has handled `n`.
async fn warren(
    connection: &Connection,
    topology: &Topology,
    concurrency: usize,
    iterations: u64,
    n: usize,
) -> Result<Duration> {
    let burner = Burner::new(iterations, n);
    let mut worker = Worker::new(connection.clone(), topology.clone());
    match concurrency {
        1 => consumers::register::burn_1(&mut worker, burner.clone()),
        2 => consumers::register::burn_2(&mut worker, burner.clone()),
        _ => consumers::register::burn_4(&mut worker, burner.clone()),
    }
    let stop = worker.shutdown_handle();
    let started = Instant::now();
    let running = tokio::spawn(worker.run());
    burner.0.done.notified().await;
    let elapsed = started.elapsed();
    stop.shutdown();
    running.await??;
    Ok(elapsed)
}

/// Hand-written lapin: each delivery decoded and handled in a task of its own, up to
/// `concurrency` at once, and acked by its task.
async fn lapin_side(
    plain: &lapin::Connection,
    queue: &str,
    concurrency: usize,
    iterations: u64,
    n: usize,
) -> Result<Duration> {
    let (channel, mut consumer) = crate::lapin_consumer(plain, queue, PREFETCH, "cpu").await?;
    let burner = Burner::new(iterations, n);
    let permits = Arc::new(Semaphore::new(concurrency));
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for _ in 0..n {
        let Some(delivery) = consumer.next().await else {
            break;
        };
        let delivery = delivery?;
        let permit = permits.clone().acquire_owned().await?;
        let burner = burner.clone();
        tasks.spawn(async move {
            let order: types::BenchOrder = serde_json::from_slice(&delivery.data)?;
            burner.handle(&order);
            delivery.ack(BasicAckOptions::default()).await?;
            drop(permit);
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        });
        // Finished tasks are collected as they go, so the set does not grow with `n`.
        while let Some(finished) = tasks.try_join_next() {
            finished?.map_err(|e| e.to_string())?;
        }
    }
    while let Some(finished) = tasks.join_next().await {
        finished?.map_err(|e| e.to_string())?;
    }
    let elapsed = started.elapsed();
    channel.close(200, ShortString::from("done")).await?;
    Ok(elapsed)
}

/// Runs the scenario (`n` messages per case and round) and prints its tables.
pub async fn bench(
    connection: &Connection,
    plain: &lapin::Connection,
    topology: &Topology,
    n: usize,
) -> Result<()> {
    let iterations = calibrate();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "\ncpu-bound handler ({n} messages per case and round, ~{} µs of CPU each; median of \
         {ROUNDS} rounds; multi-thread runtime on {threads} cores shared with the broker: \
         expect 1.5-2x at best):",
        BURN.as_micros()
    );
    let cases: Vec<(bool, usize)> = [false, true]
        .iter()
        .flat_map(|&warren| CONCURRENCY.map(|c| (warren, c)))
        .collect();
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); cases.len()];
    for _ in 0..ROUNDS {
        for (&(is_warren, concurrency), measured) in cases.iter().zip(&mut rounds) {
            let queue = topology.qualified(&format!("cpu-{concurrency}"));
            crate::backlog::fill(plain, &queue, n).await?;
            measured.push(
                Round::measure(async {
                    if is_warren {
                        warren(connection, topology, concurrency, iterations, n).await
                    } else {
                        lapin_side(plain, &queue, concurrency, iterations, n).await
                    }
                })
                .await?,
            );
            crate::backlog::purge(connection, &queue).await?;
        }
    }
    let names = [
        "lapin, task per message, concurrency 1",
        "lapin, task per message, concurrency 2",
        "lapin, task per message, concurrency 4",
        "warren worker, concurrency 1",
        "warren worker, concurrency 2",
        "warren worker, concurrency 4",
    ];
    let rows: Vec<Row> = names
        .iter()
        .zip(rounds)
        .map(|(name, measured)| Row::measured(name, measured, n))
        .collect();
    let (lapin, warren) = rows.split_at(CONCURRENCY.len());
    println!("  speedup over concurrency 1, each side:");
    crate::print(lapin, names[0]);
    crate::print(warren, names[CONCURRENCY.len()]);
    println!("  warren against lapin at each concurrency:");
    for (l, w) in lapin.iter().zip(warren) {
        println!("  {:<46} {:>6.2}x", w.name, w.rate() / l.rate());
    }
    Ok(())
}
