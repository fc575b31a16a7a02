//! One worker process of many sharing a queue on a cluster, run as a child process by
//! `tests/cluster_workers.rs`: several of these, each connected to another node first,
//! consume one queue while the test kills some of them with `kill -9`.
//!
//! ```text
//! cluster_worker <consumer> <namespace> <name> <handle-ms> <url>...
//! ```
//!
//! - `consumer`: `run_cluster` (queue `cluster`) or `run_single` (queue `cluster-single`,
//!   single active consumer);
//! - `namespace`: the one the test deployed the contract under (`Deployed::namespace`); the
//!   worker never declares anything;
//! - `name`: how its lines name it;
//! - `handle-ms`: how long each job takes to handle, in milliseconds;
//! - `url`s: the nodes, in the order to try them (its own node first).
//!
//! It prints, one line each, flushed at once (the test reads them through a pipe, with the
//! wall-clock time in microseconds since the Unix epoch, the same clock on every process of
//! the machine):
//!
//! - `subscribed <micros> <node url>` each time its consumer becomes subscribed;
//! - `unsubscribed <micros> <why>` each time it loses its subscription;
//! - `began <micros> <job id>` each time a handler begins a job;
//! - `handled <micros> <job id> <name> <began micros> <connected> <redelivered>` each time a
//!   handler has finished a job (before its ack, which a `kill -9` may then lose): when it
//!   began, whether the connection was up then (a job begun on a lost connection cannot be
//!   acked, and is redelivered elsewhere), and whether the broker flagged it redelivered;
//! - `stopped <micros> <outcome>` if the worker ends (it should not: it runs until killed).
//!
//! It also exits when its stdin closes: the test holds the other end, so a test process that
//! dies without killing its children (a timeout's `kill -9`) leaves no worker behind.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use warren_broker_tests::{consumers, topology, types};
use warren_runtime::{Connection, Delivery, HandlerError, Worker};

/// How the command line is used.
const USAGE: &str =
    "usage: cluster_worker <run_cluster|run_single> <namespace> <name> <handle-ms> <url>...";

/// How often the health is looked at for a change of subscription.
const HEALTH_EVERY: Duration = Duration::from_millis(20);

/// Microseconds since the Unix epoch: comparable across the processes of one machine.
fn micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros())
}

/// Writes `line` to stdout and flushes it: the test must see it even if the process is
/// killed right after.
fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (the test is gone) leaves nothing to tell.
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// The handler of either consumer: takes its time, then says it handled the job.
#[derive(Clone)]
struct Printer {
    name: String,
    handle_for: Duration,
    /// The worker's connection, to say whether it was up when a job began.
    connection: Option<Connection>,
}

impl Printer {
    async fn handle(&self, delivery: &Delivery<types::Job, types::JobHeaders>) {
        let started = micros();
        let id = delivery.payload().id.as_str();
        say(&format!("began {started} {id}"));
        let connected = self
            .connection
            .as_ref()
            .is_some_and(Connection::is_connected);
        if !self.handle_for.is_zero() {
            tokio::time::sleep(self.handle_for).await;
        }
        say(&format!(
            "handled {} {id} {} {started} {connected} {}",
            micros(),
            self.name,
            delivery.redelivered()
        ));
    }
}

impl consumers::RunCluster for Printer {
    async fn handle(
        &self,
        delivery: Delivery<types::Job, types::JobHeaders>,
    ) -> Result<(), HandlerError> {
        Printer::handle(self, &delivery).await;
        Ok(())
    }
}

impl consumers::RunSingle for Printer {
    async fn handle(
        &self,
        delivery: Delivery<types::Job, types::JobHeaders>,
    ) -> Result<(), HandlerError> {
        Printer::handle(self, &delivery).await;
        Ok(())
    }
}

/// What the command line asks for.
struct Args {
    consumer: String,
    namespace: String,
    printer: Printer,
    urls: Vec<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut next = |what: &str| args.next().ok_or_else(|| format!("no {what}"));
    let consumer = next("consumer")?;
    if consumer != "run_cluster" && consumer != "run_single" {
        return Err(format!("unknown consumer {consumer:?}"));
    }
    let namespace = next("namespace")?;
    let name = next("name")?;
    let millis = next("handle-ms")?;
    let millis: u64 = millis
        .parse()
        .map_err(|e| format!("handle-ms {millis:?}: {e}"))?;
    let urls: Vec<String> = args.collect();
    if urls.is_empty() {
        return Err("no url".to_owned());
    }
    Ok(Args {
        consumer,
        namespace,
        printer: Printer {
            name,
            handle_for: Duration::from_millis(millis),
            connection: None,
        },
        urls,
    })
}

#[tokio::main]
async fn main() {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("cluster_worker: {error}\n{USAGE}");
            std::process::exit(2);
        }
    };
    // Its parent gone, nobody reads its lines: leave rather than consume forever.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let urls: Vec<&str> = args.urls.iter().map(String::as_str).collect();
    // The test kit's connection: tries the URLs in turn, and reconnects within a second of a
    // node answering again.
    let connection = match warren_testkit::test_connection(
        &format!("cluster-worker-{}", args.printer.name),
        &urls,
    )
    .await
    {
        Ok(connection) => connection,
        Err(error) => {
            eprintln!(
                "cluster_worker {}: no node answers: {error}",
                args.printer.name
            );
            std::process::exit(1);
        }
    };
    let printer = Printer {
        connection: Some(connection.clone()),
        ..args.printer
    };
    let mut worker = Worker::new(connection, topology().namespaced(&args.namespace));
    if args.consumer == "run_single" {
        consumers::register::run_single(&mut worker, printer);
    } else {
        consumers::register::run_cluster(&mut worker, printer);
    }
    let health = worker.health_handle();
    // Says each change of subscription, so the test knows when this process takes
    // deliveries (and, after a node fails, when it does again).
    tokio::spawn(async move {
        let mut subscribed = false;
        loop {
            let snapshot = health.snapshot();
            let now = snapshot.consumers.iter().all(|c| c.subscribed);
            if now != subscribed {
                subscribed = now;
                if now {
                    let url = snapshot.connection.url.unwrap_or_default();
                    say(&format!("subscribed {} {url}", micros()));
                } else {
                    let why = snapshot
                        .consumers
                        .iter()
                        .find_map(|c| c.last_error.as_ref().map(|e| e.message.clone()))
                        .unwrap_or_default();
                    say(&format!("unsubscribed {} {why}", micros()));
                }
            }
            tokio::time::sleep(HEALTH_EVERY).await;
        }
    });
    let outcome = worker.run().await;
    say(&format!("stopped {} {outcome:?}", micros()));
    if outcome.is_err() {
        std::process::exit(1);
    }
}
