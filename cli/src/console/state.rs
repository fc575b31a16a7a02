//! What the console shows, read from the broker: the queues of its contracts with their depth
//! and consumers (passive declares) and rates (the management API, when it answers), and the
//! dead letters of each dead-letter queue grouped by failure; and the one change it makes, a
//! redrive of a group.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Mutex;

use warren_runtime::dead_letters::{self, DeadLetterQueue, Filter, RedriveOptions, RedriveSummary};
use warren_runtime::lapin::options::QueueDeclareOptions;
use warren_runtime::lapin::types::{FieldTable, ShortString};
use warren_runtime::management::Management;
use warren_runtime::model::QueueRole;
use warren_runtime::{Connection, Topology};

/// Dead letters read per queue to group them.
const SCAN_LIMIT: u32 = 10_000;
/// How long grouped dead letters are reused: counting reads every message (returning each,
/// marked `redelivered`), so a page refreshing every few seconds must not read them each time.
const DEAD_LETTERS_FRESH: Duration = Duration::from_secs(10);
/// A redriven message's redrives past which it stays, as `warren dlq redrive` defaults.
const MAX_REDRIVES: u32 = 3;

/// The console's view of the broker.
pub(super) struct Console {
    connection: Connection,
    /// Where the rates come from.
    management: Management,
    topologies: Vec<Topology>,
    /// Workers' health endpoints, by name.
    health: Vec<(String, String)>,
    allow_changes: bool,
    /// The last grouping of the dead letters, and when it was made.
    dead_letters: Mutex<Option<(Instant, Value)>>,
    /// The redrives started from the page, each with its latest progress.
    redrives: std::sync::Mutex<Vec<Value>>,
}

/// Dead letters of a group the page shows at once.
const PEEK_COUNT: usize = 5;

/// A redrive (or a peek) the page asks for.
#[derive(Debug)]
pub(super) struct RedriveRequest {
    /// The dead-letter queue, as the broker names it.
    queue: String,
    /// The failure group's id.
    group: String,
    /// Report what would move, moving nothing.
    pub(super) dry_run: bool,
}

impl RedriveRequest {
    /// From a JSON body `{"queue": …, "group": …, "dry_run": …}`.
    pub(super) fn parse(body: &[u8]) -> Option<Self> {
        let value: Value = serde_json::from_slice(body).ok()?;
        Some(Self {
            queue: value["queue"].as_str()?.to_owned(),
            group: value["group"].as_str()?.to_owned(),
            dry_run: value["dry_run"].as_bool().unwrap_or(false),
        })
    }
}

impl Console {
    pub(super) fn new(
        connection: Connection,
        management: Management,
        topologies: Vec<Topology>,
        health: Vec<(String, String)>,
        allow_changes: bool,
    ) -> Self {
        Self {
            connection,
            management,
            topologies,
            health,
            allow_changes,
            dead_letters: Mutex::new(None),
            redrives: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(super) fn allows_changes(&self) -> bool {
        self.allow_changes
    }

    /// Every queue of the contracts with its ready messages and consumers (passive declares:
    /// exact, now), and its unacknowledged messages and rates when the management API answers
    /// (sampled every few seconds); or why they are unknown.
    pub(super) async fn queues(&self) -> Value {
        let live = self.management.queues().await;
        let (live, source) = match live {
            Ok(queues) => (
                queues.into_iter().map(|q| (q.name.clone(), q)).collect(),
                format!(
                    "ready and consumers: passive declares; unacknowledged and rates: the management API at {}",
                    self.management.endpoint()
                ),
            ),
            Err(error) => (
                std::collections::BTreeMap::new(),
                format!("ready and consumers: passive declares (no rates: {error})"),
            ),
        };
        let mut channel = None;
        let mut queues = Vec::new();
        for topology in &self.topologies {
            let dead = dead_letters::dead_letter_queues(topology);
            for queue in &topology.queues {
                let (role, waits_for) = match &queue.role {
                    QueueRole::Declared if dead.contains(&queue.name) => ("dead-letter", None),
                    QueueRole::Declared => ("queue", None),
                    QueueRole::Wait { queue, .. } => ("wait", Some(queue.as_str())),
                };
                let mut entry = json!({
                    "name": queue.name,
                    "role": role,
                    "waits_for": waits_for,
                    "retry": warren_runtime::metrics::retry_mode(&queue.retry),
                });
                match self.declared(&mut channel, &queue.name).await {
                    Ok((depth, consumers)) => {
                        entry["depth"] = json!(depth);
                        entry["consumers"] = json!(consumers);
                    }
                    Err(error) => entry["error"] = json!(error),
                }
                if let Some(sampled) = live.get(&queue.name) {
                    entry["unacknowledged"] = json!(sampled.unacknowledged);
                    entry["publish_rate"] = json!(sampled.publish_rate);
                    entry["deliver_rate"] = json!(sampled.deliver_rate);
                }
                queues.push(entry);
            }
        }
        json!({
            "source": source,
            "changes_allowed": self.allow_changes,
            "queues": queues,
        })
    }

    /// `queue`'s ready messages and consumers, by a passive declare on `channel` (opened
    /// again when a refusal closed it).
    async fn declared(
        &self,
        channel: &mut Option<warren_runtime::lapin::Channel>,
        queue: &str,
    ) -> Result<(u32, u32), String> {
        let open = match channel.take().filter(|c| c.status().connected()) {
            Some(open) => open,
            None => self
                .connection
                .create_channel()
                .await
                .map_err(|e| e.to_string())?,
        };
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = open
            .queue_declare(ShortString::from(queue), passive, FieldTable::default())
            .await;
        *channel = Some(open);
        let declared = declared.map_err(|e| {
            // Said plainly: the likely cause is a contract not deployed, or another namespace.
            if e.to_string().contains("NOT_FOUND") {
                "not declared on the broker".to_owned()
            } else {
                e.to_string()
            }
        })?;
        Ok((declared.message_count(), declared.consumer_count()))
    }

    /// Each worker's health, as its endpoint gives it (503 is an answer: not ready), or why it
    /// could not be read. Only what the page shows is passed on.
    pub(super) async fn workers(&self) -> Value {
        let mut workers = Vec::new();
        for (name, url) in &self.health {
            let mut entry = json!({ "name": name, "url": url });
            match super::http::get(url).await {
                Ok((200 | 503, body)) => match serde_json::from_slice::<Value>(&body) {
                    Ok(health) => {
                        for key in ["ready", "live", "phase", "last_error"] {
                            entry[key] = health[key].clone();
                        }
                        let consumers = health["consumers"].as_array().cloned().unwrap_or_default();
                        entry["consumers"] = consumers
                            .iter()
                            .map(|c| {
                                json!({
                                    "name": c["name"], "queue": c["queue"], "subscribed": c["subscribed"],
                                    "breaker": c["breaker"], "last_error": c["last_error"],
                                    "overdue_retries": c["overdue_retries"],
                                })
                            })
                            .collect();
                    }
                    Err(error) => entry["error"] = json!(format!("not a worker's health: {error}")),
                },
                Ok((status, _)) => entry["error"] = json!(format!("answered {status}")),
                Err(error) => entry["error"] = json!(error),
            }
            workers.push(entry);
        }
        json!({ "workers": workers })
    }

    /// The dead letters of every dead-letter queue, grouped by failure: reused for a few
    /// seconds.
    pub(super) async fn dead_letters(&self) -> Result<Value, String> {
        let mut cached = self.dead_letters.lock().await;
        if let Some((at, value)) = cached.as_ref()
            && at.elapsed() < DEAD_LETTERS_FRESH
        {
            return Ok(value.clone());
        }
        let mut all = Vec::new();
        for topology in &self.topologies {
            for queue in dead_letters::dead_letter_queues(topology) {
                let dlq = DeadLetterQueue::new(&self.connection, &queue).judging_by(topology);
                let counts = dlq.count(SCAN_LIMIT).await.map_err(|e| e.to_string())?;
                all.push(json!({
                    "queue": queue,
                    "total": counts.total,
                    "scanned": counts.scanned,
                    "groups": counts.groups.entries().into_iter().map(crate::dlq::failure_group_json).collect::<Vec<_>>(),
                    "other": counts.groups.other(),
                }));
            }
        }
        let value = json!({ "queues": all });
        *cached = Some((Instant::now(), value.clone()));
        Ok(value)
    }

    /// The dead-letter queue `queue` of the contracts, judged by its contract.
    fn dead_letter_queue(
        &self,
        queue: &str,
    ) -> Result<(DeadLetterQueue, &Topology), (u16, String)> {
        let topology = self
            .topologies
            .iter()
            .find(|t| {
                dead_letters::dead_letter_queues(t)
                    .iter()
                    .any(|q| q == queue)
            })
            .ok_or_else(|| {
                (
                    404,
                    "no dead-letter queue of the contracts has that name".to_owned(),
                )
            })?;
        let dlq = DeadLetterQueue::new(&self.connection, queue).judging_by(topology);
        Ok((dlq, topology))
    }

    /// The first few dead letters of one failure group: headers, failure context and body.
    pub(super) async fn peek(&self, asked: &RedriveRequest) -> Result<Value, (u16, String)> {
        let (dlq, _) = self.dead_letter_queue(&asked.queue)?;
        let peeked = dlq
            .peek_group(&asked.group, PEEK_COUNT, SCAN_LIMIT)
            .await
            .map_err(|e| (502, e.to_string()))?;
        let shown: Vec<Value> = peeked
            .iter()
            .map(|p| crate::dlq::peeked_json(&asked.queue, p))
            .collect();
        Ok(json!({ "queue": asked.queue, "group": asked.group, "messages": shown }))
    }

    /// A dry run of the redrive of one failure group: what would move, moving nothing.
    pub(super) async fn dry_run(&self, asked: &RedriveRequest) -> Result<Value, (u16, String)> {
        let (dlq, topology) = self.dead_letter_queue(&asked.queue)?;
        let options = redrive_options(topology).dry_run(true);
        let filter = Filter::default().group(asked.group.clone());
        let summary = dlq
            .redrive(&filter, &options, |_| {})
            .await
            .map_err(|e| (502, e.to_string()))?;
        Ok(summary_json(asked, &summary, true))
    }

    /// Starts the redrive of one failure group in the background: its number among
    /// [`Console::redrives`], whose progress the page follows until it is done.
    pub(super) fn start_redrive(
        self: &Arc<Self>,
        asked: RedriveRequest,
    ) -> Result<usize, (u16, String)> {
        self.dead_letter_queue(&asked.queue)?;
        let number = {
            let mut redrives = lock(&self.redrives);
            redrives.push(json!({ "queue": asked.queue, "group": asked.group, "done": false }));
            redrives.len() - 1
        };
        let console = self.clone();
        tokio::spawn(async move {
            let ended = console.redrive(&asked, number).await;
            let mut redrives = lock(&console.redrives);
            match ended {
                Ok(summary) => redrives[number] = summary_json(&asked, &summary, true),
                Err(error) => redrives[number]["error"] = json!(error),
            }
            redrives[number]["done"] = json!(true);
        });
        Ok(number)
    }

    /// Every redrive started from the page, with its progress.
    pub(super) fn redrives(&self) -> Value {
        json!({ "redrives": *lock(&self.redrives) })
    }

    /// Redrives one failure group, its progress written into redrive `number`.
    async fn redrive(
        &self,
        asked: &RedriveRequest,
        number: usize,
    ) -> Result<RedriveSummary, String> {
        let (dlq, topology) = self.dead_letter_queue(&asked.queue).map_err(|(_, e)| e)?;
        let filter = Filter::default().group(asked.group.clone());
        let progress = |summary: &RedriveSummary| {
            lock(&self.redrives)[number] = summary_json(asked, summary, false);
        };
        let summary = dlq
            .redrive(&filter, &redrive_options(topology), progress)
            .await
            .map_err(|e| e.to_string());
        // What was moved is gone from the grouping: read it again next time.
        *self.dead_letters.lock().await = None;
        summary
    }
}

/// `mutex`, locked: a panic elsewhere while it was held leaves what it guards readable.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How the console redrives the dead letters of `topology`: as `warren dlq redrive` does by
/// default.
fn redrive_options(topology: &Topology) -> RedriveOptions {
    RedriveOptions::default()
        .max_redrives(MAX_REDRIVES)
        .targets(dead_letters::redrive_targets(topology))
}

/// A redrive's summary as the page reads it.
fn summary_json(asked: &RedriveRequest, summary: &RedriveSummary, done: bool) -> Value {
    json!({
        "queue": asked.queue,
        "group": asked.group,
        "dry_run": summary.dry_run,
        "moved": summary.moved,
        "skipped": summary.skipped,
        "refused": summary.refused,
        "no_queue": summary.no_queue,
        "scanned": summary.scanned,
        "to_scan": summary.to_scan,
        "done": done,
    })
}
