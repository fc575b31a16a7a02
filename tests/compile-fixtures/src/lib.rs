//! The generated code of every fixture contract, compiled with warnings denied (and linted
//! by `cargo clippy -D warnings` in CI). The snapshots in `tests/tests/snapshots/` pin the
//! same files' text.
//!
//! With them, the name property's cases (see `build.rs`): every contract of hostile names
//! that validates is compiled here, in [`names`]; [`NAME_CASES`] says what became of each.
//!
//! `missing_docs` is denied too: every public item the generator writes says what it is and
//! where in the contract it came from. The payload types are the exception: their module
//! allows the lint, since typify leaves fields without a schema description undocumented.
#![deny(warnings, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));

/// One contract of the name property and its outcome.
#[derive(Debug)]
pub struct NameCase {
    /// `cover`, `random`, `clash` or `unsupported` (`warren_codegen::__fuzz::NameCaseKind`).
    pub kind: &'static str,
    /// The contract's text.
    pub contract: &'static str,
    /// What validation and generation made of it.
    pub outcome: NameOutcome,
}

/// What became of a name case.
#[derive(Debug)]
pub enum NameOutcome {
    /// It validated; its code is a module of [`names`], so this crate compiling is the proof
    /// that the code compiles.
    Generated,
    /// Validation refused it.
    Refused {
        /// The codes of its errors.
        codes: &'static [&'static str],
        /// The rendered diagnostics.
        report: &'static str,
    },
    /// It validated but generation failed: always a bug.
    Failed(&'static str),
}

include!(concat!(env!("OUT_DIR"), "/names.rs"));
