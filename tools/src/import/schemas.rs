//! A document's schemas as files beside the contract.
//!
//! The schemas a message's payload or headers names directly (its *roots*) get a file each
//! (`schemas/OrderPlaced.json`), so the generator names their types as the document does: by
//! the schema's `title`, else the file's stem. Every other schema goes under `$defs` in one
//! `schemas/definitions.json`, where a definition is named by its key, whatever its title.
//! Each `$ref` is rewritten from the document's place (`#/components/schemas/Money`) to the
//! file's (`definitions.json#/$defs/Money`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use warren_codegen::json_pointer::{escape_segment, unescape_segment};
use warren_codegen::schema_refs;

use super::fields::{Notes, child};

/// Where a document keeps its schemas.
pub(super) const COMPONENT_SCHEMAS: &str = "#/components/schemas/";
/// The folder of the schema files, relative to the contract.
const FOLDER: &str = "schemas";
/// The file holding every schema that is not a root.
const DEFINITIONS: &str = "definitions.json";

/// The schema files of an import, and which file holds each component schema.
#[derive(Debug, Default)]
pub(super) struct SchemaFiles {
    /// Each root component schema's file name in [`FOLDER`], by component key.
    roots: BTreeMap<String, String>,
    /// Every component schema's key.
    keys: BTreeSet<String>,
    /// The other component schemas, by key, for [`DEFINITIONS`].
    definitions: Map<String, Value>,
    /// File names taken, lowercased: two names differing in case are one file on some
    /// file systems.
    taken: BTreeSet<String>,
    /// The files, by path relative to the contract.
    pub(super) files: BTreeMap<String, Value>,
}

impl SchemaFiles {
    /// Places the document's `components` schemas (at `pointer`), each of `roots` in a file
    /// of its own.
    pub(super) fn place(
        components: Option<&Map<String, Value>>,
        roots: &BTreeSet<String>,
        pointer: &str,
        notes: &mut Notes,
    ) -> Self {
        let mut placed = Self::default();
        placed.taken.insert(DEFINITIONS.to_owned());
        let components = components.cloned().unwrap_or_default();
        placed.keys = components.keys().cloned().collect();
        for key in components.keys().filter(|k| roots.contains(*k)) {
            let file = placed.file_name(key);
            placed.roots.insert(key.clone(), file);
        }
        for (key, schema) in components {
            let at = child(pointer, &key);
            match placed.roots.get(&key).cloned() {
                Some(file) => {
                    let schema = placed.rewritten(schema, false, &at, notes);
                    placed.files.insert(format!("{FOLDER}/{file}"), schema);
                }
                None => {
                    let schema = placed.rewritten(schema, true, &at, notes);
                    placed.definitions.insert(key, schema);
                }
            }
        }
        if !placed.definitions.is_empty() {
            let definitions = std::mem::take(&mut placed.definitions);
            placed.files.insert(
                format!("{FOLDER}/{DEFINITIONS}"),
                json!({ "$defs": definitions }),
            );
        }
        placed
    }

    /// The path, relative to the contract, of the file of root schema `key`.
    pub(super) fn root(&self, key: &str) -> Option<String> {
        self.roots.get(key).map(|file| format!("{FOLDER}/{file}"))
    }

    /// A schema written in a message rather than under `components` (at `pointer`), in a
    /// file of its own named after `name`; its path relative to the contract.
    pub(super) fn inline(
        &mut self,
        name: &str,
        schema: &Value,
        pointer: &str,
        notes: &mut Notes,
    ) -> String {
        let file = self.file_name(name);
        let schema = self.rewritten(schema.clone(), false, pointer, notes);
        let path = format!("{FOLDER}/{file}");
        self.files.insert(path.clone(), schema);
        path
    }

    /// A file name for `key` not taken yet: its ASCII letters, digits, `-` and `_`, the
    /// rest `_`, with `-2`, `-3`… when taken. A key never names a place outside the folder.
    fn file_name(&mut self, key: &str) -> String {
        let mut stem: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if stem.trim_matches('_').is_empty() {
            stem = "schema".to_owned();
        }
        let mut name = format!("{stem}.json");
        let mut n = 1;
        while !self.taken.insert(name.to_lowercase()) {
            n += 1;
            name = format!("{stem}-{n}.json");
        }
        name
    }

    /// `schema` with each `$ref` into the document's schemas pointing at their files, as
    /// seen from [`DEFINITIONS`] when `in_definitions`, else from a root's own file.
    fn rewritten(
        &self,
        mut schema: Value,
        in_definitions: bool,
        pointer: &str,
        notes: &mut Notes,
    ) -> Value {
        for (at, target) in schema_refs(&schema) {
            let Some(rewritten) = self.target(&target, in_definitions) else {
                notes.not_mapped(
                    &format!("{pointer}{at}"),
                    format!(
                        "`$ref: {target}` names no schema under components.schemas: warren reads a schema from files beside the contract; copy the schema it names there and point the `$ref` at its file"
                    ),
                );
                continue;
            };
            if let Some(reference) = schema.pointer_mut(&at) {
                *reference = Value::String(rewritten);
            }
        }
        schema
    }

    /// Where `$ref: target` points once the schemas are files.
    fn target(&self, target: &str, in_definitions: bool) -> Option<String> {
        let rest = target.strip_prefix(COMPONENT_SCHEMAS)?;
        let (segment, inner) = rest.split_once('/').map_or((rest, ""), |(s, i)| (s, i));
        let key = unescape_segment(segment);
        let inner = if inner.is_empty() {
            String::new()
        } else {
            format!("/{inner}")
        };
        if let Some(file) = self.roots.get(&key) {
            let fragment = if inner.is_empty() {
                String::new()
            } else {
                format!("#{inner}")
            };
            return Some(format!("{file}{fragment}"));
        }
        if !self.keys.contains(&key) {
            return None;
        }
        let file = if in_definitions { "" } else { DEFINITIONS };
        Some(format!("{file}#/$defs/{}{inner}", escape_segment(&key)))
    }
}
