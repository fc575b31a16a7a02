//! The generated code of every fixture contract, compiled with warnings denied (and linted
//! by `cargo clippy -D warnings` in CI). The snapshots in `tests/tests/snapshots/` pin the
//! same files' text.
#![deny(warnings)]
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
