//! Including the file `warren-build` generated, by the name it gave it.

/// Includes the Rust that `warren-build` generated into this crate's `OUT_DIR`, named
/// `$name.rs`: `include_generated!("orders")` for `orders.rs`.
///
/// The file is named after the contract (`billing.yaml` gives `billing`, and a contract
/// called `warren.yaml` its folder's name, `orders/warren.yaml` giving `orders`) unless the
/// build script names it (`warren_build::Config::file_name`). A name no build script
/// generated fails the build with a message saying so, where
/// `include!(concat!(env!("OUT_DIR"), "/orders.rs"))` fails with rustc's `couldn't read`.
///
/// ```text
/// // src/lib.rs, its build.rs calling `warren_build::compile("warren.yaml")` in `orders/`
/// warren_runtime::include_generated!("orders");
/// ```
#[macro_export]
macro_rules! include_generated {
    ($name:literal) => {
        ::core::include!(::core::env!(
            ::core::concat!("WARREN_GENERATED_", $name),
            ::core::concat!(
                "warren: this crate's build script generated no `",
                $name,
                ".rs`. A generated file is named after its contract (`billing.yaml` gives ",
                "`billing`, a `warren.yaml` its folder's name) unless the build script names it ",
                "(`warren_build::Config::file_name`); cargo's build-script output ",
                "(`cargo build -vv`) shows each `WARREN_GENERATED_<name>` it set."
            )
        ));
    };
}
