//! Contracts read from documents other tools write: [`asyncapi`] turns an AsyncAPI 3.0
//! document with AMQP 0.9.1 bindings into a `warren.yaml` and its schema files
//! (`warren import asyncapi`).
//!
//! An import never drops anything silently: every part of the document it cannot map, and
//! every guess it had to make, is a [`Note`] with the JSON pointer of what it is about. The
//! contract written is the syntax the generator reads ([`warren_codegen::syntax`]), so it is
//! checked by the same rules as a contract written by hand.

pub mod asyncapi;
mod fields;
mod schemas;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use warren_codegen::Sources;
use warren_codegen::syntax::ContractFile;

/// The contract file an import writes, in the folder it writes to.
pub const CONTRACT_FILE: &str = "warren.yaml";

/// A contract read from another tool's document.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The contract.
    pub contract: ContractFile,
    /// Its schema files as JSON, by path relative to the contract (`schemas/Order.json`).
    pub schemas: BTreeMap<String, Value>,
    /// What was not mapped, and what was assumed, in the document's order.
    pub notes: Vec<Note>,
}

impl Imported {
    /// Every file of the import, by path relative to the folder it goes in: the contract
    /// (headed by a comment naming `source`) and its schemas, each ending in a newline.
    pub fn files(&self, source: &str) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        let header = format!(
            "# Imported from {} by `warren import asyncapi`; edit it as your own contract.\n",
            one_line(source)
        );
        files.insert(CONTRACT_FILE.to_owned(), header + &self.contract.to_yaml());
        for (path, schema) in &self.schemas {
            // Serializing a JSON value cannot fail.
            let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
            text.push('\n');
            files.insert(path.clone(), text);
        }
        files
    }

    /// The import held in memory, to check it before anything is written.
    pub fn sources(&self) -> Sources {
        let files = self.files("memory");
        let mut sources = Sources::new(CONTRACT_FILE, &files[CONTRACT_FILE]);
        for (path, text) in files {
            if path != CONTRACT_FILE {
                sources.file(path, text);
            }
        }
        sources
    }
}

/// `text` with its line breaks written as spaces, for a one-line comment.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// What an import says about one place of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The JSON pointer of the place (`/channels/orders/bindings/amqp/queue/exclusive`).
    pub pointer: String,
    /// Whether the place was left out or read with a guess.
    pub kind: NoteKind,
    /// What, and why; what to write in the contract when it matters.
    pub message: String,
}

/// Whether a [`Note`]'s place was left out or read with a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    /// The contract has nothing it maps to; it is not in the import.
    NotMapped,
    /// The document does not say; the import took what is written in the message.
    Assumed,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            NoteKind::NotMapped => "not mapped",
            NoteKind::Assumed => "assumed",
        };
        write!(f, "#{}: {kind}: {}", self.pointer, self.message)
    }
}

/// Why a document cannot be imported at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The document is not an object.
    #[error("the document is not an AsyncAPI document: its top level is not an object")]
    NotAnObject,
    /// The document says another AsyncAPI version, or none.
    #[error(
        "the document is AsyncAPI {found}, and warren imports AsyncAPI 3.0; convert it first (`asyncapi convert` from @asyncapi/cli)"
    )]
    Version {
        /// The `asyncapi` field as written, or `none`.
        found: String,
    },
}
