//! Consumers whose handlers write through the inbox's transaction: what the generated traits
//! of `inbox: true` consumers are adapted to. The inbox opens the transaction, records the
//! message (each of a batch), hands the transaction to the handler, and commits.

use std::future::Future;

use super::{Inbox, InboxConsumer, InboxTransaction, Recorded};
use crate::database::Backend;
use crate::model::{BatchSpec, ConsumerSpec};
use crate::worker::{BatchHandler, Handler};
use crate::{Delivery, HandlerError, Message, Worker};

/// Handles messages `M` inside the inbox's transaction, in which each was recorded first.
pub trait InboxHandler<M: Message>: Send + Sync + 'static {
    /// The database: `sqlx::Postgres` or `sqlx::Sqlite`.
    type Database: Backend;

    /// The inbox the messages are recorded in; asked once, when the consumer is registered.
    fn inbox(&self) -> Inbox<Self::Database>;

    /// Handles one delivery, writing its effects through `transaction`.
    fn handle<'a>(
        &'a self,
        delivery: Delivery<M::Payload, M::Headers>,
        transaction: &'a mut InboxTransaction<Self::Database>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send + 'a;
}

/// Handles batches of messages `M` inside one inbox transaction, in which every member was
/// recorded first.
pub trait InboxBatchHandler<M: Message>: Send + Sync + 'static {
    /// The database: `sqlx::Postgres` or `sqlx::Sqlite`.
    type Database: Backend;

    /// The inbox the messages are recorded in; asked once, when the consumer is registered.
    fn inbox(&self) -> Inbox<Self::Database>;

    /// Handles the members of a batch not handled before, writing their effects through
    /// `transaction`.
    fn handle_batch<'a>(
        &'a self,
        batch: Vec<Delivery<M::Payload, M::Headers>>,
        transaction: &'a mut InboxTransaction<Self::Database>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send + 'a;
}

/// `handler` with the inbox of its consumer.
struct Inboxed<H, DB: Backend> {
    handler: H,
    inbox: InboxConsumer<DB>,
}

impl<M: Message, H: InboxHandler<M>> Handler<M> for Inboxed<H, H::Database> {
    async fn handle(&self, delivery: Delivery<M::Payload, M::Headers>) -> Result<(), HandlerError> {
        let mut transaction = self.inbox.begin().await?;
        if self.inbox.record(&mut transaction, &delivery).await? == Recorded::Before {
            return Ok(());
        }
        self.handler.handle(delivery, &mut transaction).await?;
        transaction.commit().await?;
        Ok(())
    }
}

impl<M: Message, H: InboxBatchHandler<M>> BatchHandler<M> for Inboxed<H, H::Database> {
    async fn handle_batch(
        &self,
        batch: Vec<Delivery<M::Payload, M::Headers>>,
    ) -> Result<(), HandlerError> {
        let mut transaction = self.inbox.begin().await?;
        let mut new = Vec::with_capacity(batch.len());
        for delivery in batch {
            if self.inbox.record(&mut transaction, &delivery).await? == Recorded::New {
                new.push(delivery);
            }
        }
        if !new.is_empty() {
            self.handler.handle_batch(new, &mut transaction).await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    /// A member without a key is dead-lettered alone, before the batch is formed.
    fn admit(&self, delivery: &Delivery<M::Payload, M::Headers>) -> Result<(), HandlerError> {
        self.inbox.key(delivery).map(drop)
    }
}

/// Adds consumer `spec` to `worker`, handling each delivery in the inbox `handler` names,
/// keyed by message id or else the payload value at `key_pointer`: what the generated
/// `consumers::register` functions of an `inbox: true` consumer call
/// (`warren_runtime::codegen::add_inbox`); not a stable API.
pub fn add_inbox<M: Message, H: InboxHandler<M>>(
    worker: &mut Worker,
    message: M,
    spec: ConsumerSpec,
    key_pointer: Option<&str>,
    handler: H,
) {
    let inbox = inboxed(handler.inbox(), spec.name, key_pointer);
    let handler = crate::worker::Erased::new(Inboxed { handler, inbox });
    crate::worker::add(worker, message, spec, handler);
}

/// [`add_inbox`] for a batch consumer: a batch's members are recorded, and their effects
/// written, in one transaction (`warren_runtime::codegen::add_inbox_batch`); not a stable API.
pub fn add_inbox_batch<M: Message, H: InboxBatchHandler<M>>(
    worker: &mut Worker,
    message: M,
    spec: ConsumerSpec,
    batch: BatchSpec,
    key_pointer: Option<&str>,
    handler: H,
) {
    let inbox = inboxed(handler.inbox(), spec.name, key_pointer);
    crate::worker::add_batch(worker, message, spec, batch, Inboxed { handler, inbox });
}

fn inboxed<DB: Backend>(
    inbox: Inbox<DB>,
    consumer: &str,
    key_pointer: Option<&str>,
) -> InboxConsumer<DB> {
    let consumer = inbox.consumer(consumer);
    match key_pointer {
        Some(pointer) => consumer.key_pointer(pointer),
        None => consumer,
    }
}
