//! Generates the Rust of every fixture contract into `OUT_DIR`, one file each, so `src/lib.rs`
//! can compile them all with warnings denied.

/// (module name, contract), relative to this crate.
const FIXTURES: &[(&str, &str)] = &[
    (
        "hostile_names",
        "../fixtures/contracts/hostile-names/warren.yaml",
    ),
    ("minimal", "../fixtures/contracts/minimal/warren.yaml"),
    ("orders", "../../examples/orders/warren.yaml"),
    (
        "payload_shapes",
        "../fixtures/contracts/payload-shapes/warren.yaml",
    ),
    (
        "retry_modes",
        "../fixtures/contracts/retry-modes/warren.yaml",
    ),
    ("routing", "../fixtures/contracts/routing/warren.yaml"),
    (
        "shared_schemas",
        "../fixtures/contracts/shared-schemas/service/warren.yaml",
    ),
];

fn main() -> Result<(), warren_build::Error> {
    for (module, contract) in FIXTURES {
        warren_build::Config::new()
            .file_name(format!("{module}.rs"))
            .compile(contract)?;
    }
    Ok(())
}
