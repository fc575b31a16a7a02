//! The inbox's and the outbox's statements on PostgreSQL. Times are the server's
//! (`now()`), so that relays on hosts whose clocks differ agree on what is due.

use super::{InboxSql, OutboxSql, TableName};

pub(super) fn inbox(table: &TableName) -> InboxSql {
    InboxSql {
        migrate: vec![
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    consumer TEXT NOT NULL,
                    message_key TEXT NOT NULL,
                    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                    PRIMARY KEY (consumer, message_key)
                )"
            ),
            // Pruning reads `recorded_at`. A BRIN index: rows are appended in time order,
            // so block ranges summarise it well, and it costs an insert next to nothing where a
            // B-tree on it made the inbox's write cost ~15 % more (warren-bench effects).
            format!(
                "CREATE INDEX IF NOT EXISTS {table}_recorded_at ON {table} USING brin (recorded_at)"
            ),
        ],
        // A concurrent transaction recording the same key makes this wait for its outcome:
        // nothing inserted once it commits, the row inserted if it rolls back.
        record: format!(
            "INSERT INTO {table} (consumer, message_key) VALUES ($1, $2) ON CONFLICT DO NOTHING"
        ),
        prune: format!(
            "DELETE FROM {table} WHERE recorded_at < now() - $1::bigint * interval '1 millisecond'"
        ),
    }
}

pub(super) fn outbox(table: &TableName) -> OutboxSql {
    let [unsent, ordering, sent] = super::outbox_indexes(table);
    OutboxSql {
        migrate: vec![
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    id BIGSERIAL PRIMARY KEY,
                    exchange TEXT NOT NULL,
                    routing_key TEXT NOT NULL,
                    message_id TEXT,
                    ordering_key TEXT,
                    properties BYTEA NOT NULL,
                    body BYTEA NOT NULL,
                    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                    due_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                    attempts BIGINT NOT NULL DEFAULT 0,
                    last_error TEXT,
                    sent_at TIMESTAMPTZ
                )"
            ),
            unsent,
            ordering,
            sent,
        ],
        insert: format!(
            "INSERT INTO {table} (exchange, routing_key, message_id, ordering_key, properties, body) \
             VALUES ($1, $2, $3, $4, $5, $6)"
        ),
        // SKIP LOCKED: relays claiming at once take different rows. A row re-checked after
        // another relay's claim committed is no longer due, so it is not claimed twice. Of an
        // ordering key only the oldest unsent row is ever claimable.
        claim: format!(
            "UPDATE {table} SET due_at = now() + $2::bigint * interval '1 millisecond', \
                attempts = attempts + 1 \
             WHERE id IN ( \
                SELECT id FROM {table} AS o \
                WHERE o.sent_at IS NULL AND o.due_at <= now() \
                  AND (o.ordering_key IS NULL OR NOT EXISTS ( \
                    SELECT 1 FROM {table} AS e \
                    WHERE e.ordering_key = o.ordering_key AND e.sent_at IS NULL AND e.id < o.id)) \
                ORDER BY o.id LIMIT $1 \
                FOR UPDATE SKIP LOCKED) \
             RETURNING id, exchange, routing_key, properties, body, attempts"
        ),
        sent: format!(
            "UPDATE {table} SET sent_at = now(), last_error = NULL \
             WHERE id IN (SELECT value::bigint FROM jsonb_array_elements_text($1::jsonb))"
        ),
        failed: format!(
            "UPDATE {table} SET due_at = now() + $2::bigint * interval '1 millisecond', last_error = $3 \
             WHERE id = $1"
        ),
        prune: format!(
            "DELETE FROM {table} WHERE sent_at < now() - $1::bigint * interval '1 millisecond'"
        ),
        backlog: format!(
            "SELECT count(*), extract(epoch FROM now() - min(created_at))::double precision \
             FROM {table} WHERE sent_at IS NULL"
        ),
    }
}
