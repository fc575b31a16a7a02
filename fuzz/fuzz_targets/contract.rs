//! Arbitrary bytes as `warren.yaml`, through everything `warren generate` does: load, schema
//! bundling, every check, the model and emission. Errors are fine; a panic is a crash.
//!
//! The contract is written into a scratch folder that holds a few fixed schema files
//! (`event.json`, `schemas/event.json`, `schemas/headers.json`, `schemas/common.json`), so
//! a contract naming them gets past bundling to the checks and code generation.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use warren_codegen::__fuzz::{Scratch, tolerate_guarded_typify_panics};

static SCRATCH: OnceLock<Scratch> = OnceLock::new();

fuzz_target!(
    init: {
        tolerate_guarded_typify_panics();
    },
    |data: &[u8]| {
        // Text that is not UTF-8 stops at reading the file; mutating it finds nothing more.
        if std::str::from_utf8(data).is_err() {
            return;
        }
        let scratch = SCRATCH.get_or_init(|| Scratch::new().expect("a scratch folder"));
        let _ = scratch.contract("warren.yaml", data);
    }
);
