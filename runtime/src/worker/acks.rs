//! Coalescing the acks of one consuming channel: one `basic.ack(multiple=true)` for many
//! handled deliveries, as a hand-tuned consumer would, without ever acking one that is
//! still in flight.
//!
//! A multiple ack of tag `T` acknowledges every outstanding delivery up to `T` on the
//! channel. So the coalescer tracks the deliveries in flight (received, not yet settled):
//! acks below the lowest of them go out as one multiple ack; acks above it (a slow handler
//! holds a lower tag) go out one by one. Nothing waits longer than [`LINGER`], or past a
//! quarter of the prefetch window, so coalescing never starves the consumer of deliveries.
//! A delivery settled any other way (reject, nack) leaves the in-flight set only once that
//! frame is sent, so no multiple ack can overtake it.

use std::collections::BTreeSet;
use std::time::Duration;

use lapin::options::BasicAckOptions;
use tokio::sync::{mpsc, oneshot};

/// The longest an ack waits for company.
const LINGER: Duration = Duration::from_millis(5);
/// The most acks coalesced into one.
const MAX_BATCH: usize = 64;

enum Event {
    /// A delivery was received.
    Delivered(u64),
    /// A delivery was handled: ack it.
    Ack(u64),
    /// A delivery was settled some other way, and that frame was sent.
    Settled(u64),
    /// Send everything pending, then answer.
    Flush(oneshot::Sender<()>),
}

/// The handle to one channel's coalescer; cheap to clone. The coalescer stops when every
/// handle is dropped, after sending what is pending.
#[derive(Clone)]
pub(super) struct Acks {
    events: mpsc::UnboundedSender<Event>,
}

impl Acks {
    /// A coalescer acking on `channel`, whose consumer has prefetch `prefetch`.
    pub fn start(channel: lapin::Channel, prefetch: u16, consumer: &'static str) -> Self {
        let (events, receiver) = mpsc::unbounded_channel();
        let batch = (usize::from(prefetch) / 4).clamp(1, MAX_BATCH);
        tokio::spawn(run(channel, receiver, batch, consumer));
        Self { events }
    }

    /// Records a received delivery, before anything can settle it.
    pub fn delivered(&self, tag: u64) {
        let _ = self.events.send(Event::Delivered(tag));
    }

    /// Acknowledges a handled delivery (soon, perhaps with others).
    pub fn ack(&self, tag: u64) {
        let _ = self.events.send(Event::Ack(tag));
    }

    /// Records a delivery settled by a reject or nack that has been sent.
    pub fn settled(&self, tag: u64) {
        let _ = self.events.send(Event::Settled(tag));
    }

    /// Sends every pending ack now, and waits until they are handed to the connection.
    pub async fn flush(&self) {
        let (done, sent) = oneshot::channel();
        if self.events.send(Event::Flush(done)).is_ok() {
            let _ = sent.await;
        }
    }
}

/// A delivery with the coalescer of the channel it came on: it is settled through that
/// channel and no other.
pub(super) struct Taken {
    pub raw: lapin::message::Delivery,
    pub acks: Acks,
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

async fn run(
    channel: lapin::Channel,
    mut events: mpsc::UnboundedReceiver<Event>,
    batch: usize,
    consumer: &'static str,
) {
    let mut pending = Pending {
        in_flight: BTreeSet::new(),
        acks: Vec::new(),
    };
    let mut linger_until = None;
    loop {
        let event = match linger_until {
            Some(deadline) => match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(event) => event,
                Err(_) => {
                    send(&channel, &mut pending, consumer).await;
                    linger_until = None;
                    continue;
                }
            },
            None => events.recv().await,
        };
        match event {
            Some(Event::Delivered(tag)) => {
                pending.in_flight.insert(tag);
            }
            Some(Event::Ack(tag)) => {
                pending.in_flight.remove(&tag);
                pending.acks.push(tag);
                linger_until.get_or_insert_with(|| tokio::time::Instant::now() + LINGER);
            }
            Some(Event::Settled(tag)) => {
                pending.in_flight.remove(&tag);
            }
            Some(Event::Flush(done)) => {
                send(&channel, &mut pending, consumer).await;
                linger_until = None;
                let _ = done.send(());
            }
            None => {
                send(&channel, &mut pending, consumer).await;
                return;
            }
        }
        if pending.acks.len() >= batch {
            send(&channel, &mut pending, consumer).await;
            linger_until = None;
        }
    }
}

async fn send(channel: &lapin::Channel, pending: &mut Pending, consumer: &'static str) {
    let (multiple, singles) = pending.take();
    let acks = multiple
        .map(|tag| (tag, true))
        .into_iter()
        .chain(singles.into_iter().map(|tag| (tag, false)));
    for (tag, multiple) in acks {
        if let Err(error) = channel.basic_ack(tag, BasicAckOptions { multiple }).await {
            // The channel is gone; the broker redelivers whatever it had not seen acked.
            tracing::info!(consumer, %error, "acks not sent: the channel closed; the broker redelivers those messages");
            return;
        }
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
