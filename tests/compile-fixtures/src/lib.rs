//! The generated code of every fixture contract, compiled with warnings denied (and linted
//! by `cargo clippy -D warnings` in CI). The snapshots in `tests/tests/snapshots/` pin the
//! same files' text.
#![deny(warnings)]

macro_rules! fixture {
    ($module:ident) => {
        #[allow(missing_docs)]
        pub mod $module {
            include!(concat!(env!("OUT_DIR"), "/", stringify!($module), ".rs"));
        }
    };
}

fixture!(hostile_names);
fixture!(minimal);
fixture!(orders);
fixture!(payload_shapes);
fixture!(retry_modes);
fixture!(routing);
fixture!(shared_schemas);
