//! The contract tools of the `warren` CLI, over checked contracts from `warren-codegen`:
//!
//! - [`diff`]: every change between two versions of a contract and who it breaks, with the
//!   version of a git revision read through `git` (`warren diff`);
//! - [`export`]: an AsyncAPI 3.0 document and drawings of the topology in Mermaid and
//!   Graphviz DOT (`warren asyncapi`, `warren diagram`);
//! - [`import`]: a contract from an AsyncAPI 3.0 document (`warren import asyncapi`).
//!
//! They live apart from the generator so that a build script, which needs only to check and
//! generate a contract, compiles none of them:
//!
//! ```no_run
//! let old = warren_codegen::check_contract("old/warren.yaml")?;
//! let new = warren_codegen::check_contract("warren.yaml")?;
//! let report = warren_tools::diff::diff(
//!     Some(warren_tools::diff::Version { shown: "old", contract: &old.contract }),
//!     warren_tools::diff::Version { shown: "new", contract: &new.contract },
//! );
//! print!("{}", report.table());
//! # Ok::<(), warren_codegen::Error>(())
//! ```

// The public surface is `diff` and `export`; inside them an item is `pub(crate)` unless
// re-exported, so `pub` there would be a promise nobody can see.
#![warn(unreachable_pub)]

pub mod diff;
pub mod export;
pub mod import;
