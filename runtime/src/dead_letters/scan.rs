//! One pass over a dead-letter queue: `basic.get` with manual acknowledgements on a channel of
//! its own, so that whatever is not acknowledged returns to the queue when the channel closes
//! (by [`Scan::release`], or by the broker when the process dies).

use lapin::Channel;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicGetOptions, QueueDeclareOptions, QueuePurgeOptions};
use lapin::types::{FieldTable, ShortString};

use super::{DeadLetterError, DeadLetterQueue};

pub(super) struct Scan<'a> {
    queue: &'a DeadLetterQueue,
    channel: Channel,
    depth: u32,
}

impl<'a> Scan<'a> {
    /// A channel on `queue`, and its depth now (ready messages; `NOT_FOUND` when the queue
    /// does not exist, which a passive declare never creates).
    pub(super) async fn open(queue: &'a DeadLetterQueue) -> Result<Self, DeadLetterError> {
        let channel = queue
            .connection
            .create_channel()
            .await
            .map_err(|e| queue.broker(e))?;
        let declared = channel
            .queue_declare(
                ShortString::from(queue.name.as_str()),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| queue.broker(e))?;
        Ok(Self {
            queue,
            channel,
            depth: declared.message_count(),
        })
    }

    /// Ready messages when the scan began: how many a pass reads at most, so that messages
    /// it moves to the back (or that arrive meanwhile) are not read twice.
    pub(super) fn depth(&self) -> u32 {
        self.depth
    }

    /// The next message, held unacknowledged; `None` when none is ready.
    pub(super) async fn next(&self) -> Result<Option<Delivery>, DeadLetterError> {
        let got = self
            .channel
            .basic_get(
                ShortString::from(self.queue.name.as_str()),
                BasicGetOptions { no_ack: false },
            )
            .await
            .map_err(|e| self.queue.broker(e))?;
        Ok(got.map(|message| message.delivery))
    }

    /// Acknowledges one message: only once it was handed on (confirmed elsewhere).
    pub(super) async fn ack(&self, delivery_tag: u64) -> Result<(), DeadLetterError> {
        self.channel
            .basic_ack(delivery_tag, BasicAckOptions { multiple: false })
            .await
            .map_err(|e| self.queue.broker(e))
    }

    /// Deletes every ready message of the queue, returning how many.
    pub(super) async fn purge(&self) -> Result<u32, DeadLetterError> {
        self.channel
            .queue_purge(
                ShortString::from(self.queue.name.as_str()),
                QueuePurgeOptions::default(),
            )
            .await
            .map_err(|e| self.queue.broker(e))
    }

    /// Closes the channel: the broker returns every message still unacknowledged to the
    /// queue (marked `redelivered`).
    pub(super) async fn release(self) -> Result<(), DeadLetterError> {
        self.channel
            .close(200, ShortString::from("done"))
            .await
            .map_err(|e| self.queue.broker(e))
    }
}
