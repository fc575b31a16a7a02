//! Whether a publisher and a consumer agree about the message between them.
//!
//! Today: whether their bundled schemas are the same JSON Schema, exactly: annotations
//! (`title`, `description`) and the `$defs` names derived from them count, so two copies of
//! one schema that drifted only in a title differ. One function, so a compatibility engine
//! that says which way a difference breaks (`diff::schema`) can take its place.

use crate::contract::Message;

/// The parts of the message a publisher sends (`sent`) that differ from the message its
/// consumer expects (`expected`), as words for a diagnostic: `payload schema`, `headers
/// schema`, `content type`. Empty when they agree.
pub(crate) fn differences(sent: &Message, expected: &Message) -> Vec<&'static str> {
    let mut parts = Vec::new();
    if sent.payload.schema != expected.payload.schema {
        parts.push("payload schema");
    }
    if headers(sent) != headers(expected) {
        parts.push("headers schema");
    }
    if sent.content_type != expected.content_type {
        parts.push("content type");
    }
    parts
}

fn headers(message: &Message) -> Option<&serde_json::Value> {
    message.headers.as_ref().map(|h| &h.schema)
}
