//! The generated code of every fixture contract, compiled with warnings denied (and linted
//! by `cargo clippy -D warnings` in CI). The snapshots in `tests/tests/snapshots/` pin the
//! same files' text.
//!
//! With them, the name property's cases (see `build.rs`): every contract of hostile names
//! that validates is compiled here, in [`names`]; [`NAME_CASES`] says what became of each.
#![deny(warnings)]
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));

/// A generated `topology()`.
pub type TopologyFn = fn() -> warren_runtime::Topology;

/// Every fixture contract (its canonical path) with its generated `topology()`.
pub const TOPOLOGIES: &[(&str, TopologyFn)] = include!(concat!(env!("OUT_DIR"), "/topologies.rs"));

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
