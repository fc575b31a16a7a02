//! `count`: how many dead letters, grouped by reason, consumer, failed queue and error, and
//! by failure fingerprint.

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::failure::FailureContext;
use crate::text::truncate;

use super::scan::Scan;
use super::{DeadLetterError, DeadLetterQueue, Fingerprint};

/// Distinct values a grouping keeps; the rest are counted under `(other)`, so a queue of
/// messages that each forged a different error costs no more memory than this.
pub const MAX_GROUPS: usize = 50;

/// Message ids a failure group keeps as examples.
pub const MAX_EXAMPLES: usize = 3;

/// How much of an error a grouping keeps: its first line, cut to this many bytes (errors that
/// differ only in an id further on group together).
const ERROR_KEY_BYTES: usize = 120;

/// Dead letters counted: the queue's depth, and the messages read grouped four ways.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counts {
    /// Ready messages when the count began.
    pub total: u32,
    /// Messages read and grouped: all of them, unless the queue held more than the scan
    /// limit (or another consumer took some meanwhile).
    pub scanned: u32,
    /// By failure reason (`exhausted`, `non-retryable`, `rejected`…).
    pub by_reason: Group,
    /// By the consumer that failed on them.
    pub by_consumer: Group,
    /// By the queue they failed in.
    pub by_queue: Group,
    /// By their last error (first line, cut).
    pub by_error: Group,
    /// By failure fingerprint: reason, consumer and the error with its ids and numbers
    /// replaced.
    pub groups: FailureGroups,
}

/// Dead letters that share a [`Fingerprint`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailureGroup {
    /// The fingerprint's [`Fingerprint::id`], which `Filter::group` selects by.
    pub id: String,
    /// What they share.
    pub fingerprint: Fingerprint,
    /// How many were read.
    pub count: u32,
    /// The earliest failure among them (a message's first failure, else its last).
    pub first_seen: Option<SystemTime>,
    /// The latest failure among them (a message's last failure, else its first).
    pub last_seen: Option<SystemTime>,
    /// The message ids of the first few read (at most [`MAX_EXAMPLES`]).
    pub examples: Vec<String>,
}

/// Dead letters by fingerprint: at most [`MAX_GROUPS`] groups, so that messages forging a
/// different error each cost no more memory than that; the rest are counted in
/// [`FailureGroups::other`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureGroups {
    groups: BTreeMap<String, FailureGroup>,
    other: u32,
}

impl FailureGroups {
    fn add(&mut self, context: Option<&FailureContext>, message_id: Option<&str>) {
        let fingerprint = Fingerprint::of(context);
        let id = fingerprint.id();
        if !self.groups.contains_key(&id) && self.groups.len() >= MAX_GROUPS {
            self.other += 1;
            return;
        }
        let group = self
            .groups
            .entry(id.clone())
            .or_insert_with(|| FailureGroup {
                id,
                fingerprint,
                count: 0,
                first_seen: None,
                last_seen: None,
                examples: Vec::new(),
            });
        group.count += 1;
        let first = context.and_then(|c| c.first_failure.or(c.last_failure));
        let last = context.and_then(|c| c.last_failure.or(c.first_failure));
        group.first_seen = either(group.first_seen, first, SystemTime::min);
        group.last_seen = either(group.last_seen, last, SystemTime::max);
        if let Some(message_id) = message_id
            && group.examples.len() < MAX_EXAMPLES
        {
            group.examples.push(message_id.to_owned());
        }
    }

    /// The groups, largest first, then by id.
    pub fn entries(&self) -> Vec<&FailureGroup> {
        let mut entries: Vec<_> = self.groups.values().collect();
        entries.sort_by(|a, b| b.count.cmp(&a.count).then(a.id.cmp(&b.id)));
        entries
    }

    /// The group of this id, if any message read had its fingerprint.
    pub fn get(&self, id: &str) -> Option<&FailureGroup> {
        self.groups.get(id)
    }

    /// Messages read past [`MAX_GROUPS`] groups, in none of them.
    pub fn other(&self) -> u32 {
        self.other
    }
}

/// `pick` of two times when both are known, else the one that is.
fn either(
    a: Option<SystemTime>,
    b: Option<SystemTime>,
    pick: fn(SystemTime, SystemTime) -> SystemTime,
) -> Option<SystemTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    }
}

/// Counts by value, largest first; `(none)` for messages without the value, `(other)` for
/// values past [`MAX_GROUPS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Group(BTreeMap<String, u32>);

impl Group {
    fn add(&mut self, key: Option<&str>) {
        let key = key.unwrap_or("(none)");
        let key = if self.0.contains_key(key) || self.0.len() < MAX_GROUPS {
            key
        } else {
            "(other)"
        };
        *self.0.entry(key.to_owned()).or_default() += 1;
    }

    /// `(value, count)`, largest count first, then by value.
    pub fn entries(&self) -> Vec<(&str, u32)> {
        let mut entries: Vec<_> = self.0.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        entries
    }

    /// The count for one value (`(none)` for messages without it).
    pub fn get(&self, value: &str) -> u32 {
        self.0.get(value).copied().unwrap_or(0)
    }
}

impl Counts {
    fn add(&mut self, context: Option<&FailureContext>, message_id: Option<&str>) {
        self.scanned += 1;
        self.groups.add(context, message_id);
        let reason = context.and_then(|c| c.reason).map(|r| r.as_str());
        self.by_reason.add(reason);
        self.by_consumer
            .add(context.and_then(|c| c.consumer.as_deref()));
        self.by_queue.add(context.and_then(|c| c.queue.as_deref()));
        let error = context
            .and_then(|c| c.last_error.as_deref())
            .map(|e| truncate(e.lines().next().unwrap_or_default(), ERROR_KEY_BYTES));
        self.by_error.add(error.as_deref());
    }
}

impl DeadLetterQueue {
    /// Counts the dead letters, reading at most `scan_limit` of them to group them. Every
    /// message read is held unacknowledged until the count ends, then returned (marked
    /// `redelivered`): nothing is lost, but a classic queue's order may change.
    pub async fn count(&self, scan_limit: u32) -> Result<Counts, DeadLetterError> {
        let scan = Scan::open(self).await?;
        let mut counts = Counts {
            total: scan.depth(),
            ..Counts::default()
        };
        let read = async {
            while counts.scanned < counts.total.min(scan_limit) {
                let Some(delivery) = scan.next().await? else {
                    break;
                };
                let context = self.context(delivery.properties.headers().as_ref());
                let message_id = delivery.properties.message_id().as_ref();
                counts.add(context.as_ref(), message_id.map(|id| id.as_str()));
            }
            Ok(())
        }
        .await;
        let released = scan.release().await;
        read.and(released).map(|()| counts)
    }
}

#[cfg(test)]
mod tests {
    use super::{Group, MAX_GROUPS};

    #[test]
    fn groups_are_bounded() {
        let mut group = Group::default();
        for i in 0..MAX_GROUPS + 10 {
            group.add(Some(&format!("error {i}")));
        }
        group.add(None);
        group.add(Some("error 0"));
        assert_eq!(group.get("(other)"), 11);
        assert_eq!(group.get("error 0"), 2);
        assert_eq!(group.entries()[0], ("(other)", 11));
    }
}
