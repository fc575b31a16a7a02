//! Reading and redriving a dead-letter queue: what `warren dlq` runs, and what a service or a
//! test can call itself.
//!
//! Everything here reads a dead-letter queue with `basic.get` and manual acknowledgements,
//! one message at a time, and acknowledges only what it has handed on (a redriven copy the
//! broker confirmed). Whatever it read and did not hand on stays unacknowledged until the
//! channel closes, and the broker then returns it to the queue: a crash, a lost connection or
//! a `kill -9` at any moment loses nothing. The price is that messages read and returned carry
//! `redelivered`, and on a classic queue may come back in another order.

mod count;
mod fingerprint;
mod peek;
mod read;
mod redrive;
mod scan;

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use lapin::types::FieldTable;

use crate::FailureContext;
use crate::connection::Connection;
use crate::error::PublishError;
use crate::failure::RetryBudgets;
use crate::model::{QueueRole, Topology};

pub use count::{Counts, FailureGroup, FailureGroups, Group, MAX_EXAMPLES, MAX_GROUPS};
pub use fingerprint::{Fingerprint, normalise};
pub use peek::{MAX_PEEK, MAX_PEEK_BODY, Peeked};
pub use redrive::{Filter, MAX_HELD, RedriveOptions, RedriveSummary};

use scan::Scan;

/// A message body as the worker reads it: undone from its `content-encoding` (`gzip`,
/// `deflate`, or none), refusing to inflate past `max` bytes (a zip bomb stops at the cap; it
/// is not inflated first). The error says why it could not be, as a dead letter's
/// `x-last-error` would. For tools and tests that read dead letters' bodies.
///
/// ```
/// let body = warren_runtime::dead_letters::inflate(b"{}", None, 1024).unwrap();
/// assert_eq!(&*body, b"{}");
/// let error = warren_runtime::dead_letters::inflate(b"{}", Some("br"), 1024).unwrap_err();
/// assert_eq!(error, "unknown content encoding `br`");
/// ```
pub fn inflate<'a>(
    body: &'a [u8],
    encoding: Option<&str>,
    max: usize,
) -> Result<Cow<'a, [u8]>, String> {
    crate::codec::decompress(body, encoding, max).map_err(|poison| poison.detail)
}

/// What reading or redriving a dead-letter queue can fail with. Whatever it read and did not
/// hand on is returned to the queue by the broker when the channel closes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeadLetterError {
    /// The broker refused an operation, or the connection was lost (a queue that does not
    /// exist is refused so: `NOT_FOUND`).
    #[error("dead-letter queue `{queue}`: {source}")]
    Broker {
        /// The dead-letter queue.
        queue: String,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
    /// A redriven copy was not confirmed (nacked, timed out, connection lost): the redrive
    /// stopped, the dead letter it was copying is left in its queue.
    #[error("dead-letter queue `{queue}`: a redriven copy was not confirmed: {source}")]
    Publish {
        /// The dead-letter queue.
        queue: String,
        /// Why the copy was not confirmed.
        #[source]
        source: PublishError,
    },
}

impl DeadLetterError {
    /// Whether the broker has no such queue (`NOT_FOUND`: never declared, deleted, or named
    /// with another namespace), rather than one on a cluster node that is down.
    pub fn is_missing_queue(&self) -> bool {
        match self {
            Self::Broker { source, .. } => {
                crate::amqp::not_found(source) == Some(crate::amqp::NotFound::Gone)
            }
            Self::Publish { .. } => false,
        }
    }
}

/// One dead-letter queue on a connection: count it, peek at it, redrive it, purge it.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use warren_runtime::dead_letters::{DeadLetterQueue, Filter, RedriveOptions};
/// use warren_runtime::model::FailureReason;
/// use warren_runtime::Connection;
///
/// let connection = Connection::connect("amqp://guest:guest@127.0.0.1:5672/%2f", "ops").await?;
/// let dlq = DeadLetterQueue::new(&connection, "orders.dead-letters");
/// let counts = dlq.count(10_000).await?;
/// println!("{} dead letters", counts.total);
/// let filter = Filter::default().reason(FailureReason::Exhausted);
/// let summary = dlq
///     .redrive(&filter, &RedriveOptions::default().limit(100), |_| {})
///     .await?;
/// println!("{} redriven", summary.moved);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DeadLetterQueue {
    connection: Connection,
    name: String,
    /// The retry budgets of the topology it judges by.
    budgets: Arc<RetryBudgets>,
}

impl DeadLetterQueue {
    /// The dead-letter queue `name` (its full name on the broker, namespace included).
    pub fn new(connection: &Connection, name: impl Into<String>) -> Self {
        Self {
            connection: connection.clone(),
            name: name.into(),
            budgets: Arc::default(),
        }
    }

    /// Reads the dead letters another stack wrote by the retry budgets of `topology`'s
    /// queues ([`FailureContext::judged`]): one the broker says was `rejected` after that
    /// stack retried it as often as its queue allows counts (and is redriven) as
    /// `exhausted`, one rejected after fewer retries as `non-retryable`. Without it they stay
    /// `rejected`.
    pub fn judging_by(mut self, topology: &Topology) -> Self {
        self.budgets = Arc::new(RetryBudgets::of(topology));
        self
    }

    /// The failure context of a dead letter whose headers are `headers`, judged by the
    /// budget of the queue it died in.
    pub(crate) fn context(&self, headers: Option<&FieldTable>) -> Option<FailureContext> {
        FailureContext::from_headers(headers).map(|context| self.budgets.judge(context))
    }

    /// Its name on the broker.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Messages ready in it now (not counting those some consumer holds unacknowledged).
    pub async fn depth(&self) -> Result<u32, DeadLetterError> {
        let scan = Scan::open(self).await?;
        let depth = scan.depth();
        scan.release().await?;
        Ok(depth)
    }

    /// Deletes every ready message in it, returning how many. Messages some consumer holds
    /// unacknowledged are not purged (the broker's rule).
    pub async fn purge(&self) -> Result<u32, DeadLetterError> {
        let scan = Scan::open(self).await?;
        let purged = scan.purge().await;
        let released = scan.release().await;
        purged.and_then(|purged| released.map(|()| purged))
    }

    pub(crate) fn broker(&self, source: lapin::Error) -> DeadLetterError {
        DeadLetterError::Broker {
            queue: self.name.clone(),
            source,
        }
    }
}

/// The dead-letter queues of `topology`, by name order (namespaced if the topology is): each
/// queue a declared queue's dead-lettering reaches. Through the default exchange that is the
/// queue its key names; through an exchange, every queue bound to it, directly or through
/// exchange-to-exchange bindings, whatever the binding key (a dead letter keeps its own
/// routing key, so any binding may match one). Wait queues, which dead-letter back to their
/// queue, make no dead-letter queue.
pub fn dead_letter_queues(topology: &Topology) -> Vec<String> {
    let mut found = BTreeSet::new();
    for queue in &topology.queues {
        if queue.role == QueueRole::Declared {
            found.extend(topology.reached_by_dead_letters(queue));
        }
    }
    found.into_iter().collect()
}

/// The queues of `topology` a redrive may send a message back to: every declared queue that
/// is not one of its dead-letter queues. A dead letter's `x-failed-queue` is a header anyone
/// could have written: checked against this set, a forged one cannot push a message into a
/// queue outside the contract (or its namespace).
pub fn redrive_targets(topology: &Topology) -> BTreeSet<String> {
    let dead = dead_letter_queues(topology);
    topology
        .queues
        .iter()
        .filter(|q| q.role == QueueRole::Declared && !dead.contains(&q.name))
        .map(|q| q.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{dead_letter_queues, redrive_targets};
    use crate::model::{Binding, DeadLetter, Destination, Queue, QueueKind, Topology};

    fn bound(exchange: &str, destination: Destination) -> Binding {
        Binding {
            exchange: exchange.into(),
            destination,
            routing_key: "#".into(),
            arguments: Default::default(),
        }
    }

    #[test]
    fn dead_letter_queues_are_what_dead_lettering_reaches() {
        let mut work = Queue::new("work", QueueKind::Classic);
        work.dead_letter = Some(DeadLetter::new("dlx", None));
        let mut direct = Queue::new("direct", QueueKind::Classic);
        direct.dead_letter = Some(DeadLetter::new("", Some("parked".into())));
        let topology = Topology::new(
            Vec::new(),
            vec![
                work,
                direct,
                Queue::new("dead", QueueKind::Classic),
                Queue::new("audit", QueueKind::Classic),
                Queue::new("parked", QueueKind::Classic),
            ],
            vec![
                bound("dlx", Destination::Queue("dead".into())),
                bound("dlx", Destination::Exchange("more".into())),
                bound("more", Destination::Queue("audit".into())),
                bound("more", Destination::Exchange("dlx".into())),
            ],
        );
        assert_eq!(dead_letter_queues(&topology), ["audit", "dead", "parked"]);
        let spaced = topology.namespaced("t.");
        assert_eq!(
            dead_letter_queues(&spaced),
            ["t.audit", "t.dead", "t.parked"]
        );
        assert_eq!(
            redrive_targets(&spaced).into_iter().collect::<Vec<_>>(),
            ["t.direct", "t.work"]
        );
    }
}
