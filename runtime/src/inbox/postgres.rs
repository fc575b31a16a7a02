//! The inbox's statements on PostgreSQL. The table name is checked to be a plain identifier
//! before it is written into them ([`is_identifier`]); every value is a bound parameter.

use std::time::Duration;

use sqlx::{PgConnection, PgPool};

use super::InboxError;

/// PostgreSQL's longest identifier (`NAMEDATALEN - 1`).
const MAX_IDENTIFIER: usize = 63;

/// Whether `name` is safe to write into a statement unquoted: lowercase ASCII letters,
/// digits and `_`, not starting with a digit, at most 63 bytes.
pub(super) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    first_ok
        && name.len() <= MAX_IDENTIFIER
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The inbox's statements for one table, written once when the table is chosen rather than
/// on every message.
#[derive(Debug)]
pub(super) struct Statements {
    create_table: String,
    create_index: String,
    insert: String,
    prune: String,
}

impl Statements {
    /// The statements on `table`, which must be a plain identifier ([`is_identifier`]).
    pub(super) fn on(table: &str) -> Self {
        Self {
            create_table: format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    consumer TEXT NOT NULL,
                    message_key TEXT NOT NULL,
                    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                    PRIMARY KEY (consumer, message_key)
                )"
            ),
            // Pruning reads `recorded_at`.
            create_index: format!(
                "CREATE INDEX IF NOT EXISTS {table}_recorded_at ON {table} (recorded_at)"
            ),
            insert: format!(
                "INSERT INTO {table} (consumer, message_key) VALUES ($1, $2) ON CONFLICT DO NOTHING"
            ),
            prune: format!(
                "DELETE FROM {table} WHERE recorded_at < now() - $1::double precision * interval '1 second'"
            ),
        }
    }

    /// Creates the table and its index unless they exist.
    pub(super) async fn migrate(&self, pool: &PgPool) -> Result<(), InboxError> {
        sqlx::query(&self.create_table).execute(pool).await?;
        sqlx::query(&self.create_index).execute(pool).await?;
        Ok(())
    }

    /// Records (`consumer`, `key`) in the transaction `tx`; `false` when it was recorded
    /// already. A concurrent transaction recording the same key makes this wait for its
    /// outcome: `false` once it commits, `true` if it rolls back.
    pub(super) async fn record(
        &self,
        tx: &mut PgConnection,
        consumer: &str,
        key: &str,
    ) -> Result<bool, sqlx::Error> {
        let inserted = sqlx::query(&self.insert)
            .bind(consumer)
            .bind(key)
            .execute(tx)
            .await?;
        Ok(inserted.rows_affected() == 1)
    }

    /// Deletes the keys recorded more than `retention` ago; how many.
    pub(super) async fn prune(
        &self,
        pool: &PgPool,
        retention: Duration,
    ) -> Result<u64, InboxError> {
        let removed = sqlx::query(&self.prune)
            .bind(retention.as_secs_f64())
            .execute(pool)
            .await?;
        Ok(removed.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::is_identifier;

    #[test]
    fn only_plain_identifiers_are_written_into_statements() {
        for good in ["warren_inbox", "_x", "inbox2"] {
            assert!(is_identifier(good), "{good}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "2x",
            "Inbox",
            "x;drop table y",
            "a b",
            "\"q\"",
            long.as_str(),
        ] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }
}
