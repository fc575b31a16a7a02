//! JSON Schema compatibility (STUB: the `schemadiff` helper's engine replaces this file).
//!
//! [`compare`] reports one conservative change when two schemas differ at all, breaking
//! every reader and the generated Rust.

use serde_json::Value;

/// One difference between two schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaChange {
    /// JSON pointer into the new schema (the old one when the node was removed).
    pub(crate) pointer: String,
    /// Where the change is, for people (a property path).
    pub(crate) location: String,
    /// What changed.
    pub(crate) kind: SchemaChangeKind,
    /// Who it breaks.
    pub(crate) effect: Effect,
}

/// What kind of change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchemaChangeKind {
    /// The schema changed in a way this stub does not analyse.
    Changed,
}

/// Who a schema change breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Effect {
    /// Readers on the old schema reject what new writers send.
    pub(crate) old_readers: bool,
    /// Readers on the new schema reject messages written under the old one, still in
    /// queues and dead-letter queues.
    pub(crate) new_readers: bool,
    /// The generated Rust changes incompatibly.
    pub(crate) rust_api: bool,
}

impl SchemaChange {
    /// One sentence for people.
    pub(crate) fn describe(&self) -> String {
        match self.kind {
            SchemaChangeKind::Changed => "the schema changed".to_owned(),
        }
    }
}

/// Every change from `old` to `new`.
pub(crate) fn compare(old: &Value, new: &Value) -> Vec<SchemaChange> {
    if old == new {
        return Vec::new();
    }
    vec![SchemaChange {
        pointer: String::new(),
        location: "(root)".to_owned(),
        kind: SchemaChangeKind::Changed,
        effect: Effect {
            old_readers: true,
            new_readers: true,
            rust_api: true,
        },
    }]
}
