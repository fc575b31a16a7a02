//! Many publishes at once from one task, each message's result kept.

use std::future::Future;

use futures_util::StreamExt as _;

use crate::PublishError;

/// Runs `publishes` (the generated publishers' futures, one per message), up to `in_flight`
/// of them waiting for their confirm at once, and returns each one's result in the order
/// given. The messages are pipelined on the publisher's channel and their confirms awaited
/// together, where awaiting each publish before the next waits a round trip per message. A
/// failed publish (invalid, unroutable, unconfirmed) does not stop the others: its result
/// says what became of it. A publish is only started once its turn comes, so a long iterator
/// costs no more memory than `in_flight` publishes.
///
/// ```
/// use warren_runtime::{PublishError, publish_all};
/// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # runtime.block_on(async {
/// // In a service, one generated publish per message:
/// // `orders.iter().map(|order| publishers.place_order("eu", order, &headers))`.
/// let publishes = (0..3).map(|_| async { Ok::<(), PublishError>(()) });
/// let results = publish_all(publishes, 1000).await;
/// assert_eq!(results.len(), 3);
/// assert!(results.iter().all(Result::is_ok));
/// # });
/// ```
pub async fn publish_all<F>(
    publishes: impl IntoIterator<Item = F>,
    in_flight: usize,
) -> Vec<Result<(), PublishError>>
where
    F: Future<Output = Result<(), PublishError>>,
{
    futures_util::stream::iter(publishes)
        .buffered(in_flight.max(1))
        .collect()
        .await
}
