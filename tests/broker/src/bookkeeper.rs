//! The ledger's handler (`contracts/ledger/`): one effect row per entry, written through the
//! inbox's transaction, one entry at a time or a batch at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use warren_runtime::inbox::{Inbox, InboxTransaction};
use warren_runtime::{Delivery, HandlerError};

use crate::database::TestDatabase;
use crate::ledger::consumers::{Apply, ApplyBatch};
use crate::ledger::types::Entry;

/// Writes each entry's effect into table `effects`; an entry with `fail_first` fails after
/// its write on its first attempt, so that write is rolled back and made again.
pub struct Bookkeeper<DB: TestDatabase> {
    /// The inbox the entries are recorded in.
    pub inbox: Inbox<DB>,
    /// The effects table.
    pub effects: String,
    /// How often an effect was written (and committed or rolled back).
    pub written: Arc<AtomicUsize>,
}

impl<DB: TestDatabase> Clone for Bookkeeper<DB> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            effects: self.effects.clone(),
            written: self.written.clone(),
        }
    }
}

impl<DB: TestDatabase> Bookkeeper<DB> {
    /// A bookkeeper recording in `inbox` and writing into table `effects`, nothing written yet.
    pub fn new(inbox: Inbox<DB>, effects: &str) -> Self {
        Self {
            inbox,
            effects: effects.to_owned(),
            written: Arc::default(),
        }
    }

    /// The generated handlers of the ledger: this bookkeeper for both consumers.
    pub fn handlers(&self) -> crate::ledger::Handlers<Self, Self> {
        crate::ledger::Handlers {
            apply: self.clone(),
            apply_batch: self.clone(),
        }
    }

    async fn write(
        &self,
        delivery: &Delivery<Entry>,
        transaction: &mut InboxTransaction<DB>,
    ) -> Result<(), HandlerError> {
        let attempt = i64::from(delivery.retry_count());
        let entry = delivery.payload();
        DB::insert_effect(&mut **transaction, &self.effects, &entry.id, attempt).await?;
        self.written.fetch_add(1, Ordering::SeqCst);
        if entry.fail_first == Some(true) && attempt == 0 {
            return Err(HandlerError::retryable("failed after its write"));
        }
        Ok(())
    }
}

impl<DB: TestDatabase> Apply for Bookkeeper<DB> {
    type Database = DB;

    fn inbox(&self) -> Inbox<DB> {
        self.inbox.clone()
    }

    async fn handle(
        &self,
        delivery: Delivery<Entry>,
        transaction: &mut InboxTransaction<DB>,
    ) -> Result<(), HandlerError> {
        self.write(&delivery, transaction).await
    }
}

impl<DB: TestDatabase> ApplyBatch for Bookkeeper<DB> {
    type Database = DB;

    fn inbox(&self) -> Inbox<DB> {
        self.inbox.clone()
    }

    async fn handle_batch(
        &self,
        batch: Vec<Delivery<Entry>>,
        transaction: &mut InboxTransaction<DB>,
    ) -> Result<(), HandlerError> {
        for delivery in &batch {
            self.write(delivery, transaction).await?;
        }
        Ok(())
    }
}
