//! `build.rs` support for warren: turn a `warren.yaml` contract into Rust at build time.
//!
//! Empty for now: it arrives with code generation, on top of `warren-codegen`'s front end.
