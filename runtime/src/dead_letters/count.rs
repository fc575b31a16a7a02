//! `count`: how many dead letters, grouped by reason, consumer, failed queue and error.

use std::collections::BTreeMap;

use crate::failure::FailureContext;
use crate::text::truncate;

use super::scan::Scan;
use super::{DeadLetterError, DeadLetterQueue};

/// Distinct values a grouping keeps; the rest are counted under `(other)`, so a queue of
/// messages that each forged a different error costs no more memory than this.
pub const MAX_GROUPS: usize = 50;

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
    fn add(&mut self, context: Option<&FailureContext>) {
        self.scanned += 1;
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
                counts.add(context.as_ref());
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
