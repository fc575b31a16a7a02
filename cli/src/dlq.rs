//! `warren dlq`: count, peek at, redrive and purge the dead-letter queues of a contract, on a
//! live broker. The work is `warren_runtime::dead_letters`; this is its command line.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use warren_codegen::diagnostics::escape;
use warren_runtime::dead_letters::{
    self, Counts, DeadLetterQueue, FailureGroup, Filter, Peeked, RedriveOptions, RedriveSummary,
};
use warren_runtime::model::{DURATION_UNITS, FailureReason};
use warren_runtime::{Connection, FailureContext, Topology};

use crate::{Failure, ProjectRoot, RenderStyle, checked, shown};

/// The `warren dlq` subcommands.
#[derive(Debug, Args)]
pub(crate) struct Dlq {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// Count dead letters, by reason, consumer, failed queue and error, or by failure group
    ///
    /// Reads the messages (unacknowledged, then returned: none is lost; they come back
    /// marked `redelivered`, and a classic queue's order may change).
    #[command(after_help = "\
Examples:
  warren dlq count warren.yaml                          every dead-letter queue of the contract
  warren dlq count --groups warren.yaml                 by failure: reason, consumer, error
  warren dlq count --queue orders.dead-letters --format json warren.yaml")]
    Count {
        #[command(flatten)]
        target: Target,
        /// Group by failure instead: reason, consumer, and the error with its ids and
        /// numbers replaced; each group has an id for `warren dlq redrive --group`.
        #[arg(long)]
        groups: bool,
        /// `table` for people, `json` for tools.
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
        /// Read at most this many messages per queue to group them (the total is always
        /// exact).
        #[arg(long, default_value_t = 10_000, value_name = "N")]
        scan: u32,
    },
    /// Show the first dead letters: headers, failure context and body (cut to 4 KiB)
    ///
    /// Nothing is removed: the messages are read unacknowledged and returned, marked
    /// `redelivered` (a classic queue's order may change).
    #[command(after_help = "\
Examples:
  warren dlq peek -n 5 --queue orders.dead-letters warren.yaml
  warren dlq peek --format json warren.yaml | jq '.[].failure.last_error'")]
    Peek {
        #[command(flatten)]
        target: Target,
        /// How many (at most 100).
        #[arg(short = 'n', long = "count", default_value_t = 10)]
        count: usize,
        /// `table` for people, `json` for tools.
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
    /// Send dead letters back to the queue each failed in
    ///
    /// Each copy is published with confirms and the dead letter acked only after: a redrive
    /// killed at any point loses nothing (a message killed between its confirm and its ack is
    /// in both queues: a duplicate). The retry history is reset, `x-redrive-count` raised; a
    /// message redriven `--max-redrives` times already stays. Messages that stay are returned
    /// untouched (past 1000 of them, moved to the back of the queue).
    #[command(after_help = "\
Examples:
  warren dlq redrive --dry-run warren.yaml             what would move, moving nothing
  warren dlq redrive --reason exhausted --older-than 10m --rate 50/s warren.yaml
  warren dlq redrive --queue orders.dead-letters --consumer charge --error timeout --limit 100 warren.yaml

Exit status: 0 when the pass ended (messages left are counted in the summary), 2 when it
failed (the broker, a copy not confirmed).")]
    Redrive {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        selection: Selection,
        /// Move at most this many (per queue).
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// At most this many per second, evenly spaced (`50/s`).
        #[arg(long, value_parser = rate, value_name = "N/s")]
        rate: Option<f64>,
        /// Leave a message redriven this many times already in the dead-letter queue.
        #[arg(long, default_value_t = 3, value_name = "N")]
        max_redrives: u32,
        /// Print what would move, and move nothing (reads at most 1000 per queue).
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete every message of a dead-letter queue
    ///
    /// Asks for the queue's name on a terminal; elsewhere needs `--yes`.
    #[command(after_help = "\
Examples:
  warren dlq purge --queue orders.dead-letters warren.yaml
  warren dlq purge --queue orders.dead-letters --yes warren.yaml")]
    Purge {
        #[command(flatten)]
        target: Target,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
}

/// Which dead letters a redrive moves: those that match every option given.
#[derive(Debug, Args)]
struct Selection {
    /// Only those dead-lettered for this reason (`exhausted`, `non-retryable`,
    /// `validation`, `rejected`, `delivery-limit`…).
    #[arg(long, value_parser = reason)]
    reason: Option<FailureReason>,
    /// Only those the consumer of this name failed on.
    #[arg(long)]
    consumer: Option<String>,
    /// Only those whose last error contains this text.
    #[arg(long, value_name = "TEXT")]
    error: Option<String>,
    /// Only those of this failure group (its id, as `warren dlq count --groups` lists it).
    #[arg(long, value_name = "ID")]
    group: Option<String>,
    /// Only those that last failed longer ago than this (`90s`, `10m`, `48h`).
    #[arg(long, value_parser = duration, value_name = "AGE")]
    older_than: Option<Duration>,
    /// Only those that last failed more recently than this.
    #[arg(long, value_parser = duration, value_name = "AGE")]
    newer_than: Option<Duration>,
}

impl Selection {
    fn filter(self) -> Filter {
        let mut filter = Filter::default();
        if let Some(reason) = self.reason {
            filter = filter.reason(reason);
        }
        if let Some(consumer) = self.consumer {
            filter = filter.consumer(consumer);
        }
        if let Some(error) = self.error {
            filter = filter.error(error);
        }
        if let Some(group) = self.group {
            filter = filter.group(group);
        }
        if let Some(age) = self.older_than {
            filter = filter.older_than(age);
        }
        if let Some(age) = self.newer_than {
            filter = filter.newer_than(age);
        }
        filter
    }
}

/// The broker, the contract, and which of its dead-letter queues.
#[derive(Debug, Args)]
struct Target {
    /// The contract file, usually `warren.yaml`.
    contract: PathBuf,
    /// The broker; by default `AMQP_URL`, else amqp://guest:guest@127.0.0.1:5672/%2f.
    #[arg(long)]
    url: Option<String>,
    /// One queue of the contract, as the contract names it; by default every dead-letter
    /// queue (those a queue's dead-lettering reaches).
    #[arg(long)]
    queue: Option<String>,
    /// The prefix the deployment's names carry (`Topology::namespaced`).
    #[arg(long, default_value = "")]
    namespace: String,
}

/// Runs one `warren dlq` command.
pub(crate) fn run(dlq: Dlq, project: &ProjectRoot, style: RenderStyle) -> Result<(), Failure> {
    let front = Front { project, style };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(format!("error: cannot start the runtime: {e}\n")))?;
    runtime.block_on(command(dlq.command, front))
}

async fn command(command: DlqCommand, front: Front<'_>) -> Result<(), Failure> {
    match command {
        DlqCommand::Count {
            target,
            groups,
            format,
            scan,
        } => {
            let all = each(&target, front, async |dlq| dlq.count(scan).await).await?;
            if format == "json" {
                print_json(&Value::Array(all.iter().map(counts_json).collect()))?;
            } else if groups {
                print!("{}", groups_table(&all));
            } else {
                print!("{}", counts_table(&all));
            }
            Ok(())
        }
        DlqCommand::Peek {
            target,
            count,
            format,
        } => {
            let all = each(&target, front, async |dlq| dlq.peek(count).await).await?;
            if format == "json" {
                let list = all
                    .iter()
                    .flat_map(|(queue, peeked)| peeked.iter().map(move |p| peeked_json(queue, p)));
                print_json(&Value::Array(list.collect()))?;
            } else {
                for (queue, peeked) in &all {
                    print!("{}", peek_table(queue, peeked));
                }
            }
            Ok(())
        }
        DlqCommand::Redrive {
            target,
            selection,
            limit,
            rate,
            max_redrives,
            dry_run,
        } => {
            let (connection, topology, queues) = open(&target, front, false).await?;
            let filter = selection.filter();
            let mut options = RedriveOptions::default()
                .max_redrives(max_redrives)
                .dry_run(dry_run)
                .targets(dead_letters::redrive_targets(&topology));
            if let Some(limit) = limit {
                options = options.limit(limit);
            }
            if let Some(rate) = rate {
                options = options.rate(rate);
            }
            for queue in &queues {
                let dlq = DeadLetterQueue::new(&connection, queue).judging_by(&topology);
                redrive(&dlq, &filter, &options).await?;
            }
            Ok(())
        }
        DlqCommand::Purge { target, yes } => {
            let (connection, _, queues) = open(&target, front, true).await?;
            for queue in &queues {
                let dlq = DeadLetterQueue::new(&connection, queue);
                if !yes {
                    confirm(queue, dlq.depth().await.map_err(broker)?)?;
                }
                let purged = dlq.purge().await.map_err(broker)?;
                println!("{}: purged {purged} messages", escape(queue));
            }
            Ok(())
        }
    }
}

/// `read` of each queue `target` picks, with the queue's name.
async fn each<T>(
    target: &Target,
    front: Front<'_>,
    read: impl AsyncFn(&DeadLetterQueue) -> Result<T, dead_letters::DeadLetterError>,
) -> Result<Vec<(String, T)>, Failure> {
    let (connection, topology, queues) = open(target, front, false).await?;
    let mut all = Vec::new();
    for queue in queues {
        let dlq = DeadLetterQueue::new(&connection, &queue).judging_by(&topology);
        let found = read(&dlq).await.map_err(broker)?;
        all.push((queue, found));
    }
    Ok(all)
}

/// Connects, and picks the queues: `--queue`, or every dead-letter queue of the contract
/// (for a purge, which takes one, the only one).
async fn open(
    target: &Target,
    front: Front<'_>,
    one: bool,
) -> Result<(Connection, Topology, Vec<String>), Failure> {
    let topology = contract_topology(&target.contract, front)?.namespaced(&target.namespace);
    let dead_letter_queues = dead_letters::dead_letter_queues(&topology);
    let queues = match &target.queue {
        Some(name) => {
            let qualified = topology.qualified(name);
            if topology.queue(&qualified).is_none() {
                return Err(Failure::usage(format!(
                    "error: `{}` has no queue `{}`\n",
                    shown(&target.contract),
                    escape(name)
                )));
            }
            // A work or wait queue's messages are live: a read holds them, each return
            // spends a delivery of a quorum queue's limit (six counts dead-lettered a queue
            // of `delivery_limit: 5`), a purge deletes retries in flight.
            if !dead_letter_queues.contains(&qualified) {
                return Err(Failure::usage(format!(
                    "error: `{}` is not a dead-letter queue of `{}` (no queue dead-letters into it): \
                     its messages are live, and reading them would hold them and spend their \
                     delivery attempts; the contract's dead-letter queues: {}\n",
                    escape(name),
                    shown(&target.contract),
                    escape(&dead_letter_queues.join(", "))
                )));
            }
            vec![qualified]
        }
        None => dead_letter_queues,
    };
    if queues.is_empty() {
        return Err(Failure::usage(format!(
            "error: `{}` has no dead-letter queue: name one with `--queue`\n",
            shown(&target.contract)
        )));
    }
    if one && queues.len() > 1 {
        return Err(Failure::usage(format!(
            "error: `{}` has several dead-letter queues ({}): name one with `--queue`\n",
            shown(&target.contract),
            escape(&queues.join(", "))
        )));
    }
    let url = crate::broker_url(target.url.as_deref());
    let connection = Connection::connect(&url, "warren dlq")
        .await
        .map_err(|e| Failure::usage(format!("error: cannot connect to the broker: {e}\n")))?;
    for queue in &queues {
        match DeadLetterQueue::new(&connection, queue).depth().await {
            Err(error) if error.is_missing_queue() => {
                return Err(missing_queue(queue, &target.namespace));
            }
            Err(error) => return Err(broker(error)),
            Ok(_) => {}
        }
    }
    Ok((connection, topology, queues))
}

/// The broker has no queue `queue` (the contract's name with `namespace` in front): the
/// namespace is the likely mistake, said with how it is applied.
fn missing_queue(queue: &str, namespace: &str) -> Failure {
    let applied = if namespace.is_empty() {
        "no `--namespace` was given, so the contract's names are looked up as they are; a \
         deployment under a namespace needs it"
            .to_owned()
    } else {
        format!(
            "`--namespace {}` is put in front of every contract name as it is, so `{}` is looked \
             up; a namespace usually ends with a dot (`demo.123.`)",
            escape(namespace),
            escape(queue)
        )
    };
    Failure::usage(format!(
        "error: the broker has no queue `{}`: {applied}. Is the contract declared on this broker?\n",
        escape(queue)
    ))
}

/// How a `dlq` command reads its contract: inside which project, its problems shown in which
/// style.
#[derive(Clone, Copy)]
struct Front<'a> {
    project: &'a ProjectRoot,
    style: RenderStyle,
}

fn contract_topology(contract: &Path, front: Front<'_>) -> Result<Topology, Failure> {
    let checked = checked(contract, front.project, front.style).map_err(|mut failure| {
        failure.status = 2;
        failure
    })?;
    Ok(checked.contract.topology.clone())
}

fn broker(error: dead_letters::DeadLetterError) -> Failure {
    Failure::usage(format!("error: {}\n", escape(&error.to_string())))
}

async fn redrive(
    dlq: &DeadLetterQueue,
    filter: &Filter,
    options: &RedriveOptions,
) -> Result<(), Failure> {
    let queue = dlq.name();
    let terminal = std::io::stderr().is_terminal();
    let mut shown_at = Instant::now();
    // What was done before a failure is still printed.
    let mut so_far = None;
    let progress = |summary: &RedriveSummary| {
        so_far = Some(summary.clone());
        if terminal && shown_at.elapsed() >= Duration::from_millis(100) {
            shown_at = Instant::now();
            eprint!("\r\x1b[K{}", progress_line(queue, summary));
        }
    };
    let summary = dlq.redrive(filter, options, progress).await;
    if terminal {
        eprint!("\r\x1b[K");
    }
    match summary {
        Ok(summary) => {
            print!("{}", summary_text(queue, &summary));
            Ok(())
        }
        Err(error) => {
            if let Some(so_far) = so_far {
                print!("{}", summary_text(queue, &so_far));
            }
            Err(broker(error))
        }
    }
}

/// `[#####.....] 50/100 read, 40 moved`
fn progress_line(queue: &str, summary: &RedriveSummary) -> String {
    const WIDTH: u32 = 30;
    let done = summary
        .scanned
        .saturating_mul(WIDTH)
        .checked_div(summary.to_scan)
        .unwrap_or(WIDTH)
        .min(WIDTH);
    format!(
        "{} [{}{}] {}/{} read, {} moved",
        escape(queue),
        "#".repeat(done as usize),
        ".".repeat((WIDTH - done) as usize),
        summary.scanned,
        summary.to_scan,
        summary.moved
    )
}

fn summary_text(queue: &str, s: &RedriveSummary) -> String {
    let mut text = format!(
        "{}{}: {} {}, skipped {} (filter), refused {} (redriven too often), left {} (no known queue); read {} of {}\n",
        escape(queue),
        if s.dry_run { " (dry run)" } else { "" },
        if s.dry_run { "would move" } else { "moved" },
        s.moved,
        s.skipped,
        s.refused,
        s.no_queue,
        s.scanned,
        s.depth,
    );
    if s.dry_run && s.scanned < s.depth {
        text.push_str("  a dry run reads at most 1000 messages: the rest were not looked at\n");
    }
    if s.duplicates_possible > 0 {
        text.push_str(&format!(
            "  duplicates possible: {} (earlier deliveries of the messages moved: by a peek, a \
             count or a killed redrive), plus at most one per redrive killed before this one \
             (the message it was moving, which its queue now has twice)\n",
            s.duplicates_possible
        ));
    }
    if s.cycled > 0 {
        text.push_str(&format!(
            "  {} left messages were moved to the back of the queue (over 1000 stayed)\n",
            s.cycled
        ));
    }
    text
}

/// On a terminal, asks for the queue's name; elsewhere refuses (`--yes` skips this).
fn confirm(queue: &str, depth: u32) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(Failure::usage(format!(
            "error: purging `{}` deletes its {depth} messages: pass `--yes` (not on a terminal, \
             nothing can be asked)\n",
            escape(queue)
        )));
    }
    eprint!(
        "Purging deletes all {depth} messages of `{}`. Type the queue's name to go on: ",
        escape(queue)
    );
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Failure::usage(format!("error: {e}\n")))?;
    if line.trim_end_matches(['\n', '\r']) != queue {
        return Err(Failure::usage("error: not purged\n".to_owned()));
    }
    Ok(())
}

fn print_json(value: &Value) -> Result<(), Failure> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| Failure::usage(format!("error: {e}\n")))?;
    println!("{text}");
    Ok(())
}

fn counts_json((queue, counts): &(String, Counts)) -> Value {
    let group = |group: &dead_letters::Group| {
        Value::Object(
            group
                .entries()
                .into_iter()
                .map(|(k, n)| (k.to_owned(), Value::from(n)))
                .collect(),
        )
    };
    json!({
        "queue": queue,
        "total": counts.total,
        "scanned": counts.scanned,
        "by_reason": group(&counts.by_reason),
        "by_consumer": group(&counts.by_consumer),
        "by_queue": group(&counts.by_queue),
        "by_error": group(&counts.by_error),
        "groups": counts.groups.entries().into_iter().map(failure_group_json).collect::<Vec<_>>(),
        "other_groups": counts.groups.other(),
    })
}

/// A failure group as `count --format json` and the console show it.
pub(crate) fn failure_group_json(group: &FailureGroup) -> Value {
    let fingerprint = &group.fingerprint;
    json!({
        "id": group.id,
        "count": group.count,
        "reason": fingerprint.reason.map(|r| r.as_str()),
        "consumer": fingerprint.consumer,
        "error": fingerprint.error,
        "first_seen_ms": millis(group.first_seen),
        "last_seen_ms": millis(group.last_seen),
        "examples": group.examples,
    })
}

/// Each queue's failure groups, largest first, with the command that redrives one.
fn groups_table(all: &[(String, Counts)]) -> String {
    let mut text = String::new();
    for (queue, counts) in all {
        let groups = counts.groups.entries();
        text.push_str(&format!(
            "{}: {} dead letters in {} groups",
            escape(queue),
            counts.total,
            groups.len()
        ));
        if counts.scanned < counts.total {
            text.push_str(&format!(" (grouped: the first {})", counts.scanned));
        }
        text.push('\n');
        if groups.is_empty() {
            continue;
        }
        text.push_str("  group            count  first     last      reason · consumer · error\n");
        for group in groups {
            let fingerprint = &group.fingerprint;
            let shown = |value: Option<&str>| escape(value.unwrap_or("-")).into_owned();
            text.push_str(&format!(
                "  {}  {:>8}  {:<8}  {:<8}  {} · {} · {}\n",
                group.id,
                group.count,
                ago(group.first_seen),
                ago(group.last_seen),
                shown(fingerprint.reason.map(|r| r.as_str())),
                shown(fingerprint.consumer.as_deref()),
                shown(fingerprint.error.as_deref()),
            ));
        }
        if counts.groups.other() > 0 {
            text.push_str(&format!(
                "  (other)       {:>8}  in groups past the first {}\n",
                counts.groups.other(),
                dead_letters::MAX_GROUPS
            ));
        }
    }
    text.push_str("redrive one group: warren dlq redrive --group ID …\n");
    text
}

fn counts_table(all: &[(String, Counts)]) -> String {
    let mut text = String::new();
    for (queue, counts) in all {
        text.push_str(&format!("{}: {} dead letters", escape(queue), counts.total));
        if counts.scanned < counts.total {
            text.push_str(&format!(" (grouped: the first {})", counts.scanned));
        }
        text.push('\n');
        for (title, group) in [
            ("reason", &counts.by_reason),
            ("consumer", &counts.by_consumer),
            ("failed queue", &counts.by_queue),
            ("error", &counts.by_error),
        ] {
            let entries = group.entries();
            if entries.is_empty() {
                continue;
            }
            text.push_str(&format!("  by {title}:\n"));
            for (value, n) in entries {
                text.push_str(&format!("    {n:>8}  {}\n", escape(value)));
            }
        }
    }
    text
}

fn millis(time: Option<SystemTime>) -> Value {
    time.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(Value::Null, |d| Value::from(d.as_millis() as u64))
}

fn failure_json(context: &FailureContext) -> Value {
    json!({
        "reason": context.reason.map(|r| r.as_str()),
        "last_error": context.last_error,
        "retry_count": context.retry_count,
        "redrive_count": context.redrive_count,
        "first_failure_ms": millis(context.first_failure),
        "last_failure_ms": millis(context.last_failure),
        "original_exchange": context.original_exchange,
        "original_routing_key": context.original_routing_key,
        "queue": context.queue,
        "consumer": context.consumer,
    })
}

/// A peeked dead letter as `peek --format json` and the console show it.
pub(crate) fn peeked_json(queue: &str, p: &Peeked) -> Value {
    json!({
        "queue": queue,
        "routing_key": p.routing_key,
        "exchange": p.exchange,
        "redelivered": p.redelivered,
        "message_id": p.message_id,
        "content_type": p.content_type,
        "headers": p.headers,
        "failure": p.failure.as_ref().map(failure_json),
        "body": String::from_utf8_lossy(&p.body),
        "body_bytes": p.body_bytes,
        "body_truncated": p.body.len() < p.body_bytes,
    })
}

/// `3m ago`, coarse.
fn ago(time: Option<SystemTime>) -> String {
    let Some(time) = time else {
        return "-".to_owned();
    };
    let seconds = SystemTime::now()
        .duration_since(time)
        .map_or(0, |d| d.as_secs());
    match seconds {
        0..60 => format!("{seconds}s ago"),
        60..3600 => format!("{}m ago", seconds / 60),
        3600..172_800 => format!("{}h ago", seconds / 3600),
        _ => format!("{}d ago", seconds / 86_400),
    }
}

fn peek_table(queue: &str, peeked: &[Peeked]) -> String {
    let mut text = format!(
        "{}: {} shown (returned to the queue, now marked redelivered)\n",
        escape(queue),
        peeked.len()
    );
    let opt = |value: &Option<String>| escape(value.as_deref().unwrap_or("-")).into_owned();
    for (i, p) in peeked.iter().enumerate() {
        text.push_str(&format!(
            "\n#{} routing key {}, message id {}{}\n",
            i + 1,
            escape(&p.routing_key),
            opt(&p.message_id),
            if p.redelivered { ", redelivered" } else { "" }
        ));
        if let Some(f) = &p.failure {
            text.push_str(&format!(
                "  reason {}, consumer {}, failed in {}, {} retries, {} redrives\n  first failed {}, last failed {}, first published to {} with {}\n  error: {}\n",
                f.reason.map_or("-", |r| r.as_str()),
                opt(&f.consumer),
                opt(&f.queue),
                f.retry_count,
                f.redrive_count,
                ago(f.first_failure),
                ago(f.last_failure),
                opt(&f.original_exchange),
                opt(&f.original_routing_key),
                opt(&f.last_error),
            ));
        }
        let headers = serde_json::to_string(&p.headers).unwrap_or_default();
        text.push_str(&format!("  headers: {}\n", escape(&headers)));
        text.push_str(&format!(
            "  body ({} bytes{}): {}\n",
            p.body_bytes,
            if p.body.len() < p.body_bytes {
                ", cut"
            } else {
                ""
            },
            escape(&String::from_utf8_lossy(&p.body))
        ));
    }
    text
}

fn reason(text: &str) -> Result<FailureReason, String> {
    text.parse()
        .map_err(|e: warren_runtime::model::UnknownName| e.to_string())
}

/// `90s`, `10m`, `48h`, `500ms`.
fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = DURATION_UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, scale)| *scale);
    match (number.parse::<u64>(), scale) {
        (Ok(n), Some(scale)) => Ok(Duration::from_millis(n.saturating_mul(scale))),
        _ => Err("expected a number and a unit (ms, s, m, h), such as `10m`".to_owned()),
    }
}

/// `50/s` or `50`.
fn rate(text: &str) -> Result<f64, String> {
    let number = text.strip_suffix("/s").unwrap_or(text);
    match number.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n),
        _ => Err("expected messages per second, such as `50/s`".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{duration, rate};

    #[test]
    fn arguments_parse() {
        assert_eq!(duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(duration("10").is_err());
        assert!(duration("m").is_err());
        assert_eq!(rate("50/s"), Ok(50.0));
        assert!(rate("0/s").is_err());
        assert!(rate("NaN").is_err());
    }
}
