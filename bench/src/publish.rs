//! The publish scenario, in two parts of interleaved rounds:
//!
//! 1. the hand-written lapin publisher searched over its window of outstanding confirms
//!    (100 to 5,000), with a quarter of the messages;
//! 2. at the best window found, and at 1,000 (the other scenarios' window), lapin against the
//!    generated `Publishers` used as a user would, with as many publishes in flight: from one
//!    task (a bounded `FuturesUnordered` of publish futures, no spawning) and from a task per
//!    publish (`windowed`), with all the messages. Ratios against lapin at the best window.
//!
//! Warren is measured at two windows only, to keep the scenario within a few minutes at
//! 100,000 messages. Then, with a twentieth of the messages, `publish_all` against the same
//! publishes each awaited before the next.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use warren_runtime::{Connection, Topology};

use crate::{ROUNDS, Result, Round, Row, order, publishers, purge, types, windowed_by};

/// The lapin publisher's windows searched.
const LAPIN_WINDOWS: [usize; 6] = [100, 250, 500, 1000, 2000, 5000];
/// The window of the other scenarios' publishers, always compared besides the best.
const USUAL_WINDOW: usize = 1000;

/// Who publishes, and how many publishes may wait for their confirm at once.
#[derive(Clone, Copy)]
enum Case {
    Lapin(usize),
    OneTask(usize),
    Tasks(usize),
    /// Each publish awaited before the next is sent.
    OneByOne,
    /// `warren_runtime::publish_all`, this many in flight.
    All(usize),
}

impl Case {
    /// Its row's name; leaked, as a row's name is static and the scenario has a dozen.
    fn name(self) -> &'static str {
        let name = match self {
            Self::Lapin(window) => format!("lapin, window of {window} confirms"),
            Self::OneTask(window) => format!("warren Publishers, one task, {window} in flight"),
            Self::Tasks(window) => format!("warren Publishers, task each, {window} in flight"),
            Self::OneByOne => "warren Publishers, one by one (each awaited)".to_owned(),
            Self::All(window) => format!("warren publish_all, {window} in flight"),
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
            Self::OneByOne => one_by_one(connection, topology, n).await,
            Self::All(window) => all(connection, topology, n, window).await,
        }
    }
}

/// The generated publishers of `topology` and `n` orders to publish with them, made before a
/// round's clock starts.
async fn ready(
    connection: &Connection,
    topology: &Topology,
    n: usize,
) -> Result<(crate::Publishers, Vec<types::BenchOrder>)> {
    Ok((
        publishers(connection, topology).await?,
        (0..n).map(order).collect(),
    ))
}

/// The generated publisher from one task: up to `window` publish futures polled together,
/// a new one pushed as each completes.
async fn one_task(
    connection: &Connection,
    topology: &Topology,
    n: usize,
    window: usize,
) -> Result<Duration> {
    let (publishers, orders) = ready(connection, topology, n).await?;
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

/// The generated publisher, each publish awaited before the next: a round trip per message.
async fn one_by_one(connection: &Connection, topology: &Topology, n: usize) -> Result<Duration> {
    let (publishers, orders) = ready(connection, topology, n).await?;
    let started = Instant::now();
    for order in &orders {
        publishers.publish_order(order).await?;
    }
    Ok(started.elapsed())
}

/// The generated publisher through `publish_all`, up to `window` in flight, every result
/// checked.
async fn all(
    connection: &Connection,
    topology: &Topology,
    n: usize,
    window: usize,
) -> Result<Duration> {
    let (publishers, orders) = ready(connection, topology, n).await?;
    let started = Instant::now();
    let results =
        warren_runtime::publish_all(orders.iter().map(|o| publishers.publish_order(o)), window)
            .await;
    let elapsed = started.elapsed();
    results
        .into_iter()
        .collect::<std::result::Result<(), _>>()?;
    Ok(elapsed)
}

/// The generated publisher from a task per publish, up to `window` at once.
async fn tasks(
    connection: &Connection,
    topology: &Topology,
    n: usize,
    window: usize,
) -> Result<Duration> {
    let (publishers, orders) = ready(connection, topology, n).await?;
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

/// Runs `cases`, `n` messages each, in `ROUNDS` interleaved rounds, into rows.
async fn rounds(
    connection: &Connection,
    plain: &lapin::Connection,
    topology: &Topology,
    cases: &[Case],
    n: usize,
) -> Result<Vec<Row>> {
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); cases.len()];
    for _ in 0..ROUNDS {
        for (case, measured) in cases.iter().zip(&mut rounds) {
            measured.push(Round::measure(case.run(connection, plain, topology, n)).await?);
            purge(connection, topology).await?;
        }
    }
    Ok(cases
        .iter()
        .zip(rounds)
        .map(|(case, measured)| Row::measured(case.name(), measured, n))
        .collect())
}

/// The fastest of `rows`.
fn fastest(rows: &[Row]) -> Option<&Row> {
    rows.iter().max_by(|a, b| a.rate().total_cmp(&b.rate()))
}

/// Runs the scenario and prints its tables.
pub async fn bench(
    connection: &Connection,
    plain: &lapin::Connection,
    topology: &Topology,
    n: usize,
) -> Result<()> {
    let search_n = (n / 4).max(1);
    println!(
        "publish, lapin's window searched ({search_n} messages, median of {ROUNDS} rounds; \
         ratios against the best):"
    );
    let search = rounds(
        connection,
        plain,
        topology,
        &LAPIN_WINDOWS.map(Case::Lapin),
        search_n,
    )
    .await?;
    let best_window = LAPIN_WINDOWS
        .iter()
        .zip(&search)
        .max_by(|a, b| a.1.rate().total_cmp(&b.1.rate()))
        .map_or(USUAL_WINDOW, |(&window, _)| window);
    crate::print(&search, fastest(&search).map_or("", |row| row.name));

    let mut windows = vec![best_window];
    if best_window != USUAL_WINDOW {
        windows.push(USUAL_WINDOW);
    }
    let cases: Vec<Case> = windows
        .iter()
        .flat_map(|&window| {
            [
                Case::Lapin(window),
                Case::OneTask(window),
                Case::Tasks(window),
            ]
        })
        .collect();
    let at = if best_window == USUAL_WINDOW {
        format!("lapin's best window, {best_window}, the usual one too")
    } else {
        format!("lapin's best window, {best_window}, and at {USUAL_WINDOW}")
    };
    println!(
        "\npublish at {at} ({n} messages, median of {ROUNDS} rounds; ratios against lapin at \
         {best_window}):"
    );
    let rows = rounds(connection, plain, topology, &cases, n).await?;
    crate::print(&rows, Case::Lapin(best_window).name());

    // One by one waits a round trip per message: a twentieth of the messages.
    let batch_n = (n / 20).max(1);
    println!(
        "\nbatch publish ({batch_n} messages, median of {ROUNDS} rounds; ratios against \
         publishing one by one):"
    );
    let cases = [Case::OneByOne, Case::All(USUAL_WINDOW)];
    let rows = rounds(connection, plain, topology, &cases, batch_n).await?;
    crate::print(&rows, Case::OneByOne.name());
    Ok(())
}
