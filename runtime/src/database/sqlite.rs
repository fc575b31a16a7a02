//! The inbox's and the outbox's statements on SQLite. Times are Unix milliseconds
//! ([`NOW`]). SQLite has one writer at a time, so a claim needs no row locks: the `UPDATE`
//! that claims is the only one running.

use super::{InboxSql, OutboxSql, TableName};

/// Now, in Unix milliseconds (julianday works on every SQLite; `unixepoch('subsec')` needs
/// 3.42).
const NOW: &str = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";

pub(super) fn inbox(table: &TableName) -> InboxSql {
    InboxSql {
        migrate: vec![
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    consumer TEXT NOT NULL,
                    message_key TEXT NOT NULL,
                    recorded_at INTEGER NOT NULL,
                    PRIMARY KEY (consumer, message_key)
                ) WITHOUT ROWID"
            ),
            format!("CREATE INDEX IF NOT EXISTS {table}_recorded_at ON {table} (recorded_at)"),
        ],
        record: format!(
            "INSERT INTO {table} (consumer, message_key, recorded_at) VALUES (?1, ?2, {NOW}) \
             ON CONFLICT DO NOTHING"
        ),
        prune: format!("DELETE FROM {table} WHERE recorded_at < {NOW} - ?1"),
    }
}

pub(super) fn outbox(table: &TableName) -> OutboxSql {
    let [unsent, ordering, sent] = super::outbox_indexes(table);
    OutboxSql {
        migrate: vec![
            // AUTOINCREMENT: an id is never reused, so ids keep the order rows were written in.
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    exchange TEXT NOT NULL,
                    routing_key TEXT NOT NULL,
                    message_id TEXT,
                    ordering_key TEXT,
                    properties BLOB NOT NULL,
                    body BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    due_at INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    last_error TEXT,
                    sent_at INTEGER
                )"
            ),
            unsent,
            ordering,
            sent,
        ],
        insert: format!(
            "INSERT INTO {table} \
                (exchange, routing_key, message_id, ordering_key, properties, body, created_at, due_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, {NOW}, {NOW})"
        ),
        claim: format!(
            "UPDATE {table} SET due_at = {NOW} + ?2, attempts = attempts + 1 \
             WHERE id IN ( \
                SELECT id FROM {table} AS o \
                WHERE o.sent_at IS NULL AND o.due_at <= {NOW} \
                  AND (o.ordering_key IS NULL OR NOT EXISTS ( \
                    SELECT 1 FROM {table} AS e \
                    WHERE e.ordering_key = o.ordering_key AND e.sent_at IS NULL AND e.id < o.id)) \
                ORDER BY o.id LIMIT ?1) \
             RETURNING id, exchange, routing_key, properties, body, attempts"
        ),
        sent: format!(
            "UPDATE {table} SET sent_at = {NOW}, last_error = NULL \
             WHERE id IN (SELECT value FROM json_each(?1))"
        ),
        failed: format!("UPDATE {table} SET due_at = {NOW} + ?2, last_error = ?3 WHERE id = ?1"),
        prune: format!("DELETE FROM {table} WHERE sent_at < {NOW} - ?1"),
        backlog: format!(
            "SELECT count(*), ({NOW} - min(created_at)) / 1000.0 FROM {table} WHERE sent_at IS NULL"
        ),
    }
}
