//! Bundles the schemas every message names, reporting bad entries at the contract node that
//! names them and everything else at the schema file and JSON pointer.

use std::collections::BTreeMap;

use std::path::PathBuf;

use crate::diagnostics::{Code, Diagnostics, YamlPath};
use crate::imports::Imports;
use crate::load::LoadedContract;
use crate::schema::expansion::{MAX_EXPANDED_NODES, expanded_nodes};
use crate::schema::{Bundler, EntryError, NodeKey, SchemaBundle};

/// The output of the schema stage.
pub(crate) struct SchemaStage {
    /// The bundle.
    pub bundle: SchemaBundle,
    /// Per message, its payload node and headers node.
    pub entries: BTreeMap<String, (NodeKey, Option<NodeKey>)>,
    /// The Rust type name of every node.
    pub type_names: BTreeMap<NodeKey, String>,
}

/// The folders `contract`'s schemas may be read from: its own, then each of its
/// `schema_roots` (a root that is not a folder is reported to `out` and left out).
pub(crate) fn schema_roots(contract: &LoadedContract, out: &mut Diagnostics) -> Vec<PathBuf> {
    let mut roots = vec![contract.paths.contract_dir().to_owned()];
    for (i, root) in contract.file.schema_roots.iter().enumerate() {
        match contract
            .files
            .canonicalize(&contract.paths.contract_dir().join(root))
        {
            Ok(path) if !contract.files.in_project(&path) => out.push(
                contract
                    .error_at(
                        Code::OutsideProject,
                        &YamlPath::root().key("schema_roots").index(i),
                        format!(
                            "schema root `{root}` is outside the project folder `{}`",
                            contract.project_shown()
                        ),
                    )
                    .with_help(crate::project::outside_help()),
            ),
            Ok(path) if contract.files.is_dir(&path) => roots.push(path),
            _ => out.push(
                contract
                    .error_at(
                        Code::MissingSchemaRoot,
                        &YamlPath::root().key("schema_roots").index(i),
                        format!("schema root `{root}` is not a folder"),
                    )
                    .with_help("schema roots are folders, relative to the contract's folder"),
            ),
        }
    }
    roots
}

/// Resolves the schema roots, then bundles every message's schemas: the contract's own,
/// and those of the imported messages it uses, read from their owners' folders (which, with
/// the owners' schema roots, become roots this contract's `$ref`s may reach too).
pub(crate) fn bundle_schemas(
    contract: &LoadedContract,
    imports: &Imports,
    out: &mut Diagnostics,
) -> SchemaStage {
    let mut roots = schema_roots(contract, out);
    for import in imports.contracts.values() {
        roots.extend(import.schema_roots());
    }
    let mut bundler = Bundler::new(&contract.paths, &contract.files, roots);
    let mut entries = BTreeMap::new();
    for (name, message) in &contract.file.messages {
        let mut entry = |field: &str, file: &str| match bundler.add_entry(file) {
            Ok(key) => Some(key),
            Err(problem) => {
                let path = YamlPath::root().key("messages").key(name).key(field);
                let help = match &problem {
                    EntryError::Missing(_) => {
                        "fix the path; it is relative to the contract's folder"
                    }
                    EntryError::OutsideRoots(_) => {
                        "move the schema under the contract's folder, or list its folder in \
                         `schema_roots`"
                    }
                    EntryError::Invalid(_) => "fix the schema file; its problems are listed too",
                };
                out.push(
                    contract
                        .error_at(
                            Code::BadSchemaFile,
                            &path,
                            format!("message `{name}`: {problem}"),
                        )
                        .with_help(help),
                );
                None
            }
        };
        let payload = entry("payload", &message.payload);
        let headers = message.headers.as_deref().map(|h| entry("headers", h));
        if let Some(entry) = complete(payload, headers) {
            entries.insert(name.clone(), entry);
        }
    }
    // Imported messages passed their owner's checks, and their owner's folders are roots
    // here: a problem now is with the import as a whole, reported at its entry.
    for (qualified, (alias, _)) in &imports.messages {
        let Some((import, message)) = imports.message(qualified) else {
            continue;
        };
        let dir = import.loaded.paths.contract_dir();
        let mut entry = |file: &str| match bundler.add_entry_in(dir, file) {
            Ok(key) => Some(key),
            Err(problem) => {
                out.push(
                    contract
                        .error_at(
                            Code::BadImport,
                            &YamlPath::root().key("imports").key(alias),
                            format!("message `{qualified}`: {problem}"),
                        )
                        .with_help("fix the imported contract's schema, or ask its owners"),
                );
                None
            }
        };
        let payload = entry(&message.payload);
        let headers = message.headers.as_deref().map(&mut entry);
        if let Some(entry) = complete(payload, headers) {
            entries.insert(qualified.clone(), entry);
        }
    }
    let (bundle, type_names, problems) = bundler.finish();
    out.extend(problems);
    too_large(contract, &bundle, &entries, &type_names, out);
    SchemaStage {
        bundle,
        entries,
        type_names,
    }
}

/// Reports each of the contract's own messages whose payload or headers schema is too large
/// once its `$ref`s are followed (`schema::expansion`). Imported messages passed their
/// owner's checks.
fn too_large(
    contract: &LoadedContract,
    bundle: &SchemaBundle,
    entries: &BTreeMap<String, (NodeKey, Option<NodeKey>)>,
    type_names: &BTreeMap<NodeKey, String>,
    out: &mut Diagnostics,
) {
    for (name, (payload, headers)) in entries {
        if !contract.file.messages.contains_key(name) {
            continue;
        }
        for (field, key) in [("payload", Some(payload)), ("headers", headers.as_ref())] {
            let Some(type_name) = key.and_then(|key| type_names.get(key)) else {
                continue;
            };
            if expanded_nodes(&bundle.definitions, type_name) <= MAX_EXPANDED_NODES {
                continue;
            }
            let path = YamlPath::root().key("messages").key(name).key(field);
            out.push(
                contract
                    .error_at(
                        Code::SchemaTooLarge,
                        &path,
                        format!(
                            "message `{name}`: its {field} schema holds more than {MAX_EXPANDED_NODES} nodes once its `$ref`s are followed (each is a copy in the Rust type and a branch validation tries), so its type would not fit a worker's stack and its validation would take seconds"
                        ),
                    )
                    .with_help(
                        "shared definitions nested in `anyOf`, `oneOf` or `allOf` multiply: flatten the nesting, or split the message",
                    ),
            );
        }
    }
}

/// A message's bundled payload and headers, when every schema it names bundled: `headers` is
/// `None` when the message has none, `Some(None)` when its file failed.
fn complete(
    payload: Option<NodeKey>,
    headers: Option<Option<NodeKey>>,
) -> Option<(NodeKey, Option<NodeKey>)> {
    match (payload?, headers) {
        (payload, None) => Some((payload, None)),
        (payload, Some(Some(headers))) => Some((payload, Some(headers))),
        (_, Some(None)) => None,
    }
}
