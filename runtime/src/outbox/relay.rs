//! The relay: claims due outbox rows, publishes them with confirms, and marks them sent or
//! due again later.

use std::sync::Arc;
use std::time::Duration;

use metrics::{Counter, Gauge};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{Backlog, Outbox, OutboxError, decode_properties};
use crate::database::{Backend, Bind, ClaimedRow, millis};
use crate::health::RelayHealth;
use crate::sync::lock;
use crate::{PublishError, Publisher};

/// Rows claimed per round when no batch is set ([`Relay::batch`]).
pub const DEFAULT_BATCH: u32 = 1000;
/// How long a claimed row is the claiming relay's when no lease is set ([`Relay::lease`]).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// How long a relay that found nothing due waits before it looks again, by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// The shortest and the longest wait before a row whose publish failed is due again.
const RETRY_DELAYS: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(30));
/// A lease outlasts the publisher's timeout by at least this: a round's publishes all end
/// within that timeout, and marking them sent takes a moment more.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// How often a running relay reads the backlog for its metrics and health.
const BACKLOG_PERIOD: Duration = Duration::from_secs(1);
/// How often a running relay prunes the sent rows.
const PRUNE_PERIOD: Duration = Duration::from_secs(60);

/// Publishes an outbox's rows ([`Outbox::relay`]): [`Relay::spawn`] runs it until stopped,
/// [`Relay::relay_once`] runs one round. Relays on several processes may share a table.
pub struct Relay<DB: Backend> {
    outbox: Outbox<DB>,
    publisher: Publisher,
    batch: u32,
    lease: Duration,
    poll_interval: Duration,
    metrics: RelayMetrics,
}

/// What one round of a relay did ([`Relay::relay_once`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Relayed {
    /// Rows claimed.
    pub claimed: usize,
    /// Of those, published, confirmed and marked sent.
    pub published: usize,
    /// Of those, not published (the broker unreachable, the message refused or returned):
    /// due again after a backoff.
    pub retried: usize,
    /// Why the last of those was not published.
    pub last_error: Option<String>,
}

impl<DB: Backend> Relay<DB> {
    pub(super) fn new(outbox: Outbox<DB>, publisher: Publisher) -> Self {
        let metrics = RelayMetrics::new(outbox.table.as_str());
        let relay = Self {
            outbox,
            publisher,
            batch: DEFAULT_BATCH,
            lease: DEFAULT_LEASE,
            poll_interval: DEFAULT_POLL_INTERVAL,
            metrics,
        };
        relay.lease(DEFAULT_LEASE)
    }

    /// How many rows a round claims and publishes at once (default 100, at least 1).
    pub fn batch(mut self, rows: u32) -> Self {
        self.batch = rows.max(1);
        self
    }

    /// How long a claimed row is this relay's alone (default 60 s): another relay claims it
    /// only after that, so a relay that died mid-round holds its rows that long. At least the
    /// publisher's timeout plus 5 s (a shorter lease is raised to that), so that a round
    /// still publishing is never overtaken.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(self.publisher.publish_timeout() + LEASE_MARGIN);
        self
    }

    /// How long a relay that found nothing due waits before it looks again (default 100 ms).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// One round: claims up to a batch of due rows (per ordering key only the oldest unsent
    /// one), publishes them all at once and waits for their confirms, then marks the
    /// confirmed ones sent and the others due again after a backoff. A failure of the
    /// database is returned; the rows it claimed are due again when their lease ends.
    pub async fn relay_once(&self) -> Result<Relayed, OutboxError> {
        let claimed = self.claim().await?;
        let outcomes = self.publish(claimed).await;
        self.settle(outcomes).await
    }

    /// A round of a running relay: publishes `ahead` (claimed during the last round) or a
    /// batch claimed now and, when that batch is full and `claim_next`, claims the next batch
    /// while this one is published, so that the database's time overlaps the broker's. The
    /// rows claimed ahead are leased, so this batch's are not among them, and of an ordering
    /// key whose row is in this batch none is claimable: the order per key holds.
    async fn round(
        &self,
        ahead: Option<Vec<ClaimedRow>>,
        claim_next: bool,
    ) -> (Result<Relayed, OutboxError>, Option<Vec<ClaimedRow>>) {
        let claimed = match ahead {
            Some(rows) => rows,
            None => match self.claim().await {
                Ok(rows) => rows,
                Err(error) => return (Err(error), None),
            },
        };
        let full = claimed.len() as u64 >= u64::from(self.batch);
        let (outcomes, next) = tokio::join!(self.publish(claimed), async {
            if !(full && claim_next) {
                return None;
            }
            // A failure here is met again, and reported, by the next round's own claim.
            self.claim()
                .await
                .inspect_err(|error| tracing::debug!(%error, "claiming ahead failed"))
                .ok()
        });
        match self.settle(outcomes).await {
            Ok(relayed) => (Ok(relayed), next),
            // The rows claimed ahead go back when their lease ends: the database is failing,
            // and the backoff may outlast the lease.
            Err(error) => (Err(error), None),
        }
    }

    /// Claims up to a batch of due rows, in the order they were written.
    async fn claim(&self) -> Result<Vec<ClaimedRow>, OutboxError> {
        let mut connection = self.outbox.pool.acquire().await?;
        let claim = [
            Bind::Int(i64::from(self.batch)),
            Bind::Int(millis(self.lease)),
        ];
        let mut claimed =
            DB::claim(&mut *connection, &self.outbox.statements.claim, &claim).await?;
        claimed.sort_by_key(|row| row.id);
        Ok(claimed)
    }

    /// Marks the rows of `outcomes` whose publish was confirmed sent, and the others due again
    /// after a backoff, their error kept.
    async fn settle(
        &self,
        outcomes: Vec<(ClaimedRow, Result<(), String>)>,
    ) -> Result<Relayed, OutboxError> {
        let statements = &self.outbox.statements;
        let mut relayed = Relayed {
            claimed: outcomes.len(),
            ..Relayed::default()
        };
        if outcomes.is_empty() {
            return Ok(relayed);
        }
        let (sent, failed): (Vec<_>, Vec<_>) =
            outcomes.into_iter().partition(|outcome| outcome.1.is_ok());
        let mut connection = self.outbox.pool.acquire().await?;
        if !sent.is_empty() {
            let ids =
                serde_json::to_string(&sent.iter().map(|(row, _)| row.id).collect::<Vec<_>>())
                    .unwrap_or_default();
            DB::execute(&mut *connection, &statements.sent, &[Bind::Text(&ids)]).await?;
            relayed.published = sent.len();
            self.metrics.relayed.increment(sent.len() as u64);
        }
        for (row, error) in failed {
            let error = error.err().unwrap_or_default();
            let attempt = u32::try_from(row.attempts.saturating_sub(1)).unwrap_or(u32::MAX);
            let delay = crate::connection::backoff(attempt, RETRY_DELAYS.0, RETRY_DELAYS.1);
            let binds = [
                Bind::Int(row.id),
                Bind::Int(millis(delay)),
                Bind::Text(&error),
            ];
            DB::execute(&mut *connection, &statements.failed, &binds).await?;
            tracing::warn!(
                id = row.id,
                attempts = row.attempts,
                exchange = row.exchange,
                routing_key = row.routing_key,
                %error,
                retry_in = ?delay,
                "outbox row not published; due again later"
            );
            relayed.retried += 1;
            relayed.last_error = Some(error);
            self.metrics.retried.increment(1);
        }
        Ok(relayed)
    }

    /// Publishes every row at once on the publisher's channel; each row with what came of it
    /// (the error as text).
    async fn publish(&self, rows: Vec<ClaimedRow>) -> Vec<(ClaimedRow, Result<(), String>)> {
        let mut sends = JoinSet::new();
        for row in rows {
            let publisher = self.publisher.clone();
            sends.spawn(async move {
                let result = publish_row(&publisher, &row).await;
                (row, result.map_err(|e| e.to_string()))
            });
        }
        let mut outcomes = Vec::new();
        while let Some(joined) = sends.join_next().await {
            // A publish task cannot panic short of a bug; its row stays leased and is due again.
            if let Ok(outcome) = joined {
                outcomes.push(outcome);
            }
        }
        outcomes
    }

    /// Runs the relay in a task until [`RelayHandle::stop`]: rounds back to back while rows
    /// are due, a poll interval apart when none are, backing off while the database fails;
    /// reads the backlog every second and prunes the sent rows every minute.
    pub fn spawn(self) -> RelayHandle {
        let (stop, stopped) = watch::channel(false);
        let health = Arc::new(std::sync::Mutex::new(RelayHealth {
            table: self.outbox.table.to_string(),
            ..RelayHealth::default()
        }));
        let task = tokio::spawn(self.run(stopped, health.clone()));
        RelayHandle {
            stop,
            task: Some(task),
            health,
        }
    }

    async fn run(self, mut stopped: watch::Receiver<bool>, health: SharedHealth) {
        let mut database_failures = 0u32;
        let mut backlog_read: Option<Instant> = None;
        let mut pruned = Instant::now();
        let mut ahead = None;
        // Once stopped, a batch claimed ahead is still published: its rows are leased.
        loop {
            let stopping = *stopped.borrow();
            if stopping && ahead.is_none() {
                break;
            }
            let (relayed, next) = self.round(ahead.take(), !stopping).await;
            ahead = next;
            let pause = match relayed {
                Ok(round) => {
                    database_failures = 0;
                    let mut health = lock(&health);
                    health.published += round.published as u64;
                    if round.retried > 0 {
                        health.last_error = round.last_error;
                    } else if round.claimed > 0 {
                        health.last_error = None;
                    }
                    if ahead.is_some() || round.claimed as u64 >= u64::from(self.batch) {
                        Duration::ZERO
                    } else {
                        self.poll_interval
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "outbox relay round failed; trying again");
                    lock(&health).last_error = Some(error.to_string());
                    database_failures += 1;
                    crate::connection::backoff(
                        database_failures - 1,
                        RETRY_DELAYS.0,
                        RETRY_DELAYS.1,
                    )
                }
            };
            if backlog_read.is_none_or(|read| read.elapsed() >= BACKLOG_PERIOD) {
                backlog_read = Some(Instant::now());
                if let Ok(backlog) = self.outbox.backlog().await {
                    self.metrics.show(backlog);
                    let mut health = lock(&health);
                    health.pending = backlog.pending;
                    health.lag_ms = backlog.lag.map(|lag| millis(lag).unsigned_abs());
                }
            }
            if pruned.elapsed() >= PRUNE_PERIOD {
                pruned = Instant::now();
                if let Err(error) = self.outbox.prune().await {
                    tracing::warn!(%error, "outbox pruning failed; tried again later");
                }
            }
            if !pause.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = stopped.changed() => {}
                }
            }
        }
    }
}

/// What a relay's health is read from.
type SharedHealth = Arc<std::sync::Mutex<RelayHealth>>;

/// A running relay ([`Relay::spawn`]). [`RelayHandle::stop`] lets its round finish; dropping
/// the handle aborts it, leaving what it claimed to be claimed again after the lease.
pub struct RelayHandle {
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    health: SharedHealth,
}

impl RelayHandle {
    /// The relay's backlog, progress and last error.
    pub fn health(&self) -> RelayHealth {
        lock(&self.health).clone()
    }

    /// What a worker running the relay reads its health from.
    pub(crate) fn shared_health(&self) -> SharedHealth {
        self.health.clone()
    }

    /// Stops the relay once its current round is done (its publishes confirmed and marked).
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Why a row was not published.
#[derive(Debug, thiserror::Error)]
enum Published {
    /// Its stored properties do not read back: written by something other than warren's
    /// writer, or damaged. Never published as they are.
    #[error("its stored properties are not AMQP basic properties")]
    Unreadable,
    /// The publish failed.
    #[error(transparent)]
    Failed(PublishError),
}

/// Publishes `row` as stored: its exchange, routing key, properties and body, `mandatory`,
/// and waits for the confirm; counted in the publish metrics as any publish is.
async fn publish_row(publisher: &Publisher, row: &ClaimedRow) -> Result<(), Published> {
    let properties = decode_properties(&row.properties).ok_or(Published::Unreadable)?;
    let sent = publisher
        .send(&row.exchange, &row.routing_key, &row.body, properties)
        .await;
    publisher.record(&row.exchange, &sent);
    sent.map_err(Published::Failed)
}

/// A relay's metrics, labelled with its table.
struct RelayMetrics {
    relayed: Counter,
    retried: Counter,
    pending: Gauge,
    lag: Gauge,
}

impl RelayMetrics {
    fn new(table: &str) -> Self {
        use crate::metrics::{OUTBOX_LAG, OUTBOX_PENDING, OUTBOX_RELAYED, OUTBOX_RETRIED, labels};
        let table = || (labels::TABLE, table.to_owned());
        Self {
            relayed: metrics::counter!(OUTBOX_RELAYED, &[table()]),
            retried: metrics::counter!(OUTBOX_RETRIED, &[table()]),
            pending: metrics::gauge!(OUTBOX_PENDING, &[table()]),
            lag: metrics::gauge!(OUTBOX_LAG, &[table()]),
        }
    }

    fn show(&self, backlog: Backlog) {
        self.pending.set(backlog.pending as f64);
        self.lag
            .set(backlog.lag.map_or(0.0, |lag| lag.as_secs_f64()));
    }
}
