//! warren-runtime as one shared library, for faster rebuilds while developing.
//!
//! A debug build of a service spends most of a rebuild after a handler edit linking: the
//! binary holds warren-runtime and everything below it (lapin, tokio, the JSON Schema
//! validator and its regex engines), with their debug info, and the linker copies all of it
//! again for every edit. A crate that uses this one links them from one shared library built
//! once instead, so an edit relinks the service's own code alone.
//!
//! Nothing else changes: the service keeps depending on `warren-runtime`, and the generated
//! code names it as before. Turn it on for development only, behind a feature of the
//! service's own:
//!
//! ```toml
//! [dependencies]
//! warren-runtime = "0.1"
//! warren-dylib = { version = "0.1", optional = true }
//!
//! [features]
//! dynamic-linking = ["dep:warren-dylib"]
//! ```
//!
//! and in the service's `lib.rs` (or `main.rs` when it has no lib):
//!
//! ```ignore
//! #[cfg(feature = "dynamic-linking")]
//! use warren_dylib as _;
//! ```
//!
//! then `cargo run --features dynamic-linking` (or `cargo test --features dynamic-linking`).
//! A crate is linked from the shared library as soon as one crate of the build uses it, so
//! the binary and the tests all take it.
//!
//! What it costs: the binary needs the library and Rust's standard library as shared
//! objects at run time. `cargo run` and `cargo test` find both; a binary started by hand
//! needs `LD_LIBRARY_PATH` set to `target/debug/deps` and the toolchain's library folder
//! (`$(rustc --print sysroot)/lib/rustlib/<target>/lib`). So keep it out of release builds:
//! a release binary should stand alone.
//!
//! Taken by path (a checkout of warren's repository, not crates.io), the library is named
//! `libwarren_dylib.so` with no hash: two builds of one target folder with different features
//! (`cargo test -p one-crate`, then `cargo test --workspace`) overwrite each other's, and
//! cargo does not notice. A link error then ("cannot satisfy dependencies so `std` only shows
//! up once", or a crate missing) is cured by `cargo clean -p warren-dylib`. A crates.io
//! dependency's library is named with a hash, and has no such trap.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use warren_runtime;
