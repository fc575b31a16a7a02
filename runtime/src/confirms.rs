//! Publishing on a confirm-mode channel, each message told its own outcome.
//!
//! RabbitMQ returns an unroutable `mandatory` message (`basic.return`) and then confirms it,
//! often in one `multiple` ack with routed messages, or in the ack of another message that
//! follows the return. lapin hands each returned message to the next confirm it resolves
//! (within a `multiple` ack, in no set order), so with several publishes in flight an
//! unroutable message was told it had been delivered, and was gone, while a routed one was
//! told it had not (measured: 10 of 1,500 pipelined publishes).
//!
//! So one task per channel, its [`Collector`], awaits every confirm of the channel and
//! collects the returned message any of them carries; a message is unroutable when a
//! returned message is its own, by content. A return arrives before its own message's
//! confirm, so it was handed to a confirm resolved no later than that one: once every
//! publish that had begun by then has handed its confirm over, and the collector has taken
//! in all those that are resolved, the verdict is sure. That costs a publish the time its
//! neighbours take to write their frames, not a confirm round.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future as _;
use std::hash::{BuildHasher, RandomState};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures_util::FutureExt as _;
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use lapin::message::BasicReturnMessage;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation, PublisherConfirm};
use tokio::sync::{mpsc, oneshot};

use crate::sync::lock;

/// What the broker did with one published message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Confirmed, and routed to at least one queue (or not `mandatory`).
    Routed,
    /// Confirmed, and returned: no queue took it.
    Returned,
    /// Refused (`basic.nack`), or not confirmed at all.
    Nacked,
}

/// A channel in confirm mode with the collector of its confirms. Cheap to clone: clones
/// share both; the collector ends once the last clone is gone and its confirms are in.
#[derive(Clone)]
pub(crate) struct ConfirmChannel {
    channel: Channel,
    ledger: Arc<Ledger>,
    handover: mpsc::UnboundedSender<Handed>,
}

impl ConfirmChannel {
    /// Opens a channel on `connection`, selects publisher confirms on it and starts its
    /// collector.
    pub(crate) async fn open(connection: &lapin::Connection) -> Result<Self, lapin::Error> {
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let ledger = Arc::new(Ledger::default());
        let (handover, handed) = mpsc::unbounded_channel();
        tokio::spawn(Collector::new(ledger.clone(), handed).run());
        Ok(Self {
            channel,
            ledger,
            handover,
        })
    }

    /// The channel itself.
    pub(crate) fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Publishes `body` with `properties` to `exchange` with `routing_key` and waits for the
    /// broker's verdict on this message. `sent` runs once the message is written, before its
    /// confirm is awaited.
    pub(crate) async fn publish(
        &self,
        (exchange, routing_key): (&str, &str),
        mandatory: bool,
        body: &[u8],
        properties: BasicProperties,
        sent: impl FnOnce(),
    ) -> Result<Outcome, lapin::Error> {
        // Only a `mandatory` message can be returned, and it is known by its fingerprint.
        let fingerprint =
            mandatory.then(|| (self.ledger).fingerprint(exchange, routing_key, body, &properties));
        let options = BasicPublishOptions {
            mandatory,
            ..BasicPublishOptions::default()
        };
        let mut publish = pin!(self.channel.basic_publish(
            ShortString::from(exchange),
            ShortString::from(routing_key),
            options,
            body,
            properties,
        ));
        // lapin numbers a publish (its delivery tag) and queues its frames synchronously, at
        // the first poll: polled under the ledger's lock, so the ledger numbers publishes in
        // lapin's order.
        let (mut begun, first) = std::future::poll_fn(|cx| {
            let mut unhanded = lock(&self.ledger.unhanded);
            let first = publish.as_mut().poll(cx);
            Poll::Ready((Begun::register(&self.ledger, &mut unhanded), first))
        })
        .await;
        let written = match first {
            Poll::Ready(written) => written,
            Poll::Pending => publish.await,
        };
        let (reply, verdict) = oneshot::channel();
        let handed = Handed {
            confirm: written?,
            pending: Pending {
                number: begun.number,
                fingerprint,
                reply,
            },
        };
        // The collector answers every confirm it is handed, even one whose channel closed;
        // it is gone only with the runtime.
        let gone = || {
            lapin::Error::from(std::io::Error::other(
                "the channel's confirm collector is gone",
            ))
        };
        self.handover.send(handed).map_err(|_| gone())?;
        begun.handed = true;
        sent();
        verdict.await.map_err(|_| gone())?
    }
}

/// What publishes and the collector share: the numbering, and which publishes have begun
/// without handing their confirm over yet.
#[derive(Default)]
struct Ledger {
    /// The number the next publish gets, and the publishes begun and not yet handed over.
    unhanded: Mutex<Unhanded>,
    /// The keys of the fingerprints: the channel's own, so no one can aim at a collision.
    hasher: RandomState,
}

#[derive(Default)]
struct Unhanded {
    next: u64,
    numbers: BTreeSet<u64>,
}

impl Ledger {
    /// What identifies a message among those in flight: where it goes, its body and ids.
    fn fingerprint(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: &BasicProperties,
    ) -> u64 {
        let ids = (
            properties.message_id().as_ref().map(ShortString::as_str),
            properties
                .correlation_id()
                .as_ref()
                .map(ShortString::as_str),
        );
        self.hasher.hash_one((exchange, routing_key, body, ids))
    }

    /// The fingerprint of a returned message: that of the publish it was.
    fn fingerprint_of(&self, message: &BasicReturnMessage) -> u64 {
        let delivery = &message.delivery;
        self.fingerprint(
            delivery.exchange.as_str(),
            delivery.routing_key.as_str(),
            &delivery.data,
            &delivery.properties,
        )
    }

    /// The number of the last publish begun (0 before any).
    fn last(&self) -> u64 {
        lock(&self.unhanded).next.saturating_sub(1)
    }
}

/// A publish begun and not handed over: dropped so (its caller gave up before the frames
/// were written), it no longer holds verdicts up.
struct Begun {
    ledger: Arc<Ledger>,
    number: u64,
    handed: bool,
}

impl Begun {
    fn register(ledger: &Arc<Ledger>, unhanded: &mut Unhanded) -> Self {
        let number = unhanded.next;
        unhanded.next += 1;
        unhanded.numbers.insert(number);
        Self {
            ledger: ledger.clone(),
            number,
            handed: false,
        }
    }
}

impl Drop for Begun {
    fn drop(&mut self) {
        // Once handed over, the collector has taken the number off.
        if !self.handed {
            lock(&self.ledger.unhanded).numbers.remove(&self.number);
        }
    }
}

/// A confirm handed to the collector, with its publish.
struct Handed {
    confirm: PublisherConfirm,
    pending: Pending,
}

/// Where a publish's verdict goes.
type Verdict = oneshot::Sender<Result<Outcome, lapin::Error>>;

/// A handed-over confirm being awaited, with its publish's number, fingerprint and verdict.
type Resolving = Pin<Box<dyn Future<Output = (Pending, lapin::Result<Confirmation>)> + Send>>;

/// A publish whose confirm the collector awaits.
struct Pending {
    number: u64,
    fingerprint: Option<u64>,
    reply: Verdict,
}

/// A confirm acked whose verdict (routed or returned) waits until no publish that could hold
/// its return is left untaken.
struct Waiting {
    fingerprint: u64,
    /// The last publish begun when it was taken in: every publish up to it must be handed
    /// over (and taken in, if resolved) first.
    horizon: u64,
    reply: Verdict,
}

/// The one task that awaits a channel's confirms and gives each publish its verdict.
struct Collector {
    ledger: Arc<Ledger>,
    handed: mpsc::UnboundedReceiver<Handed>,
    resolving: FuturesUnordered<Resolving>,
    /// The publishes handed over and not yet resolved.
    unresolved: BTreeSet<u64>,
    /// Resolved, in the order they were taken in (so their horizons never decrease).
    waiting: VecDeque<Waiting>,
    /// Resolved carrying another's return: their own may go to a confirm resolved after
    /// them, so every publish up to their horizon must be resolved before they wait as the
    /// others do, with a new horizon.
    second_round: Vec<Waiting>,
    /// Returned messages not yet claimed by their publish, by fingerprint: how many.
    returned: HashMap<u64, usize>,
}

impl Collector {
    fn new(ledger: Arc<Ledger>, handed: mpsc::UnboundedReceiver<Handed>) -> Self {
        Self {
            ledger,
            handed,
            resolving: FuturesUnordered::new(),
            unresolved: BTreeSet::new(),
            waiting: VecDeque::new(),
            second_round: Vec::new(),
            returned: HashMap::new(),
        }
    }

    async fn run(mut self) {
        let mut open = true;
        loop {
            tokio::select! {
                handed = self.handed.recv(), if open => match handed {
                    Some(handed) => self.take(handed),
                    None => open = false,
                },
                Some((pending, confirmation)) = self.resolving.next(), if !self.resolving.is_empty() => {
                    self.resolved(pending, confirmation);
                }
                else => return,
            }
            self.drain();
            self.give_verdicts();
        }
    }

    /// Takes in whatever is ready without waiting: confirms handed over and resolved. A
    /// confirm resolved before another was woken first, and one handed over late is polled
    /// as it joins; so at the end, every confirm resolved by then is taken in.
    fn drain(&mut self) {
        loop {
            let mut progress = false;
            while let Ok(handed) = self.handed.try_recv() {
                self.take(handed);
                progress = true;
            }
            while let Some(Some((pending, confirmation))) = self.resolving.next().now_or_never() {
                self.resolved(pending, confirmation);
                progress = true;
            }
            if !progress {
                return;
            }
        }
    }

    fn take(&mut self, handed: Handed) {
        let Handed { confirm, pending } = handed;
        lock(&self.ledger.unhanded).numbers.remove(&pending.number);
        self.unresolved.insert(pending.number);
        self.resolving
            .push(Box::pin(async move { (pending, confirm.await) }));
    }

    fn resolved(&mut self, pending: Pending, confirmation: lapin::Result<Confirmation>) {
        let Pending {
            number,
            fingerprint,
            reply,
        } = pending;
        self.unresolved.remove(&number);
        let (acked, carried) = match confirmation {
            Ok(Confirmation::Ack(carried)) => (true, carried),
            Ok(Confirmation::Nack(carried)) => (false, carried),
            // Confirm mode is selected when the channel opens: never here. Not confirmed,
            // so not believed.
            Ok(Confirmation::NotRequested) => (false, None),
            Err(error) => {
                let _ = reply.send(Err(error));
                return;
            }
        };
        let carried = carried.map(|message| self.ledger.fingerprint_of(&message));
        if let Some(carried) = carried {
            *self.returned.entry(carried).or_default() += 1;
        }
        // A refused message was not taken whether or not it was also returned; one that is
        // not `mandatory` is never returned. What either carried, another's return, waits
        // for its owner.
        let fingerprint = match fingerprint {
            _ if !acked => return drop(reply.send(Ok(Outcome::Nacked))),
            None => return drop(reply.send(Ok(Outcome::Routed))),
            Some(fingerprint) => fingerprint,
        };
        let waiting = Waiting {
            fingerprint,
            horizon: self.ledger.last(),
            reply,
        };
        if carried.is_some_and(|carried| carried != fingerprint) {
            self.second_round.push(waiting);
        } else {
            self.waiting.push_back(waiting);
        }
    }

    /// Gives each waiting publish its verdict once it is sure.
    fn give_verdicts(&mut self) {
        let unhanded = lock(&self.ledger.unhanded).numbers.first().copied();
        let handed_up_to = |horizon: u64| unhanded.is_none_or(|first| first > horizon);
        let first_unresolved = self.unresolved.first().copied();
        let resolved_up_to = |horizon: u64| {
            handed_up_to(horizon) && first_unresolved.is_none_or(|first| first > horizon)
        };
        let mut index = 0;
        while index < self.second_round.len() {
            if resolved_up_to(self.second_round[index].horizon) {
                let mut waiting = self.second_round.swap_remove(index);
                waiting.horizon = self.ledger.last();
                self.waiting.push_back(waiting);
            } else {
                index += 1;
            }
        }
        // Horizons never decrease along the queue (those from the second round are the
        // latest), so the first not sure ends the verdicts.
        while self
            .waiting
            .front()
            .is_some_and(|waiting| handed_up_to(waiting.horizon))
        {
            let Some(waiting) = self.waiting.pop_front() else {
                break;
            };
            let outcome = if self.claim(waiting.fingerprint) {
                Outcome::Returned
            } else {
                Outcome::Routed
            };
            let _ = waiting.reply.send(Ok(outcome));
        }
        if self.unresolved.is_empty() && self.waiting.is_empty() && self.second_round.is_empty() {
            // A return no one claimed belongs to a publish whose caller gave up.
            self.returned.clear();
        }
    }

    /// Whether a returned message with `fingerprint` is there, taken if so.
    fn claim(&mut self, fingerprint: u64) -> bool {
        let Some(count) = self.returned.get_mut(&fingerprint) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            self.returned.remove(&fingerprint);
        }
        true
    }
}
