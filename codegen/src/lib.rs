//! The warren contract front end: from `warren.yaml` and its JSON Schema files to a checked,
//! plain model of the topology and its message types, and from that model to Rust.
//!
//! Generate a contract's Rust file, as `warren generate warren.yaml -o src/orders.rs` does:
//!
//! ```no_run
//! use std::path::Path;
//!
//! // Loads the contract, bundles its schemas, runs every check, then generates.
//! let generated = warren_codegen::generate("warren.yaml")?;
//! if !generated.checked.warnings.is_empty() {
//!     eprint!("{}", generated.checked.warnings); // problems that do not stop generation
//! }
//! // Rewrites the file only when its bytes change, so nothing rebuilds for nothing.
//! warren_codegen::write_if_changed(Path::new("src/orders.rs"), generated.code.as_bytes())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A contract with problems fails with [`Error::Invalid`], which lists every problem found with
//! its file and line, rendered with source context as `warren validate` prints them. Build
//! scripts use the `warren-build` crate, which wraps this for Cargo.
//!
//! The pipeline runs one stage at a time, each reporting all its problems into
//! [`Diagnostics`]: load (YAML → the typed contract format, whose JSON Schema is
//! [`json_schema`], with positions) → schemas (load payload schemas and bundle every
//! cross-file `$ref` into one [`SchemaBundle`]) → checks (every contract rule) → the checked
//! [`contract`] (a plain IR) → emit (one Rust file per contract). `docs/architecture.md` maps each stage to
//! its files. [`check_contract`] stops before generation:
//!
//! ```no_run
//! match warren_codegen::check_contract("examples/orders/warren.yaml") {
//!     Ok(checked) => println!("{} queues", checked.contract.topology.queues.len()),
//!     Err(warren_codegen::Error::Invalid(problems)) => eprint!("{problems}"),
//!     Err(other) => eprintln!("{other}"),
//! }
//! ```
//!
//! [`check_system`] checks several contracts (or the folders holding them) as one system, as
//! `warren validate orders/ billing/` does: each alone, then together, for what no contract
//! can see alone (a publisher whose messages reach no queue of any contract, a consumer and a
//! publisher of one message whose schemas differ, an exchange two contracts declare
//! differently).
//!
//! [`Checked::generate`] takes [`Settings`]: extra derives and attributes on the payload and
//! headers types, builders for them, schema types replaced by your own, and which of the
//! contract's consumers and publishers to generate (for a service running some of them). The
//! contract and its schemas can also be held in memory, as [`Sources`], for tests and tools:
//!
//! ```
//! use warren_codegen::{Settings, Sources};
//!
//! let mut sources = Sources::new(
//!     "warren.yaml",
//!     "queues:\n  pings: { on_poison: drop }\n\
//!      messages:\n  ping: { payload: ping.json }\n\
//!      publishers:\n  ping: { exchange: \"\", routing_key: pings, message: ping }\n",
//! );
//! sources.file(
//!     "ping.json",
//!     r#"{ "title": "Ping", "type": "object", "properties": { "at": { "type": "string" } } }"#,
//! );
//! let mut settings = Settings::new();
//! settings.derive("Eq").builders(true);
//! let generated = warren_codegen::check_sources(&sources)?.generate(&settings)?;
//! assert!(generated.code.contains("pub fn builder() -> builder::Ping"));
//! # Ok::<(), warren_codegen::Error>(())
//! ```

// The library's surface is what lib.rs exports; inside the private stage modules an item
// is `pub(crate)`, so `pub` there would be a promise nobody can see.
#![warn(unreachable_pub)]

mod check;
pub mod contract;
pub mod diagnostics;
mod emit;
mod files;
mod imports;
mod load;
mod naming;
mod output;
mod project;
mod routes;
mod routing;
mod schema;
mod settings;
pub mod syntax;
mod system;

// Only in builds for fuzzing (the `fuzz/` workspace) and the property tests standing in for
// them: a user's build of the generator does not contain it.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
#[path = "fuzz.rs"]
pub mod __fuzz;

use std::path::Path;

pub use diagnostics::{Code, Diagnostic, Diagnostics, RenderStyle, Severity};
pub use emit::GenerateError;
pub use files::Sources;
pub use output::{Written, write_if_changed};
pub use project::ProjectRoot;
pub use routes::Routes;
pub use schema::keywords as schema_keywords;
pub use schema::{SchemaBundle, schema_refs};
pub use settings::Settings;
pub use syntax::json_schema;
pub use system::{System, check_system, check_system_in};

/// JSON pointers (RFC 6901) into schemas: how diagnostics and tools name a part of one.
pub mod json_pointer {
    pub use crate::schema::reference::{child, escape_segment, unescape_segment};
}

/// Why a contract could not be checked or turned into Rust.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The contract file itself could not be read.
    #[error("cannot read contract `{}`: {source}", path.display())]
    Io {
        /// The path as given.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The contract has problems; every one found is listed.
    #[error("{0}")]
    Invalid(Diagnostics),
    /// Code generation failed on a checked contract.
    #[error("{0}")]
    Generate(#[from] GenerateError),
    /// A contract that passed every check cannot be represented: a bug in warren.
    #[error("{0}; this is a bug in warren, please report it")]
    Internal(String),
}

impl Error {
    fn from_load(error: load::LoadError) -> Self {
        match error {
            load::LoadError::Io { path, source } => Self::Io { path, source },
            load::LoadError::Invalid(problems) => Self::Invalid(problems),
        }
    }
}

/// Rust generated from a contract.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The generated file's text.
    pub code: String,
    /// The checked contract it was generated from (its IR, inputs and warnings).
    pub checked: Checked,
}

/// A contract that passed every check.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The checked contract, ready for code generation.
    pub contract: contract::Contract,
    /// Problems that do not stop generation but deserve a look.
    pub warnings: Diagnostics,
}

/// Loads the contract at `path`, bundles its schemas and runs every check.
///
/// Files are read only inside the contract's project, the git work tree holding it (else
/// its own folder): see [`check_contract_in`] to choose the folder.
///
/// Returns [`Error::Io`] when the contract file itself cannot be read, and
/// [`Error::Invalid`] with every problem found (errors and warnings) otherwise.
pub fn check_contract(path: impl AsRef<Path>) -> Result<Checked, Error> {
    check_contract_in(path, &ProjectRoot::Discover)
}

/// [`check_contract`], reading files only inside the folder `project` gives: an import, a
/// schema root or a `$ref` outside it is an error, and the file is never read.
pub fn check_contract_in(path: impl AsRef<Path>, project: &ProjectRoot) -> Result<Checked, Error> {
    check_loaded(load::load_from_disk(path.as_ref(), project).map_err(Error::from_load)?)
}

/// Checks a contract held in memory with its schema files, as [`check_contract`] checks one
/// on disk: the same rules, `schema_roots` containment included, and diagnostics that name
/// the files by their paths in `sources`. Nothing is read from the file system.
///
/// ```
/// let sources = warren_codegen::Sources::new("warren.yaml", "messages:\n  ping: { payload: ping.json }\n");
/// match warren_codegen::check_sources(&sources) {
///     Err(warren_codegen::Error::Invalid(problems)) => {
///         assert!(problems.to_string().contains("`ping.json` does not exist"));
///     }
///     other => panic!("the schema is missing: {other:?}"),
/// }
/// ```
pub fn check_sources(sources: &Sources) -> Result<Checked, Error> {
    let files = files::Files::memory(sources);
    check_loaded(load::load(files, sources.contract()).map_err(Error::from_load)?)
}

/// Resolves the imports of `loaded`, bundles its schemas and runs every check.
fn check_loaded(loaded: load::LoadedContract) -> Result<Checked, Error> {
    check_scoped(loaded, check::Scope::Alone)
}

/// Resolves the imports of `loaded`, bundles its schemas and runs the checks of `scope`.
fn check_in(loaded: &load::LoadedContract, scope: check::Scope) -> Result<Checked, Error> {
    check_scoped(loaded.clone(), scope)
}

/// [`check_in`] of a contract given, not lent: a large contract is not copied.
fn check_scoped(loaded: load::LoadedContract, scope: check::Scope) -> Result<Checked, Error> {
    let mut stack = imports::ImportStack::default();
    stack.enter(&loaded);
    check_loaded_in(loaded, &mut stack, scope)
}

/// [`check_in`] for a contract imported by those on `stack`.
fn check_loaded_in(
    mut loaded: load::LoadedContract,
    stack: &mut imports::ImportStack,
    scope: check::Scope,
) -> Result<Checked, Error> {
    let mut problems = Diagnostics::new();
    problems.add_source(loaded.path(), loaded.text.clone());
    let imports = imports::resolve(&mut loaded, stack, &mut problems);
    let schemas = check::bundle_schemas(&loaded, &imports, &mut problems);
    check::run(&loaded, &imports, scope, &mut problems);
    problems.sort();
    if problems.has_errors() {
        return Err(Error::Invalid(problems));
    }
    let contract = contract::build(
        &loaded,
        &imports,
        schemas.bundle,
        &schemas.entries,
        &schemas.type_names,
    )
    .map_err(Error::Internal)?;
    Ok(Checked {
        contract,
        warnings: problems,
    })
}

impl Checked {
    /// Generates the contract's Rust file, its types shaped by `settings`.
    ///
    /// Returns [`Error::Invalid`] with every bad setting (and the contract's warnings) when a
    /// setting does not parse, names no schema definition of the contract, or chooses a
    /// consumer or publisher the contract does not have.
    ///
    /// ```no_run
    /// let mut settings = warren_codegen::Settings::new();
    /// settings.derive("Hash").builders(true);
    /// let generated = warren_codegen::check_contract("warren.yaml")?.generate(&settings)?;
    /// print!("{}", generated.code);
    /// # Ok::<(), warren_codegen::Error>(())
    /// ```
    pub fn generate(self, settings: &Settings) -> Result<Generated, Error> {
        let options = match settings.resolve(&self.contract) {
            Ok(options) => options,
            Err(problems) => {
                let mut all = self.warnings;
                all.extend(problems);
                all.sort();
                return Err(Error::Invalid(all));
            }
        };
        let code = emit::generate(&self.contract, &options)?;
        Ok(Generated {
            code,
            checked: self,
        })
    }

    /// typify alone on this contract's bundled schemas, with the settings [`Self::generate`]
    /// gives it: its tokens as unformatted text, or `formatted` by `prettyplease` (as typify
    /// documents printing a file). The baseline warren-bench measures the generator against.
    /// Not a stable API.
    #[doc(hidden)]
    pub fn __typify_alone(&self, settings: &Settings, formatted: bool) -> Result<String, Error> {
        let options = settings.resolve(&self.contract).map_err(Error::Invalid)?;
        Ok(emit::typify_alone(
            &self.contract,
            &options.types,
            formatted,
        )?)
    }
}

/// Checks the contract at `path` and generates its Rust file with the default [`Settings`].
pub fn generate(path: impl AsRef<Path>) -> Result<Generated, Error> {
    check_contract(path)?.generate(&Settings::default())
}
