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

/// Creates `table` and its index on `recorded_at` (which pruning reads) unless they exist.
pub(super) async fn migrate(pool: &PgPool, table: &str) -> Result<(), InboxError> {
    let create = format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            consumer TEXT NOT NULL,
            message_key TEXT NOT NULL,
            recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (consumer, message_key)
        )"
    );
    sqlx::query(&create).execute(pool).await?;
    let index = format!("CREATE INDEX IF NOT EXISTS {table}_recorded_at ON {table} (recorded_at)");
    sqlx::query(&index).execute(pool).await?;
    Ok(())
}

/// Records (`consumer`, `key`) in the transaction `tx`; `false` when it was recorded
/// already. A concurrent transaction recording the same key makes this wait for its
/// outcome: `false` once it commits, `true` if it rolls back.
pub(super) async fn record(
    tx: &mut PgConnection,
    table: &str,
    consumer: &str,
    key: &str,
) -> Result<bool, sqlx::Error> {
    let insert = format!(
        "INSERT INTO {table} (consumer, message_key) VALUES ($1, $2) ON CONFLICT DO NOTHING"
    );
    let inserted = sqlx::query(&insert)
        .bind(consumer)
        .bind(key)
        .execute(tx)
        .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Deletes the keys of `table` recorded more than `retention` ago.
pub(super) async fn prune(
    pool: &PgPool,
    table: &str,
    retention: Duration,
) -> Result<u64, InboxError> {
    let delete = format!(
        "DELETE FROM {table} WHERE recorded_at < now() - $1::double precision * interval '1 second'"
    );
    let removed = sqlx::query(&delete)
        .bind(retention.as_secs_f64())
        .execute(pool)
        .await?;
    Ok(removed.rows_affected())
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
