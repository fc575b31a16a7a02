//! Bundling: every schema node reachable from the contract's messages, across files, becomes
//! one definition of one root schema.
//!
//! typify panics on a `$ref` that leaves its document, and a runtime validator should not
//! read files, so the front end follows every `$ref` itself:
//! 1. **discover**: from each entry file, walk the schema, resolve each `$ref` (same file,
//!    relative file, `file#/pointer`) to a canonical (file, pointer) node, refuse remote URIs
//!    and anything outside the schema roots, and queue the target; cycles are fine because a
//!    node is visited once;
//! 2. **name**: a file's root is named by its `title`, else its file stem; any other node by
//!    the last segment of its pointer (`#/$defs/Money` → `Money`); the Rust type name is that
//!    name in `UpperCamelCase` ([`crate::naming`]);
//! 3. **merge or refuse**: nodes that get the same Rust name are one definition when their
//!    bodies are identical (a shared file copied into two folders), and an error naming both
//!    places otherwise;
//! 4. **rewrite**: every `$ref` becomes `#/$defs/<Name>`; nested `$defs`, `$id` and `$schema`
//!    are dropped, since the bundle is the only document left.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::keywords;
use super::reference::{self, NodeKey};
use crate::diagnostics::{Code, Diagnostic, Diagnostics, Place, YamlPath};
use crate::files::Files;
use crate::load::{Column, LineIndex, PathDisplay, YamlSpans};
use crate::naming::{Case, ident};

/// The deepest bracket nesting read from a YAML schema file: serde_json's own recursion
/// limit for JSON ones.
const MAX_SCHEMA_DEPTH: usize = 128;
/// The JSON Schema dialect of bundled schemas.
pub(crate) const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";
/// What every `$ref` of a bundle starts with: `#/$defs/<Name>`.
pub(super) const DEFINITION_REF: &str = "#/$defs/";

/// Every schema definition of a contract, in one root.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchemaBundle {
    /// Definitions by Rust type name; every `$ref` in them is `#/$defs/<Name>`.
    pub definitions: BTreeMap<String, Value>,
    /// Every schema file read: on disk by canonical path, in memory by the name given to
    /// [`Sources::file`](crate::Sources::file).
    pub files: BTreeSet<PathBuf>,
    /// Where each definition was read, by Rust type name: its file relative to the
    /// contract's folder, and the JSON pointer in it unless it is the file's root
    /// (`schemas/order.json#/$defs/Money`). Of identical copies merged into one definition,
    /// the first.
    pub sources: BTreeMap<String, String>,
    /// The same, as the file's canonical path and the pointer: one schema's identity
    /// across bundles, so a contract's type can be matched with an imported contract's.
    pub(crate) origins: BTreeMap<String, NodeKey>,
}

impl SchemaBundle {
    /// One document holding every definition under `$defs`.
    pub fn root(&self) -> Value {
        let defs: Map<String, Value> = self
            .definitions
            .iter()
            .map(|(name, body)| (name.clone(), body.clone()))
            .collect();
        document([("$schema", DIALECT.into()), ("$defs", Value::Object(defs))])
    }

    /// Every definition, its `$ref`s pointing under `base` (`#/components/schemas/`) instead
    /// of `#/$defs/`: for a document that keeps the definitions elsewhere, as AsyncAPI's
    /// `components.schemas` does. Only `$ref`s where a schema stands change; one inside
    /// data (`const`, `enum`, `default`, `examples`) is the data's own.
    pub fn definitions_under(&self, base: &str) -> BTreeMap<String, Value> {
        self.definitions
            .iter()
            .map(|(name, body)| {
                let mut rebased = body.clone();
                for (pointer, target) in collect_refs(body, "") {
                    if let Some(definition) = target.strip_prefix(DEFINITION_REF)
                        && let Some(reference) = rebased.pointer_mut(&pointer)
                    {
                        *reference = Value::String(format!("{base}{definition}"));
                    }
                }
                (name.clone(), rebased)
            })
            .collect()
    }

    /// A self-contained schema for the definition `name`: a `$ref` to it plus every
    /// definition it reaches.
    pub fn standalone(&self, name: &str) -> Value {
        let mut reached = BTreeSet::new();
        let mut stack = vec![name.to_owned()];
        while let Some(next) = stack.pop() {
            if !reached.insert(next.clone()) {
                continue;
            }
            if let Some(body) = self.definitions.get(&next) {
                for (_, target) in collect_refs(body, "") {
                    if let Some(target) = target.strip_prefix(DEFINITION_REF) {
                        stack.push(target.to_owned());
                    }
                }
            }
        }
        let defs: Map<String, Value> = reached
            .into_iter()
            .filter_map(|n| self.definitions.get(&n).map(|b| (n, b.clone())))
            .collect();
        document([
            ("$schema", DIALECT.into()),
            ("$ref", format!("{DEFINITION_REF}{name}").into()),
            ("$defs", Value::Object(defs)),
        ])
    }
}

/// An object of `members`, in their order: the definitions moved in, not serialized again as
/// `json!` would (half of what a message's standalone schema cost).
fn document<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
    )
}

/// Why an entry schema (a message's `payload` or `headers` file) cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EntryError {
    /// No such file.
    #[error("schema file `{}` does not exist", .0.display())]
    Missing(PathBuf),
    /// The file resolves outside every schema root.
    #[error("schema file `{}` is outside the schema roots", .0.display())]
    OutsideRoots(PathBuf),
    /// The file exists but could not be parsed; the parse error is reported on its own.
    #[error("schema file `{}` could not be read", .0.display())]
    Invalid(PathBuf),
}

/// Collects the schema nodes reachable from a contract's entry files.
pub(crate) struct Bundler<'a> {
    paths: &'a PathDisplay,
    file_system: &'a Files,
    roots: Vec<PathBuf>,
    /// Parsed files; `None` when a file failed to parse (already reported). Hashed: paths
    /// compare component by component, which made ordered lookups a tenth of bundling.
    files: HashMap<PathBuf, Option<Value>>,
    /// Each path as written (joined to its folder), canonicalised; `None` when missing.
    canonical: HashMap<PathBuf, Option<PathBuf>>,
    /// The text of each parsed file, indexed into spans only when a diagnostic points into
    /// it: indexing every file of a large contract cost more than parsing them.
    texts: HashMap<PathBuf, Arc<str>>,
    /// Where each node of a file is written, for the files a diagnostic pointed into.
    spans: RefCell<BTreeMap<PathBuf, YamlSpans>>,
    /// Per node, what each `$ref` string written in it resolves to.
    nodes: BTreeMap<NodeKey, BTreeMap<String, NodeKey>>,
    queue: Vec<NodeKey>,
    diagnostics: Diagnostics,
}

impl<'a> Bundler<'a> {
    /// A bundler reading schemas from `files` under `roots` (canonical folders); paths are
    /// shown through `paths`.
    pub(crate) fn new(paths: &'a PathDisplay, files: &'a Files, roots: Vec<PathBuf>) -> Self {
        Self {
            paths,
            file_system: files,
            roots,
            files: HashMap::new(),
            canonical: HashMap::new(),
            texts: HashMap::new(),
            spans: RefCell::new(BTreeMap::new()),
            nodes: BTreeMap::new(),
            queue: Vec::new(),
            diagnostics: Diagnostics::new(),
        }
    }

    /// Adds the schema file at `relative` (to the contract's folder) and everything it
    /// references; returns the node of its root.
    pub(crate) fn add_entry(&mut self, relative: &str) -> Result<NodeKey, EntryError> {
        let dir = self.paths.contract_dir().to_owned();
        self.add_entry_in(&dir, relative)
    }

    /// [`Bundler::add_entry`] for a file named relative to `dir`: an imported message's
    /// schema, named relative to its owner's folder.
    pub(crate) fn add_entry_in(
        &mut self,
        dir: &Path,
        relative: &str,
    ) -> Result<NodeKey, EntryError> {
        let path = dir.join(relative);
        let file = self.open(&path)?;
        let key = NodeKey {
            file,
            pointer: String::new(),
        };
        self.visit(key.clone());
        Ok(key)
    }

    /// Resolves everything queued, names and rewrites the definitions. Returns the bundle,
    /// the Rust type name of every node, and the problems found in schema files.
    pub(crate) fn finish(mut self) -> (SchemaBundle, BTreeMap<NodeKey, String>, Diagnostics) {
        while let Some(key) = self.queue.pop() {
            self.discover(&key);
        }
        let names = self.name_nodes();
        let mut bundle = SchemaBundle {
            definitions: BTreeMap::new(),
            files: self
                .files
                .keys()
                .map(|file| self.paths.input(file))
                .collect(),
            sources: BTreeMap::new(),
            origins: BTreeMap::new(),
        };
        // Group nodes by Rust name; identical bodies merge, different ones clash.
        let mut groups: BTreeMap<&str, Vec<(&NodeKey, Value)>> = BTreeMap::new();
        for (key, name) in &names {
            if let Some(body) = self.rewritten(key, &names) {
                groups.entry(name).or_default().push((key, body));
            }
        }
        for (name, members) in groups {
            let mut members = members.into_iter();
            let Some((first_key, first_body)) = members.next() else {
                continue;
            };
            for (key, body) in members {
                if body != first_body {
                    self.clash(name, first_key, key);
                }
            }
            let mut source = self.paths.in_contract_dir(&first_key.file);
            if !first_key.pointer.is_empty() {
                source = format!("{source}#{}", first_key.pointer);
            }
            bundle.sources.insert(name.to_owned(), source);
            bundle.origins.insert(name.to_owned(), first_key.clone());
            bundle.definitions.insert(name.to_owned(), first_body);
        }
        for (name, cycle) in unnested_cycles(&bundle.definitions) {
            let Some(key) = names.iter().find(|(_, n)| **n == name).map(|(k, _)| k) else {
                continue;
            };
            let through = cycle.join("` → `");
            self.diagnostics.push(
                Diagnostic::error(
                    Code::RefCycle,
                    self.paths.show(&key.file),
                    format!(
                        "`{name}` refers to itself through `$ref`s and combinators alone (`{through}`), a loop that never reaches a property or an item: no type can be generated from it"
                    ),
                )
                .with_help(
                    "recursion must go through `properties`, `items` or a union; refer to a \
                     definition rather than to the schema that holds the `$ref`",
                )
                .at(self.pointer_place(&key.file, &key.pointer)),
            );
        }
        (bundle, names, self.diagnostics)
    }

    fn visit(&mut self, key: NodeKey) {
        if !self.nodes.contains_key(&key) {
            self.nodes.insert(key.clone(), BTreeMap::new());
            self.queue.push(key);
        }
    }

    /// Reads, parses and remembers the file at `path`; returns its canonical path.
    fn open(&mut self, path: &Path) -> Result<PathBuf, EntryError> {
        // Thousands of schemas refer to the same few shared files by the same relative
        // path: resolve each written path once (a canonicalisation is a system call per
        // path component).
        let canonical = match self.canonical.get(path) {
            Some(known) => known.clone(),
            None => {
                let resolved = self.file_system.canonicalize(path).ok();
                self.canonical.insert(path.to_owned(), resolved.clone());
                resolved
            }
        };
        let canonical =
            canonical.ok_or_else(|| EntryError::Missing(self.show_uncanonical(path)))?;
        if !self.roots.iter().any(|root| canonical.starts_with(root)) {
            return Err(EntryError::OutsideRoots(self.paths.show(&canonical)));
        }
        if !self.files.contains_key(&canonical) {
            let parsed = self.parse_file(&canonical);
            self.files.insert(canonical.clone(), parsed);
        }
        match self.files.get(&canonical) {
            Some(Some(_)) => Ok(canonical),
            _ => Err(EntryError::Invalid(self.paths.show(&canonical))),
        }
    }

    /// A missing file has no canonical path; show it relative to its existing parent.
    fn show_uncanonical(&self, path: &Path) -> PathBuf {
        match (
            path.parent()
                .and_then(|p| self.file_system.canonicalize(p).ok()),
            path.file_name(),
        ) {
            (Some(parent), Some(name)) => self.paths.show(&parent.join(name)),
            // No folder to resolve against (or, in memory, a `..` above the root): the path
            // as written, relative to the contract.
            _ => self.paths.show(path),
        }
    }

    fn parse_file(&mut self, path: &Path) -> Option<Value> {
        let shown = self.paths.show(path);
        // Regular files only (`Files::read`).
        let text = match self.file_system.read(path) {
            // A byte-order mark is neither JSON nor YAML; editors on some systems add one.
            Ok(text) => match text.strip_prefix('\u{feff}') {
                Some(rest) => rest.to_owned(),
                None => text.to_string(),
            },
            Err(error) => {
                self.diagnostics.push(Diagnostic::error(
                    Code::UnreadableSchema,
                    &shown,
                    format!("cannot read schema file: {error}"),
                ));
                return None;
            }
        };
        let is_yaml = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        let parsed = if is_yaml
            && let Some(offset) = crate::load::spans::flow_too_deep(&text, MAX_SCHEMA_DEPTH)
        {
            // YAML parsers take quadratic time on thousands of nested brackets; JSON files
            // meet serde_json's own limit at the same depth.
            let point = LineIndex::new(&text).at(offset);
            Err(Diagnostic::error(
                Code::InvalidSchemaFile,
                &shown,
                format!("nested more than {MAX_SCHEMA_DEPTH} levels deep"),
            )
            .with_help("flatten the schema with `$defs` and `$ref`")
            .at(Place::Position(point)))
        } else if is_yaml {
            yaml_serde::from_str::<Value>(&text)
                .map_err(|e| crate::load::yaml_error(&shown, &text, &e, "fix the YAML syntax here"))
        } else {
            serde_json::from_str::<Value>(&text).map_err(|e| {
                let message = crate::load::strip_position(&e.to_string());
                Diagnostic::error(
                    Code::InvalidSchemaFile,
                    &shown,
                    format!("invalid JSON: {message}"),
                )
                .with_help("fix the JSON syntax at this position")
                // serde_json counts columns in bytes, from 1.
                .at(Place::Position(LineIndex::new(&text).point(
                    e.line(),
                    e.column().saturating_sub(1),
                    Column::Bytes,
                )))
            })
        };
        let text: Arc<str> = Arc::from(text);
        self.diagnostics.add_source(&shown, text.clone());
        match parsed {
            Ok(value) if value.is_object() || value.is_boolean() => {
                self.texts.insert(path.to_owned(), text);
                Some(value)
            }
            Ok(_) => {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::InvalidSchemaFile,
                        &shown,
                        "a JSON Schema must be an object or a boolean",
                    )
                    .with_help("write the schema as an object, e.g. `{\"type\": \"object\"}`"),
                );
                None
            }
            Err(mut diagnostic) => {
                diagnostic.code = Code::InvalidSchemaFile;
                self.diagnostics.push(diagnostic);
                None
            }
        }
    }

    /// Resolves every `$ref` written in the node `key` and queues their targets.
    fn discover(&mut self, key: &NodeKey) {
        let Some(Some(document)) = self.files.get(&key.file) else {
            return;
        };
        let Some(node) = reference::lookup(document, &key.pointer) else {
            return;
        };
        let found = collect_refs(node, &key.pointer);
        let mut resolved = BTreeMap::new();
        for (at, written) in found {
            if let Some(target) = self.resolve(&key.file, &at, &written) {
                self.visit(target.clone());
                resolved.insert(written, target);
            }
        }
        self.nodes.insert(key.clone(), resolved);
    }

    /// Resolves the `$ref` `written` found at pointer `at` of `file`, reporting problems.
    fn resolve(&mut self, file: &Path, at: &str, written: &str) -> Option<NodeKey> {
        // Where the `$ref` is, worked out only for a problem.
        let error = |bundler: &Self, message: String, help: String| {
            Diagnostic::error(Code::BadRef, bundler.paths.show(file), message)
                .with_help(help)
                .at(bundler.pointer_place(file, at))
        };
        let parsed = match reference::parse(written) {
            Ok(parsed) => parsed,
            Err(problem) => {
                let help = problem.help().to_owned();
                let diagnostic = error(self, problem.to_string(), help);
                self.diagnostics.push(diagnostic);
                return None;
            }
        };
        let target_path = reference::target_file(file, &parsed);
        let target_file = match self.open(&target_path) {
            Ok(canonical) => canonical,
            Err(EntryError::Missing(path)) => {
                let diagnostic = error(
                    self,
                    format!("`$ref` `{written}` points to `{}`, which does not exist", path.display()),
                    "fix the path; it is relative to the folder of the schema that holds the `$ref`"
                        .to_owned(),
                );
                self.diagnostics.push(diagnostic);
                return None;
            }
            Err(EntryError::OutsideRoots(path)) => {
                let diagnostic = error(
                    self,
                    format!(
                        "`$ref` `{written}` resolves to `{}`, outside the schema roots",
                        path.display()
                    ),
                    "move the file under the contract's folder, or add its folder to \
                     `schema_roots` in the contract"
                        .to_owned(),
                );
                self.diagnostics.push(diagnostic);
                return None;
            }
            Err(EntryError::Invalid(_)) => return None,
        };
        let document = self.files.get(&target_file).and_then(Option::as_ref)?;
        let target = reference::lookup(document, &parsed.pointer);
        if let Some(node) = target.filter(|n| !n.is_object() && !n.is_boolean()) {
            let kind = match node {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                _ => "null",
            };
            let diagnostic = error(
                self,
                format!("`$ref` `{written}` points at {kind}, not a schema"),
                "point at a schema (an object or `true`/`false`), e.g. `#/$defs/Money`".to_owned(),
            );
            self.diagnostics.push(diagnostic);
            return None;
        }
        if target.is_none() {
            let available = definition_names(document);
            let help = if available.is_empty() {
                "that file defines nothing under `$defs` or `definitions`".to_owned()
            } else {
                format!("definitions there: {}", available.join(", "))
            };
            let target_shown = self.paths.show(&target_file);
            let diagnostic = error(
                self,
                format!(
                    "`$ref` `{written}`: `{}` has nothing at `#{}`",
                    target_shown.display(),
                    parsed.pointer
                ),
                help,
            );
            self.diagnostics.push(diagnostic);
            return None;
        }
        Some(NodeKey {
            file: target_file,
            pointer: parsed.pointer,
        })
    }

    /// The Rust type name of every node, reporting names that make no identifier.
    fn name_nodes(&mut self) -> BTreeMap<NodeKey, String> {
        let mut names = BTreeMap::new();
        for key in self.nodes.keys() {
            let document = self.files.get(&key.file).and_then(Option::as_ref);
            let candidate = if key.pointer.is_empty() {
                document
                    .and_then(|d| d.get("title"))
                    .and_then(Value::as_str)
                    .filter(|t| !t.trim().is_empty())
                    .map_or_else(|| file_stem(&key.file), str::to_owned)
            } else {
                reference::last_segment(&key.pointer)
            };
            match ident(&candidate, Case::Type) {
                Ok(ident) => {
                    names.insert(key.clone(), ident.text);
                }
                Err(problem) => self.diagnostics.push(
                    Diagnostic::error(
                        Code::BadDefinitionName,
                        self.paths.show(&key.file),
                        format!("`{candidate}` cannot become a Rust type name: {problem}"),
                    )
                    .with_help(if key.pointer.is_empty() {
                        "give the schema a `title` made of ASCII letters and digits"
                    } else {
                        "rename the definition with ASCII letters and digits"
                    })
                    .at(self.pointer_place(&key.file, &key.pointer)),
                ),
            }
        }
        names
    }

    /// The body of node `key` with every `$ref` rewritten to a bundle definition.
    fn rewritten(&self, key: &NodeKey, names: &BTreeMap<NodeKey, String>) -> Option<Value> {
        let document = self.files.get(&key.file)?.as_ref()?;
        let mut body = reference::lookup(document, &key.pointer)?.clone();
        if let Value::Object(map) = &mut body {
            for keyword in keywords::DEFINITIONS.iter().chain(keywords::DOCUMENT) {
                map.shift_remove(*keyword);
            }
        }
        let refs = self.nodes.get(key)?;
        let mut rewrites = Vec::new();
        walk_refs(&body, "", false, &mut |at, written| {
            if let Some(name) = refs.get(written).and_then(|t| names.get(t)) {
                rewrites.push((at.to_owned(), format!("{DEFINITION_REF}{name}")));
            }
        });
        for (at, target) in rewrites {
            if let Some(Value::String(written)) = body.pointer_mut(&at) {
                *written = target;
            }
        }
        Some(body)
    }

    fn clash(&mut self, name: &str, first: &NodeKey, second: &NodeKey) {
        let place =
            |key: &NodeKey| format!("{}#{}", self.paths.show(&key.file).display(), key.pointer);
        let (a, b) = (place(first), place(second));
        self.diagnostics.push(
            Diagnostic::error(
                Code::TypeNameClash,
                self.paths.show(&second.file),
                format!("`{a}` and `{b}` are different schemas that would both become the Rust type `{name}`"),
            )
            .with_help(
                "rename one definition (a file's root is named by its `title`, else its file \
                 name; any other node by its key), or make both refer to one shared file",
            )
            .at(self.pointer_place(&second.file, &second.pointer)),
        );
    }

    /// The place of `pointer` in `file`, with its span when the file parsed (indexing its
    /// spans the first time).
    fn pointer_place(&self, file: &Path, pointer: &str) -> Place {
        let document = self.files.get(file).and_then(Option::as_ref);
        let span = match (document, self.texts.get(file)) {
            (Some(document), Some(text)) => {
                let mut spans = self.spans.borrow_mut();
                let spans = spans
                    .entry(file.to_owned())
                    // JSON is YAML, so one span index serves both.
                    .or_insert_with(|| YamlSpans::index(text));
                spans.find(&yaml_path(document, pointer))
            }
            _ => None,
        };
        Place::Pointer {
            pointer: pointer.to_owned(),
            span,
        }
    }
}

/// Calls `visit` with the pointer and the value of every `$ref` in the schema `node`, which
/// sits at `pointer`. The walk knows JSON Schema: it follows keywords that hold subschemas
/// only, so a `$ref` inside `const`, `enum`, `default` or `examples` (data) is left alone,
/// while a property *named* `default` is still a schema. The node's own definition
/// containers are skipped at the top: definitions are bundled only when something reaches
/// them.
fn walk_refs(node: &Value, pointer: &str, top: bool, visit: &mut dyn FnMut(&str, &str)) {
    let Value::Object(map) = node else { return };
    for (key, value) in map {
        // The pointer is built only for what the walk visits or enters.
        let at = || reference::child(pointer, key);
        let key = key.as_str();
        if key == "$ref" {
            if let Value::String(target) = value {
                visit(&at(), target);
            }
        } else if keywords::SUBSCHEMA.contains(&key) || keywords::SUBSCHEMA_LISTS.contains(&key) {
            let at = at();
            match value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        walk_refs(item, &format!("{at}/{i}"), false, visit);
                    }
                }
                other => walk_refs(other, &at, false, visit),
            }
        } else if keywords::SUBSCHEMA_MAPS.contains(&key)
            && !(top && keywords::DEFINITIONS.contains(&key))
            && let Value::Object(members) = value
        {
            let at = at();
            for (name, member) in members {
                walk_refs(member, &reference::child(&at, name), false, visit);
            }
        }
    }
}

/// The `(pointer, $ref)` pairs of the schema `node` at `pointer`. The walk reads the node
/// where it is: it used to walk a copy, and copying every node of every schema was a
/// large share of validating a contract with thousands of messages.
fn collect_refs(node: &Value, pointer: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    walk_refs(node, pointer, true, &mut |at, target| {
        found.push((at.to_owned(), target.to_owned()));
    });
    found
}

/// The `(JSON pointer, target)` of every `$ref` where a schema stands in `schema`: never
/// one inside data (`const`, `enum`, `default`, `examples`), nor in the schema's own
/// `$defs`. For tools that move a schema into another document and rewrite its `$ref`s.
pub fn schema_refs(schema: &Value) -> Vec<(String, String)> {
    collect_refs(schema, "")
}

/// The `$ref` targets `node` reaches through combinators alone (`allOf`, `anyOf`, `oneOf`,
/// `not`, `if`/`then`/`else`), without entering a property, an item or any other value.
fn combinator_refs(node: &Value, targets: &mut Vec<String>) {
    if let Some(target) = node
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(DEFINITION_REF))
    {
        targets.push(target.to_owned());
    }
    for keyword in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(members)) = node.get(keyword) {
            for member in members {
                combinator_refs(member, targets);
            }
        }
    }
    for keyword in ["not", "if", "then", "else"] {
        if let Some(member) = node.get(keyword) {
            combinator_refs(member, targets);
        }
    }
}

/// Definitions that reach themselves through `$ref`s and combinators alone, with the chain:
/// `{"$ref": "#", …}`, `{"allOf": [{"oneOf": [{"$ref": "#"}]}]}` and friends. Such a schema
/// never reaches the shape of a value; typify recurses on it until the stack overflows, which
/// no `catch_unwind` can turn into an error, so it is refused before generation.
fn unnested_cycles(definitions: &BTreeMap<String, Value>) -> Vec<(String, Vec<String>)> {
    // Each definition's shallow references, found once; most definitions have none.
    let edges: BTreeMap<&str, Vec<String>> = definitions
        .iter()
        .map(|(name, body)| {
            let mut targets = Vec::new();
            combinator_refs(body, &mut targets);
            (name.as_str(), targets)
        })
        .filter(|(_, targets)| !targets.is_empty())
        .collect();
    // Only a definition inside a strongly connected component can come back to itself, and
    // only through that component: the search from each start stays in it. The result is
    // the one a search over every reference finds (what it skips never leads back), but a
    // long chain of `allOf`s no longer costs its length from every link.
    let components = strong_components(&edges);
    let mut found = Vec::new();
    for start in edges.keys() {
        let Some(component) = components.get(start) else {
            continue;
        };
        // Depth-first over shallow references, remembering the path to report it.
        let mut stack = vec![(*start, vec![(*start).to_owned()])];
        let mut seen = BTreeSet::new();
        while let Some((name, path)) = stack.pop() {
            let inside = edges
                .get(name)
                .into_iter()
                .flatten()
                .filter(|target| components.get(target.as_str()) == Some(component));
            for target in inside {
                let mut next = path.clone();
                next.push(target.clone());
                if target == start {
                    found.push(((*start).to_owned(), next));
                    stack.clear();
                    break;
                }
                if seen.insert(target.as_str()) {
                    stack.push((target.as_str(), next));
                }
            }
        }
    }
    found
}

/// The strongly connected components of the graph `edges` that hold a cycle (more than one
/// node, or a node referring to itself), as node → component number; Tarjan's algorithm,
/// without recursion.
fn strong_components<'e>(edges: &BTreeMap<&'e str, Vec<String>>) -> BTreeMap<&'e str, usize> {
    struct State<'e> {
        index: BTreeMap<&'e str, usize>,
        low: BTreeMap<&'e str, usize>,
        on_stack: BTreeSet<&'e str>,
        stack: Vec<&'e str>,
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        on_stack: BTreeSet::new(),
        stack: Vec::new(),
    };
    let mut components = BTreeMap::new();
    let mut count = 0;
    // Targets that are not keys have no references, so they close no cycle.
    let targets = |node: &'e str| -> Vec<&'e str> {
        edges
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|t| edges.get_key_value(t.as_str()).map(|(k, _)| *k))
            .collect()
    };
    for root in edges.keys() {
        if state.index.contains_key(root) {
            continue;
        }
        // (node, its targets, the next target to look at)
        let mut work: Vec<(&str, Vec<&str>, usize)> = Vec::new();
        let open = |node: &'e str, state: &mut State<'e>| {
            let n = state.index.len();
            state.index.insert(node, n);
            state.low.insert(node, n);
            state.stack.push(node);
            state.on_stack.insert(node);
        };
        open(root, &mut state);
        work.push((root, targets(root), 0));
        while let Some((node, next_targets, next)) = work.last_mut() {
            let node = *node;
            if let Some(target) = next_targets.get(*next).copied() {
                *next += 1;
                match state.index.get(target).copied() {
                    None => {
                        open(target, &mut state);
                        work.push((target, targets(target), 0));
                    }
                    Some(index) if state.on_stack.contains(target) => {
                        let low = state.low.get(node).copied().unwrap_or(index).min(index);
                        state.low.insert(node, low);
                    }
                    Some(_) => {}
                }
                continue;
            }
            work.pop();
            let low = state.low.get(node).copied().unwrap_or_default();
            if let Some((parent, ..)) = work.last() {
                let parent_low = state.low.get(parent).copied().unwrap_or(low).min(low);
                state.low.insert(parent, parent_low);
            }
            if state.index.get(node) == Some(&low) {
                let mut members = Vec::new();
                while let Some(member) = state.stack.pop() {
                    state.on_stack.remove(member);
                    members.push(member);
                    if member == node {
                        break;
                    }
                }
                let cyclic = members.len() > 1
                    || edges.get(node).is_some_and(|t| t.iter().any(|t| t == node));
                if cyclic {
                    for member in members {
                        components.insert(member, count);
                    }
                    count += 1;
                }
            }
        }
    }
    components
}

/// The [`YamlSpans`] path of a JSON pointer: `/properties/items/0` → `properties.items[0]`.
/// A key keeps its dots (`/properties/a.b` is the one key `a.b`).
fn yaml_path(document: &Value, pointer: &str) -> YamlPath {
    let mut path = YamlPath::root();
    let mut node = Some(document);
    for segment in pointer.split('/').skip(1) {
        let key = super::reference::unescape_segment(segment);
        let index = match node {
            Some(Value::Array(_)) => key.parse::<usize>().ok(),
            _ => None,
        };
        match index {
            Some(index) => {
                path = path.index(index);
                node = node.and_then(|n| n.get(index));
            }
            // Not an item of an array (or not a number, so nothing is there and the
            // nearest ancestor is found instead).
            None => {
                node = node.and_then(|n| n.get(&key));
                path = path.key(key);
            }
        }
    }
    path
}

fn definition_names(document: &Value) -> Vec<String> {
    keywords::DEFINITIONS
        .iter()
        .filter_map(|k| document.get(k).and_then(Value::as_object))
        .flat_map(|defs| defs.keys().cloned())
        .collect()
}

/// `order_placed` for `order_placed.schema.json`.
fn file_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stem = name.as_str();
    for suffix in [".json", ".yaml", ".yml", ".schema"] {
        stem = stem.strip_suffix(suffix).unwrap_or(stem);
    }
    stem.to_owned()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::{Value, json};

    use super::{SchemaBundle, YamlSpans, combinator_refs, unnested_cycles, yaml_path};

    /// Definitions rebased for another document keep their data: only a `$ref` where a
    /// schema stands moves, one inside data (a `const`, an example) does not.
    #[test]
    fn rebased_definitions_move_schema_refs_alone() {
        let bundle = SchemaBundle {
            definitions: BTreeMap::from([(
                "Order".to_owned(),
                json!({
                    "properties": {
                        "total": {"$ref": "#/$defs/Money"},
                        "items": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
                        "default": {"anyOf": [{"$ref": "#/$defs/Money"}, {"type": "null"}]},
                        "kind": {"const": {"$ref": "#/$defs/Money"}}
                    },
                    "examples": [{"$ref": "#/$defs/Money"}]
                }),
            )]),
            ..SchemaBundle::default()
        };
        let rebased = bundle.definitions_under("#/components/schemas/");
        assert_eq!(
            rebased["Order"],
            json!({
                "properties": {
                    "total": {"$ref": "#/components/schemas/Money"},
                    "items": {"type": "array", "items": {"$ref": "#/components/schemas/Line"}},
                    "default": {"anyOf": [{"$ref": "#/components/schemas/Money"}, {"type": "null"}]},
                    "kind": {"const": {"$ref": "#/$defs/Money"}}
                },
                "examples": [{"$ref": "#/$defs/Money"}]
            })
        );
    }

    #[test]
    fn pointers_find_their_node_when_keys_hold_dots() {
        let text = "{\n\"properties\": {\n  \"a\": {\"b\": {\"x\": 1}},\n  \"a.b\": {\"x\": 2},\n  \"l\": [{\"x\": 3}]\n}}\n";
        let document: Value = serde_json::from_str(text).unwrap();
        let spans = YamlSpans::index(text);
        let line = |pointer: &str| spans.find(&yaml_path(&document, pointer)).unwrap().line;
        assert_eq!(line("/properties/a/b/x"), 3);
        assert_eq!(line("/properties/a.b/x"), 4);
        assert_eq!(line("/properties/l/0/x"), 5);
        assert_eq!(
            yaml_path(&document, "/properties/a.b/x").to_string(),
            r#"properties["a.b"].x"#
        );
    }

    /// The search before components: from every definition, over every shallow reference.
    fn every_path(definitions: &BTreeMap<String, Value>) -> Vec<(String, Vec<String>)> {
        let edges: BTreeMap<&str, Vec<String>> = definitions
            .iter()
            .map(|(name, body)| {
                let mut targets = Vec::new();
                combinator_refs(body, &mut targets);
                (name.as_str(), targets)
            })
            .collect();
        let mut found = Vec::new();
        for start in edges.keys() {
            let mut stack = vec![(*start, vec![(*start).to_owned()])];
            let mut seen = BTreeSet::new();
            while let Some((name, path)) = stack.pop() {
                for target in edges.get(name).into_iter().flatten() {
                    let mut next = path.clone();
                    next.push(target.clone());
                    if target == start {
                        found.push(((*start).to_owned(), next));
                        stack.clear();
                        break;
                    }
                    if seen.insert(target.as_str()) {
                        stack.push((target.as_str(), next));
                    }
                }
            }
        }
        found
    }

    /// Cycles found within components are the very cycles the search over every path
    /// reported, path for path, on small graphs of every shape (a fixed pseudo-random
    /// sequence of `allOf` references, undefined targets included).
    #[test]
    fn cycles_within_components_are_the_cycles_of_every_path() {
        let mut seed: u64 = 0x5eed;
        let mut next = |bound: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % bound
        };
        for _ in 0..500 {
            let size = next(8) + 1;
            let definitions: BTreeMap<String, Value> = (0..size)
                .map(|node| {
                    let refs: Vec<Value> = (0..next(4))
                        .map(|_| json!({ "$ref": format!("#/$defs/D{}", next(size + 1)) }))
                        .collect();
                    (format!("D{node}"), json!({ "allOf": refs }))
                })
                .collect();
            assert_eq!(
                unnested_cycles(&definitions),
                every_path(&definitions),
                "{definitions:?}"
            );
        }
    }
}
