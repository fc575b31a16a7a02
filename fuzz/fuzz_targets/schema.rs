//! Arbitrary bytes as the payload schema of a fixed contract, read once as JSON and once as
//! YAML, through schema bundling (`$ref`s to itself, to the fixed `common.json`, out of
//! bounds…), the checks, the model and typify. Errors are fine; a panic is a crash, except
//! typify's own, which warren catches and reports as errors (see
//! `tolerate_guarded_typify_panics`).

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
        if std::str::from_utf8(data).is_err() {
            return;
        }
        let scratch = SCRATCH.get_or_init(|| Scratch::new().expect("a scratch folder"));
        let _ = scratch.schema(data);
    }
);
