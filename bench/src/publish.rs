//! The publish scenario: the hand-written lapin publisher searched over its window of
//! outstanding confirms, and the generated `Publishers` used as a user would, with as many
//! publishes in flight: from one task (a bounded `FuturesUnordered` of publish futures, no
//! spawning) and from a task per publish (`windowed`). Every ratio is against the best lapin
//! window of the same run; every case runs in each of the interleaved rounds.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use warren_runtime::{Connection, Topology};

use crate::{ROUNDS, Result, Round, Row, order, publishers, purge, types, windowed_by};

/// The lapin publisher's windows searched.
const LAPIN_WINDOWS: [usize; 6] = [100, 250, 500, 1000, 2000, 5000];
/// Warren's windows, each from one task and from many: fewer than lapin's, to keep the
/// scenario within a few minutes at 100,000 messages (the search is lapin's; these place
/// warren at a small, the usual and a large window).
const WARREN_WINDOWS: [usize; 3] = [250, 1000, 5000];

/// Who publishes, and how many publishes may wait for their confirm at once.
#[derive(Clone, Copy)]
enum Case {
    Lapin(usize),
    OneTask(usize),
    Tasks(usize),
}

impl Case {
    /// Its row's name; leaked, as a row's name is static and the scenario has a dozen.
    fn name(self) -> &'static str {
        let name = match self {
            Self::Lapin(window) => format!("lapin, window of {window} confirms"),
            Self::OneTask(window) => format!("warren Publishers, one task, {window} in flight"),
            Self::Tasks(window) => format!("warren Publishers, task each, {window} in flight"),
        };
        name.leak()
    }

    /// One round: `n` publishes to the benchmark queue, timed from the first to the last
    /// confirm.
    async fn run(
        self,
        connection: &Connection,
        plain: &lapin::Connection,
        topology: &Topology,
        n: usize,
    ) -> Result<Duration> {
        match self {
            Self::Lapin(window) => {
                crate::lapin_publish_window(plain, &topology.qualified("bench"), n, window).await
            }
            Self::OneTask(window) => one_task(connection, topology, n, window).await,
            Self::Tasks(window) => tasks(connection, topology, n, window).await,
        }
    }
}

/// The generated publisher from one task: up to `window` publish futures polled together,
/// a new one pushed as each completes.
async fn one_task(
    connection: &Connection,
    topology: &Topology,
    n: usize,
    window: usize,
) -> Result<Duration> {
    let publishers = publishers(connection, topology).await?;
    let orders: Vec<types::BenchOrder> = (0..n).map(order).collect();
    let started = Instant::now();
    let mut in_flight = FuturesUnordered::new();
    for order in &orders {
        if in_flight.len() == window
            && let Some(done) = in_flight.next().await
        {
            done?;
        }
        in_flight.push(publishers.publish_order(order));
    }
    while let Some(done) = in_flight.next().await {
        done?;
    }
    Ok(started.elapsed())
}

/// The generated publisher from a task per publish, up to `window` at once.
async fn tasks(
    connection: &Connection,
    topology: &Topology,
    n: usize,
    window: usize,
) -> Result<Duration> {
    let publishers = publishers(connection, topology).await?;
    let orders: Vec<types::BenchOrder> = (0..n).map(order).collect();
    let started = Instant::now();
    windowed_by(
        window,
        orders.into_iter().map(|order| {
            let publishers = publishers.clone();
            async move { publishers.publish_order(&order).await }
        }),
    )
    .await?;
    Ok(started.elapsed())
}

/// Runs the scenario and prints its table.
pub async fn bench(
    connection: &Connection,
    plain: &lapin::Connection,
    topology: &Topology,
    n: usize,
) -> Result<()> {
    println!(
        "publish (median of {ROUNDS} rounds; ratios against the best lapin window of this run):"
    );
    let cases: Vec<Case> = LAPIN_WINDOWS
        .map(Case::Lapin)
        .into_iter()
        .chain(
            WARREN_WINDOWS
                .iter()
                .flat_map(|&window| [Case::OneTask(window), Case::Tasks(window)]),
        )
        .collect();
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); cases.len()];
    for _ in 0..ROUNDS {
        for (case, measured) in cases.iter().zip(&mut rounds) {
            measured.push(Round::measure(case.run(connection, plain, topology, n)).await?);
            purge(connection, topology).await?;
        }
    }
    let rows: Vec<Row> = cases
        .iter()
        .zip(rounds)
        .map(|(case, measured)| Row::measured(case.name(), measured, n))
        .collect();
    let best = rows[..LAPIN_WINDOWS.len()]
        .iter()
        .max_by(|a, b| a.rate().total_cmp(&b.rate()))
        .map_or("", |row| row.name);
    crate::print(&rows, best);
    println!("  best lapin: {best}");
    Ok(())
}
