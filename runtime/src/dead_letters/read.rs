//! `read` and `take`: dead letters whole, as the broker delivers them, left in the queue or
//! taken out of it. `peek` and the test kit read through these.

use lapin::message::Delivery;

use super::scan::Scan;
use super::{DeadLetterError, DeadLetterQueue};

impl DeadLetterQueue {
    /// Up to `n` of the first dead letters, whole (every header, property and byte of the
    /// body), left in the queue: each is held in memory until the read ends.
    ///
    /// They are read unacknowledged and returned when the read ends (the channel is closed;
    /// should the process die first, the broker returns them all the same): nothing is lost.
    /// Returned messages carry `redelivered`, and on a classic queue may come back in another
    /// order. Only the messages ready when the read began are read, so `n` past the depth
    /// stops there rather than meeting the ones it returned.
    pub async fn read(&self, n: usize) -> Result<Vec<Delivery>, DeadLetterError> {
        let scan = Scan::open(self).await?;
        let read = first(&scan, n, Keep::Leave).await;
        let released = scan.release().await;
        read.and_then(|read| released.map(|()| read))
    }

    /// Takes up to `n` of the first dead letters out of the queue, whole: each is
    /// acknowledged as it is read, so once this returns they are gone from the broker and
    /// held only by the caller (a process that dies before it used them has lost them). For
    /// tests and for tools that hand dead letters on themselves; to move them back to their
    /// queues, [`redrive`](Self::redrive) confirms each copy before it acknowledges.
    pub async fn take(&self, n: usize) -> Result<Vec<Delivery>, DeadLetterError> {
        let scan = Scan::open(self).await?;
        let taken = first(&scan, n, Keep::Take).await;
        let released = scan.release().await;
        taken.and_then(|taken| released.map(|()| taken))
    }
}

/// Whether a read leaves what it read in the queue.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Leave,
    Take,
}

/// Up to `n` of the messages ready when `scan` opened, each acknowledged when `keep` takes.
async fn first(scan: &Scan<'_>, n: usize, keep: Keep) -> Result<Vec<Delivery>, DeadLetterError> {
    let wanted = n.min(usize::try_from(scan.depth()).unwrap_or(usize::MAX));
    let mut read = Vec::with_capacity(wanted.min(super::MAX_PEEK));
    while read.len() < wanted {
        let Some(delivery) = scan.next().await? else {
            break;
        };
        if keep == Keep::Take {
            scan.ack(delivery.delivery_tag).await?;
        }
        read.push(delivery);
    }
    Ok(read)
}
