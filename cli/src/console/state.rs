//! What the console shows, read from the broker: the queues of its contracts with their depth
//! and consumers (passive declares) and rates (the management API, when it answers), and the
//! dead letters of each dead-letter queue grouped by failure; and the one change it makes, a
//! redrive of a group.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Mutex;
use warren_runtime::dead_letters::{self, DeadLetterQueue, Filter, RedriveOptions, RedriveSummary};
use warren_runtime::lapin::options::QueueDeclareOptions;
use warren_runtime::lapin::types::{FieldTable, ShortString};
use warren_runtime::management::{LiveQueue, Management};
use warren_runtime::model::QueueRole;
use warren_runtime::{Connection, Topology};

/// Dead letters read per queue to group them.
const SCAN_LIMIT: u32 = 10_000;
/// How long grouped dead letters are reused: counting reads every message (returning each,
/// marked `redelivered`), so a page refreshing every few seconds must not read them each time.
const DEAD_LETTERS_FRESH: Duration = Duration::from_secs(10);

/// What the console may change on the broker.
#[derive(Debug, Clone, Copy)]
pub(super) struct Changes {
    /// Whether it may change anything (`--allow-changes`).
    pub allowed: bool,
    /// The redrives past which a message stays in its dead-letter queue.
    pub max_redrives: u32,
}

/// The console's view of the broker.
pub(super) struct Console {
    connection: Connection,
    /// Where the rates come from.
    management: Management,
    topologies: Vec<Topology>,
    /// Workers' health endpoints, by name.
    health: Vec<(String, String)>,
    changes: Changes,
    /// The management API's last answer, when it came, and what the page says of it.
    sampled: Mutex<Option<Sampled>>,
    /// The last grouping of the dead letters, and when it was made.
    dead_letters: Mutex<Option<(Instant, Value)>>,
    /// The redrives started from the page, each with its latest progress, by number: the
    /// last [`KEPT_REDRIVES`].
    redrives: std::sync::Mutex<BTreeMap<u64, Value>>,
    /// One reader at a time per dead-letter queue: a count, peek, dry run or redrive holds
    /// the messages it reads, and another reading meanwhile would find them gone (a redrive
    /// would end early, a count would miss them).
    readers: BTreeMap<String, Arc<Mutex<()>>>,
}

/// The management API's queues by name, when they were asked for, and where the numbers come
/// from.
type Sampled = (Instant, Arc<BTreeMap<String, LiveQueue>>, String);

/// How long the management API's answer is reused.
const SAMPLED_FRESH: Duration = Duration::from_secs(5);

/// Redrives whose progress is kept.
const KEPT_REDRIVES: usize = 50;

/// Dead letters of a group the page shows at once.
const PEEK_COUNT: usize = 5;

/// A failure group of a dead-letter queue the page asks to peek at, redrive or dry-run.
#[derive(Debug)]
pub(super) struct GroupRequest {
    /// The dead-letter queue, as the broker names it.
    queue: String,
    /// The failure group's id.
    group: String,
    /// Report what would move, moving nothing.
    pub(super) dry_run: bool,
    /// Move at most this many: what the confirmed dry run found.
    limit: Option<u64>,
}

impl GroupRequest {
    /// From a JSON body `{"queue": …, "group": …, "dry_run": …}`.
    pub(super) fn parse(body: &[u8]) -> Option<Self> {
        let value: Value = serde_json::from_slice(body).ok()?;
        Some(Self {
            queue: value["queue"].as_str()?.to_owned(),
            group: value["group"].as_str()?.to_owned(),
            dry_run: value["dry_run"].as_bool().unwrap_or(false),
            limit: value["limit"].as_u64(),
        })
    }
}

impl Console {
    /// The console of `topologies` on `connection`, its rates from `management`, its
    /// workers' health from `health` (name, URL), allowed `changes`.
    pub(super) fn new(
        connection: Connection,
        management: Management,
        topologies: Vec<Topology>,
        health: Vec<(String, String)>,
        changes: Changes,
    ) -> Self {
        let readers = topologies
            .iter()
            .flat_map(dead_letters::dead_letter_queues)
            .map(|queue| (queue, Arc::default()))
            .collect();
        Self {
            connection,
            management,
            topologies,
            health,
            changes,
            sampled: Mutex::new(None),
            dead_letters: Mutex::new(None),
            redrives: std::sync::Mutex::new(BTreeMap::new()),
            readers,
        }
    }

    /// Whether it may redrive and purge.
    pub(super) fn allows_changes(&self) -> bool {
        self.changes.allowed
    }

    /// Every queue of the contracts with its ready messages and consumers (passive declares:
    /// exact, now), and its unacknowledged messages and rates when the management API answers
    /// (sampled every few seconds); or why they are unknown.
    pub(super) async fn queues(&self) -> Value {
        let (live, source) = self.sampled().await;
        let mut channel = None;
        let mut queues = Vec::new();
        for topology in &self.topologies {
            let dead = dead_letters::dead_letter_queues(topology);
            for queue in &topology.queues {
                let (role, waits_for, delay) = match &queue.role {
                    QueueRole::Declared if dead.contains(&queue.name) => {
                        ("dead-letter", None, None)
                    }
                    QueueRole::Declared => ("queue", None, None),
                    QueueRole::Wait { queue, delay } => {
                        ("wait", Some(queue.as_str()), Some(delay.as_millis()))
                    }
                };
                let mut entry = json!({
                    "name": queue.name,
                    "role": role,
                    "waits_for": waits_for,
                    "delay_ms": delay,
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
            "changes_allowed": self.changes.allowed,
            "queues": queues,
        })
    }

    /// The management API's queues of the virtual host by name, and where the page's numbers
    /// come from: asked at most every few seconds (the API samples no more often, and its
    /// answer is as large as the virtual host), one request shared by every page.
    async fn sampled(&self) -> (Arc<BTreeMap<String, LiveQueue>>, String) {
        let mut sampled = self.sampled.lock().await;
        if let Some((at, live, source)) = sampled.as_ref()
            && at.elapsed() < SAMPLED_FRESH
        {
            return (live.clone(), source.clone());
        }
        let (live, source) = match self.management.queues().await {
            Ok(queues) => (
                queues.into_iter().map(|q| (q.name.clone(), q)).collect(),
                format!(
                    "ready and consumers: passive declares; unacknowledged and rates: the management API at {}",
                    self.management.endpoint()
                ),
            ),
            Err(error) => (
                BTreeMap::new(),
                format!("ready and consumers: passive declares (no rates: {error})"),
            ),
        };
        let live = Arc::new(live);
        *sampled = Some((Instant::now(), live.clone(), source.clone()));
        (live, source)
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
    /// could not be read; every endpoint asked at once, so one that stalls costs its bound
    /// once, not once per worker behind it.
    pub(super) async fn workers(&self) -> Value {
        let mut asked = tokio::task::JoinSet::new();
        for (index, (name, url)) in self.health.iter().enumerate() {
            let (name, url) = (name.clone(), url.clone());
            asked.spawn(async move { (index, worker_health(&name, &url).await) });
        }
        let mut workers = vec![Value::Null; self.health.len()];
        while let Some(Ok((index, health))) = asked.join_next().await {
            workers[index] = health;
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
                let Ok(_reading) = self.reader(&queue).try_lock_owned() else {
                    all.push(
                        json!({ "queue": queue, "busy": "a redrive of this queue is running" }),
                    );
                    continue;
                };
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

    /// The lock of dead-letter queue `queue` (one of the contracts').
    fn reader(&self, queue: &str) -> Arc<Mutex<()>> {
        self.readers.get(queue).cloned().unwrap_or_default()
    }

    /// Queue `queue`'s lock, unless another reader holds it.
    fn read_alone(&self, queue: &str) -> Result<tokio::sync::OwnedMutexGuard<()>, (u16, String)> {
        self.reader(queue).try_lock_owned().map_err(|_| {
            (
                409,
                "this queue is being read (a redrive, a count or a peek): try again when it is done"
                    .to_owned(),
            )
        })
    }

    /// The first few dead letters of one failure group: headers, failure context and body.
    pub(super) async fn peek(&self, asked: &GroupRequest) -> Result<Value, (u16, String)> {
        let (dlq, _) = self.dead_letter_queue(&asked.queue)?;
        let _reading = self.read_alone(&asked.queue)?;
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
    pub(super) async fn dry_run(&self, asked: &GroupRequest) -> Result<Value, (u16, String)> {
        let (dlq, topology) = self.dead_letter_queue(&asked.queue)?;
        let _reading = self.read_alone(&asked.queue)?;
        let options = redrive_options(topology, self.changes).dry_run(true);
        let filter = Filter::default().group(asked.group.clone());
        let summary = dlq
            .redrive(&filter, &options, |_| {})
            .await
            .map_err(|e| (502, e.to_string()))?;
        Ok(summary_json(asked, &summary, true))
    }

    /// Deletes every message of dead-letter queue `queue`, if it holds the `depth` the
    /// operator confirmed (else nothing, and why). What arrives between that check and the
    /// purge goes too: AMQP purges a whole queue.
    pub(super) async fn purge(&self, queue: &str, depth: u64) -> Result<Value, (u16, String)> {
        let (dlq, _) = self.dead_letter_queue(queue)?;
        let _reading = self.read_alone(queue)?;
        let now = dlq.depth().await.map_err(|e| (502, e.to_string()))?;
        if u64::from(now) != depth {
            return Err((
                409,
                format!(
                    "the queue holds {now} dead letters now, not the {depth} confirmed: look again"
                ),
            ));
        }
        let purged = dlq.purge().await.map_err(|e| (502, e.to_string()))?;
        *self.dead_letters.lock().await = None;
        Ok(json!({ "queue": queue, "purged": purged }))
    }

    /// Starts the redrive of one failure group in the background: its number in
    /// [`Console::redrives`], whose progress the page follows until it is done.
    pub(super) fn start_redrive(
        self: &Arc<Self>,
        asked: GroupRequest,
    ) -> Result<u64, (u16, String)> {
        self.dead_letter_queue(&asked.queue)?;
        let reading = self.read_alone(&asked.queue)?;
        let number = {
            let mut redrives = lock(&self.redrives);
            let number = redrives.last_key_value().map_or(0, |(n, _)| n + 1);
            redrives.insert(
                number,
                json!({ "queue": asked.queue, "group": asked.group, "done": false }),
            );
            while redrives.len() > KEPT_REDRIVES {
                redrives.pop_first();
            }
            number
        };
        let console = self.clone();
        tokio::spawn(async move {
            let ended = console.redrive(&asked, number).await;
            drop(reading);
            let entry = match ended {
                Ok(summary) => summary_json(&asked, &summary, true),
                Err(error) => {
                    json!({ "queue": asked.queue, "group": asked.group, "error": error, "done": true })
                }
            };
            lock(&console.redrives).insert(number, entry);
        });
        Ok(number)
    }

    /// The redrives started from the page, with their progress, by number.
    pub(super) fn redrives(&self) -> Value {
        let redrives = lock(&self.redrives);
        let by_number: serde_json::Map<String, Value> = redrives
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
        json!({ "redrives": by_number })
    }

    /// Redrives one failure group (at most its confirmed count), its progress written into
    /// redrive `number`.
    async fn redrive(&self, asked: &GroupRequest, number: u64) -> Result<RedriveSummary, String> {
        let (dlq, topology) = self.dead_letter_queue(&asked.queue).map_err(|(_, e)| e)?;
        let filter = Filter::default().group(asked.group.clone());
        let mut options = redrive_options(topology, self.changes);
        if let Some(limit) = asked.limit {
            options = options.limit(limit);
        }
        let progress = |summary: &RedriveSummary| {
            lock(&self.redrives).insert(number, summary_json(asked, summary, false));
        };
        let summary = dlq
            .redrive(&filter, &options, progress)
            .await
            .map_err(|e| e.to_string());
        // What was moved is gone from the grouping: read it again next time.
        *self.dead_letters.lock().await = None;
        summary
    }
}

/// Worker `name`'s health from its endpoint `url`: only what the page shows, each value of
/// the shape the page expects (an endpoint's answer is as hostile as any other input).
async fn worker_health(name: &str, url: &str) -> Value {
    let mut entry = json!({ "name": name, "url": url });
    let health = match super::http::get(url).await {
        Ok((200 | 503, body)) => match serde_json::from_slice::<Value>(&body) {
            Ok(health) => health,
            Err(error) => {
                entry["error"] = json!(format!("not a worker's health: {error}"));
                return entry;
            }
        },
        Ok((status, _)) => {
            entry["error"] = json!(format!("answered {status}"));
            return entry;
        }
        Err(error) => {
            entry["error"] = json!(error);
            return entry;
        }
    };
    let text = |value: &Value| value.as_str().map_or(Value::Null, |s| json!(s));
    let flag = |value: &Value| value.as_bool().map_or(Value::Null, |b| json!(b));
    let last_error = |value: &Value| text(&value["message"]);
    entry["ready"] = flag(&health["ready"]);
    entry["live"] = flag(&health["live"]);
    entry["phase"] = text(&health["phase"]);
    entry["last_error"] = last_error(&health["last_error"]);
    let consumers = health["consumers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    entry["consumers"] = consumers
        .iter()
        .map(|c| {
            let overdue: Vec<Value> = c["overdue_retries"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|held| {
                    Some(json!({
                        "wait_queue": held["wait_queue"].as_str()?,
                        "messages": held["messages"].as_u64()?,
                        "overdue_ms": held["overdue_ms"].as_u64()?,
                    }))
                })
                .collect();
            json!({
                "name": text(&c["name"]),
                "queue": text(&c["queue"]),
                "subscribed": flag(&c["subscribed"]),
                "breaker": text(&c["breaker"]),
                "last_error": last_error(&c["last_error"]),
                "overdue_retries": overdue,
            })
        })
        .collect();
    entry
}

/// `mutex`, locked: a panic elsewhere while it was held leaves what it guards readable.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How the console redrives the dead letters of `topology`: as `warren dlq redrive` does, with
/// its `--max-redrives`.
fn redrive_options(topology: &Topology, changes: Changes) -> RedriveOptions {
    RedriveOptions::default()
        .max_redrives(changes.max_redrives)
        .targets(dead_letters::redrive_targets(topology))
}

/// A redrive's summary as the page reads it.
fn summary_json(asked: &GroupRequest, summary: &RedriveSummary, done: bool) -> Value {
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
        "depth": summary.depth,
        "done": done,
    })
}
