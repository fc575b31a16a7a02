//! The generated code of every fixture contract, compiled with warnings denied (and linted
//! by `cargo clippy -D warnings` in CI). The snapshots in `tests/tests/snapshots/` pin the
//! same files' text.
//!
//! With them, the name property's cases (see `build.rs`): every contract of hostile names
//! that validates is compiled here, in [`names`]; [`NAME_CASES`] says what became of each.
//!
//! `missing_docs` is denied too: every public item the generator writes says what it is and
//! where in the contract it came from, the payload types (their fields, variants, builders
//! and setters) included.
//!
//! Contract text in those docs never runs as a doctest: `cargo test --doc` on this crate
//! runs none (the `hostile-docs` fixture puts fences in names and descriptions, whose prose
//! would fail to compile as Rust).
#![deny(warnings, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));

/// A generated `topology()`.
pub type TopologyFn = fn() -> warren_runtime::Topology;

/// Every fixture contract (its canonical path) with its generated `topology()`.
pub const TOPOLOGIES: &[(&str, TopologyFn)] = include!(concat!(env!("OUT_DIR"), "/topologies.rs"));

/// The settings fixture (`tests/fixtures/settings`) generated with every generator setting:
/// `Eq` and `Hash` derived, `#[must_use]`, builders, and the contract's `Money` replaced by
/// [`Money`] (see `build.rs`).
pub mod settings {
    include!(concat!(env!("OUT_DIR"), "/settings.rs"));
}

/// A user's own money type, replacing the settings fixture's generated `Money`: it implements
/// what the generated types derive, and serializes as the schema says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Money {
    /// Minor units (cents).
    pub amount_minor: u64,
    /// ISO 4217 code.
    pub currency: String,
}

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
