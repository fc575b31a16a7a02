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
//! The pipeline has one module per stage, each testable alone:
//! [`load`] (YAML → typed [`format`](mod@format) with positions) → [`schema`] (load payload
//! schemas and bundle every cross-file `$ref`) → checks (every contract rule, all problems
//! collected into [`Diagnostics`]) → [`model`] (a plain IR) → [`emit`] (one Rust file per
//! contract). [`check_contract`] stops before generation:
//!
//! ```no_run
//! match warren_codegen::check_contract("examples/orders/warren.yaml") {
//!     Ok(checked) => println!("{} queues", checked.contract.queues.len()),
//!     Err(warren_codegen::Error::Invalid(problems)) => eprint!("{problems}"),
//!     Err(other) => eprintln!("{other}"),
//! }
//! ```

mod check;
pub mod diagnostics;
pub mod emit;
pub mod format;
pub mod load;
pub mod model;
pub mod naming;
pub mod output;
pub mod routing;
pub mod schema;

// Only in builds for fuzzing (the `fuzz/` workspace) and the property tests standing in for
// them: a user's build of the generator does not contain it.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
#[path = "fuzz.rs"]
pub mod __fuzz;

use std::path::Path;

pub use diagnostics::{Code, Diagnostic, Diagnostics, RenderStyle, Severity};
pub use emit::GenerateError;
pub use output::{Written, write_if_changed};

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

impl From<load::LoadError> for Error {
    fn from(error: load::LoadError) -> Self {
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
    /// The checked contract it was generated from (its model, inputs and warnings).
    pub checked: Checked,
}

/// A contract that passed every check.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The model, ready for code generation.
    pub contract: model::Contract,
    /// Problems that do not stop generation but deserve a look.
    pub warnings: Diagnostics,
}

/// Loads the contract at `path`, bundles its schemas and runs every check.
///
/// Returns [`Error::Io`] when the contract file itself cannot be read, and
/// [`Error::Invalid`] with every problem found (errors and warnings) otherwise.
pub fn check_contract(path: impl AsRef<Path>) -> Result<Checked, Error> {
    let loaded = load::load(path.as_ref())?;
    let mut problems = Diagnostics::new();
    problems.add_source(loaded.path(), loaded.text.clone());
    let schemas = check::bundle_schemas(&loaded, &mut problems);
    check::run(&loaded, &mut problems);
    problems.sort();
    if problems.has_errors() {
        return Err(Error::Invalid(problems));
    }
    let contract = model::build(
        &loaded,
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

/// Checks the contract at `path` and generates its Rust file.
pub fn generate(path: impl AsRef<Path>) -> Result<Generated, Error> {
    let checked = check_contract(path)?;
    let code = emit::generate(&checked.contract)?;
    Ok(Generated { code, checked })
}
