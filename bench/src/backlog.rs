//! The backlog scenario: a queue filled with `n` messages first (100,000 by default), then
//! consumed with a prefetch of 1,000 by the warren worker (`consume_backlog`, no-op handler)
//! and by the hand-tuned lapin consumer with the same prefetch, in interleaved rounds.
//!
//! Besides the rate and the CPU per message, each side's peak resident memory while it
//! consumes: the high-water mark is reset just before (`/proc/self/clear_refs`, Linux) and
//! read after (`VmHWM`). The figure is the whole process's: memory the allocator kept from
//! earlier work counts as resident from the start, so the growth over the RSS before is shown
//! beside it.

use std::time::{Duration, Instant};

use lapin::types::ShortString;
use warren_runtime::{Connection, Delivery, HandlerError, Topology, Worker};

use crate::{Count, ROUNDS, Result, Round, Row, consumers, lapin_consume_with, types};

/// The consumers' prefetch, the contract's for `consume_backlog`.
const PREFETCH: u16 = 1000;
/// The queue is filled this many messages at a time: the publisher serializes its bodies
/// ahead, and a whole backlog's worth would sit in this process's memory.
const FILL_CHUNK: usize = 10_000;

impl consumers::ConsumeBacklog for Count {
    async fn handle(
        &self,
        delivery: Delivery<types::BenchOrder>,
    ) -> std::result::Result<(), HandlerError> {
        consumers::ConsumeOrder::handle(self, delivery).await
    }
}

/// Resident memory of this process, in KiB: now (`VmRSS`) or at its peak (`VmHWM`).
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.get(field.len()..)?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Resets the peak resident memory to the current (writing 5 to `clear_refs`).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// One side's memory in one round, in KiB.
#[derive(Clone, Copy, Default)]
struct Memory {
    before: u64,
    peak: u64,
}

/// Runs `consume` (one round of one side), measuring its time, CPU and peak memory.
async fn measure(consume: impl Future<Output = Result<Duration>>) -> Result<(Round, Memory)> {
    let before = status_kib("VmRSS:").unwrap_or_default();
    let reset = reset_peak();
    let round = Round::measure(consume).await?;
    let peak = if reset {
        status_kib("VmHWM:").unwrap_or_default()
    } else {
        0
    };
    Ok((round, Memory { before, peak }))
}

/// The warren worker with only `consume_backlog` registered, until it has handled `n`.
async fn warren(connection: &Connection, topology: &Topology, n: usize) -> Result<Duration> {
    let count = Count::new(n);
    let mut worker = Worker::new(connection.clone(), topology.clone());
    consumers::register::consume_backlog(&mut worker, count.clone());
    let stop = worker.shutdown_handle();
    let started = Instant::now();
    let running = tokio::spawn(worker.run());
    count.all_seen().await;
    let elapsed = started.elapsed();
    stop.shutdown();
    running.await??;
    Ok(elapsed)
}

/// Fills `queue` with `n` messages, a chunk at a time.
pub async fn fill(plain: &lapin::Connection, queue: &str, n: usize) -> Result<()> {
    let mut left = n;
    while left > 0 {
        let chunk = left.min(FILL_CHUNK);
        crate::lapin_publish(plain, queue, chunk).await?;
        left -= chunk;
    }
    Ok(())
}

/// Empties `queue` (its full name) after a round: a round that stopped at its count may
/// leave a message or two behind, which the next round would count.
pub async fn purge(connection: &Connection, queue: &str) -> Result<()> {
    let channel = connection.create_channel().await?;
    channel
        .queue_purge(
            ShortString::from(queue),
            lapin::options::QueuePurgeOptions::default(),
        )
        .await?;
    channel.close(200, ShortString::from("purged")).await?;
    Ok(())
}

/// Runs the scenario and prints its table.
pub async fn bench(
    connection: &Connection,
    plain: &lapin::Connection,
    topology: &Topology,
    n: usize,
) -> Result<()> {
    println!(
        "\nbacklog ({n} messages queued first, then consumed with prefetch {PREFETCH}; median of \
         {ROUNDS} rounds; peak RSS of this process while consuming, the highest round's):"
    );
    if !reset_peak() {
        println!("  (no /proc/self/clear_refs here: peak memory not measured)");
    }
    let queue = topology.qualified("backlog");
    let sides = [
        "lapin, hand-tuned, prefetch 1000",
        "warren worker, validation, prefetch 1000",
    ];
    let mut rounds: [Vec<(Round, Memory)>; 2] = Default::default();
    for _ in 0..ROUNDS {
        for (side, measured) in rounds.iter_mut().enumerate() {
            fill(plain, &queue, n).await?;
            measured.push(if side == 0 {
                measure(lapin_consume_with(plain, &queue, n, 50, PREFETCH, false)).await?
            } else {
                measure(warren(connection, topology, n)).await?
            });
            purge(connection, &queue).await?;
        }
    }
    let rows: Vec<Row> = sides
        .iter()
        .zip(&rounds)
        .map(|(name, measured)| Row::measured(name, measured.iter().map(|m| m.0).collect(), n))
        .collect();
    crate::print(&rows, sides[0]);
    for (name, measured) in sides.iter().zip(&rounds) {
        let highest = measured
            .iter()
            .map(|m| m.1)
            .max_by_key(|memory| memory.peak)
            .unwrap_or_default();
        println!(
            "  {name:<46} peak RSS {:>6.1} MiB (RSS before {:>6.1} MiB, +{:.1} MiB)",
            mib(highest.peak),
            mib(highest.before),
            mib(highest.peak.saturating_sub(highest.before)),
        );
    }
    Ok(())
}

/// KiB in MiB.
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
