//! Coalescing the acks of one consuming channel: one `basic.ack(multiple=true)` for many
//! handled deliveries, as a hand-tuned consumer would, without ever acking one that is
//! still in flight.
//!
//! A multiple ack of tag `T` acknowledges every outstanding delivery up to `T` on the
//! channel. So the coalescer tracks the deliveries in flight (received, not yet settled):
//! acks below the lowest of them go out as one multiple ack; acks above it (a slow handler
//! holds a lower tag) go out one by one. Nothing waits longer than [`LINGER`], or past a
//! quarter of the prefetch window, so coalescing never starves the consumer of deliveries.
//! Handlers' tasks only record their acks; one flusher per channel sends them, woken once
//! per batch, so coalescing adds no task wake-up per message and no handler waits on it.
//! A delivery settled any other way (reject, nack) leaves the in-flight set only once that
//! frame is sent, so no multiple ack can overtake it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use lapin::options::BasicAckOptions;
use tokio::sync::Notify;

use super::work::Work;
use crate::error::Chain;
use crate::metrics::InFlight;
use crate::sync::lock;

/// The longest an ack waits for company.
const LINGER: Duration = Duration::from_millis(5);
/// The most acks coalesced into one.
const MAX_BATCH: usize = 64;
/// The longest one send of acks may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The handle to one channel's coalescer; cheap to clone. Handlers' tasks only record
/// (under a lock, no task hop per message); one flusher task per channel sends, woken once per
/// batch, so the acks leave in the order they were taken and no handler waits on a send.
#[derive(Clone)]
pub(super) struct Acks {
    inner: Arc<Inner>,
}

struct Inner {
    channel: lapin::Channel,
    pending: Mutex<Pending>,
    batch: usize,
    consumer: &'static str,
    /// Wakes the flusher when a first ack starts to linger, and when the coalescer goes.
    linger: Arc<Notify>,
    /// Wakes the flusher when a batch is full.
    full: Arc<Notify>,
    /// Taken with the acks and held while they are sent: a multiple ack must never leave
    /// before a single ack below it that was taken first, or the broker would see that tag
    /// acknowledged twice and close the channel.
    sending: tokio::sync::Mutex<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.linger.notify_one();
        self.full.notify_one();
    }
}

impl Acks {
    /// A coalescer acking on `channel`, whose consumer has prefetch `prefetch`.
    pub(super) fn start(channel: lapin::Channel, prefetch: u16, consumer: &'static str) -> Self {
        let linger = Arc::new(Notify::new());
        let full = Arc::new(Notify::new());
        let inner = Arc::new(Inner {
            channel,
            pending: Mutex::new(Pending {
                in_flight: BTreeSet::new(),
                acks: Vec::new(),
            }),
            batch: (usize::from(prefetch) / 4).clamp(1, MAX_BATCH),
            consumer,
            linger: linger.clone(),
            full: full.clone(),
            sending: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(flusher(Arc::downgrade(&inner), linger, full));
        Self { inner }
    }

    /// Records a received delivery, before anything can settle it.
    pub(super) fn delivered(&self, tag: u64) {
        lock(&self.inner.pending).in_flight.insert(tag);
    }

    /// Acknowledges a handled delivery: sent when its batch fills, or within [`LINGER`].
    pub(super) fn ack(&self, tag: u64) {
        let len = {
            let mut pending = lock(&self.inner.pending);
            pending.in_flight.remove(&tag);
            pending.acks.push(tag);
            pending.acks.len()
        };
        if len == 1 {
            self.inner.linger.notify_one();
        }
        if len >= self.inner.batch {
            self.inner.full.notify_one();
        }
    }

    /// Records a delivery settled by a reject or nack that has been sent.
    pub(super) fn settled(&self, tag: u64) {
        lock(&self.inner.pending).in_flight.remove(&tag);
    }

    /// Whether the delivery `tag` is still unsettled: received, and neither acked nor rejected.
    pub(super) fn unsettled(&self, tag: u64) -> bool {
        lock(&self.inner.pending).in_flight.contains(&tag)
    }

    /// Sends every pending ack now.
    pub(super) async fn flush(&self) {
        self.inner.flush().await;
    }
}

impl Inner {
    /// Takes what is pending and sends it, in order with every other flush.
    async fn flush(&self) {
        let _in_order = self.sending.lock().await;
        let (multiple, singles) = lock(&self.pending).take();
        let acks = multiple
            .map(|tag| (tag, true))
            .into_iter()
            .chain(singles.into_iter().map(|tag| (tag, false)));
        for (tag, multiple) in acks {
            if let Err(error) = self
                .channel
                .basic_ack(tag, BasicAckOptions { multiple })
                .await
            {
                // The channel is gone; the broker redelivers whatever it had not seen acked.
                tracing::info!(consumer = self.consumer, error = %Chain(&error), "acks not sent: the channel closed; the broker redelivers those messages");
                return;
            }
        }
    }
}

/// Sends the acks: woken by the first ack of a batch, it waits until the batch is full or
/// [`LINGER`] has passed, then sends whatever is pending. Ends with the coalescer.
async fn flusher(inner: Weak<Inner>, linger: Arc<Notify>, full: Arc<Notify>) {
    loop {
        linger.notified().await;
        let deadline = tokio::time::Instant::now() + LINGER;
        loop {
            let Some(strong) = inner.upgrade() else {
                return;
            };
            if lock(&strong.pending).acks.len() >= strong.batch {
                break;
            }
            drop(strong);
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                () = full.notified() => {}
            }
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        // Bounded: an ack queued as its channel closes may never be confirmed as written,
        // and the flusher must not keep a dead channel alive.
        let _ = tokio::time::timeout(SEND_TIMEOUT, inner.flush()).await;
    }
}

/// A delivery with the coalescer of the channel it came on: it is settled through that
/// channel and no other.
pub(super) struct Taken {
    pub raw: lapin::message::Delivery,
    pub acks: Acks,
    /// The right to run the delivery's work (its share of the consumer's concurrency),
    /// while it holds it: see [`Taken::release`].
    work: Mutex<Option<Work>>,
    /// Counts the delivery in flight in the metrics until it is dropped, settled.
    in_flight: Option<InFlight>,
}

impl Taken {
    /// `raw`, received on the channel whose coalescer is `acks`.
    pub(super) fn new(raw: lapin::message::Delivery, acks: Acks) -> Self {
        Self {
            raw,
            acks,
            work: Mutex::new(None),
            in_flight: None,
        }
    }

    /// Holds `work` (if the delivery has it yet) until the delivery is released or dropped,
    /// and `in_flight` until it is dropped.
    pub(super) fn hold(&mut self, work: Option<Work>, in_flight: InFlight) {
        self.work = Mutex::new(work);
        self.in_flight = Some(in_flight);
    }

    /// Gives the delivery's concurrency back once its handler is done and only the broker's
    /// confirm of a copy or reply is awaited: that wait is not the handler's work, and
    /// holding a permit through it would cap a consumer's retries and replies at
    /// `concurrency` per confirm round trip (a seventh of the publish rate was measured).
    /// The delivery stays unacknowledged until its copy is confirmed, so the prefetch
    /// still bounds how many wait.
    pub(super) fn release(&self) {
        drop(lock(&self.work).take());
    }
}

impl std::ops::Deref for Taken {
    type Target = lapin::message::Delivery;

    fn deref(&self) -> &Self::Target {
        &self.raw
    }
}

/// The coalescer's state.
struct Pending {
    in_flight: BTreeSet<u64>,
    acks: Vec<u64>,
}

impl Pending {
    /// The acks to send now: the multiple ack covering those below every delivery in flight,
    /// and the single acks of the others.
    fn take(&mut self) -> (Option<u64>, Vec<u64>) {
        let floor = self.in_flight.first().copied().unwrap_or(u64::MAX);
        let (below, above): (Vec<u64>, Vec<u64>) =
            self.acks.drain(..).partition(|tag| *tag < floor);
        (below.into_iter().max(), above)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_below_every_delivery_in_flight_go_out_as_one() {
        let mut pending = Pending {
            in_flight: BTreeSet::from([4, 9]),
            acks: vec![1, 3, 2, 5, 7],
        };
        assert_eq!(pending.take(), (Some(3), vec![5, 7]));
        assert!(pending.acks.is_empty());
        let mut none_in_flight = Pending {
            in_flight: BTreeSet::new(),
            acks: vec![10, 12, 11],
        };
        assert_eq!(none_in_flight.take(), (Some(12), vec![]));
    }
}
