//! Publishing on a confirm-mode channel, each message told its own outcome.
//!
//! RabbitMQ returns an unroutable `mandatory` message (`basic.return`) and then confirms it,
//! often in one `multiple` ack with routed messages, or in the ack of another message that
//! follows the return. lapin hands each returned message to the next confirm it resolves
//! (within a `multiple` ack, in no set order), so with several publishes in flight an
//! unroutable message was told it had been delivered, and was gone, while a routed one was
//! told it had not (measured: 10 of 1,500 pipelined publishes). Here every publish on the
//! channel is numbered in the order lapin numbers it, the returned message any confirm
//! carries is collected in the channel's [`Ledger`], and a message is unroutable when a
//! returned message is its own, by content. Its verdict waits until the publishes that were
//! in flight when its confirm came have reported what theirs carried: nothing for a publish
//! that was alone in flight, about one confirm round otherwise.

use std::collections::{BTreeSet, HashMap};
use std::future::Future as _;
use std::hash::{BuildHasher, RandomState};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use lapin::message::BasicReturnMessage;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation, PublisherConfirm};
use tokio::sync::Notify;

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

/// A channel in confirm mode with the ledger of its returned messages. Cheap to clone:
/// clones share both.
#[derive(Clone)]
pub(crate) struct ConfirmChannel {
    channel: Channel,
    ledger: Arc<Ledger>,
}

impl ConfirmChannel {
    /// Opens a channel on `connection` and selects publisher confirms on it.
    pub(crate) async fn open(connection: &lapin::Connection) -> Result<Self, lapin::Error> {
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Self {
            channel,
            ledger: Arc::default(),
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
        route: (&str, &str),
        mandatory: bool,
        body: &[u8],
        properties: BasicProperties,
        sent: impl FnOnce(),
    ) -> Result<Outcome, lapin::Error> {
        // Only a `mandatory` message can be returned, and it is known by its fingerprint.
        let fingerprint =
            mandatory.then(|| (self.ledger).fingerprint(route.0, route.1, body, &properties));
        let (mut entry, written) = self.write(route, mandatory, body, properties).await;
        let confirm = match written {
            Ok(confirm) => confirm,
            Err(error) => {
                entry.record(None);
                return Err(error);
            }
        };
        sent();
        let (acked, carried) = match entry.wait_for(confirm).await {
            Ok(Confirmation::Ack(carried)) => (true, carried),
            Ok(Confirmation::Nack(carried)) => (false, carried),
            // Confirm mode is selected when the channel opens: never here. Not confirmed,
            // so not believed.
            Ok(Confirmation::NotRequested) => (false, None),
            Err(error) => {
                entry.record(None);
                return Err(error);
            }
        };
        let carried = carried.map(|message| self.ledger.fingerprint_of(&message));
        let horizon = entry.record(carried);
        let returned = match fingerprint {
            Some(fingerprint) => {
                self.returned(&mut entry, fingerprint, carried, horizon)
                    .await
            }
            // Never returned; what it carried, another's return, is recorded for its owner.
            None => {
                entry.decided();
                false
            }
        };
        Ok(match (acked, returned) {
            (false, _) => Outcome::Nacked,
            (true, true) => Outcome::Returned,
            (true, false) => Outcome::Routed,
        })
    }

    /// Sends the message: its entry in the ledger, and its confirm once its frames are written.
    async fn write(
        &self,
        (exchange, routing_key): (&str, &str),
        mandatory: bool,
        body: &[u8],
        properties: BasicProperties,
    ) -> (Entry, Result<PublisherConfirm, lapin::Error>) {
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
        let (entry, first) = std::future::poll_fn(|cx| {
            let mut state = lock(&self.ledger.state);
            let first = publish.as_mut().poll(cx);
            Poll::Ready((Entry::register(&self.ledger, &mut state), first))
        })
        .await;
        let written = match first {
            Poll::Ready(written) => written,
            Poll::Pending => publish.await,
        };
        (entry, written)
    }

    /// Whether the message of `entry`, known by `fingerprint`, was returned. Its confirm
    /// carried `carried` and was recorded when the last publish registered was `horizon`.
    async fn returned(
        &self,
        entry: &mut Entry,
        fingerprint: u64,
        carried: Option<u64>,
        horizon: u64,
    ) -> bool {
        // Its return, if any, arrived before its confirm: handed to a confirm resolved before
        // this one, all of them numbered up to the horizon.
        self.ledger.until_recorded(horizon).await;
        if carried.is_some_and(|carried| carried != fingerprint) {
            // It carried another's return, so its own may have been handed to a confirm
            // resolved after it; by the time those up to the horizon were resolved, it had been
            // handed to one of the publishes in flight then.
            let last = lock(&self.ledger.state).last();
            self.ledger.until_recorded(last).await;
        }
        entry.claim(fingerprint)
    }
}

/// The publishes in flight on one channel and the returned messages their confirms carried.
#[derive(Default)]
struct Ledger {
    state: Mutex<State>,
    /// Woken whenever a publish records what its confirm carried.
    recorded: Notify,
    /// The keys of the fingerprints: the channel's own, so no one can aim at a collision.
    hasher: RandomState,
}

#[derive(Default)]
struct State {
    /// The number the next publish gets.
    next: u64,
    /// Publishes whose confirm has not been recorded yet.
    unrecorded: BTreeSet<u64>,
    /// Publishes recorded whose verdict is not given yet.
    deciding: usize,
    /// Returned messages not yet claimed by their publish, by fingerprint: how many.
    returned: HashMap<u64, usize>,
}

impl State {
    /// The number of the last publish registered, or 0.
    fn last(&self) -> u64 {
        self.next.saturating_sub(1)
    }
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

    /// Waits until every publish numbered up to `horizon` has recorded its confirm.
    async fn until_recorded(&self, horizon: u64) {
        loop {
            let recorded = self.recorded.notified();
            if lock(&self.state)
                .unrecorded
                .range(..=horizon)
                .next()
                .is_none()
            {
                return;
            }
            recorded.await;
        }
    }
}

/// One publish's place in the ledger, from its first poll to its verdict. Dropped before its
/// confirm is recorded (its caller gave up waiting), it still records what the confirm
/// carries, which may be another publish's return.
struct Entry {
    ledger: Arc<Ledger>,
    number: u64,
    /// The confirm while it is awaited.
    confirm: Option<PublisherConfirm>,
    recorded: bool,
    decided: bool,
}

impl Entry {
    fn register(ledger: &Arc<Ledger>, state: &mut State) -> Self {
        let number = state.next;
        state.next += 1;
        state.unrecorded.insert(number);
        Self {
            ledger: ledger.clone(),
            number,
            confirm: None,
            recorded: false,
            decided: false,
        }
    }

    /// Awaits `confirm`, held here so that dropping this entry hands it on.
    async fn wait_for(&mut self, confirm: PublisherConfirm) -> lapin::Result<Confirmation> {
        let confirm = self.confirm.insert(confirm);
        let confirmation = confirm.await;
        self.confirm = None;
        confirmation
    }

    /// Records the returned message the confirm carried (its fingerprint), and returns the
    /// number of the last publish registered now: every publish that could have been handed
    /// this one's return before its confirm was resolved is numbered up to there.
    fn record(&mut self, carried: Option<u64>) -> u64 {
        let last = {
            let mut state = lock(&self.ledger.state);
            if let Some(carried) = carried {
                *state.returned.entry(carried).or_default() += 1;
            }
            state.unrecorded.remove(&self.number);
            state.deciding += 1;
            state.last()
        };
        self.recorded = true;
        self.ledger.recorded.notify_waiters();
        last
    }

    /// Whether a returned message with `fingerprint` is there, taken if so: the verdict.
    fn claim(&mut self, fingerprint: u64) -> bool {
        let claimed = {
            let mut state = lock(&self.ledger.state);
            match state.returned.get_mut(&fingerprint) {
                Some(count) => {
                    *count -= 1;
                    if *count == 0 {
                        state.returned.remove(&fingerprint);
                    }
                    true
                }
                None => false,
            }
        };
        self.decided();
        claimed
    }

    /// Its verdict is given: it no longer needs the returned messages.
    fn decided(&mut self) {
        self.decided = true;
        settle(&mut lock(&self.ledger.state));
    }
}

/// Once nothing is in flight or being decided, a returned message no one claimed belongs to
/// a publish whose caller gave up: forgotten, so the ledger holds only what is in flight.
fn settle(state: &mut State) {
    state.deciding = state.deciding.saturating_sub(1);
    if state.unrecorded.is_empty() && state.deciding == 0 {
        state.returned.clear();
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if self.recorded {
            if !self.decided {
                settle(&mut lock(&self.ledger.state));
            }
            return;
        }
        let Some(confirm) = self.confirm.take() else {
            // Dropped before its frames were written, its confirm went with it (lapin keeps
            // what that carries for `wait_for_confirms`): nothing is left to wait for.
            self.record(None);
            settle(&mut lock(&self.ledger.state));
            return;
        };
        let mut orphan = Self {
            ledger: self.ledger.clone(),
            number: self.number,
            confirm: None,
            recorded: false,
            decided: true,
        };
        self.recorded = true;
        let record = async move {
            let carried = match confirm.await {
                Ok(Confirmation::Ack(Some(message)) | Confirmation::Nack(Some(message))) => {
                    Some(orphan.ledger.fingerprint_of(&message))
                }
                _ => None,
            };
            orphan.record(carried);
            settle(&mut lock(&orphan.ledger.state));
        };
        // Without a runtime (it is shutting down) the orphan records nothing carried as it
        // drops with the future.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn(record));
        }
    }
}
